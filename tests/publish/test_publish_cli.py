"""``rr publish``, on RabbitMQ and on the emulator: exact counts, bodies, headers (with their
types), properties and message ids; returned and refused messages reported; bad input
publishes nothing (docs/reference/cli.md, "rr publish")."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from rabbitctl_retry.field_codec import raw_fields
from rabbitctl_retry.fields import EncodedTable
from tests.backends import Backend
from tests.dlq.support import declare, json_of, rr
from tests.observe import depth
from tests.observe import peek as read_all


async def test_publish_n_messages_with_headers_and_properties(backend: Backend) -> None:
    await declare(backend, "target")
    result = await rr(
        backend,
        "publish",
        "target",
        "--body",
        '{"id": 1}',
        "--header",
        "origin=shop",
        "--header",
        'attempt:={"$int32": 5}',
        "--header",
        "flag:=true",
        "--property",
        "content_type=application/json",
        "--property",
        "delivery_mode=2",
        "--property",
        "correlation_id=c-1",
        "--count",
        "7",
    )
    assert result.exit_code == 0, result.output
    assert "7 message(s) to queue 'target': 7 confirmed" in result.stdout
    held = await read_all(backend, "target")
    assert len(held) == 7
    ids = {delivery.properties.message_id for delivery in held}
    assert len(ids) == 7  # a fresh id each
    assert None not in ids
    for delivery in held:
        assert delivery.body == b'{"id": 1}'
        properties = delivery.properties
        assert properties.content_type == "application/json"
        assert properties.delivery_mode == 2
        assert properties.correlation_id == "c-1"
        headers = properties.headers or {}
        assert headers == {"origin": "shop", "attempt": 5, "flag": True}
        assert isinstance(headers, EncodedTable)  # a table read keeps its wire types
        tags = {name: field.tag for name, field in raw_fields(headers.encoded)}
        assert (tags["attempt"], tags["origin"], tags["flag"]) == ("I", "S", "t")


async def test_a_given_message_id_is_kept(backend: Backend) -> None:
    await declare(backend, "target")
    result = await rr(
        backend, "publish", "target", "--body", "x", "--property", "message_id=m-1", "-o", "json"
    )
    assert result.exit_code == 0, result.output
    document = json_of(result)
    assert document["confirmed"] == 1
    assert document["failures"] == []
    (held,) = await read_all(backend, "target")
    assert held.properties.message_id == "m-1"
    assert held.body == b"x"
    assert held.properties.delivery_mode == 2  # persistent unless told


async def test_persistent_unless_told_and_a_files_own_mode_kept(
    backend: Backend, tmp_path: Path
) -> None:
    await declare(backend, "target")
    transient = await rr(backend, "publish", "target", "--body", "t", "-P", "delivery_mode=1")
    assert transient.exit_code == 0, transient.output
    file = tmp_path / "modes.jsonl"
    records = [
        {"body": base64.b64encode(b"f1").decode(), "properties": {"delivery_mode": 1}},
        {"body": base64.b64encode(b"f-").decode()},
    ]
    file.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    # a --property over a file's messages leaves their delivery_mode as it is
    from_file = await rr(backend, "publish", "target", "--file", str(file), "-P", "type=t")
    assert from_file.exit_code == 0, from_file.output
    held = await read_all(backend, "target")
    assert [(d.body, d.properties.delivery_mode) for d in held] == [
        (b"t", 1),
        (b"f1", 1),
        (b"f-", None),
    ]
    assert [d.properties.type for d in held] == [None, "t", "t"]


async def test_unroutable_is_reported_as_returned(backend: Backend) -> None:
    result = await rr(
        backend,
        "publish",
        "--exchange",
        "amq.direct",
        "--routing-key",
        "nowhere",
        "--body",
        "lost",
        "--count",
        "3",
        "-o",
        "json",
    )
    assert result.exit_code == 1, result.output
    document = json_of(result)
    assert document["messages"] == 3
    assert document["confirmed"] == 0
    assert document["returned"] == 3
    assert [failure["outcome"] for failure in document["failures"]] == ["returned"] * 3
    assert "3 of 3 message(s) not confirmed" in result.stderr


async def test_a_missing_exchange_is_reported_as_refused(backend: Backend) -> None:
    """The server closes the channel (404) for a publish to an exchange that does not exist:
    what was sent on it was refused, surely not enqueued; the rest are never sent."""
    result = await rr(
        backend,
        "publish",
        "--exchange",
        "no-such-exchange",
        "--routing-key",
        "k",
        "--body",
        "x",
        "--count",
        "3",
        "-o",
        "json",
    )
    assert result.exit_code == 1, result.output
    document = json_of(result)
    assert document["confirmed"] == 0
    assert document["unconfirmed"] == 0
    refused = document["refused"]
    assert refused >= 1  # the first alone, and any the window had sent before the close
    assert [failure["outcome"] for failure in document["failures"]] == ["refused"] * refused
    assert document["not_sent"] == 3 - refused


async def test_a_full_queue_that_rejects_publishes_refuses_the_rest(backend: Backend) -> None:
    await declare(backend, "full", arguments={"x-max-length": 2, "x-overflow": "reject-publish"})
    result = await rr(backend, "publish", "full", "--body", "b", "--count", "5", "-o", "json")
    assert result.exit_code == 3, result.output  # some confirmed, some not
    document = json_of(result)
    assert document["confirmed"] == 2
    assert document["refused"] == 3
    assert await depth(backend, "full") == 2


async def test_rate_publishes_every_message(backend: Backend) -> None:
    await declare(backend, "paced")
    result = await rr(backend, "publish", "paced", "--body", "p", "--count", "4", "--rate", "50")
    assert result.exit_code == 0, result.output
    assert await depth(backend, "paced") == 4


async def test_a_ramp_publishes_every_message_and_wants_a_rate(backend: Backend) -> None:
    await declare(backend, "ramped")
    command = ["publish", "ramped", "--body", "p", "--count", "4"]
    refused = await rr(backend, *command, "--ramp", "1")
    assert refused.exit_code == 2, refused.output
    assert "--ramp '1' needs --rate" in refused.stderr
    assert await depth(backend, "ramped") == 0
    result = await rr(backend, *command, "--rate", "50", "--ramp", "0.1")
    assert result.exit_code == 0, result.output
    assert await depth(backend, "ramped") == 4


async def test_export_then_publish_round_trip(backend: Backend, tmp_path: Path) -> None:
    await declare(backend, "source", "copy")
    made = await rr(
        backend,
        "publish",
        "source",
        "--body",
        "one",
        "--header",
        "n:=7",
        "--property",
        "message_id=a",
    )
    assert made.exit_code == 0, made.output
    more = await rr(backend, "publish", "source", "--body", "two", "--property", "message_id=b")
    assert more.exit_code == 0, more.output
    file = tmp_path / "export.jsonl"
    exported = await rr(backend, "dlq", "export", "source", str(file))
    assert exported.exit_code == 0, exported.output
    published = await rr(backend, "publish", "copy", "--file", str(file))
    assert published.exit_code == 0, published.output
    held = await read_all(backend, "copy")
    assert [(d.body, d.properties.message_id) for d in held] == [(b"one", "a"), (b"two", "b")]
    assert held[0].properties.headers == {"n": 7}


async def test_count_publishes_the_whole_file_over_in_its_order(
    backend: Backend, tmp_path: Path
) -> None:
    await declare(backend, "target")
    file = tmp_path / "two.jsonl"
    lines = [
        json.dumps({"body": base64.b64encode(b"a").decode(), "properties": {"message_id": "a"}}),
        json.dumps({"body": base64.b64encode(b"b").decode()}),  # no id: a fresh one each time
    ]
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = await rr(backend, "publish", "target", "--file", str(file), "--count", "3")
    assert result.exit_code == 0, result.output
    assert "6 message(s) to queue 'target': 6 confirmed" in result.stdout
    held = await read_all(backend, "target")
    assert [d.body for d in held] == [b"a", b"b", b"a", b"b", b"a", b"b"]
    ids = [d.properties.message_id for d in held]
    assert ids[0::2] == ["a", "a", "a"]  # a given id is kept in every copy
    assert len(set(ids[1::2])) == 3
    assert None not in ids


async def test_stdin_for_a_body_and_for_a_file(backend: Backend) -> None:
    await declare(backend, "target")
    binary = b"\x00\xffbody"
    line = json.dumps({"body": base64.b64encode(binary).decode(), "properties": {"type": "t"}})
    from_file = await rr(backend, "publish", "target", "--file", "-", input=line + "\n")
    assert from_file.exit_code == 0, from_file.output
    from_body = await rr(backend, "publish", "target", "--body-file", "-", input="text body")
    assert from_body.exit_code == 0, from_body.output
    held = await read_all(backend, "target")
    assert [d.body for d in held] == [binary, b"text body"]
    assert held[0].properties.type == "t"


async def test_bad_input_publishes_nothing(backend: Backend, tmp_path: Path) -> None:
    await declare(backend, "target")
    bad_header = await rr(backend, "publish", "target", "--body", "x", "--header", "novalue")
    assert bad_header.exit_code == 2, bad_header.output
    assert "--header 'novalue': expected K=V or K:=JSON" in bad_header.stderr
    bad_property = await rr(backend, "publish", "target", "--body", "x", "-P", "colour=red")
    assert bad_property.exit_code == 2, bad_property.output
    missing = await rr(backend, "publish", "target", "--file", str(tmp_path / "nope.jsonl"))
    assert missing.exit_code == 65, missing.output
    file = tmp_path / "half.jsonl"
    good = json.dumps({"body": base64.b64encode(b"ok").decode()})
    file.write_text(f"{good}\n{good}\nnot json\n", encoding="utf-8")
    damaged = await rr(backend, "publish", "target", "--file", str(file))
    assert damaged.exit_code == 65, damaged.output
    assert f"{file}:3: not JSON" in damaged.stderr
    assert "nothing was published" in damaged.stderr
    both = await rr(backend, "publish", "target", "--exchange", "x", "--body", "x")
    assert both.exit_code == 2, both.output
    assert await depth(backend, "target") == 0


async def test_printed_text_is_escaped(backend: Backend) -> None:
    result = await rr(
        backend,
        "publish",
        "--exchange",
        "amq.direct",
        "--routing-key",
        "no\x1b[31mwhere",
        "--body",
        "x",
    )
    assert result.exit_code == 1, result.output
    assert "\x1b" not in result.output
