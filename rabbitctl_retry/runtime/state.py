"""The service's state and how a handler asks for it: ``State[T]``.

``@on_startup`` may return a value (or an async context manager, entered at start and left at
shutdown); that value is the service's state. A handler parameter annotated ``State[T]``
receives it, or the one part of it that is a ``T`` (docs/runtime.md, "The service's state").
``State[T]`` is ``Annotated[T, STATE]``: to mypy the parameter is a ``T``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Final, TypeVar

from rabbitctl_retry.errors import HandlerLoadError

T = TypeVar("T")


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


def resolve_state(state: object, wanted: Any, *, handler: str) -> object:
    """The value a ``State[wanted]`` parameter of ``handler`` receives; a
    :class:`HandlerLoadError` when ``state`` holds no such value."""
    if state is NO_STATE:
        raise HandlerLoadError(
            f"{handler} asks for State[{getattr(wanted, '__name__', wanted)}], but no "
            "@on_startup hook returned a state"
        )
    if (
        wanted is Any
        or wanted is object
        or (isinstance(wanted, type) and isinstance(state, wanted))
    ):
        return state
    raise HandlerLoadError(
        f"{handler} asks for State[{getattr(wanted, '__name__', wanted)}], but the state is "
        f"a {type(state).__name__}"
    )
