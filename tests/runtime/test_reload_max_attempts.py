"""A running ``rr run`` takes a changed ``max_attempts`` from its topology file for the next
delivery, without a restart (docs/reference/runtime.md, "Changing max_attempts while it runs"), on
the emulator: exact deliveries per message, and which queue holds each afterwards.

- a classic queue (rr counts): 2 attempts before the reload, 4 after;
- a delivery being handled when the file changes finishes with the policy it started with;
- a quorum queue in ``settings = "policy"``: rr declare puts the new delivery limit in
  ``rr.jobs`` and rr run reloads: the server dead-letters after the new number of deliveries;
- a quorum queue in ``settings = "arguments"``: its ``x-delivery-limit`` cannot change, so
  the reload is refused (a warning) and the next message gets the broker's number;
- a file that does not load changes nothing and the service goes on;
- the file is watched: an edit applies within the reload interval, and is counted in the
  metrics; with the interval 0, only when asked (SIGHUP).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.metrics import RunMetrics
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.testing import TestBroker
from rabbitctl_retry.topology.load import load_file

H = "x-ruststream-retry-count"

CLASSIC = """
[queues.jobs]
max_attempts = {attempts}
dead_letter = "jobs.dead"

[queues."jobs.dead"]
"""

QUORUM = """
[broker]
settings = "{settings}"

[queues.jobs]
type = "quorum"
max_attempts = {attempts}
dead_letter = "jobs.dead"

[queues."jobs.dead"]
"""


class Retries:
    """A handler that always retries (:attr:`handle`), recording each (message id, attempt)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, int]] = []

        async def handle(msg: Message) -> AnyOutcome:
            self.seen.append((msg.message_id, msg.attempt))
            return Outcome.retry()

        self.handle = handle

    def deliveries(self) -> Counter[str | None]:
        return Counter(message_id for message_id, _ in self.seen)


@asynccontextmanager
async def serving(
    broker: TestBroker, file: Path, handler: object, *, reload_interval_s: float = 0
) -> AsyncIterator[Service]:
    service = Service(
        HandlerSet(module="jobs", subscribers=(Subscriber("jobs", handler, "jobs:handle"),)),  # type: ignore[arg-type]
        topology=load_file(file),
        connect=broker.connect,
        options=RunOptions(
            prefetch=10,
            reconnect=False,
            shutdown_timeout_s=5,
            topology_file=file,
            reload_interval_s=reload_interval_s,
        ),
        clock=broker.clock,
    )
    async with service.running():
        await broker.settle()
        yield service


def written(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def retry_headers(broker: TestBroker, queue: str) -> list[tuple[str | None, object]]:
    return [
        (message.properties.message_id, (message.properties.headers or {}).get(H))
        for message in broker.messages(queue)
    ]


async def test_a_raised_max_attempts_of_a_classic_queue_applies_to_the_next_message(
    tmp_path: Path,
) -> None:
    file = written(tmp_path / "topology.toml", CLASSIC.format(attempts=2))
    handler = Retries()
    async with TestBroker(file) as broker, serving(broker, file, handler.handle) as service:
        await broker.publish("jobs", "x", message_id="m1")
        written(file, CLASSIC.format(attempts=4))
        result = service.reload()
        assert result is not None
        assert [str(change) for change in result.applied] == ["jobs.max_attempts 2 -> 4"]
        assert result.kept == ()
        await broker.publish("jobs", "x", message_id="m2")
        assert service.stats.reloads == 1
    assert handler.seen == [("m1", 1), ("m1", 2), ("m2", 1), ("m2", 2), ("m2", 3), ("m2", 4)]
    assert broker.messages("jobs") == []
    assert retry_headers(broker, "jobs.dead") == [("m1", "2"), ("m2", "4")]


async def test_a_delivery_being_handled_finishes_with_the_policy_it_started_with(
    tmp_path: Path,
) -> None:
    file = written(tmp_path / "topology.toml", CLASSIC.format(attempts=1))
    seen: list[tuple[str | None, int]] = []
    async with TestBroker(file) as broker:

        async def slow_first(msg: Message) -> AnyOutcome:
            seen.append((msg.message_id, msg.attempt))
            if msg.message_id == "m1":
                await broker.clock.sleep(10)  # handling while the file changes
            return Outcome.retry()

        async with serving(broker, file, slow_first) as service:
            await broker.publish("jobs", "x", message_id="m1")
            assert seen == [("m1", 1)]  # m1's handler runs
            written(file, CLASSIC.format(attempts=3))
            assert service.reload() is not None
            await broker.advance(10)
            assert retry_headers(broker, "jobs.dead") == [("m1", "1")]  # the old cap: 1
            await broker.publish("jobs", "x", message_id="m2")
    assert seen == [("m1", 1), ("m2", 1), ("m2", 2), ("m2", 3)]
    assert retry_headers(broker, "jobs.dead") == [("m1", "1"), ("m2", "3")]
    assert broker.messages("jobs") == []


async def test_a_quorum_queue_in_a_policy_takes_the_new_limit_rr_declare_puts(
    tmp_path: Path,
) -> None:
    file = written(tmp_path / "topology.toml", QUORUM.format(settings="policy", attempts=2))
    handler = Retries()
    async with TestBroker(file, server_version="4.3.6") as broker:
        async with serving(broker, file, handler.handle) as service:
            await broker.publish("jobs", "x", message_id="m1")
            written(file, QUORUM.format(settings="policy", attempts=4))
            await broker.declare(file)  # rr declare: rr.jobs gets delivery-limit 3
            (policy,) = await broker.emulator.management("http://e/", vhost="/").policies()
            assert policy.name == "rr.jobs"
            assert dict(policy.definition)["delivery-limit"] == 3
            result = service.reload()
            assert result is not None
            assert [str(change) for change in result.applied] == ["jobs.max_attempts 2 -> 4"]
            await broker.publish("jobs", "x", message_id="m2")
        assert handler.deliveries() == {"m1": 2, "m2": 4}
        assert [attempt for message_id, attempt in handler.seen if message_id == "m2"] == [
            1,
            2,
            3,
            4,
        ]
        assert broker.messages("jobs") == []
        dead = broker.messages("jobs.dead")
        assert [message.properties.message_id for message in dead] == ["m1", "m2"]
        reasons = [(message.properties.headers or {})["x-death"][0]["reason"] for message in dead]  # type: ignore[index,call-overload]
        assert reasons == ["delivery_limit", "delivery_limit"]


async def test_a_quorum_queue_in_arguments_keeps_the_broker_s_limit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logging.getLogger("rr"), "propagate", True)
    caplog.set_level(logging.INFO, logger="rr")
    file = written(tmp_path / "topology.toml", QUORUM.format(settings="arguments", attempts=2))
    handler = Retries()
    async with TestBroker(file) as broker:
        async with serving(broker, file, handler.handle) as service:
            written(file, QUORUM.format(settings="arguments", attempts=4))
            result = service.reload()
            assert result is not None
            assert not result.changed
            assert [str(change) for change in result.kept] == ["jobs.max_attempts 2 -> 4"]
            await broker.publish("jobs", "x", message_id="m2")
            assert service.stats.reloads == 0
        assert handler.deliveries() == {"m2": 2}  # x-delivery-limit 1, as declared
        assert [m.properties.message_id for m in broker.messages("jobs.dead")] == ["m2"]
    warned = [
        getattr(record, "rr", {})
        for record in caplog.records
        if record.getMessage() == "topology change not applied while rr run runs"
    ]
    assert warned
    assert warned[0]["change"] == "jobs.max_attempts 2 -> 4"
    assert "x-delivery-limit (1) is an argument" in warned[0]["reason"]


async def test_a_file_that_does_not_load_changes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logging.getLogger("rr"), "propagate", True)
    caplog.set_level(logging.INFO, logger="rr")
    file = written(tmp_path / "topology.toml", CLASSIC.format(attempts=2))
    handler = Retries()
    async with TestBroker(file) as broker, serving(broker, file, handler.handle) as service:
        written(file, CLASSIC.format(attempts="'five'"))
        assert service.reload() is None
        file.unlink()
        assert service.reload() is None
        await broker.publish("jobs", "x", message_id="m1")
        assert service.stats.reload_failures == 2
        assert service.consuming
    assert handler.deliveries() == {"m1": 2}
    errors = [
        record
        for record in caplog.records
        if record.getMessage().startswith("the topology file does not load")
    ]
    assert len({str(getattr(record, "rr", "")) for record in errors}) == 2
    assert "max_attempts" in str(getattr(errors[0], "rr", ""))


async def test_an_edit_of_the_file_is_seen_within_the_interval_and_counted(
    tmp_path: Path,
) -> None:
    file = written(tmp_path / "topology.toml", CLASSIC.format(attempts=2))
    handler = Retries()
    metrics = RunMetrics()
    async with (
        TestBroker(file) as broker,
        serving(broker, file, handler.handle, reload_interval_s=0.02) as service,
    ):
        metrics.watch(service)
        written(file, "# a comment changes no setting\n" + CLASSIC.format(attempts=2))
        written(file, CLASSIC.format(attempts=3))
        for _ in range(500):  # real time: the watcher looks every 20 ms
            if service.stats.reloads:
                break
            await asyncio.sleep(0.01)
        assert service.stats.reloads == 1
        await broker.publish("jobs", "x", message_id="m1")
        page = metrics.page().decode()
    assert handler.deliveries() == {"m1": 3}
    assert "rr_topology_reloads_total 1.0" in page
    assert "rr_topology_reload_failures_total 0.0" in page


async def test_with_no_interval_the_file_is_read_when_asked(tmp_path: Path) -> None:
    file = written(tmp_path / "topology.toml", CLASSIC.format(attempts=2))
    handler = Retries()
    async with TestBroker(file) as broker, serving(broker, file, handler.handle) as service:
        written(file, CLASSIC.format(attempts=3))
        await asyncio.sleep(0.05)
        assert service.stats.reloads == 0  # nobody looks
        service.request_reload()  # what SIGHUP does
        for _ in range(500):
            if service.stats.reloads:
                break
            await asyncio.sleep(0.01)
        assert service.stats.reloads == 1
        await broker.publish("jobs", "x", message_id="m1")
    assert handler.deliveries() == {"m1": 3}
