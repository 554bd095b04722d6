"""``rr run MODULE[:ATTR]``: run handler functions as consumers."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.group import release_stdout
from rabbitctl_retry.cli.logs import LogFormat, configure_logging, defer_to_the_handlers
from rabbitctl_retry.cli.threads import exit_without_joining
from rabbitctl_retry.errors import RrError, UsageError
from rabbitctl_retry.runtime.workers import MAX_WORKERS, WORKER_DIR_ENV, WORKER_ENV, Slot
from rabbitctl_retry.topology.reload import DEFAULT_RELOAD_INTERVAL_S

if TYPE_CHECKING:
    from rabbitctl_retry.runtime.loader import HandlerSet
    from rabbitctl_retry.runtime.metrics import RunMetrics
    from rabbitctl_retry.runtime.metrics_server import MetricsServer, Probe
    from rabbitctl_retry.runtime.service import Connect, RunOptions, Service
    from rabbitctl_retry.topology.model import Topology

log = logging.getLogger("rr.runtime")

DEFAULT_BIND = "127.0.0.1"
"""Where --metrics-port listens by default: this host only, since the page has no
authentication; --metrics-bind opens it to more, with a warning (docs/reference/metrics.md, "Metrics
and health")."""

MAX_PREFETCH = 65_535
"""basic.qos prefetch-count is an AMQP short: 0..65535."""


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


TargetArgument = Annotated[
    str,
    typer.Argument(
        help="module, module:handler, or path/to/file.py[:handler] with @subscriber handlers."
    ),
]
TopologyFileOption = Annotated[
    Path | None,
    common.topology_option("The topology file with the queues' retry policies."),
]
PrefetchOption = Annotated[
    int,
    typer.Option("--prefetch", min=1, max=MAX_PREFETCH, help="basic.qos per queue."),
]
ConcurrencyOption = Annotated[
    int | None,
    typer.Option(
        "--concurrency", min=1, help="Handlers running at once per queue [default: prefetch]."
    ),
]
DeclareOption = Annotated[
    bool,
    typer.Option(
        "--declare/--no-declare",
        help="Declare the topology at start, or only check that it is there.",
    ),
]
ShutdownTimeoutOption = Annotated[
    float,
    typer.Option("--shutdown-timeout", min=0, help="Seconds in-flight handlers get on stop."),
]
WaitForBrokerOption = Annotated[
    float,
    typer.Option(
        "--wait-for-broker",
        min=0,
        metavar="SECONDS",
        help="Keep trying the first connection this long, with a growing pause, when the "
        "broker does not answer yet (a service started before it); 0: give up at once.",
    ),
]
HandlerTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--handler-timeout",
        min=0.001,
        help="Seconds one handler call may take (unless its @subscriber(timeout=) says); "
        "past it the call counts as failed, so max_attempts ends a handler that hangs "
        "(rr docs runtime 'Handlers').",
        show_default=False,
    ),
]
PendingDirOption = Annotated[
    Path,
    typer.Option(
        "--pending-dir",
        file_okay=False,
        help="Where a stop saves the in-memory delayed copies the broker did not confirm "
        "in time, for rr dlq import (rr docs guarantees 'What is guaranteed').",
    ),
]
ReloadIntervalOption = Annotated[
    float,
    typer.Option(
        "--reload-interval",
        min=0,
        help="Seconds between looks at the --topology file: a change of its retry "
        "settings (max_attempts, ...) applies from the next delivery; 0: only on SIGHUP "
        "(rr docs runtime 'Changing max_attempts while it runs').",
    ),
]
MetricsPortOption = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        min=0,
        max=65535,
        help="Serve Prometheus metrics (/metrics) and readiness (/healthz) on this port "
        "(rr docs metrics 'Metrics and health').",
        show_default=False,
    ),
]
MetricsBindOption = Annotated[
    str,
    typer.Option(
        "--metrics-bind",
        metavar="ADDRESS",
        help="The address --metrics-port listens on: 0.0.0.0 (or :: for IPv6) for every "
        "interface, for probes and scrapers from outside this host; there is no "
        "authentication (rr docs metrics 'Metrics and health') [default: 127.0.0.1, this "
        "host only].",
        show_default=False,
    ),
]
WorkersOption = Annotated[
    int,
    typer.Option(
        "--workers",
        min=1,
        max=MAX_WORKERS,
        help="Worker processes, each with its own connection (one Python process uses "
        "one core); a supervisor starts, restarts and stops them (rr docs runtime "
        "'Workers across cores').",
    ),
]


def run_command(
    ctx: typer.Context,
    target: TargetArgument,
    topology_file: TopologyFileOption = None,
    no_topology: common.NoTopologyOption = False,
    prefetch: PrefetchOption = 100,
    concurrency: ConcurrencyOption = None,
    declare: DeclareOption = True,
    shutdown_timeout: ShutdownTimeoutOption = 30.0,
    wait_for_broker: WaitForBrokerOption = 0.0,
    handler_timeout: HandlerTimeoutOption = None,
    pending_dir: PendingDirOption = Path(),
    reload_interval: ReloadIntervalOption = DEFAULT_RELOAD_INTERVAL_S,
    url: common.UrlOption = None,
    metrics_port: MetricsPortOption = None,
    metrics_bind: MetricsBindOption = DEFAULT_BIND,
    log_format: Annotated[LogFormat, typer.Option("--log-format")] = LogFormat.TEXT,
    log_level: Annotated[LogLevel, typer.Option("--log-level")] = LogLevel.INFO,
    workers: WorkersOption = 1,
) -> None:
    """Consume the queues of @subscriber handlers: ack, retry, delay and dead-letter their
    messages as the topology says. SIGINT/SIGTERM stop gracefully."""
    release_stdout()  # the handlers' own (cli/group.py)
    slot = Slot.parse(os.environ.get(WORKER_ENV, ""))
    configure_logging(log_level.value, log_format, worker=slot.label if slot else None)
    with common.guard():
        _check_bind(metrics_bind)
    if workers > 1 and slot is None:
        from rabbitctl_retry.cli.workers import supervise

        common.topology_in_use(topology_file, no_topology)  # said once, checked before workers
        supervise(
            _invoked_args(ctx),
            workers,
            declare=declare,
            shutdown_timeout_s=shutdown_timeout,
            metrics_port=metrics_port,
            serve=lambda probe, port: _serve_probe(probe, port, metrics_bind),
        )
        return
    folder = _worker_folder(slot, os.environ)
    # /metrics and /healthz answer from here on ("starting" until the service runs): loading
    # the handlers and the runtime can take seconds on a busy machine (docs/reference/metrics.md,
    # "Metrics and health")
    served = _start_worker(slot, folder, metrics_port, metrics_bind)
    from rabbitctl_retry.runtime.loader import load_target
    from rabbitctl_retry.runtime.service import RunOptions

    with common.guard():
        present = tuple(logging.getLogger().handlers)
        handlers = load_target(target)
        if defer_to_the_handlers(present):
            log.info("the handler modules configured the root logger: their lines print their way")
    used, topology = common.topology_in_use(topology_file, no_topology, say=slot is None)
    broker_urls = common.resolve_urls(url, topology.broker.urls if topology else ())
    _warn_without_heartbeat(broker_urls)
    client_name = _client_name(handlers.module, socket.gethostname(), slot)
    options = RunOptions(
        prefetch=prefetch,
        concurrency=concurrency,
        declare=declare,
        shutdown_timeout_s=shutdown_timeout,
        wait_for_broker_s=wait_for_broker,
        handler_timeout_s=handler_timeout,
        pending_dir=pending_dir,
        topology_file=used.path,
        reload_interval_s=reload_interval,
    )
    _run_service(
        handlers,
        topology,
        common.connect_to(ctx, broker_urls, client_name=client_name),
        options,
        served=served,
        ready=_ready_file(slot, folder),
    )


def _check_bind(metrics_bind: str) -> None:
    """``--metrics-bind`` names an address (a blank one is a usage error)."""
    if not metrics_bind.strip():
        raise UsageError(
            "--metrics-bind: an address, such as 127.0.0.1, or 0.0.0.0 for every interface"
        )


def _invoked_args(ctx: typer.Context) -> Sequence[str]:
    """The arguments rr was started with: what the supervisor starts each worker with."""
    root = ctx.find_root().command
    return getattr(root, "invoked_args", None) or tuple(sys.argv[1:])


def _worker_folder(slot: Slot | None, environ: Mapping[str, str]) -> Path | None:
    """Pure: a worker's folder of the supervisor (its port and ready files), or None."""
    return Path(environ[WORKER_DIR_ENV]) if slot and WORKER_DIR_ENV in environ else None


def _client_name(module: str, host: str, slot: Slot | None) -> str:
    """Pure: the connection name the broker shows for this run (and worker)."""
    name = f"rr run {module} on {host}"
    if slot is not None:
        name += f" (worker {slot.label})"
    return name


def _start_worker(
    slot: Slot | None, folder: Path | None, metrics_port: int | None, metrics_bind: str
) -> tuple[RunMetrics, MetricsServer] | None:
    """A worker watches its supervisor; the metrics, when asked for, are served from now on
    (a worker's port written for its supervisor)."""
    if slot is not None:
        from rabbitctl_retry.runtime.supervisor import watch_parent

        watch_parent()
    served = _serve_metrics(metrics_port, metrics_bind) if metrics_port is not None else None
    if served is not None and slot is not None and folder is not None:
        from rabbitctl_retry.runtime.supervisor import write_port

        write_port(folder, slot.index, served[1].port)
    return served


def _ready_file(slot: Slot | None, folder: Path | None) -> Path | None:
    """The file a worker creates once it consumes (its supervisor's sign), or None."""
    if slot is None or folder is None:
        return None
    from rabbitctl_retry.runtime.supervisor import ready_file

    return ready_file(folder, slot.index)


def _run_service(
    handlers: HandlerSet,
    topology: Topology | None,
    connect: Connect,
    options: RunOptions,
    *,
    served: tuple[RunMetrics, MetricsServer] | None,
    ready: Path | None,
) -> None:
    """Run the service to its end, with the metrics of ``served`` watching it when given."""
    from rabbitctl_retry.runtime.service import Service

    if served is None:
        service = Service(handlers, topology=topology, connect=connect, options=options)
        _serve_to_the_end(service, ready)
        return
    metrics, server = served
    service = Service(
        metrics.timed(handlers),
        topology=topology,
        connect=connect,
        options=options,
        listener=metrics.on_decision,
        recorders=(metrics,),
    )
    metrics.watch(service)
    try:
        _serve_to_the_end(service, ready)
    finally:
        server.stop()


def _serve_metrics(port: int, bind: str) -> tuple[RunMetrics, MetricsServer]:
    """The metrics of this run, served on ``bind`` ``port`` from now on."""
    from rabbitctl_retry.runtime.metrics import RunMetrics

    metrics = RunMetrics()
    return metrics, _serve_probe(metrics, port, bind)


def _serve_probe(probe: Probe, port: int, bind: str) -> MetricsServer:
    """``probe``'s /metrics and /healthz, served on ``bind`` ``port`` from now on."""
    from rabbitctl_retry.console.address import is_loopback
    from rabbitctl_retry.runtime.metrics_server import MetricsServer

    with common.guard():
        try:
            server = MetricsServer(probe, port, bind)
        except (OSError, ValueError) as error:  # ValueError: a name IDNA cannot encode
            where = f"port {port}" if bind == DEFAULT_BIND else f"{bind} port {port}"
            raise RrError(f"cannot serve metrics on {where}: {error}") from None
    server.start()
    log.info("serving metrics", extra={"rr": {"bind": bind, "port": server.port}})
    if not is_loopback(bind):  # the console's rule: this machine only
        log.warning(
            f"rr run serves metrics on {bind}, not only on this machine: anyone who can reach "
            f"port {server.port} can read /metrics and /healthz, without authentication "
            "(rr docs metrics 'Metrics and health')",
            extra={"rr": {"bind": bind, "port": server.port}},
        )
    return server


def _warn_without_heartbeat(urls: tuple[str, ...]) -> None:
    """``heartbeat=0`` turns off the only way to notice a connection that went silent
    without closing: rr run would wait on it for good (docs/reference/runtime.md, "Running it")."""
    from rabbitctl_retry.transport.url import parse_broker_url

    for url in urls:
        target = parse_broker_url(url)
        if target.heartbeat_s == 0:
            log.warning(
                "heartbeat=0: a connection that goes silent without closing (a half-open TCP "
                "connection: a peer or a NAT gone without a word) is never noticed, and rr run "
                "waits on it for good, holding its deliveries; leave heartbeats on",
                extra={"rr": {"url": target.shown}},
            )


def _serve_to_the_end(service: Service, ready: Path | None = None) -> None:
    """Run the service (a worker of ``--workers`` creates the file ``ready`` once it
    consumes); then end the process without waiting for handler threads that never returned
    (cli/threads.py)."""
    try:
        common.run(_serve(service, ready))
    except typer.Exit as stop:
        _leave(service, stop.exit_code)
        raise
    _leave(service, 0)


def _leave(service: Service, code: int) -> None:
    running = service.thread_calls.running
    if running:
        log.warning(
            "synchronous handlers still run after the stop (a thread cannot be stopped): "
            "exiting without them; their deliveries went back to their queues",
            extra={"rr": {"handlers": running}},
        )
        exit_without_joining(running, code)


async def _serve(service: Service, ready: Path | None) -> None:
    loop = asyncio.get_running_loop()
    told = asyncio.ensure_future(_tell_ready(service, ready)) if ready is not None else None
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, service.stop)
    # SIGHUP reloads the topology file (without one, it does nothing: it no longer ends rr run)
    loop.add_signal_handler(signal.SIGHUP, service.request_reload)
    try:
        await service.run()
    finally:
        if told is not None:
            told.cancel()
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(signum)


async def _tell_ready(service: Service, ready: Path) -> None:
    """Create ``ready`` once ``service`` consumes: the supervisor's sign (runtime/supervisor.py)."""
    await service.wait_ready()
    ready.touch()
