"""RabbitMQ 4.3's delayed retries of a quorum queue (``x-delayed-retry-*``), as measured on
4.3.6 (docs/reference/testing.md, the version table; docs/explanation/attempts.md, "The quorum queue
waits"):

* ``x-delayed-retry-type`` picks the returns held back: ``failed`` the counted ones
  (``basic.reject`` with requeue, a closing channel), ``returned`` the uncounted ones
  (``basic.nack``), ``all`` both; anything else (a missing type, ``"FAILED"``, ``"disabled"``)
  holds nothing back. The server takes any value without a word.
* A held message waits ``min(min x max(count, 1), max)`` ms, ``count`` its delivery count
  after the return; ``x-delayed-retry-min`` must be a positive integer (otherwise nothing
  waits), ``x-delayed-retry-max`` a positive integer (otherwise it is the minimum).
* While it waits it is in the queue but not ready: a declare does not count it, a get and a
  consumer pass over it, a purge removes it (and counts it). When its wait ends it comes
  back as a message given back: ahead of everything never delivered.
* A classic queue refuses every ``x-delayed-retry-*`` argument (and ``x-consumer-timeout``,
  which 4.3's quorum queues apply themselves); RabbitMQ 3.10 and 4.0 accept them on any queue
  and ignore them (4.0 applies ``x-consumer-timeout``, by closing the channel).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from rabbitctl_retry.emulator.clock import TimerHandle
from rabbitctl_retry.fields import FieldValue

T = TypeVar("T")

ARGUMENTS = ("x-delayed-retry-type", "x-delayed-retry-min", "x-delayed-retry-max")
"""In the order a 4.3 quorum queue compares them on a redeclare (after its other arguments)."""

_HELD_BACK = {"failed": (True, False), "returned": (False, True), "all": (True, True)}
"""A type -> (counted returns wait, uncounted returns wait)."""


@dataclass(frozen=True, slots=True)
class DelayedRetry:
    """What a quorum queue's ``x-delayed-retry-*`` arguments mean."""

    counted: bool
    uncounted: bool
    min_ms: int
    max_ms: int

    def wait_ms(self, delivery_count: int, *, counted: bool) -> int:
        """How long a message returned with ``delivery_count`` (after the return) waits; 0
        when a return of its kind does not wait."""
        if not (self.counted if counted else self.uncounted):
            return 0
        return min(self.min_ms * max(delivery_count, 1), self.max_ms)


def delayed_retry_of(arguments: Mapping[str, FieldValue]) -> DelayedRetry | None:
    """The delayed retries a 4.3 quorum queue declared with ``arguments`` has, or None."""
    held_back = _HELD_BACK.get(_text(arguments.get("x-delayed-retry-type")))
    min_ms = _positive_int(arguments.get("x-delayed-retry-min"))
    if held_back is None or min_ms is None:
        return None
    max_ms = _positive_int(arguments.get("x-delayed-retry-max")) or min_ms
    return DelayedRetry(counted=held_back[0], uncounted=held_back[1], min_ms=min_ms, max_ms=max_ms)


QUORUM_ONLY_4_3 = ("x-consumer-timeout", *ARGUMENTS)
"""The arguments a RabbitMQ 4.3 classic queue refuses (quorum queues take them; 3.10 and 4.0
take them on any queue): its consumer timeout and its delayed retries. A 4.3 quorum queue
compares them on a redeclare, in this order, after its other arguments."""


def refused_on_classic(arguments: Mapping[str, FieldValue]) -> str | None:
    """The argument a 4.3 classic queue names when it refuses the declare (the first in
    Erlang term order), or None."""
    present = sorted(key for key in QUORUM_ONLY_4_3 if key in arguments)
    return present[0] if present else None


def _text(value: FieldValue) -> str:
    return value if isinstance(value, str) else ""


def _positive_int(value: FieldValue) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


class WaitingRoom(Generic[T]):
    """The messages of one queue that wait out a delayed retry, each with its timer."""

    def __init__(self) -> None:
        self._waiting: dict[int, tuple[T, TimerHandle]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def hold(self, entry: T, timer: TimerHandle) -> None:
        """Keep ``entry`` until ``timer`` fires (its callback calls :meth:`release`)."""
        self._waiting[id(entry)] = (entry, timer)

    def release(self, entry: T) -> bool:
        """Take ``entry`` out; False when it is no longer here (purged, queue deleted)."""
        return self._waiting.pop(id(entry), None) is not None

    def clear(self) -> list[T]:
        """Take every waiting entry out (a purge, a deleted queue), cancelling its timer."""
        waiting, self._waiting = self._waiting, {}
        for _, timer in waiting.values():
            timer.cancel()
        return [entry for entry, _ in waiting.values()]
