"""Pure. ``rr run --workers N``: what the supervisor decides (docs/reference/runtime.md, "Running
it").

* :func:`worker_argv`: a worker's command line, the supervisor's own minus ``--workers``,
  the declare switch and the metrics options, plus what the supervisor wants of the worker.
* :func:`after_exit`: what to do when a worker exits unasked: restart it after a pause that
  doubles while it keeps dying (0.5 s to 30 s, from 0.5 s again once it ran
  :data:`RESET_AFTER_S`), or end the supervisor with the worker's code when the worker failed
  at its first start, before it ever consumed (a bad handler import, refused credentials:
  restarting would fail the same way).
* :func:`final_code`: the supervisor's exit code from the workers' exit codes.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rabbitctl_retry.runtime.backoff import Backoff

MAX_WORKERS = 64
"""The most ``--workers``: one process per core of a big machine, each with a connection."""

WORKER_ENV = "RR_RUN_WORKER"
"""Set in a worker's environment to ``K/N`` (worker K of N): the internal marker that makes
``rr run`` a worker of a supervisor, not a supervisor itself."""

WORKER_DIR_ENV = "RR_RUN_WORKER_DIR"
"""The supervisor's folder for its workers' files (readiness, metrics port)."""

RESTART_BACKOFF = Backoff(initial_s=0.5, max_s=30.0)
"""The pause before restarting a worker that died, by how often in a row it died."""

RESET_AFTER_S = 60.0
"""A worker that ran this long before dying starts its pauses from 0.5 s again."""

KILL_GRACE_S = 15.0
"""How long past ``--shutdown-timeout`` the supervisor waits for a stopping worker before it
kills it: a worker closes its connection after the timeout with 5 s more for the handshake."""

_DROPPED_WITH_VALUE = ("--workers", "--metrics-port", "--metrics-bind")
_DROPPED_FLAGS = ("--declare", "--no-declare")


@dataclass(frozen=True, slots=True)
class Slot:
    """Worker ``index`` (from 1) of ``count``."""

    index: int
    count: int

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: str) -> Slot | None:
        """``"2/4"`` -> worker 2 of 4; ``None`` for anything else."""
        index, _, count = text.partition("/")
        if not (index.isdecimal() and count.isdecimal()):
            return None
        slot = cls(int(index), int(count))
        return slot if 1 <= slot.index <= slot.count <= MAX_WORKERS else None


def worker_argv(argv: Sequence[str], *, declare: bool, metrics: bool) -> list[str]:
    """A worker's arguments (after ``python -m rabbitctl_retry``), from the supervisor's
    ``argv`` (``sys.argv[1:]``): ``--workers``, ``--declare``/``--no-declare``,
    ``--metrics-port`` and ``--metrics-bind`` taken out; ``--declare`` or ``--no-declare``
    as ``declare`` says; with ``metrics``, a metrics server on a port of the system's choice
    on 127.0.0.1, which only the supervisor reads."""
    kept: list[str] = []
    skip_value = False
    for argument in argv:
        if skip_value:
            skip_value = False
            continue
        name = argument.partition("=")[0]
        if name in _DROPPED_WITH_VALUE:
            skip_value = "=" not in argument
            continue
        if argument in _DROPPED_FLAGS:
            continue
        kept.append(argument)
    kept.append("--declare" if declare else "--no-declare")
    if metrics:
        kept += ["--metrics-port", "0", "--metrics-bind", "127.0.0.1"]
    return kept


@dataclass(frozen=True, slots=True)
class Restart:
    """Start the worker again after ``pause_s``; ``failures``: its deaths in a row."""

    pause_s: float
    failures: int


@dataclass(frozen=True, slots=True)
class End:
    """Stop the other workers and exit with ``code``."""

    code: int


def after_exit(code: int, *, ran_s: float, ever_consumed: bool, failures: int) -> Restart | End:
    """What to do when a worker exits with ``code`` (negative: killed by that signal) after
    running ``ran_s``, without the supervisor asking. ``ever_consumed``: whether this worker
    consumed at some point since the supervisor started; ``failures``: its deaths in a row
    before this one."""
    if code > 0 and not ever_consumed:
        return End(code)  # it failed at start: so would the next try
    failures = 1 if ran_s >= RESET_AFTER_S else failures + 1
    return Restart(pause_s=RESTART_BACKOFF.delay_s(failures), failures=failures)


def exit_status(code: int) -> int:
    """A process exit code as a shell shows it: killed by signal N is 128 + N."""
    return 128 - code if code < 0 else code


def describe_exit(code: int) -> str:
    """``"exit 78"`` or ``"signal SIGKILL"``, for the log."""
    if code >= 0:
        return f"exit {code}"
    try:
        return f"signal {signal.Signals(-code).name}"
    except ValueError:
        return f"signal {-code}"


STOPPED_AS_ASKED = frozenset({0, -signal.SIGTERM, -signal.SIGINT, 130})
"""A worker's exit codes that are a clean stop when the supervisor asked for one: 0, or ended
by the signal itself (or ``rr: interrupted``, 130) while it still started, before it could
catch it: it had consumed nothing."""


def final_code(codes: Iterable[int]) -> int:
    """The supervisor's exit code once every worker stopped on its request: 0 when every
    worker stopped cleanly, else the first worker's code that was not (as a shell shows it)."""
    for code in codes:
        if code not in STOPPED_AS_ASKED:
            return exit_status(code)
    return 0


__all__ = [
    "KILL_GRACE_S",
    "MAX_WORKERS",
    "RESET_AFTER_S",
    "End",
    "Restart",
    "Slot",
    "after_exit",
    "describe_exit",
    "exit_status",
    "final_code",
    "worker_argv",
]
