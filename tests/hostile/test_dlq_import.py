"""``rr dlq import``: a file the broker would refuse half-way is refused whole, before anything
is published; an import the broker stops anyway names the first line not imported, and
``--from-line`` imports exactly the rest (docs/reference/dlq.md, "Import"). On RabbitMQ and the
emulator."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rabbitctl_retry.cli.dlq.report import line_list
from rabbitctl_retry.dlq.jsonl import Record, record_problem
from rabbitctl_retry.ops.dlq import login_user, properties_of
from rabbitctl_retry.transport.values import encoding_problem
from tests.backends import Backend, RabbitBackend
from tests.dlq.support import declare, rr
from tests.hostile.output import clean, one_error_line
from tests.observe import depth, peek
from tests.target_line import after_target


def line(message_id: str, **changes: Any) -> str:
    """One export line for a small message ``message_id``; ``changes`` replace or add
    top-level keys, ``properties`` and ``headers`` are merged."""
    document: dict[str, Any] = {
        "body": base64.b64encode(message_id.encode()).decode(),
        "body_size": len(message_id.encode()),
        "properties": {"message_id": message_id, "delivery_mode": 2},
        "headers": {"x-tenant": "acme"},
    }
    for key, value in changes.items():
        if key in ("properties", "headers"):
            document[key] = {**document[key], **value}
        else:
            document[key] = value
    return json.dumps(document)


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{text}\n" for text in lines), encoding="utf-8")
    return path


async def ids_in(backend: Backend, queue: str) -> list[str | None]:
    return [delivery.properties.message_id for delivery in await peek(backend, queue)]


async def take_all(backend: Backend, queue: str) -> list[str | None]:
    """Consume (get and ack) every message of ``queue``, as a service would; their ids."""
    connection = await backend.connect()
    try:
        channel = await connection.channel()
        taken = []
        while (delivery := await channel.get(queue)) is not None:
            await channel.ack(delivery.delivery_tag)
            taken.append(delivery.properties.message_id)
        await channel.close()
        return taken
    finally:
        await connection.close()


def deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


NAME_300 = "m" * 300
KEY_256 = "k" * 256

# (properties or headers of line 4, the field the error names, words of the reason)
REFUSED: list[tuple[dict[str, Any], str, str]] = [
    ({"properties": {"message_id": NAME_300}}, "properties.message_id", "300 bytes long"),
    ({"properties": {"expiration": "abc"}}, "properties.expiration", "'abc' is not a whole"),
    ({"properties": {"expiration": "-5"}}, "properties.expiration", "outside 0 to 4294967295"),
    (
        {"properties": {"expiration": "4294967296"}},
        "properties.expiration",
        "outside 0 to 4294967295",
    ),
    ({"properties": {"delivery_mode": 7}}, "properties.delivery_mode", "must be 1 (transient)"),
    ({"properties": {"priority": 256}}, "properties.priority", "integer 0-255, not 256"),
    ({"properties": {"priority": -1}}, "properties.priority", "integer 0-255, not -1"),
    (
        {"properties": {"timestamp": "0001-01-01T00:00:00+00:00"}},
        "properties.timestamp",
        "outside what an AMQP timestamp holds",
    ),
    (
        {"properties": {"timestamp": "1969-12-31T23:59:58Z"}},
        "properties.timestamp",
        "outside what an AMQP timestamp holds",
    ),
    ({"properties": {"content_type": "t" * 256}}, "properties.content_type", "256 bytes"),
    ({"properties": {"content_encoding": "é" * 128}}, "properties.content_encoding", "256 bytes"),
    ({"properties": {"correlation_id": NAME_300}}, "properties.correlation_id", "300 bytes"),
    ({"properties": {"reply_to": NAME_300}}, "properties.reply_to", "300 bytes"),
    ({"properties": {"type": NAME_300}}, "properties.type", "300 bytes"),
    ({"properties": {"app_id": NAME_300}}, "properties.app_id", "300 bytes"),
    ({"properties": {"user_id": NAME_300}}, "properties.user_id", "300 bytes"),
    ({"properties": {"app_id": "a\ud800"}}, "properties.app_id", "holds U+D800"),
    ({"properties": {"cluster_id": "c"}}, "unknown property 'cluster_id'", ""),
    ({"headers": {"big": 10**30}}, "headers.big", "1000000000000000000000000000000 is outside"),
    ({"headers": {"small": -(2**63) - 1}}, "headers.small", "outside a signed 64-bit"),
    ({"headers": {"list": [1, [2**64]]}}, "headers.list[1][0]", "outside a signed 64-bit"),
    ({"headers": {"f": float("nan")}}, "headers.f", "nan is not a finite number"),
    (
        {"headers": {"when": {"$timestamp": "0001-01-01T00:00:00Z"}}},
        "headers.when",
        "outside what an AMQP timestamp holds",
    ),
    ({"headers": {KEY_256: 1}}, "headers.'kkkk", "header name of 256 bytes"),
    ({"headers": {"t": {"inner": {KEY_256: 1}}}}, "headers.t.inner.'kkk", "table key of 256"),
    ({"headers": {"s": "x\udc80y"}}, "headers.s", "holds U+DC80"),
    ({"headers": {"deep": deep(101)}}, "headers.deep", "nested more than 100 levels deep"),
    ({"headers": {"huge": "h" * 140_000}}, "properties and headers take", "frame_max"),
]


async def test_a_line_the_broker_would_refuse_stops_the_import_before_anything_is_published(
    backend: Backend, tmp_path: Path
) -> None:
    """Each case: line 4 of 6 holds one value the client or RabbitMQ refuses."""
    await declare(backend, "restored")
    for number, (change, field, why) in enumerate(REFUSED):
        lines = [line(f"m{n}") for n in range(1, 7)]
        lines[3] = line("m4", **change)  # line 4
        file = write(tmp_path / f"dead-{number}.jsonl", lines)

        result = await rr(backend, "dlq", "import", str(file), "--to", "restored")

        assert result.exit_code == 65, (field, result.output)
        error = one_error_line(result.stderr)
        assert error.startswith(f"rr: error: {file}:4: "), error
        assert field in error, error
        assert why in error, error
        assert result.stdout == ""
        clean(result.stdout + result.stderr)
        assert await depth(backend, "restored") == 0, field


async def test_json_nested_100k_deep_is_one_error_line(backend: Backend, tmp_path: Path) -> None:
    await declare(backend, "restored")
    file = write(tmp_path / "deep.jsonl", [line("m1"), '{"body": ' + "[" * 100_000])
    result = await rr(backend, "dlq", "import", str(file), "--to", "restored")
    assert result.exit_code == 65, result.output
    assert one_error_line(result.stderr) == (
        f"rr: error: {file}:2: JSON nested too deeply to read; nothing was imported"
    )
    assert await depth(backend, "restored") == 0


async def test_a_damaged_line_says_nothing_was_imported(backend: Backend, tmp_path: Path) -> None:
    await declare(backend, "restored")
    damaged = line("m2").replace('"body_size": 2', '"body_size": 3')
    assert damaged != line("m2")
    file = write(tmp_path / "bad.jsonl", [line("m1"), damaged, line("m3")])
    result = await rr(backend, "dlq", "import", str(file), "--to", "restored")
    assert result.exit_code == 65, result.output
    assert one_error_line(result.stderr) == (
        f"rr: error: {file}:2: body_size says 3 bytes but the body holds 2: the file is "
        "damaged; nothing was imported"
    )
    assert await depth(backend, "restored") == 0


async def test_a_bad_line_before_from_line_is_still_refused(
    backend: Backend, tmp_path: Path
) -> None:
    await declare(backend, "restored")
    lines = [line("m1", properties={"expiration": "abc"}), line("m2"), line("m3")]
    file = write(tmp_path / "dead.jsonl", lines)
    result = await rr(backend, "dlq", "import", str(file), "--to", "restored", "--from-line", "2")
    assert result.exit_code == 65
    assert one_error_line(result.stderr).startswith(f"rr: error: {file}:1: properties.expiration")
    assert await depth(backend, "restored") == 0


async def test_from_line_past_the_last_message_and_a_bad_target_are_usage_errors(
    backend: Backend, tmp_path: Path
) -> None:
    await declare(backend, "restored")
    file = write(tmp_path / "dead.jsonl", [line("m1"), line("m2"), ""])
    past = await rr(backend, "dlq", "import", str(file), "--to", "restored", "--from-line", "3")
    assert past.exit_code == 2
    assert one_error_line(past.stderr) == (
        f"rr: error: --from-line 3: {file} has no message on that line or after (its last "
        "message is on line 2); nothing was imported"
    )
    long_name = await rr(backend, "dlq", "import", str(file), "--to", "q" * 256)
    assert long_name.exit_code == 2
    assert one_error_line(long_name.stderr) == (
        "rr: error: --to: the queue name 256 bytes long; AMQP carries at most 255 here"
    )
    assert await depth(backend, "restored") == 0


async def test_a_foreign_user_id_is_left_out_with_a_note(backend: Backend, tmp_path: Path) -> None:
    await declare(backend, "restored")
    lines = [
        line("own", properties={"user_id": "guest"}),
        line("foreign", properties={"user_id": "mallory"}),
        line("none"),
    ]
    file = write(tmp_path / "dead.jsonl", lines)

    result = await rr(backend, "dlq", "import", str(file), "--to", "restored")

    assert result.exit_code == 0, result.output
    assert result.stdout == "imported 3 of 3 message(s) into 'restored'\n"
    assert "rr: error" not in result.stderr
    assert " ".join(after_target(result.stderr).split()) == (
        "1 message(s) carried a user_id other than 'guest', the user rr logs in as: imported "
        "without it (RabbitMQ refuses a message whose user_id is not its publisher's)"
    )
    found = {d.properties.message_id: d.properties.user_id for d in await peek(backend, "restored")}
    assert found == {"own": "guest", "foreign": None, "none": None}


async def test_cc_and_bcc_do_not_travel_with_an_import(backend: Backend, tmp_path: Path) -> None:
    """A letter exported with ``CC``/``BCC`` headers (sender-selected distribution): RabbitMQ
    would deliver the imported copy to the queues they name too, as it would a replayed or
    moved one; import drops them as replay and move do."""
    for queue in ("restored", "cc.target", "bcc.target"):
        await declare(backend, queue)
    lines = [line("cc", headers={"CC": ["cc.target"], "BCC": ["bcc.target"], "x-keep": 1})]
    file = write(tmp_path / "dead.jsonl", lines)

    result = await rr(backend, "dlq", "import", str(file), "--to", "restored")

    assert result.exit_code == 0, result.output
    assert await depth(backend, "cc.target") == 0
    assert await depth(backend, "bcc.target") == 0
    imported = await peek(backend, "restored")
    assert [d.properties.message_id for d in imported] == ["cc"]
    assert imported[0].properties.headers == {"x-tenant": "acme", "x-keep": 1}


async def test_an_import_the_broker_stops_half_way_resumes_with_from_line(
    backend: Backend, tmp_path: Path
) -> None:
    """A queue that refuses publishes past 5 messages: the broker nacks line 6 on, whatever
    rr checked. Each run reports exactly what went in and where to go on from."""
    await declare(backend, "capped", arguments={"x-max-length": 5, "x-overflow": "reject-publish"})
    ids = [f"m{n}" for n in range(1, 13)]
    lines = [line(message_id) for message_id in ids]
    lines.insert(7, "")  # a blank line 8: lines are the file's own numbers
    file = write(tmp_path / "dead.jsonl", lines)  # m1-m7 on lines 1-7, m8-m12 on 9-13

    first = await rr(backend, "dlq", "import", str(file), "--to", "capped")

    assert first.exit_code == 3, first.output
    assert first.stdout == "imported 5 of 12 message(s) into 'capped'\n"
    error = one_error_line(first.stderr)
    assert error.startswith(f"rr: error: import into 'capped' stopped at {file}:6: ")
    assert error.endswith(
        "; lines 1-5 (5 message(s)) were published and confirmed, nothing from line 6 on was; "
        "rerun with --from-line 6 to import the rest"
    )
    assert await ids_in(backend, "capped") == ids[:5]
    taken = await take_all(backend, "capped")

    second = await rr(backend, "dlq", "import", str(file), "--to", "capped", "--from-line", "6")

    assert second.exit_code == 3, second.output
    assert second.stdout == (
        "imported 5 of 7 message(s) into 'capped' (--from-line 6: the 5 before it skipped)\n"
    )
    assert one_error_line(second.stderr).endswith(
        "; lines 6-11 (5 message(s)) were published and confirmed, nothing from line 12 on was; "
        "rerun with --from-line 12 to import the rest"
    )
    assert await ids_in(backend, "capped") == ids[5:10]
    taken += await take_all(backend, "capped")

    third = await rr(backend, "dlq", "import", str(file), "--to", "capped", "--from-line", "12")

    assert third.exit_code == 0, third.output
    assert after_target(third.stderr) == ""
    assert third.stdout == (
        "imported 2 of 2 message(s) into 'capped' (--from-line 12: the 10 before it skipped)\n"
    )
    taken += await take_all(backend, "capped")
    assert taken == ids  # every message once: nothing both imported and missing, nothing twice


async def test_a_full_queue_from_the_start_imports_nothing_exit_1(
    backend: Backend, tmp_path: Path
) -> None:
    await declare(backend, "capped", arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
    file = write(tmp_path / "dead.jsonl", [line("m1"), line("m2")])
    result = await rr(backend, "dlq", "import", str(file), "--to", "capped")
    assert result.exit_code == 1, result.output
    assert result.stdout == "imported 0 of 2 message(s) into 'capped'\n"
    assert one_error_line(result.stderr).endswith(
        "; no message was imported, nothing from line 1 on was; rerun with --from-line 1 to "
        "import the rest"
    )
    assert await depth(backend, "capped") == 0


async def test_a_refused_permission_is_exit_77_and_a_rerun_imports_everything_once(
    amqp_url: str, tmp_path: Path
) -> None:
    """RabbitMQ only: the emulator has no permissions. The user may configure and read but not
    write in the vhost: the first publish is refused (403), the channel closes."""
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        await declare(backend, "restored")
        ids = [f"m{n}" for n in range(1, 5)]
        file = write(tmp_path / "dead.jsonl", [line(message_id) for message_id in ids])
        backend.ctl("set_permissions", "-p", backend.vhost, backend.user, ".*", "^$", ".*")

        denied = await rr(backend, "dlq", "import", str(file), "--to", "restored")

        assert denied.exit_code == 77, denied.output
        assert denied.stdout == "imported 0 of 4 message(s) into 'restored'\n"
        error = one_error_line(denied.stderr)
        assert error.startswith(f"rr: error: import into 'restored' stopped at {file}:1: ")
        assert "ACCESS_REFUSED" in error
        assert "no message was imported" in error
        assert error.endswith("; rerun with --from-line 1 to import the rest")
        assert await depth(backend, "restored") == 0

        backend.ctl("set_permissions", "-p", backend.vhost, backend.user, ".*", ".*", ".*")
        again = await rr(
            backend, "dlq", "import", str(file), "--to", "restored", "--from-line", "1"
        )

        assert again.exit_code == 0, again.output
        assert await ids_in(backend, "restored") == ids
    finally:
        await backend.close()


# ----------------------------------------------------------------- the pure checks


def test_line_lists_and_login_users() -> None:
    assert line_list([4]) == "line 4"
    assert line_list([9, 4, 5, 6, 12]) == "lines 4-6, 9, 12"
    assert login_user("amqp://guest:guest@localhost/") == "guest"
    assert login_user("amqp://localhost/") == "guest"
    assert login_user("amqp://ops%40eu:pw@localhost/") == "ops@eu"
    assert login_user("amqps://localhost/?auth=external") is None


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, width=64),
    st.text(max_size=20),
    st.binary(max_size=8),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=140), inner),
    max_leaves=8,
)
PROPERTIES = st.fixed_dictionaries(
    {},
    optional={
        "message_id": st.text(max_size=300),
        "expiration": st.one_of(st.text(max_size=12), st.integers(-10, 2**33).map(str)),
        "delivery_mode": st.integers(0, 9),
        "priority": st.integers(0, 255),
        "app_id": st.text(max_size=260),
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(properties=PROPERTIES, headers=st.dictionaries(st.text(max_size=300), VALUES, max_size=3))
def test_what_the_checks_pass_the_client_encodes(
    properties: dict[str, Any], headers: dict[str, Any]
) -> None:
    """Whatever ``record_problem`` lets through, the AMQP client encodes as it is (no
    truncated key, no refused value): the pre-check is never weaker than the encoder."""
    record = Record(body=b"", properties=properties, headers=headers)
    if record_problem(record) is not None:
        return
    assert encoding_problem(properties_of(record)) is None
    assert all(len(key.encode()) <= 255 for key in headers)
