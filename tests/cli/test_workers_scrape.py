"""The supervisor of ``rr run --workers N`` scrapes its workers' pages: one that does not
answer in time counts with its last page, so the sums never go down (a Prometheus counter
that goes down reads as a reset). Real HTTP servers stand for the workers' metrics ports."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rabbitctl_retry.runtime import supervisor as workers
from rabbitctl_retry.runtime.supervisor import Supervisor, write_port
from tests.metrics_page import sample
from tests.runtime.test_workers_decisions import _page


class _Worker:
    """A worker's metrics port: serves ``page``; while ``answering`` is clear, it does not
    answer until the scrape gave up (a loop too busy to serve)."""

    def __init__(self, page: str) -> None:
        self.page = page
        self.answering = threading.Event()
        self.answering.set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not outer.answering.wait(timeout=30):
                    return
                body = outer.page.encode()
                # a scrape that gave up closed its end: nobody reads the late answer
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.answering.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def two_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[_Worker]]:
    # short, since each scrape of a worker that does not answer waits it out; not so short that
    # a worker that answers misses it on a busy machine (its page would be the last one)
    monkeypatch.setattr(workers, "SCRAPE_TIMEOUT_S", 3.0)
    started = [_Worker(_page(3, 2, consuming=True)), _Worker(_page(4, 5, consuming=True))]
    for index, worker in enumerate(started, 1):
        write_port(tmp_path, index, worker.port)
    yield started
    for worker in started:
        worker.close()


def supervisor(folder: Path) -> Supervisor:
    return Supervisor(
        [], count=2, declare=False, metrics=True, shutdown_timeout_s=1.0, folder=folder
    )


def test_a_worker_that_does_not_answer_counts_with_its_last_page(
    tmp_path: Path, two_workers: list[_Worker]
) -> None:
    scraper = supervisor(tmp_path)
    first = scraper.page().decode()
    assert sample(first, "rr_decisions_total", queue="work", outcome="acked") == 7
    assert sample(first, "rr_consuming") == 1

    two_workers[0].page = _page(10, 0, consuming=True)
    two_workers[1].answering.clear()  # busy: the scrape gives up on it
    busy = scraper.page().decode()
    assert sample(busy, "rr_decisions_total", queue="work", outcome="acked") == 14  # 10 + 4
    assert sample(busy, "rr_consuming") == 0  # worker 2 not known to consume

    two_workers[1].page = _page(6, 0, consuming=True)
    two_workers[1].answering.set()
    back = scraper.page().decode()
    assert sample(back, "rr_decisions_total", queue="work", outcome="acked") == 16
    assert sample(back, "rr_consuming") == 1


def test_a_worker_never_heard_from_adds_nothing(tmp_path: Path, two_workers: list[_Worker]) -> None:
    two_workers[1].answering.clear()
    page = supervisor(tmp_path).page().decode()
    assert sample(page, "rr_decisions_total", queue="work", outcome="acked") == 3
    assert sample(page, "rr_consuming") == 0
