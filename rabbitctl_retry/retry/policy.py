"""Pure. A delivery, its handler's outcome and its queue's policy -> one action
(docs/reference/runtime.md).

``decide()`` owns the whole table. ``N`` is ``max_attempts``, ``D`` is ``dead_letter``,
``attempt = 1 + retry header + x-delivery-count`` and ``copies`` is the retry header (how
many copies came before this delivery); a retry header of another queue's dead letter
(``rr-origin-queue`` names another queue) counts 0 here: attempts count per queue.

=================  =========================  ==============================================
outcome            queue / state              action
=================  =========================  ==============================================
ack                any                        ``basic.ack``
drop               any                        ``basic.reject(requeue=false)`` (classic: gone,
                                              unless the queue has its own DLX; quorum with
                                              D: the server moves it to D, reason rejected)
drop               quorum, D, a mapped        copy to D as at the cap (``rr-error-*`` of the
                   exception                  exception, ``retry/failure_map.py``); ack
retry              no N                       ``basic.reject(requeue=true)``: RabbitMQ's own
                                              requeue, counted only by a quorum queue
retry              classic, attempt < N       copy to the queue (default exchange), header =
                                              attempt; ack after the confirm
retry              classic, attempt >= N, D   copy to D, header = N, ``rr-origin-queue``,
                                              ``rr-failed-at`` (+ ``rr-error-*``); ack
retry              classic, attempt >= N, -   ``basic.reject(requeue=false)`` (spent)
retry              quorum, copies = 0         ``basic.reject(requeue=true)``: the server
                                              counts, and past its limit (N - 1) moves the
                                              message to D itself (reason delivery_limit)
retry              quorum, copies > 0,        ``basic.reject(requeue=false)``: the server's
                   attempt >= N               count restarted with the copy, so rr ends the
                                              loop; the queue's DLX moves it to D (rejected)
retry              quorum, attempt >= N,      copy to D, header = N, ``rr-origin-queue``,
                   D retries (a chain)        ``rr-failed-at``; ack: D's attempts start
                                              afresh (a server dead letter carries its count)
retry              quorum, delay = server,    ``basic.reject(requeue=true)``: counted; the
                   below the cap (or no N)    server holds it back ``min(delay_min x count,
                                              delay_max)``, count its x-delivery-count after
retry              quorum, otherwise          ``basic.reject(requeue=true)``
retry_after(d)     at the cap (as retry)      exactly what retry does at the cap
retry_after(d)     d = 0                      copy to the queue now, header = attempt; ack
retry_after(d)     delay = memory             ack now; the service publishes the copy to the
                                              queue after d (at most once)
retry_after(d)     delay = dlx-ttl            copy to the wait queue with ``expiration = d``,
                                              header = attempt; ack after the confirm
retry_after(d)     delay_tiers                copy to the smallest tier >= d (the longest
                                              tier when d is longer), ``expiration = d``
retry_after(d)     delay = plugin-dme         copy to ``<queue>.delay`` with ``x-delay = d``;
                                              ack after the confirm
retry_after(d)     delay = server             exactly what retry does (``d`` is not used: the
                                              server's schedule decides), at the cap too
dead_letter        any                        what retry does at the cap of a classic queue,
                                              on either type: copy to D (``rr-error-*``);
                                              without D ``basic.reject(requeue=false)``
pause(d)           any                        ``basic.nack(requeue=true)``: back to the queue,
                                              uncounted where the server allows (RabbitMQ
                                              4.3; classic queues count by the retry header);
                                              the consumer stops for ``d``
=================  =========================  ==============================================

Every copy keeps the body, the application headers and the kept properties
(``retry/properties.py``), drops the broker's headers, and is persistent; the retry header
grows by one on every copy, so the cap ends delayed loops as it ends immediate ones. A retry
is never ``basic.nack``: RabbitMQ 4.3 counts only ``basic.reject`` against a quorum limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import assert_never

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import (
    DEFAULT_RETRY_HEADER,
    DELAY_HEADER,
    ERROR_MESSAGE_HEADER,
    ERROR_TYPE_HEADER,
    FAILED_AT_HEADER,
    HANDLER_HEADER,
    ORIGIN_QUEUE_HEADER,
    RR_DEATH_HEADERS,
    attempt_of,
    copy_headers,
    delivery_count,
    retry_count,
    utc_stamp,
)
from rabbitctl_retry.retry.outcome import (
    Ack,
    AnyOutcome,
    DeadLetter,
    Drop,
    Failure,
    Pause,
    Retry,
    RetryAfter,
)
from rabbitctl_retry.topology.model import DelayMode, Queue, QueueType
from rabbitctl_retry.topology.naming import wait_queue_name


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """What ``decide()`` needs to know about one queue."""

    queue: str
    quorum: bool = False
    max_attempts: int | None = None
    dead_letter: str | None = None
    delay: DelayMode = DelayMode.MEMORY
    wait_queue: str | None = None
    tiers: tuple[tuple[int, str], ...] = ()
    """``(tier_ms, wait queue)``, shortest first."""
    delay_exchange: str | None = None
    server_delay: tuple[int, int] | None = None
    """``delay = "server"``: ``(delay_min_ms, delay_max_ms)``, the quorum queue's own delayed
    retries."""
    retry_header: str = DEFAULT_RETRY_HEADER
    handler: str | None = None
    """The handler that consumes the queue (``module:function``): rr's dead-letter copies
    name it in ``rr-handler`` (docs/reference/dlq.md: ``rr dlq groups`` groups by it)."""
    hands_off: bool = False
    """``dead_letter`` is a queue with a retry policy of its own (a chain): rr dead-letters
    into it by a copy, also from a quorum queue, so that its attempts start afresh (a
    server-side dead letter carries its delivery count into a quorum target on RabbitMQ 4.3,
    which counts it against the next queue's limit)."""

    @classmethod
    def of(
        cls, queue: Queue, *, retry_header: str = DEFAULT_RETRY_HEADER, hands_off: bool = False
    ) -> RetryPolicy:
        """The policy a topology queue declares (``hands_off``: see the attribute)."""
        return cls(
            hands_off=hands_off and queue.dead_letter is not None,
            queue=queue.name,
            quorum=queue.type is QueueType.QUORUM,
            max_attempts=queue.max_attempts,
            dead_letter=queue.dead_letter,
            delay=queue.delay,
            wait_queue=queue.effective_wait_queue,
            tiers=tuple(zip(queue.delay_tiers_ms, queue.wait_queue_names, strict=True))
            if queue.delay_tiers_ms
            else (),
            delay_exchange=queue.delay_exchange,
            server_delay=queue.server_delay,
            retry_header=retry_header,
        )


class CopyPurpose(StrEnum):
    RETRY = "retry"
    DELAY = "delay"
    DEAD_LETTER = "dead-letter"


@dataclass(frozen=True, slots=True, kw_only=True)
class Copy:
    """A new message built from the delivery: same body and kept properties, these headers."""

    exchange: str
    routing_key: str
    headers: Mapping[str, FieldValue]
    purpose: CopyPurpose
    expiration_ms: int | None = None
    verbatim: bool = False
    """The original exactly, properties byte for byte (a message whose properties could not
    be decoded: ``headers`` and ``expiration_ms`` are then unused)."""
    mandatory: bool = True
    """Published ``mandatory`` (an unroutable copy comes back and the original stays). Not
    for the delayed-message exchange: the plugin returns every mandatory message it delays
    at once, though it still delivers it later."""


@dataclass(frozen=True, slots=True)
class AckAction:
    """``basic.ack`` the delivery."""


@dataclass(frozen=True, slots=True)
class RejectAction:
    """``basic.reject`` the delivery."""

    requeue: bool


@dataclass(frozen=True, slots=True)
class RepublishAction:
    """Publish ``copy`` (mandatory, confirmed unless the queue publishes "fast"), then ack the
    delivery; if the copy is returned or refused, ``basic.reject(requeue=true)`` instead."""

    copy: Copy


@dataclass(frozen=True, slots=True)
class ScheduleAction:
    """Ack the delivery now and publish ``copy`` after ``delay_ms`` (in-memory delay)."""

    copy: Copy
    delay_ms: int


@dataclass(frozen=True, slots=True)
class GiveBackAction:
    """``basic.nack(requeue=true)``: back to its queue, uncounted where the server allows
    (a pause, docs/reference/handlers.md, "Pausing a queue")."""


Action = AckAction | RejectAction | RepublishAction | ScheduleAction | GiveBackAction


class Event(StrEnum):
    """What happened to the message, for logs and timelines."""

    ACKED = "acked"
    REQUEUED = "requeued"
    RETRIED = "retried"
    DELAYED = "delayed"
    DEAD_LETTERED = "dead-lettered"
    DROPPED = "dropped"
    SPENT = "spent"
    """The last attempt failed and there is no dead-letter queue: the message is rejected."""
    PAUSED = "paused"
    """Given back uncounted where the server allows; the queue's consumer pauses."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    action: Action
    event: Event
    attempt: int
    destination: str | None = None
    """The queue or exchange the message goes to next, when rr or the server moves it."""
    delay_ms: int | None = None
    failure: Failure | None = field(default=None)


def decide(
    policy: RetryPolicy,
    headers: Mapping[str, FieldValue] | None,
    outcome: AnyOutcome,
    *,
    now: datetime,
) -> Decision:
    """The action for one delivery (the table in the module docstring).

    Args:
        policy: the delivery's queue policy.
        headers: the delivery's headers (``None`` for none).
        outcome: what the handler returned.
        now: the current time, written into ``rr-failed-at`` of dead-letter copies.
    """
    attempt = attempt_of(headers, policy.retry_header, policy.queue)
    match outcome:
        case Ack():
            return Decision(action=AckAction(), event=Event.ACKED, attempt=attempt)
        case Drop(failure=failure) if failure is not None and policy.quorum and policy.dead_letter:
            # an exception mapped to a drop: the letter the server would make could not say
            # why, so rr's own dead-letter copy goes to D instead
            return replace(spend(policy, headers, attempt, failure, now), event=Event.DROPPED)
        case Drop():
            return Decision(
                action=RejectAction(requeue=False),
                event=Event.DROPPED,
                attempt=attempt,
                destination=policy.dead_letter if policy.quorum else None,
                failure=outcome.failure,
            )
        case Retry():
            return _retry(policy, headers, attempt, outcome.failure, now)
        case RetryAfter():
            return _retry_after(policy, headers, attempt, outcome, now)
        case DeadLetter():
            return spend(policy, headers, attempt, outcome.failure, now)
        case Pause():
            return Decision(
                action=GiveBackAction(),
                event=Event.PAUSED,
                attempt=attempt,
                destination=policy.queue,
                delay_ms=outcome.delay_ms,
                failure=outcome.failure,
            )
        case _:
            assert_never(outcome)


def _at_cap(policy: RetryPolicy, attempt: int) -> bool:
    return policy.max_attempts is not None and attempt >= policy.max_attempts


def _retry(
    policy: RetryPolicy,
    headers: Mapping[str, FieldValue] | None,
    attempt: int,
    failure: Failure | None,
    now: datetime,
) -> Decision:
    if policy.max_attempts is None:
        return _requeued(policy, headers, attempt, failure, counted=False)
    if policy.quorum:
        return _quorum_retry(policy, headers, attempt, failure, now)
    if _at_cap(policy, attempt):
        return spend(policy, headers, attempt, failure, now)
    return copy_back(policy, headers, attempt, failure)


def _requeued(
    policy: RetryPolicy,
    headers: Mapping[str, FieldValue] | None,
    attempt: int,
    failure: Failure | None,
    *,
    counted: bool,
) -> Decision:
    """``basic.reject(requeue=true)``, the server's own requeue (which it holds back with
    ``delay = "server"``). ``counted``: a quorum queue's attempt below rr's cap (a retry to the
    queue); else the plain requeue of a queue without ``max_attempts``."""
    if policy.server_delay is not None:
        return _server_delayed(policy, headers, attempt, failure)
    return Decision(
        action=RejectAction(requeue=True),
        event=Event.RETRIED if counted else Event.REQUEUED,
        attempt=attempt,
        destination=policy.queue if counted else None,
        failure=failure,
    )


def copy_back(
    policy: RetryPolicy,
    headers: Mapping[str, FieldValue] | None,
    attempt: int,
    failure: Failure | None,
    *,
    event: Event = Event.RETRIED,
    delay_ms: int | None = None,
) -> Decision:
    """A copy to the queue now (default exchange), header = attempt; ack after the confirm."""
    copy = build_copy(policy, headers, attempt, CopyPurpose.RETRY, policy.queue, exchange="")
    return Decision(
        action=RepublishAction(copy),
        event=event,
        attempt=attempt,
        destination=policy.queue,
        delay_ms=delay_ms,
        failure=failure,
    )


def _quorum_retry(
    policy: RetryPolicy,
    headers: Mapping[str, FieldValue] | None,
    attempt: int,
    failure: Failure | None,
    now: datetime,
) -> Decision:
    if not _at_cap(policy, attempt):
        return _requeued(policy, headers, attempt, failure, counted=True)
    if policy.hands_off:  # into a queue that counts again: by copy, never by the server
        return spend(policy, headers, attempt, failure, now)
    # At the cap. Without copies the server's own count reached its limit (N - 1 returns),
    # so this requeue is the one it dead-letters (reason delivery_limit). With copies, the
    # count restarted at each copy: rr rejects without requeue and the queue's dead-letter
    # route moves the message (reason rejected).
    copies = retry_count(headers, policy.retry_header)
    return reject_to_dead_letter(policy, attempt, failure, requeue=copies == 0)


def reject_to_dead_letter(
    policy: RetryPolicy, attempt: int, failure: Failure | None, *, requeue: bool = False
) -> Decision:
    """``basic.reject``, for the queue's own dead-letter route to move the message to ``D``
    (with ``requeue``: the one requeue a quorum queue counts past its limit); with no ``D``
    the message is spent."""
    return Decision(
        action=RejectAction(requeue=requeue),
        event=Event.DEAD_LETTERED if policy.dead_letter is not None else Event.SPENT,
        attempt=attempt,
        destination=policy.dead_letter,
        failure=failure,
    )


def _server_delayed(
    policy: RetryPolicy,
    headers: Mapping[str, FieldValue] | None,
    attempt: int,
    failure: Failure | None,
) -> Decision:
    """``delay = "server"`` below the cap: a counted requeue the quorum queue holds back."""
    assert policy.server_delay is not None
    delay_min_ms, delay_max_ms = policy.server_delay
    return Decision(
        action=RejectAction(requeue=True),
        event=Event.DELAYED,
        attempt=attempt,
        destination=policy.queue,
        delay_ms=server_delay_ms(delay_min_ms, delay_max_ms, (delivery_count(headers) or 0) + 1),
        failure=failure,
    )


def server_delay_ms(delay_min_ms: int, delay_max_ms: int, delivery_count: int) -> int:
    """How long a RabbitMQ 4.3 quorum queue holds a message back once it was returned for the
    ``delivery_count``-th time (its ``x-delivery-count`` after the return):
    ``min(delay_min x max(count, 1), delay_max)``, measured on 4.3.6 (docs/reference/topology.md,
    "Delays")."""
    return min(delay_min_ms * max(delivery_count, 1), delay_max_ms)


def spend(
    policy: RetryPolicy,
    headers: Mapping[str, FieldValue] | None,
    attempt: int,
    failure: Failure | None,
    now: datetime,
) -> Decision:
    """A classic queue's last attempt failed (or rr gave up on a message, see
    :mod:`rabbitctl_retry.retry.poison`): dead-letter copy, or reject if there is no D."""
    if policy.dead_letter is None:
        return Decision(
            action=RejectAction(requeue=False), event=Event.SPENT, attempt=attempt, failure=failure
        )
    updates: dict[str, FieldValue] = {
        ORIGIN_QUEUE_HEADER: policy.queue,
        FAILED_AT_HEADER: utc_stamp(now),
    }
    if failure is not None:
        updates[ERROR_TYPE_HEADER] = failure.type
        updates[ERROR_MESSAGE_HEADER] = failure.message
    if policy.handler is not None:
        updates[HANDLER_HEADER] = policy.handler
    copy = build_copy(
        policy,
        headers,
        policy.max_attempts or attempt,
        CopyPurpose.DEAD_LETTER,
        policy.dead_letter,
        exchange="",
        extra=updates,
        remove=frozenset({ERROR_TYPE_HEADER, ERROR_MESSAGE_HEADER, HANDLER_HEADER}),
    )
    return Decision(
        action=RepublishAction(copy),
        event=Event.DEAD_LETTERED,
        attempt=attempt,
        destination=policy.dead_letter,
        failure=failure,
    )


def _retry_after(
    policy: RetryPolicy,
    headers: Mapping[str, FieldValue] | None,
    attempt: int,
    outcome: RetryAfter,
    now: datetime,
) -> Decision:
    delay_ms, failure = outcome.delay_ms, outcome.failure
    # delay = server: the server's schedule, whatever delay_ms says; at the cap, exactly what
    # retry does there
    if policy.delay is DelayMode.SERVER or _at_cap(policy, attempt):
        return _retry(policy, headers, attempt, failure, now)
    if delay_ms == 0:
        return copy_back(policy, headers, attempt, failure, delay_ms=0)
    match policy.delay:
        case DelayMode.MEMORY:  # the service publishes it after delay_ms
            copy = build_copy(
                policy, headers, attempt, CopyPurpose.DELAY, policy.queue, exchange=""
            )
            destination = policy.queue
        case DelayMode.DLX_TTL:
            wait_queue = _wait_queue_for(policy, delay_ms)
            copy = build_copy(
                policy,
                headers,
                attempt,
                CopyPurpose.DELAY,
                wait_queue,
                exchange="",
                expiration_ms=delay_ms,
            )
            destination = wait_queue
        case DelayMode.PLUGIN_DME:
            exchange = policy.delay_exchange or ""
            copy = build_copy(
                policy,
                headers,
                attempt,
                CopyPurpose.DELAY,
                policy.queue,
                exchange=exchange,
                extra={DELAY_HEADER: delay_ms},
                mandatory=False,
            )
            destination = exchange
        case _:
            assert_never(policy.delay)
    return Decision(
        action=ScheduleAction(copy, delay_ms)
        if policy.delay is DelayMode.MEMORY
        else RepublishAction(copy),
        event=Event.DELAYED,
        attempt=attempt,
        destination=destination,
        delay_ms=delay_ms,
        failure=failure,
    )


def _wait_queue_for(policy: RetryPolicy, delay_ms: int) -> str:
    """The single wait queue, or the smallest tier at least ``delay_ms`` long (else the
    longest: a delay longer than every tier waits for the longest tier)."""
    if not policy.tiers:
        return policy.wait_queue or wait_queue_name(policy.queue)
    for tier_ms, wait_queue in policy.tiers:
        if tier_ms >= delay_ms:
            return wait_queue
    return policy.tiers[-1][1]


def build_copy(
    policy: RetryPolicy,
    headers: Mapping[str, FieldValue] | None,
    count: int,
    purpose: CopyPurpose,
    routing_key: str,
    *,
    exchange: str,
    expiration_ms: int | None = None,
    extra: Mapping[str, FieldValue] | None = None,
    remove: frozenset[str] = frozenset(),
    mandatory: bool = True,
) -> Copy:
    updates: dict[str, FieldValue] = {policy.retry_header: str(count)}
    if extra:
        updates.update(extra)
    if purpose is not CopyPurpose.DEAD_LETTER:
        # the retry header now counts this queue's attempts: no other queue's death may say
        # it belongs elsewhere (retry/headers.py counted_copies)
        remove = remove | RR_DEATH_HEADERS
    return Copy(
        exchange=exchange,
        routing_key=routing_key,
        headers=copy_headers(headers, updates, remove=remove),
        purpose=purpose,
        expiration_ms=expiration_ms,
        mandatory=mandatory,
    )
