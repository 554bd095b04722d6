"""Pure. ``rr dlq purge --where``: which messages a selective purge removes.

Each message read that matches every ``--where`` (dlq/filters.py; ``group=ID`` for one group
of ``rr dlq groups``) is discarded: the transfer engine (ops/transfer.py) acks it, copying it
nowhere; every other message is skipped and goes back to its place when the run's channel
closes, so the queue keeps them in their order (docs/how-to/after-an-outage.md, "7. Empty the
dead-letter queue").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from rabbitctl_retry.dlq.choice import Choice, Discard, Skip
from rabbitctl_retry.dlq.filters import Condition, matches
from rabbitctl_retry.dlq.origin import Contents, WaitQueues, facts
from rabbitctl_retry.fields import FieldValue


@dataclass(frozen=True, slots=True)
class PurgePlan:
    source: str
    conditions: tuple[Condition, ...]
    wait_queues: WaitQueues = field(default_factory=WaitQueues)


def choose_purge(
    plan: PurgePlan,
    headers: Mapping[str, FieldValue] | None,
    now: datetime,
    undecodable: tuple[str, ...] = (),
    contents: Contents | None = None,
) -> Choice:
    """Discard a message that matches every condition; skip the others."""
    if matches(plan.conditions, facts(headers, plan.wait_queues, contents), now):
        return Discard()
    return Skip("does not match --where")
