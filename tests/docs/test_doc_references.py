"""Every reference to the docs in the package is to a page and a section that exist.

Help and error texts name a topic, ``rr docs TOPIC`` with an optional section in quotes
(``rr docs runtime "Running it"``: docs/reference/cli.md, "rr docs"); comments and docstrings
cite the file, ``docs/reference/runtime.md, "Running it"``. Each is read from the package's
strings (docstrings included, implicit concatenations joined) and comments, and checked: the
topic is a page of the docs tree (a file's stem), the file exists, and a section named is a
heading of that page (docs_tree.py and doc_topics.py decide both, as ``rr docs`` does).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

from rabbitctl_retry.doc_topics import has_section

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "rabbitctl_retry"
DOCS = ROOT / "docs"

LAYOUT = {
    "getting-started": "getting-started.md",
    "after-an-outage": "how-to/after-an-outage.md",
    "migrate-to-quorum": "how-to/migrate-to-quorum.md",
    "run-on-a-cluster": "how-to/run-on-a-cluster.md",
    "test-a-service": "how-to/test-a-service.md",
    "other-clients": "how-to/other-clients.md",
    "cli": "reference/cli.md",
    "topology": "reference/topology.md",
    "dlq": "reference/dlq.md",
    "handlers": "reference/handlers.md",
    "runtime": "reference/runtime.md",
    "console": "reference/console.md",
    "publishing": "reference/publishing.md",
    "testing": "reference/testing.md",
    "headers": "reference/headers.md",
    "exit-codes": "reference/exit-codes.md",
    "configuration": "reference/configuration.md",
    "metrics": "reference/metrics.md",
    "attempts": "explanation/attempts.md",
    "guarantees": "explanation/guarantees.md",
    "measurements": "measurements.md",
    "architecture": "architecture.md",
}
"""The docs' pages by topic (the four parts of issue #48)."""

PENDING: frozenset[str] = frozenset()
"""Topics whose pages the docs do not have yet (a page written apart from the code): a
reference to one is held to the layout only, its section unchecked. Take a topic out once
docs/ has its page; :func:`test_pending_pages_are_still_missing` fails as soon as it does."""

SECTIONS_TO_WRITE = frozenset(
    {("reference/cli.md", "rr docs"), ("reference/testing.md", "Messages in a queue")}
)
"""Sections the code cites before the docs have them (their text waits to be applied): a
reference to one passes. Take one out once its page has it;
:func:`test_sections_to_write_are_still_missing` fails as soon as it does."""

TOPIC_REFERENCE = re.compile(
    r"rr docs (?P<topic>[a-z][a-z-]*)(?: (?P<quote>[\"'])(?P<section>[^\"']+)(?P=quote))?"
)
FILE_REFERENCE = re.compile(
    r"docs/(?P<path>[a-z][a-z/-]*\.md)(?:,? (?P<quote>[\"'])(?P<section>[^\"']+)(?P=quote))?"
)


@dataclass(frozen=True)
class Reference:
    where: str
    topic: str | None
    path: str | None
    section: str | None


def texts_of(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string constant (implicit concatenations joined, f-strings with
    their literal parts) and every run of comment lines, whitespace made single spaces."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            parts = [p.value if isinstance(p, ast.Constant) else "{}" for p in node.values]
            found.append((node.lineno, "".join(str(part) for part in parts)))
    comments: list[tuple[int, str]] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            line, text = token.start[0], token.string.lstrip("#").strip()
            if comments and comments[-1][0] == line - 1:
                comments[-1] = (line, f"{comments[-1][1]} {text}")
            else:
                comments.append((line, text))
    found += comments
    return [(line, " ".join(text.split())) for line, text in found]


def references(name: str, source: str) -> list[Reference]:
    found: list[Reference] = []
    for line, text in texts_of(source):
        where = f"{name}:{line}"
        for match in TOPIC_REFERENCE.finditer(text):
            found.append(Reference(where, match["topic"], None, match["section"]))
        for match in FILE_REFERENCE.finditer(text):
            found.append(Reference(where, None, match["path"], match["section"]))
    return found


def package_references() -> list[Reference]:
    return [
        reference
        for path in sorted(PACKAGE.rglob("*.py"))
        for reference in references(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))
    ]


def problems(reference: Reference, docs: Path, pending: frozenset[str]) -> list[str]:
    """What is wrong with ``reference`` against the docs tree ``docs``."""
    present = {path.stem: path for path in docs.rglob("*.md")}
    if reference.topic is not None:
        if reference.topic in pending and reference.topic in LAYOUT:
            return []
        page = present.get(reference.topic)
        if page is None:
            return [f"{reference.where}: rr docs {reference.topic}: no such topic"]
    else:
        assert reference.path is not None
        page = docs / reference.path
        stems = {LAYOUT[topic] for topic in pending}
        if reference.path in stems:
            return []
        if not page.is_file():
            return [f"{reference.where}: docs/{reference.path}: no such file"]
    if reference.section is None or has_section(
        page.read_text(encoding="utf-8"), reference.section
    ):
        return []
    if (page.relative_to(docs).as_posix(), reference.section) in SECTIONS_TO_WRITE:
        return []
    return [f"{reference.where}: {page.relative_to(docs)} has no section {reference.section!r}"]


def test_the_package_names_pages_and_sections_that_exist() -> None:
    found = package_references()
    assert len(found) > 300, "the references were not found"
    assert sum(1 for reference in found if reference.topic) > 50
    wrong = [problem for reference in found for problem in problems(reference, DOCS, PENDING)]
    assert wrong == []


def test_every_topic_of_the_package_is_in_the_layout() -> None:
    """Even for the pages still pending: a topic no page will have is wrong now."""
    topics = {reference.topic for reference in package_references() if reference.topic}
    assert topics - set(LAYOUT) == set()


def test_pending_pages_are_still_missing() -> None:
    """Once a pending page is there its references are checked: empty :data:`PENDING` of it."""
    arrived = sorted(topic for topic in PENDING if (DOCS / LAYOUT[topic]).is_file())
    assert arrived == [], f"docs/ has these now: take them out of PENDING: {arrived}"


def test_sections_to_write_are_still_missing() -> None:
    arrived = sorted(
        (path, section)
        for path, section in SECTIONS_TO_WRITE
        if has_section((DOCS / path).read_text(encoding="utf-8"), section)
    )
    assert arrived == [], f"docs/ has these now: take them out of SECTIONS_TO_WRITE: {arrived}"


def test_topics_are_unique_stems() -> None:
    stems = [path.stem for path in DOCS.rglob("*.md")]
    assert sorted({stem for stem in stems if stems.count(stem) > 1}) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('X = "see rr docs nosuchtopic"\n', "no such topic"),
        ("X = \"see rr docs architecture 'No such heading'\"\n", "has no section"),
        ("# docs/nosuch.md says so\n", "no such file"),
        ('"""(docs/architecture.md, "No such\n heading")"""\n', "has no section"),
        ('X = ("a (rr docs " "architecture \'Nope\')")\n', "has no section"),
    ],
)
def test_a_wrong_reference_fails(source: str, expected: str) -> None:
    found = references("x.py", source)
    assert found
    wrong = [problem for reference in found for problem in problems(reference, DOCS, PENDING)]
    assert any(expected in problem for problem in wrong), wrong


def test_a_right_reference_passes() -> None:
    source = 'X = "rr docs architecture \'Layers\'"\n# docs/architecture.md, "Layers"\n'
    found = references("x.py", source)
    assert len(found) == 2
    assert [problem for ref in found for problem in problems(ref, DOCS, PENDING)] == []
