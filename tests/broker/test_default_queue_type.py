"""Queues are what the file says on every server default (docs/reference/topology.md, "The queue's
type"): in a vhost whose default queue type is quorum (``rabbitmqctl add_vhost --default-queue-type
quorum``, which 3.10.8, 4.0.5 and 4.3.6 all take), on every server.

What the issue measured on 4.3.6 before rr sent ``x-queue-type`` with every declare: a
classic topology there became three quorum queues, ``rr declare`` said "3 created", then
"unchanged", ``rr status`` listed them as classic and ``rr doctor`` said "safe on this
server". The queue types are read with the node's own ``rabbitmqctl list_queues``, not by
rr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from tests.backends import RabbitBackend, own_vhost
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS
from tests.interop.foreign import pika_declare
from tests.shared_node import current

runner = CliRunner()

CLASSIC = """
[queues.work]
max_attempts = 3
dead_letter = "work.dead"
delay = "dlx-ttl"
"""

CONFLICT = (
    "exists with other arguments: x-queue-type: file 'classic', broker 'quorum'; the queue "
    "must be rebuilt"
)


def rr(rabbit: RabbitBackend, *args: str) -> Result:
    result = runner.invoke(app, [*args, "--url", rabbit.url], env={"COLUMNS": "400"})
    assert "Traceback" not in result.output
    return result


def json_of(result: Result) -> dict[str, Any]:
    assert result.exit_code in (0, 1), result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def types_on_the_node(rabbit: RabbitBackend) -> dict[str, str]:
    """Each queue of the vhost and its type, as the node's rabbitmqctl lists them."""
    listed = rabbit.ctl("list_queues", "-p", rabbit.vhost, "name", "type", "--formatter", "json")
    return {row["name"]: row["type"] for row in json.loads(listed)}


def management() -> list[str]:
    url = MANAGEMENT_URLS.get(current().version)
    return [] if url is None else ["--management-url", url]


def test_a_classic_topology_stays_classic_where_the_default_is_quorum(
    amqp_url: str, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(CLASSIC)
    with own_vhost(amqp_url, "quorum") as rabbit:
        first = json_of(rr(rabbit, "declare", str(topology), "-o", "json", *management()))
        assert [(op["name"], op["status"]) for op in first["operations"]] == [
            ("work.dead", "created"),
            ("work", "created"),
            ("work.retry", "created"),
        ]
        assert types_on_the_node(rabbit) == {
            "work": "classic",
            "work.dead": "classic",
            "work.retry": "classic",
        }
        again = json_of(rr(rabbit, "declare", str(topology), "-o", "json"))
        assert {(op["status"], op["broker_type"]) for op in again["operations"]} == {
            ("unchanged", "classic")
        }

        status = rr(rabbit, "status", "-t", str(topology), "-o", "json", *management())
        assert status.exit_code == 0, status.output
        queues = json_of(status)["queues"]
        assert {(q["name"], q["type"], q["matches"]) for q in queues} == {
            ("work", "classic", True),
            ("work.dead", "classic", True),
            ("work.retry", "classic", True),
        }
        doctor = rr(rabbit, "doctor", "-t", str(topology), "-o", "json", *management())
        assert doctor.exit_code == 0, doctor.output
        codes = {f["code"] for f in json_of(doctor)["findings"]}
        assert "declare-matches" in codes
        if not management():
            return  # the shared 3.10.8 has no management API
        assert first["vhost_default_queue_type"] == "quorum"
        assert json_of(status)["vhost_default_queue_type"] == "quorum"
        [default] = [
            f for f in json_of(doctor)["findings"] if f["code"] == "vhost-default-queue-type"
        ]
        assert default["message"].startswith("the vhost's default queue type is quorum")
        live = json_of(
            rr(rabbit, "topology", "show", str(topology), "--live", "-o", "json", *management())
        )
        assert {(q["queue"], q["type"], tuple(q["missing"])) for q in live["live"]} == {
            ("work", "classic", ()),
            ("work.dead", "classic", ()),
            ("work.retry", "classic", ()),
        }
        assert live["vhost_default_queue_type"] == "quorum"


def test_queues_made_first_without_a_type_are_a_conflict_everywhere(
    amqp_url: str, tmp_path: Path
) -> None:
    """The file's queues declared first by a client that names no type (pika, as an older
    rr did) are quorum queues in such a vhost: rr declare refuses them and changes nothing,
    rr status shows their type, rr doctor is unsafe in rr declare's words."""
    topology = tmp_path / "topology.toml"
    topology.write_text(CLASSIC)
    with own_vhost(amqp_url, "quorum") as rabbit:
        for queue in ("work", "work.dead"):
            pika_declare(rabbit.url, queue)
        assert types_on_the_node(rabbit) == {"work": "quorum", "work.dead": "quorum"}

        declare = rr(rabbit, "declare", str(topology), "-o", "json")
        assert declare.exit_code == 1
        conflicts = {
            op["name"]: op for op in json_of(declare)["operations"] if op["status"] == "conflict"
        }
        assert set(conflicts) == {"work", "work.dead"}
        assert all(op["detail"].startswith(CONFLICT) for op in conflicts.values())
        assert {op["broker_type"] for op in conflicts.values()} == {"quorum"}
        assert types_on_the_node(rabbit) == {"work": "quorum", "work.dead": "quorum"}

        status = rr(rabbit, "status", "-t", str(topology), "-o", "json")
        assert status.exit_code == 1
        by_name = {q["name"]: q for q in json_of(status)["queues"]}
        assert (by_name["work"]["type"], by_name["work"]["file_type"]) == ("quorum", "classic")
        assert by_name["work"]["differences"].startswith(
            "x-queue-type: file 'classic', broker 'quorum'"
        )

        doctor = rr(rabbit, "doctor", "-t", str(topology), "-o", "json")
        assert doctor.exit_code == 1
        report = json_of(doctor)
        assert report["safe"] is False
        said = {
            f["queue"]: f["message"] for f in report["findings"] if f["code"] == "declare-conflict"
        }
        assert set(said) == {"work", "work.dead"}
        for name, message in said.items():
            assert message.startswith(f"queue {name!r}: {conflicts[name]['detail']}.")
        if management():
            live = json_of(
                rr(rabbit, "topology", "show", str(topology), "--live", "-o", "json", *management())
            )
            queues = {q["queue"]: q for q in live["live"]}
            rows = {row["key"]: row for row in queues["work"]["settings"]}
            assert (rows["x-queue-type"]["effective"], rows["x-queue-type"]["state"]) == (
                "quorum",
                "type differs",
            )
            assert (queues["work.retry"]["exists"], queues["work.retry"]["missing"]) == (
                False,
                ["x-dead-letter-exchange", "x-dead-letter-routing-key", "x-queue-type"],
            )


def test_a_classic_queue_an_earlier_rr_declared_without_a_type_is_no_conflict(
    amqp_url: str, tmp_path: Path
) -> None:
    """Where the vhost has no default type (or classic), a queue declared without a type is
    classic, and takes rr's redeclare with x-queue-type = "classic" on every server: existing
    users' queues stay as they are."""
    topology = tmp_path / "topology.toml"
    topology.write_text(CLASSIC)
    with own_vhost(amqp_url, None) as rabbit:
        for queue in ("work", "work.dead"):
            pika_declare(rabbit.url, queue)
        declare = rr(rabbit, "declare", str(topology), "-o", "json")
        assert declare.exit_code == 0, declare.output
        assert [(op["name"], op["status"]) for op in json_of(declare)["operations"]] == [
            ("work.dead", "unchanged"),
            ("work", "unchanged"),
            ("work.retry", "created"),
        ]
        assert types_on_the_node(rabbit) == {
            "work": "classic",
            "work.dead": "classic",
            "work.retry": "classic",
        }
