"""Pure tables for load.py: TOML -> Topology, and errors naming key path, line and exit code."""

from __future__ import annotations

import re
from pathlib import Path
from types import MappingProxyType

import pytest

from rabbitctl_retry.errors import ConfigError, ExitCode, exit_code_for
from rabbitctl_retry.topology.expand import expand, queue_arguments
from rabbitctl_retry.topology.load import load_file, load_text, parse_document
from rabbitctl_retry.topology.model import (
    Binding,
    Broker,
    DeadLetterStrategy,
    DelayMode,
    Exchange,
    PublishMode,
    Queue,
    QueueType,
    Topology,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "refunds" / "topology.toml"


def load_error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_text(text)
    return caught.value


# --------------------------------------------------------------------------- what loads


def test_the_guides_file_loads_into_five_queues() -> None:
    topology = load_file(EXAMPLE)
    assert topology == Topology(
        broker=Broker(),
        queues=(
            Queue(
                name="refunds",
                type=QueueType.CLASSIC,
                max_attempts=5,
                dead_letter="refunds.dead",
                delay=DelayMode.DLX_TTL,
            ),
            Queue(name="refunds.dead"),
            Queue(
                name="payouts", type=QueueType.QUORUM, max_attempts=5, dead_letter="payouts.dead"
            ),
            Queue(name="payouts.dead"),
            Queue(name="refunds.receipts"),
        ),
        exchanges=(),
    )


def test_an_empty_file_is_an_empty_topology() -> None:
    topology = load_text("")
    assert topology == Topology()
    assert topology.broker.urls == ()
    assert topology.broker.retry_header == "x-ruststream-retry-count"


def test_a_bare_queue_takes_every_default() -> None:
    (queue,) = load_text("[queues.q]\n").queues
    assert queue.name == "q"
    assert queue.type is QueueType.CLASSIC
    assert queue.durable is True
    assert queue.max_attempts is None
    assert queue.dead_letter is None
    assert queue.dead_letter_exchange is None
    assert queue.delivery_limit is None
    assert queue.delay is DelayMode.MEMORY
    assert queue.wait_queue is None
    assert queue.delay_tiers_ms == ()
    assert queue.publish is PublishMode.CONFIRM
    assert queue.dead_letter_strategy is None
    assert queue.effective_dead_letter_strategy is None
    assert dict(queue.arguments) == {}
    assert queue.bindings == ()


def test_every_queue_key_is_read() -> None:
    text = """\
[broker]
url = "amqps://user:secret@rabbit.example:5671/prod"
retry_header = "x-retry"

[queues.orders]
type = "classic"
durable = false
max_attempts = 3
dead_letter = "orders.dead"
dead_letter_exchange = "orders.dlx"
delay = "dlx-ttl"
wait_queue = "orders.wait"
publish = "fast"
arguments = { x-max-length = 1000, x-overflow = "reject-publish", x-single-active-consumer = true }

[[queues.orders.bindings]]
exchange = "events"
routing_key = "order.*"

[[queues.orders.bindings]]
exchange = "headers.ex"
arguments = { x-match = "any", kind = "order" }

[exchanges.events]
type = "topic"
durable = false

[exchanges."headers.ex"]
type = "headers"
"""
    topology = load_text(text)
    assert topology.broker == Broker(
        urls=("amqps://user:secret@rabbit.example:5671/prod",), retry_header="x-retry"
    )
    (queue,) = topology.queues
    assert queue == Queue(
        name="orders",
        type=QueueType.CLASSIC,
        durable=False,
        max_attempts=3,
        dead_letter="orders.dead",
        dead_letter_exchange="orders.dlx",
        delay=DelayMode.DLX_TTL,
        wait_queue="orders.wait",
        publish=PublishMode.FAST,
        arguments={
            "x-max-length": 1000,
            "x-overflow": "reject-publish",
            "x-single-active-consumer": True,
        },
        bindings=(
            Binding(
                queue="orders",
                exchange="events",
                routing_key="order.*",
                path="queues.orders.bindings[0]",
            ),
            Binding(
                queue="orders",
                exchange="headers.ex",
                routing_key="",
                arguments={"x-match": "any", "kind": "order"},
                path="queues.orders.bindings[1]",
            ),
        ),
    )
    assert type(queue.arguments["x-max-length"]) is int
    assert queue.arguments["x-single-active-consumer"] is True
    assert topology.exchanges == (
        Exchange(name="events", type="topic", durable=False),
        Exchange(name="headers.ex", type="headers", durable=True),
    )


def test_loaded_arguments_are_read_only() -> None:
    (queue,) = load_text("[queues.q]\narguments = { x-max-length = 1 }\n").queues
    assert isinstance(queue.arguments, MappingProxyType)
    with pytest.raises(TypeError):
        queue.arguments["x-max-length"] = 2  # type: ignore[index]


@pytest.mark.parametrize(
    ("text", "delay", "tiers"),
    [
        ("[queues.q]\n", DelayMode.MEMORY, ()),
        ('[queues.q]\ndelay = "memory"\n', DelayMode.MEMORY, ()),
        ('[queues.q]\ndelay = "dlx-ttl"\n', DelayMode.DLX_TTL, ()),
        ('[queues.q]\ndelay = "plugin-dme"\n', DelayMode.PLUGIN_DME, ()),
        # tiers without delay: dlx-ttl is inferred
        (
            '[queues.q]\ndelay_tiers = ["1s", "30s", "5m"]\n',
            DelayMode.DLX_TTL,
            (1000, 30000, 300000),
        ),
        (
            '[queues.q]\ndelay = "dlx-ttl"\ndelay_tiers = ["1500ms", "2h", "1d"]\n',
            DelayMode.DLX_TTL,
            (1_500, 7_200_000, 86_400_000),
        ),
    ],
)
def test_delay_and_tiers(text: str, delay: DelayMode, tiers: tuple[int, ...]) -> None:
    (queue,) = load_text(text).queues
    assert queue.delay is delay
    assert queue.delay_tiers_ms == tiers


def test_queue_order_is_file_order() -> None:
    text = '[queues.zeta]\n[queues.alpha]\n[queues."m.id"]\n'
    assert [queue.name for queue in load_text(text).queues] == ["zeta", "alpha", "m.id"]


def test_parse_document_takes_a_parsed_mapping() -> None:
    topology = parse_document({"queues": {"q": {"type": "quorum"}}})
    assert topology.queues == (Queue(name="q", type=QueueType.QUORUM),)


def test_parse_document_errors_carry_no_line() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_document({"queues": {"q": {"max_attemps": 1}}})
    assert caught.value.path == "queues.q.max_attemps"
    assert caught.value.line is None
    assert caught.value.source is None


# --------------------------------------------------------------------------- refusals


# (id, text, path, line, fragment of the detail)
REFUSALS = [
    # unknown keys at every level, with "did you mean"
    (
        "unknown-top",
        "[brokr]\nurl = 'amqp://x/'\n",
        "brokr",
        1,
        "unknown key 'brokr' (did you mean 'broker'?); known keys: broker, queues, exchanges",
    ),
    (
        "unknown-broker",
        "[broker]\nretry_headr = 'x'\n",
        "broker.retry_headr",
        2,
        "unknown key 'retry_headr' (did you mean 'retry_header'?)",
    ),
    (
        "unknown-queue",
        '# payouts\n\n[queues.payouts]\ntype = "quorum"\nmax_attemps = 5\n',
        "queues.payouts.max_attemps",
        5,
        "unknown key 'max_attemps' (did you mean 'max_attempts'?)",
    ),
    (
        "unknown-binding-inline",
        '[queues.x]\nbindings = [{ exchange = "e", routing_ky = "k" }]\n',
        "queues.x.bindings[0].routing_ky",
        2,
        "unknown key 'routing_ky' (did you mean 'routing_key'?); known keys: exchange, "
        "routing_key, arguments",
    ),
    (
        "unknown-binding-array-of-tables",
        '[queues.x]\n\n[[queues.x.bindings]]\nexchange = "e"\n\n[[queues.x.bindings]]\n'
        'exhange = "f"\n',
        "queues.x.bindings[1].exhange",
        7,
        "unknown key 'exhange' (did you mean 'exchange'?)",
    ),
    (
        "unknown-exchange",
        '[exchanges.events]\ntype = "topic"\nduable = true\n',
        "exchanges.events.duable",
        3,
        "unknown key 'duable' (did you mean 'durable'?); known keys: type, durable, arguments",
    ),
    (
        "unknown-queue-no-suggestion",
        "[queues.q]\nzzz = 1\n",
        "queues.q.zzz",
        2,
        "unknown key 'zzz'; known keys: type, durable, max_attempts",
    ),
    # enums, with "did you mean"
    (
        "type-quorom",
        '[queues.payouts]\ntype = "quorom"\n',
        "queues.payouts.type",
        2,
        "must be one of 'classic', 'quorum', not 'quorom' (did you mean 'quorum'?)",
    ),
    (
        "delay-underscore",
        '[queues.q]\ndelay = "dlx_ttl"\n',
        "queues.q.delay",
        2,
        "not 'dlx_ttl' (did you mean 'dlx-ttl'?)",
    ),
    (
        "publish-typo",
        '[queues.q]\npublish = "confrim"\n',
        "queues.q.publish",
        2,
        "must be one of 'confirm', 'fast', not 'confrim' (did you mean 'confirm'?)",
    ),
    # wrong value types
    (
        "bool-for-int",
        "[queues.q]\nmax_attempts = true\n",
        "queues.q.max_attempts",
        2,
        "must be an integer, not a boolean",
    ),
    (
        "float-for-int",
        "[queues.q]\nmax_attempts = 5.0\n",
        "queues.q.max_attempts",
        2,
        "must be an integer, not the float 5.0",
    ),
    (
        "string-for-int",
        '[queues.q]\nmax_attempts = "5"\n',
        "queues.q.max_attempts",
        2,
        "must be an integer, not the string '5'",
    ),
    (
        "string-for-bool",
        '[queues."refunds.dead"]\ndurable = "yes"\n',
        'queues."refunds.dead".durable',
        2,
        "must be true or false, not the string 'yes'",
    ),
    (
        "int-for-string",
        "[queues.q]\ndead_letter = 5\n",
        "queues.q.dead_letter",
        2,
        "must be a string, not the integer 5",
    ),
    (
        "int-for-enum",
        "[queues.q]\ntype = 1\n",
        "queues.q.type",
        2,
        "must be a string, not the integer 1",
    ),
    (
        "bool-for-delivery-limit",
        '[queues.q]\ntype = "quorum"\ndelivery_limit = false\n',
        "queues.q.delivery_limit",
        3,
        "must be an integer, not a boolean",
    ),
    ("queues-not-table", "queues = 5\n", "queues", 1, "must be a table, not the integer 5"),
    ("queue-not-table", "[queues]\na = 5\n", "queues.a", 2, "must be a table, not the integer 5"),
    (
        "exchanges-not-table",
        'exchanges = ["a"]\n',
        "exchanges",
        1,
        "must be a table, not a list",
    ),
    (
        "broker-url-scheme",
        '[broker]\nurl = "http://localhost:15672/"\n',
        "broker.url",
        2,
        "must start with amqp:// or amqps://",
    ),
    (
        "broker-url-type",
        "[broker]\nurl = 5\n",
        "broker.url",
        2,
        "must be a URL string or a list of URL strings",
    ),
    ("broker-url-empty-list", "[broker]\nurl = []\n", "broker.url", 2, "at least one URL"),
    (
        "broker-url-list-of-numbers",
        "[broker]\nurl = [1, 2]\n",
        "broker.url",
        2,
        "must be a URL string or a list of URL strings",
    ),
    (
        "broker-url-list-second-wrong",
        '[broker]\nurl = ["amqp://a/", "http://b/"]\n',
        "broker.url[1]",
        2,
        "must start with amqp://",
    ),
    (
        "broker-empty-header",
        '[broker]\nretry_header = ""\n',
        "broker.retry_header",
        2,
        "must not be empty",
    ),
    # bindings
    (
        "bindings-not-list",
        '[queues.q]\nbindings = "events"\n',
        "queues.q.bindings",
        2,
        "must be a list of tables",
    ),
    (
        "binding-not-table",
        "[queues.q]\nbindings = [1]\n",
        "queues.q.bindings[0]",
        2,
        "must be a table with exchange and routing_key",
    ),
    (
        "binding-no-exchange",
        '[queues.q]\n[[queues.q.bindings]]\nrouting_key = "k"\n',
        "queues.q.bindings[0].exchange",
        2,
        "exchange is required and must be a string",
    ),
    (
        "binding-routing-key-type",
        '[queues.q]\nbindings = [{ exchange = "e", routing_key = 1 }]\n',
        "queues.q.bindings[0].routing_key",
        2,
        "must be a string",
    ),
    (
        "binding-arguments-type",
        '[queues.q]\nbindings = [{ exchange = "e", arguments = 1 }]\n',
        "queues.q.bindings[0].arguments",
        2,
        "must be a table",
    ),
    (
        "binding-default-exchange",
        '[queues.x]\n\n[[queues.x.bindings]]\nexchange = "e"\n\n[[queues.x.bindings]]\n'
        'exchange = ""\n',
        "queues.x.bindings[1].exchange",
        7,
        'cannot bind to the default exchange ""',
    ),
    # arguments
    (
        "arguments-not-table",
        "[queues.q]\narguments = 5\n",
        "queues.q.arguments",
        2,
        "must be a table of x- arguments",
    ),
    (
        "unknown-argument",
        "[queues.q]\narguments = { x-message-tll = 5 }\n",
        "queues.q.arguments.x-message-tll",
        2,
        "x-message-tll is not an argument RabbitMQ knows",
    ),
    (
        "ttl-as-string",
        '[queues.q]\n\n[queues.q.arguments]\nx-message-ttl = "100"\n',
        "queues.q.arguments.x-message-ttl",
        4,
        "x-message-ttl must be an integer, not a string",
    ),
    (
        "negative-ttl",
        "[queues.q]\narguments = { x-message-ttl = -1 }\n",
        "queues.q.arguments.x-message-ttl",
        2,
        "x-message-ttl must not be negative",
    ),
    (
        "max-priority-on-quorum",
        '[queues.q]\ntype = "quorum"\narguments = { x-max-priority = 10 }\n',
        "queues.q.arguments.x-max-priority",
        3,
        "x-max-priority only applies to classic queues, and this queue is quorum",
    ),
    (
        "delivery-limit-argument-on-classic",
        "[queues.q]\narguments = { x-delivery-limit = 10 }\n",
        "queues.q.arguments.x-delivery-limit",
        2,
        "x-delivery-limit ",
    ),
    (
        "queue-type-argument",
        '[queues.q]\narguments = { x-queue-type = "quorum" }\n',
        "queues.q.arguments.x-queue-type",
        2,
        "x-queue-type is set by the key `type`, not in `arguments`",
    ),
    (
        "dead-letter-routing-key-argument-with-dead-letter",
        '[queues.q]\ntype = "quorum"\nmax_attempts = 3\ndead_letter = "d"\n'
        'arguments = { x-dead-letter-routing-key = "zz" }\n',
        "queues.q.arguments.x-dead-letter-routing-key",
        5,
        "dead_letter already sets x-dead-letter-routing-key",
    ),
    # the retry policy
    (
        "quorum-non-durable",
        '[queues.payouts]\ntype = "quorum"\ndurable = false\n',
        "queues.payouts.durable",
        3,
        "a quorum queue is always durable",
    ),
    (
        "quorum-max-attempts-only",
        '[queues.payouts]\ntype = "quorum"\nmax_attempts = 5\n',
        "queues.payouts.max_attempts",
        3,
        "a quorum queue with max_attempts also needs dead_letter",
    ),
    (
        "quorum-dead-letter-only",
        '[queues.payouts]\ntype = "quorum"\ndead_letter = "payouts.dead"\n',
        "queues.payouts.dead_letter",
        3,
        "a quorum queue with dead_letter also needs max_attempts",
    ),
    (
        "max-attempts-zero",
        "[queues.payouts]\nmax_attempts = 0\n",
        "queues.payouts.max_attempts",
        2,
        "must be at least 1 (every delivery counts, the first included), not 0",
    ),
    (
        "max-attempts-negative",
        '[queues.payouts]\ntype = "quorum"\ndead_letter = "d"\nmax_attempts = -1\n',
        "queues.payouts.max_attempts",
        4,
        "must be at least 1 (every delivery counts, the first included), not -1",
    ),
    (
        "classic-dead-letter-without-max-attempts",
        '[queues.refunds]\n\ndead_letter = "refunds.dead"\n',
        "queues.refunds.dead_letter",
        3,
        "dead_letter also needs max_attempts",
    ),
    (
        "dead-letter-itself",
        '[queues.refunds]\ndead_letter = "refunds"\n',
        "queues.refunds.dead_letter",
        2,
        "names the queue itself",
    ),
    (
        "delivery-limit-disagrees",
        '[queues.a]\ntype = "quorum"\nmax_attempts = 5\ndead_letter = "d"\ndelivery_limit = 5\n',
        "queues.a.delivery_limit",
        5,
        "max_attempts = 5 already sets the server limit to 4",
    ),
    (
        "delivery-limit-on-classic",
        "[queues.a]\ndelivery_limit = 4\n",
        "queues.a.delivery_limit",
        2,
        "only quorum queues have a server delivery limit",
    ),
    (
        "delivery-limit-without-route",
        '[queues.a]\ntype = "quorum"\ndelivery_limit = 3\n',
        "queues.a.delivery_limit",
        3,
        "a delivery limit without dead_letter, rejected or dead_letter_exchange",
    ),
    (
        "delivery-limit-negative",
        '[queues.a]\ntype = "quorum"\ndelivery_limit = -1\ndead_letter_exchange = "x"\n',
        "queues.a.delivery_limit",
        3,
        "must not be negative, not -1",
    ),
    # names
    (
        "amq-queue",
        '# reserved\n[queues."amq.q"]\n',
        'queues."amq.q"',
        2,
        "queue name 'amq.q' starts with the reserved prefix 'amq.'",
    ),
    (
        "amq-exchange",
        '[exchanges."amq.events"]\ntype = "topic"\n',
        'exchanges."amq.events"',
        1,
        "exchange name 'amq.events' starts with the reserved prefix 'amq.'",
    ),
    (
        "amq-dead-letter",
        '[queues.q]\ndead_letter = "amq.dead"\n',
        "queues.q.dead_letter",
        2,
        "queue name 'amq.dead' starts with the reserved prefix 'amq.'",
    ),
    (
        "queue-256-bytes",
        f'[queues.ok]\n[queues."{"é" * 128}"]\n',
        f'queues."{"é" * 128}"',
        2,
        "is 256 bytes long; at most 255 go on the wire",
    ),
    (
        "queue-ascii-outside-the-name-grammar",
        '[queues.ok]\n[queues."a!"]\n',
        'queues."a!"',
        2,
        "queue name 'a!' holds '!'; a name may only hold letters, digits",
    ),
    (
        "exchange-256-bytes",
        f"[exchanges.{'e' * 256}]\n",
        f"exchanges.{'e' * 256}",
        1,
        "is 256 bytes long; at most 255 go on the wire",
    ),
    (
        "exchange-128-characters",
        f'[exchanges."{"ab" * 64}"]\n',
        f"exchanges.{'ab' * 64}",
        1,
        "is 128 characters long; rr's AMQP client sends at most 127",
    ),
    (
        "derived-wait-queue-256-bytes",
        f'[queues.{"a" * 250}]\ndelay = "dlx-ttl"\n',
        f"queues.{'a' * 250}",
        1,
        "derived wait queue name",
    ),
    (
        "derived-tier-queue-too-long",
        f'[queues.{"a" * 245}]\ndelay_tiers = ["1s", "1500ms"]\n',
        f"queues.{'a' * 245}",
        1,
        "derived wait queue name",
    ),
    (
        "derived-delay-exchange-256-bytes",
        f'[queues.{"a" * 250}]\ndelay = "plugin-dme"\n',
        f"queues.{'a' * 250}",
        1,
        "derived delay exchange name",
    ),
    (
        "binding-exchange-128-characters",
        f'[queues.q]\nbindings = [{{ exchange = "{"x" * 128}" }}]\n',
        "queues.q.bindings[0].exchange",
        2,
        "is 128 characters long; rr's AMQP client sends at most 127",
    ),
    # delays
    (
        "wait-queue-without-dlx-ttl",
        '[queues.q]\nwait_queue = "w"\n',
        "queues.q.wait_queue",
        2,
        'wait_queue only applies to delay = "dlx-ttl" without delay_tiers',
    ),
    (
        "wait-queue-with-tiers",
        '[queues.q]\ndelay_tiers = ["1s"]\nwait_queue = "w"\n',
        "queues.q.wait_queue",
        3,
        "wait_queue only applies",
    ),
    (
        "wait-queue-itself",
        '[queues.q]\ndelay = "dlx-ttl"\nwait_queue = "q"\n',
        "queues.q.wait_queue",
        3,
        "the wait queue must not be the queue itself",
    ),
    (
        "tiers-not-sorted",
        '[queues.q]\ndelay_tiers = ["30s", "1s"]\n',
        "queues.q.delay_tiers",
        2,
        "list tiers from shortest to longest",
    ),
    (
        "tiers-duplicate",
        '[queues.q]\ndelay_tiers = ["1s", "1s"]\n',
        "queues.q.delay_tiers",
        2,
        "tiers must differ",
    ),
    (
        "tiers-same-duration-spelt-twice",
        '[queues.q]\ndelay_tiers = ["60s", "1m"]\n',
        "queues.q.delay_tiers",
        2,
        "tiers must differ",
    ),
    (
        "tiers-zero",
        '[queues.q]\ndelay_tiers = ["0s", "1s"]\n',
        "queues.q.delay_tiers",
        2,
        "every tier must be longer than 0",
    ),
    (
        "tiers-bad-unit",
        '[queues.q]\ndelay_tiers = ["1s", "1w"]\n',
        "queues.q.delay_tiers[1]",
        2,
        "'1w' is not a duration",
    ),
    (
        "tiers-not-string",
        '[queues.q]\ndelay_tiers = ["1s", 5]\n',
        "queues.q.delay_tiers[1]",
        2,
        'must be a duration string like "30s", not the integer 5',
    ),
    (
        "tiers-empty",
        "[queues.q]\ndelay_tiers = []\n",
        "queues.q.delay_tiers",
        2,
        "must be a non-empty list",
    ),
    (
        "tiers-not-list",
        '[queues.q]\ndelay_tiers = "1s"\n',
        "queues.q.delay_tiers",
        2,
        "must be a non-empty list",
    ),
    (
        "tiers-with-memory",
        '[queues.q]\ndelay = "memory"\ndelay_tiers = ["1s"]\n',
        "queues.q.delay_tiers",
        3,
        'delay_tiers wait in TTL queues: they need delay = "dlx-ttl"',
    ),
    (
        "tiers-with-plugin-dme",
        '[queues.q]\ndelay_tiers = ["1s"]\ndelay = "plugin-dme"\n',
        "queues.q.delay_tiers",
        2,
        'they need delay = "dlx-ttl"',
    ),
    # across queues
    (
        "wait-queue-listed-after",
        '[queues.q]\ndelay = "dlx-ttl"\n\n[queues."q.retry"]\n',
        'queues."q.retry"',
        4,
        "'q.retry' is the wait queue of 'q'; rr declares it, so do not list it under [queues]",
    ),
    (
        "wait-queue-listed-before",
        '[queues."q.retry"]\n[queues.q]\ndelay = "dlx-ttl"\n',
        'queues."q.retry"',
        1,
        "'q.retry' is the wait queue of 'q'",
    ),
    (
        "tier-queue-listed",
        '[queues.q]\ndelay_tiers = ["1s"]\n[queues."q.retry.1s"]\n',
        'queues."q.retry.1s"',
        3,
        "'q.retry.1s' is the wait queue of 'q'",
    ),
    (
        "shared-wait-queue",
        '[queues.a]\ndelay = "dlx-ttl"\nwait_queue = "w"\n\n[queues.b]\ndelay = "dlx-ttl"\n'
        'wait_queue = "w"\n',
        "queues.b.wait_queue",
        7,
        "'w' is already the wait queue of 'a'",
    ),
    (
        "shared-default-wait-queue",
        '[queues.a]\ndelay = "dlx-ttl"\n[queues.b]\ndelay = "dlx-ttl"\nwait_queue = "a.retry"\n',
        "queues.b.wait_queue",
        5,
        "'a.retry' is already the wait queue of 'a'",
    ),
    (
        "dead-letter-is-other-wait-queue",
        '[queues.a]\ndelay = "dlx-ttl"\n\n[queues.b]\nmax_attempts = 2\ndead_letter = "a.retry"\n',
        "queues.b.dead_letter",
        6,
        "'a.retry' is the wait queue of 'a', not a dead-letter queue",
    ),
    (
        "dead-letter-is-later-wait-queue",
        '[queues.b]\nmax_attempts = 3\ndead_letter = "a.wait"\n'
        '[queues.a]\ndelay = "dlx-ttl"\nwait_queue = "a.wait"\n',
        "queues.b.dead_letter",
        3,
        "'a.wait' is the wait queue of 'a', not a dead-letter queue",
    ),
    (
        "dead-letter-is-own-wait-queue",
        '[queues.a]\ndelay = "dlx-ttl"\ndead_letter = "a.retry"\n',
        "queues.a.dead_letter",
        3,
        "'a.retry' is this queue's own wait queue",
    ),
    (
        "delay-exchange-listed",
        '[queues.q]\ndelay = "plugin-dme"\n\n[exchanges."q.delay"]\ntype = "x-delayed-message"\n'
        'arguments = { x-delayed-type = "direct" }\n',
        'exchanges."q.delay"',
        4,
        "'q.delay' is the delay exchange rr declares for 'q'",
    ),
    # exchanges
    (
        "exchange-type-unknown",
        '[exchanges.e]\ndurable = true\ntype = "direkt"\n',
        "exchanges.e.type",
        3,
        "unknown exchange type 'direkt'",
    ),
    (
        "delayed-exchange-without-delayed-type",
        '[exchanges.e]\ntype = "x-delayed-message"\narguments = { x-other = 1 }\n',
        "exchanges.e.arguments.x-delayed-type",
        3,
        "an x-delayed-message exchange needs arguments.x-delayed-type",
    ),
    (
        "delayed-exchange-without-arguments",
        '# delayed\n[exchanges.later]\ntype = "x-delayed-message"\n',
        "exchanges.later.arguments.x-delayed-type",
        2,  # not written: the closest enclosing key that is, [exchanges.later]
        "an x-delayed-message exchange needs arguments.x-delayed-type set to direct, fanout, "
        "topic or headers",
    ),
    (
        "delayed-exchange-with-plugin-delayed-type",
        '[exchanges.e]\ntype = "x-delayed-message"\n[exchanges.e.arguments]\n'
        'x-delayed-type = "x-consistent-hash"\n',
        "exchanges.e.arguments.x-delayed-type",
        4,
        "an x-delayed-message exchange needs arguments.x-delayed-type",
    ),
    # where the key is written: a dotted key at the top level
    (
        "dotted-key-top-level",
        "# no table headers\nqueues.payouts.max_attempts = 0\n",
        "queues.payouts.max_attempts",
        2,
        "must be at least 1",
    ),
    (
        "dotted-key-in-queues-table",
        '[queues]\nrefunds.type = "classic"\n"refunds.dead".durable = "no"\n',
        'queues."refunds.dead".durable',
        3,
        "must be true or false, not the string 'no'",
    ),
    (
        "second-queue-of-two",
        "[queues.a]\nmax_attempts = 1\n\n[queues.b]\nmax_attempts = 0\n",
        "queues.b.max_attempts",
        5,
        "not 0",
    ),
    (
        "crlf-line-endings",
        '[queues.a]\r\n\r\ntype = "quorom"\r\n',
        "queues.a.type",
        3,
        "(did you mean 'quorum'?)",
    ),
]


@pytest.mark.parametrize(
    ("text", "path", "line", "fragment"),
    [pytest.param(*case[1:], id=case[0]) for case in REFUSALS],
)
def test_refusals(text: str, path: str, line: int, fragment: str) -> None:
    error = load_error(text)
    assert error.path == path
    assert error.line == line
    assert fragment in error.detail
    assert error.exit_code == 78
    assert error.exit_code is ExitCode.CONFIG
    assert exit_code_for(error) == 78
    assert error.source == "<topology>"
    assert str(error) == f"<topology>:{line}: {path}: {error.detail}"


def test_refusal_names_every_known_key() -> None:
    error = load_error("[queues.q]\nmax_attemps = 1\n")
    assert error.detail == (
        "unknown key 'max_attemps' (did you mean 'max_attempts'?); known keys: type, durable, "
        "max_attempts, dead_letter, dead_letter_exchange, rejected, delivery_limit, delay, "
        "wait_queue, "
        "wait_queue_type, delay_tiers, delay_min, delay_max, delay_returns, publish, "
        "dead_letter_strategy, replicas, arguments, bindings, settings"
    )


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        (f'[queues."{"a" * 255}"]\n', "a" * 255),
        (f'[queues."{"é" * 85}"]\n', "é" * 85),
        (f'[queues."{"€" * 56}ab"]\n', "€" * 56 + "ab"),
        (f'[queues."{"a-_.:@#,/+ " * 22}abcdefghijklm"]\n', "a-_.:@#,/+ " * 22 + "abcdefghijklm"),
        (f'[queues.{"a" * 249}]\ndelay = "dlx-ttl"\n', "a" * 249),
        (f'[queues.{"a" * 121}]\ndelay = "plugin-dme"\n', "a" * 121),  # + ".delay": 127
        ('[queues."amq"]\n', "amq"),
        ('[queues."amqp.x"]\n', "amqp.x"),
        ('[queues."AMQ.x"]\n', "AMQ.x"),
    ],
)
def test_names_up_to_255_bytes_are_accepted(text: str, accepted: str) -> None:
    assert [queue.name for queue in load_text(text).queues] == [accepted]


# --------------------------------------------------------------------------- TOML syntax


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("[queues.a]\ntype = \n", 2),
        ("\n[queues.a\n", 2),
        ("[queues.a]\nx = 1\nx = 2\n", 3),
        ("[queues.a]\n[queues.a]\n", 2),
        ('[queues.a]\n\n\ntype = "quorum\n', 4),
        ('# ok\n[[queues.a.bindings]]\nexchange = "e"\n[queues.a.bindings]\n', 4),
    ],
)
def test_toml_syntax_errors(text: str, line: int) -> None:
    # tomllib's own words vary between Python versions: only rr's framing is asserted
    error = load_error(text)
    assert error.line == line
    assert error.path is None
    assert error.exit_code == 78
    assert error.detail.startswith("not valid TOML: ")
    assert "(at line" not in error.detail
    assert re.search(r" \(column \d+\)$", error.detail)
    assert str(error).startswith(f"<topology>:{line}: not valid TOML: ")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("\n[queues.a]\nx = [1,\n", 3),
        ("[queues.a]\nx = [1,", 2),
        ("x = [1,\n  2,\n  3,", 3),
    ],
)
def test_toml_syntax_error_at_the_end_of_the_document_names_the_last_line(
    text: str, line: int
) -> None:
    error = load_error(text)
    assert error.line == line
    assert error.path is None
    assert error.exit_code == 78
    assert error.detail.startswith("not valid TOML: ")


# --------------------------------------------------------------------------- load_file


def test_load_file_names_file_line_and_path(tmp_path: Path) -> None:
    path = tmp_path / "topology.toml"
    path.write_text(
        "# payouts\n"
        "[queues.payouts]\n"
        'type = "quorum"\n'
        'dead_letter = "payouts.dead"\n'
        "\n"
        "max_attemps = 5\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_file(path)
    error = caught.value
    assert error.source == str(path)
    assert error.line == 6
    assert error.path == "queues.payouts.max_attemps"
    assert error.exit_code == 78
    assert str(error).startswith(f"{path}:6: queues.payouts.max_attemps: unknown key ")
    assert "(did you mean 'max_attempts'?)" in str(error)


def test_load_file_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('[queues.a]\n\ntype = "quorum\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_file(str(path))
    assert caught.value.source == str(path)
    assert caught.value.line == 3
    assert caught.value.exit_code == 78


def test_load_file_accepts_str_and_path(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text("[queues.q]\n", encoding="utf-8")
    assert load_file(path) == load_file(str(path)) == Topology(queues=(Queue(name="q"),))


def test_load_file_missing(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(ConfigError) as caught:
        load_file(path)
    error = caught.value
    assert error.detail == "no such file"
    assert error.source == str(path)
    assert error.line is None
    assert error.path is None
    assert error.exit_code == 78
    assert str(error) == f"{path}: no such file"


@pytest.mark.parametrize(
    ("content", "detail"),
    [
        (b"\xff\xfe[queues.a]\n", "is not UTF-8 text (byte 0xff)"),
        (b"[queues.\xe9]\n", "is not UTF-8 text (byte 0xe9)"),
    ],
)
def test_load_file_not_utf8(tmp_path: Path, content: bytes, detail: str) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        load_file(path)
    assert caught.value.detail == detail
    assert caught.value.line == 1
    assert caught.value.source == str(path)
    assert caught.value.exit_code == 78


def test_load_file_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_file(tmp_path)
    assert caught.value.detail == "is a directory, not a regular file; give the path of a TOML file"
    assert caught.value.exit_code == 78


def test_load_text_custom_source() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("[queues.q]\nmax_attempts = 0\n", source="svc.toml")
    assert str(caught.value).startswith("svc.toml:2: queues.q.max_attempts: must be at least 1")


# --------------------------------------------------------------------------- errors.py


def test_config_error_located_keeps_what_it_had() -> None:
    error = ConfigError("boom", path="queues.a", line=3)
    located = error.located(source="f.toml", line=9)
    assert (located.path, located.source, located.line, located.detail) == (
        "queues.a",
        "f.toml",
        3,
        "boom",
    )
    assert str(located) == "f.toml:3: queues.a: boom"
    assert str(ConfigError("boom", line=4)) == "line 4: boom"
    assert str(ConfigError("boom")) == "boom"


# --------------------------------------------------------------------------- wait_queue_type


@pytest.mark.parametrize(
    ("text", "loaded", "in_effect"),
    [
        ('[queues.q]\ndelay = "dlx-ttl"\n', None, QueueType.CLASSIC),
        ('[queues.q]\ndelay = "dlx-ttl"\nwait_queue_type = "quorum"\n', QueueType.QUORUM, None),
        ('[queues.q]\ntype = "quorum"\ndelay = "dlx-ttl"\n', None, QueueType.QUORUM),
    ],
)
def test_wait_queue_type_loads(
    text: str, loaded: QueueType | None, in_effect: QueueType | None
) -> None:
    queue = load_text(text).queues[0]
    assert queue.wait_queue_type is loaded
    assert queue.effective_wait_queue_type is (in_effect or loaded)


def test_wait_queue_type_is_classic_or_quorum() -> None:
    error = load_error('[queues.q]\ndelay = "dlx-ttl"\nwait_queue_type = "stream"\n')
    assert error.path == "queues.q.wait_queue_type"
    assert "'classic'" in error.detail
    assert "'quorum'" in error.detail


# --------------------------------------------------------------------------- dead_letter_strategy

_QUORUM_DL = '[queues.q]\ntype = "quorum"\nmax_attempts = 3\ndead_letter = "q.dead"\n'
_QUORUM_DL_ARGUMENTS = {
    "x-queue-type": "quorum",
    "x-delivery-limit": 2,
    "x-dead-letter-exchange": "",
    "x-dead-letter-routing-key": "q.dead",
}
_AT_LEAST_ONCE = {"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}


# (id, text, the key as loaded, the strategy in effect, the queue's server arguments)
STRATEGIES = [
    (
        "quorum-dead-letter-defaults-to-at-least-once",
        _QUORUM_DL,
        None,
        DeadLetterStrategy.AT_LEAST_ONCE,
        {**_QUORUM_DL_ARGUMENTS, **_AT_LEAST_ONCE},
    ),
    (
        "explicit-at-least-once-is-the-default",
        _QUORUM_DL + 'dead_letter_strategy = "at-least-once"\n',
        DeadLetterStrategy.AT_LEAST_ONCE,
        DeadLetterStrategy.AT_LEAST_ONCE,
        {**_QUORUM_DL_ARGUMENTS, **_AT_LEAST_ONCE},
    ),
    (
        "explicit-at-most-once-adds-neither-argument",
        _QUORUM_DL + 'dead_letter_strategy = "at-most-once"\n',
        DeadLetterStrategy.AT_MOST_ONCE,
        DeadLetterStrategy.AT_MOST_ONCE,
        _QUORUM_DL_ARGUMENTS,
    ),
    (
        "at-most-once-keeps-any-raw-overflow",
        _QUORUM_DL
        + 'dead_letter_strategy = "at-most-once"\narguments = { x-overflow = "drop-head" }\n',
        DeadLetterStrategy.AT_MOST_ONCE,
        DeadLetterStrategy.AT_MOST_ONCE,
        {**_QUORUM_DL_ARGUMENTS, "x-overflow": "drop-head"},
    ),
    (
        "raw-reject-publish-is-accepted-and-set-once",
        _QUORUM_DL + 'arguments = { x-overflow = "reject-publish", x-max-length = 10 }\n',
        None,
        DeadLetterStrategy.AT_LEAST_ONCE,
        {**_QUORUM_DL_ARGUMENTS, **_AT_LEAST_ONCE, "x-max-length": 10},
    ),
    (
        "quorum-own-dead-letter-exchange-defaults-to-at-least-once",
        '[queues.q]\ntype = "quorum"\ndead_letter_exchange = "dlx"\n',
        None,
        DeadLetterStrategy.AT_LEAST_ONCE,
        {"x-queue-type": "quorum", "x-dead-letter-exchange": "dlx", **_AT_LEAST_ONCE},
    ),
    (
        "quorum-own-dead-letter-exchange-at-most-once",
        '[queues.q]\ntype = "quorum"\ndelivery_limit = 4\ndead_letter_exchange = "dlx"\n'
        'dead_letter_strategy = "at-most-once"\n',
        DeadLetterStrategy.AT_MOST_ONCE,
        DeadLetterStrategy.AT_MOST_ONCE,
        {"x-queue-type": "quorum", "x-delivery-limit": 4, "x-dead-letter-exchange": "dlx"},
    ),
    (
        "quorum-without-a-route-has-no-strategy",
        '[queues.q]\ntype = "quorum"\n',
        None,
        None,
        {"x-queue-type": "quorum"},
    ),
    (
        "classic-with-a-dead-letter-has-no-strategy",
        '[queues.q]\nmax_attempts = 3\ndead_letter = "q.dead"\n',
        None,
        None,
        {"x-queue-type": "classic"},
    ),
    (
        "classic-own-dead-letter-exchange-has-no-strategy",
        '[queues.q]\ndead_letter_exchange = "dlx"\n',
        None,
        None,
        {"x-dead-letter-exchange": "dlx", "x-queue-type": "classic"},
    ),
]


@pytest.mark.parametrize(
    ("text", "key", "effective", "arguments"),
    [pytest.param(*case[1:], id=case[0]) for case in STRATEGIES],
)
def test_dead_letter_strategy(
    text: str,
    key: DeadLetterStrategy | None,
    effective: DeadLetterStrategy | None,
    arguments: dict[str, object],
) -> None:
    queue = load_text(text).queues[0]
    assert queue.dead_letter_strategy is key
    assert queue.effective_dead_letter_strategy is effective
    result = queue_arguments(queue)
    assert result == arguments
    for name, value in arguments.items():
        assert type(result[name]) is type(value), name
    # the declaration rr sends carries exactly these arguments
    (declared,) = [entity for entity in expand(load_text(text)).queues if entity.name == "q"]
    assert dict(declared.arguments) == arguments


def test_at_most_once_leaves_the_wait_queue_at_least_once() -> None:
    # the key chooses for the queue itself; its quorum wait queue always moves expired copies
    # back at least once
    topology = load_text(_QUORUM_DL + 'delay = "dlx-ttl"\ndead_letter_strategy = "at-most-once"\n')
    queues = {entity.name: dict(entity.arguments) for entity in expand(topology).queues}
    assert queues["q"] == _QUORUM_DL_ARGUMENTS
    assert queues["q.retry"] == {
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "q",
        "x-queue-type": "quorum",
        **_AT_LEAST_ONCE,
    }


# (id, text, path, line, fragment of the detail)
STRATEGY_REFUSALS = [
    (
        "classic-queue",
        '[queues.q]\nmax_attempts = 3\ndead_letter = "q.dead"\n'
        'dead_letter_strategy = "at-least-once"\n',
        "queues.q.dead_letter_strategy",
        4,
        "only quorum queues choose how they dead-letter",
    ),
    (
        "classic-queue-at-most-once",
        '[queues.q]\ndead_letter_strategy = "at-most-once"\n',
        "queues.q.dead_letter_strategy",
        2,
        "only quorum queues choose how they dead-letter",
    ),
    (
        "quorum-without-a-route",
        '[queues.q]\ntype = "quorum"\ndead_letter_strategy = "at-most-once"\n',
        "queues.q.dead_letter_strategy",
        3,
        "the queue dead-letters nothing: set dead_letter or dead_letter_exchange",
    ),
    (
        "quorum-without-a-route-at-least-once",
        '[queues.q]\ntype = "quorum"\n\ndead_letter_strategy = "at-least-once"\n',
        "queues.q.dead_letter_strategy",
        4,
        "the queue dead-letters nothing",
    ),
    (
        "default-with-a-conflicting-overflow",
        _QUORUM_DL + 'arguments = { x-overflow = "drop-head" }\n',
        "queues.q.arguments.x-overflow",
        5,
        "x-overflow = 'drop-head': at-least-once dead-lettering needs \"reject-publish\"",
    ),
    (
        "explicit-at-least-once-with-a-conflicting-overflow-table",
        _QUORUM_DL + 'dead_letter_strategy = "at-least-once"\n\n'
        '[queues.q.arguments]\nx-max-length = 5\nx-overflow = "reject-publish-dlx"\n',
        "queues.q.arguments.x-overflow",
        9,
        "x-overflow = 'reject-publish-dlx': at-least-once dead-lettering needs",
    ),
    (
        "own-dead-letter-exchange-with-a-conflicting-overflow",
        '[queues.q]\ntype = "quorum"\ndead_letter_exchange = "dlx"\n'
        'arguments = { x-overflow = "drop-head" }\n',
        "queues.q.arguments.x-overflow",
        4,
        'set dead_letter_strategy = "at-most-once" to keep this overflow',
    ),
    (
        "raw-argument",
        _QUORUM_DL + 'arguments = { x-dead-letter-strategy = "at-most-once" }\n',
        "queues.q.arguments.x-dead-letter-strategy",
        5,
        "x-dead-letter-strategy is set by the key `dead_letter_strategy`, not in `arguments`",
    ),
    (
        "raw-argument-on-a-classic-queue",
        '[queues.q]\narguments = { x-dead-letter-strategy = "at-least-once" }\n',
        "queues.q.arguments.x-dead-letter-strategy",
        2,
        "is set by the key `dead_letter_strategy`, not in `arguments`",
    ),
    (
        "unknown-value",
        _QUORUM_DL + 'dead_letter_strategy = "at-least-one"\n',
        "queues.q.dead_letter_strategy",
        5,
        "must be one of 'at-most-once', 'at-least-once', not 'at-least-one' "
        "(did you mean 'at-least-once'?)",
    ),
    (
        "not-a-string",
        _QUORUM_DL + "dead_letter_strategy = true\n",
        "queues.q.dead_letter_strategy",
        5,
        "must be a string, not a boolean",
    ),
    (
        "misspelt-key",
        _QUORUM_DL + 'dead_letter_stratgy = "at-most-once"\n',
        "queues.q.dead_letter_stratgy",
        5,
        "(did you mean 'dead_letter_strategy'?)",
    ),
]


@pytest.mark.parametrize(
    ("text", "path", "line", "fragment"),
    [pytest.param(*case[1:], id=case[0]) for case in STRATEGY_REFUSALS],
)
def test_dead_letter_strategy_refusals(text: str, path: str, line: int, fragment: str) -> None:
    error = load_error(text)
    assert (error.path, error.line) == (path, line)
    assert fragment in error.detail
    assert error.exit_code == 78
    assert str(error) == f"<topology>:{line}: {path}: {error.detail}"


def test_several_broker_urls_are_kept_in_order() -> None:
    text = '[broker]\nurl = ["amqp://127.0.0.1:5681/", "amqp://127.0.0.1:5682/"]\n'
    assert load_text(text).broker.urls == ("amqp://127.0.0.1:5681/", "amqp://127.0.0.1:5682/")
    assert load_text('[broker]\nurl = "amqp://a/"\n').broker.urls == ("amqp://a/",)
