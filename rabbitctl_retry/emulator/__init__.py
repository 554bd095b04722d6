"""An in-memory RabbitMQ behind the transport port, on a virtual clock.

::

    emulator = Emulator()                      # behaves as RabbitMQ 4.0.5 (releases.py)
    connection = emulator.connect()            # a transport.base.Connection
    channel = await connection.channel(confirms=True)
    ...
    await emulator.advance(30)                 # 30 virtual seconds: TTLs, delays fire
    emulator.messages("orders.dead")           # what a queue holds, non-destructively

Layout: ``clock`` (virtual time), ``routing`` / ``deadletter`` / ``args`` / ``values`` (pure
rules), ``model`` (state), ``flow`` (how messages move), ``settle`` (acks, requeues,
closing channels), ``broker`` (what exists), ``transport`` (the port), ``management`` (the
management port's twin), ``emulator`` (the :class:`Emulator`: clock, asyncio glue,
inspection), ``events`` / ``snapshots`` (what tests read).
"""

from rabbitctl_retry.emulator.clock import DEFAULT_START_S, TimerHandle, VirtualClock
from rabbitctl_retry.emulator.emulator import DEFAULT_SERVER_VERSION, Emulator
from rabbitctl_retry.emulator.events import (
    Acked,
    DeadLettered,
    Delayed,
    Delivered,
    Dropped,
    Event,
    Expired,
    Published,
    Rejected,
    Released,
    Requeued,
    Returned,
    Unroutable,
)
from rabbitctl_retry.emulator.snapshots import QueuedMessage, QueueSnapshot
from rabbitctl_retry.emulator.transport import EmulatedChannel, EmulatedConnection

__all__ = [
    "DEFAULT_SERVER_VERSION",
    "DEFAULT_START_S",
    "Acked",
    "DeadLettered",
    "Delayed",
    "Delivered",
    "Dropped",
    "EmulatedChannel",
    "EmulatedConnection",
    "Emulator",
    "Event",
    "Expired",
    "Published",
    "QueueSnapshot",
    "QueuedMessage",
    "Rejected",
    "Released",
    "Requeued",
    "Returned",
    "TimerHandle",
    "Unroutable",
    "VirtualClock",
]
