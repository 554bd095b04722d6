"""rr dlq groups and ``--where group=ID``, on RabbitMQ and on the emulator: dead letters made by
the runtime itself (rr's copies with their failure headers, the server's delivery-limit and
rejected letters) grouped by cause with exact counts and nothing taken; then one group, and
only it, replayed, moved and exported, counted by message id (docs/reference/dlq.md, "Groups")."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.backends import Backend
from tests.dlq.support import Made, declare, json_of, publish_all, rr, run_to_dead, synthesized
from tests.observe import peek as read_all

PER_KIND = 20
NOW = datetime.now(UTC).replace(microsecond=0)


def by_cause(document: dict[str, Any]) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {
        (group["type"], group["message"], group["origin"], group["handler"]): group
        for group in document["groups"]
    }


def expected(made: Made) -> dict[tuple[Any, ...], set[str]]:
    """The groups run_to_dead's letters fall in, worked out from how they were made: an odd
    refund raised ValueError("card N declined"), an even one retried without an exception
    (rr dead-lettered both after 3 attempts, naming its handler); payouts reached the quorum
    queue's delivery limit; waited ones were rejected by rr on the quorum queue."""
    odd = {m for n, m in enumerate(made.refunds) if n % 2}
    return {
        ("ValueError", "card <n> declined", "refunds", "t:refunds"): odd,
        ("(max_attempts)", None, "refunds", "t:refunds"): set(made.refunds) - odd,
        ("(delivery_limit)", None, "payouts", None): set(made.payouts),
        ("(rejected)", None, "payouts", None): set(made.waited),
    }


async def groups_of(backend: Backend, *args: str) -> dict[str, Any]:
    result = await rr(backend, "dlq", "groups", "dead", "--yes", "-o", "json", *args)
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json_of(result)
    return document


async def test_groups_count_every_cause_and_take_nothing(backend: Backend) -> None:
    made = await run_to_dead(backend, PER_KIND)
    before = [d.properties.message_id for d in await read_all(backend, "dead")]

    document = await groups_of(backend)

    assert document["read"] == made.total == len(before)
    assert document["ungrouped"] == 0
    groups = by_cause(document)
    assert {key: group["count"] for key, group in groups.items()} == {
        key: len(ids) for key, ids in expected(made).items()
    }
    assert [g["count"] for g in document["groups"]] == sorted(
        (g["count"] for g in document["groups"]), reverse=True
    )
    for key, ids in expected(made).items():
        group = groups[key]
        assert group["sample"]["message_id"] in ids
        assert group["origins"] == {"counts": [{"queue": key[2], "count": len(ids)}], "others": 0}
        assert group["dead_letter_queues"]["counts"] == [{"queue": "dead", "count": len(ids)}]
        assert group["first_failed_at"] <= group["last_failed_at"]
    assert groups[("ValueError", "card <n> declined", "refunds", "t:refunds")]["sample"][
        "error_message"
    ].startswith("card ")
    # nothing was taken, nothing moved
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == before
    # the ids are the same on a second read
    again = await groups_of(backend)
    assert [g["id"] for g in again["groups"]] == [g["id"] for g in document["groups"]]


async def test_fewer_dimensions_merge_groups(backend: Backend) -> None:
    made = await run_to_dead(backend, PER_KIND)
    document = await groups_of(backend, "--by", "origin")
    counts = {group["origin"]: group["count"] for group in document["groups"]}
    assert counts == {"refunds": PER_KIND, "payouts": 2 * PER_KIND}
    assert all(set(group) >= {"id", "count", "origin"} for group in document["groups"])
    assert all("type" not in group for group in document["groups"])
    assert all(group["id"].startswith("o-") for group in document["groups"])
    assert sum(counts.values()) == made.total


async def test_one_group_is_replayed_and_only_it(backend: Backend) -> None:
    made = await run_to_dead(backend, PER_KIND)
    before = [d.properties.message_id for d in await read_all(backend, "dead")]
    document = await groups_of(backend)
    key = ("ValueError", "card <n> declined", "refunds", "t:refunds")
    group_id = by_cause(document)[key]["id"]
    wanted = expected(made)[key]

    result = await rr(
        backend, "dlq", "replay", "dead", "--where", f"group={group_id}", "--yes", "-o", "json"
    )

    assert result.exit_code == 0, result.output
    replayed = json_of(result)["results"]
    assert {r["message_id"] for r in replayed if r["outcome"] == "replayed"} == wanted
    assert sorted(d.properties.message_id or "" for d in await read_all(backend, "refunds")) == (
        sorted(wanted)
    )
    # every other letter stays, in its order
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == [
        m for m in before if m not in wanted
    ]
    # the group is gone; the others are as they were
    after = await groups_of(backend)
    assert group_id not in {g["id"] for g in after["groups"]}
    assert after["read"] == made.total - len(wanted)


async def test_group_not_equal_moves_every_other_letter(backend: Backend) -> None:
    made = await run_to_dead(backend, PER_KIND)
    document = await groups_of(backend)
    key = ("(delivery_limit)", None, "payouts", None)
    group_id = by_cause(document)[key]["id"]
    await declare(backend, "parked")

    result = await rr(
        backend,
        "dlq",
        "move",
        "dead",
        "--to",
        "parked",
        "--where",
        f"group!={group_id}",
        "--yes",
        "-o",
        "json",
    )

    assert result.exit_code == 0, result.output
    left = {d.properties.message_id for d in await read_all(backend, "dead")}
    assert left == expected(made)[key]
    parked = [d.properties.message_id for d in await read_all(backend, "parked")]
    assert len(parked) == len(set(parked)) == made.total - len(left)


async def test_export_of_one_group(backend: Backend, tmp_path: Path) -> None:
    made = await run_to_dead(backend, PER_KIND)
    document = await groups_of(backend, "--by", "type,origin")
    group = next(g for g in document["groups"] if g["type"] == "(rejected)")
    file = tmp_path / "rejected.jsonl"

    result = await rr(
        backend, "dlq", "export", "dead", str(file), "--where", f"group={group['id']}", "--yes"
    )

    assert result.exit_code == 0, result.output
    assert "exported 20 message(s) matching group=" in " ".join(result.output.split())
    lines = [json.loads(line) for line in file.read_text().splitlines()]
    assert {line["properties"]["message_id"] for line in lines} == set(made.waited)
    assert len(await read_all(backend, "dead")) == made.total  # export takes nothing


async def test_bad_dimensions_and_ids_are_usage_errors(backend: Backend) -> None:
    await declare(backend, "dead")
    bad_by = await rr(backend, "dlq", "groups", "dead", "--by", "colour", "--yes")
    assert bad_by.exit_code == 2
    assert "unknown dimension 'colour'" in bad_by.stderr
    bad_id = await rr(backend, "dlq", "replay", "dead", "--where", "group=xyz", "--yes")
    assert bad_id.exit_code == 2
    assert "not a group id" in bad_id.stderr
    empty = await rr(backend, "dlq", "groups", "dead", "--yes")
    assert empty.exit_code == 0, empty.output
    assert "0 groups of 0 dead letters read of 0 in 'dead'" in empty.stdout


async def test_purge_of_one_group_leaves_the_others_in_order(backend: Backend) -> None:
    made = await run_to_dead(backend, PER_KIND)
    before = [d.properties.message_id for d in await read_all(backend, "dead")]
    key = ("(max_attempts)", None, "refunds", "t:refunds")
    group_id = by_cause(await groups_of(backend))[key]["id"]
    wanted = expected(made)[key]

    dry = await rr(
        backend, "dlq", "purge", "dead", "--where", f"group={group_id}", "--dry-run", "-o", "json"
    )
    assert dry.exit_code == 0, dry.output
    would = {r["message_id"] for r in json_of(dry)["results"] if r["outcome"] == "purged"}
    assert would == wanted
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == before

    result = await rr(
        backend, "dlq", "purge", "dead", "--where", f"group={group_id}", "--yes", "-o", "json"
    )

    assert result.exit_code == 0, result.output
    document = json_of(result)
    assert document["purged"] == len(wanted)
    assert {r["message_id"] for r in document["results"] if r["outcome"] == "purged"} == wanted
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == [
        m for m in before if m not in wanted
    ]
    # a rerun finds nothing more of that group
    again = await rr(
        backend, "dlq", "purge", "dead", "--where", f"group={group_id}", "--yes", "-o", "json"
    )
    assert json_of(again)["purged"] == 0


async def test_purge_where_on_a_quorum_queue_keeps_the_others_in_order(
    backend: Backend,
) -> None:
    await declare(backend, "qdead", arguments={"x-queue-type": "quorum"})
    letters = [synthesized(("rr", "server")[n % 2], n, NOW) for n in range(30)]
    await publish_all(backend, "qdead", letters)
    ids = [str(properties.message_id) for _, properties in letters]

    result = await rr(
        backend, "dlq", "purge", "qdead", "--where", "origin=invoices", "--yes", "-o", "json"
    )

    assert result.exit_code == 0, result.output
    gone = {m for n, m in enumerate(ids) if n % 2}  # the server's letters: odd, from invoices
    assert json_of(result)["purged"] == len(gone)
    assert [d.properties.message_id for d in await read_all(backend, "qdead")] == [
        m for m in ids if m not in gone
    ]


async def test_purge_dry_run_needs_where(backend: Backend) -> None:
    await declare(backend, "dead")
    result = await rr(backend, "dlq", "purge", "dead", "--dry-run")
    assert result.exit_code == 2
    assert "give --where" in result.stderr


async def test_inspect_where_shows_and_counts_only_what_matches(backend: Backend) -> None:
    made = await run_to_dead(backend, PER_KIND)
    shown = await rr(
        backend, "dlq", "inspect", "dead", "--where", "reason=rejected", "--yes", "-o", "json"
    )
    assert shown.exit_code == 0, shown.output
    assert {m["message_id"] for m in json_of(shown)["messages"]} == set(made.waited)
    assert f"of {made.total} read" in " ".join(shown.stderr.split())
    group_id = by_cause(await groups_of(backend))[("(delivery_limit)", None, "payouts", None)]["id"]
    summary = await rr(
        backend,
        "dlq",
        "inspect",
        "dead",
        "--summary",
        "--where",
        f"group={group_id}",
        "--yes",
        "-o",
        "json",
    )
    assert summary.exit_code == 0, summary.output
    document = json_of(summary)
    assert document["read"] == PER_KIND
    assert document["reasons"] == [{"reason": "delivery_limit", "count": PER_KIND}]
    assert len(await read_all(backend, "dead")) == made.total
