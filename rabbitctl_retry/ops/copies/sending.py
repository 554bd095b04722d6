"""The sending half of every transfer (``rr dlq replay``, ``rr dlq move``, ``rr dlq import``):
copies published ``mandatory`` on one confirm channel, and what became of each.

* **The first copy goes alone.** Every later one waits until the broker confirmed, returned
  or refused it. A user without write permission is refused on that first publish (403
  ACCESS_REFUSED closes the channel), so a run that stops there knows that no copy arrived
  anywhere (docs/how-to/after-an-outage.md, "When the broker refuses").
* **At ``pace``** (``--rate``, ``--ramp``; ``dlq/rate.py``): a copy waits for its slot,
  unless ``abort`` is set meanwhile.
* **One classification** of a publish (``ops/copies/sent.py``, shared with ``rr run``'s copies):
  confirmed; refused (returned or nacked: it reached no queue); unencodable (never sent); or
  cut (the channel or connection failed under it: it may have arrived). A refusal of access
  to the first copy, alone in flight, reached no queue; one while others were in flight is
  counted as cut.

* **In order.** Copies go out in the order of their turns (:meth:`CopySender.turn`). A copy
  whose return would be matched like one in flight (the same ``message_id``, or without an
  id the same target and body: ``transport/message_ids.py``) waits for that copy's answer,
  and the copies behind it wait too: the target queue gets them in the caller's order (an
  import keeps its file's order, repeated ids included). The AMQP adapters also keep two such
  publishes from being in flight at once; without this rule their wait would let later
  copies overtake.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Hashable

from rabbitctl_retry.dlq.rate import Pace
from rabbitctl_retry.ops.copies.sent import SendResult, classified
from rabbitctl_retry.transport.base import Channel, Properties
from rabbitctl_retry.transport.message_ids import return_key


class Turn:
    """One copy's place in the sender's order (see :meth:`CopySender.turn`)."""

    __slots__ = ("_sender", "after", "first", "gone")

    def __init__(self, sender: CopySender, first: bool, after: asyncio.Future[None] | None) -> None:
        self._sender = sender
        self.first = first
        self.after = after
        """Done once the copy before this one went out (or never will)."""
        self.gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Done once this copy went out (or never will): the next one may go."""

    def __enter__(self) -> Turn:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.let_next_go()
        if self.first:
            self._sender.first_answered()

    def let_next_go(self) -> None:
        if not self.gone.done():
            self.gone.set_result(None)


class CopySender:
    """Publishes copies on ``channel`` (a confirm channel) by the rules of the module doc."""

    def __init__(
        self,
        channel: Channel,
        *,
        pace: Pace | None = None,
        abort: asyncio.Event | None = None,
    ) -> None:
        self._channel = channel
        self._pacer = None if pace is None else pace.pacer()
        self._abort = abort or asyncio.Event()
        """Set by the caller to wake copies waiting for their ``--rate`` slot."""
        self._first_taken = False
        self._first_done = asyncio.Event()
        self._last: Turn | None = None
        self._in_flight: dict[Hashable, asyncio.Future[None]] = {}
        """A return's key (``transport/message_ids.py``) -> done when the copy in flight with
        it is answered."""

    def turn(self) -> Turn:
        """Take the next place, before any ``await`` (so places follow the caller's order);
        use it as a context manager around :meth:`wait` and :meth:`publish`."""
        first = not self._first_taken
        self._first_taken = True
        turn = Turn(self, first, self._last.gone if self._last is not None else None)
        self._last = turn
        return turn

    def first_answered(self) -> None:
        """The first copy is confirmed, returned or refused (or was never sent): the others go."""
        self._first_done.set()

    async def wait(self, turn: Turn) -> None:
        """Until this copy's ``--rate`` slot (or ``abort``) and the first copy's answer."""
        if self._pacer is not None:
            wait_s = self._pacer.reserve(asyncio.get_running_loop().time())
            if wait_s > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._abort.wait(), wait_s)
        if not turn.first and not self._first_done.is_set():
            await self._first_done.wait()

    async def publish(
        self, turn: Turn, body: bytes, to: str, properties: Properties, *, exchange: str = ""
    ) -> SendResult:
        """Publish one copy to queue ``to`` (default exchange; else ``exchange`` with routing
        key ``to``), ``mandatory``, in its turn, and classify what became of it."""
        if turn.after is not None:
            await turn.after  # the copies before this one went out
        key = return_key(properties.message_id, exchange, to, body)
        while (earlier := self._in_flight.get(key)) is not None:
            await earlier  # holding the turn: the copies behind wait too
        answered = self._in_flight[key] = asyncio.get_running_loop().create_future()
        publishing = self._channel.publish(
            body, exchange=exchange, routing_key=to, properties=properties, mandatory=True
        )
        turn.let_next_go()
        try:
            return await outcome_of(publishing, alone=turn.first)
        finally:
            del self._in_flight[key]
            answered.set_result(None)


async def outcome_of(publishing: Awaitable[None], *, alone: bool = False) -> SendResult:
    """Await one publish and say what became of its copy (``ops/copies/sent.py``); raises nothing
    but a cancellation."""
    try:
        await publishing
    except Exception as error:  # the one classification: every error is an outcome
        return classified(error, alone=alone)
    return classified(None)
