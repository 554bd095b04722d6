"""Pure tables for definitions.py: the expanded topology as a RabbitMQ definitions document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rabbitctl_retry.topology.definitions import to_definitions
from rabbitctl_retry.topology.expand import Desired, expand
from rabbitctl_retry.topology.load import load_file, load_text

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "refunds" / "topology.toml"

CLASSIC = {"x-queue-type": "classic"}
"""A plain classic queue's arguments: its type, always sent (docs/reference/topology.md, "The
queue's type")."""


def _queue(
    name: str, arguments: dict[str, Any], *, vhost: str = "/", durable: bool = True
) -> dict[str, Any]:
    return {
        "name": name,
        "vhost": vhost,
        "durable": durable,
        "auto_delete": False,
        "arguments": arguments,
    }


def test_the_guides_file() -> None:
    document = to_definitions(expand(load_file(EXAMPLE)))
    assert document == {
        "queues": [
            _queue("refunds.dead", CLASSIC),
            _queue("refunds", CLASSIC),
            _queue(
                "refunds.retry",
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "refunds",
                    "x-queue-type": "classic",
                },
            ),
            _queue("payouts.dead", CLASSIC),
            _queue(
                "payouts",
                {
                    "x-queue-type": "quorum",
                    "x-delivery-limit": 4,
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "payouts.dead",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish",
                },
            ),
            _queue("refunds.receipts", CLASSIC),
        ],
        "exchanges": [],
        "bindings": [],
    }
    assert type(document["queues"][4]["arguments"]["x-delivery-limit"]) is int


def test_exchanges_bindings_and_vhost() -> None:
    desired = expand(
        load_text(
            '[exchanges.events]\ntype = "topic"\ndurable = false\n'
            '[queues.q]\ndelay = "plugin-dme"\ndurable = false\n'
            'dead_letter_exchange = "external.dlx"\n'
            'bindings = [{ exchange = "events", routing_key = "q.*" },'
            ' { exchange = "amq.headers", arguments = { x-match = "any", kind = "q" } }]\n'
        )
    )
    document = to_definitions(desired, vhost="prod")
    assert document == {
        "queues": [
            _queue(
                "q",
                {"x-dead-letter-exchange": "external.dlx", "x-queue-type": "classic"},
                vhost="prod",
                durable=False,
            ),
        ],
        "exchanges": [
            {
                "name": "events",
                "vhost": "prod",
                "type": "topic",
                "durable": False,
                "auto_delete": False,
                "internal": False,
                "arguments": {},
            },
            {
                "name": "q.delay",
                "vhost": "prod",
                "type": "x-delayed-message",
                "durable": True,
                "auto_delete": False,
                "internal": False,
                "arguments": {"x-delayed-type": "direct"},
            },
        ],
        "bindings": [
            {
                "source": "q.delay",
                "vhost": "prod",
                "destination": "q",
                "destination_type": "queue",
                "routing_key": "q",
                "arguments": {},
            },
            {
                "source": "events",
                "vhost": "prod",
                "destination": "q",
                "destination_type": "queue",
                "routing_key": "q.*",
                "arguments": {},
            },
            {
                "source": "amq.headers",
                "vhost": "prod",
                "destination": "q",
                "destination_type": "queue",
                "routing_key": "",
                "arguments": {"x-match": "any", "kind": "q"},
            },
        ],
    }
    # referenced exchanges (external.dlx, amq.headers) must exist already: never exported
    assert {exchange["name"] for exchange in document["exchanges"]} == {"events", "q.delay"}


def test_delay_tiers_export_their_ttls() -> None:
    document = to_definitions(expand(load_text('[queues.q]\ndelay_tiers = ["1s", "5m"]\n')))
    assert [(queue["name"], queue["arguments"]) for queue in document["queues"]] == [
        ("q", CLASSIC),
        (
            "q.retry.1s",
            {
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": "q",
                "x-message-ttl": 1000,
                "x-queue-type": "classic",
            },
        ),
        (
            "q.retry.5m",
            {
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": "q",
                "x-message-ttl": 300000,
                "x-queue-type": "classic",
            },
        ),
    ]


@pytest.mark.parametrize("vhost", ["/", "prod", "a/b", "é"])
def test_the_document_is_plain_json(vhost: str) -> None:
    document = to_definitions(expand(load_file(EXAMPLE)), vhost=vhost)
    assert json.loads(json.dumps(document)) == document
    for kind in ("queues", "exchanges", "bindings"):
        for entity in document[kind]:
            assert entity["vhost"] == vhost
            assert type(entity["arguments"]) is dict


def test_the_document_is_a_copy() -> None:
    desired = expand(load_file(EXAMPLE))
    document = to_definitions(desired)
    assert document["queues"][4]["name"] == "payouts"
    document["queues"][4]["arguments"]["x-delivery-limit"] = 99
    assert desired.queues[4].arguments["x-delivery-limit"] == 4
    assert to_definitions(desired)["queues"][4]["arguments"]["x-delivery-limit"] == 4


def test_an_empty_topology() -> None:
    assert to_definitions(Desired()) == {"queues": [], "exchanges": [], "bindings": []}


def test_policy_mode_exports_rr_policies() -> None:
    topology = load_text(
        '[broker]\nsettings = "policy"\n[queues.q]\ntype = "quorum"\nmax_attempts = 3\n'
        'dead_letter = "q.dead"\n'
    )
    document = to_definitions(expand(topology), vhost="prod")
    assert document["policies"] == [
        {
            "vhost": "prod",
            "name": "rr.q",
            "pattern": "^q$",
            "apply-to": "queues",
            "definition": {
                "dead-letter-exchange": "",
                "dead-letter-routing-key": "q.dead",
                "dead-letter-strategy": "at-least-once",
                "delivery-limit": 2,
                "overflow": "reject-publish",
            },
            "priority": 100,
        }
    ]
    queue = next(q for q in document["queues"] if q["name"] == "q")
    assert queue["arguments"] == {"x-queue-type": "quorum"}
    assert "policies" not in to_definitions(expand(load_text("[queues.q]\n")))
