"""``rr run --workers N``: one supervisor process, N worker processes (docs/reference/runtime.md,
"Running it"); the supervisor's processes, signals, threads and scrapes (its decisions are
runtime/workers.py's, the command's glue cli/workers.py's).

Each worker is a normal ``rr run`` started again as ``python -m rabbitctl_retry`` with the
supervisor's own arguments (runtime/workers.py's :func:`worker_argv`) and the environment
marker ``RR_RUN_WORKER=K/N``: a process of its own, with its own interpreter (one Python
process uses one core), connection, consumers and graceful stop, started the way an operator
starts ``rr run``. A fresh interpreter rather than ``multiprocessing``: nothing of the
supervisor's state (threads, the metrics server, signal handlers) is inherited, and a worker
is exactly what one ``rr run`` is.

The topology is declared once: worker 1 starts first, with ``--declare`` (or the
``--no-declare`` asked for); the others start once it consumes, with ``--no-declare`` (they
only check), and so does every restarted worker. A worker tells the supervisor it consumes
by a file in the supervisor's folder (``worker-K.ready``), and where its metrics are by
another (``worker-K.port``). The supervisor serves ``--metrics-port`` itself and adds the
workers' pages up at each scrape (runtime/aggregate.py).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from rabbitctl_retry.runtime.workers import (
    KILL_GRACE_S,
    WORKER_DIR_ENV,
    WORKER_ENV,
    End,
    Slot,
    after_exit,
    describe_exit,
    final_code,
    worker_argv,
)

log = logging.getLogger("rr.runtime")

SCRAPE_TIMEOUT_S = 5.0
"""How long the supervisor waits for one worker's page or health at a scrape."""

PARENT_CHECK_S = 1.0
"""How often a worker looks whether its supervisor is still there."""
STOP_POLL_S = 0.1
"""How often the supervisor's loop looks at its workers and at a stop asked by a signal."""


def read_url(url: str, timeout_s: float) -> tuple[int, str]:
    """``GET url``: its HTTP status and body, whatever the status (a page of ``rr run
    --metrics-port``: a worker's, or a service's for ``rr status --service``); ``OSError``
    (``TimeoutError`` past ``timeout_s``) or ``ValueError`` when there is no answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return int(error.code), error.read().decode()


def ready_file(folder: Path, index: int) -> Path:
    """The file worker ``index`` creates once it consumes."""
    return folder / f"worker-{index}.ready"


def port_file(folder: Path, index: int) -> Path:
    """The file holding the port of worker ``index``'s metrics server."""
    return folder / f"worker-{index}.port"


def write_port(folder: Path, index: int, port: int) -> None:
    """Tell the supervisor where the worker's metrics are (whole or not at all)."""
    partial = folder / f".worker-{index}.port.partial"
    partial.write_text(str(port), encoding="utf-8")
    partial.replace(port_file(folder, index))


def watch_parent() -> None:
    """In a worker: stop gracefully (SIGTERM to itself) should the supervisor disappear
    without stopping it (killed with SIGKILL), rather than consume on, unsupervised."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        log.warning("the supervisor is gone; stopping", extra={"rr": {"supervisor": parent}})
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="rr-supervisor-watch", daemon=True).start()


@dataclass
class _Worker:
    slot: Slot
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    failures: int = 0
    """Deaths in a row."""
    ever_consumed: bool = False
    restart_at: float | None = None
    codes: list[int] = field(default_factory=list)


class Supervisor:
    """Starts, restarts and stops the workers; serves their metrics added up."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        count: int,
        declare: bool,
        metrics: bool,
        shutdown_timeout_s: float,
        folder: Path,
    ) -> None:
        self._argv = list(argv)
        self._declare = declare
        self._metrics = metrics
        self._shutdown_timeout_s = shutdown_timeout_s
        self.folder = folder
        self.count = count
        self._workers = [_Worker(Slot(index, count)) for index in range(1, count + 1)]
        self._stop_asked = False
        self._end_code: int | None = None
        self._last_pages: dict[int, str] = {}
        """Worker index -> its last page: what a scrape shows of a worker that does not answer
        in time (a busy one), so the sums never go down (see :meth:`page`)."""
        self._pages_lock = threading.Lock()

    # signals -------------------------------------------------------------------------

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        # Only a flag, which the run's loop reads every 0.1 s: a handler that took a lock (as
        # threading.Event.set does) would deadlock when the signal lands while the main
        # thread holds that very lock (it did: a supervisor that never stopped on SIGTERM).
        self._stop_asked = True

    def _on_hangup(self, signum: int, frame: FrameType | None) -> None:
        for worker in self._workers:  # each reloads its topology file
            if worker.process is not None and worker.process.poll() is None:
                worker.process.send_signal(signal.SIGHUP)

    # the run -------------------------------------------------------------------------

    def run(self) -> int:
        """Run the workers until SIGINT/SIGTERM or a worker's failure at start; the exit
        code."""
        previous = {
            signum: signal.signal(signum, handler)
            for signum, handler in (
                (signal.SIGINT, self._on_stop),
                (signal.SIGTERM, self._on_stop),
                (signal.SIGHUP, self._on_hangup),
            )
        }
        try:
            log.info("starting workers", extra={"rr": {"workers": self.count}})
            self._start(self._workers[0], declare=self._declare)
            others_started = False
            while not self._stop_asked:
                self._look_after(time.monotonic())
                if not others_started and self._workers[0].ever_consumed:
                    others_started = True
                    for worker in self._workers[1:]:
                        self._start(worker, declare=False)
                time.sleep(STOP_POLL_S)  # a signal's flag is read at most this late
            return self._stop_all()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _look_after(self, now: float) -> None:
        for worker in self._workers:
            process = worker.process
            if process is None:
                if worker.restart_at is not None and now >= worker.restart_at:
                    self._start(worker, declare=False)
                continue
            if not worker.ever_consumed and ready_file(self.folder, worker.slot.index).exists():
                worker.ever_consumed = True
            code = process.poll()
            if code is None:
                continue
            worker.process = None
            decision = after_exit(
                code,
                ran_s=now - worker.started_at,
                ever_consumed=worker.ever_consumed,
                failures=worker.failures,
            )
            fields = {"worker": worker.slot.index, "pid": process.pid}
            if isinstance(decision, End):
                log.error(
                    f"worker {worker.slot.index} (pid {process.pid}) exited with "
                    f"{describe_exit(code)} before it consumed; stopping the others",
                    extra={"rr": fields},
                )
                self._end_code = decision.code
                self._stop_asked = True
                return
            worker.failures = decision.failures
            worker.restart_at = now + decision.pause_s
            log.warning(
                f"worker {worker.slot.index} (pid {process.pid}) exited with "
                f"{describe_exit(code)}; restarting",
                extra={"rr": {**fields, "pause_s": decision.pause_s}},
            )

    def _start(self, worker: _Worker, *, declare: bool) -> None:
        index = worker.slot.index
        for stale in (ready_file(self.folder, index), port_file(self.folder, index)):
            stale.unlink(missing_ok=True)
        argv = worker_argv(self._argv, declare=declare, metrics=self._metrics)
        environment = {
            **os.environ,
            WORKER_ENV: worker.slot.label,
            WORKER_DIR_ENV: str(self.folder),
        }
        worker.process = subprocess.Popen(
            [sys.executable, "-m", "rabbitctl_retry", *argv], env=environment
        )
        worker.started_at = time.monotonic()
        worker.restart_at = None
        log.info(
            f"worker {index} started",
            extra={"rr": {"worker": index, "pid": worker.process.pid}},
        )

    def _stop_all(self) -> int:
        """SIGTERM to every worker; wait for them (each stops gracefully within
        --shutdown-timeout); kill those still running :data:`KILL_GRACE_S` later."""
        running = [w for w in self._workers if w.process is not None]
        log.info("stopping workers", extra={"rr": {"workers": len(running)}})
        for worker in running:
            assert worker.process is not None
            with contextlib.suppress(ProcessLookupError):
                worker.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self._shutdown_timeout_s + KILL_GRACE_S
        codes = []
        for worker in running:
            assert worker.process is not None
            try:
                code = worker.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error(
                    f"worker {worker.slot.index} (pid {worker.process.pid}) did not stop; "
                    "killing it",
                    extra={"rr": {"worker": worker.slot.index}},
                )
                worker.process.kill()
                code = worker.process.wait()
            codes.append(code)
        log.info("workers stopped", extra={"rr": {"codes": codes}})
        if self._end_code is not None:
            return self._end_code
        return final_code(codes)

    # metrics -------------------------------------------------------------------------

    def _read(self, index: int, path: str) -> tuple[int, str] | None:
        """Worker ``index``'s answer at ``path``; ``None`` when it does not answer."""
        try:
            port = int(port_file(self.folder, index).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        try:
            return read_url(f"http://127.0.0.1:{port}{path}", SCRAPE_TIMEOUT_S)
        except (OSError, ValueError):
            return None

    def _read_all(self, path: str) -> dict[int, tuple[int, str]]:
        with concurrent.futures.ThreadPoolExecutor(max_workers=self.count) as pool:
            answers = dict(
                zip(
                    range(1, self.count + 1),
                    pool.map(lambda index: self._read(index, path), range(1, self.count + 1)),
                    strict=True,
                )
            )
        return {index: answer for index, answer in answers.items() if answer is not None}

    def page(self) -> bytes:
        """``/metrics``: the workers' pages added up (every counter at 0 before any answers).

        A worker that does not answer within :data:`SCRAPE_TIMEOUT_S` (its loop busy beside a
        CPU hog) counts with its last page: leaving it out would make every sum drop, which
        Prometheus takes for a counter reset. ``rr_consuming`` is 0 then (docs/reference/runtime.md,
        "Workers across cores")."""
        from rabbitctl_retry.runtime.aggregate import merged_page
        from rabbitctl_retry.runtime.metrics import RunMetrics

        fresh = {
            index: body
            for index, (status, body) in self._read_all("/metrics").items()
            if status == 200
        }
        with self._pages_lock:
            self._last_pages.update(fresh)
            pages = dict(self._last_pages)
        if not pages:
            return RunMetrics().page()
        return merged_page(pages.values(), everyone=self.count, stale=len(pages) - len(fresh))

    def health(self) -> tuple[int, str]:
        """``/healthz``: 200 only when every worker consumes."""
        from rabbitctl_retry.runtime.aggregate import health_of, merged_health

        return merged_health(health_of(self._read_all("/healthz"), self.count))


@contextlib.contextmanager
def worker_folder() -> Iterator[Path]:
    """The supervisor's folder for its workers' files, removed at the end."""
    folder = Path(tempfile.mkdtemp(prefix="rr-run-workers-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


__all__ = ["Supervisor", "read_url", "ready_file", "watch_parent", "worker_folder", "write_port"]
