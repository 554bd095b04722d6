"""The default queue type of a vhost as RabbitMQ 3.10.8's management API states it, read by
``rr status`` and ``rr doctor`` (docs/reference/topology.md, "What the server's default queue
type does"): the local cluster's nodes state ``undefined`` for a vhost made without one (rr
reads: none) and the type of one made with ``rabbitmqctl add_vhost --default-queue-type``
(measured; 3.10.8's ``PUT /api/vhosts/NAME`` ignores a ``default_queue_type`` in its body).
What the API port reads of both is the contract scenario's
(tests/cluster/test_management_contract.py); here, what the commands say of it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from tests.cluster.conftest import LocalCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

runner = CliRunner()

TOPOLOGY = "[queues.work]\nmax_attempts = 3\n"

MakeVhost = Callable[..., str]


@pytest.fixture
def make_vhost(cluster: LocalCluster) -> Iterator[MakeVhost]:
    """Makes vhosts of the cluster (``rabbitmqctl add_vhost``, with ``--default-queue-type``
    when given one) for guest; deletes them after."""
    with ExitStack() as made:

        def make(default_queue_type: str | None = None) -> str:
            given = ("--default-queue-type", default_queue_type) if default_queue_type else ()
            return made.enter_context(cluster.own_vhost("rr-dqt", *given))

        yield make


def _rr(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "-o", "json"])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _read(cluster: LocalCluster, vhost: str, tmp_path: Path) -> tuple[Any, list[dict[str, Any]]]:
    """What ``rr status`` says of the vhost's default, and ``rr doctor``'s findings, once
    ``rr declare`` made the topology in it."""
    topology = tmp_path / "topology.toml"
    topology.write_text(TOPOLOGY)
    url = cluster.url(1, vhost)
    given = ["--url", url, "--management-url", cluster.management_url(1)]
    _rr("declare", str(topology), *given)
    status = _rr("status", "-t", str(topology), *given)
    doctor = _rr("doctor", "-t", str(topology), *given)
    return status["vhost_default_queue_type"], doctor["findings"]


def test_status_and_doctor_say_no_default_where_the_server_states_undefined(
    cluster: LocalCluster, make_vhost: MakeVhost, tmp_path: Path
) -> None:
    """Before, rr said "the vhost's default queue type is undefined ... a undefined queue"."""
    default, findings = _read(cluster, make_vhost(), tmp_path)

    assert default is None
    assert [f for f in findings if f["code"] == "vhost-default-queue-type"] == []
    assert "undefined" not in json.dumps(findings)


def test_doctor_names_the_vhosts_quorum_default(
    cluster: LocalCluster, make_vhost: MakeVhost, tmp_path: Path
) -> None:
    default, findings = _read(cluster, make_vhost("quorum"), tmp_path)

    assert default == "quorum"
    [said] = [f for f in findings if f["code"] == "vhost-default-queue-type"]
    assert said["message"].startswith("the vhost's default queue type is quorum")
