"""``rr doctor --management-url`` checks that the management API answers for the server the
AMQP URL reached (docs/reference/cli.md, "rr doctor"): the cluster name and version the server gives
when a connection opens (its server properties) against the API's ``/api/overview``.

The real 4.3.6 API is the same server (the check passes, and the table is read); a fake API
(tests/hostile/fake_management.py) that names another cluster, or runs another version, is
reported on every server, and none of its answers is used: not even a table that would make
the topology unsafe is asked for.
"""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.broker.test_doctor_deprecated_on_servers import (
    MANAGEMENT_URLS,
    doctor,
    findings,
    states_given,
)
from tests.hostile.fake_management import SECRET, Answer, FakeManagement, overview
from tests.shared_node import current

DENYING_TABLE = Answer.json(
    [{"name": "transient_nonexcl_queues", "state": "denied", "deprecation_phase": "removed"}]
)
TRANSIENT = '[queues."scratch"]\ndurable = false\n'


@pytest.fixture
def api() -> Iterator[FakeManagement]:
    with FakeManagement() as fake:
        fake.answer("/api/deprecated-features", DENYING_TABLE)
        yield fake


def cluster_name() -> str:
    """The current server's cluster name, as ``rabbitmqctl cluster_status`` says it."""
    done = current().run_ctl("-q", "cluster_status", "--formatter", "json")
    assert done.returncode == 0, done.stderr
    name: str = json.loads(done.stdout)["cluster_name"]
    return name


def api_overview(management_url: str) -> dict[str, Any]:
    """``GET /api/overview`` of a real management API, read here without rr."""
    parts = urlsplit(management_url)
    token = base64.b64encode(f"{parts.username}:{parts.password}".encode()).decode()
    request = urllib.request.Request(
        f"{parts.scheme}://{parts.hostname}:{parts.port}/api/overview",
        headers={"Authorization": f"Basic {token}", "Accept": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        parsed: dict[str, Any] = json.loads(answer.read())
    return parsed


def test_the_servers_own_api_passes(amqp_url: str) -> None:
    broker = current()
    management_url = MANAGEMENT_URLS.get(broker.version)
    if management_url is None:
        pytest.skip(f"the shared RabbitMQ {broker.version} has no management API")
    told = api_overview(management_url)

    code, document = doctor(amqp_url, "--management-url", management_url)

    assert code == 0
    assert findings(document, "management-api-mismatch") == []
    assert document["server"]["cluster_name"] == told["cluster_name"] == cluster_name()
    assert document["server"]["version"] == told["rabbitmq_version"] == broker.release
    # read, unless the API lists the features without their state (4.0.5's)
    assert document["server"]["deprecated_features"]["checked"] is states_given(broker.version)


def _mismatch(document: dict[str, Any]) -> str:
    [found] = findings(document, "management-api-mismatch")
    assert found["level"] == "warning"
    assert found["queue"] is None
    message: str = found["message"]
    return message


async def test_an_api_of_another_cluster_is_reported_and_not_used(
    amqp_url: str, api: FakeManagement, tmp_path: Path
) -> None:
    broker = current()
    api.answer("/api/overview", overview(broker.release, "rabbit@elsewhere"))
    topology = tmp_path / "topology.toml"
    topology.write_text(TRANSIENT)

    code, document = await asyncio.to_thread(
        doctor, amqp_url, "--topology", str(topology), "--management-url", api.url()
    )

    assert code == 0  # a warning; the denying table was never read, so nothing is unsafe
    shown = f"http://svc:******@127.0.0.1:{api.port}/"
    reached = document["server"]["url"]
    message = _mismatch(document)
    assert message == (
        f"the management API at {shown} does not answer for the server rr reached at "
        f"{reached} (/api/overview: its cluster is 'rabbit@elsewhere', the AMQP server's "
        f"'{cluster_name()}'): rr uses none of its answers, and the findings it would have "
        "checked are assumed from the version. Give the management URL of the server --url "
        "reaches"
    )
    assert SECRET not in json.dumps(document)
    assert document["server"]["cluster_name"] == cluster_name()
    assert document["server"]["deprecated_features"] == {
        "checked": False,
        "not_checked": "mismatch",
        "detail": message,
    }
    assert findings(document, "deprecated-features") == []
    assert findings(document, "transient-queue-denied") == []
    # the names differ: the API's nodes tell whether it is another node of the same cluster
    assert [seen.path for seen in api.seen()] == ["/api/overview", "/api/nodes"]
    if broker.major >= 4:
        [transient] = findings(document, "transient-queue")
        assert (
            "(assumed from the version; not checked: the management API answers for "
            in (transient["message"])
        )


async def test_an_api_of_another_version_is_reported_and_not_used(
    amqp_url: str, api: FakeManagement
) -> None:
    """An overview without a cluster name: only the versions can be compared."""
    broker = current()
    api.answer("/api/overview", overview("9.9.9", None))

    code, document = await asyncio.to_thread(doctor, amqp_url, "--management-url", api.url())

    assert code == 0
    assert (
        f"(/api/overview: it runs RabbitMQ 9.9.9, the AMQP server {broker.release}): rr uses "
        "none of its answers"
    ) in _mismatch(document)
    assert [seen.path for seen in api.seen()] == ["/api/overview"]


async def test_an_api_of_the_same_cluster_and_version_is_used(
    amqp_url: str, api: FakeManagement
) -> None:
    broker = current()
    api.answer("/api/overview", overview(broker.release, cluster_name()))
    api.answer("/api/vhosts/%2F", Answer.json({"name": "/", "default_queue_type": "classic"}))

    code, document = await asyncio.to_thread(doctor, amqp_url, "--management-url", api.url())

    assert code == 0
    assert findings(document, "management-api-mismatch") == []
    assert document["server"]["deprecated_features"]["checked"] is True
    policies = ["/api/policies/%2F"] if broker.major < 4 else []  # classic mirroring, 3.x
    assert [seen.path for seen in api.seen()] == [
        "/api/overview",
        "/api/deprecated-features",
        *policies,
        "/api/nodes?columns=name,running,mem_alarm,disk_free_alarm,mem_used,mem_limit,disk_free,"
        "disk_free_limit",  # the nodes' alarms (rr doctor's checks of now)
        "/api/vhosts/%2F",  # the vhost's default queue type
    ]
    [default] = findings(document, "vhost-default-queue-type")
    assert default["message"].startswith("the vhost's default queue type is classic")
    unchecked = findings(document, "classic-mirroring-not-checked")
    if broker.major < 4:  # the fake has no policies (404): a warning with the error, censored
        [found] = unchecked
        assert found["level"] == "warning"
        assert "/api/policies/%2F" in found["message"]
        assert SECRET not in json.dumps(document)
    else:
        assert unchecked == []
