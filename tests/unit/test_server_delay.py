"""``delay = "server"`` (RabbitMQ 4.3's delayed retries of a quorum queue) in the pure core:
what loads and what is refused, the arguments it declares, the plan on each server release
and the wait rr reports (docs/reference/topology.md, "Delays"; docs/explanation/attempts.md, "The
quorum queue waits")."""

from __future__ import annotations

import pytest

from rabbitctl_retry.errors import ConfigError
from rabbitctl_retry.retry.policy import server_delay_ms
from rabbitctl_retry.topology.expand import expand
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.topology.model import DelayMode, ServerDelayReturns
from rabbitctl_retry.topology.plan import Absent, Matches, Observation, plan

JOBS = """
[queues.jobs]
type = "quorum"
max_attempts = 4
dead_letter = "jobs.dead"
delay = "server"
"""


def load_error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_text(text)
    return caught.value


def test_a_server_delay_loads_with_its_durations() -> None:
    queue = load_text(JOBS + 'delay_min = "1500ms"\ndelay_max = "5m"\n').queue("jobs")
    assert queue.delay is DelayMode.SERVER
    assert (queue.delay_min_ms, queue.delay_max_ms, queue.delay_returns) == (1_500, 300_000, None)
    assert queue.server_delay == (1_500, 300_000)
    assert queue.wait_queue_names == ()
    assert queue.delay_exchange is None


def test_delay_max_defaults_to_delay_min_as_rabbitmq_does() -> None:
    assert load_text(JOBS + 'delay_min = "2s"\n').queue("jobs").server_delay == (2_000, 2_000)


@pytest.mark.parametrize(
    ("extra", "returns"),
    [("", "failed"), ('delay_returns = "failed"\n', "failed"), ('delay_returns = "all"\n', "all")],
)
def test_the_declared_arguments(extra: str, returns: str) -> None:
    desired = expand(load_text(JOBS + 'delay_min = "1s"\ndelay_max = "5s"\n' + extra))
    assert [queue.name for queue in desired.queues] == ["jobs.dead", "jobs"]
    assert dict(desired.queues[1].arguments) == {
        "x-queue-type": "quorum",
        "x-delivery-limit": 3,
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "jobs.dead",
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
        "x-delayed-retry-type": returns,
        "x-delayed-retry-min": 1_000,
        "x-delayed-retry-max": 5_000,
    }
    assert [member.value for member in ServerDelayReturns] == ["failed", "all"]


@pytest.mark.parametrize(
    ("text", "path", "fragment"),
    [
        (
            '[queues.q]\ndelay = "server"\ndelay_min = "1s"\n',
            "queues.q.delay",
            'it needs type = "quorum"',
        ),
        (JOBS, "queues.jobs.delay", 'delay = "server" needs delay_min'),
        (JOBS + 'delay_min = "0s"\n', "queues.jobs.delay_min", "must be longer than 0"),
        (
            JOBS + 'delay_min = "50d"\n',
            "queues.jobs.delay_min",
            "at most 4294967295 ms",
        ),
        (
            JOBS + 'delay_min = "5s"\ndelay_max = "1s"\n',
            "queues.jobs.delay_max",
            "must not be shorter than delay_min",
        ),
        (JOBS + "delay_min = 1000\n", "queues.jobs.delay_min", "must be a duration string"),
        (JOBS + 'delay_min = "soon"\n', "queues.jobs.delay_min", "is not a duration"),
        (
            JOBS + 'delay_min = "1s"\ndelay_returns = "returned"\n',
            "queues.jobs.delay_returns",
            "must be one of 'failed', 'all'",
        ),
        (
            '[queues.q]\ntype = "quorum"\ndelay = "dlx-ttl"\ndelay_min = "1s"\n',
            "queues.q.delay_min",
            'delay_min only applies to delay = "server"',
        ),
        (
            '[queues.q]\ntype = "quorum"\ndelay_returns = "all"\n',
            "queues.q.delay_returns",
            'delay_returns only applies to delay = "server"',
        ),
        (
            JOBS + 'delay_min = "1s"\ndelay_tiers = ["1s"]\n',
            "queues.jobs.delay_tiers",
            'they need delay = "dlx-ttl"',
        ),
        (
            '[queues.q]\ntype = "quorum"\narguments = { "x-delayed-retry-min" = 1000 }\n',
            "queues.q.arguments.x-delayed-retry-min",
            "is set by the key `delay_min`",
        ),
        (
            '[queues.q]\ntype = "quorum"\narguments = { "x-delayed-retry-type" = "failed" }\n',
            "queues.q.arguments.x-delayed-retry-type",
            "is set by the key `delay`",
        ),
    ],
)
def test_refused_while_loading(text: str, path: str, fragment: str) -> None:
    error = load_error(text)
    assert error.path == path
    assert fragment in error.detail
    assert error.exit_code == 78


SERVER_43 = (4, 3, 6)


@pytest.mark.parametrize(
    ("server_version", "observation", "status"),
    [
        (SERVER_43, Absent(), "planned"),
        (SERVER_43, Matches(), "unchanged"),
        ((4, 4, 0), Absent(), "planned"),
        ((5, 0, 0), Absent(), "planned"),
        ((4, 0, 5), Absent(), "conflict"),
        ((4, 2, 9), Matches(), "conflict"),
        ((3, 10, 8), Absent(), "conflict"),
    ],
)
def test_the_plan_refuses_a_server_older_than_4_3(
    server_version: tuple[int, int, int], observation: Observation, status: str
) -> None:
    desired = expand(load_text(JOBS + 'delay_min = "1s"\n'))
    result = plan(desired, {("queue", "jobs"): observation}, server_version=server_version)
    jobs = next(op for op in result.operations if op.name == "jobs")
    assert jobs.status.value == status
    others = [op.status.value for op in result.operations if op.name != "jobs"]
    assert others == ["planned"]
    if status == "conflict":
        release = ".".join(map(str, server_version))
        assert jobs.detail == (
            'delay = "server" needs RabbitMQ 4.3 or later (delayed retries of quorum queues); '
            f"this server is {release}, which would ignore x-delayed-retry-* and give every "
            'retry back at once: use delay = "dlx-ttl" or delay_tiers here'
        )
        assert not result.can_apply
    else:
        assert jobs.detail is None


@pytest.mark.parametrize(
    ("count", "expected_ms"),
    [(0, 1_000), (1, 1_000), (2, 2_000), (3, 3_000), (5, 5_000), (6, 5_000), (1_000, 5_000)],
)
def test_the_wait_the_server_applies(count: int, expected_ms: int) -> None:
    """Measured on 4.3.6 (min 500 ms, max 1800 ms: 0.5 s, 1 s, 1.5 s, 1.8 s, 1.8 s; a nack,
    which leaves the count as it is, waits min x max(count, 1))."""
    assert server_delay_ms(1_000, 5_000, count) == expected_ms
