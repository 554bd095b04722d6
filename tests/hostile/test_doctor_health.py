"""``rr doctor``'s alarms from hostile management APIs (docs/reference/cli.md, "rr doctor"), played
by a fake one of the test's own (tests/hostile/fake_management.py), with the emulator as the
AMQP server (RabbitMQ 4.3.6): an ``/api/nodes`` answer of the wrong shape is one
``alarms-not-checked`` warning naming what was wrong (exit 0, never 70, the password never
shown); one that states an alarm is a ``node-alarm`` error (exit 1)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.hostile.fake_management import SECRET, Answer, FakeManagement
from tests.hostile.test_doctor_deprecated import doctor, document, finding

NODES_PATH = (
    "/api/nodes?columns=name,running,mem_alarm,disk_free_alarm,mem_used,mem_limit,disk_free,"
    "disk_free_limit"
)


@pytest.fixture
def api() -> Iterator[FakeManagement]:
    with FakeManagement() as fake:
        fake.speak_for("4.3.6")
        yield fake


def test_a_malformed_nodes_answer_is_one_warning(api: FakeManagement) -> None:
    api.answer(NODES_PATH, Answer.json([{"name": "rabbit@fake", "running": "yes"}]))

    result = doctor("--management-url", api.url(), "-o", "json")

    assert result.exit_code == 0, result.output
    assert finding(document(result), "alarms-not-checked") == {
        "code": "alarms-not-checked",
        "level": "warning",
        "queue": None,
        "message": "not checked: the nodes' memory and disk alarms (GET /api/nodes): the "
        f"management API at http://svc:******@127.0.0.1:{api.port}/ gave an unexpected answer "
        f"to GET {NODES_PATH} (a node without a 'name' text and a 'running' boolean, a running "
        "node without 'mem_alarm' and 'disk_free_alarm' booleans, or a byte count that is not "
        "an integer; is it RabbitMQ's management plugin?)",
    }


def test_an_alarm_the_api_states_is_an_error_and_exit_1(api: FakeManagement) -> None:
    api.answer(
        NODES_PATH,
        Answer.json(
            [
                {
                    "name": "rabbit@fake",
                    "running": True,
                    "mem_alarm": False,
                    "disk_free_alarm": True,
                    "disk_free": 12_000_000,
                    "disk_free_limit": 50_000_000,
                }
            ]
        ),
    )

    result = doctor("--management-url", api.url(), "-o", "json")

    assert result.exit_code == 1, result.output
    parsed = document(result)
    assert (parsed["safe"], parsed["healthy"]) == (True, False)
    assert finding(parsed, "node-alarm")["message"].startswith(
        "node 'rabbit@fake' has a disk alarm: 12.0 MB free, its limit 50.0 MB: "
    )
    assert SECRET not in result.output


def test_a_malformed_table_leaves_the_alarms_checked(api: FakeManagement) -> None:
    """The deprecated-features table and ``/api/nodes`` are paths of their own: one that
    fails does not stop the other."""
    api.answer("/api/deprecated-features", Answer.json({"not": "a list"}))
    api.answer(
        NODES_PATH,
        Answer.json([{"name": "rabbit@fake", "running": True, "mem_alarm": False}]),
    )
    result = doctor("--management-url", api.url(), "-o", "json")
    assert result.exit_code == 0, result.output
    assert finding(document(result), "alarms-not-checked")["level"] == "warning"  # disk missing

    api.answer(NODES_PATH, Answer.json([{**RUNNING, "disk_free_alarm": False}]))
    result = doctor("--management-url", api.url(), "-o", "json")

    assert result.exit_code == 0, result.output
    parsed = document(result)
    assert finding(parsed, "deprecated-features-not-checked")["level"] == "warning"
    assert [f for f in parsed["findings"] if f["code"].startswith(("alarms", "node-"))] == []


RUNNING = {"name": "rabbit@fake", "running": True, "mem_alarm": False}
