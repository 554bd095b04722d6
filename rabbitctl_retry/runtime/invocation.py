"""How one handler is called: the arguments its parameters ask for, built per delivery.

The handler's parameters are read once, when the consumer starts (``invocation_for``); per
delivery, :meth:`Invocation.arguments` decodes the body into the first parameter's type
(``runtime/decoding.py``) and fills the others (the :class:`Message`, its outputs, the
service's state, resolved once here). A body that does not decode raises
:class:`DecodeFailure` before the handler runs (docs/reference/handlers.md, "Typed messages").
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from rabbitctl_retry.errors import HandlerLoadError
from rabbitctl_retry.runtime.decoding import DecodeFailure, Decoder, decoder_for
from rabbitctl_retry.runtime.message import Message
from rabbitctl_retry.runtime.outputs import Outputs
from rabbitctl_retry.runtime.state import NO_STATE, STATE, resolve_state

__all__ = [
    "DECODE_ERROR_TYPE",
    "DecodeFailure",
    "Invocation",
    "invocation_for",
    "message_type_of",
]

DECODE_ERROR_TYPE = "rr.DecodeError"
"""``rr-error-type`` of a delivery whose body did not decode into the handler's type."""


def _message_only(message: Message) -> tuple[Any, ...]:
    return (message,)


@dataclass(frozen=True, slots=True)
class Invocation:
    """The arguments of one handler's calls."""

    arguments: Callable[[Message], tuple[Any, ...]] = _message_only
    """The arguments for one delivery; raises :class:`DecodeFailure`."""


_MESSAGE_ONLY: Final = Invocation()

_UNRESOLVED: Final = object()

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class _PerCall:
    """In an argument list: a value made from each call's :class:`Message`."""

    __slots__ = ("value",)

    def __init__(self, value: Callable[[Message], Any]) -> None:
        self.value = value


def _same(message: Message) -> Message:
    return message


def _outputs(message: Message) -> Outputs:
    return message.outputs


_THE_MESSAGE: Final = _PerCall(_same)
_THE_OUTPUTS: Final = _PerCall(_outputs)


def invocation_for(
    handler: Callable[..., Any], *, state: object = NO_STATE, name: str
) -> Invocation:
    """How ``handler`` (as written, named ``name``) is called, with ``state`` the service's
    state; a :class:`~rabbitctl_retry.errors.HandlerLoadError` for a parameter rr cannot
    fill.

    The first positional parameter takes the message: not annotated or annotated
    :class:`Message`, the delivery itself; else its body decoded into the annotation
    (``runtime/decoding.py``). Every later parameter without a default is annotated
    :class:`Message` (the delivery), :class:`Outputs` (what the call publishes if it acks:
    docs/reference/runtime.md, "Publishing") or ``State[T]`` (the state, or its part that is a
    ``T``, resolved here once); parameters with defaults are left alone."""
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError) as error:
        raise HandlerLoadError(f"rr cannot read the parameters of {name}: {error}") from None
    parameters = list(signature.parameters.values())
    if not parameters or parameters[0].kind is inspect.Parameter.KEYWORD_ONLY:
        raise HandlerLoadError(
            f"{name} takes no positional parameter: rr passes it the message first "
            "(e.g. def handle(msg: Message))"
        )
    first = parameters[0]
    if first.kind is inspect.Parameter.VAR_POSITIONAL:
        return _MESSAGE_ONLY  # def handle(*args): the message, as ever
    namespace = _namespace(handler)
    hint = _hint(first, namespace, name)
    if _state_of(hint) is not _UNRESOLVED:
        raise HandlerLoadError(
            f"the first parameter of {name}, {first.name}, takes the message, not the state: "
            "put the State[T] parameter after it"
        )
    # no annotation, Message, Any or object: the delivery itself, as every handler took it
    # before typed messages (docs/reference/handlers.md, "What the first parameter can be")
    untyped = hint is inspect.Parameter.empty or hint is Any or hint is object
    decode = None if untyped or _is_message(hint) else hint
    rest: list[object] = []
    for parameter in parameters[1:]:
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if parameter.default is not inspect.Parameter.empty:
            continue
        fill = (
            f"rr cannot fill parameter {parameter.name} of {name}: annotate it Message, "
            "Outputs or State[T]"
        )
        if parameter.kind not in _POSITIONAL:
            raise HandlerLoadError(f"{fill}, before any * (rr passes arguments by position)")
        wanted = _hint(parameter, namespace, name)
        if _is_message(wanted):
            rest.append(_THE_MESSAGE)
            continue
        if _is_outputs(wanted):
            rest.append(_THE_OUTPUTS)
            continue
        part = _state_of(wanted)
        if part is _UNRESOLVED:
            raise HandlerLoadError(fill)
        rest.append(resolve_state(state, part, handler=name))
    if decode is None:
        if not rest:
            return _MESSAGE_ONLY  # the hot path as it always was: (message,)
        first_value: Callable[[Message], Any] = _same
    else:
        first_value = _decoded(decoder_for(decode, where=f"parameter {first.name} of {name}"))
    return Invocation(_arguments(first_value, tuple(rest)))


def message_type_of(handler: Callable[..., Any], *, name: str) -> Any:
    """The type ``handler``'s first parameter decodes the body into (its annotation, names
    resolved), or None when it takes the delivery itself (no annotation, :class:`Message`,
    ``Any``, ``object``, ``*args``): what ``rr asyncapi`` describes (docs/reference/topology.md,
    "The contract"). A :class:`HandlerLoadError` as :func:`invocation_for` raises it."""
    try:
        parameters = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError) as error:
        raise HandlerLoadError(f"rr cannot read the parameters of {name}: {error}") from None
    if not parameters or parameters[0].kind in (
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.VAR_POSITIONAL,
        inspect.Parameter.VAR_KEYWORD,
    ):
        return None
    hint = _hint(parameters[0], _namespace(handler), name)
    if hint is inspect.Parameter.empty or hint is Any or hint is object or _is_message(hint):
        return None
    return hint


def _decoded(decoder: Decoder) -> Callable[[Message], Any]:
    def value(message: Message) -> Any:
        properties = message.delivery.properties
        return decoder(message.delivery.body, properties.content_type, properties.content_encoding)

    return value


def _arguments(
    first: Callable[[Message], Any], rest: tuple[object, ...]
) -> Callable[[Message], tuple[Any, ...]]:
    if not rest:
        return lambda message: (first(message),)
    if not any(isinstance(value, _PerCall) for value in rest):
        return lambda message: (first(message), *rest)

    def arguments(message: Message) -> tuple[Any, ...]:
        return (
            first(message),
            *(value.value(message) if isinstance(value, _PerCall) else value for value in rest),
        )

    return arguments


def _namespace(handler: Callable[..., Any]) -> dict[str, Any]:
    """The globals the handler's string annotations are read in (``from __future__ import
    annotations``): those of the function as written, under any wrapper or bound method."""
    target: Any = handler
    while isinstance(target, functools.partial):
        target = target.func
    target = getattr(target, "__func__", target)
    target = inspect.unwrap(target)
    if not inspect.isfunction(target):
        target = vars(type(target)).get("__call__", target)  # a callable object
    found = getattr(target, "__globals__", None)
    return found if isinstance(found, dict) else {}


def _hint(parameter: inspect.Parameter, namespace: dict[str, Any], name: str) -> Any:
    """The parameter's annotation, strings and nested forward references resolved; a
    :class:`HandlerLoadError` naming it when a name in it is not defined."""
    annotation = parameter.annotation
    if annotation is inspect.Parameter.empty:
        return annotation

    def holder() -> None: ...

    holder.__annotations__ = {"value": annotation}
    try:
        return typing.get_type_hints(holder, globalns=namespace, include_extras=True)["value"]
    except Exception as error:
        raise HandlerLoadError(
            f"the annotation of parameter {parameter.name} of {name} ({annotation!s}) cannot "
            f"be resolved: {error}; import the names it uses at module level"
        ) from None


def _is_message(hint: Any) -> bool:
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    return isinstance(hint, type) and issubclass(hint, Message)


def _is_outputs(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, Outputs)


def _state_of(hint: Any) -> Any:
    """``T`` of a ``State[T]`` annotation (``Any`` for a bare ``State``), else
    ``_UNRESOLVED``."""
    if typing.get_origin(hint) is not typing.Annotated:
        return _UNRESOLVED
    if not any(mark is STATE for mark in getattr(hint, "__metadata__", ())):
        return _UNRESOLVED
    part = typing.get_args(hint)[0]
    return Any if isinstance(part, typing.TypeVar) else part
