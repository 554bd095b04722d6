"""rr dlq edit, on RabbitMQ and on the emulator: one dead letter's body and headers edited and
retried to its origin with the edit marked, the original kept in an export line that rr dlq
import restores, every other letter left in its place; refusals change nothing
(docs/reference/dlq.md, "Edit and retry")."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli.dlq import common as dlq_common
from tests.backends import Backend
from tests.dlq.support import (
    as_it_is,
    cli_arguments,
    declare,
    fail_back,
    json_of,
    publish_all,
    rr,
    runner,
    synthesized,
)
from tests.observe import peek as read_all

NOW = datetime.now(UTC).replace(microsecond=0)


async def six_letters(backend: Backend) -> list[str]:
    """Six of rr's dead letters (refunds and orders, JSON bodies) in ``dead``."""
    await declare(backend, "dead", "refunds", "orders")
    letters = [synthesized("rr", n, NOW) for n in range(6)]
    await publish_all(backend, "dead", letters)
    return [str(properties.message_id) for _, properties in letters]


async def test_an_edited_body_and_headers_go_home_and_the_original_is_kept(
    backend: Backend, tmp_path: Path
) -> None:
    ids = await six_letters(backend)
    original = next(d for d in await read_all(backend, "dead") if d.properties.message_id == ids[2])
    new_body = tmp_path / "body.json"
    new_body.write_text('{"kind": "rr", "n": 2, "origin": "refunds", "card": "4242"}')
    keep = tmp_path / "kept.jsonl"

    result = await rr(
        backend,
        "dlq",
        "edit",
        "dead",
        "--id",
        ids[2],
        "--body",
        str(new_body),
        "--set-header",
        "x-tenant=globex",
        "--remove-header",
        "x-missing",
        "--keep",
        str(keep),
        "--yes",
        "-o",
        "json",
    )

    assert result.exit_code == 0, result.output
    document = json_of(result)
    assert document["published"] is True
    assert document["to"] == "refunds"
    assert document["original_sha256"] == hashlib.sha256(original.body).hexdigest()
    # the copy: new body, edited headers, a fresh start, the edit marked
    (copy,) = await read_all(backend, "refunds")
    assert copy.properties.message_id == ids[2]
    assert copy.body == new_body.read_bytes()
    headers = dict(copy.properties.headers or {})
    assert headers["x-tenant"] == "globex"
    assert headers["rr-original-body-sha256"] == hashlib.sha256(original.body).hexdigest()
    assert str(headers["rr-edited-at"]).endswith("Z")
    assert headers["rr-replayed-count"] == 1
    assert not {"x-ruststream-retry-count", "rr-error-type", "rr-origin-queue"} & set(headers)
    assert copy.properties.content_type == "application/json"
    # the dead letter is gone; the others are in their order
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == [
        m for m in ids if m != ids[2]
    ]
    assert await read_all(backend, "orders") == []
    # the original, byte for byte, in an export line rr dlq import takes
    (line,) = keep.read_text().splitlines()
    assert json.loads(line)["properties"]["message_id"] == ids[2]
    await declare(backend, "restored")
    restored = await rr(backend, "dlq", "import", str(keep), "--to", "restored")
    assert restored.exit_code == 0, restored.output
    (back,) = await read_all(backend, "restored")
    assert back.body == original.body
    assert back.properties.headers == original.properties.headers


async def test_the_editor_edits_the_body(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = await six_letters(backend)
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nsed -i \'s/"n": 4/"n": 44/\' "$1"\n')
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.chdir(tmp_path)

    result = await rr(backend, "dlq", "edit", "dead", "--id", ids[4], "--yes")

    assert result.exit_code == 0, result.output
    assert "stopped early" not in result.output  # one letter: no --limit was given
    # the diff, shown before the question: the one line as it was and as it is
    assert '-{"kind": "rr", "n": 4, "origin": "refunds"}' in result.stderr
    assert '+{"kind": "rr", "n": 44, "origin": "refunds"}' in result.stderr
    (copy,) = await read_all(backend, "refunds")
    # the file as the editor saved it: only the edited value changed
    assert copy.body == b'{"kind": "rr", "n": 44, "origin": "refunds"}'
    assert len(list(tmp_path.glob("rr-edit-dead-s-rr-4-*.jsonl"))) == 1
    assert len(await read_all(backend, "dead")) == 5


async def test_a_body_that_is_no_json_is_refused_unless_forced(
    backend: Backend, tmp_path: Path
) -> None:
    ids = await six_letters(backend)
    broken = tmp_path / "broken"
    broken.write_text('{"kind": "rr", ')
    keep = tmp_path / "kept.jsonl"
    args = ["dlq", "edit", "dead", "--id", ids[1], "--body", str(broken), "--keep", str(keep)]

    refused = await rr(backend, *args, "--yes")

    assert refused.exit_code == 65, refused.output
    assert "the edited body is not JSON: Expecting property name" in refused.stderr
    assert "(--force publishes it anyway)" in refused.stderr
    assert not keep.exists()
    assert len(await read_all(backend, "dead")) == 6
    assert await read_all(backend, "orders") == []

    forced = await rr(backend, *args, "--yes", "--force")
    assert forced.exit_code == 0, forced.output
    (copy,) = await read_all(backend, "orders")
    assert copy.body == b'{"kind": "rr", '


async def test_what_cannot_be_edited_changes_nothing(backend: Backend, tmp_path: Path) -> None:
    ids = await six_letters(backend)
    body = tmp_path / "b"
    body.write_text("{}")
    missing = await rr(backend, "dlq", "edit", "dead", "--id", "nope", "--body", str(body), "--yes")
    assert missing.exit_code == 1
    assert "no message with id 'nope' in 'dead' (6 read)" in missing.stderr
    owned = await rr(
        backend, "dlq", "edit", "dead", "--id", ids[0], "--set-header", "x-death=1", "--yes"
    )
    assert owned.exit_code == 2
    assert "written by rr or the broker" in owned.stderr
    retry = await rr(
        backend,
        "dlq",
        "edit",
        "dead",
        "--id",
        ids[0],
        "--remove-header",
        "x-ruststream-retry-count",
        "--yes",
    )
    assert retry.exit_code == 2
    unchanged = await rr(
        backend,
        "dlq",
        "edit",
        "dead",
        "--id",
        ids[0],
        "--body",
        str(_same_body(tmp_path)),
        "--yes",
    )
    assert unchanged.exit_code == 0, unchanged.output
    assert "unchanged; nothing was published" in unchanged.stdout
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == ids
    assert await read_all(backend, "refunds") == []


def _same_body(tmp_path: Path) -> Path:
    path = tmp_path / "same"
    path.write_bytes(json.dumps({"kind": "rr", "n": 0, "origin": "refunds"}).encode())
    return path


async def test_two_letters_with_one_id_need_a_position(backend: Backend, tmp_path: Path) -> None:
    await declare(backend, "dead", "refunds")
    first, second = synthesized("rr", 0, NOW), synthesized("rr", 2, NOW)
    twin = (second[0], dataclasses.replace(second[1], message_id="s-rr-0"))
    await publish_all(backend, "dead", [first, twin])
    body = tmp_path / "b"
    body.write_text('{"edited": true}')

    ambiguous = await rr(
        backend, "dlq", "edit", "dead", "--id", "s-rr-0", "--body", str(body), "--yes"
    )
    assert ambiguous.exit_code == 2
    assert "2 messages with id 's-rr-0' in 'dead' (at #1, #2)" in ambiguous.stderr

    second_one = await rr(
        backend,
        "dlq",
        "edit",
        "dead",
        "--id",
        "s-rr-0",
        "--position",
        "2",
        "--body",
        str(body),
        "--keep",
        str(tmp_path / "k.jsonl"),
        "--yes",
    )
    assert second_one.exit_code == 0, second_one.output
    (left,) = await read_all(backend, "dead")
    assert left.body == first[0]
    (copy,) = await read_all(backend, "refunds")
    assert copy.body == b'{"edited": true}'


async def test_no_editor_and_no_body_is_a_usage_error(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = await six_letters(backend)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    result = await rr(backend, "dlq", "edit", "dead", "--id", ids[0], "--yes")
    assert result.exit_code == 2
    assert "no editor: set $VISUAL or $EDITOR" in result.stderr
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == ids


# ------------------------------------------------------ the body as written, the letter as read

TRICKY = (
    b'\n{"amount": 10.10, "limit": 1e400,\r\n "rate": 1.00000000000000001, "k": 1, "k": 2,'
    b'\r "note": "card declined"}'
)
"""A JSON body no re-serialisation keeps: a leading line break, numbers a parser rounds, a
duplicate key, a CRLF and a lone CR (JSON whitespace both), no final newline."""


async def one_letter(backend: Backend, body: bytes, content_type: str = "application/json") -> str:
    """``dead`` (and refunds) with three of rr's dead letters, the middle one with ``body``."""
    await declare(backend, "dead", "refunds", "orders")
    letters = [synthesized("rr", n, NOW) for n in (0, 2, 4)]
    _, properties = letters[1]
    letters[1] = (body, dataclasses.replace(properties, content_type=content_type))
    await publish_all(backend, "dead", letters)
    return str(properties.message_id)


def _editor(tmp_path: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    editor = tmp_path / "editor.sh"
    editor.write_text(f"#!/bin/sh\n{script}\n")
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.delenv("VISUAL", raising=False)


def _changed_lines(stderr: str) -> list[str]:
    return [
        line
        for line in stderr.splitlines()
        if line.startswith(("-", "+")) and not line.startswith(("--- ", "+++ "))
    ]


async def test_one_word_changed_in_the_editor_publishes_every_other_byte(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    letter_id = await one_letter(backend, TRICKY)
    _editor(tmp_path, "sed -i 's/declined/accepted/' \"$1\"", monkeypatch)
    keep = tmp_path / "kept.jsonl"

    result = await rr(
        backend, "dlq", "edit", "dead", "--id", letter_id, "--keep", str(keep), "--yes"
    )

    assert result.exit_code == 0, result.output
    (copy,) = await read_all(backend, "refunds")
    assert copy.properties.message_id == letter_id
    assert copy.body == TRICKY.replace(b"declined", b"accepted")
    # the diff: the one line that changed, as it is (its CR shown), and no final newline
    assert _changed_lines(result.stderr) == [
        '- "rate": 1.00000000000000001, "k": 1, "k": 2,\\r "note": "card declined"}',
        '+ "rate": 1.00000000000000001, "k": 1, "k": 2,\\r "note": "card accepted"}',
    ]
    assert result.stderr.count("\\ No newline at end of file") == 2
    assert len(await read_all(backend, "dead")) == 2


async def test_a_body_file_is_published_byte_for_byte_and_json_is_strict(
    backend: Backend, tmp_path: Path
) -> None:
    letter_id = await one_letter(backend, b'{"amount": 10.10}')
    args = ["dlq", "edit", "dead", "--id", letter_id, "--yes"]
    before = as_it_is(await read_all(backend, "dead"))
    for not_json in (b'{"amount": NaN}', b'{"amount": Infinity}', b'{"amount": -Infinity}'):
        path = tmp_path / "not-json"
        path.write_bytes(not_json)
        refused = await rr(backend, *args, "--body", str(path), "--keep", str(tmp_path / "k"))
        assert refused.exit_code == 65, (not_json, refused.output)
        assert "the edited body is not JSON" in refused.stderr
        assert not (tmp_path / "k").exists()
    assert as_it_is(await read_all(backend, "dead")) == before
    assert await read_all(backend, "refunds") == []

    new_body = tmp_path / "new"
    new_body.write_bytes(b'{"amount": 10.10, "limit": 1e400}\r\n')
    done = await rr(backend, *args, "--body", str(new_body), "--keep", str(tmp_path / "k2"))
    assert done.exit_code == 0, done.output
    (copy,) = await read_all(backend, "refunds")
    assert copy.body == b'{"amount": 10.10, "limit": 1e400}\r\n'
    assert _changed_lines(done.stderr) == [
        '-{"amount": 10.10}',
        '+{"amount": 10.10, "limit": 1e400}\\r',
    ]


async def test_a_letter_changed_since_it_was_read_is_not_published(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read, edited, then - before the question is answered - a colleague edits the same
    letter's headers with rr dlq edit, and the copy fails back into the queue with the same
    body: the letter there now is not the one read, so nothing is published or acked."""
    ids = await six_letters(backend)
    target = ids[2]
    new_body = tmp_path / "body.json"
    new_body.write_text('{"kind": "rr", "n": 2, "origin": "refunds", "card": "4242"}')
    keep = tmp_path / "kept.jsonl"
    asked = dlq_common.ask
    meanwhile: list[object] = []

    async def colleague_first(question: str, yes: bool, action: str) -> None:
        if not meanwhile:
            meanwhile.append(question)
            colleague = await asyncio.to_thread(
                runner.invoke,
                app,
                [
                    "dlq", "edit", "dead", "--id", target, "--set-header", "x-tenant=globex",
                    "--keep", str(tmp_path / "colleague.jsonl"), "--yes",
                    *cli_arguments(backend)[0],
                ],
                **cli_arguments(backend)[1],
            )  # fmt: skip
            assert colleague.exit_code == 0, colleague.output
            await fail_back(backend, "refunds", "dead")
            meanwhile.append(as_it_is(await read_all(backend, "dead")))
        await asked(question, yes, action)

    monkeypatch.setattr(dlq_common, "ask", colleague_first)

    result = await rr(
        backend, "dlq", "edit", "dead", "--id", target, "--body", str(new_body),
        "--keep", str(keep), "--yes",
    )  # fmt: skip

    assert result.exit_code == 1, result.output
    assert "is not the one read: its headers changed since" in result.stderr
    assert "nothing was published and no letter removed" in result.stderr
    # the queue holds what it held after the colleague's fix, the fix intact
    (_, held) = meanwhile
    assert as_it_is(await read_all(backend, "dead")) == held
    fixed = [letter for letter in held if letter[0] == target]
    assert [letter[2]["x-tenant"] for letter in fixed] == ["globex"]
    assert await read_all(backend, "refunds") == []
    assert not keep.exists()


async def test_a_letter_of_a_quorum_queue_is_still_the_one_read_after_the_read(
    backend: Backend, tmp_path: Path
) -> None:
    """A read of a quorum queue raises each letter's x-delivery-count (4.3: x-acquired-count
    too) and may hand the head out last afterwards: neither makes the letter another one."""
    await declare(backend, "refunds", "orders")
    await declare(backend, "qdead", arguments={"x-queue-type": "quorum"})
    letters = [synthesized("rr", n, NOW) for n in range(3)]
    await publish_all(backend, "qdead", letters)
    first = str(letters[0][1].message_id)
    new_body = tmp_path / "body.json"
    new_body.write_bytes(b'{"kind": "rr", "n": 0, "origin": "refunds", "card": "4242"}')

    result = await rr(
        backend, "dlq", "edit", "qdead", "--id", first, "--body", str(new_body),
        "--keep", str(tmp_path / "kept.jsonl"), "--yes",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    (copy,) = await read_all(backend, "refunds")
    assert copy.body == new_body.read_bytes()
    left = sorted(d.properties.message_id or "" for d in await read_all(backend, "qdead"))
    assert left == sorted(str(properties.message_id) for _, properties in letters[1:])
