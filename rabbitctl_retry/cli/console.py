"""``rr console``: the failed-message console, a local web page (docs/reference/console.md)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.dlq import common as dlq
from rabbitctl_retry.cli.queue_names import check_queue_names
from rabbitctl_retry.dlq.origin import WaitQueues
from rabbitctl_retry.errors import ConfigError, UsageError, escape_unprintable
from rabbitctl_retry.retry.headers import DEFAULT_RETRY_HEADER
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.transport.management import ManagementApi

if TYPE_CHECKING:
    from rabbitctl_retry.console.audit import AuditLog
    from rabbitctl_retry.console.reads import Settings
from rabbitctl_retry.user_files import TOKEN_FILE_LIMIT_BYTES, FileRefused, read_text

MIN_TOKEN_CHARACTERS = 16


def console_command(
    ctx: typer.Context,
    queues: Annotated[
        list[str] | None,
        typer.Argument(
            help="The dead-letter queues to show [default: every one --topology names].",
            metavar="[QUEUE]...",
            show_default=False,
        ),
    ] = None,
    topology_file: dlq.TopologyOption = None,
    no_topology: dlq.NoTopologyOption = False,
    bind: Annotated[
        str,
        typer.Option(
            "--bind",
            help="The address to listen on (loopback by default; 0.0.0.0 or :: for every "
            "address of this machine, rr docs console).",
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="0: any free port.")] = 8765,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            metavar="FILE",
            help="Read the access token from FILE; it is never printed (else a random one is "
            "printed in the address).",
        ),
    ] = None,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Show; never retry, discard or edit.")
    ] = False,
    keep_dir: Annotated[
        Path,
        typer.Option("--keep-dir", metavar="DIR", help="Where an edit keeps the original."),
    ] = Path("."),
    audit_log: Annotated[
        Path | None,
        typer.Option(
            "--audit-log",
            metavar="FILE",
            help="Append one JSON line per action (retry, move, discard, edit) to FILE, with "
            "its report; stderr gets one line per action either way.",
        ),
    ] = None,
    label: Annotated[
        str,
        typer.Option("--label", metavar="NAME", help="Who the record says acted."),
    ] = "console",
    management_url: Annotated[
        str | None,
        common.management_url_option(
            "The management API: the pages count the letters other readers hold "
            "(messages_unacknowledged) instead of not seeing them (rr docs console)."
        ),
    ] = None,
    url: common.UrlOption = None,
) -> None:
    """Serve the failed-message console: dead letters grouped by cause, retry or discard a
    group, a message's deaths, edit and retry; a local web page that needs the printed token
    (rr docs console)."""
    try:
        from rabbitctl_retry.console import address
        from rabbitctl_retry.console.app import ConsoleConfig, serve
        from rabbitctl_retry.console.security import new_token
    except ImportError as error:
        with common.guard():
            raise ConfigError(
                f"rr console needs aiohttp ({error}): pip install 'rabbitctl-retry[console]'"
            ) from None
    used, topology = common.topology_in_use(topology_file, no_topology)
    common.check_given_management_url(management_url)
    with common.guard():
        refused = address.bind_problem(bind)
        if refused is not None:
            raise UsageError(refused)
        names = _dead_letter_queues(queues, topology)
        token = _token(token_file) if token_file is not None else new_token()
        if not keep_dir.is_dir():
            raise UsageError(f"--keep-dir {keep_dir}: not a directory")
        audit = _audit(label, audit_log)
    urls = common.resolve_urls(url, topology.broker.urls if topology else ())
    config = ConsoleConfig(
        connect=common.connect_to(ctx, urls),
        queues=names,
        settings=_settings(topology),
        token=token,
        read_only=read_only,
        bind=bind,
        port=port,
        keep_dir=keep_dir,
        audit=audit,
        management=_management(ctx, management_url, topology, urls),
        target=_target(url, used.shown),
    )
    try:
        common.run(serve(config, _announcer(bind, token, token_file)), quiet_interrupt=True)
    finally:
        audit.close()


def _management(
    ctx: typer.Context, given: str | None, topology: Topology | None, urls: Sequence[str]
) -> ManagementApi | None:
    """The management API the pages count held letters with, for the broker URL's vhost."""
    from rabbitctl_retry.console.reads import management_for
    from rabbitctl_retry.transport.management import check_management_url, vhost_of

    found = common.resolve_management_url(given, topology)
    if found is None:
        return None
    with common.guard():
        check_management_url(found)
    return management_for(common.management_connector_of(ctx), found, vhost=vhost_of(urls[0]))


def _target(urls: Sequence[str] | None, topology_file: str | None) -> tuple[str, ...]:
    """The topology file used (``./topology.toml`` when found) and ``--url`` as given, for
    the command lines the console's pages show (each URL's password masked:
    console/search.py ``target_words``)."""
    from rabbitctl_retry.console.search import target_words

    return target_words(urls or (), topology_file)


def _settings(topology: Topology | None) -> Settings:
    from rabbitctl_retry.console.reads import Settings

    return Settings(
        retry_header=topology.broker.retry_header if topology else DEFAULT_RETRY_HEADER,
        wait_queues=WaitQueues.of(topology),
    )


def _audit(label: str, path: Path | None) -> AuditLog:
    """The record (console/audit.py); a file that cannot be opened is a usage error."""
    from rabbitctl_retry.console.audit import AuditLog

    try:
        return AuditLog(label, sys.stderr, path)
    except OSError as error:
        raise UsageError(f"--audit-log {path}: {error.strerror or error}") from None


def _dead_letter_queues(queues: list[str] | None, topology: Topology | None) -> list[str]:
    """The QUEUEs named, else every dead-letter queue of the topology file."""
    names = list(queues or [])
    if not names and topology is not None:
        names = list(dict.fromkeys(q.dead_letter for q in topology.queues if q.dead_letter))
    if not names:
        raise UsageError("name the dead-letter QUEUEs, or give --topology")
    check_queue_names(names)
    return names


def _announcer(bind: str, token: str, token_file: Path | None) -> Callable[[str], None]:
    """What the console says on stderr once it listens at its base address: where (with the
    token, unless it came from a file), and a warning when it listens beyond loopback."""
    from rabbitctl_retry.console import address

    def started(base: str) -> None:
        if not address.is_loopback(bind):  # once it listens: a bind that fails says only why
            dlq.note(
                f"rr console listens on {bind}, not only on this machine: anyone who can reach "
                "it and has the token can retry, discard and edit dead letters (--read-only "
                "shows only)"
            )
        # a token from a file is never printed: stderr lands in a service manager's logs
        shown = (
            address.address_with_token(base, token)
            if token_file is None
            else address.address_for_token_file(base, str(token_file))
        )
        sys.stderr.write(f"rr console: {escape_unprintable(shown)}\n")
        sys.stderr.flush()

    return started


def _token(path: Path) -> str:
    try:  # a regular file of at most 64 KiB (docs/reference/cli.md, "Files rr reads")
        token = read_text(path, limit_bytes=TOKEN_FILE_LIMIT_BYTES).strip()
    except FileRefused as refused:
        raise ConfigError(f"--token-file {path}: {refused.reason}") from None
    if len(token) < MIN_TOKEN_CHARACTERS or not token.isascii() or not token.isprintable():
        raise UsageError(
            f"--token-file {path}: the token must be at least {MIN_TOKEN_CHARACTERS} printable "
            "ASCII characters"
        )
    return token


__all__ = ["console_command"]
