"""The one result handler (cli/finish.py; docs/architecture.md, "How a command reads"): what
an Outcome prints for each output format, in which order, and how the command ends."""

from __future__ import annotations

import pytest
import typer

from rabbitctl_retry.cli.finish import Outcome, Raw, Unwrapped, finish, render
from rabbitctl_retry.errors import ConflictError


def never() -> list[str]:
    raise AssertionError("built for a format that was not asked for")


def test_a_table_prints_its_pieces_in_order_then_the_notes_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    outcome = Outcome(
        document=lambda: never(),
        table=lambda: ["first", "", Raw(["as it is\n"]), Unwrapped("last")],
        notes=["a note"],
    )
    finish(outcome, "table")
    captured = capsys.readouterr()
    assert captured.out == "first\n\nas it is\nlast\n"
    assert captured.err == "a note\n"


def test_json_prints_the_document_only(capsys: pytest.CaptureFixture[str]) -> None:
    finish(Outcome(document=lambda: {"a": [1, "\x1b"]}, table=never), "json")
    assert capsys.readouterr().out == '{\n  "a": [\n    1,\n    "\\u001b"\n  ]\n}\n'
    render(Outcome(document=lambda: {"a": 1}, table=never, one_line=True), "json")
    assert capsys.readouterr().out == '{"a": 1}\n'


def test_jsonl_prints_nothing_at_the_end_but_the_notes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    finish(Outcome(document=never, table=never, notes=["counted"]), "jsonl")
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "counted\n")


def test_the_error_comes_after_the_output_and_the_notes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    outcome = Outcome(table=lambda: ["plan"], notes=["rr: warning: w"], error=ConflictError("x"))
    with pytest.raises(typer.Exit) as ended:
        finish(outcome)
    captured = capsys.readouterr()
    assert captured.out == "plan\n"
    assert captured.err == "rr: warning: w\nrr: error: x\n"
    assert ended.value.exit_code == ConflictError("x").exit_code


def test_an_exit_code_ends_the_command_and_zero_returns() -> None:
    with pytest.raises(typer.Exit) as ended:
        finish(Outcome(code=3))
    assert ended.value.exit_code == 3
    finish(Outcome())  # returns: nothing to print, nothing to exit with
