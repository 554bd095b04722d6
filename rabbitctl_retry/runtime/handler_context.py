"""The delivery a handler call is handling, for what runs inside it (its log lines).

The consumer sets :data:`current` around each handler call (async handlers in their task,
sync ones in their worker thread, through a copied context) to the call's ``Message``; a log
record made inside the call can carry the message id, the queue and the attempt
(``cli/logs.py``), read only when a line is logged (the handler's hot path pays one set and
one reset).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol


class CallFacts(Protocol):
    """What a handler call's log lines say of it (a ``Message`` has these)."""

    @property
    def queue(self) -> str: ...

    @property
    def message_id(self) -> str | None: ...

    @property
    def attempt(self) -> int: ...


@dataclass(frozen=True, slots=True)
class HandlerCall:
    """One handler call's facts as plain values (for code that has no ``Message``)."""

    queue: str
    message_id: str | None
    attempt: int


current: ContextVar[CallFacts | None] = ContextVar("rr_handler_call", default=None)
