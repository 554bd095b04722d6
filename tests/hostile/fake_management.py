"""A management HTTP API of the test's own: a small threaded ``http.server`` on 127.0.0.1
(a free port), answering each path as the test scripted it and recording every request it
got, headers included (docs/how-to/run-on-a-cluster.md, "Replicas").

By default it answers like a one-node RabbitMQ 4.3.6 (the emulator's release in the doctor
tests): ``/api/overview`` names the cluster ``rabbit@fake``, ``/api/nodes`` lists
``rabbit@fake``, and ``/api/queues/VHOST/NAME`` says the queue lives there. A test replaces
any answer, by exact path or by the start of a path (the longest start that matches wins)::

    with FakeManagement() as api:
        api.answer("/api/nodes", Answer.redirect("http://elsewhere/"))
        ... run rr with --management-url api.url() ...
        assert [seen.path for seen in api.requests] == ["/api/nodes"]
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

SECRET = "Zq7m4n4g3rPw"
"""The password of every management URL the tests give rr: it must never appear in any output."""

FAKE_NODE = "rabbit@fake"
FAKE_CLUSTER = "rabbit@fake"
FAKE_VERSION = "4.3.6"


def overview(version: str = FAKE_VERSION, cluster_name: str | None = FAKE_CLUSTER) -> Answer:
    """What ``/api/overview`` answers for a server of ``version`` in cluster ``cluster_name``
    (RabbitMQ 4.3.6's keys, measured)."""
    return Answer.json(
        {
            "rabbitmq_version": version,
            "cluster_name": cluster_name,
            "product_name": "RabbitMQ",
            "product_version": version,
            "node": FAKE_NODE,
        }
    )


@dataclass(frozen=True)
class Answer:
    """One scripted answer: a status, headers and a body; or ``raw`` bytes written as they
    are (a broken HTTP answer), instead of all of them."""

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)
    raw: bytes | None = None
    content_length: int | None = None
    """The ``Content-Length`` sent, when it should not be the body's length (a lie)."""

    @classmethod
    def json(cls, value: Any, status: int = 200) -> Answer:
        return cls(status=status, body=json.dumps(value).encode())

    @classmethod
    def redirect(cls, location: str, status: int = 302) -> Answer:
        return cls(status=status, headers=(("Location", location),))


@dataclass(frozen=True)
class Seen:
    """One request the fake API got."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names in lower case."""


@dataclass
class FakeManagement:
    answers: dict[str, Answer] = field(default_factory=dict)
    """Path -> answer; see :meth:`answer`."""
    prefixes: dict[str, Answer] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.answers.setdefault("/api/overview", overview())
        self.answers.setdefault("/api/nodes", Answer.json([{"name": FAKE_NODE}]))
        self.prefixes.setdefault("/api/queues/", Answer.json({"node": FAKE_NODE}))
        # what RabbitMQ 4.3.6 states of a vhost made without a default queue type (measured)
        self.prefixes.setdefault("/api/vhosts/", Answer.json({"default_queue_type": "classic"}))

    def answer(self, path: str, answer: Answer, *, prefix: bool = False) -> None:
        """Answer ``path`` (or, with ``prefix``, every path that starts with it) so."""
        with self._lock:
            (self.prefixes if prefix else self.answers)[path] = answer

    def answer_for(self, path: str) -> Answer:
        with self._lock:
            if path in self.answers:
                return self.answers[path]
            starts = [start for start in self.prefixes if path.startswith(start)]
            if starts:
                return self.prefixes[max(starts, key=len)]
        return Answer.json({"error": "Object Not Found", "reason": "Not Found"}, status=404)

    def seen(self) -> list[Seen]:
        with self._lock:
            return list(self.requests)

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return int(self._server.server_address[1])

    def speak_for(self, release: str) -> None:
        """Answer ``/api/overview`` as the API of a server of ``release`` with no cluster name:
        ``rr declare`` and ``rr doctor`` then take this API for that server's (they compare
        the versions)."""
        self.answer("/api/overview", overview(release, None))

    def url(self, user: str = "svc", password: str = SECRET, path: str = "/") -> str:
        """The management URL of this fake API, with these credentials."""
        return f"http://{user}:{password}@127.0.0.1:{self.port}{path}"

    def base(self) -> str:
        """This fake API's address without credentials: ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeManagement:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake._record(self)
                self._write(fake.answer_for(self.path))

            def do_POST(self) -> None:
                fake._record(self)
                self._write(Answer(status=405))

            do_PUT = do_DELETE = do_HEAD = do_POST

            def _write(self, answer: Answer) -> None:
                if answer.raw is not None:
                    self.wfile.write(answer.raw)
                    return
                self.send_response(answer.status)
                for name, value in answer.headers:
                    self.send_header(name, value)
                length = answer.content_length
                if length is None:
                    length = len(answer.body)
                self.send_header("Content-Length", str(length))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the tests read fake.requests instead

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="rr-fake-management", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._server is not None
        assert self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _record(self, handler: BaseHTTPRequestHandler) -> None:
        seen = Seen(
            method=handler.command,
            path=handler.path,
            headers={name.lower(): value for name, value in handler.headers.items()},
        )
        with self._lock:
            self.requests.append(seen)


@contextmanager
def listening_socket() -> Iterator[socket.socket]:
    """A TCP socket listening on 127.0.0.1 that never accepts by itself: whoever connects
    is left in its backlog, so :func:`connections_made` counts them after the fact (no
    waiting: a connection is in the backlog once the connecting side's connect returned)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        yield server
    finally:
        server.close()


def connections_made(server: socket.socket) -> int:
    """How many connections wait in ``server``'s backlog (each is accepted and closed)."""
    count = 0
    while True:
        try:
            accepted, _ = server.accept()
        except BlockingIOError:
            return count
        accepted.close()
        count += 1
