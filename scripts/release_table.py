#!/usr/bin/env python3
"""docs/reference/testing.md's table of the RabbitMQ releases rr supports ("What differs between
releases"), generated from rabbitctl_retry/releases.py.

    python scripts/release_table.py           # print the table
    python scripts/release_table.py --write   # write it into the docs, between its marks

tests/docs/test_release_table.py fails when the docs' table is not the generated one.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rabbitctl_retry.releases import markdown_table

DOCS = Path(__file__).resolve().parents[1] / "docs" / "reference" / "testing.md"
BEGIN = (
    "<!-- release-table: generated from rabbitctl_retry/releases.py by "
    "scripts/release_table.py --write; do not edit -->"
)
END = "<!-- /release-table -->"


def with_table(text: str, table: str) -> str:
    """``text`` with what stands between its marks replaced by ``table``."""
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END, start)
    return text[:start] + "\n" + table + text[end:]


def main(argv: list[str]) -> int:
    table = markdown_table()
    if argv == ["--write"]:
        DOCS.write_text(with_table(DOCS.read_text(encoding="utf-8"), table), encoding="utf-8")
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
