"""``x-consumer-timeout`` in a quorum queue's ``arguments`` with ``rr declare`` on every server
(docs/reference/topology.md, "arguments").

Measured: every server takes the argument on a quorum queue, but only RabbitMQ 4.3 compares it
when the queue is declared again (406 ``inequivalent arg 'x-consumer-timeout'``): 3.10.8 and
4.0.5 accept another value, or none, and keep the one the queue was made with. So a change of
it is a conflict on 4.3 and ``unchanged`` on the others, with the server's value untouched.
rr refuses the argument on a classic queue while loading the file (4.3 refuses it there).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.topology.plan import REBUILD_DETAIL
from tests.backends import vhost_pool, vhost_url
from tests.shared_node import current

runner = CliRunner(env={"COLUMNS": "200"})

QUORUM = '[queues.work]\ntype = "quorum"\n{arguments}'
WITH = 'arguments = {{ "x-consumer-timeout" = {ms} }}\n'


@pytest.fixture
def vhost(amqp_url: str) -> Iterator[str]:
    """A fresh, empty vhost of the test's own, deleted afterwards."""
    with vhost_pool(current()).lent() as name:
        yield name


def declare(tmp_path: Path, url: str, text: str) -> Result:
    topology = tmp_path / "topology.toml"
    topology.write_text(text)
    return runner.invoke(app, ["declare", str(topology), "--url", url, "-o", "json"])


def operations(result: Result) -> list[tuple[str, str, Any]]:
    document = json.loads(result.stdout)
    return [(op["name"], op["status"], op["detail"]) for op in document["operations"]]


def consumer_timeout(vhost: str) -> Any:
    """The ``x-consumer-timeout`` queue ``work`` holds on the server (None: none)."""
    done = current().run_ctl(
        "-q", "list_queues", "-p", vhost, "name", "arguments", "--formatter", "json"
    )
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)
    arguments = {key: value for key, _kind, value in row["arguments"]}
    return arguments.get("x-consumer-timeout")


def test_a_quorum_queue_takes_it_and_only_4_3_compares_it(
    amqp_url: str, vhost: str, tmp_path: Path
) -> None:
    broker = current()
    url = vhost_url(amqp_url, vhost)

    created = declare(tmp_path, url, QUORUM.format(arguments=WITH.format(ms=2000)))

    assert created.exit_code == 0, created.output
    assert operations(created) == [("work", "created", None)]
    assert consumer_timeout(vhost) == 2000

    again = declare(tmp_path, url, QUORUM.format(arguments=WITH.format(ms=2000)))
    changed = declare(tmp_path, url, QUORUM.format(arguments=WITH.format(ms=3000)))
    dropped = declare(tmp_path, url, QUORUM.format(arguments=""))

    assert again.exit_code == 0, again.output
    assert operations(again) == [("work", "unchanged", None)]
    if (broker.major, broker.minor) >= (4, 3):
        assert (changed.exit_code, dropped.exit_code) == (1, 1)
        assert operations(changed) == [
            (
                "work",
                "conflict",
                "exists with other arguments: x-consumer-timeout: file 3000, broker 2000"
                + "; "
                + REBUILD_DETAIL,
            )
        ]
        assert operations(dropped) == [
            (
                "work",
                "conflict",
                "exists with other arguments: x-consumer-timeout: file (none), broker 2000"
                + "; "
                + REBUILD_DETAIL,
            )
        ]
    else:
        # the server does not compare it: rr cannot see the difference
        assert (changed.exit_code, dropped.exit_code) == (0, 0), changed.output + dropped.output
        assert operations(changed) == operations(dropped) == [("work", "unchanged", None)]
    assert consumer_timeout(vhost) == 2000


def test_a_classic_queue_is_refused_before_anything_connects(tmp_path: Path) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text('[queues.work]\narguments = { "x-consumer-timeout" = 2000 }\n')

    result = runner.invoke(
        app, ["declare", str(topology), "--url", "amqp://guest:guest@127.0.0.1:1/"]
    )

    assert result.exit_code == 78, result.output
    assert "queues.work.arguments.x-consumer-timeout" in result.stderr
    assert "RabbitMQ 4.3 refuses it on a classic queue (406 invalid arg)" in result.stderr
