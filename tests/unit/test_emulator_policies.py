"""The emulator's resolution of arguments, policies and operator policies
(emulator/policies.py) as a table: the measured rules of docs/reference/topology.md ("Policies and
arguments"), including what the contract scenarios cannot wait for (a quorum queue's expiry,
checked by the server on a tick of 8 to 12 s)."""

from __future__ import annotations

import pytest

from rabbitctl_retry.emulator.policies import applying, effective_arguments, refusal
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import Policy, PolicyValue, ServerVersion

V310, V40, V43 = (ServerVersion.parse(v) for v in ("3.10.8", "4.0.5", "4.3.6"))


def resolve(
    version: ServerVersion,
    kind: str,
    arguments: dict[str, FieldValue],
    policy: dict[str, PolicyValue] | None,
    operator: dict[str, PolicyValue] | None = None,
) -> dict[str, FieldValue]:
    return effective_arguments(
        arguments,
        "quorum" if kind == "quorum" else "classic",
        None if policy is None else Policy.of("p", ".*", policy),
        None if operator is None else Policy.of("o", ".*", operator),
        version,
    )


@pytest.mark.parametrize(
    ("version", "kind", "arguments", "policy", "operator", "key", "value"),
    [
        # the limits: the smallest
        (V310, "classic", {"x-max-length": 5}, {"max-length": 2}, None, "x-max-length", 2),
        (
            V40,
            "quorum",
            {"x-message-ttl": 100},
            {"message-ttl": 900},
            {"message-ttl": 500},
            "x-message-ttl",
            100,
        ),
        (V43, "quorum", {}, {"delivery-limit": 9}, {"delivery-limit": 3}, "x-delivery-limit", 3),
        # a quorum queue's expires: the policies' on 3.10, the smallest on 4
        (V310, "quorum", {"x-expires": 1000}, {"expires": 60000}, None, "x-expires", 60000),
        (
            V310,
            "quorum",
            {"x-expires": 60000},
            {"expires": 9000},
            {"expires": 5000},
            "x-expires",
            5000,
        ),
        (V310, "classic", {"x-expires": 1000}, {"expires": 60000}, None, "x-expires", 1000),
        (V40, "quorum", {"x-expires": 1000}, {"expires": 60000}, None, "x-expires", 1000),
        (V43, "quorum", {"x-expires": 1000}, None, {"expires": 60000}, "x-expires", 1000),
        # overflow: a classic queue's argument, a quorum queue's policies (the operator's first)
        (
            V40,
            "classic",
            {"x-overflow": "drop-head"},
            {"overflow": "reject-publish"},
            None,
            "x-overflow",
            "drop-head",
        ),
        (
            V40,
            "classic",
            {},
            {"overflow": "drop-head"},
            {"overflow": "reject-publish"},
            "x-overflow",
            "reject-publish",
        ),
        (
            V310,
            "quorum",
            {"x-overflow": "drop-head"},
            {"overflow": "reject-publish"},
            None,
            "x-overflow",
            "reject-publish",
        ),
        (
            V43,
            "quorum",
            {"x-overflow": "drop-head"},
            {"overflow": "reject-publish"},
            {"overflow": "drop-head"},
            "x-overflow",
            "drop-head",
        ),
        # the dead-letter keys: the argument, key by key
        (
            V310,
            "quorum",
            {"x-dead-letter-exchange": "a"},
            {"dead-letter-exchange": "b"},
            None,
            "x-dead-letter-exchange",
            "a",
        ),
        (
            V43,
            "classic",
            {"x-dead-letter-exchange": "a"},
            {"dead-letter-routing-key": "k"},
            None,
            "x-dead-letter-routing-key",
            "k",
        ),
        (
            V40,
            "quorum",
            {"x-dead-letter-strategy": "at-least-once"},
            {"dead-letter-strategy": "at-most-once"},
            None,
            "x-dead-letter-strategy",
            "at-least-once",
        ),
        # 4.3's delayed retries: the type from the policies, the minimum the smaller of the
        # argument and the larger of policy and operator policy, the maximum the smallest
        (
            V43,
            "quorum",
            {"x-delayed-retry-type": "all"},
            {"delayed-retry-type": "disabled"},
            None,
            "x-delayed-retry-type",
            "disabled",
        ),
        (
            V43,
            "quorum",
            {},
            {"delayed-retry-min": 100},
            {"delayed-retry-min": 900},
            "x-delayed-retry-min",
            900,
        ),
        (
            V43,
            "quorum",
            {"x-delayed-retry-min": 300},
            {"delayed-retry-min": 100},
            {"delayed-retry-min": 900},
            "x-delayed-retry-min",
            300,
        ),
        (
            V43,
            "quorum",
            {"x-delayed-retry-max": 300},
            {"delayed-retry-max": 800},
            {"delayed-retry-max": 900},
            "x-delayed-retry-max",
            300,
        ),
    ],
)
def test_a_key_resolves_as_measured(
    version: ServerVersion,
    kind: str,
    arguments: dict[str, FieldValue],
    policy: dict[str, PolicyValue] | None,
    operator: dict[str, PolicyValue] | None,
    key: str,
    value: FieldValue,
) -> None:
    assert resolve(version, kind, arguments, policy, operator)[key] == value


def test_a_routing_key_without_an_exchange_is_no_use() -> None:
    assert resolve(V40, "classic", {}, {"dead-letter-routing-key": "k"}) == {}


def test_the_highest_priority_applies_and_the_pattern_is_a_search() -> None:
    low = Policy.of("low", "a.b", {"max-length": 1}, priority=1)
    high = Policy.of("high", "^x", {"max-length": 2}, priority=2)
    assert applying([low, high], "x.aXb", "classic", V40) == high
    assert applying([low, high], "y.aXb", "classic", V40) == low
    assert applying([low], "aXc", "classic", V40) is None
    typed = Policy.of("typed", ".*", {"max-length": 1}, apply_to="quorum_queues")
    assert applying([typed], "q", "classic", V40) is None
    assert applying([typed], "q", "quorum", V40) == typed
    assert (
        applying(
            [Policy.of("x", ".*", {"max-length": 1}, apply_to="exchanges")], "q", "classic", V43
        )
        is None
    )


@pytest.mark.parametrize(
    ("version", "definition", "operator", "refused"),
    [
        (V310, {"overflow": "drop-head"}, True, True),
        (V40, {"overflow": "drop-head"}, True, False),
        (V40, {"delayed-retry-min": 5}, False, True),
        (V43, {"delayed-retry-type": "all"}, False, True),  # needs a minimum
        (V43, {"delayed-retry-type": "disabled"}, False, False),
        (V43, {"dead-letter-exchange": "x"}, True, True),
        (V310, {"max-length": -1}, False, True),
    ],
)
def test_what_a_server_refuses(
    version: ServerVersion, definition: dict[str, PolicyValue], operator: bool, refused: bool
) -> None:
    policy = Policy.of("p", ".*", definition)
    assert (refusal(policy, version, operator=operator) is not None) is refused


def test_3_10_refuses_a_policy_for_one_queue_type() -> None:
    policy = Policy.of("p", ".*", {"max-length": 1}, apply_to="quorum_queues")
    assert refusal(policy, V310, operator=False) is not None
    assert refusal(policy, V40, operator=False) is None
