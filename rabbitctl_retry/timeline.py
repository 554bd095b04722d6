"""Pure. What ``rr simulate``'s timeline shows of one delivery, and where each message ended
(docs/reference/runtime.md, "rr simulate").

* :func:`counts_of`: a delivery's counts as its queue counts them. A dead letter's retry
  header counted the attempts of the queue its ``rr-origin-queue`` names, not of this one
  (docs/explanation/attempts.md, "Attempts"): it is shown apart, as *carried*, never in the
  ``retry`` column that ``attempt = 1 + retry + x-dc`` adds up.
* :func:`endings`: the decisions about each message, in order (a timeline's rows, or the
  lines ``rr run --log-format json`` wrote), folded into where it ended: the last decision in
  each queue it went through, e.g. ``refunds: dead-lettered on attempt 5 -> refunds.dead:
  acked on attempt 1``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import (
    ORIGIN_QUEUE_HEADER,
    counted_copies,
    delivery_count,
    retry_count,
)


@dataclass(frozen=True, slots=True)
class Counts:
    """A delivery's counts, as the timeline's columns show them."""

    retry_count: int | None
    """The copies that count as attempts of this queue (the retry header), or None."""
    delivery_count: int | None
    """The quorum queue's ``x-delivery-count``, or None."""
    carried_retry_count: int | None = None
    """A dead letter's retry header: the attempts of ``origin_queue``, not of this queue."""
    origin_queue: str | None = None


def counts_of(headers: Mapping[str, FieldValue] | None, retry_header: str, queue: str) -> Counts:
    """``headers`` of a delivery from ``queue``: what counts there, and what a dead letter
    carries from the queue it came from (docs/explanation/attempts.md, "Attempts")."""
    counted = counted_copies(headers, retry_header, queue)
    header = retry_count(headers, retry_header)
    carried = header if header and not counted else None
    origin = (headers or {}).get(ORIGIN_QUEUE_HEADER)
    if isinstance(origin, bytes):
        origin = origin.decode("utf-8", "replace")
    return Counts(
        retry_count=counted or None,
        delivery_count=delivery_count(headers),
        carried_retry_count=carried,
        origin_queue=origin if carried is not None and isinstance(origin, str) else None,
    )


def carried_text(counts: Counts) -> str:
    """The timeline's words for a carried retry header ("" when there is none)."""
    if counts.carried_retry_count is None:
        return ""
    origin = f" from {counts.origin_queue}" if counts.origin_queue else ""
    return f"carried retry {counts.carried_retry_count}{origin}"


@dataclass(frozen=True, slots=True)
class Step:
    """One decision about a message: in ``queue``, on ``attempt``, ``event`` (acked,
    retried, delayed, dead-lettered, dropped, ...)."""

    message_id: str
    queue: str
    event: str
    attempt: int


SERVER_DEAD_LETTER_OUTCOME = "rejected-to-dead-letter-route"
"""``rr run``'s log word for a dead-lettering the server carries out (docs/reference/runtime.md,
"Logs"); the timeline says ``dead-lettered``."""


@dataclass(frozen=True, slots=True)
class Hop:
    queue: str
    event: str
    attempt: int

    def text(self) -> str:
        return f"{self.queue}: {self.event} on attempt {self.attempt}"


def endings(steps: Iterable[Step]) -> dict[str, tuple[Hop, ...]]:
    """Each message's last decision in every queue it went through, in the order it reached
    them (a message back in a queue it left starts a new hop there)."""
    hops: dict[str, list[Hop]] = {}
    for step in steps:
        event = "dead-lettered" if step.event == SERVER_DEAD_LETTER_OUTCOME else step.event
        path = hops.setdefault(step.message_id, [])
        hop = Hop(step.queue, event, step.attempt)
        if path and path[-1].queue == step.queue:
            path[-1] = hop
        else:
            path.append(hop)
    return {message_id: tuple(path) for message_id, path in hops.items()}


def ending_text(hops: Iterable[Hop]) -> str:
    """``refunds: dead-lettered on attempt 5 -> refunds.dead: acked on attempt 1``."""
    return " -> ".join(hop.text() for hop in hops) or "not handled"
