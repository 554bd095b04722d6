"""``rr doctor`` and the deprecated-features table of each real server, and RabbitMQ 4.3's
counting as its findings state it (docs/reference/cli.md, "rr doctor").

Management APIs here (measured): 4.0.5 has one on 127.0.0.1:15674 and 4.3.6 on
127.0.0.1:15675 (scripts/rabbitmq-chroot.sh enables the plugin in both chroots), each answering
``GET /api/deprecated-features`` with the table ``rabbitmqctl list_deprecated_features`` lists;
the shared 3.10.8 has no management plugin enabled (nothing listens on 15672), so on that line
doctor is checked without one. The 3.10.8 API without the table is
tests/cluster/test_doctor_deprecated.py's (the cluster nodes have the plugin).
``RR_TEST_MANAGEMENT_URL_4_0`` and ``RR_TEST_MANAGEMENT_URL_4_3`` override the URLs, as
``RR_TEST_URL_4_0`` and ``RR_TEST_URL_4_3`` do the brokers'.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.releases import release_of
from rabbitctl_retry.server import ServerVersion
from rabbitctl_retry.transport.base import Channel, Delivery, Properties
from tests.backends import RabbitBackend
from tests.shared_node import current

MANAGEMENT_URLS = {
    "4.0": os.environ.get("RR_TEST_MANAGEMENT_URL_4_0", "http://guest:guest@127.0.0.1:15674/"),
    "4.3": os.environ.get("RR_TEST_MANAGEMENT_URL_4_3", "http://guest:guest@127.0.0.1:15675/"),
}
"""The management API of each shared server that has one (see the module doc)."""

runner = CliRunner()


def states_given(line: str) -> bool:
    """Whether the management API of the release ``line`` states each deprecated feature's
    state (4.3.6's), not only its name and phase (4.0.5's): rabbitctl_retry/releases.py."""
    row = release_of(ServerVersion.parse(line).release)
    return row.deprecated_features_table == "states"


SERVER_LIMIT_ONLY = """
[queues.orders]
type = "quorum"
delivery_limit = 2
dead_letter = "orders.dead"

[queues."orders.dead"]
type = "quorum"
"""
"""tests/unit/test_doctor_deprecated.py's topology: a server limit of 2 without rr's
max_attempts, dead-lettering into a quorum queue with the default limit (20)."""


def doctor(amqp_url: str, *args: str) -> tuple[int, dict[str, Any]]:
    """``rr doctor --url amqp_url -o json ARGS`` (the CLI runs its own event loop: an async
    test calls this in a thread)."""
    result = runner.invoke(app, ["doctor", "--url", amqp_url, "-o", "json", *args])
    assert result.exit_code in (0, 1), result.output
    assert "Traceback" not in result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return result.exit_code, parsed


def findings(document: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [f for f in document["findings"] if f["code"] == code]


def listed_by_rabbitmqctl() -> list[dict[str, Any]]:
    """``rabbitmqctl list_deprecated_features`` of the current node, as doctor's JSON shows a
    table."""
    done = current().run_ctl("list_deprecated_features", "--formatter", "json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    return sorted(
        (
            {"name": row["name"], "state": row["state"], "phase": row["deprecation_phase"]}
            for row in rows
        ),
        key=lambda row: row["name"],
    )


@pytest.fixture
async def backend(amqp_url: str) -> AsyncIterator[RabbitBackend]:
    rabbit = RabbitBackend(amqp_url)
    rabbit.setup()
    try:
        yield rabbit
    finally:
        await rabbit.close()


def test_doctor_reads_the_table_the_server_lists(amqp_url: str) -> None:
    broker = current()
    management_url = MANAGEMENT_URLS.get(broker.version)
    if management_url is None:
        code, document = doctor(amqp_url)
        assert code == 0
        assert document["server"]["deprecated_features"] == {
            "checked": False,
            "not_checked": "not-given",
            "detail": None,
        }
        [unchecked] = findings(document, "deprecated-features-not-checked")
        assert unchecked["level"] == "info"
        assert "give --management-url" in unchecked["message"]
        return

    code, document = doctor(amqp_url, "--management-url", management_url)

    assert code == 0
    table = document["server"]["deprecated_features"]
    if not states_given(broker.version):
        # 4.0.5's API lists the features without their state (tests/contract/versions.py)
        assert (table["checked"], table["not_checked"]) == (False, "unstated")
        [unchecked] = findings(document, "deprecated-features-not-checked")
        assert unchecked["level"] == "info"
        assert "lists them without their state" in unchecked["message"]
        assert findings(document, "management-api-mismatch") == []
        return
    assert table["checked"] is True
    assert table["features"] == listed_by_rabbitmqctl()
    assert findings(document, "deprecated-features-not-checked") == []
    if broker.version == "4.3":  # RabbitMQ 4.3.6's defaults (measured)
        states = {row["name"]: row["state"] for row in table["features"]}
        assert states["transient_nonexcl_queues"] == "permitted"
        assert states["queue_master_locator"] == "denied"
        assert states["classic_queue_mirroring"] == "denied"
        [summary] = findings(document, "deprecated-features")
        assert summary["message"].startswith(
            f"RabbitMQ {broker.release} (read from its management API) denies "
        )


async def test_a_transient_queue_is_what_the_table_says(
    backend: RabbitBackend, tmp_path: Path
) -> None:
    """Where the table says transient_nonexcl_queues is permitted, the server does accept a
    transient non-exclusive queue (declared by hand here; rr declare's own is
    tests/broker/test_transient_queues.py)."""
    broker = current()
    management_url = MANAGEMENT_URLS.get(broker.version)
    topology = tmp_path / "topology.toml"
    topology.write_text('[queues."scratch"]\ndurable = false\n')
    given = ("--management-url", management_url) if management_url else ()

    code, document = await asyncio.to_thread(
        doctor, backend.url, "--topology", str(topology), *given
    )

    assert code == 0
    transient = [
        f
        for f in document["findings"]
        if f["queue"] == "scratch" and f["code"].startswith("transient")
    ]
    if management_url is None or not states_given(broker.version):
        # assumed from the version: a deprecated feature from 4.0
        assert [(f["code"], f["level"]) for f in transient] == (
            [("transient-queue", "info")] if broker.major >= 4 else []
        )
        assert all("assumed from the version" in f["message"] for f in transient)
        return
    [finding] = transient
    assert (finding["code"], finding["level"]) == ("transient-queue", "info")
    assert f"RabbitMQ {broker.release} permits transient_nonexcl_queues" in finding["message"]
    channel = await backend.channel()
    declared = await channel.queue_declare("scratch", durable=False)
    assert declared.message_count == 0
    await channel.queue_delete("scratch")


async def _get(backend: RabbitBackend, channel: Channel, queue: str) -> Delivery:
    got: list[Delivery] = []

    async def arrived() -> bool:
        delivery = await channel.get(queue)
        if delivery is not None:
            got.append(delivery)
        return bool(got)

    await backend.until(arrived, f"a message in {queue}")
    return got[0]


def _counts(delivery: Delivery) -> tuple[Any, Any]:
    headers = delivery.properties.headers or {}
    return headers.get("x-delivery-count"), headers.get("x-acquired-count")


async def test_the_4_3_counting_findings_hold_on_the_server(
    backend: RabbitBackend, tmp_path: Path
) -> None:
    """What doctor says of orders and orders.dead on 4.3, and what 4.3.6 does: orders' limit
    of 2 dead-letters a message at its 3rd basic.reject, with x-delivery-count 3; in
    orders.dead (declared without a limit by an earlier rr) two basic.nack do not count; it
    drops the message at its 18th basic.reject."""
    broker = current()
    topology = tmp_path / "topology.toml"
    topology.write_text(SERVER_LIMIT_ONLY)
    # orders.dead as an earlier rr declared it: without x-delivery-limit, so with the
    # server's 20 (rr declares it with -1 now, and keeps this one as it is)
    await (await backend.channel()).queue_declare(
        "orders.dead", durable=True, arguments={"x-queue-type": "quorum"}
    )

    code, document = await asyncio.to_thread(doctor, backend.url, "--topology", str(topology))

    counting = {"quorum-nack-not-counted", "dead-letter-carried-count"}
    found = {(f["code"], f["queue"], f["level"]) for f in document["findings"]}
    if (broker.major, broker.minor) < (4, 3):
        assert {item[0] for item in found}.isdisjoint(counting)
        return
    assert code == 1  # orders.dead drops (quorum-default-limit-drops), as on 4.0
    assert found >= {
        ("quorum-nack-not-counted", "orders", "warning"),
        ("dead-letter-carried-count", "orders.dead", "info"),
    }
    [carried] = findings(document, "dead-letter-carried-count")
    assert (
        "drops such a message at its 18th counted return rather than its 21st"
        in (carried["message"])
    )

    declared = await asyncio.to_thread(
        runner.invoke, app, ["declare", str(topology), "--url", backend.url]
    )
    assert declared.exit_code == 0, declared.output
    channel = await backend.channel(confirms=True)
    await channel.publish(
        b"m", routing_key="orders", properties=Properties(delivery_mode=2), mandatory=True
    )
    seen_in_orders = []
    rejects_in_orders = 0
    while True:
        delivery = await channel.get("orders")
        if delivery is None:
            break
        seen_in_orders.append(_counts(delivery))
        await channel.reject(delivery.delivery_tag, requeue=True)
        rejects_in_orders += 1
    assert rejects_in_orders == 3
    assert seen_in_orders == [(None, None), (1, 1), (2, 2)]

    first = await _get(backend, channel, "orders.dead")
    assert _counts(first) == (3, 3)  # the count it carries
    delivery = first
    for _ in range(2):  # basic.nack is not counted
        await channel.nack(delivery.delivery_tag, requeue=True)
        delivery = await _get(backend, channel, "orders.dead")
        assert _counts(delivery)[0] == 3
    rejects_in_dead = 0
    while True:
        await channel.reject(delivery.delivery_tag, requeue=True)
        rejects_in_dead += 1
        next_delivery = await channel.get("orders.dead")
        if next_delivery is None:
            break
        delivery = next_delivery
        assert _counts(delivery)[0] == 3 + rejects_in_dead
    assert rejects_in_dead == 18
    assert (await channel.queue_declare("orders.dead", passive=True)).message_count == 0
