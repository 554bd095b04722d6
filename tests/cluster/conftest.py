"""The local three-node RabbitMQ 3.10 cluster of the cluster tests (``scripts/cluster.sh``).

``cluster`` (session)
    Runs ``scripts/cluster.sh up`` (quick when the cluster already runs: it is left running at
    the end of the session, the next one reuses it, and ``scripts/cluster.sh down`` removes it
    by hand; the script takes a file lock, so two pytest processes or xdist workers never
    start it at once) and yields a :class:`LocalCluster`: the nodes ``rrc1@localhost`` ..
    ``rrc3@localhost`` on AMQP ports 5681..5683 (management API: 15681..15683). Skipped when
    not run as root or when RabbitMQ is not installed, but failed when ``CI=true`` (like
    ``require_broker`` in tests/shared_node.py: CI must never pass by skipping broker tests).

Every command here addresses one of these three nodes by name; the shared nodes
(``rabbit@localhost``, ``rabbit4@localhost``) are never touched.

Every test here is marked ``cluster``, which tests/conftest.py turns into ``broker`` and
``xdist_group("cluster")``: under pytest-xdist they all run on one worker, one after the
other, since they stop and start nodes of the one cluster.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "cluster.sh"
_SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
SIZE = 3


class ClusterError(RuntimeError):
    """A command against a node of the local cluster failed."""


def _tool(name: str) -> str:
    path = shutil.which(name, path=_SEARCH_PATH)
    if path is None:
        raise ClusterError(f"{name} is not installed")
    return path


def _run(command: list[str], timeout_s: float) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise ClusterError(
            f"{' '.join(command)} exited with {done.returncode}:\n{done.stdout}{done.stderr}"
        )
    return done.stdout


@dataclass(frozen=True, slots=True)
class LocalCluster:
    """The three nodes; ``n`` is a node number, 1 to 3."""

    urls: tuple[str, ...]
    """``amqp://guest:guest@127.0.0.1:568N/`` for nodes 1, 2, 3."""
    nodes: tuple[str, ...]
    """``rrcN@localhost`` for nodes 1, 2, 3."""

    def url(self, n: int, vhost: str | None = None) -> str:
        """Node ``n``'s AMQP URL; of ``vhost`` when given one (its name quoted)."""
        url = self.urls[self._index(n)]
        return url if vhost is None else url.rstrip("/") + "/" + quote(vhost, safe="")

    def management_url(self, n: int) -> str:
        """Node ``n``'s management API: ``http://guest:guest@127.0.0.1:1568N/``."""
        return f"http://guest:guest@127.0.0.1:{15680 + self._number(n)}/"

    def node(self, n: int | str) -> str:
        """The name of node ``n`` (a number, or a name that must be one of ours)."""
        if isinstance(n, str):
            if n not in self.nodes:
                raise ClusterError(f"{n!r} is not a node of the local cluster {self.nodes}")
            return n
        return self.nodes[self._index(n)]

    def ctl(self, node: int | str, *args: str, timeout_s: float = 90.0) -> str:
        """``rabbitmqctl -q -n NODE ARGS``; its standard output. Raises on failure."""
        return _run([_tool("rabbitmqctl"), "-q", "-n", self.node(node), *args], timeout_s)

    def queues_ctl(self, node: int | str, *args: str, timeout_s: float = 90.0) -> str:
        """``rabbitmq-queues -q -n NODE ARGS``; its standard output. Raises on failure."""
        return _run([_tool("rabbitmq-queues"), "-q", "-n", self.node(node), *args], timeout_s)

    def cluster_status(self, node: int | str = 1) -> dict[str, object]:
        """``rabbitmqctl cluster_status`` of ``node``, as JSON."""
        status = json.loads(self.ctl(node, "cluster_status", "--formatter", "json"))
        assert isinstance(status, dict)
        return status

    def running_nodes(self, node: int | str = 1) -> list[str]:
        """The nodes ``node`` sees running in its cluster, sorted."""
        running = self.cluster_status(node).get("running_nodes", [])
        assert isinstance(running, list)
        return sorted(str(name) for name in running)

    def stop_app(self, n: int) -> None:
        """Stop node ``n``'s RabbitMQ application (its Erlang VM keeps running)."""
        _script("stop-node", str(self._number(n)))

    def start_app(self, n: int) -> None:
        """Start node ``n``'s RabbitMQ application again."""
        _script("start-node", str(self._number(n)))

    def ensure_running(self) -> None:
        """Start the RabbitMQ application of every node whose AMQP port does not answer (a
        test stopped it); no ``rabbitmqctl`` run when all answer (each costs an Erlang VM's
        start, about half a second of CPU)."""
        for n in range(1, SIZE + 1):
            if not _answers(self.url(n)):
                self.start_app(n)

    @contextmanager
    def own_vhost(self, prefix: str, *add_args: str) -> Iterator[str]:
        """A vhost for one test (``PREFIX-`` and 8 hex digits; ``add_vhost`` on node 1 with
        ``add_args``, guest allowed everything in it); deleted after, the nodes a test stopped
        started first."""
        name = f"{prefix}-{secrets.token_hex(4)}"
        self.ctl(1, "add_vhost", name, *add_args)
        try:
            self.ctl(1, "set_permissions", "-p", name, "guest", ".*", ".*", ".*")
            yield name
        finally:
            self.ensure_running()
            with suppress(ClusterError):
                self.ctl(1, "delete_vhost", name)

    @contextmanager
    def own_queues(self, prefix: str, *suffixes: str) -> Iterator[str]:
        """A name for one test's queues in vhost ``/`` (``PREFIX-`` and 8 hex digits); after
        the test, the nodes it stopped started again and its queues ``NAME.SUFFIX`` deleted
        (whatever happened, the next test finds three nodes and none of them)."""
        name = f"{prefix}-{secrets.token_hex(4)}"
        try:
            yield name
        finally:
            self.ensure_running()
            self.delete_queues(f"{name}.{suffix}" for suffix in suffixes)

    def queue_names(self, prefix: str) -> list[str]:
        """The names of vhost ``/``'s queues that start with ``prefix`` (node 1's management
        API)."""
        with _management(self, "GET", "api/queues/%2F?columns=name") as answer:
            rows = json.load(answer)
        return [str(row["name"]) for row in rows if str(row["name"]).startswith(prefix)]

    def delete_queues(self, names: Iterable[str]) -> None:
        """Delete these queues of vhost ``/``, those that exist (node 1's management API)."""
        for name in names:
            try:
                with _management(self, "DELETE", f"api/queues/%2F/{quote(name, safe='')}"):
                    pass
            except urllib.error.HTTPError as error:
                if error.code != 404:
                    raise

    def _index(self, n: int) -> int:
        return self._number(n) - 1

    @staticmethod
    def _number(n: int) -> int:
        if not 1 <= n <= SIZE:
            raise ClusterError(f"the local cluster has nodes 1 to {SIZE}, not {n!r}")
        return n


def _answers(url: str) -> bool:
    """Whether something listens on ``url``'s host and port (a node whose application is
    stopped does not)."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5672), 2):
            return True
    except OSError:
        return False


def _management(cluster: LocalCluster, method: str, path: str) -> Any:
    """An open response of node 1's management API to ``method path`` (HTTP errors raise)."""
    base = urlsplit(cluster.management_url(1))
    request = urllib.request.Request(
        f"{base.scheme}://{base.hostname}:{base.port}/{path}", method=method
    )
    token = base64.b64encode(f"{base.username}:{base.password}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    return urllib.request.urlopen(request, timeout=60)


def _script(*args: str, timeout_s: float = 600.0) -> str:
    return _run(["bash", str(SCRIPT), *args], timeout_s)


def _unavailable(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI=true: the cluster tests must run in CI)", pytrace=False)
    pytest.skip(message)


def _missing() -> str | None:
    """Why the local cluster cannot run here, or None."""
    if os.geteuid() != 0:
        return "the local RabbitMQ cluster (scripts/cluster.sh) needs root"
    for tool in ("rabbitmq-server", "rabbitmqctl", "rabbitmq-queues"):
        if shutil.which(tool, path=_SEARCH_PATH) is None:
            return f"{tool} is not installed (apt-get install rabbitmq-server)"
    return None


@pytest.fixture(scope="session")
def cluster() -> LocalCluster:
    """The local three-node cluster, started (or found running) once per session.

    Left running at the end: the next session reuses it (``scripts/cluster.sh down`` stops
    it). ``up`` also starts the application of a node a failed test left stopped.
    """
    problem = _missing()
    if problem is not None:
        _unavailable(f"no local RabbitMQ cluster for the cluster tests: {problem}")
    _script("up")
    return LocalCluster(
        urls=tuple(f"amqp://guest:guest@127.0.0.1:{5680 + n}/" for n in range(1, SIZE + 1)),
        nodes=tuple(f"rrc{n}@localhost" for n in range(1, SIZE + 1)),
    )
