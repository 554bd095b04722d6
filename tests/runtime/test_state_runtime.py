"""The service's state and handler classes through the real runtime, on each backend
(docs/reference/handlers.md, "The service's state", "Handler classes"): exact counts.

* An @on_startup hook returning an async context manager: entered once before the first
  delivery, the handler gets its value through State[T], and its __aexit__ runs once, after
  the @on_shutdown hook.
* A state given to the service: the handler gets it, no hook runs, nothing is entered.
* A handler class consuming and retrying: exactly max_attempts deliveries, one dead letter.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from rabbitctl_retry import Message, Outcome, State, on_shutdown, on_startup, subscriber
from rabbitctl_retry.runtime.loader import HandlerSet, instance_hooks, subscriber_of
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, publish
from tests.observe import depth, peek

TOPOLOGY = """
[queues.work]
max_attempts = 3
dead_letter = "work.dead"

[queues."work.dead"]
"""
BODY = json.dumps({"id": 1}).encode()
PROPERTIES = Properties(message_id="m-1", content_type="application/json")


@dataclass
class Processor:
    calls: list[int] = field(default_factory=list)


@dataclass
class Services:
    processor: Processor
    name: str = "services"


def service_of(backend: Backend, handlers: HandlerSet, state: object | None = None) -> Service:
    return Service(
        handlers,
        topology=load_text(TOPOLOGY),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
        state=state,
    )


async def wait_dead(backend: Backend, count: int) -> None:
    async def holds() -> bool:
        return await depth(backend, "work.dead") >= count

    for _ in range(600):
        if await holds():
            return
        await backend.elapse(0.05)
    raise AssertionError("no dead letter in work.dead")


async def test_the_state_of_an_async_context_manager_is_entered_once_and_left_after_shutdown(
    backend: Backend,
) -> None:
    log: list[str] = []

    @asynccontextmanager
    async def clients() -> AsyncIterator[Services]:
        log.append("enter")
        yield Services(Processor())
        log.append("exit")

    @on_startup
    def open_clients() -> AsyncIterator[Services]:
        log.append("startup")
        return clients()  # type: ignore[return-value]

    @on_shutdown
    def close_clients() -> None:
        log.append("shutdown")

    @subscriber("work")
    async def handle(msg: Message, processor: State[Processor]) -> None:
        processor.calls.append(msg.json()["id"])
        log.append("handled")

    handlers = HandlerSet(
        module="test",
        subscribers=(subscriber_of(handle, "test:handle"),),  # type: ignore[arg-type]
        startup=(open_clients,),
        shutdown=(close_clients,),
    )
    service = service_of(backend, handlers)
    async with service.running():
        assert log == ["startup", "enter"]
        await publish(backend, "work", BODY, PROPERTIES)
        await backend.until(lambda: "handled" in log, "the handler ran")
        assert isinstance(service.state, Services)
        assert service.state.processor.calls == [1]
    assert log == ["startup", "enter", "handled", "shutdown", "exit"]
    assert await depth(backend, "work") == 0


async def test_a_given_state_reaches_the_handler_and_no_hook_runs(backend: Backend) -> None:
    hooks: list[str] = []

    @on_startup
    def real_clients() -> Services:
        hooks.append("startup")
        return Services(Processor(), "real")

    @on_shutdown
    def close() -> None:
        hooks.append("shutdown")

    @subscriber("work")
    def handle(msg: Message, processor: State[Processor]) -> None:  # sync: a worker thread
        processor.calls.append(msg.json()["id"])

    fake = Processor()
    handlers = HandlerSet(
        module="test",
        subscribers=(subscriber_of(handle, "test:handle"),),  # type: ignore[arg-type]
        startup=(real_clients,),
        shutdown=(close,),
    )
    async with service_of(backend, handlers, state=Services(fake, "fake")).running():
        await publish(backend, "work", BODY, PROPERTIES)
        await backend.until(lambda: fake.calls == [1], "the fake processor was called")
    assert fake.calls == [1]
    assert hooks == []


async def test_a_handler_class_retries_max_attempts_times_then_dead_letters(
    backend: Backend,
) -> None:
    @subscriber("work")
    class Flaky:
        instances = 0

        def __init__(self) -> None:
            type(self).instances += 1
            self.attempts: list[int] = []
            self.started = 0
            self.stopped = 0

        def on_startup(self) -> None:
            self.started += 1

        def on_shutdown(self) -> None:
            self.stopped += 1

        async def handle(self, msg: Message, processor: State[Processor]) -> Outcome:
            self.attempts.append(msg.attempt)
            processor.calls.append(msg.attempt)
            return Outcome.retry()

    item = subscriber_of(Flaky, "test:Flaky")  # created here, with no arguments
    assert item is not None
    instance = item.handler.__self__  # type: ignore[attr-defined]
    processor = Processor()

    @on_startup
    def give() -> Processor:
        return processor

    handlers = HandlerSet(
        module="test",
        subscribers=(item,),
        startup=(give, *instance_hooks((item,), "startup")),
        shutdown=instance_hooks((item,), "shutdown"),
    )
    service = service_of(backend, handlers)
    async with service.running():
        await publish(backend, "work", BODY, PROPERTIES)
        await wait_dead(backend, 1)
        assert instance.started == 1
    assert Flaky.instances == 1
    assert instance.attempts == [1, 2, 3]
    assert processor.calls == [1, 2, 3]
    assert instance.stopped == 1
    dead = await peek(backend, "work.dead")
    assert len(dead) == 1
    assert dead[0].body == BODY
    assert (dead[0].properties.headers or {})["rr-handler"] == "test:Flaky"
    assert await depth(backend, "work") == 0
