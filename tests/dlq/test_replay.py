"""rr dlq replay, on RabbitMQ and on the emulator: every dead letter back where it failed,
exactly once, or still in the dead-letter queue with the reason why."""

from __future__ import annotations

import json
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from rabbitctl_retry.dlq.filters import parse_all
from rabbitctl_retry.dlq.replay import RUN_HEADER, ReplayPlan
from rabbitctl_retry.dlq.report import TransferOutcome
from rabbitctl_retry.ops import transfer as shell
from rabbitctl_retry.retry.headers import is_broker_header
from rabbitctl_retry.transport.base import Delivery, Properties
from tests.backends import Backend
from tests.dlq.support import (
    TOPOLOGY_TEXT,
    H,
    declare,
    interactive,
    json_of,
    origin_of,
    publish_all,
    rr,
    run_to_dead,
    shown_broker,
    synthesized,
)
from tests.observe import depth
from tests.observe import peek as read_all
from tests.shared_node import BROKERS
from tests.topologies import REFUNDS_AND_PAYOUTS

NOW = datetime.now(UTC).replace(microsecond=0)


def assert_fresh_copy(copy: Delivery) -> None:
    """A replayed copy: no retry header, no broker or death headers, replayed once."""
    headers = dict(copy.properties.headers or {})
    # a quorum queue annotates each delivery (a first basic.get shows x-delivery-count = 0)
    headers.pop("x-delivery-count", None)
    assert H not in headers
    assert not any(is_broker_header(name) for name in headers), headers
    for name in ("rr-origin-queue", "rr-failed-at", "rr-error-type", "rr-error-message"):
        assert name not in headers
    assert headers["rr-replayed-count"] == 1
    assert isinstance(headers["rr-replayed-at"], str)
    assert headers["rr-replayed-at"].endswith("Z")
    assert RUN_HEADER in headers


async def test_2000_dead_letters_from_mixed_origins_go_home_exactly_once(
    backend: Backend,
) -> None:
    made = await run_to_dead(backend, per_kind=40)  # the runtime and the server at work
    await declare(backend, "orders", "invoices")
    kinds = ("rr", "server", "waited")
    extra = [synthesized(kinds[n % 3], n, NOW) for n in range(1850)]
    binary = [
        (bytes([n % 256]) + bytes(range(256)), Properties(headers={"rr-origin-queue": "orders"}))
        for n in range(30)
    ]
    await publish_all(backend, "dead", extra)
    await publish_all(backend, "dead", binary)
    assert await depth(backend, "dead") == 2000

    result = await rr(backend, "dlq", "replay", "dead", "--yes", "-o", "json")

    assert result.exit_code == 0, result.output
    document = json_of(result)
    assert (document["source"], document["dry_run"]) == ("dead", False)
    assert (document["replayed"], document["skipped"], document["failed"]) == (2000, 0, 0)
    assert len(document["results"]) == 2000
    assert await depth(backend, "dead") == 0

    expected: dict[str, str] = {}  # message id -> the queue it failed in
    for message_id in made.refunds:
        expected[message_id] = "refunds"
    for message_id in (*made.payouts, *made.waited):
        expected[message_id] = "payouts"
    for body, properties in extra:
        assert properties.message_id is not None
        expected[properties.message_id] = origin_of(body)
    found: dict[str, list[Delivery]] = {}
    for queue in ("refunds", "payouts", "orders", "invoices"):
        for copy in await read_all(backend, queue):
            found.setdefault(queue, []).append(copy)
            assert_fresh_copy(copy)
    ids = Counter(
        (queue, copy.properties.message_id) for queue, copies in found.items() for copy in copies
    )
    for message_id, queue in expected.items():
        assert ids[(queue, message_id)] == 1, (message_id, queue)
    # the binary ones, without a message id, are in orders once each, byte for byte
    orders_bodies = Counter(copy.body for copy in found["orders"])
    for body, _ in binary:
        assert orders_bodies[body] == 1
    assert sum(len(copies) for copies in found.values()) == 2000
    # the quorum payouts that once waited in payouts.retry went to payouts, not the wait queue
    waited = {c.properties.message_id: c for c in found["payouts"]}
    for message_id in made.waited:
        assert message_id in waited
    results = {r["message_id"]: r for r in document["results"] if r["message_id"]}
    assert results[made.waited[0]] == {
        "message_id": made.waited[0],
        "to": "payouts",
        "outcome": "replayed",
        "reason": None,
    }
    assert await depth(backend, "payouts.retry") == 0


async def test_replay_every_dead_letter_queue_of_a_topology(
    backend: Backend, tmp_path: Path
) -> None:
    await run_to_dead(backend, per_kind=3)
    topology = tmp_path / "topology.toml"
    topology.write_text(TOPOLOGY_TEXT, encoding="utf-8")
    table = await rr(backend, "dlq", "replay", "--topology", str(topology), "--yes")
    assert table.exit_code == 0, table.output
    assert "replayed 9 of 9 dead letters read from 'dead'" in table.stdout
    assert await depth(backend, "dead") == 0
    assert await depth(backend, "refunds") == 3
    assert await depth(backend, "payouts") == 6

    usage = await rr(backend, "dlq", "replay", "--yes")
    assert usage.exit_code == 2
    assert "--topology" in usage.stderr


async def test_a_returned_copy_leaves_its_dead_letter_in_place(backend: Backend) -> None:
    await declare(backend, "dead", "refunds")
    letters = [
        (b"%d" % n, Properties(message_id=f"m{n}", headers={"rr-origin-queue": origin}))
        for n, origin in enumerate(["refunds", "ghost", "refunds", "ghost", "refunds"])
    ]
    await publish_all(backend, "dead", letters)

    result = await rr(backend, "dlq", "replay", "dead", "--yes", "-o", "json")

    assert result.exit_code == 3, result.output  # partial success
    document = json_of(result)
    assert (document["replayed"], document["failed"]) == (3, 2)
    failed = [r for r in document["results"] if r["outcome"] == "failed"]
    assert [r["message_id"] for r in failed] == ["m1", "m3"]
    assert all(r["to"] == "ghost" for r in failed)
    assert all("no queue 'ghost' took the copy" in r["reason"] for r in failed)
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == ["m1", "m3"]
    assert [d.properties.message_id for d in await read_all(backend, "refunds")] == [
        "m0",
        "m2",
        "m4",
    ]
    nothing = await rr(backend, "dlq", "replay", "dead", "--yes")
    assert nothing.exit_code == 1  # none could be replayed
    assert "failed dead letters are still in the dead-letter queue" in nothing.stdout


async def test_two_copies_with_one_message_id_never_confuse_a_return(backend: Backend) -> None:
    # aiormq matches a basic.return to its publish by message_id: were both copies in flight
    # at once, the ghost copy's return could fail the other one and its dead letter be acked.
    await declare(backend, "dead", "refunds")
    same = [
        (b"to-ghost", Properties(message_id="dup", headers={"rr-origin-queue": "ghost"})),
        (b"to-refunds", Properties(message_id="dup", headers={"rr-origin-queue": "refunds"})),
    ] * 20
    await publish_all(backend, "dead", same)
    document = json_of(await rr(backend, "dlq", "replay", "dead", "--yes", "-o", "json"))
    assert (document["replayed"], document["failed"]) == (20, 20)
    assert [d.body for d in await read_all(backend, "dead")] == [b"to-ghost"] * 20
    assert [d.body for d in await read_all(backend, "refunds")] == [b"to-refunds"] * 20


async def test_dry_run_shows_targets_and_moves_nothing(backend: Backend) -> None:
    await declare(backend, "dead", "refunds", "payouts")
    letters = [synthesized("rr", 0, NOW), synthesized("server", 0, NOW)]
    letters.append((b"?", Properties(message_id="lost", headers={"rr-origin-queue": "ghost"})))
    letters.append((b"?", Properties(message_id="nowhere", headers={"x-tenant": "acme"})))
    await publish_all(backend, "dead", letters)

    result = await rr(backend, "dlq", "replay", "dead", "--dry-run", "-o", "json")

    document = json_of(result)
    assert document["dry_run"] is True
    assert [(r["message_id"], r["to"], r["outcome"]) for r in document["results"]] == [
        ("s-rr-0", "refunds", "replayed"),
        ("s-server-0", "payouts", "replayed"),
        ("lost", "ghost", "failed"),
        ("nowhere", None, "failed"),
    ]
    assert "would fail: no queue 'ghost' in vhost" in document["results"][2]["reason"]
    assert "--to" in document["results"][3]["reason"]
    assert result.exit_code == 3
    assert await depth(backend, "dead") == 4
    assert await depth(backend, "refunds") == 0
    table = await rr(backend, "dlq", "replay", "dead", "--dry-run")
    assert "dry run: nothing was moved" in table.stdout
    assert "would replay 2 of 4" in table.stdout


async def test_where_and_limit_pick_exactly_what_was_asked(backend: Backend) -> None:
    await declare(backend, "dead", "refunds", "orders", "payouts", "invoices")
    letters = [synthesized(("rr", "server")[n % 2], n, NOW) for n in range(40)]
    await publish_all(backend, "dead", letters)
    before = [d.properties.message_id for d in await read_all(backend, "dead")]

    result = await rr(
        backend,
        "dlq",
        "replay",
        "dead",
        "--where",
        "origin=invoices",
        "-w",
        "age<1d",
        "--limit",
        "5",
        "--yes",
        "-o",
        "json",
    )

    document = json_of(result)
    assert result.exit_code == 0
    replayed = [r["message_id"] for r in document["results"] if r["outcome"] == "replayed"]
    assert replayed == ["s-server-1", "s-server-3", "s-server-5", "s-server-7", "s-server-9"]
    assert all(
        r["reason"] == "does not match --where"
        for r in document["results"]
        if r["outcome"] == "skipped"
    )
    assert [d.properties.message_id for d in await read_all(backend, "invoices")] == replayed
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == [
        m for m in before if m not in replayed
    ]
    bad = await rr(backend, "dlq", "replay", "dead", "--where", "colour=red", "--yes")
    assert bad.exit_code == 2
    assert "unknown key 'colour'" in bad.stderr


async def test_rate_spaces_the_copies(backend: Backend) -> None:
    await declare(backend, "dead", "refunds")
    await publish_all(
        backend,
        "dead",
        [(b"%d" % n, Properties(headers={"rr-origin-queue": "refunds"})) for n in range(21)],
    )
    started = time.perf_counter()
    result = await rr(backend, "dlq", "replay", "dead", "--rate", "40", "--yes")
    elapsed = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    assert elapsed >= 0.5  # 21 copies, 1/40 s apart
    assert await depth(backend, "refunds") == 21


async def test_a_ramp_spaces_the_first_copies_further(backend: Backend) -> None:
    """--rate 40 --ramp 4: 80 copies on the ramp, the 21st (number 20) at sqrt(2 x 20 x 4 / 40)
    = 2 s after the first (0.5 s without the ramp); every copy arrives, in order."""
    await declare(backend, "dead", "refunds")
    ids = [f"m{n}" for n in range(21)]
    await publish_all(
        backend,
        "dead",
        [(b"x", Properties(message_id=i, headers={"rr-origin-queue": "refunds"})) for i in ids],
    )
    started = time.perf_counter()
    result = await rr(
        backend, "dlq", "move", "dead", "--to", "refunds", "--rate", "40", "--ramp", "4", "--yes"
    )
    elapsed = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    assert elapsed >= 2.0  # the pace's schedule: a lower bound, whatever the machine's speed
    assert [d.properties.message_id for d in await read_all(backend, "refunds")] == ids
    assert await depth(backend, "dead") == 0


async def test_it_stops_rather_than_loops(backend: Backend) -> None:
    # bounce: every copy expires at once and is dead-lettered straight back to the source
    await declare(backend, "dead")
    await declare(
        backend,
        "bounce",
        arguments={
            "x-message-ttl": 0,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "dead",
        },
    )
    await publish_all(
        backend,
        "dead",
        [(b"%d" % n, Properties(message_id=f"m{n}", headers={H: "3"})) for n in range(300)],
    )
    first = json_of(
        await rr(backend, "dlq", "replay", "dead", "--to", "bounce", "--yes", "-o", "json")
    )
    assert first["replayed"] == 300  # each once: what came back is never read in this run
    back = await read_all(backend, "dead")
    assert len(back) == 300
    assert {(d.properties.headers or {}).get("rr-replayed-count") for d in back} == {1}
    second = json_of(
        await rr(backend, "dlq", "replay", "dead", "--to", "bounce", "--yes", "-o", "json")
    )
    assert second["replayed"] == 300
    assert {
        (d.properties.headers or {}).get("rr-replayed-count")
        for d in await read_all(backend, "dead")
    } == {2}


async def test_a_copy_of_this_run_coming_round_stops_the_run(backend: Backend) -> None:
    await declare(backend, "dead", "refunds")
    letters = [
        (b"%d" % n, Properties(message_id=f"m{n}", headers={"rr-origin-queue": "refunds"}))
        for n in range(10)
    ]
    letters[6] = (b"6", Properties(message_id="m6", headers={RUN_HEADER: "this-run"}))
    await publish_all(backend, "dead", letters)
    connection = await backend.connect()
    try:
        report = await shell.replay_queue(
            connection,
            ReplayPlan(source="dead", run_id="this-run"),
            shell.TransferOptions(window=3),
        )
    finally:
        await connection.close()
    assert report.sent == 6
    assert report.stopped is not None
    assert "came back" in report.stopped
    assert list(report.results)[-1].outcome is TransferOutcome.SKIPPED
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == [
        "m6",
        "m7",
        "m8",
        "m9",
    ]


async def test_many_skipped_dead_letters_never_stall_the_window(backend: Backend) -> None:
    await declare(backend, "dead", "refunds", "payouts", "orders", "invoices")
    letters = [synthesized("rr", 2 * n, NOW) for n in range(60)]  # origin refunds
    letters += [synthesized("server", 2 * n, NOW) for n in range(10)]  # origin payouts
    await publish_all(backend, "dead", letters)
    connection = await backend.connect()
    try:
        report = await shell.replay_queue(
            connection,
            ReplayPlan(source="dead", run_id="r", conditions=parse_all(["origin=payouts"])),
            shell.TransferOptions(window=8, idle_s=2.0),
        )
    finally:
        await connection.close()
    assert (report.sent, report.skipped, report.failed) == (10, 60, 0)
    assert report.stopped is None
    assert await depth(backend, "payouts") == 10
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == [
        f"s-rr-{2 * n}" for n in range(60)
    ]


async def test_it_asks_first_and_refuses_without_a_terminal(backend: Backend) -> None:
    await declare(backend, "dead", "refunds")
    await publish_all(backend, "dead", [(b"x", Properties(headers={"rr-origin-queue": "refunds"}))])
    with interactive(False):
        refused = await rr(backend, "dlq", "replay", "dead")
    assert refused.exit_code == 2
    assert "pass --yes" in refused.stderr
    with interactive(True):
        declined = await rr(backend, "dlq", "replay", "dead", input="n\n")
    assert declined.exit_code == 1
    assert "Replay the dead letters of 'dead' (1)" in declined.stderr
    assert await depth(backend, "dead") == 1
    with interactive(True):
        bounded = await rr(
            backend,
            "dlq",
            "replay",
            "dead",
            "--limit",
            "5",
            "-w",
            "origin=refunds",
            "-w",
            "age>1h",
            input="n\n",
        )
    assert bounded.exit_code == 1
    assert (
        "Replay the dead letters of 'dead' (1) (at most 5) matching origin=refunds and age>1h to "
        "the queues they failed in?"
    ) in " ".join(bounded.stderr.split())
    with interactive(True):
        move = await rr(
            backend, "dlq", "move", "dead", "--to", "refunds", "-w", "reason=rejected", input="n\n"
        )
    assert move.exit_code == 1
    assert "Move the messages of 'dead' (1) matching reason=rejected to 'refunds'?" in " ".join(
        move.stderr.split()
    )
    assert await depth(backend, "dead") == 1
    with interactive(True):
        agreed = await rr(backend, "dlq", "replay", "dead", input="y\n")
    assert agreed.exit_code == 0, agreed.output
    assert await depth(backend, "refunds") == 1
    missing = await rr(backend, "dlq", "replay", "nope.dead", "--yes")
    assert missing.exit_code == 1
    assert "no queue 'nope.dead' in vhost" in missing.stderr


async def test_an_empty_queue_replays_nothing(backend: Backend) -> None:
    await declare(backend, "dead")
    document = json_of(await rr(backend, "dlq", "replay", "dead", "--yes", "-o", "json"))
    assert document == {
        "source": "dead",
        "dry_run": False,
        "replayed": 0,
        "skipped": 0,
        "failed": 0,
        "results": [],
        "broker": shown_broker(backend),
    }


async def test_every_dead_letter_queue_of_a_topology_as_json(
    backend: Backend, tmp_path: Path
) -> None:
    await declare(backend, "refunds", "refunds.dead", "payouts.dead")
    await declare(backend, "payouts", arguments={"x-queue-type": "quorum"})
    await publish_all(backend, "refunds.dead", [synthesized("rr", 0, NOW)])
    await publish_all(backend, "payouts.dead", [synthesized("server", 0, NOW)] * 2)
    topology = tmp_path / "topology.toml"
    topology.write_text(REFUNDS_AND_PAYOUTS, encoding="utf-8")
    result = await rr(backend, "dlq", "replay", "-t", str(topology), "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    documents = json.loads(result.stdout)
    assert [(d["source"], d["replayed"]) for d in documents] == [
        ("refunds.dead", 1),
        ("payouts.dead", 2),
    ]
    assert await depth(backend, "payouts") == 2


async def test_a_quorum_dead_letter_queue(backend: Backend) -> None:
    await declare(backend, "refunds")
    await declare(backend, "q.dead", arguments={"x-queue-type": "quorum"})
    await publish_all(backend, "q.dead", [synthesized("rr", 2 * n, NOW) for n in range(200)])
    server = BROKERS[backend.version].server_version
    free = server.nack_returns_uncounted
    with interactive(False):
        asked = await rr(backend, "dlq", "replay", "q.dead", "--dry-run")
    if free:  # RabbitMQ 4.3: a look is not counted, nothing to ask
        assert asked.exit_code == 0, asked.output
        assert "quorum" not in asked.stderr
    elif server.major < 4:  # 3.10: counted, but it has no limit: said, not asked
        assert asked.exit_code == 0, asked.output
        assert "it has no delivery limit, so none is dropped" in asked.stderr
    else:  # 4.0: its limit is the server's 20: asked first
        assert asked.exit_code == 2
        assert "its delivery limit is 20 (the server's" in asked.stderr
    looked = json_of(
        await rr(backend, "dlq", "replay", "q.dead", "--dry-run", "--yes", "-o", "json")
    )
    assert looked["replayed"] == 200
    moved_result = await rr(backend, "dlq", "replay", "q.dead", "--yes", "-o", "json")
    assert ("'q.dead' is a quorum queue" in moved_result.stderr) is not free
    moved = json_of(moved_result)
    assert (moved["replayed"], moved["failed"]) == (200, 0)
    assert await depth(backend, "q.dead") == 0
    assert await depth(backend, "refunds") == 200


async def test_poison_dead_letters_at_the_head_fail_alone(backend: Backend) -> None:
    """Letters rr cannot read or publish (a replayed count of "²", 5,000 digits or 2^63-1, an
    origin queue name of 300 bytes) come first, then 50 good ones. The poison letters are
    reported failed and stay; the good ones go home exactly once and leave the DLQ; exit 3."""
    await declare(backend, "orders", "dead")
    poison = [
        (b"p1", Properties(message_id="p1", headers={"rr-origin-queue": "o" * 300})),
        (b"p2", Properties(message_id="p2", headers={"rr-origin-queue": "é" * 200})),
    ]
    odd_counts = [
        (
            b"c%d" % number,
            Properties(
                message_id=f"c{number}",
                headers={"rr-origin-queue": "orders", "rr-replayed-count": count},
            ),
        )
        for number, count in enumerate(["²", "9" * 5000, 2**63 - 1])
    ]
    good = [
        (b"g%d" % n, Properties(message_id=f"g{n}", headers={"rr-origin-queue": "orders"}))
        for n in range(50)
    ]
    await publish_all(backend, "dead", [*poison, *odd_counts, *good])

    result = await rr(backend, "dlq", "replay", "dead", "--yes", "-o", "json")

    assert result.exit_code == 3, result.output
    document = json_of(result)
    assert (document["replayed"], document["skipped"], document["failed"]) == (53, 0, 2)
    failed = [r["message_id"] for r in document["results"] if r["outcome"] == "failed"]
    assert failed == ["p1", "p2"]
    left = [d.properties.message_id for d in await read_all(backend, "dead")]
    assert left == ["p1", "p2"]
    home = Counter(d.properties.message_id for d in await read_all(backend, "orders"))
    assert home == Counter({f"c{n}": 1 for n in range(3)} | {f"g{n}": 1 for n in range(50)})
