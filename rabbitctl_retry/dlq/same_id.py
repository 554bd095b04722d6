"""Pure. The dead letters of a read that carry one message id: how ``rr dlq edit`` and the
console find the letter to edit (the ``nth`` of them in queue order), and what they say when
there is none or more than one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from rabbitctl_retry.dlq.letter import Read

R = TypeVar("R", bound=Read)

SHOWN_POSITIONS = 10
"""Positions of letters with the id an error message lists."""


@dataclass(slots=True)
class SameId(Generic[R]):
    message_id: str
    nth: int = 1
    """Which of them is wanted (1: the first in the queue)."""
    letter: R | None = None
    """The ``nth``, once read."""
    position: int = 0
    """Its position in the queue (1: the head)."""
    positions: list[int] = field(default_factory=list)
    """The positions of the first :data:`SHOWN_POSITIONS` with the id."""
    count: int = 0
    """How many letters read carry the id."""
    read: int = 0

    def look(self, delivery: R) -> bool:
        """A ``scan_messages`` callback: every letter is looked at (the count is needed)."""
        self.read += 1
        if delivery.properties.message_id == self.message_id:
            self.count += 1
            if len(self.positions) < SHOWN_POSITIONS:
                self.positions.append(self.read)
            if self.count == self.nth:
                self.letter, self.position = delivery, self.read
        return True
