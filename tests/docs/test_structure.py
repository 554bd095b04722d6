"""The docs' four parts (docs/README.md): the folders and pages exist and the index lists them,
every page is reachable from the index, no paragraph of a how-to or reference page runs over
15 lines, and every relative link resolves, file and #anchor (GitHub's anchors)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.structure import anchor, anchors, paragraphs, relative_links

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
INDEX = DOCS / "README.md"
MAX_PARAGRAPH_LINES = 15

PARTS = {
    ".": ["getting-started", "measurements", "architecture"],
    "how-to": [
        "after-an-outage",
        "migrate-to-quorum",
        "run-on-a-cluster",
        "test-a-service",
        "other-clients",
    ],
    "reference": [
        "cli",
        "topology",
        "dlq",
        "handlers",
        "runtime",
        "console",
        "publishing",
        "testing",
        "headers",
        "exit-codes",
        "configuration",
        "metrics",
    ],
    "explanation": ["attempts", "guarantees"],
}
"""The pages of each part (docs/README.md; the topics of ``rr docs``)."""

PAGES = sorted(DOCS.rglob("*.md"))


def _name(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _links_of(page: Path) -> list[Path]:
    """The Markdown pages ``page`` links to (relative links only)."""
    found = []
    for link in relative_links(page.read_text(encoding="utf-8")):
        if link.path.endswith(".md"):
            found.append((page.parent / link.path).resolve())
    return found


def test_the_parts_and_pages_exist_and_the_index_lists_them() -> None:
    listed = set(_links_of(INDEX))
    for folder, topics in PARTS.items():
        assert (DOCS / folder).is_dir(), folder
        for topic in topics:
            page = (DOCS / folder / f"{topic}.md").resolve()
            assert page.is_file(), _name(page)
            assert page in listed, f"docs/README.md does not list {_name(page)}"


def test_topics_are_unique() -> None:
    stems = [page.stem for page in PAGES if page != INDEX]
    assert len(stems) == len(set(stems)), sorted(stem for stem in stems if stems.count(stem) > 1)


def test_every_page_is_reachable_from_the_index() -> None:
    seen = {INDEX.resolve()}
    todo = [INDEX.resolve()]
    while todo:
        for target in _links_of(todo.pop()):
            if target not in seen and target.is_file():
                seen.add(target)
                todo.append(target)
    unreachable = [_name(page) for page in PAGES if page.resolve() not in seen]
    assert not unreachable


def test_the_readme_links_getting_started_first_then_the_index() -> None:
    targets = [
        (REPO / link.path).resolve() for link in relative_links((REPO / "README.md").read_text())
    ]
    pages = [target for target in targets if target.suffix == ".md"]
    assert pages[:2] == [(DOCS / "getting-started.md").resolve(), INDEX.resolve()]


@pytest.mark.parametrize(
    "page",
    [page for page in PAGES if page.parent.name in {"how-to", "reference"}],
    ids=_name,
)
def test_no_paragraph_runs_over_15_lines(page: Path) -> None:
    long = [
        f"{_name(page)}:{start}: {size} lines"
        for start, size in paragraphs(page.read_text(encoding="utf-8"))
        if size > MAX_PARAGRAPH_LINES
    ]
    assert not long, "split it, or move its measurements to docs/measurements.md"


@pytest.mark.parametrize("page", [*PAGES, REPO / "README.md"], ids=_name)
def test_every_relative_link_resolves(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = []
    for link in relative_links(text):
        target = (page.parent / link.path) if link.path else page
        where = f"{_name(page)}:{link.line}: {link.path}#{link.fragment}"
        if not target.exists():
            broken.append(f"{where}: no such file")
        elif (
            link.fragment
            and target.suffix == ".md"
            and link.fragment not in anchors(target.read_text(encoding="utf-8"))
        ):
            broken.append(f"{where}: no such heading")
    assert not broken


def test_anchors_follow_githubs_rules() -> None:
    assert (
        anchor('Settings in a policy: `settings = "policy"`')
        == "settings-in-a-policy-settings--policy"
    )
    assert anchor("Workers across cores: `--workers N`") == "workers-across-cores---workers-n"
    assert anchor("Classic queue mirroring: RabbitMQ 3.x before 4.0") == (
        "classic-queue-mirroring-rabbitmq-3x-before-40"
    )
    assert anchors("# A\n## Speed\n```\n# not a heading\n```\n## Speed\n") == {
        "a",
        "speed",
        "speed-1",
    }
    assert paragraphs("one\ntwo\n\n- item\n  more\n- next\n| a |\n") == [(1, 2), (4, 2), (6, 1)]
