"""Shared CLI pieces: options, consoles, URL resolution, and the one async runner.

Every command is a sync typer function that calls :func:`run` once; ``run`` turns an
:class:`~rabbitctl_retry.errors.RrError` into one line on stderr and its exit code, so no
command prints a traceback for a user mistake, and no output ever holds a password.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from rabbitctl_retry.errors import RrError, censor_url, exit_code_for

DEFAULT_URL = "amqp://guest:guest@localhost:5672/"
URL_ENV = "RR_URL"

_T = TypeVar("_T")


class OutputFormat(StrEnum):
    TABLE = "table"
    JSON = "json"


UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar=URL_ENV,
        help="Broker URL (amqp:// or amqps://); else $RR_URL, else [broker] url, else "
        "amqp://guest:guest@localhost:5672/.",
        show_default=False,
    ),
]
OutputOption = Annotated[
    OutputFormat,
    typer.Option("--output", "-o", help="table for people, json for scripts (docs/cli.md)."),
]


def stdout_console() -> Console:
    """Where tables go: user data is never read as markup, and never highlighted."""
    return Console(markup=False, highlight=False, emoji=False, soft_wrap=False)


def stderr_console() -> Console:
    return Console(stderr=True, markup=False, highlight=False, emoji=False, soft_wrap=True)


def resolve_url(flag_or_env: str | None, topology_url: str | None = None) -> str:
    """``--url`` / ``$RR_URL``, else the topology's ``[broker] url``, else the default."""
    return flag_or_env or topology_url or DEFAULT_URL


def print_json(document: Any) -> None:
    """One stable JSON document on stdout."""
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def fail(error: BaseException) -> NoReturn:
    """Print ``error`` on stderr (censored) and exit with its code."""
    stderr_console().print(f"rr: error: {censor_text(str(error))}")
    raise typer.Exit(exit_code_for(error))


def censor_text(text: str) -> str:
    """Censor every URL-looking word of ``text`` (belt and braces: errors censor already)."""
    words = []
    for word in text.split(" "):
        words.append(censor_url(word) if "://" in word else word)
    return " ".join(words)


def run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run one coroutine; turn rr errors into an exit code."""
    with guard():
        return asyncio.run(coroutine)


@contextmanager
def guard() -> Iterator[None]:
    """Turn an rr error raised inside into one stderr line and its exit code."""
    try:
        yield
    except RrError as error:
        fail(error)
    except KeyboardInterrupt:
        stderr_console().print("rr: interrupted")
        raise typer.Exit(130) from None
