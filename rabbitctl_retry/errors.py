"""One error tree for rr, and the exit code of each error.

Pure. Every error rr raises on purpose is an :class:`RrError`; the CLI turns it into a
message on stderr and the exit code of :func:`exit_code_for`. Driver errors (aiormq, sockets,
TLS) are mapped into this tree once, in ``transport/errors.py`` and, for aiormq's,
``transport/aiormq_errors.py``; the emulator raises the same
classes, so callers never see a driver exception.

::

    RrError                          1  failure
    ├── UsageError                   2  bad command-line use
    ├── PartialFailure               3  some items failed, some succeeded
    ├── DataError                   65  a message or file that cannot be read
    ├── WriteError                  74  rr's output (stdout, an export file) cannot be written
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
            └── PublishReturned      1  returned: no queue took it (mandatory)

    ReaderGone                     141  not an RrError: stdout's reader closed the pipe (quiet)
"""

from __future__ import annotations

import errno
import re
from enum import IntEnum


class ExitCode(IntEnum):
    """The process exit codes (docs/reference/exit-codes.md, "Exit codes")."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    PARTIAL = 3
    DATA = 65
    UNAVAILABLE = 69
    INTERNAL = 70
    """A bug in rr: an exception it did not expect (one line; RR_TRACEBACK=1 shows where)."""
    IO_ERROR = 74
    """rr's output cannot be written: stdout or an export file (sysexits' EX_IOERR)."""
    NO_PERMISSION = 77
    CONFIG = 78
    PIPE_CLOSED = 141
    """stdout's reader closed the pipe (``rr ... | head``): rr stops quietly, with the code a
    shell reports for a Unix tool stopped by SIGPIPE (128 + 13)."""


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


class WriteError(RrError):
    """Output that cannot be written: no space left, an I/O error, stdout closed, a missing
    folder or no permission for an export file (docs/reference/cli.md, "Output")."""

    exit_code = ExitCode.IO_ERROR


STDOUT = "stdout"
"""The name :func:`write_failure` gives standard output."""


class ReaderGone(Exception):
    """stdout's reader closed the pipe (``rr ... | head``): not an error, and no rr error
    line; the command ends quietly with exit 141 (:data:`ExitCode.PIPE_CLOSED`)."""


def write_failure(error: OSError, target: str) -> WriteError | ReaderGone:
    """What a failed write of rr's output to ``target`` (:data:`STDOUT`, or an export file's
    name) means: a closed pipe on stdout is :class:`ReaderGone`, anything else (no space, an
    I/O error, a missing folder, no permission) a :class:`WriteError` (docs/reference/cli.md,
    "Output")."""
    if target == STDOUT and (isinstance(error, BrokenPipeError) or error.errno == errno.EPIPE):
        return ReaderGone()
    return WriteError(f"cannot write to {target}: {error.strerror or error}")


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


class BrokerRefused(TransportError):
    """The broker refused a command by closing the connection (540 NOT_IMPLEMENTED, 541
    INTERNAL_ERROR: a feature it denies, an operation a queue type does not implement): the
    broker answered, so it is reachable; what was asked is what failed (exit 1)."""

    exit_code = ExitCode.FAILURE


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


class PublishReturned(PublishFailed):
    """A ``mandatory`` publish the broker returned: no queue took it (a nack is its parent,
    :class:`PublishFailed`)."""


def exit_code_for(error: BaseException) -> int:
    """The exit code for ``error``: its class's code for rr errors, 1 for anything else."""
    if isinstance(error, RrError):
        return int(error.exit_code)
    return int(ExitCode.FAILURE)


_MASK = "******"

_SAFE_USER_NAME = re.compile(r"[A-Za-z0-9._~%!$&'()*+,;=-]+")
"""A user name that may be shown: RFC 3986 userinfo characters, no ``:`` ``@`` ``/`` ``?``
``#`` (one of those in the user part means the URL was not written as intended)."""

_URL_LIKE_WORD = re.compile(r"://|^[^@\s]*:[^@\s]*@")
"""A word that is, or holds, a URL: a scheme, or ``user:password@`` without one."""


def censor_url(url: str) -> str:
    """``url`` with everything between ``://`` (or the start) and the LAST ``@`` masked.

    Censors by construction, without parsing: a URL whose password holds an unencoded ``/``,
    ``?``, ``#`` or ``@`` (one that a URL parser reads wrongly) is masked all the same. The
    user name stays only when it can be told apart from the password (``user:password@``,
    with a user name of plain URL characters); a lone ``word@`` may be a password and is
    masked. A text without ``@`` comes back unchanged. Never raises.

    Every URL rr prints or logs goes through here: a password must never reach a terminal,
    a log line or a JSON document (docs/reference/cli.md, "Connecting").
    """
    at = url.rfind("@")
    if at < 0:
        return url
    scheme_end = url.find("://")
    start = scheme_end + 3 if 0 <= scheme_end < at else 0
    user, colon, _ = url[start:at].partition(":")
    shown = f"{user}:{_MASK}" if colon and _SAFE_USER_NAME.fullmatch(user) else _MASK
    return f"{url[:start]}{shown}{url[at:]}"


def censor_urls(text: str) -> str:
    """``text`` with every URL-looking word (see :func:`censor_url`) censored; the other
    words are left alone, so a message's own words ("wrong user name or password") stay."""
    if "@" not in text:
        return text
    return _WORD.sub(_censor_word, text)


_WORD = re.compile(r"\S+")


def _censor_word(found: re.Match[str]) -> str:
    word = found.group()
    return censor_url(word) if _URL_LIKE_WORD.search(word) else word


def escape_unprintable(text: str) -> str:
    """``text`` safe for a terminal and for one log line: every character that is not
    printable (C0 and C1 controls, DEL, line breaks, bidi and other format characters,
    surrogates) becomes a visible escape (``\\x1b``, ``\\n``, ``\\u202e``). Pure."""
    if text.isprintable():
        return text
    return "".join(
        char
        if char.isprintable()
        else char.encode("unicode_escape", "backslashreplace").decode("ascii")
        for char in text
    )
