"""``rr dlq replay`` against hostile dead letters and careless options
(docs/how-to/after-an-outage.md, "When something does not go back", "When the broker refuses", "When
an option is wrong"): a poison letter at the head of the queue fails alone, a wait queue is never a
target, a read-only user is exit 77 with the queue untouched, and every wrong option is one error
line, exit 2, before anything is read. On RabbitMQ and the emulator unless a test says otherwise."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit
from uuid import uuid4

import pytest
from typer.testing import Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.dlq.choice import Fail
from rabbitctl_retry.dlq.replay import ReplayPlan, choose, replay_headers
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, RabbitBackend
from tests.contract.versions import expected
from tests.dlq.support import declare, json_of, publish_all, rr, runner
from tests.hostile.output import one_error_line
from tests.observe import depth, peek
from tests.shared_node import ctl_command, current

NOWHERE = "amqp://guest:guest@127.0.0.1:1/"
"""A URL nothing listens on: a command that tried to connect would exit 69, not 2."""


async def ids_in(backend: Backend, queue: str) -> list[str | None]:
    return [delivery.properties.message_id for delivery in await peek(backend, queue)]


def letter(message_id: str, headers: dict[str, FieldValue]) -> tuple[bytes, Properties]:
    return message_id.encode(), Properties(message_id=message_id, headers=headers)


GOOD = [letter(f"g{n}", {"rr-origin-queue": "orders"}) for n in range(50)]
GOOD_IDS = [f"g{n}" for n in range(50)]


def summary_line(stdout: str) -> str:
    return next(text for text in stdout.splitlines() if text.startswith(("replayed ", "would ")))


# --------------------------------------------------------- poison at the head of the queue


@dataclass(frozen=True)
class Poison:
    name: str
    headers: dict[str, FieldValue]
    fails: bool
    """Reported failed and left in the DLQ (else replayed like any other letter)."""
    reason: str = ""


POISONS = [
    Poison("origin 300 bytes", {"rr-origin-queue": "o" * 300}, True, "is 300 bytes"),
    Poison(
        "origin a wait queue",
        {"rr-origin-queue": "orders.retry"},
        True,
        "its origin 'orders.retry' is a wait queue",
    ),
    Poison(
        "x-death only in a wait queue",
        {"x-death": [{"queue": "orders.retry.30s", "reason": "expired", "count": 1}]},
        True,
        "its origin 'orders.retry.30s' is a wait queue",
    ),
    # a malformed count counts as 0 (docs/reference/dlq.md, step 5): replayed, rr-replayed-count = 1
    Poison("replayed count ²", {"rr-origin-queue": "orders", "rr-replayed-count": "²"}, False),
    Poison(
        "replayed count 5,000 digits",
        {"rr-origin-queue": "orders", "rr-replayed-count": "9" * 5000},
        False,
    ),
    Poison(
        "replayed count 2^63-1",
        {"rr-origin-queue": "orders", "rr-replayed-count": 2**63 - 1},
        False,
    ),
]


@pytest.mark.parametrize("poison", POISONS, ids=[poison.name for poison in POISONS])
async def test_a_poison_letter_at_the_head_never_holds_back_50_good_ones(
    backend: Backend, poison: Poison
) -> None:
    await declare(backend, "dead", "orders", "orders.retry", "orders.retry.30s")
    await publish_all(backend, "dead", [letter("poison", poison.headers), *GOOD])

    result = await rr(backend, "dlq", "replay", "dead", "--yes")

    home = Counter(await ids_in(backend, "orders"))
    if poison.fails:
        assert result.exit_code == 3, result.output
        assert summary_line(result.stdout) == (
            "replayed 50 of 51 dead letters read from 'dead' (51 there at the start): "
            "0 skipped, 1 failed, in " + summary_line(result.stdout).split(", in ")[1]
        )
        assert poison.reason in result.stdout
        assert "failed dead letters are still in the dead-letter queue" in result.stdout
        assert await ids_in(backend, "dead") == ["poison"]
        assert home == Counter(GOOD_IDS)
    else:
        assert result.exit_code == 0, result.output
        assert summary_line(result.stdout).startswith(
            "replayed 51 of 51 dead letters read from 'dead' (51 there at the start): "
            "0 skipped, 0 failed"
        )
        assert await ids_in(backend, "dead") == []
        assert home == Counter(["poison", *GOOD_IDS])
        copy = next(d for d in await peek(backend, "orders") if d.properties.message_id == "poison")
        assert (copy.properties.headers or {})["rr-replayed-count"] == 1
    assert await depth(backend, "orders.retry") == 0
    assert await depth(backend, "orders.retry.30s") == 0

    again = await rr(backend, "dlq", "replay", "dead", "--yes", "-o", "json")

    document = json_of(again)
    if poison.fails:
        assert again.exit_code == 1
        assert (document["replayed"], document["skipped"], document["failed"]) == (0, 0, 1)
        assert poison.reason in document["results"][0]["reason"]
        assert await ids_in(backend, "dead") == ["poison"]
    else:
        assert again.exit_code == 0
        assert document["results"] == []
    assert Counter(await ids_in(backend, "orders")) == home  # no duplicates


# --------------------------------------------------------- wait queues are never a target


async def test_a_wait_queue_is_never_a_target(backend: Backend, tmp_path: Path) -> None:
    await declare(backend, "dead", "orders", "orders.retry", "orders.retry.5m", "legacy.retry")
    rejected = {"queue": "orders", "reason": "rejected", "count": 1}
    letters = [
        letter("wait-origin", {"rr-origin-queue": "orders.retry"}),
        letter("wait-origin-bytes", {"rr-origin-queue": b"orders.retry.5m"}),
        letter("wait-then-x-death", {"rr-origin-queue": "orders.retry", "x-death": [rejected]}),
        letter("only-wait-deaths", {"x-death": [{"queue": "orders.retry", "reason": "expired"}]}),
        letter("legacy", {"rr-origin-queue": "legacy.retry"}),
    ]
    await publish_all(backend, "dead", letters)
    topology = tmp_path / "topology.toml"
    topology.write_text('[queues.orders]\n[queues."legacy.retry"]\n', encoding="utf-8")

    plain = json_of(await rr(backend, "dlq", "replay", "dead", "--dry-run", "-o", "json"))

    assert [(r["message_id"], r["to"], r["outcome"]) for r in plain["results"]] == [
        ("wait-origin", None, "failed"),
        ("wait-origin-bytes", None, "failed"),
        ("wait-then-x-death", "orders", "replayed"),
        ("only-wait-deaths", None, "failed"),
        ("legacy", None, "failed"),
    ]
    assert plain["results"][0]["reason"] == (
        "its origin 'orders.retry' is a wait queue, and rr never replays into one (the copy "
        "would only come back after the delay); pass --to QUEUE"
    )

    # a topology that declares legacy.retry as a queue of its own makes it a target
    result = await rr(backend, "dlq", "replay", "dead", "-t", str(topology), "--yes", "-o", "json")

    assert result.exit_code == 3, result.output
    document = json_of(result)
    assert (document["replayed"], document["failed"]) == (2, 3)
    assert await ids_in(backend, "orders") == ["wait-then-x-death"]
    assert await ids_in(backend, "legacy.retry") == ["legacy"]
    assert await depth(backend, "orders.retry") == 0
    assert await depth(backend, "orders.retry.5m") == 0
    assert await ids_in(backend, "dead") == ["wait-origin", "wait-origin-bytes", "only-wait-deaths"]


async def test_a_dry_run_reports_what_the_run_does_with_an_origin_rr_cannot_send(
    backend: Backend,
) -> None:
    """An ``rr-origin-queue`` holding ESC (or ``!``): the dry run exited 65 ("cannot encode")
    with no report while the run replayed the others and failed that one. Both now fail it
    alone, for the same reason, and replay the rest."""
    await declare(backend, "dead", "orders")
    letters = [
        letter("good-1", {"rr-origin-queue": "orders"}),
        letter("escape", {"rr-origin-queue": "orders\x1b[31m"}),
        letter("bang", {"rr-origin-queue": "orders!"}),
        letter("good-2", {"rr-origin-queue": "orders"}),
    ]
    await publish_all(backend, "dead", letters)

    looked = await rr(backend, "dlq", "replay", "dead", "--dry-run", "-o", "json")
    done = await rr(backend, "dlq", "replay", "dead", "--yes", "-o", "json")

    assert (looked.exit_code, done.exit_code) == (3, 3), looked.output + done.output
    outcomes = [
        [(r["message_id"], r["outcome"], r["reason"]) for r in json_of(result)["results"]]
        for result in (looked, done)
    ]
    assert outcomes[0] == outcomes[1]
    assert [(message_id, outcome) for message_id, outcome, _ in outcomes[1]] == [
        ("good-1", "replayed"),
        ("escape", "failed"),
        ("bang", "failed"),
        ("good-2", "replayed"),
    ]
    assert outcomes[1][1][2] == (
        "its origin queue name holds U+001B; a queue name rr can send holds only letters, "
        "digits, - _ . : @ # , / + space and non-ASCII characters; pass --to QUEUE"
    )
    assert await ids_in(backend, "orders") == ["good-1", "good-2"]
    assert await ids_in(backend, "dead") == ["escape", "bang"]


# --------------------------------------------------------- --limit counts what it attempts


async def test_limit_counts_failures_in_the_first_n(backend: Backend) -> None:
    await declare(backend, "dead", "orders")
    letters = [
        letter("no-origin", {"x-tenant": "acme"}),
        letter("other", {"rr-origin-queue": "orders", "x-tenant": "other"}),  # skipped
        letter("ghost", {"rr-origin-queue": "ghost", "x-tenant": "acme"}),  # returned
        letter("g0", {"rr-origin-queue": "orders", "x-tenant": "acme"}),
        letter("g1", {"rr-origin-queue": "orders", "x-tenant": "acme"}),
        letter("g2", {"rr-origin-queue": "orders", "x-tenant": "acme"}),
    ]
    await publish_all(backend, "dead", letters)
    where = ["--where", "header.x-tenant=acme", "--limit", "3", "-o", "json"]

    looked = await rr(backend, "dlq", "replay", "dead", *where, "--dry-run")
    result = await rr(backend, "dlq", "replay", "dead", *where, "--yes")

    for run in (looked, result):
        assert run.exit_code == 3, run.output
        document = json_of(run)
        assert [(r["message_id"], r["outcome"]) for r in document["results"]] == [
            ("no-origin", "failed"),
            ("other", "skipped"),
            ("ghost", "failed"),
            ("g0", "replayed"),
        ]
    assert await ids_in(backend, "orders") == ["g0"]
    assert await ids_in(backend, "dead") == ["no-origin", "other", "ghost", "g1", "g2"]
    # without --where "other" is attempted too: the first two are a failure and a copy
    table = await rr(backend, "dlq", "replay", "dead", "--limit", "2", "--yes")
    assert table.exit_code == 3, table.output
    assert summary_line(table.stdout).startswith(
        "replayed 1 of 2 dead letters read from 'dead' (5 there at the start): 0 skipped, 1 failed"
    )
    assert (
        "stopped early: --limit 2 reached (2 attempted: failed ones count, skipped ones not)"
        in table.stdout
    )
    assert await ids_in(backend, "orders") == ["g0", "other"]
    assert await ids_in(backend, "dead") == ["no-origin", "ghost", "g1", "g2"]


def test_a_reason_never_says_pass_to_when_to_was_given() -> None:
    headers: dict[str, FieldValue] = {"rr-origin-queue": "orders"}
    now = datetime.now(UTC)
    same = choose(ReplayPlan(source="dead", run_id="r", to="dead"), headers, now)
    long = choose(ReplayPlan(source="dead", run_id="r", to="x" * 300), headers, now)
    assert same == Fail("--to 'dead' is the dead-letter queue itself; choose another queue", "dead")
    assert isinstance(long, Fail)
    assert long.reason == ("--to is 300 bytes, not a queue name RabbitMQ accepts (1 to 255 bytes)")
    origin_is_source = choose(
        ReplayPlan(source="dead", run_id="r"), {"rr-origin-queue": "dead"}, now
    )
    assert isinstance(origin_is_source, Fail)
    assert origin_is_source.reason.endswith("; pass --to QUEUE")


# --------------------------------------------------------- careless options: exit 2, one line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--rate", "inf"], "rr: error: --rate 'inf': give the messages per second as a finite"),
        (["--rate", "nan"], "rr: error: --rate 'nan': "),
        (["--rate", "1e400"], "rr: error: --rate '1e400': "),
        (["--rate=-5"], "rr: error: --rate '-5': "),
        (["--rate", "0"], "rr: error: --rate '0': "),
        (["--rate", "fast"], "rr: error: --rate 'fast': "),
        (["--rate", "١٢"], "rr: error: --rate '١٢': "),
        (["--ramp", "60"], "rr: error: --ramp '60' needs --rate, the rate it climbs to"),
        (["--rate", "10", "--ramp", "0"], "rr: error: --ramp '0': give the seconds the rate"),
        (["--rate", "10", "--ramp", "inf"], "rr: error: --ramp 'inf': "),
        (["--rate", "10", "--ramp", "1e400"], "rr: error: --ramp '1e400': "),
        (["--rate", "10", "--ramp", "86401"], "rr: error: --ramp '86401': "),
        (
            ["--where", "reason==rejected"],
            "rr: error: --where 'reason==rejected': unknown operator '=='",
        ),
        (["--where", "origin=>x"], "rr: error: --where 'origin=>x': unknown operator '=>'"),
        (["--where", "age=>1h"], "rr: error: --where 'age=>1h': unknown operator '=>'"),
        (["--where", "reason=x"], "rr: error: --where 'reason=x': unknown reason 'x'; a dead"),
        (["--where", "reason=Rejected"], "rr: error: --where 'reason=Rejected': unknown reason"),
        (["--where", "colour=red"], "rr: error: --where 'colour=red': unknown key 'colour'"),
        (
            ["--where", "origin\x1b[31m=x"],
            "rr: error: --where 'origin\\x1b[31m=x': not an expression",
        ),
        (["--to", "dead"], "rr: error: --to 'dead' is a dead-letter queue this command replays"),
        (["--to", "q" * 300], "rr: error: --to 'qqqq"),
        (["--to", ""], "rr: error: --to '' is 0 bytes, not a queue name RabbitMQ accepts"),
        (["--limit", "0"], "rr: error: rr dlq replay: --limit must be at least 1 (see"),
    ],
)
def test_a_careless_option_is_one_error_line_and_exit_2(args: list[str], expected: str) -> None:
    result = runner.invoke(app, ["dlq", "replay", "dead", *args, "--yes", "--url", NOWHERE])

    assert result.exit_code == 2, result.output
    assert one_error_line(result.stderr).startswith(expected)
    assert result.stdout == ""


def test_where_accepts_every_reason_rabbitmq_and_rr_give() -> None:
    for reason in ("delivery_limit", "rejected", "expired", "maxlen", "max_attempts"):
        result = runner.invoke(
            app, ["dlq", "replay", "dead", "--where", f"reason={reason}", "--yes", "--url", NOWHERE]
        )
        assert result.exit_code == 69, result.output  # past the options: it tried to connect


async def test_a_careless_option_moves_nothing(backend: Backend) -> None:
    await declare(backend, "dead", "orders")
    await publish_all(backend, "dead", GOOD[:3])
    for args in (
        ["--rate", "inf"],
        ["--ramp", "60"],
        ["--where", "reason==rejected"],
        ["--to", "dead"],
    ):
        result = await rr(backend, "dlq", "replay", "dead", *args, "--yes")
        assert result.exit_code == 2, result.output
    assert await ids_in(backend, "dead") == GOOD_IDS[:3]
    assert await depth(backend, "orders") == 0


# --------------------------------------------------------- a copy goes to its target only


async def test_a_cc_header_never_sends_the_copy_elsewhere(backend: Backend) -> None:
    await declare(backend, "dead", "orders")
    await publish_all(
        backend, "dead", [letter("cc", {"rr-origin-queue": "orders", "CC": ["audit"]})]
    )
    await declare(backend, "audit")  # after the dead letter's own publish: it did not go there

    result = await rr(backend, "dlq", "replay", "dead", "--yes")

    assert result.exit_code == 0, result.output
    assert await ids_in(backend, "orders") == ["cc"]
    assert await depth(backend, "audit") == 0
    assert await depth(backend, "dead") == 0
    copy_headers = replay_headers(
        {"CC": ["a"], "BCC": ["b"], "x-tenant": "acme"},
        retry_header="x-ruststream-retry-count",
        run_id="r",
        now=datetime.now(UTC),
    )
    assert set(copy_headers) == {"x-tenant", "rr-replayed-count", "rr-replayed-at", "rr-replay-run"}


# --------------------------------------------------------- a user who may read but not write


@dataclass(frozen=True)
class ReadOnly:
    guest: RabbitBackend
    """guest, who may do everything in the vhost."""
    url: str
    """The read-only user's URL."""
    password: str


def _ctl(*args: str) -> None:
    subprocess.run(ctl_command("-q", *args), check=True, capture_output=True, timeout=60)


@pytest.fixture
def read_only(amqp_url: str) -> Iterator[ReadOnly]:
    """A fresh vhost where guest may do everything and a new user may only read."""
    guest = RabbitBackend(amqp_url)
    guest.setup()
    user = f"rr-ro-{uuid4().hex[:10]}"
    password = f"pw-{uuid4().hex}"
    parts = urlsplit(guest.url)
    host = f"{parts.hostname}:{parts.port or 5672}"
    try:
        _ctl("add_user", user, password)
        try:
            _ctl("set_permissions", "-p", guest.vhost, user, "", "", ".*")
            url = urlunsplit(("amqp", f"{user}:{password}@{host}", parts.path, "", ""))
            yield ReadOnly(guest=guest, url=url, password=password)
        finally:
            _ctl("delete_user", user)
    finally:
        _ctl("delete_vhost", guest.vhost)


def _invoke(*args: str) -> Result:
    return runner.invoke(app, list(args))


async def test_a_read_only_user_is_exit_77_and_the_queue_is_untouched(read_only: ReadOnly) -> None:
    """RabbitMQ only: the emulator has no users. The copy's publish is refused (403
    ACCESS_REFUSED closes the channel); the run stops there, exact, and removes nothing."""
    guest = read_only.guest
    await declare(guest, "dead", "orders")
    await publish_all(guest, "dead", GOOD[:20])

    table = await asyncio.to_thread(
        _invoke, "dlq", "replay", "dead", "--yes", "--url", read_only.url
    )
    as_json = await asyncio.to_thread(
        _invoke, "dlq", "replay", "dead", "--yes", "-o", "json", "--url", read_only.url
    )
    assert as_json.exit_code == 77, as_json.output
    document = json.loads(as_json.stdout)

    assert table.exit_code == 77, table.output
    error = one_error_line(table.stderr)
    refused = expected(current().version, "access-refused-publish")
    assert error.startswith(
        "rr: error: replay of 'dead' refused: publish to the default exchange with routing key "
        f"'orders': {refused} 'amq.default' in vhost"
    )
    assert error.endswith("(403); nothing was replayed, every dead letter is still there")
    assert read_only.password not in table.output
    assert "nothing is in two places" in table.stdout
    assert "possible duplicate" not in table.stdout
    assert (document["replayed"], document["failed"]) == (0, 1)
    assert document["skipped"] == len(document["results"]) - 1
    assert document["results"][0]["message_id"] == "g0"
    assert "it reached no queue; the dead letter stays" in document["results"][0]["reason"]
    assert all("possible duplicate" not in (r["reason"] or "") for r in document["results"])
    assert await ids_in(guest, "dead") == GOOD_IDS[:20]
    assert await depth(guest, "orders") == 0
