"""A RabbitMQ node of the fault suite's own, started from the machine's RabbitMQ package
(``server="3.10"``) or from the chroot of a newer line built by ``scripts/rabbitmq-chroot.sh``
(``server="4.0"``, ``server="4.3"``): the chroot of that line in tests/shared_node.py's table.

The suite never touches the shared brokers (the table's nodes: ``rabbit@localhost``,
``rabbit4@localhost``, ``rabbit43@localhost``): every operation here addresses only the
private node by name (``rabbitmqctl -n NODE ...``) or by the OS processes that carry this
node's marker in their environment.

A :class:`PrivateNode` has

* its own node name (``rrfault-<random>@localhost``), AMQP port and distribution port (both
  picked free, below the ephemeral port range, so that two pytest sessions do not collide);
* its own data folder under a temporary directory (Mnesia, logs, pid file, config files),
  owned by the ``rabbitmq`` user when we run as root (the Debian wrapper
  ``/usr/sbin/rabbitmq-server`` runs the server as that user through ``su``);
* its own ``rabbitmq.conf`` and ``rabbitmq-env.conf`` (the machine's files pin the shared
  node's listener and node name) and an empty plugin list (fast start-up).

A 4.0 or 4.3 node runs inside its line's chroot (``$RR_RABBITMQ4_ROOT``, default
``/var/tmp/rr-rabbitmq4``; ``$RR_RABBITMQ43_ROOT``, default ``/var/tmp/rr-rabbitmq43``), which
has the host's ``/proc``, ``/dev`` and ``/tmp`` mounted (so the data folder, under ``/tmp``,
has the same path on both sides) and shares the host's epmd and process table.
Every command runs as ``chroot --userspec=<the chroot's rabbitmq> ROOT /usr/bin/env -i ...``
with exactly the environment given (the marker among it), and calls the scripts in
``/usr/lib/rabbitmq/bin`` rather than the Debian wrapper, which would ``cd /var/lib/rabbitmq``
and take the shared node's cookie (and its ``startup_log``). The node and ``rabbitmqctl``
share a cookie of the node's own (``HOME`` is the data folder's ``home``): no command of
ours can reach the chroot's shared node. Needs root.

Cleanup happens three ways: :meth:`PrivateNode.stop` (the fixture's finalizer), an ``atexit``
hook, and a watchdog process that kills the node and removes its folder when the Python
process that started it dies without cleaning up (SIGKILL, a crash).

All methods are blocking and bounded in time; from an async test call them with
``await asyncio.to_thread(node.kill)`` so the test's event loop keeps running.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import pwd
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.shared_node import BROKERS
from tests.vhost_eval import ALL_DONE, vhost_batch

__all__ = [
    "SERVERS",
    "NodeError",
    "PrivateNode",
    "chroot_of",
    "find_tools",
    "free_port",
    "tools_missing",
]

SERVERS = tuple(BROKERS)
"""The RabbitMQ lines a private node runs (tests/shared_node.py's table): the machine's
package (3.10.8), or a line's chroot (4.0.5, 4.3.6)."""

CTL_TIMEOUT_S = 120.0
START_TIMEOUT_S = 240.0
"""A node's start-up, to its AMQP listener: a 4.x node in its chroot took over 60 s beside a
CPU hog (docs/reference/testing.md, "On a busy machine"); a deadline, not an expectation."""
"""How long one ``rabbitmqctl`` may take: a CLI's Erlang VM that starts on a starved machine
took over 30 s (a node's answer to an eval, in a run beside other tests)."""

GONE_FOR_S = 3.0
"""How long a starting node may show no process before its start counts as failed."""

MARKER_VARIABLE = "RR_FAULT_NODE"
"""Environment variable (value: the node name) every OS process of a private node carries."""

DEFAULT_WATERMARK = "0.4"
ALARM_WATERMARK = "0.000001"
"""A memory high watermark (fraction of RAM) far below what any node uses: a memory alarm."""

_SEARCH_PATH = ("/usr/sbin", "/usr/local/sbin", "/usr/lib/rabbitmq/bin")
_DEBIAN_WRAPPER_MARK = b"Only root or rabbitmq should run"

_CHROOT_SCRIPTS = "/usr/lib/rabbitmq/bin"
_CHROOT_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


_METADATA_STORE = (
    "case code:ensure_loaded(rabbit_khepri) =:= {module, rabbit_khepri} "
    "andalso rabbit_khepri:is_enabled() of true -> khepri; false -> mnesia end."
)
"""Erlang: the store a node keeps its definitions in (3.10 has no ``rabbit_khepri``)."""
_SYNC_METADATA = (
    "case code:ensure_loaded(rabbit_khepri) =:= {module, rabbit_khepri} "
    "andalso rabbit_khepri:is_enabled() of true -> khepri; "
    "false -> ok = mnesia:sync_log(), mnesia end."
)
"""Erlang: ``mnesia:sync_log()`` on a node on Mnesia; the store's name."""


class NodeError(RuntimeError):
    """A private node operation failed or did not finish in time."""


def find_tools() -> tuple[str, str] | None:
    """The paths of ``rabbitmq-server`` and ``rabbitmqctl``, or None when either is missing.

    ``/usr/sbin`` is searched even when it is not on ``PATH`` (it is not for most users).
    """
    search = os.pathsep.join([os.environ.get("PATH", ""), *_SEARCH_PATH])
    server = shutil.which("rabbitmq-server", path=search)
    ctl = shutil.which("rabbitmqctl", path=search)
    if server is None or ctl is None:
        return None
    return server, ctl


def chroot_of(server: str) -> Path | None:
    """The chroot the private nodes of ``server`` start from (the table's, as
    scripts/rabbitmq-chroot.sh builds it), or None: the machine's package."""
    _check_server(server)
    return BROKERS[server].chroot


def _check_server(server: str) -> None:
    if server not in SERVERS:
        raise ValueError(f"server {server!r}: expected one of {', '.join(SERVERS)}")


def tools_missing(server: str = "3.10") -> str | None:
    """Why a private node of ``server`` cannot be started here, or None when it can (as far as
    we can tell)."""
    root = chroot_of(server)
    if sys.platform != "linux":
        return f"private RabbitMQ nodes need Linux (/proc), not {sys.platform}"
    if root is not None:
        found = _Chroot.find(server, root)
        return found if isinstance(found, str) else None
    if find_tools() is None:
        return "rabbitmq-server/rabbitmqctl are not installed (apt-get install rabbitmq-server)"
    return None


@dataclass(frozen=True, slots=True)
class _Chroot:
    """The chroot of a RabbitMQ line (scripts/rabbitmq-chroot.sh), and its ``rabbitmq``
    user's ids."""

    root: Path
    binary: str
    uid: int
    gid: int

    @classmethod
    def find(cls, server: str, root: Path) -> _Chroot | str:
        """The chroot of ``server`` at ``root``, or why a node cannot run in it."""
        script = BROKERS[server].script or "scripts/rabbitmq-chroot.sh"
        if os.geteuid() != 0:
            return f"a RabbitMQ {server} node runs in a chroot: the fault tests must run as root"
        if not (root / _CHROOT_SCRIPTS.lstrip("/") / "rabbitmq-server").is_file():
            return f"no RabbitMQ {server} chroot in {root} ({script} up builds it)"
        search = os.pathsep.join([os.environ.get("PATH", ""), *_SEARCH_PATH])
        binary = shutil.which("chroot", path=search)
        if binary is None:
            return "chroot (coreutils) is not installed"
        for mount in ("proc", "dev"):
            if not os.path.ismount(root / mount):
                return f"{root / mount} is not mounted ({script} up mounts it)"
        try:
            shared_tmp = os.path.samefile(root / "tmp", "/tmp")
        except OSError:
            shared_tmp = False
        if not shared_tmp:
            return f"{root / 'tmp'} is not the host's /tmp ({script} up mounts it)"
        with contextlib.suppress(OSError):
            for line in (root / "etc" / "passwd").read_text().splitlines():
                fields = line.split(":")
                if fields[0] == "rabbitmq" and len(fields) > 3:
                    return cls(root, binary, int(fields[2]), int(fields[3]))
        return f"{root}/etc/passwd has no rabbitmq user"

    def command(self, program: str, args: Sequence[str], env: Mapping[str, str]) -> list[str]:
        """Run ``program ARGS`` inside the chroot as its ``rabbitmq`` user, with exactly
        ``env`` as its environment."""
        return [
            self.binary,
            f"--userspec={self.uid}:{self.gid}",
            f"--groups={self.gid}",
            str(self.root),
            "/usr/bin/env",
            "-i",
            *(f"{key}={value}" for key, value in env.items()),
            program,
            *args,
        ]


def _ephemeral_low() -> int:
    try:
        low = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0]
        return int(low)
    except (OSError, ValueError, IndexError):
        return 32768


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_port(exclude: Iterable[int] = ()) -> int:
    """A TCP port that is free now, picked at random below the ephemeral range.

    Ports below the ephemeral range are never handed out as source ports of outgoing
    connections, so the port stays free while a killed node is down; the random pick keeps
    two concurrent sessions apart.
    """
    taken = set(exclude)
    high = max(_ephemeral_low() - 1, 20001)
    for _ in range(200):
        port = random.randint(20000, high)
        if port in taken or port in (25672, 35672):
            continue
        if _port_is_free(port):
            return port
    raise NodeError("found no free TCP port in 200 tries")


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state follows the parenthesised command name, which may hold spaces.
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def _marked_pids(node_name: str) -> list[int]:
    """The OS processes whose environment carries ``RR_FAULT_NODE=node_name``."""
    needle = f"{MARKER_VARIABLE}={node_name}".encode()
    found: list[int] = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and _pid_alive(int(entry)):
            found.append(int(entry))
    return found


def _epmd_port(short_name: str) -> int | None:
    """The distribution port epmd has registered for ``short_name``, if any."""
    epmd = shutil.which("epmd", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin"]))
    if epmd is None:
        return None
    try:
        out = subprocess.run(
            [epmd, "-names"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(rf"^name {re.escape(short_name)} at port (\d+)$", out, re.MULTILINE)
    return int(match.group(1)) if match else None


def _listener_pids(port: int) -> list[int]:
    """The processes listening on TCP ``port`` (needs ``ss``; root sees every process)."""
    ss = shutil.which("ss", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))
    if ss is None:
        return []
    try:
        out = subprocess.run(
            [ss, "-Hltnp", f"sport = :{port}"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted({int(pid) for pid in re.findall(r"pid=(\d+)", out)})


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it (``su`` starts its shell in a new session, so a
    process group does not reach the whole tree)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _kill_tree(root: int) -> None:
    for pid in _descendants(root):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _wait_until(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


_WATCHDOG = r"""
import os, shutil, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
node, data_dir = sys.argv[1], sys.argv[2]
sys.stdin.buffer.read()  # returns once the process that started the node closed or died
needle = ("%s=%s" % ("RR_FAULT_NODE", node)).encode()
for _ in range(3):
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % entry, "rb") as handle:
                environ = handle.read().split(b"\0")
        except OSError:
            continue
        if needle in environ:
            try:
                os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass
    time.sleep(0.2)
shutil.rmtree(data_dir, ignore_errors=True)
"""


class PrivateNode:
    """One RabbitMQ node of the suite's own (see the module docstring).

    ::

        node = PrivateNode()    # server="4.0" / "4.3": the chroot's RabbitMQ 4.0.5 / 4.3.6
        node.start()            # ~5 s (4.0: ~2 s)
        ... amqp.connect(node.url) ...
        node.kill(); node.restart()
        node.stop()             # also removes the data folder
    """

    def __init__(
        self,
        *,
        server: str = "3.10",
        prefix: str = "rrfault",
        start_timeout_s: float = START_TIMEOUT_S,
        advanced_config: str | None = None,
    ) -> None:
        _check_server(server)
        self.server = server
        """The RabbitMQ line: ``"3.10"`` (the machine's package), ``"4.0"`` or ``"4.3"`` (its
        chroot's)."""
        self._chroot: _Chroot | None = None
        root = chroot_of(server)
        if root is not None:
            chroot = _Chroot.find(server, root)
            if isinstance(chroot, str):
                raise NodeError(chroot)
            self._chroot = chroot
            self._server = f"{_CHROOT_SCRIPTS}/rabbitmq-server"
            self._ctl = f"{_CHROOT_SCRIPTS}/rabbitmqctl"
        else:
            tools = find_tools()
            if tools is None:
                raise NodeError(tools_missing() or "RabbitMQ tools not found")
            self._server, self._ctl = tools
        self._prefix = prefix
        self._start_timeout_s = start_timeout_s
        self._advanced_config = advanced_config
        """Erlang terms for ``advanced.config`` (``[{rabbit, [...]}].``), if any."""
        self._short_name = f"{prefix}-{secrets.token_hex(4)}"
        self.name = f"{self._short_name}@localhost"
        """The Erlang node name, ``rrfault-<hex>@localhost``."""
        self.port = 0
        """The AMQP port (on 127.0.0.1), picked at the first start."""
        self.dist_port = 0
        """The Erlang distribution port, picked at the first start."""
        self._data_dir: Path | None = None
        self._owner: tuple[int, int] | None = None
        """The uid and gid the node runs as, when its folder must be theirs (we run as root)."""
        self._direct_scripts = False
        self._pid: int | None = None
        self._app_stopped = False
        self._alarm_on = False
        self._watermark = DEFAULT_WATERMARK
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._atexit_registered = False
        self.last_start_s: float | None = None
        """How long the last :meth:`start` / :meth:`restart` took, in seconds."""

    # --- properties -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``amqp://guest:guest@127.0.0.1:<port>/`` (the default vhost)."""
        return self.url_for("/")

    def url_for(self, vhost: str) -> str:
        """The URL of ``vhost`` on this node (the vhost percent-encoded in the path)."""
        self._require_started()
        path = "" if vhost == "/" else quote(vhost, safe="")
        return f"amqp://guest:guest@127.0.0.1:{self.port}/{path}"

    @property
    def data_dir(self) -> Path:
        """The node's folder: Mnesia, logs, pid file, config."""
        self._require_started()
        assert self._data_dir is not None
        return self._data_dir

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "rabbitmq.pid"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "log" / f"{self.name}.log"

    @property
    def pid(self) -> int | None:
        """The OS pid of the node's Erlang VM (from its pid file), if it runs."""
        pid = self._read_pid()
        return pid if pid is not None and _pid_alive(pid) else None

    def is_running(self) -> bool:
        """Whether the node's Erlang VM runs (the RabbitMQ app may be stopped)."""
        return self.pid is not None

    # --- life cycle -------------------------------------------------------------------

    def start(self) -> None:
        """Start the node (first start: create its folder and pick its ports).

        Returns once RabbitMQ runs and its AMQP port accepts connections. A start that
        fails because a port got taken in the meantime is retried with new ports (first
        start only).
        """
        if self.is_running():
            raise NodeError(f"{self.name} already runs")
        first = self._data_dir is None
        if first:
            self._create_folder()
            self._register_cleanup()
        attempts = 3 if first else 1
        for attempt in range(attempts):
            if first:
                self._pick_ports()
            try:
                self._start_once()
            except NodeError as exc:
                if attempt + 1 < attempts and "eaddrinuse" in str(exc).lower():
                    continue
                raise
            return

    def restart(self) -> None:
        """Start the node again after :meth:`kill`, :meth:`terminate` or a crash.

        Same name, ports and data folder: durable queues and persistent messages survive.
        """
        if self._data_dir is None:
            raise NodeError("restart() before start()")
        if self.is_running():
            raise NodeError(f"{self.name} still runs: kill() or terminate() it first")
        try:
            self._start_once()
        except NodeError as exc:
            if "exited during start-up" not in str(exc):
                raise
            # Seen once in CI right after a SIGTERM: the new VM gone at once, nothing in its
            # logs. A second start is what an operator would do too.
            self._start_once()

    def stop(self, *, graceful: bool = True, timeout_s: float = 30.0) -> None:
        """Stop the node (``rabbitmqctl stop``, or SIGKILL when not ``graceful`` or when the
        graceful stop fails) and remove its data folder. Idempotent."""
        if self._data_dir is None:
            return
        try:
            if self.is_running() and graceful:
                with contextlib.suppress(NodeError):
                    self._ctl_run("stop", str(self.pid_file), timeout_s=timeout_s)
            self._kill_everything(timeout_s=10.0)
        finally:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None
            self._pid = None
            self._release_watchdog()
            if self._atexit_registered:
                atexit.unregister(self._atexit_cleanup)
                self._atexit_registered = False

    def kill(self, *, timeout_s: float = 10.0) -> None:
        """SIGKILL the node's Erlang VM (and every process of this node), like a crash.

        Returns once they are gone and epmd has forgotten the node name, so that
        :meth:`restart` can register it again. Nothing is flushed: messages not yet on disk
        are lost, as in a real crash.
        """
        self._require_started()
        self._kill_everything(timeout_s=timeout_s)

    def sync_metadata(self) -> None:
        """Have the node's definitions on disk now. Mnesia logs a committed change
        asynchronously: a SIGKILL in the instant after it can lose a queue or a vhost just
        made (RabbitMQ 3.10; docs/reference/topology.md, "What survives a broker restart"), so a
        node on Mnesia runs ``mnesia:sync_log()``. RabbitMQ 4.0 keeps its definitions in Mnesia
        too (Khepri is the feature flag ``khepri_db``, disabled on a new 4.0 node); a new 4.3
        node keeps them in Khepri, whose Raft log has a change on disk before the client is
        answered: nothing to do there (:meth:`metadata_store` says which)."""
        answer = self._ctl_run("eval", _SYNC_METADATA).strip()
        if answer not in ("mnesia", "khepri"):
            raise NodeError(f"could not sync the definitions of {self.name}: {answer}")

    def metadata_store(self) -> str:
        """Where the node keeps its definitions: ``"mnesia"`` or ``"khepri"``."""
        answer = self._ctl_run("eval", _METADATA_STORE).strip()
        if answer not in ("mnesia", "khepri"):
            raise NodeError(f"{self.name} keeps its definitions in neither store: {answer}")
        return answer

    def terminate(self, *, timeout_s: float = 30.0) -> None:
        """SIGTERM the node's Erlang VM (an orderly shutdown) and wait until it exited."""
        self._require_started()
        pid = self.pid
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not _wait_until(lambda: not _pid_alive(pid), timeout_s):
            raise NodeError(f"{self.name} (pid {pid}) did not exit within {timeout_s:g} s")
        self._wait_epmd_forgets(timeout_s=5.0)

    def stop_app(self) -> None:
        """``rabbitmqctl stop_app``: RabbitMQ stops (connections close), the VM keeps running."""
        self._ctl_run("stop_app")
        self._app_stopped = True

    def start_app(self) -> None:
        """``rabbitmqctl start_app``, then wait until the AMQP port accepts connections."""
        self._ctl_run("start_app", timeout_s=self._start_timeout_s)
        self._app_stopped = False
        self._wait_for_listener(timeout_s=10.0)

    def heal(self) -> None:
        """Bring the node back to a healthy state after a fault test: running, app started,
        no memory alarm. Cheap when nothing was broken (tracked, not probed)."""
        self._require_started()
        if not self.is_running():
            self.restart()
        elif self._app_stopped:
            self.start_app()
        if self._alarm_on:
            self.set_memory_alarm(False)

    # --- faults -----------------------------------------------------------------------

    def set_memory_alarm(self, on: bool, *, timeout_s: float = 10.0) -> None:
        """Raise (``True``) or clear the node's memory alarm through its memory high watermark.

        Raised: the watermark goes to a tiny fraction of RAM, RabbitMQ raises the memory alarm
        and sends ``connection.blocked`` to publishing connections (and stops reading from
        them). Cleared: the watermark goes back and ``connection.unblocked`` follows. Returns
        once ``rabbit_alarm`` reports the new state.
        """
        if on:
            if not self._alarm_on:
                current = self._ctl_run("eval", "vm_memory_monitor:get_vm_memory_high_watermark().")
                value = current.strip()
                if re.fullmatch(r"[0-9.]+", value):
                    self._watermark = value
            self._ctl_run("set_vm_memory_high_watermark", ALARM_WATERMARK)
        else:
            self._ctl_run("set_vm_memory_high_watermark", self._watermark)
        self._alarm_on = on
        if not _wait_until(lambda: self.memory_alarm_active() == on, timeout_s, 0.1):
            raise NodeError(f"memory alarm on {self.name} did not become {on} in {timeout_s} s")

    def memory_alarm_active(self) -> bool:
        """Whether ``rabbit_alarm`` lists a memory alarm of this node."""
        out = self._ctl_run(
            "eval",
            "lists:keymember({resource_limit, memory, node()}, 1, rabbit_alarm:get_alarms()).",
        )
        return out.strip() == "true"

    def close_all_connections(self, reason: str = "closed by the fault suite") -> None:
        """``rabbitmqctl close_all_connections --global``: the broker closes every client
        connection of this node (connection.close 320 CONNECTION_FORCED with ``reason``)."""
        self._ctl_run("close_all_connections", "--global", reason)

    def close_connections_from(self, ports: Collection[int], reason: str) -> int:
        """``rabbitmqctl close_connection`` of each client connection from a local port in
        ``ports`` (the broker names a connection ``<host>:<port> -> <host>:<port>``): the
        broker closes just those (CONNECTION_FORCED with ``reason``). Returns how many."""
        listed = self._ctl_run("list_connections", "-q", "--no-table-headers", "pid", "name")
        closed = 0
        for line in listed.splitlines():
            pid, _, name = line.partition("\t")
            client_port = name.split(" -> ")[0].rpartition(":")[2]
            if client_port.isdigit() and int(client_port) in ports:
                self._ctl_run("close_connection", pid.strip(), reason)
                closed += 1
        return closed

    # --- inspection -------------------------------------------------------------------

    def list_channels(
        self,
        columns: Sequence[str] = (
            "name",
            "vhost",
            "number",
            "user",
            "confirm",
            "consumer_count",
            "messages_unacknowledged",
            "messages_unconfirmed",
            "prefetch_count",
        ),
    ) -> list[dict[str, Any]]:
        """The node's channels (every vhost), one dict of ``columns`` each."""
        return self._ctl_json("list_channels", *columns)

    def channel_count(self) -> int:
        return len(self._ctl_json("list_channels", "number"))

    def list_connections(
        self,
        columns: Sequence[str] = ("name", "vhost", "user", "state", "channels", "peer_port"),
    ) -> list[dict[str, Any]]:
        """The node's client connections (every vhost). ``state`` is ``running``,
        ``blocking`` (alarm raised, the client did not publish yet) or ``blocked``."""
        return self._ctl_json("list_connections", *columns)

    def connection_count(self) -> int:
        return len(self._ctl_json("list_connections", "name"))

    def queues(self, vhost: str = "/") -> dict[str, tuple[int, int]]:
        """``{name: (messages, consumers)}`` of the queues in ``vhost``."""
        rows = self._ctl_json("list_queues", "-p", vhost, "name", "messages", "consumers")
        return {str(row["name"]): (int(row["messages"]), int(row["consumers"])) for row in rows}

    def delete_queue(self, name: str, vhost: str = "/") -> None:
        """Delete queue ``name`` in ``vhost`` (its consumers get basic.cancel)."""
        self._ctl_run("delete_queue", "-p", vhost, name)

    # --- vhosts -----------------------------------------------------------------------

    def add_vhost(self, vhost: str, user: str = "guest") -> None:
        """Create ``vhost`` and give ``user`` full permissions on it (one ``rabbitmqctl``
        run, tests/vhost_eval.py). A vhost starts its message stores: on a node of a busy
        machine that took over 30 s once (a clean-clone CI run beside other test runs), so the
        run may take 120 s."""
        batch = vhost_batch(user, delete=[], make=[vhost])
        answer = self._ctl_run("-q", "eval", batch, timeout_s=120.0).strip()
        if answer != ALL_DONE:
            raise NodeError(f"could not make vhost {vhost!r} on {self.name}: {answer}")

    def delete_vhost(self, vhost: str) -> None:
        """Delete ``vhost`` with its queues and exchanges (its connections are closed). It
        stops the vhost's message stores, as slow as starting them on a busy machine (over
        30 s once, on the 4.3 chroot during a clean-clone CI run), so the run may take 120 s
        like :meth:`add_vhost`."""
        self._ctl_run("delete_vhost", vhost, timeout_s=120.0)

    def ctl(self, *args: str, timeout_s: float = CTL_TIMEOUT_S) -> str:
        """Run ``rabbitmqctl -n <this node> ARGS`` and return its output (escape hatch)."""
        return self._ctl_run(*args, timeout_s=timeout_s)

    # --- internals --------------------------------------------------------------------

    def _require_started(self) -> None:
        if self._data_dir is None:
            raise NodeError("the node was not started (or was stopped)")

    def _read_pid(self) -> int | None:
        if self._data_dir is None:
            return None
        try:
            return int((self._data_dir / "rabbitmq.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def _node_user(self) -> tuple[int, int] | None:
        """The uid and gid of the ``rabbitmq`` user the node runs as when we run as root (the
        chroot's own user for a 4.0 or 4.3 node), or None."""
        if self._chroot is not None:
            return self._chroot.uid, self._chroot.gid
        if os.geteuid() != 0:
            return None
        try:
            user = pwd.getpwnam("rabbitmq")
        except KeyError:
            return None
        return user.pw_uid, user.pw_gid

    def _create_folder(self) -> None:
        owner = self._owner = self._node_user()
        # The Debian wrapper refuses users other than root and rabbitmq: run its scripts
        # directly, as ourselves, then. (A chroot's node needs root, and never uses the wrapper.)
        wrapper = Path(self._server).read_bytes() if Path(self._server).is_file() else b""
        other_user = os.geteuid() != 0 and pwd.getpwuid(os.geteuid()).pw_name != "rabbitmq"
        if other_user and _DEBIAN_WRAPPER_MARK in wrapper:
            scripts = Path("/usr/lib/rabbitmq/bin")
            self._server = str(scripts / "rabbitmq-server")
            self._ctl = str(scripts / "rabbitmqctl")
            self._direct_scripts = True
        # /tmp rather than $TMPDIR: the rabbitmq user must be able to reach the folder (and
        # the chroot sees the host's /tmp at the same path).
        base = "/tmp" if owner is not None and Path("/tmp").is_dir() else None
        data_dir = Path(tempfile.mkdtemp(prefix=f"{self._short_name}-", dir=base))
        data_dir.chmod(0o755)
        (data_dir / "mnesia").mkdir()
        (data_dir / "log").mkdir()
        (data_dir / "home").mkdir()
        (data_dir / "enabled_plugins").write_text("[].\n")
        (data_dir / "rabbitmq-env.conf").write_text("# the fault suite's node: no settings\n")
        if self._advanced_config is not None:
            (data_dir / "advanced.config").write_text(self._advanced_config)
        if self._chroot is not None:
            # The node's own Erlang cookie, for the server and rabbitmqctl (_chroot_env).
            cookie = data_dir / "home" / ".erlang.cookie"
            cookie.write_text(secrets.token_hex(20).upper())
            cookie.chmod(0o400)
        if owner is not None:
            for path in [data_dir, *data_dir.rglob("*")]:
                os.chown(path, *owner)
        self._data_dir = data_dir

    def _pick_ports(self) -> None:
        self.port = free_port()
        self.dist_port = free_port(exclude=[self.port])
        assert self._data_dir is not None
        config = self._data_dir / "rabbitmq.conf"
        config.write_text(
            f"listeners.tcp.local = 127.0.0.1:{self.port}\n"
            "loopback_users = none\n"
            f"vm_memory_high_watermark.relative = {DEFAULT_WATERMARK}\n"
            "disk_free_limit.absolute = 1MB\n"
            "log.console = false\n"
            "log.file.level = info\n"
        )
        if self._owner is not None:
            os.chown(config, *self._owner)

    def _server_env(self) -> dict[str, str]:
        assert self._data_dir is not None
        data = self._data_dir
        if self._chroot is not None:
            env = self._chroot_env()
        else:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        env.update(
            {
                MARKER_VARIABLE: self.name,
                "RABBITMQ_NODENAME": self.name,
                "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
                "RABBITMQ_NODE_PORT": str(self.port),
                "RABBITMQ_DIST_PORT": str(self.dist_port),
                "RABBITMQ_CONFIG_FILE": str(data / "rabbitmq.conf"),
                "RABBITMQ_ADVANCED_CONFIG_FILE": str(data / "advanced.config"),
                "RABBITMQ_CONF_ENV_FILE": str(data / "rabbitmq-env.conf"),
                "RABBITMQ_MNESIA_BASE": str(data / "mnesia"),
                "RABBITMQ_LOG_BASE": str(data / "log"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": str(data / "enabled_plugins"),
                "RABBITMQ_PID_FILE": str(data / "rabbitmq.pid"),
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": (
                    "-kernel inet_dist_use_interface {127,0,0,1}"
                ),
                "ERL_EPMD_ADDRESS": "127.0.0.1",
            }
        )
        if self._direct_scripts:
            # Our own Erlang cookie, shared by the server and rabbitmqctl.
            env["HOME"] = str(data / "home")
        return env

    def _ctl_env(self) -> dict[str, str]:
        if self._chroot is not None:
            return self._chroot_env()
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("RABBITMQ_") and k != MARKER_VARIABLE
        }
        if self._direct_scripts and self._data_dir is not None:
            env["HOME"] = str(self._data_dir / "home")
        return env

    def _chroot_env(self) -> dict[str, str]:
        """The whole environment of a command in the chroot (``env -i``): its PATH, a UTF-8
        locale (the 4.x CLI warns without one), and HOME holding the node's own cookie."""
        assert self._data_dir is not None
        return {"PATH": _CHROOT_PATH, "LANG": "C.UTF-8", "HOME": str(self._data_dir / "home")}

    def _command(
        self, program: str, args: Sequence[str], env: dict[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that run ``program ARGS`` with ``env``: on the host, or
        inside the chroot (then ``env`` goes through ``env -i``, and the ``chroot`` command
        itself gets an empty environment)."""
        if self._chroot is None:
            return [program, *args], env
        return self._chroot.command(program, args, env), {}

    def _start_once(self) -> None:
        started = time.monotonic()
        self._clear_pid_file()
        self._wait_epmd_forgets(timeout_s=5.0)
        data = self.data_dir
        command, env = self._command(self._server, ["-detached"], self._server_env())
        with (data / "startup.log").open("ab") as output:
            try:
                done = subprocess.run(
                    command,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    timeout=30,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                self._kill_everything(timeout_s=10.0)
                raise NodeError(f"rabbitmq-server -detached hung: {self._log_tail()}") from exc
        if done.returncode != 0:
            self._kill_everything(timeout_s=10.0)
            raise NodeError(
                f"rabbitmq-server -detached exited with {done.returncode}: {self._log_tail()}"
            )
        try:
            self._wait_for_pid_file(deadline=started + self._start_timeout_s)
            budget = self._start_timeout_s - (time.monotonic() - started)
            self._ctl_run(
                "wait",
                "--timeout",
                str(max(int(budget), 5)),
                str(self.pid_file),
                timeout_s=max(budget, 5.0) + 10.0,
            )
            self._wait_for_listener(timeout_s=60.0)
        except NodeError as exc:
            self._kill_everything(timeout_s=10.0)
            raise NodeError(f"{self.name} did not start: {exc}\n{self._log_tail()}") from exc
        self._pid = self._read_pid()
        self._app_stopped = False
        self._alarm_on = False
        self.last_start_s = time.monotonic() - started

    def _wait_for_pid_file(self, deadline: float) -> None:
        """Wait until the node wrote its pid file; fail early if its processes stay gone for
        :data:`GONE_FOR_S` (``-detached`` hands over from one process to the next: on a
        loaded machine none of them may show for a moment; CI once took that for an exit)."""
        gone_since: float | None = None
        while not self.pid_file.exists():
            now = time.monotonic()
            if _marked_pids(self.name):
                gone_since = None
            elif gone_since is None:
                gone_since = now
            elif now - gone_since >= GONE_FOR_S:
                raise NodeError("the Erlang VM exited during start-up")
            if now >= deadline:
                raise NodeError("no pid file within the start-up timeout")
            time.sleep(0.05)

    def _clear_pid_file(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()

    def _wait_for_listener(self, timeout_s: float) -> None:
        def accepts() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                    return True
            except OSError:
                return False

        if not _wait_until(accepts, timeout_s, 0.1):
            raise NodeError(f"AMQP port {self.port} of {self.name} does not accept connections")

    def _wait_epmd_forgets(self, timeout_s: float) -> bool:
        return _wait_until(lambda: _epmd_port(self._short_name) is None, timeout_s, 0.1)

    def _node_pids(self) -> set[int]:
        pids = set(_marked_pids(self.name))
        pid = self._read_pid()
        if pid is not None and _pid_alive(pid):
            pids.add(pid)
        return pids

    def _kill_everything(self, timeout_s: float) -> None:
        """SIGKILL every OS process of this node, then whatever epmd still knows under its
        name (the node name is random: nothing else registers it)."""
        deadline = time.monotonic() + timeout_s
        for pid in self._node_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if not _wait_until(lambda: not self._node_pids(), max(deadline - time.monotonic(), 0)):
            raise NodeError(f"processes of {self.name} survived SIGKILL: {self._node_pids()}")
        if self._wait_epmd_forgets(timeout_s=min(2.0, max(deadline - time.monotonic(), 0))):
            return
        port = _epmd_port(self._short_name)
        if port is not None:
            for pid in _listener_pids(port):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if not self._wait_epmd_forgets(timeout_s=max(deadline - time.monotonic(), 1.0)):
            raise NodeError(f"epmd still lists {self._short_name} after its processes died")

    def _ctl_run(self, *args: str, timeout_s: float = CTL_TIMEOUT_S) -> str:
        """``rabbitmqctl -n NODE ARGS`` within ``timeout_s``; its stdout, or NodeError."""
        command, env = self._command(self._ctl, ["-n", self.name, *args], self._ctl_env())
        process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            out, err = process.communicate(timeout=timeout_s)
        except BaseException as error:  # a timeout, pytest-timeout, Ctrl-C: leave no process
            _kill_tree(process.pid)  # the wrapper, su, the shell and the CLI's Erlang VM
            process.communicate()  # and no open pipe
            if isinstance(error, subprocess.TimeoutExpired):
                raise NodeError(
                    f"rabbitmqctl {' '.join(args)} on {self.name}: no answer in {timeout_s:g} s"
                ) from None
            raise
        if process.returncode != 0:
            raise NodeError(
                f"rabbitmqctl {' '.join(args)} on {self.name} exited with "
                f"{process.returncode}: {(err or out).strip()[-2000:]}"
            )
        return out

    def _ctl_json(self, command: str, *args: str) -> list[dict[str, Any]]:
        out = self._ctl_run(command, "-q", "--formatter", "json", *args)
        try:
            rows = json.loads(out)
        except json.JSONDecodeError as exc:
            raise NodeError(f"rabbitmqctl {command}: not JSON: {out[:500]!r}") from exc
        if not isinstance(rows, list):
            raise NodeError(f"rabbitmqctl {command}: expected a JSON list, got {out[:500]!r}")
        return rows

    def _log_tail(self, lines: int = 30) -> str:
        parts: list[str] = []
        if self._data_dir is None:
            return ""
        for path in (self._data_dir / "startup.log", self.log_file):
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").splitlines()[-lines:]
                if text:
                    parts.append(f"--- {path.name} ---\n" + "\n".join(text))
        return "\n".join(parts)

    def _register_cleanup(self) -> None:
        assert self._data_dir is not None
        atexit.register(self._atexit_cleanup)
        self._atexit_registered = True
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, self.name, str(self._data_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in the terminal must not kill it first
        )

    def _release_watchdog(self) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is None:
            return
        if watchdog.stdin is not None:
            with contextlib.suppress(OSError):
                watchdog.stdin.close()
        try:
            watchdog.wait(timeout=10)
        except subprocess.TimeoutExpired:
            watchdog.kill()
            watchdog.wait()

    def _atexit_cleanup(self) -> None:
        with contextlib.suppress(Exception):
            self.stop(graceful=False)

    def __enter__(self) -> PrivateNode:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self._data_dir is not None and self.is_running() else "down"
        return f"<PrivateNode {self.server} {self.name} amqp={self.port} {state}>"
