"""The ``rr: on URL`` line every command that changes the broker prints first on stderr
(docs/reference/cli.md, "Where the broker is"): what the tests of those commands take off before
they compare the rest of stderr exactly."""

from __future__ import annotations


def after_target(stderr: str) -> str:
    """``stderr`` without its first line, which must be the command's one ``rr: on URL``
    line, its password masked; no other line names a target."""
    first, newline, rest = stderr.partition("\n")
    assert first.startswith("rr: on "), stderr
    assert newline, stderr
    assert "rr: on " not in rest, stderr
    assert "@" not in first or ":******@" in first or "//******@" in first, first
    return rest
