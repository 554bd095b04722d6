"""RabbitMQ's management HTTP API, for the two things AMQP 0-9-1 cannot tell: which nodes
form the cluster, and which of them hold each queue (docs/cluster.md, "Replicas").

rr asks only when it is given a management URL (``--management-url``,
``$RR_MANAGEMENT_URL`` or ``[broker] management_url``), with the plugin's own credentials
in it: ``http://user:password@mq1:15672/``. Requests are plain ``urllib`` GETs with basic
auth, run in a thread so the event loop never waits on a socket. A refused login raises
:class:`AccessRefused` (exit 77); anything else that keeps rr from an answer raises
:class:`BrokerUnreachable` (exit 69), naming the censored URL.
"""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from rabbitctl_retry.errors import AccessRefused, BrokerUnreachable, UsageError, censor_url
from rabbitctl_retry.topology.plan import Placement

TIMEOUT_S = 10.0


def check_management_url(url: str) -> str:
    """``url`` if rr can use it as a management API base, else :class:`UsageError`."""
    if not url.isprintable() or " " in url:
        raise UsageError("management URL holds a space or a control character")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            "management URL must be http://HOST:PORT/ or https://HOST:PORT/ (the management "
            "plugin's address, e.g. http://guest:guest@localhost:15672/)"
        )
    return url


def vhost_of(amqp_url: str) -> str:
    """The virtual host an AMQP URL names: its path without the leading ``/``, decoded;
    ``/`` when the URL has no path."""
    path = urllib.parse.urlsplit(amqp_url).path
    return urllib.parse.unquote(path[1:]) if len(path) > 1 else "/"


class ManagementApi:
    """The management API at ``url``, for queues of ``vhost``."""

    def __init__(self, url: str, *, vhost: str, timeout_s: float = TIMEOUT_S) -> None:
        parts = urllib.parse.urlsplit(check_management_url(url))
        netloc = parts.hostname or ""
        if ":" in netloc:  # an IPv6 address
            netloc = f"[{netloc}]"
        if parts.port is not None:
            netloc = f"{netloc}:{parts.port}"
        self._base = f"{parts.scheme}://{netloc}{parts.path.rstrip('/')}"
        user = urllib.parse.unquote(parts.username or "")
        password = urllib.parse.unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        self._headers = {"Authorization": f"Basic {token}", "Accept": "application/json"}
        self._shown = censor_url(url)
        self._vhost = vhost
        self._timeout_s = timeout_s

    async def nodes(self) -> tuple[str, ...]:
        """The names of every node of the cluster, running or not, sorted."""
        listed = await self._get("/api/nodes")
        if not isinstance(listed, list):
            raise self._unexpected("/api/nodes")
        return tuple(sorted(str(node["name"]) for node in listed if isinstance(node, dict)))

    async def placement(self, queue: str) -> Placement | None:
        """Where ``queue`` lives, or None when the API does not know it (404)."""
        path = "/api/queues/{}/{}".format(
            urllib.parse.quote(self._vhost, safe=""), urllib.parse.quote(queue, safe="")
        )
        found = await self._get(path, missing_ok=True)
        if found is None:
            return None
        if not isinstance(found, dict):
            raise self._unexpected(path)
        members = found.get("members")
        if isinstance(members, list):  # a quorum queue (or a stream)
            leader = found.get("leader")
            return Placement(
                leader=str(leader) if leader else None,
                members=tuple(sorted(str(member) for member in members)),
            )
        node = found.get("node")
        return Placement(leader=str(node) if node else None, members=(str(node),) if node else ())

    async def _get(self, path: str, *, missing_ok: bool = False) -> Any:
        return await asyncio.to_thread(self._get_blocking, path, missing_ok)

    def _get_blocking(self, path: str, missing_ok: bool) -> Any:
        request = urllib.request.Request(self._base + path, headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            error.close()  # it holds the response's socket
            if error.code == 404 and missing_ok:
                return None
            if error.code in (401, 403):
                raise AccessRefused(
                    f"the management API at {self._shown} refused the login ({error.code}): "
                    "its user needs the management (or monitoring) tag"
                ) from None
            raise BrokerUnreachable(
                f"the management API at {self._shown} answered {error.code} to GET {path}"
            ) from None
        except (urllib.error.URLError, OSError, TimeoutError) as error:
            reason = getattr(error, "reason", error)
            raise BrokerUnreachable(
                f"cannot reach the management API at {self._shown}: {reason}"
            ) from None
        except ValueError:
            raise self._unexpected(path) from None

    def _unexpected(self, path: str) -> BrokerUnreachable:
        return BrokerUnreachable(
            f"the management API at {self._shown} gave an unexpected answer to GET {path} "
            "(is it RabbitMQ's management plugin?)"
        )


__all__ = ["ManagementApi", "check_management_url", "vhost_of"]
