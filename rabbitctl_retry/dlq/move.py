"""Pure. What ``rr dlq move`` does with one message (docs/reference/dlq.md, "Move").

A move sends every message of a queue (or those matching ``--where``) to one other queue, as
it is: the body, the application headers — the retry header and ``x-death`` included — and
the copied properties (``retry/properties.py``). In this order (:func:`choose_move`):

1. Its properties cannot be decoded: with neither ``--where`` nor ``--reset-retries`` it is
   **sent** byte for byte (rr does not need to read it to move it); with either, it
   **fails** (rr cannot match or rewrite what it cannot read), and stays.
2. It does not match every ``--where``: **skip** it; it stays.
3. Otherwise **send** it to ``--to``. The sender-selected distribution headers ``CC`` and
   ``BCC`` never travel (RabbitMQ would also route the copy to every queue they name). With
   ``--reset-retries`` the copy starts its attempts afresh, as a replayed one does: the retry
   header, the broker's death headers (``x-death``, ``x-first-death-*``, ``x-last-death-*``,
   ``x-delivery-count``) and rr's death headers (``rr-origin-queue``, ``rr-failed-at``,
   ``rr-error-type``, ``rr-error-message``, ``rr-handler``) are removed.

A move needs no loop guard of its own: a run reads at most the messages the queue held when
it started (``ops/transfer.py``), and ``--to`` is never the source (:func:`to_problem`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from rabbitctl_retry.dlq.choice import Choice, Fail, Send, Skip, shown
from rabbitctl_retry.dlq.filters import Condition, matches
from rabbitctl_retry.dlq.origin import Contents, WaitQueues, facts
from rabbitctl_retry.dlq.replay import name_problem
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import (
    DEFAULT_RETRY_HEADER,
    RR_DEATH_HEADERS,
    copy_headers,
    without_routing_headers,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class MovePlan:
    """What one move was asked to do."""

    source: str
    to: str
    conditions: tuple[Condition, ...] = ()
    reset_retries: bool = False
    retry_header: str = DEFAULT_RETRY_HEADER
    wait_queues: WaitQueues = field(default_factory=WaitQueues)
    """For ``--where origin=...``: the wait queues an origin is never taken from."""


def to_problem(source: str, to: str) -> str | None:
    """Why ``--to`` cannot take the messages of ``source``, or ``None``."""
    problem = name_problem(to)
    if problem is not None:
        return f"--to {shown(to)} {problem}"
    if to == source:
        return f"--to {shown(to)} is the queue this command moves from; choose another queue"
    return None


def moved_headers(
    headers: Mapping[str, FieldValue] | None, *, reset_retries: bool, retry_header: str
) -> dict[str, FieldValue]:
    """The headers of a moved copy (see the module doc)."""
    if reset_retries:
        return copy_headers(headers, {}, remove=RR_DEATH_HEADERS | {retry_header})
    return without_routing_headers(headers)


def choose_move(
    plan: MovePlan,
    headers: Mapping[str, FieldValue] | None,
    now: datetime,
    undecodable: tuple[str, ...] = (),
    contents: Contents | None = None,
) -> Choice:
    """What the move does with one message (see the module doc)."""
    if undecodable:
        if plan.conditions or plan.reset_retries:
            needs = "--where" if plan.conditions else "--reset-retries"
            return Fail(
                f"its properties cannot be decoded ({', '.join(undecodable)}), and {needs} needs "
                "them; move it without --where and --reset-retries to send it byte for byte",
                to=plan.to,
            )
        return Send(to=plan.to, headers={}, verbatim=True)
    found = facts(headers, plan.wait_queues, contents) if plan.conditions else None
    if found is not None and not matches(plan.conditions, found, now):
        return Skip("does not match --where")
    return Send(
        to=plan.to,
        headers=moved_headers(
            headers, reset_retries=plan.reset_retries, retry_header=plan.retry_header
        ),
    )
