"""The console's web server against hostile clients (docs/reference/console.md, "Limits"): malformed
requests get a 4xx and one log line, never a traceback nor a dropped connection; idle and
half-sent requests are closed in a bounded time; and sockets left open by the hundred, past
what the console's open files allow, do not lock the operator out."""

from __future__ import annotations

import socket
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.hostile.console_process import (
    TOKEN,
    WAIT_S,
    Running,
    console_process,
    read_to_close,
    request,
    status_of,
)


def _log_lines(console: Running) -> list[str]:
    """What the console logged after its start (its address and notes aside)."""
    return [
        line
        for line in console.lines
        if not line.startswith(("rr console: ", "rr: note:", "rr console listens"))
    ]


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def test_malformed_requests_get_a_4xx_and_one_log_line(token_file: Path) -> None:
    with console_process(token_file=token_file) as console:
        host = f"Host: 127.0.0.1:{console.port}\r\n".encode()
        malformed = [
            b"GET / HTTP/1.1\r\n\r\n",  # HTTP/1.1 without Host
            b"GET / HTTP/1.1\r\n" + host + b"X-Big: " + b"a" * 9000 + b"\r\n\r\n",
            b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + host + b"\r\n",
            b"GET /a\rb HTTP/1.1\r\n" + host + b"\r\n",
            b"GET /a\x01b HTTP/1.1\r\n" + host + b"\r\n",
            b"GET / HTTP/1.1\r\n" + host + host + b"\r\n",
            b"garbage garbage\r\n\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n",
        ]
        for raw in malformed:
            answer = request(console, raw)
            assert answer, raw[:40]  # answered, not dropped
            assert 400 <= status_of(answer) < 500, (raw[:40], answer[:80])
        console.wait_for(
            lambda lines: len(_log_lines(console)) >= len(malformed), "a line per request"
        )
        # a CRLF in the path (percent-encoded) with the token: the redirect keeps it encoded
        crlf = f"GET /a%0d%0ab?token={TOKEN} HTTP/1.1\r\n".encode() + host
        answer = request(console, crlf + b"Connection: close\r\n\r\n")
        assert status_of(answer) == 303, answer[:200]
        assert b"Location: /a%0d%0ab\r\n" in answer
        bearer = f"Authorization: Bearer {TOKEN}\r\nConnection: close\r\n".encode()
        answer = request(console, b"GET /a%0d%0ab HTTP/1.1\r\n" + host + bearer + b"\r\n")
        assert status_of(answer) == 404
        stderr = console.stderr()
    logged = _log_lines(console)
    assert len(logged) == len(malformed), stderr
    assert "Traceback" not in stderr
    assert all(" WARNING " in line for line in logged), stderr


def test_idle_and_half_sent_requests_are_closed(token_file: Path) -> None:
    with console_process(token_file=token_file) as console, ExitStack() as open_:
        host = f"Host: 127.0.0.1:{console.port}\r\n".encode()
        sent = {
            "idle": b"",
            "half a head": b"GET / HTTP/1.1\r\n" + host + b"X-Slow: ",
            "half a form": b"POST /queues/dead/groups HTTP/1.1\r\n"
            + host
            + f"Authorization: Bearer {TOKEN}\r\n".encode()
            + b"Content-Type: application/x-www-form-urlencoded\r\n"
            + b"Content-Length: 100\r\n\r\ncsrf=",
        }
        sockets = {}
        for what, raw in sent.items():
            sock = open_.enter_context(socket.create_connection(("127.0.0.1", console.port)))
            sock.sendall(raw)
            sockets[what] = sock
        # each closed by the console (recv() gives b""), well within the outer bound
        answers = {what: read_to_close(sock) for what, sock in sockets.items()}
    assert answers["idle"] == b""
    assert answers["half a head"] == b""
    assert status_of(answers["half a form"]) == 408


def test_hundreds_of_open_sockets_do_not_lock_the_operator_out(token_file: Path) -> None:
    with (
        console_process(token_file=token_file, open_files=128) as console,
        ExitStack() as open_,
    ):
        host = f"Host: 127.0.0.1:{console.port}\r\n".encode()
        for _ in range(200):  # more than the console's 128 open files
            sock = open_.enter_context(
                socket.create_connection(("127.0.0.1", console.port), timeout=WAIT_S)
            )
            sock.sendall(b"GET / HTTP/1.1\r\n" + host)
        bearer = f"Authorization: Bearer {TOKEN}\r\nConnection: close\r\n".encode()
        answer = request(console, b"GET /static/console.css HTTP/1.1\r\n" + host + bearer + b"\r\n")
        assert status_of(answer) == 200
        assert "Traceback" not in console.stderr()
