"""The management API's URL and the vhost it is asked about (docs/how-to/run-on-a-cluster.md,
"Replicas")."""

from __future__ import annotations

import pytest

from rabbitctl_retry.errors import BrokerUnreachable, UsageError
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.management import check_management_url, vhost_of
from rabbitctl_retry.transport.management_http import HttpManagementApi


@pytest.mark.parametrize(
    ("amqp_url", "vhost"),
    [
        ("amqp://guest:guest@localhost:5672/", "/"),
        ("amqp://guest:guest@localhost:5672", "/"),
        ("amqp://svc:pw@mq1:5672/shop", "shop"),
        ("amqp://svc:pw@mq1:5672/%2F", "/"),
        ("amqp://svc:pw@mq1:5672/team%2Fa?heartbeat=10", "team/a"),
    ],
)
def test_the_vhost_comes_from_the_amqp_url(amqp_url: str, vhost: str) -> None:
    assert vhost_of(amqp_url) == vhost


@pytest.mark.parametrize(
    "url", ["amqp://localhost:15672/", "localhost:15672", "http:///api", "http://a b:15672/"]
)
def test_a_management_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(UsageError, match="management URL"):
        check_management_url(url)


def test_the_topology_file_may_name_it() -> None:
    topology = load_text('[broker]\nmanagement_url = "http://guest:guest@mq1:15672/"\n')
    assert topology.broker.management_url == "http://guest:guest@mq1:15672/"


async def test_nobody_listening_is_unreachable_and_the_password_never_shows() -> None:
    api = HttpManagementApi("http://svc:s3cret@127.0.0.1:1/", vhost="/", timeout_s=2)
    with pytest.raises(BrokerUnreachable) as caught:
        await api.nodes()
    assert "cannot reach the management API at http://svc:******@127.0.0.1:1/" in str(caught.value)
    assert "s3cret" not in str(caught.value)
