"""Publish the demo's refunds and payouts to $RR_URL (default localhost), with confirms."""

import asyncio
import json
import os

from rabbitctl_retry.transport.amqp import connect
from rabbitctl_retry.transport.base import Properties

MESSAGES = [
    ("refunds", {"id": 1, "card": "4111", "amount_cents": 1250}),
    ("refunds", {"id": 2, "card": "unavailable", "amount_cents": 990}),
    ("refunds", {"id": 3, "card": "busy", "amount_cents": 4200}),
    ("refunds", {"id": 4, "card": "declined", "amount_cents": 100}),
    ("payouts", {"id": 5, "card": "unavailable", "amount_cents": 50000}),
    ("payouts", {"id": 6, "card": "declined", "amount_cents": 7000}),
]


async def main() -> None:
    connection = await connect(os.environ.get("RR_URL", "amqp://guest:guest@localhost:5672/"))
    try:
        channel = await connection.channel(confirms=True)
        for queue, body in MESSAGES:
            await channel.publish(
                json.dumps(body).encode(),
                routing_key=queue,
                properties=Properties(
                    content_type="application/json",
                    delivery_mode=2,
                    message_id=f"{queue}-{body['id']}",
                ),
                mandatory=True,
            )
            print(f"published {queue}: {json.dumps(body)}")
    finally:
        await connection.close()


asyncio.run(main())
