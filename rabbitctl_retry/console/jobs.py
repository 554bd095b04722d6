"""The console's runs in progress: a group retried or discarded runs as a task of the console's
event loop while its page refreshes; each job counts what the transfer engine read (it is the
engine's progress sink) and keeps its report's lines once done. A run has its queue to
itself (console/queue_use.py): it starts once the pages reading the queue are done, and no
page reads it meanwhile (:class:`BeingMoved`)."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from rabbitctl_retry.console.queue_use import QueueUse
from rabbitctl_retry.errors import RrError, censor_urls

MAX_JOBS = 100
"""Jobs kept (the oldest finished ones go first)."""


@dataclass(slots=True)
class Job:
    id: str
    title: str
    queue: str
    total: int = 0
    examined: int = 0
    running: bool = True
    lines: list[str] = field(default_factory=list)
    error: str | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the console stops: the engine finishes the copies under way, sends no more."""

    # the transfer engine's progress sink (ops/dlq.py ProgressSink)
    def begin(self, total: int, description: str) -> None:
        self.total = total

    def advance(self, count: int = 1) -> None:
        self.examined += count


class BeingMoved(Exception):
    """A page would read a queue whose letters a run moves now (or a second run would move
    them): it reads nothing, and says so."""

    def __init__(self, queue: str, job: Job | None) -> None:
        super().__init__(queue)
        self.queue = queue
        self.job = job


class Jobs:
    def __init__(self) -> None:
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self._use = QueueUse()
        self._read_ended = asyncio.Event()

    @contextlib.asynccontextmanager
    async def reading(self, queue: str) -> AsyncIterator[None]:
        """A page reads ``queue`` inside: :class:`BeingMoved` when a run moves its letters."""
        moving = self._use.start_read(queue)
        if moving is not None:
            raise BeingMoved(queue, self._jobs.get(moving))
        try:
            yield
        finally:
            self._use.end_read(queue)
            self._read_ended.set()

    def start(self, title: str, queue: str, work: Callable[[Job], Awaitable[list[str]]]) -> Job:
        """A run of ``work`` on ``queue``'s letters (:class:`BeingMoved` while another one
        moves them)."""
        job = Job(id=secrets.token_hex(8), title=title, queue=queue)
        moving = self._use.start_move(queue, job.id)
        if moving is not None:
            raise BeingMoved(queue, self._jobs.get(moving))
        self._jobs[job.id] = job
        self._forget_old()
        task = asyncio.ensure_future(self._run(job, work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    async def _run(self, job: Job, work: Callable[[Job], Awaitable[list[str]]]) -> None:
        try:
            while self._use.reading(job.queue):  # the reads under way end first
                self._read_ended.clear()
                await self._read_ended.wait()
            job.lines = await work(job)
        except RrError as error:
            job.error = censor_urls(str(error))
        except Exception as error:  # a page must say what became of the run
            job.error = censor_urls(f"{type(error).__name__}: {error}")
        finally:
            self._use.end_move(job.queue, job.id)
            job.running = False

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
