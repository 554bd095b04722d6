"""The pre-flight of ``rr declare``: a topology file is read and checked
(docs/reference/topology.md, "Malformed files"), expanded, and every frame ``rr declare`` would send
for it is encoded with the adapter's own encoder, offline (``transport/declare_frames.py``). So a
file ``rr topology validate`` calls ok is one ``rr declare`` can send whole, and a file that cannot
be sent is refused before the first frame goes out (exit 78), never half way through a declare.

``rr topology validate | show | export`` and ``rr declare`` load a file through
:func:`load_checked`. Nothing here connects.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from rabbitctl_retry.errors import ConfigError
from rabbitctl_retry.topology.expand import Desired, expand
from rabbitctl_retry.topology.load import load_text, read_topology_text, source_name
from rabbitctl_retry.topology.locate import line_of
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.topology.wire import describe_text
from rabbitctl_retry.transport.declare_frames import (
    exchange_declare_problem,
    exchange_lookup_problem,
    queue_bind_problem,
    queue_declare_problem,
)

Check = Callable[[], str | None]
"""Why one frame cannot be sent, or None (``transport/declare_frames.py``)."""


def declaration_checks(desired: Desired) -> list[tuple[str, str, Check]]:
    """A check of every frame ``rr declare`` sends for ``desired`` (passive look-ups,
    declarations and bindings), in the order it sends them, as ``(key path, what, check)``."""
    checks: list[tuple[str, str, Check]] = [
        ("", f"exchange {describe_text(name)}", partial(exchange_lookup_problem, name))
        for name in desired.referenced_exchanges
    ]
    checks.extend(
        (
            e.source,
            f"exchange {describe_text(e.name)}",
            partial(
                exchange_declare_problem,
                e.name,
                type=e.type,
                durable=e.durable,
                arguments=e.arguments,
            ),
        )
        for e in desired.exchanges
    )
    checks.extend(
        (
            q.source,
            f"queue {describe_text(q.name)}",
            partial(queue_declare_problem, q.name, durable=q.durable, arguments=q.arguments),
        )
        for q in desired.queues
    )
    checks.extend(
        (
            b.source,
            f"binding of {describe_text(b.queue)} to {describe_text(b.exchange)}",
            partial(queue_bind_problem, b.queue, b.exchange, b.routing_key, b.arguments),
        )
        for b in desired.bindings
    )
    return checks


def preflight(desired: Desired) -> None:
    """Encode every frame of ``desired`` as the transport would; offline.

    Raises:
        ConfigError: a frame cannot be encoded (with the key path of the entity), which the
            load-time checks should already have refused.
    """
    for path, what, check in declaration_checks(desired):
        problem = check()
        if problem is not None:
            raise ConfigError(f"{what} cannot be sent to RabbitMQ: {problem}", path=path or None)


def load_checked(path: Path) -> tuple[Topology, Desired]:
    """Read, check, expand and pre-flight a topology file (see the module docstring).

    Raises:
        ConfigError: the file is unreadable, invalid, or cannot be sent whole.
    """
    text = read_topology_text(path)
    source = source_name(path)
    topology = load_text(text, source=source)
    desired = expand(topology)
    try:
        preflight(desired)
    except ConfigError as error:
        line = line_of(text, error.path) if error.path else None
        raise error.located(source=source, line=line) from None
    return topology, desired
