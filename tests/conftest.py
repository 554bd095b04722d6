"""Shared fixtures. Broker tests take ``amqp_url``: skipped without a broker, failed in CI."""

from __future__ import annotations

import os
import socket
import ssl
from urllib.parse import urlsplit

import pytest

DEFAULT_TEST_URL = "amqp://guest:guest@127.0.0.1:5672/"


def _broker_answers(url: str, timeout_s: float = 3.0) -> str | None:
    """None when an AMQP 0-9-1 broker answers at ``url`` (TCP + protocol header ->
    Connection.Start), else why not."""
    parts = urlsplit(url)
    tls = parts.scheme == "amqps"
    host = parts.hostname or "localhost"
    port = parts.port or (5671 if tls else 5672)
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw:
            sock: socket.socket = raw
            if tls:  # only a liveness probe: the tests themselves verify certificates
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
                sock = context.wrap_socket(raw, server_hostname=host)
            sock.settimeout(timeout_s)
            sock.sendall(b"AMQP\x00\x00\x09\x01")
            header = b""
            while len(header) < 7:
                chunk = sock.recv(7 - len(header))
                if not chunk:
                    return f"{host}:{port} closed the connection without answering"
                header += chunk
    except OSError as exc:
        return f"{host}:{port}: {exc}"
    # A method frame (type 1) on channel 0: Connection.Start.
    if header[0] != 1 or header[1:3] != b"\x00\x00":
        return f"{host}:{port} does not speak AMQP 0-9-1 (got {header!r})"
    return None


@pytest.fixture(scope="session")
def amqp_url() -> str:
    """The broker URL for broker tests (``RR_TEST_URL``, else the local guest account).

    Skips the test when no broker answers there, but fails it when ``CI=true``: CI must
    never pass by skipping the broker tests.
    """
    url = os.environ.get("RR_TEST_URL", DEFAULT_TEST_URL)
    problem = _broker_answers(url)
    if problem is not None:
        message = f"no AMQP broker for the broker tests: {problem}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return url
