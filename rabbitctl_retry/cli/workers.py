"""``rr run --workers N``: the command's glue around the supervisor (runtime/supervisor.py):
its folder, its metrics served, its exit code."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rabbitctl_retry.cli._common import exit_with
from rabbitctl_retry.runtime.supervisor import Supervisor, worker_folder

if TYPE_CHECKING:
    from rabbitctl_retry.runtime.metrics_server import MetricsServer, Probe


def supervise(
    argv: Sequence[str],
    count: int,
    *,
    declare: bool,
    shutdown_timeout_s: float,
    metrics_port: int | None,
    serve: Callable[[Probe, int], MetricsServer],
) -> None:
    """``--workers N``: run N worker processes under this one until SIGINT/SIGTERM; exit
    with their verdict. ``serve`` serves the workers' metrics added up on a port."""
    with worker_folder() as folder:
        supervisor = Supervisor(
            argv,
            count=count,
            declare=declare,
            metrics=metrics_port is not None,
            shutdown_timeout_s=shutdown_timeout_s,
            folder=folder,
        )
        server = serve(supervisor, metrics_port) if metrics_port is not None else None
        try:
            code = supervisor.run()
        finally:
            if server is not None:
                server.stop()
    if code:
        exit_with(code)
