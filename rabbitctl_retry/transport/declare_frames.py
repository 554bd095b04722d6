"""The frames a declare sends, encoded offline with the adapter's own encoder: whether each
can be sent (docs/reference/topology.md, "Malformed files").

Only pamqp (the codec under aiormq) is needed here, not the AMQP client, as for
``transport/values.py``'s :func:`~rabbitctl_retry.transport.values.encoding_problem`: the
shells use these as a dry run before the first frame of ``rr declare`` goes out
(``ops/preflight.py``). Each function returns why its frame cannot be encoded (the encoder's
own words), or None. They build the frames rr's own client sends (``transport/native.py``):
what is checked offline is what goes out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pamqp import commands as spec
from pamqp.base import Frame

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Binding, ExchangeDeclare, QueueDeclare
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
    request = ExchangeDeclare(name, type, durable=durable, arguments=arguments)
    return _problem(lambda: exchange_declare_frame(request))


def queue_declare_problem(
    name: str, *, durable: bool, arguments: Mapping[str, FieldValue]
) -> str | None:
    """Why ``queue.declare`` of this queue cannot be sent, or None."""
    request = QueueDeclare(name, durable=durable, arguments=arguments)
    return _problem(lambda: queue_declare_frame(request))


def queue_bind_problem(
    queue: str, exchange: str, routing_key: str, arguments: Mapping[str, FieldValue]
) -> str | None:
    """Why ``queue.bind`` of this binding cannot be sent, or None."""
    request = Binding(queue, exchange, routing_key, arguments, unbind=False)
    return _problem(lambda: binding_frame(request))


# The frames themselves, as rr's own client sends them (``transport/native.py``).


def queue_declare_frame(request: QueueDeclare) -> spec.Queue.Declare:
    return spec.Queue.Declare(
        queue=request.queue,
        passive=request.passive,
        durable=request.durable,
        exclusive=request.exclusive,
        auto_delete=request.auto_delete,
        arguments=wire_arguments(request.arguments),
    )


def exchange_declare_frame(request: ExchangeDeclare) -> spec.Exchange.Declare:
    return spec.Exchange.Declare(
        exchange=request.exchange,
        exchange_type=request.type,
        passive=request.passive,
        durable=request.durable,
        auto_delete=request.auto_delete,
        internal=request.internal,
        arguments=wire_arguments(request.arguments),
    )


def binding_frame(request: Binding) -> spec.Queue.Bind | spec.Queue.Unbind:
    kind = spec.Queue.Unbind if request.unbind else spec.Queue.Bind
    return kind(
        queue=request.queue,
        exchange=request.exchange,
        routing_key=request.routing_key,
        arguments=wire_arguments(request.arguments),
    )
