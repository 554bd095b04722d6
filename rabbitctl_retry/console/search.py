"""Pure. The console's search form (docs/reference/console.md): its fields (``text``, ``age``,
``id``) read as the ``--where`` expressions ``text=...``, ``age...`` and ``id=...``
(``dlq/filters.py`` ``parse_where``: the same conditions the ``rr dlq`` commands take), the
letters that match them counted, and the command line that selects the same letters."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

from rabbitctl_retry.dlq.filters import MAX_WORD_CHARACTERS, Condition, matches, parse_where
from rabbitctl_retry.dlq.letter import Letter, Read
from rabbitctl_retry.dlq.origin import WaitQueues, contents_of, facts
from rabbitctl_retry.errors import UsageError, censor_url

FIELDS = ("text", "age", "id")
"""The form's fields, in the order their conditions are written."""
_OPERATOR_CHARACTERS = "=!<>"


class SearchError(UsageError):
    """A search the page cannot run, said in page words (a 400 page with a way back)."""


@dataclass(frozen=True, slots=True)
class Search:
    """What the form asked: each field as typed (stripped; empty when not asked), and the
    ``--where`` expressions they make."""

    text: str = ""
    age: str = ""
    message_id: str = ""
    expressions: tuple[str, ...] = ()
    conditions: tuple[Condition, ...] = ()
    target: tuple[str, ...] = ()
    """The options that name the broker as the console was started with (``--topology``,
    ``--url``, its password masked: :func:`target_words`), repeated in :meth:`command`."""

    @property
    def active(self) -> bool:
        return bool(self.expressions)

    def query(self) -> str:
        """The fields asked, as a query string (``text=timeout&age=%3E1h``) for links."""
        asked = {"text": self.text, "age": self.age, "id": self.message_id}
        return urlencode({name: value for name, value in asked.items() if value})

    def command(self, queue: str, group_id: str | None = None, verb: str = "inspect") -> str:
        """``rr dlq VERB QUEUE [--topology T] [--url U] --where ...``: the same letters on
        the command line (``group_id``: only that group's), shell-quoted."""
        expressions = ([f"group={group_id}"] if group_id else []) + list(self.expressions)
        return command_line(verb, queue, self.target, expressions)


def command_line(verb: str, queue: str, target: Sequence[str], expressions: Sequence[str]) -> str:
    """``rr dlq VERB QUEUE TARGET --where E1 --where E2 ...``, shell-quoted (``target``:
    :func:`target_words`)."""
    words = ["rr", "dlq", verb, queue, *target]
    for expression in expressions:
        words += ["--where", expression]
    return shlex.join(words)


def target_words(urls: Sequence[str], topology: str | None) -> tuple[str, ...]:
    """``--topology T --url U ...`` as the console was started with (each when given), each
    URL's password masked (``errors.py`` ``censor_url``): a command line shown on a page
    never holds a password."""
    words: tuple[str, ...] = ("--topology", topology) if topology else ()
    for url in urls:
        words += ("--url", censor_url(url))
    return words


def search_of(query: Mapping[str, str]) -> Search:
    """The search the query string asks for (no field: no search); :class:`SearchError`
    when a field cannot be searched for."""
    text = query.get("text", "").strip()
    age = query.get("age", "").strip()
    message_id = query.get("id", "").strip()
    expressions: list[str] = []
    if text:
        _check_start("text", text)
        if len(text) > MAX_WORD_CHARACTERS:
            raise SearchError(
                f"the text to search for is {len(text):,} characters long; at most "
                f"{MAX_WORD_CHARACTERS} are searched for"
            )
        expressions.append(f"text={text}")
    if age:
        if age[0] not in "<>":
            raise SearchError(
                f"the age {age!r}: start with < or > and give a time, e.g. >1h (failed over "
                "an hour ago) or <10m (in the last ten minutes)"
            )
        expressions.append(f"age{age}")
    if message_id:
        _check_start("message id", message_id)
        expressions.append(f"id={message_id}")
    try:
        conditions = tuple(parse_where(expression) for expression in expressions)
    except UsageError:
        raise SearchError(
            f"the age {age!r} is not a time: give < or > and a number with s, m, h or d, "
            "e.g. >1h or <10m"
        ) from None
    return Search(
        text=text,
        age=age,
        message_id=message_id,
        expressions=tuple(expressions),
        conditions=conditions,
    )


def _check_start(what: str, value: str) -> None:
    if value[0] in _OPERATOR_CHARACTERS:
        raise SearchError(
            f"the {what} {value!r} starts with {value[0]!r}: the search cannot start with "
            "=, !, < or > (leave that character out)"
        )


@dataclass(slots=True)
class Matching:
    """Counts the letters read and those matching ``search`` (:meth:`keep`)."""

    search: Search
    wait_queues: WaitQueues
    now: datetime
    read: int = 0
    matched: int = 0

    def keep(self, letter: Letter[Read]) -> bool:
        """Whether the letter matches every condition (counted either way)."""
        self.read += 1
        if not self.search.conditions or _matches(self.search, letter, self.wait_queues, self.now):
            self.matched += 1
            return True
        return False


def _matches(search: Search, letter: Letter[Read], wait_queues: WaitQueues, now: datetime) -> bool:
    properties = letter.delivery.properties
    contents = contents_of(properties.message_id, letter.delivery.body, properties.undecodable)
    return matches(search.conditions, facts(properties.headers, wait_queues, contents), now)
