"""Docs that run as written: every example of README.md and docs/*.md is a test case.

:mod:`tests.docs.examples` finds the examples and says how each one runs; this module runs
them (docs/reference/testing.md, "Examples in the docs are tested"):

* Python: a handler module runs under ``rr simulate`` (beside a copy of
  ``examples/refunds/service.py``, on ``examples/refunds/topology.toml``), a test module under
  pytest in a subprocess (``asyncio_mode = auto``, as docs/how-to/test-a-service.md says), a
  script under python;
* TOML: a topology file goes through ``rr topology validate`` (and, when its first line names
  a file of the repository, must say what that file says); pytest settings run a test of the
  ``rr_broker`` fixture;
* JSON: an ``rr dlq export`` line is imported with ``rr dlq import`` and exported again,
  unchanged;
* shell: each ``rr`` command runs in a temporary directory that holds ``examples/`` and
  ``completions/``; ``cp`` runs with ``/etc`` and ``~`` moved into it. A broker command runs
  in a fresh vhost of the test broker, prepared by the setup :data:`SETUPS` names for the
  block's first command. The exit code is checked (non-zero when the doc shows an
  ``rr: error:`` line, else 0), and so are the lines the doc shows below the command
  (:func:`tests.docs.examples.missing_lines`).

Broker cases are marked ``broker``: they skip without RabbitMQ and fail without it when
``CI=true`` (``tests/shared_node.py``).
"""

from __future__ import annotations

import ast
import asyncio
import base64
import contextlib
import filecmp
import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import aiormq
import pytest
import tomli_w

from rabbitctl_retry.testing import DEFAULT_SERVER_VERSION
from tests.backends import vhost_pool, vhost_url
from tests.docs.examples import (
    Block,
    Command,
    Kind,
    Plan,
    Unclassifiable,
    classify,
    commands,
    examples,
    missing_lines,
    subscribed_queues,
)
from tests.shared_node import require_broker

REPO = Path(__file__).resolve().parents[2]
DOCS = [
    "README.md",
    *sorted(path.relative_to(REPO).as_posix() for path in (REPO / "docs").rglob("*.md")),
]


def _rr() -> str:
    """The ``rr`` of this Python (the venv's), else the one on PATH."""
    beside = Path(sys.executable).with_name("rr")
    return str(beside) if beside.exists() else shutil.which("rr") or "rr"


RR = _rr()
TOPOLOGY = "examples/refunds/topology.toml"
"""The topology handler examples run on (every handler of the docs serves its queues)."""
TIMEOUT_S = 60

PROGRAMMING_ERRORS = re.compile(
    r"\((NameError|AttributeError|TypeError|ImportError|ModuleNotFoundError|"
    r"UnboundLocalError|KeyError|SyntaxError):"
)
"""A handler failing with one of these in ``rr simulate`` means the example's code is broken,
not that its handler decided to fail."""


def all_examples() -> list[Block]:
    """The examples of README.md and docs/**/*.md, in file and line order."""
    return [block for path in DOCS for block in examples((REPO / path).read_text(), path)]


EXAMPLES = all_examples()


def _case(block: Block) -> Any:
    try:
        plan: Plan | Unclassifiable = classify(block)
    except Unclassifiable as error:
        plan = error
    marks = [pytest.mark.broker] if isinstance(plan, Plan) and plan.broker else []
    return pytest.param(block, plan, id=block.id, marks=marks)


@pytest.mark.parametrize(("block", "plan"), [_case(block) for block in EXAMPLES])
def test_example(block: Block, plan: Plan | Unclassifiable, tmp_path: Path) -> None:
    """The example runs as written, or is marked with why not (and compiled if Python)."""
    if isinstance(plan, Unclassifiable):
        pytest.fail(str(plan))
    if plan.compile_python:
        # a fragment may await at the top, as in a test's body
        compile(block.text, block.id, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if plan.skip is not None:
        pytest.skip(f"{block.id}: {plan.skip}")
    RUNNERS[plan.kind](block, plan, tmp_path)


# --------------------------------------------------------------------------- processes


def workdir(tmp_path: Path) -> Path:
    """A fresh working directory holding (links to) the repository's examples/ and
    completions/, so that the docs' relative paths work and nothing is written to the repo."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("examples", "completions"):
        (work / name).symlink_to(REPO / name)
    return work


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a command: no broker URL, no terminal width (rr's tables are then
    never wrapped), plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"RR_URL", "RR_MANAGEMENT_URL", "COLUMNS", "LINES", "PYTEST_ADDOPTS"}
    }
    env.update(extra)
    return env


def run(
    argv: list[str], cwd: Path, env: dict[str, str], answer: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``argv``; with ``answer``, stdin is a terminal that has it typed in already."""
    if answer is None:
        return subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    master, slave = pty.openpty()
    try:
        os.write(master, f"{answer}\n".encode())
        return subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=slave,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    finally:
        os.close(slave)
        os.close(master)


def described(result: subprocess.CompletedProcess[str]) -> str:
    return (
        f"$ {' '.join(str(arg) for arg in result.args)}\nexit {result.returncode}\n"
        f"--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
    )


# --------------------------------------------------------------------------- Python


def run_handlers(block: Block, plan: Plan, tmp_path: Path) -> None:
    """A handler module: ``rr simulate`` on the refunds topology, two messages per queue it
    subscribes to; every message is handled, and no handler fails with a programming error
    (a name the example never defined, say)."""
    work = workdir(tmp_path)
    shutil.copy(REPO / "examples" / "refunds" / "service.py", work / "service.py")
    name = Path(block.first_line_path or "handlers.py").name
    (work / name).write_text(block.text)
    queues = subscribed_queues(block.text)
    declared = set(tomllib.loads((REPO / TOPOLOGY).read_text())["queues"])
    assert set(queues) <= declared, f"{block.id}: queues not in {TOPOLOGY}: {queues}"
    publish: list[str] = []
    for number, queue in enumerate([q for q in queues for _ in range(2)], start=1):
        body = {"id": number, "card": "4111", "amount_cents": 1000 + number}
        publish += ["--publish", f"{queue}={json.dumps(body)}"]
    result = run(
        [RR, "simulate", TOPOLOGY, name, *publish, "--for", "10m", "--output", "json"],
        work,
        clean_env(),
    )
    assert result.returncode == 0, described(result)
    events = json.loads(result.stdout)["events"]
    handled = {e["message_id"] for e in events if e["event"] != "published"}
    assert handled >= {f"m{n}" for n in range(1, len(publish) // 2 + 1)}, described(result)
    broken = [e["detail"] for e in events if PROGRAMMING_ERRORS.search(e["detail"] or "")]
    assert not broken, f"{block.id}: the example's code fails: {broken[0]}"


def copy_example_files(target: Path) -> None:
    """The refunds example's files a test module imports or reads (not its tests)."""
    target.mkdir(parents=True, exist_ok=True)
    for path in (REPO / "examples" / "refunds").iterdir():
        if path.suffix in {".py", ".toml"} and not path.name.startswith("test_"):
            shutil.copy(path, target / path.name)


def run_pytest(work: Path, test_file: str, expected_passed: int) -> None:
    result = run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--strict-config",
            "--strict-markers",
            test_file,
        ],
        work,
        clean_env(),
    )
    assert result.returncode == 0, described(result)
    assert f"{expected_passed} passed" in result.stdout, described(result)


def run_tests(block: Block, plan: Plan, tmp_path: Path) -> None:
    """A test module: pytest runs it beside the refunds example's files, with the setting
    docs/how-to/test-a-service.md asks for (``asyncio_mode = auto``); every test passes."""
    work = tmp_path / "example"
    copy_example_files(work)
    named = Path(block.first_line_path or "").name
    test_file = named if named.startswith("test_") else "test_example.py"
    (work / test_file).write_text(block.text)
    (work / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    tests = len(re.findall(r"^(?:async )?def test_", block.text, re.MULTILINE))
    run_pytest(work, test_file, tests)


def run_script(block: Block, plan: Plan, tmp_path: Path) -> None:
    """A script: python runs it in a working directory with the examples; exit 0."""
    work = workdir(tmp_path)
    (work / "example.py").write_text(block.text)
    result = run([sys.executable, "example.py"], work, clean_env())
    assert result.returncode == 0, described(result)


# --------------------------------------------------------------------------- TOML


def run_topology(block: Block, plan: Plan, tmp_path: Path) -> None:
    """A topology file: ``rr topology validate`` accepts it; one whose first line names a
    file of the repository holds what that file holds."""
    (tmp_path / "topology.toml").write_text(block.text)
    result = run([RR, "topology", "validate", "topology.toml"], tmp_path, clean_env())
    assert result.returncode == 0, described(result)
    assert ": ok (" in result.stdout, described(result)
    named = block.first_line_path
    if named is not None and (REPO / named).is_file():
        assert tomllib.loads(block.text) == tomllib.loads((REPO / named).read_text()), (
            f"{block.id} says it is {named}, but differs from it"
        )


SETTINGS_PROBE = """\
async def test_the_fixture_follows_the_settings(rr_broker):
    assert str(rr_broker.emulator.server_version) == {version!r}
"""


def run_pytest_config(block: Block, plan: Plan, tmp_path: Path) -> None:
    """pytest settings: a pyproject.toml with them (and ``asyncio_mode = "auto"``, which
    docs/how-to/test-a-service.md asks for) runs an ``rr_broker`` test, which emulates the
    version they name; ``--strict-config`` refuses a setting no plugin registered."""
    document = tomllib.loads(block.text)
    settings = document["tool"]["pytest"]["ini_options"]
    settings.setdefault("asyncio_mode", "auto")
    version = settings.get("rr_server_version", DEFAULT_SERVER_VERSION)
    (tmp_path / "pyproject.toml").write_text(tomli_w.dumps(document))
    (tmp_path / "test_settings.py").write_text(SETTINGS_PROBE.format(version=version))
    run_pytest(tmp_path, "test_settings.py", 1)


# --------------------------------------------------------------------------- broker


@dataclass
class Box:
    """Where a shell example runs: its directory, environment and (broker cases) vhost."""

    work: Path
    env: dict[str, str]
    url: str | None = None
    """The fresh vhost's URL, for broker cases."""
    shown_urls: list[tuple[str, str]] = field(default_factory=list)
    """(URL as rr prints the test's, URL as rr would print the doc's): output is compared
    with the doc's URLs put back."""


@contextlib.contextmanager
def fresh_vhost(version: str) -> Iterator[str]:
    """A new vhost on the shared RabbitMQ of ``version`` (skipped without one, failed in CI),
    the URL's user may do everything in it; its URL. Deleted afterwards (with the pool's next
    batch)."""
    broker = require_broker(version)
    pool = vhost_pool(broker)  # made ahead and deleted in batches: fewer rabbitmqctl runs
    with pool.lent() as name:
        yield vhost_url(broker.url, name)


def amqp(url: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``work(channel)`` on a confirm channel of a new connection to ``url``."""

    async def main() -> Any:
        connection = await aiormq.connect(url)
        try:
            channel = await connection.channel()
            await channel.confirm_delivery()
            return await work(channel)
        finally:
            await connection.close()

    return asyncio.run(main())


def declare(url: str, queue: str, arguments: dict[str, Any] | None = None) -> None:
    async def work(channel: Any) -> None:
        await channel.queue_declare(queue, durable=True, arguments=arguments)

    amqp(url, work)


def publish(url: str, queue: str, messages: list[tuple[str, dict[str, Any]]]) -> None:
    """Publish ``(message_id, JSON body)`` pairs to ``queue``, confirmed."""

    async def work(channel: Any) -> None:
        for message_id, body in messages:
            await channel.basic_publish(
                json.dumps(body).encode(),
                routing_key=queue,
                properties=aiormq.spec.Basic.Properties(
                    content_type="application/json", delivery_mode=2, message_id=message_id
                ),
                mandatory=True,
            )

    amqp(url, work)


def counts(url: str, queue: str) -> tuple[int, int]:
    """(ready messages, consumers) of ``queue``."""

    async def work(channel: Any) -> tuple[int, int]:
        ok = await channel.queue_declare(queue, passive=True)
        return ok.message_count, ok.consumer_count

    return amqp(url, work)  # type: ignore[no-any-return]


def purge(url: str, queue: str) -> None:
    async def work(channel: Any) -> None:
        await channel.queue_purge(queue)

    amqp(url, work)


def wait_for(url: str, expected: dict[str, tuple[int, int] | int], timeout_s: float = 30) -> None:
    """Wait until each queue holds what ``expected`` says (messages, or messages and
    consumers)."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = {queue: counts(url, queue) for queue in expected}
        shown = {
            q: seen[q] if isinstance(want, tuple) else seen[q][0] for q, want in expected.items()
        }
        if shown == expected:
            return
        assert time.monotonic() < deadline, f"queues never reached {expected}: {shown}"
        time.sleep(0.1)


@contextlib.contextmanager
def rr_running(box: Box, *args: str) -> Iterator[None]:
    """``rr run ARGS`` in the background, consuming, until the block ends (then Ctrl-C)."""
    log = box.work.parent / f"rr-run-{uuid4().hex[:6]}.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            [RR, "run", *args], cwd=box.work, env=box.env, stdout=sink, stderr=sink
        )
    try:
        deadline = time.monotonic() + 60  # start-up on a busy machine
        while " consuming " not in log.read_text():
            assert process.poll() is None, f"rr run {' '.join(args)} ended:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"rr run never consumed:\n{log.read_text()}"
            time.sleep(0.05)
        yield
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def doc_block(first_line_path: str) -> Block:
    """The example that says it is ``first_line_path`` (``# outage.py``)."""
    for block in EXAMPLES:
        if block.first_line_path == first_line_path:
            return block
    raise AssertionError(f"no example of the docs starts with '# {first_line_path}'")


Between = Callable[[int], None]
"""Called before each command of a block after the first, with its index."""


@contextlib.contextmanager
def after_the_outage(box: Box) -> Iterator[Between | None]:
    """docs/how-to/after-an-outage.md: the doc's own ``outage.py`` served the refunds
    topology (``rr run outage.py --topology examples/refunds/topology.toml``) while 24
    refunds and 16 payouts came in; they are now in ``refunds.dead`` and ``payouts.dead``."""
    assert box.url is not None
    (box.work / "outage.py").write_text(doc_block("outage.py").text)
    # One handler at a time: the doc shows the dead letters in the order they were published,
    # and concurrent handlers may end a later refund's fifth attempt first.
    with rr_running(box, "outage.py", "--topology", TOPOLOGY, "--concurrency", "1"):
        refunds = [{"id": i, "card": "4111", "amount_cents": 1000 + i} for i in range(1, 25)]
        publish(box.url, "refunds", [(f"refunds-{body['id']}", body) for body in refunds])
        payouts = [{"id": i, "card": "5500", "amount_cents": 100 * i} for i in range(25, 41)]
        publish(box.url, "payouts", [(f"payouts-{body['id']}", body) for body in payouts])
        wait_for(box.url, {"refunds.dead": 24, "payouts.dead": 16})
    yield None


HOLD = """\
import asyncio

from rabbitctl_retry import Message, subscriber


@subscriber("refunds")
async def hold(msg: Message) -> None:
    await asyncio.sleep(3600)  # a refund being processed: one delivery held, unacked
"""


@contextlib.contextmanager
def refunds_being_served(box: Box) -> Iterator[Between | None]:
    """docs/reference/cli.md's ``rr status``: the refunds topology, one consumer on
    ``refunds`` holding one delivery while two more wait, and one dead payout."""
    assert box.url is not None
    (box.work / "hold.py").write_text(HOLD)
    args = ("hold.py", "--topology", TOPOLOGY, "--prefetch", "1", "--shutdown-timeout", "1")
    with rr_running(box, *args):
        publish(
            box.url, "refunds", [(f"refunds-{i}", {"id": i, "card": "4111"}) for i in (1, 2, 3)]
        )
        publish(box.url, "payouts.dead", [("payouts-4", {"id": 4, "card": "5500"})])
        wait_for(box.url, {"refunds": (2, 1), "payouts.dead": 1})
        yield None


@contextlib.contextmanager
def three_dead_payouts(box: Box) -> Iterator[Between | None]:
    """docs/how-to/after-an-outage.md's purge: ``payouts.dead`` holds 3 messages."""
    assert box.url is not None
    declare(box.url, "payouts.dead")
    publish(box.url, "payouts.dead", [(f"payouts-{i}", {"id": i}) for i in (1, 2, 3)])
    yield None


def export_line(message_id: str, body: dict[str, Any]) -> str:
    raw = json.dumps(body).encode()
    return json.dumps(
        {
            "body": base64.b64encode(raw).decode(),
            "body_size": len(raw),
            "exchange": "",
            "routing_key": "payouts.dead",
            "redelivered": False,
            "properties": {
                "content_type": "application/json",
                "delivery_mode": 2,
                "message_id": message_id,
            },
            "headers": {},
        }
    )


@contextlib.contextmanager
def a_queue_that_fills_up(box: Box) -> Iterator[Between | None]:
    """docs/reference/dlq.md's stopped import: ``dead.jsonl`` holds 12 payouts; ``payouts`` takes 7
    (``x-max-length``, ``x-overflow = reject-publish``) and already holds 2, so the broker
    refuses line 6. Before the rerun a consumer has emptied ``payouts``."""
    url = box.url
    assert url is not None
    declare(url, "payouts", {"x-max-length": 7, "x-overflow": "reject-publish"})
    publish(url, "payouts", [("earlier-1", {"id": 0}), ("earlier-2", {"id": 0})])
    lines = [export_line(f"payouts-{i}", {"id": i}) for i in range(1, 13)]
    (box.work / "dead.jsonl").write_text("".join(f"{line}\n" for line in lines))

    def between(index: int) -> None:
        purge(url, "payouts")

    yield between


@contextlib.contextmanager
def nothing(box: Box) -> Iterator[Between | None]:
    """No state: the command only looks at the server."""
    yield None


@dataclass(frozen=True)
class Setup:
    """How a broker example's vhost is prepared."""

    prepare: Callable[[Box], contextlib.AbstractContextManager[Between | None]]
    server: str = "3.10"
    """The shared server it runs on (tests/shared_node.py)."""


SETUPS: dict[str, Setup] = {
    # docs/how-to/after-an-outage.md
    "rr dlq inspect refunds.dead --limit 2 --topology examples/refunds/topology.toml": Setup(
        after_the_outage
    ),
    "rr dlq inspect payouts.dead --summary": Setup(after_the_outage),
    "rr dlq groups refunds.dead payouts.dead": Setup(after_the_outage),
    "rr dlq export refunds.dead dead-refunds.jsonl": Setup(after_the_outage),
    "rr dlq replay --topology examples/refunds/topology.toml --dry-run": Setup(after_the_outage),
    "rr dlq replay payouts.dead --where reason=rejected --limit 3": Setup(after_the_outage),
    "rr dlq purge payouts.dead": Setup(three_dead_payouts),
    "rr dlq purge refunds.dead --where group=tmoh-815cd6564ca7 --yes": Setup(after_the_outage),
    # docs/reference/dlq.md, "Import"
    "rr dlq import dead.jsonl --to payouts": Setup(a_queue_that_fills_up),
    # docs/reference/cli.md
    "rr status --topology examples/refunds/topology.toml": Setup(refunds_being_served),
    "rr doctor --topology examples/refunds/topology.toml --url amqp://guest:guest@rabbit4/": Setup(
        nothing, server="4.0"
    ),
}
"""The broker setup of each broker example, by the text of its first command. A broker example
without one fails: add its setup here (or mark the block)."""


def censored(url: str) -> str:
    """``url`` as rr prints it: the password replaced by ``******``."""
    scheme, rest = url.split("://", 1)
    user_part, at, host_part = rest.rpartition("@")
    if not at:
        return url
    user = user_part.split(":", 1)[0]
    return f"{scheme}://{user}:******@{host_part}"


# --------------------------------------------------------------------------- shell


def run_shell(block: Block, plan: Plan, tmp_path: Path) -> None:
    """Each command in turn: exit code and the output the doc shows; a broker block in a
    fresh vhost prepared by its :data:`SETUPS` entry."""
    work = workdir(tmp_path)
    if not plan.broker:
        box = Box(work, clean_env())
        for command in plan.commands:
            check_command(block, command, box)
        return
    first = plan.commands[0].text
    setup = SETUPS.get(first)
    if setup is None:
        pytest.fail(
            f"{block.id}: no broker setup for {first!r}: add one to SETUPS in "
            "tests/docs/test_examples.py, or mark the block '<!-- example: needs REASON -->'"
        )
    with fresh_vhost(setup.server) as url:
        box = Box(work, clean_env(RR_URL=url), url)
        with setup.prepare(box) as between:
            for index, command in enumerate(plan.commands):
                if index and between is not None:
                    between(index)
                check_command(block, command, box)


def check_command(block: Block, command: Command, box: Box) -> None:
    """Run one command of ``block`` in ``box``; check its exit code and the output shown."""
    words = command.program_args
    env = {**box.env, **command.assignments}
    if words[0] == "rr":
        argv = [RR, *(locate_url(word, box) for word in words[1:])]
    else:
        argv = sandboxed(words, box)
    result = run(argv, box.work, env, answer=command.answer)
    where = f"{block.id}: {command.text}"
    if command.shows_error:
        assert result.returncode not in (0, 70), f"{where}: should fail\n{described(result)}"
    else:
        assert result.returncode == 0, f"{where}\n{described(result)}"
    output = result.stdout + result.stderr
    for actual, shown in box.shown_urls:
        output = output.replace(actual, shown)
    missing = missing_lines(command.output, output)
    assert not missing, (
        f"{where}: the doc shows lines rr did not print:\n"
        + "\n".join(missing)
        + f"\n\n{described(result)}"
    )
    if words[0] == "cp":
        assert filecmp.cmp(box.work / words[1], argv[-1], shallow=False), where


def locate_url(word: str, box: Box) -> str:
    """A broker URL of the doc becomes the test vhost's (rr's output shows the doc's again)."""
    if box.url is None or not re.match(r"amqps?://", word):
        return word
    box.shown_urls.append((censored(box.url), censored(word)))
    return box.url


def sandboxed(words: list[str], box: Box) -> list[str]:
    """``cp SOURCE... DEST`` with absolute paths and ``~`` moved into a temporary root (the
    destination's directory is made first, as it exists where the doc copies to)."""
    root = box.work.parent / "root"

    def moved(word: str) -> str:
        if word.startswith("~/"):
            return str(root / "home" / word[2:])
        if word.startswith("/"):
            return str(root / word.lstrip("/"))
        return word

    argv = [words[0], *(moved(word) for word in words[1:])]
    Path(argv[-1]).parent.mkdir(parents=True, exist_ok=True)
    return argv


# --------------------------------------------------------------------------- JSON


def run_export_line(block: Block, plan: Plan, tmp_path: Path) -> None:
    """An ``rr dlq export`` line: ``rr dlq import`` takes it into the queue it names, and
    ``rr dlq export`` gives back the same document."""
    document = json.loads(block.text)
    queue = document["routing_key"]
    (tmp_path / "one.jsonl").write_text(json.dumps(document) + "\n")
    with fresh_vhost("3.10") as url:
        declare(url, queue)
        env = clean_env(RR_URL=url)
        imported = run([RR, "dlq", "import", "one.jsonl", "--to", queue], tmp_path, env)
        assert imported.returncode == 0, described(imported)
        exported = run([RR, "dlq", "export", queue, "-"], tmp_path, env)
        assert exported.returncode == 0, described(exported)
    assert json.loads(exported.stdout) == document


RUNNERS: dict[Kind, Callable[[Block, Plan, Path], None]] = {
    Kind.PYTHON_HANDLERS: run_handlers,
    Kind.PYTHON_TESTS: run_tests,
    Kind.PYTHON_SCRIPT: run_script,
    Kind.TOPOLOGY: run_topology,
    Kind.PYTEST_CONFIG: run_pytest_config,
    Kind.EXPORT_LINE: run_export_line,
    Kind.SHELL: run_shell,
}


# --------------------------------------------------------------------------- the harness itself


def test_every_setup_belongs_to_an_example() -> None:
    """A setup whose command no doc shows any more is stale (the doc changed under it); a
    marked block may keep its setup for the day its marker goes."""
    shown = {
        found[0].text
        for block in EXAMPLES
        if block.language in {"", "sh", "bash", "console"} and (found := commands(block))
    }
    assert set(SETUPS) <= shown, set(SETUPS) - shown


def test_the_docs_have_examples_with_unique_ids() -> None:
    ids = [block.id for block in EXAMPLES]
    assert len(ids) == len(set(ids))
    assert {block.path for block in EXAMPLES} >= {
        "README.md",
        "docs/reference/dlq.md",
        "docs/how-to/test-a-service.md",
    }
