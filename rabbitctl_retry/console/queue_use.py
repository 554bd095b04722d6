"""Pure. Who uses each queue of the console (docs/reference/console.md, "While a run moves a queue's
letters"): the pages that read it (a group's letters, a message, its body, an edit: each
reads without taking, holding what it read for a moment) and the one group run that moves
its letters.

A read and a run of one queue would take letters from each other: the read does not see
what the run holds (a message page said 404 for a letter being moved), and the run, finding
nothing to read for a while, ends early (a run of 1,000 stopped at 200). So a run has its
queue to itself: it starts once the reads under way are done, no read starts while it goes
on (the page says the letters are being moved), and a second run of the queue waits for the
first to end.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class QueueUse:
    readers: dict[str, int] = field(default_factory=dict)
    """Reads under way, by queue."""
    moving: dict[str, str] = field(default_factory=dict)
    """The run that moves each queue's letters (its job id), by queue."""

    def start_read(self, queue: str) -> str | None:
        """A page starts reading ``queue``: None, counted (end it with :meth:`end_read`);
        else the id of the run that moves its letters, and the page reads nothing."""
        moving = self.moving.get(queue)
        if moving is not None:
            return moving
        self.readers[queue] = self.readers.get(queue, 0) + 1
        return None

    def end_read(self, queue: str) -> None:
        left = self.readers.get(queue, 0) - 1
        if left > 0:
            self.readers[queue] = left
        else:
            self.readers.pop(queue, None)

    def start_move(self, queue: str, job_id: str) -> str | None:
        """A run of ``job_id`` is to move ``queue``'s letters: None, it has the queue (once
        :meth:`reading` says 0; end it with :meth:`end_move`); else the id of the run that
        has it already."""
        moving = self.moving.get(queue)
        if moving is not None:
            return moving
        self.moving[queue] = job_id
        return None

    def reading(self, queue: str) -> int:
        """Reads of ``queue`` under way (a run waits for 0 before it reads)."""
        return self.readers.get(queue, 0)

    def end_move(self, queue: str, job_id: str) -> None:
        if self.moving.get(queue) == job_id:
            del self.moving[queue]
