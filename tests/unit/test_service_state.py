"""The service's state, handler classes, and a state given to a test (docs/reference/handlers.md,
"The service's state", "Handler classes", "Testing handlers"): resolution rules with their exact
errors, the hooks' order, the loader's classes and instances, TestBroker.run(state=),
simulate(state=) and rr simulate --state."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from typer.testing import CliRunner

from rabbitctl_retry import Message, State, on_shutdown, on_startup, subscriber
from rabbitctl_retry.cli import app
from rabbitctl_retry.errors import HandlerLoadError
from rabbitctl_retry.runtime.handlers import HookFailed, call_hooks
from rabbitctl_retry.runtime.loader import HandlerSet, load_target
from rabbitctl_retry.runtime.state import NO_STATE, Lifespan, StateFailed, resolve_state
from rabbitctl_retry.testing import TestBroker

EXAMPLE = Path(__file__).parents[2] / "examples" / "refunds"
runner = CliRunner(env={"COLUMNS": "200"})


class Processor:
    pass


class Ledger:
    pass


@dataclass
class Services:
    processor: Processor
    ledger: Ledger


class Pair(NamedTuple):
    processor: Processor
    ledger: Ledger


class Holder:
    def __init__(self) -> None:
        self.processor = Processor()
        self._secret = Ledger()


# -- resolve_state ---------------------------------------------------------------------------


def test_the_whole_state_when_it_is_the_type_asked_for() -> None:
    processor = Processor()
    assert resolve_state(processor, Processor, handler="m:h") is processor
    assert resolve_state(processor, Any, handler="m:h") is processor
    assert resolve_state(processor, object, handler="m:h") is processor


@pytest.mark.parametrize(
    "make",
    [
        lambda p, ledger: Services(p, ledger),
        lambda p, ledger: Pair(p, ledger),
        lambda p, ledger: (p, ledger),
        lambda p, ledger: {"processor": p, "ledger": ledger},
    ],
    ids=["dataclass", "namedtuple", "tuple", "mapping"],
)
def test_the_one_part_of_the_type_asked_for(make: Any) -> None:
    processor, ledger = Processor(), Ledger()
    state = make(processor, ledger)
    assert resolve_state(state, Processor, handler="m:h") is processor
    assert resolve_state(state, Ledger, handler="m:h") is ledger


def test_an_objects_public_attributes_are_its_parts() -> None:
    holder = Holder()
    assert resolve_state(holder, Processor, handler="m:h") is holder.processor
    with pytest.raises(HandlerLoadError) as caught:
        resolve_state(holder, Ledger, handler="m:h")
    assert str(caught.value) == (
        "m:h asks for State[Ledger], but the state is a Holder (processor: Processor), which "
        "holds no Ledger"
    )


def test_no_state_missing_part_and_ambiguous_part_name_the_handler() -> None:
    with pytest.raises(HandlerLoadError) as caught:
        resolve_state(NO_STATE, Processor, handler="svc:process_refund")
    assert str(caught.value) == (
        "svc:process_refund asks for State[Processor], but no @on_startup hook returned a state"
    )
    with pytest.raises(HandlerLoadError) as caught:
        resolve_state(Services(Processor(), Ledger()), str, handler="svc:h")
    assert str(caught.value) == (
        "svc:h asks for State[str], but the state is a Services (processor: Processor, "
        "ledger: Ledger), which holds no str"
    )
    with pytest.raises(HandlerLoadError) as caught:
        resolve_state((Processor(), Processor()), Processor, handler="svc:h")
    assert str(caught.value) == (
        "svc:h asks for State[Processor], but the state is a tuple ([0]: Processor, [1]: "
        "Processor) holds more than one: [0], [1]; ask for State[tuple] and take the one it "
        "needs"
    )


# -- the hooks build the state ---------------------------------------------------------------


async def test_a_value_returned_by_a_sync_or_async_hook_is_the_state() -> None:
    async def make() -> Processor:
        return processor

    processor = Processor()
    for hook in (lambda: processor, make):
        lifespan = Lifespan()
        await call_hooks((lambda: None, hook), "startup", lifespan=lifespan)
        assert lifespan.state is processor
        await lifespan.close()


async def test_a_sync_context_manager_is_entered_and_left_too() -> None:
    seen: list[str] = []

    @contextmanager
    def clients() -> Iterator[Processor]:
        seen.append("enter")
        yield Processor()
        seen.append("exit")

    lifespan = Lifespan()
    await call_hooks((clients,), "startup", lifespan=lifespan)
    assert isinstance(lifespan.state, Processor)
    assert seen == ["enter"]
    await lifespan.close()
    assert seen == ["enter", "exit"]


async def test_two_hooks_returning_a_value_is_an_error_naming_both() -> None:
    def open_db() -> Ledger:
        return Ledger()

    def open_processor() -> Processor:
        return Processor()

    with pytest.raises(StateFailed) as caught:
        await call_hooks((open_db, open_processor), "startup", lifespan=Lifespan())
    assert str(caught.value) == (
        "@on_startup hooks open_db and open_processor both returned a value: return one value "
        'holding both (a dataclass; rr docs handlers "The service\'s state")'
    )


@dataclass
class Recorder:
    seen: list[str] = field(default_factory=list)


def lifecycle_module(seen: list[str], *, fail_handler_load: bool = False) -> HandlerSet:
    @on_startup
    @asynccontextmanager
    async def clients() -> AsyncIterator[Recorder]:
        seen.append("enter")
        yield Recorder(seen)
        seen.append("exit")

    @on_shutdown
    async def goodbye() -> None:
        seen.append("shutdown")

    if fail_handler_load:

        @subscriber("work")
        async def handle(msg: Message, ledger: State[Ledger]) -> None:
            pass

    else:

        @subscriber("work")
        async def handle(msg: Message, recorder: State[Recorder]) -> None:
            recorder.seen.append(f"handled {msg.text()}")

    from rabbitctl_retry.runtime.loader import subscriber_of

    item = subscriber_of(handle, "test:handle")
    assert item is not None
    return HandlerSet(module="test", subscribers=(item,), startup=(clients,), shutdown=(goodbye,))


async def test_testbroker_runs_the_hooks_in_order_and_leaves_the_state_last() -> None:
    seen: list[str] = []
    async with TestBroker("[queues.work]\nmax_attempts = 2\n") as broker:
        await broker.run(lifecycle_module(seen))
        await broker.publish("work", "one")
        assert seen == ["enter", "handled one"]
    assert seen == ["enter", "handled one", "shutdown", "exit"]


async def test_a_state_a_handler_cannot_use_fails_the_start_after_closing_what_opened() -> None:
    seen: list[str] = []
    async with TestBroker("[queues.work]\nmax_attempts = 2\n") as broker:
        with pytest.raises(HandlerLoadError) as caught:
            await broker.run(lifecycle_module(seen, fail_handler_load=True))
    assert str(caught.value) == (
        "test:handle asks for State[Ledger], but the state is a Recorder (seen: list), which "
        "holds no Ledger"
    )
    assert seen == ["enter", "shutdown", "exit"]


async def test_a_failing_startup_hook_leaves_the_state_entered_before_it() -> None:
    seen: list[str] = []

    @contextmanager
    def clients() -> Iterator[Processor]:
        seen.append("enter")
        yield Processor()
        seen.append("exit")

    def broken() -> None:
        raise RuntimeError("no database")

    @subscriber("work")
    async def handle(msg: Message) -> None:
        pass

    handlers = HandlerSet(
        module="test",
        subscribers=(load_subscriber(handle),),
        startup=(clients, broken),
        shutdown=(lambda: seen.append("shutdown"),),
    )
    async with TestBroker("[queues.work]\nmax_attempts = 2\n") as broker:
        with pytest.raises(HookFailed) as caught:
            await broker.run(handlers)
    assert str(caught.value) == "@on_startup hook broken failed: RuntimeError: no database"
    assert seen == ["enter", "exit"]  # shutdown hooks run only after a complete startup


def load_subscriber(handler: Any) -> Any:
    from rabbitctl_retry.runtime.loader import subscriber_of

    return subscriber_of(handler, f"test:{handler.__name__}")


# -- a state given by the test -----------------------------------------------------------------


async def test_a_given_state_replaces_the_hooks_of_the_refunds_example() -> None:
    handlers = load_target(str(EXAMPLE / "service.py"))  # imports it as module service
    service = sys.modules[handlers.module]
    fake = service.Clients(processor=service.Processor(script={"4111": [None]}))
    async with TestBroker(EXAMPLE / "topology.toml") as broker:
        running = await broker.run(handlers, state=fake)
        await broker.publish("refunds", {"id": 1, "card": "4111", "amount_cents": 5})
        assert running.state is fake
    assert fake.processor.calls == ["4111"]


# -- handler classes: the loader ----------------------------------------------------------------


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    return path


CLASSES = """
    from rabbitctl_retry import Message, on_shutdown, on_startup, subscriber

    order = []

    @on_startup
    def first():
        order.append("module startup")

    @on_shutdown
    def last():
        order.append("module shutdown")

    @subscriber("refunds", timeout=5)
    class ProcessRefund:
        def on_startup(self):
            order.append("class startup")

        def on_shutdown(self):
            order.append("class shutdown")

        async def handle(self, msg: Message) -> None:
            order.append("handled " + msg.text())

    class Review:
        def __init__(self, desk):
            self.desk = desk

        def handle(self, msg: Message) -> None:
            self.desk.append(msg.text())

    desk = []
    review = subscriber("refunds.dead")(Review(desk))
    unmarked = ProcessRefund()  # an instance of a marked class: not a second handler
"""


def test_a_module_with_a_class_and_an_instance(tmp_path: Path) -> None:
    handlers = load_target(str(write(tmp_path, "classes_a", CLASSES)))
    assert [(s.queue, s.name, s.is_async) for s in handlers.subscribers] == [
        ("refunds", "classes_a:ProcessRefund", True),
        ("refunds.dead", "classes_a:review", False),
    ]
    assert handlers.subscribers[0].timeout_s == 5.0  # the class's options, explicit
    assert [getattr(h, "__qualname__", "") for h in handlers.startup] == [
        "first",
        "ProcessRefund.on_startup",
    ]
    assert [getattr(h, "__qualname__", "") for h in handlers.shutdown] == [
        "ProcessRefund.on_shutdown",
        "last",
    ]


async def test_classes_run_with_their_hooks_in_order(tmp_path: Path) -> None:
    path = write(tmp_path, "classes_b", CLASSES)
    topology = '[queues.refunds]\nmax_attempts = 2\n[queues."refunds.dead"]\n'
    async with TestBroker(topology) as broker:
        await broker.run(f"{path}:ProcessRefund")
        await broker.publish("refunds", "r1")
    import classes_b

    assert classes_b.order == [
        "module startup",
        "class startup",
        "handled r1",
        "class shutdown",
        "module shutdown",
    ]


async def test_testbroker_takes_an_instance_of_a_marked_class() -> None:
    @subscriber("work")
    class Counting:
        def __init__(self, seen: list[str]) -> None:
            self.seen = seen

        def handle(self, msg: Message) -> None:
            self.seen.append(msg.text())

    seen: list[str] = []
    async with TestBroker("[queues.work]\nmax_attempts = 2\n") as broker:
        await broker.run(Counting(seen))
        await broker.publish("work", "hello")
    assert seen == ["hello"]


@pytest.mark.parametrize(
    ("source", "target", "error"),
    [
        (
            """
            from rabbitctl_retry import subscriber

            @subscriber("refunds")
            class NeedsProcessor:
                def __init__(self, processor):
                    self.processor = processor

                def handle(self, msg):
                    pass
            """,
            "",
            "{m}:NeedsProcessor needs arguments to be created (missing a required argument: "
            "'processor'): rr creates a handler class with no arguments; register an instance "
            "instead, e.g. handler = subscriber(QUEUE)(NeedsProcessor(...)) at module level "
            '(rr docs handlers "Handler classes")',
        ),
        (
            """
            from rabbitctl_retry import subscriber

            @subscriber("refunds")
            class NoHandle:
                pass
            """,
            ":NoHandle",
            "{m}:NoHandle is a class marked @subscriber but has no handle method",
        ),
    ],
    ids=["init-needs-arguments", "no-handle"],
)
def test_load_errors_of_classes(tmp_path: Path, source: str, target: str, error: str) -> None:
    name = f"bad_{len(target)}"
    path = write(tmp_path, name, source)
    with pytest.raises(HandlerLoadError) as caught:
        load_target(f"{path}{target}")
    assert str(caught.value) == error.format(m=name)


def test_a_class_whose_init_raises(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "raising_init",
        """
        from rabbitctl_retry import subscriber

        @subscriber("refunds")
        class Broken:
            def __init__(self):
                raise ValueError("no config")

            def handle(self, msg):
                pass
        """,
    )
    with pytest.raises(HandlerLoadError) as caught:
        load_target(str(path))
    assert str(caught.value) == (
        f"creating raising_init:Broken() failed: ValueError: no config (at {path}:7, in __init__)"
    )


# -- rr simulate --state ------------------------------------------------------------------------


STATES = """
    import asyncio
    from service import Clients, Processor, Refusal

    fake = Clients(processor=Processor(script={"4111": [Refusal.DECLINED]}))

    def make():
        return Clients(processor=Processor(script={"4111": [Refusal.BUSY, None]}))

    async def make_async():
        await asyncio.sleep(0)
        return make()

    def nothing():
        return None

    def broken():
        raise RuntimeError("no fake today")
"""


def simulate_with_state(tmp_path: Path, state: str) -> Any:
    write(tmp_path, "fakes", STATES)
    args = ["simulate", str(EXAMPLE / "topology.toml"), str(EXAMPLE / "service.py")]
    args += ["-p", 'refunds={"id": 1, "card": "4111"}', "--output", "json"]
    return runner.invoke(app, [*args, "--state", f"{tmp_path / 'fakes.py'}:{state}"])


def refund_events(result: Any) -> list[tuple[float, str]]:
    assert result.exit_code == 0, result.output
    events = json.loads(result.stdout)["events"]
    return [(e["time_s"], e["event"]) for e in events if e["queue"] == "refunds"]


def test_rr_simulate_state_a_value(tmp_path: Path) -> None:
    # 4111 is accepted by the example's own processor; the fake declines it
    assert refund_events(simulate_with_state(tmp_path, "fake")) == [
        (0.0, "published"),
        (0.0, "dropped"),
        (0.0, "server dropped (rejected)"),
    ]


@pytest.mark.parametrize("attr", ["make", "make_async"])
def test_rr_simulate_state_a_function(tmp_path: Path, attr: str) -> None:
    assert refund_events(simulate_with_state(tmp_path, attr)) == [
        (0.0, "published"),
        (0.0, "delayed"),
        (2.0, "acked"),
    ]


@pytest.mark.parametrize(
    ("attr", "code", "line"),
    [
        (
            "nothing",
            1,
            "rr: error: --state {p}:nothing is None: there is no state to give the handlers",
        ),
        (
            "broken",
            1,
            "rr: error: --state {p}:broken: calling it failed: RuntimeError: no fake today",
        ),
        (
            "missing",
            78,
            "rr: error: --state '{p}:missing': module 'fakes' has no attribute 'missing'",
        ),
    ],
)
def test_rr_simulate_state_errors(tmp_path: Path, attr: str, code: int, line: str) -> None:
    result = simulate_with_state(tmp_path, attr)
    assert result.exit_code == code, result.output
    assert line.format(p=tmp_path / "fakes.py") in result.stderr


def test_rr_run_stops_on_two_states_before_connecting(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "two_states",
        """
        from rabbitctl_retry import Message, on_startup, subscriber

        @on_startup
        def open_db():
            return 1

        @on_startup
        async def open_processor():
            return "p"

        @subscriber("work")
        def handle(msg: Message) -> None:
            pass
        """,
    )
    rr = Path(sys.executable).parent / "rr"
    result = subprocess.run(
        [str(rr), "run", str(path), "--url", "amqp://guest:guest@127.0.0.1:1/"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "rr: error: @on_startup hooks open_db and open_processor both returned a value: return "
        'one value holding both (a dataclass; rr docs handlers "The service\'s state")'
    )


async def test_the_service_reads_each_handler_once_per_run_with_the_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """invocation_for gets the handler as written (a class's bound handle, not the thread
    counter around it) and the state the hook returned, once per run."""
    from rabbitctl_retry.runtime import invocation, service

    calls: list[tuple[object, object, str]] = []

    def recording(handler: Any, *, state: object = NO_STATE, name: str) -> Any:
        calls.append((handler, state, name))
        return invocation.Invocation()

    monkeypatch.setattr(service, "invocation_for", recording)
    processor = Processor()

    @subscriber("work")
    class Sync:
        def handle(self, msg: Message) -> None:
            pass

    item = load_subscriber(Sync)
    handlers = HandlerSet(module="test", subscribers=(item,), startup=(lambda: processor,))
    async with TestBroker("[queues.work]\nmax_attempts = 2\n") as broker:
        running = await broker.run(handlers)
        await broker.publish("work", "x")
        assert running.state is processor
    assert calls == [(item.written, processor, "test:Sync")]
    assert getattr(item.written, "__self__", None) is not None
