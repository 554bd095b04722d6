"""The ``Message`` a handler receives: one delivery, read-only, with its retry facts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from rabbitctl_retry.errors import DataError
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import (
    DEFAULT_RETRY_HEADER,
    Death,
    acquired_count,
    attempt_of,
    deaths,
    delivery_count,
    retry_count,
)
from rabbitctl_retry.runtime.outgoing import Outgoing
from rabbitctl_retry.runtime.outputs import Outputs
from rabbitctl_retry.transport.base import Delivery, Properties


@dataclass(frozen=True)
class Message:
    """A delivery as a handler sees it.

    ``retry_count`` is the retry header (copies before this one), ``delivery_count`` the
    quorum queue's ``x-delivery-count`` (``None`` on classic queues and first deliveries),
    ``acquired_count`` RabbitMQ 4.3's ``x-acquired-count``, and ``attempt`` is
    ``1 + retry_count + (delivery_count or 0)``: 1 on the first delivery, ``max_attempts`` on
    the last.
    """

    delivery: Delivery
    queue: str
    retry_header: str = DEFAULT_RETRY_HEADER

    @property
    def body(self) -> bytes:
        return self.delivery.body

    def text(self, encoding: str | None = None) -> str:
        """The body as text (``content_encoding`` if set, else UTF-8)."""
        codec = encoding or self.properties.content_encoding or "utf-8"
        try:
            return self.delivery.body.decode(codec)
        except (UnicodeDecodeError, LookupError) as error:
            raise DataError(f"message body is not {codec} text: {error}") from None

    def json(self) -> Any:
        """The body parsed as JSON."""
        try:
            return json.loads(self.delivery.body)
        except (ValueError, UnicodeDecodeError) as error:
            raise DataError(f"message body is not JSON: {error}") from None

    @property
    def properties(self) -> Properties:
        return self.delivery.properties

    @property
    def headers(self) -> Mapping[str, FieldValue]:
        return self.delivery.properties.headers or {}

    @property
    def message_id(self) -> str | None:
        return self.delivery.properties.message_id

    @property
    def routing_key(self) -> str:
        return self.delivery.routing_key

    @property
    def exchange(self) -> str:
        return self.delivery.exchange

    @property
    def redelivered(self) -> bool:
        return self.delivery.redelivered

    @property
    def retry_count(self) -> int:
        return retry_count(self.delivery.properties.headers, self.retry_header)

    @property
    def delivery_count(self) -> int | None:
        return delivery_count(self.delivery.properties.headers)

    @property
    def acquired_count(self) -> int | None:
        """RabbitMQ 4.3's ``x-acquired-count`` (every hand-out, requeues by ``basic.nack``
        included), or ``None`` where the server does not send it."""
        return acquired_count(self.delivery.properties.headers)

    @property
    def attempt(self) -> int:
        return attempt_of(self.delivery.properties.headers, self.retry_header, self.queue)

    @cached_property
    def deaths(self) -> tuple[Death, ...]:
        """The parsed ``x-death`` history, newest first."""
        return deaths(self.delivery.properties.headers)

    @cached_property
    def outputs(self) -> Outputs:
        """The messages this handler call publishes if it acks (docs/reference/runtime.md,
        "Publishing"); made on first use."""
        return Outputs(self.queue, self.delivery.properties.message_id)


def outputs_of(message: Message) -> tuple[Outgoing, ...]:
    """The outputs ``message``'s handler call published (none when it never asked for
    them: the hot path reads one dict)."""
    made = vars(message).get("outputs")
    return () if made is None else made.pending
