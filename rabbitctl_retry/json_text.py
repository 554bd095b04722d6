"""Pure. JSON text with nothing a terminal acts on: what every JSON document and line rr
writes goes through (the CLI's ``--output json`` and ``jsonl``, ``rr dlq export`` files, the
pending-copies file of ``rr run``; docs/cli.md, "Output", and docs/dlq.md, "JSON output").
"""

from __future__ import annotations

import re

_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)
"""What a terminal may act on or a UTF-8 encoder refuses: C0 (but tab and line feed), DEL,
C1, the bidi controls, U+2028/U+2029 and lone surrogates."""


def escape_unsafe(document: str) -> str:
    """``document`` (JSON text) with every :data:`_UNSAFE` character as a ``\\uXXXX`` escape.

    Outside strings JSON text holds only ASCII punctuation, digits, letters and whitespace,
    and ``json.dumps`` escapes C0 inside strings itself; so every match is inside a string,
    where the escape decodes to the same character: the same JSON value.
    """
    if document.isascii() and document.isprintable():
        return document
    return _UNSAFE.sub(lambda found: f"\\u{ord(found.group()):04x}", document)
