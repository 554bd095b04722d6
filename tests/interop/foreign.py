"""Real clients other than rr, from PyPI (the ``dev`` extra): pika and kombu, as the services
that share rr's queues use them (docs/reference/cli.md, "Consumers that are not rr").

Each consumer runs its client's own loop in a thread of its own and settles every delivery as
told: ``ack``, ``reject`` (``basic.reject`` without requeue), ``nack`` (``basic.nack``
without requeue), ``requeue`` (``basic.reject`` with requeue) or ``nack-requeue``
(``basic.nack`` with requeue). It counts what it was
delivered by ``message_id``, so that a test can wait for progress and count every id.
Nothing here talks to rr: these are the other clients.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal
from urllib.parse import quote

import kombu
import pika

Settle = Literal["ack", "reject", "nack", "requeue", "nack-requeue"]


class Seen:
    """What a consumer was delivered: each message id, how many times (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, message_id: str) -> None:
        with self._lock:
            self._counts[message_id] += 1

    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(self._counts)


def pika_url(amqp_url: str, connection_name: str) -> str:
    """``amqp_url`` for pika, its connection named ``connection_name`` (its client
    property, as a service would name it)."""
    properties = quote(f"{{'connection_name': '{connection_name}'}}", safe="")
    separator = "&" if "?" in amqp_url else "?"
    return f"{amqp_url}{separator}client_properties={properties}"


@contextmanager
def pika_consumer(
    amqp_url: str, queue: str, settle: Settle, *, connection_name: str = "svc-pika"
) -> Iterator[Seen]:
    """A pika 1.x consumer of ``queue`` (prefetch 1, declared passively as a service sharing
    rr's queue should), settling every delivery by ``settle``; stopped after the block."""
    seen = Seen()
    connection = pika.BlockingConnection(pika.URLParameters(pika_url(amqp_url, connection_name)))
    channel = connection.channel()
    channel.queue_declare(queue, passive=True)
    channel.basic_qos(prefetch_count=1)

    def on_message(chan: Any, method: Any, properties: pika.BasicProperties, body: bytes) -> None:
        seen.add(properties.message_id or "")
        match settle:
            case "ack":
                chan.basic_ack(method.delivery_tag)
            case "reject":
                chan.basic_reject(method.delivery_tag, requeue=False)
            case "nack":
                chan.basic_nack(method.delivery_tag, requeue=False)
            case "requeue":
                chan.basic_reject(method.delivery_tag, requeue=True)
            case "nack-requeue":
                chan.basic_nack(method.delivery_tag, requeue=True)

    channel.basic_consume(queue, on_message)
    thread = threading.Thread(target=channel.start_consuming, name="pika-consumer")
    thread.start()
    try:
        yield seen
    finally:
        connection.add_callback_threadsafe(channel.stop_consuming)
        thread.join(timeout=30)
        connection.close()


def pika_declare(amqp_url: str, queue: str, arguments: dict[str, Any] | None = None) -> None:
    """``queue`` declared as a pika service declares its queue: durable, with ``arguments``
    (none names a type unless they do)."""
    connection = pika.BlockingConnection(pika.URLParameters(pika_url(amqp_url, "svc-pika")))
    try:
        connection.channel().queue_declare(queue, durable=True, arguments=arguments)
    finally:
        connection.close()


def kombu_declare(amqp_url: str, queue: str, arguments: dict[str, Any] | None = None) -> None:
    """``queue`` declared as kombu (and Celery) declares its queues: ``kombu.Queue`` with
    ``queue_arguments``, durable."""
    with kombu.Connection(amqp_url) as connection:
        kombu.Queue(queue, queue_arguments=arguments or None, durable=True)(
            connection.default_channel
        ).declare()


@contextmanager
def kombu_consumer(
    amqp_url: str, queue: str, settle: Settle, *, connection_name: str = "svc-kombu"
) -> Iterator[Seen]:
    """A kombu 5 consumer (py-amqp underneath) of ``queue``, which it does not declare
    (``no_declare``), settling every delivery by ``settle`` (``message.reject()``,
    ``message.requeue()``; kombu has no nack: ``nack`` rejects); stopped after the block."""
    seen = Seen()
    connection = kombu.Connection(
        amqp_url, transport_options={"client_properties": {"connection_name": connection_name}}
    )
    stop = threading.Event()

    def on_message(message: kombu.Message) -> None:
        seen.add(message.properties.get("message_id") or "")
        if settle == "ack":
            message.ack()
        elif settle in ("requeue", "nack-requeue"):
            message.requeue()
        else:
            message.reject()

    consumer = connection.Consumer(
        [kombu.Queue(queue, no_declare=True)],
        on_message=on_message,  # the raw message: kombu decodes nothing
        prefetch_count=1,
    )
    consumer.consume()

    def drain() -> None:
        while not stop.is_set():
            try:
                connection.drain_events(timeout=0.2)
            except TimeoutError:
                continue

    thread = threading.Thread(target=drain, name="kombu-consumer")
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(timeout=30)
        consumer.cancel()
        connection.release()
