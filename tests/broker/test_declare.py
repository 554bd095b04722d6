"""rr declare against the real RabbitMQ, read back with rabbitmqctl.

Each test gets a fresh vhost, so the guide's example is declared verbatim (queue names
``refunds``, ``payouts``, ...) and the test can assert that nothing else exists afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import uuid4

import aiormq
import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.errors import NotFound
from rabbitctl_retry.ops.declare import apply, observe
from rabbitctl_retry.topology.expand import BindingEntity, Desired, QueueEntity
from rabbitctl_retry.topology.plan import plan
from rabbitctl_retry.transport import amqp
from tests.backends import RabbitBackend, delayed_plugin_enabled, vhost_pool, vhost_url
from tests.contract.versions import expected
from tests.shared_node import ctl_command, current

# The tests that take amqp_url are marked broker by it (tests/conftest.py); the others never
# reach a broker and run without one (pytest -m "not broker").

EXAMPLE = Path(__file__).parents[2] / "examples" / "refunds" / "topology.toml"
GUIDE_QUEUES = (
    "refunds",
    "refunds.retry",
    "refunds.dead",
    "payouts",
    "payouts.dead",
    "refunds.receipts",
)
"""The queues the guide's file declares (examples/refunds/topology.toml)."""
INTEGER_TYPES = {"byte", "short", "signedint", "long", "unsignedbyte", "unsignedshort"}

runner = CliRunner(env={"COLUMNS": "200"})


def rabbitmqctl(*args: str) -> str:
    result = subprocess.run(ctl_command("-q", *args), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def list_queues(vhost: str) -> dict[str, dict[str, Any]]:
    """name -> {"durable", "type", "arguments": {key: (wire type, value)}}."""
    rows = json.loads(
        rabbitmqctl(
            "list_queues",
            "-p",
            vhost,
            "name",
            "durable",
            "type",
            "arguments",
            "--formatter",
            "json",
        )
        or "[]"
    )
    return {
        row["name"]: {
            "durable": row["durable"],
            "type": row["type"],
            "arguments": {key: (kind, value) for key, kind, value in row["arguments"]},
        }
        for row in rows
    }


def list_exchanges(vhost: str) -> set[str]:
    rows = json.loads(
        rabbitmqctl("list_exchanges", "-p", vhost, "name", "--formatter", "json") or "[]"
    )
    return {row["name"] for row in rows if row["name"] and not row["name"].startswith("amq.")}


@pytest.fixture
def vhost(amqp_url: str) -> Iterator[str]:
    """A fresh, empty vhost (full permissions for the URL's user), deleted afterwards."""
    with vhost_pool(current()).lent() as name:
        yield name


def declare(url: str, *args: str) -> Any:
    return runner.invoke(app, ["declare", *args, "--url", url])


def json_operations(result: Any) -> dict[str, dict[str, Any]]:
    document = json.loads(result.stdout)
    return {operation["name"]: operation for operation in document["operations"]}


async def raw_declare(url: str, name: str, **kwargs: Any) -> None:
    connection = await aiormq.connect(url)
    try:
        channel = await connection.channel()
        await channel.queue_declare(name, **kwargs)
    finally:
        await connection.close()


def test_guide_example_creates_exactly_the_six_queues(amqp_url: str, vhost: str) -> None:
    url = vhost_url(amqp_url, vhost)

    first = declare(url, str(EXAMPLE), "--output", "json")

    assert first.exit_code == 0, first.output
    operations = json_operations(first)
    # each queue after the queue it dead-letters to
    assert list(operations) == [
        "refunds.dead",
        "refunds",
        "refunds.retry",
        "payouts.dead",
        "payouts",
        "refunds.receipts",
    ]
    assert {op["status"] for op in operations.values()} == {"created"}
    assert all(op["op"] == "declare_queue" for op in operations.values())
    assert json.loads(first.stdout)["dry_run"] is False

    queues = list_queues(vhost)
    assert set(queues) == {*GUIDE_QUEUES}
    assert all(queue["durable"] is True for queue in queues.values())
    # rr declares every queue with its type, on every server (docs/reference/topology.md, "The
    # queue's type")
    plain = {"x-queue-type": ("longstr", "classic")}
    assert queues["refunds"] == {"durable": True, "type": "classic", "arguments": plain}
    assert queues["refunds.dead"]["arguments"] == plain
    assert queues["payouts.dead"]["arguments"] == plain
    assert queues["refunds.receipts"]["arguments"] == plain
    assert queues["refunds.retry"]["type"] == "classic"
    assert queues["refunds.retry"]["arguments"] == {
        **plain,
        "x-dead-letter-exchange": ("longstr", ""),
        "x-dead-letter-routing-key": ("longstr", "refunds"),
    }
    payouts = queues["payouts"]
    assert payouts["type"] == "quorum"
    limit_type, limit = payouts["arguments"].pop("x-delivery-limit")
    assert limit_type in INTEGER_TYPES
    assert limit == 4
    assert payouts["arguments"] == {
        "x-queue-type": ("longstr", "quorum"),
        "x-dead-letter-exchange": ("longstr", ""),
        "x-dead-letter-routing-key": ("longstr", "payouts.dead"),
        "x-dead-letter-strategy": ("longstr", "at-least-once"),
        "x-overflow": ("longstr", "reject-publish"),
    }
    assert list_exchanges(vhost) == set()

    second = declare(url, str(EXAMPLE), "--output", "json")

    assert second.exit_code == 0, second.output
    assert {op["status"] for op in json_operations(second).values()} == {"unchanged"}
    assert list_queues(vhost).keys() == queues.keys()

    third = declare(url, str(EXAMPLE))
    assert third.exit_code == 0, third.output
    assert f"{len(GUIDE_QUEUES)} unchanged; the broker already matches the file" in third.stdout


def test_dry_run_plans_and_creates_nothing(amqp_url: str, vhost: str) -> None:
    result = declare(vhost_url(amqp_url, vhost), str(EXAMPLE), "--dry-run", "--output", "json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["dry_run"] is True
    assert {op["status"] for op in json_operations(result).values()} == {"planned"}
    assert list_queues(vhost) == {}


def test_conflict_names_every_difference_and_changes_nothing(amqp_url: str, vhost: str) -> None:
    url = vhost_url(amqp_url, vhost)
    asyncio.run(
        raw_declare(
            url,
            "payouts",
            durable=True,
            arguments={"x-queue-type": "quorum", "x-delivery-limit": 9, "x-max-length": 100},
        )
    )
    before = list_queues(vhost)

    result = declare(url, str(EXAMPLE), "--output", "json")

    assert result.exit_code == 1
    operations = json_operations(result)
    assert operations["payouts"]["status"] == "conflict"
    detail = operations["payouts"]["detail"]
    assert "x-delivery-limit: file 4, broker 9" in detail
    assert "x-dead-letter-exchange: file '', broker (none)" in detail
    assert "x-dead-letter-routing-key: file 'payouts.dead', broker (none)" in detail
    assert "x-max-length: file (none), broker 100" in detail
    assert "x-overflow: file 'reject-publish', broker (none)" in detail
    assert {operations[name]["status"] for name in operations if name != "payouts"} == {"planned"}
    assert "payouts" in result.stderr
    assert "nothing was changed" in result.stderr
    assert list_queues(vhost) == before


def test_conflict_table_shows_queue_and_arguments(
    amqp_url: str, vhost: str, broker_version: str
) -> None:
    url = vhost_url(amqp_url, vhost)
    asyncio.run(raw_declare(url, "payouts", durable=True))

    # wide enough that the detail of payouts (five differences) fits on one line
    result = runner.invoke(app, ["declare", str(EXAMPLE), "--url", url], env={"COLUMNS": "400"})

    assert result.exit_code == 1
    assert "conflict" in result.stdout
    assert "x-overflow: file 'reject-publish', broker (none)" in result.stdout
    kind = expected(broker_version, "classic-queue-type-argument")
    broker_side = "(none)" if kind is None else repr(kind)
    assert f"x-queue-type: file 'quorum', broker {broker_side}" in result.stdout
    assert "nothing was changed on the broker" in result.stdout
    assert set(list_queues(vhost)) == {"payouts"}


def test_quorum_dead_letter_is_at_least_once_by_default(
    amqp_url: str, vhost: str, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(
        """
[queues.payouts]
type = "quorum"
max_attempts = 5
dead_letter = "payouts.dead"

[queues.fees]
type = "quorum"
max_attempts = 2
dead_letter = "fees.dead"
dead_letter_strategy = "at-most-once"
""",
        encoding="utf-8",
    )
    url = vhost_url(amqp_url, vhost)

    first = declare(url, str(topology), "--output", "json")

    assert first.exit_code == 0, first.output
    assert {op["status"] for op in json_operations(first).values()} == {"created"}
    queues = list_queues(vhost)
    payouts = queues["payouts"]
    assert payouts["type"] == "quorum"
    assert payouts["arguments"]["x-dead-letter-strategy"] == ("longstr", "at-least-once")
    assert payouts["arguments"]["x-overflow"] == ("longstr", "reject-publish")
    limit_type, limit = payouts["arguments"].pop("x-delivery-limit")
    assert (limit_type in INTEGER_TYPES, limit) == (True, 4)
    assert payouts["arguments"] == {
        "x-queue-type": ("longstr", "quorum"),
        "x-dead-letter-exchange": ("longstr", ""),
        "x-dead-letter-routing-key": ("longstr", "payouts.dead"),
        "x-dead-letter-strategy": ("longstr", "at-least-once"),
        "x-overflow": ("longstr", "reject-publish"),
    }
    # dead_letter_strategy = "at-most-once": neither argument, as before
    fees = queues["fees"]
    assert fees["type"] == "quorum"
    assert "x-dead-letter-strategy" not in fees["arguments"]
    assert "x-overflow" not in fees["arguments"]
    assert fees["arguments"]["x-dead-letter-routing-key"] == ("longstr", "fees.dead")

    second = declare(url, str(topology), "--output", "json")

    assert second.exit_code == 0, second.output
    assert {op["status"] for op in json_operations(second).values()} == {"unchanged"}


def test_bindings_and_exchanges(amqp_url: str, vhost: str, tmp_path: Path) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(
        """
[exchanges.orders]
type = "topic"

[queues.refunds]
max_attempts = 3
dead_letter = "refunds.dead"
bindings = [
  { exchange = "orders", routing_key = "refund.#" },
  { exchange = "amq.topic", routing_key = "legacy.refund" },
]
""",
        encoding="utf-8",
    )
    url = vhost_url(amqp_url, vhost)

    first = declare(url, str(topology), "--output", "json")

    assert first.exit_code == 0, first.output
    statuses = {
        (op["op"], op["name"]): op["status"] for op in json.loads(first.stdout)["operations"]
    }
    assert statuses == {
        ("declare_exchange", "orders"): "created",
        ("declare_queue", "refunds"): "created",
        ("declare_queue", "refunds.dead"): "created",
        ("bind", "orders -> refunds (refund.#)"): "created",
        ("bind", "amq.topic -> refunds (legacy.refund)"): "created",
    }
    bindings = json.loads(
        rabbitmqctl(
            "list_bindings",
            "-p",
            vhost,
            "source_name",
            "destination_name",
            "routing_key",
            "--formatter",
            "json",
        )
    )
    pairs = {(b["source_name"], b["destination_name"], b["routing_key"]) for b in bindings}
    assert ("orders", "refunds", "refund.#") in pairs
    assert ("amq.topic", "refunds", "legacy.refund") in pairs

    second = declare(url, str(topology), "--output", "json")
    assert {op["status"] for op in json.loads(second.stdout)["operations"]} == {"unchanged"}


def test_missing_referenced_exchange_is_a_conflict(
    amqp_url: str, vhost: str, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(
        '[queues.refunds]\nbindings = [{ exchange = "nowhere", routing_key = "r" }]\n',
        encoding="utf-8",
    )

    result = declare(vhost_url(amqp_url, vhost), str(topology), "--output", "json")

    assert result.exit_code == 1
    operations = json_operations(result)
    assert operations["nowhere -> refunds (r)"]["status"] == "conflict"
    assert (
        "'nowhere' is used by the file but neither declared"
        in (operations["nowhere -> refunds (r)"]["detail"])
    )
    assert list_queues(vhost) == {}


def test_plugin_dme_without_the_plugin_changes_nothing(
    amqp_url: str, vhost: str, tmp_path: Path
) -> None:
    if delayed_plugin_enabled(current()):
        pytest.skip("the delayed-message plugin is enabled on this broker")
    topology = tmp_path / "topology.toml"
    topology.write_text('[queues.refunds]\ndelay = "plugin-dme"\n', encoding="utf-8")

    result = declare(vhost_url(amqp_url, vhost), str(topology), "--output", "json")

    assert result.exit_code == 1
    operation = json_operations(result)["refunds.delay"]
    assert operation["status"] == "conflict"
    assert "x-delayed-message" in operation["detail"]
    assert list_queues(vhost) == {}
    assert list_exchanges(vhost) == set()


def test_exported_definitions_import_and_match(amqp_url: str, vhost: str) -> None:
    exported = runner.invoke(
        app, ["topology", "export", str(EXAMPLE), "--format", "definitions", "--vhost", vhost]
    )
    assert exported.exit_code == 0, exported.output
    # rabbitmqctl reads the file as the rabbitmq user (and ignores stdin here), so the file
    # must be world-readable, outside pytest's private tmp_path.
    handle, path = tempfile.mkstemp(prefix="rr-definitions-", suffix=".json", dir="/tmp")
    try:
        os.write(handle, exported.stdout.encode("utf-8"))
        os.close(handle)
        os.chmod(path, 0o644)
        rabbitmqctl("import_definitions", path)
    finally:
        os.unlink(path)

    # The import is asynchronous: wait until all six queues are there.
    deadline = time.monotonic() + 30
    while len(queues := list_queues(vhost)) < len(GUIDE_QUEUES) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert set(queues) == {*GUIDE_QUEUES}
    assert queues["payouts"]["type"] == "quorum"
    assert queues["payouts"]["arguments"]["x-delivery-limit"][1] == 4
    declared = declare(vhost_url(amqp_url, vhost), str(EXAMPLE), "--output", "json")
    assert {op["status"] for op in json_operations(declared).values()} == {"unchanged"}


def test_wrong_password_exits_77_and_never_prints_it(amqp_url: str) -> None:
    parts = urlsplit(amqp_url)
    secret = "s3cr3t-" + uuid4().hex
    netloc = f"{parts.username or 'guest'}:{secret}@{parts.hostname}:{parts.port or 5672}"
    url = urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    result = runner.invoke(app, ["declare", str(EXAMPLE), "--url", url])

    assert result.exit_code == 77
    assert secret not in result.output
    assert secret not in result.stderr
    assert "refused" in result.stderr.lower()


def test_password_from_env_is_never_printed(amqp_url: str) -> None:
    parts = urlsplit(amqp_url)
    secret = "env-" + uuid4().hex
    netloc = f"{parts.username or 'guest'}:{secret}@{parts.hostname}:{parts.port or 5672}"
    url = urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    result = runner.invoke(app, ["declare", str(EXAMPLE)], env={"RR_URL": url})

    assert result.exit_code == 77
    assert secret not in result.output + result.stderr


def test_unreachable_broker_exits_69_quickly() -> None:
    started = time.monotonic()
    result = runner.invoke(
        app, ["declare", str(EXAMPLE), "--url", "amqp://guest:hunter2@127.0.0.1:1/"]
    )
    elapsed_s = time.monotonic() - started

    assert result.exit_code == 69
    assert "hunter2" not in result.output + result.stderr
    assert elapsed_s < 60  # refused at once, no retry loop (a bound no busy machine reaches)


def test_missing_vhost_exits_77(amqp_url: str) -> None:
    result = declare(vhost_url(amqp_url, f"rr-missing-{uuid4().hex[:8]}"), str(EXAMPLE))
    assert result.exit_code == 77


def test_bad_file_exits_78_before_connecting(tmp_path: Path) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text("[queues.payouts]\ntype = 'quorum'\nmax_attempts = 5\n", encoding="utf-8")

    result = runner.invoke(
        app, ["declare", str(topology), "--url", "amqp://guest:guest@127.0.0.1:1/"]
    )

    assert result.exit_code == 78
    assert f"{topology}:3: queues.payouts.max_attempts" in result.stderr


def test_an_unreachable_management_api_changes_nothing(amqp_url: str, vhost: str) -> None:
    result = declare(
        vhost_url(amqp_url, vhost),
        str(EXAMPLE),
        "--management-url",
        "http://svc:s3cret@127.0.0.1:1/",
    )

    assert result.exit_code == 69, result.output
    assert "cannot reach the management API at http://svc:******@127.0.0.1:1/" in result.stderr
    assert "s3cret" not in result.output
    assert list_queues(vhost) == {}


def test_a_management_url_that_is_not_http_is_a_usage_error() -> None:
    result = runner.invoke(
        app,
        ["declare", str(EXAMPLE), "--url", "amqp://guest:guest@127.0.0.1:1/"],
        env={"RR_MANAGEMENT_URL": "amqp://guest:guest@127.0.0.1:5672/"},
    )

    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("rr: error: management URL must start with http:// or https://")
    assert result.stderr.endswith(" (given by --management-url or $RR_MANAGEMENT_URL)\n")


async def test_an_apply_the_broker_stops_half_way_says_what_it_left(amqp_url: str) -> None:
    """The broker changes between the plan and the apply (an exchange deleted meanwhile):
    the error names the step that failed, what was declared before it and what was not,
    and a rerun can go on."""
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        desired = Desired(
            queues=(QueueEntity(name="first"), QueueEntity(name="third")),
            bindings=(BindingEntity(queue="first", exchange="gone", routing_key="k"),),
        )
        channel = await backend.channel()
        await channel.exchange_declare("gone", type="direct")
        connection = await backend.connect()

        async def connect() -> amqp.AmqpConnection:
            return await amqp.connect(backend.url)

        result = plan(
            desired,
            await observe(connection, desired, connect=connect),
            server_version=connection.server_version.release,
        )
        await channel.exchange_delete("gone")
        with pytest.raises(NotFound) as stopped:
            await apply(connection, result)
    finally:
        await backend.close()
    text = str(stopped.value)
    assert text.startswith("the declare stopped at binding of 'first' to 'gone' ('k'): ")
    assert "NOT_FOUND - no exchange 'gone'" in text
    assert text.endswith(
        "; declared before it: queue 'first', queue 'third'; not declared: nothing "
        "(rr declare again goes on from there)"
    )
