"""The handler API: ``@subscriber(queue)``, ``@on_startup``, ``@on_shutdown``.

The decorators only mark the function (an attribute on it); nothing is registered globally,
so importing a module twice, or two test modules with the same queue, never leak into each
other. The loader finds the marked functions of a module.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from rabbitctl_retry.errors import RrError
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.message import Message

log = logging.getLogger("rr.runtime")

HandlerResult = AnyOutcome | None
Handler = Callable[[Message], HandlerResult | Awaitable[HandlerResult]]
Hook = Callable[[], Any]

_SUBSCRIBER = "__rr_subscriber__"
_TIMEOUT = "__rr_timeout__"
_HOOK = "__rr_hook__"

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Subscriber:
    """A handler bound to a queue."""

    queue: str
    handler: Handler
    name: str

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.handler)

    @property
    def timeout_s(self) -> float | None:
        """``@subscriber(..., timeout=S)``: how long one call may take, or None."""
        value = getattr(self.handler, _TIMEOUT, None)
        return float(value) if isinstance(value, int | float) else None


def subscriber(queue: str, *, timeout: float | None = None) -> Callable[[_F], _F]:
    """Mark ``handler`` as the consumer of ``queue``.

    The handler takes a :class:`Message` and returns an ``Outcome`` (or ``None``, which acks);
    it may be ``async`` or a plain function (run in a worker thread). An exception retries.
    ``timeout``: seconds one call may take; past it the call counts as failed (a retry, with
    ``rr-error-type = rr.HandlerTimeout``), so ``max_attempts`` ends a message whose handler
    hangs (docs/runtime.md, "Handlers").
    """
    if not isinstance(queue, str) or not queue:
        raise TypeError("@subscriber needs a queue name, e.g. @subscriber('refunds')")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
    ):
        raise TypeError(f"@subscriber timeout must be a number of seconds above 0, not {timeout!r}")

    def mark(handler: _F) -> _F:
        setattr(handler, _SUBSCRIBER, queue)
        if timeout is not None:
            setattr(handler, _TIMEOUT, timeout)
        return handler

    return mark


class ThreadCalls:
    """Synchronous handler calls running in worker threads. Python cannot stop a thread: a
    handler that never returns outlives the stop, and ``rr run`` must not wait for it at exit
    (docs/runtime.md, "Running it")."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0

    @property
    def running(self) -> int:
        with self._lock:
            return self._running

    def counted(self, handler: Handler) -> Handler:
        """``handler``, counted while it runs."""

        @functools.wraps(handler)
        def call(message: Message) -> Any:
            with self._lock:
                self._running += 1
            try:
                return handler(message)
            finally:
                with self._lock:
                    self._running -= 1

        return call


def on_startup(hook: _F) -> _F:
    """Run ``hook()`` (sync or async) once before consuming starts."""
    setattr(hook, _HOOK, "startup")
    return hook


def on_shutdown(hook: _F) -> _F:
    """Run ``hook()`` (sync or async) once after consuming stopped."""
    setattr(hook, _HOOK, "shutdown")
    return hook


def subscriber_queue(obj: object) -> str | None:
    """The queue ``obj`` was marked for, if any."""
    queue = getattr(obj, _SUBSCRIBER, None)
    return queue if isinstance(queue, str) else None


def hook_kind(obj: object) -> str | None:
    kind = getattr(obj, _HOOK, None)
    return kind if kind in {"startup", "shutdown"} else None


class HookFailed(RrError):
    """An ``@on_startup`` or ``@on_shutdown`` hook raised (exit 1, one line)."""


async def call_hook(hook: Hook) -> None:
    result = hook()
    if inspect.isawaitable(result):
        await result


async def call_hooks(hooks: tuple[Hook, ...], kind: str) -> None:
    """Call every hook in order. A startup hook that raises stops there; shutdown hooks all
    run, and the first failure is raised after the last. Only Ctrl-C and a real cancellation
    pass through untouched: any other exception, ``SystemExit`` included, is the hook's
    failure (:class:`HookFailed`)."""
    first: HookFailed | None = None
    for hook in hooks:
        try:
            await call_hook(hook)
        except (KeyboardInterrupt, asyncio.CancelledError):
            raise
        except BaseException as error:
            name = getattr(hook, "__name__", repr(hook))
            failed = HookFailed(f"@on_{kind} hook {name} failed: {type(error).__name__}: {error}")
            if kind == "startup":
                raise failed from None
            log.error("shutdown hook failed", extra={"rr": {"hook": name, "error": str(failed)}})
            first = first or failed
    if first is not None:
        raise first
