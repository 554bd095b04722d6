"""Pure: the names close to a word the user mistyped, and rr's one way of offering them
(an unknown command, ``rr docs`` topic or section, topology key or value).

A name counts as close when :mod:`difflib` finds it alike, or when the word, case aside,
begins it (``run`` finds ``runtime``); the closest come first.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence


def close_matches(word: str, choices: Sequence[str], *, most: int = 3) -> list[str]:
    """Up to ``most`` of ``choices`` close to ``word``, the closest first (case aside; a
    word that starts a choice counts as close: ``run`` finds ``runtime`` and
    ``run-on-a-cluster``)."""
    by_case = {choice.casefold(): choice for choice in choices}
    folded = word.casefold()
    close = difflib.get_close_matches(folded, list(by_case), n=most, cutoff=0.6)
    starting = [c for c in by_case if folded and c.startswith(folded) and c not in close]
    return [by_case[found] for found in [*close, *starting][:most]]


def did_you_mean(suggestions: Sequence[str]) -> str:
    """`` Did you mean 'dlq'?`` (or ``'a' or 'b'``) to follow a sentence; empty without a
    suggestion."""
    if not suggestions:
        return ""
    return f" Did you mean {' or '.join(repr(found) for found in suggestions)}?"


__all__ = ["close_matches", "did_you_mean"]
