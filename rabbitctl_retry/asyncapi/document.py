"""Pure. A topology and the queues its handlers consume -> the service's AsyncAPI 3.0.0
document, as JSON-shaped data (docs/reference/topology.md, "The contract").

Channels: each queue a handler consumes (a ``receive_<queue>`` operation), each queue a
spent delivery of those goes to (a ``send_<queue>`` operation: the traffic is real, as
RustStream writes it) and each queue named with ``--send`` (a ``send_<queue>`` operation).
Each channel carries the AMQP channel binding of its queue (``is: queue``, name, durable,
exclusive, autoDelete, vhost). A ``receive`` operation whose queue has a cap or a dead
letter carries RustStream's extension exactly as RustStream writes it,
``x-ruststream-retry: {maxAttempts, deadLetter}``, and rr's own, ``x-rr-retry`` (the queue
type, what counts the attempts, the delay). Servers: the topology's broker URLs, host and
vhost only (never a user name or password).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rabbitctl_retry.topology.model import Queue, QueueType, Topology
from rabbitctl_retry.urls import AMQP_URL, split_url

ASYNCAPI_VERSION = "3.0.0"
AMQP_BINDING_VERSION = "0.3.0"
AMQP_PROTOCOL_VERSION = "0.9.1"
JSON_CONTENT_TYPE = "application/json"
RETRY_EXTENSION = "x-ruststream-retry"
"""RustStream's extension on a ``receive`` operation: ``maxAttempts`` (how many times a
delivery is handed to the handler before it is given up on), ``deadLetter`` (where it goes
then); a key without a value is left out."""
RR_RETRY_EXTENSION = "x-rr-retry"
"""rr's own extension beside it: what RustStream's does not say (docs/reference/topology.md, "The
contract")."""
DEFAULT_VHOST = "/"

_NOT_IN_ID = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True, slots=True)
class MessageSpec:
    """What a handler takes: a named or unnamed payload schema, or nothing known (the
    delivery itself, ``bytes``, ``str``)."""

    name: str | None = None
    """The type's name (a dataclass, a model): the message's name in the document."""
    payload: Mapping[str, Any] | None = None
    content_type: str | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class Consumer:
    """One handler: the queue it consumes, its name (``module:function``), its message."""

    queue: str
    handler: str
    message: MessageSpec


@dataclass(frozen=True, slots=True)
class Output:
    """A queue the handlers publish to (``--send``), and what they publish there when the
    command says (else nothing known)."""

    queue: str
    message: MessageSpec = MessageSpec()


@dataclass(frozen=True, slots=True)
class Service:
    """Everything the document is made of."""

    title: str
    version: str
    topology: Topology
    consumers: tuple[Consumer, ...]
    description: str | None = None
    sends: tuple[Output, ...] = ()
    """Queues the service publishes to (``--send``): a channel and a ``send`` operation each."""
    schemas: Mapping[str, Mapping[str, Any]] | None = None
    """The named schemas the payloads refer to (``#/components/schemas/NAME``)."""
    urls: tuple[str, ...] = ()
    """The broker URLs (``[broker] url`` or ``--url``): the servers."""


def vhost_of(url: str) -> str:
    """The vhost ``url`` logs in to, as rr's client reads it (no path: ``/``)."""
    path = split_url(url, AMQP_URL).after.partition("?")[0]
    return urllib.parse.unquote(path[1:]) if len(path) > 1 else DEFAULT_VHOST


def servers(urls: tuple[str, ...]) -> dict[str, Any]:
    """A server per URL: ``rabbitmq``, or ``rabbitmq-1``, ``rabbitmq-2``, ... for the nodes of
    a cluster; its host and port, its vhost as the path (none for ``/``)."""
    found: dict[str, Any] = {}
    for index, url in enumerate(urls, start=1):
        parts = split_url(url, AMQP_URL)
        host = f"[{parts.host}]" if parts.ipv6 else parts.host
        server: dict[str, Any] = {
            "host": f"{host}:{parts.port}",
            "protocol": parts.scheme,
            "protocolVersion": AMQP_PROTOCOL_VERSION,
        }
        vhost = vhost_of(url)
        if vhost != DEFAULT_VHOST:
            server["pathname"] = "/" + urllib.parse.quote(vhost, safe="")
        found["rabbitmq" if len(urls) == 1 else f"rabbitmq-{index}"] = server
    return found


def spent_destination(queue: Queue) -> str | None:
    """Where a delivery of ``queue`` goes once it is given up on: the ``dead_letter`` (rr's
    copy on a classic queue, the server's move on a quorum one), else, for a queue with a
    cap, the ``rejected`` queue its reject goes to (docs/reference/runtime.md's decision table)."""
    if queue.dead_letter is not None:
        return queue.dead_letter
    if max_attempts(queue) is not None:
        return queue.rejected
    return None


def max_attempts(queue: Queue) -> int | None:
    """How many times a delivery is handed to the handler at most: ``max_attempts``; on a
    quorum queue with only a raw ``delivery_limit``, that limit + 1 (the server hands a
    message over until it was returned ``delivery_limit`` times). A quorum queue with
    neither says nothing here: RabbitMQ 4's default limit of 20 depends on the server."""
    if queue.max_attempts is not None:
        return queue.max_attempts
    if queue.type is QueueType.QUORUM and queue.delivery_limit is not None:
        return queue.delivery_limit + 1
    return None


def ruststream_retry(queue: Queue) -> dict[str, Any]:
    """``x-ruststream-retry`` as RustStream writes it: ``maxAttempts`` and ``deadLetter``,
    each left out without a value (empty: no extension)."""
    found: dict[str, Any] = {}
    attempts = max_attempts(queue)
    if attempts is not None:
        found["maxAttempts"] = attempts
    destination = spent_destination(queue)
    if destination is not None:
        found["deadLetter"] = destination
    return found


def rr_retry(queue: Queue, retry_header: str) -> dict[str, Any]:
    """``x-rr-retry``: the queue type, what counts the attempts (``retryHeader``, the header
    on rr's copies; on a quorum queue also the server's ``x-delivery-count`` against
    ``deliveryLimit``), the delay (docs/reference/topology.md, "Delays"), the ``rejected`` queue."""
    found: dict[str, Any] = {"queueType": queue.type.value, "retryHeader": retry_header}
    if queue.server_delivery_limit is not None:
        found["deliveryLimit"] = queue.server_delivery_limit
    delay: dict[str, Any] = {"mode": queue.delay.value}
    if queue.wait_queue_names:
        delay["waitQueues"] = list(queue.wait_queue_names)
    if queue.delay_tiers_ms:
        delay["tiersMs"] = list(queue.delay_tiers_ms)
    if queue.delay_exchange is not None:
        delay["exchange"] = queue.delay_exchange
    if queue.server_delay is not None:
        delay["minMs"], delay["maxMs"] = queue.server_delay
        delay["returns"] = str(queue.delay_returns or "failed")
    found["delay"] = delay
    if queue.rejected is not None:
        found["rejected"] = queue.rejected
    return found


class _Ids:
    """Channel ids: each queue's name with every character outside ``A-Z a-z 0-9 . _ -``
    made ``_`` (a JSON pointer and an operation id take it as it is), unique."""

    def __init__(self) -> None:
        self.of: dict[str, str] = {}

    def __call__(self, queue: str) -> str:
        known = self.of.get(queue)
        if known is not None:
            return known
        base = _NOT_IN_ID.sub("_", queue)
        taken = set(self.of.values())
        found, number = base, 2
        while found in taken:
            found, number = f"{base}_{number}", number + 1
        self.of[queue] = found
        return found


def _ref(*parts: str) -> dict[str, str]:
    return {"$ref": "#/" + "/".join(parts)}


def document(service: Service) -> dict[str, Any]:
    """The AsyncAPI 3.0.0 document of ``service``."""
    return _Builder(service).build()


class _Builder:
    def __init__(self, service: Service) -> None:
        self.service = service
        self.queues = {queue.name: queue for queue in service.topology.queues}
        first_url = service.urls[0] if service.urls else None
        self.vhost = vhost_of(first_url) if first_url is not None else DEFAULT_VHOST
        self.ids = _Ids()
        self.channels: dict[str, Any] = {}
        self.operations: dict[str, Any] = {}
        self.messages: dict[str, Any] = {}

    def build(self) -> dict[str, Any]:
        consumed = _consumed(self.service.consumers)
        typed = {queue: self._typed(consumers) for queue, consumers in consumed.items()}
        raw = {
            queue: self._raw(queue)
            for queue, consumers in consumed.items()
            if any(consumer.message.payload is None for consumer in consumers)
        }
        sources = self._sources(consumed)
        incoming = {
            target: _unique(name for queue in from_ for name in typed[queue] or [raw[queue]])
            for target, from_ in sources.items()
        }
        for queue in consumed:
            heard = typed[queue] + incoming.get(queue, [])
            names = typed[queue] + (incoming.get(queue) or [raw[queue]] if queue in raw else [])
            self._channel(queue, _unique(heard + names))
            self._receive(queue, _unique(names))
        for target, from_ in sources.items():
            self._channel(target, incoming[target])
            self._send_spent(target, from_, incoming[target])
        for output in self.service.sends:
            self._send_output(output)
        return self._document()

    def _send_output(self, output: Output) -> None:
        """An output queue: its channel, its ``send`` operation (the dead letter's, when it
        is one too), its message when the command named its type."""
        names = self._typed([output])
        self._channel(output.queue, names)
        channel_id = self.ids(output.queue)
        operation = self.operations.setdefault(
            f"send_{channel_id}", {"action": "send", "channel": _ref("channels", channel_id)}
        )
        listed = operation.setdefault("messages", [])
        for name in names:
            reference = _ref("channels", channel_id, "messages", name)
            if reference not in listed:
                listed.append(reference)
        if not listed:
            del operation["messages"]

    def _typed(self, consumers: Sequence[Consumer | Output]) -> list[str]:
        names = []
        for consumer in consumers:
            message = consumer.message
            if message.payload is None:
                continue
            name = message.name or f"{self.ids(consumer.queue)}.message"
            self.messages.setdefault(name, _message_object(name, message))
            names.append(name)
        return _unique(names)

    def _raw(self, queue: str) -> str:
        """The message of an untyped handler: a name, no schema (in the document once a
        channel lists it)."""
        return f"{self.ids(queue)}.message"

    def _sources(self, consumed: Mapping[str, list[Consumer]]) -> dict[str, list[str]]:
        """Each queue a consumed queue's spent deliveries go to -> those queues."""
        found: dict[str, list[str]] = {}
        for queue in consumed:
            topology_queue = self.queues.get(queue)
            target = spent_destination(topology_queue) if topology_queue else None
            if target is not None:
                found.setdefault(target, []).append(queue)
        return found

    def _channel(self, queue: str, messages: list[str]) -> None:
        channel_id = self.ids(queue)
        channel = self.channels.setdefault(
            channel_id, {"address": queue, "bindings": {"amqp": self._queue_binding(queue)}}
        )
        known = channel.setdefault("messages", {})
        for name in messages:
            self.messages.setdefault(name, {"name": name})  # an untyped handler's
            known.setdefault(name, _ref("components", "messages", name))
        if not known:
            del channel["messages"]

    def _queue_binding(self, name: str) -> dict[str, Any]:
        queue: dict[str, Any] = {"name": name}
        declared = self.queues.get(name)
        if declared is not None:
            queue |= {"durable": declared.durable, "exclusive": False, "autoDelete": False}
        queue["vhost"] = self.vhost
        return {"is": "queue", "queue": queue, "bindingVersion": AMQP_BINDING_VERSION}

    def _receive(self, queue: str, messages: list[str]) -> None:
        channel_id = self.ids(queue)
        operation: dict[str, Any] = {
            "action": "receive",
            "channel": _ref("channels", channel_id),
            "messages": [_ref("channels", channel_id, "messages", name) for name in messages],
            "bindings": {"amqp": {"ack": True, "bindingVersion": AMQP_BINDING_VERSION}},
        }
        handlers = [c.handler for c in self.service.consumers if c.queue == queue]
        operation["description"] = "Handled by " + ", ".join(handlers) + "."
        declared = self.queues.get(queue)
        if declared is not None:
            extension = ruststream_retry(declared)
            if extension:
                operation[RETRY_EXTENSION] = extension
            operation[RR_RETRY_EXTENSION] = rr_retry(
                declared, self.service.topology.broker.retry_header
            )
        self.operations[f"receive_{channel_id}"] = operation

    def _send_spent(self, target: str, from_: list[str], messages: list[str]) -> None:
        channel_id = self.ids(target)
        by_server = [q for q in from_ if self.queues[q].type is QueueType.QUORUM]
        words = [f"Deliveries of {', '.join(from_)} given up on"]
        if by_server:
            words.append(f"(moved by the server from the quorum queue {', '.join(by_server)})")
        operation: dict[str, Any] = {
            "action": "send",
            "channel": _ref("channels", channel_id),
            "description": " ".join(words) + ".",
        }
        if messages:
            operation["messages"] = [
                _ref("channels", channel_id, "messages", name) for name in messages
            ]
        self.operations[f"send_{channel_id}"] = operation

    def _document(self) -> dict[str, Any]:
        service = self.service
        info: dict[str, Any] = {"title": service.title, "version": service.version}
        if service.description:
            info["description"] = service.description
        found: dict[str, Any] = {"asyncapi": ASYNCAPI_VERSION, "info": info}
        if service.urls:
            found["servers"] = servers(service.urls)
        content_types = {m.get("contentType") for m in self.messages.values()}
        if len(content_types) == 1 and None not in content_types:
            found["defaultContentType"] = content_types.pop()
        found["channels"] = self.channels
        found["operations"] = self.operations
        components: dict[str, Any] = {}
        if self.messages:
            components["messages"] = self.messages
        if service.schemas:
            components["schemas"] = {k: dict(v) for k, v in service.schemas.items()}
        if components:
            found["components"] = components
        return found


def _consumed(consumers: tuple[Consumer, ...]) -> dict[str, list[Consumer]]:
    found: dict[str, list[Consumer]] = {}
    for consumer in consumers:
        found.setdefault(consumer.queue, []).append(consumer)
    return found


def _message_object(name: str, message: MessageSpec) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name}
    if message.description:
        found["description"] = message.description
    if message.content_type:
        found["contentType"] = message.content_type
    if message.payload is not None:
        found["payload"] = dict(message.payload)
    return found


def _unique(names: Any) -> list[str]:
    return list(dict.fromkeys(names))


__all__ = [
    "ASYNCAPI_VERSION",
    "RETRY_EXTENSION",
    "RR_RETRY_EXTENSION",
    "Consumer",
    "MessageSpec",
    "Output",
    "Service",
    "document",
    "max_attempts",
    "ruststream_retry",
    "spent_destination",
]
