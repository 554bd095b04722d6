"""The wheel carries rr's docs: ``build_py`` copies the Markdown pages of docs/ (not the
images) into the package as ``rabbitctl_retry/_docs/``, where ``rr docs`` reads them
(rabbitctl_retry/docs_tree.py). docs/ stays the source; an editable install reads it directly.
Everything else is in pyproject.toml."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DOCS = Path(__file__).parent / "docs"


class BuildWithDocs(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # reads docs/ itself
            return
        target = Path(self.build_lib) / "rabbitctl_retry" / "_docs"
        shutil.rmtree(target, ignore_errors=True)
        for page in sorted(DOCS.rglob("*.md")):
            copy = target / page.relative_to(DOCS)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page, copy)


setup(cmdclass={"build_py": BuildWithDocs})
