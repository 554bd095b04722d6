"""The service's state and how a handler asks for it: ``State[T]``.

``@on_startup`` may return a value (or a context manager, entered at start and left at
shutdown); that value is the service's state. A handler parameter annotated ``State[T]``
receives it, or the one part of it that is a ``T`` (docs/reference/handlers.md, "The service's
state").
``State[T]`` is ``Annotated[T, STATE]``: to mypy the parameter is a ``T``.

:class:`Lifespan` builds the state from the startup hooks and takes it down at shutdown;
:func:`resolve_state` finds what one ``State[T]`` parameter receives, once, at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, TypeVar, get_origin

from rabbitctl_retry.errors import HandlerLoadError, RrError

T = TypeVar("T")

log = logging.getLogger("rr.runtime")


@dataclass(frozen=True, slots=True)
class StateMarker:
    """The mark ``State[T]`` puts on an annotation."""


STATE: Final = StateMarker()

State = Annotated[T, STATE]
"""``processor: State[Processor]``: the service's state, or its one part that is a
``Processor``."""


class _NoState:
    """No ``@on_startup`` returned a value and none was given."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_STATE"


NO_STATE: Final = _NoState()


class StateFailed(RrError):
    """The state could not be built: two startup hooks returned a value, or an injected
    state (``rr simulate --state``) could not be made (exit 1, one line)."""


def _name(wanted: Any) -> str:
    return str(getattr(wanted, "__name__", wanted))


def parts_of(state: object) -> dict[str, object]:
    """The parts ``State[T]`` looks among when the state itself is not a ``T``: a dataclass's
    fields, a tuple's items (a NamedTuple's by field name), a mapping's values (by key), else
    the object's public attributes (``vars()``, names not starting with ``_``). One level
    deep: the parts' own parts are not searched."""
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    if isinstance(state, tuple):
        names = getattr(state, "_fields", None)
        if isinstance(names, tuple) and len(names) == len(state):
            return dict(zip(map(str, names), state, strict=True))
        return {f"[{index}]": item for index, item in enumerate(state)}
    if isinstance(state, Mapping):
        return {repr(key): value for key, value in state.items()}
    try:
        attributes = vars(state)
    except TypeError:
        return {}
    return {name: value for name, value in attributes.items() if not name.startswith("_")}


def _describe(parts: Mapping[str, object]) -> str:
    return ", ".join(f"{name}: {type(value).__name__}" for name, value in parts.items())


def resolve_state(state: object, wanted: Any, *, handler: str) -> object:
    """The value a ``State[wanted]`` parameter of ``handler`` receives: the whole state when
    it is a ``wanted`` (or ``wanted`` is ``Any`` or ``object``), else its one part that is
    (:func:`parts_of`). A :class:`HandlerLoadError` naming the handler, the type and what the
    state holds when there is no state, no such part, or more than one."""
    asked = f"{handler} asks for State[{_name(wanted)}]"
    if state is NO_STATE:
        raise HandlerLoadError(f"{asked}, but no @on_startup hook returned a state")
    if wanted is Any or wanted is object:
        return state
    kind = get_origin(wanted) or wanted
    if not isinstance(kind, type):
        raise HandlerLoadError(f"{asked}, but {wanted!r} is not a class rr can look for")
    try:
        if isinstance(state, kind):
            return state
        parts = parts_of(state)
        found = {name: value for name, value in parts.items() if isinstance(value, kind)}
    except TypeError as error:  # a Protocol that is not runtime_checkable, ...
        raise HandlerLoadError(f"{asked}, but rr cannot check it: {error}") from None
    if len(found) == 1:
        return next(iter(found.values()))
    held = _describe(parts)
    what = f"the state is a {type(state).__name__}" + (f" ({held})" if held else "")
    if not found:
        raise HandlerLoadError(f"{asked}, but {what}, which holds no {_name(wanted)}")
    raise HandlerLoadError(
        f"{asked}, but {what} holds more than one: {', '.join(found)}; ask for "
        f"State[{type(state).__name__}] and take the one it needs"
    )


def hook_name(hook: Callable[..., Any]) -> str:
    """A hook's name in messages: ``open_db``, or ``RefundHandler.on_startup`` for a method."""
    owner = getattr(hook, "__self__", None)
    name = getattr(hook, "__name__", None) or repr(hook)
    if owner is not None and not inspect.ismodule(owner):
        return f"{type(owner).__name__}.{name}"
    return str(name)


class Lifespan:
    """The state of one run: what the startup hooks returned, and the context managers to
    leave at shutdown (docs/reference/handlers.md, "The service's state").

    A value a startup hook returns (awaited if it is awaitable) is the state, unless it is
    ``None``. A value that is an async context manager is entered (``async with``) and its
    ``__aenter__``'s result is the state; a sync context manager likewise (``with``).
    :meth:`close` leaves them, last entered first, after the shutdown hooks ran."""

    def __init__(self) -> None:
        self.state: object = NO_STATE
        self._from: str | None = None
        self._stack = contextlib.AsyncExitStack()

    async def keep(self, hook: Callable[..., Any], result: object) -> None:
        """Take what ``hook`` returned: the state, if it is not ``None``."""
        if inspect.isawaitable(result):
            result = await result
        if result is None:
            return
        name = hook_name(hook)
        if self._from is not None:
            raise StateFailed(
                f"@on_startup hooks {self._from} and {name} both returned a value: return "
                "one value holding both (a dataclass; rr docs handlers \"The service's "
                'state")'
            )
        if hasattr(result, "__aenter__") and hasattr(result, "__aexit__"):
            result = await self._stack.enter_async_context(result)
        elif hasattr(result, "__enter__") and hasattr(result, "__exit__"):
            result = self._stack.enter_context(result)
        self._from = name
        self.state = NO_STATE if result is None else result

    async def close(self) -> None:
        """Leave the context managers the state came from (last entered first); a
        :class:`StateFailed` (logged too) when one raises."""
        try:
            await self._stack.aclose()
        except (KeyboardInterrupt, asyncio.CancelledError):
            raise
        except BaseException as error:
            failed = StateFailed(
                f"leaving the state of @on_startup hook {self._from} failed: "
                f"{type(error).__name__}: {error}"
            )
            log.error("leaving the state failed", extra={"rr": {"error": str(failed)}})
            raise failed from None


async def made_state(source: object, spec: str) -> object:
    """The state ``rr simulate --state SPEC`` gives: ``source`` itself, or what calling it
    with no arguments returns (awaited if awaitable) when it is callable. A
    :class:`StateFailed` when the call raises or the state is ``None``."""
    value = source
    if callable(source):
        try:
            value = source()
            if inspect.isawaitable(value):
                value = await value
        except (KeyboardInterrupt, asyncio.CancelledError):
            raise
        except BaseException as error:
            raise StateFailed(
                f"--state {spec}: calling it failed: {type(error).__name__}: {error}"
            ) from None
    if value is None or value is NO_STATE:
        raise StateFailed(f"--state {spec} is None: there is no state to give the handlers")
    return value
