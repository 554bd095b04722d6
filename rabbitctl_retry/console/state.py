"""What the console runs with (:class:`ConsoleConfig`, from the CLI) and what it keeps while
it serves (:class:`State`: its runs, the depths sampled, who may connect)."""

from __future__ import annotations

import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from rabbitctl_retry.console import security as sec
from rabbitctl_retry.console.audit import DEFAULT_LABEL, AuditLog
from rabbitctl_retry.console.jobs import Jobs
from rabbitctl_retry.console.limits import IDLE_CLOSE_S
from rabbitctl_retry.console.listen import Admission
from rabbitctl_retry.console.reads import Settings
from rabbitctl_retry.ops.probe import Connect
from rabbitctl_retry.transport.management import ManagementApi


@dataclass
class ConsoleConfig:
    connect: Connect
    queues: list[str]
    settings: Settings
    token: str
    read_only: bool = False
    bind: str = "127.0.0.1"
    port: int = 8765
    keep_dir: Path = Path(".")
    """Where an edit writes the original (an export line)."""
    sample_every_s: float = 5.0
    idle_close_s: float = IDLE_CLOSE_S
    """A connection without a whole request for this long is closed (console/limits.py)."""
    max_connections: int | None = None
    """Connections held at once (None: from the limit of open files, console/limits.py)."""
    audit: AuditLog = field(default_factory=lambda: AuditLog(DEFAULT_LABEL, sys.stderr))
    """The record of every action (console/audit.py)."""
    management: ManagementApi | None = None
    """The management API, when given: the pages count the letters other readers hold."""
    target: tuple[str, ...] = ()
    """``--topology T --url U`` as the console was started with, each URL's password masked
    (console/search.py ``target_words``): repeated in a search's command line."""


@dataclass
class State:
    config: ConsoleConfig
    jobs: Jobs = field(default_factory=Jobs)
    allowed: frozenset[str] = frozenset()
    any_address: bool = False
    """Listening on every address (``--bind 0.0.0.0`` or ``::``): a request may name the
    address it reached (console/security.py)."""
    started: float = field(default_factory=time.monotonic)
    samples: dict[str, deque[tuple[float, int]]] = field(default_factory=dict)
    admission: Admission = field(default_factory=Admission)

    @property
    def csrf(self) -> str:
        return sec.csrf_of(self.config.token)


STATE = web.AppKey("state", State)
