"""What clients of ``rr run --metrics-port`` (and of the ``--workers`` supervisor's port) do
cannot make rr write a traceback, hold a connection for good, or stop the page (issue #42;
docs/reference/metrics.md, "Metrics and health").

Real ``rr run`` processes: idle, half-sent, trickled, oversized, garbage and reset
connections are each closed within a bounded time (the socket reads ``b""``), each logged in
at most one line through rr's logging (JSON under ``--log-format json``), none with a
traceback, and the page and ``/healthz`` still serve afterwards; a TCP probe (connect, close)
is not logged. The port listens on 127.0.0.1 unless ``--metrics-bind`` says otherwise, and a
bind beyond loopback is one warning line.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.backends import own_vhost
from tests.metrics_page import GATED, answers, free_port, get, sample, until

SERVICE = """
from rabbitctl_retry import Outcome, subscriber


@subscriber("metered")
async def handle(msg):
    return Outcome.ack()
"""

TOPOLOGY = """
[queues.metered]
max_attempts = 2
"""

CLOSE_BOUND_S = 60.0
"""The outer bound a hostile connection has to be closed in (rr's limit is 5 s)."""

DROPPED = "metrics client dropped"


@dataclass
class Running:
    process: subprocess.Popen[str]
    log: Path
    port: int

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@contextmanager
def rr_run(folder: Path, module: str, url: str, *options: str) -> Iterator[Running]:
    """``rr run MODULE --metrics-port PORT OPTIONS`` in ``folder``, its stderr in a file;
    stopped (SIGTERM, killed if it lingers) at the end."""
    port = free_port()
    command = [sys.executable, "-m", "rabbitctl_retry", "run", module, "--url", url]
    command += ["--metrics-port", str(port), *options]
    log = folder / "rr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            command,
            cwd=folder,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ},
            text=True,
        )
    try:
        yield Running(process, log, port)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=CLOSE_BOUND_S)


def local_port(client: socket.socket) -> int:
    return int(client.getsockname()[1])


def read_to_the_end(client: socket.socket) -> bytes:
    """Everything the server sends until it closes (fails past :data:`CLOSE_BOUND_S`)."""
    received = b""
    client.settimeout(CLOSE_BOUND_S)
    while True:
        try:
            chunk = client.recv(65536)
        except ConnectionResetError:
            return received
        except TimeoutError:
            pytest.fail(f"still open after {CLOSE_BOUND_S:g} s, having received {received!r}")
        if not chunk:
            return received
        received += chunk


def trickle(client: socket.socket, closed: threading.Event) -> None:
    """A slow client: a request line, then a header a byte at a time, four bytes a second,
    until the server closes (far fewer bytes than rr's 8 KiB limit within its 5 s)."""
    client.sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
    for _ in range(int(CLOSE_BOUND_S * 4)):
        readable, _, _ = select.select([client], [], [], 0.25)
        try:
            if readable and not client.recv(1024):
                break
            client.sendall(b"a")
        except OSError:  # reset or broken pipe: closed
            break
    else:
        return
    closed.set()


def reset(client: socket.socket) -> None:
    """Close with a TCP reset rather than a FIN."""
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()


def hostile_clients(port: int) -> tuple[dict[int, str], int, int]:
    """Open every kind of hostile connection at once and see each closed. The local ports of
    the connections that must be logged once, by kind; that of the one that may be logged
    at most once (a reset: rr may not have read its bytes yet); that of a TCP probe (connect
    and close), which must not be."""
    idle, half, slow, long_line, big_head, garbage = (connect(port) for _ in range(6))
    half.sendall(b"GET /metrics HTTP/1.1\r\nHost: rr\r\n")
    long_line.sendall(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n")
    big_head.sendall(b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n")
    garbage.sendall(bytes(range(256)) + b"\r\n\r\n")
    slow_closed = threading.Event()
    slow_thread = threading.Thread(target=trickle, args=(slow, slow_closed), daemon=True)
    slow_thread.start()
    resetting, probe = connect(port), connect(port)
    resetting.sendall(b"GET /metr")
    reset_port, probe_port = local_port(resetting), local_port(probe)
    reset(resetting)
    probe.close()
    logged = {
        local_port(idle): "idle",
        local_port(half): "half-sent",
        local_port(slow): "slow",
        local_port(long_line): "long line",
        local_port(big_head): "big head",
        local_port(garbage): "garbage",
    }
    try:
        assert read_to_the_end(idle) == b""
        assert read_to_the_end(half) == b""
        assert read_to_the_end(long_line).startswith(b"HTTP/1.1 414 ")
        assert read_to_the_end(big_head).startswith(b"HTTP/1.1 431 ")
        assert read_to_the_end(garbage).startswith(b"HTTP/1.1 400 ")
        slow_thread.join(CLOSE_BOUND_S + 5)
        assert slow_closed.is_set(), "the slow client was never cut off"
    finally:
        for client in (idle, half, slow, long_line, big_head, garbage):
            client.close()
    return logged, reset_port, probe_port


def dropped_lines(text: str, log_format: str) -> dict[int, list[str]]:
    """The lines about dropped clients, by the client's port."""
    found: dict[int, list[str]] = {}
    for line in text.splitlines():
        if DROPPED not in line:
            continue
        if log_format == "json":
            client = json.loads(line)["client"]
        else:
            client = line.split("client=", 1)[1].split()[0]
        found.setdefault(int(client.rpartition(":")[2]), []).append(line)
    return found


@pytest.mark.parametrize(
    ("workers", "log_format"), [("1", "json"), ("2", "text")], ids=["one", "workers"]
)
def test_hostile_clients_are_cut_off_in_one_line_each_and_the_page_serves_on(
    amqp_url: str, tmp_path: Path, workers: str, log_format: str
) -> None:
    """Before, each idle connection wrote a 17-line traceback into rr run's log (not JSON),
    a client that sent a byte every few seconds was never cut off, and a 9 KiB header was
    read."""
    (tmp_path / "metered_svc.py").write_text(SERVICE, encoding="utf-8")
    (tmp_path / "topology.toml").write_text(TOPOLOGY, encoding="utf-8")
    options = ["-t", "topology.toml", "--workers", workers, "--log-format", log_format]
    with own_vhost(amqp_url) as rabbit, rr_run(tmp_path, "metered_svc", rabbit.url, *options) as rr:
        base = f"http://127.0.0.1:{rr.port}"
        until(lambda: answers(rr.process, f"{base}/healthz"), lambda a: a[0] == 200)

        logged, reset_port, probe_port = hostile_clients(rr.port)

        lines = until(
            lambda: dropped_lines(rr.text(), log_format), lambda found: set(logged) <= set(found)
        )
        assert get(f"{base}/healthz") == (200, "consuming\n")
        status, page = get(f"{base}/metrics")
        assert (status, sample(page, "rr_consuming")) == (200, 1)
        rr.process.send_signal(signal.SIGTERM)
        assert rr.process.wait(60) == 0
    text = rr.text()
    assert "Traceback" not in text
    assert {logged[port]: len(lines[port]) for port in logged} == dict.fromkeys(logged.values(), 1)
    assert len(lines.get(reset_port, [])) <= 1
    assert probe_port not in lines  # a TCP probe is not logged
    assert set(lines) <= {*logged, reset_port}
    if log_format == "json":
        for line in text.splitlines():
            json.loads(line)  # every line of stderr is one JSON document


def listening(port: int) -> set[str]:
    """The addresses (as /proc/net/tcp and tcp6 write them, hex) listening on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


LOOPBACK = "0100007F"
EVERY_INTERFACE = "00000000"


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc/net/tcp")
@pytest.mark.parametrize("workers", ["1", "2"], ids=["one", "workers"])
@pytest.mark.parametrize(
    ("bind", "address", "warned"),
    [(None, LOOPBACK, 0), ("0.0.0.0", EVERY_INTERFACE, 1)],
    ids=["default", "every-interface"],
)
def test_the_port_binds_loopback_unless_told_and_warns_beyond_it(
    tmp_path: Path, workers: str, bind: str | None, address: str, warned: int
) -> None:
    """Before, the default was 0.0.0.0, with no word of it."""
    (tmp_path / "gated_svc.py").write_text(GATED, encoding="utf-8")
    options = ["--workers", workers, *(["--metrics-bind", bind] if bind else [])]
    unreachable = "amqp://guest:guest@127.0.0.1:1/"
    with rr_run(tmp_path, "gated_svc.py", unreachable, *options) as rr:
        base = f"http://127.0.0.1:{rr.port}"
        until(lambda: answers(rr.process, f"{base}/healthz"), lambda a: a[0] != 0)
        assert listening(rr.port) == {address}
        (tmp_path / "gate").touch()
        assert rr.process.wait(120) == 69  # then it found no broker on :1
    text = rr.text()
    warnings = [line for line in text.splitlines() if "not only on this machine" in line]
    assert len(warnings) == warned, text
    assert all(" WARNING rr.runtime rr run serves metrics on 0.0.0.0" in line for line in warnings)
    assert "Traceback" not in text


@pytest.mark.parametrize("workers", ["1", "2"], ids=["one", "workers"])
def test_an_empty_bind_address_is_a_usage_error(tmp_path: Path, workers: str) -> None:
    """Before, an empty --metrics-bind listened on every interface, without a word. (An
    address not on this machine, or one that does not resolve, was one error line and exit 1
    already: tests/cli/test_run_metrics.py.)"""
    command = [sys.executable, "-m", "rabbitctl_retry", "run", str(tmp_path / "none.py")]
    command += ["--url", "amqp://guest:guest@127.0.0.1:1/", "--workers", workers]
    command += ["--metrics-port", str(free_port()), "--metrics-bind", ""]
    done = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "rr: error: --metrics-bind: an address, such as 127.0.0.1, or 0.0.0.0 for every interface\n"
    )
