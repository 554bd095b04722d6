"""Every ``$ref`` of a document points at something in it, and an operation's messages are
its channel's (AsyncAPI 3.0.0 asks both; the JSON schema checks neither), for any queue
names a topology takes; the documents stay valid."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import tomli_w
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rabbitctl_retry.asyncapi.document import Consumer, MessageSpec, Output, Service, document
from rabbitctl_retry.cli import app
from rabbitctl_retry.topology.load import load_text

EXAMPLE = Path(__file__).parents[2] / "examples" / "refunds"


def references(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref" and isinstance(item, str):
                yield item
            else:
                yield from references(item)
    elif isinstance(value, list):
        for item in value:
            yield from references(item)


def resolve(found: dict[str, Any], reference: str) -> Any:
    assert reference.startswith("#/"), reference
    target: Any = found
    for part in reference[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        assert isinstance(target, dict), reference
        assert part in target, f"{reference}: no {part!r}"
        target = target[part]
    return target


def assert_consistent(found: dict[str, Any]) -> None:
    for reference in references(found):
        resolve(found, reference)
    for name, operation in found["operations"].items():
        channel = resolve(found, operation["channel"]["$ref"])
        prefix = operation["channel"]["$ref"] + "/messages/"
        for message in operation.get("messages", []):
            assert message["$ref"].startswith(prefix), (name, message)
            assert message["$ref"][len(prefix) :] in channel["messages"], (name, message)


def test_the_guide_example_is_consistent() -> None:
    result = CliRunner().invoke(
        app,
        [
            "asyncapi",
            str(EXAMPLE / "service.py"),
            "-t",
            str(EXAMPLE / "topology.toml"),
            "--send",
            "refunds.receipts=Receipt",
        ],
    )
    assert result.exit_code == 0, result.output
    assert_consistent(yaml.safe_load(result.stdout))


NAME_CHARACTERS = "abcXYZ019-_.:@#,/+ é"
names = st.text(NAME_CHARACTERS, min_size=1, max_size=12).filter(
    lambda name: not name.startswith("amq.")
)


@st.composite
def services(draw: st.DrawFn) -> Service:
    queue_names = draw(st.lists(names, min_size=1, max_size=5, unique=True))
    queues: dict[str, Any] = {}
    for name in queue_names:
        settings_of: dict[str, Any] = {}
        if draw(st.booleans()):
            settings_of["max_attempts"] = draw(st.integers(1, 9))
            target = f"{name}.dead"
            if draw(st.booleans()) and target not in queue_names:
                settings_of["dead_letter"] = target
            if draw(st.booleans()):
                settings_of["type"] = "quorum"
                settings_of.setdefault("dead_letter", f"{name}.dlq")
        queues[name] = settings_of
    topology = load_text(tomli_w.dumps({"queues": queues}))
    typed = MessageSpec(name="Job", payload={"type": "object"}, content_type="application/json")
    consumers = tuple(
        Consumer(name, f"svc:h{index}", draw(st.sampled_from([typed, MessageSpec()])))
        for index, name in enumerate(draw(st.lists(st.sampled_from(queue_names), min_size=1)))
    )
    sends = tuple(
        Output(name, draw(st.sampled_from([typed, MessageSpec()])))
        for name in draw(st.lists(names, max_size=2))
    )
    return Service(title="svc", version="1", topology=topology, consumers=consumers, sends=sends)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(service=services())
def test_any_topologys_document_is_valid_and_consistent(
    service: Service, assert_valid: Callable[[Any], None]
) -> None:
    found = document(service)
    assert_valid(found)
    assert_consistent(found)
    for consumer in service.consumers:
        assert any(channel["address"] == consumer.queue for channel in found["channels"].values())
