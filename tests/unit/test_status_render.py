"""``rr status``'s pure parts (docs/reference/cli.md, "rr status"): the table and the JSON of one
reading, with and without a management API, a ``--watch`` frame's heading, and which
topology file a bare ``rr status`` shows."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta, timezone

import pytest
from rich.console import Console

from rabbitctl_retry.cli.finish import Unwrapped
from rabbitctl_retry.cli.status_render import (
    NO_MANAGEMENT_LINE,
    Reading,
    heading,
    prefetch_text,
    rate_text,
    status_document,
    status_outcome,
    timestamp,
    type_of,
)
from rabbitctl_retry.ops.status import QueueStatus
from rabbitctl_retry.server import QueueActivity
from rabbitctl_retry.topology.expand import QueueEntity

AT = datetime(2026, 12, 4, 1, 33, 12, 345_000, tzinfo=UTC)

WORK = QueueEntity(name="work", arguments={"x-queue-type": "quorum"}, role="quorum queue")


def activity(name: str, kind: str, **values: object) -> QueueActivity:
    fields: dict[str, object] = {
        "ready": 1,
        "unacked": 2,
        "prefetches": (),
        "publish_per_s": None,
        "deliver_per_s": None,
    }
    fields.update(values)
    return QueueActivity(name=name, kind=kind, **fields)  # type: ignore[arg-type]


STATUSES = [
    QueueStatus(WORK, True, 4, 2, kind="quorum"),
    QueueStatus(QueueEntity(name="named"), False, 1, 0, kind="stream"),
    QueueStatus(QueueEntity(name="locked"), False, 0, 1),
    QueueStatus(QueueEntity(name="gone"), False, None, None),
]


def printed(reading: Reading, *, watch_s: float | None = None) -> str:
    outcome = status_outcome(reading, watch_s=watch_s)
    assert outcome.table is not None
    out = io.StringIO()
    console = Console(file=out, width=200, markup=False, highlight=False, soft_wrap=False)
    for piece in outcome.table():
        if isinstance(piece, Unwrapped):
            console.print(piece.text, soft_wrap=True)
        elif piece == "":
            console.print()
        else:
            console.print(piece)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def test_without_a_management_api_its_columns_are_left_out_and_a_line_says_how() -> None:
    assert printed(Reading(STATUSES, read_at=AT)) == "\n".join(
        [
            "queue  ┃ type   ┃ messages ┃ consumers ┃ state   ┃ role",
            "━━━━━━━╇━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━",
            "work   │ quorum │ 4        │ 2         │ ok      │ quorum queue",
            "named  │ stream │ 1        │ 0         │ exists  │",
            "locked │ ?      │ 0        │ 1         │ exists  │",
            "gone   │ -      │ -        │ -         │ missing │",
            "4 queue(s); 1 not as expected",
            NO_MANAGEMENT_LINE,
        ]
    )


def test_with_a_management_api_unacked_prefetch_and_rates() -> None:
    statuses = [
        QueueStatus(
            WORK,
            True,
            4,
            3,
            kind="quorum",
            activity=activity(
                "work", "quorum", prefetches=(0, 10, 10), publish_per_s=12.25, deliver_per_s=0.0
            ),
        ),
        QueueStatus(QueueEntity(name="idle"), False, 0, 0, kind="classic"),
        QueueStatus(QueueEntity(name="gone"), False, None, None),
    ]
    assert printed(Reading(statuses, read_at=AT, management=True)) == "\n".join(
        [
            "queue ┃ type    ┃ messages ┃ unacked ┃ consumers ┃ prefetch      ┃ publish/s ┃ "
            "deliver/s ┃ state   ┃ role",
            "━━━━━━╇━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━━━━━━━╇━━━━━━━━━━━╇"
            "━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━",
            "work  │ quorum  │ 4        │ 2       │ 3         │ unlimited, 10 │ 12.2      │ "
            "0.0       │ ok      │ quorum queue",
            "idle  │ classic │ 0        │ -       │ 0         │ -             │ -         │ "
            "-         │ exists  │",
            "gone  │ -       │ -        │ -       │ -         │ -             │ -         │ "
            "-         │ missing │",
            "3 queue(s); 1 not as expected",
        ]
    )


def test_a_watch_frame_starts_with_its_time_and_ends_with_an_empty_line() -> None:
    lines = printed(Reading(STATUSES[:1], read_at=AT), watch_s=2.5).split("\n")
    assert lines[0] == "rr status at 2026-12-04T01:33:12.345Z (every 2.5 s; Ctrl-C ends)"
    assert lines[1].startswith("queue ")
    assert lines[-2:] == [NO_MANAGEMENT_LINE, ""]
    outcome = status_outcome(Reading(STATUSES, read_at=AT), watch_s=2.5)
    assert (outcome.code, outcome.one_line, outcome.clear) == (0, True, True)
    assert outcome.tsv_title == lines[0]  # -o tsv: the reading's section is under its time
    later = status_outcome(Reading(STATUSES[:1], read_at=AT), watch_s=2.5, first=False)
    assert later.table is not None
    assert NO_MANAGEMENT_LINE not in list(later.table())  # said under the first reading only
    assert status_outcome(Reading(STATUSES, read_at=AT)).tsv_title is None
    assert status_outcome(Reading(STATUSES, read_at=AT)).code == 1


def test_the_json_document_states_what_is_known_and_null_for_the_rest() -> None:
    statuses = [
        QueueStatus(
            WORK,
            True,
            4,
            1,
            kind="quorum",
            activity=activity("work", "quorum", prefetches=(5,), publish_per_s=1.5),
        ),
        *STATUSES[1:],
    ]
    document = status_document(Reading(statuses, read_at=AT, management=True))
    assert document["read_at"] == "2026-12-04T01:33:12.345Z"
    assert document["ok"] is False
    rows = {
        queue["name"]: (
            queue["type"],
            queue["messages"],
            queue["unacked"],
            queue["consumers"],
            queue["prefetch"],
            queue["publish_per_s"],
            queue["deliver_per_s"],
        )
        for queue in document["queues"]
    }
    assert rows == {
        "work": ("quorum", 4, 2, 1, [5], 1.5, None),
        "named": ("stream", 1, None, 0, None, None, None),
        "locked": (None, 0, None, 1, None, None, None),
        "gone": (None, None, None, None, None, None, None),
    }


def test_a_queue_of_the_file_shows_the_file_type_until_the_broker_says() -> None:
    assert type_of(QueueStatus(WORK, True, None, None)) == "quorum"
    assert type_of(QueueStatus(QueueEntity(name="plain"), True, 0, 0)) == "classic"
    assert type_of(QueueStatus(QueueEntity(name="plain"), True, 0, 0, kind="stream")) == "stream"


@pytest.mark.parametrize(
    ("rate", "text"), [(None, "-"), (0.0, "0.0"), (0.04, "0.0"), (1234.56, "1,234.6")]
)
def test_rates_show_one_decimal(rate: float | None, text: str) -> None:
    assert rate_text(rate) == text


@pytest.mark.parametrize(
    ("prefetches", "text"),
    [((), ""), ((0,), "unlimited"), ((10, 1, 10), "1, 10"), ((2000,), "2,000")],
)
def test_prefetch_shows_each_distinct_count(prefetches: tuple[int, ...], text: str) -> None:
    assert prefetch_text(prefetches) == text


def test_timestamps_are_utc_iso_8601_to_the_millisecond() -> None:
    paris = timezone(timedelta(hours=1))
    assert timestamp(datetime(2026, 12, 4, 2, 0, 0, 5_000, tzinfo=paris)) == (
        "2026-12-04T01:00:00.005Z"
    )
    assert heading(Reading([], read_at=AT), 5.0) == (
        "rr status at 2026-12-04T01:33:12.345Z (every 5 s; Ctrl-C ends)"
    )


def test_a_locked_queue_exists_but_its_numbers_are_not_known() -> None:
    """An exclusive queue of another connection: the broker refuses every look at it over
    AMQP; one of the file cannot be compared, so it is not as expected."""
    named = QueueStatus(QueueEntity(name="private"), False, None, None, locked=True)
    listed = QueueStatus(WORK, True, None, None, locked=True)
    document = status_document(Reading([named, listed], read_at=AT))
    assert [
        (q["name"], q["type"], q["present"], q["locked"], q["messages"], q["matches"])
        for q in document["queues"]
    ] == [
        ("private", None, True, True, None, None),
        ("work", None, True, True, None, None),  # the broker's type is not known
    ]
    assert [q["file_type"] for q in document["queues"]] == [None, "quorum"]
    assert (named.ok, listed.ok, document["ok"]) == (True, False, False)
    assert type_of(named) == "?"
    assert printed(Reading([named, listed], read_at=AT)).split("\n")[2:4] == [
        "private │ ?      │ -        │ -         │ locked: exclusive to another connection │",
        "work    │ quorum │ -        │ -         │ locked: exclusive to another connection │ "
        "quorum queue",
    ]
