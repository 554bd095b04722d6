"""Pure. What reading a queue without taking costs its messages, on a given server
(docs/reference/dlq.md, "Inspecting without taking").

rr reads a queue by consuming without acking and then handing every message back. How it
hands them back, and what that costs, depends on the server and the queue (measured on
RabbitMQ 3.10.8, 4.0.5 and 4.3.6):

=====================  ==================  ===============================================
queue                  server              one read of a message
=====================  ==================  ===============================================
classic (or stream)    any                 costs nothing (back in its place)
quorum                 4.3 and later       costs nothing: rr hands it back with
                                           ``basic.nack(requeue=true)``, which 4.3 does not
                                           count (only ``x-acquired-count`` grows)
quorum, no limit       3.10 (none set),    ``x-delivery-count`` + 1, and no limit can drop
                       4.0-4.2 (``-1``)    it (:attr:`Cost.COUNTED`)
quorum with a limit    before 4.3          one delivery toward the limit: a letter read
                                           often enough is dead-lettered, or dropped
                                           without a dead-letter route (:attr:`Cost.SPENDS`)
type not known         before 4.3          as if it were a quorum queue with a limit
=====================  ==================  ===============================================

The limit is the queue's ``x-delivery-limit`` as RabbitMQ reads it: none on 3.10 without one,
20 on 4.x without one, a negative one is no limit on 4.x but drops at the first return on 3.10.
A ``delivery-limit`` set by a policy is not seen over AMQP: the command says so where it
matters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.releases import release_of


class Cost(StrEnum):
    """What one read does to a message of the queue."""

    FREE = "free"
    """Nothing is counted: read it as often as you like."""
    COUNTED = "counted"
    """``x-delivery-count`` grows by one, but no delivery limit applies: nothing is dropped."""
    SPENDS = "spends"
    """It counts toward a delivery limit: enough reads dead-letter (or drop) the message."""


class GiveBack(StrEnum):
    """How rr hands back what it read."""

    NACK = "nack"
    """``basic.cancel``, then ``basic.nack(multiple, requeue=true)`` of every delivery."""
    CLOSE = "close"
    """Closing the channel (RabbitMQ returns every unacked delivery, each in its place)."""


@dataclass(frozen=True, slots=True)
class ReadCost:
    cost: Cost
    give_back: GiveBack
    limit: int | None = None
    """With :attr:`Cost.SPENDS`: the delivery limit, when known; None when rr could not tell
    the queue's type."""
    why: str = ""
    """One sentence, for the person about to read."""

    @property
    def can_drop(self) -> bool:
        """A read can cost a message its place in the queue."""
        return self.cost is Cost.SPENDS


def give_back_for(release: tuple[int, int, int]) -> GiveBack:
    """How rr hands back what it read from a server of ``release``: a ``basic.nack`` where
    a quorum queue does not count it, else the channel's close (which keeps a 3.10 quorum
    queue's order: 3.10 puts a nacked message at the back)."""
    counted = release_of(release).nack_requeue_counts_delivery
    return GiveBack.CLOSE if counted else GiveBack.NACK


def effective_limit(release: tuple[int, int, int], argument: FieldValue | None) -> int | None:
    """The returns a quorum queue with ``x-delivery-limit = argument`` (None: not set) lets a
    message have before it dead-letters or drops it, on a server of ``release``; None when
    no limit applies. (RabbitMQ compares the count with the number as it is: 2.5 lets 2.)"""
    row = release_of(release)
    default = row.default_quorum_delivery_limit
    if argument is None:
        return default
    is_int = isinstance(argument, int) and not isinstance(argument, bool)
    if row.delivery_limit_integers_only and not is_int:
        return default  # 4.3 takes only an integer: anything else is as if not set
    if not (is_int or isinstance(argument, float)):
        return None  # a string or a bool is above every number in Erlang's order: never reached
    assert isinstance(argument, int | float)
    if argument < 0:
        return None if row.takes_unlimited_delivery_limit else 0  # 3.10: the first return
    return math.floor(argument)


def read_cost(
    release: tuple[int, int, int],
    name: str,
    *,
    quorum: bool | None,
    limit_argument: FieldValue | None,
) -> ReadCost:
    """What reading queue ``name`` costs (table in the module doc). ``quorum``: None when the
    broker would not say; ``limit_argument``: its ``x-delivery-limit``, None when not set."""
    give_back = give_back_for(release)
    version = ".".join(str(part) for part in release)
    if quorum is False:
        return ReadCost(Cost.FREE, give_back, why=f"{name!r} is not a quorum queue")
    if give_back is GiveBack.NACK:
        return ReadCost(
            Cost.FREE,
            give_back,
            why=(
                f"RabbitMQ {version} does not count a message handed back with basic.nack "
                "(x-delivery-count stays, x-acquired-count grows)"
            ),
        )
    if quorum is None:
        return ReadCost(
            Cost.SPENDS,
            give_back,
            why=(
                f"rr could not tell whether {name!r} is a quorum queue; if it is, on RabbitMQ "
                f"{version} every message rr reads goes back with x-delivery-count + 1, "
                "and past its delivery limit it is dead-lettered (or dropped)"
            ),
        )
    limit = effective_limit(release, limit_argument)
    counted = (
        f"{name!r} is a quorum queue: on RabbitMQ {version} every message rr reads goes back "
        "with x-delivery-count + 1"
    )
    if limit is None:
        return ReadCost(
            Cost.COUNTED,
            give_back,
            why=(
                f"{counted}; it has no delivery limit, so none is dropped (a delivery-limit "
                "set by a policy would still apply: rr cannot see policies over AMQP)"
            ),
        )
    given = (
        f"its delivery limit is {limit} (the server's, as it has no x-delivery-limit)"
        if limit_argument is None
        else f"it has x-delivery-limit = {limit}"
    )
    return ReadCost(
        Cost.SPENDS,
        give_back,
        limit=limit,
        why=(
            f"{counted}, and {given}: a message returned more often than that is "
            "dead-lettered, or dropped without a dead-letter route"
        ),
    )


__all__ = ["Cost", "GiveBack", "ReadCost", "effective_limit", "give_back_for", "read_cost"]
