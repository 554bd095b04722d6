"""runtime/invocation.py: a handler's parameters read once, the arguments built per delivery
(docs/reference/handlers.md, "Typed messages"); the load errors of parameters rr cannot fill."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pydantic
import pytest

from rabbitctl_retry import Message
from rabbitctl_retry.errors import HandlerLoadError
from rabbitctl_retry.runtime import invocation as invocation_module
from rabbitctl_retry.runtime.invocation import DecodeFailure, Invocation, invocation_for
from rabbitctl_retry.runtime.state import NO_STATE, State
from rabbitctl_retry.transport.base import Delivery, Properties

if TYPE_CHECKING:
    from decimal import Decimal


@dataclass
class Order:
    id: int


class Model(pydantic.BaseModel):
    id: int


class Processor:
    pass


def message(body: bytes = b'{"id": 3}', content_type: str | None = "application/json") -> Message:
    return Message(Delivery(body=body, properties=Properties(content_type=content_type)), "q")


def test_a_message_parameter_keeps_the_prebuilt_invocation() -> None:
    def plain(msg): ...  # type: ignore[no-untyped-def]

    def typed(msg: Message) -> None: ...

    def star(*args: Any) -> None: ...

    def defaults(msg: Message, retries: int = 3) -> None: ...

    for handler in (plain, typed, star, defaults):
        made = invocation_for(handler, name="t:h")
        assert made is invocation_module._MESSAGE_ONLY
        assert made.arguments is Invocation().arguments
    delivered = message()
    assert invocation_for(typed, name="t:h").arguments(delivered) == (delivered,)


def test_the_first_parameter_takes_the_decoded_body() -> None:
    def as_order(order: Order) -> None: ...

    def as_model(order: Model) -> None: ...

    def as_bytes(body: bytes) -> None: ...

    def as_text(text: str) -> None: ...

    def as_dict(data: dict[str, Any]) -> None: ...

    delivered = message()
    assert invocation_for(as_order, name="h").arguments(delivered) == (Order(3),)
    assert invocation_for(as_model, name="h").arguments(delivered) == (Model(id=3),)
    assert invocation_for(as_bytes, name="h").arguments(delivered) == (b'{"id": 3}',)
    assert invocation_for(as_text, name="h").arguments(delivered) == ('{"id": 3}',)
    assert invocation_for(as_dict, name="h").arguments(delivered) == ({"id": 3},)
    with pytest.raises(DecodeFailure, match="id: expected an integer, got str"):
        invocation_for(as_order, name="h").arguments(message(b'{"id": "x"}'))


def test_message_and_state_after_the_typed_one() -> None:
    def handle(
        order: Order, processor: State[Processor], msg: Message, retries: int = 2
    ) -> None: ...

    state = Processor()
    delivered = message()
    made = invocation_for(handle, state=state, name="h")
    assert made.arguments(delivered) == (Order(3), state, delivered)
    assert made.arguments(delivered)[1] is state

    def whole(msg: Message, everything: State[Any]) -> None: ...

    assert invocation_for(whole, state=state, name="h").arguments(delivered) == (
        delivered,
        state,
    )


def test_the_state_is_resolved_once() -> None:
    calls: list[object] = []
    original = invocation_module.resolve_state

    def counting(state: object, wanted: Any, *, handler: str) -> object:
        calls.append(wanted)
        return original(state, wanted, handler=handler)

    def handle(msg: Message, processor: State[Processor]) -> None: ...

    invocation_module.resolve_state = counting
    try:
        made = invocation_for(handle, state=Processor(), name="h")
        for _ in range(3):
            made.arguments(message())
    finally:
        invocation_module.resolve_state = original
    assert calls == [Processor]


class Service:
    def handle(self, order: Order, msg: Message) -> None: ...


def test_a_bound_method_and_a_wrapped_function() -> None:
    delivered = message()
    made = invocation_for(Service().handle, name="h")
    assert made.arguments(delivered) == (Order(3), delivered)

    def typed(order: Order) -> None: ...

    @functools.wraps(typed)
    def wrapper(*args: Any) -> None: ...

    assert invocation_for(wrapper, name="h").arguments(delivered) == (Order(3),)

    def with_tenant(tenant: str, order: Order, msg: Message) -> None: ...

    bound = functools.partial(with_tenant, "acme")
    assert invocation_for(bound, name="h").arguments(delivered) == (Order(3), delivered)


def load_error(handler: Any, state: object = NO_STATE) -> str:
    with pytest.raises(HandlerLoadError) as caught:
        invocation_for(handler, state=state, name="svc:handle")
    return str(caught.value)


def test_parameters_rr_cannot_fill() -> None:
    def extra(msg: Message, retries: int) -> None: ...

    def bare(msg: Message, other) -> None: ...  # type: ignore[no-untyped-def]

    def keyword(msg: Message, *, processor: State[Processor]) -> None: ...

    def nothing() -> None: ...

    def only_keywords(*, msg: Message) -> None: ...

    def state_first(processor: State[Processor], msg: Message) -> None: ...

    fill = "rr cannot fill parameter {} of svc:handle: annotate it Message, Outputs or State[T]"
    assert load_error(extra) == fill.format("retries")
    assert load_error(bare) == fill.format("other")
    assert load_error(keyword, Processor()) == (
        fill.format("processor") + ", before any * (rr passes arguments by position)"
    )
    no_positional = (
        "svc:handle takes no positional parameter: rr passes it the message first "
        "(e.g. def handle(msg: Message))"
    )
    assert load_error(nothing) == no_positional
    assert load_error(only_keywords) == no_positional
    assert load_error(state_first, Processor()) == (
        "the first parameter of svc:handle, processor, takes the message, not the state: put "
        "the State[T] parameter after it"
    )


def test_annotations_that_cannot_be_resolved() -> None:
    def hidden(amount: Decimal) -> None: ...

    def local(order: Local) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    assert load_error(hidden) == (
        "the annotation of parameter amount of svc:handle (Decimal) cannot be resolved: name "
        "'Decimal' is not defined; import the names it uses at module level"
    )
    assert load_error(local).startswith("the annotation of parameter order of svc:handle (Local)")

    def unsupported(when: complex) -> None: ...

    assert load_error(unsupported).startswith(
        "parameter when of svc:handle: rr does not decode a message into complex"
    )


def test_a_state_that_is_not_there() -> None:
    def handle(msg: Message, processor: State[Processor]) -> None: ...

    assert load_error(handle) == (
        "svc:handle asks for State[Processor], but no @on_startup hook returned a state"
    )
