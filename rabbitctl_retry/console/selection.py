"""Pure. Letters of a group chosen by hand on its letters page (docs/reference/console.md, "A
group's letters"): each by its message id, a letter without one by its place in the queue and what
it was (``dlq/same_id.py`` ``Checksums``, as a letter retried alone is checked).

A selection's plan and run are the group's (``console/reads.py`` ``group_chooser``, the
operation of ``rr dlq replay|move|purge --where group=ID``) with :meth:`Selection.pick` as the
engine's ``only`` (``ops/transfer.py`` ``TransferOptions``): every letter not selected is
skipped and stays where it is, in its place; a letter without an id whose place now holds
another letter (or the same one changed) is skipped too, and the run says so.

The same letters on the command line (:meth:`Selection.command`): ``rr dlq replay QUEUE
--where group=ID --where ids=A,B`` (``dlq/filters.py`` ``ids_expression``), when every letter
selected has an id a list can name (docs/reference/console.md, "A group's letters")."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rabbitctl_retry.console.search import command_line
from rabbitctl_retry.dlq.choice import Skip
from rabbitctl_retry.dlq.filters import ListTooLong, ids_expression
from rabbitctl_retry.dlq.letter import Read
from rabbitctl_retry.dlq.same_id import Checksums, checksums
from rabbitctl_retry.errors import UsageError

MAX_PICKS = 500
"""The most letters one selection holds (a page of 500 letters, ``?per=500``)."""
NOT_SELECTED = "not selected"
"""Why a run of a selection leaves every other letter."""
SHOWN_IDS = 20
"""Ids a selection's description names before ``and N more``."""


@dataclass(frozen=True, slots=True)
class Selection:
    """Letters chosen by hand: ``ids`` (each letter with one of them is taken) and ``places``
    (a letter without an id: its place in the queue, 1 for the head, and what it was)."""

    ids: tuple[str, ...] = ()
    places: tuple[tuple[int, Checksums], ...] = ()

    @property
    def count(self) -> int:
        return len(self.ids) + len(self.places)

    def values(self) -> list[str]:
        """The selection as form values (:func:`pick_value`), read back by :func:`parse`."""
        return [pick_value(message_id=i) for i in self.ids] + [
            pick_value(position=p, shown=c) for p, c in self.places
        ]

    def letters(self) -> str:
        """Which letters, in words (the runs page, the record's ``letters``)."""
        named = [f"id {i}" for i in self.ids] + [f"#{p} (no id)" for p, _ in self.places]
        more = len(named) - SHOWN_IDS
        shown = ", ".join(named[:SHOWN_IDS]) + (f" and {more:,} more" if more > 0 else "")
        return f"{'letter' if self.count == 1 else 'letters'} {shown}"

    def command(
        self, queue: str, group_id: str, target: Sequence[str] = (), verb: str = "replay"
    ) -> str:
        """``rr dlq VERB QUEUE TARGET --where group=ID --where ids=A,B``: what the
        selection's action does, on the command line; a :class:`NoCommandLine` saying why
        (in page words) when no command line names exactly these letters."""
        if self.places:
            many = len(self.places) > 1
            raise NoCommandLine(
                f"{len(self.places):,} {'letters' if many else 'letter'} selected "
                f"{'have' if many else 'has'} no message id: a command line cannot name "
                f"{'them' if many else 'it'} (only this console can take "
                f"{'them' if many else 'it'}, by {'their' if many else 'its'} place in the "
                "queue)"
            )
        try:
            listed = ids_expression(self.ids)
        except ListTooLong as error:
            raise NoCommandLine(
                f"the selection is too long for one command line: {error}"
            ) from None
        except ValueError as error:
            raise NoCommandLine(
                f"a command line cannot name every letter selected: {error}"
            ) from None
        return command_line(verb, queue, target, [f"group={group_id}", listed])

    def expression(self) -> str | None:
        """``ids=A,B``: the selection as one ``--where`` expression, or ``None`` when no list
        names exactly its letters (:meth:`command` says why)."""
        if self.places or not self.ids:
            return None
        try:
            return ids_expression(self.ids)
        except ValueError:
            return None

    def pick(self) -> SelectionPick:
        """A fresh look for one pass over the queue (a plan, a run)."""
        return SelectionPick(self)


class NoCommandLine(ValueError):
    """Why no command line takes exactly the letters selected (:meth:`Selection.command`)."""


def pick_value(
    *, message_id: str | None = None, position: int = 0, shown: Checksums | None = None
) -> str:
    """A checkbox's value: ``i.HEX`` (the id's UTF-8 bytes in hex: any id comes back as it
    was) or ``p.N.CHECKSUMS`` (a letter without an id: its place and what it was)."""
    if message_id is not None:
        return "i." + message_id.encode("utf-8").hex()
    assert shown is not None
    return f"p.{position}.{shown}"


def parse(values: Iterable[str]) -> Selection:
    """The selection a form sent (:func:`pick_value`); a ``UsageError`` when a value is not
    one, none was sent, or too many."""
    ids: dict[str, None] = {}
    places: dict[int, Checksums] = {}
    for value in values:
        kind, _, rest = value.partition(".")
        if kind == "i":
            ids[_id_of(rest)] = None
            continue
        place, _, shown = rest.partition(".")
        sums = Checksums.parse(shown)
        if kind != "p" or not place.isdigit() or int(place) < 1 or sums is None:
            raise UsageError("the form's selection is not one this console wrote: select again")
        places[int(place)] = sums
    count = len(ids) + len(places)
    if not count:
        raise UsageError("no letter was selected: tick the letters first")
    if count > MAX_PICKS:
        raise UsageError(f"{count:,} letters selected: at most {MAX_PICKS} at once")
    return Selection(tuple(ids), tuple(sorted(places.items())))


def _id_of(text: str) -> str:
    try:
        return bytes.fromhex(text).decode("utf-8")
    except ValueError:
        raise UsageError(
            "the form's selection is not one this console wrote: select again"
        ) from None


@dataclass(slots=True)
class SelectionPick:
    """One pass's look (the engine's ``only``): ``None`` for a letter selected (the group's
    chooser decides), a :class:`Skip` for every other."""

    selection: Selection
    read: int = 0
    found: set[str] = field(default_factory=set)
    changed: list[int] = field(default_factory=list)
    """Places of letters without an id that are not the ones selected any more."""
    taken: set[int] = field(default_factory=set)
    _places: dict[int, Checksums] = field(init=False)

    def __post_init__(self) -> None:
        self._places = dict(self.selection.places)

    def __call__(self, delivery: Read) -> Skip | None:
        self.read += 1
        message_id = delivery.properties.message_id
        if message_id is not None:
            if message_id in self.selection.ids:
                self.found.add(message_id)
                return None
            return Skip(NOT_SELECTED)
        expected = self._places.get(self.read)
        if expected is None:
            return Skip(NOT_SELECTED)
        if expected.changed(checksums(delivery)):
            self.changed.append(self.read)
            return Skip(f"#{self.read} (no id) is not the letter selected: it changed since")
        self.taken.add(self.read)
        return None

    def missing(self) -> list[str]:
        """What of the selection this pass did not find as it was selected (none taken)."""
        lines = []
        gone = [i for i in self.selection.ids if i not in self.found]
        if gone:
            lines.append(
                f"not in the queue any more (taken or changed since): {', '.join(gone[:20])}"
                + (f" and {len(gone) - 20:,} more" if len(gone) > 20 else "")
            )
        places = [p for p, _ in self.selection.places if p not in self.taken]
        if places:
            shown = ", ".join(f"#{p}" for p in places[:20])
            lines.append(
                f"letters without an id not taken (their place holds another letter now, or "
                f"they changed since): {shown}"
            )
        return lines
