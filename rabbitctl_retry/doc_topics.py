"""The decisions of ``rr docs`` on names and Markdown text, without reading a file: which topic
a word names (or which ones it might have meant), a page's title, its headings, and one
section of it (docs/reference/cli.md, "rr docs").

A topic is a page's file stem (``docs/reference/dlq.md`` is ``dlq``); a section is named by its
heading's text, compared without its Markdown (backticks, emphasis) and its case, so that
``rr docs cli "rr doctor"`` finds ``## `rr doctor```.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rabbitctl_retry.suggestions import close_matches, did_you_mean

INDEX_STEM = "README"
"""The docs tree's index page (``rr docs`` with no topic): not a topic of its own."""

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    text: str
    """As written, Markdown and all (``rr doctor`` in backticks)."""
    line: int
    """Its line's index in the page (0 for the first line)."""


class UnknownName(LookupError):
    """A topic or section that is not there; ``suggestions`` are the close ones."""

    def __init__(self, word: str, suggestions: Sequence[str]) -> None:
        super().__init__(word)
        self.word = word
        self.suggestions = tuple(suggestions)


def resolve_topic(word: str, topics: Iterable[str]) -> str:
    """The topic ``word`` names: the same stem, else the same one in another case; else
    :class:`UnknownName` with up to three close topics."""
    known = sorted(topics)
    if word in known:
        return word
    folded = [topic for topic in known if topic.casefold() == word.casefold()]
    if folded:
        return folded[0]
    raise UnknownName(word, close_matches(word, known))


def headings(markdown: str) -> list[Heading]:
    """The page's ATX headings (``## Output``), those inside fenced code left out."""
    found: list[Heading] = []
    fenced = False
    for index, line in enumerate(markdown.splitlines()):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        matched = None if fenced else _HEADING.match(line)
        if matched:
            found.append(Heading(len(matched.group(1)), matched.group(2), index))
    return found


def plain_heading(text: str) -> str:
    """A heading's text as a reader names it: no backticks, emphasis or link brackets, one
    space between words, case folded."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[`*_]", "", text)
    return " ".join(text.split()).casefold()


def title_of(markdown: str) -> str:
    """The page's first level-1 heading, without its Markdown ("" without one)."""
    for heading in headings(markdown):
        if heading.level == 1:
            return re.sub(r"[`*]", "", heading.text)
    return ""


def find_heading(markdown: str, name: str) -> Heading | None:
    """The heading ``name`` names: the one of that text (:func:`plain_heading`'s comparison,
    a leading number such as ``5.`` left out), else the one heading that starts with it at a
    word's end (``Groups`` names ``Groups: failures by cause``); None for none, or several."""
    wanted = _unnumbered(plain_heading(name))
    found = [(heading, _unnumbered(plain_heading(heading.text))) for heading in headings(markdown)]
    exact = [heading for heading, text in found if text == wanted]
    if exact:
        return exact[0]
    starting = [
        heading
        for heading, text in found
        if text.startswith(wanted) and not text[len(wanted) : len(wanted) + 1].isalnum()
    ]
    return starting[0] if len(starting) == 1 else None


def _unnumbered(text: str) -> str:
    return re.sub(r"^\d+\.\s+", "", text)


def section_of(markdown: str, name: str) -> str:
    """The section ``name`` names (:func:`find_heading`): its heading and what follows it up
    to the next heading of its level or above; :class:`UnknownName` with close headings when
    the page has none of that name."""
    lines = markdown.splitlines(keepends=True)
    found = headings(markdown)
    heading = find_heading(markdown, name)
    if heading is None:
        names = [re.sub(r"[`*]", "", each.text) for each in found]
        raise UnknownName(name, close_matches(name, names))
    after = (h.line for h in found if h.line > heading.line and h.level <= heading.level)
    return "".join(lines[heading.line : next(after, len(lines))])


def has_section(markdown: str, name: str) -> bool:
    """Whether ``name`` names a section of the page (:func:`find_heading`)."""
    return find_heading(markdown, name) is not None


__all__ = [
    "INDEX_STEM",
    "Heading",
    "UnknownName",
    "close_matches",
    "did_you_mean",
    "find_heading",
    "has_section",
    "headings",
    "plain_heading",
    "resolve_topic",
    "section_of",
    "title_of",
]
