"""Transient (non-durable) queues with ``rr declare`` on every server (docs/reference/topology.md,
"durable"; docs/how-to/run-on-a-cluster.md).

RabbitMQ 4 made transient non-exclusive queues a deprecated feature
(``transient_nonexcl_queues``), permitted by default: 4.0.5 and 4.3.6 take them (measured,
as 3.10.8 does). rr declares them and warns once from RabbitMQ 4; it refuses them, before
any change, only where the server's deprecated-features table (its management API) denies
the feature. A server configured to deny it closes the whole connection on the declare
(541 INTERNAL_ERROR, measured on private 4.0.5 and 4.3.6 nodes): the shared servers keep
their defaults, so the denying table here is the fake management API's
(tests/hostile/fake_management.py), and 4.3.6's own API shows the permitting one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from tests.backends import vhost_pool, vhost_url
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS, states_given
from tests.hostile.fake_management import SECRET, Answer, FakeManagement
from tests.shared_node import current
from tests.target_line import after_target

runner = CliRunner(env={"COLUMNS": "200"})

TWO_TRANSIENT = (
    '[queues."rr-scratch"]\ndurable = false\n\n'
    '[queues."rr-kept"]\n\n'
    '[queues."rr-scratch-2"]\ndurable = false\n'
)
WARNING = (
    "rr: warning: 'rr-scratch', 'rr-scratch-2' are transient (durable = false): transient "
    "non-exclusive queues are a deprecated feature on RabbitMQ 4 (transient_nonexcl_queues), "
)
ASSUMED = (
    WARNING + "permitted by default on 4.0.5 and 4.3.6, but a server configured to deny it "
    "closes the connection on their declare (541; rr checks the server's setting when "
    "given its management URL, rr docs run-on-a-cluster); make them durable"
)
"""The warning where rr assumes the feature's state from the version."""
DENIED = (
    "the server denies the deprecated feature transient_nonexcl_queues (read from its "
    "management API): RabbitMQ closes the connection on the declare of a transient "
    "(non-durable) non-exclusive queue (541 INTERNAL_ERROR); make it durable"
)


@pytest.fixture
def vhost(amqp_url: str) -> Iterator[str]:
    """A fresh, empty vhost of the test's own, deleted afterwards."""
    with vhost_pool(current()).lent() as name:
        yield name


@pytest.fixture
def api(amqp_url: str) -> Iterator[FakeManagement]:
    """A fake management API that answers for the server under test (rr declare checks its
    /api/overview)."""
    with FakeManagement() as fake:
        fake.speak_for(current().release)
        yield fake


def declare(tmp_path: Path, url: str, *args: str) -> Result:
    topology = tmp_path / "topology.toml"
    topology.write_text(TWO_TRANSIENT)
    return runner.invoke(app, ["declare", str(topology), "--url", url, "-o", "json", *args])


def durability(vhost: str) -> dict[str, bool]:
    """Queue name -> durable, as the server lists them."""
    done = current().run_ctl(
        "-q", "list_queues", "-p", vhost, "name", "durable", "--formatter", "json"
    )
    assert done.returncode == 0, done.stderr
    return {row["name"]: row["durable"] for row in json.loads(done.stdout or "[]")}


def statuses(result: Result) -> dict[str, Any]:
    document = json.loads(result.stdout)
    return {op["name"]: (op["status"], op["detail"]) for op in document["operations"]}


def test_rr_declare_takes_transient_queues_and_warns_once_from_4(
    amqp_url: str, vhost: str, tmp_path: Path
) -> None:
    broker = current()

    result = declare(tmp_path, vhost_url(amqp_url, vhost))

    assert result.exit_code == 0, result.output
    assert statuses(result) == {
        "rr-scratch": ("created", None),
        "rr-kept": ("created", None),
        "rr-scratch-2": ("created", None),
    }
    assert durability(vhost) == {"rr-scratch": False, "rr-kept": True, "rr-scratch-2": False}
    if broker.major < 4:
        assert after_target(result.stderr) == ""
        return
    [line] = after_target(result.stderr).splitlines()
    assert line == ASSUMED


def test_with_the_servers_own_table_that_permits_them(
    amqp_url: str, vhost: str, tmp_path: Path
) -> None:
    """4.3.6's management API (its defaults permit transient_nonexcl_queues): declared, and
    the warning says the server permits them. 4.0.5's lists the feature without its state: the
    warning assumes it from the version. The shared 3.10.8 has no management API
    (tests/broker/test_doctor_deprecated_on_servers.py)."""
    broker = current()
    management_url = MANAGEMENT_URLS.get(broker.version)
    if management_url is None:
        pytest.skip(f"the shared RabbitMQ {broker.version} has no management API")

    result = declare(tmp_path, vhost_url(amqp_url, vhost), "--management-url", management_url)

    assert result.exit_code == 0, result.output
    assert {status for status, _ in statuses(result).values()} == {"created"}
    [line] = after_target(result.stderr).splitlines()
    if states_given(broker.version):
        assert line == (
            WARNING + "this server permits it (read from its management API); make them durable"
        )
    else:
        assert line == ASSUMED
    assert durability(vhost) == {"rr-scratch": False, "rr-kept": True, "rr-scratch-2": False}


def test_a_table_that_denies_them_is_a_conflict_before_any_change(
    amqp_url: str, vhost: str, tmp_path: Path, api: FakeManagement
) -> None:
    api.answer(
        "/api/deprecated-features",
        Answer.json(
            [
                {
                    "name": "transient_nonexcl_queues",
                    "state": "denied",
                    "deprecation_phase": "permitted_by_default",
                }
            ]
        ),
    )

    result = declare(tmp_path, vhost_url(amqp_url, vhost), "--management-url", api.url())

    assert result.exit_code == 1, result.output
    assert statuses(result) == {
        "rr-scratch": ("conflict", DENIED),
        "rr-kept": ("planned", None),
        "rr-scratch-2": ("conflict", DENIED),
    }
    assert after_target(result.stderr).splitlines() == [
        "rr: error: the broker conflicts with the file (rr-scratch, rr-scratch-2); nothing "
        "was changed"
    ]
    assert SECRET not in result.output
    assert durability(vhost) == {}
    assert [seen.path for seen in api.seen()] == [
        "/api/overview",
        "/api/nodes",
        f"/api/vhosts/{vhost}",  # the vhost's default queue type
        "/api/deprecated-features",
    ]


def test_a_table_without_states_is_not_known(
    amqp_url: str, vhost: str, tmp_path: Path, api: FakeManagement
) -> None:
    """RabbitMQ 4.0.5's API lists the features without their state (measured): rr cannot
    tell, so it declares them, with the warning of a server whose table it did not read."""
    broker = current()
    api.answer(
        "/api/deprecated-features",
        Answer.json(
            [{"name": "transient_nonexcl_queues", "deprecation_phase": "permitted_by_default"}]
        ),
    )

    result = declare(tmp_path, vhost_url(amqp_url, vhost), "--management-url", api.url())

    assert result.exit_code == 0, result.output
    assert {status for status, _ in statuses(result).values()} == {"created"}
    if broker.major < 4:
        assert after_target(result.stderr) == ""
    else:
        [line] = after_target(result.stderr).splitlines()
        assert line.startswith(WARNING + "permitted by default on 4.0.5 and 4.3.6")
    assert durability(vhost) == {"rr-scratch": False, "rr-kept": True, "rr-scratch-2": False}
