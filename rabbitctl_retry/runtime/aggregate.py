"""One ``/metrics`` page and one ``/healthz`` answer for the workers of ``rr run --workers N``
(docs/reference/metrics.md, "Metrics and health"); no I/O: prometheus_client parses and renders.

Each worker serves its own page on 127.0.0.1; the supervisor reads them all at each scrape
(a worker that does not answer in time counts with its last page, so no sum ever goes down)
and adds them up: every sample of the same name and labels is summed (counters, histogram
buckets, counts and sums, ``rr_in_flight``), except ``rr_consuming``, which is 1 only when
every worker consumes, and ``rr_pause_resumes_at_seconds``, the latest of the workers'.
``/healthz`` is 200 ``consuming`` when every worker's is; otherwise 503, ``starting`` while a
worker still starts (or before it answers), else ``not consuming``, followed by one line per
worker that is not consuming.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

ALL_OR_NOTHING = frozenset({"rr_consuming"})
"""Samples that are the smallest of the workers' (1 only when every worker's is 1)."""

LATEST = frozenset({"rr_pause_resumes_at_seconds"})
"""Samples that are the largest of the workers' (a time: the last pause to end)."""


@dataclass(frozen=True, slots=True)
class WorkerHealth:
    """Worker ``index``'s ``/healthz``: ``status`` 0 when it did not answer."""

    index: int
    status: int
    body: str

    @property
    def state(self) -> str:
        if self.status == 200:
            return "consuming"
        text = self.body.strip()
        return text if self.status and text else "starting"


def merged_health(workers: Sequence[WorkerHealth]) -> tuple[int, str]:
    """The supervisor's ``/healthz``: (HTTP status, body)."""
    if workers and all(worker.status == 200 for worker in workers):
        return 200, "consuming\n"
    if not workers:
        return 503, "starting\n"
    missing = [worker for worker in workers if worker.status != 200]
    overall = "starting" if any(w.state == "starting" for w in missing) else "not consuming"
    lines = [overall, *(f"worker {worker.index}: {worker.state}" for worker in missing)]
    return 503, "\n".join(lines) + "\n"


def merged_page(pages: Iterable[str], *, everyone: int, stale: int = 0) -> bytes:
    """The workers' Prometheus text ``pages`` as one page; ``everyone``: how many workers
    there are (a worker whose page is missing does not consume); ``stale``: how many of the
    pages are a worker's last one, not a fresh answer (it is not known to consume)."""
    families: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    answered = 0
    for page in pages:
        answered += 1
        for family in text_string_to_metric_families(page):
            merged = families.setdefault(
                family.name, Metric(family.name, family.documentation, family.type)
            )
            totals = values.setdefault(merged.name, {})
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                if sample.name in ALL_OR_NOTHING:
                    totals[key] = min(totals.get(key, sample.value), sample.value)
                elif sample.name in LATEST:
                    totals[key] = max(totals.get(key, sample.value), sample.value)
                else:
                    totals[key] = totals.get(key, 0.0) + sample.value
    for name, totals in values.items():
        for (sample_name, labels), value in totals.items():
            if sample_name in ALL_OR_NOTHING and answered - stale < everyone:
                value = 0.0
            families[name].add_sample(sample_name, dict(labels), value)
    return generate_latest(_Fixed(families.values()))


class _Fixed(CollectorRegistry):
    """A registry of metrics already collected."""

    def __init__(self, metrics: Iterable[Metric]) -> None:
        super().__init__(auto_describe=False)
        self._metrics = list(metrics)

    def collect(self) -> Iterable[Metric]:
        return iter(self._metrics)


def health_of(answers: Mapping[int, tuple[int, str]], count: int) -> list[WorkerHealth]:
    """Every worker's health from the ``answers`` of those that answered (index -> status,
    body); the others are starting."""
    return [WorkerHealth(index, *answers.get(index, (0, ""))) for index in range(1, count + 1)]


__all__ = ["WorkerHealth", "health_of", "merged_health", "merged_page"]
