"""An ``rr run`` process of a fault test: started with a topology and a handler module of the
test's own, stopped with a signal, its output kept in a file.

The handler module appends one line per call to the file ``$RR_FAULT_CALLS``
(``message_id attempt outcome``), so the test counts every handler call of every process,
whatever happened to the process.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.ledger import Ledger, OutcomeOf

REPO = Path(__file__).parents[2]


@dataclass
class RrRun:
    process: subprocess.Popen[bytes]
    log: Path
    """Its stdout and stderr (a file, not a pipe: a pipe nobody reads would fill up and
    stall rr run's logging)."""

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def rr_process(
    tmp_path: Path, *args: str, log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``python -m rabbitctl_retry ARGS`` in ``tmp_path``, this checkout's package first on its
    path, ``$RR_URL`` unset unless ``env`` sets it; its output in the file ``log``."""
    environment = dict(os.environ)
    environment.pop("RR_URL", None)
    environment.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), environment.get("PYTHONPATH")])),
        **(env or {}),
    )
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "rabbitctl_retry", *args],
            env=environment,
            cwd=tmp_path,
            stdout=output,
            stderr=subprocess.STDOUT,
        )


@contextmanager
def rr_run(
    tmp_path: Path,
    url: str,
    *,
    topology: str,
    handlers: str,
    env: dict[str, str] | None = None,
    args: Sequence[str] = (),
) -> Iterator[RrRun]:
    """``rr run`` of ``handlers`` (Python source) with ``topology`` (TOML) against ``url``,
    handler calls counted in ``tmp_path/calls.txt``; killed at the end if still running."""
    (tmp_path / "topology.toml").write_text(topology)
    (tmp_path / "fault_handlers.py").write_text(textwrap.dedent(handlers))
    log = tmp_path / f"rr-run-{len(list(tmp_path.glob('rr-run-*.log')))}.log"
    process = rr_process(
        tmp_path,
        "run",
        str(tmp_path / "fault_handlers.py"),
        "--topology",
        str(tmp_path / "topology.toml"),
        *args,
        log=log,
        env={"RR_FAULT_CALLS": str(tmp_path / "calls.txt"), "RR_URL": url, **(env or {})},
    )
    try:
        yield RrRun(process, log)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def calls_of(calls: Path) -> list[tuple[str, int, str]]:
    """Every handler call in the file ``calls``: (message id, attempt, outcome name)."""
    if not calls.exists():
        return []
    found = []
    # only whole lines: the last one may be half written by a handler still running (seen
    # once in a clean-clone CI run)
    for line in calls.read_text().split("\n")[:-1]:
        message_id, attempt, kind = line.split()
        found.append((message_id, int(attempt), kind))
    return found


def ledger_of(calls: Path, outcome_of: OutcomeOf, *, max_attempts: int = 3) -> Ledger:
    """The :class:`Ledger` of every handler call in the file ``calls`` (:func:`calls_of`)."""
    ledger = Ledger(outcome_of=outcome_of, max_attempts=max_attempts)
    for message_id, attempt, kind in calls_of(calls):
        ledger.calls[message_id] += 1
        ledger.attempts.setdefault(message_id, []).append(attempt)
        if kind == "Ack":
            ledger.acked[message_id] += 1
    return ledger


def handled(calls: Path) -> int:
    """Handler calls so far."""
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def attempts_seen(calls: Path, attempt: int) -> Counter[str]:
    """Handler calls at ``attempt``, by message id."""
    return Counter(m for m, seen, _ in calls_of(calls) if seen == attempt)


async def until(predicate: Callable[[], object], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def stop(run: RrRun, signum: int = signal.SIGTERM) -> tuple[int, float, str]:
    """Send ``signum``; (exit code, seconds it took to exit, its output)."""
    started = time.monotonic()
    run.process.send_signal(signum)
    code = await asyncio.to_thread(run.process.wait, 180)
    return code, time.monotonic() - started, run.output()
