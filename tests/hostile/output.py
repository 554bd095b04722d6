"""What the hostile-input tests check of everything rr prints."""

from __future__ import annotations

import re

UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff]"
)
"""What no output of rr may hold raw (tab and line feed aside): C0, DEL, C1, bidi controls,
line and paragraph separators, lone surrogates."""


def clean(text: str) -> None:
    """``text`` holds nothing a terminal would act on."""
    assert UNSAFE.search(text) is None, repr(text)


def one_error_line(stderr: str) -> str:
    """The one ``rr: error:`` line of ``stderr``: exactly one, the last line, no traceback,
    nothing unsafe."""
    lines = stderr.splitlines()
    errors = [text for text in lines if text.startswith("rr: error: ")]
    assert len(errors) == 1, stderr
    assert lines[-1] == errors[0], stderr
    assert "Traceback" not in stderr
    clean(stderr)
    return errors[0]
