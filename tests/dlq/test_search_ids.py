"""--where ids=A,B,C (#47, docs/reference/dlq.md "--where"), on RabbitMQ and on the emulator: rr dlq
inspect shows, replay copies, purge removes exactly the letters whose message id is listed
(ids!=: every other, the letter without an id among them); the broker read by message id
after. A malformed list is a usage error (exit 2) before anything is read."""

from __future__ import annotations

from tests.backends import Backend, EmulatorBackend
from tests.dlq.support import json_of, rr
from tests.dlq.test_search import ids_in, published


async def test_inspect_replay_and_purge_by_a_list_of_ids(backend: Backend) -> None:
    ids = await published(backend)  # 12 letters of refunds (even) and orders (odd); #11 no id
    listed = f"ids={ids[0]},{ids[3]},{ids[6]}"

    shown = await rr(backend, "dlq", "inspect", "dead", "--where", listed, "-o", "json")
    assert shown.exit_code == 0, shown.output
    assert [m["message_id"] for m in json_of(shown)["messages"]] == [ids[0], ids[3], ids[6]]

    replayed = await rr(backend, "dlq", "replay", "dead", "--where", listed, "--yes", "-o", "json")
    assert replayed.exit_code == 0, replayed.output
    assert await ids_in(backend, "refunds") == [ids[0], ids[6]]
    assert await ids_in(backend, "orders") == [ids[3]]
    assert await ids_in(backend, "dead") == [m for n, m in enumerate(ids) if n not in (0, 3, 6)]

    # ids!=: every other letter, the one without an id among them (as id!=)
    kept = f"ids!={ids[1]},{ids[2]}"
    purged = await rr(backend, "dlq", "purge", "dead", "--where", kept, "--yes", "-o", "json")
    assert purged.exit_code == 0, purged.output
    assert json_of(purged)["purged"] == 7
    assert await ids_in(backend, "dead") == [ids[1], ids[2]]
    assert await ids_in(backend, "refunds") == [ids[0], ids[6]]
    assert await ids_in(backend, "orders") == [ids[3]]


async def test_malformed_lists_are_usage_errors() -> None:
    backend = EmulatorBackend()
    try:
        ids = await published(backend)
        for where, said in (
            ("ids=", "give message ids after ="),
            (f"ids={ids[0]},,{ids[1]}", "an empty id in the list"),
            (f"ids={ids[0]},", "an id that holds a comma cannot be listed; name it with id="),
            ("ids<x", "only age compares"),
            ("ids=" + ",".join(["y" * 99] * 400), "too long; an ids= list is at most 32,768"),
        ):
            for verb in ("replay", "inspect", "purge"):
                bad = await rr(backend, "dlq", verb, "dead", "--where", where, "--yes")
                assert bad.exit_code == 2, (verb, where, bad.output)
                assert said in bad.stderr, (verb, bad.stderr)
        assert await ids_in(backend, "dead") == ids
        assert await ids_in(backend, "refunds") == []
    finally:
        await backend.close()
