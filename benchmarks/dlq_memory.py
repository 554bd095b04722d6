"""Peak memory of the `rr dlq` commands that go through a whole queue, at two queue sizes.

    python benchmarks/dlq_memory.py [--messages 20000 100000] [--url URL]

For each size, a classic durable queue is filled with realistic dead letters (the ones
benchmarks/dlq.py moves: 200-byte persistent JSON bodies, a message id, the retry header, an
`x-death` entry), then each command runs in a process of its own and its peak RSS (the
process's ru_maxrss) is printed. The commands that read and take nothing run first; `replay`
runs last and empties the queue. Constant memory shows as the same peak at both sizes.

Needs a RabbitMQ (default amqp://guest:guest@127.0.0.1:5672/); it creates and deletes its own
queues. Speed is measured here, never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from dlq import delete, depth, preload

from rabbitctl_retry.transport import clients

INSPECT = ["dlq", "inspect", "{queue}", "--yes", "--limit", "{count}"]
"""inspect reads 1,000 messages unless told (--summary: the whole queue): --limit the count."""

COMMANDS: dict[str, list[str]] = {
    "inspect --summary": ["dlq", "inspect", "{queue}", "--summary", "--yes"],
    "inspect --format lines": [*INSPECT, "--format", "lines"],
    "inspect -o jsonl": [*INSPECT, "--output", "jsonl"],
    "inspect -o json": [*INSPECT, "--output", "json"],
    "export": ["dlq", "export", "{queue}", "{file}", "--yes"],
    "groups": ["dlq", "groups", "{queue}", "--yes"],
    "replay -o json": ["dlq", "replay", "{queue}", "--yes", "--output", "json"],
}


def peak_rss_kib(arguments: list[str], url: str) -> tuple[int, int]:
    """(exit status, peak RSS in KiB) of `rr ARGUMENTS --url URL`, its stdout discarded."""
    command = [sys.executable, "-m", "rabbitctl_retry", *arguments, "--url", url]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss


async def one_size(url: str, count: int, folder: Path) -> dict[str, int]:
    queue = f"rr-bench-memory-{uuid.uuid4().hex[:8]}"
    origin = f"{queue}.origin"
    await preload(url, queue, origin, count)
    peaks: dict[str, int] = {}
    try:
        for name, template in COMMANDS.items():
            file = folder / f"{queue}-{len(peaks)}.jsonl"
            arguments = [part.format(queue=queue, file=file, count=count) for part in template]
            code, peak = await asyncio.to_thread(peak_rss_kib, arguments, url)
            assert code == 0, f"rr {' '.join(arguments)} exited with {code}"
            peaks[name] = peak
            if name == "export":
                lines = sum(1 for _ in file.open(encoding="utf-8"))
                assert lines == count, (lines, count)
                file.unlink()
        assert await depth(url, origin) == count  # the replay moved every one
        assert await depth(url, queue) == 0
    finally:
        await delete(url, queue, origin)
    return peaks


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    args = parser.parse_args()
    by_size: dict[int, dict[str, int]] = {}
    with tempfile.TemporaryDirectory(prefix="rr-bench-memory-") as folder:
        for count in args.messages:
            by_size[count] = await one_size(args.url, count, Path(folder))
    client = clients.choose(os.environ.get(clients.ENV))
    print(f"peak RSS of each command (MiB), dead letters in one classic queue; client {client}")
    print(f"{'command':24}" + "".join(f"{count:>12,}" for count in args.messages))
    for name in COMMANDS:
        row = "".join(f"{by_size[count][name] / 1024:12.0f}" for count in args.messages)
        print(f"{name:24}{row}")


if __name__ == "__main__":
    asyncio.run(main())
