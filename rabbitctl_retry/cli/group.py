"""The root command group: every way ``rr`` can end becomes one stderr line and an exit code.

click prints usage errors over several lines ("Usage: …", "Try …", "Error: …") and lets any
unexpected exception end in a traceback. ``rr`` prints one ``rr: error: …`` line instead, with
the exit codes of docs/cli.md: 2 for a usage error, 130 for Ctrl-C, 70 for a bug in rr (set
``RR_TRACEBACK=1`` to see the traceback as well).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import typer
from typer import _click
from typer.core import TyperGroup
from typer.exceptions import Abort

from rabbitctl_retry.errors import ExitCode, RrError, UsageError

TRACEBACK_ENV = "RR_TRACEBACK"


class InternalError(RrError):
    exit_code = ExitCode.INTERNAL


class RrGroup(TyperGroup):
    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
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
        except Exception as error:
            if os.environ.get(TRACEBACK_ENV) == "1":
                traceback.print_exc()
            code = _report(
                InternalError(f"internal error (a bug in rr): {type(error).__name__}: {error}")
            )
        if standalone_mode:
            sys.exit(code)
        return code


def _usage_text(error: _click.exceptions.UsageError) -> str:
    text = error.format_message()
    if error.ctx is not None:
        return f"{error.ctx.command_path}: {text} (see {error.ctx.command_path} --help)"
    return text


def _report(error: RrError) -> int:
    """Print ``error`` the one way every rr error is printed; its exit code."""
    from rabbitctl_retry.cli._common import fail

    try:
        fail(error)
    except typer.Exit as exit_:
        return exit_.exit_code
    return int(error.exit_code)  # pragma: no cover - fail() always exits
