"""The move's choice per message (dlq/move.py), row by row of its module doc."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rabbitctl_retry.dlq.choice import Fail, Send, Skip
from rabbitctl_retry.dlq.filters import parse_all
from rabbitctl_retry.dlq.move import MovePlan, choose_move, to_problem
from rabbitctl_retry.fields import FieldValue

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
H = "x-ruststream-retry-count"
DEATH: dict[str, FieldValue] = {
    "queue": "refunds",
    "reason": "rejected",
    "count": 1,
    "exchange": "",
    "routing-keys": ["refunds"],
    "time": NOW,
}
HEADERS: dict[str, FieldValue] = {
    H: 3,
    "x-death": [DEATH],
    "x-first-death-queue": "refunds",
    "x-delivery-count": 2,
    "rr-origin-queue": "refunds",
    "rr-failed-at": "2024-05-01T11:00:00.000Z",
    "rr-error-type": "ValueError",
    "rr-error-message": "no",
    "CC": ["audit"],
    "BCC": ["hidden"],
    "x-tenant": "acme",
}


def plan(**changes: object) -> MovePlan:
    values: dict[str, object] = {"source": "refunds.dead", "to": "refunds.recheck"}
    values.update(changes)
    return MovePlan(**values)  # type: ignore[arg-type]


def test_every_header_moves_but_the_distribution_ones() -> None:
    choice = choose_move(plan(), HEADERS, NOW)
    assert choice == Send(
        to="refunds.recheck",
        headers={k: v for k, v in HEADERS.items() if k not in ("CC", "BCC")},
    )


def test_reset_retries_removes_the_retry_death_and_failure_headers() -> None:
    choice = choose_move(plan(reset_retries=True), HEADERS, NOW)
    assert choice == Send(to="refunds.recheck", headers={"x-tenant": "acme"})


def test_a_custom_retry_header_is_the_one_reset() -> None:
    headers: dict[str, FieldValue] = {"x-attempts": 2, H: 1}
    choice = choose_move(plan(reset_retries=True, retry_header="x-attempts"), headers, NOW)
    assert choice == Send(to="refunds.recheck", headers={H: 1})


def test_no_headers_move_as_none() -> None:
    assert choose_move(plan(), None, NOW) == Send(to="refunds.recheck", headers={})


@pytest.mark.parametrize(
    ("where", "moved"),
    [
        ("header.x-tenant=acme", True),
        ("header.x-tenant=other", False),
        ("origin=refunds", True),
        ("origin=payouts", False),
        ("age<1h", True),
        ("age>1h", False),
    ],
)
def test_where_decides_between_send_and_skip(where: str, moved: bool) -> None:
    choice = choose_move(plan(conditions=parse_all([where])), HEADERS, NOW)
    if moved:
        assert isinstance(choice, Send)
    else:
        assert choice == Skip("does not match --where")


def test_an_undecodable_message_moves_byte_for_byte() -> None:
    choice = choose_move(plan(), None, NOW, ("timestamp",))
    assert choice == Send(to="refunds.recheck", headers={}, verbatim=True)


@pytest.mark.parametrize(
    ("changes", "needs"),
    [
        ({"conditions": parse_all(["header.x-tenant=acme"])}, "--where"),
        ({"reset_retries": True}, "--reset-retries"),
    ],
)
def test_an_undecodable_message_fails_when_it_must_be_read(
    changes: dict[str, object], needs: str
) -> None:
    choice = choose_move(plan(**changes), None, NOW, ("timestamp", "headers"))
    assert choice == Fail(
        f"its properties cannot be decoded (timestamp, headers), and {needs} needs them; move "
        "it without --where and --reset-retries to send it byte for byte",
        to="refunds.recheck",
    )


@pytest.mark.parametrize(
    ("to", "problem"),
    [
        ("refunds.recheck", None),
        (
            "refunds.dead",
            "--to 'refunds.dead' is the queue this command moves from; choose another queue",
        ),
        ("", "--to '' is 0 bytes, not a queue name RabbitMQ accepts (1 to 255 bytes)"),
        ("é" * 127 + "x", None),  # 255 bytes
    ],
)
def test_the_target_must_be_another_valid_queue_name(to: str, problem: str | None) -> None:
    assert to_problem("refunds.dead", to) == problem


def test_a_target_name_over_255_bytes_is_refused() -> None:
    problem = to_problem("refunds.dead", "é" * 128)
    assert problem is not None
    assert "is 256 bytes, not a queue name RabbitMQ accepts" in problem
