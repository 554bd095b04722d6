"""What a changed topology file changes in a running ``rr run`` (topology/reload.py): a table
of (the running file, the new file) -> the changes applied (``old -> new``) and those kept,
with the word of their reason; then what the applied topology holds."""

from __future__ import annotations

import pytest

from rabbitctl_retry.retry.policy import RetryPolicy
from rabbitctl_retry.runtime.service import policy_for
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.topology.model import DelayMode, Topology
from rabbitctl_retry.topology.reload import BROKER, MIGRATION, RESTART, plan_reload, shown

CLASSIC = """
[queues.jobs]
max_attempts = {attempts}
dead_letter = "{dead}"
{extra}
"""

QUORUM = """
[broker]
settings = "{settings}"

[queues.jobs]
type = "quorum"
max_attempts = {attempts}
dead_letter = "{dead}"
{extra}
"""


def classic(attempts: int = 3, dead: str = "jobs.dead", extra: str = "") -> Topology:
    return load_text(CLASSIC.format(attempts=attempts, dead=dead, extra=extra))


def quorum(
    settings: str = "arguments", attempts: int = 3, dead: str = "jobs.dead", extra: str = ""
) -> Topology:
    return load_text(QUORUM.format(settings=settings, attempts=attempts, dead=dead, extra=extra))


TIERS = 'delay = "dlx-ttl"\ndelay_tiers = [{tiers}]'
SERVER = 'delay = "server"\ndelay_min = "{low}"\ndelay_max = "10s"'

# (case, running, new, applied, kept: (change, the reason's constant or a word of it))
CASES: list[tuple[str, Topology, Topology, list[str], list[tuple[str, str]]]] = [
    ("nothing changed", classic(), classic(), [], []),
    ("classic: max_attempts raised", classic(3), classic(5), ["jobs.max_attempts 3 -> 5"], []),
    ("classic: max_attempts lowered", classic(5), classic(2), ["jobs.max_attempts 5 -> 2"], []),
    (
        "quorum, policy: max_attempts raised (rr declare puts the policy)",
        quorum("policy", 3),
        quorum("policy", 5),
        ["jobs.max_attempts 3 -> 5"],
        [],
    ),
    (
        "quorum, policy: lowered",
        quorum("policy", 5),
        quorum("policy", 2),
        ["jobs.max_attempts 5 -> 2"],
        [],
    ),
    (
        "quorum, arguments: x-delivery-limit is fixed, rr keeps the broker's number",
        quorum("arguments", 3),
        quorum("arguments", 5),
        [],
        [("jobs.max_attempts 3 -> 5", "x-delivery-limit (2) is an argument")],
    ),
    (
        "quorum, arguments: lowered is refused too (the broker's limit would govern)",
        quorum("arguments", 5),
        quorum("arguments", 2),
        [],
        [("jobs.max_attempts 5 -> 2", "a migration (rr docs migrate-to-quorum")],
    ),
    (
        "the running mode decides, not the new file's (moving is a migration)",
        quorum("arguments", 3),
        quorum("policy", 5),
        [],
        [
            ("jobs.max_attempts 3 -> 5", "x-delivery-limit"),
            ("broker.settings arguments -> policy", MIGRATION),
        ],
    ),
    (
        "dead_letter only unchanged; max_attempts beside it applies",
        classic(3, "jobs.dead"),
        classic(5, "jobs.dead2"),
        ["jobs.max_attempts 3 -> 5"],
        [("jobs.dead_letter jobs.dead -> jobs.dead2", RESTART)],
    ),
    (
        "a tier removed: its wait queues exist",
        classic(extra=TIERS.format(tiers='"5s", "30s"')),
        classic(extra=TIERS.format(tiers='"5s"')),
        ["jobs.delay_tiers [5000 ms, 30000 ms] -> [5000 ms]"],
        [],
    ),
    (
        "a tier added: its wait queue was never declared",
        classic(extra=TIERS.format(tiers='"5s"')),
        classic(extra=TIERS.format(tiers='"5s", "30s"')),
        [],
        [("jobs.delay_tiers [5000 ms] -> [5000 ms, 30000 ms]", "'jobs.retry.30s' was not")],
    ),
    (
        "dlx-ttl back to memory: nothing to declare",
        classic(extra='delay = "dlx-ttl"'),
        classic(),
        ["jobs.delay dlx-ttl -> memory"],
        [],
    ),
    (
        "memory to dlx-ttl: the wait queue does not exist",
        classic(),
        classic(extra='delay = "dlx-ttl"'),
        [],
        [("jobs.delay memory -> dlx-ttl", "'jobs.retry' was not declared")],
    ),
    (
        "memory to the delayed-message exchange: not declared",
        classic(),
        classic(extra='delay = "plugin-dme"'),
        [],
        [("jobs.delay memory -> plugin-dme", "'jobs.delay' was not declared")],
    ),
    (
        "the wait queues' type: a migration",
        classic(extra='delay = "dlx-ttl"'),
        classic(extra='delay = "dlx-ttl"\nwait_queue_type = "quorum"'),
        [],
        [("jobs.wait_queue_type (none) -> quorum", MIGRATION)],
    ),
    (
        "server delays in a policy: live",
        quorum("policy", extra=SERVER.format(low="1s")),
        quorum("policy", 6, extra=SERVER.format(low="2s")),
        ["jobs.max_attempts 3 -> 6", "jobs.delay_min 1000 ms -> 2000 ms"],
        [],
    ),
    (
        "server delays in arguments: a migration",
        quorum(extra=SERVER.format(low="1s")),
        quorum(extra=SERVER.format(low="2s")),
        [],
        [("jobs.delay_min 1000 ms -> 2000 ms", MIGRATION)],
    ),
    (
        "to delay = server: a restart",
        quorum("policy"),
        quorum("policy", extra=SERVER.format(low="1s")),
        [],
        [
            ("jobs.delay memory -> server", 'delay = "server"'),
            ("jobs.delay_min (none) -> 1000 ms", RESTART),
            ("jobs.delay_max (none) -> 10000 ms", RESTART),
        ],
    ),
    (
        "the type: a migration (max_attempts of the running classic queue applies)",
        classic(3),
        quorum("arguments", 5),
        ["jobs.max_attempts 3 -> 5"],
        [("jobs.type classic -> quorum", MIGRATION)],
    ),
    (
        "an argument is the broker's",
        classic(),
        classic(extra="arguments = { x-max-length = 10 }"),
        [],
        [("jobs.arguments {} -> {x-max-length = 10}", BROKER)],
    ),
    (
        "publish: a restart",
        classic(),
        classic(extra='publish = "fast"'),
        [],
        [("jobs.publish confirm -> fast", RESTART)],
    ),
    (
        "a queue added, the retry header: a restart",
        classic(),
        load_text(
            CLASSIC.format(attempts=3, dead="jobs.dead", extra="")
            + '[queues.more]\n[broker]\nretry_header = "x-tries"\n'
        ),
        [],
        [
            ("queues.more (none) -> listed", RESTART),
            ("broker.retry_header x-ruststream-retry-count -> x-tries", RESTART),
        ],
    ),
    (
        "a queue removed",
        load_text(CLASSIC.format(attempts=3, dead="jobs.dead", extra="") + "[queues.more]\n"),
        classic(),
        [],
        [("queues.more listed -> (none)", RESTART)],
    ),
    (
        "an exchange",
        classic(),
        load_text(CLASSIC.format(attempts=3, dead="jobs.dead", extra="") + "[exchanges.events]\n"),
        [],
        [("exchanges.events (none) -> listed", RESTART)],
    ),
]


@pytest.mark.parametrize(
    ("running", "new", "applied", "kept"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_what_a_running_rr_run_takes(
    running: Topology, new: Topology, applied: list[str], kept: list[tuple[str, str]]
) -> None:
    result = plan_reload(running, new)
    assert [str(change) for change in result.applied] == applied
    assert [str(change) for change in result.kept] == [change for change, _ in kept]
    for change, (_, word) in zip(result.kept, kept, strict=True):
        assert word in (change.reason or ""), change.reason
    assert all(change.reason is None for change in result.applied)
    assert result.changed == bool(applied)
    if not applied:
        assert result.topology is running


def test_the_applied_topology_gives_the_new_policy() -> None:
    result = plan_reload(classic(3, "jobs.dead"), classic(5, "jobs.dead2"))
    assert policy_for("jobs", result.topology) == RetryPolicy(
        queue="jobs", max_attempts=5, dead_letter="jobs.dead"
    )


def test_wait_queues_are_those_of_the_start_not_of_the_last_reload() -> None:
    """A tier removed and then put back: its wait queue was declared at the start."""
    start = classic(extra=TIERS.format(tiers='"5s", "30s"'))
    fewer = plan_reload(start, classic(extra=TIERS.format(tiers='"5s"')), declared=start)
    assert fewer.changed
    back = plan_reload(fewer.topology, start, declared=start)
    assert [str(change) for change in back.applied] == [
        "jobs.delay_tiers [5000 ms] -> [5000 ms, 30000 ms]"
    ]
    queue = back.topology.queue("jobs")
    assert queue is not None
    assert queue.delay is DelayMode.DLX_TTL
    assert queue.wait_queue_names == ("jobs.retry.5s", "jobs.retry.30s")


def test_changes_that_do_not_stand_alone_are_all_kept() -> None:
    """Classic: dropping max_attempts needs dropping dead_letter too (the model refuses a
    dead_letter without max_attempts), and dead_letter does not apply live."""
    running = load_text('[queues.jobs]\nmax_attempts = 3\ndead_letter = "jobs.dead"\n')
    new = load_text("[queues.jobs]\n")
    result = plan_reload(running, new)
    assert not result.changed
    assert result.topology is running
    reasons = {str(change): change.reason or "" for change in result.kept}
    assert set(reasons) == {
        "jobs.max_attempts 3 -> (none)",
        "jobs.dead_letter jobs.dead -> (none)",
    }
    assert "does not apply without the changes kept" in reasons["jobs.max_attempts 3 -> (none)"]


def test_a_quorum_delivery_limit_follows_max_attempts_in_a_policy() -> None:
    limit = "delivery_limit = {limit}"
    running = quorum("policy", 3, extra=limit.format(limit=2))
    result = plan_reload(running, quorum("policy", 5, extra=limit.format(limit=4)))
    assert [str(change) for change in result.applied] == [
        "jobs.max_attempts 3 -> 5",
        "jobs.delivery_limit 2 -> 4",
    ]
    argued = plan_reload(
        quorum("arguments", 3, extra=limit.format(limit=2)),
        quorum("arguments", 5, extra=limit.format(limit=4)),
    )
    assert not argued.changed


@pytest.mark.parametrize(
    ("value", "ms", "text"),
    [
        (None, False, "(none)"),
        (DelayMode.MEMORY, False, "memory"),
        ((1000, 2000), True, "[1000 ms, 2000 ms]"),
        ({"b": 1, "a": "x"}, False, "{a = 'x', b = 1}"),
        (7, False, "7"),
    ],
)
def test_values_are_shown_plainly(value: object, ms: bool, text: str) -> None:
    assert shown(value, ms=ms) == text
