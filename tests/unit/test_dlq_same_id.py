"""Pure: dlq/same_id.py, how an edit finds the very letter that was read: its place among the
letters with its id and its checksums (docs/reference/dlq.md, "Edit and retry")."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from rabbitctl_retry.dlq.choice import Skip, Stop
from rabbitctl_retry.dlq.report import TransferReport
from rabbitctl_retry.dlq.same_id import NOT_THE_ONE, Checksums, LetterPick, checksums
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Delivery, Properties

WHEN = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def letter(
    message_id: str = "m-1",
    body: bytes = b'{"n": 1}',
    headers: dict[str, FieldValue] | None = None,
    **properties: object,
) -> Delivery:
    table = {"rr-origin-queue": "refunds", "x-death": [{"count": 1, "time": WHEN}]}
    given = {"content_type": "application/json", "timestamp": WHEN, **properties}
    return Delivery(
        body=body,
        properties=Properties(
            message_id=message_id,
            headers=table if headers is None else headers,
            **given,  # type: ignore[arg-type]
        ),
    )


def with_headers(delivery: Delivery, **more: FieldValue) -> Delivery:
    headers = {**(delivery.properties.headers or {}), **more}
    return dataclasses.replace(
        delivery, properties=dataclasses.replace(delivery.properties, headers=headers)
    )


def test_the_counts_a_read_raises_and_the_order_of_headers_are_not_the_letter() -> None:
    read = letter()
    again = with_headers(read, **{"x-delivery-count": 3, "x-acquired-count": 4})
    assert checksums(again) == checksums(read)
    reordered = letter(headers=dict(reversed(list((read.properties.headers or {}).items()))))
    assert checksums(reordered) == checksums(read)
    assert dataclasses.replace(read, redelivered=True, delivery_tag=9) is not read
    assert checksums(dataclasses.replace(read, redelivered=True, delivery_tag=9)) == checksums(read)


@pytest.mark.parametrize(
    ("changed", "parts"),
    [
        (letter(body=b'{"n": 1} '), ("body",)),
        (letter(body=b'{"n": 1.0}'), ("body",)),
        (letter(correlation_id="c"), ("properties",)),
        (letter(content_type="text/plain"), ("properties",)),
        (letter(timestamp=WHEN.replace(second=1)), ("properties",)),
        (with_headers(letter(), **{"x-tenant": "globex"}), ("headers",)),
        (with_headers(letter(), **{"rr-origin-queue": b"refunds"}), ("headers",)),  # a type
        (letter(headers={}), ("headers",)),
        (with_headers(letter(body=b"{}"), a=1), ("body", "headers")),
    ],
)
def test_what_differs_is_named(changed: Delivery, parts: tuple[str, ...]) -> None:
    assert checksums(letter()).changed(checksums(changed)) == parts


def test_checksums_are_written_and_read_back() -> None:
    sums = checksums(letter())
    assert Checksums.parse(str(sums)) == sums
    for text in ("", "abc", str(sums) + ".00", str(sums).upper(), str(sums)[:-1] + "g"):
        assert Checksums.parse(text) is None


def test_the_letter_read_is_taken_and_every_other_left() -> None:
    shown = letter("m-1", b"second")
    queue = [letter("m-1", b"first"), letter("m-2"), shown, letter("m-1", b"third")]
    pick: LetterPick[Delivery] = LetterPick("m-1", 2, checksums(shown))
    answers = [pick(delivery) for delivery in queue]
    assert answers == [Skip(NOT_THE_ONE), Skip(NOT_THE_ONE), None, Skip(NOT_THE_ONE)]
    assert pick.letter is shown
    assert pick.position == 3
    assert pick.problem() is None


def test_the_letter_at_its_place_changed_stops_the_run_there() -> None:
    """A colleague's fix of the letter failed back into the queue: the first letter with the
    id is now the fix (other headers, the same body)."""
    shown = letter("m-1")
    fixed = with_headers(shown, **{"x-tenant": "globex", "rr-edited-at": "2026-12-03"})
    pick: LetterPick[Delivery] = LetterPick("m-1", 1, checksums(shown))
    assert pick(letter("m-2")) == Skip(NOT_THE_ONE)
    answer = pick(fixed)
    assert isinstance(answer, Stop)
    assert answer.reason == (
        "the letter is not the one read: its headers changed since (found at #2 of the queue)"
    )
    assert pick.problem() == answer.reason
    assert pick.letter is None
    assert pick(shown) == Skip(NOT_THE_ONE)  # the search ended at its place


def test_of_two_letters_with_one_id_the_other_is_not_taken_for_the_one_read() -> None:
    first, second = letter("m-1", b"first"), letter("m-1", b"second")
    pick: LetterPick[Delivery] = LetterPick("m-1", 1, checksums(first))
    assert isinstance(pick(second), Stop)  # the first went: the second is not it
    assert pick.changed == ("body",)
    gone: LetterPick[Delivery] = LetterPick("m-1", 2, checksums(second))
    assert gone(second) == Skip(NOT_THE_ONE)  # now the only one: not the 2nd
    assert gone.problem() == (
        "the letter #2 with id 'm-1' is not in the queue any more (1 with this id among 1 "
        "read): it was taken or changed since it was read"
    )


def test_a_look_reads_up_to_the_letter_and_no_further() -> None:
    shown = letter("m-1")
    pick: LetterPick[Delivery] = LetterPick("m-1", 1, checksums(shown))
    assert pick.look(letter("m-2")) is True
    assert pick.look(with_headers(shown, **{"x-delivery-count": 1})) is False
    assert pick.letter is not None
    assert pick.read == 2


def test_a_run_refused_for_the_letter_only_when_it_is_not_there_as_read() -> None:
    shown = letter("m-1")
    ended = TransferReport(source="dead", dry_run=False, in_queue=1, examined=1)
    taken: LetterPick[Delivery] = LetterPick("m-1", 1, checksums(shown))
    taken(shown)
    assert taken.refused(ended) is None
    changed: LetterPick[Delivery] = LetterPick("m-1", 1, checksums(shown))
    stop = changed(with_headers(shown, a=1))
    assert isinstance(stop, Stop)
    assert changed.refused(dataclasses.replace(ended, stopped=stop.reason)) == stop.reason
    gone: LetterPick[Delivery] = LetterPick("m-1", 1, checksums(shown))
    gone(letter("m-2"))
    assert gone.refused(ended) == gone.problem()
    # a run cut short, or one no letter came to, says so itself
    assert gone.refused(dataclasses.replace(ended, interrupted="connection lost")) is None
    idle = dataclasses.replace(ended, stopped="no dead letter came for 5 s after 1")
    assert gone.refused(idle) is None
