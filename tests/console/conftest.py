"""The ``backend`` fixture (RabbitMQ in a fresh vhost on each server, and the emulator) and a
console served on it, on a free port of 127.0.0.1, for the console's tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from rabbitctl_retry.console.app import ConsoleConfig, serve
from rabbitctl_retry.console.audit import AuditLog
from rabbitctl_retry.console.reads import Settings
from rabbitctl_retry.console.search import target_words
from rabbitctl_retry.dlq.origin import WaitQueues
from rabbitctl_retry.transport.management import ManagementApi
from tests.backends import Backend
from tests.dlq.support import TOPOLOGY, H
from tests.runtime.conftest import backend

__all__ = ["Console", "backend", "console_on"]

TOKEN = "console-test-token-0123456789"


@dataclass(frozen=True)
class Console:
    base: str
    """``http://127.0.0.1:PORT``"""
    token: str

    @property
    def entry(self) -> str:
        """The address the console prints: with its token."""
        return f"{self.base}/?token={self.token}"


@asynccontextmanager
async def console_on(
    backend: Backend,
    keep_dir: Path,
    *,
    queues: tuple[str, ...] = ("dead",),
    read_only: bool = False,
    audit: AuditLog | None = None,
    management: ManagementApi | None = None,
    urls: tuple[str, ...] = (),
    topology_path: str | None = None,
) -> AsyncIterator[Console]:
    config = ConsoleConfig(
        connect=backend.connect,
        queues=list(queues),
        settings=Settings(retry_header=H, wait_queues=WaitQueues.of(TOPOLOGY)),
        token=TOKEN,
        read_only=read_only,
        port=0,
        keep_dir=keep_dir,
        sample_every_s=0.5,
        management=management,
        target=target_words(urls, topology_path),
    )
    if audit is not None:
        config.audit = audit
    stop = asyncio.Event()
    address: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(serve(config, address.set_result, stop))
    try:
        done, _ = await asyncio.wait({task, address}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            task.result()  # serve failed to start: raise its error
        yield Console(base=await address, token=TOKEN)
    finally:
        stop.set()
        await task
