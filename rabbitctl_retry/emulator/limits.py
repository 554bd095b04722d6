"""A queue's length limits: which message takes it over, and which publisher it refuses.

``x-max-length`` / ``x-max-length-bytes`` count ready messages only. A classic queue refuses
(``reject-publish``) a message that would take it over its limit; a quorum queue overshoots
by one before it refuses, and blocks its publishers until it falls to its soft limit.
"""

from __future__ import annotations

from rabbitctl_retry.emulator.model import EmulatedQueue, StoredMessage

AT_MOST_ONCE = object()
"""The publisher of an at-most-once dead letter: the server sends it untracked, and a quorum
queue's ``reject-publish`` never refuses it (:func:`refuses`)."""


def refuses(q: EmulatedQueue, message: StoredMessage, publisher: object) -> bool:
    """reject-publish: does ``q`` refuse ``message`` from ``publisher``?

    A classic queue refuses a message that would take it over its limit. A quorum queue
    (``rabbit_fifo``) takes a message while it is not over its limit, so it goes over by
    one. The message that takes it over its limit makes it refuse every publisher that
    published to it before (each stays refused until the queue's ready messages fall to
    80 % of the limit, the soft limit: :func:`block_publishers`), and a publisher it
    refuses for being over is refused likewise; a publisher new to it is refused only
    while the queue is over its limit (measured on 3.10.8 and 4.0.5; the emulator
    unblocks when a blocked publisher publishes again). An
    at-most-once dead letter (:data:`AT_MOST_ONCE`) is never refused by a quorum queue: it
    takes it over its limit (measured on 3.10.8 and 4.0.5: four dead letters into
    ``x-max-length = 1`` are four ready messages).
    """
    if not q.is_quorum:
        return _would_overflow(q, message)
    if publisher is AT_MOST_ONCE:
        return False
    if q.blocked and _below_soft_limit(q):
        q.blocked.clear()
    if publisher in q.blocked:
        return True
    q.enqueuers.add(publisher)
    if q.over_limit():
        q.blocked.add(publisher)
        return True
    return False


def block_publishers(q: EmulatedQueue) -> None:
    """Quorum reject-publish: a message took ``q`` over its limit; it tells every publisher
    it knows to stop (rabbit_fifo's reject_publish status)."""
    if q.is_quorum and q.settings.overflow == "reject-publish" and q.over_limit():
        q.blocked |= q.enqueuers


def _would_overflow(q: EmulatedQueue, message: StoredMessage) -> bool:
    settings = q.settings
    return (settings.max_length is not None and len(q.ready) + 1 > settings.max_length) or (
        settings.max_length_bytes is not None
        and q.ready_bytes + len(message.body) > settings.max_length_bytes
    )


def _below_soft_limit(q: EmulatedQueue) -> bool:
    settings = q.settings
    return (settings.max_length is None or len(q.ready) <= int(settings.max_length * 0.8)) and (
        settings.max_length_bytes is None or q.ready_bytes <= int(settings.max_length_bytes * 0.8)
    )
