"""The HTTP server of ``rr run --metrics-port`` and of the ``--workers`` supervisor's port:
``/metrics`` and ``/healthz`` of a :class:`Probe` (docs/reference/metrics.md, "Metrics and health").

It runs in daemon threads, one to accept and one per client connection (at most
:data:`MAX_CLIENTS` at once): it never waits on the event loop, the event loop never waits
on it, and a client that connects and says nothing cannot make ``/healthz`` time out for the
others. Each client gets one answer and the connection closes. What a client sends is read by
the pure runtime/http_head.py; a client has ``HEAD_TIMEOUT_S`` (5 s) there for its whole
request head, however it trickles in, and ``SEND_TIMEOUT_S`` (5 s) to take the answer.

Whatever a client does (nothing, half a request, too long a head, bytes that are not HTTP, a
reset) ends its connection with at most one log line through rr's logging (``metrics client
dropped``, its reason, the client's address and the count so far), never a traceback. A
client that connects and closes without a byte (a TCP probe) is not logged.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import selectors
import socket
import threading
import time
from typing import Protocol

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from rabbitctl_retry.runtime.http_head import (
    HEAD_TIMEOUT_S,
    SEND_TIMEOUT_S,
    Refusal,
    Request,
    answer,
    read_head,
)

log = logging.getLogger("rr.runtime")

MAX_CLIENTS = 256
"""Client connections served at once; one more is closed at once (and logged)."""

TEXT = "text/plain; charset=utf-8"


_RECV_BYTES = 4096

ACCEPT_PAUSE_S = 0.1
"""The pause after a connection could not be accepted (no file descriptor left)."""

LINGER_S = 1.0
"""After a refusal (400, 414, 431), how long rr reads what the client still sends, at most
:data:`LINGER_BYTES`, before it closes (so that the client reads the refusal)."""

LINGER_BYTES = 64 * 1024


class Probe(Protocol):
    """What :class:`MetricsServer` serves: one ``rr run``'s metrics (runtime/metrics.py
    ``RunMetrics``), or those of a supervisor's workers added up (runtime/supervisor.py)."""

    def page(self) -> bytes:
        """``/metrics``: the Prometheus text format."""
        ...

    def health(self) -> tuple[int, str]:
        """``/healthz``: (HTTP status, body)."""
        ...


class _Dropped(Exception):
    """A client's connection ends without an answer served; ``reason`` is logged (none: a
    client that closed without a byte)."""

    def __init__(self, reason: str | None) -> None:
        super().__init__(reason)
        self.reason = reason


class MetricsServer:
    """``/metrics`` and ``/healthz`` on ``host:port``, a daemon thread per client."""

    def __init__(self, probe: Probe, port: int, host: str) -> None:
        self._probe = probe
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((host, port))
            listener.listen(128)
        except BaseException:
            listener.close()
            raise
        self._listener = listener
        self._wake_read, self._wake_write = socket.socketpair()
        self._stopping = threading.Event()
        self._clients = threading.BoundedSemaphore(MAX_CLIENTS)
        self._count_lock = threading.Lock()
        self._dropped = 0
        self._thread = threading.Thread(target=self._accept_loop, name="rr-metrics", daemon=True)

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    @property
    def dropped(self) -> int:
        """The client connections dropped so far (each logged once)."""
        return self._dropped

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._wake_write.send(b"x")
        if self._thread.is_alive():
            self._thread.join()
        for sock in (self._listener, self._wake_read, self._wake_write):
            sock.close()

    # accepting -------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_read, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _ in selector.select():
                    if key.fileobj is self._listener:
                        self._accept()

    def _accept(self) -> None:
        try:
            client, address = self._listener.accept()
        except OSError as error:
            if error.errno != errno.ECONNABORTED:  # no file descriptor left, say: not in a spin
                self._stopping.wait(ACCEPT_PAUSE_S)
            return
        if not self._clients.acquire(blocking=False):
            self._drop(_where(address), "too many clients at once")
            _close(client)
            return
        try:
            threading.Thread(
                target=self._serve, args=(client, address), name="rr-metrics-client", daemon=True
            ).start()
        except RuntimeError:  # no thread can be started just now
            self._clients.release()
            self._drop(_where(address), "no thread to serve it")
            _close(client)

    # one client ------------------------------------------------------------------------

    def _serve(self, client: socket.socket, address: object) -> None:
        try:
            self._answer(client)
        except _Dropped as dropped:
            if dropped.reason is not None:
                self._drop(_where(address), dropped.reason)
        except Exception:  # a bug of rr's own, not the client's: one error line
            log.error("metrics: answering a client failed", exc_info=True)
        finally:
            _close(client)
            self._clients.release()

    def _answer(self, client: socket.socket) -> None:
        request = self._receive(client)
        if isinstance(request, Refusal):
            self._send(client, answer(request.status, request.reason.encode() + b"\n", TEXT))
            _linger(client)
            raise _Dropped(request.reason)
        head_only = request.method == "HEAD"
        if request.method not in ("GET", "HEAD"):
            reply = answer(405, b"rr run: GET /metrics or /healthz\n", TEXT)
        elif request.path == "/metrics":
            reply = answer(200, self._probe.page(), CONTENT_TYPE_LATEST, head_only=head_only)
        elif request.path == "/healthz":
            status, text = self._probe.health()
            reply = answer(status, text.encode(), TEXT, head_only=head_only)
        else:
            reply = answer(404, b"rr run: /metrics and /healthz\n", TEXT, head_only=head_only)
        self._send(client, reply)

    def _receive(self, client: socket.socket) -> Request | Refusal:
        """The client's request head, or a refusal; :class:`_Dropped` when the client is
        silent or slow past the deadline, closes, or resets."""
        deadline = time.monotonic() + HEAD_TIMEOUT_S
        buffer = b""
        while True:
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                raise _Dropped(_late(buffer))
            client.settimeout(left_s)
            try:
                chunk = client.recv(_RECV_BYTES)
            except TimeoutError:
                raise _Dropped(_late(buffer)) from None
            except OSError:
                raise _Dropped("reset mid-request" if buffer else None) from None
            if not chunk:
                raise _Dropped("closed mid-request" if buffer else None)
            buffer += chunk
            request = read_head(buffer)
            if request is not None:
                return request

    def _send(self, client: socket.socket, data: bytes) -> None:
        client.settimeout(SEND_TIMEOUT_S)  # for the whole answer (socket.sendall)
        try:
            client.sendall(data)
        except TimeoutError:
            raise _Dropped(f"did not take the answer within {SEND_TIMEOUT_S:g} s") from None
        except OSError:
            raise _Dropped("gone before the answer") from None

    def _drop(self, client: str, reason: str) -> None:
        with self._count_lock:
            self._dropped += 1
            count = self._dropped
        log.warning(
            "metrics client dropped",
            extra={"rr": {"reason": reason, "client": client, "dropped": count}},
        )


def _late(buffer: bytes) -> str:
    """Why a client is dropped at the deadline, by what it sent."""
    if not buffer:
        return f"sent nothing within {HEAD_TIMEOUT_S:g} s"
    return f"sent {len(buffer)} bytes but no whole request head within {HEAD_TIMEOUT_S:g} s"


def _linger(client: socket.socket) -> None:
    """After a refusal: end rr's side, and read what the client still sends (a little, for a
    little while), so that the close does not reset the connection before the client has
    read the refusal."""
    deadline = time.monotonic() + LINGER_S
    try:
        client.shutdown(socket.SHUT_WR)
        for _ in range(LINGER_BYTES // _RECV_BYTES):
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                return
            client.settimeout(left_s)
            if not client.recv(_RECV_BYTES):
                return
    except OSError:  # a timeout too
        return


def _where(address: object) -> str:
    """A client's address as ``host:port``."""
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(address)


def _close(client: socket.socket) -> None:
    with contextlib.suppress(OSError):
        client.close()


__all__ = ["MAX_CLIENTS", "MetricsServer", "Probe"]
