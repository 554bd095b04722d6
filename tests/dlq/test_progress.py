"""The progress of a replay (docs/explanation/guarantees.md, "How a replay runs"): sized to what the
run will do — the depth, or --limit — and advanced to exactly that."""

from __future__ import annotations

from rabbitctl_retry.dlq.filters import parse_all
from rabbitctl_retry.dlq.replay import ReplayPlan
from rabbitctl_retry.ops import transfer as shell
from rabbitctl_retry.ops.transfer import TransferOptions
from rabbitctl_retry.transport.base import Properties
from tests.backends import EmulatorBackend
from tests.dlq.support import declare, publish_all


class Bar:
    def __init__(self) -> None:
        self.total: int | None = None
        self.done = 0

    def begin(self, total: int, description: str) -> None:
        self.total = total

    def advance(self, count: int = 1) -> None:
        self.done += count


def letters(count: int) -> list[tuple[bytes, Properties]]:
    """Dead letters of 'refunds', every other one from tenant b."""
    return [
        (
            b"{}",
            Properties(
                message_id=f"m{n}",
                headers={"rr-origin-queue": "refunds", "tenant": "b" if n % 2 else "a"},
            ),
        )
        for n in range(count)
    ]


async def replay(options: TransferOptions, plan: ReplayPlan) -> Bar:
    backend = EmulatorBackend()
    try:
        await declare(backend, "dead", "refunds")
        await publish_all(backend, "dead", letters(20))
        bar = Bar()
        connection = await backend.connect()
        await shell.replay_queue(connection, plan, options, progress=bar)
        await connection.close()
        return bar
    finally:
        await backend.close()


async def test_without_a_limit_the_bar_is_the_depth() -> None:
    bar = await replay(TransferOptions(), ReplayPlan(source="dead", run_id="r"))
    assert (bar.total, bar.done) == (20, 20)


async def test_a_limit_sizes_the_bar_and_fills_it() -> None:
    bar = await replay(TransferOptions(limit=5), ReplayPlan(source="dead", run_id="r"))
    assert (bar.total, bar.done) == (5, 5)


async def test_with_where_the_bar_counts_the_messages_attempted() -> None:
    plan = ReplayPlan(source="dead", run_id="r", conditions=parse_all(["header.tenant=b"]))
    bar = await replay(TransferOptions(limit=4), plan)
    assert (bar.total, bar.done) == (4, 4)  # 7 read: 4 of tenant b replayed, 3 of a skipped
