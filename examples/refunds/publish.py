"""Publish the demo's refunds and payouts (messages.jsonl, the list rr simulate's
--publish-file reads too) to $RR_URL (default localhost), with confirms."""

import asyncio
import os
from pathlib import Path

from rabbitctl_retry.simulation import parse_publish_file
from rabbitctl_retry.transport.base import Properties
from rabbitctl_retry.transport.clients import connect

MESSAGES = Path(__file__).with_name("messages.jsonl")


async def main() -> None:
    messages = parse_publish_file(MESSAGES.read_text(encoding="utf-8"), str(MESSAGES))
    connection = await connect(os.environ.get("RR_URL", "amqp://guest:guest@localhost:5672/"))
    try:
        channel = await connection.channel(confirms=True)
        for message in messages:
            await channel.publish(
                message.body,
                routing_key=message.queue,
                properties=Properties(
                    content_type="application/json" if message.is_json else "text/plain",
                    delivery_mode=2,
                    message_id=message.message_id,
                ),
                mandatory=True,
            )
            print(f"published {message.message_id} to {message.queue}: {message.body.decode()}")
    finally:
        await connection.close()


asyncio.run(main())
