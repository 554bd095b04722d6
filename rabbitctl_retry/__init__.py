"""rr: RabbitMQ retry topologies — provision, run handlers, operate dead letters.

The public handler API::

    from rabbitctl_retry import Message, Outcome, subscriber

    @subscriber("refunds")
    async def process_refund(msg: Message) -> Outcome:
        ...
        return Outcome.retry_after(30)
"""

from rabbitctl_retry.retry.outcome import Outcome
from rabbitctl_retry.runtime.handlers import on_shutdown, on_startup, subscriber
from rabbitctl_retry.runtime.message import Message

__all__ = ["Message", "Outcome", "on_shutdown", "on_startup", "subscriber"]
__version__ = "0.1.0"
