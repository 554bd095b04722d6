"""Print how many messages each queue of the example holds, who is in the dead letters, and
which receipts wait in refunds.receipts (each read and given back: nothing is taken)."""

import asyncio
import os

from rabbitctl_retry.errors import NotFound
from rabbitctl_retry.retry.headers import deaths
from rabbitctl_retry.transport.clients import connect

QUEUES = ["refunds", "refunds.retry", "refunds.dead", "payouts", "payouts.dead", "refunds.receipts"]
RETRY = "x-ruststream-retry-count"


async def main() -> None:
    connection = await connect(os.environ.get("RR_URL", "amqp://guest:guest@localhost:5672/"))
    try:
        for queue in QUEUES:
            channel = await connection.channel()
            try:
                info = await channel.queue_declare(queue, passive=True)
            except NotFound:
                print(f"{queue:16} (missing)")
                continue
            print(f"{queue:16} {info.message_count} message(s)")
            if queue == "refunds.receipts":
                while (delivery := await channel.get(queue)) is not None:
                    print(f"    {delivery.properties.message_id}: {delivery.body.decode()}")
            elif queue.endswith((".dead", ".retry")):
                while (delivery := await channel.get(queue)) is not None:
                    headers = delivery.properties.headers or {}
                    why = [f"{d.reason} in {d.queue}" for d in deaths(headers)]
                    print(
                        f"    {delivery.properties.message_id}: retry header "
                        f"{headers.get(RETRY)}, x-death {why or '-'}, "
                        f"expiration {delivery.properties.expiration}"
                    )
            await channel.close()  # returns what get() took, in order
    finally:
        await connection.close()


asyncio.run(main())
