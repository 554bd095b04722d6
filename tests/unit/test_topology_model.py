"""Pure tables for model.py (frozen values valid once constructed) and arguments.py."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rabbitctl_retry.errors import ConfigError
from rabbitctl_retry.topology.arguments import QUEUE_ARGUMENTS, check_queue_argument
from rabbitctl_retry.topology.expand import expand
from rabbitctl_retry.topology.model import (
    MAX_NAME_BYTES,
    Binding,
    Broker,
    DeadLetterStrategy,
    DelayMode,
    Exchange,
    PublishMode,
    Queue,
    QueueType,
    Topology,
    check_entity_name,
    frozen_mapping,
)

QUORUM = QueueType.QUORUM
CLASSIC = QueueType.CLASSIC
DLX_TTL = DelayMode.DLX_TTL
DME = DelayMode.PLUGIN_DME
AT_LEAST_ONCE = DeadLetterStrategy.AT_LEAST_ONCE
AT_MOST_ONCE = DeadLetterStrategy.AT_MOST_ONCE


def test_enum_values_are_the_file_spellings() -> None:
    assert [member.value for member in QueueType] == ["classic", "quorum"]
    assert [member.value for member in DelayMode] == ["memory", "dlx-ttl", "plugin-dme", "server"]
    assert [member.value for member in PublishMode] == ["confirm", "fast"]
    assert [member.value for member in DeadLetterStrategy] == ["at-most-once", "at-least-once"]
    assert MAX_NAME_BYTES == 255


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "name",
    [
        "a",
        "a" * 255,
        "é" * 85,  # 170 bytes: the most a name with non-ASCII characters may have
        "€" * 56 + "ab",  # 3 bytes each: 170
        "😀" * 42 + "ab",  # 4 bytes each: 170
        "A-z_0.9:@#,/+ " * 18 + "abc",  # every ASCII name character; 255 bytes
        "amq",
        "amqp.x",
        "AMQ.x",
        "x.amq.y",
    ],
)
def test_check_entity_name_accepts(name: str) -> None:
    check_entity_name(name, "queues.x", "queue")


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "a queue name must not be empty"),
        ("a" * 256, "is 256 bytes long; at most 255 go on the wire"),
        ("é" * 128, "is 256 bytes long; at most 255"),  # 128 characters
        ("😀" * 64, "is 256 bytes long; at most 255"),  # 64 characters
        ("é" * 85 + "a", "holds non-ASCII characters and is 171 bytes long; such a name is at"),
        ("a" * 1000, "is 1000 bytes"),
        ("a\x1bb", "queue name 'a\\x1bb' holds U+001B"),
        ("a\x00", "holds U+0000"),
        ("a\nb", "holds U+000A"),
        ("a\u202eb", "holds U+202E"),
        ("a\x85", "holds U+0085"),
        ("a!", "queue name 'a!' holds '!'; a name may only hold letters, digits, - _ . : @"),
        ("a*", "holds '*'"),
        ("a\x7f", "holds U+007F"),
        ("a\ufeff", "holds U+FEFF"),
        ("amq.x", "queue name 'amq.x' starts with the reserved prefix 'amq.'"),
        ("amq.", "starts with the reserved prefix 'amq.'"),
    ],
)
def test_check_entity_name_refuses(name: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_entity_name(name, "queues.x.dead_letter", "queue")
    assert caught.value.path == "queues.x.dead_letter"
    assert fragment in caught.value.detail
    assert caught.value.exit_code == 78


# --------------------------------------------------------------------------- Queue


@pytest.mark.parametrize(
    ("fields", "path", "fragment"),
    [
        ({"name": ""}, 'queues.""', "must not be empty"),
        ({"name": "amq.q"}, 'queues."amq.q"', "reserved prefix"),
        ({"name": "é" * 128}, f'queues."{"é" * 128}"', "is 256 bytes"),
        ({"name": "a'b"}, 'queues."a\'b"', 'holds "\'"'),
        (
            {"name": "q", "max_attempts": 2**63},
            "queues.q.max_attempts",
            "is outside AMQP's signed 64-bit range",
        ),
        (
            {"name": "q", "max_attempts": -(16**5000)},
            "queues.q.max_attempts",
            "is outside AMQP's signed 64-bit range",
        ),
        ({"name": "q", "max_attempts": 0}, "queues.q.max_attempts", "not 0"),
        ({"name": "q", "max_attempts": -1}, "queues.q.max_attempts", "not -1"),
        ({"name": "q", "dead_letter": "q"}, "queues.q.dead_letter", "names the queue itself"),
        ({"name": "q", "dead_letter": ""}, "queues.q.dead_letter", "must not be empty"),
        ({"name": "q", "dead_letter": "a" * 256}, "queues.q.dead_letter", "256 bytes"),
        (
            {"name": "q", "dead_letter_exchange": "x" * 256},
            "queues.q.dead_letter_exchange",
            "exchange name",
        ),
        (
            {"name": "q", "delay": DLX_TTL, "dead_letter": "q.retry"},
            "queues.q.dead_letter",
            "'q.retry' is this queue's own wait queue",
        ),
        (
            {"name": "q", "wait_queue_type": QUORUM},
            "queues.q.wait_queue_type",
            'only applies to delay = "dlx-ttl"',
        ),
        (
            {"name": "q", "type": QUORUM, "delay": DLX_TTL, "wait_queue_type": CLASSIC},
            "queues.q.wait_queue_type",
            "the wait queues of a quorum queue are quorum queues",
        ),
        (
            {"name": "q", "delay_tiers_ms": (1000,), "delay": DLX_TTL, "dead_letter": "q.retry.1s"},
            "queues.q.dead_letter",
            "'q.retry.1s' is this queue's own wait queue",
        ),
        ({"name": "q", "type": QUORUM, "durable": False}, "queues.q.durable", "always durable"),
        (
            {"name": "q", "type": QUORUM, "max_attempts": 3},
            "queues.q.max_attempts",
            "a quorum queue with max_attempts also needs dead_letter: a delivery limit without "
            "a route throws the spent message away",
        ),
        (
            {"name": "q", "type": QUORUM, "dead_letter": "d"},
            "queues.q.dead_letter",
            "a quorum queue with dead_letter also needs max_attempts",
        ),
        (
            {"name": "q", "type": QUORUM, "max_attempts": 3, "dead_letter_exchange": "dlx"},
            "queues.q.max_attempts",
            "also needs dead_letter",
        ),
        (
            {"name": "q", "dead_letter": "q.dead"},
            "queues.q.dead_letter",
            "dead_letter also needs max_attempts",
        ),
        (
            {"name": "q", "delivery_limit": 3},
            "queues.q.delivery_limit",
            "only quorum queues have a server delivery limit",
        ),
        (
            {
                "name": "q",
                "type": QUORUM,
                "max_attempts": 5,
                "dead_letter": "d",
                "delivery_limit": 5,
            },
            "queues.q.delivery_limit",
            "max_attempts = 5 already sets the server limit to 4; drop delivery_limit or make "
            "them agree",
        ),
        (
            {"name": "q", "type": QUORUM, "delivery_limit": 2},
            "queues.q.delivery_limit",
            "a delivery limit without dead_letter, rejected or dead_letter_exchange",
        ),
        (
            {"name": "q", "type": QUORUM, "delivery_limit": -1, "dead_letter_exchange": "x"},
            "queues.q.delivery_limit",
            "must not be negative, not -1",
        ),
        (
            {"name": "q", "wait_queue": "w"},
            "queues.q.wait_queue",
            'wait_queue only applies to delay = "dlx-ttl" without delay_tiers',
        ),
        (
            {"name": "q", "delay": DME, "wait_queue": "w"},
            "queues.q.wait_queue",
            "wait_queue only applies",
        ),
        (
            {"name": "q", "delay": DLX_TTL, "wait_queue": "q"},
            "queues.q.wait_queue",
            "must not be the queue itself",
        ),
        (
            {"name": "q", "delay": DLX_TTL, "wait_queue": "amq.wait"},
            "queues.q.wait_queue",
            "reserved prefix",
        ),
        (
            {"name": "q", "delay": DLX_TTL, "wait_queue": ""},
            "queues.q.wait_queue",
            "must not be empty",
        ),
        (
            {"name": "q", "delay_tiers_ms": (1000,)},
            "queues.q.delay_tiers",
            'delay_tiers wait in TTL queues: they need delay = "dlx-ttl"',
        ),
        (
            {"name": "q", "delay": DLX_TTL, "delay_tiers_ms": (0, 1000)},
            "queues.q.delay_tiers",
            "every tier must be longer than 0",
        ),
        (
            {"name": "q", "delay": DLX_TTL, "delay_tiers_ms": (-5,)},
            "queues.q.delay_tiers",
            "every tier must be longer than 0",
        ),
        (
            {"name": "q", "delay": DLX_TTL, "delay_tiers_ms": (1000, 1000)},
            "queues.q.delay_tiers",
            "tiers must differ",
        ),
        (
            {"name": "q", "delay": DLX_TTL, "delay_tiers_ms": (30_000, 1000)},
            "queues.q.delay_tiers",
            "list tiers from shortest to longest",
        ),
        (
            {"name": "a" * 250, "delay": DLX_TTL},
            f"queues.{'a' * 250}",
            "derived wait queue name",
        ),
        (
            {"name": "é" * 82, "delay": DLX_TTL},  # 164 + 6 bytes of ".retry" = 170: fine ...
            None,
            None,
        ),
        (
            {"name": "é" * 83, "delay": DLX_TTL},  # ... 166 + 6 = 172: refused
            f'queues."{"é" * 83}"',
            "holds non-ASCII characters and is 172 bytes long",
        ),
        (
            {"name": "a" * 250, "delay": DME},
            f"queues.{'a' * 250}",
            "derived delay exchange name",
        ),
        (
            {"name": "q", "arguments": {"x-message-ttl": "100"}},
            "queues.q.arguments.x-message-ttl",
            "x-message-ttl must be an integer, not a string",
        ),
        (
            {"name": "q", "type": QUORUM, "arguments": {"x-max-priority": 5}},
            "queues.q.arguments.x-max-priority",
            "x-max-priority only applies to classic queues, and this queue is quorum",
        ),
        (
            {"name": "q", "arguments": {"x-dead-letter-strategy": "at-least-once"}},
            "queues.q.arguments.x-dead-letter-strategy",
            "x-dead-letter-strategy is set by the key `dead_letter_strategy`, not in `arguments`",
        ),
        (
            {
                "name": "q",
                "type": QUORUM,
                "max_attempts": 2,
                "dead_letter": "d",
                "arguments": {"x-dead-letter-strategy": "at-most-once"},
            },
            "queues.q.arguments.x-dead-letter-strategy",
            "x-dead-letter-strategy is set by the key `dead_letter_strategy`, not in `arguments`",
        ),
        (
            {"name": "q", "arguments": {"x-dead-letter-exchange": "dlx"}},
            "queues.q.arguments.x-dead-letter-exchange",
            "is set by the key `dead_letter_exchange`, not in `arguments`",
        ),
        (
            {
                "name": "q",
                "type": QUORUM,
                "max_attempts": 2,
                "dead_letter": "d",
                "arguments": {"x-dead-letter-routing-key": "other"},
            },
            "queues.q.arguments.x-dead-letter-routing-key",
            "dead_letter already sets x-dead-letter-routing-key",
        ),
        (
            {"name": "q", "dead_letter_strategy": AT_LEAST_ONCE},
            "queues.q.dead_letter_strategy",
            "only quorum queues choose how they dead-letter",
        ),
        (
            {
                "name": "q",
                "max_attempts": 2,
                "dead_letter": "d",
                "dead_letter_strategy": AT_MOST_ONCE,
            },
            "queues.q.dead_letter_strategy",
            "only quorum queues choose how they dead-letter",
        ),
        (
            {"name": "q", "type": QUORUM, "dead_letter_strategy": AT_MOST_ONCE},
            "queues.q.dead_letter_strategy",
            "the queue dead-letters nothing: set dead_letter or dead_letter_exchange",
        ),
        (
            {
                "name": "q",
                "type": QUORUM,
                "max_attempts": 2,
                "dead_letter": "d",
                "arguments": {"x-overflow": "drop-head"},
            },
            "queues.q.arguments.x-overflow",
            'at-least-once dead-lettering needs "reject-publish"',
        ),
        (
            {
                "name": "q",
                "type": QUORUM,
                "dead_letter_exchange": "dlx",
                "dead_letter_strategy": AT_LEAST_ONCE,
                "arguments": {"x-overflow": "reject-publish-dlx"},
            },
            "queues.q.arguments.x-overflow",
            "x-overflow = 'reject-publish-dlx'",
        ),
        (
            {
                "name": "q",
                "type": QUORUM,
                "max_attempts": 2,
                "dead_letter": "d",
                "dead_letter_strategy": AT_MOST_ONCE,
                "arguments": {"x-overflow": "drop-head"},
            },
            None,
            None,
        ),
        (
            {
                "name": "q",
                "type": QUORUM,
                "max_attempts": 2,
                "dead_letter": "d",
                "arguments": {"x-overflow": "reject-publish"},
            },
            None,
            None,
        ),
        # dead_letter_exchange = "" (docs/reference/topology.md): the default exchange routes by
        # name
        (
            {"name": "q", "dead_letter_exchange": ""},
            "queues.q.dead_letter_exchange",
            'dead_letter_exchange = "" (the default exchange) routes by queue name',
        ),
        (
            {"name": "q", "arguments": {"x-dead-letter-routing-key": "k"}},
            "queues.q.arguments.x-dead-letter-routing-key",
            'x-dead-letter-routing-key needs dead_letter_exchange ("" for the default exchange',
        ),
        # rejected (docs/reference/topology.md, "What other consumers reject"): the queue's one
        # server-side dead-letter route
        (
            {"name": "q", "rejected": "q"},
            "queues.q.rejected",
            "names the queue itself",
        ),
        (
            {"name": "q", "rejected": "q.retry", "delay": DLX_TTL},
            "queues.q.rejected",
            "'q.retry' is this queue's own wait queue",
        ),
        (
            {"name": "q", "rejected": "r", "dead_letter_exchange": "dlx"},
            "queues.q.rejected",
            "a queue has one: drop dead_letter_exchange, or rejected",
        ),
        (
            {"name": "q", "rejected": "r", "arguments": {"x-dead-letter-routing-key": "k"}},
            "queues.q.rejected",
            "drop arguments.x-dead-letter-routing-key, or rejected",
        ),
        (
            {"name": "q", "type": QUORUM, "rejected": "r", "max_attempts": 2, "dead_letter": "d"},
            "queues.q.rejected",
            "a quorum queue has one dead-letter route, its dead_letter 'd'",
        ),
        (
            {"name": "q", "rejected": "a!b"},
            "queues.q.rejected",
            "queue name 'a!b' holds '!'",
        ),
    ],
)
def test_queue_validation(fields: dict[str, Any], path: str | None, fragment: str | None) -> None:
    if path is None:
        Queue(**fields)
        return
    with pytest.raises(ConfigError) as caught:
        Queue(**fields)
    assert caught.value.path == path
    assert fragment is not None
    assert fragment in caught.value.detail
    assert caught.value.exit_code == 78
    assert caught.value.line is None


@pytest.mark.parametrize(
    "fields",
    [
        {"name": "q"},
        {"name": "q", "durable": False},
        {"name": "q", "max_attempts": 1},
        {"name": "q", "max_attempts": 5, "dead_letter": "q.dead"},
        {"name": "q", "type": QUORUM},
        {"name": "q", "type": QUORUM, "max_attempts": 1, "dead_letter": "d"},
        {"name": "q", "type": QUORUM, "max_attempts": 5, "dead_letter": "d", "delivery_limit": 4},
        {"name": "q", "type": QUORUM, "delivery_limit": 0, "dead_letter_exchange": "dlx"},
        {
            "name": "q",
            "type": QUORUM,
            "dead_letter_exchange": "dlx",
            "arguments": {"x-dead-letter-routing-key": "k"},
        },
        {
            "name": "q",
            "arguments": {"x-dead-letter-routing-key": "k"},
            "dead_letter_exchange": "dlx",
            "max_attempts": 2,
            "dead_letter": "d",
        },
        {"name": "q", "delay": DLX_TTL, "wait_queue": "elsewhere"},
        {"name": "q", "delay": DLX_TTL, "delay_tiers_ms": (1, 2, 3)},
        {"name": "q", "delay": DME},
        {"name": "q", "publish": PublishMode.FAST},
        # the default exchange, with the queue that keeps what is dropped
        # (docs/reference/topology.md)
        {
            "name": "q",
            "dead_letter_exchange": "",
            "arguments": {"x-dead-letter-routing-key": "q.rejected"},
        },
        {"name": "q", "rejected": "q.rejected"},
        {"name": "q", "rejected": "q.dead", "max_attempts": 3, "dead_letter": "q.dead"},
        {"name": "q", "rejected": "q.rejected", "max_attempts": 3, "dead_letter": "q.dead"},
        {
            "name": "q",
            "type": QUORUM,
            "rejected": "q.dead",
            "max_attempts": 3,
            "dead_letter": "q.dead",
        },
        {"name": "q", "type": QUORUM, "rejected": "q.parked", "delivery_limit": 4},
    ],
)
def test_queue_accepts(fields: dict[str, Any]) -> None:
    queue = Queue(**fields)
    assert queue.name == "q"


def test_quorum_queue_with_dead_letter_and_a_raw_delivery_limit_is_accepted() -> None:
    # docs/reference/topology.md: delivery_limit is "a raw server limit, used when max_attempts is
    # not set"; with dead_letter it has a route, so nothing is thrown away (expand.py: "quorum +
    # delivery_limit L ... (with D or dead_letter_exchange)").
    queue = Queue(name="q", type=QUORUM, dead_letter="q.dead", delivery_limit=3)
    assert queue.server_delivery_limit == 3


def test_dead_letter_exchange_may_be_a_builtin_amq_exchange() -> None:
    # RabbitMQ refuses to *declare* amq.* exchanges; using amq.direct as a DLX is fine,
    # just as bindings to amq.topic are.
    queue = Queue(name="q", dead_letter_exchange="amq.direct")
    assert queue.dead_letter_exchange == "amq.direct"


@pytest.mark.parametrize(
    ("fields", "effective", "wait_queues", "delay_exchange", "limit"),
    [
        ({}, None, (), None, None),
        ({"max_attempts": 5}, None, (), None, None),
        ({"delay": DLX_TTL}, "q.retry", ("q.retry",), None, None),
        ({"delay": DLX_TTL, "wait_queue": "w"}, "w", ("w",), None, None),
        (
            {"delay": DLX_TTL, "delay_tiers_ms": (1_000, 30_000, 300_000)},
            None,
            ("q.retry.1s", "q.retry.30s", "q.retry.5m"),
            None,
            None,
        ),
        ({"delay": DME}, None, (), "q.delay", None),
        ({"type": QUORUM}, None, (), None, None),
        ({"type": QUORUM, "max_attempts": 5, "dead_letter": "d"}, None, (), None, 4),
        ({"type": QUORUM, "max_attempts": 1, "dead_letter": "d"}, None, (), None, 0),
        (
            {"type": QUORUM, "max_attempts": 3, "dead_letter": "d", "delivery_limit": 2},
            None,
            (),
            None,
            2,
        ),
        ({"type": QUORUM, "delivery_limit": 7, "dead_letter_exchange": "x"}, None, (), None, 7),
    ],
)
def test_queue_derived_properties(
    fields: dict[str, Any],
    effective: str | None,
    wait_queues: tuple[str, ...],
    delay_exchange: str | None,
    limit: int | None,
) -> None:
    queue = Queue(name="q", **fields)
    assert queue.effective_wait_queue == effective
    assert queue.wait_queue_names == wait_queues
    assert queue.delay_exchange == delay_exchange
    assert queue.server_delivery_limit == limit


def test_values_are_frozen() -> None:
    queue = Queue(name="q")
    with pytest.raises(dataclasses.FrozenInstanceError):
        queue.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Topology().queues = ()  # type: ignore[misc]


def test_frozen_mapping() -> None:
    empty = frozen_mapping(None)
    assert dict(empty) == {}
    assert frozen_mapping({}) is empty
    source = {"x-max-length": 1}
    frozen = frozen_mapping(source)
    source["x-max-length"] = 2
    assert dict(frozen) == {"x-max-length": 1}
    with pytest.raises(TypeError):
        frozen["x"] = 1  # type: ignore[index]


# --------------------------------------------------------------------------- Binding, Exchange


@pytest.mark.parametrize(
    ("fields", "path", "fragment"),
    [
        (
            {"exchange": "", "path": "queues.q.bindings[0]"},
            "queues.q.bindings[0].exchange",
            'cannot bind to the default exchange ""',
        ),
        ({"exchange": ""}, None, "cannot bind to the default exchange"),
        (
            {"exchange": "x" * 128, "path": "queues.q.bindings[3]"},
            "queues.q.bindings[3].exchange",
            "is 128 characters long; rr's AMQP client sends at most 127",
        ),
        (
            {"exchange": "x\u200f", "path": "queues.q.bindings[0]"},
            "queues.q.bindings[0].exchange",
            "holds U+200F",
        ),
        (
            {"exchange": "x", "routing_key": "k\x1b", "path": "queues.q.bindings[0]"},
            "queues.q.bindings[0].routing_key",
            "routing key 'k\\x1b' holds the control or format character U+001B",
        ),
        (
            {"exchange": "x", "arguments": {"x-match": "one"}, "path": "queues.q.bindings[1]"},
            "queues.q.bindings[1].arguments.x-match",
            "x-match must be one of all, any, all-with-x, any-with-x",
        ),
    ],
)
def test_binding_refuses(fields: dict[str, Any], path: str | None, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Binding(queue="q", **fields)
    assert caught.value.path == path
    assert fragment in caught.value.detail


@pytest.mark.parametrize("exchange", ["amq.topic", "events", "x" * 127, "é" * 85])
def test_binding_accepts(exchange: str) -> None:
    binding = Binding(queue="q", exchange=exchange)
    assert binding.routing_key == ""
    assert dict(binding.arguments) == {}


@pytest.mark.parametrize(
    ("fields", "path", "fragment"),
    [
        ({"name": ""}, 'exchanges.""', "exchange name must not be empty"),
        ({"name": "amq.direct"}, 'exchanges."amq.direct"', "reserved prefix 'amq.'"),
        ({"name": "é" * 128}, f'exchanges."{"é" * 128}"', "is 256 bytes"),
        ({"name": "e" * 128}, f"exchanges.{'e' * 128}", "is 128 characters"),
        ({"name": "e\u0085"}, 'exchanges."e\\u0085"', "holds U+0085"),
        ({"name": "e", "type": "direkt"}, "exchanges.e.type", "unknown exchange type 'direkt'"),
        ({"name": "e", "type": ""}, "exchanges.e.type", "unknown exchange type ''"),
        (
            {"name": "e", "type": "x-delayed-message"},
            "exchanges.e.arguments.x-delayed-type",
            "needs arguments.x-delayed-type",
        ),
        (
            {"name": "e", "type": "x-delayed-message", "arguments": {"x-delayed-type": "x-lvc"}},
            "exchanges.e.arguments.x-delayed-type",
            "needs arguments.x-delayed-type",
        ),
    ],
)
def test_exchange_refuses(fields: dict[str, Any], path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Exchange(**fields)
    assert caught.value.path == path
    assert fragment in caught.value.detail


@pytest.mark.parametrize(
    ("exchange_type", "arguments"),
    [
        ("direct", {}),
        ("fanout", {}),
        ("topic", {}),
        ("headers", {}),
        ("x-consistent-hash", {}),
        ("x-delayed-message", {"x-delayed-type": "direct"}),
        ("x-delayed-message", {"x-delayed-type": "topic"}),
        ("x-delayed-message", {"x-delayed-type": "headers"}),
    ],
)
def test_exchange_accepts(exchange_type: str, arguments: dict[str, Any]) -> None:
    exchange = Exchange(name="e", type=exchange_type, arguments=arguments)
    assert exchange.durable is True


# --------------------------------------------------------------------------- Broker


@pytest.mark.parametrize(
    ("fields", "path", "fragment"),
    [
        ({"retry_header": ""}, "broker.retry_header", "must not be empty"),
        (
            {"urls": ("http://localhost:15672",)},
            "broker.url",
            "must start with amqp:// or amqps://",
        ),
        ({"urls": ("",)}, "broker.url", "must start with amqp://"),
        ({"urls": ("localhost",)}, "broker.url", "must start with amqp://"),
        ({"urls": ("amqp://a/", "localhost")}, "broker.url[1]", "must start with amqp://"),
        ({"urls": ("amqp://a/\x1b[2J",)}, "broker.url", "must not hold control"),
        (
            {"management_url": "amqp://localhost:5672/"},
            "broker.management_url",
            "must start with http:// or https://",
        ),
        (
            {"management_url": "http://a b/"},
            "broker.management_url",
            "holds a space or a control character",
        ),
        ({"management_url": "http:///api"}, "broker.management_url", "names no host"),
    ],
)
def test_broker_refuses(fields: dict[str, Any], path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Broker(**fields)
    assert caught.value.path == path
    assert fragment in caught.value.detail


@pytest.mark.parametrize(
    "urls",
    [
        (),
        ("amqp://guest:guest@localhost:5672/",),
        ("amqps://rabbit.example:5671/vhost",),
        ("amqp://127.0.0.1:5681/", "amqp://127.0.0.1:5682/", "amqp://127.0.0.1:5683/"),
    ],
)
def test_broker_accepts(urls: tuple[str, ...]) -> None:
    broker = Broker(urls=urls)
    assert broker.urls == urls
    assert broker.retry_header == "x-ruststream-retry-count"


# --------------------------------------------------------------------------- Topology


# Fields, not values: a Queue that cannot be built must fail its own case, not the collection.
@pytest.mark.parametrize(
    ("queues", "exchanges", "path", "fragment"),
    [
        (
            [{"name": "q", "delay": DLX_TTL}, {"name": "q.retry"}],
            [],
            'queues."q.retry"',
            "'q.retry' is the wait queue of 'q'; rr declares it",
        ),
        (
            [{"name": "q.retry.1s"}, {"name": "q", "delay": DLX_TTL, "delay_tiers_ms": (1000,)}],
            [],
            'queues."q.retry.1s"',
            "'q.retry.1s' is the wait queue of 'q'",
        ),
        (
            [
                {"name": "a", "delay": DLX_TTL, "wait_queue": "w"},
                {"name": "b", "delay": DLX_TTL, "wait_queue": "w"},
            ],
            [],
            "queues.b.wait_queue",
            "'w' is already the wait queue of 'a'; a wait queue sends its messages back to one "
            "queue only",
        ),
        (
            [
                {"name": "a", "delay": DLX_TTL, "delay_tiers_ms": (1000,)},
                {"name": "b", "delay": DLX_TTL, "wait_queue": "a.retry.1s"},
            ],
            [],
            "queues.b.wait_queue",
            "'a.retry.1s' is already the wait queue of 'a'",
        ),
        (
            [
                {"name": "a", "delay": DLX_TTL},
                {"name": "b", "max_attempts": 2, "dead_letter": "a.retry"},
            ],
            [],
            "queues.b.dead_letter",
            "'a.retry' is the wait queue of 'a', not a dead-letter queue",
        ),
        (
            [
                {"name": "b", "type": QUORUM, "max_attempts": 2, "dead_letter": "a.retry"},
                {"name": "a", "delay": DLX_TTL},
            ],
            [],
            "queues.b.dead_letter",
            "'a.retry' is the wait queue of 'a', not a dead-letter queue",
        ),
        (
            [{"name": "q", "delay": DME}],
            [
                {
                    "name": "q.delay",
                    "type": "x-delayed-message",
                    "arguments": {"x-delayed-type": "direct"},
                }
            ],
            'exchanges."q.delay"',
            "'q.delay' is the delay exchange rr declares for 'q'; do not list it under [exchanges]",
        ),
    ],
)
def test_topology_refuses(
    queues: list[dict[str, Any]], exchanges: list[dict[str, Any]], path: str, fragment: str
) -> None:
    queue_values = tuple(Queue(**fields) for fields in queues)
    exchange_values = tuple(Exchange(**fields) for fields in exchanges)
    with pytest.raises(ConfigError) as caught:
        Topology(queues=queue_values, exchanges=exchange_values)
    assert caught.value.path == path
    assert fragment in caught.value.detail
    assert caught.value.exit_code == 78


def test_topology_lookups() -> None:
    refunds = Queue(name="refunds", max_attempts=5, dead_letter="refunds.dead", delay=DLX_TTL)
    orders = Queue(name="orders", delay=DLX_TTL, delay_tiers_ms=(1_000, 60_000))
    payouts = Queue(name="payouts", type=QUORUM, max_attempts=5, dead_letter="payouts.dead")
    topology = Topology(queues=(refunds, orders, payouts))
    assert topology.queue("refunds") is refunds
    assert topology.queue("payouts") is payouts
    assert topology.queue("refunds.retry") is None
    assert topology.queue("refunds.dead") is None
    assert dict(topology.wait_queue_owners) == {
        "refunds.retry": "refunds",
        "orders.retry.1s": "orders",
        "orders.retry.1m": "orders",
    }


def test_two_queues_may_share_a_dead_letter_queue() -> None:
    topology = Topology(
        queues=(
            Queue(name="a", max_attempts=2, dead_letter="shared"),
            Queue(name="b", type=QUORUM, max_attempts=3, dead_letter="shared"),
        )
    )
    assert [queue.dead_letter for queue in topology.queues] == ["shared", "shared"]


# --------------------------------------------------------------------------- arguments.py


@pytest.mark.parametrize(
    ("name", "value", "queue_type", "problem"),
    [
        ("x-message-ttl", 0, "classic", None),
        ("x-message-ttl", 60_000, "quorum", None),
        ("x-message-ttl", -1, "classic", "must not be negative"),
        ("x-message-ttl", "100", "classic", "must be an integer, not a string"),
        ("x-message-ttl", 1.5, "classic", "must be an integer, not a float"),
        ("x-message-ttl", True, "classic", "must be an integer, not a boolean"),
        ("x-expires", 1, "classic", None),
        ("x-expires", 0, "classic", "must be greater than 0"),
        ("x-expires", -3, "quorum", "must not be negative"),
        ("x-max-length", 0, "quorum", None),
        ("x-max-length-bytes", 1 << 40, "classic", None),
        ("x-overflow", "reject-publish-dlx", "classic", None),
        (
            "x-overflow",
            "drop-tail",
            "classic",
            "must be one of 'drop-head', 'reject-publish', 'reject-publish-dlx', not 'drop-tail'",
        ),
        ("x-dead-letter-routing-key", "k", "classic", None),
        ("x-dead-letter-routing-key", 5, "quorum", "must be a string, not an integer"),
        ("x-single-active-consumer", True, "quorum", None),
        ("x-single-active-consumer", 1, "classic", "must be true or false, not an integer"),
        ("x-queue-leader-locator", "balanced", "quorum", None),
        # x-consumer-timeout: what RabbitMQ 4.3.6 takes (an integer of ms, quorum queues only),
        # but not 0 (4.3.6 cancels every consumer at once) nor more than a TTL may be
        ("x-consumer-timeout", 1, "quorum", None),
        ("x-consumer-timeout", 1_800_000, "quorum", None),
        ("x-consumer-timeout", 4_294_967_295, "quorum", None),
        (
            "x-consumer-timeout",
            4_294_967_296,
            "quorum",
            "must be at most 4294967295 ms (about 49.7 days)",
        ),
        ("x-consumer-timeout", 0, "quorum", "must be greater than 0"),
        ("x-consumer-timeout", -1, "quorum", "must not be negative"),
        ("x-consumer-timeout", "2000", "quorum", "must be an integer, not a string"),
        ("x-consumer-timeout", 1.5, "quorum", "must be an integer, not a float"),
        ("x-consumer-timeout", True, "quorum", "must be an integer, not a boolean"),
        (
            "x-consumer-timeout",
            2000,
            "classic",
            "only applies to quorum queues, and this queue is classic: RabbitMQ 4.3 refuses it "
            "on a classic queue (406 invalid arg), and times out no consumer of one",
        ),
        (
            "x-queue-master-locator",
            "min-masters",
            "classic",
            "is a deprecated feature (queue_master_locator) that RabbitMQ 4.3 denies, closing "
            "the connection; drop it (a policy's queue-leader-locator places classic queues "
            "on 4.x)",
        ),
        (
            "x-queue-master-locator",
            "min-masters",
            "quorum",
            "only applies to classic queues, and this queue is quorum",
        ),
        ("x-max-priority", 0, "classic", None),
        ("x-max-priority", 255, "classic", None),
        ("x-max-priority", 256, "classic", "must be at most 255"),
        (
            "x-max-priority",
            10,
            "quorum",
            "only applies to classic queues, and this queue is quorum",
        ),
        ("x-queue-mode", "lazy", "classic", None),
        ("x-queue-version", 2, "classic", None),
        (
            "x-queue-version",
            1,
            "classic",
            "1 is refused by RabbitMQ 4.3, which has no classic queue version 1 (406); use 2, or "
            "drop it",
        ),
        ("x-queue-version", 3, "classic", "must be one of 1, 2, not 3"),
        ("x-queue-version", True, "classic", "must be one of 1, 2, not True"),
        ("x-queue-version", 1.0, "classic", "must be one of 1, 2, not 1.0"),
        ("x-queue-version", "2", "classic", "must be one of 1, 2, not '2'"),
        (
            "x-dead-letter-strategy",
            "at-least-once",
            "quorum",
            "is set by the key `dead_letter_strategy`, not in `arguments`",
        ),
        (
            "x-dead-letter-strategy",
            "at-least-once",
            "classic",
            "is set by the key `dead_letter_strategy`, not in `arguments`",
        ),
        (
            "x-quorum-initial-group-size",
            3,
            "quorum",
            "is set by the key `replicas`, not in `arguments`",
        ),
        ("x-delivery-limit", 4, "quorum", "is set by the key `delivery_limit`, not in `arguments`"),
        (
            "x-delivery-limit",
            4,
            "classic",
            "is set by the key `delivery_limit`, not in `arguments`",
        ),
        ("x-queue-type", "quorum", "classic", "is set by the key `type`, not in `arguments`"),
        (
            "x-dead-letter-exchange",
            "dlx",
            "classic",
            "is set by the key `dead_letter_exchange`, not in `arguments`",
        ),
        ("x-message-tll", 5, "classic", "is not an argument RabbitMQ knows"),
        ("message-ttl", 5, "classic", "is not an argument RabbitMQ knows"),
    ],
)
def test_check_queue_argument(
    name: str, value: object, queue_type: str, problem: str | None
) -> None:
    assert check_queue_argument(name, value, queue_type) == problem


def test_every_known_argument_has_a_rule_for_a_queue_type() -> None:
    for name, rule in QUEUE_ARGUMENTS.items():
        assert name.startswith("x-")
        assert rule.queue_types <= {"classic", "quorum"}
        assert rule.queue_types


@pytest.mark.parametrize(
    ("fields", "effective"),
    [
        ({"name": "q"}, None),
        ({"name": "q", "max_attempts": 2, "dead_letter": "d"}, None),
        ({"name": "q", "dead_letter_exchange": "dlx"}, None),
        ({"name": "q", "type": QUORUM}, None),
        ({"name": "q", "type": QUORUM, "max_attempts": 2, "dead_letter": "d"}, AT_LEAST_ONCE),
        ({"name": "q", "type": QUORUM, "dead_letter_exchange": "dlx"}, AT_LEAST_ONCE),
        (
            {
                "name": "q",
                "type": QUORUM,
                "max_attempts": 2,
                "dead_letter": "d",
                "dead_letter_strategy": AT_LEAST_ONCE,
            },
            AT_LEAST_ONCE,
        ),
        (
            {
                "name": "q",
                "type": QUORUM,
                "dead_letter_exchange": "dlx",
                "dead_letter_strategy": AT_MOST_ONCE,
            },
            AT_MOST_ONCE,
        ),
    ],
)
def test_effective_dead_letter_strategy(
    fields: dict[str, Any], effective: DeadLetterStrategy | None
) -> None:
    queue = Queue(**fields)
    assert queue.dead_letter_strategy is fields.get("dead_letter_strategy")
    assert queue.effective_dead_letter_strategy is effective


def test_replicas_become_the_initial_group_size_of_the_queue_and_its_wait_queues() -> None:
    queue = Queue(
        name="payouts",
        type=QueueType.QUORUM,
        max_attempts=3,
        dead_letter="payouts.dead",
        delay=DelayMode.DLX_TTL,
        replicas=3,
    )
    desired = expand(Topology(queues=(queue,)))
    groups = {q.name: q.arguments.get("x-quorum-initial-group-size") for q in desired.queues}
    assert groups == {"payouts": 3, "payouts.retry": 3, "payouts.dead": None}


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"replicas": 0, "type": QueueType.QUORUM}, "must be at least 1"),
        ({"replicas": -2, "type": QueueType.QUORUM}, "must be at least 1"),
        ({"replicas": 3}, "only quorum queues are replicated"),
    ],
)
def test_replicas_refused(fields: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Queue(name="q", **fields)
    assert caught.value.path == "queues.q.replicas"
    assert fragment in caught.value.detail
