"""Queue names given on the command line: one rr's AMQP client cannot send is a usage error
(exit 2), refused before rr connects (docs/reference/dlq.md, "Queue names";
docs/reference/exit-codes.md, "Exit codes").

What goes: UTF-8 text of 1 to 255 bytes, its ASCII characters from the AMQP client's name
grammar (letters, digits, ``- _ . : @ # , / +`` and space), any other character but a lone
surrogate (what the command line makes of bytes that are not UTF-8).
"""

from __future__ import annotations

from collections.abc import Iterable

from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.topology.wire import describe_text, sendable_queue_name_problem

queue_name_problem = sendable_queue_name_problem
"""Why ``name`` cannot be sent as a queue name, or ``None`` (``topology/wire.py``). Pure."""


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
