"""The frames a declare sends, encoded offline with the adapter's own encoder: whether each
can be sent (docs/topology.md, "Malformed files").

Only pamqp (the codec under aiormq) is needed here, not the AMQP client, as for
``transport/values.py``'s :func:`~rabbitctl_retry.transport.values.encoding_problem`: the
shells use these as a dry run before the first frame of ``rr declare`` goes out
(``ops/preflight.py``). Each function returns why its frame cannot be encoded (the encoder's
own words), or None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pamqp import commands as spec
from pamqp.base import Frame

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.values import wire_arguments


def _problem(build: Callable[[], Frame]) -> str | None:
    try:
        build().marshal()
    except Exception as error:  # any encoder failure: ValueError, TypeError, struct.error
        return str(error)
    return None


def exchange_lookup_problem(name: str) -> str | None:
    """Why a passive ``exchange.declare`` of ``name`` cannot be sent, or None."""
    return _problem(lambda: spec.Exchange.Declare(exchange=name, passive=True))


def exchange_declare_problem(
    name: str, *, type: str, durable: bool, arguments: Mapping[str, FieldValue]
) -> str | None:
    """Why ``exchange.declare`` of this exchange cannot be sent, or None."""
    return _problem(
        lambda: spec.Exchange.Declare(
            exchange=name,
            exchange_type=type,
            durable=durable,
            arguments=wire_arguments(arguments),
        )
    )


def queue_declare_problem(
    name: str, *, durable: bool, arguments: Mapping[str, FieldValue]
) -> str | None:
    """Why ``queue.declare`` of this queue cannot be sent, or None."""
    return _problem(
        lambda: spec.Queue.Declare(queue=name, durable=durable, arguments=wire_arguments(arguments))
    )


def queue_bind_problem(
    queue: str, exchange: str, routing_key: str, arguments: Mapping[str, FieldValue]
) -> str | None:
    """Why ``queue.bind`` of this binding cannot be sent, or None."""
    return _problem(
        lambda: spec.Queue.Bind(
            queue=queue,
            exchange=exchange,
            routing_key=routing_key,
            arguments=wire_arguments(arguments),
        )
    )
