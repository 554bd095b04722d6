#!/usr/bin/env python3
"""One message's trace across its retries, as a picture (docs/reference/runtime.md, "Tracing and
metrics": docs/images/trace-retries.png).

    python scripts/trace_picture.py record SPANS.json [--url AMQP_URL]
    python scripts/trace_picture.py render SPANS.json OUT.html [--png OUT.png]

``record`` runs the scenario of tests/telemetry/test_retry_trace.py with tracing on (an SDK
tracer provider, in memory): ``rr.Publisher`` publishes a refund; ``rr run``'s runtime fails it
three times on a classic queue (``max_attempts = 3``, each retry waiting 300 ms in the
``dlx-ttl`` wait queue, the handler's own span nested in each attempt) and dead-letters it;
``rr dlq replay`` sends it back and the handler, fixed, acks it. It writes the spans as a JSON
array of the objects the SDK's ``ConsoleSpanExporter`` prints (``ReadableSpan.to_json()``).
With ``--url`` it runs on that RabbitMQ vhost (it declares ``refunds``, ``refunds.retry`` and
``refunds.dead`` there and deletes them after); without, on the emulator (whose clock is
virtual: the waits take no time).

``render`` draws the spans of such a file (or of the ``ConsoleSpanExporter`` output: the
objects one after the other) as an HTML timeline: one row per span, children under their
parent, a bar from its start to its end, its span events as diamonds; and with ``--png``
photographs it with headless Chromium through Playwright (as tests/console's browser test
drives it).
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import shutil
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rabbitctl_retry import Message
from rabbitctl_retry.retry.outcome import AnyOutcome, Failure, RetryAfter

TOPOLOGY = """
[queues.refunds]
max_attempts = 3
dead_letter = "refunds.dead"
delay = "dlx-ttl"
"""
WAIT_S = 0.3
WORK_S = 0.04


# -- record ---------------------------------------------------------------------------------


async def record(url: str | None) -> list[dict[str, Any]]:
    """Run the scenario (module doc); the spans, as ``ConsoleSpanExporter`` writes them."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if url is None:
        from rabbitctl_retry.testing import TestBroker

        async with TestBroker(TOPOLOGY, tracer_provider=provider) as broker:
            await _scenario(broker.connect, broker.clock, provider, lambda n: broker.advance(n))
    else:
        from rabbitctl_retry.ops.clock import WallClock
        from rabbitctl_retry.transport import clients

        async def connect() -> Any:
            return await clients.connect(url, client_name="rr trace picture")

        try:
            await _scenario(connect, WallClock(), provider, asyncio.sleep)
        finally:
            connection = await connect()
            channel = await connection.channel()
            for queue in ("refunds", "refunds.retry", "refunds.dead"):
                await channel.queue_delete(queue)
            await connection.close()
    provider.shutdown()
    return [json.loads(span.to_json()) for span in exporter.get_finished_spans()]


async def _scenario(connect: Any, clock: Any, provider: Any, wait: Any) -> None:
    from opentelemetry import trace

    from rabbitctl_retry import Publisher
    from rabbitctl_retry.dlq.replay import ReplayPlan
    from rabbitctl_retry.ops.transfer import TransferOptions, new_run_id, replay_queue
    from rabbitctl_retry.runtime.handlers import Subscriber
    from rabbitctl_retry.runtime.loader import HandlerSet
    from rabbitctl_retry.runtime.service import RunOptions, Service
    from rabbitctl_retry.telemetry.switch import tracing_for
    from rabbitctl_retry.topology.load import load_text

    tracer = provider.get_tracer("refunds-app")
    fixed = False
    handled: list[int] = []

    async def refund(msg: Message) -> AnyOutcome | None:
        with tracer.start_as_current_span("charge card"):
            await asyncio.sleep(WORK_S)
        handled.append(msg.attempt)
        if fixed:
            return None
        # what a failure mapping makes of a declined card (docs/reference/handlers.md): a retry in
        # 300 ms
        declined = Failure(type="CardDeclined", message=f"card declined ({msg.attempt})")
        return RetryAfter(delay_ms=int(WAIT_S * 1000), failure=declined)

    def service() -> Service:
        return Service(
            HandlerSet(module="app", subscribers=(Subscriber("refunds", refund, "app:refund"),)),
            topology=load_text(TOPOLOGY),
            connect=connect,
            options=RunOptions(prefetch=10, shutdown_timeout_s=5),
            clock=clock,
            tracer_provider=provider,
        )

    async with service().running():
        with trace.get_tracer("web", tracer_provider=provider).start_as_current_span(
            "POST /refunds"
        ):
            async with Publisher(connect=connect, tracer_provider=provider) as publisher:
                await publisher.publish({"order": "o-1", "amount": 9.5}, to="refunds")
        while len(handled) < 3:
            await wait(0.05)
        await wait(0.2)
    fixed = True
    connection = await connect()
    try:
        await replay_queue(
            connection,
            ReplayPlan(source="refunds.dead", run_id=new_run_id()),
            TransferOptions(tracing=tracing_for(provider)),
        )
    finally:
        await connection.close()
    async with service().running():
        while len(handled) < 4:
            await wait(0.05)
        await wait(0.1)


# -- render ---------------------------------------------------------------------------------


@dataclass
class Row:
    span: dict[str, Any]
    start_ns: int
    end_ns: int
    children: list[Row] = field(default_factory=list)

    @property
    def span_id(self) -> str:
        return str(self.span["context"]["span_id"])


def _ns(stamp: str) -> int:
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


def read_spans(text: str) -> list[dict[str, Any]]:
    """A JSON array of spans, or ``ConsoleSpanExporter``'s objects one after the other."""
    stripped = text.strip()
    if stripped.startswith("["):
        return list(json.loads(stripped))
    decoder = json.JSONDecoder()
    spans, at = [], 0
    while at < len(stripped):
        span, at = decoder.raw_decode(stripped, at)
        spans.append(span)
        while at < len(stripped) and stripped[at].isspace():
            at += 1
    return spans


def tree(spans: list[dict[str, Any]]) -> list[Row]:
    """The spans as trees, each row's children in the order they started."""
    rows = {
        str(span["context"]["span_id"]): Row(span, _ns(span["start_time"]), _ns(span["end_time"]))
        for span in spans
    }
    roots: list[Row] = []
    for row in rows.values():
        parent = rows.get(str(row.span.get("parent_id")))
        (parent.children if parent is not None else roots).append(row)
    for row in rows.values():
        row.children.sort(key=lambda child: child.start_ns)
    return sorted(roots, key=lambda root: root.start_ns)


def _flat(rows: list[Row], depth: int = 0) -> list[tuple[int, Row]]:
    out: list[tuple[int, Row]] = []
    for row in rows:
        out.append((depth, row))
        out.extend(_flat(row.children, depth + 1))
    return out


def _colour(span: dict[str, Any]) -> str:
    attributes = span.get("attributes") or {}
    if span.get("status", {}).get("status_code") == "ERROR":
        return "#e4572e"
    if "PRODUCER" in str(span.get("kind")):
        return "#3b82f6"
    if attributes.get("rr.outcome") == "acked":
        return "#16a34a"
    return "#94a3b8"


def _label(span: dict[str, Any]) -> str:
    attributes = span.get("attributes") or {}
    kind = str(span.get("kind", "")).removeprefix("SpanKind.")
    details = [kind] if kind not in ("INTERNAL", "") else []
    if "rr.attempt" in attributes:
        details.append(f"attempt {attributes['rr.attempt']}")
    if "rr.outcome" in attributes:
        details.append(f"{attributes['rr.outcome']} ({attributes.get('rr.settle', '')})")
    if "error.type" in attributes:
        details.append(str(attributes["error.type"]).rsplit(".", 1)[-1])
    return " · ".join(details)


def _duration(left: float, width: float, duration_ms: float) -> str:
    """A bar's duration, after it (before it, near the right edge)."""
    if left + width > 85:
        return (
            f'<span class="ms before" style="right:{100 - left:.3f}%">{duration_ms:.1f} ms</span>'
        )
    return f'<span class="ms" style="left:{left + width:.3f}%">{duration_ms:.1f} ms</span>'


def render(spans: list[dict[str, Any]], title: str) -> str:
    """The HTML timeline of ``spans`` (module doc)."""
    flat = _flat(tree(spans))
    start = min(row.start_ns for _, row in flat)
    end = max(row.end_ns for _, row in flat)
    total = max(end - start, 1)

    def at(ns: int) -> float:
        return 100 * (ns - start) / total

    lines = []
    for depth, row in flat:
        span = row.span
        left, width = at(row.start_ns), max(at(row.end_ns) - at(row.start_ns), 0.25)
        markers = "".join(
            f'<span class="event" style="left:{at(_ns(event["timestamp"])):.3f}%" '
            f'title="{html.escape(event["name"])}"></span>'
            f'<span class="event-label" style="left:{at(_ns(event["timestamp"])):.3f}%">'
            f"{html.escape(event['name'])} → "
            f"{html.escape(str((event.get('attributes') or {}).get('rr.dead_letter.target', '')))}"
            "</span>"
            for event in span.get("events") or []
        )
        duration_ms = (row.end_ns - row.start_ns) / 1e6
        lines.append(
            '<div class="row">'
            f'<div class="name" style="padding-left:{8 + depth * 18}px">'
            f"<b>{html.escape(span['name'])}</b><small>{html.escape(_label(span))}</small></div>"
            '<div class="lane">'
            f'<span class="bar" style="left:{left:.3f}%;width:{width:.3f}%;'
            f'background:{_colour(span)}"></span>'
            f"{_duration(left, width, duration_ms)}"
            f"{markers}</div></div>"
        )
    ticks = "".join(
        f'<span class="tick" style="left:{100 * i / 5:.1f}%">{total * i / 5 / 1e6:.0f} ms</span>'
        for i in range(6)
    )
    trace_id = str(flat[0][1].span["context"]["trace_id"]).removeprefix("0x")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>
body {{ font: 13px system-ui, sans-serif; margin: 18px; color: #0f172a; background: #fff; }}
h1 {{ font-size: 16px; margin: 0 0 2px; }} p {{ margin: 0 0 12px; color: #475569; }}
.row, .axis {{ display: grid; grid-template-columns: 440px 1fr; align-items: center; }}
.row {{ border-top: 1px solid #e2e8f0; min-height: 38px; }}
.name b {{ display: block; font-weight: 600; }} .name small {{ color: #64748b; }}
.lane, .ticks {{ position: relative; height: 38px; margin-right: 90px; }}
.bar {{ position: absolute; top: 11px; height: 16px; border-radius: 3px; }}
.ms {{ position: absolute; top: 12px; margin-left: 6px; color: #475569; font-size: 11px;
  white-space: nowrap; }}
.ms.before {{ margin: 0 6px 0 0; }}
.event {{ position: absolute; top: 13px; width: 11px; height: 11px; margin-left: -6px;
  background: #7c3aed; transform: rotate(45deg); }}
.event-label {{ position: absolute; top: 26px; margin-left: 8px; font-size: 11px; color: #7c3aed;
  white-space: nowrap; }}
.tick {{ position: absolute; top: 10px; font-size: 11px; color: #64748b;
  border-left: 1px solid #cbd5e1; padding-left: 3px; height: 20px; white-space: nowrap; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>trace {html.escape(trace_id)} · {len(flat)} spans · exported by the OpenTelemetry SDK,
drawn by scripts/trace_picture.py</p>
<div class="axis"><div></div><div class="ticks">{ticks}</div></div>
{"".join(lines)}
</body></html>
"""


async def photograph(page_html: str, png: Path) -> None:
    from playwright.async_api import async_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox"]
        )
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 400})
            await page.set_content(page_html)
            await page.screenshot(path=str(png), full_page=True)
        finally:
            await browser.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    recording = commands.add_parser("record", help="run the scenario, write its spans")
    recording.add_argument("spans", type=Path)
    recording.add_argument("--url", help="a RabbitMQ vhost's URL (default: the emulator)")
    rendering = commands.add_parser("render", help="draw spans as an HTML timeline")
    rendering.add_argument("spans", type=Path)
    rendering.add_argument("html", type=Path)
    rendering.add_argument("--png", type=Path)
    rendering.add_argument("--title", default="One refund: three attempts, dead-lettered, replayed")
    arguments = parser.parse_args(argv)
    if arguments.command == "record":
        spans = asyncio.run(record(arguments.url))
        arguments.spans.write_text(json.dumps(spans, indent=2) + "\n", encoding="utf-8")
        print(f"{len(spans)} spans -> {arguments.spans}")
        return 0
    page = render(read_spans(arguments.spans.read_text(encoding="utf-8")), arguments.title)
    arguments.html.write_text(page, encoding="utf-8")
    if arguments.png is not None:
        asyncio.run(photograph(page, arguments.png))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
