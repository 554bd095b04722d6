"""Where rr's docs are, and which pages they hold (docs/reference/cli.md, "rr docs").

The repository's ``docs/`` is the source; a wheel carries a copy of its Markdown pages in the
package, ``rabbitctl_retry/_docs/`` (written at build time by ``setup.py``). An installed
package reads that copy; a checkout (an editable install, or ``python -m rabbitctl_retry``
from the source tree) reads ``docs/`` itself, so a page edited there shows at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rabbitctl_retry.doc_topics import INDEX_STEM, title_of

PACKAGED = Path(__file__).parent / "_docs"
"""The wheel's copy of docs/ (setup.py ``build_py``)."""
CHECKOUT = Path(__file__).parents[1] / "docs"
"""docs/ of the source tree this package runs from, when it runs from one."""


@dataclass(frozen=True, slots=True)
class Page:
    topic: str
    """The file's stem: ``rr docs TOPIC``."""
    path: Path
    """Relative to the docs tree (``reference/dlq.md``)."""
    part: str
    """Its folder (``how-to``, ``reference``, ``explanation``), "" for a top-level page."""


def docs_root() -> Path | None:
    """The docs tree this rr reads: the packaged copy, else the checkout's docs/; None when
    neither is there (a package built without its docs)."""
    if PACKAGED.is_dir():
        return PACKAGED
    if CHECKOUT.is_dir() and (CHECKOUT.parent / "pyproject.toml").is_file():
        return CHECKOUT
    return None


def pages(root: Path) -> dict[str, Page]:
    """Every page of the tree by topic, the index left out; where two files share a stem
    the first in path order is the topic (tests/docs/test_doc_references.py keeps stems
    unique)."""
    found: dict[str, Page] = {}
    for path in sorted(root.rglob("*.md"), key=lambda p: (len(p.relative_to(root).parts), p)):
        relative = path.relative_to(root)
        if path.stem == INDEX_STEM or path.stem in found:
            continue
        part = relative.parts[0] if len(relative.parts) > 1 else ""
        found[path.stem] = Page(path.stem, relative, part)
    return found


def index_path(root: Path) -> Path:
    return root / f"{INDEX_STEM}.md"


def read_page(root: Path, page: Page) -> str:
    return (root / page.path).read_text(encoding="utf-8")


def page_title(root: Path, page: Page) -> str:
    return title_of(read_page(root, page))


__all__ = [
    "CHECKOUT",
    "PACKAGED",
    "Page",
    "docs_root",
    "index_path",
    "page_title",
    "pages",
    "read_page",
]
