"""``rr run``'s graceful stop, within ``shutdown_timeout_s`` whatever the broker does.

On a connection: publish every in-memory delayed copy now (pipelined), ``basic.cancel`` every
consumer, let in-flight handlers finish, send pending acks, close; past the timeout, unsettled
deliveries go back to their queue and the connection is closed regardless. Without one (rr
waits to reconnect): connect again, within the timeout, only to publish the delayed copies.
What the broker has not confirmed by then is saved by the service (``runtime/pending.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from rabbitctl_retry.errors import TransportError
from rabbitctl_retry.ops.clock import first_of
from rabbitctl_retry.ops.copies.publisher import CopyPublisher
from rabbitctl_retry.runtime.backoff import Backoff
from rabbitctl_retry.runtime.consumer import QueueConsumer
from rabbitctl_retry.runtime.delays import InMemoryDelays
from rabbitctl_retry.runtime.stats import RuntimeStats
from rabbitctl_retry.transport.base import Connection

log = logging.getLogger("rr.runtime")

Connect = Callable[[], Awaitable[Connection]]

PUBLISH_BACKOFF = Backoff(initial_s=0.5, max_s=5.0)
"""How connecting again to publish the delayed copies is tried during a stop."""


@dataclass(eq=False, slots=True, kw_only=True)
class Shutdown:
    """One stop of the service: its consumers, and the delayed copies still to publish."""

    consumers: Sequence[QueueConsumer]
    """The consumers of the connection (none while rr waits to reconnect)."""
    publisher: CopyPublisher | None
    """The copies' publisher of the connection; a connection made to publish has its own."""
    delays: InMemoryDelays
    connect: Connect
    stats: RuntimeStats
    timeout_s: float
    """``shutdown_timeout_s``: the stop's time from its start."""
    _published_before: int = field(default=0, init=False)
    """How many delayed copies were published when the stop started."""

    @property
    def _in_flight(self) -> int:
        return sum(consumer.in_flight for consumer in self.consumers)

    async def of_connection(self, connection: Connection, drop: Callable[[], object]) -> None:
        """Stop the consumers of ``connection`` and close it; ``drop`` forgets them, once
        the connection is closed."""
        deadline = self._starting()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(deadline):
                for consumer in self.consumers:
                    await consumer.stop_consuming()
                for consumer in self.consumers:
                    remaining = max(0.0, deadline - loop.time())
                    if not await consumer.wait_idle(remaining):
                        log.warning(
                            "shutdown timeout: unfinished deliveries go back to their queue",
                            extra={
                                "rr": {
                                    "queue": consumer.policy.queue,
                                    "in_flight": consumer.in_flight,
                                }
                            },
                        )
                await self._publish_delayed(connection)
                for consumer in self.consumers:
                    await consumer.close()
                if self.publisher is not None:
                    await self.publisher.close()
        except TimeoutError:
            self._timed_out(unsettled=sum(c.unsettled for c in self.consumers))
        finally:
            await connection.close()
            drop()
        self._stopped()

    async def disconnected(self) -> None:
        """A stop while rr waits to reconnect: connect only to publish the delayed copies."""
        deadline = self._starting()
        if len(self.delays):
            try:
                async with asyncio.timeout_at(deadline):
                    await self._publish_delayed(None)
            except TimeoutError:
                self._timed_out(unsettled=0)
        self._stopped()

    def _starting(self) -> float:
        """Log the stop and start publishing every delayed copy; return the stop's deadline
        (loop time)."""
        log.info(
            "stopping",
            extra={
                "rr": {
                    "in_flight": self._in_flight,
                    "delayed": len(self.delays),
                    "timeout_s": self.timeout_s,
                }
            },
        )
        self._published_before = self.delays.published
        self.delays.hurry()
        return asyncio.get_running_loop().time() + self.timeout_s

    def _stopped(self) -> None:
        published = self.delays.published - self._published_before
        if published:
            log.info("published pending delayed copies", extra={"rr": {"count": published}})
        log.info("stopped", extra={"rr": {"connections": self.stats.connections}})

    async def _publish_delayed(self, connection: Connection | None) -> None:
        """Until the broker confirmed every delayed copy: publish them on ``connection``, and
        on a new connection whenever there is none (a connection made here only publishes,
        and is closed before this returns)."""
        delays = self.delays
        failures = 0
        made: Connection | None = None
        try:
            while len(delays):
                if connection is None or connection.is_closed:
                    delays.attach(None)
                    if made is not None:
                        await made.close()
                    try:
                        connection = made = await self.connect()
                    except TransportError as error:
                        failures += 1
                        delay_s = PUBLISH_BACKOFF.delay_s(failures)
                        log.warning(
                            "cannot publish the delayed copies yet: connecting failed",
                            extra={"rr": {"error": str(error), "retry_in_s": delay_s}},
                        )
                        await asyncio.sleep(delay_s)
                        continue
                    self.stats.connections += 1
                    log.info(
                        "connected to publish the delayed copies",
                        extra={"rr": {"url": connection.url, "delayed": len(delays)}},
                    )
                    self.publisher = CopyPublisher(connection, tracing=delays.tracing)
                    delays.attach(self.publisher)
                await first_of(delays.wait_empty(), connection.wait_closed())
        finally:
            if made is not None:
                delays.attach(None)
                await made.close()

    def _timed_out(self, *, unsettled: int) -> None:
        log.warning(
            "shutdown timeout: closing the connection (unsettled deliveries go back to their "
            "queues; delayed copies the broker did not confirm are saved to a file)",
            extra={
                "rr": {
                    "in_flight": self._in_flight,
                    "unsettled": unsettled,
                    "delayed": len(self.delays),
                }
            },
        )
