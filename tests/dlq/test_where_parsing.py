"""``--where`` is read in one pass, whatever it holds, and an expression has a length bound
(docs/reference/dlq.md, "--where").

The old reader was a regular expression that backtracked over a run of spaces after
``header.``: 16,000 spaces took 25 s, 40,000 took 85 s. These tests assert on results only;
with a quadratic reader they would not finish in any CI's patience.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.dlq import filters
from rabbitctl_retry.dlq.filters import HeaderCondition, TextCondition, parse_where
from rabbitctl_retry.errors import ExitCode, UsageError

MAX_EXPRESSION_CHARACTERS = 4096
"""docs/reference/dlq.md, "--where"."""

runner = CliRunner(env={"COLUMNS": "200", "RR_URL": "amqp://guest:guest@127.0.0.1:1/"})


@pytest.mark.parametrize("spaces", [40_000, 400_000])
def test_a_long_run_of_spaces_is_refused_by_its_length(spaces: int) -> None:
    text = "header." + " " * spaces
    with pytest.raises(UsageError) as raised:
        parse_where(text)
    assert raised.value.exit_code is ExitCode.USAGE
    assert str(raised.value) == (
        f"--where {text[:60]!r}... ({len(text):,} characters): too long; an expression is at "
        f"most {MAX_EXPRESSION_CHARACTERS:,} characters"
    )


@pytest.mark.parametrize("spaces", [40_000, 400_000])
def test_the_reader_is_linear_past_the_bound_too(spaces: int) -> None:
    run = " " * spaces
    split, parts = filters.split_expression, filters.Parts
    assert split("header." + run) is None
    assert split("header." + run + "x=1") == parts(key="header." + run + "x", op="=", value="1")
    assert split("header.x" + run + "!=" + run + "v") == parts("header.x", "!=", run + "v")
    assert split(run + "origin" + run + "=q") == parts(key="origin", op="=", value="q")


def test_the_bound_is_the_documented_one() -> None:
    assert filters.MAX_EXPRESSION_CHARACTERS == MAX_EXPRESSION_CHARACTERS


def test_just_under_the_bound_is_read_at_once() -> None:
    padding = " " * (MAX_EXPRESSION_CHARACTERS - len("header.x=1"))
    assert parse_where("header." + padding + "x=1") == HeaderCondition(
        "x", "1", text="header." + padding + "x=1"
    )
    no_operator = "header." + " " * (MAX_EXPRESSION_CHARACTERS - len("header."))
    with pytest.raises(UsageError, match="not an expression"):
        parse_where(no_operator)
    with pytest.raises(UsageError, match="too long"):
        parse_where(no_operator + " ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("header. =x", "name the header"),
        ("header.=x", "not an expression"),
        ("header .x=1", "not an expression"),
        ("ori gin=x", "not an expression"),
        ("a\n.b=c", "not an expression"),
        ("x.y<z", "only age compares with < or >"),
        ("origin=<x", "unknown operator '=<'"),
        ("", "not an expression"),
    ],
)
def test_what_the_one_pass_reader_refuses(text: str, expected: str) -> None:
    with pytest.raises(UsageError, match=expected):
        parse_where(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  origin  !=  y ", TextCondition("origin", "y", True, text="  origin  !=  y ")),
        ("header.a b c=d", HeaderCondition("a b c", "d", text="header.a b c=d")),
        ("header.x\n=1", HeaderCondition("x", "1", text="header.x\n=1")),
        ("header.x=a=b", HeaderCondition("x", "a=b", text="header.x=a=b")),
    ],
)
def test_what_the_one_pass_reader_takes(text: str, expected: object) -> None:
    assert parse_where(text) == expected


def test_a_long_expression_on_the_command_line_is_exit_2_before_connecting() -> None:
    text = "header." + " " * 100_000
    result = runner.invoke(app, ["dlq", "replay", "dead", "--where", text, "--dry-run"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"rr: error: --where {text[:60]!r}... (100,007 characters): too long; an expression "
        f"is at most {MAX_EXPRESSION_CHARACTERS:,} characters\n"
    )
