"""docs/getting-started.md, run as a reader would: every command of the page, in its order,
in a fresh venv outside the checkout with rr installed from its wheel, against a fresh vhost
of the real RabbitMQ (docs/reference/testing.md, "The package").

The files the page writes (``# topology.toml`` on a block's first line) are written as shown;
each ``$`` command runs in a shell, and what the page shows below it must be in its output
(tests/docs/examples.py, ``missing_lines``). Three commands are the reader's own hands:
``pip install 'rabbitctl-retry[testing]'`` installs the wheel (with its ``testing`` extra),
``rr run`` runs in the background (the page's second terminal) until the end, and the venv's
creation and activation are this test's own.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.docs.examples import Block, Command, commands, fenced_blocks, missing_lines
from tests.docs.test_examples import fresh_vhost
from tests.packaging.conftest import CHECKOUT, fresh_venv
from tests.shared_node import chosen_versions

pytestmark = pytest.mark.xdist_group("packaging")
"""One worker builds the wheel once (tests/packaging/conftest.py)."""

PAGE = "docs/getting-started.md"
WAIT_S = 60.0
"""How long a step may take to show its progress before the test fails (a busy machine)."""


def page_blocks() -> list[Block]:
    return [
        block for block in fenced_blocks((CHECKOUT / PAGE).read_text(), PAGE) if block.is_example
    ]


def written_file(block: Block) -> str | None:
    """The file a block is, by its first line (``# topology.toml``, ``# pytest.ini``)."""
    found = re.fullmatch(r"#\s*([\w.-]+\.(?:py|toml|ini))", block.text.split("\n", 1)[0])
    return found[1] if found else None


def wait_for_line(log: Path, text: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + WAIT_S
    while text not in log.read_text():
        assert process.poll() is None, f"rr run ended:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"no '{text}' in rr run's log:\n{log.read_text()}"
        time.sleep(0.05)


class Reader:
    """The reader's terminal: a folder, the venv's commands first on PATH, ``RR_URL``."""

    def __init__(self, home: Path, venv: Path, wheel: Path, url: str) -> None:
        self.home = home
        self.venv = venv
        self.wheel = wheel
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("RR_", "PYTHON", "PYTEST", "VIRTUAL_ENV"))
        }
        self.env.update(
            PATH=f"{venv / 'bin'}:{os.environ['PATH']}",
            RR_URL=url,
            HOME=str(home),
            COLUMNS="100",
            VIRTUAL_ENV=str(venv),
        )
        self.service: subprocess.Popen[bytes] | None = None
        self.service_log = home.parent / "rr-run.log"

    def shell(self, text: str) -> str:
        done = subprocess.run(
            ["bash", "-c", text],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"$ {text}\nexit {done.returncode}:\n{output}"
        return output

    def run(self, command: Command) -> None:
        words = command.argv
        if words[:3] == ["python3", "-m", "venv"] or words[:1] == ["."]:
            return  # the venv is this test's own, and its bin/ is first on PATH
        if words[:2] == ["pip", "install"]:
            wanted = [w.replace("rabbitctl-retry", str(self.wheel)) for w in words[2:]]
            self.shell(" ".join(["pip", "install", "-q", *(f"'{w}'" for w in wanted)]))
            return
        if words[:2] == ["rr", "run"]:
            self.start_service(command.text)
            return
        output = self.shell(command.text)
        missing = missing_lines(command.output, output)
        assert not missing, f"$ {command.text}\nthe page shows\n{missing}\nrr printed:\n{output}"
        self.wait_for_its_effect(words)

    def start_service(self, text: str) -> None:
        with self.service_log.open("w") as sink:
            self.service = subprocess.Popen(
                ["bash", "-c", f"exec {text}"],
                cwd=self.home,
                env=self.env,
                stdout=sink,
                stderr=sink,
            )
        wait_for_line(self.service_log, " consuming ", self.service)

    def wait_for_its_effect(self, words: list[str]) -> None:
        """What the page says happens in the second terminal, waited for before the next
        step reads it."""
        if self.service is None:
            return
        if words[:2] == ["rr", "publish"]:
            wait_for_line(self.service_log, "dead-lettered", self.service)
        if words[:3] == ["rr", "dlq", "replay"]:
            wait_for_line(self.service_log, "shipped order 1 on attempt 1", self.service)

    @contextmanager
    def session(self) -> Iterator[None]:
        try:
            yield
        finally:
            if self.service is not None:
                self.service.send_signal(signal.SIGINT)
                try:
                    self.service.wait(timeout=WAIT_S)
                except subprocess.TimeoutExpired:
                    self.service.kill()
                    self.service.wait()


@pytest.mark.broker
def test_every_command_of_the_getting_started_page_works_from_the_wheel(
    wheel: Path, tmp_path: Path
) -> None:
    venv = fresh_venv(tmp_path)  # pip, with nothing installed: the page's first step does it
    home = tmp_path / "orders"
    home.mkdir()
    ran: list[str] = []
    with fresh_vhost(chosen_versions()[0]) as url:  # one server: the page is not about which
        reader = Reader(home, venv, wheel, url)
        with reader.session():
            for block in page_blocks():
                name = written_file(block)
                if name is not None:
                    (home / name).write_text(block.text)
                    ran.append(name)
                    continue
                for command in commands(block):
                    reader.run(command)
                    ran.append(command.text)
        log = reader.service_log.read_text()
    # the page's story, as the service lived it: three attempts, the letter, the replay
    assert log.count("outcome=retried") == 2, log
    assert log.count("outcome=dead-lettered") == 1, log
    assert log.count("shipped order 1 on attempt 1") == 1, log
    assert "pytest -q test_orders.py" in ran
    assert {"topology.toml", "orders_service.py", "test_orders.py", "pytest.ini"} <= set(ran)
