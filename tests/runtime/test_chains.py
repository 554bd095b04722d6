"""A chain of retry queues (docs/explanation/attempts.md, "Attempts"): ``jobs`` (max_attempts 3)
dead-letters into ``jobs.second`` (max_attempts 3), which dead-letters into ``jobs.dead``. Attempts
count per queue: a handler that always retries sees attempts 1, 2, 3 in each, and ``jobs.dead``
holds the message once, from ``jobs.second``. Before, the second queue took the first one's
count: on a classic queue rr read the dead letter's retry header (attempt 4 at once), and
RabbitMQ 4.3 counts a server dead letter's delivery count against the next quorum queue's
limit (delivered once, then dead-lettered). On RabbitMQ (every server) and the emulator.
"""

from __future__ import annotations

from collections import Counter

import pytest

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, publish
from tests.observe import depth, peek

H = "x-ruststream-retry-count"

CHAIN = """
[queues.jobs]
type = "{first}"
max_attempts = 3
dead_letter = "jobs.second"

[queues."jobs.second"]
type = "{second}"
max_attempts = 3
dead_letter = "jobs.dead"

[queues."jobs.dead"]
"""


@pytest.mark.parametrize(
    ("first", "second"),
    [("classic", "classic"), ("quorum", "quorum"), ("quorum", "classic"), ("classic", "quorum")],
)
async def test_each_queue_of_a_chain_gives_a_message_its_own_attempts(
    backend: Backend, first: str, second: str
) -> None:
    seen: list[tuple[str, int]] = []

    def recording(queue: str) -> object:
        async def retry(msg: Message) -> AnyOutcome:
            seen.append((queue, msg.attempt))
            return Outcome.retry()

        return retry

    service = Service(
        HandlerSet(
            module="chain",
            subscribers=tuple(
                Subscriber(queue, recording(queue), f"chain:{queue}")  # type: ignore[arg-type]
                for queue in ("jobs", "jobs.second")
            ),
        ),
        topology=load_text(CHAIN.format(first=first, second=second)),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    async with service.running():
        await publish(backend, "jobs", b"x", Properties(message_id="m1"))

        async def dead() -> bool:
            return await depth(backend, "jobs.dead") == 1

        await backend.until(dead, "the message at the end of the chain")
        (letter,) = await peek(backend, "jobs.dead")
    assert seen == [(queue, n) for queue in ("jobs", "jobs.second") for n in (1, 2, 3)]
    assert Counter(queue for queue, _ in seen) == {"jobs": 3, "jobs.second": 3}
    headers = letter.properties.headers or {}
    if second == "classic":  # rr's own dead-letter copy
        assert (headers["rr-origin-queue"], headers[H]) == ("jobs.second", "3")
    else:  # the server's (no copy in jobs.second: rejected; or rr's copy count)
        assert headers["x-death"][0]["queue"] == "jobs.second"
    assert await depth(backend, "jobs") == 0
    assert await depth(backend, "jobs.second") == 0
