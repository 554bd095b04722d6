"""Exit 0 when a RabbitMQ answers at $RR_URL (default localhost:5672), else 1."""

import asyncio
import os
import sys

from rabbitctl_retry.errors import RrError
from rabbitctl_retry.transport.clients import connect


async def main() -> int:
    try:
        connection = await connect(
            os.environ.get("RR_URL", "amqp://guest:guest@localhost:5672/"), timeout_s=3.0
        )
    except RrError:
        return 1
    await connection.close()
    return 0


sys.exit(asyncio.run(main()))
