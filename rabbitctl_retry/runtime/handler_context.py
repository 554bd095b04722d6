"""The delivery a handler call is handling, for what runs inside it (its log lines).

The consumer sets :data:`current` around each handler call (async handlers in their task,
sync ones in their worker thread, through a copied context); a log record made inside the
call can carry the message id, the queue and the attempt (``cli/logs.py``).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HandlerCall:
    """One handler call: its queue, the message id (if any) and the attempt."""

    queue: str
    message_id: str | None
    attempt: int


current: ContextVar[HandlerCall | None] = ContextVar("rr_handler_call", default=None)
