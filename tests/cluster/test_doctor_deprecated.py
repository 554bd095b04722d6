"""``rr doctor`` given the management API of a RabbitMQ without the deprecated-features table:
the local cluster's 3.10.8 nodes, whose management plugin answers ``GET
/api/deprecated-features`` with 406 to rr (it asks for JSON; 404 to a client that accepts
anything; measured). Doctor says the checks were not made, as info, and exits 0
(docs/reference/cli.md, "rr doctor")."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.transport.management_http import HttpManagementApi
from tests.cluster.conftest import LocalCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

runner = CliRunner()


async def test_the_api_has_no_table(cluster: LocalCluster) -> None:
    api = HttpManagementApi(cluster.management_url(1), vhost="/")

    assert await api.deprecated_features() is None


def test_doctor_says_what_it_could_not_check(cluster: LocalCluster) -> None:
    result = runner.invoke(
        app,
        [
            "doctor",
            "--url",
            cluster.url(1),
            "--management-url",
            cluster.management_url(1),
            "-o",
            "json",
        ],
    )

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["server"]["version"] == "3.10.8"
    assert document["server"]["deprecated_features"] == {
        "checked": False,
        "not_checked": "missing",
        "detail": None,
    }
    [unchecked] = [
        f for f in document["findings"] if f["code"] == "deprecated-features-not-checked"
    ]
    assert unchecked == {
        "code": "deprecated-features-not-checked",
        "level": "info",
        "queue": None,
        "message": "not checked: which deprecated features this server permits or denies: "
        "its management API has no such table (GET /api/deprecated-features answered 404 or "
        "406, as RabbitMQ 3.10.8's does); findings on deprecated features are assumed from "
        "the version",
    }
