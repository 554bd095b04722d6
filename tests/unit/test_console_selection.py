"""Pure: letters selected by hand on a group's letters page (console/selection.py): the form
values read back, and the look that takes only them (a letter without an id only where it
still is, as it was)."""

from __future__ import annotations

import pytest

from rabbitctl_retry.console.selection import (
    MAX_PICKS,
    NOT_SELECTED,
    Selection,
    parse,
    pick_value,
)
from rabbitctl_retry.dlq.choice import Skip
from rabbitctl_retry.dlq.same_id import checksums
from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.transport.base import Delivery, Properties


def letter(message_id: str | None, body: bytes = b"{}") -> Delivery:
    return Delivery(
        body=body,
        properties=Properties(message_id=message_id),
        delivery_tag=1,
        redelivered=False,
        exchange="",
        routing_key="dead",
    )


def test_form_values_come_back_as_they_were() -> None:
    odd = "id with spaces, <b> & \x1b[31m"
    nameless = letter(None, b"nameless")
    values = [
        pick_value(message_id="a"),
        pick_value(message_id=odd),
        pick_value(position=4, shown=checksums(nameless)),
    ]
    chosen = parse(values)
    assert chosen.ids == ("a", odd)
    assert chosen.places == ((4, checksums(nameless)),)
    assert parse(chosen.values()) == chosen
    assert chosen.count == 3
    assert chosen.letters().startswith("letters id a, id id with spaces")


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ([], "no letter was selected"),
        (["x.61"], "not one this console wrote"),
        (["i.zz"], "not one this console wrote"),
        (["p.0." + "0" * 64], "not one this console wrote"),
        ([pick_value(message_id=str(n)) for n in range(MAX_PICKS + 1)], "at most 500"),
    ],
)
def test_a_selection_the_console_did_not_write_is_refused(values: list[str], said: str) -> None:
    with pytest.raises(UsageError, match=said):
        parse(values)


def test_the_look_takes_the_letters_selected_only() -> None:
    nameless = letter(None, b"nameless")
    chosen = Selection(ids=("b",), places=((3, checksums(nameless)),))
    look = chosen.pick()
    assert look(letter("a")) == Skip(NOT_SELECTED)
    assert look(letter("b")) is None
    assert look(nameless) is None  # #3, as it was
    assert look(letter(None, b"another")) == Skip(NOT_SELECTED)  # #4: not selected
    assert look.missing() == []


def test_a_place_that_holds_another_letter_now_is_left() -> None:
    nameless = letter(None, b"nameless")
    chosen = Selection(ids=("gone",), places=((1, checksums(nameless)),))
    look = chosen.pick()
    answer = look(letter(None, b"changed"))
    assert isinstance(answer, Skip)
    assert "not the letter selected" in answer.reason
    missing = look.missing()
    assert "not in the queue any more (taken or changed since): gone" in missing[0]
    assert "#1" in missing[1]
    assert chosen.pick().read == 0  # each pass looks afresh
