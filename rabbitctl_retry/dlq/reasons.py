"""Pure. The reasons a transfer (``rr dlq replay``, ``rr dlq move``) gives for each message it
leaves where it was, in its command's words (docs/reference/dlq.md)."""

from __future__ import annotations

from dataclasses import dataclass

from rabbitctl_retry.dlq.report import TransferKind
from rabbitctl_retry.errors import AccessRefused, PublishFailed


@dataclass(frozen=True, slots=True)
class Reasons:
    """The reasons a run gives for the messages it leaves, in its command's words."""

    item: str
    """``dead letter`` or ``message``."""
    place: str
    """Where such a message stays: ``the dead-letter queue`` or ``the source queue``."""
    past: str
    """``replayed`` or ``moved``."""
    doing: str
    """``replaying`` or ``moving``: the progress bar's word."""
    copies: bool = True
    """The run publishes copies (a purge does not: a message whose ack is unknown may only
    still be there, never in two places)."""

    def not_sent_interrupted(self) -> str:
        return (
            f"not {self.past}: the run was interrupted before its copy was sent; it is still "
            f"in {self.place}"
        )

    def unconfirmed_copy(self, to: str | None) -> str:
        return (
            f"interrupted before the broker confirmed the copy: it may also have reached "
            f"{to!r} (possible duplicate); the {self.item} stays"
        )

    def unconfirmed_ack(self) -> str:
        after = "possible duplicate" if self.copies else "a rerun purges it"
        return (
            f"{self.past}, but the connection closed before the broker confirmed the "
            f"{self.item}'s ack: it may still be in {self.place} ({after})"
        )

    def refused_copy(self, error: AccessRefused) -> str:
        return (
            f"the broker refused the copy ({error}): it reached no queue; the {self.item} "
            "stays; rr's user needs write permission on the default exchange"
        )

    def publish_failure(self, error: PublishFailed, to: str) -> str:
        text = str(error)
        if "NO_ROUTE" in text or "returned" in text:
            return f"no queue {to!r} took the copy (the broker returned it); the {self.item} stays"
        return f"the broker refused the copy ({text}); the {self.item} stays"

    def unreadable(self, error: Exception) -> str:
        return f"cannot read this {self.item}: {type(error).__name__}: {error}"


REASONS = {
    TransferKind.REPLAY: Reasons("dead letter", "the dead-letter queue", "replayed", "replaying"),
    TransferKind.MOVE: Reasons("message", "the source queue", "moved", "moving"),
    TransferKind.PURGE: Reasons("message", "the queue", "purged", "purging", copies=False),
}
