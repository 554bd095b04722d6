"""``--output tsv`` (cli/tsv.py, cli/finish.py; docs/reference/cli.md, "Output formats"): each field
escaped so that a row stays one line and nothing acts on a terminal, several tables as
sections, and the raw values of a table's cells."""

from __future__ import annotations

import pytest
from rich.console import Group
from rich.table import Table
from rich.text import Text

from rabbitctl_retry.cli.finish import Outcome, TsvOnly, Unwrapped, render, tables_of
from rabbitctl_retry.cli.plain_table import Rows
from rabbitctl_retry.cli.render import cell, count_cell
from rabbitctl_retry.cli.tsv import tsv_field, tsv_line, tsv_lines, tsv_section


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("refunds.dead", "refunds.dead"),
        ("", ""),
        ("two words", "two words"),
        ("a\tb", "a\\tb"),
        ("line 1\nline 2", "line 1\\nline 2"),
        ("crlf\r\n", "crlf\\r\\n"),
        ("back\\slash", "back\\\\slash"),
        ("\\t is not a tab", "\\\\t is not a tab"),
        ("evil\x1b[31m", "evil\\x1b[31m"),
        ("nul\x00 del\x7f c1\x9b", "nul\\x00 del\\x7f c1\\x9b"),
        ("bidi\u202edcba", "bidi\\u202edcba"),
        ("ls\u2028ps\u2029", "ls\\u2028ps\\u2029"),
        ("lone \ud800", "lone \\ud800"),
        ("nbsp\u00a0", "nbsp\\xa0"),
        ("é ü 中 🐇", "é ü 中 🐇"),
    ],
)
def test_a_field_is_one_line_with_nothing_a_terminal_acts_on(value: str, field: str) -> None:
    assert tsv_field(value) == field
    assert field.isprintable()


def test_a_row_is_its_fields_joined_by_tabs() -> None:
    assert tsv_line(["a", "", "b\tc", ""]) == "a\t\tb\\tc\t"


def test_one_table_is_its_header_and_rows() -> None:
    table = Rows("retry policies", ("queue", "attempts"), [("jobs", "5"), ("jobs.dead", "")])
    assert list(tsv_lines([table])) == ["queue\tattempts", "jobs\t5", "jobs.dead\t"]


def test_a_titled_section_is_its_title_its_tables_and_an_empty_line() -> None:
    first = Rows("", ("queue", "messages"), [("jobs", "1234")])
    second = Rows("live settings", ("queue", "setting"), [])
    assert list(tsv_section("rr status at T\t(every 1 s)", [first])) == [
        "# rr status at T\\t(every 1 s)",
        "queue\tmessages",
        "jobs\t1234",
        "",
    ]
    assert list(tsv_section("at T", [first, second])) == [
        "# at T",
        "queue\tmessages",
        "jobs\t1234",
        "",
        "# live settings",
        "queue\tsetting",
        "",
    ]


def test_several_tables_are_sections_titled_when_they_have_a_title() -> None:
    first = Rows("", ("queue", "messages"), [("jobs", "1234")])
    second = Rows("live settings", ("queue", "setting"), [])
    third = Rows("a\ttitle", ("x",), [("1",)])
    assert list(tsv_lines([first, second, third])) == [
        "queue\tmessages",
        "jobs\t1234",
        "",
        "# live settings",
        "queue\tsetting",
        "",
        "# a\\ttitle",
        "x",
        "1",
    ]


def test_a_tables_cells_give_their_raw_values() -> None:
    table = Table(title="counts")
    for column in ("name", "count", "plain"):
        table.add_column(column)
    table.add_row(cell("evil\x1b\\x"), count_cell(1234567), Text("text"))
    table.add_row(cell("two\nlines"), count_cell(None), "str")
    assert tables_of([table]) == [
        Rows(
            "counts",
            ("name", "count", "plain"),
            [("evil\x1b\\x", "1234567", "text"), ("two\nlines", "", "str")],
        )
    ]


def test_the_tables_are_found_in_groups_and_tsv_only_pieces_and_lines_are_left_out() -> None:
    inner = Table()
    inner.add_column("origin")
    inner.add_row(cell("jobs"))
    empty = Table()
    empty.add_column("#")
    rows = Rows("entities", ("kind",), [("queue",)])
    pieces = ["a count line", Group(Text(""), inner, cell("bodies")), TsvOnly(empty), rows]
    assert tables_of(pieces) == [
        Rows("", ("origin",), [("jobs",)]),
        Rows("", ("#",), []),
        rows,
    ]


def test_tsv_prints_the_tables_only_and_table_leaves_tsv_only_ones_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    table = Table()
    table.add_column("queue")
    outcome = Outcome(table=lambda: [TsvOnly(table), "0 queue(s)"], notes=["a note"])
    render(outcome, "tsv")
    assert capsys.readouterr() == ("queue\n", "a note\n")
    render(outcome, "table")
    assert capsys.readouterr() == ("0 queue(s)\n", "a note\n")


def test_tsv_without_a_table_prints_the_lines_of_the_table_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    render(Outcome(table=lambda: [Unwrapped("purged 1,234 message(s) from 'q'")]), "tsv")
    assert capsys.readouterr().out == "purged 1,234 message(s) from 'q'\n"
