"""The console's runs: a group retried, moved or discarded runs as a task of the console's
event loop while its page refreshes; each job counts what the transfer engine read (it is the
engine's progress sink) and keeps its report once done. A run has its queue to itself
(console/queue_use.py): it starts once the pages reading the queue are done, and no page reads
it meanwhile (:class:`BeingMoved`). An edit, done within its request, is kept as a finished
job (:meth:`Jobs.record`), so that the runs page and the record hold every action; each job
that ends is told to ``on_done`` (the record: console/audit.py)."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from rabbitctl_retry.console.queue_use import QueueUse
from rabbitctl_retry.dlq.report import TransferReport, transfer_summary
from rabbitctl_retry.errors import RrError, censor_urls

MAX_JOBS = 100
"""Jobs kept (the oldest finished ones go first)."""


def new_job_id() -> str:
    return secrets.token_hex(8)


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class Job:
    id: str
    title: str
    queue: str
    action: str = ""
    """What was asked: ``retry``, ``move``, ``discard`` or ``edit``."""
    letters: str = ""
    """Which letters: ``group ID`` or ``message ID``."""
    to: str | None = None
    """A move's target."""
    total: int = 0
    examined: int = 0
    confirmed: int = 0
    """Letters done with: copies the broker confirmed, letters discarded (the engine's
    ``confirmed`` hook, ``ops/transfer.py``): what the progress bar counts."""
    expected: int | None = None
    """How many its plan said would go (the bar's end), when it had a plan."""
    notes: list[str] = field(default_factory=list)
    """Lines the run adds to its report (what of a selection was not found)."""
    running: bool = True
    report: TransferReport | None = None
    lines: list[str] = field(default_factory=list)
    error: str | None = None
    started_at: datetime = field(default_factory=_now)
    ended_at: datetime | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the console stops: the engine finishes the copies under way, sends no more."""

    @classmethod
    def one_letter(cls, action: str, queue: str, message_id: str) -> Job:
        """A run on one letter of ``queue``: ``retry`` (unchanged) or ``edit``."""
        verb = "Retry" if action == "retry" else "Edit and retry"
        return cls(
            id=new_job_id(),
            title=f"{verb} {message_id} of {queue}",
            queue=queue,
            action=action,
            letters=f"message {message_id}",
            expected=1,
        )

    @property
    def stopped_by_the_console(self) -> bool:
        """The console stopped while it ran: its report says how far it went."""
        return self.stop.is_set()

    # the transfer engine's progress sink (ops/dlq.py ProgressSink)
    def begin(self, total: int, description: str) -> None:
        self.total = total

    def advance(self, count: int = 1) -> None:
        self.examined += count

    def confirm(self, count: int = 1) -> None:
        """The engine's ``confirmed`` hook (``TransferOptions.confirmed``)."""
        self.confirmed += count


class BeingMoved(Exception):
    """A page would read a queue whose letters a run moves now (or a second run would move
    them): it reads nothing, and says so."""

    def __init__(self, queue: str, job: Job | None) -> None:
        super().__init__(queue)
        self.queue = queue
        self.job = job


Work = Callable[[Job], Awaitable[TransferReport | None]]
"""A run: the engine's report (None: it ended before its first report)."""


class Jobs:
    def __init__(self, on_done: Callable[[Job], None] = lambda job: None) -> None:
        self._on_done = on_done
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self._use = QueueUse()
        self._read_ended = asyncio.Event()
        self._read_turns: dict[str, asyncio.Lock] = {}
        """One page reads a queue at a time: two reads at once would each miss the letters
        the other holds (two groups pages loaded together both came out short)."""

    @contextlib.asynccontextmanager
    async def reading(self, queue: str) -> AsyncIterator[None]:
        """A page reads ``queue`` inside: :class:`BeingMoved` when a run moves its letters."""
        moving = self._use.start_read(queue)
        if moving is not None:
            raise BeingMoved(queue, self._jobs.get(moving))
        turn = self._read_turns.setdefault(queue, asyncio.Lock())
        try:
            async with turn:
                yield
        finally:
            self._use.end_read(queue)
            self._read_ended.set()

    def start(self, job: Job, work: Work) -> Job:
        """``job``, a run of ``work`` on its queue's letters (:class:`BeingMoved` while another
        one moves them)."""
        queue = job.queue
        moving = self._use.start_move(queue, job.id)
        if moving is not None:
            raise BeingMoved(queue, self._jobs.get(moving))
        self._jobs[job.id] = job
        self._forget_old()
        task = asyncio.ensure_future(self._run(job, work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    def record(self, job: Job, report: TransferReport | None, lines: list[str]) -> None:
        """An action done within its request (an edit): kept and told as a finished run."""
        self._jobs[job.id] = job
        self._forget_old()
        self._finish(job, report, lines)

    def using(self, queue: str) -> str | None:
        """What this console does with ``queue`` now: ``moving`` (a run), ``reading`` (a
        page), or None; its depth then lacks the letters the console holds."""
        if queue in self._use.moving:
            return "moving"
        return "reading" if self._use.reading(queue) else None

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def all(self) -> list[Job]:
        """The runs kept, newest first."""
        return list(reversed(self._jobs.values()))

    async def _run(self, job: Job, work: Work) -> None:
        report: TransferReport | None = None
        try:
            while self._use.reading(job.queue):  # the reads under way end first
                self._read_ended.clear()
                await self._read_ended.wait()
            report = await work(job)
        except RrError as error:
            job.error = censor_urls(str(error))
        except Exception as error:  # a page must say what became of the run
            job.error = censor_urls(f"{type(error).__name__}: {error}")
        finally:
            self._use.end_move(job.queue, job.id)
            lines = transfer_summary(report).splitlines() if report is not None else []
            if report is None and job.error is None:
                lines = ["nothing was read"]
            lines += job.notes
            self._finish(job, report, lines)

    def _finish(self, job: Job, report: TransferReport | None, lines: list[str]) -> None:
        job.report = report
        job.lines = lines
        job.ended_at = _now()
        job.running = False
        self._on_done(job)

    def _forget_old(self) -> None:
        while len(self._jobs) > MAX_JOBS:
            oldest = next((key for key, job in self._jobs.items() if not job.running), None)
            if oldest is None:
                return
            del self._jobs[oldest]

    async def close(self) -> None:
        """Stop every run cleanly (copies under way finish; their letters are acked)."""
        for job in self._jobs.values():
            job.stop.set()
        if self._tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait(self._tasks, timeout=30)
