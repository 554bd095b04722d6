"""``rr status [QUEUE...] [--topology T] [--watch SECONDS]``: depth, consumers, type and drift
of each queue, from passive declares; with a management API, also unacked messages,
consumers' prefetch and rates (docs/reference/cli.md, "rr status").

The topology file is the one of every command (``cli/topology_found.py``): ``--topology``,
else ``topology.toml`` of the current directory (said on stderr), else none. With no queue
named, the file's queues; with queues named, only those (the file gives the broker); with
neither, with a management URL every queue of the vhost, else a usage error that names the
three ways.

Ctrl-C ends ``--watch`` with exit 0 whenever it comes, during a reading too; a plain
``rr status`` interrupted prints ``rr: interrupted`` and exits 130 (docs/reference/exit-codes.md,
"Exit codes")."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.finish import finish, render

if TYPE_CHECKING:
    from collections.abc import Callable

    from rabbitctl_retry.cli.status_render import Reading, Services
    from rabbitctl_retry.ops.status import Management, Statuses
    from rabbitctl_retry.topology.consumers import ConsumerNote


SERVICE_ENV = "RR_SERVICE_URLS"
"""``--service``'s URLs when none is given, separated by spaces (as ``$RR_URL``'s)."""

ServiceOption = Annotated[
    list[str] | None,
    typer.Option(
        "--service",
        envvar=SERVICE_ENV,
        metavar="URL",
        help="The metrics URL of a running rr run (http://HOST:PORT/metrics, its "
        "--metrics-port); repeatable. Also show the queues it paused and when each "
        "resumes. Else $RR_SERVICE_URLS (URLs separated by spaces). One that cannot be "
        'read is a warning (rr docs cli "rr status").',
        show_default=False,
    ),
]

NOTHING_TO_SHOW = (
    "name the queues to show, give --topology, or give --management-url to list every "
    "queue of the vhost (or run it where a topology.toml is)"
)


def status_command(
    ctx: typer.Context,
    queues: Annotated[
        list[str] | None,
        typer.Argument(
            help="Queues to show (besides those of --topology). With none: the queues of the "
            "topology file (--topology, else ./topology.toml), else with a management URL "
            'every queue of the vhost (rr docs cli "rr status").',
            show_default=False,
        ),
    ] = None,
    topology_file: Annotated[
        Path | None,
        common.topology_option(
            "Show every queue the file declares (wait queues and dead-letter queues "
            "included) and whether each is what the file says."
        ),
    ] = None,
    no_topology: common.NoTopologyOption = False,
    watch: Annotated[
        str | None,
        typer.Option(
            "--watch",
            "-w",
            help="Show it again every this many seconds, until Ctrl-C; each reading with its "
            "time (UTC).",
            show_default=False,
        ),
    ] = None,
    url: common.UrlOption = None,
    management_url: Annotated[
        str | None,
        common.management_url_option(
            "The management plugin's URL (http://USER:PASSWORD@HOST:15672/): also show "
            "each queue's unacked messages, consumers' prefetch, publish and deliver rates, "
            "and its settings, with the policy and operator policy that apply and the "
            "effective value (rr docs topology). Else [broker] management_url of --topology."
        ),
    ] = None,
    services: ServiceOption = None,
    output: common.OutputOption = common.OutputFormat.TABLE,
) -> None:
    """Show each queue's messages, consumers and type, and whether it matches the topology
    file; exit 1 when a queue is missing or differs from the file."""
    from rabbitctl_retry.cli.queue_names import check_queue_names
    from rabbitctl_retry.cli.status_render import Reading, status_outcome
    from rabbitctl_retry.cli.status_services import check_service_url
    from rabbitctl_retry.cli.status_watch import parse_watch_s
    from rabbitctl_retry.ops.status import read_statuses
    from rabbitctl_retry.topology.expand import QueueEntity, expand

    with common.guard():
        watch_s = parse_watch_s(watch) if watch is not None else None
        check_queue_names(queues or ())
        for service in services or ():
            check_service_url(service)
    used, file = common.topology_in_use(topology_file, no_topology)
    topology = None if used.found and queues else file  # named queues only, file's broker
    listed = list(expand(topology).queues) if topology is not None else []
    in_file = {queue.name for queue in listed}
    retried = frozenset(
        queue.name for queue in (topology.queues if topology else ()) if queue.max_attempts
    )
    named = [QueueEntity(name=name) for name in queues or () if name not in in_file]
    urls = common.resolve_urls(url, file.broker.urls if file else ())
    connect = common.connect_to(ctx, urls)
    common.check_given_management_url(management_url)
    given = common.resolve_management_url(management_url, file)
    management = _management(ctx, given, urls[0]) if given is not None else None
    every_queue = topology is None and not queues
    if every_queue and management is None:
        with common.guard():
            from rabbitctl_retry.errors import UsageError

            raise UsageError(NOTHING_TO_SHOW)
    notes: list[str] = []

    def reading() -> Reading:
        read_at = datetime.now(UTC)
        statuses = read_statuses(
            connect, topology, None if every_queue else named, management=management
        )
        found = common.run(statuses, quiet_interrupt=watch_s is not None)
        notes = _consumer_notes(found, retried)
        return Reading(
            found.queues,
            read_at=read_at,
            management=management is not None,
            default_queue_type=found.default_queue_type,
            consumers=found.consumers,
            notes=notes,
            services=_read_services(services, read_at),
        )

    if watch_s is None:
        finish(status_outcome(reading(), notes=notes), output)
        return
    _watch(reading, watch_s, notes, output)


def _read_services(urls: list[str] | None, read_at: datetime) -> Services | None:
    """What the services at ``urls`` say they paused (``None`` without ``--service``)."""
    from rabbitctl_retry.cli.status_render import Services
    from rabbitctl_retry.cli.status_services import paused_queues, read_services

    if not urls:
        return None
    pages = read_services(list(dict.fromkeys(urls)))
    answered = {page.url: page.page for page in pages if page.page is not None}
    errors = {page.url: page.error for page in pages if page.error is not None}
    return Services(paused_queues(answered, read_at), tuple(pages), errors)


def _consumer_notes(found: Statuses, retried: frozenset[str]) -> list[ConsumerNote]:
    """What the consumers that are not rr do with the file's queues (none without them)."""
    from rabbitctl_retry.topology.consumers import consumer_notes

    if found.consumers is None:
        return []
    return consumer_notes(
        [status.entity for status in found.queues if status.listed],
        retried,
        found.consumers,
        found.server.release,
    )


def _watch(
    reading: Callable[[], Reading], watch_s: float, notes: list[str], output: common.OutputFormat
) -> None:
    """``--watch``: a reading every ``watch_s`` seconds until Ctrl-C (exit 0)."""
    from rabbitctl_retry.cli.status_render import status_outcome

    try:  # Ctrl-C, during a reading too, is the end of the watch: exit 0
        first = True
        while True:
            render(status_outcome(reading(), watch_s=watch_s, notes=notes, first=first), output)
            notes, first = [], False  # said once, under the first reading
            time.sleep(watch_s)
    except KeyboardInterrupt:
        common.exit_with(0)


def _management(ctx: typer.Context, url: str, amqp_url: str) -> Management:
    """What ``rr status`` reads of the management API at ``url``, for the vhost of the
    broker URL (``url`` from --management-url is checked before, by
    :func:`check_given_management_url`; this checks one from a profile or the file)."""
    from rabbitctl_retry.ops.status import management_reads
    from rabbitctl_retry.transport.management import check_management_url, vhost_of

    with common.guard():
        check_management_url(url)
    return management_reads(
        url, vhost=vhost_of(amqp_url), management=common.management_connector_of(ctx)
    )


__all__ = ["NOTHING_TO_SHOW", "SERVICE_ENV", "status_command"]
