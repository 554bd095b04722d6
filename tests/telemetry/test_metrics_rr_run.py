"""A real ``rr run --metrics-port`` on RabbitMQ serves the names shared with RustStream
(docs/reference/metrics.md, "Metrics") with exact numbers, and every metric dashboards/rr.json
queries."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rabbitctl_retry.retry.headers import PUBLISHED_AT_HEADER
from rabbitctl_retry.transport.base import Properties
from tests.backends import RabbitBackend
from tests.dlq.support import publish_all
from tests.metrics_page import get, served_run, until
from tests.telemetry.readings import prometheus_reading
from tests.telemetry.test_metrics_dashboard import DASHBOARD, METRIC

SERVICE = """
from rabbitctl_retry import Outcome, subscriber


@subscriber("metered")
async def handle(msg):
    if msg.body == b"boom" and msg.attempt == 1:
        raise RuntimeError("once")
    return Outcome.dead_letter() if msg.body == b"bad" else Outcome.ack()
"""

TOPOLOGY = """
[queues.metered]
max_attempts = 2
dead_letter = "metered.dead"

[queues."metered.dead"]
"""


@pytest.mark.broker
async def test_rr_run_serves_the_shared_names_and_every_name_the_dashboard_reads(
    amqp_url: str, tmp_path: Path
) -> None:
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        page = await _served_page(backend, tmp_path)
    finally:
        await backend.close()
    reading = prometheus_reading(page)
    assert reading == {
        ("messaging.client.consumed.messages", "metered", ""): 5.0,
        ("ruststream.messages.in_flight", "metered", ""): 0.0,
        ("messaging.process.duration.count", "metered", ""): 5.0,
        ("ruststream.messages.processed", "metered", "ack"): 3.0,
        ("ruststream.messages.processed", "metered", "nack_requeue"): 1.0,
        ("ruststream.messages.processed", "metered", "nack_drop"): 1.0,
        ("ruststream.message.queue_time.count", "metered", ""): 1.0,
        ("ruststream.messages.panics", "metered", ""): 1.0,
        ("messaging.client.sent.messages", "metered", ""): 1.0,
        ("messaging.client.sent.messages", "metered.dead", ""): 1.0,
        ("messaging.client.operation.duration.count", "metered", ""): 1.0,
        ("messaging.client.operation.duration.count", "metered.dead", ""): 1.0,
        ("ruststream.message.payload.size.count", "metered", ""): 1.0,
        ("ruststream.message.payload.size.count", "metered.dead", ""): 1.0,
    }
    served = {line.split("{")[0].split(" ")[0] for line in page.splitlines() if line[:1] != "#"}
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    for panel in dashboard["panels"]:
        for target in panel.get("targets", ()):
            for name in METRIC.findall(target["expr"]):
                # decode failures: none here (tests/telemetry/test_metrics_dashboard.py has one)
                if name != "ruststream_messages_decode_failures_total":
                    assert name in served, f"{panel['title']}: {name} not served"


async def _served_page(backend: RabbitBackend, tmp_path: Path) -> str:
    with served_run(backend.url, tmp_path, SERVICE, TOPOLOGY, otel=False) as (_, base):
        stamp = Properties(headers={PUBLISHED_AT_HEADER: str(int(time.time() * 1000))})
        messages = [(b"ok", stamp), (b"ok", Properties()), (b"boom", Properties())]
        await publish_all(backend, "metered", [*messages, (b"bad", Properties())])

        def settled(page: str) -> bool:
            done = prometheus_reading(page)
            return (
                sum(v for k, v in done.items() if k[0] == "ruststream.messages.processed") >= 5
                and done.get(("messaging.client.sent.messages", "metered.dead", "")) == 1.0
                and done.get(("ruststream.messages.in_flight", "metered", "")) == 0.0
            )

        return until(lambda: get(f"{base}/metrics")[1], settled)
