"""One error tree for rr, and the exit code of each error.

Pure. Every error rr raises on purpose is an :class:`RrError`; the CLI turns it into a
message on stderr and the exit code of :func:`exit_code_for`. Driver errors (aiormq, sockets,
TLS) are mapped into this tree once, in ``transport/errors.py``; the emulator raises the same
classes, so callers never see a driver exception.

::

    RrError                          1  failure
    ├── UsageError                   2  bad command-line use
    ├── PartialFailure               3  some items failed, some succeeded
    ├── DataError                   65  a message or file that cannot be read
    ├── ConfigError                 78  invalid topology file (key path, file, line)
    ├── HandlerLoadError            78  module / attribute / subscribers not found
    ├── ConflictError                1  the broker holds an entity that differs from the plan
    └── TransportError               1  anything the broker or the connection said
        ├── BrokerUnreachable       69  no TCP/TLS connection, or it dropped
        ├── AccessRefused           77  bad credentials, or 403 on a resource / vhost
        ├── NotFound                 1  404: queue or exchange does not exist
        ├── PreconditionFailed       1  406: inequivalent re-declare, and the like
        ├── ResourceLocked           1  405: exclusive queue of another connection
        ├── ChannelClosed            1  any other channel-level close
        └── PublishFailed            1  a publish was returned (unroutable) or nacked
"""

from __future__ import annotations

from enum import IntEnum
from urllib.parse import urlsplit, urlunsplit


class ExitCode(IntEnum):
    """The process exit codes (docs/cli.md, "Exit codes")."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    PARTIAL = 3
    DATA = 65
    UNAVAILABLE = 69
    NO_PERMISSION = 77
    CONFIG = 78


class RrError(Exception):
    """Base of every error rr raises on purpose."""

    exit_code: ExitCode = ExitCode.FAILURE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(RrError):
    exit_code = ExitCode.USAGE


class PartialFailure(RrError):
    exit_code = ExitCode.PARTIAL


class DataError(RrError):
    exit_code = ExitCode.DATA


class ConfigError(RrError):
    """An invalid topology file.

    ``path`` is the TOML key path (``queues.payouts.max_attempts``), ``source`` the file and
    ``line`` the 1-based line where the key (or the syntax error) is, when known.
    """

    exit_code = ExitCode.CONFIG

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        source: str | None = None,
        line: int | None = None,
    ) -> None:
        self.path = path
        self.source = source
        self.line = line
        self.detail = message
        super().__init__(self._render(message))

    def _render(self, message: str) -> str:
        where = ""
        if self.source is not None:
            where = self.source
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        elif self.line is not None:
            where = f"line {self.line}: "
        key = f"{self.path}: " if self.path else ""
        return f"{where}{key}{message}"

    def located(self, *, source: str | None = None, line: int | None = None) -> ConfigError:
        """The same error with a file name and line filled in where they were missing."""
        return ConfigError(
            self.detail,
            path=self.path,
            source=self.source if self.source is not None else source,
            line=self.line if self.line is not None else line,
        )


class HandlerLoadError(RrError):
    exit_code = ExitCode.CONFIG


class ConflictError(RrError):
    """The broker holds an entity whose arguments differ from the plan."""


class TransportError(RrError):
    """Anything the broker or the connection reported."""


class BrokerUnreachable(TransportError):
    exit_code = ExitCode.UNAVAILABLE


class AccessRefused(TransportError):
    exit_code = ExitCode.NO_PERMISSION


class NotFound(TransportError):
    pass


class PreconditionFailed(TransportError):
    pass


class ResourceLocked(TransportError):
    pass


class ChannelClosed(TransportError):
    pass


class PublishFailed(TransportError):
    pass


def exit_code_for(error: BaseException) -> int:
    """The exit code for ``error``: its class's code for rr errors, 1 for anything else."""
    if isinstance(error, RrError):
        return int(error.exit_code)
    return int(ExitCode.FAILURE)


def censor_url(url: str) -> str:
    """``url`` with any password replaced by ``******``; never raises.

    Every URL rr prints or logs goes through here: a password must never reach a terminal,
    a log line or a JSON document.
    """
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port is not None else ""
        netloc = f"{user}:******@{host}{port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    except ValueError:
        return "<unparseable url>"
