"""runtime/decoding.py: a body into a handler's type, pure (docs/reference/handlers.md, "Typed
messages"): every type, every content-type rule, malformed bodies, nested errors by path."""

from __future__ import annotations

import enum
import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import pydantic
import pytest

from rabbitctl_retry.errors import HandlerLoadError
from rabbitctl_retry.runtime.decoding import (
    DecodeFailure,
    charset_of,
    decoder_for,
    is_json,
)


class Kind(enum.Enum):
    CARD = "card"
    BANK = "bank"


@dataclass
class Line:
    sku: str
    quantity: int


@dataclass
class Order:
    id: int
    amount: float
    paid: bool
    lines: list[Line]
    note: str | None = None
    kind: Kind = Kind.CARD
    tags: list[str] = field(default_factory=list)


@dataclass
class Refund:
    id: int
    reason: Literal["fraud", "duplicate"]

    def __post_init__(self) -> None:
        if self.id <= 0:
            raise ValueError("id must be above 0")


@dataclass
class Tree:
    name: str
    children: list[Tree] = field(default_factory=list)


class PydanticOrder(pydantic.BaseModel):
    id: int
    amount: float


class SpecOrder(msgspec.Struct):
    id: int
    amount: float


@dataclass
class Holder:
    order: PydanticOrder
    spec: SpecOrder


@dataclass
class Unsupported:
    when: set[int]


GOOD = {
    "id": 7,
    "amount": 12,
    "paid": True,
    "lines": [{"sku": "A-1", "quantity": 2}],
    "extra": "ignored",
}


def decode(hint: Any, body: bytes | str, content_type: str | None = None) -> Any:
    raw = body.encode() if isinstance(body, str) else body
    return decoder_for(hint, where="parameter msg of t:handle")(raw, content_type, None)


def reason(hint: Any, body: bytes | str, content_type: str | None = None) -> str:
    with pytest.raises(DecodeFailure) as caught:
        decode(hint, body, content_type)
    return str(caught.value)


@pytest.mark.parametrize(
    ("content_type", "json_"),
    [
        (None, True),
        ("", True),
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ("text/json", True),
        ("application/vnd.acme.order+json", True),
        ("application/problem+json; charset=utf-8", True),
        ("text/plain", False),
        ("application/octet-stream", False),
        ("application/x-msgpack", False),
        ("text/vnd.x+json", False),
        ("application/jsonl", False),
    ],
)
def test_which_content_types_are_json(content_type: str | None, json_: bool) -> None:
    assert is_json(content_type) is json_


def test_the_charset_of_a_text_body() -> None:
    assert charset_of(None, None) == "utf-8"
    assert charset_of("text/plain; charset=latin-1", None) == "latin-1"
    assert charset_of('text/plain; charset="utf-16"', "ascii") == "utf-16"
    assert charset_of("text/plain", "latin-1") == "latin-1"


def test_bytes_and_str_take_any_content_type() -> None:
    assert decode(bytes, b"\xff\x00", "application/octet-stream") == b"\xff\x00"
    assert decode(bytes, b"{}", None) == b"{}"
    assert decode(str, "héllo", "text/plain") == "héllo"
    assert decode(str, "héllo".encode("latin-1"), "text/plain; charset=latin-1") == "héllo"
    assert decoder_for(str, where="p")("héllo".encode("latin-1"), None, "latin-1") == "héllo"
    assert decode(str, '{"a": 1}', "application/json") == '{"a": 1}'


def test_a_str_body_that_is_not_text_is_a_decode_failure() -> None:
    assert reason(str, b"\xff\xfe\xfa") == (
        "the body is not utf-8 text: 'utf-8' codec can't decode byte 0xff in position 0: "
        "invalid start byte"
    )
    failure = decoder_for(str, where="p")
    with pytest.raises(DecodeFailure, match="encoding 'gzip' is not a text encoding"):
        failure(b"abc", None, "gzip")


@pytest.mark.parametrize(
    ("hint", "body", "value"),
    [
        (dict, '{"a": [1, 2]}', {"a": [1, 2]}),
        (dict[str, Any], '{"a": null}', {"a": None}),
        (dict[str, int], '{"a": 1, "b": 2}', {"a": 1, "b": 2}),
        (list, "[1, 2]", [1, 2]),
        (list[int], "[1, 2]", [1, 2]),
        (list[Line], '[{"sku": "x", "quantity": 1}]', [Line("x", 1)]),
        (Any, '"text"', "text"),
        (object, "[1]", [1]),
        (int, "5", 5),
        (float, "5", 5.0),
        (bool, "false", False),
        (int | None, "null", None),
        (Kind, '"bank"', Kind.BANK),
    ],
)
def test_json_values(hint: Any, body: str, value: Any) -> None:
    assert decode(hint, body, "application/json") == value


def test_a_dataclass_from_a_json_object() -> None:
    order = decode(Order, json.dumps(GOOD))
    assert order == Order(id=7, amount=12.0, paid=True, lines=[Line("A-1", 2)])
    assert isinstance(order.amount, float)
    assert decode(Order, json.dumps({**GOOD, "note": "n", "kind": "bank", "tags": ["t"]})) == (
        Order(7, 12.0, True, [Line("A-1", 2)], note="n", kind=Kind.BANK, tags=["t"])
    )
    assert decode(Tree, '{"name": "a", "children": [{"name": "b"}]}') == Tree("a", [Tree("b")])


def test_models_of_pydantic_and_msgspec() -> None:
    assert decode(PydanticOrder, '{"id": 1, "amount": 2.5}') == PydanticOrder(id=1, amount=2.5)
    assert decode(SpecOrder, '{"id": 1, "amount": 2.5}') == SpecOrder(id=1, amount=2.5)
    held = decode(Holder, '{"order": {"id": 1, "amount": 2}, "spec": {"id": 2, "amount": 3}}')
    assert held == Holder(PydanticOrder(id=1, amount=2), SpecOrder(id=2, amount=3))


@pytest.mark.parametrize(
    ("hint", "body", "text"),
    [
        (Order, "{", "the body is not JSON: Expecting property name enclosed in double quotes"),
        (Order, b"\xff", "the body is not JSON: 'utf-8' codec can't decode byte 0xff"),
        (Order, "", "the body is not JSON: Expecting value: line 1 column 1 (char 0)"),
        (Order, "[]", "expected an object (Order), got list"),
        (Order, json.dumps({**GOOD, "amount": "x"}), "amount: expected a number, got str"),
        (Order, json.dumps({**GOOD, "id": 1.5}), "id: expected an integer, got float"),
        (Order, json.dumps({**GOOD, "id": True}), "id: expected an integer, got bool"),
        (Order, json.dumps({**GOOD, "paid": 1}), "paid: expected true or false, got int"),
        (Order, json.dumps({**GOOD, "note": 3}), "note: expected str | None, got int"),
        (
            Order,
            json.dumps({**GOOD, "kind": "cash"}),
            'kind: expected "card" or "bank", got "cash"',
        ),
        (Order, json.dumps({**GOOD, "lines": {}}), "lines: expected a list, got dict"),
        (Order, json.dumps({**GOOD, "tags": [1]}), "tags[0]: expected a string, got int"),
        (
            Order,
            json.dumps({**GOOD, "lines": [{"sku": "a", "quantity": 1}, {"sku": "b"}]}),
            "lines[1]: Line needs the field 'quantity'",
        ),
        (
            Order,
            json.dumps({**GOOD, "lines": [{"sku": "a", "quantity": "2"}]}),
            "lines[0].quantity: expected an integer, got str",
        ),
        (Order, json.dumps({"id": 1}), "Order needs the field 'amount'"),
        (
            Refund,
            '{"id": 1, "reason": "other"}',
            'reason: expected "fraud" or "duplicate", got "other"',
        ),
        (Refund, '{"id": 0, "reason": "fraud"}', "Refund: id must be above 0"),
        (Tree, '{"name": "a", "children": [{"name": 1}]}', "children[0].name: expected a string"),
        (dict, "[]", "expected an object, got list"),
        (dict[str, int], '{"a": "1"}', "a: expected an integer, got str"),
        (list, "{}", "expected a list, got dict"),
        (list[int], "[1, null]", "[1]: expected an integer, got null"),
        (int, '"5"', "expected an integer, got str"),
    ],
)
def test_malformed_bodies_name_what_is_wrong(hint: Any, body: str | bytes, text: str) -> None:
    assert reason(hint, body).startswith(text)


def test_a_pydantic_failure_is_one_line() -> None:
    assert reason(PydanticOrder, '{"id": "x"}') == (
        "the body does not fit PydanticOrder: id: Input should be a valid integer, unable to "
        "parse string as an integer; amount: Field required"
    )
    assert reason(PydanticOrder, "{").startswith(
        "the body does not fit PydanticOrder: Invalid JSON: EOF while parsing an object"
    )
    assert reason(SpecOrder, '{"id": "x", "amount": 1}') == (
        "the body does not fit SpecOrder: Expected `int`, got `str` - at `$.id`"
    )
    assert reason(Holder, '{"order": {"id": 1}, "spec": {"id": 2, "amount": 3}}') == (
        "order: the body does not fit PydanticOrder: amount: Field required"
    )


@pytest.mark.parametrize(
    ("hint", "name"),
    [
        (Order, "Order"),
        (dict, "dict"),
        (list[int], "list[int]"),
        (Any, "Any"),
        (PydanticOrder, "PydanticOrder"),
        (SpecOrder, "SpecOrder"),
        (int, "int"),
    ],
)
@pytest.mark.parametrize("content_type", ["text/plain", "application/octet-stream"])
def test_a_structured_type_takes_json_content_types_only(
    hint: Any, name: str, content_type: str
) -> None:
    assert reason(hint, "{}", content_type) == (
        f"content type {content_type} is not JSON (application/json, text/json, "
        f"application/*+json, or none), which {name} takes; annotate the parameter bytes, "
        "str or Message to take this body"
    )


def test_types_rr_does_not_decode_into_fail_at_load() -> None:
    with pytest.raises(HandlerLoadError) as caught:
        decoder_for(Unsupported, where="parameter msg of t:handle")
    assert str(caught.value) == (
        "parameter msg of t:handle (field when of Unsupported): rr does not decode a message "
        "into set[int]; it decodes into int, float, str, bool, None, Any, list, list[X], dict, "
        "dict[str, X], X | None, Literal, Enum, a dataclass, a pydantic model, a msgspec "
        "Struct, or passes bytes, str or the Message itself"
    )
    with pytest.raises(HandlerLoadError, match="JSON object keys are strings, not dict"):
        decoder_for(dict[int, str], where="p")
    with pytest.raises(HandlerLoadError, match="rr does not decode a message into complex"):
        decoder_for(complex, where="p")


def test_rr_imports_neither_pydantic_nor_msgspec() -> None:
    """Only a handler that names one of their types brings them in (docs/reference/handlers.md)."""
    script = (
        "import sys, dataclasses\n"
        "from rabbitctl_retry.cli import main\n"
        "from rabbitctl_retry.testing import TestBroker\n"
        "from rabbitctl_retry.runtime.invocation import invocation_for\n"
        "@dataclasses.dataclass\n"
        "class Order:\n"
        "    id: int\n"
        "def handle(order: Order) -> None: ...\n"
        "invocation_for(handle, name='h')\n"
        "print(sorted(m for m in ('pydantic', 'msgspec') if m in sys.modules))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert run.stdout.strip() == "[]"
