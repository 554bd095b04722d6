"""Pure. The expanded topology as a RabbitMQ definitions document.

The shape is the one ``rabbitmqctl export_definitions`` writes and ``rabbitmqctl
import_definitions`` (or the management UI) reads: top-level ``queues``, ``exchanges`` and
``bindings`` lists, each entity naming its vhost. Exchanges the file only references (bindings
to ``amq.topic``, a dead-letter exchange declared elsewhere) are not exported: they must exist
on the target already, as ``rr declare`` requires. Queues with ``settings = "policy"`` bring
rr's policy for each (a top-level ``policies`` list, only when there is one: RabbitMQ imports
policies before queues, so no queue is made without its settings).
"""

from __future__ import annotations

from typing import Any

from rabbitctl_retry.topology.expand import Desired


def to_definitions(desired: Desired, *, vhost: str = "/") -> dict[str, Any]:
    """A definitions document for ``desired`` in ``vhost`` (JSON-serialisable)."""
    policies = [queue.policy for queue in desired.queues if queue.policy is not None]
    document: dict[str, Any] = {
        "queues": [
            {
                "name": queue.name,
                "vhost": vhost,
                "durable": queue.durable,
                "auto_delete": False,
                "arguments": dict(queue.arguments),
            }
            for queue in desired.queues
        ],
        "exchanges": [
            {
                "name": exchange.name,
                "vhost": vhost,
                "type": exchange.type,
                "durable": exchange.durable,
                "auto_delete": False,
                "internal": False,
                "arguments": dict(exchange.arguments),
            }
            for exchange in desired.exchanges
        ],
        "bindings": [
            {
                "source": binding.exchange,
                "vhost": vhost,
                "destination": binding.queue,
                "destination_type": "queue",
                "routing_key": binding.routing_key,
                "arguments": dict(binding.arguments),
            }
            for binding in desired.bindings
        ],
    }
    if policies:
        document["policies"] = [
            {
                "vhost": vhost,
                "name": policy.name,
                "pattern": policy.pattern,
                "apply-to": policy.apply_to,
                "definition": policy.keys,
                "priority": policy.priority,
            }
            for policy in policies
        ]
    return document
