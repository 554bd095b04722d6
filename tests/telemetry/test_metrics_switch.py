"""When rr records the OpenTelemetry metrics (docs/reference/metrics.md, "Metrics"): with a meter
provider given, or the global one set; never with ``RR_OTEL=off``; and a service that has
neither never imports opentelemetry. Each case runs in a process of its own (the global
provider is set there, never in the test process), on the emulator."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rabbitctl_retry.retry.policy import Event
from rabbitctl_retry.telemetry.names import OUTCOME_OF_EVENT, outcome_of

CHECKOUT = Path(__file__).parents[2]

SERVICE = """
import asyncio, sys

SETUP

from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text


async def main() -> None:
    emulator = Emulator()
    handled = []

    async def handle(msg) -> None:
        handled.append(msg.body)

    async def connect():
        return emulator.connect()

    service = Service(
        HandlerSet(module="t", subscribers=(Subscriber("work", handle, "t:work"),)),
        topology=load_text("[queues.work]"),
        connect=connect,
        options=RunOptions(shutdown_timeout_s=5),
        clock=emulator.clock,
    )
    async with service.running():
        channel = await emulator.connect().channel(confirms=True)
        await channel.publish(b"one", routing_key="work", mandatory=True)
        while not handled or service.in_flight:
            await emulator.settle()
            await asyncio.sleep(0)
    print("imported" if "opentelemetry" in sys.modules else "not-imported")


asyncio.run(main())
REPORT
"""

GLOBAL = """
from opentelemetry.metrics import set_meter_provider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

reader = InMemoryMetricReader()
set_meter_provider(MeterProvider(metric_readers=[reader]))
"""

REPORT = """
data = reader.get_metrics_data()
names = sorted(
    metric.name
    for resource in (data.resource_metrics if data else ())
    for scope in resource.scope_metrics
    for metric in scope.metrics
)
print(",".join(names) or "none")
"""


def run(setup: str, report: str, *, otel: str | None = None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "RR_OTEL"}
    if otel is not None:
        env["RR_OTEL"] = otel
    code = SERVICE.replace("SETUP", setup).replace("REPORT", report)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=CHECKOUT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_without_a_provider_nothing_of_opentelemetry_is_imported() -> None:
    assert run("", "") == ["not-imported"]


def test_the_global_provider_is_used_when_the_process_set_it() -> None:
    assert run(GLOBAL, REPORT) == [
        "imported",
        "messaging.client.consumed.messages,messaging.process.duration,"
        "ruststream.messages.in_flight,ruststream.messages.processed",
    ]


@pytest.mark.parametrize("word", ["off", "OFF"])
def test_rr_otel_off_records_nothing_even_with_a_provider_set(word: str) -> None:
    assert run(GLOBAL, REPORT, otel=word) == ["imported", "none"]


def test_every_decision_has_rusts_outcome() -> None:
    assert set(OUTCOME_OF_EVENT) == {event.value for event in Event}
    assert {outcome_of(event) for event in Event} == {
        "ack",
        "nack_requeue",
        "nack_drop",
        "retry_after",
    }
    assert outcome_of(Event.DELAYED) == "retry_after"
    assert outcome_of(Event.PAUSED) == "nack_requeue"
    assert outcome_of(Event.SPENT) == "nack_drop"
