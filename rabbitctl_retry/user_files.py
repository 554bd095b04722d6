"""Every file rr reads on the user's word, opened and read by one rule (docs/reference/cli.md,
"Files rr reads").

A file is opened without waiting (``O_NONBLOCK``: opening a FIFO does not wait for a
writer), checked on the open descriptor (a regular file only: a FIFO, a device such as
``/dev/zero``, a socket or a directory is refused unread) and read to at most its limit and
one byte: a file over its limit is refused, whatever size it claims, so no file makes rr's
memory grow past the limit. Standard input is read only where a command documents ``-``
for it (:func:`read_stream`), to the same kind of limit.

What is refused raises :class:`FileRefused` with the reason in rr's words (``is a device,
not a regular file``); each caller turns it into its own error, naming the file and what it
is for, with its exit code (78 for a configuration file, 65 for data). Each reader's limit
is one constant here, and docs/reference/cli.md's table lists them.

Not pure (it reads files), but it imports only the standard library, so the topology
loader of the pure core reads through it too (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "BODY_LIMIT_BYTES",
    "CONFIG_FILE_LIMIT_BYTES",
    "HANDLER_FILE_LIMIT_BYTES",
    "IMPORT_LINE_LIMIT_BYTES",
    "PASSWORD_FILE_LIMIT_BYTES",
    "PUBLISH_FILE_LIMIT_BYTES",
    "TLS_FILE_LIMIT_BYTES",
    "TOKEN_FILE_LIMIT_BYTES",
    "TOPOLOGY_FILE_LIMIT_BYTES",
    "FileRefused",
    "check_regular_file",
    "decoded",
    "read_bytes",
    "read_lines",
    "read_stream",
    "read_text",
    "size_words",
]

KIB = 1024
MIB = 1024 * KIB

TOPOLOGY_FILE_LIMIT_BYTES = 1 * MIB
"""A topology file (docs/reference/topology.md, "Malformed files")."""
CONFIG_FILE_LIMIT_BYTES = 1 * MIB
"""rr's configuration file of profiles (docs/reference/cli.md, "Profiles")."""
PASSWORD_FILE_LIMIT_BYTES = 64 * KIB
"""A profile's ``password_file`` (its first line is the password)."""
TOKEN_FILE_LIMIT_BYTES = 64 * KIB
"""``rr console --token-file`` (docs/reference/console.md)."""
BODY_LIMIT_BYTES = 16 * MIB
"""``rr dlq edit``'s new body: ``--body FILE``, ``--body -`` (stdin) or the file the editor
saved (docs/reference/dlq.md); ``rr publish --body-file`` (docs/reference/cli.md, "rr publish")."""
PUBLISH_FILE_LIMIT_BYTES = 16 * MIB
"""``rr simulate --publish-file`` (docs/reference/runtime.md, "rr simulate")."""
IMPORT_LINE_LIMIT_BYTES = 32 * MIB
"""One line of an ``rr dlq import`` file (docs/reference/dlq.md): the file itself is read a line at
a time, so its size has no limit; a line holds one message, its body in base64 at most.
``rr publish --file`` reads a file the same way, and ``--file -`` (stdin) to this limit in
all (docs/reference/cli.md, "rr publish")."""
HANDLER_FILE_LIMIT_BYTES = 16 * MIB
"""``rr run path/to/service.py`` and ``rr simulate``'s handler file (docs/reference/runtime.md)."""
TLS_FILE_LIMIT_BYTES = 16 * MIB
"""A broker URL's ``cafile``, ``certfile`` and ``keyfile`` (docs/reference/cli.md, "Connecting"),
which OpenSSL reads itself: checked by their size."""

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class FileRefused(Exception):
    """A file rr will not read, and why (without the file's name: the caller adds it)."""

    def __init__(
        self,
        reason: str,
        *,
        missing: bool = False,
        not_regular: bool = False,
        line: int | None = None,
    ):
        super().__init__(reason)
        self.reason = reason
        self.missing = missing
        """There is no such file."""
        self.not_regular = not_regular
        """The file is a FIFO, a device, a directory or a socket."""
        self.line = line
        """The 1-based line the problem is on, when it has one (text that is not UTF-8)."""


def size_words(limit_bytes: int) -> str:
    """``1048576 bytes (1 MiB)``: a limit as messages and docs/reference/cli.md state it."""
    if limit_bytes % MIB == 0:
        return f"{limit_bytes} bytes ({limit_bytes // MIB} MiB)"
    if limit_bytes % KIB == 0:
        return f"{limit_bytes} bytes ({limit_bytes // KIB} KiB)"
    return f"{limit_bytes} bytes"


def read_bytes(path: str | Path, *, limit_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit_bytes`` of them; at most
    ``limit_bytes + 1`` are read.

    Raises:
        FileRefused: no such file, not a regular file, over the limit, unreadable.
    """
    with _opened(path, limit_bytes) as stream:
        data = _read_at_most(stream, limit_bytes + 1)
    if len(data) > limit_bytes:
        raise _too_large(limit_bytes)
    return data


def read_text(path: str | Path, *, limit_bytes: int) -> str:
    """:func:`read_bytes` as UTF-8 text; :class:`FileRefused` on what is not UTF-8."""
    return decoded(read_bytes(path, limit_bytes=limit_bytes))


def read_stream(stream: BinaryIO, *, limit_bytes: int) -> bytes:
    """Standard input (or any stream), where a command documents ``-`` for it: read to its
    end, at most ``limit_bytes + 1`` bytes; :class:`FileRefused` over the limit."""
    try:
        data = _read_at_most(stream, limit_bytes + 1)
    except OSError as error:
        raise FileRefused(f"cannot read it: {error.strerror or error}") from None
    if len(data) > limit_bytes:
        raise _too_large(limit_bytes)
    return data


@contextmanager
def read_lines(path: str | Path, *, line_limit_bytes: int) -> Iterator[Iterator[tuple[int, str]]]:
    """The lines of the regular file ``path``, each as (1-based number, text without its line
    break), read one at a time (any number of lines in the memory of one): a line over
    ``line_limit_bytes`` or not UTF-8 raises :class:`FileRefused` (with its ``line``, which
    the caller shows as ``FILE:LINE``) when it is reached."""
    with _opened(path, None) as stream:

        def lines() -> Iterator[tuple[int, str]]:
            number = 0
            while True:
                try:
                    line = stream.readline(line_limit_bytes + 2)
                except OSError as error:
                    raise FileRefused(f"cannot read it: {error.strerror or error}") from None
                if not line:
                    return
                number += 1
                content = line[:-1] if line.endswith(b"\n") else line
                if content.endswith(b"\r"):
                    content = content[:-1]
                if len(content) > line_limit_bytes:
                    raise FileRefused(
                        f"the line is longer than {size_words(line_limit_bytes)}, the most "
                        "rr reads of a line",
                        line=number,
                    )
                try:
                    text = content.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise FileRefused(
                        f"the line is not UTF-8 text (byte 0x{content[error.start]:02x})",
                        line=number,
                    ) from None
                yield number, text

        yield lines()


def check_regular_file(path: str | Path, *, limit_bytes: int) -> None:
    """That ``path`` is a regular file of at most ``limit_bytes`` (by its size), for a file
    another reader reads (Python's import system reads a handler's file itself)."""
    with _opened(path, limit_bytes) as stream:
        size = os.fstat(stream.fileno()).st_size
    if size > limit_bytes:
        raise _too_large(limit_bytes)


def decoded(data: bytes) -> str:
    """``data`` as UTF-8 text; :class:`FileRefused` naming the first byte and its line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise FileRefused(
            f"is not UTF-8 text (byte 0x{data[error.start]:02x})", line=line
        ) from None


@contextmanager
def _opened(path: str | Path, limit_bytes: int | None) -> Iterator[BinaryIO]:
    """``path`` open for reading, once it is known to be a regular file (no larger than
    ``limit_bytes`` by its size, when one is given: refused before a byte is read)."""
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise FileRefused("no such file", missing=True) from None
    except (OSError, ValueError) as error:  # ValueError: a NUL byte in the name
        raise FileRefused(f"cannot read it: {_why(error)}") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise FileRefused(
                f"is {_file_kind(status.st_mode)}, not a regular file", not_regular=True
            )
        if limit_bytes is not None and status.st_size > limit_bytes:
            raise _too_large(limit_bytes)
        # a regular file: reads do not wait, and O_NONBLOCK means nothing for them
        stream = os.fdopen(descriptor, "rb", buffering=64 * KIB)
    except OSError as error:
        os.close(descriptor)
        raise FileRefused(f"cannot read it: {_why(error)}") from None
    except BaseException:
        os.close(descriptor)
        raise
    with stream:
        try:
            yield stream
        except OSError as error:
            raise FileRefused(f"cannot read it: {_why(error)}") from None


def _read_at_most(stream: BinaryIO, count: int) -> bytes:
    """Up to ``count`` bytes, reading until the end or ``count`` (a pipe hands out less than
    asked for at a time)."""
    parts: list[bytes] = []
    left = count
    while left > 0:
        part = stream.read(min(left, MIB))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _too_large(limit_bytes: int) -> FileRefused:
    return FileRefused(f"is larger than {size_words(limit_bytes)}, the most rr reads")


def _why(error: Exception) -> str:
    return (error.strerror if isinstance(error, OSError) else None) or str(error)


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"
