"""The producer API: ``rr.Publisher``, for code that publishes outside a handler (a web
endpoint that starts a refund); docs/reference/publishing.md.

::

    async with rr.Publisher("amqp://shop@mq1/", "amqp://shop@mq2/") as pub:
        await pub.publish(Refund(order="o-1"), to="refunds")

``publish`` returns once RabbitMQ confirmed the message; it raises
:class:`~rabbitctl_retry.errors.PublishReturned` when no queue took it (it goes out
``mandatory``) and :class:`~rabbitctl_retry.errors.PublishFailed` when the broker nacked it.
A connection lost under a publish (a node stopped) is opened again on the first of the URLs
that answers (``transport/failover.py``) and the message sent again, with the same
``message_id``: at least once.

The URLs are those of every command (docs/reference/cli.md, "Profiles"): given, else the profile
``profile`` of rr's configuration file, else ``$RR_URL`` / ``$RR_BROKER``, else the file's
``default``, else ``amqp://guest:guest@localhost:5672/``; ``vhost`` over them; TLS by the
URL's options (docs/reference/cli.md, "Connecting").
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from types import TracebackType
from typing import Any, TypeVar, Unpack

from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerUnreachable,
    ChannelClosed,
    PublishFailed,
    TransportError,
)
from rabbitctl_retry.runtime.outgoing import Outgoing, PublishOptions, outgoing
from rabbitctl_retry.telemetry.switch import tracing_for
from rabbitctl_retry.transport.base import Channel, Connection

DEFAULT_URL = "amqp://guest:guest@localhost:5672/"
RECONNECT_FOR_S = 30.0
"""How long a publish keeps trying to reconnect after its connection was lost."""

Connect = Callable[[], Awaitable[Connection]]
_T = TypeVar("_T")


def broker_urls(
    urls: Sequence[str], *, profile: str | None = None, vhost: str | None = None
) -> tuple[str, ...]:
    """The URLs a publisher connects to, by the rule of every command (module doc); each
    checked (:class:`~rabbitctl_retry.errors.UsageError` or
    :class:`~rabbitctl_retry.errors.ConfigError` naming what is wrong)."""
    from rabbitctl_retry.cli.broker_choice import BROKER_ENV, Choice, pick
    from rabbitctl_retry.cli.given_urls import env_urls
    from rabbitctl_retry.profiles import with_vhost
    from rabbitctl_retry.transport.url import parse_broker_url

    if urls:
        picked = pick(tuple(urls), from_env=False, choice=Choice(), topology_urls=())
    elif profile is not None:
        picked = pick((), from_env=False, choice=Choice(broker=profile), topology_urls=())
    else:
        from_env = env_urls(os.environ.get("RR_URL", "").split())
        broker = os.environ.get(BROKER_ENV) or None
        choice = Choice(broker=broker, broker_from_env=broker is not None)
        picked = pick(from_env, from_env=bool(from_env), choice=choice, topology_urls=())
    found = picked.from_file.urls() if picked.from_file is not None else picked.urls
    chosen = tuple(found or (DEFAULT_URL,))
    if vhost is not None:
        chosen = tuple(with_vhost(url, vhost) for url in chosen)
    for url in chosen:
        parse_broker_url(url)
    return chosen


class Publisher:
    """Publishes messages with confirms on one connection (module doc). Use it as an async
    context manager, or call :meth:`open` and :meth:`close`.

    ``connect``: what opens a connection, instead of the URLs (a test hands it
    ``TestBroker.connect``, the emulator's); ``client_name``: the connection's name on the
    broker; ``reconnect_for_s``: how long a publish keeps trying to reconnect;
    ``tracer_provider``: an OpenTelemetry tracer provider (else the process-wide one, if set):
    each publish is a PRODUCER span and its message carries ``traceparent`` and the publish
    stamp (docs/reference/runtime.md, "Tracing and metrics").
    """

    def __init__(
        self,
        *urls: str,
        profile: str | None = None,
        vhost: str | None = None,
        connect: Connect | None = None,
        client_name: str = "rr publisher",
        reconnect_for_s: float = RECONNECT_FOR_S,
        meter_provider: object | None = None,
        tracer_provider: object | None = None,
    ) -> None:
        """``meter_provider``: an OpenTelemetry ``MeterProvider`` each publish is counted
        through (else the global one, when set; docs/reference/metrics.md, "Metrics");
        ``tracer_provider``: a tracer provider each publish is traced with (else the global
        one, when set; docs/reference/runtime.md, "Tracing and metrics")."""
        from rabbitctl_retry.telemetry.metrics import OtelMetrics, meter_provider_in_use

        provider = meter_provider_in_use(meter_provider)
        self._metrics = OtelMetrics(provider) if provider is not None else None
        self.tracing = tracing_for(tracer_provider)
        """rr's tracing when on (decided here, once)."""
        if connect is None:
            connect = _url_connect(broker_urls(urls, profile=profile, vhost=vhost), client_name)
        self._connect = connect
        self._reconnect_for_s = reconnect_for_s
        self._connection: Connection | None = None
        self._channel: Channel | None = None
        self._lock = asyncio.Lock()
        self.connections = 0
        """How many connections this publisher opened (the first, and one per reconnection)."""

    @property
    def reconnects(self) -> int:
        """How many times a lost connection was opened again."""
        return max(0, self.connections - 1)

    async def __aenter__(self) -> Publisher:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """Connect now (else the first publish does)."""
        await self._confirm_channel()

    async def close(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None and not connection.is_closed:
            await connection.close()

    async def _confirm_channel(self) -> Channel:
        async with self._lock:
            if self._connection is None or self._connection.is_closed:
                self._connection = None
                self._connection = await self._connect()
                self.connections += 1
                self._channel = None
            if self._channel is None or self._channel.is_closed:
                self._channel = await self._connection.channel(confirms=True)
            return self._channel

    async def publish(self, message: object, **options: Unpack[PublishOptions]) -> str:
        """Publish ``message`` (encoded by its type: docs/reference/publishing.md) to queue ``to``,
        or to ``exchange`` with ``routing_key``, with the other ``options`` (``message_id``, a
        fresh UUID unless given; ``headers``; ``correlation_id``, ``expiration``... :
        :class:`~rabbitctl_retry.runtime.outgoing.PublishOptions`); return its
        ``message_id`` once the broker confirmed it."""
        return await self.publish_in(None, message, options)

    async def publish_in(
        self, context: object | None, message: object, options: PublishOptions
    ) -> str:
        """:meth:`publish`, its span a child of ``context`` (a trace context captured in
        another thread: :class:`SyncPublisher`'s caller's) or, ``None``, of the current span."""
        built = outgoing(message, message_id=str(uuid.uuid4()), options=options)
        tracing = self.tracing
        if tracing is None:
            await self._measured(built)
            return built.message_id
        with tracing.producing(built.destination, message_id=built.message_id, context=context):
            stamped = tracing.stamp_properties(built.properties)
            await self._measured(dataclasses.replace(built, properties=stamped))
        return built.message_id

    async def _measured(self, built: Outgoing) -> None:
        """:meth:`_send`, counted through the meter when metrics are on."""
        if self._metrics is None:
            await self._send(built)
            return
        started_s = time.perf_counter()
        failed = True
        try:
            await self._send(built)
            failed = False
        finally:
            self._metrics.sent(
                built.exchange or built.routing_key,
                time.perf_counter() - started_s,
                len(built.body),
                failed,
            )

    async def _send(self, message: Outgoing) -> None:
        """One message, sent again after a lost connection until ``reconnect_for_s``."""
        deadline = asyncio.get_running_loop().time() + self._reconnect_for_s
        pause_s = 0.1
        while True:
            try:
                channel = await self._confirm_channel()
                await channel.publish(
                    message.body,
                    exchange=message.exchange,
                    routing_key=message.routing_key,
                    properties=message.properties,
                    mandatory=True,
                )
                return
            except (PublishFailed, AccessRefused):
                raise
            except TransportError as error:
                if not self._lost(error) or asyncio.get_running_loop().time() >= deadline:
                    raise
            await asyncio.sleep(pause_s)
            pause_s = min(pause_s * 2, 2.0)

    def _lost(self, error: TransportError) -> bool:
        """Whether ``error`` lost the connection (then it is opened again), rather than said
        something about the message or its target (a missing exchange: raised)."""
        connection = self._connection
        return (
            isinstance(error, BrokerUnreachable | ChannelClosed)
            or connection is None
            or connection.is_closed
        )


class SyncPublisher:
    """:class:`Publisher` for code without an event loop (a WSGI view, a script): the same
    arguments and the same guarantee; it runs a :class:`Publisher` on an event loop of its
    own, in a thread of its own, and each call waits for its answer. Use it as a context
    manager, or call :meth:`close` (docs/reference/publishing.md, "From sync code")."""

    def __init__(self, *urls: str, **options: Any) -> None:
        self._publisher = Publisher(*urls, **options)  # a bad URL raises here, no thread yet
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="rr-publisher", daemon=True
        )
        self._thread.start()

    def _call(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        if not self._thread.is_alive():
            coroutine.close()
            raise RuntimeError("this SyncPublisher is closed")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def __enter__(self) -> SyncPublisher:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def reconnects(self) -> int:
        return self._publisher.reconnects

    def open(self) -> None:
        self._call(self._publisher.open())

    def publish(self, message: object, **options: Unpack[PublishOptions]) -> str:
        """:meth:`Publisher.publish`, waited for: the message id once the broker confirmed
        (its span a child of the caller's current span, when tracing is on)."""
        tracing = self._publisher.tracing
        context = tracing.current() if tracing is not None else None
        return self._call(self._publisher.publish_in(context, message, options))

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        try:
            self._call(self._publisher.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()


def _url_connect(urls: tuple[str, ...], client_name: str) -> Connect:
    async def connect() -> Connection:
        from rabbitctl_retry.transport import clients
        from rabbitctl_retry.transport.failover import connect_any

        async def one(url: str) -> Connection:
            return await clients.connect(url, client_name=client_name)

        return await connect_any(one, urls)

    return connect
