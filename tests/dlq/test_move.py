"""rr dlq move, on RabbitMQ (3.10 and 4.0) and on the emulator: every message to the target
exactly once, as it was (docs/reference/dlq.md, "Move"), or still in the source with the reason
why."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Delivery, Properties
from tests.backends import Backend
from tests.dlq.support import H, death, declare, interactive, json_of, publish_all, rr
from tests.hostile.test_run_poison import nanosecond_timestamp
from tests.observe import depth, peek
from tests.target_line import after_target

NOW = datetime.now(UTC).replace(microsecond=0)


def message(number: int, *, tenant: str = "acme") -> tuple[bytes, Properties]:
    headers: dict[str, FieldValue] = {
        "x-tenant": tenant,
        H: 2,
        "rr-origin-queue": "refunds",
        "rr-error-type": "ValueError",
        "x-death": [death("refunds", "rejected", NOW - timedelta(minutes=number % 7))],
        "CC": ["elsewhere"],
    }
    return (
        f"body {number}".encode(),
        Properties(
            message_id=f"m{number}",
            correlation_id=f"c{number}",
            content_type="application/json",
            priority=3,
            delivery_mode=2,
            expiration="600000",
            headers=headers,
        ),
    )


def ids(deliveries: list[Delivery]) -> list[str | None]:
    return [d.properties.message_id for d in deliveries]


def app_headers(delivery: Delivery) -> dict[str, FieldValue]:
    headers = dict(delivery.properties.headers or {})
    headers.pop("x-delivery-count", None)  # a quorum target annotates each delivery
    return headers


async def test_300_messages_move_once_each_in_order_with_their_headers(backend: Backend) -> None:
    await declare(backend, "src", "dst")
    sent = [message(n) for n in range(300)]
    await publish_all(backend, "src", sent)
    await declare(backend, "elsewhere")  # named by every message's CC header

    result = await rr(backend, "dlq", "move", "src", "--to", "dst", "--yes", "-o", "json")

    assert result.exit_code == 0, result.output
    document = json_of(result)
    assert (document["moved"], document["skipped"], document["failed"]) == (300, 0, 0)
    assert {r["outcome"] for r in document["results"]} == {"moved"}
    assert {r["to"] for r in document["results"]} == {"dst"}
    assert await depth(backend, "src") == 0
    assert await depth(backend, "elsewhere") == 0  # CC never travels
    moved = await peek(backend, "dst")
    assert ids(moved) == [f"m{n}" for n in range(300)]
    first = moved[0]
    assert first.body == b"body 0"
    assert (first.properties.correlation_id, first.properties.content_type) == (
        "c0",
        "application/json",
    )
    assert (first.properties.priority, first.properties.delivery_mode) == (3, 2)
    assert first.properties.expiration is None  # a copy never carries one (docs/reference/dlq.md)
    headers = app_headers(first)
    assert "CC" not in headers
    assert headers[H] == 2
    assert headers["rr-origin-queue"] == "refunds"
    assert headers["x-tenant"] == "acme"
    assert "rr-replay-run" not in headers
    assert "rr-replayed-count" not in headers


async def test_reset_retries_gives_a_fresh_start(backend: Backend) -> None:
    await declare(backend, "src", "dst")
    await publish_all(backend, "src", [message(n) for n in range(5)])

    result = await rr(
        backend, "dlq", "move", "src", "--to", "dst", "--reset-retries", "--yes", "-o", "json"
    )

    assert result.exit_code == 0, result.output
    moved = await peek(backend, "dst")
    assert ids(moved) == ["m0", "m1", "m2", "m3", "m4"]
    for delivery in moved:
        assert app_headers(delivery) == {"x-tenant": "acme"}


async def test_where_and_limit_choose_what_moves_and_the_rest_stays(backend: Backend) -> None:
    await declare(backend, "src", "dst")
    messages = [message(n, tenant="acme" if n % 3 == 0 else "other") for n in range(90)]
    await publish_all(backend, "src", messages)

    result = await rr(
        backend,
        "dlq",
        "move",
        "src",
        "--to",
        "dst",
        "--where",
        "header.x-tenant=acme",
        "--limit",
        "20",
        "--yes",
        "-o",
        "json",
    )

    assert result.exit_code == 0, result.output
    document = json_of(result)
    assert (document["moved"], document["failed"]) == (20, 0)
    assert document["skipped"] == 2 * 19  # the others read before the 20th match
    assert ids(await peek(backend, "dst")) == [f"m{n}" for n in range(0, 60, 3)]
    left = ids(await peek(backend, "src"))
    assert Counter(left) == Counter(f"m{n}" for n in range(90) if n % 3 or n >= 60)


async def test_a_dry_run_moves_nothing_and_names_a_missing_target(backend: Backend) -> None:
    await declare(backend, "src")
    await publish_all(backend, "src", [message(n) for n in range(4)])

    result = await rr(backend, "dlq", "move", "src", "--to", "nowhere", "--dry-run", "-o", "json")

    assert result.exit_code == 1, result.output
    document = json_of(result)
    assert (document["dry_run"], document["moved"], document["failed"]) == (True, 0, 4)
    assert all(r["reason"].startswith("would fail: ") for r in document["results"])
    assert ids(await peek(backend, "src")) == ["m0", "m1", "m2", "m3"]


async def test_a_target_that_does_not_exist_leaves_every_message(backend: Backend) -> None:
    await declare(backend, "src")
    await publish_all(backend, "src", [message(n) for n in range(6)])

    result = await rr(backend, "dlq", "move", "src", "--to", "nowhere", "--yes", "-o", "json")

    assert result.exit_code == 1, result.output
    document = json_of(result)
    assert (document["moved"], document["failed"]) == (0, 6)
    assert document["results"][0]["reason"] == (
        "no queue 'nowhere' took the copy (the broker returned it); the message stays"
    )
    assert Counter(ids(await peek(backend, "src"))) == Counter(f"m{n}" for n in range(6))


async def test_create_declares_a_missing_target_and_leaves_an_existing_one(
    backend: Backend,
) -> None:
    await declare(backend, "src")
    await publish_all(backend, "src", [message(n) for n in range(6)])

    result = await rr(
        backend, "dlq", "move", "src", "--to", "recheck", "--create", "--yes", "-o", "json"
    )

    assert result.exit_code == 0, result.output
    assert json_of(result)["moved"] == 6
    assert ids(await peek(backend, "recheck")) == [f"m{n}" for n in range(6)]
    assert await depth(backend, "src") == 0
    # a second run with --create: the queue exists (with its messages); nothing is redeclared
    await publish_all(backend, "src", [message(6)])
    again = await rr(backend, "dlq", "move", "src", "--to", "recheck", "--create", "--yes")
    assert again.exit_code == 0, again.output
    assert ids(await peek(backend, "recheck")) == [f"m{n}" for n in range(7)]


async def test_an_undecodable_message_moves_byte_for_byte_and_fails_under_where(
    backend: Backend,
) -> None:
    await declare(backend, "src", "dst")
    good = message(1)
    await publish_all(
        backend, "src", [message(0), (b"raw body", nanosecond_timestamp("bad")), good]
    )

    filtered = await rr(
        backend,
        "dlq",
        "move",
        "src",
        "--to",
        "dst",
        "-w",
        "header.x-tenant=acme",
        "--yes",
        "-o",
        "json",
    )
    document = json_of(filtered)
    assert filtered.exit_code == 3, filtered.output
    assert (document["moved"], document["failed"]) == (2, 1)
    failure = next(r for r in document["results"] if r["outcome"] == "failed")
    assert failure["message_id"] == "bad"
    assert "cannot be decoded (timestamp)" in failure["reason"]
    assert ids(await peek(backend, "src")) == ["bad"]

    plain = await rr(backend, "dlq", "move", "src", "--to", "dst", "--yes", "-o", "json")
    assert plain.exit_code == 0, plain.output
    assert await depth(backend, "src") == 0
    moved = await peek(backend, "dst")
    assert ids(moved) == ["m0", "m1", "bad"]
    assert moved[2].body == b"raw body"
    assert moved[2].properties.undecodable == ("timestamp",)


async def test_the_target_must_be_another_queue_and_asking_needs_a_terminal(
    backend: Backend,
) -> None:
    await declare(backend, "src")
    await publish_all(backend, "src", [message(0)])

    same = await rr(backend, "dlq", "move", "src", "--to", "src", "--yes")
    assert same.exit_code == 2
    assert "is the queue this command moves from" in same.stderr

    with interactive(False):
        unasked = await rr(backend, "dlq", "move", "src", "--to", "dst")
    assert unasked.exit_code == 2
    assert "pass --yes" in unasked.stderr

    with interactive(True):
        declined = await rr(backend, "dlq", "move", "src", "--to", "dst", input="n\n")
    assert declined.exit_code == 1
    assert await depth(backend, "src") == 1


async def test_a_target_that_drops_on_overflow_is_refused_unless_forced(backend: Backend) -> None:
    """RabbitMQ confirms a message to a length-limited drop-head queue and then drops the
    oldest: a move of 6 into ``x-max-length = 2`` said "moved 6 of 6" while 4 were gone. It is
    now refused (dry run too), nothing moved; --force moves all the same, with a note."""
    await declare(backend, "held")
    channel = await backend.channel()
    await channel.queue_declare("small", arguments={"x-max-length": 2})
    await channel.queue_declare(
        "small.safe", arguments={"x-max-length": 2, "x-overflow": "reject-publish"}
    )
    await publish_all(backend, "held", [message(n) for n in range(6)])

    for extra in (["--dry-run"], ["--yes"]):
        refused = await rr(backend, "dlq", "move", "held", "--to", "small", *extra)
        assert refused.exit_code == 1, refused.output
        assert after_target(refused.stderr).startswith(
            "rr: error: --to 'small' has x-max-length = 2 with x-overflow = drop-head "
            "(RabbitMQ's default): RabbitMQ confirms a copy, then drops the oldest"
        )
        assert await depth(backend, "held") == 6
        assert await depth(backend, "small") == 0

    safe = await rr(backend, "dlq", "move", "held", "--to", "small.safe", "--dry-run")
    assert safe.exit_code == 0, safe.output  # reject-publish refuses instead: nothing silent

    forced = await rr(backend, "dlq", "move", "held", "--to", "small", "--yes", "--force")
    assert forced.exit_code == 0, forced.output
    assert "--force: sending to it anyway" in forced.stderr
    assert await depth(backend, "small") == 2
    assert await depth(backend, "held") == 0
