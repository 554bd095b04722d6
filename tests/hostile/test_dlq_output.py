"""``rr dlq`` output a terminal cannot be fooled by: JSON (inspect, replay) with every control
and bidi character escaped, bodies holding them base64, tables escaped, export files without
them raw; bodies nested too deep to pretty-print; non-ASCII queue names (docs/reference/dlq.md). On
RabbitMQ and the emulator."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import aiormq
from hypothesis import given, settings
from hypothesis import strategies as st
from pamqp import commands as spec

from rabbitctl_retry.cli._common import print_json
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.json_text import escape_unsafe
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, RabbitBackend
from tests.dlq.support import death, declare, publish_all, rr
from tests.hostile.output import UNSAFE
from tests.observe import depth, peek

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)

# one of each kind, as text and as the escape a table shows
HOSTILE = {
    "esc": ("\x1b[31m", "\\x1b[31m"),
    "c1": ("\x85\x9b", "\\x85\\x9b"),
    "rlo": ("\u202e", "\\u202e"),
    "lri": ("\u2066", "\\u2066"),
    "lrm": ("\u200e", "\\u200e"),
    "alm": ("\u061c", "\\u061c"),
    "ls": ("\u2028", "\\u2028"),
    "del": ("\x7f", "\\x7f"),
}
ALL = "".join(text for text, _ in HOSTILE.values())


def clean(text: str) -> None:
    assert UNSAFE.search(text) is None, repr(text)


def hostile_headers() -> dict[str, FieldValue]:
    headers: dict[str, FieldValue] = {
        f"rr-error-{name}": f"<{text}>" for name, (text, _) in HOSTILE.items()
    }
    headers["rr-origin-queue"] = f"q{ALL}"
    headers["x-death"] = [death(f"d{ALL}", "rejected", T0)]
    headers["x-list"] = [ALL, {"inner": ALL}]
    headers[f"key{ALL}"] = "value"
    return headers


def hostile_properties(message_id: str, **more: str) -> Properties:
    return Properties(
        message_id=message_id,
        content_type=f"text/{ALL}",
        correlation_id=ALL,
        headers=hostile_headers(),
        **more,  # type: ignore[arg-type]
    )


BODIES = {
    "c1": "c1 \x85 in text".encode(),
    "bidi": "price \u202e01$".encode(),
    "isolate": "a \u2066b\u2069 c".encode(),
    "lrm": "a\u200eb".encode(),
    "esc": b"\x1b[2J",
    "separator": "line\u2028separator".encode(),  # text: not a control character
    "plain": "żółw\ttab\r\n".encode(),
}


async def test_inspect_json_escapes_and_base64s_what_a_terminal_acts_on(backend: Backend) -> None:
    await declare(backend, "dead")
    await publish_all(
        backend, "dead", [(body, hostile_properties(name)) for name, body in BODIES.items()]
    )

    result = await rr(backend, "dlq", "inspect", "dead", "-o", "json")

    assert result.exit_code == 0, result.output
    clean(result.stdout + result.stderr)
    for escape in ("\\u202e", "\\u0085", "\\u2028", "\\u007f"):
        assert escape in result.stdout
    document = json.loads(result.stdout)
    messages = {message["message_id"]: message for message in document["messages"]}
    assert set(messages) == set(BODIES)
    for name, body in BODIES.items():
        message = messages[name]
        text_body = name in ("separator", "plain")
        assert message["body_encoding"] == ("utf-8" if text_body else "base64"), name
        shown = message["body"].encode() if text_body else base64.b64decode(message["body"])
        assert shown == body
        assert message["properties"]["content_type"] == f"text/{ALL}"
        assert message["properties"]["correlation_id"] == ALL
        assert message["headers"]["rr-error-rlo"] == "<\u202e>"
        assert message["headers"]["x-list"] == [ALL, {"inner": ALL}]
        assert message["headers"][f"key{ALL}"] == "value"
        assert message["origin_queue"] == f"q{ALL}"
        assert message["deaths"][0]["queue"] == f"d{ALL}"
    assert await depth(backend, "dead") == len(BODIES)


async def test_the_table_escapes_bodies_headers_x_death_and_queue_names(backend: Backend) -> None:
    queue = "dead.\u202e\x85"
    await declare(backend, queue)
    await publish_all(
        backend,
        queue,
        [(BODIES["separator"], hostile_properties("separator"))]
        + [(f"<{text}>".encode(), hostile_properties(name)) for name, (text, _) in HOSTILE.items()],
    )

    result = await rr(backend, "dlq", "inspect", queue)

    assert result.exit_code == 0, result.output
    out = result.stdout
    clean(out + result.stderr)
    for name, (_, escaped) in HOSTILE.items():
        assert f"rr-error-{name}: <{escaped}>" in out, name  # headers
    assert "line\\u2028separator" in out  # a text body
    assert "in 'dead.\\u202e\\x85'" in out.splitlines()[-1]  # the queue name
    squeezed = "".join(out.split())  # long values fold over lines in the table
    assert "origin:q\\x1b[31m\\x85\\x9b\\u202e" in squeezed
    assert "d\\x1b[31m\\x85\\x9b\\u202e\\u2066\\u200e\\u061c\\u2028\\x7frejectedx1" in squeezed
    assert await depth(backend, queue) == len(HOSTILE) + 1


async def test_export_writes_no_control_character_raw_and_import_restores_them(
    backend: Backend, tmp_path: Path
) -> None:
    await declare(backend, "dead", "restored")
    await publish_all(
        backend, "dead", [(body, hostile_properties(name)) for name, body in BODIES.items()]
    )
    file = tmp_path / "dead.jsonl"

    exported = await rr(backend, "dlq", "export", "dead", str(file))

    assert exported.exit_code == 0, exported.output
    clean(exported.stdout + exported.stderr)
    text = file.read_text(encoding="utf-8")
    clean(text)
    records = [json.loads(line) for line in text.splitlines()]
    assert [base64.b64decode(record["body"]) for record in records] == list(BODIES.values())
    assert all(record["headers"]["x-list"] == [ALL, {"inner": ALL}] for record in records)

    imported = await rr(backend, "dlq", "import", str(file), "--to", "restored")

    assert imported.exit_code == 0, imported.output
    clean(imported.stdout + imported.stderr)
    original = [(d.body, d.properties.headers) for d in await peek(backend, "dead")]
    assert [(d.body, d.properties.headers) for d in await peek(backend, "restored")] == original


async def test_replay_json_escapes_target_names_and_reasons(backend: Backend) -> None:
    await declare(backend, "dead")
    await publish_all(backend, "dead", [(b"x", hostile_properties("ghost"))])

    result = await rr(backend, "dlq", "replay", "dead", "--yes", "-o", "json")

    assert result.exit_code == 1, result.output  # every attempt failed: no such queue
    clean(result.stdout + result.stderr)
    (outcome,) = json.loads(result.stdout)["results"]
    assert outcome["to"] == f"q{ALL}"
    assert outcome["outcome"] == "failed"
    assert await depth(backend, "dead") == 1


async def test_bodies_nested_too_deep_show_as_text_without_a_traceback(backend: Backend) -> None:
    await declare(backend, "dead")
    thousand = b"[" * 1000 + b"]" * 1000
    far = b"[" * 100_000 + b"]" * 100_000
    await publish_all(
        backend,
        "dead",
        [(thousand, Properties(message_id="1k")), (far, Properties(message_id="100k"))],
    )

    table = await rr(backend, "dlq", "inspect", "dead")

    assert table.exit_code == 0, table.output
    assert table.stderr == ""
    assert "[[[[[[[[[[" in table.stdout
    assert "… (198,000 more bytes)" in table.stdout  # the 100k one, cut as text
    clean(table.stdout)
    document = await rr(backend, "dlq", "inspect", "dead", "-o", "json")
    assert document.exit_code == 0
    first, second = json.loads(document.stdout)["messages"]
    assert (first["body"], first["body_encoding"]) == (thousand.decode(), "utf-8")
    assert second["body"] == far.decode()


async def test_a_queue_with_a_non_ascii_name_can_be_inspected_exported_imported(
    backend: Backend, tmp_path: Path
) -> None:
    queue = "dead.é"
    if isinstance(backend, RabbitBackend):  # created by a raw AMQP client, not by rr
        connection = await aiormq.connect(backend.url)
        try:
            channel = await connection.channel()
            await channel.queue_declare(queue, durable=True)
            for number in (1, 2):
                await channel.basic_publish(
                    b"body %d" % number,
                    routing_key=queue,
                    properties=spec.Basic.Properties(message_id=f"e{number}"),
                )
        finally:
            await connection.close()
        await _wait_for(backend, queue, 2)
    else:
        await declare(backend, queue)
        await publish_all(
            backend, queue, [(b"body %d" % n, Properties(message_id=f"e{n}")) for n in (1, 2)]
        )

    shown = await rr(backend, "dlq", "inspect", queue)
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines()[-1] == (
        "2 dead letters shown of 2 in 'dead.é': (unknown origin)/(unknown reason) 2"
    )
    as_json = await rr(backend, "dlq", "inspect", queue, "-o", "json")
    assert as_json.exit_code == 0, as_json.output
    document = json.loads(as_json.stdout)
    assert document["queue"] == queue
    assert [message["message_id"] for message in document["messages"]] == ["e1", "e2"]
    file = tmp_path / "é.jsonl"
    exported = await rr(backend, "dlq", "export", queue, str(file))
    assert exported.exit_code == 0, exported.output
    assert exported.stdout.startswith("exported 2 message(s) of 2 from 'dead.é'")
    imported = await rr(backend, "dlq", "import", str(file), "--to", queue)
    assert imported.exit_code == 0, imported.output
    assert [d.properties.message_id for d in await peek(backend, queue)] == [
        "e1",
        "e2",
        "e1",
        "e2",
    ]


async def _wait_for(backend: Backend, queue: str, count: int) -> None:
    for _ in range(200):
        if await depth(backend, queue) >= count:
            return
        await backend.elapse(0.05)
    raise AssertionError(f"{queue} never held {count} messages")


def test_print_json_escapes_every_unsafe_character_and_keeps_the_value(capsys: object) -> None:
    value = {
        "all": "".join(chr(code) for code in range(0xA0)) + "\u061c\u200e\u200f",
        "bidi": "".join(chr(code) for code in range(0x202A, 0x202F)) + "\u2066\u2067\u2068\u2069",
        "separators": "\u2028\u2029",
        "lone": "\udc80",
        f"key\u202e{ALL}": [ALL, 1, None],
    }
    print_json(value)
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    clean(out)
    assert json.loads(out) == value
    assert escape_unsafe('"plain ascii"') == '"plain ascii"'


CHARACTERS = st.characters(exclude_categories=()) | st.sampled_from(
    list("\x1b\x85\x9b\x7f\u202e\u2066\u2069\u200e\u061c\u2028\u2029\ud800\n\t")
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(CHARACTERS),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(CHARACTERS, max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES, indent=st.sampled_from([None, 2]))
def test_escaped_json_is_the_same_value_with_nothing_raw(value: object, indent: int | None) -> None:
    text = escape_unsafe(json.dumps(value, ensure_ascii=False, indent=indent))
    clean(text)
    text.encode("utf-8")  # no lone surrogate left raw: it can be written out
    assert json.loads(text) == value
