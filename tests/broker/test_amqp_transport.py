"""Both AMQP adapters against a real RabbitMQ: connect, errors, values on the wire, TLS.

Every test runs once with each client ``RR_AMQP_CLIENT`` chooses (``transport/clients.py``):
aiormq's adapter and rr's own; the port promises the same behaviour from both.

Every test names its queues ``rr-test-<uuid>-...`` and deletes them. Tests that read server
state (argument types, connections, vhosts) use the local ``rabbitmqctl``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import ssl
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerUnreachable,
    ChannelClosed,
    DataError,
    ExitCode,
    NotFound,
    PreconditionFailed,
    PublishFailed,
    ResourceLocked,
    RrError,
)
from rabbitctl_retry.ops.copies.properties import copy_properties
from rabbitctl_retry.retry.headers import copy_headers
from rabbitctl_retry.server import ServerVersion
from rabbitctl_retry.transport import clients
from rabbitctl_retry.transport.base import Channel, Connection, Delivery, Properties, QueueInfo
from tests.backends import vhost_url
from tests.hostile.raw_amqp import RawPublish, get_raw, send_raw
from tests.ledger import wait_until
from tests.shared_node import ctl_command, current
from tests.wire_headers import (
    TYPED_NAMES,
    TYPED_TABLE,
    as_the_server_writes_it,
    header_table,
    message_id_of,
    parse,
    properties,
)

# The tests that take amqp_url (or conn, scratch, upstream) are marked broker by it
# (tests/conftest.py); the others never reach a broker and run without one.


# --- helpers -------------------------------------------------------------------------------


@pytest.fixture(autouse=True, params=clients.CHOICES)
def client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The AMQP client of this run of the test: every test runs with each."""
    monkeypatch.setenv(clients.ENV, request.param)
    return str(request.param)


async def connect(url: str, **options: float | str) -> Connection:
    return await clients.connect(url, **options)  # type: ignore[arg-type]


def _with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username or 'guest'}:{password}@{parts.hostname}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _rabbitmqctl(*args: str) -> str:
    if shutil.which("rabbitmqctl") is None:
        pytest.skip("needs rabbitmqctl next to the broker")
    done = subprocess.run(
        ctl_command(*args), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _queue_arguments(name: str, vhost: str | None = None) -> dict[str, tuple[str, object]]:
    """{argument: (AMQP type, value)} of queue ``name`` as the broker stored them, in
    ``vhost`` (default: the one the test broker's URL names, where ``conn`` declares)."""
    vhost = current().vhost if vhost is None else vhost
    out = _rabbitmqctl("list_queues", "-q", "-p", vhost, "name", "arguments", "--formatter", "json")
    for row in json.loads(out):
        if row["name"] == name:
            return {key: (kind, value) for key, kind, value in row["arguments"]}
    raise AssertionError(f"queue {name!r} not on the broker")


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def uid() -> str:
    return f"rr-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def conn(amqp_url: str, uid: str) -> AsyncIterator[Connection]:
    connection = await connect(amqp_url, client_name=uid)
    yield connection
    await connection.close()


@dataclass
class Scratch:
    """Names this test declares; the fixture deletes them afterwards."""

    uid: str
    queues: list[str]
    exchanges: list[str]

    def queue(self, suffix: str) -> str:
        self.queues.append(name := f"{self.uid}-{suffix}")
        return name

    def exchange(self, suffix: str) -> str:
        self.exchanges.append(name := f"{self.uid}-{suffix}")
        return name


@pytest.fixture
async def scratch(conn: Connection, uid: str) -> AsyncIterator[Scratch]:
    names = Scratch(uid, [], [])
    yield names
    for delete, items in (("queue_delete", names.queues), ("exchange_delete", names.exchanges)):
        for name in items:
            channel = await conn.channel()
            with suppress(RrError):
                await getattr(channel, delete)(name)
            await channel.close()


# --- connect ------------------------------------------------------------------------------


async def test_connect_reads_server_version_and_closes_idempotently(amqp_url: str) -> None:
    connection = await connect(amqp_url)
    expected = ServerVersion.parse(_rabbitmqctl("version").strip())
    assert connection.server_version == expected
    assert connection.server_version.major >= 3
    assert not connection.is_closed
    assert "******" in connection.url or urlsplit(amqp_url).password is None

    await connection.close()
    await connection.close()
    assert connection.is_closed
    with pytest.raises(ChannelClosed, match="the connection is closed"):
        await connection.channel()


async def test_client_name_is_the_connection_name(amqp_url: str, uid: str) -> None:
    connection = await connect(amqp_url, client_name=uid)
    try:
        out = _rabbitmqctl("list_connections", "-q", "client_properties", "--formatter", "json")
        # Other tests' connections share the node; one still opening (or closing) lists its
        # client_properties in another shape (seen on 4.0.5 in CI): only [key, type, value]
        # triples are read.
        names = {
            entry[2]
            for row in json.loads(out)
            for entry in row["client_properties"]
            if isinstance(entry, list) and len(entry) == 3 and entry[0] == "connection_name"
        }
        assert uid in names
    finally:
        await connection.close()


async def test_closed_port_is_unreachable_at_once() -> None:
    url = f"amqp://guest:guest@127.0.0.1:{_unused_port()}/"
    started = time.monotonic()
    with pytest.raises(BrokerUnreachable) as caught:
        await connect(url, timeout_s=60.0)
    # refused at once: it did not wait for the timeout (a bound no busy machine reaches)
    assert time.monotonic() - started < 60.0
    assert caught.value.exit_code == ExitCode.UNAVAILABLE
    assert "connection refused" in str(caught.value)
    assert "127.0.0.1" in str(caught.value)


async def test_silent_listener_times_out_in_about_timeout_s() -> None:
    with socket.socket() as blackhole:  # accepts TCP, never says a word
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(8)
        port = blackhole.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(BrokerUnreachable, match=r"no answer from .* within 0\.5 s"):
            await connect(f"amqp://guest:guest@127.0.0.1:{port}/", timeout_s=0.5)
        elapsed = time.monotonic() - started
    assert elapsed >= 0.45  # it waited for its timeout; the error says which (no upper bound:
    # a busy machine may answer late, and the match above proves the timeout fired)


async def test_wrong_password_is_access_refused_and_never_shown(amqp_url: str) -> None:
    password = "not-the-Pa55word-" + uuid.uuid4().hex[:8]
    url = _with_password(amqp_url, password)
    with pytest.raises(AccessRefused) as caught:
        await connect(url)
    error = caught.value
    assert error.exit_code == ExitCode.NO_PERMISSION
    for text in (str(error), repr(error)):
        assert password not in text
        assert url not in text
    assert "ACCESS_REFUSED" in str(error)
    assert "wrong user name or password" in str(error)


async def test_missing_vhost_is_access_refused_naming_it(amqp_url: str, uid: str) -> None:
    with pytest.raises(AccessRefused) as caught:
        await connect(vhost_url(amqp_url, uid))
    message = str(caught.value)
    assert f"vhost {uid} not found" in message
    assert "NOT_ALLOWED" in message
    assert caught.value.exit_code == ExitCode.NO_PERMISSION


async def test_vhost_comes_from_the_url_path(amqp_url: str, uid: str) -> None:
    user = urlsplit(amqp_url).username or "guest"
    _rabbitmqctl("add_vhost", uid)
    try:
        _rabbitmqctl("set_permissions", "-p", uid, user, ".*", ".*", ".*")
        connection = await connect(vhost_url(amqp_url, uid))
        try:
            channel = await connection.channel()
            info = await channel.queue_declare("in-the-vhost", durable=True)
            assert info == QueueInfo(name="in-the-vhost", message_count=0, consumer_count=0)
            assert "in-the-vhost" in _queue_arguments_names(uid)
            assert "in-the-vhost" not in _queue_arguments_names(current().vhost)
        finally:
            await connection.close()
    finally:
        _rabbitmqctl("delete_vhost", uid)


def _queue_arguments_names(vhost: str) -> set[str]:
    out = _rabbitmqctl("list_queues", "-q", "-p", vhost, "name", "--formatter", "json")
    return {row["name"] for row in json.loads(out)}


async def test_percent_encoded_slash_is_the_default_vhost(
    amqp_url: str, conn: Connection, scratch: Scratch
) -> None:
    """``/`` when the test broker's URL names the default vhost (``amqp://HOST/``, the
    default): ``/%2F`` is the same vhost. With ``RR_TEST_URL`` naming another vhost, that
    one, percent-encoded, is the same vhost as the URL's own path."""
    vhost = current().vhost
    name = scratch.queue("default-vhost")
    await (await conn.channel()).queue_declare(name, durable=True)
    explicit = await connect(vhost_url(amqp_url, vhost))  # .../%2F for "/"
    try:
        assert explicit.url.endswith("/" + quote(vhost, safe=""))
        info = await (await explicit.channel()).queue_declare(name, passive=True)
        assert info.name == name
    finally:
        await explicit.close()


async def test_forced_close_by_the_broker_is_unreachable(conn: Connection, uid: str) -> None:
    channel = await conn.channel()
    out = _rabbitmqctl("list_connections", "-q", "pid", "client_properties")
    pids = [line.split("\t")[0] for line in out.splitlines() if f'"{uid}"' in line]
    assert len(pids) == 1
    _rabbitmqctl("close_connection", pids[0], "rr test forced close")

    async def closed() -> bool:
        return conn.is_closed

    await wait_until(closed, "the connection to close", timeout_s=30, poll_s=0.05)
    # its channel is closed at the same moment (aiormq itself closes it in a task, later)
    assert channel.is_closed
    assert channel.close_reason is not None
    assert "CONNECTION_FORCED - rr test forced close" in channel.close_reason
    with pytest.raises(BrokerUnreachable, match="CONNECTION_FORCED - rr test forced close"):
        await channel.queue_declare("", exclusive=True)
    with pytest.raises(BrokerUnreachable, match="CONNECTION_FORCED"):
        await conn.channel()
    await conn.close()


# --- channel errors --------------------------------------------------------------------------


async def test_passive_declare_of_missing_queue_closes_only_the_channel(
    conn: Connection, scratch: Scratch
) -> None:
    missing = scratch.queue("missing")
    channel = await conn.channel()
    with pytest.raises(NotFound) as caught:
        await channel.queue_declare(missing, passive=True)
    assert f"no queue '{missing}'" in str(caught.value)
    assert channel.is_closed
    assert not conn.is_closed

    with pytest.raises(ChannelClosed, match=f"closed earlier: NOT_FOUND - no queue '{missing}'"):
        await channel.queue_declare(missing, passive=True)

    fresh = await conn.channel()
    info = await fresh.queue_declare(missing, durable=True)
    assert info == QueueInfo(name=missing, message_count=0, consumer_count=0)
    assert not fresh.is_closed


async def test_inequivalent_redeclare_is_precondition_failed(
    conn: Connection, scratch: Scratch
) -> None:
    name = scratch.queue("max-length")
    channel = await conn.channel()
    await channel.queue_declare(name, arguments={"x-max-length": 4})
    await channel.queue_declare(name, arguments={"x-max-length": 4})  # equivalent: fine
    with pytest.raises(PreconditionFailed) as caught:
        await channel.queue_declare(name, arguments={"x-max-length": 5})
    message = str(caught.value)
    assert f"queue '{name}'" in message
    assert "inequivalent arg 'x-max-length'" in message
    assert channel.is_closed
    assert not conn.is_closed
    assert (await (await conn.channel()).queue_declare(name, passive=True)).name == name


async def test_exclusive_queue_of_another_connection_is_resource_locked(
    amqp_url: str, conn: Connection
) -> None:
    owner = await (await conn.channel()).queue_declare("", exclusive=True, durable=False)
    other = await connect(amqp_url)
    try:
        channel = await other.channel()
        with pytest.raises(ResourceLocked, match=owner.name):
            await channel.queue_declare(owner.name, passive=True)
        assert channel.is_closed
    finally:
        await other.close()


async def test_ack_of_unknown_tag_closes_the_channel_later(conn: Connection) -> None:
    channel = await conn.channel()
    await channel.ack(4242)  # fire and forget: the broker answers by closing the channel
    # The next operation meets the close (AMQP channel errors are asynchronous) ...
    with pytest.raises(PreconditionFailed, match="PRECONDITION_FAILED - unknown delivery tag 4242"):
        await channel.queue_declare("", exclusive=True, durable=False)
    assert channel.is_closed
    # ... and later ones say why the channel is gone.
    with pytest.raises(ChannelClosed, match="closed earlier: PRECONDITION_FAILED - unknown deliv"):
        await channel.queue_declare("", exclusive=True, durable=False)


async def test_closed_channel_raises_channel_closed_and_close_is_idempotent(
    conn: Connection,
) -> None:
    channel = await conn.channel()
    await channel.close()
    await channel.close()
    assert channel.is_closed
    with pytest.raises(ChannelClosed, match="the channel is closed"):
        await channel.ack(1)
    with pytest.raises(ChannelClosed, match="the channel is closed"):
        await channel.publish(b"x", routing_key="anything")
    assert not conn.is_closed


# --- arguments on the wire ---------------------------------------------------------------------


async def test_integer_and_boolean_arguments_go_as_such(conn: Connection, scratch: Scratch) -> None:
    quorum, dead, classic = scratch.queue("qq"), scratch.queue("dead"), scratch.queue("cq")
    channel = await conn.channel()
    quorum_arguments = {
        "x-queue-type": "quorum",
        "x-delivery-limit": 4,
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": dead,
    }
    await channel.queue_declare(quorum, arguments=quorum_arguments)
    await channel.queue_declare(
        classic,
        arguments={
            "x-max-length": 100_000,
            "x-message-ttl": 60_000,
            "x-single-active-consumer": True,
        },
    )

    stored = _queue_arguments(quorum)
    assert stored["x-delivery-limit"] == ("byte", 4)
    assert stored["x-queue-type"] == ("longstr", "quorum")
    assert stored["x-dead-letter-exchange"] == ("longstr", "")
    assert stored["x-dead-letter-routing-key"] == ("longstr", dead)
    stored = _queue_arguments(classic)
    assert stored["x-max-length"] == ("signedint", 100_000)
    assert stored["x-message-ttl"] == ("unsignedshort", 60_000)
    assert stored["x-single-active-consumer"] == ("bool", True)

    # The same values again are equivalent; the limit as a string is not an integer at all.
    await channel.queue_declare(quorum, arguments=quorum_arguments)
    with pytest.raises(PreconditionFailed, match="x-delivery-limit"):
        await channel.queue_declare(quorum, arguments={**quorum_arguments, "x-delivery-limit": "4"})


async def test_unencodable_argument_is_a_data_error_before_the_wire(conn: Connection) -> None:
    channel = await conn.channel()
    with pytest.raises(DataError, match="'x-weird'"):
        await channel.queue_declare("never-declared", arguments={"x-weird": object()})  # type: ignore[dict-item]
    assert not channel.is_closed


# --- publish, get, properties ----------------------------------------------------------------


FULL_PROPERTIES = Properties(
    content_type="application/json",
    content_encoding="utf-8",
    headers={
        "str": "text",
        "int": 7,
        "negative": -70_000,
        "big": 2**40,
        "bool": True,
        "false": False,
        "float": 1.5,
        "bytes": b"\x00\xff\xfe",
        "none": None,
        "when": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
        "list": [1, "two", b"three", [False]],
        "table": {"nested": {"deep": 1}, "empty": {}},
        "x-ruststream-retry-count": "3",
    },
    delivery_mode=2,
    priority=5,
    correlation_id="corr-1",
    reply_to="replies",
    expiration="60000",
    message_id="msg-1",
    timestamp=datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC),
    type="refund",
    user_id=None,  # RabbitMQ refuses a user_id other than the connection's user
    app_id="rr-tests",
)


async def test_properties_and_headers_round_trip_exactly(
    conn: Connection, scratch: Scratch
) -> None:
    name = scratch.queue("props")
    channel = await conn.channel(confirms=True)
    await channel.queue_declare(name, durable=True)
    await channel.publish(b'{"a": 1}', routing_key=name, properties=FULL_PROPERTIES, mandatory=True)

    got = await channel.get(name)
    assert got is not None
    assert got.body == b'{"a": 1}'
    assert got.properties == FULL_PROPERTIES
    assert got.exchange == ""
    assert got.routing_key == name
    assert got.redelivered is False
    assert got.message_count == 0
    assert got.consumer_tag is None
    headers = got.properties.headers
    assert headers is not None
    assert type(headers["bytes"]) is bytes
    assert type(headers["int"]) is int
    assert type(headers["bool"]) is bool
    when = headers["when"]
    assert isinstance(when, datetime)
    assert when.utcoffset() == timedelta(0)
    await channel.ack(got.delivery_tag)
    assert await channel.get(name) is None


async def test_a_copy_keeps_every_header_type_on_the_wire(
    conn: Connection, scratch: Scratch, amqp_url: str
) -> None:
    """A message published with one header of each type RabbitMQ takes, read through the
    port and copied with rr's copy rule plus a header of rr's: the copy's bytes (read over a
    raw socket) hold each header with its type tag and bytes, in its order, rr's after them
    (docs/explanation/attempts.md, "What a copy keeps")."""
    source, target = scratch.queue("typed"), scratch.queue("typed-copy")
    channel = await conn.channel(confirms=True)
    for name in (source, target):
        await channel.queue_declare(name, durable=True)
    await send_raw(amqp_url, [RawPublish(b"", source.encode(), b"typed", properties(TYPED_TABLE))])
    got = await channel.get(source, no_ack=True)
    assert got is not None
    assert got.properties.headers is not None
    assert got.properties.headers["D-decimal"] == 123.45  # handlers see plain values
    headers = copy_headers(got.properties.headers, {"rr-origin-queue": source})
    copy = copy_properties(got.properties, headers)
    await channel.publish(got.body, routing_key=target, properties=copy, mandatory=True)

    raw = await get_raw(amqp_url, target)
    assert raw is not None
    copied = parse(header_table(raw.properties))
    older = current().version == "3.10"  # 4.0 and 4.3 write every table again, sorted
    expected = as_the_server_writes_it(
        parse(TYPED_TABLE), written_again=not older, sorted_names=not older
    )
    assert [f for f in copied if f.name != "rr-origin-queue"] == expected
    names = [f.name for f in copied]
    assert names == ([*TYPED_NAMES, "rr-origin-queue"] if older else sorted(names))


async def test_naive_and_offset_timestamps_are_read_back_in_utc(
    conn: Connection, scratch: Scratch
) -> None:
    name = scratch.queue("times")
    channel = await conn.channel(confirms=True)
    await channel.queue_declare(name, durable=True)
    plus_two = timezone(timedelta(hours=2))
    sent = Properties(
        timestamp=datetime(2024, 1, 1, 12, 0, 0),  # naive: taken as UTC
        headers={"at": datetime(2024, 1, 1, 14, 0, 0, tzinfo=plus_two)},
    )
    await channel.publish(b"", routing_key=name, properties=sent)
    got = await channel.get(name, no_ack=True)
    assert got is not None
    assert got.body == b""
    assert got.properties.timestamp == datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert got.properties.headers == {"at": datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)}


async def test_publish_without_properties_is_transient_without_a_message_id(
    conn: Connection, scratch: Scratch, amqp_url: str
) -> None:
    name = scratch.queue("bare")
    channel = await conn.channel()
    await channel.queue_declare(name, durable=True)
    await channel.publish(b"plain", routing_key=name)  # no confirms: returns once written
    confirming = await conn.channel(confirms=True)
    await confirming.publish(b"confirmed", routing_key=name, mandatory=True)
    for body in (b"plain", b"confirmed"):
        raw = await get_raw(amqp_url, name)  # the bytes as they travelled
        assert raw is not None
        assert raw.body == body
        assert raw.properties == b"\x10\x00\x01"  # delivery_mode 1 only: no client adds an id
        assert message_id_of(raw.properties) is None


async def test_returns_without_message_ids_land_on_their_own_publishes(
    conn: Connection, scratch: Scratch, uid: str
) -> None:
    """Many ``mandatory`` publishes without a message id in flight at once, to one headers
    exchange and routing key, every other one routed by its headers, equal bodies among them:
    each returned one, and only it, fails; none gains an id (transport/message_ids.py)."""
    name, exchange = scratch.queue("kept"), scratch.exchange("by-header")
    channel = await conn.channel(confirms=True)
    await channel.exchange_declare(exchange, type="headers", durable=False)
    await channel.queue_declare(name, durable=True)
    await channel.queue_bind(name, exchange, arguments={"x-match": "all", "route": "yes"})

    async def publish(number: int) -> str:
        routed = number % 2 == 0
        body = f"m{number % 7}".encode()  # equal bodies, routed or not, in flight together
        sent = Properties(headers={"route": "yes" if routed else "no"})
        try:
            await channel.publish(
                body, exchange=exchange, routing_key="k", properties=sent, mandatory=True
            )
        except PublishFailed:
            return "returned"
        return "confirmed"

    outcomes = await asyncio.gather(*(publish(number) for number in range(80)))
    assert outcomes == ["confirmed" if n % 2 == 0 else "returned" for n in range(80)]
    with pytest.raises(PublishFailed):  # and to the default exchange: a queue that is not there
        await channel.publish(b"m0", routing_key=f"{uid}-nowhere", mandatory=True)
    assert not channel.is_closed
    kept: list[Delivery] = []
    while (got := await channel.get(name, no_ack=True)) is not None:
        kept.append(got)
    assert sorted(d.body for d in kept) == sorted(f"m{n % 7}".encode() for n in range(0, 80, 2))
    assert {d.properties.message_id for d in kept} == {None}


async def test_large_body_is_split_into_frames_and_joined(
    conn: Connection, scratch: Scratch
) -> None:
    name = scratch.queue("large")
    channel = await conn.channel(confirms=True)
    await channel.queue_declare(name, durable=True)
    body = bytes(range(256)) * 4096  # 1 MiB, well above frame_max
    await channel.publish(body, routing_key=name)
    got = await channel.get(name, no_ack=True)
    assert got is not None
    assert got.body == body


async def test_unroutable_mandatory_publish_raises_publish_failed(
    conn: Connection, uid: str, scratch: Scratch
) -> None:
    channel = await conn.channel(confirms=True)
    with pytest.raises(PublishFailed) as caught:
        await channel.publish(b"lost", routing_key=f"{uid}-nowhere", mandatory=True)
    message = str(caught.value)
    assert f"routing key '{uid}-nowhere'" in message
    assert "the default exchange" in message
    assert "312 NO_ROUTE" in message
    assert not channel.is_closed  # a return does not close the channel

    exchange = scratch.exchange("fanout")
    await channel.exchange_declare(exchange, type="fanout", durable=False)
    with pytest.raises(PublishFailed, match=f"exchange '{exchange}'"):
        await channel.publish(b"lost", exchange=exchange, routing_key="k", mandatory=True)
    await channel.publish(b"dropped", exchange=exchange, routing_key="k")  # not mandatory: ok

    name = scratch.queue("bound")
    await channel.queue_declare(name, durable=True)
    await channel.queue_bind(name, exchange)
    await channel.publish(b"kept", exchange=exchange, routing_key="k", mandatory=True)
    got = await channel.get(name, no_ack=True)
    assert got is not None
    assert (got.body, got.exchange, got.routing_key) == (b"kept", exchange, "k")


async def test_nacked_publish_raises_publish_failed(conn: Connection, scratch: Scratch) -> None:
    name = scratch.queue("full")
    channel = await conn.channel(confirms=True)
    await channel.queue_declare(
        name, durable=True, arguments={"x-max-length": 1, "x-overflow": "reject-publish"}
    )
    await channel.publish(b"first", routing_key=name, mandatory=True)
    with pytest.raises(PublishFailed, match=r"basic\.nack") as caught:
        await channel.publish(b"second", routing_key=name, mandatory=True)
    assert f"routing key '{name}'" in str(caught.value)
    assert not channel.is_closed
    assert await channel.queue_purge(name) == 1


async def test_concurrent_confirmed_publishes_all_land(conn: Connection, scratch: Scratch) -> None:
    name = scratch.queue("many")
    channel = await conn.channel(confirms=True)
    await channel.queue_declare(name, durable=True)
    await asyncio.gather(
        *(channel.publish(str(i).encode(), routing_key=name, mandatory=True) for i in range(200))
    )
    info = await channel.queue_declare(name, passive=True)
    assert info.message_count == 200


# --- consume, ack, reject, nack -----------------------------------------------------------------


async def test_consume_delivers_to_the_callback_and_ack_removes(
    conn: Connection, scratch: Scratch
) -> None:
    name = scratch.queue("consume")
    publisher = await conn.channel(confirms=True)
    await publisher.queue_declare(name, durable=True)
    for i in range(3):
        await publisher.publish(f"m{i}".encode(), routing_key=name, properties=FULL_PROPERTIES)

    consumer = await conn.channel()
    await consumer.qos(10)
    received: asyncio.Queue[Delivery] = asyncio.Queue()

    async def on_delivery(delivery: Delivery) -> None:
        await received.put(delivery)

    tag = await consumer.consume(name, on_delivery, consumer_tag=f"{name}-tag")
    assert tag == f"{name}-tag"
    deliveries = [await asyncio.wait_for(received.get(), 5) for _ in range(3)]
    assert [d.body for d in deliveries] == [b"m0", b"m1", b"m2"]
    assert [d.delivery_tag for d in deliveries] == [1, 2, 3]
    for delivery in deliveries:
        assert delivery.consumer_tag == tag
        assert delivery.routing_key == name
        assert delivery.exchange == ""
        assert delivery.redelivered is False
        assert delivery.message_count is None
        assert delivery.properties == FULL_PROPERTIES
    await consumer.ack(deliveries[1].delivery_tag, multiple=True)  # 1 and 2
    await consumer.ack(deliveries[2].delivery_tag)
    await consumer.cancel(tag)
    await consumer.close()

    assert (await publisher.queue_declare(name, passive=True)).message_count == 0


async def test_server_generated_consumer_tag(conn: Connection, scratch: Scratch) -> None:
    name = scratch.queue("gen-tag")
    channel = await conn.channel()
    await channel.queue_declare(name, durable=True)

    async def ignore(_: Delivery) -> None:
        return None

    tag = await channel.consume(name, ignore, no_ack=True)
    assert tag
    assert (await channel.queue_declare(name, passive=True)).consumer_count == 1
    await channel.cancel(tag)
    assert (await channel.queue_declare(name, passive=True)).consumer_count == 0


async def test_consume_from_missing_queue_is_not_found(conn: Connection, uid: str) -> None:
    channel = await conn.channel()

    async def ignore(_: Delivery) -> None:
        return None

    with pytest.raises(NotFound, match=f"no queue '{uid}-absent'"):
        await channel.consume(f"{uid}-absent", ignore)
    assert channel.is_closed


async def test_reject_requeue_redelivers_and_reject_drop_removes(
    conn: Connection, scratch: Scratch
) -> None:
    name = scratch.queue("reject")
    channel = await conn.channel(confirms=True)
    await channel.queue_declare(name, durable=True)
    await channel.publish(b"again", routing_key=name)

    first = await channel.get(name)
    assert first is not None
    assert first.redelivered is False
    await channel.reject(first.delivery_tag, requeue=True)
    second = await channel.get(name)
    assert second is not None
    assert (second.body, second.redelivered) == (b"again", True)
    await channel.reject(second.delivery_tag, requeue=False)
    assert await channel.get(name) is None


async def test_nack_requeue_and_drop(conn: Connection, scratch: Scratch) -> None:
    name = scratch.queue("nack")
    channel = await conn.channel(confirms=True)
    await channel.queue_declare(name, durable=True)
    await channel.publish(b"a", routing_key=name)
    await channel.publish(b"b", routing_key=name)
    one = await channel.get(name)
    two = await channel.get(name)
    assert one is not None
    assert two is not None
    assert one.message_count == 1
    assert two.message_count == 0
    await channel.nack(two.delivery_tag, multiple=True)  # both back, in order
    again = [await channel.get(name, no_ack=True) for _ in range(2)]
    assert [d.body for d in again if d is not None] == [b"a", b"b"]
    await channel.publish(b"c", routing_key=name)
    three = await channel.get(name)
    assert three is not None
    await channel.nack(three.delivery_tag, requeue=False)
    assert await channel.get(name) is None


async def test_unacked_delivery_returns_when_its_channel_closes(
    conn: Connection, scratch: Scratch
) -> None:
    name = scratch.queue("unacked")
    channel = await conn.channel(confirms=True)
    await channel.queue_declare(name, durable=True)
    await channel.publish(b"keep me", routing_key=name)
    taken = await channel.get(name)
    assert taken is not None
    await channel.close()

    other = await conn.channel()
    back = await other.get(name, no_ack=True)
    assert back is not None
    assert (back.body, back.redelivered) == (b"keep me", True)


# --- queues and exchanges -------------------------------------------------------------------


async def test_purge_delete_bind_and_exchange_lifecycle(conn: Connection, scratch: Scratch) -> None:
    queue, exchange = scratch.queue("lifecycle"), scratch.exchange("topic")
    channel: Channel = await conn.channel(confirms=True)
    await channel.exchange_declare(exchange, type="topic", durable=False)
    await channel.exchange_declare(exchange, type="topic", durable=False, passive=True)
    generated = await channel.queue_declare("", exclusive=True, durable=False)
    assert generated.name.startswith("amq.gen-")
    await channel.queue_declare(queue, durable=True)
    await channel.queue_bind(queue, exchange, "orders.#")
    for key in ("orders", "orders.eu.created", "payments.created"):
        with suppress(PublishFailed):
            await channel.publish(key.encode(), exchange=exchange, routing_key=key, mandatory=True)
    assert (await channel.queue_declare(queue, passive=True)).message_count == 2
    assert await channel.queue_purge(queue) == 2
    await channel.publish(b"x", routing_key=queue)
    assert await channel.queue_delete(queue) == 1
    await channel.exchange_delete(exchange)
    with pytest.raises(NotFound, match=f"no exchange '{exchange}'"):
        await channel.exchange_declare(exchange, type="topic", passive=True)


async def test_declare_on_a_different_type_is_precondition_failed(
    conn: Connection, scratch: Scratch
) -> None:
    exchange = scratch.exchange("typed")
    channel = await conn.channel()
    await channel.exchange_declare(exchange, type="direct", durable=False)
    with pytest.raises(PreconditionFailed, match=f"exchange '{exchange}'"):
        await channel.exchange_declare(exchange, type="fanout", durable=False)


# --- TLS ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_ca: Path
    rogue_client_cert: Path
    rogue_client_key: Path


def _openssl(*args: str | Path) -> None:
    done = subprocess.run(
        ["openssl", *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def _make_ca(folder: Path, name: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", key, "-out", cert, "-days", "2", "-subj", f"/CN=rr test {name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    return cert, key


def _make_leaf(
    folder: Path, name: str, ca: tuple[Path, Path], extensions: str
) -> tuple[Path, Path]:
    cert, key, csr, ext = (folder / f"{name}.{kind}" for kind in ("pem", "key", "csr", "ext"))
    ext.write_text(
        "basicConstraints=CA:FALSE\nsubjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n" + extensions
    )
    _openssl(
        "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", key, "-out", csr, "-subj", f"/CN={name}",
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
        "-out", cert, "-days", "2", "-extfile", ext,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    folder = tmp_path_factory.mktemp("tls")
    ca = _make_ca(folder, "ca")
    rogue = _make_ca(folder, "rogue-ca")
    server = _make_leaf(
        folder,
        "localhost",
        ca,
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nkeyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n",
    )
    client_extensions = "keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n"
    client = _make_leaf(folder, "rr-client", ca, client_extensions)
    rogue_client = _make_leaf(folder, "rogue-client", rogue, client_extensions)
    return Certs(ca[0], *server, *client, rogue[0], *rogue_client)


@asynccontextmanager
async def _tls_proxy(certs: Certs, upstream: tuple[str, int]) -> AsyncIterator[int]:
    """A TLS listener on 127.0.0.1 that requires a client certificate signed by the test CA
    and pipes the bytes to ``upstream``. Yields its port."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.server_cert, certs.server_key)
    context.load_verify_locations(certs.ca)
    context.verify_mode = ssl.CERT_REQUIRED
    handlers: set[asyncio.Task[None]] = set()
    writers: list[asyncio.StreamWriter] = []

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        writers.append(client_w)
        try:
            broker_r, broker_w = await asyncio.open_connection(*upstream)
            writers.append(broker_w)
            await asyncio.gather(pipe(client_r, broker_w), pipe(broker_r, client_w))
        finally:
            handlers.discard(task)

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        for task in list(handlers):
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        for writer in writers:
            writer.close()
            with suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
        await server.wait_closed()


def _amqps_url(amqp_url: str, port: int, **query: Path | str) -> str:
    parts = urlsplit(amqp_url)
    auth = f"{parts.username or 'guest'}:{parts.password or 'guest'}"
    encoded = "&".join(f"{key}={quote(str(value), safe='/')}" for key, value in query.items())
    return f"amqps://{auth}@localhost:{port}/?{encoded}"


@pytest.fixture
def upstream(amqp_url: str) -> tuple[str, int]:
    parts = urlsplit(amqp_url)
    if parts.scheme != "amqp":
        pytest.skip("the TLS proxy forwards to a plain amqp:// broker")
    return parts.hostname or "127.0.0.1", parts.port or 5672


async def test_amqps_with_ca_and_client_certificate(
    certs: Certs, upstream: tuple[str, int], amqp_url: str, uid: str
) -> None:
    async with _tls_proxy(certs, upstream) as port:
        url = _amqps_url(
            amqp_url, port, cafile=certs.ca, certfile=certs.client_cert, keyfile=certs.client_key
        )
        connection = await connect(url, timeout_s=5)
        try:
            channel = await connection.channel(confirms=True)
            queue = await channel.queue_declare(f"{uid}-tls", durable=True, auto_delete=False)
            await channel.publish(
                b"over tls", routing_key=queue.name, properties=Properties(message_id="tls-1")
            )
            got = await channel.get(queue.name, no_ack=True)
            assert got is not None
            assert (got.body, got.properties.message_id) == (b"over tls", "tls-1")
            assert await channel.queue_delete(queue.name) == 0
            assert connection.server_version.major >= 3
        finally:
            await connection.close()


async def test_amqps_without_client_certificate_is_unreachable(
    certs: Certs, upstream: tuple[str, int], amqp_url: str
) -> None:
    async with _tls_proxy(certs, upstream) as port:
        url = _amqps_url(amqp_url, port, cafile=certs.ca)
        started = time.monotonic()
        with pytest.raises(BrokerUnreachable, match="refuses the client certificate") as caught:
            await connect(url, timeout_s=5)
        assert time.monotonic() - started < 4
        assert "guest:guest" not in str(caught.value)


async def test_amqps_with_untrusted_server_ca_is_unreachable(
    certs: Certs, upstream: tuple[str, int], amqp_url: str
) -> None:
    async with _tls_proxy(certs, upstream) as port:
        url = _amqps_url(
            amqp_url,
            port,
            cafile=certs.rogue_ca,
            certfile=certs.client_cert,
            keyfile=certs.client_key,
        )
        started = time.monotonic()
        with pytest.raises(BrokerUnreachable, match="TLS certificate verification failed"):
            await connect(url, timeout_s=5)
        assert time.monotonic() - started < 4


async def test_amqps_with_client_certificate_from_another_ca_is_unreachable(
    certs: Certs, upstream: tuple[str, int], amqp_url: str
) -> None:
    async with _tls_proxy(certs, upstream) as port:
        url = _amqps_url(
            amqp_url,
            port,
            cafile=certs.ca,
            certfile=certs.rogue_client_cert,
            keyfile=certs.rogue_client_key,
        )
        with pytest.raises(BrokerUnreachable, match="refuses the client certificate"):
            await connect(url, timeout_s=5)


async def test_amqps_missing_ca_file_names_it(certs: Certs, amqp_url: str, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-ca.pem"
    url = _amqps_url(amqp_url, _unused_port(), cafile=missing)
    with pytest.raises(BrokerUnreachable, match="cannot read"):
        await connect(url, timeout_s=5)
