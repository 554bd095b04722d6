"""Looking never spends a dead letter (docs/reference/dlq.md, "Inspecting without taking"): 25 reads
of a quorum dead-letter queue of 5 letters by every command that only reads (inspect, its summary,
export, groups, a dry-run replay) leave the 5 letters, in order, on every server where a read
cannot drop them; where it can (a delivery limit before RabbitMQ 4.3), rr asks first and a
refusal reads nothing.

On RabbitMQ 4.3 rr hands what it read back with ``basic.nack``, which a quorum queue does not
count (``x-delivery-count`` stays, only ``x-acquired-count`` grows): any quorum queue is free
to read there. On 3.10 a quorum queue without a limit counts each read but drops nothing. A
quorum dead-letter queue rr declares has no limit on any server (``x-delivery-limit = -1`` on
4.x, where it would otherwise get 20)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from rabbitctl_retry.transport.base import Delivery
from tests.backends import Backend, backend_of, backend_params
from tests.dlq.support import declare, interactive, publish_all, rr, synthesized
from tests.observe import peek
from tests.shared_node import BROKERS

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
LETTERS = [synthesized("rr", n, NOW) for n in range(5)]
IDS = [properties.message_id for _, properties in LETTERS]
QUEUE = "payouts.dead"
READS: list[tuple[str, ...]] = [
    ("dlq", "inspect", QUEUE, "-o", "json"),
    ("dlq", "inspect", QUEUE, "--summary"),
    ("dlq", "export", QUEUE, "-"),
    ("dlq", "groups", QUEUE),
    ("dlq", "replay", QUEUE, "--dry-run"),
]
"""Every command that reads a queue without taking (each in turn, 25 times in all)."""

PARKING = f"""
[queues.payouts]
type = "quorum"
max_attempts = 5
dead_letter = "{QUEUE}"

[queues."{QUEUE}"]
type = "quorum"
"""


@pytest.fixture(params=backend_params(emulated=BROKERS))
async def server(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """Each shared RabbitMQ (a fresh vhost) and the emulator set to each of their releases."""
    async with backend_of(*request.param) as backend:
        yield backend


def nack_is_free(backend: Backend) -> bool:
    return BROKERS[backend.version].server_version.nack_returns_uncounted


async def read_25_times(backend: Backend, *, yes: bool) -> None:
    """The five reading commands in turn, 25 runs in all; each must succeed (the letters'
    origins exist, so the dry-run replay finds every one a home)."""
    await declare(backend, "refunds", "orders")
    for run in range(25):
        args = READS[run % len(READS)]
        with interactive(False):
            result = await rr(backend, *args, *(["--yes"] if yes else []))
        assert result.exit_code == 0, (args, result.output)


def counts(letters: list[Delivery]) -> list[tuple[Any, Any]]:
    return [
        (
            (letter.properties.headers or {}).get("x-delivery-count"),
            (letter.properties.headers or {}).get("x-acquired-count"),
        )
        for letter in letters
    ]


async def test_a_quorum_dead_letter_queue_rr_declared_keeps_every_letter(
    server: Backend, tmp_path: Path
) -> None:
    """rr declares it without a limit (-1 on 4.x): reads are free (4.3) or counted but harmless
    (3.10, 4.0); none asks, and after 25 the 5 letters are there in order."""
    topology = tmp_path / "topology.toml"
    topology.write_text(PARKING)
    declared = await rr(server, "declare", str(topology))
    assert declared.exit_code == 0, declared.output
    await publish_all(server, QUEUE, LETTERS)

    await read_25_times(server, yes=False)  # nothing to agree to: no limit can drop them

    left = await peek(server, QUEUE)
    assert [letter.properties.message_id for letter in left] == IDS
    if nack_is_free(server):
        assert counts(left) == [(None, 25)] * 5  # looked at 25 times, counted never
    else:
        assert [count for count, _ in counts(left)] == [25] * 5  # counted, nothing dropped


async def test_a_quorum_queue_another_client_declared(server: Backend) -> None:
    """Declared without x-delivery-limit by another client: free on 4.3; on 4.0 its limit is
    the server's 20, so rr asks, and without an answer reads nothing; on 3.10 it has none."""
    await declare(server, QUEUE, arguments={"x-queue-type": "quorum"})
    await publish_all(server, QUEUE, LETTERS)
    on_4_0 = not nack_is_free(server) and BROKERS[server.version].major >= 4
    if on_4_0:
        with interactive(False):
            refused = await rr(server, "dlq", "inspect", QUEUE)
        assert refused.exit_code == 2, refused.output
        assert "its delivery limit is 20 (the server's" in refused.stderr
        assert "pass --yes" in refused.stderr
        untouched = await peek(server, QUEUE)
        assert [count for count, _ in counts(untouched)] == [None] * 5  # read by peek alone
        return
    await read_25_times(server, yes=False)
    left = await peek(server, QUEUE)
    assert [letter.properties.message_id for letter in left] == IDS
    if nack_is_free(server):
        assert counts(left) == [(None, 25)] * 5


async def test_a_classic_queue_keeps_its_order_when_part_of_it_is_read(server: Backend) -> None:
    """--limit reads the head only: handed back (by nack on 4.3, by the channel's close before),
    every letter is where it was."""
    await declare(server, "refunds.dead")
    await publish_all(server, "refunds.dead", LETTERS)
    for _ in range(3):
        looked = await rr(server, "dlq", "inspect", "refunds.dead", "--limit", "2", "-o", "json")
        assert looked.exit_code == 0, looked.output
    assert [letter.properties.message_id for letter in await peek(server, "refunds.dead")] == IDS


async def test_a_replay_hands_back_what_it_skips_uncounted_on_4_3(server: Backend) -> None:
    """``--where`` replays 0, 2 and 4 (the last letter read is acked) and skips 1 and 3: they
    stay, in order, and on 4.3 uncounted (each handed back with its own basic.nack; one
    multiple nack up to the last tag would be refused, its tag being acked)."""
    server_version = BROKERS[server.version].server_version
    # no limit: -1 on 4.x; nothing on 3.10 (where -1 drops at the first return)
    unlimited = {"x-delivery-limit": -1} if server_version.takes_unlimited_delivery_limit else {}
    await declare(server, QUEUE, arguments={"x-queue-type": "quorum", **unlimited})
    await declare(server, "refunds", "orders")
    await publish_all(server, QUEUE, LETTERS)
    with interactive(False):
        result = await rr(server, "dlq", "replay", QUEUE, "--where", "origin=refunds", "--yes")
    assert result.exit_code == 0, result.output
    left = await peek(server, QUEUE)
    assert [letter.properties.message_id for letter in left] == [IDS[1], IDS[3]]
    if nack_is_free(server):
        assert counts(left) == [(None, 1), (None, 1)]
    assert sorted(d.properties.message_id or "" for d in await peek(server, "refunds")) == [
        IDS[0],
        IDS[2],
        IDS[4],
    ]
