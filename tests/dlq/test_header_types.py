"""Every copy ``rr dlq`` makes keeps each application header's type tag and bytes, on the wire
(docs/reference/dlq.md, "What a replayed copy carries", "Export format"): a dead letter published
with one header of each field type RabbitMQ takes (tests/wire_headers.py, over a raw socket) is
replayed, moved, edited, and exported and imported; each copy's bytes, read over a raw socket,
hold every one of them as the letter held it (RabbitMQ 4.0 and 4.3 write every table again,
names sorted and ``L`` as ``l``; 3.10 keeps a classic queue's bytes, and the order with them),
rr's own headers after them. A letter without a ``message_id`` keeps none.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.backends import Backend
from tests.dlq.support import declare, json_of, rr
from tests.wire_headers import (
    TYPED_NAMES,
    TYPED_TABLE,
    Field,
    Taken,
    as_the_server_writes_it,
    field,
    parse,
    publish_typed,
    take_typed,
)

ORIGIN = field("rr-origin-queue", "S", b"\x00\x00\x00\x04home")
LETTER = TYPED_TABLE + ORIGIN
"""A dead letter of rr's: every type, then where it failed."""


def as_served(backend: Backend, table: bytes) -> list[Field]:
    """``table`` as the server hands it out of a classic queue (tests/wire_headers.py)."""
    older = backend.version == "3.10"
    return as_the_server_writes_it(parse(table), written_again=not older, sorted_names=not older)


def typed_part(taken: Taken) -> list[Field]:
    return [f for f in taken.fields if f.name in TYPED_NAMES]


def rr_after_the_others(backend: Backend, taken: Taken, own: list[str]) -> None:
    """On 3.10 (a classic queue keeps the bytes) the copy's names are the letter's, in their
    order, then rr's own; 4.0 and 4.3 sort them."""
    names = [f.name for f in taken.fields]
    if backend.version == "3.10":
        assert names == [*TYPED_NAMES, *own]
    else:
        assert names == sorted(names)
    assert set(names) == {*TYPED_NAMES, *own}


async def test_a_replayed_copy_keeps_each_header_type(backend: Backend) -> None:
    await declare(backend, "dead", "home")
    await publish_typed(backend, "dead", b"letter", table=LETTER)

    result = await rr(backend, "dlq", "replay", "dead", "--yes", "-o", "json")

    assert json_of(result)["replayed"] == 1
    copy = await take_typed(backend, "home")
    assert copy is not None
    assert copy.body == b"letter"
    assert typed_part(copy) == as_served(backend, TYPED_TABLE)
    rr_after_the_others(backend, copy, ["rr-replayed-count", "rr-replayed-at", "rr-replay-run"])
    assert copy.message_id is None
    assert [r["message_id"] for r in json_of(result)["results"]] == [None]


async def test_a_moved_copy_keeps_every_header_as_it_was(backend: Backend) -> None:
    await declare(backend, "dead", "elsewhere")
    await publish_typed(backend, "dead", b"letter", table=LETTER)

    result = await rr(backend, "dlq", "move", "dead", "--to", "elsewhere", "--yes", "-o", "json")

    assert json_of(result)["moved"] == 1
    copy = await take_typed(backend, "elsewhere")
    assert copy is not None
    assert copy.fields == as_served(backend, LETTER)  # rr adds no header to a move
    assert copy.message_id is None


async def test_an_edited_copy_keeps_the_headers_it_did_not_edit(
    backend: Backend, tmp_path: Path
) -> None:
    await declare(backend, "dead", "home", "restored")
    await publish_typed(backend, "dead", b"letter", table=LETTER, message_id="m-1")
    keep = tmp_path / "kept.jsonl"

    result = await rr(
        backend,
        *("dlq", "edit", "dead", "--id", "m-1", "--set-header", "S-text=edited"),
        *("--keep", str(keep), "--yes", "-o", "json"),
    )

    assert json_of(result)["published"] is True
    copy = await take_typed(backend, "home")
    assert copy is not None
    assert copy.message_id == "m-1"
    edited = [f for f in as_served(backend, TYPED_TABLE) if f.name != "S-text"]
    assert [f for f in typed_part(copy) if f.name != "S-text"] == edited
    assert {f.name: (f.tag, f.data) for f in copy.fields}["S-text"] == (
        "S",
        b"\x00\x00\x00\x06edited",
    )
    # the original, kept in an export line, comes back byte for byte
    imported = await rr(backend, "dlq", "import", str(keep), "--to", "restored")
    assert imported.exit_code == 0, imported.output
    back = await take_typed(backend, "restored")
    assert back is not None
    assert back.fields == as_served(backend, LETTER)


async def test_export_and_import_keep_each_header_type(backend: Backend, tmp_path: Path) -> None:
    await declare(backend, "dead", "restored")
    await publish_typed(backend, "dead", b"letter", table=LETTER)
    file = tmp_path / "dead.jsonl"

    exported = await rr(backend, "dlq", "export", "dead", str(file))
    assert exported.exit_code == 0, exported.output
    (line,) = file.read_text(encoding="utf-8").splitlines()
    headers = json.loads(line)["headers"]
    assert headers["D-decimal"] == {"$decimal": "123.45"}  # the types are in the file
    assert headers["I-int32"] == {"$int32": 7}
    imported = await rr(backend, "dlq", "import", str(file), "--to", "restored")

    assert imported.exit_code == 0, imported.output
    back = await take_typed(backend, "restored")
    assert back is not None
    assert back.body == b"letter"
    assert back.fields == as_served(backend, LETTER)  # byte for byte, in its order
    assert back.message_id is None
