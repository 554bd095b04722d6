"""--where ids=A,B,C and ids!=A,B,C (#47, docs/reference/dlq.md "--where"): the letter's message id
is one of a list, as the console's selection names its letters on a command line
(console/selection.py); parsing, matching, the writer :func:`ids_expression` and its bound."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rabbitctl_retry.dlq.filters import (
    MAX_EXPRESSION_CHARACTERS,
    MAX_IDS_CHARACTERS,
    IdsCondition,
    holds,
    ids_expression,
    parse_all,
    parse_where,
)
from rabbitctl_retry.dlq.origin import WaitQueues, contents_of, facts
from rabbitctl_retry.errors import ExitCode, UsageError

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
UUID_CHARACTERS = 36


def found(where: str, message_id: str | None, undecodable: tuple[str, ...] = ()) -> bool:
    (condition,) = parse_all([where])
    contents = contents_of(message_id, b"", undecodable)
    return holds(condition, facts({"rr-origin-queue": "refunds"}, WaitQueues(), contents), NOW)


@pytest.mark.parametrize(
    ("text", "ids", "negate"),
    [
        ("ids=a,b,c", {"a", "b", "c"}, False),
        ("ids = a , b ", {"a", "b"}, False),
        ("ids!=a", {"a"}, True),
        ("ids=a,a", {"a"}, False),
        ("ids= =x,<y", {"=x", "<y"}, False),  # a first id that starts with an operator
        ("ids=a=b,c!d", {"a=b", "c!d"}, False),
    ],
)
def test_parse(text: str, ids: set[str], negate: bool) -> None:
    assert parse_where(text) == IdsCondition(frozenset(ids), negate, text=text)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("ids=", "give message ids after =, separated by commas"),
        ("ids!= ", "give message ids after !="),
        ("ids=a,,b", "an empty id in the list"),
        ("ids=a, ,b", "an id that holds a comma cannot be listed; name it with id="),
        ("ids=a,", "an empty id in the list"),
        (",ids=a", "not an expression"),
        ("ids<a", "only age compares with < or >"),
        ("ids==a", "unknown operator '=='"),
        ("idz=a", "unknown key 'idz'"),
    ],
)
def test_malformed_lists_are_usage_errors(text: str, said: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_where(text)
    assert raised.value.exit_code is ExitCode.USAGE
    assert said in str(raised.value)
    assert repr(text) in str(raised.value)


def test_the_letter_with_a_listed_id_matches_and_no_other() -> None:
    assert found("ids=m-1,m-2", "m-1")
    assert found("ids=m-1,m-2", "m-2")
    assert not found("ids=m-1,m-2", "m-3")
    assert not found("ids=m-1,m-2", "M-1")  # compared exactly
    assert not found("ids!=m-1,m-2", "m-1")
    assert found("ids!=m-1,m-2", "m-3")


def test_a_letter_without_an_id_is_in_no_list() -> None:
    # as id=: a letter without an id never equals one, so ids!= keeps it
    assert not found("ids=m-1", None)
    assert found("ids!=m-1", None)


def test_undecodable_properties_match_no_ids_condition() -> None:
    for where in ("ids=m-1", "ids!=m-1", "ids!=other"):
        assert not found(where, "m-1", undecodable=("headers",))
    without_contents = facts({"rr-origin-queue": "refunds"}, WaitQueues())
    assert not holds(parse_where("ids!=x"), without_contents, NOW)


def test_a_list_is_bounded_by_its_own_limit() -> None:
    # 500 UUIDs (the console's largest selection) do not fit in 4,096 characters
    uuids = [f"{n:08d}-0000-4000-8000-000000000000" for n in range(500)]
    assert len(uuids[0]) == UUID_CHARACTERS
    assert len(",".join(uuids)) > MAX_EXPRESSION_CHARACTERS
    expression = ids_expression(uuids)
    assert parse_where(expression) == IdsCondition(frozenset(uuids), text=expression)
    longest = "ids=" + ",".join(["x" * 63] * 512)
    assert len(longest) == MAX_IDS_CHARACTERS + 3
    with pytest.raises(UsageError) as raised:
        parse_where(longest)
    assert "too long; an ids= list is at most 32,768 characters" in str(raised.value)
    assert parse_where(longest[:MAX_IDS_CHARACTERS].rstrip(","))
    # every other key keeps the bound of an expression
    with pytest.raises(UsageError, match="an expression is at most 4,096 characters"):
        parse_where("id=" + "x" * MAX_EXPRESSION_CHARACTERS)


@pytest.mark.parametrize(
    ("ids", "said"),
    [
        (["a,b"], "holds a comma"),
        (["ok", ""], "is empty or starts or ends with white space"),
        ([" a"], "starts or ends with white space"),
        ([], "no message id"),
        (["x" * 100] * 400, "400 ids make an ids= list of 40,403 characters"),
    ],
)
def test_what_ids_expression_cannot_write(ids: list[str], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        ids_expression(ids)


NAMEABLE = st.text(min_size=1, max_size=40).filter(lambda s: "," not in s and s == s.strip())


@given(
    listed=st.lists(NAMEABLE, min_size=1, max_size=30),
    others=st.lists(NAMEABLE, max_size=10),
    negate=st.booleans(),
)
def test_any_list_of_ids_without_commas_round_trips(
    listed: list[str], others: list[str], negate: bool
) -> None:
    expression = ids_expression(listed, negate=negate)
    condition = parse_where(expression)
    assert condition == IdsCondition(frozenset(listed), negate, text=expression)
    for message_id in [*listed, *others]:
        assert found(expression, message_id) is ((message_id in listed) != negate)
