"""``--output tsv`` on the emulator (docs/reference/cli.md, "Output formats"): a header line, one
line per row, TAB-separated, raw counts, escaped values; several tables as sections; the exit
codes and stderr of the table output; an unknown format names tsv among the choices."""

from __future__ import annotations

import asyncio
import itertools
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli._common import CliSettings
from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.fields import FieldTable
from rabbitctl_retry.transport.base import Connection, Properties

runner = CliRunner()

UNREACHABLE = "http://guest:guest@rr-no-such-host.invalid:15672/"
"""The twin answers for it: nothing goes over HTTP (tests/cli/test_management_twin.py)."""

TOPOLOGY = """
[queues.jobs]
type = "quorum"
max_attempts = 3
dead_letter = "jobs.dead"

[queues."jobs.dead"]
"""

QUORUM_ARGUMENTS = (
    "x-dead-letter-exchange=''\\nx-dead-letter-routing-key='jobs.dead'\\n"
    "x-dead-letter-strategy='at-least-once'\\nx-delivery-limit=2\\n"
    "x-overflow='reject-publish'\\nx-queue-type='quorum'"
)
"""The quorum queue's arguments cell: one ``key=value`` a line in the table, ``\\n`` here."""


def settings(emulator: Emulator) -> CliSettings:
    async def connect(url: str) -> Connection:
        return emulator.connect()

    return CliSettings(connector=connect, management=emulator.management)


async def publish(
    emulator: Emulator,
    count: int,
    queue: str,
    body: bytes = b"x",
    headers: FieldTable | None = None,
) -> None:
    connection = emulator.connect()
    channel = await connection.channel(confirms=True)
    for n in range(count):
        properties = Properties(message_id=f"m{n}", headers=headers, content_type="text/plain")
        await channel.publish(body, routing_key=queue, properties=properties)
    await connection.close()


@pytest.fixture
def topology(tmp_path: Path) -> Path:
    path = tmp_path / "topology.toml"
    path.write_text(TOPOLOGY, encoding="utf-8")
    return path


@pytest.fixture
def emulator(topology: Path) -> Emulator:
    """The topology declared, 1,234 messages in ``jobs``."""
    emulator = Emulator(server_version="4.3.6")
    result = runner.invoke(app, ["declare", str(topology)], obj=settings(emulator))
    assert result.exit_code == 0, result.output
    asyncio.run(publish(emulator, 1234, "jobs"))
    return emulator


def rr(emulator: Emulator, *args: str) -> Result:
    return runner.invoke(app, [*args, "--output", "tsv"], obj=settings(emulator))


def test_status_prints_raw_counts_and_an_empty_field_for_none(
    emulator: Emulator, topology: Path
) -> None:
    result = rr(emulator, "status", "--topology", str(topology), "missing")
    assert result.exit_code == 1
    assert result.stderr == ""
    assert result.stdout == (
        "queue\ttype\tmessages\tconsumers\tstate\trole\n"
        "jobs.dead\tclassic\t0\t0\tok\tclassic queue, dead letters of jobs\n"
        "jobs\tquorum\t1234\t0\tok\tquorum queue\n"
        "missing\t-\t\t\tmissing\t\n"
    )


def test_status_with_live_settings_prints_two_sections(emulator: Emulator, topology: Path) -> None:
    result = rr(emulator, "status", "--topology", str(topology), "--management-url", UNREACHABLE)
    assert result.exit_code == 0, result.output
    assert result.stdout == (  # the twin keeps no rates: 0.0 (docs/reference/testing.md)
        "queue\ttype\tmessages\tunacked\tconsumers\tprefetch\tpublish/s\tdeliver/s\tstate\trole\n"
        "jobs.dead\tclassic\t0\t0\t0\t\t0.0\t0.0\tok\tclassic queue, dead letters of jobs\n"
        "jobs\tquorum\t1234\t0\t0\t\t0.0\t0.0\tok\tquorum queue\n"
        "\n"
        "# live settings\n"
        "queue\tsetting\tfile\targument\tpolicy\toperator policy\teffective\tstate\n"
        "jobs.dead\tx-queue-type\t'classic'\t'classic'\t-\t-\t'classic'\t\n"
        "jobs\tx-dead-letter-exchange\t''\t''\t-\t-\t''\t\n"
        "jobs\tx-dead-letter-routing-key\t'jobs.dead'\t'jobs.dead'\t-\t-\t'jobs.dead'\t\n"
        "jobs\tx-dead-letter-strategy\t'at-least-once'\t'at-least-once'\t-\t-\t"
        "'at-least-once'\t\n"
        "jobs\tx-delivery-limit\t2\t2\t-\t-\t2\t\n"
        "jobs\tx-overflow\t'reject-publish'\t'reject-publish'\t-\t-\t'reject-publish'\t\n"
        "jobs\tx-queue-type\t'quorum'\t'quorum'\t-\t-\t'quorum'\t\n"
    )


def test_dlq_inspect_escapes_tabs_line_breaks_backslashes_and_controls(
    emulator: Emulator,
) -> None:
    headers: FieldTable = {"rr-error-type": "ValueError", "rr-error-message": "bad\tvalue\\"}
    asyncio.run(publish(emulator, 1, "jobs.dead", body=b"line 1\nline\t2", headers=headers))
    result = rr(emulator, "dlq", "inspect", "jobs.dead")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert result.stdout == (
        "#\tmessage\tx-death (newest first)\tbody\n"
        "1\tid: m0\\norigin: (unknown)\\nreason: (unknown)\\nretries: -\\ndeliveries: -"
        "\\nrr-error-type: ValueError\\nrr-error-message: bad\\tvalue\\\\\t-\tline 1\\nline\\t2\n"
    )
    assert len(result.stdout.splitlines()) == 2


def test_dlq_inspect_of_an_empty_queue_prints_the_header_alone(emulator: Emulator) -> None:
    result = rr(emulator, "dlq", "inspect", "jobs.dead", "--no-body")
    assert result.exit_code == 0, result.output
    assert result.stdout == "#\tmessage\tx-death (newest first)\n"


def test_doctor_prints_the_findings_without_the_server_line_and_verdict(
    emulator: Emulator, topology: Path
) -> None:
    result = rr(emulator, "doctor", "--topology", str(topology))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "level\tfinding\tdetail"
    assert [line.split("\t")[:2] for line in lines[1:]] == [
        ["info", "server-version"],
        ["info", "last-death-headers"],
        ["info", "quorum-default-delivery-limit"],
        ["info", "deprecated-features-not-checked"],
        ["info", "transient-queues-deprecated"],
        ["info", "quorum-return-counting"],
        ["info", "alarms-not-checked"],
        ["info", "declare-matches"],
        ["info", "quorum-delivery-limit-counting"],
        ["warning", "no-consumer"],
        ["info", "foreign-consumers-not-checked"],
        ["info", "quorum-members-not-checked"],
    ]
    assert lines[1] == "info\tserver-version\tRabbitMQ 4.3.6"
    assert all(line.count("\t") == 2 for line in lines)


def test_topology_show_prints_its_two_tables_as_titled_sections(topology: Path) -> None:
    result = rr(Emulator(), "topology", "show", str(topology))
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "# retry policies\n"
        "queue\ttype\tattempts\tcounted by\tdead letter\tdelay\n"
        "jobs\tquorum\t3\tserver\tjobs.dead\tmemory\n"
        "jobs.dead\tclassic\tunlimited\t-\t-\tmemory\n"
        "\n"
        "# entities\n"
        "kind\tname\tdurable\targuments\trole\n"
        "queue\tjobs.dead\ttrue\tx-queue-type='classic'\tclassic queue, dead letters of jobs\n"
        f"queue\tjobs\ttrue\t{QUORUM_ARGUMENTS}\tquorum queue\n"
    )


def test_declare_prints_its_plan(emulator: Emulator, topology: Path) -> None:
    result = rr(emulator, "declare", str(topology), "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "op\tname\tstatus\targuments\tdetail\n"
        "declare_queue\tjobs.dead\tunchanged\tx-queue-type='classic'\t\n"
        f"declare_queue\tjobs\tunchanged\t{QUORUM_ARGUMENTS}\t\n"
    )


@pytest.mark.parametrize(
    ("command", "choices"),
    [
        (["status", "jobs"], "table, json or tsv"),
        (["dlq", "inspect", "jobs"], "table, json, jsonl or tsv"),
    ],
)
def test_an_unknown_format_names_tsv_among_the_choices(command: list[str], choices: str) -> None:
    result = runner.invoke(app, [*command, "--output", "yaml"], obj=settings(Emulator()))
    assert result.exit_code == 2
    name = " ".join(command[:-1])
    assert result.stderr == (
        f"rr: error: rr {name}: --output 'yaml': choose {choices} (see rr {name} --help)\n"
    )


REPO = Path(__file__).resolve().parents[2]


def test_the_docs_awk_pipeline_prints_what_the_docs_show() -> None:
    """docs/reference/cli.md, "Output formats": its first pipeline, run by a shell as written
    (``rr`` being this Python's rabbitctl_retry)."""
    lines = (REPO / "docs" / "reference" / "cli.md").read_text(encoding="utf-8").splitlines()
    start = next(
        index
        for index, line in enumerate(lines)
        if line.startswith("$ rr topology show examples/refunds/topology.toml --output tsv | ")
    )
    command = lines[start].removeprefix("$ rr ")
    shown = list(itertools.takewhile(lambda line: not line.startswith("$ "), lines[start + 1 :]))
    rr_command = f"{shlex.quote(sys.executable)} -m rabbitctl_retry"
    result = subprocess.run(
        ["sh", "-c", f"{rr_command} {command}"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == shown == ["refunds 5", "payouts 5"]


def test_simulate_prints_its_timeline_with_unpadded_times() -> None:
    example = REPO / "examples" / "refunds"
    files = [str(example / "topology.toml"), str(example / "service.py")]
    publish = ["--publish", 'refunds={"id": 1, "card": "busy"}', "--for", "1h"]
    result = runner.invoke(app, ["simulate", *files, *publish, "--output", "tsv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:4] == [
        "time\tqueue\tmessage\tevent\tattempt\tretry\tx-dc\tdetail",
        "0.000s\trefunds\tm1\tpublished\t\t\t\t",
        "0.000s\trefunds\tm1\tdelayed\t1\t\t\t-> refunds.retry in 2s",
        "2.000s\trefunds.retry\tm1\tserver dead-lettered (expired)\t\t\t\t-> refunds",
    ]
