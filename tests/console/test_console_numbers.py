"""The console's numbers while others read the queue (docs/reference/console.md, "What the numbers
count"): pages loaded at once each read every letter (the console's reads of one queue take
turns), and letters another reader holds are counted from the management API, said, never a
silent zero — on the emulator's twin and on RabbitMQ 4.3.6's API (3.10 and 4.0 here have
none: the page then says what it cannot see)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rabbitctl_retry.transport.base import Delivery
from rabbitctl_retry.transport.management import ManagementApi, vhost_of
from rabbitctl_retry.transport.management_http import HttpManagementApi
from tests.backends import Backend, EmulatorBackend
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS
from tests.console.conftest import console_on
from tests.console.test_console_http import PER_KIND, session, text_of
from tests.dlq.support import run_to_dead

HELD = 3
WAIT_S = 60.0
"""How long the server's statistics (sampled every 5 s) may take to show the held letters."""


def management_of(backend: Backend) -> ManagementApi:
    if isinstance(backend, EmulatorBackend):
        return backend.emulator.management("http://guest:guest@twin.invalid:15672/", vhost="/")
    url = MANAGEMENT_URLS.get(backend.version)
    if url is None:
        pytest.skip(f"the shared RabbitMQ {backend.version} has no management API")
    return HttpManagementApi(url, vhost=vhost_of(backend.url))


async def test_pages_loaded_at_once_each_read_every_letter(
    backend: Backend, tmp_path: Path
) -> None:
    made = await run_to_dead(backend, PER_KIND)
    async with console_on(backend, tmp_path) as console, session(console) as client:
        url = f"{console.base}/queues/dead/groups"
        pages = await asyncio.gather(*(text_of(client, url) for _ in range(3)))
    for status, page in pages:
        assert status == 200
        assert f"{made.total} dead letters read of {made.total} in dead" in page
        assert "with --management-url the console counts them" in page


async def test_letters_held_by_another_reader_are_counted(backend: Backend, tmp_path: Path) -> None:
    management = management_of(backend)
    made = await run_to_dead(backend, PER_KIND)
    holder = await backend.connect()
    try:
        channel = await holder.channel()
        held: list[Delivery] = []
        for _ in range(HELD):  # a colleague's read: taken, not yet given back
            delivery = await channel.get("dead")
            assert delivery is not None
            held.append(delivery)
        async with (
            console_on(backend, tmp_path, management=management) as console,
            session(console) as client,
        ):
            said = f"{HELD} letters held by another reader (rr dlq inspect, another console, a "
            deadline = time.monotonic() + WAIT_S
            while True:
                _, page = await text_of(client, f"{console.base}/queues/dead/groups")
                if said in page:
                    break
                assert time.monotonic() < deadline, page
                await asyncio.sleep(0.5)
            read = made.total - HELD
            assert f"{read} dead letters read of {read} in dead" in page
            _, index = await text_of(client, f"{console.base}/")
            assert f"+ {HELD} letters held by another reader" in index
    finally:
        await holder.close()  # the letters go back
