"""``rr console`` as a process, for the hostile tests of its start, its server and its token
(docs/reference/console.md): its stderr read line by line as it comes (a test waits for a line,
never for a fixed time), its address taken from the line it prints once it listens, and SIGTERM at
the end.

Most of these tests need no broker: the pages they ask for (the style sheet, the 401 and 421
answers) read nothing, and the console starts without connecting (its depth sampler finds
nothing at :data:`NO_BROKER` and keeps quiet).
"""

from __future__ import annotations

import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

NO_BROKER = "amqp://guest:guest@127.0.0.1:1/"
"""Nothing listens there: the console starts all the same."""
START_S = 60.0
"""The outer bound on a start (a busy 2-core machine imports aiohttp slowly)."""
WAIT_S = 60.0
"""The outer bound on anything a test waits for."""
TOKEN = "hostile-console-token-0123456789"


def rr_console(*args: str, timeout_s: float = START_S) -> subprocess.CompletedProcess[str]:
    """``rr console ARGS`` run to its end (a start that fails)."""
    return subprocess.run(
        [sys.executable, "-m", "rabbitctl_retry", "console", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


@dataclass
class Running:
    process: subprocess.Popen[str]
    base: str = ""
    """``http://127.0.0.1:PORT``"""
    printed: str = ""
    """The line ``rr console: ...``."""
    lines: list[str] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    def stderr(self) -> str:
        with self.changed:
            return "".join(self.lines)

    def wait_for(self, found: Callable[[list[str]], bool], what: str) -> None:
        """Until ``found`` holds of the lines so far (the outer bound fails the test)."""
        deadline = time.monotonic() + WAIT_S
        with self.changed:
            while not found(self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or (self.process.poll() is not None and not found(self.lines)):
                    raise AssertionError(f"never saw {what}; stderr: {''.join(self.lines)!r}")
                self.changed.wait(min(left, 1.0))


def _read(running: Running) -> None:
    assert running.process.stderr is not None
    for line in running.process.stderr:
        with running.changed:
            running.lines.append(line)
            running.changed.notify_all()
    with running.changed:
        running.changed.notify_all()


@contextmanager
def console_process(
    *args: str, token_file: Path | None = None, open_files: int | None = None
) -> Iterator[Running]:
    """``rr console dead --port 0 ARGS`` until it listens; SIGTERM after. ``token_file``:
    ``--token-file``; ``open_files``: its limit of open files (RLIMIT_NOFILE)."""

    def limit() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    command = [sys.executable, "-m", "rabbitctl_retry", "console", "dead", "--port", "0"]
    command += ["--url", NO_BROKER, *args]
    if token_file is not None:
        command += ["--token-file", str(token_file)]
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, preexec_fn=limit
    )
    running = Running(process)
    reader = threading.Thread(target=_read, args=(running,), daemon=True)
    reader.start()
    try:
        running.wait_for(
            lambda lines: any(line.startswith("rr console: ") for line in lines), "the address"
        )
        running.printed = next(
            line.strip() for line in running.lines if line.startswith("rr console: ")
        )
        found = re.search(r"http://[^/ ]+:\d+", running.printed)
        assert found is not None, running.printed
        running.base = found.group(0)
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=WAIT_S)
        if process.stderr is not None:
            process.stderr.close()


def request(
    running: Running,
    raw: bytes,
    *,
    host: str = "127.0.0.1",
) -> bytes:
    """Send ``raw`` on a fresh connection and read the answer until the console closes it
    (the outer bound fails the test)."""
    with socket.create_connection((host, running.port), timeout=WAIT_S) as sock:
        sock.sendall(raw)
        return read_to_close(sock)


def read_to_close(sock: socket.socket) -> bytes:
    """Everything ``sock`` receives until the console closes it."""
    sock.settimeout(WAIT_S)
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])
