"""The root command group: every way ``rr`` can end becomes one stderr line and an exit code.

click prints usage errors over several lines ("Usage: …", "Try …", "Error: …") and lets any
unexpected exception end in a traceback. ``rr`` prints one ``rr: error: …`` line instead, with
the exit codes of docs/reference/cli.md: 2 for a usage error, 130 for Ctrl-C, 74 for output that
cannot be written, 70 for a bug in rr (set ``RR_TRACEBACK=1`` to see the traceback as well).

The whole command writes to stdout through :class:`GuardedOutput`, under the one rule for
output of :func:`~rabbitctl_retry.errors.write_failure` (docs/reference/cli.md, "Output"):

* a write that fails — no space left (ENOSPC), an I/O error (EIO), stdout closed (``>&-``) —
  is one line ``rr: error: cannot write to stdout: No space left on device`` and exit 74;
* stdout's reader going away (EPIPE: ``rr dlq export Q - | head -c 10``) is no error: rr stops
  at once, quietly, with exit 141 (128 + SIGPIPE), what a shell reports for ``cat`` or
  ``grep`` cut short the same way.

A failure sticks: every later write fails the same way, so a writer that swallows one
exception (click's stream probing does) cannot lose it. What stdout still holds is written out
here, under the rule too; afterwards a stdout that failed is pointed at /dev/null, so that the
interpreter's last flush cannot make Python print "Exception ignored" or exit 120. Export
files and output written inside a read's callback: ``cli/output.py``.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO, cast

import typer
from typer import _click
from typer.core import TyperGroup
from typer.exceptions import Abort

from rabbitctl_retry.errors import (
    STDOUT,
    ExitCode,
    ReaderGone,
    RrError,
    UsageError,
    WriteError,
    write_failure,
)

TRACEBACK_ENV = "RR_TRACEBACK"


class InternalError(RrError):
    exit_code = ExitCode.INTERNAL


class RrGroup(TyperGroup):
    invoked_args: tuple[str, ...] = ()
    """The arguments of this run (after the program's name): what ``rr run --workers``
    starts its workers with (cli/workers.py)."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        self.invoked_args = tuple(sys.argv[1:] if args is None else args)
        with guarded_stdout():
            code = self._run(args, prog_name, complete_var, windows_expand_args, **extra)
        if standalone_mode:
            sys.exit(code)
        return code

    def _run(
        self,
        args: Sequence[str] | None,
        prog_name: str | None,
        complete_var: str | None,
        windows_expand_args: bool,
        **extra: Any,
    ) -> int:
        """Run the command; its exit code, every way it can end."""
        try:
            result = super().main(
                args,
                prog_name,
                complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
            code = result if isinstance(result, int) else 0
            flush_stdout(code=code)
        except ReaderGone:  # `rr ... | head`: the reader has what it wanted
            code = int(ExitCode.PIPE_CLOSED)
        except _click.exceptions.NoArgsIsHelpError as error:  # bare ``rr`` or ``rr dlq``: help
            error.show()
            code = error.exit_code
        except _click.exceptions.UsageError as error:
            code = _report(UsageError(_usage_text(error)))
        except _click.exceptions.ClickException as error:
            code = _report(RrError(error.format_message()))
        except Abort:
            sys.stderr.write("rr: interrupted\n")
            code = 130
        except RrError as error:  # raised outside cli/_common.py's guard(): a write of output
            code = _report(error)
        except Exception as error:
            if os.environ.get(TRACEBACK_ENV) == "1":
                traceback.print_exc()
            code = _report(
                InternalError(f"internal error (a bug in rr): {type(error).__name__}: {error}")
            )
        return code


def _usage_text(error: _click.exceptions.UsageError) -> str:
    text = in_rrs_words(error.format_message())
    if error.ctx is not None:
        return f"{error.ctx.command_path}: {text} (see {error.ctx.command_path} --help)"
    return text


_INVALID = re.compile(r"Invalid value for (?P<names>'[^']+'(?: / '[^']+')*): (?P<rest>.*)", re.S)
_BOUNDS = (
    (re.compile(r"Input should be greater than or equal to (\S+)"), "must be at least {}"),
    (re.compile(r"Input should be less than or equal to (\S+)"), "must be at most {}"),
    (re.compile(r"Input should be greater than (\S+)"), "must be more than {}"),
    (re.compile(r"Input should be less than (\S+)"), "must be less than {}"),
)
_NOT_ONE_OF = re.compile(r"Value error, (?P<value>.+) is not one of (?P<choices>.+?)\.?$", re.S)
_CHOOSE = re.compile(r"\.? ?Choose from:\s*(?P<choices>.+)$", re.S)


def in_rrs_words(text: str) -> str:
    """A click or validator message as rr says it (docs/reference/cli.md, "Malformed input"):
    ``--limit must be at least 1``, ``--output 'yaml': choose table, json, jsonl or tsv``,
    ``Missing argument 'SHELL': choose bash, zsh or fish``. Pure."""
    found = _INVALID.fullmatch(text)
    if found is not None:
        name = found.group("names").split(" / ")[0].strip("'")
        rest = found.group("rest").strip()
        for pattern, words in _BOUNDS:
            bound = pattern.fullmatch(rest)
            if bound is not None:
                return f"{name} {words.format(bound.group(1))}"
        if rest.startswith("Input should be a valid integer"):
            return f"{name} must be a whole number"
        if rest.startswith("Input should be a valid number"):
            return f"{name} must be a number"
        choice = _NOT_ONE_OF.fullmatch(rest)
        if choice is not None:
            choices = [c.strip().strip("'") for c in choice.group("choices").split(",")]
            return f"{name} {choice.group('value')}: choose {_either(choices)}"
        return f"{name}: {rest}"
    choose = _CHOOSE.search(text)
    if choose is not None:
        choices = [c.strip() for c in choose.group("choices").split(",") if c.strip()]
        return f"{text[: choose.start()]}: choose {_either(choices)}"
    return text


def _either(choices: list[str]) -> str:
    return choices[0] if len(choices) == 1 else f"{', '.join(choices[:-1])} or {choices[-1]}"


def _report(error: RrError) -> int:
    """Print ``error`` the one way every rr error is printed; its exit code."""
    from rabbitctl_retry.cli._common import fail

    try:
        fail(error)
    except typer.Exit as exit_:
        return exit_.exit_code
    return int(error.exit_code)  # pragma: no cover - fail() always exits


# --------------------------------------------------------------------------- stdout


def closed_stdout() -> WriteError:
    return WriteError(f"cannot write to {STDOUT}: it is closed")


class GuardedOutput:
    """A text stream (``sys.stdout``, an export file) whose failed writes and flushes raise
    :func:`~rabbitctl_retry.errors.write_failure`'s exception, and every one after the first
    too; ``None`` stands for a closed stdout. Everything else is the stream's own."""

    def __init__(self, stream: TextIO | None, target: str = STDOUT) -> None:
        self._stream = stream
        self._target = target
        self._failure: OSError | None = None

    @property
    def stream(self) -> TextIO | None:
        return self._stream

    @property
    def failed(self) -> bool:
        """Whether a write or a flush failed."""
        return self._failure is not None

    def write(self, text: str) -> int:
        stream = self._open()
        try:
            return stream.write(text)
        except OSError as error:
            raise self._failed(error) from None

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._stream is None:
            return
        self._raise_again()
        try:
            self._stream.flush()
        except OSError as error:
            raise self._failed(error) from None

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def __getattr__(self, name: str) -> Any:
        if self._stream is None:
            raise AttributeError(name)
        return getattr(self._stream, name)

    def _open(self) -> TextIO:
        if self._stream is None:
            raise closed_stdout()
        self._raise_again()
        return self._stream

    def _raise_again(self) -> None:
        if self._failure is not None:
            raise write_failure(self._failure, self._target)

    def _failed(self, error: OSError) -> WriteError | ReaderGone:
        self._failure = error
        return write_failure(error, self._target)


@contextmanager
def guarded_stdout() -> Iterator[None]:
    """``sys.stdout`` behind :class:`GuardedOutput` inside (once: nested uses share it); the
    stream it was, again, afterwards."""
    original = sys.stdout
    if isinstance(original, GuardedOutput):
        yield
        return
    guarded = GuardedOutput(original)
    sys.stdout = cast(TextIO, guarded)
    try:
        yield
    finally:
        sys.stdout = original
        if guarded.failed and original is not None:
            _point_at_devnull(original)


def release_stdout() -> None:
    """Give the command the stream stdout was (``rr run``: stdout is its handlers', not rr's
    output: a handler's ``print()`` must behave as Python's, not fail its message)."""
    stdout = sys.stdout
    if isinstance(stdout, GuardedOutput):
        sys.stdout = cast(TextIO, stdout.stream)


def flush_stdout(*, code: int) -> None:
    """Write out what stdout still holds, under the rule: the last write of a command that
    ended with exit ``code``. A failure seen before is raised again only when the command
    ended well (someone swallowed it); else it was reported when it happened."""
    stdout = sys.stdout
    if stdout is None or (code != 0 and isinstance(stdout, GuardedOutput) and stdout.failed):
        return  # None: released (release_stdout) with stdout closed
    stdout.flush()


def _point_at_devnull(stream: TextIO) -> None:
    """Make every later write to ``stream``'s file descriptor, and the flush of what it still
    holds, succeed into /dev/null (what Python's docs advise on a closed pipe). A stream
    without a descriptor (a test's) is left alone."""
    try:
        descriptor = stream.fileno()
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation: a test's stream
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, descriptor)
    finally:
        os.close(devnull)
