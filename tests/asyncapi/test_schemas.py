"""The payload schemas of the types rr decodes (docs/reference/handlers.md, "Typed messages"): a
dataclass (nested, recursive, with an Enum, a Literal, lists and dicts), a pydantic model, a
msgspec Struct, plain JSON types; none for bytes, str and the delivery itself. Each
document is valid AsyncAPI 3.0.0, and each payload schema takes a body the handler decodes
and refuses one it does not."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app

runner = CliRunner()

HANDLERS = '''
"""Orders, typed every way rr decodes."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Literal

import msgspec
import pydantic

from rabbitctl_retry import Message, subscriber

__version__ = "2.1.0"


class Size(enum.Enum):
    """How big a parcel is."""

    SMALL = "s"
    LARGE = "l"


@dataclass
class Line:
    sku: str
    quantity: int
    size: Size = Size.SMALL


@dataclass
class Order:
    """An order as the shop sends it."""

    id: int
    lines: list[Line]
    kind: Literal["new", "repeat"]
    tags: dict[str, str] = field(default_factory=dict)
    note: str | None = None
    weight: float = 1.5


@dataclass
class Node:
    name: str
    children: list[Node]


class Payment(pydantic.BaseModel):
    """A payment, validated by pydantic."""

    id: int
    amount_cents: int = pydantic.Field(ge=0)
    line: Line | None = None


class Shipment(msgspec.Struct):
    id: int
    carrier: str


@subscriber("orders")
def take_order(order: Order) -> None: ...


@subscriber("tree")
def take_tree(node: Node) -> None: ...


@subscriber("payments")
def take_payment(payment: Payment) -> None: ...


@subscriber("shipments")
def take_shipment(shipment: Shipment, msg: Message) -> None: ...


@subscriber("counts")
def take_counts(counts: dict[str, int]) -> None: ...


@subscriber("blobs")
def take_blob(body: bytes) -> None: ...


@subscriber("texts")
def take_text(body: str) -> None: ...


@subscriber("deliveries")
def take_delivery(msg: Message) -> None: ...
'''

TOPOLOGY = """
[queues.orders]
max_attempts = 3
dead_letter = "orders.dead"
[queues."orders.dead"]
[queues.tree]
[queues.payments]
[queues.shipments]
[queues.counts]
[queues.blobs]
[queues.texts]
[queues.deliveries]
"""


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("typed")
    (folder / "typed_orders_rr.py").write_text(HANDLERS, encoding="utf-8")
    (folder / "topology.toml").write_text(TOPOLOGY, encoding="utf-8")
    result = runner.invoke(
        app,
        [
            "asyncapi",
            str(folder / "typed_orders_rr.py"),
            "-t",
            str(folder / "topology.toml"),
            "-o",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def payload_check(document: dict[str, Any], message: str) -> Callable[[Any], bool]:
    """Whether a body fits the message's payload, its references read in the document."""
    payload = document["components"]["messages"][message]["payload"]
    schema = payload | {"components": document["components"]}
    validator = jsonschema.Draft7Validator(schema)
    return validator.is_valid


def test_the_document_is_valid(found: dict[str, Any], assert_valid: Callable[[Any], None]) -> None:
    assert_valid(found)
    assert found["info"] == {
        "title": "typed_orders_rr",
        "version": "2.1.0",
        "description": "Orders, typed every way rr decodes.",
    }


def test_a_dataclass_with_nested_types(found: dict[str, Any]) -> None:
    order = found["components"]["messages"]["Order"]
    assert order["contentType"] == "application/json"
    assert order["description"] == "An order as the shop sends it."
    assert order["payload"] == {
        "title": "Order",
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "lines": {"type": "array", "items": {"$ref": "#/components/schemas/Line"}},
            "kind": {"enum": ["new", "repeat"]},
            "tags": {"type": "object", "additionalProperties": {"type": "string"}},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "weight": {"type": "number", "default": 1.5},
        },
        "required": ["id", "lines", "kind"],
        "description": "An order as the shop sends it.",
    }
    schemas = found["components"]["schemas"]
    assert schemas["Size"] == {
        "title": "Size",
        "enum": ["s", "l"],
        "description": "How big a parcel is.",
    }
    assert schemas["Line"]["required"] == ["sku", "quantity"]
    fits = payload_check(found, "Order")
    assert fits({"id": 1, "lines": [{"sku": "a", "quantity": 2, "size": "l"}], "kind": "new"})
    assert not fits({"id": 1, "lines": [{"sku": "a", "quantity": "2"}], "kind": "new"})
    assert not fits({"id": 1, "lines": [], "kind": "old"})
    assert not fits({"lines": [], "kind": "new"})


def test_a_recursive_dataclass_stays_a_reference(found: dict[str, Any]) -> None:
    assert found["components"]["messages"]["Node"]["payload"] == {
        "$ref": "#/components/schemas/Node"
    }
    fits = payload_check(found, "Node")
    assert fits({"name": "a", "children": [{"name": "b", "children": []}]})
    assert not fits({"name": "a", "children": [{"name": "b"}]})


def test_a_pydantic_model_gives_its_own_schema(found: dict[str, Any]) -> None:
    payment = found["components"]["messages"]["Payment"]
    assert payment["payload"]["title"] == "Payment"
    assert payment["payload"]["properties"]["amount_cents"]["minimum"] == 0
    assert payment["description"] == "A payment, validated by pydantic."
    fits = payload_check(found, "Payment")
    assert fits({"id": 1, "amount_cents": 5, "line": {"sku": "a", "quantity": 1}})
    assert not fits({"id": 1, "amount_cents": -5})


def test_a_msgspec_struct_gives_its_own_schema(found: dict[str, Any]) -> None:
    shipment = found["components"]["messages"]["Shipment"]["payload"]
    assert shipment["title"] == "Shipment"
    assert shipment["required"] == ["id", "carrier"]
    assert "Shipment" not in found["components"]["schemas"]  # inlined in its message
    fits = payload_check(found, "Shipment")
    assert fits({"id": 1, "carrier": "ups"})
    assert not fits({"id": 1})


def test_plain_json_types_and_no_schema_where_the_body_is_anything(
    found: dict[str, Any],
) -> None:
    messages = found["components"]["messages"]
    assert messages["counts.message"] == {
        "name": "counts.message",
        "contentType": "application/json",
        "payload": {"type": "object", "additionalProperties": {"type": "integer"}},
    }
    for queue in ("blobs", "texts", "deliveries"):
        assert messages[f"{queue}.message"] == {"name": f"{queue}.message"}
    # messages of several content types: no default content type
    assert "defaultContentType" not in found


def test_a_type_rr_does_not_decode_is_refused_as_rr_run_refuses_it(tmp_path: Path) -> None:
    (tmp_path / "when_rr.py").write_text(
        textwrap.dedent(
            """
            from __future__ import annotations
            import datetime
            from rabbitctl_retry import subscriber

            @subscriber("jobs")
            def handle(when: datetime.datetime) -> None: ...
            """
        ),
        encoding="utf-8",
    )
    (tmp_path / "topology.toml").write_text("[queues.jobs]\n", encoding="utf-8")
    result = runner.invoke(
        app, ["asyncapi", str(tmp_path / "when_rr.py"), "-t", str(tmp_path / "topology.toml")]
    )
    assert result.exit_code == 78, result.output
    assert "rr does not decode a message into datetime" in result.output
