"""``rr status --service URL``: the queues running ``rr run`` services paused, read from
their metrics pages (docs/reference/cli.md, "rr status"; docs/reference/handlers.md, "Pausing a
queue").

A service's page (``rr run --metrics-port``) says, per queue it consumes, ``rr_paused``
(1 while paused; with ``--workers N``, how many workers paused it) and
``rr_pause_resumes_at_seconds`` (the Unix time the pause ends). :func:`paused_queues` is
pure: pages and the time of the reading in, the paused queues out; :func:`read_services`
reads the pages (each within :data:`SERVICE_TIMEOUT_S`, all at once), and a page that
cannot be read is the service's error, not the command's.
"""

from __future__ import annotations

import concurrent.futures
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

SERVICE_TIMEOUT_S = 2.0
"""How long ``rr status`` waits for one service's metrics page."""

PAUSED = "rr_paused"
RESUMES_AT = "rr_pause_resumes_at_seconds"


@dataclass(frozen=True, slots=True)
class QueuePause:
    """A queue that one service or more paused."""

    until: datetime | None
    """When the last of the pauses ends (UTC); ``None`` when no service said (an ``rr run``
    older than ``rr_pause_resumes_at_seconds``)."""
    left_s: float | None
    """Seconds from the reading to :attr:`until` (0 once past: it is about to resume)."""
    by: tuple[str, ...]
    """The services that paused it, as given."""


@dataclass(frozen=True, slots=True)
class ServicePage:
    """One service's answer: its page, or why there is none."""

    url: str
    page: str | None = None
    error: str | None = None


def paused_in(page: str) -> dict[str, float | None]:
    """Queue -> the Unix time its pause ends (``None``: not stated), for each queue the
    Prometheus text ``page`` reports paused; ``ValueError`` when it is not such a page."""
    from prometheus_client.parser import text_string_to_metric_families

    paused: set[str] = set()
    resumes: dict[str, float] = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            queue = sample.labels.get("queue")
            if queue is None or math.isnan(sample.value):
                continue
            if sample.name == PAUSED and sample.value >= 1:
                paused.add(queue)
            elif sample.name == RESUMES_AT and math.isfinite(sample.value) and sample.value > 0:
                resumes[queue] = sample.value
    return {queue: resumes.get(queue) for queue in sorted(paused)}


def paused_queues(pages: Mapping[str, str], now: datetime) -> dict[str, QueuePause]:
    """Queue -> its pause, over the services' ``pages`` (URL -> page; a page that is not
    Prometheus text raises ``ValueError``), ``now`` the time of the reading: a queue two
    services paused resumes when the later pause ends."""
    found: dict[str, list[tuple[str, float | None]]] = {}
    for url, page in pages.items():
        for queue, until_s in paused_in(page).items():
            found.setdefault(queue, []).append((url, until_s))
    pauses: dict[str, QueuePause] = {}
    for queue, by in found.items():
        times = [until_s for _, until_s in by if until_s is not None]
        latest = max(times) if times else None
        until = None
        left_s = None
        if latest is not None:
            try:
                until = datetime.fromtimestamp(latest, UTC)
            except (OverflowError, OSError, ValueError):  # a time no calendar holds
                until = None
            else:
                left_s = max(0.0, latest - now.timestamp())
        pauses[queue] = QueuePause(until, left_s, tuple(url for url, _ in by))
    return pauses


def read_page(url: str, timeout_s: float = SERVICE_TIMEOUT_S) -> ServicePage:
    """``url``'s metrics page, or the reason there is none (never raises)."""
    from rabbitctl_retry.runtime.supervisor import read_url

    try:
        status, body = read_url(url, timeout_s)
    except TimeoutError:
        return ServicePage(url, error=f"no answer within {timeout_s:g} s")
    except (OSError, ValueError) as error:
        reason = getattr(error, "reason", None) or error
        return ServicePage(url, error=f"cannot read it: {reason}")
    if status != 200:
        return ServicePage(url, error=f"it answered HTTP {status}")
    try:
        paused_in(body)
    except ValueError:
        return ServicePage(url, error="its answer is not a metrics page")
    return ServicePage(url, page=body)


def read_services(urls: Sequence[str]) -> list[ServicePage]:
    """Every service's page, read at once (in the order given)."""
    if not urls:
        return []
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(urls), 8)) as pool:
        return list(pool.map(read_page, urls))


def check_service_url(url: str) -> None:
    """``--service``: an ``http://`` or ``https://`` URL with a host; else ``UsageError``."""
    from urllib.parse import urlsplit

    from rabbitctl_retry.errors import UsageError, censor_url

    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port
    except ValueError:
        host = None
    else:
        if parts.scheme not in ("http", "https"):
            host = None
    if not host:
        raise UsageError(
            f"--service {censor_url(url)!r}: give the metrics URL of an rr run "
            "(http://HOST:PORT/metrics, its --metrics-port)"
        )


__all__ = [
    "SERVICE_TIMEOUT_S",
    "QueuePause",
    "ServicePage",
    "check_service_url",
    "paused_in",
    "paused_queues",
    "read_page",
    "read_services",
]
