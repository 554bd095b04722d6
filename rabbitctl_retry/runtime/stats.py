"""Counters of what ``rr run`` went through, for logs, tests and the metrics endpoint
(``runtime/metrics.py``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class RuntimeStats:
    connections: int = 0
    """Connections made (1 + reconnects)."""
    consumer_restarts: int = 0
    """Consumers started again after their channel closed or the broker cancelled them."""
    consumer_cancels: int = 0
    """Consumers the broker cancelled (``basic.cancel``: their queue deleted, its node down,
    or RabbitMQ 4.3's consumer timeout on a quorum queue)."""
    copies_published: int = 0
    """Copies (retries, dead letters) published, each try counted."""
    copies_confirmed: int = 0
    """Copies the broker confirmed (or accepted, without confirms)."""
    copies_refused: int = 0
    """Publishes of a copy that the broker returned (unroutable) or refused (nack)."""
    outputs_published: int = 0
    """Handler outputs published (each try counted: a retried delivery publishes again)."""
    outputs_confirmed: int = 0
    """Handler outputs the broker confirmed."""
    outputs_failed: int = 0
    """Handler outputs returned, refused or cut (each failed its delivery as a retry)."""
    outputs_discarded: int = 0
    """Handler outputs dropped unsent because their handler did not ack."""
    interrupted_deliveries: int = 0
    """Deliveries settled by the catch-all rule after an error in rr's own code (requeued
    once, dead-lettered when redelivered), or requeued by a shutdown."""
    undecodable_deliveries: int = 0
    """Deliveries whose properties could not be decoded (set aside, never handled)."""
    blocked: int = 0
    """Times the broker blocked the connection (a resource alarm)."""
    handler_timeouts: int = 0
    """Handler calls that did not return within their timeout (each a failed attempt)."""
    decode_failures: int = 0
    """Deliveries whose body did not decode into the handler's type (never handled)."""
    pauses: int = 0
    """Times a consumer paused its queue (a handler said a dependency is down)."""
    stray_deliveries: int = 0
    """Deliveries for a consumer the broker had cancelled (RabbitMQ 4.3 revives one cancelled
    for its consumer timeout): given back unhandled and uncounted (``basic.nack``)."""
    reloads: int = 0
    """Reloads of the topology file that changed a retry setting (docs/reference/runtime.md,
    "Changing max_attempts while it runs")."""
    reload_failures: int = 0
    """Reloads of the topology file that did not load (the running settings stayed)."""
