"""The ``backend`` fixture: each hostile-input test that needs a broker runs on RabbitMQ (a
fresh vhost) and on the emulator. ``vhost_url``: the URL of a fresh, empty vhost on the server
under test, given back after. ``api``: a fake management API (tests/hostile/fake_management.py)
that answers what the test tells it; ``elsewhere``: a second one, where a redirect points, which
must never be asked anything.

And one rule for every test here: no hostile input ends in exit 70 ("internal error", a bug
in rr). Every ``rr`` run a test makes — in process (``CliRunner.invoke``) or as a process
(``subprocess.run``) — is watched; one that exits 70 fails the test, unless the test asks for
``internal_errors_allowed`` (it provokes one on purpose).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tests.backends import vhost_pool
from tests.backends import vhost_url as url_of
from tests.hostile.fake_management import FakeManagement
from tests.runtime.conftest import backend
from tests.shared_node import current

INTERNAL_ERROR = 70

__all__ = ["backend"]


def _is_rr(command: object) -> bool:
    words = [str(word) for word in command] if isinstance(command, list | tuple) else [str(command)]
    return any("rabbitctl_retry" in word or word.endswith("/rr") or word == "rr" for word in words)


@pytest.fixture
def internal_errors_allowed() -> None:
    """A test that provokes exit 70 on purpose (it checks how rr reports its own bugs)."""


@pytest.fixture(autouse=True)
def _no_internal_error(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    ended: list[tuple[str, int]] = []
    invoke, run = CliRunner.invoke, subprocess.run

    def watched_invoke(self: CliRunner, cli: Any, args: Any = None, **options: Any) -> Result:
        result = invoke(self, cli, args, **options)
        ended.append((f"rr {args!r}", result.exit_code))
        return result

    def watched_run(*args: Any, **options: Any) -> Any:
        done = run(*args, **options)
        command = args[0] if args else options.get("args")
        if _is_rr(command):
            ended.append((repr(command), done.returncode))
        return done

    monkeypatch.setattr(CliRunner, "invoke", watched_invoke)
    monkeypatch.setattr(subprocess, "run", watched_run)
    yield
    if "internal_errors_allowed" not in request.fixturenames:
        crashed = [command for command, code in ended if code == INTERNAL_ERROR]
        assert crashed == [], f"rr exited 70 (a bug in rr) for: {crashed[:5]}"


@pytest.fixture
def api() -> Iterator[FakeManagement]:
    with FakeManagement() as fake:
        yield fake


@pytest.fixture
def elsewhere() -> Iterator[FakeManagement]:
    with FakeManagement() as fake:
        yield fake


@pytest.fixture
def vhost_url(amqp_url: str) -> Iterator[str]:
    with vhost_pool(current()).lent() as vhost:
        yield url_of(amqp_url, vhost)
