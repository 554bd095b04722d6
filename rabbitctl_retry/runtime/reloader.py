"""``rr run``'s reload of its topology file: when it is asked (SIGHUP) or when the file changed.

The file is looked at every ``reload_interval_s`` (its size, time and inode, then its
content); what a running consumer can take of a changed file (``topology/reload.py``: a new
``max_attempts``, ...) is handed to the service to apply from the next delivery, the rest is
logged as not applied, and a file that does not load leaves the running settings as they are
(docs/reference/runtime.md, "Changing max_attempts while it runs").
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from rabbitctl_retry.runtime.stats import RuntimeStats
from rabbitctl_retry.topology.load import load_text, read_topology_text, source_name
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.topology.reload import Reload, plan_reload

log = logging.getLogger("rr.runtime")


class TopologyReloader:
    """Reads the topology file again and hands what changed to ``apply``."""

    def __init__(
        self,
        path: Path,
        *,
        declared: Topology,
        current: Callable[[], Topology],
        apply: Callable[[Topology], None],
        interval_s: float,
        stats: RuntimeStats,
    ) -> None:
        self.path = path
        self._declared = declared
        """The topology of the start: the wait queues and exchanges that exist (a reload
        applies only what needs no new one)."""
        self._current = current
        self._apply = apply
        self._interval_s = interval_s
        self._stats = stats
        self._asked = asyncio.Event()
        self._file_state: tuple[int, int, int] | None = None
        """The topology file's (mtime_ns, size, inode) when last looked at."""
        self._file_digest: bytes | None = None
        """The SHA-256 of the topology file's text when last read."""

    def ask(self) -> None:
        """Reload at once (safe from a signal handler)."""
        self._asked.set()

    def reload(self, *, asked: bool = True) -> Reload | None:
        """Read the file again and apply what the running consumers can take; see
        :meth:`rabbitctl_retry.runtime.service.Service.reload`."""
        path = self.path
        try:
            text = read_topology_text(path)
            digest = hashlib.sha256(text.encode("utf-8")).digest()
            if not asked and digest == self._file_digest:
                return None
            self._file_digest = digest
            new = load_text(text, source=source_name(path))
            result = plan_reload(self._current(), new, declared=self._declared)
        except Exception as error:  # a file being written, a mistake: never the service's end
            self._stats.reload_failures += 1
            log.error(
                "the topology file does not load: not reloaded, the running retry settings stay",
                extra={"rr": {"file": str(path), "error": str(error)}},
            )
            return None
        for change in result.kept:
            log.warning(
                "topology change not applied while rr run runs",
                extra={"rr": {"change": str(change), "reason": change.reason}},
            )
        if result.changed:
            self._apply(result.topology)
            self._stats.reloads += 1
            log.info(
                "retry settings reloaded",
                extra={
                    "rr": {
                        "file": str(path),
                        "changes": "; ".join(str(change) for change in result.applied),
                    }
                },
            )
        elif asked:
            log.info(
                "topology file reloaded: no retry setting to change",
                extra={"rr": {"file": str(path)}},
            )
        return result

    def _file_changed(self) -> bool:
        """The topology file's size, time or inode changed since the last look."""
        try:
            found = os.stat(self.path)
        except OSError:
            state = None
        else:
            state = (found.st_mtime_ns, found.st_size, found.st_ino)
        if state == self._file_state:
            return False
        self._file_state = state
        return state is not None

    async def watch(self) -> None:
        """Reload the topology file when asked, or when it changed (every ``interval_s``; 0:
        only when asked)."""
        interval_s = self._interval_s
        while True:
            if interval_s > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._asked.wait(), interval_s)
            else:
                await self._asked.wait()
            asked = self._asked.is_set()
            self._asked.clear()
            try:
                if self._file_changed() or asked:
                    self.reload(asked=asked)
            except Exception as error:  # pragma: no cover - reload() logs its own failures
                log.error("reloading the topology file failed", extra={"rr": {"error": str(error)}})
