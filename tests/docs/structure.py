"""Links, anchors and paragraphs of the docs (pure): what :mod:`tests.docs.test_structure` checks.

No file is read here: each function takes a page's text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_ITEM = re.compile(r"^\s*([-*+]|\d+\.)\s")
_CODE_SPAN = re.compile(r"`[^`]*`")


def prose_lines(markdown: str) -> Iterator[tuple[int, str]]:
    """Each line outside fenced code blocks, with its 1-based number (fence lines left out)."""
    fence: str | None = None
    for number, line in enumerate(markdown.splitlines(), 1):
        if fence is not None:
            stripped = line.strip()
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                fence = None
            continue
        opening = _FENCE.match(line)
        if opening:
            fence = opening.group(1)
            continue
        yield number, line


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading's text: link targets and code marks dropped, lower case,
    every character but letters, digits, ``_``, ``-`` and spaces removed, spaces as ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading's anchor, a repeated one numbered as GitHub does (``speed``, ``speed-1``)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose_lines(markdown):
        heading = _HEADING.match(line)
        if heading is None:
            continue
        name = anchor(heading.group(2))
        count = seen.get(name, 0)
        seen[name] = count + 1
        found.add(name if count == 0 else f"{name}-{count}")
    return found


@dataclass(frozen=True, slots=True)
class Link:
    line: int
    path: str
    """The target's path as written (empty for ``#anchor``)."""
    fragment: str


def relative_links(markdown: str) -> list[Link]:
    """Every relative link target of the page's prose (code blocks and code spans left out)."""
    links: list[Link] = []
    for number, line in prose_lines(markdown):
        for target in _LINK.findall(_CODE_SPAN.sub("", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            path, _, fragment = target.partition("#")
            links.append(Link(number, path, fragment))
    return links


def paragraphs(markdown: str) -> list[tuple[int, int]]:
    """Each prose paragraph as (first line, number of lines). A paragraph ends at a blank line,
    a heading, a table row, an HTML comment or a fence; a list item starts a new one."""
    found: list[tuple[int, int]] = []
    start, size, previous = 0, 0, 0
    for number, line in prose_lines(markdown):
        stripped = line.strip()
        breaks = number != previous + 1 or not stripped or stripped[0] in "#|<"
        if size and (breaks or _ITEM.match(line)):
            found.append((start, size))
            size = 0
        previous = number
        if stripped and stripped[0] not in "#|<":
            if not size:
                start = number
            size += 1
    if size:
        found.append((start, size))
    return found
