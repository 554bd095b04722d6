"""Queue names given on the command line: one rr's AMQP client cannot send is a usage error
(exit 2), refused before rr connects (docs/dlq.md, "Queue names"; docs/cli.md, "Exit codes").

What goes: UTF-8 text of 1 to 255 bytes, its ASCII characters from the AMQP client's name
grammar (letters, digits, ``- _ . : @ # , / +`` and space), any other character but a lone
surrogate (what the command line makes of bytes that are not UTF-8).
"""

from __future__ import annotations

from collections.abc import Iterable

from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.topology.wire import (
    MAX_QUEUE_NAME_BYTES,
    NAME_ASCII_CHARACTERS,
    describe_text,
)

_ALLOWED = "letters, digits, - _ . : @ # , / + space and non-ASCII characters"


def queue_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be sent as a queue name, or ``None``. Pure."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError as error:
        bad = name[error.start]
        return (
            f"is not UTF-8 text (it holds U+{ord(bad):04X}: a byte the command line could not "
            "decode)"
        )
    if size == 0:
        return f"is empty; a queue name is 1 to {MAX_QUEUE_NAME_BYTES} bytes"
    if size > MAX_QUEUE_NAME_BYTES:
        return f"is {size:,} bytes long; a queue name is at most {MAX_QUEUE_NAME_BYTES}"
    for char in name:
        if char < "\x80" and char not in NAME_ASCII_CHARACTERS:
            shown = repr(char) if char.isprintable() else f"U+{ord(char):04X}"
            return f"holds {shown}; a queue name rr can send holds only {_ALLOWED}"
    return None


def check_queue_names(names: Iterable[str], what: str = "queue") -> None:
    """:class:`UsageError` for the first of ``names`` that cannot be sent; ``what`` names the
    argument (``queue``, ``--to``)."""
    for name in names:
        problem = queue_name_problem(name)
        if problem is not None:
            raise UsageError(
                f"{what} {describe_text(name)} cannot be sent to RabbitMQ: it {problem}"
            )


__all__ = ["check_queue_names", "queue_name_problem"]
