"""``rr dlq inspect`` shows each letter's trace id, read from its ``traceparent`` without
OpenTelemetry (docs/reference/dlq.md, "JSON output"): ``trace_id`` in JSON, ``null`` when the letter
has none or a malformed one; ``trace: ...`` in the table."""

from __future__ import annotations

from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend
from tests.dlq.support import declare, json_of, publish_all, rr

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
VALID = f"00-{TRACE_ID}-b7ad6b7169203331-01"


async def test_inspect_json_and_table_show_the_trace_id(backend: Backend) -> None:
    await declare(backend, "dead")
    await publish_all(
        backend,
        "dead",
        [
            (b"a", Properties(message_id="traced", headers={"traceparent": VALID})),
            (b"b", Properties(message_id="garbage", headers={"traceparent": b"garbage"})),
            (b"c", Properties(message_id="table", headers={"traceparent": {"a": 1}})),
            (b"d", Properties(message_id="none", headers={"x-tenant": "acme"})),
        ],
    )

    document = json_of(await rr(backend, "dlq", "inspect", "dead", "-o", "json"))

    assert [(m["message_id"], m["trace_id"]) for m in document["messages"]] == [
        ("traced", TRACE_ID),
        ("garbage", None),
        ("table", None),
        ("none", None),
    ]
    table = await rr(backend, "dlq", "inspect", "dead")
    assert table.exit_code == 0, table.output
    assert table.stdout.count("trace: ") == 1
    assert f"trace: {TRACE_ID}" in table.stdout
