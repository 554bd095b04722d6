"""The console's web server on its socket (docs/reference/console.md, "Limits"): the listening site,
the connections it takes (console/limits.py: how many, which one goes to make room, how long
one may stay without a whole request), and what the server tells the log: one line per
malformed request or failure, never a traceback (``RR_TRACEBACK=1`` keeps them, as for
every rr error: docs/reference/exit-codes.md, "Exit codes")."""

from __future__ import annotations

import asyncio
import logging
import os
import resource
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler

from rabbitctl_retry.console.limits import LINGER_S, connection_limit, to_close

HTTP_LOG = logging.getLogger("rr.console.http")
"""The web server's log: what it refused and why, one line each."""
TRACEBACK_ENV = "RR_TRACEBACK"
MAX_SAID = 300
"""Characters of an error kept in its log line."""


class OneLine(logging.Filter):
    """Each record of the web server as one line: the error's type and text instead of its
    traceback; a malformed request (the client's mistake) at WARNING, as are aiohttp's debug
    lines for one (a request that is not HTTP at all); other debug lines dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is None:
            return record.levelno >= logging.WARNING
        if os.environ.get(TRACEBACK_ENV):
            return True
        said = " ".join(f"{type(error).__name__}: {error}".split())
        if len(said) > MAX_SAID:
            said = said[:MAX_SAID] + "..."
        record.msg, record.args = "%s: %s", (record.getMessage(), said)
        record.exc_info, record.exc_text = None, None
        if isinstance(error, HttpProcessingError):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def quiet_http_log() -> None:
    if not any(isinstance(f, OneLine) for f in HTTP_LOG.filters):
        HTTP_LOG.addFilter(OneLine())
    HTTP_LOG.setLevel(logging.DEBUG)  # the filter decides: aiohttp logs some at DEBUG


def server_options(idle_close_s: float) -> dict[str, Any]:
    """The web server's settings (``web.AppRunner``'s keywords): no access log, the log
    above, idle and half-sent connections closed after ``idle_close_s``."""
    return {
        "access_log": None,
        "logger": HTTP_LOG,
        "keepalive_timeout": idle_close_s,
        "lingering_time": LINGER_S,
    }


def open_files_limit() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


class Admission:
    """The connections that are answering a request (the access middleware marks them), and
    the factory of the server's connections, which closes the oldest other one when
    :attr:`limit` are open (console/limits.py ``to_close``)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = connection_limit(open_files_limit()) if limit is None else limit
        self.busy: set[RequestHandler] = set()

    def factory(self, server: web.Server) -> Callable[[], RequestHandler]:
        def connection() -> RequestHandler:
            open_ = [handler for handler in server.connections if handler.transport is not None]
            victim = to_close(open_, self.busy, self.limit)
            if victim is not None:
                victim.force_close()
            return server()

        return connection


class ConsoleSite(web.BaseSite):
    """``host`` ``port``, served through :class:`Admission`'s factory (a ``web.TCPSite``
    that makes room for each new connection)."""

    __slots__ = ("_admission", "_host", "_port")

    def __init__(self, runner: web.AppRunner, host: str, port: int, admission: Admission):
        super().__init__(runner)
        self._host = host
        self._port = port
        self._admission = admission

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self._admission.factory(server),
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=True,
        )
