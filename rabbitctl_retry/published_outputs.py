"""The handler outputs a test broker saw confirmed (docs/how-to/test-a-service.md, "Outputs"): one
:class:`PublishedOutput` per output, recorded through the ``on_outputs`` hook of the
``rr run`` runtime once every output of an acked delivery was confirmed, so an output
recorded is one the broker took, and a delivery handled twice records its outputs once per
attempt that acked (docs/reference/runtime.md, "Publishing").
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rabbitctl_retry.runtime.decoding import DecodeFailure, decoder_for, type_name
from rabbitctl_retry.runtime.outgoing import Outgoing
from rabbitctl_retry.transport.base import Delivery, Properties


@dataclass(frozen=True, slots=True)
class PublishedOutput:
    """One output a handler published, confirmed by the broker: the message as the handler
    built it (:class:`~rabbitctl_retry.runtime.outgoing.Outgoing`) and the delivery whose
    handler published it."""

    output: Outgoing
    from_queue: str
    """The queue of the delivery whose handler published it."""
    from_message_id: str | None
    """That delivery's ``message_id``."""

    @property
    def body(self) -> bytes:
        return self.output.body

    @property
    def properties(self) -> Properties:
        return self.output.properties

    @property
    def exchange(self) -> str:
        """The exchange it was published to: ``""``, the default exchange, for a queue."""
        return self.output.exchange

    @property
    def routing_key(self) -> str:
        """Its routing key: the queue's name, through the default exchange."""
        return self.output.routing_key

    @property
    def message_id(self) -> str | None:
        return self.output.properties.message_id

    @property
    def destination(self) -> str:
        """Where it went, as rr's reports name it: the exchange, or the queue."""
        return self.output.destination

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.output.body)

    def goes_to(self, target: str) -> bool:
        """Published to queue ``target`` (default exchange, routing key ``target``) or to
        exchange ``target``."""
        return self.destination == target


def recorded(queue: str, delivery: Delivery, outputs: Iterable[Outgoing]) -> list[PublishedOutput]:
    """The confirmed ``outputs`` of ``delivery`` from ``queue``, as records."""
    from_message_id = delivery.properties.message_id
    return [PublishedOutput(output, queue, from_message_id) for output in outputs]


def decoded(outputs: Iterable[PublishedOutput], as_type: Any) -> list[Any]:
    """Each output's body decoded into ``as_type`` by the decoder handlers use
    (docs/reference/handlers.md, "Typed messages"); :class:`AssertionError` naming the output when
    one does not fit."""
    decode = decoder_for(as_type, where=f"published(..., {type_name(as_type)})")
    values = []
    for output in outputs:
        properties = output.properties
        try:
            values.append(decode(output.body, properties.content_type, properties.content_encoding))
        except DecodeFailure as error:
            raise AssertionError(
                f"output {output.message_id!r} to {output.destination!r} is not a "
                f"{type_name(as_type)}: {error}"
            ) from None
    return values
