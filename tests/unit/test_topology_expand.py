"""Pure tables for expand.py: a Topology -> the exact queues, exchanges, bindings it means."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rabbitctl_retry.topology.expand import (
    BindingEntity,
    Desired,
    ExchangeEntity,
    QueueEntity,
    expand,
    queue_arguments,
    targets_first,
    wait_queue_arguments,
)
from rabbitctl_retry.topology.load import load_file, load_text
from rabbitctl_retry.topology.model import DelayMode, Queue, QueueType, Topology

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "refunds" / "topology.toml"

QueueRow = tuple[str, bool, dict[str, Any]]

CLASSIC = {"x-queue-type": "classic"}
"""The arguments of a plain classic queue: its type, always sent (docs/reference/topology.md, "The
queue's type")."""


def queues_of(desired: Desired) -> list[QueueRow]:
    return [(queue.name, queue.durable, dict(queue.arguments)) for queue in desired.queues]


def assert_same_types(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    """``==`` says 4 == 4.0 and True == 1; the broker does not."""
    assert actual == expected
    for key, value in expected.items():
        assert type(actual[key]) is type(value), (key, actual[key], value)


def test_the_guides_file_expands_exactly() -> None:
    desired = expand(load_file(EXAMPLE))
    # Each queue comes after the queue it dead-letters to: refunds (dead_letter) after
    # refunds.dead, refunds.retry (x-dead-letter-routing-key) after refunds, payouts after
    # payouts.dead.
    expected: list[QueueRow] = [
        ("refunds.dead", True, CLASSIC),
        ("refunds", True, CLASSIC),
        (
            "refunds.retry",
            True,
            {
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": "refunds",
                "x-queue-type": "classic",
            },
        ),
        ("payouts.dead", True, CLASSIC),
        (
            "payouts",
            True,
            {
                "x-queue-type": "quorum",
                "x-delivery-limit": 4,
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": "payouts.dead",
                "x-dead-letter-strategy": "at-least-once",
                "x-overflow": "reject-publish",
            },
        ),
        ("refunds.receipts", True, CLASSIC),
    ]
    assert queues_of(desired) == expected
    for (_, _, actual), (_, _, wanted) in zip(queues_of(desired), expected, strict=True):
        assert_same_types(actual, wanted)
    assert type(desired.queues[4].arguments["x-delivery-limit"]) is int
    assert desired.exchanges == ()
    assert desired.bindings == ()
    assert desired.referenced_exchanges == ()
    assert [entity.name for entity in desired.entities] == [
        "refunds.dead",
        "refunds",
        "refunds.retry",
        "payouts.dead",
        "payouts",
        "refunds.receipts",
    ]


def test_the_guides_file_roles_and_sources() -> None:
    desired = expand(load_file(EXAMPLE))
    assert [(queue.role, queue.source) for queue in desired.queues] == [
        ("classic queue, dead letters of refunds", 'queues."refunds.dead"'),
        ("classic queue", "queues.refunds"),
        ("wait queue of refunds", "queues.refunds.delay"),
        ("classic queue, dead letters of payouts", 'queues."payouts.dead"'),
        ("quorum queue", "queues.payouts"),
        ("classic queue", 'queues."refunds.receipts"'),
    ]


# (id, toml, queues, exchanges as (name, type, durable, args), bindings as (ex, q, key, args),
#  referenced exchanges)
EXPANSIONS = [
    (
        "classic-plain",
        "[queues.q]\n",
        [("q", True, CLASSIC)],
        [],
        [],
        [],
    ),
    (
        "classic-non-durable",
        "[queues.q]\ndurable = false\n",
        [("q", False, CLASSIC)],
        [],
        [],
        [],
    ),
    (
        "classic-max-attempts-has-no-server-argument",
        "[queues.q]\nmax_attempts = 5\n",
        [("q", True, CLASSIC)],
        [],
        [],
        [],
    ),
    (
        "classic-unlisted-dead-letter",
        '[queues.q]\nmax_attempts = 5\ndead_letter = "q.dead"\n',
        [("q.dead", True, CLASSIC), ("q", True, CLASSIC)],
        [],
        [],
        [],
    ),
    (
        "classic-own-dlx",
        '[queues.q]\ndead_letter_exchange = "dlx"\n',
        [("q", True, {"x-dead-letter-exchange": "dlx", "x-queue-type": "classic"})],
        [],
        [],
        ["dlx"],
    ),
    (
        "classic-default-exchange-dlx-with-its-routing-key",
        '[queues.q]\ndead_letter_exchange = ""\n'
        'arguments = { x-dead-letter-routing-key = "q.kept" }\n',
        [
            (
                "q",
                True,
                {
                    "x-dead-letter-routing-key": "q.kept",
                    "x-queue-type": "classic",
                    "x-dead-letter-exchange": "",
                },
            )
        ],
        [],
        [],
        [],
    ),
    (
        "classic-rejected",
        '[queues.q]\nrejected = "q.rejected"\n',
        [
            ("q.rejected", True, CLASSIC),
            (
                "q",
                True,
                {
                    "x-queue-type": "classic",
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q.rejected",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "classic-rejected-beside-rr-dead-letters",
        '[queues.q]\nmax_attempts = 3\ndead_letter = "q.dead"\nrejected = "q.rejected"\n'
        'delay = "dlx-ttl"\n',
        [
            ("q.rejected", True, CLASSIC),
            ("q.dead", True, CLASSIC),
            (
                "q",
                True,
                {
                    "x-queue-type": "classic",
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q.rejected",
                },
            ),
            (
                "q.retry",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q",
                    "x-queue-type": "classic",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "classic-rejected-into-its-dead-letter-queue",
        '[queues.q]\nmax_attempts = 3\ndead_letter = "q.dead"\nrejected = "q.dead"\n',
        [
            ("q.dead", True, CLASSIC),
            (
                "q",
                True,
                {
                    "x-queue-type": "classic",
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q.dead",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "quorum-rejected-is-its-dead-letter-route",
        '[queues.q]\ntype = "quorum"\nmax_attempts = 3\ndead_letter = "q.dead"\n'
        'rejected = "q.dead"\n',
        [
            ("q.dead", True, CLASSIC),
            (
                "q",
                True,
                {
                    "x-queue-type": "quorum",
                    "x-delivery-limit": 2,
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q.dead",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "quorum-rejected-without-dead-letter",
        '[queues.q]\ntype = "quorum"\ndelivery_limit = 4\nrejected = "q.parked"\n',
        [
            ("q.parked", True, CLASSIC),
            (
                "q",
                True,
                {
                    "x-queue-type": "quorum",
                    "x-delivery-limit": 4,
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q.parked",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "classic-raw-arguments",
        "[queues.q]\n"
        'arguments = { x-message-ttl = 60000, x-max-length = 10, x-overflow = "drop-head" }\n',
        [
            (
                "q",
                True,
                {
                    "x-message-ttl": 60000,
                    "x-max-length": 10,
                    "x-overflow": "drop-head",
                    "x-queue-type": "classic",
                },
            )
        ],
        [],
        [],
        [],
    ),
    (
        "quorum-plain",
        '[queues.q]\ntype = "quorum"\n',
        [("q", True, {"x-queue-type": "quorum"})],
        [],
        [],
        [],
    ),
    (
        "quorum-max-attempts-1",
        '[queues.q]\ntype = "quorum"\nmax_attempts = 1\ndead_letter = "d"\n',
        [
            ("d", True, CLASSIC),
            (
                "q",
                True,
                {
                    "x-queue-type": "quorum",
                    "x-delivery-limit": 0,
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "d",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "quorum-own-dlx-with-the-pair",
        '[queues.q]\ntype = "quorum"\nmax_attempts = 3\ndead_letter = "d"\n'
        'dead_letter_exchange = "dlx"\n',
        [
            ("d", True, CLASSIC),
            (
                "q",
                True,
                {
                    "x-queue-type": "quorum",
                    "x-delivery-limit": 2,
                    "x-dead-letter-exchange": "dlx",
                    "x-dead-letter-routing-key": "d",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish",
                },
            ),
        ],
        [],
        [],
        ["dlx"],
    ),
    (
        "quorum-raw-delivery-limit-with-dlx",
        '[queues.q]\ntype = "quorum"\ndelivery_limit = 7\ndead_letter_exchange = "dlx"\n',
        [
            (
                "q",
                True,
                {
                    "x-queue-type": "quorum",
                    "x-delivery-limit": 7,
                    "x-dead-letter-exchange": "dlx",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish",
                },
            )
        ],
        [],
        [],
        ["dlx"],
    ),
    (
        "quorum-agreeing-delivery-limit",
        '[queues.q]\ntype = "quorum"\nmax_attempts = 5\ndelivery_limit = 4\ndead_letter = "d"\n',
        [
            ("d", True, CLASSIC),
            (
                "q",
                True,
                {
                    "x-queue-type": "quorum",
                    "x-delivery-limit": 4,
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "d",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "quorum-raw-arguments-kept",
        '[queues.q]\ntype = "quorum"\nmax_attempts = 2\ndead_letter = "d"\n'
        'arguments = { x-max-length = 100, x-overflow = "reject-publish" }\n',
        [
            ("d", True, CLASSIC),
            (
                "q",
                True,
                {
                    "x-max-length": 100,
                    "x-overflow": "reject-publish",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-queue-type": "quorum",
                    "x-delivery-limit": 1,
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "d",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "dlx-ttl-default-wait-queue",
        '[queues.q]\ndelay = "dlx-ttl"\n',
        [
            ("q", True, CLASSIC),
            (
                "q.retry",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q",
                    "x-queue-type": "classic",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "dlx-ttl-named-wait-queue",
        '[queues.q]\ndelay = "dlx-ttl"\nwait_queue = "q.wait"\n',
        [
            ("q", True, CLASSIC),
            (
                "q.wait",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q",
                    "x-queue-type": "classic",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "dlx-ttl-on-a-non-durable-queue-still-durable-wait-queue",
        '[queues.q]\ndurable = false\ndelay = "dlx-ttl"\n',
        [
            ("q", False, CLASSIC),
            (
                "q.retry",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q",
                    "x-queue-type": "classic",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "delay-tiers-inferred-dlx-ttl",
        '[queues.q]\ndelay_tiers = ["1s", "30s", "5m"]\n',
        [
            ("q", True, CLASSIC),
            (
                "q.retry.1s",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q",
                    "x-message-ttl": 1000,
                    "x-queue-type": "classic",
                },
            ),
            (
                "q.retry.30s",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q",
                    "x-message-ttl": 30000,
                    "x-queue-type": "classic",
                },
            ),
            (
                "q.retry.5m",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q",
                    "x-message-ttl": 300000,
                    "x-queue-type": "classic",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "delay-tiers-odd-spellings",
        '[queues."a.b"]\ndelay = "dlx-ttl"\ndelay_tiers = ["1500ms", "90s", "120m"]\n',
        [
            ("a.b", True, CLASSIC),
            (
                "a.b.retry.1500ms",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "a.b",
                    "x-message-ttl": 1500,
                    "x-queue-type": "classic",
                },
            ),
            (
                "a.b.retry.90s",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "a.b",
                    "x-message-ttl": 90000,
                    "x-queue-type": "classic",
                },
            ),
            (
                "a.b.retry.2h",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "a.b",
                    "x-message-ttl": 7200000,
                    "x-queue-type": "classic",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "classic-with-quorum-wait-queues",
        '[queues.q]\nmax_attempts = 3\ndead_letter = "q.dead"\ndelay_tiers = ["1s", "1m"]\n'
        'wait_queue_type = "quorum"\n',
        [
            ("q.dead", True, CLASSIC),
            ("q", True, CLASSIC),
            *(
                (
                    f"q.retry.{tier}",
                    True,
                    {
                        "x-dead-letter-exchange": "",
                        "x-dead-letter-routing-key": "q",
                        "x-message-ttl": ttl_ms,
                        "x-queue-type": "quorum",
                        "x-dead-letter-strategy": "at-least-once",
                        "x-overflow": "reject-publish",
                    },
                )
                for tier, ttl_ms in (("1s", 1000), ("1m", 60_000))
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "classic-with-its-classic-wait-queue-said",
        '[queues.q]\ndelay = "dlx-ttl"\nwait_queue_type = "classic"\n',
        [
            ("q", True, CLASSIC),
            (
                "q.retry",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q",
                    "x-queue-type": "classic",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "quorum-dlx-ttl-gets-a-quorum-wait-queue",
        '[queues.q]\ntype = "quorum"\nmax_attempts = 3\ndead_letter = "q.dead"\n'
        'delay = "dlx-ttl"\n',
        [
            ("q.dead", True, CLASSIC),
            (
                "q",
                True,
                {
                    "x-queue-type": "quorum",
                    "x-delivery-limit": 2,
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q.dead",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish",
                },
            ),
            (
                "q.retry",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q",
                    "x-queue-type": "quorum",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "quorum-delay-tiers-get-quorum-wait-queues",
        '[queues.q]\ntype = "quorum"\ndelay = "dlx-ttl"\ndelay_tiers = ["1s", "5m"]\n',
        [
            ("q", True, {"x-queue-type": "quorum"}),
            (
                "q.retry.1s",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q",
                    "x-message-ttl": 1000,
                    "x-queue-type": "quorum",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish",
                },
            ),
            (
                "q.retry.5m",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "q",
                    "x-message-ttl": 300000,
                    "x-queue-type": "quorum",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "plugin-dme",
        '[queues.q]\ndelay = "plugin-dme"\n',
        [("q", True, CLASSIC)],
        [("q.delay", "x-delayed-message", True, {"x-delayed-type": "direct"})],
        [("q.delay", "q", "q", {})],
        [],
    ),
    (
        "shared-unlisted-dead-letter-declared-once",
        '[queues.a]\nmax_attempts = 3\ndead_letter = "shared"\n\n'
        '[queues.b]\ntype = "quorum"\nmax_attempts = 2\ndead_letter = "shared"\n',
        [
            ("shared", True, CLASSIC),
            ("a", True, CLASSIC),
            (
                "b",
                True,
                {
                    "x-queue-type": "quorum",
                    "x-delivery-limit": 1,
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "shared",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish",
                },
            ),
        ],
        [],
        [],
        [],
    ),
    (
        "listed-dead-letter-not-declared-twice",
        '[queues.a]\nmax_attempts = 3\ndead_letter = "d"\n'
        '[queues.b]\nmax_attempts = 1\ndead_letter = "d"\n'
        "[queues.d]\ndurable = false\n",
        [("d", False, CLASSIC), ("a", True, CLASSIC), ("b", True, CLASSIC)],
        [],
        [],
        [],
    ),
    (
        "dead-letter-chain-declared-last-link-first",
        '[queues.a]\nmax_attempts = 2\ndead_letter = "b"\n'
        '[queues.b]\ntype = "quorum"\nmax_attempts = 2\ndead_letter = "c"\n'
        "[queues.c]\n",
        [
            ("c", True, CLASSIC),
            (
                "b",
                True,
                {
                    "x-queue-type": "quorum",
                    "x-delivery-limit": 1,
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "c",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish",
                },
            ),
            ("a", True, CLASSIC),
        ],
        [],
        [],
        [],
    ),
    (
        "bindings-declared-and-referenced",
        '[exchanges.events]\ntype = "topic"\ndurable = false\n\n'
        '[queues.a]\nbindings = [\n  { exchange = "events", routing_key = "a.#" },\n'
        '  { exchange = "amq.topic", routing_key = "k" },\n'
        '  { exchange = "legacy", arguments = { x-match = "all" } },\n'
        '  { exchange = "amq.topic", routing_key = "k2" },\n]\n',
        [("a", True, CLASSIC)],
        [("events", "topic", False, {})],
        [
            ("events", "a", "a.#", {}),
            ("amq.topic", "a", "k", {}),
            ("legacy", "a", "", {"x-match": "all"}),
            ("amq.topic", "a", "k2", {}),
        ],
        ["amq.topic", "legacy"],
    ),
    (
        "declared-dlx-is-not-referenced",
        '[exchanges.dlx]\ntype = "fanout"\n[queues.q]\ndead_letter_exchange = "dlx"\n',
        [("q", True, {"x-dead-letter-exchange": "dlx", "x-queue-type": "classic"})],
        [("dlx", "fanout", True, {})],
        [],
        [],
    ),
    (
        "file-exchange-arguments",
        '[exchanges.later]\ntype = "x-delayed-message"\narguments = { x-delayed-type = "topic" }\n',
        [],
        [("later", "x-delayed-message", True, {"x-delayed-type": "topic"})],
        [],
        [],
    ),
    (
        "order-exchanges-then-queues-then-bindings",
        '[queues.first]\ndelay = "plugin-dme"\n'
        'bindings = [{ exchange = "events", routing_key = "first" }]\n'
        '[queues.second]\ndelay = "dlx-ttl"\nmax_attempts = 9\ndead_letter = "second.dead"\n'
        'dead_letter_exchange = "other.dlx"\n'
        '[queues.third]\ndelay = "plugin-dme"\n'
        '[exchanges.events]\ntype = "topic"\n',
        [
            ("first", True, CLASSIC),
            ("second.dead", True, CLASSIC),
            ("second", True, {"x-dead-letter-exchange": "other.dlx", "x-queue-type": "classic"}),
            (
                "second.retry",
                True,
                {
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": "second",
                    "x-queue-type": "classic",
                },
            ),
            ("third", True, CLASSIC),
        ],
        [
            ("events", "topic", True, {}),
            ("first.delay", "x-delayed-message", True, {"x-delayed-type": "direct"}),
            ("third.delay", "x-delayed-message", True, {"x-delayed-type": "direct"}),
        ],
        [
            ("first.delay", "first", "first", {}),
            ("events", "first", "first", {}),
            ("third.delay", "third", "third", {}),
        ],
        ["other.dlx"],
    ),
]


@pytest.mark.parametrize(
    ("text", "queues", "exchanges", "bindings", "referenced"),
    [pytest.param(*case[1:], id=case[0]) for case in EXPANSIONS],
)
def test_expansion(
    text: str,
    queues: list[QueueRow],
    exchanges: list[tuple[str, str, bool, dict[str, Any]]],
    bindings: list[tuple[str, str, str, dict[str, Any]]],
    referenced: list[str],
) -> None:
    desired = expand(load_text(text))
    assert queues_of(desired) == queues
    for (_, _, actual), (_, _, expected) in zip(queues_of(desired), queues, strict=True):
        assert_same_types(actual, expected)
    assert [
        (exchange.name, exchange.type, exchange.durable, dict(exchange.arguments))
        for exchange in desired.exchanges
    ] == exchanges
    assert [
        (binding.exchange, binding.queue, binding.routing_key, dict(binding.arguments))
        for binding in desired.bindings
    ] == bindings
    assert list(desired.referenced_exchanges) == referenced
    assert desired.entities == (*desired.exchanges, *desired.queues, *desired.bindings)


def test_tier_ttls_are_ints() -> None:
    desired = expand(load_text('[queues.q]\ndelay_tiers = ["1s", "30s", "5m"]\n'))
    ttls = [queue.arguments["x-message-ttl"] for queue in desired.queues[1:]]
    assert ttls == [1000, 30000, 300000]
    assert all(type(ttl) is int for ttl in ttls)


def test_plugin_dme_entities_in_full() -> None:
    desired = expand(load_text('[queues.q]\ndelay = "plugin-dme"\n'))
    assert desired.exchanges == (
        ExchangeEntity(
            name="q.delay",
            type="x-delayed-message",
            durable=True,
            arguments={"x-delayed-type": "direct"},
            role="delay exchange of q",
            source="queues.q.delay",
        ),
    )
    assert desired.bindings == (
        BindingEntity(
            queue="q",
            exchange="q.delay",
            routing_key="q",
            arguments={},
            role="delay route of q",
            source="queues.q.delay",
        ),
    )
    assert desired.bindings[0].name == "q.delay -> q (q)"
    assert desired.exchanges[0].key == ("exchange", "q.delay")
    assert desired.queues[0].key == ("queue", "q")


def test_delay_tier_roles_and_sources() -> None:
    desired = expand(load_text('[queues.q]\ndelay_tiers = ["1s", "5m"]\n'))
    assert [(queue.name, queue.role, queue.source) for queue in desired.queues] == [
        ("q", "classic queue", "queues.q"),
        ("q.retry.1s", "1s wait queue of q", "queues.q.delay_tiers"),
        ("q.retry.5m", "5m wait queue of q", "queues.q.delay_tiers"),
    ]


def test_shared_dead_letter_role_names_both_queues() -> None:
    desired = expand(
        load_text(
            '[queues.a]\nmax_attempts = 2\ndead_letter = "shared"\n'
            '[queues.b]\nmax_attempts = 3\ndead_letter = "shared"\n'
            '[queues.c]\nmax_attempts = 4\ndead_letter = "listed"\n[queues.listed]\n'
        )
    )
    roles = {queue.name: (queue.role, queue.source) for queue in desired.queues}
    assert roles == {
        "a": ("classic queue", "queues.a"),
        "shared": ("classic queue, dead letters of a, b", "queues.a.dead_letter"),
        "b": ("classic queue", "queues.b"),
        "c": ("classic queue", "queues.c"),
        "listed": ("classic queue, dead letters of c", "queues.listed"),
    }


def test_rejected_queues_say_whose_rejects_they_keep() -> None:
    desired = expand(
        load_text(
            '[queues.a]\nmax_attempts = 2\ndead_letter = "a.dead"\nrejected = "kept"\n'
            '[queues.b]\nrejected = "kept"\n'
            '[queues.c]\nmax_attempts = 2\ndead_letter = "c.dead"\nrejected = "c.dead"\n'
        )
    )
    roles = {queue.name: (queue.role, queue.source) for queue in desired.queues}
    assert roles["kept"] == ("classic queue, rejected messages of a, b", "queues.a.rejected")
    assert roles["c.dead"] == ("classic queue, dead letters of c", "queues.c.dead_letter")
    assert [queue.name for queue in desired.queues].count("kept") == 1


def test_binding_sources_name_the_item() -> None:
    desired = expand(
        load_text(
            '[queues."a.b"]\n[[queues."a.b".bindings]]\nexchange = "x"\n'
            '[[queues."a.b".bindings]]\nexchange = "y"\nrouting_key = "r"\n'
        )
    )
    assert [(binding.name, binding.source, binding.role) for binding in desired.bindings] == [
        ("x -> a.b ()", 'queues."a.b".bindings[0]', "binding"),
        ("y -> a.b (r)", 'queues."a.b".bindings[1]', "binding"),
    ]


def test_expanded_arguments_are_read_only() -> None:
    desired = expand(load_file(EXAMPLE))
    with pytest.raises(TypeError):
        desired.queues[4].arguments["x-delivery-limit"] = 9  # type: ignore[index]


def test_expansion_is_deterministic() -> None:
    topology = load_file(EXAMPLE)
    assert expand(topology) == expand(topology)


def test_expand_of_an_empty_topology() -> None:
    assert expand(Topology()) == Desired()
    assert Desired().entities == ()


@pytest.mark.parametrize(
    ("fields", "arguments"),
    [
        ({}, CLASSIC),
        ({"max_attempts": 3, "dead_letter": "d"}, CLASSIC),
        (
            {"dead_letter_exchange": "dlx"},
            {"x-queue-type": "classic", "x-dead-letter-exchange": "dlx"},
        ),
        (
            {"max_attempts": 4, "dead_letter": "d", "dead_letter_exchange": "dlx"},
            {"x-queue-type": "classic", "x-dead-letter-exchange": "dlx"},
        ),
        ({"type": QueueType.QUORUM}, {"x-queue-type": "quorum"}),
        (
            {"type": QueueType.QUORUM, "max_attempts": 10, "dead_letter": "d"},
            {
                "x-queue-type": "quorum",
                "x-delivery-limit": 9,
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": "d",
                "x-dead-letter-strategy": "at-least-once",
                "x-overflow": "reject-publish",
            },
        ),
        (
            {"type": QueueType.QUORUM, "dead_letter_exchange": "dlx", "delivery_limit": 0},
            {
                "x-queue-type": "quorum",
                "x-delivery-limit": 0,
                "x-dead-letter-exchange": "dlx",
                "x-dead-letter-strategy": "at-least-once",
                "x-overflow": "reject-publish",
            },
        ),
        (
            {"delay": DelayMode.DLX_TTL, "arguments": {"x-max-length": 5}},
            {"x-max-length": 5, "x-queue-type": "classic"},
        ),
    ],
)
def test_queue_arguments(fields: dict[str, Any], arguments: dict[str, Any]) -> None:
    result = queue_arguments(Queue(name="q", **fields))
    assert_same_types(result, arguments)


def test_quorum_dead_letter_with_a_raw_delivery_limit_expands() -> None:
    # docs/reference/topology.md / expand.py's table: "quorum + delivery_limit L -> x-delivery-limit
    # = L (with D or dead_letter_exchange)".
    desired = expand(
        load_text('[queues.q]\ntype = "quorum"\ndead_letter = "q.dead"\ndelivery_limit = 3\n')
    )
    assert queues_of(desired) == [
        ("q.dead", True, CLASSIC),
        (
            "q",
            True,
            {
                "x-queue-type": "quorum",
                "x-delivery-limit": 3,
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": "q.dead",
                "x-dead-letter-strategy": "at-least-once",
                "x-overflow": "reject-publish",
            },
        ),
    ]


def test_builtin_dead_letter_exchange_is_referenced() -> None:
    desired = expand(load_text('[queues.q]\ndead_letter_exchange = "amq.direct"\n'))
    assert queues_of(desired) == [
        ("q", True, {"x-dead-letter-exchange": "amq.direct", "x-queue-type": "classic"})
    ]
    assert desired.referenced_exchanges == ("amq.direct",)


@pytest.mark.parametrize(
    ("queue", "ttl_ms", "arguments"),
    [
        (
            "refunds",
            None,
            {
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": "refunds",
                "x-queue-type": "classic",
            },
        ),
        (
            "refunds",
            30_000,
            {
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": "refunds",
                "x-message-ttl": 30_000,
                "x-queue-type": "classic",
            },
        ),
        (
            "q",
            0,
            {
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": "q",
                "x-message-ttl": 0,
                "x-queue-type": "classic",
            },
        ),
    ],
)
def test_wait_queue_arguments(queue: str, ttl_ms: int | None, arguments: dict[str, Any]) -> None:
    assert_same_types(wait_queue_arguments(queue, ttl_ms), arguments)


@pytest.mark.parametrize(
    ("ttl_ms", "arguments"),
    [
        pytest.param(
            None,
            {
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": "payouts",
                "x-queue-type": "quorum",
                "x-dead-letter-strategy": "at-least-once",
                "x-overflow": "reject-publish",
            },
            id="quorum-without-ttl",
        ),
        pytest.param(
            30_000,
            {
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": "payouts",
                "x-message-ttl": 30_000,
                "x-queue-type": "quorum",
                "x-dead-letter-strategy": "at-least-once",
                "x-overflow": "reject-publish",
            },
            id="quorum-with-ttl",
        ),
    ],
)
def test_quorum_wait_queue_arguments(ttl_ms: int | None, arguments: dict[str, Any]) -> None:
    assert_same_types(wait_queue_arguments("payouts", ttl_ms, quorum=True), arguments)
    # quorum=False (the default): a classic wait queue, which dead-letters at most once
    plain = wait_queue_arguments("payouts", ttl_ms)
    assert plain == wait_queue_arguments("payouts", ttl_ms, quorum=False)
    assert plain["x-queue-type"] == "classic"
    assert not {"x-dead-letter-strategy", "x-overflow"} & plain.keys()


def _dead_letters_to(name: str, target: str) -> QueueEntity:
    return QueueEntity(
        name=name,
        arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": target},
    )


@pytest.mark.parametrize(
    ("queues", "routes", "order"),
    [
        pytest.param(
            [_dead_letters_to("a", "b"), _dead_letters_to("b", "c"), QueueEntity(name="c")],
            None,
            ["c", "b", "a"],
            id="chain-by-arguments",
        ),
        pytest.param(
            [QueueEntity(name="a"), QueueEntity(name="b"), QueueEntity(name="c")],
            {"a": "b", "b": "c"},
            ["c", "b", "a"],
            id="chain-by-routes",
        ),
        pytest.param(
            [_dead_letters_to("a", "b"), QueueEntity(name="b"), QueueEntity(name="c")],
            {"b": "c"},
            ["c", "b", "a"],
            id="chain-by-arguments-and-routes",
        ),
        pytest.param(
            [QueueEntity(name="lone"), _dead_letters_to("a", "b"), QueueEntity(name="b")],
            None,
            ["lone", "b", "a"],
            id="queue-without-routes-keeps-its-place",
        ),
        pytest.param(
            [_dead_letters_to("a", "b"), QueueEntity(name="lone"), QueueEntity(name="b")],
            None,
            ["b", "a", "lone"],
            id="queue-without-routes-stays-after-an-earlier-queue",
        ),
        pytest.param(
            [QueueEntity(name="x"), QueueEntity(name="y"), QueueEntity(name="z")],
            None,
            ["x", "y", "z"],
            id="no-routes-file-order",
        ),
        pytest.param(
            [_dead_letters_to("a", "elsewhere"), QueueEntity(name="b")],
            {"b": "gone"},
            ["a", "b"],
            id="targets-not-in-the-list-are-ignored",
        ),
        pytest.param(
            [
                QueueEntity(
                    name="a",
                    arguments={"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "b"},
                ),
                QueueEntity(name="b"),
            ],
            None,
            ["a", "b"],
            id="routing-key-through-another-exchange-is-no-route",
        ),
        pytest.param(
            [_dead_letters_to("a", "b"), _dead_letters_to("b", "a")],
            None,
            ["b", "a"],
            id="cycle-cut-where-it-closes",
        ),
        pytest.param(
            [QueueEntity(name="a"), QueueEntity(name="b")],
            {"a": "b", "b": "a"},
            ["b", "a"],
            id="cycle-by-routes",
        ),
        pytest.param(
            [_dead_letters_to("a", "a")],
            None,
            ["a"],
            id="self-loop",
        ),
    ],
)
def test_targets_first(
    queues: list[QueueEntity], routes: dict[str, str] | None, order: list[str]
) -> None:
    before = list(queues)
    result = targets_first(queues, routes)
    assert [queue.name for queue in result] == order
    # each queue exactly once, the same objects; the input list is left as it was
    assert len(result) == len(queues)
    assert {id(queue) for queue in result} == {id(queue) for queue in queues}
    assert queues == before


def test_targets_first_of_nothing() -> None:
    assert targets_first([]) == []


def test_entity_defaults() -> None:
    queue = QueueEntity(name="q")
    assert (queue.durable, dict(queue.arguments), queue.role, queue.source) == (
        True,
        {},
        "queue",
        "",
    )
    exchange = ExchangeEntity(name="e")
    assert (exchange.type, exchange.durable, exchange.role) == ("direct", True, "exchange")
    binding = BindingEntity(queue="q", exchange="e")
    assert binding.name == "e -> q ()"
