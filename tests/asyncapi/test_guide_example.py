"""``rr asyncapi`` on the retries guide's example (examples/refunds): a valid AsyncAPI 3.0.0
document with RustStream's ``x-ruststream-retry`` on each queue with a cap, exactly the
values of its topology, the dead letters as channels with a ``send`` operation, and the
schema of its typed message, ``Refund``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from rabbitctl_retry.cli import app

EXAMPLE = Path(__file__).parents[2] / "examples" / "refunds"
SERVICE = str(EXAMPLE / "service.py")
TOPOLOGY = str(EXAMPLE / "topology.toml")

runner = CliRunner()


def contract(*more: str) -> dict[str, Any]:
    result = runner.invoke(app, ["asyncapi", SERVICE, "--topology", TOPOLOGY, *more])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = (
        json.loads(result.stdout) if "json" in more else yaml.safe_load(result.stdout)
    )
    return document


def test_the_yaml_and_the_json_are_one_valid_document(
    assert_valid: Callable[[Any], None],
) -> None:
    from_yaml = contract()
    assert from_yaml == contract("-o", "json")
    assert_valid(from_yaml)
    assert from_yaml["asyncapi"] == "3.0.0"
    assert from_yaml["info"]["title"] == "service"  # the module's name
    assert from_yaml["info"]["version"] == "0.0.0"
    assert from_yaml["info"]["description"].startswith("The refunds service of the retries")


def test_each_capped_queue_carries_ruststreams_extension_with_the_topologys_values() -> None:
    operations = contract()["operations"]
    # topology.toml: refunds, classic, max_attempts = 5, dead_letter = "refunds.dead";
    # payouts, quorum, max_attempts = 5 (x-delivery-limit 4), dead_letter = "payouts.dead"
    assert operations["receive_refunds"]["x-ruststream-retry"] == {
        "maxAttempts": 5,
        "deadLetter": "refunds.dead",
    }
    assert operations["receive_payouts"]["x-ruststream-retry"] == {
        "maxAttempts": 5,
        "deadLetter": "payouts.dead",
    }
    # the dead-letter queues have no cap and no dead letter of their own: no extension
    assert "x-ruststream-retry" not in operations["receive_refunds.dead"]
    assert "x-ruststream-retry" not in operations["receive_payouts.dead"]
    assert operations["receive_refunds"]["x-rr-retry"] == {
        "queueType": "classic",
        "retryHeader": "x-ruststream-retry-count",
        "delay": {"mode": "dlx-ttl", "waitQueues": ["refunds.retry"]},
    }
    assert operations["receive_payouts"]["x-rr-retry"] == {
        "queueType": "quorum",
        "retryHeader": "x-ruststream-retry-count",
        "deliveryLimit": 4,
        "delay": {"mode": "memory"},
    }
    for queue in ("refunds", "payouts", "refunds.dead", "payouts.dead"):
        operation = operations[f"receive_{queue}"]
        assert operation["action"] == "receive"
        assert operation["channel"] == {"$ref": f"#/channels/{queue}"}
        assert operation["bindings"] == {"amqp": {"ack": True, "bindingVersion": "0.3.0"}}


def test_the_dead_letters_are_channels_with_a_send_operation() -> None:
    document = contract()
    for queue, source in (("refunds.dead", "refunds"), ("payouts.dead", "payouts")):
        send = document["operations"][f"send_{queue}"]
        assert send["action"] == "send"
        assert send["channel"] == {"$ref": f"#/channels/{queue}"}
        assert send["messages"] == [{"$ref": f"#/channels/{queue}/messages/Refund"}]
        assert send["description"].startswith(f"Deliveries of {source} given up on")
        channel = document["channels"][queue]
        assert channel["address"] == queue
        assert channel["messages"] == {"Refund": {"$ref": "#/components/messages/Refund"}}
        assert channel["bindings"]["amqp"] == {
            "is": "queue",
            "queue": {
                "name": queue,
                "durable": True,
                "exclusive": False,
                "autoDelete": False,
                "vhost": "/",
            },
            "bindingVersion": "0.3.0",
        }
    assert "moved by the server" in document["operations"]["send_payouts.dead"]["description"]
    assert "moved by the server" not in document["operations"]["send_refunds.dead"]["description"]
    # exactly these channels and operations: no wait queue, no unlisted output
    assert list(document["channels"]) == ["refunds", "payouts", "refunds.dead", "payouts.dead"]
    assert sorted(document["operations"]) == [
        "receive_payouts",
        "receive_payouts.dead",
        "receive_refunds",
        "receive_refunds.dead",
        "send_payouts.dead",
        "send_refunds.dead",
    ]


def test_the_typed_message_has_its_schema() -> None:
    document = contract()
    assert document["defaultContentType"] == "application/json"
    assert document["components"]["messages"] == {
        "Refund": {
            "name": "Refund",
            "description": "A refund or a payout, as the producers send it (JSON).",
            "contentType": "application/json",
            "payload": {
                "title": "Refund",
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "card": {"type": "string"},
                    "amount_cents": {"type": "integer", "default": 0},
                },
                "required": ["id", "card"],
                "description": "A refund or a payout, as the producers send it (JSON).",
            },
        }
    }
    assert "schemas" not in document["components"]  # Refund refers to no other type


def test_an_output_queue_named_with_send(assert_valid: Callable[[Any], None]) -> None:
    document = contract("--send", "refunds.receipts")
    assert_valid(document)
    assert document["operations"]["send_refunds.receipts"] == {
        "action": "send",
        "channel": {"$ref": "#/channels/refunds.receipts"},
    }
    assert document["channels"]["refunds.receipts"]["address"] == "refunds.receipts"
    assert "messages" not in document["channels"]["refunds.receipts"]


def test_an_output_queue_with_its_type(assert_valid: Callable[[Any], None]) -> None:
    """service.py publishes a Receipt to refunds.receipts when a refund is paid."""
    document = contract("--send", "refunds.receipts=Receipt")
    assert_valid(document)
    assert document["operations"]["send_refunds.receipts"] == {
        "action": "send",
        "channel": {"$ref": "#/channels/refunds.receipts"},
        "messages": [{"$ref": "#/channels/refunds.receipts/messages/Receipt"}],
    }
    assert document["channels"]["refunds.receipts"]["messages"] == {
        "Receipt": {"$ref": "#/components/messages/Receipt"}
    }
    payload = document["components"]["messages"]["Receipt"]["payload"]
    assert payload["properties"] == {
        "refund": {"type": "integer"},
        "amount_cents": {"type": "integer"},
    }
    assert payload["required"] == ["refund", "amount_cents"]
