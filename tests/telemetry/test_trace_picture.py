"""scripts/trace_picture.py draws the spans kept beside docs/images/trace-retries.png: one row
per span, children under their parent, the dead-lettering as an event (docs/reference/runtime.md,
"Tracing and metrics")."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SPANS = ROOT / "docs" / "images" / "trace-retries.json"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "trace_picture", ROOT / "scripts" / "trace_picture.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_kept_spans_are_one_trace_of_four_attempts() -> None:
    script = _script()
    spans = script.read_spans(SPANS.read_text(encoding="utf-8"))
    assert len(spans) == 11
    assert len({span["context"]["trace_id"] for span in spans}) == 1
    roots = script.tree(spans)
    assert [root.span["name"] for root in roots] == ["POST /refunds"]
    chain = []
    row = roots[0]
    while nested := [child for child in row.children if child.span["name"] != "charge card"]:
        (row,) = nested
        chain.append((row.span["name"], (row.span["attributes"] or {}).get("rr.outcome")))
    assert chain == [
        ("refunds publish", None),
        ("refunds process", "delayed"),
        ("refunds process", "delayed"),
        ("refunds process", "dead-lettered"),
        ("refunds replay", None),
        ("refunds process", "acked"),
    ]


def test_render_draws_every_span_and_the_event() -> None:
    script = _script()
    text = SPANS.read_text(encoding="utf-8")
    console = "\n".join(json.dumps(span, indent=4) for span in json.loads(text))
    spans = script.read_spans(console)  # the ConsoleSpanExporter's form: one after the other
    page = script.render(spans, "t")
    assert page.count('<div class="row">') == 11
    assert page.count('class="event"') == 1
    assert "rr.dead_lettered → refunds.dead" in page
