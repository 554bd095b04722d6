"""The shared RabbitMQ nodes the broker tests use (docs/testing.md, "Two servers").

Every machine has RabbitMQ 3.10.8 on 127.0.0.1:5672 (node ``rabbit@localhost``, the host's
``rabbitmqctl``) and, built and started by ``scripts/rabbitmq4.sh``, RabbitMQ 4.0.5 on
127.0.0.1:5674 (node ``rabbit4@localhost``, whose ``rabbitmqctl`` runs inside its chroot).
Broker tests run on each: the ``amqp_url`` fixture (tests/conftest.py) is parametrized by
server and makes its node the current one, so :func:`ctl_command` always addresses the node
the test talks to. Each node is addressed explicitly: the fault suite runs nodes of its own
on the same machine, and a bare ``rabbitmqctl`` must never reach the wrong one.

``RR_TEST_BROKERS`` picks the servers (default ``3.10,4.0``); ``RR_TEST_URL`` /
``RR_TEST_NODE`` and ``RR_TEST_URL_4`` override the 3.10 and 4.0 addresses. A URL's path is
its vhost (``/`` when it has none, as for rr): the tests that work in the URL's own vhost
look there (:attr:`SharedBroker.vhost`), never in ``/``.

Only a test marked ``broker`` may talk to these servers: :func:`require_broker` fails any
other (tests/conftest.py marks the tests that take ``amqp_url`` or a RabbitMQ ``backend``,
and every ``faults`` and ``cluster`` test), so that ``pytest -m "not broker"`` runs without
RabbitMQ and never skips a test only because none answered (docs/testing.md).
"""

from __future__ import annotations

import errno
import functools
import os
import socket
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from rabbitctl_retry.transport.management import vhost_of

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, slots=True)
class SharedBroker:
    version: str
    """The release line, as test ids and expectation tables name it: ``3.10``, ``4.0``."""
    url: str
    node: str
    ctl_prefix: tuple[str, ...]
    """How to run this node's ``rabbitmqctl`` (the node name is added)."""

    @property
    def vhost(self) -> str:
        """The vhost :attr:`url` names (its path; ``/`` when it has none)."""
        return vhost_of(self.url)

    def ctl(self, *args: str) -> list[str]:
        return [*self.ctl_prefix, "-n", self.node, *args]

    def run_ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run this node's ``rabbitmqctl ARGS``; its completed process (text output).

        Started once more if the start itself fails with EFAULT: seen once in CI when a
        worker thread started the 4.0 node's script at the end of the session (Python's
        vfork-based start, not the command, failed).
        """
        try:
            return subprocess.run(
                self.ctl(*args), capture_output=True, text=True, timeout=60, check=False
            )
        except OSError as error:
            if error.errno != errno.EFAULT:
                raise
            return subprocess.run(
                self.ctl(*args), capture_output=True, text=True, timeout=60, check=False
            )


BROKERS = {
    "3.10": SharedBroker(
        version="3.10",
        url=os.environ.get("RR_TEST_URL", "amqp://guest:guest@127.0.0.1:5672/"),
        node=os.environ.get("RR_TEST_NODE", "rabbit@localhost"),
        ctl_prefix=("rabbitmqctl",),
    ),
    "4.0": SharedBroker(
        version="4.0",
        url=os.environ.get("RR_TEST_URL_4", "amqp://guest:guest@127.0.0.1:5674/"),
        node="rabbit4@localhost",
        ctl_prefix=(str(REPO / "scripts" / "rabbitmq4.sh"), "ctl-raw"),
    ),
}


def chosen_versions() -> list[str]:
    """The servers this run tests on (``RR_TEST_BROKERS``, default both)."""
    names = os.environ.get("RR_TEST_BROKERS", "3.10,4.0")
    return [name.strip() for name in names.split(",") if name.strip()]


_current = BROKERS["3.10"]


def use(broker: SharedBroker) -> None:
    """Make ``broker`` the node :func:`ctl_command` addresses (the ``amqp_url`` fixture)."""
    global _current
    _current = broker


def current() -> SharedBroker:
    return _current


def ctl_command(*args: str) -> list[str]:
    """``rabbitmqctl -n NODE ARGS...`` for the node the current test talks to."""
    return _current.ctl(*args)


@functools.cache
def _probe(version: str) -> str | None:
    return _broker_answers(BROKERS[version].url)


_running_unmarked: str | None = None
"""The id of the test running now when it is not marked ``broker`` (set by
tests/conftest.py before its fixtures are set up), else None."""


def running(nodeid: str, *, marked_broker: bool) -> None:
    """Tell :func:`require_broker` which test runs now and whether it is marked ``broker``."""
    global _running_unmarked
    _running_unmarked = None if marked_broker else nodeid


def require_broker(version: str) -> SharedBroker:
    """The shared server of ``version``, made current; skips the test when it does not
    answer, but fails it when ``CI=true`` (CI must never pass by skipping broker tests).

    Fails a test not marked ``broker`` at once: ``-m "not broker"`` must deselect every test
    that needs a server, not skip it because none answered."""
    if _running_unmarked is not None:
        pytest.fail(
            f"{_running_unmarked} talks to the shared RabbitMQ but is not marked broker: mark "
            "it (pytest.mark.broker), or take amqp_url or a backend (tests/conftest.py)",
            pytrace=False,
        )
    broker = BROKERS[version]
    problem = _probe(version)
    if problem is not None:
        message = f"no RabbitMQ {broker.version} for the broker tests: {problem}"
        if broker.version == "4.0":
            message += " (scripts/rabbitmq4.sh builds and starts it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    use(broker)
    return broker


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
