"""The shared RabbitMQ servers the broker tests use: one table (docs/reference/testing.md, "Three
servers").

:data:`BROKERS` holds every server the suite knows, by release line: its exact release, its
AMQP URL, its node name and how ``rabbitmqctl`` reaches that node, and (for the lines built
by ``scripts/rabbitmq-chroot.sh``) the chroot its ``rabbitmq-server`` is installed in, which
the fault suite's private nodes start from (tests/faults/node.py):

======  =======  ===================  ================  ==========================================
line    release  node                 AMQP              rabbitmqctl
======  =======  ===================  ================  ==========================================
3.10    3.10.8   rabbit@localhost     127.0.0.1:5672    the machine's ``rabbitmqctl``
4.0     4.0.5    rabbit4@localhost    127.0.0.1:5674    ``scripts/rabbitmq4.sh ctl-raw`` (chroot)
4.3     4.3.6    rabbit43@localhost   127.0.0.1:5675    ``scripts/rabbitmq43.sh ctl-raw`` (chroot)
======  =======  ===================  ================  ==========================================

Nothing else in the suite names these nodes or ports: a test asks the table (or the current
server, :func:`current`) for them, and for what a line is (``major``, ``minor``), never
assumes that ``4.0`` is the newest.

For a contributor's own servers, each entry is overridden by environment (``V`` is the line
with ``_`` for ``.``: ``3_10``, ``4_0``, ``4_3``): ``RR_TEST_URL_V`` (the URL; its path is
the vhost the tests that work in the URL's own vhost use, ``/`` when it has none),
``RR_TEST_NODE_V`` (the node name) and ``RR_TEST_CTL_V`` (the command that runs that node's
``rabbitmqctl``, split like a shell line; the suite adds ``-n NODE`` and the arguments). The
older names ``RR_TEST_URL`` / ``RR_TEST_NODE`` (3.10) and ``RR_TEST_URL_4`` (4.0) still work.
``RR_TEST_BROKERS`` picks the lines a run tests on (default :data:`DEFAULT_BROKERS`).

Broker tests run on each chosen server: the ``amqp_url`` fixture (tests/conftest.py) is
parametrized by server and makes its node the current one, so :func:`ctl_command` always
addresses the node the test talks to. Each node is addressed explicitly: the fault suite runs
nodes of its own on the same machine, and a bare ``rabbitmqctl`` must never reach the wrong
one.

Only a test marked ``broker`` may talk to these servers: :func:`require_broker` fails any
other (tests/conftest.py marks the tests that take ``amqp_url`` or a RabbitMQ ``backend``,
and every ``faults`` and ``cluster`` test), so that ``pytest -m "not broker"`` runs without
RabbitMQ and never skips a test only because none answered (docs/reference/testing.md).
"""

from __future__ import annotations

import errno
import functools
import os
import shlex
import socket
import ssl
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from rabbitctl_retry.server import ServerVersion
from rabbitctl_retry.transport.management import vhost_of

REPO = Path(__file__).resolve().parents[1]

DEFAULT_BROKERS = ("3.10", "4.0", "4.3")
"""The lines a run tests on when ``RR_TEST_BROKERS`` is not set: every line of the table
(docs/reference/testing.md, "Three servers")."""


@dataclass(frozen=True, slots=True)
class SharedBroker:
    version: str
    """The release line, as test ids and expectation tables name it: ``3.10``, ``4.0``,
    ``4.3``."""
    release: str
    """The exact release the line runs here (and the emulator stands in for): ``4.0.5``."""
    url: str
    node: str
    ctl_prefix: tuple[str, ...]
    """How to run this node's ``rabbitmqctl`` (the node name is added)."""
    script: str | None = None
    """The script that builds and starts it (``scripts/rabbitmq4.sh``), None for the
    machine's own server."""
    chroot: Path | None = None
    """The chroot this line's ``rabbitmq-server`` is installed in (None: the machine's
    package): the fault suite's private nodes of this line start from it."""

    @property
    def vhost(self) -> str:
        """The vhost :attr:`url` names (its path; ``/`` when it has none)."""
        return vhost_of(self.url)

    @property
    def server_version(self) -> ServerVersion:
        """:attr:`release` as the transport port reports a server's version."""
        return ServerVersion.parse(self.release)

    @property
    def major(self) -> int:
        return self.server_version.major

    @property
    def minor(self) -> int:
        return self.server_version.minor

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


def _setting(environ: Mapping[str, str], version: str, name: str, default: str, *older: str) -> str:
    """``RR_TEST_<name>_<V>`` (``V``: ``version`` with ``_`` for ``.``), else the first of the
    ``older`` variable names that is set, else ``default``."""
    for variable in (f"RR_TEST_{name}_{version.replace('.', '_')}", *older):
        value = environ.get(variable)
        if value:
            return value
    return default


def _server(
    environ: Mapping[str, str],
    version: str,
    release: str,
    *,
    port: int,
    node: str,
    script: str | None = None,
    chroot: tuple[str, str] | None = None,
    older_url: tuple[str, ...] = (),
    older_node: tuple[str, ...] = (),
) -> SharedBroker:
    """The table's entry of ``version``, with the overrides ``environ`` holds (module doc).
    ``chroot``: the variable naming the chroot's folder, and its default (as in the
    script)."""
    default_ctl = "rabbitmqctl" if script is None else f"{shlex.quote(str(REPO / script))} ctl-raw"
    url = _setting(environ, version, "URL", f"amqp://guest:guest@127.0.0.1:{port}/", *older_url)
    return SharedBroker(
        version=version,
        release=release,
        url=url,
        node=_setting(environ, version, "NODE", node, *older_node),
        ctl_prefix=tuple(shlex.split(_setting(environ, version, "CTL", default_ctl))),
        script=script,
        chroot=None if chroot is None else Path(environ.get(chroot[0]) or chroot[1]),
    )


def servers(environ: Mapping[str, str]) -> dict[str, SharedBroker]:
    """Every server the suite knows, by release line (the module doc's table), with the
    overrides ``environ`` holds."""
    table = (
        _server(
            environ,
            "3.10",
            "3.10.8",
            port=5672,
            node="rabbit@localhost",
            older_url=("RR_TEST_URL",),
            older_node=("RR_TEST_NODE",),
        ),
        _server(
            environ,
            "4.0",
            "4.0.5",
            port=5674,
            node="rabbit4@localhost",
            script="scripts/rabbitmq4.sh",
            chroot=("RR_RABBITMQ4_ROOT", "/var/tmp/rr-rabbitmq4"),
            older_url=("RR_TEST_URL_4",),
        ),
        _server(
            environ,
            "4.3",
            "4.3.6",
            port=5675,
            node="rabbit43@localhost",
            script="scripts/rabbitmq43.sh",
            chroot=("RR_RABBITMQ43_ROOT", "/var/tmp/rr-rabbitmq43"),
        ),
    )
    return {broker.version: broker for broker in table}


BROKERS = servers(os.environ)
"""This run's servers: :func:`servers` of the environment."""


def chosen_versions(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The lines this run tests on: ``RR_TEST_BROKERS`` (comma-separated), default
    :data:`DEFAULT_BROKERS`. A name the table does not have stops the run."""
    names = environ.get("RR_TEST_BROKERS", ",".join(DEFAULT_BROKERS))
    chosen = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in BROKERS]
    if unknown:
        raise pytest.UsageError(
            f"RR_TEST_BROKERS names {', '.join(map(repr, unknown))}: the suite knows the "
            f"servers {', '.join(BROKERS)} (tests/shared_node.py)"
        )
    return list(dict.fromkeys(chosen))


_current = BROKERS[DEFAULT_BROKERS[0]]


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
        if broker.script is not None:
            message += f" ({broker.script} builds and starts it)"
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
