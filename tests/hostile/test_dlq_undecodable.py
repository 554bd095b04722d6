"""Dead letters whose properties the codec cannot decode, on RabbitMQ and the emulator
(docs/reference/dlq.md, "Undecodable dead letters"): inspect shows them, replay fails them alone and
leaves them, ``replay --undecodable`` moves them aside byte for byte and nothing else."""

from __future__ import annotations

from collections import Counter

from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, RabbitBackend
from tests.dlq.support import declare, json_of, publish_all, rr
from tests.hostile.test_run_poison import nanosecond_timestamp
from tests.observe import depth, peek

GOOD = [
    (b"good", Properties(message_id=f"good-{number}", headers={"rr-origin-queue": "orders"}))
    for number in range(3)
]


async def ids_in(backend: Backend, queue: str) -> list[str | None]:
    return [d.properties.message_id for d in await peek(backend, queue)]


async def test_undecodable_letters_are_shown_failed_alone_and_moved_aside(
    backend: Backend,
) -> None:
    bad = nanosecond_timestamp("bad")
    await declare(backend, "dead", "orders")
    await publish_all(backend, "dead", [GOOD[0], (b"raw body", bad), *GOOD[1:]])

    inspected = await rr(backend, "dlq", "inspect", "dead", "-o", "json")
    document = json_of(inspected)
    assert inspected.exit_code == 0
    assert [m["undecodable"] for m in document["messages"]] == [[], ["timestamp"], [], []]
    assert "timestamp" not in document["messages"][1]["properties"]
    table = await rr(backend, "dlq", "inspect", "dead")
    assert "undecodable: timestamp (replay --undecodable moves it aside)" in table.stdout
    assert await depth(backend, "dead") == 4

    replayed = await rr(backend, "dlq", "replay", "dead", "--yes", "-o", "json")
    report = json_of(replayed)
    assert replayed.exit_code == 3
    assert (report["replayed"], report["skipped"], report["failed"]) == (3, 0, 1)
    failure = next(r for r in report["results"] if r["outcome"] == "failed")
    assert failure["message_id"] == "bad"
    assert failure["reason"] == (
        "its properties cannot be decoded (timestamp); rr dlq replay 'dead' --undecodable "
        "moves it aside, byte for byte, to 'dead.undecodable'"
    )
    assert await ids_in(backend, "dead") == ["bad"]
    assert Counter(await ids_in(backend, "orders")) == Counter(["good-0", "good-1", "good-2"])

    await publish_all(backend, "dead", [GOOD[0]])  # a decodable letter stays where it is
    aside = await rr(backend, "dlq", "replay", "dead", "--undecodable", "--yes", "-o", "json")
    report = json_of(aside)
    assert aside.exit_code == 0, aside.output
    assert (report["replayed"], report["skipped"], report["failed"]) == (1, 1, 0)
    assert await ids_in(backend, "dead") == ["good-0"]
    moved = await peek(backend, "dead.undecodable")
    assert [d.properties.message_id for d in moved] == ["bad"]
    assert moved[0].body == b"raw body"
    assert moved[0].properties.undecodable == ("timestamp",)
    if isinstance(backend, RabbitBackend):
        assert moved[0].properties.raw == bad.raw  # byte for byte
    assert Counter(await ids_in(backend, "orders")) == Counter(["good-0", "good-1", "good-2"])
