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
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, TypeVar, cast, overload

import rabbitctl_retry.runtime.state as service_state
from rabbitctl_retry.errors import RrError
from rabbitctl_retry.retry.failure_map import Delay, FailureMap
from rabbitctl_retry.retry.outcome import AnyOutcome, Outcome

log = logging.getLogger("rr.runtime")

HandlerResult = AnyOutcome | None
Handler = Callable[..., HandlerResult | Awaitable[HandlerResult]]
"""A handler as rr calls it: with the arguments its parameters ask for (the decoded message
first, ``runtime/invocation.py``)."""
Hook = Callable[[], Any]

_OPTIONS = "__rr_subscriber__"
_HOOK = "__rr_hook__"

_F = TypeVar("_F", bound=Callable[..., Any])

_Returns = Outcome | None | Awaitable[Outcome | None]
"""What a handler may return, to mypy (docs/reference/handlers.md, "Type checking")."""
_H = TypeVar("_H", bound=Callable[..., _Returns])
_K = TypeVar("_K", bound=type)


class _HasHandle(Protocol):
    @property
    def handle(self) -> Callable[..., _Returns]: ...


_O = TypeVar("_O", bound=_HasHandle)


class SubscriberMark(Protocol):
    """What ``@subscriber(queue)`` returns: marks a handler function (returning an
    ``Outcome`` or ``None``, or awaitable of one), a class, or an object with a ``handle``
    method, and gives it back with its own type."""

    @overload
    def __call__(self, handler: _K, /) -> _K: ...
    @overload
    def __call__(self, handler: _H, /) -> _H: ...
    @overload
    def __call__(self, handler: _O, /) -> _O: ...


class OnDecodeError(StrEnum):
    """What becomes of a delivery whose body does not decode into the handler's type."""

    DEAD_LETTER = "dead-letter"
    """To the dead-letter queue at once, ``rr-error-type = rr.DecodeError`` (the default)."""
    DROP = "drop"
    """``basic.reject(requeue=false)``, RustStream's rule (its settlement guide)."""


@dataclass(frozen=True, slots=True)
class SubscriberOptions:
    """What ``@subscriber(...)`` says besides the function: its queue and keywords."""

    queue: str
    timeout_s: float | None = None
    failures: FailureMap = field(default_factory=FailureMap)
    on_decode_error: OnDecodeError = OnDecodeError.DEAD_LETTER


@dataclass(frozen=True, slots=True)
class Subscriber:
    """A handler bound to a queue.

    ``handler`` is what the consumer calls (it may wrap the handler as written: timed,
    counted, watched); ``target`` is the handler as written, whose parameters say what it
    takes; ``options`` what its ``@subscriber`` said (read off ``target`` when not given)."""

    queue: str
    handler: Handler
    name: str
    target: Callable[..., Any] | None = None
    options: SubscriberOptions | None = None

    def __post_init__(self) -> None:
        if self.target is None:
            object.__setattr__(self, "target", self.handler)
        if self.options is None:
            found = getattr(self.target, _OPTIONS, None)
            options = found if isinstance(found, SubscriberOptions) else None
            object.__setattr__(self, "options", options or SubscriberOptions(self.queue))

    @property
    def written(self) -> Callable[..., Any]:
        """The handler as written (``target``)."""
        assert self.target is not None
        return self.target

    @property
    def settings(self) -> SubscriberOptions:
        """``options``, always set after construction."""
        assert self.options is not None
        return self.options

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.handler)

    @property
    def timeout_s(self) -> float | None:
        """``@subscriber(..., timeout=S)``: how long one call may take, or None."""
        return self.settings.timeout_s


def subscriber(
    queue: str,
    *,
    timeout: float | None = None,
    dead_letter_on: Iterable[type[BaseException]] = (),
    drop_on: Iterable[type[BaseException]] = (),
    retry_after_on: Mapping[type[BaseException], Delay] | None = None,
    pause_on: Mapping[type[BaseException], Delay] | None = None,
    on_decode_error: OnDecodeError | str = OnDecodeError.DEAD_LETTER,
) -> SubscriberMark:
    """Mark ``handler`` (a function, or a class or object with a ``handle`` method) as the
    consumer of ``queue``.

    The handler's first parameter takes the message: annotated with :class:`Message` (or not
    at all) the delivery itself, else the body decoded into its type (a dataclass, a pydantic
    model, ``dict``, ``list``, ``str``, ``bytes``; docs/reference/handlers.md, "Typed messages");
    more parameters may ask for the :class:`Message` and the service's state (``State[T]``). It
    returns an ``Outcome`` (or ``None``, which acks); it may be ``async`` or a plain function
    (run in a worker thread). An exception retries, unless a keyword maps its class:
    ``dead_letter_on``, ``drop_on``, ``retry_after_on={Cls: seconds}``,
    ``pause_on={Cls: seconds}`` (tried in that order, subclasses included, first match
    wins; ``retry/failure_map.py``). ``timeout``: seconds one call may take; past it the call
    counts as failed (a retry, with ``rr-error-type = rr.HandlerTimeout``), so
    ``max_attempts`` ends a message whose handler hangs. ``on_decode_error``: ``"dead-letter"``
    (default) or ``"drop"`` for a body that does not decode (docs/reference/runtime.md, "Handlers").
    """
    if not isinstance(queue, str) or not queue:
        raise TypeError("@subscriber needs a queue name, e.g. @subscriber('refunds')")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
    ):
        raise TypeError(f"@subscriber timeout must be a number of seconds above 0, not {timeout!r}")
    try:
        rule = OnDecodeError(on_decode_error)
    except ValueError:
        raise TypeError(
            f"@subscriber on_decode_error must be 'dead-letter' or 'drop', not {on_decode_error!r}"
        ) from None
    options = SubscriberOptions(
        queue=queue,
        timeout_s=float(timeout) if timeout is not None else None,
        failures=FailureMap.of(
            dead_letter_on=dead_letter_on,
            drop_on=drop_on,
            retry_after_on=retry_after_on,
            pause_on=pause_on,
        ),
        on_decode_error=rule,
    )

    def mark(handler: _F) -> _F:
        setattr(handler, _OPTIONS, options)
        return handler

    return cast(SubscriberMark, mark)


class ThreadCalls:
    """Synchronous handler calls running in worker threads. Python cannot stop a thread: a
    handler that never returns outlives the stop, and ``rr run`` must not wait for it at exit
    (docs/reference/runtime.md, "Running it")."""

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
        def call(*arguments: Any) -> Any:
            with self._lock:
                self._running += 1
            try:
                return handler(*arguments)
            finally:
                with self._lock:
                    self._running -= 1

        return call


def on_startup(hook: _F) -> _F:
    """Run ``hook()`` (sync or async) once before consuming starts. What it returns, unless
    ``None``, is the service's state, which handlers ask for with ``State[T]``; a context
    manager it returns (async or not) is entered now and left at shutdown
    (docs/reference/handlers.md, "The service's state")."""
    setattr(hook, _HOOK, "startup")
    return hook


def on_shutdown(hook: _F) -> _F:
    """Run ``hook()`` (sync or async) once after consuming stopped."""
    setattr(hook, _HOOK, "shutdown")
    return hook


def subscriber_options(obj: object) -> SubscriberOptions | None:
    """What ``@subscriber`` said of ``obj``, if it was marked."""
    options = getattr(obj, _OPTIONS, None)
    return options if isinstance(options, SubscriberOptions) else None


def subscriber_queue(obj: object) -> str | None:
    """The queue ``obj`` was marked for, if any."""
    options = subscriber_options(obj)
    return options.queue if options is not None else None


def hook_kind(obj: object) -> str | None:
    kind = getattr(obj, _HOOK, None)
    return kind if kind in {"startup", "shutdown"} else None


class HookFailed(RrError):
    """An ``@on_startup`` or ``@on_shutdown`` hook raised (exit 1, one line)."""


async def call_hook(hook: Hook) -> None:
    result = hook()
    if inspect.isawaitable(result):
        await result


async def call_hooks(
    hooks: tuple[Hook, ...], kind: str, *, lifespan: service_state.Lifespan | None = None
) -> None:
    """Call every hook in order. A startup hook that raises stops there; shutdown hooks all
    run, and the first failure is raised after the last. Only Ctrl-C and a real cancellation
    pass through untouched: any other exception, ``SystemExit`` included, is the hook's
    failure (:class:`HookFailed`). With ``lifespan``, what each hook returns is kept as the
    service's state (``runtime/state.py``; docs/reference/handlers.md, "The service's state")."""
    first: HookFailed | None = None
    for hook in hooks:
        try:
            if lifespan is not None:
                await lifespan.keep(hook, hook())
            else:
                await call_hook(hook)
        except (KeyboardInterrupt, asyncio.CancelledError, service_state.StateFailed):
            raise
        except BaseException as error:
            name = service_state.hook_name(hook)
            failed = HookFailed(f"@on_{kind} hook {name} failed: {type(error).__name__}: {error}")
            if kind == "startup":
                raise failed from None
            log.error("shutdown hook failed", extra={"rr": {"hook": name, "error": str(failed)}})
            first = first or failed
    if first is not None:
        raise first
