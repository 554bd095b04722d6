"""Pure. What became of one copy rr published: the one vocabulary of every sender.

Every copy rr makes goes through one of two senders, and both answer in these words: the
transfers' and the import's (``ops/copies/sending.py``
:class:`~rabbitctl_retry.ops.copies.sending.CopySender`: in order, paced, the first copy
alone) and ``rr run``'s (``ops/copies/publisher.py``
:class:`~rabbitctl_retry.ops.copies.publisher.CopyPublisher`: retry, dead-letter and delayed
copies). A publish is classified once, here, from what the port
raised (:func:`classified`); each caller decides what the outcome means for its message.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from rabbitctl_retry.errors import AccessRefused, PublishFailed, TransportError


class Sent(Enum):
    CONFIRMED = "confirmed"
    """The broker confirmed it (on a channel without confirms, ``publish = "fast"``: it was
    written)."""
    REFUSED = "refused"
    """Returned (no queue took it) or nacked, or access refused to a copy that went alone:
    it reached no queue."""
    UNENCODABLE = "unencodable"
    """The client could not encode it: it was never sent."""
    CUT = "cut"
    """The channel or connection failed under it (or could not be opened for it): it may
    have arrived."""


@dataclass(frozen=True, slots=True)
class SendResult:
    outcome: Sent
    error: BaseException | None = None
    """What the broker or the client said, for every outcome but ``CONFIRMED``."""


CONFIRMED = SendResult(Sent.CONFIRMED)


def classified(error: Exception | None, *, alone: bool = False) -> SendResult:
    """What became of a copy whose publish raised ``error`` (``None``: it returned).

    ``alone``: no other copy was in flight on the channel. A refusal of access closes the
    channel; it reached no queue, but every other copy in flight on that channel is cut, and
    so, for a copy that was not alone, is its own answer's meaning.
    """
    if error is None:
        return CONFIRMED
    if isinstance(error, PublishFailed):
        return SendResult(Sent.REFUSED, error)
    if isinstance(error, AccessRefused):
        return SendResult(Sent.REFUSED if alone else Sent.CUT, error)
    if isinstance(error, TransportError):
        return SendResult(Sent.CUT, error)
    return SendResult(Sent.UNENCODABLE, error)
