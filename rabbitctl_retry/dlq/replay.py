"""Pure. What a replay does with one dead letter, and the headers of its copy.

For each dead letter, in this order (:func:`choose`):

1. It carries this run's id in ``rr-replay-run``: a copy this run made has come round again
   (its target dead-lettered it back, or ``--to`` points at the source). **Stop** the run
   rather than loop; the dead letter stays.
2. It does not match every ``--where``: **skip** it; it stays.
3. Its target is ``--to`` or its origin queue (``origin.py``). No target (no origin, or only
   a wait queue named), a target that is the dead-letter queue itself, or one that is not a
   queue name RabbitMQ accepts: **fail** (it stays; the reason says what to do).
4. Otherwise **replay** it to the target.

The copy (:func:`replay_headers`) keeps the body, the application headers and the kept
properties (``retry/properties.py`` :data:`COPIED_PROPERTIES`), and:

* removes the retry header: the message starts its attempts afresh;
* strips the broker's headers (``x-death``, ``x-first-death-*``, ``x-last-death-*``,
  ``x-delivery-count``, ``x-acquired-count``, ``x-delay``), rr's death headers
  (``rr-origin-queue``, ``rr-failed-at``, ``rr-error-type``, ``rr-error-message``,
  ``rr-handler``) and the
  sender-selected distribution headers ``CC`` and ``BCC`` (RabbitMQ would also route the copy
  to every queue they name);
* adds ``rr-replayed-count`` (the previous value + 1), ``rr-replayed-at`` (ISO 8601 UTC) and
  ``rr-replay-run`` (the run id, the loop guard of step 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from rabbitctl_retry.dlq.choice import Choice, Fail, Send, Skip, Stop, shown
from rabbitctl_retry.dlq.filters import Condition, matches
from rabbitctl_retry.dlq.origin import Contents, WaitQueues, facts, origin_queue, wait_queue_named
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import (
    DEFAULT_RETRY_HEADER,
    REPLAYED_AT_HEADER,
    REPLAYED_COUNT_HEADER,
    RR_DEATH_HEADERS,
    copy_headers,
    count_value,
    utc_stamp,
)
from rabbitctl_retry.topology.model import MAX_NAME_BYTES
from rabbitctl_retry.topology.wire import sendable_queue_name_problem

RUN_HEADER = "rr-replay-run"
"""The id of the replay run that made a copy: a delivery carrying the current run's id came
round again."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayPlan:
    """What one replay run was asked to do, for one source queue."""

    source: str
    run_id: str
    retry_header: str = DEFAULT_RETRY_HEADER
    to: str | None = None
    wait_queues: WaitQueues = field(default_factory=WaitQueues)
    conditions: tuple[Condition, ...] = ()
    set_aside: bool = False
    """``--undecodable``: move only the letters whose properties cannot be decoded, byte for
    byte, to ``to`` (default :func:`set_aside_queue`); leave every other letter."""


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def came_round(headers: Mapping[str, FieldValue] | None, run_id: str) -> bool:
    """Whether a delivery is a copy made by run ``run_id``."""
    if not headers:
        return False
    return _text(headers.get(RUN_HEADER)) == run_id


def replay_headers(
    headers: Mapping[str, FieldValue] | None,
    *,
    retry_header: str,
    run_id: str,
    now: datetime,
) -> dict[str, FieldValue]:
    """The headers of a replayed copy (see the module doc)."""
    previous = count_value((headers or {}).get(REPLAYED_COUNT_HEADER)) or 0
    return copy_headers(
        headers,
        {
            REPLAYED_COUNT_HEADER: previous + 1,
            REPLAYED_AT_HEADER: utc_stamp(now),
            RUN_HEADER: run_id,
        },
        remove=RR_DEATH_HEADERS | {retry_header},
    )


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a queue name rr can send a copy to, or ``None``: RabbitMQ takes 1
    to 255 bytes, and rr's AMQP client (which must look the queue up) only the names of
    ``topology/wire.py``'s :func:`sendable_queue_name_problem`. A dry run and a real run refuse
    the same names."""
    size = len(name.encode("utf-8", "replace"))
    if not name or size > MAX_NAME_BYTES:
        return f"is {size} bytes, not a queue name RabbitMQ accepts (1 to {MAX_NAME_BYTES} bytes)"
    return sendable_queue_name_problem(name)


def to_problem(to: str, sources: Iterable[str]) -> str | None:
    """Why ``--to`` cannot take the copies of a replay of ``sources``, or ``None``."""
    problem = name_problem(to)
    if problem is not None:
        return f"--to {shown(to)} {problem}"
    if to in sources:
        return (
            f"--to {shown(to)} is a dead-letter queue this command replays: every copy would "
            "land where it came from; choose another queue"
        )
    return None


def _no_target(plan: ReplayPlan, headers: Mapping[str, FieldValue] | None) -> Fail:
    waiting = wait_queue_named(headers, plan.wait_queues)
    if waiting is not None:
        return Fail(
            f"its origin {shown(waiting)} is a wait queue, and rr never replays into one (the "
            "copy would only come back after the delay); pass --to QUEUE"
        )
    return Fail(
        "no origin queue (no rr-origin-queue header, no x-death entry outside wait "
        "queues); pass --to QUEUE"
    )


SET_ASIDE_SUFFIX = ".undecodable"


def set_aside_queue(source: str) -> str:
    """Where ``--undecodable`` moves the letters of ``source`` by default."""
    return source + SET_ASIDE_SUFFIX


def _undecodable(plan: ReplayPlan, undecodable: tuple[str, ...]) -> Choice:
    if not undecodable:
        return Skip("its properties can be decoded (--undecodable moves only the others)")
    to = plan.to or set_aside_queue(plan.source)
    if to == plan.source:
        return Fail(f"--to {shown(to)} is the dead-letter queue itself; choose another queue")
    problem = name_problem(to)
    if problem is not None:
        return Fail(f"--to {problem}", to=to[:64])
    return Send(to=to, headers={}, verbatim=True)


def choose(
    plan: ReplayPlan,
    headers: Mapping[str, FieldValue] | None,
    now: datetime,
    undecodable: tuple[str, ...] = (),
    contents: Contents | None = None,
) -> Choice:
    """What the replay does with one dead letter (see the module doc). ``undecodable``: the
    names of the properties the codec could not decode (docs/reference/dlq.md, "Undecodable")."""
    if plan.set_aside:
        return _undecodable(plan, undecodable)
    if undecodable:
        return Fail(
            f"its properties cannot be decoded ({', '.join(undecodable)}); "
            f"rr dlq replay {shown(plan.source)} --undecodable moves it aside, byte for byte, "
            f"to {shown(set_aside_queue(plan.source))}"
        )
    if came_round(headers, plan.run_id):
        return Stop(
            "a copy this run replayed came back to the dead-letter queue; stopping rather "
            "than replaying it again"
        )
    origin: str | None
    if plan.conditions:
        found = facts(headers, plan.wait_queues, contents)
        if not matches(plan.conditions, found, now):
            return Skip("does not match --where")
        origin = found.origin
    else:
        origin = None if plan.to is not None else origin_queue(headers, plan.wait_queues)
    target = plan.to or origin
    if target is None:
        return _no_target(plan, headers)
    if target == plan.source:
        if plan.to is not None:
            return Fail(
                f"--to {shown(target)} is the dead-letter queue itself; choose another queue",
                to=target,
            )
        return Fail(
            f"its origin is the dead-letter queue {shown(plan.source)} itself; pass --to QUEUE",
            to=target,
        )
    problem = name_problem(target)
    if problem is not None:
        what = "--to" if plan.to is not None else "its origin queue name"
        advice = "" if plan.to is not None else "; pass --to QUEUE"
        return Fail(f"{what} {problem}{advice}", to=target[:64])
    return Send(
        to=target,
        headers=replay_headers(
            headers, retry_header=plan.retry_header, run_id=plan.run_id, now=now
        ),
    )
