"""Shared CLI pieces: options, consoles, URL resolution, the one async runner and the one exit.

Every command is a sync typer function that parses, calls one operation through :func:`run`
(``rr status --watch``: once a reading) and ends in the result handler (``cli/finish.py``).
``run`` turns an :class:`~rabbitctl_retry.errors.RrError` into one line on stderr and its exit
code, so no command prints a traceback for a user mistake, and no output ever holds a
password. This module alone runs an event loop, opens connections (:func:`connect_to`: what an
operation connects with) and raises ``typer.Exit`` (:func:`exit_with`); docs/architecture.md,
"How a command reads".
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from rabbitctl_retry.errors import (
    ConfigError,
    RrError,
    UsageError,
    censor_url,
    censor_urls,
    escape_unprintable,
    exit_code_for,
)
from rabbitctl_retry.json_text import escape_unsafe, json_chunks, json_default
from rabbitctl_retry.transport.base import Connection, Connector
from rabbitctl_retry.transport.management import ManagementApi, ManagementConnector

if TYPE_CHECKING:
    from rabbitctl_retry.cli.broker_choice import Picked
    from rabbitctl_retry.cli.topology_found import TopologyChoice
    from rabbitctl_retry.topology.model import Topology

DEFAULT_URL = "amqp://guest:guest@localhost:5672/"
URL_ENV = "RR_URL"

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class CliSettings:
    """What the command line is handed besides its arguments: ``app(obj=CliSettings(...))``.
    rr's tests hand it the emulator's connector (and its management API's, or none: then
    a management URL is reached over HTTP); rr itself leaves it out."""

    connector: Connector
    management: ManagementConnector | None = None


async def amqp_connector(url: str, *, client_name: str = "rr") -> Connection:
    """rr's own connector: the AMQP client ``RR_AMQP_CLIENT`` chooses (``transport/clients.py``:
    rr's own unless it says aiormq; imported on the first connect). ``client_name`` is the
    connection's name on the broker (``connection_name``), unless the URL names one
    (``?name=``)."""
    from rabbitctl_retry.transport import clients

    return await clients.connect(url, client_name=client_name)


def connector_of(ctx: typer.Context, *, client_name: str | None = None) -> Connector:
    """The one place that picks the adapter every command connects with; ``client_name``
    names rr's connections on the broker (``rabbitmqctl list_connections client_properties``)."""
    settings = ctx.find_root().obj
    if isinstance(settings, CliSettings):
        return settings.connector
    if client_name is None:
        return amqp_connector
    return functools.partial(amqp_connector, client_name=client_name)


def http_management(url: str, *, vhost: str) -> ManagementApi:
    """rr's own management connector: the HTTP adapter (imported when first used)."""
    from rabbitctl_retry.transport.management_http import HttpManagementApi

    return HttpManagementApi(url, vhost=vhost)


def management_connector_of(ctx: typer.Context) -> ManagementConnector:
    """The one place that picks the adapter every command reaches a management API with
    (as :func:`connector_of` picks the AMQP one)."""
    settings = ctx.find_root().obj
    if isinstance(settings, CliSettings) and settings.management is not None:
        return settings.management
    return http_management


def connect_to(
    ctx: typer.Context, urls: Sequence[str], *, client_name: str | None = None
) -> Callable[[], Awaitable[Connection]]:
    """What an operation opens its connection with: the first of ``urls`` that answers
    (``transport/failover.py``), through :func:`connector_of`'s adapter."""
    from rabbitctl_retry.transport.failover import connect_any

    return functools.partial(connect_any, connector_of(ctx, client_name=client_name), tuple(urls))


class OutputFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    TSV = "tsv"


UrlOption = Annotated[
    list[str] | None,
    typer.Option(
        "--url",
        envvar=URL_ENV,
        help="Broker URL (amqp:// or amqps://); give it once per node of a cluster, tried in "
        "order. Else $RR_URL (URLs separated by spaces), else [broker] url of the topology "
        "file (--topology, else ./topology.toml), else amqp://guest:guest@localhost:5672/.",
        show_default=False,
    ),
]


def output_option(choices: type[StrEnum], help: str) -> Any:
    """``--output`` / ``-o``, declared once: a command gives its formats (``choices``, the
    option's type) and says what each prints (``help``, which must name every one of them:
    a format added without a word fails here, at import). typer refuses any other value
    with the one message of a choice: ``'x' is not one of 'table', 'json', 'tsv'``."""
    unnamed = [choice.value for choice in choices if choice.value not in help]
    if unnamed:
        raise ValueError(f"--output's help names no {', '.join(unnamed)}")
    return typer.Option("--output", "-o", help=f"{help} (rr docs cli 'Output formats').")


OutputOption = Annotated[
    OutputFormat,
    output_option(
        OutputFormat,
        "table for people, json for scripts, tsv: the tables as tab-separated lines for pipes",
    ),
]


def topology_option(help: str) -> Any:
    """``--topology`` / ``-t``, declared once: each command says what it takes of the file;
    every one says where rr looks without it (``cli/topology_found.py``)."""
    return typer.Option(
        "--topology", "-t", help=f"{help} Without it: ./topology.toml, if there is one."
    )


NoTopologyOption = Annotated[
    bool,
    typer.Option(
        "--no-topology",
        help="Use no topology file, not even ./topology.toml of the current directory "
        "(rr docs cli 'Where the broker is').",
    ),
]
"""``--no-topology``, beside every ``--topology`` option (``cli/topology_found.py``)."""


def topology_in_use(
    given: Path | None, no_topology: bool, *, say: bool = True
) -> tuple[TopologyChoice, Topology | None]:
    """The topology file a command that takes ``--topology`` uses, by the one rule
    (``cli/topology_found.py``: ``--topology``, else ``./topology.toml`` when the current
    directory holds it, else none), and the file read. A found file is said first, in one
    line on stderr (stdout stays clean); ``--topology`` with ``--no-topology`` ends the
    command (exit 2), an invalid file too (exit 78; docs/reference/cli.md, "Where the broker
    is"). ``say=False``: no note (a worker of ``rr run --workers``, whose supervisor said it)."""
    from rabbitctl_retry.cli.topology_found import chosen_topology, found_note, load_chosen

    with guard():
        choice = chosen_topology(given, no_topology)
        if choice.found and say:
            stderr_console().print(found_note(), soft_wrap=True)
        return choice, load_chosen(choice)


def topology_of(given: Path | None, no_topology: bool) -> Topology | None:
    """:func:`topology_in_use`'s file read (``None``: none)."""
    return topology_in_use(given, no_topology)[1]


TopologyArgument = Annotated[Path, typer.Argument(help="The topology file (TOML).")]
"""The topology file as a command's first argument (``rr declare``, ``rr migrate``,
``rr topology ...``)."""


def dry_run_option(help: str) -> Any:
    """``--dry-run``, declared once: each command says what it shows instead of doing it."""
    return typer.Option("--dry-run", help=help)


def force_option(help: str) -> Any:
    """``--force``, declared once: each command says what it goes ahead with all the same."""
    return typer.Option("--force", help=help)


def rate_option(help: str) -> Any:
    """``--rate MSG_PER_S``, declared once: each command says what it paces (``help``);
    ``dlq/rate.py`` ``parse_pace`` checks it."""
    return typer.Option("--rate", metavar="MSG_PER_S", help=help)


RampOption = Annotated[
    str | None,
    typer.Option(
        "--ramp",
        metavar="SECONDS",
        help="Climb to --rate over this many seconds of sending, from nothing: the first "
        "message at once, the full rate after SECONDS (needs --rate; rr docs dlq).",
    ),
]
"""``--ramp SECONDS``, declared once; ``dlq/rate.py`` ``parse_pace`` checks it with --rate."""


YesOption = Annotated[
    bool, typer.Option("--yes", "-y", help="Do not ask; go ahead (needed without a terminal).")
]


MANAGEMENT_URL_ENV = "RR_MANAGEMENT_URL"
"""Every command's ``--management-url`` variable (docs/reference/cli.md, "The management URL")."""


def management_url_option(help: str) -> Any:
    """``--management-url`` (or ``$RR_MANAGEMENT_URL``), declared once: each command says
    what it reads with it (``help``); :func:`check_given_management_url` checks it."""
    return typer.Option(
        "--management-url", envvar=MANAGEMENT_URL_ENV, help=help, show_default=False
    )


def check_given_management_url(management_url: str | None) -> None:
    """A ``--management-url`` refused before anything connects: exit 2 (usage), saying where it
    was given."""
    from rabbitctl_retry.transport.management import check_management_url

    if management_url is None:
        return
    try:
        check_management_url(management_url)
    except UsageError as error:
        fail(UsageError(f"{error} (given by --management-url or ${MANAGEMENT_URL_ENV})"))


UNWRAPPED_WIDTH = 10_000
"""The width of rr's output when it goes to a file or a pipe (and $COLUMNS is not set): wide
enough that no table cell and no line is wrapped for a script to reassemble."""


def stdout_console() -> Console:
    """Where tables go: user data is never read as markup, and never highlighted. On a
    terminal, tables fit its width; elsewhere nothing is wrapped (docs/reference/cli.md,
    "Output")."""
    unwrapped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(
        markup=False,
        highlight=False,
        emoji=False,
        soft_wrap=False,
        width=UNWRAPPED_WIDTH if unwrapped else None,
    )


def stderr_console() -> Console:
    return Console(stderr=True, markup=False, highlight=False, emoji=False, soft_wrap=True)


def resolve_urls(
    flag_or_env: Sequence[str] | None, topology_urls: Sequence[str] = ()
) -> tuple[str, ...]:
    """The broker URLs rr tries, in order: ``--url`` (once per node) / ``$RR_URL``, or
    ``--broker`` / ``$RR_BROKER``'s profile, else the topology's ``[broker] url``, else the
    configuration file's ``default`` broker, else the default; each with ``--vhost``'s vhost
    when given (docs/reference/cli.md, "Several hosts" and "Profiles"; ``cli/broker_choice.py``).

    Every URL is checked here, before anything else happens (``transport/url.py``): one that
    rr refuses ends the command with one ``rr: error:`` line that does not repeat it, exit 2
    from ``--url`` / ``$RR_URL`` (usage; the line says which: ``given by --url number 2``,
    ``given by $RR_URL``), 78 from ``[broker] url`` or a profile (the file is invalid);
    docs/reference/cli.md, "Malformed input". ``--url`` is one URL a value; ``$RR_URL``'s URLs are
    separated by spaces (``cli/given_urls.py``).
    """
    from rabbitctl_retry.cli.broker_choice import current_choice
    from rabbitctl_retry.cli.given_urls import url_label
    from rabbitctl_retry.profiles import with_vhost
    from rabbitctl_retry.transport.url import parse_broker_url

    picked, given, from_env = _picked(flag_or_env, topology_urls)
    vhost = current_choice().vhost
    with guard():
        from_file = picked.from_file
        urls = from_file.urls() if from_file is not None else picked.urls or (DEFAULT_URL,)
        if vhost is not None:
            urls = tuple(with_vhost(url, vhost) for url in urls)
    for index, url in enumerate(urls):
        try:
            parse_broker_url(url)
        except UsageError as error:
            if from_file is not None:
                key = f"{from_file.profile.key}.url"
                where = key if len(urls) == 1 else f"{key}[{index}]"
                fail(ConfigError(str(error), path=where, source=str(from_file.path)))
            if given:
                which = url_label(from_env=from_env, index=index, count=len(urls))
                fail(UsageError(f"{error} (given by {which})"))
            where = "broker.url" if len(urls) == 1 else f"broker.url[{index}]"
            fail(ConfigError(str(error), path=where))
    return urls


def shown_target(urls: Sequence[str]) -> str:
    """The broker a command acts on, as rr shows it: the first of ``urls`` (the one tried
    first), its password masked (``errors.py`` :func:`~rabbitctl_retry.errors.censor_url`,
    as every URL rr prints); the ``"broker"`` of a changing command's JSON document
    (docs/reference/cli.md, "Where the broker is")."""
    return censor_url(urls[0]) if urls else ""


def target_line(urls: Sequence[str]) -> str:
    """``rr: on URL``, the masked first URL (:func:`shown_target`), with ``(or the next of
    N nodes)`` when there are several (a cluster: rr connects to the first that answers)."""
    more = f" (or the next of {len(urls)} nodes)" if len(urls) > 1 else ""
    return f"rr: on {escape_unprintable(shown_target(urls))}{more}"


def announce_target(urls: Sequence[str]) -> str:
    """Print :func:`target_line` once on stderr, before a command changes anything on the
    broker (docs/reference/cli.md, "Where the broker is"); returns :func:`shown_target` for its JSON
    document's ``"broker"``."""
    stderr_console().print(target_line(urls), soft_wrap=True)
    return shown_target(urls)


def carrying_broker(document: Any, broker: str) -> Any:
    """``document`` with ``"broker": broker`` (a dict: added; a list of dicts, one per
    queue: added to each); anything else as it is."""
    if isinstance(document, dict):
        return {**document, "broker": broker}
    if isinstance(document, list):
        return [carrying_broker(item, broker) for item in document]
    return document


def resolve_management_url(given: str | None, topology: Topology | None) -> str | None:
    """The management API's URL: ``--management-url`` / ``$RR_MANAGEMENT_URL``, else that of
    the profile the broker URLs come from (``--broker``, or the configuration file's
    ``default`` when neither ``--url`` nor the topology names a broker), else the topology's
    ``[broker] management_url`` (docs/reference/cli.md, "Profiles")."""
    if given is not None:
        return given
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    topology_urls = topology.broker.urls if topology else ()
    picked, _, _ = _picked(ctx.params.get("url") if ctx is not None else None, topology_urls)
    with guard():
        from_profile = picked.from_file.management_url() if picked.from_file else None
    return from_profile or (topology.broker.management_url if topology else None)


def _picked(
    flag_or_env: Sequence[str] | None, topology_urls: Sequence[str]
) -> tuple[Picked, tuple[str, ...], bool]:
    """Where the running command's broker URLs come from (``cli/broker_choice.py``
    :func:`pick`), the URLs ``--url`` / ``$RR_URL`` gave, and whether they came from
    ``$RR_URL``."""
    from rabbitctl_retry.cli.broker_choice import current_choice, pick
    from rabbitctl_retry.cli.given_urls import env_urls, flag_urls

    from_env = _urls_from_env()
    given = (env_urls if from_env else flag_urls)(flag_or_env or ())
    with guard():
        picked = pick(
            given, from_env=from_env, choice=current_choice(), topology_urls=topology_urls
        )
    return picked, given, from_env


def _urls_from_env() -> bool:
    """Whether the running command's ``--url`` values came from ``$RR_URL`` (else from the
    command line, or none)."""
    from typer._click.core import ParameterSource
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source("url") is ParameterSource.ENVIRONMENT


def print_json(document: Any) -> None:
    """One stable JSON document on stdout, with nothing a terminal acts on: every C0 and C1
    control, DEL, bidi control, U+2028/U+2029 and lone surrogate inside a string is written
    as a ``\\uXXXX`` escape (the same JSON value; docs/reference/dlq.md, "JSON output"). A
    :class:`~rabbitctl_retry.json_text.StreamedArray` in it is written item by item."""
    write = sys.stdout.write
    for chunk in json_chunks(document):
        write(chunk)
    write("\n")
    sys.stdout.flush()


def print_json_line(document: Any, *, compact: bool = True, flush: bool = False) -> None:
    """One JSON document on one line of stdout (``--output jsonl``; ``compact=False``: with
    a space after each ``,`` and ``:``, as ``rr status --watch`` writes each reading),
    escaped as :func:`print_json` escapes."""
    separators = (",", ":") if compact else (", ", ": ")
    text = json.dumps(document, ensure_ascii=False, separators=separators, default=json_default)
    sys.stdout.write(escape_unsafe(text) + "\n")
    if flush:
        sys.stdout.flush()


def fail(error: BaseException) -> NoReturn:
    """Print ``error`` on stderr as one line and exit with its code.

    The one place every ``rr: error:`` line is written: URL-looking words censored, every
    unprintable character (ESC, C0 and C1 controls, line breaks, bidi controls) escaped, so
    that what a broker, a file or an exception says cannot move the terminal or forge a line.
    """
    stderr_console().print(f"rr: error: {escape_unprintable(censor_text(str(error)))}")
    exit_with(exit_code_for(error))


def exit_with(code: int) -> NoReturn:
    """End the command with exit ``code``: the one place a command's exit is raised."""
    raise typer.Exit(int(code))


def censor_text(text: str) -> str:
    """Censor every URL-looking word of ``text`` and nothing else (belt and braces: errors
    censor already); see :func:`~rabbitctl_retry.errors.censor_urls`."""
    return censor_urls(text)


def run(
    coroutine: Coroutine[Any, Any, _T],
    *,
    then: Callable[[], None] | None = None,
    quiet_interrupt: bool = False,
) -> _T:
    """Run one coroutine (a command's one operation); turn rr errors into an exit code.

    ``then`` runs once the coroutine is over, however it ended, before an error's line is
    printed (what a transfer did before it failed is shown first). ``quiet_interrupt``:
    Ctrl-C ends the command with exit 0 and no line (``rr status --watch``)."""
    with guard():
        # not at import time: commands that never connect start faster
        from rabbitctl_retry import event_loop

        try:
            return event_loop.run(coroutine)
        except KeyboardInterrupt:
            if quiet_interrupt:
                exit_with(0)
            raise
        finally:
            if then is not None:
                then()


@contextmanager
def guard() -> Iterator[None]:
    """Turn an rr error raised inside into one stderr line and its exit code."""
    try:
        yield
    except RrError as error:
        fail(error)
    except KeyboardInterrupt:
        stderr_console().print("rr: interrupted")
        exit_with(130)
