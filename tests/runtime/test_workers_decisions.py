"""The pure decisions of ``rr run --workers N`` (runtime/workers.py, runtime/aggregate.py):
a worker's arguments, what to do when a worker exits, the supervisor's exit code, and one
``/metrics`` page and ``/healthz`` answer for all workers."""

from __future__ import annotations

import pytest

from rabbitctl_retry.runtime.aggregate import WorkerHealth, health_of, merged_health, merged_page
from rabbitctl_retry.runtime.metrics import RunMetrics
from rabbitctl_retry.runtime.workers import (
    RESET_AFTER_S,
    End,
    Restart,
    Slot,
    after_exit,
    describe_exit,
    final_code,
    worker_argv,
)
from tests.metrics_page import sample


def test_a_worker_runs_the_same_command_without_workers_and_metrics_options() -> None:
    argv = ["--profile", "p", "run", "svc", "-t", "t.toml", "--workers", "4", "--prefetch", "10"]
    argv += ["--metrics-port=9100", "--metrics-bind", "0.0.0.0", "--declare"]
    assert worker_argv(argv, declare=False, metrics=True) == [
        *["--profile", "p", "run", "svc", "-t", "t.toml", "--prefetch", "10"],
        *["--no-declare", "--metrics-port", "0", "--metrics-bind", "127.0.0.1"],
    ]
    assert worker_argv(
        ["run", "svc", "--workers=2", "--no-declare"], declare=True, metrics=False
    ) == [
        "run",
        "svc",
        "--declare",
    ]


def test_the_worker_marker_parses() -> None:
    assert Slot.parse("2/4") == Slot(2, 4)
    assert Slot.parse("2/4").label == "2/4"  # type: ignore[union-attr]
    for bad in ("", "0/4", "5/4", "x/4", "2/65", "2", "-1/2"):
        assert Slot.parse(bad) is None, bad


def test_a_worker_that_fails_at_its_first_start_ends_the_supervisor() -> None:
    for code in (78, 77, 69, 1):
        assert after_exit(code, ran_s=1.0, ever_consumed=False, failures=0) == End(code)


def test_a_worker_killed_before_it_consumed_is_restarted() -> None:
    assert after_exit(-9, ran_s=1.0, ever_consumed=False, failures=0) == Restart(0.5, 1)


def test_the_pause_doubles_while_a_worker_keeps_dying_and_resets_after_a_long_run() -> None:
    failures = 0
    pauses = []
    for _ in range(9):
        decision = after_exit(-9, ran_s=1.0, ever_consumed=True, failures=failures)
        assert isinstance(decision, Restart)
        pauses.append(decision.pause_s)
        failures = decision.failures
    assert pauses == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    # an error code after it consumed restarts too (a crash, not a start failure)
    again = after_exit(70, ran_s=RESET_AFTER_S, ever_consumed=True, failures=failures)
    assert again == Restart(0.5, 1)


def test_the_supervisor_exit_code() -> None:
    assert final_code([0, 0, 0]) == 0
    assert final_code([0, 1, 0]) == 1
    assert final_code([0, -9]) == 137
    assert final_code([0, 3, 1]) == 3
    # ended by the SIGTERM (or Ctrl-C) itself while it still started: consumed nothing
    assert final_code([-15, -2, 130, 0]) == 0
    assert describe_exit(-9) == "signal SIGKILL"
    assert describe_exit(3) == "exit 3"


def _page(acked: int, in_flight: int, *, consuming: bool) -> str:
    from rabbitctl_retry.retry.policy import Decision, Event, RejectAction

    metrics = RunMetrics()
    decision = Decision(action=RejectAction(requeue=False), event=Event.ACKED, attempt=1)
    for _ in range(acked):
        metrics.on_decision("work", None, decision)  # type: ignore[arg-type]
    page = metrics.page().decode()
    page = page.replace("rr_in_flight 0.0", f"rr_in_flight {in_flight}.0")
    return page.replace("rr_consuming 0.0", f"rr_consuming {1.0 if consuming else 0.0}")


def test_the_pages_are_added_up_and_consuming_only_when_all_are() -> None:
    one, two = _page(3, 2, consuming=True), _page(4, 5, consuming=True)
    page = merged_page([one, two], everyone=2).decode()
    assert sample(page, "rr_decisions_total", queue="work", outcome="acked") == 7
    assert sample(page, "rr_in_flight") == 7
    assert sample(page, "rr_consuming") == 1
    assert "# TYPE rr_decisions_total counter" in page
    half = merged_page([one, _page(4, 5, consuming=False)], everyone=2).decode()
    assert sample(half, "rr_consuming") == 0
    missing = merged_page([one], everyone=2).decode()  # worker 2 does not answer
    assert sample(missing, "rr_consuming") == 0
    assert sample(missing, "rr_decisions_total", queue="work", outcome="acked") == 3
    # worker 2 did not answer this time: its last page counts, and nobody says it consumes
    stale = merged_page([one, two], everyone=2, stale=1).decode()
    assert sample(stale, "rr_decisions_total", queue="work", outcome="acked") == 7
    assert sample(stale, "rr_consuming") == 0


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        ({1: (200, "consuming\n"), 2: (200, "consuming\n")}, (200, "consuming\n")),
        ({}, (503, "starting\nworker 1: starting\nworker 2: starting\n")),
        ({1: (200, "consuming\n")}, (503, "starting\nworker 2: starting\n")),
        (
            {1: (200, "consuming\n"), 2: (503, "not consuming\n")},
            (503, "not consuming\nworker 2: not consuming\n"),
        ),
    ],
)
def test_healthz_is_200_only_when_every_worker_consumes(
    answers: dict[int, tuple[int, str]], expected: tuple[int, str]
) -> None:
    assert merged_health(health_of(answers, 2)) == expected


def test_no_worker_yet_is_starting() -> None:
    assert merged_health([]) == (503, "starting\n")
    assert WorkerHealth(1, 0, "").state == "starting"
