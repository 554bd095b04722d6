"""The management port's HTTP adapter (``transport/management.py``): RabbitMQ's management
HTTP API itself, for what AMQP 0-9-1 cannot tell (docs/how-to/run-on-a-cluster.md, "Replicas";
docs/reference/cli.md, "rr doctor").

Requests are plain ``urllib`` GETs (for policies also PUTs and DELETEs) with basic auth (the
credentials of the management URL, checked by
:func:`~rabbitctl_retry.urls.parse_management_url`), run in a thread so the event loop never
waits on a socket. Only ``cli/_common.py`` names this adapter
(docs/architecture.md, "Layers").

What the API answers is taken only in the shape it documents (docs/how-to/run-on-a-cluster.md): a
redirect is never followed (the credentials would go to wherever it points), and an answer that is
not JSON, is nested deeper than Python can read or is bigger than :data:`MAX_ANSWER_BYTES`,
or lacks a key or holds one of the wrong type is refused. A refused login raises
:class:`AccessRefused` (exit 77); anything else that keeps rr from an answer it can use
raises :class:`BrokerUnreachable` (exit 69). Every message names the censored URL.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from email.message import Message
from operator import attrgetter
from typing import IO, Any, TypeVar

from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerRefused,
    BrokerUnreachable,
    NotFound,
    censor_url,
    escape_unprintable,
)
from rabbitctl_retry.server import (
    DEPRECATED_FEATURES_PATH,
    NODES_PATH,
    OVERVIEW_PATH,
    DeprecatedFeature,
    NodeResources,
    Placement,
    Policy,
    PolicyValue,
    QueueActivity,
    QueueConsumer,
    QueueHealth,
    QueueState,
    ServerIdentity,
    ServerVersion,
    Unstated,
)
from rabbitctl_retry.transport.management import ManagementApi, ManagementConnector
from rabbitctl_retry.urls import parse_management_url

_Row = TypeVar("_Row")

TIMEOUT_S = 10.0

MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""The most rr reads of one answer: ``/api/nodes`` of a cluster of hundreds of nodes is a
few MiB."""

_MAX_LOCATION_CHARS = 200


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: the 3xx answer becomes an :class:`urllib.error.HTTPError`."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Message,
        newurl: str,
    ) -> None:
        return None


class HttpManagementApi:
    """The management API at ``url``, for queues of ``vhost``: a
    :class:`~rabbitctl_retry.transport.management.ManagementApi`."""

    def __init__(
        self,
        url: str,
        *,
        vhost: str,
        timeout_s: float = TIMEOUT_S,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        checked = parse_management_url(url)
        self._base = checked.base
        self._headers = {"Accept": "application/json"}
        if checked.authorization is not None:
            self._headers["Authorization"] = checked.authorization
        self._shown = checked.shown
        self._vhost = vhost
        self._timeout_s = timeout_s
        self._max_answer_bytes = max_answer_bytes
        self._opener = urllib.request.build_opener(_NoRedirects)

    @property
    def shown(self) -> str:
        """The API's URL as messages show it (password censored)."""
        return self._shown

    async def nodes(self) -> tuple[str, ...]:
        """The names of every node of the cluster, running or not, sorted."""
        path = "/api/nodes"
        listed = await self._get(path)
        if not isinstance(listed, list) or not listed:
            raise self._unexpected(path, "not a list of nodes")
        names = []
        for node in listed:
            name = node.get("name") if isinstance(node, dict) else None
            if not isinstance(name, str) or not name:
                raise self._unexpected(path, "a node without a 'name'")
            names.append(name)
        return tuple(sorted(names))

    async def node_resources(self) -> tuple[NodeResources, ...]:
        """``GET /api/nodes?columns=...``: each node's ``name`` (a text) and ``running`` (a
        boolean) and, for a node that runs, its ``mem_alarm`` and ``disk_free_alarm``
        (booleans) and ``mem_used``, ``mem_limit``, ``disk_free``, ``disk_free_limit`` (byte
        counts, each optional), sorted by name (the same shape on 3.10.8 and 4.3.6, measured;
        a node that does not run states no alarm)."""
        path = f"{NODES_PATH}?columns={_NODE_COLUMNS}"
        return await self._rows(path, "nodes", _node_resources_of, _NODE_SHAPE, some=True)

    async def queue_health(self) -> tuple[QueueHealth, ...]:
        """``GET /api/queues/VHOST?columns=name,type,members,online,messages_details.rate``:
        each queue's ``name`` and ``type`` (texts), a quorum queue's ``members`` and
        ``online`` (lists of node names) and the ``messages_details.rate`` of its depth (a
        number), sorted by name (measured on 3.10.8 and 4.3.6: a classic queue has no
        members; 3.10.8 gives a new quorum queue's rate only once it is sampled)."""
        path = "/api/queues/{}?columns={}".format(
            urllib.parse.quote(self._vhost, safe=""), _HEALTH_COLUMNS
        )
        return await self._rows(path, "queues", _queue_health_of, _HEALTH_SHAPE)

    async def overview(self) -> ServerIdentity:
        """Which server the API answers for (``GET /api/overview``): its ``rabbitmq_version``
        (a text), and, when given, its ``cluster_name`` and ``product_name`` (texts)."""
        path = OVERVIEW_PATH
        found = await self._get(path)
        if not isinstance(found, dict):
            raise self._unexpected(path, "not an object")
        version = found.get("rabbitmq_version")
        if not isinstance(version, str) or not version:
            raise self._unexpected(path, "no 'rabbitmq_version' text")
        texts = {}
        for key in ("cluster_name", "product_name"):
            value = found.get(key)
            if value is not None and not isinstance(value, str):
                raise self._unexpected(path, f"a '{key}' that is not a text")
            texts[key] = value or None
        return ServerIdentity(
            version=ServerVersion.parse(version),
            product=texts["product_name"],
            cluster_name=texts["cluster_name"],
        )

    async def _queue(
        self, queue: str, read: Callable[[Mapping[str, Any]], _Row | None], shape: str
    ) -> _Row | None:
        """``GET /api/queues/VHOST/QUEUE`` as ``read`` reads it, or None on a 404; an object
        ``read`` finds nothing in is unexpected (``shape``: what it lacks)."""
        path = "/api/queues/{}/{}".format(
            urllib.parse.quote(self._vhost, safe=""), urllib.parse.quote(queue, safe="")
        )
        found = await self._get(path, missing_ok=True)
        if found is None:
            return None
        if not isinstance(found, dict):
            raise self._unexpected(path, "not a queue")
        value = read(found)
        if value is None:
            raise self._unexpected(path, shape)
        return value

    async def queues(self) -> tuple[tuple[str, str], ...]:
        """``GET /api/queues/VHOST?columns=name,type``: every queue's name and type, sorted
        (the same shape on 3.10.8 and 4.3.6, measured)."""
        path = "/api/queues/{}?columns=name,type".format(urllib.parse.quote(self._vhost, safe=""))
        listed = await self._get(path)
        if not isinstance(listed, list):
            raise self._unexpected(path, "not a list of queues")
        found = []
        for queue in listed:
            name = queue.get("name") if isinstance(queue, dict) else None
            kind = queue.get("type") if isinstance(queue, dict) else None
            if not isinstance(name, str) or not isinstance(kind, str):
                raise self._unexpected(path, "a queue without a 'name' and a 'type'")
            found.append((name, kind))
        return tuple(sorted(found))

    async def queue_activity(self) -> tuple[QueueActivity, ...]:
        """Every queue of the vhost with its traffic, sorted by name, from two answers
        (measured on RabbitMQ 4.3.6, classic, quorum and stream queues alike):
        ``GET /api/queues/VHOST?columns=...`` (``name`` and ``type`` texts;
        ``messages_ready``, ``messages_unacknowledged`` integers and
        ``message_stats.publish_details.rate``, ``message_stats.deliver_get_details.rate``
        numbers, each absent until the server's first sample: then None) and
        ``GET /api/consumers/VHOST?columns=queue.name,prefetch_count`` (each consumer's
        queue and prefetch)."""
        vhost = urllib.parse.quote(self._vhost, safe="")
        path = f"/api/queues/{vhost}?columns={_ACTIVITY_COLUMNS}"
        listed = await self._get(path)
        if not isinstance(listed, list):
            raise self._unexpected(path, "not a list of queues")
        consumers_path = f"/api/consumers/{vhost}?columns=queue.name,prefetch_count"
        consumers = await self._get(consumers_path)
        prefetches = _prefetches_of(consumers)
        if prefetches is None:
            raise self._unexpected(consumers_path, _CONSUMER_SHAPE)
        return self._read_rows(
            path, listed, "queues", lambda queue: _activity_of(queue, prefetches), _ACTIVITY_SHAPE
        )

    async def consumers(self) -> tuple[QueueConsumer, ...]:
        """Every consumer of the vhost with its connection's client properties, from two
        answers (measured on RabbitMQ 4.3.6): ``GET /api/consumers/VHOST?columns=...`` (each
        consumer's ``queue.name`` and ``consumer_tag`` texts, ``ack_required`` boolean and
        ``channel_details.connection_name``, the server's name of its connection) and
        ``GET /api/vhosts/VHOST/connections?columns=name,client_properties`` (each
        connection's ``name`` and ``client_properties`` object, of which rr reads the texts
        ``product``, ``version`` or ``product_version``, and ``connection_name``); sorted by
        queue and tag. A consumer whose connection is gone between the two answers has no
        client properties; one whose ``channel_details`` is ``{}`` (a new consumer, for a
        moment: measured on 4.3.6) has no connection either."""
        vhost = urllib.parse.quote(self._vhost, safe="")
        path = f"/api/consumers/{vhost}?columns={_CONSUMER_COLUMNS}"
        listed = await self._get(path)
        connections_path = f"/api/vhosts/{vhost}/connections?columns=name,client_properties"
        connections = _client_properties_of(await self._get(connections_path))
        if connections is None:
            raise self._unexpected(connections_path, _CONNECTION_SHAPE)
        return self._read_rows(
            path,
            listed,
            "consumers",
            lambda row: _consumer_of(row, connections),
            _QUEUE_CONSUMER_SHAPE,
            key=lambda consumer: (consumer.queue, consumer.tag),
        )

    async def vhost_default_queue_type(self) -> str | None:
        """``default_queue_type`` of ``GET /api/vhosts/VHOST`` (a text; 4.0.5 and 4.3.6 state
        ``classic`` for a vhost made without one, and the vhost's ``--default-queue-type``
        otherwise: measured), None when absent, null or ``undefined`` (3.10.8 states the
        Erlang atom ``undefined`` for a vhost made without one: measured)."""
        path = "/api/vhosts/{}".format(urllib.parse.quote(self._vhost, safe=""))
        found = await self._get(path)
        if not isinstance(found, dict):
            raise self._unexpected(path, "not a vhost")
        kind = found.get("default_queue_type")
        if kind is not None and not (isinstance(kind, str) and _FEATURE_NAME.fullmatch(kind)):
            raise self._unexpected(path, "a 'default_queue_type' that is not a word")
        return None if kind == _UNDEFINED_QUEUE_TYPE else kind or None

    async def publish_rate(self, exchange: str) -> float | None:
        """``message_stats.publish_in_details.rate`` of ``GET /api/exchanges/VHOST/NAME``
        (the default exchange is ``amq.default`` there; measured on 3.10.8 and 4.3.6); None
        when the exchange is unknown (404) or has no statistics yet (no ``message_stats``,
        or null: 4.3.6 before its first sample)."""
        path = "/api/exchanges/{}/{}".format(
            urllib.parse.quote(self._vhost, safe=""),
            urllib.parse.quote(exchange or "amq.default", safe=""),
        )
        found = await self._get(path, missing_ok=True)
        if found is None:
            return None
        if not isinstance(found, dict):
            raise self._unexpected(path, "not an exchange")
        stats = found.get("message_stats")
        details = stats.get("publish_in_details") if isinstance(stats, dict) else None
        rate = details.get("rate") if isinstance(details, dict) else None
        if isinstance(rate, bool) or not isinstance(rate, int | float):
            return None
        return float(rate)

    async def placement(self, queue: str) -> Placement | None:
        """Where ``queue`` lives, or None when the API does not know it (404)."""
        return await self._queue(queue, _placement_of, _PLACEMENT_SHAPE)

    async def queue_state(self, queue: str) -> QueueState | None:
        """``queue``'s ``type``, ``arguments`` (an object), ``policy`` /
        ``operator_policy`` (a name; null or empty: none) and ``message_bytes`` (a count;
        absent before the statistics are sampled), or None when the API does not know it
        (404)."""
        return await self._queue(queue, _queue_state_of, _QUEUE_STATE_SHAPE)

    async def deprecated_features(self) -> tuple[DeprecatedFeature, ...] | Unstated | None:
        """Every deprecated feature the server knows and whether it permits it (``GET
        /api/deprecated-features``), sorted by name; None when the API has no such table:
        404, or 406 (measured on RabbitMQ 3.10.8: a path the API does not know is 406 to a
        request that accepts only JSON, 404 to one that accepts anything); :class:`Unstated`
        when it lists the features without a ``state`` (RabbitMQ 4.0.5's: measured)."""
        path = DEPRECATED_FEATURES_PATH
        listed = await self._get(path, missing_ok=True, missing_codes=_NO_SUCH_PATH)
        if listed is None:
            return None
        unstated = _unstated_of(listed)
        if unstated is not None:
            return unstated
        features, problem = _features_of(listed)
        if problem is not None:
            raise self._unexpected(path, problem)
        return features

    async def policies(self, *, operator: bool = False) -> tuple[Policy, ...]:
        """The vhost's policies (``GET /api/policies/VHOST``; ``operator``:
        ``/api/operator-policies/VHOST``), sorted by name."""
        path = self._policies_path(operator)
        return await self._rows(path, "policies", _policy_of, _POLICY_SHAPE)

    async def _rows(
        self,
        path: str,
        what: str,
        read: Callable[[object], _Row | None],
        shape: str,
        *,
        some: bool = False,
    ) -> tuple[_Row, ...]:
        """``GET path``, read by :meth:`_read_rows`."""
        return self._read_rows(path, await self._get(path), what, read, shape, some=some)

    def _read_rows(
        self,
        path: str,
        listed: object,
        what: str,
        read: Callable[[object], _Row | None],
        shape: str,
        *,
        some: bool = False,
        key: Callable[[_Row], Any] = attrgetter("name"),
    ) -> tuple[_Row, ...]:
        """The answer ``listed`` to ``GET path``: a list of ``what`` (``some``: at least
        one), each row read by ``read`` (None: a row not of ``shape``), sorted by ``key`` (by
        name); any other answer is refused (exit 69, docs/reference/cli.md)."""
        if not isinstance(listed, list) or (some and not listed):
            raise self._unexpected(path, f"not a list of {what}")
        found = []
        for row in listed:
            item = read(row)
            if item is None:
                raise self._unexpected(path, shape)
            found.append(item)
        return tuple(sorted(found, key=key))

    async def put_policy(self, policy: Policy, *, operator: bool = False) -> None:
        """``PUT /api/policies/VHOST/NAME`` (``operator``: ``/api/operator-policies/...``)
        with the policy's pattern, definition, priority and apply-to; a definition the
        server refuses (400) raises :class:`BrokerRefused` with its reason."""
        body = {
            "pattern": policy.pattern,
            "definition": policy.keys,
            "priority": policy.priority,
            "apply-to": policy.apply_to,
        }
        path = self._policy_path(policy.name, operator)
        await asyncio.to_thread(self._send_blocking, "PUT", path, body)

    async def delete_policy(self, name: str, *, operator: bool = False) -> None:
        """``DELETE /api/policies/VHOST/NAME`` (``operator``: ``/api/operator-policies/...``);
        :class:`NotFound` when there is no such policy (404)."""
        path = self._policy_path(name, operator)
        await asyncio.to_thread(self._send_blocking, "DELETE", path, None)

    def _policies_path(self, operator: bool) -> str:
        kind = "operator-policies" if operator else "policies"
        return f"/api/{kind}/{urllib.parse.quote(self._vhost, safe='')}"

    def _policy_path(self, name: str, operator: bool) -> str:
        return f"{self._policies_path(operator)}/{urllib.parse.quote(name, safe='')}"

    def _send_blocking(self, method: str, path: str, body: dict[str, Any] | None) -> None:
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(
            self._base + path, data=data, headers=headers, method=method
        )
        try:
            self._open(request, path, self._max_answer_bytes)
        except urllib.error.HTTPError as error:
            try:
                if error.code == 404 and method == "DELETE":
                    raise NotFound(
                        f"the management API at {self._shown} has no such policy ({path})"
                    ) from None
                if error.code == 400:
                    refusal = _reason_of(error.read(_MAX_REASON_BYTES))
                    raise BrokerRefused(
                        f"the management API at {self._shown} refused {method} {path}: {refusal}"
                    ) from None
                raise self._refused(error, path, method) from None
            finally:
                error.close()  # it holds the response's socket

    async def _get(
        self, path: str, *, missing_ok: bool = False, missing_codes: tuple[int, ...] = (404,)
    ) -> Any:
        return await asyncio.to_thread(self._get_blocking, path, missing_ok, missing_codes)

    def _get_blocking(
        self, path: str, missing_ok: bool, missing_codes: tuple[int, ...] = (404,)
    ) -> Any:
        request = urllib.request.Request(self._base + path, headers=self._headers)
        try:
            body = self._open(request, path, self._max_answer_bytes + 1)
        except urllib.error.HTTPError as error:
            try:
                if error.code in missing_codes and missing_ok:
                    return None
                raise self._refused(error, path) from None
            finally:
                error.close()  # it holds the response's socket
        if len(body) > self._max_answer_bytes:
            raise self._unexpected(path, f"more than {self._max_answer_bytes} bytes")
        try:
            return json.loads(body)
        except RecursionError:
            raise self._unexpected(path, "JSON nested too deep") from None
        except ValueError:  # not UTF-8, not JSON, an integer of too many digits
            raise self._unexpected(path, "not JSON") from None

    def _open(self, request: urllib.request.Request, path: str, limit: int) -> bytes:
        """The answer to ``request`` (to ``path``), ``limit`` bytes of it at most. An
        error status is the :class:`urllib.error.HTTPError` the caller reads; an API not
        reached, or a broken answer, is :class:`BrokerUnreachable`."""
        try:
            with self._opener.open(request, timeout=self._timeout_s) as response:
                body: bytes = response.read(limit)
                return body
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise BrokerUnreachable(
                f"cannot reach the management API at {self._shown}: {reason}"
            ) from None
        except http.client.HTTPException as error:
            raise BrokerUnreachable(
                f"the management API at {self._shown} gave a broken HTTP answer to "
                f"{request.get_method()} {path} ({type(error).__name__})"
            ) from None

    def _refused(self, error: urllib.error.HTTPError, path: str, method: str = "GET") -> Exception:
        code, headers = error.code, error.headers
        if code in (401, 403):
            tag = "management (or monitoring)" if method == "GET" else "policymaker"
            return AccessRefused(
                f"the management API at {self._shown} refused the login ({code}) to {method} "
                f"{path}: {_login_refusal(_reason_of(_read_quietly(error), default=''), tag)}"
            )
        if 300 <= code < 400:
            location = headers.get("Location") if headers is not None else None
            to = f" to {_shown_location(location)}" if location else ""
            return BrokerUnreachable(
                f"the management API at {self._shown} answered {method} {path} with a "
                f"redirect ({code}){to}: rr follows no redirect (give it the URL of the API "
                "itself)"
            )
        return BrokerUnreachable(
            f"the management API at {self._shown} answered {code} to {method} {path}"
        )

    def _unexpected(self, path: str, what: str) -> BrokerUnreachable:
        return BrokerUnreachable(
            f"the management API at {self._shown} gave an unexpected answer to GET {path} "
            f"({what}; is it RabbitMQ's management plugin?)"
        )


_QUEUE_STATE_SHAPE = (
    "no 'type' text, 'arguments' that is not an object, a 'policy' or 'operator_policy' "
    "that is not a text, or a 'message_bytes' that is not a count"
)


def _queue_state_of(queue: Mapping[str, Any]) -> QueueState | None:
    """A queue object of the API as a :class:`QueueState`; None when not of that shape."""
    kind, arguments = queue.get("type"), queue.get("arguments", {})
    names = [queue.get("policy"), queue.get("operator_policy")]
    if not isinstance(kind, str) or not isinstance(arguments, dict):
        return None
    if not all(name is None or isinstance(name, str) for name in names):
        return None
    weight = queue.get("message_bytes")
    if weight is not None and (
        not isinstance(weight, int) or isinstance(weight, bool) or weight < 0
    ):
        return None
    policy, operator_policy = (name or None for name in names)
    return QueueState(
        kind=kind,
        arguments=dict(arguments),
        policy=policy,
        operator_policy=operator_policy,
        message_bytes=weight,
    )


_ACTIVITY_COLUMNS = ",".join(
    (
        "name",
        "type",
        "messages_ready",
        "messages_unacknowledged",
        "message_stats.publish_details.rate",
        "message_stats.deliver_get_details.rate",
    )
)

_ACTIVITY_SHAPE = (
    "a queue without a 'name' and a 'type' text, or with counts that are not integers or "
    "rates that are not numbers"
)

_CONSUMER_SHAPE = "not a list of consumers, each with a 'queue' 'name' and a 'prefetch_count'"


class _Malformed(Exception):
    """A value of an answer not of the documented type (the answer is refused)."""


def _count(value: object) -> int | None:
    """A count of the API: an integer from 0, None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Malformed
    return value


def _rate(stats: object, key: str) -> float | None:
    """``message_stats.KEY.rate``: a number, None when absent."""
    details = stats.get(key) if isinstance(stats, dict) else None
    rate = details.get("rate") if isinstance(details, dict) else None
    if rate is None:
        return None
    if isinstance(rate, bool) or not isinstance(rate, int | float):
        raise _Malformed
    return float(rate)


def _activity_of(queue: object, prefetches: Mapping[str, tuple[int, ...]]) -> QueueActivity | None:
    """A queue row of ``/api/queues/VHOST?columns=...`` as a :class:`QueueActivity`; None
    when it is not of that shape."""
    if not isinstance(queue, dict):
        return None
    name, kind, stats = queue.get("name"), queue.get("type"), queue.get("message_stats")
    if not isinstance(name, str) or not isinstance(kind, str):
        return None
    try:
        return QueueActivity(
            name=name,
            kind=kind,
            ready=_count(queue.get("messages_ready")),
            unacked=_count(queue.get("messages_unacknowledged")),
            prefetches=prefetches.get(name, ()),
            publish_per_s=_rate(stats, "publish_details"),
            deliver_per_s=_rate(stats, "deliver_get_details"),
        )
    except _Malformed:
        return None


def _prefetches_of(listed: object) -> dict[str, tuple[int, ...]] | None:
    """Each queue's consumers' prefetch counts (sorted) from ``/api/consumers/VHOST``; None
    when the answer is not of that shape."""
    if not isinstance(listed, list):
        return None
    found: dict[str, list[int]] = {}
    for row in listed:
        queue = row.get("queue") if isinstance(row, dict) else None
        name = queue.get("name") if isinstance(queue, dict) else None
        try:
            prefetch = _count(row.get("prefetch_count")) if isinstance(row, dict) else None
        except _Malformed:
            return None
        if not isinstance(name, str) or prefetch is None:
            return None
        found.setdefault(name, []).append(prefetch)
    return {name: tuple(sorted(counts)) for name, counts in found.items()}


_CONSUMER_COLUMNS = "queue.name,consumer_tag,ack_required,channel_details.connection_name"

_QUEUE_CONSUMER_SHAPE = (
    "a consumer without a 'queue' 'name', a 'consumer_tag' text, an 'ack_required' boolean "
    "and 'channel_details' (an object, its 'connection_name' a text when present)"
)

_CONNECTION_SHAPE = "not a list of connections, each with a 'name' text and 'client_properties'"


ClientTexts = tuple[str | None, str | None, str | None]
"""A connection's client properties as rr reads them: product, version, connection name."""


def _client_text(properties: Mapping[str, object], *keys: str) -> str | None:
    """The first of ``keys`` that ``properties`` holds as a text; None when none does."""
    for key in keys:
        value = properties.get(key)
        if isinstance(value, str):
            return value
    return None


def _client_properties_of(listed: object) -> dict[str, ClientTexts] | None:
    """Each connection's client texts by its name, from ``/api/vhosts/VHOST/connections``;
    None when the answer is not of that shape (a connection without client properties, an
    AMQP 1.0 or MQTT one, has none to read)."""
    if not isinstance(listed, list):
        return None
    found: dict[str, ClientTexts] = {}
    for row in listed:
        name = row.get("name") if isinstance(row, dict) else None
        if not isinstance(name, str):
            return None
        properties = row.get("client_properties") or {}
        if not isinstance(properties, dict):
            return None
        found[name] = (
            _client_text(properties, "product"),
            _client_text(properties, "version", "product_version"),
            _client_text(properties, "connection_name"),
        )
    return found


def _consumer_of(row: object, connections: Mapping[str, ClientTexts]) -> QueueConsumer | None:
    """A consumer of ``/api/consumers/VHOST?columns=...`` with its connection's client texts;
    None when the row is not of the documented shape."""
    if not isinstance(row, dict):
        return None
    queue, channel = row.get("queue"), row.get("channel_details")
    name = queue.get("name") if isinstance(queue, dict) else None
    tag, ack_required = row.get("consumer_tag"), row.get("ack_required")
    if not (isinstance(name, str) and isinstance(tag, str) and isinstance(ack_required, bool)):
        return None
    # a new consumer's channel is stated as {} for a moment (4.3.6, measured): not known yet
    if not isinstance(channel, dict) and channel != []:
        return None
    connection = channel.get("connection_name") if isinstance(channel, dict) else None
    if connection is not None and not isinstance(connection, str):
        return None
    product, version, connection_name = (
        connections.get(connection, (None, None, None)) if connection else (None, None, None)
    )
    return QueueConsumer(
        queue=name,
        tag=tag,
        connection=connection,
        ack_required=ack_required,
        product=product,
        version=version,
        connection_name=connection_name,
    )


_NODE_COLUMNS = ",".join(
    (
        "name",
        "running",
        "mem_alarm",
        "disk_free_alarm",
        "mem_used",
        "mem_limit",
        "disk_free",
        "disk_free_limit",
    )
)

_NODE_SHAPE = (
    "a node without a 'name' text and a 'running' boolean, a running node without "
    "'mem_alarm' and 'disk_free_alarm' booleans, or a byte count that is not an integer"
)


def _node_resources_of(row: object) -> NodeResources | None:
    """A row of ``/api/nodes?columns=...`` as :class:`NodeResources`; None when it is not of
    the documented shape."""
    if not isinstance(row, dict):
        return None
    name, running = row.get("name"), row.get("running")
    if not _is_name(name) or not isinstance(running, bool):
        return None
    alarms = [row.get("mem_alarm"), row.get("disk_free_alarm")]
    if running and not all(isinstance(alarm, bool) for alarm in alarms):
        return None
    if not all(alarm is None or isinstance(alarm, bool) for alarm in alarms):
        return None
    try:
        counts = [
            _count(row.get(key))
            for key in ("mem_used", "mem_limit", "disk_free", "disk_free_limit")
        ]
    except _Malformed:
        return None
    assert isinstance(name, str)
    return NodeResources(name, running, alarms[0], alarms[1], *counts)


_HEALTH_COLUMNS = "name,type,members,online,messages_details.rate"

_HEALTH_SHAPE = (
    "a queue without a 'name' and a 'type' text, 'members' or 'online' that is not a list of "
    "texts, or a 'messages_details' rate that is not a number"
)


def _queue_health_of(row: object) -> QueueHealth | None:
    """A row of ``/api/queues/VHOST?columns=...`` as :class:`QueueHealth`; None when it is
    not of the documented shape."""
    if not isinstance(row, dict):
        return None
    name, kind = row.get("name"), row.get("type")
    if not isinstance(name, str) or not isinstance(kind, str):
        return None
    nodes: list[tuple[str, ...] | None] = []
    for key in ("members", "online"):
        listed = row.get(key)
        if listed is not None and (
            not isinstance(listed, list) or not all(_is_name(node) for node in listed)
        ):
            return None
        nodes.append(None if listed is None else tuple(sorted(listed)))
    details = row.get("messages_details")
    if details is not None and not isinstance(details, dict):
        return None
    try:
        rate = _rate(row, "messages_details")
    except _Malformed:
        return None
    return QueueHealth(name, kind, nodes[0], nodes[1], rate)


_PLACEMENT_SHAPE = "no 'node' text, or 'members' that is not a list of texts"


def _placement_of(queue: Mapping[str, Any]) -> Placement | None:
    """Where a queue object of the API says the queue lives; None when it is not of the
    documented shape: ``node`` a text (a classic queue's node, a quorum queue's leader), and
    for a quorum queue (or a stream) ``members`` a list of texts and ``leader`` a text."""
    members = queue.get("members")
    node = queue.get("node")
    if members is not None:
        leader = queue.get("leader", node)
        if not isinstance(members, list) or not all(_is_name(m) for m in members):
            return None
        if leader is not None and not isinstance(leader, str):
            return None
        return Placement(leader=leader or None, members=tuple(sorted(members)))
    if not isinstance(node, str) or not node:
        return None
    return Placement(leader=node, members=(node,))


_POLICY_SHAPE = (
    "a policy without a 'name', 'pattern' and 'apply-to' text, an integer 'priority' and a "
    "'definition' object of texts, integers and booleans"
)

_MAX_REASON_BYTES = 4096


def _policy_of(row: object) -> Policy | None:
    """The policy a row of ``/api/policies/VHOST`` states, or None when it is not of the
    documented shape."""
    if not isinstance(row, dict):
        return None
    name, pattern, apply_to = row.get("name"), row.get("pattern"), row.get("apply-to")
    priority, definition = row.get("priority"), row.get("definition")
    if not (isinstance(name, str) and isinstance(pattern, str) and isinstance(apply_to, str)):
        return None
    if not isinstance(priority, int) or isinstance(priority, bool):
        return None
    if not isinstance(definition, dict):
        return None
    keys: dict[str, PolicyValue] = {}
    for key, value in definition.items():
        if not isinstance(value, str | int | bool):
            return None
        keys[key] = value
    return Policy.of(name, pattern, keys, priority=priority, apply_to=apply_to)


def _read_quietly(error: urllib.error.HTTPError) -> bytes:
    """What a refusal's answer says (its first KiB or so), or nothing when it cannot be read."""
    try:
        return error.read(_MAX_REASON_BYTES)
    except (OSError, http.client.HTTPException):
        return b""


def _login_refusal(reason: str, tag: str) -> str:
    """Why the management API refused a login, from its ``reason``: RabbitMQ says "Not
    management user" (or "not administrator", ...) for a user without the ``tag``, and
    "Not_Authorized" / "Login failed" for a wrong user name or password (measured on 4.3.6)."""
    said = reason.lower()
    if "management user" in said or "not administrator" in said or "policymaker" in said:
        return f"its user needs the {tag} tag ({reason})"
    if "authori" in said or "login failed" in said:
        return f"wrong user name or password? ({reason})"
    return f"wrong user name or password, or its user lacks the {tag} tag"


def _reason_of(body: bytes, *, default: str = "400 Bad Request") -> str:
    """The ``reason`` of a refusal's JSON answer, escaped and clipped (else ``default``)."""
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        answer = None
    reason = answer.get("reason") if isinstance(answer, dict) else None
    if not isinstance(reason, str):
        return default
    reason = " ".join(reason.split())
    if len(reason) > _MAX_LOCATION_CHARS:
        reason = reason[:_MAX_LOCATION_CHARS] + "..."
    return escape_unprintable(reason)


def _is_name(value: object) -> bool:
    return isinstance(value, str) and bool(value)


_NO_SUCH_PATH = (404, 406)
"""What the management API answers to a path it does not know (rr asks for JSON: 406)."""


_UNDEFINED_QUEUE_TYPE = "undefined"
"""What RabbitMQ 3.x's API states as the default queue type of a vhost made without one."""
_FEATURE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,255}")
"""What a feature's name or phase may look like (an Erlang atom such as
``transient_nonexcl_queues``): nothing a message or a table could not show as it is."""
_STATES = {"permitted": True, "denied": False}


def _unstated_of(listed: object) -> Unstated | None:
    """The table as :class:`Unstated` when it is a non-empty list of objects each with a
    ``name`` (a word) and none with a ``state``; else None (then :func:`_features_of` says
    what it holds, or what is wrong with it)."""
    if not isinstance(listed, list) or not listed:
        return None
    names = []
    for row in listed:
        if not isinstance(row, dict) or "state" in row:
            return None
        name = row.get("name")
        if not isinstance(name, str) or not _FEATURE_NAME.fullmatch(name):
            return None
        names.append(name)
    if len(set(names)) != len(names):
        return None
    return Unstated(tuple(sorted(names)))


def _features_of(listed: object) -> tuple[tuple[DeprecatedFeature, ...], str | None]:
    """The table an answer of ``/api/deprecated-features`` holds, or what is wrong with it:
    a list of objects, each with a ``name`` (a word), a ``state`` (``permitted`` or
    ``denied``) and, when present, a ``deprecation_phase`` (a word); no name twice."""
    if not isinstance(listed, list):
        return (), "not a list of deprecated features"
    features: dict[str, DeprecatedFeature] = {}
    for row in listed:
        if not isinstance(row, dict):
            return (), "a deprecated feature that is not an object"
        name, state, phase = row.get("name"), row.get("state"), row.get("deprecation_phase")
        if not isinstance(name, str) or not _FEATURE_NAME.fullmatch(name):
            return (), "a deprecated feature without a 'name' (a word: transient_nonexcl_queues)"
        if not isinstance(state, str) or state not in _STATES:
            return (), f"deprecated feature {name} without a 'state' of permitted or denied"
        if phase is not None and (not isinstance(phase, str) or not _FEATURE_NAME.fullmatch(phase)):
            return (), f"deprecated feature {name} with a 'deprecation_phase' that is not a word"
        if name in features:
            return (), f"deprecated feature {name} listed twice"
        features[name] = DeprecatedFeature(name=name, permitted=_STATES[state], phase=phase)
    return tuple(features[name] for name in sorted(features)), None


def _shown_location(location: str) -> str:
    """A redirect's target as a message may show it: censored (then clipped: clipping
    first could cut the ``@`` that ends a password off), escaped."""
    shown = censor_url(location)
    if len(shown) > _MAX_LOCATION_CHARS:
        shown = shown[:_MAX_LOCATION_CHARS] + "..."
    return escape_unprintable(shown)


def _implements_the_port(api: HttpManagementApi) -> tuple[ManagementApi, ManagementConnector]:
    """Never called: mypy checks here that the adapter satisfies the management port."""
    return api, HttpManagementApi


__all__ = ["MAX_ANSWER_BYTES", "TIMEOUT_S", "HttpManagementApi"]
