"""``rr docs [TOPIC [SECTION]] [--list] [--raw] [-o table|json|tsv]``: rr's docs in the
terminal (docs/reference/cli.md, "rr docs").

No topic: the index (docs/README.md) and the list of topics. A topic (a page's file stem,
docs_tree.py): that page rendered by rich's Markdown, through a pager when stdout is a
terminal, plain when it is a file or a pipe; ``--raw`` prints its Markdown. A section: that
part of the page alone. An unknown topic or section is a usage error (exit 2) that says what
was meant and what there is.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.finish import Outcome, Raw, finish
from rabbitctl_retry.cli.plain_table import Rows
from rabbitctl_retry.doc_topics import (
    UnknownName,
    did_you_mean,
    headings,
    resolve_topic,
    section_of,
    title_of,
)
from rabbitctl_retry.docs_tree import Page, docs_root, index_path, page_title, pages, read_page
from rabbitctl_retry.errors import RrError, UsageError


class DocsMissing(RrError):
    """A package built without its docs (not from a wheel of rr, not from a checkout)."""


def docs_command(
    topic: Annotated[
        str | None,
        typer.Argument(help="A page: its file's name without .md (rr docs --list names them)."),
    ] = None,
    section: Annotated[
        str | None,
        typer.Argument(help='A heading of that page, in quotes ("Running it"): that part only.'),
    ] = None,
    listed: Annotated[
        bool, typer.Option("--list", help="List the topics (and each page's title) only.")
    ] = False,
    raw: Annotated[
        bool, typer.Option("--raw", help="Print the page's Markdown as it is, not rendered.")
    ] = False,
    output: common.OutputOption = common.OutputFormat.TABLE,
) -> None:
    """Show rr's docs in the terminal: the index and the topics, or one page (or one section).

    Example: rr docs dlq "Big queues"
    """
    root = docs_root()
    if root is None:
        common.fail(DocsMissing("this copy of rr was installed without its docs"))
    found = pages(root)
    if listed or topic is None:
        index = None if listed else _index_text(root)
        finish(_topics_outcome(root, found, index, raw=raw), output)
        return
    try:
        page = found[resolve_topic(topic, found)]
    except UnknownName as unknown:
        common.fail(UsageError(_unknown_topic(unknown, found)))
    markdown = read_page(root, page)
    if section is not None:
        try:
            markdown = section_of(markdown, section)
        except UnknownName as unknown:
            common.fail(UsageError(_unknown_section(page, unknown, read_page(root, page))))
    finish(_page_outcome(page, markdown, section, raw=raw), output)


def _index_text(root: Path) -> str | None:
    path = index_path(root)
    return path.read_text(encoding="utf-8") if path.is_file() else None


def _topics_outcome(root: Path, found: dict[str, Page], index: str | None, *, raw: bool) -> Outcome:
    entries = [
        {
            "topic": page.topic,
            "part": page.part,
            "path": f"docs/{page.path.as_posix()}",
            "title": page_title(root, page),
        }
        for page in found.values()
    ]
    rows = Rows(
        "", ("topic", "part", "title"), [(e["topic"], e["part"], e["title"]) for e in entries]
    )

    def document() -> dict[str, Any]:
        return {"index": index, "topics": entries} if index is not None else {"topics": entries}

    def table() -> list[Any]:
        if index is None:
            return [rows]
        if raw:
            return [Raw([index])]
        _show([_markdown(index), "", rows])
        return []

    return Outcome(document=document, table=table)


def _page_outcome(page: Page, markdown: str, section: str | None, *, raw: bool) -> Outcome:
    def document() -> dict[str, Any]:
        return {
            "topic": page.topic,
            "path": f"docs/{page.path.as_posix()}",
            "title": title_of(markdown) if section is None else section,
            "section": section,
            "markdown": markdown,
        }

    def table() -> list[Any]:
        if raw:
            return [Raw([markdown])]
        _show([_markdown(markdown)])
        return []

    return Outcome(document=document, table=table)


def _markdown(text: str) -> RenderableType:
    from rich.markdown import Markdown

    return Markdown(text, hyperlinks=False)


def _show(renderables: list[Any]) -> None:
    """Print through a pager on a terminal (its colours kept: ``less -R`` unless $LESS says
    otherwise), else plainly."""
    from rabbitctl_retry.cli.render import rich_table

    console = Console(highlight=False, emoji=False)
    shown = [rich_table(item) if isinstance(item, Rows) else item for item in renderables]
    if not console.is_terminal:
        for item in shown:
            console.print(item)
        return
    os.environ.setdefault("LESS", "-R")
    with console.pager(styles=True):
        for item in shown:
            console.print(item)
    sys.stdout.flush()


def _unknown_topic(unknown: UnknownName, found: dict[str, Page]) -> str:
    return (
        f"rr docs: no topic {unknown.word!r}.{did_you_mean(unknown.suggestions)} "
        f"Topics: {', '.join(sorted(found))}"
    )


def _unknown_section(page: Page, unknown: UnknownName, markdown: str) -> str:
    sections = [h.text.replace("`", "") for h in headings(markdown) if h.level == 2]
    return (
        f"rr docs {page.topic}: no section {unknown.word!r}.{did_you_mean(unknown.suggestions)} "
        f"Its sections: {'; '.join(sections)}"
    )


def topic_names() -> tuple[str, ...]:
    """The topics, for shell completion (cli/completions.py)."""
    root = docs_root()
    return tuple(sorted(pages(root))) if root is not None else ()


__all__ = ["docs_command", "topic_names"]
