"""What a vhost on the current test server holds (the hostile topology tests)."""

from __future__ import annotations

import asyncio
import subprocess

from rabbitctl_retry.errors import NotFound
from rabbitctl_retry.transport import amqp
from tests.shared_node import ctl_command


def ctl(*args: str) -> str:
    """Run this broker's rabbitmqctl; its output as text (RabbitMQ 4's rabbitmqctl writes
    non-ASCII names in Latin-1 or as ``\\x{...}``, so only ASCII names read back as such)."""
    done = subprocess.run(ctl_command("-q", *args), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode("utf-8", "backslashreplace")


async def missing(url: str, kind: str, names: set[str]) -> set[str]:
    """Which of ``names`` (queues or exchanges) a passive declare does not find at ``url``."""
    # Not rr's 5 s: a server busy with the rest of the suite once took longer to answer a
    # handshake (RabbitMQ 4.0 in CI), and this looks at what is there, not at how fast.
    connection = await amqp.connect(url, timeout_s=30)
    missing = set()
    try:
        for name in names:
            channel = await connection.channel()
            try:
                if kind == "queue":
                    await channel.queue_declare(name, passive=True)
                else:
                    await channel.exchange_declare(name, passive=True)
            except NotFound:
                missing.add(name)
            finally:
                await channel.close()
    finally:
        await connection.close()
    return missing


def assert_holds_exactly(vhost: str, url: str, queues: set[str], exchanges: set[str]) -> None:
    """The vhost holds these queues and (besides the default ones) these exchanges: as many
    as rabbitmqctl lists, each found by name over AMQP."""
    listed_queues = [
        n for n in ctl("list_queues", "-p", vhost, "--no-table-headers", "name").splitlines() if n
    ]
    listed_exchanges = [
        n
        for n in ctl("list_exchanges", "-p", vhost, "--no-table-headers", "name").splitlines()
        if n and not n.startswith("amq.")
    ]
    assert len(listed_queues) == len(queues), listed_queues
    assert len(listed_exchanges) == len(exchanges), listed_exchanges
    assert asyncio.run(missing(url, "queue", queues)) == set()
    assert asyncio.run(missing(url, "exchange", exchanges)) == set()
