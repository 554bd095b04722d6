"""TOML -> :class:`Topology`, with errors that name the key path and the line.

Pure but for :func:`read_topology_text`, the one function that reads a file. Every key of
docs/reference/topology.md is known here; an unknown key is refused with a "did you mean"
suggestion, a wrong type names what was expected, and every error carries the file and line where
the key was written. Malformed input (docs/reference/topology.md, "Malformed files") ends as a
:class:`ConfigError` too: a file that is not a regular file or is over
:data:`MAX_FILE_BYTES`, TOML nested too deep for the parser, integers of thousands of digits.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from rabbitctl_retry.errors import ConfigError
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.suggestions import close_matches
from rabbitctl_retry.topology.keypath import key_path
from rabbitctl_retry.topology.locate import line_of
from rabbitctl_retry.topology.model import (
    Binding,
    Broker,
    DeadLetterStrategy,
    DelayMode,
    Exchange,
    PublishMode,
    Queue,
    QueueType,
    ServerDelayReturns,
    SettingsMode,
    Topology,
    frozen_mapping,
)
from rabbitctl_retry.topology.naming import parse_duration_ms
from rabbitctl_retry.topology.wire import (
    MAX_NESTING_DEPTH,
    describe_text,
    describe_value,
    document_problem,
    escape_unprintable,
)
from rabbitctl_retry.user_files import TOPOLOGY_FILE_LIMIT_BYTES, FileRefused, read_text

MAX_FILE_BYTES = TOPOLOGY_FILE_LIMIT_BYTES
"""The largest topology file rr reads (1 MiB); a larger one is refused unread."""

TOP_KEYS = ("broker", "queues", "exchanges")
BROKER_KEYS = ("url", "retry_header", "management_url", "settings")
QUEUE_KEYS = (
    "type",
    "durable",
    "max_attempts",
    "dead_letter",
    "dead_letter_exchange",
    "rejected",
    "delivery_limit",
    "delay",
    "wait_queue",
    "wait_queue_type",
    "delay_tiers",
    "delay_min",
    "delay_max",
    "delay_returns",
    "publish",
    "dead_letter_strategy",
    "replicas",
    "arguments",
    "bindings",
    "settings",
)
BINDING_KEYS = ("exchange", "routing_key", "arguments")
EXCHANGE_KEYS = ("type", "durable", "arguments")

_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")
_E = TypeVar(
    "_E", QueueType, DelayMode, PublishMode, DeadLetterStrategy, ServerDelayReturns, SettingsMode
)


def load_file(path: str | Path) -> Topology:
    """Read and check a topology file.

    Raises:
        ConfigError: the file cannot be read, is not TOML, or describes an invalid topology;
            the error names the file, the line and the key path.
    """
    return load_text(read_topology_text(path), source=source_name(path))


def source_name(path: str | Path) -> str:
    """The file name as errors show it: control characters escaped."""
    return escape_unprintable(str(path))


def read_topology_text(path: str | Path) -> str:
    """The text of a topology file: a regular file of at most :data:`MAX_FILE_BYTES` bytes of
    UTF-8, read by ``user_files.py``'s rule (at most ``MAX_FILE_BYTES + 1`` bytes are read, and
    a FIFO or device is refused without reading, or waiting for, anything).

    Raises:
        ConfigError: no such file, not a regular file, too large, unreadable, not UTF-8.
    """
    try:
        return read_text(path, limit_bytes=MAX_FILE_BYTES)
    except FileRefused as refused:
        hint = "; give the path of a TOML file" if refused.not_regular else ""
        raise ConfigError(
            refused.reason + hint, source=source_name(path), line=refused.line
        ) from None


_LONG_DIGITS = re.compile(r"[0-9_]+")


def _line_of_long_number(text: str) -> int | None:
    """The line of the first run of more than 4300 digits (Python refuses to read those)."""
    for match in _LONG_DIGITS.finditer(text):
        if match.end() - match.start() > 4300:
            return text.count("\n", 0, match.start()) + 1
    return None


def load_text(text: str, *, source: str = "<topology>") -> Topology:
    """Parse and check TOML text; see :func:`load_file`."""
    try:
        document = tomllib.loads(text)
    except RecursionError:
        raise ConfigError(
            f"not valid TOML for rr: arrays or inline tables nest too deep (rr takes at most "
            f"{MAX_NESTING_DEPTH} levels)",
            source=source,
        ) from None
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        position = _TOML_POSITION.search(message)
        line = int(position.group(1)) if position else None
        if line is None and "end of document" in message:
            line = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
        detail = _TOML_POSITION.sub("", message).strip()
        if position:
            detail += f" (column {position.group(2)})"
        raise ConfigError(f"not valid TOML: {detail}", source=source, line=line) from None
    except ValueError:
        # tomllib reads integers with int(), which refuses more than 4300 digits.
        raise ConfigError(
            "not valid TOML for rr: a number of thousands of digits (integers are at most 64 bits)",
            source=source,
            line=_line_of_long_number(text),
        ) from None
    problem = document_problem(document)
    if problem is not None:
        path = key_path(*problem.at)
        raise ConfigError(problem.reason, path=path, source=source, line=line_of(text, path))
    try:
        return parse_document(document)
    except ConfigError as error:
        line = line_of(text, error.path) if error.path else None
        raise error.located(source=source, line=line) from None


def parse_document(document: Mapping[str, Any]) -> Topology:
    """A parsed TOML document -> :class:`Topology` (no file, no line numbers)."""
    _refuse_unknown(document, TOP_KEYS, ())
    broker = _parse_broker(_table(document, "broker", ("broker",)))
    queues_table = _table(document, "queues", ("queues",))
    exchanges_table = _table(document, "exchanges", ("exchanges",))
    queues = tuple(
        _parse_queue(name, _as_table(value, ("queues", name)))
        for name, value in queues_table.items()
    )
    exchanges = tuple(
        _parse_exchange(name, _as_table(value, ("exchanges", name)))
        for name, value in exchanges_table.items()
    )
    return Topology(broker=broker, queues=queues, exchanges=exchanges)


def _parse_broker(table: Mapping[str, Any]) -> Broker:
    _refuse_unknown(table, BROKER_KEYS, ("broker",))
    urls = _broker_urls(table.get("url"))
    header = _optional(table, "retry_header", str, ("broker",))
    management_url = _optional(table, "management_url", str, ("broker",))
    settings = _enum(table, "settings", SettingsMode, SettingsMode.ARGUMENTS, ("broker",))
    if header is None:
        return Broker(urls=urls, management_url=management_url, settings=settings)
    return Broker(urls=urls, retry_header=header, management_url=management_url, settings=settings)


def _broker_urls(value: object) -> tuple[str, ...]:
    """``url = "amqp://..."`` or ``url = ["amqp://node1", "amqp://node2"]``."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return tuple(value)
    if isinstance(value, list) and not value:
        raise ConfigError("must name at least one URL", path="broker.url")
    raise ConfigError(
        f"must be a URL string or a list of URL strings, not {_describe(value)}", path="broker.url"
    )


def _parse_queue(name: str, table: Mapping[str, Any]) -> Queue:
    at = ("queues", name)
    _refuse_unknown(table, QUEUE_KEYS, at)
    queue_type = _enum(table, "type", QueueType, QueueType.CLASSIC, at)
    tiers = _delay_tiers(table, at)
    default_delay = DelayMode.DLX_TTL if tiers else DelayMode.MEMORY
    return Queue(
        name=name,
        type=queue_type,
        durable=_default(_optional(table, "durable", bool, at), True),
        max_attempts=_optional(table, "max_attempts", int, at),
        dead_letter=_optional(table, "dead_letter", str, at),
        dead_letter_exchange=_optional(table, "dead_letter_exchange", str, at),
        rejected=_optional(table, "rejected", str, at),
        delivery_limit=_optional(table, "delivery_limit", int, at),
        delay=_enum(table, "delay", DelayMode, default_delay, at),
        wait_queue=_optional(table, "wait_queue", str, at),
        wait_queue_type=_optional_enum(table, "wait_queue_type", QueueType, at),
        delay_tiers_ms=tiers,
        delay_min_ms=_optional_duration(table, "delay_min", at),
        delay_max_ms=_optional_duration(table, "delay_max", at),
        delay_returns=_optional_enum(table, "delay_returns", ServerDelayReturns, at),
        publish=_enum(table, "publish", PublishMode, PublishMode.CONFIRM, at),
        dead_letter_strategy=_optional_enum(table, "dead_letter_strategy", DeadLetterStrategy, at),
        replicas=_optional(table, "replicas", int, at),
        arguments=frozen_mapping(_arguments(table, at)),
        bindings=_bindings(name, table, at),
        settings=_optional_enum(table, "settings", SettingsMode, at),
    )


def _parse_exchange(name: str, table: Mapping[str, Any]) -> Exchange:
    at = ("exchanges", name)
    _refuse_unknown(table, EXCHANGE_KEYS, at)
    return Exchange(
        name=name,
        type=_default(_optional(table, "type", str, at), "direct"),
        durable=_default(_optional(table, "durable", bool, at), True),
        arguments=frozen_mapping(_arguments(table, at)),
    )


def _bindings(queue: str, table: Mapping[str, Any], at: tuple[str, ...]) -> tuple[Binding, ...]:
    raw = table.get("bindings")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(
            'must be a list of tables like [{ exchange = "...", routing_key = "..." }]',
            path=key_path(*at, "bindings"),
        )
    bindings = []
    for index, item in enumerate(raw):
        path = key_path(*at, "bindings", index)
        if not isinstance(item, dict):
            raise ConfigError("must be a table with exchange and routing_key", path=path)
        unknown = [key for key in item if key not in BINDING_KEYS]
        if unknown:
            raise ConfigError(
                _unknown_message(unknown[0], BINDING_KEYS),
                path=key_path(*at, "bindings", index, unknown[0]),
            )
        exchange = item.get("exchange")
        if not isinstance(exchange, str):
            raise ConfigError("exchange is required and must be a string", path=f"{path}.exchange")
        routing_key = item.get("routing_key", "")
        if not isinstance(routing_key, str):
            raise ConfigError("must be a string", path=f"{path}.routing_key")
        arguments = item.get("arguments", {})
        if not isinstance(arguments, dict):
            raise ConfigError("must be a table", path=f"{path}.arguments")
        bindings.append(
            Binding(
                queue=queue,
                exchange=exchange,
                routing_key=routing_key,
                arguments=frozen_mapping(arguments),
                path=path,
            )
        )
    return tuple(bindings)


def _delay_tiers(table: Mapping[str, Any], at: tuple[str, ...]) -> tuple[int, ...]:
    raw = table.get("delay_tiers")
    if raw is None:
        return ()
    path = key_path(*at, "delay_tiers")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(
            'must be a non-empty list of durations like ["1s", "30s", "5m"]', path=path
        )
    return tuple(
        _duration_ms(item, key_path(*at, "delay_tiers", index)) for index, item in enumerate(raw)
    )


def _optional_duration(table: Mapping[str, Any], key: str, at: tuple[str, ...]) -> int | None:
    raw = table.get(key)
    return None if raw is None else _duration_ms(raw, key_path(*at, key))


def _duration_ms(raw: object, path: str) -> int:
    if not isinstance(raw, str):
        raise ConfigError(f'must be a duration string like "30s", not {_describe(raw)}', path=path)
    try:
        return parse_duration_ms(raw)
    except ValueError as error:
        raise ConfigError(str(error), path=path) from None


def _arguments(table: Mapping[str, Any], at: tuple[str, ...]) -> dict[str, FieldValue]:
    raw = table.get("arguments")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError("must be a table of x- arguments", path=key_path(*at, "arguments"))
    return dict(raw)


def _table(document: Mapping[str, Any], key: str, at: tuple[str, ...]) -> Mapping[str, Any]:
    value = document.get(key)
    if value is None:
        return {}
    return _as_table(value, at)


def _as_table(value: object, at: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"must be a table, not {_describe(value)}", path=key_path(*at))
    return value


_T = TypeVar("_T")


def _optional(table: Mapping[str, Any], key: str, kind: type[_T], at: tuple[str, ...]) -> _T | None:
    value = table.get(key)
    if value is None:
        return None
    wrong_bool = kind is int and isinstance(value, bool)
    if not isinstance(value, kind) or wrong_bool:
        expected = {str: "a string", int: "an integer", bool: "true or false"}[kind]
        raise ConfigError(f"must be {expected}, not {_describe(value)}", path=key_path(*at, key))
    return value


def _default(value: _T | None, default: _T) -> _T:
    return default if value is None else value


def _enum(
    table: Mapping[str, Any], key: str, kind: type[_E], default: _E, at: tuple[str, ...]
) -> _E:
    value = _optional_enum(table, key, kind, at)
    return default if value is None else value


def _optional_enum(
    table: Mapping[str, Any], key: str, kind: type[_E], at: tuple[str, ...]
) -> _E | None:
    raw = _optional(table, key, str, at)
    if raw is None:
        return None
    try:
        return kind(raw)
    except ValueError:
        choices = [member.value for member in kind]
        hint = _suggest(raw, choices)
        raise ConfigError(
            f"must be one of {', '.join(repr(c) for c in choices)}, not {describe_text(raw)}{hint}",
            path=key_path(*at, key),
        ) from None


def _refuse_unknown(table: Mapping[str, Any], known: tuple[str, ...], at: tuple[str, ...]) -> None:
    for key in table:
        if key not in known:
            raise ConfigError(_unknown_message(key, known), path=key_path(*at, key))


def _unknown_message(key: str, known: tuple[str, ...]) -> str:
    return f"unknown key {describe_text(key)}{_suggest(key, known)}; known keys: {', '.join(known)}"


def _suggest(word: str, choices: tuple[str, ...] | list[str]) -> str:
    matches = close_matches(word, choices, most=1)
    return f" (did you mean {matches[0]!r}?)" if matches else ""


def _describe(value: object) -> str:
    return describe_value(value)
