"""Pure. The queues page (``/``): each queue's type, depth, what a read costs, the letters
others hold, and its depth over time (docs/reference/console.md, "What each page does")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rabbitctl_retry.console.views.base import counted, e, page, path_part


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    depth: int | None
    """None: the queue could not be read (``error`` says why)."""
    quorum: bool | None
    samples: tuple[tuple[float, int], ...] = ()
    """(seconds since the console started, depth), oldest first."""
    error: str | None = None
    reads: str = ""
    """What a read costs its letters: ``free``, ``counted`` or ``spends``
    (``dlq/read_cost.py``)."""
    held: int | None = None
    """Letters another reader holds (``messages_unacknowledged``; None: no management API)."""
    using: str | None = None
    """What this console does with the queue now (``reading``, ``moving``), or None."""


def sparkline(samples: Sequence[tuple[float, int]], width: int = 240, height: int = 36) -> str:
    """The depths over time as an inline SVG polyline (no script)."""
    if len(samples) < 2:
        return ""
    start, end = samples[0][0], samples[-1][0]
    span = max(end - start, 1e-9)
    top = max(depth for _, depth in samples) or 1
    points = " ".join(
        f"{(at - start) / span * width:.1f},{height - depth / top * (height - 2) - 1:.1f}"
        for at, depth in samples
    )
    return (
        f'<svg class="spark" width="{width}" height="{height}" role="img" '
        f'aria-label="depth over the last {end - start:.0f} s">'
        f'<polyline fill="none" stroke="currentColor" points="{points}"/></svg>'
    )


_READS = {
    "free": "free",
    "counted": "counts a delivery",
    "spends": "counts toward its limit",
}
"""What a read costs a queue's letters, in the queues table (``dlq/read_cost.py``)."""


def _held_text(row: QueueRow) -> str:
    """What the depth does not count: letters this console or another reader holds."""
    if row.using == "moving":
        return '<br><span class="held">a run of this console is moving its letters</span>'
    if row.using == "reading":
        return '<br><span class="held">this console is reading it: the depth lacks them</span>'
    if row.held:
        return (
            f'<br><span class="held">+ {counted(row.held, "letter")} held by another reader</span>'
        )
    return ""


def index_page(rows: Sequence[QueueRow], *, read_only: bool, server: str) -> str:
    lines = [
        f'<p class="server">RabbitMQ {e(server)}{" - read only" if read_only else ""}</p>',
        '<table class="queues"><thead><tr><th>queue</th><th>type</th><th>messages</th>'
        "<th>a read</th><th>over time</th><th></th></tr></thead><tbody>",
    ]
    for row in rows:
        kind = {True: "quorum", False: "classic", None: "?"}[row.quorum]
        depth = e(f"{row.depth:,}") if row.depth is not None else e(row.error or "?")
        depth += _held_text(row)
        reads = _READS.get(row.reads, "")
        lines.append(
            f'<tr data-queue="{e(row.name)}"><td>{e(row.name)}</td><td>{kind}</td>'
            f'<td class="depth">{depth}</td><td data-reads="{e(row.reads)}">{reads}</td>'
            f"<td>{sparkline(row.samples)}</td>"
            f'<td><a href="/queues/{path_part(row.name)}/groups">groups</a></td></tr>'
        )
    lines.append("</tbody></table>")
    # no refresh: a page that reloads itself takes the keyboard's focus away (reload it)
    lines.append(
        '<p><a href="/groups">the groups of every queue</a> · '
        '<a href="/">reload</a> for the depths of now</p>'
    )
    return page("Dead-letter queues", "".join(lines))
