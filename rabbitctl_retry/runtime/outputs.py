"""A handler's outputs: the messages it publishes as part of its outcome (docs/reference/runtime.md,
"Publishing").

A handler asks for them with a parameter annotated :class:`Outputs` (or reads
``msg.outputs``) and calls :meth:`Outputs.publish` as it would ``rr.Publisher.publish``.
Nothing is sent while the handler runs: its outputs are held, and

* when it acks, rr publishes every output ``mandatory`` on its confirm channel and acks the
  original only after each one is confirmed (at least once, as its own copies);
* an output the broker returns (no queue took it), refuses or never confirms (its channel
  failed) makes the delivery fail as a retry, of type ``rr.OutputFailed``; the next attempt
  runs the handler again, which publishes its outputs again;
* for any other outcome (a retry, a delay, a dead letter, a drop, a pause, a failure) its
  outputs are dropped unsent: only the attempt that acks publishes.

An output without a ``message_id`` gets one derived from the original's ``message_id``, its
queue and the output's place among the delivery's outputs, so the outputs of a delivery
handled twice carry the same ids and a consumer can tell the second copy (a fresh UUID when
the original has no ``message_id``).
"""

from __future__ import annotations

import threading
import uuid
from typing import Final, Unpack

from rabbitctl_retry.runtime.outgoing import Outgoing, PublishOptions, outgoing

OUTPUT_FAILED_TYPE: Final = "rr.OutputFailed"
"""``rr-error-type`` of a delivery whose handler acked but an output was not confirmed."""

_IDS: Final = uuid.UUID("5f1c8e0a-7a3b-5d2e-9c41-0d6f2b8a9e13")
"""The namespace of the outputs' derived ids (uuid5)."""


def output_id(queue: str, original_id: str | None, index: int) -> str:
    """The ``message_id`` of output number ``index`` (from 0) of a delivery of ``queue`` whose
    ``message_id`` is ``original_id`` (module doc)."""
    if original_id is None:
        return str(uuid.uuid4())
    return str(uuid.uuid5(_IDS, f"{queue}\x00{original_id}\x00{index}"))


class Outputs:
    """The outputs of one handler call (module doc)."""

    __slots__ = ("_lock", "_original_id", "_pending", "_queue")

    def __init__(self, queue: str, original_id: str | None) -> None:
        self._queue = queue
        self._original_id = original_id
        self._pending: list[Outgoing] = []
        self._lock = threading.Lock()  # a sync handler's threads may publish at once

    def publish(self, message: object, **options: Unpack[PublishOptions]) -> str:
        """Hold ``message`` (encoded by its type: docs/reference/publishing.md) for queue ``to``, or
        for
        ``exchange`` with ``routing_key``, with the options of ``rr.Publisher.publish``; it is
        published if the handler acks. Returns its ``message_id``. Raises at once for a value
        rr cannot encode or a target given twice (the handler fails, as for any exception it
        raises)."""
        with self._lock:
            derived = output_id(self._queue, self._original_id, len(self._pending))
            built = outgoing(message, message_id=derived, options=options)
            self._pending.append(built)
        return built.message_id

    @property
    def pending(self) -> tuple[Outgoing, ...]:
        """What the handler published so far, in its order."""
        with self._lock:
            return tuple(self._pending)

    def __len__(self) -> int:
        return len(self._pending)

    def __repr__(self) -> str:
        return f"<Outputs of {self._queue!r}: {len(self._pending)} held>"
