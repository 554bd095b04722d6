"""``rr doctor``'s deprecated-features table from hostile management APIs (docs/reference/cli.md,
"rr doctor"), played by a fake one of the test's own (tests/hostile/fake_management.py), with the
emulator as the AMQP server (RabbitMQ 4.3.6).

An answer that is not the documented table — not JSON, the wrong shape, an error status, a
redirect — is one ``deprecated-features-not-checked`` warning naming what was wrong (exit 0,
never 70, never a traceback, the password never shown); an API without the table (404, 406)
is an info finding; a table that denies what the topology uses is unsafe (exit 1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli._common import CliSettings
from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.transport.base import Connection
from rabbitctl_retry.transport.management import vhost_of
from tests.hostile.fake_management import SECRET, Answer, FakeManagement

PATH = "/api/deprecated-features"
OVERVIEW = "/api/overview"
NODES = (
    "/api/nodes?columns=name,running,mem_alarm,disk_free_alarm,mem_used,mem_limit,disk_free,"
    "disk_free_limit"
)
"""What rr doctor reads next, for the nodes' alarms (tests/hostile/test_doctor_health.py)."""
VHOST = f"/api/vhosts/{quote(vhost_of('emulator'), safe='')}"
"""Then the vhost's default queue type: the vhost of the emulator's connection URL."""
CONSUMERS = (
    f"/api/consumers/{quote(vhost_of('emulator'), safe='')}?columns=queue.name,consumer_tag,"
    "ack_required,channel_details.connection_name"
)
"""With a topology, its consumers (the fake has none: 404, so no connection is asked for)."""
DEEP = b"[" * 200_000 + b"]" * 200_000
ASSUMED = "findings on deprecated features are assumed from the version"
WHAT = "not checked: which deprecated features this server permits or denies"

runner = CliRunner()


def settings() -> CliSettings:
    emulator = Emulator(server_version="4.3.6")

    async def connect(url: str) -> Connection:
        return emulator.connect()

    return CliSettings(connector=connect)


def doctor(*args: str, env: dict[str, str] | None = None) -> Result:
    return runner.invoke(app, ["doctor", *args], obj=settings(), env=env)


def document(result: Result) -> dict[str, Any]:
    assert SECRET not in result.output
    assert "Traceback" not in result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def finding(parsed: dict[str, Any], code: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [f for f in parsed["findings"] if f["code"] == code]
    [one] = found
    return one


def row(name: Any, state: Any = "denied", phase: Any = "denied_by_default") -> dict[str, Any]:
    return {"name": name, "state": state, "deprecation_phase": phase, "provided_by": "rabbit"}


def unexpected(api: FakeManagement, what: str) -> str:
    return (
        f"the management API at http://svc:******@127.0.0.1:{api.port}/ gave an unexpected "
        f"answer to GET {PATH} ({what}; is it RabbitMQ's management plugin?)"
    )


MALFORMED = {
    "not-json": (Answer(body=b"<html>oops</html>"), "not JSON"),
    "not-a-list": (Answer.json({"name": "global_qos"}), "not a list of deprecated features"),
    "not-objects": (Answer.json(["global_qos"]), "a deprecated feature that is not an object"),
    "no-name": (
        Answer.json([{"state": "denied"}]),
        "a deprecated feature without a 'name' (a word: transient_nonexcl_queues)",
    ),
    "name-with-escapes": (
        Answer.json([row("evil\x1b[31m\nred")]),
        "a deprecated feature without a 'name' (a word: transient_nonexcl_queues)",
    ),
    "name-not-text": (
        Answer.json([row(["global_qos"])]),
        "a deprecated feature without a 'name' (a word: transient_nonexcl_queues)",
    ),
    "state-unknown": (
        Answer.json([row("global_qos", state="maybe")]),
        "deprecated feature global_qos without a 'state' of permitted or denied",
    ),
    "state-boolean": (
        Answer.json([row("global_qos", state=True)]),
        "deprecated feature global_qos without a 'state' of permitted or denied",
    ),
    "some-without-state": (
        Answer.json([row("transient_nonexcl_queues"), {"name": "global_qos"}]),
        "deprecated feature global_qos without a 'state' of permitted or denied",
    ),
    "unstated-named-twice": (
        Answer.json([{"name": "global_qos"}, {"name": "global_qos"}]),
        "deprecated feature global_qos without a 'state' of permitted or denied",
    ),
    "phase-not-a-word": (
        Answer.json([row("global_qos", phase=5)]),
        "deprecated feature global_qos with a 'deprecation_phase' that is not a word",
    ),
    "named-twice": (
        Answer.json([row("global_qos"), row("global_qos", state="permitted")]),
        "deprecated feature global_qos listed twice",
    ),
    "nested-too-deep": (Answer(body=DEEP), "JSON nested too deep"),
}


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_a_malformed_table_is_one_warning_not_a_traceback(api: FakeManagement, case: str) -> None:
    answer, what = MALFORMED[case]
    api.answer(PATH, answer)

    result = doctor("--management-url", api.url(), "-o", "json")

    assert result.exit_code == 0, result.output
    parsed = document(result)
    detail = unexpected(api, what)
    assert parsed["server"]["deprecated_features"] == {
        "checked": False,
        "not_checked": "failed",
        "detail": detail,
    }
    assert finding(parsed, "deprecated-features-not-checked") == {
        "code": "deprecated-features-not-checked",
        "level": "warning",
        "queue": None,
        "message": f"{WHAT}: {detail}; {ASSUMED}",
    }
    assert "\x1b" not in result.output
    assert [seen.path for seen in api.seen()] == [OVERVIEW, PATH, NODES, VHOST]


@pytest.mark.parametrize(
    ("answer", "detail"),
    [
        (Answer(status=500), "answered 500 to GET /api/deprecated-features"),
        (
            Answer(status=401),
            "refused the login (401) to GET /api/deprecated-features: wrong user name or "
            "password, or its user lacks the management (or monitoring) tag",
        ),
        (
            Answer(status=403),
            "refused the login (403) to GET /api/deprecated-features: wrong user name or "
            "password, or its user lacks the management (or monitoring) tag",
        ),
        (
            Answer(raw=b"not http at all\r\n\r\n"),
            "gave a broken HTTP answer to GET /api/deprecated-features (BadStatusLine)",
        ),
    ],
    ids=["500", "401", "403", "broken-http"],
)
def test_an_error_answer_is_a_warning(api: FakeManagement, answer: Answer, detail: str) -> None:
    api.answer(PATH, answer)

    result = doctor("--management-url", api.url(), "-o", "json")

    assert result.exit_code == 0, result.output
    message = finding(document(result), "deprecated-features-not-checked")["message"]
    shown = f"http://svc:******@127.0.0.1:{api.port}/"
    assert message == f"{WHAT}: the management API at {shown} {detail}; {ASSUMED}"


def test_a_redirect_is_not_followed(api: FakeManagement, elsewhere: FakeManagement) -> None:
    api.answer(PATH, Answer.redirect(f"{elsewhere.base()}{PATH}"))

    result = doctor("--management-url", api.url(), "-o", "json")

    assert result.exit_code == 0, result.output
    message = finding(document(result), "deprecated-features-not-checked")["message"]
    assert f"with a redirect (302) to {elsewhere.base()}{PATH}: rr follows no redirect" in message
    assert elsewhere.seen() == []


def test_an_api_that_answers_nothing_is_a_warning() -> None:
    with FakeManagement() as gone:
        url = gone.url()
    result = doctor("--management-url", url, "-o", "json")

    assert result.exit_code == 0, result.output
    parsed = document(result)
    assert parsed["server"]["deprecated_features"]["not_checked"] == "failed"
    message = finding(parsed, "deprecated-features-not-checked")["message"]
    assert message.startswith(f"{WHAT}: cannot reach the management API at http://svc:******@")


@pytest.mark.parametrize("status", [404, 406])
def test_an_api_without_the_table_is_info(api: FakeManagement, status: int) -> None:
    """RabbitMQ 3.10.8 answers 406 to rr's request (it asks for JSON), 404 to curl's."""
    api.answer(PATH, Answer(status=status))

    result = doctor("--management-url", api.url(), "-o", "json")

    assert result.exit_code == 0, result.output
    parsed = document(result)
    assert parsed["server"]["deprecated_features"] == {
        "checked": False,
        "not_checked": "missing",
        "detail": None,
    }
    found = finding(parsed, "deprecated-features-not-checked")
    assert found["level"] == "info"
    assert "its management API has no such table" in found["message"]
    transient = finding(parsed, "transient-queues-deprecated")["message"]
    assert "assumed from the version (not checked: the management API has no deprecated-" in (
        transient
    )


def test_a_table_without_states_is_info(api: FakeManagement) -> None:
    """RabbitMQ 4.0.5's API lists each feature's name and phase, never its state (measured on
    a 4.0.5 node whose configuration denied transient_nonexcl_queues: the row still says
    permitted_by_default): nothing to read, not a broken answer."""
    api.answer(
        PATH,
        Answer.json(
            [
                {
                    "name": "transient_nonexcl_queues",
                    "desc": "",
                    "deprecation_phase": "permitted_by_default",
                    "provided_by": "rabbit",
                },
                {"name": "global_qos", "deprecation_phase": "permitted_by_default"},
            ]
        ),
    )

    result = doctor("--management-url", api.url(), "-o", "json")

    assert result.exit_code == 0, result.output
    parsed = document(result)
    assert parsed["server"]["deprecated_features"] == {
        "checked": False,
        "not_checked": "unstated",
        "detail": None,
    }
    found = finding(parsed, "deprecated-features-not-checked")
    assert found["level"] == "info"
    assert "its management API lists them without their state" in found["message"]
    assert (
        "assumed from the version (not checked: the management API does not say"
        in (finding(parsed, "transient-queues-deprecated")["message"])
    )


TRANSIENT_TOPOLOGY = '[queues."scratch"]\ndurable = false\n'


def test_a_table_that_denies_what_the_topology_uses_is_unsafe(
    api: FakeManagement, tmp_path: Path
) -> None:
    api.answer(PATH, Answer.json([row("transient_nonexcl_queues"), row("global_qos")]))
    topology = tmp_path / "topology.toml"
    topology.write_text(TRANSIENT_TOPOLOGY)

    result = doctor("--topology", str(topology), "--management-url", api.url(), "-o", "json")

    assert result.exit_code == 1, result.output
    parsed = document(result)
    assert parsed["safe"] is False
    assert parsed["server"]["deprecated_features"] == {
        "checked": True,
        "features": [
            {"name": "global_qos", "state": "denied", "phase": "denied_by_default"},
            {"name": "transient_nonexcl_queues", "state": "denied", "phase": "denied_by_default"},
        ],
    }
    unsafe = [(f["code"], f["queue"]) for f in parsed["findings"] if f["level"] == "unsafe"]
    assert unsafe == [("transient-queue-denied", "scratch")]


def test_the_table_output_shows_the_warning_line(api: FakeManagement) -> None:
    api.answer(PATH, Answer.json({"evil": "\x1b[2J"}))

    result = doctor("--management-url", api.url(), env={"COLUMNS": "2000"})  # one line a row

    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    assert SECRET not in result.output
    [line] = [line for line in result.stdout.splitlines() if "not a list" in line]
    assert line.startswith("warning │ deprecated-features-not-checked │ not checked: ")
    assert result.stdout.rstrip().endswith("safe on this server")


def test_the_url_comes_from_the_environment_and_the_file_as_for_declare(
    api: FakeManagement, tmp_path: Path
) -> None:
    api.answer(PATH, Answer.json([row("transient_nonexcl_queues", "permitted", None)]))
    from_env = doctor("-o", "json", env={"RR_MANAGEMENT_URL": api.url()})
    topology = tmp_path / "topology.toml"
    topology.write_text(f'[broker]\nmanagement_url = "{api.url()}"\n\n{TRANSIENT_TOPOLOGY}')
    from_file = doctor("--topology", str(topology), "-o", "json")

    for result in (from_env, from_file):
        assert result.exit_code == 0, result.output
        assert document(result)["server"]["deprecated_features"]["checked"] is True
    transient = finding(document(from_file), "transient-queue")
    assert transient["message"].startswith(
        "'scratch' is transient (durable = false): RabbitMQ 4.3.6 permits "
        "transient_nonexcl_queues, read from its management API"
    )
    seen = api.seen()
    # the fake has no /api/nodes (404): the queues' members are not asked for then
    assert [s.path for s in seen] == [
        *(OVERVIEW, PATH, NODES, VHOST),
        *(OVERVIEW, PATH, NODES, VHOST, CONSUMERS),
    ]
    assert all(s.headers["authorization"].startswith("Basic ") for s in seen)


def test_a_malformed_management_url_is_refused_before_anything_connects(
    api: FakeManagement,
) -> None:
    result = doctor("--management-url", f"http://svc:{SECRET}@127.0.0.1:{api.port}/?x=1")

    assert result.exit_code == 2
    assert SECRET not in result.output
    assert "rr: error: management URL has a query ('?...')" in result.stderr
    assert "(given by --management-url or $RR_MANAGEMENT_URL)" in result.stderr
    assert api.seen() == []
