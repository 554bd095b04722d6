"""Pure. The broker URLs a command line gives, and how an error names one of them
(docs/reference/cli.md, "Several hosts" and "Malformed input").

``--url`` is given once per URL: each value is one URL, spaces and all (a space in it is
refused later: "holds a space"). ``$RR_URL`` holds the URLs separated by spaces, so a space
cannot be told from a separator there: a URL starts at each word that holds ``://``, and a
word without one is the rest of the URL before it (a password with a space: that URL holds a
space, and is refused as one, never read as two URLs).
"""

from __future__ import annotations

from collections.abc import Sequence

FLAG = "--url"
ENV = "$RR_URL"
_SCHEME_END = "://"


def flag_urls(values: Sequence[str]) -> tuple[str, ...]:
    """The URLs of ``--url``, once per value, as given."""
    return tuple(values)


def env_urls(words: Sequence[str]) -> tuple[str, ...]:
    """The URLs of ``$RR_URL`` from its words (its text split at white space)."""
    urls: list[str] = []
    for word in (piece for text in words for piece in text.split()):
        if urls and _SCHEME_END not in word:
            urls[-1] = f"{urls[-1]} {word}"
        else:
            urls.append(word)
    return tuple(urls)


def url_label(*, from_env: bool, index: int, count: int) -> str:
    """How an error names URL number ``index + 1`` of ``count`` given by ``--url`` or, with
    ``from_env``, by ``$RR_URL``: ``--url``, ``--url number 2``, ``$RR_URL``, ``$RR_URL's URL
    number 2``."""
    if count == 1:
        return ENV if from_env else FLAG
    return f"{ENV}'s URL number {index + 1}" if from_env else f"{FLAG} number {index + 1}"


__all__ = ["ENV", "FLAG", "env_urls", "flag_urls", "url_label"]
