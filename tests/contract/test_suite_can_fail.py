"""The contract suite can fail: an emulator with a wrong rule does not pass the topic scenario.

The wrong rule is one a hand-written matcher easily gets wrong: ``#`` matching one or more
words instead of zero or more. The expected result is the one RabbitMQ gives
(``test_topic_routing[rabbitmq-*]`` checks the same table against the real servers).

Each check runs on the emulator set to each release line, and the suite also tells the lines
apart: an emulator at one version with the other's headers-exchange number rule does not pass
the headers scenario of its version (``test_headers_routing[rabbitmq-*]`` checks both tables).
And RabbitMQ's own cases, ported (tests/contract/rabbitmq_suite/), catch an emulator without
its CC routing or with BCC keys in ``x-death``; the policy scenario
(tests/contract/test_policies.py) catches an emulator that resolves a key's argument and
policies by another rule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

import pytest

from rabbitctl_retry.emulator import policies, routing
from rabbitctl_retry.emulator.delayed_retry import DelayedRetry
from tests.backends import EMULATED, EmulatorBackend
from tests.contract.test_policies import test_argument_policy_and_operator_policy_per_key
from tests.contract.test_routing import (
    EXPECTED_TOPIC,
    expected_headers,
    observe_headers_routing,
    observe_topic_routing,
)

VERSIONS = pytest.mark.parametrize("version", sorted(EMULATED))


def hash_needs_a_word(pattern: tuple[str, ...], words: tuple[str, ...]) -> bool:
    """A topic matcher in which ``#`` matches one or more words (wrong: zero or more)."""
    if not pattern:
        return not words
    head, rest = pattern[0], pattern[1:]
    if head == "#":
        return any(hash_needs_a_word(rest, words[n:]) for n in range(1, len(words) + 1))
    if not words:
        return False
    return (head in ("*", words[0])) and hash_needs_a_word(rest, words[1:])


async def observe_on_a_fresh_emulator(version: str) -> dict[str, list[str]]:
    backend = EmulatorBackend(version, rounds=1)
    try:
        return await observe_topic_routing(backend)
    finally:
        await backend.close()


@VERSIONS
async def test_the_topic_scenario_catches_a_hash_that_needs_a_word(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await observe_on_a_fresh_emulator(version) == EXPECTED_TOPIC

    monkeypatch.setattr(routing, "_match_words", hash_needs_a_word)
    assert not routing.topic_matches("a.#", "a")  # the wrong rule is in force
    wrong = await observe_on_a_fresh_emulator(version)

    assert wrong != EXPECTED_TOPIC
    missing = {
        pattern: [key for key in keys if key not in wrong[pattern]]
        for pattern, keys in EXPECTED_TOPIC.items()
    }
    extra = {
        pattern: [key for key in keys if key not in EXPECTED_TOPIC[pattern]]
        for pattern, keys in wrong.items()
    }
    # exactly the keys that need '#' to match zero words go missing, and nothing else changes
    assert {pattern: keys for pattern, keys in missing.items() if keys} == {
        "a.#": ["a"],
        "#.b": ["b"],
        "a.#.c": ["a.c"],
        "#": [""],
        "a.*.#": ["a.b", "a.c", "a."],
        "#.#": ["", "a", "b"],
        "both": ["a"],
    }
    assert {pattern: keys for pattern, keys in extra.items() if keys} == {}


@VERSIONS
async def test_the_headers_scenario_catches_the_other_versions_number_rule(version: str) -> None:
    """3.10 matches 1 with 1.0, 4.0 does not: an emulator at ``version`` with the other rule
    fails that version's expectations, exactly on the bindings the rule decides."""
    right = EmulatorBackend(version, rounds=1)
    wrong = EmulatorBackend(version, rounds=1)
    wrong.emulator.broker.behaviour = dataclasses.replace(  # the other line's rule
        wrong.emulator.broker.behaviour, headers_exchange_strict_numbers=version == "3.10"
    )
    try:
        assert await observe_headers_routing(right) == expected_headers(version)
        observed = await observe_headers_routing(wrong)
    finally:
        await right.close()
        await wrong.close()
    differing = {
        binding
        for binding, taken in expected_headers(version).items()
        if observed[binding] != taken
    }
    assert differing == {"int", "float", "stamp", "millis"}
    other = next(line for line in EMULATED if line != version)
    assert observed == expected_headers(other)  # and gives the other server's table exactly


async def run_ported_header_case(version: str, header: str) -> None:
    """RabbitMQ's dead_lettering_SUITE:dead_letter_routing_key_header_``header`` (ported in
    tests/contract/rabbitmq_suite/) on a fresh emulator, classic queues."""
    from tests.contract.rabbitmq_suite.support import CLASSIC, Scenario
    from tests.contract.rabbitmq_suite.test_dead_lettering import routed_by_header

    backend = EmulatorBackend(version, rounds=1)
    try:
        scenario = await Scenario.open(backend, CLASSIC, f"dead_letter_routing_key_header_{header}")
        await routed_by_header(scenario, header)
    finally:
        await backend.close()


@VERSIONS
async def test_a_ported_rabbitmq_case_catches_an_emulator_without_cc_routing(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sender-selected distribution removed (the CC header routes nothing): RabbitMQ's own
    dead_letter_routing_key_header_CC, ported, fails on that emulator."""
    from rabbitctl_retry.emulator import publish

    await run_ported_header_case(version, "CC")

    monkeypatch.setattr(publish, "_sender_selected", lambda properties: (properties, ()))
    with pytest.raises(AssertionError):
        await run_ported_header_case(version, "CC")


@VERSIONS
async def test_a_ported_rabbitmq_case_catches_bcc_keys_in_x_death(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The x-death rule removed (routing-keys list every key the message was routed by, BCC's
    too): the ported dead_letter_routing_key_header_BCC fails on that emulator."""
    from rabbitctl_retry.emulator import dead_letters

    await run_ported_header_case(version, "BCC")

    monkeypatch.setattr(dead_letters, "_death_routing_keys", lambda message: message.routing_keys)
    with pytest.raises(AssertionError, match="x-death"):
        await run_ported_header_case(version, "BCC")


@pytest.mark.parametrize(
    ("rule", "scenario"),
    [
        ("nack_requeue_counts_delivery", "nack"),
        ("counts_travel_from_any_queue", "carried"),
    ],
)
async def test_the_4_3_scenarios_catch_an_emulator_counting_as_4_0(
    rule: str, scenario: str
) -> None:
    """RabbitMQ 4.3 counts deliveries its own way (docs/reference/testing.md): an emulator at 4.3
    with one of 4.0's rules back (a nack counted; counts that travel only from quorum
    rejections) fails the scenario that rule decides, which passes at 4.3."""
    from tests.contract.test_differential_findings import (
        test_what_a_dead_letter_carries_of_the_returns_before_it as carried,
    )
    from tests.contract.test_requeue import test_nack_multiple_with_requeue as nacked

    async def run(backend: EmulatorBackend) -> None:
        if scenario == "nack":
            await nacked(backend, "quorum")
        else:
            await carried(backend, "basic.reject(requeue)")

    right = EmulatorBackend("4.3", rounds=1)
    wrong = EmulatorBackend("4.3", rounds=1)
    behaviour = wrong.emulator.broker.behaviour
    wrong.emulator.broker.behaviour = dataclasses.replace(
        behaviour, **{rule: not getattr(behaviour, rule)}
    )
    try:
        await run(right)
        with pytest.raises(AssertionError):
            await run(wrong)
    finally:
        await right.close()
        await wrong.close()


@pytest.mark.parametrize(
    "wrong_wait",
    [
        pytest.param(lambda retry, count: retry.min_ms, id="never-grows"),
        pytest.param(lambda retry, count: retry.min_ms * count, id="no-cap"),
        pytest.param(lambda retry, count: 0, id="no-wait"),
    ],
)
async def test_the_delayed_retry_scenario_catches_a_wrong_schedule(
    wrong_wait: Callable[[DelayedRetry, int], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """RabbitMQ 4.3's delayed retries (emulator/delayed_retry.py): an emulator at 4.3 whose
    waits do not grow with the count, are not capped at the maximum, or do not happen, fails
    the scenario that passes with the measured schedule."""
    from tests.contract.test_delayed_retry import (
        delayed,
    )
    from tests.contract.test_delayed_retry import (
        test_each_reject_waits_its_turn_and_comes_back_first as scenario,
    )

    async def run() -> None:
        backend = EmulatorBackend("4.3", rounds=1)
        try:
            await scenario(backend, delayed("failed", 300, 700), [300, 600, 700])
        finally:
            await backend.close()

    await run()

    def wrong(retry: DelayedRetry, delivery_count: int, *, counted: bool) -> int:
        return wrong_wait(retry, max(delivery_count, 1))

    monkeypatch.setattr(DelayedRetry, "wait_ms", wrong)
    with pytest.raises(AssertionError):
        await run()


_RIGHT_RULE = policies.rule


def _rule_of(key: str, kind: str, version: object, *, as_kind: str) -> str:
    return _RIGHT_RULE(key, as_kind, version)  # type: ignore[arg-type]


async def run_policy_scenario(version: str) -> None:
    """The per-key policy scenario (tests/contract/test_policies.py) on a fresh emulator."""
    backend = EmulatorBackend(version, rounds=1)
    try:
        await test_argument_policy_and_operator_policy_per_key(backend)
    finally:
        await backend.close()


@VERSIONS
@pytest.mark.parametrize(
    ("wrong", "rule"),
    [
        # a policy that simply replaces the argument, whatever the key
        ("the policy wins", lambda key, kind, version: "policy"),
        # an argument that always wins (the rule of the dead-letter keys, for every key)
        ("the argument wins", lambda key, kind, version: "argument"),
        # a classic queue's overflow for a quorum queue too
        ("overflow as a classic queue", partial(_rule_of, as_kind="classic")),
    ],
)
async def test_the_policy_scenario_catches_a_wrong_resolution(
    version: str,
    wrong: str,
    rule: Callable[[str, str, object], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await run_policy_scenario(version)  # the right rule passes

    monkeypatch.setattr(policies, "rule", rule)
    with pytest.raises(AssertionError):
        await run_policy_scenario(version)


@VERSIONS
async def test_the_policy_scenario_catches_an_operator_policy_that_replaces_the_policy(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        policies,
        "merged",
        lambda key, policy, operator: policy if operator is None else operator,
    )
    with pytest.raises(AssertionError):
        await run_policy_scenario(version)
