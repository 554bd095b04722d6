"""rr: RabbitMQ retry topologies — provision, run handlers, operate dead letters.

The public handler API::

    from rabbitctl_retry import Outcome, State, subscriber

    @subscriber("refunds", retry_after_on={ProcessorBusy: 30})
    async def process_refund(refund: Refund, processor: State[Processor]) -> Outcome:
        ...
        return Outcome.ack()

(docs/reference/handlers.md: typed messages, the service's state, failures mapped to outcomes.)

The names are loaded on first use (PEP 562), so ``rr --help`` and the other commands do not pay
for the runtime they do not run (docs/reference/cli.md, "Start-up").
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rabbitctl_retry.publisher import Publisher
    from rabbitctl_retry.retry.outcome import Outcome
    from rabbitctl_retry.runtime.handlers import on_shutdown, on_startup, subscriber
    from rabbitctl_retry.runtime.message import Message
    from rabbitctl_retry.runtime.outputs import Outputs
    from rabbitctl_retry.runtime.state import State

_HOME = {
    "Outcome": "rabbitctl_retry.retry.outcome",
    "on_shutdown": "rabbitctl_retry.runtime.handlers",
    "on_startup": "rabbitctl_retry.runtime.handlers",
    "subscriber": "rabbitctl_retry.runtime.handlers",
    "Message": "rabbitctl_retry.runtime.message",
    "Outputs": "rabbitctl_retry.runtime.outputs",
    "Publisher": "rabbitctl_retry.publisher",
    "State": "rabbitctl_retry.runtime.state",
}

__all__ = [
    "Message",
    "Outcome",
    "Outputs",
    "Publisher",
    "State",
    "on_shutdown",
    "on_startup",
    "subscriber",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'rabbitctl_retry' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
