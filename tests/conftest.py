"""Shared fixtures and the suite's marks (docs/reference/testing.md, "Running rr's own suite").

Broker tests take ``amqp_url`` (or a ``backend`` on RabbitMQ): skipped without a broker,
failed in CI. Every test that needs RabbitMQ carries the ``broker`` mark, so that
``pytest -m "not broker"`` runs without one:

* a test that takes ``amqp_url`` gets it from the fixture's parameters, a RabbitMQ ``backend``
  from its own (tests/runtime/conftest.py, tests/contract/conftest.py), while the emulator's
  cases of the same test stay unmarked;
* every ``faults`` and ``cluster`` test gets it here, with its ``xdist_group``: under
  pytest-xdist (``-n N``, with ``--dist loadgroup`` from pyproject.toml) all cluster tests run
  on one worker, one after the other (they stop and start the nodes of one shared cluster),
  and the fault tests on two (``FAULT_GROUPS``: a private node each, not one per worker);
* a test not marked ``broker`` that asks for a shared server fails
  (:func:`tests.shared_node.require_broker`).
"""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest
from hypothesis import settings

from tests.backends import close_vhost_pools
from tests.faults import FAULT_ROWS
from tests.shared_node import chosen_versions, current, require_broker, running

# No per-example deadline for the property tests: Hypothesis's 200 ms fails a pure test on a
# busy machine (seen in a run beside the CI suite); the suite waits for progress, never for
# time (docs/reference/testing.md, "On a busy machine").
settings.register_profile("rr", deadline=None)
settings.load_profile("rr")

# rr's configuration file of whoever runs the suite (a `default` broker in
# ~/.config/rr/config.toml) must not change where the tests' commands connect: they read an
# empty one (docs/reference/cli.md, "Profiles"; tests/broker/test_profiles_on_servers.py sets its
# own).
_EMPTY_CONFIG = Path(tempfile.mkdtemp(prefix="rr-test-config-")) / "config.toml"
_EMPTY_CONFIG.write_text("", encoding="utf-8")
os.environ["RR_CONFIG"] = str(_EMPTY_CONFIG)

FAULT_GROUPS = 2
"""The fault tests are dealt in collection order into this many xdist groups (``faults-1``,
``faults-2``): each runs on one worker, which starts a private node of its own. Serially they
take about 12 minutes (mostly waiting: restarts, heartbeats, alarms)."""

_fault_rows: list[str] = []
"""The rows of the fault runs (tests/faults), from the test reports."""


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (``timeout 600 pytest``, CI cancelling a job) stops the run as Ctrl-C does:
    the fixtures' finalizers still run, and delete the vhosts the session made."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
    config.pluginmanager.register(_GroupIds(), "rr-xdist-group-ids")


class _GroupIds:
    """``--dist loadgroup`` tells pytest-xdist's controller an item's group by appending
    ``@GROUP`` to the id the worker reports. pytest-xdist 3.8 writes that id into
    ``Item._nodeid``, which pytest 9.2 no longer reads (its ids are structured): the groups
    were silently ignored (pytest-dev/pytest-xdist#1386). This gives the item the id xdist
    meant, after xdist's own hook; with versions where xdist's works it finds it done."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if not config.getoption("loadgroup", default=False):
            return
        for item in items:
            names = {
                str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                for mark in item.iter_markers("xdist_group")
            }
            suffix = "@" + "_".join(sorted(names))
            if names and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
                from _pytest.nodeid import NodeId

                item._id = NodeId.parse(item.nodeid + suffix)


NODE_TEST_TIMEOUT_S = 600
"""The least bound of a fault or cluster test (the others': pyproject.toml's 120 s, or their
own). Their time includes starting a private node (up to 240 s, tests/faults/node.py) and
every rabbitmqctl call, which boots an Erlang VM: about a second on a calm machine, 20 to 60 s
each beside a CPU hog (docs/reference/testing.md, "On a busy machine"). A bound for a test that
hangs, not an expectation."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``faults`` and ``cluster`` tests ``broker`` and group them (before ``-m`` selects
    and xdist reads the groups)."""
    faults = 0
    for item in items:
        if item.get_closest_marker("cluster") is not None:
            item.add_marker(pytest.mark.broker)
            item.add_marker(pytest.mark.xdist_group("cluster"))
        elif item.get_closest_marker("faults") is not None:
            item.add_marker(pytest.mark.broker)
            item.add_marker(pytest.mark.xdist_group(f"faults-{faults % FAULT_GROUPS + 1}"))
            faults += 1
        else:
            continue
        own = item.get_closest_marker("timeout")
        if own is None or (own.args and float(own.args[0]) < NODE_TEST_TIMEOUT_S):
            item.add_marker(pytest.mark.timeout(NODE_TEST_TIMEOUT_S), append=False)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """On pytest-xdist's controller: refuse to spread the cluster tests over several workers
    (any --dist but loadgroup would; the fault tests would only start more private nodes)."""
    config: pytest.Config = node.config  # type: ignore[attr-defined]
    workers = len(config.getoption("tx") or [])
    cluster = [nodeid for nodeid in ids if nodeid.startswith("tests/cluster/")]
    if workers < 2 or not cluster:
        return
    if config.getoption("dist") != "loadgroup":
        pytest.exit(
            f"--dist {config.getoption('dist')} would spread the cluster tests over "
            f"{workers} workers, but they stop and start the nodes of one cluster: use "
            "--dist loadgroup (pyproject.toml's default), or deselect them with "
            "-m 'not cluster'",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
    if not all(nodeid.endswith("@cluster") for nodeid in cluster):
        pytest.exit(
            "pytest-xdist would ignore the xdist_group of the cluster tests with this pytest "
            "(see _GroupIds in tests/conftest.py): run them with -n 0, or deselect them with "
            "-m 'not cluster'",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    running(item.nodeid, marked_broker=item.get_closest_marker("broker") is not None)


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """Give every test the logging it found: a command run in-process (``rr simulate`` sets
    the ``rr`` logger to ERROR, ``rr run`` installs its handler) must not silence or redirect
    a later test's records on the same worker."""
    rr_log = logging.getLogger("rr")
    aiormq_log = logging.getLogger("aiormq")
    saved = (rr_log.level, rr_log.handlers[:], rr_log.propagate, aiormq_log.level)
    last_resort = logging.lastResort
    yield
    rr_log.setLevel(saved[0])
    rr_log.handlers[:] = saved[1]
    rr_log.propagate = saved[2]
    aiormq_log.setLevel(saved[3])
    logging.lastResort = last_resort


@pytest.fixture(scope="session", autouse=True)
def _vhost_pools() -> Iterator[None]:
    """Delete the vhosts of the pools (tests/backends.py) at the end of the session, also
    those made ahead and never used."""
    yield
    close_vhost_pools()


@pytest.fixture(
    params=[
        pytest.param(version, id=version, marks=pytest.mark.broker) for version in chosen_versions()
    ]
)
def amqp_url(request: pytest.FixtureRequest) -> str:
    """The broker URL for broker tests: each runs on every server of ``RR_TEST_BROKERS``
    (the table's :data:`~tests.shared_node.DEFAULT_BROKERS` by default, RabbitMQ 3.10 and
    4.0; tests/shared_node.py), whose node becomes the one ``ctl_command`` addresses. The
    URL's path is the vhost the test works in (``RR_TEST_URL_3_10`` and the like;
    ``current().vhost``).

    Skips the test when no broker answers there, but fails it when ``CI=true``: CI must
    never pass by skipping the broker tests.
    """
    return require_broker(request.param).url


@pytest.fixture
def broker_version(amqp_url: str) -> str:
    """The release line of the server the test talks to: ``3.10``, ``4.0``, ``4.3`` (what
    it is, major and minor, is :func:`~tests.shared_node.current`'s)."""
    return current().version


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for key, value in report.user_properties:
        if key == FAULT_ROWS and report.when == "call":
            _fault_rows.extend(value)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Every fault run's numbers, as docs/reference/runtime.md quotes them (from the test reports,
    so that they reach this process from pytest-xdist's workers too)."""
    if not _fault_rows:
        return
    from tests.faults.harness import REPORT_HEADER

    terminalreporter.section("rr run under faults (lost, duplicated work, recovery)")
    terminalreporter.write_line(REPORT_HEADER)
    for row in _fault_rows:
        terminalreporter.write_line(row)
