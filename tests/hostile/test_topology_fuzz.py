"""Fuzz ``rr topology validate`` and ``rr declare`` with generated topology files.

Files are built from the real keys of the format (topology/load.py) with right and wrong
values: hostile names (controls, bidi, non-ASCII, 256+ bytes, empty), integers past 64 bits,
floats (NaN, inf, past 32 bits), TOML dates and times, arguments nested past the depth rr
takes. A small TOML emitter below writes them. Properties (docs/reference/topology.md, "Malformed
files"):

* ``validate`` never lets an exception escape, exits 0 or 78 only, prints exactly one
  ``rr: error:`` line on failure and never a control character;
* whatever the load-time checks accept, every frame a declare would send encodes (the
  pre-flight is only a safety net), so ``validate`` says ok exactly when they accept;
* on the real broker, in a fresh vhost: ``declare`` of an accepted file exits 0 and creates
  exactly the queues of the plan (or reports a conflict and creates nothing); ``declare`` of
  a refused file exits 78 and leaves the vhost empty.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pamqp import commands as spec
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.errors import ConfigError
from rabbitctl_retry.topology.expand import Desired, expand
from rabbitctl_retry.topology.load import BINDING_KEYS, EXCHANGE_KEYS, QUEUE_KEYS, load_file
from rabbitctl_retry.transport.values import wire_arguments
from tests.backends import vhost_pool, vhost_url
from tests.hostile.broker_state import assert_holds_exactly
from tests.shared_node import current

runner = CliRunner(env={"COLUMNS": "200"})

# --------------------------------------------------------------------------- TOML emitter

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def toml_string(text: str) -> str:
    """A TOML basic string for ``text``: controls and DEL as \\u escapes."""
    out = []
    for char in text:
        if char in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    return key if key and all(c in _BARE for c in key) else toml_string(key)


def toml_value(value: Any) -> str:
    """An inline TOML value (arrays and inline tables on one line)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    raise TypeError(type(value))


def toml_document(document: dict[str, Any]) -> str:
    """Plain keys first, then ``[queues."name"]`` style headers for tables of tables."""
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in document.items() if not _table(v)]
    for top, value in document.items():
        if not _table(value):
            continue
        if top in ("queues", "exchanges") and all(isinstance(t, dict) for t in value.values()):
            for name, table in value.items():
                lines.append(f"[{toml_key(top)}.{toml_key(name)}]")
                lines.extend(f"{toml_key(k)} = {toml_value(v)}" for k, v in table.items())
        else:
            lines.append(f"[{toml_key(top)}]")
            lines.extend(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items())
    return "\n".join(lines) + "\n"


def _table(value: object) -> bool:
    return isinstance(value, dict)


# --------------------------------------------------------------------------- strategies

_NAME_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:@#,/+ "
_HOSTILE_CHARACTERS = (
    "\x00\x01\x07\x08\x0b\x0c\x1b\x7f\x80\x85\x9b\u061c\u200e\u200f\u202a\u202e\u2066"
    "\u2069\u2028\ufeffé日😀!*[]{}'\"\\\n\t\r"
)

valid_names = st.text(_NAME_ALPHABET, min_size=1, max_size=12).filter(
    lambda name: not name.startswith("amq.")
)
hostile_names = st.one_of(
    st.just(""),
    st.just("amq.mine"),
    st.text(_NAME_ALPHABET + _HOSTILE_CHARACTERS, min_size=1, max_size=12),
    st.builds(lambda n, pad: "q" * n + pad, st.integers(118, 300), st.sampled_from(["", "é"])),
)
names = st.one_of(valid_names, valid_names, hostile_names)

huge_integers = st.sampled_from(
    [2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**20, -(10**20)]
)
integers = st.one_of(st.integers(-5, 12), huge_integers)
floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e39, -1e39, 3.4e38, 0.5]),
)
dates = st.one_of(
    st.dates(),
    st.times(),
    st.datetimes(),
    st.datetimes(timezones=st.just(timezone(timedelta(hours=2)))),
)
texts = st.text(_NAME_ALPHABET + _HOSTILE_CHARACTERS, max_size=20)
scalars = st.one_of(st.booleans(), integers, floats, texts, dates)


def _nest(value: object, depth: int, kind: str) -> object:
    for _ in range(depth):
        value = [value] if kind == "array" else {"k": value}
    return value


deep_values = st.builds(
    _nest, st.integers(0, 3), st.integers(20, 60), st.sampled_from(["array", "table"])
)
argument_values = st.recursive(
    st.one_of(scalars, deep_values),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=6,
)
known_arguments = st.sampled_from(
    [
        "x-message-ttl",
        "x-expires",
        "x-max-length",
        "x-max-length-bytes",
        "x-overflow",
        "x-dead-letter-routing-key",
        "x-single-active-consumer",
        "x-queue-leader-locator",
        "x-queue-master-locator",
        "x-max-priority",
        "x-queue-mode",
        "x-queue-version",
        "x-quorum-initial-group-size",
        "x-message-tll",
    ]
)
argument_tables = st.dictionaries(st.one_of(known_arguments, texts), argument_values, max_size=3)
durations = st.sampled_from(
    ["1s", "30s", "5m", "1h", "49d", "50d", "0s", "99999999999999999999999d", "4294967295ms"]
)
wrong_values = st.one_of(scalars, st.lists(scalars, max_size=2), deep_values)


def _queue_value(key: str) -> st.SearchStrategy[Any]:
    right: dict[str, st.SearchStrategy[Any]] = {
        "type": st.sampled_from(["classic", "quorum", "stream"]),
        "durable": st.booleans(),
        "max_attempts": integers,
        "dead_letter": names,
        "dead_letter_exchange": st.one_of(names, st.just("amq.direct"), st.just("")),
        "rejected": names,
        "delivery_limit": integers,
        "replicas": integers,
        "delay": st.sampled_from(["memory", "dlx-ttl", "plugin-dme", "server"]),
        "wait_queue": names,
        "wait_queue_type": st.sampled_from(["classic", "quorum", "stream"]),
        "delay_tiers": st.lists(durations, min_size=1, max_size=3),
        "delay_min": durations,
        "delay_max": durations,
        "delay_returns": st.sampled_from(["failed", "all", "returned"]),
        "publish": st.sampled_from(["confirm", "fast"]),
        "dead_letter_strategy": st.sampled_from(["at-least-once", "at-most-once"]),
        "settings": st.sampled_from(["arguments", "policy", "policies"]),
        "arguments": argument_tables,
        "bindings": st.lists(
            st.fixed_dictionaries(
                {"exchange": st.one_of(names, st.sampled_from(["amq.topic", "amq.headers"]))},
                optional={
                    "routing_key": texts,
                    "arguments": argument_tables,
                    "x-bogus": scalars,
                },
            ),
            max_size=2,
        ),
    }
    return st.one_of(right[key], right[key], right[key], wrong_values)


queue_tables = st.lists(st.sampled_from(QUEUE_KEYS), unique=True, max_size=6).flatmap(
    lambda keys: st.fixed_dictionaries({key: _queue_value(key) for key in keys})
)
exchange_tables = st.fixed_dictionaries(
    {},
    optional={
        "type": st.one_of(st.sampled_from(["direct", "topic", "headers", "x-nope"]), texts),
        "durable": st.one_of(st.booleans(), wrong_values),
        "arguments": st.one_of(
            argument_tables,
            st.just({"alternate-exchange": 5}),
            st.just({"alternate-exchange": "ae"}),
        ),
    },
)
documents = st.fixed_dictionaries(
    {"queues": st.dictionaries(names, queue_tables, min_size=1, max_size=3)},
    optional={
        "exchanges": st.dictionaries(names, exchange_tables, max_size=2),
        "broker": st.fixed_dictionaries(
            {},
            optional={
                "retry_header": st.one_of(texts, names),
                "url": texts,
                "settings": st.sampled_from(["arguments", "policy", "x"]),
            },
        ),
        "bogus": scalars,
    },
)

assert set(BINDING_KEYS) == {"exchange", "routing_key", "arguments"}
assert set(EXCHANGE_KEYS) == {"type", "durable", "arguments"}

# --------------------------------------------------------------------------- properties

_UNSAFE = frozenset(
    [chr(c) for c in range(0x20) if c != 0x0A]
    + [chr(c) for c in range(0x7F, 0xA0)]
    + list("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
)


def assert_clean_outcome(result: Any, *, ok_codes: tuple[int, ...] = (0, 78)) -> None:
    """No escaped exception, an allowed exit code, one error line on failure, nothing a
    terminal would act on."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code in ok_codes, (result.exit_code, result.output)
    assert not (_UNSAFE & set(result.stdout + result.stderr)), repr(result.output[:300])
    if result.exit_code == 78:
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("rr: error: ")
        assert result.stdout == ""


def frames_of(desired: Desired) -> list[Any]:
    """Every frame ``rr declare`` sends, built the way aiormq builds them from the
    transport's own table conversion (rabbitctl_retry/transport/amqp.py)."""
    frames: list[Any] = [
        spec.Exchange.Declare(exchange=name, passive=True) for name in desired.referenced_exchanges
    ]
    for exchange in desired.exchanges:
        frames.append(spec.Exchange.Declare(exchange=exchange.name, passive=True))
        frames.append(
            spec.Exchange.Declare(
                exchange=exchange.name,
                exchange_type=exchange.type,
                durable=exchange.durable,
                arguments=wire_arguments(exchange.arguments),
            )
        )
    for queue in desired.queues:
        frames.append(spec.Queue.Declare(queue=queue.name, passive=True))
        frames.append(
            spec.Queue.Declare(
                queue=queue.name,
                durable=queue.durable,
                arguments=wire_arguments(queue.arguments),
            )
        )
    for binding in desired.bindings:
        frames.append(
            spec.Queue.Bind(
                queue=binding.queue,
                exchange=binding.exchange,
                routing_key=binding.routing_key,
                arguments=wire_arguments(binding.arguments),
            )
        )
    return frames


@contextmanager
def _written(text: str) -> Iterator[Path]:
    """``text`` in a topology file of its own, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="rr-fuzz-") as directory:
        path = Path(directory) / "topology.toml"
        path.write_text(text, encoding="utf-8")
        yield path


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(document=st.one_of(documents, st.deferred(lambda: plausible_documents(mostly))))
def test_validate_is_ok_or_one_error_line_and_ok_means_every_frame_encodes(
    document: dict[str, Any],
) -> None:
    with _written(toml_document(document)) as path:
        _check_validate(path)


def _check_validate(path: Path) -> None:
    result = runner.invoke(app, ["topology", "validate", str(path)])
    event(f"exit {result.exit_code}")
    assert_clean_outcome(result)
    try:
        topology = load_file(path)
    except ConfigError:
        assert result.exit_code == 78
        return
    # The load-time checks accepted it: every frame must encode, and validate said ok.
    for frame in frames_of(expand(topology)):
        frame.marshal()
    assert result.exit_code == 0, result.stderr
    assert ": ok (" in result.stdout


# --------------------------------------------------------------------------- on the broker


broker_names = st.text("abcdefghij-.:", min_size=1, max_size=6).filter(
    lambda name: not name.startswith("amq.")
)
Mix = Callable[[st.SearchStrategy[Any], st.SearchStrategy[Any]], st.SearchStrategy[Any]]


def mostly(
    valid: st.SearchStrategy[Any], hostile: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    """``valid`` seven times in eight, ``hostile`` otherwise."""
    return st.integers(0, 7).flatmap(lambda n: hostile if n == 0 else valid)


def only_valid(
    valid: st.SearchStrategy[Any], hostile: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    return valid


_plausible_arguments: dict[str, st.SearchStrategy[Any]] = {
    "x-message-ttl": st.sampled_from([0, 1000, 4294967295]),
    "x-expires": st.sampled_from([60000, 4294967295]),
    "x-max-length": st.sampled_from([0, 10, 2**63 - 1]),
    "x-overflow": st.sampled_from(["reject-publish", "drop-head", "reject-publish-dlx"]),
    "x-single-active-consumer": st.booleans(),
    "x-queue-leader-locator": st.just("balanced"),
    "x-max-priority": st.sampled_from([0, 10, 255]),
    "x-queue-mode": st.just("lazy"),
    "x-dead-letter-routing-key": st.just("k"),
    "x-quorum-initial-group-size": st.sampled_from([1, 3]),
}


def _merged(*tables: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for table in tables:
        merged.update(table)
    return merged


def plausible_documents(mix: Mix) -> st.SearchStrategy[dict[str, Any]]:
    """Topologies a service could write (coherent retry policies, real arguments), with
    hostile values mixed in by ``mix``. Arguments may still break a rule the loader knows
    (a classic-only argument on a quorum queue): those files must be refused."""
    arguments = mix(
        st.lists(
            st.one_of(*[st.tuples(st.just(k), v) for k, v in _plausible_arguments.items()]),
            max_size=2,
        ).map(dict),
        st.dictionaries(
            known_arguments,
            st.one_of(dates, deep_values, floats, huge_integers, st.just(4294967296)),
            max_size=1,
        ),
    )
    attempts = mix(st.integers(1, 6), huge_integers)
    tiers = mix(st.sampled_from(["1s", "30s", "5m", "1h"]), durations)
    queue_tables = st.builds(
        _merged,
        st.one_of(
            st.just({}),
            st.builds(lambda n, d: {"max_attempts": n, "dead_letter": d}, attempts, broker_names),
            st.builds(
                lambda n, d: {"type": "quorum", "max_attempts": n, "dead_letter": d},
                attempts,
                broker_names,
            ),
        ),
        st.fixed_dictionaries(
            {},
            optional={
                "dead_letter_exchange": st.sampled_from(["amq.direct", "ex"]),
                "delay": st.sampled_from(["memory", "dlx-ttl"]),
                "delay_tiers": st.lists(tiers, min_size=1, max_size=2),
                "arguments": arguments,
                "bindings": st.lists(
                    st.fixed_dictionaries(
                        {"exchange": st.sampled_from(["amq.topic", "amq.headers", "ex"])},
                        optional={
                            "routing_key": mix(st.text("ab.#*", max_size=5), texts),
                            "arguments": st.dictionaries(
                                st.sampled_from(["x-match", "h"]),
                                mix(
                                    st.sampled_from(["any", "all"]),
                                    st.one_of(st.just("bogus"), floats, dates),
                                ),
                                max_size=2,
                            ),
                        },
                    ),
                    max_size=2,
                ),
            },
        ),
    )
    return st.fixed_dictionaries(
        {"queues": st.dictionaries(mix(broker_names, names), queue_tables, min_size=1, max_size=3)},
        optional={"exchanges": st.just({"ex": {"type": "topic"}})},
    )


@pytest.mark.broker
@settings(
    max_examples=6,  # per broker (amqp_url runs the test on each server of RR_TEST_BROKERS)
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        # amqp_url is one URL for the whole test; every example makes a vhost of its own
        HealthCheck.function_scoped_fixture,
    ],
)
@given(document=st.one_of(plausible_documents(only_valid), plausible_documents(mostly)))
def test_declare_creates_the_whole_plan_or_nothing(amqp_url: str, document: dict[str, Any]) -> None:
    with _written(toml_document(document)) as path:
        _check_declare(amqp_url, path)


def _check_declare(amqp_url: str, path: Path) -> None:
    try:
        desired: Desired | None = expand(load_file(path))
    except ConfigError:
        desired = None
    pool = vhost_pool(current())  # a fresh vhost per example
    vhost = pool.take_now()
    url = vhost_url(amqp_url, vhost)
    try:
        result = runner.invoke(app, ["declare", str(path), "--url", url])
        event(f"exit {result.exit_code}")
        if desired is None:
            assert_clean_outcome(result, ok_codes=(78,))
            assert_holds_exactly(vhost, url, set(), set())
            return
        assert_clean_outcome(result, ok_codes=(0, 1))
        if result.exit_code == 1:  # a conflict (an exchange it uses is missing): no change
            assert "nothing was changed" in result.stderr, result.output
            assert_holds_exactly(vhost, url, set(), set())
            return
        assert_holds_exactly(
            vhost,
            url,
            {queue.name for queue in desired.queues},
            {exchange.name for exchange in desired.exchanges},
        )
    finally:
        pool.give_back(vhost)
