"""Pure. The plan of a group action (or of letters selected): how many would go and where,
which would fail, the export a discard offers first, and the form that runs it."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rabbitctl_retry.console.views.base import counted, csrf_field, e, letters_path, page, path_part


@dataclass(frozen=True, slots=True)
class PaceFields:
    """The plan form's ``rate`` (messages a second) and ``ramp`` (seconds) as typed, "" for
    none (``dlq/rate.py`` reads them): the plan says them and hands them on to the run."""

    rate: str = ""
    ramp: str = ""

    def words(self) -> str:
        """`` at most 50 per second, reached over 10 s``, or ""."""
        if not self.rate:
            return ""
        reached = f", reached over {e(self.ramp)} s" if self.ramp else ""
        return f" at most {e(self.rate)} per second{reached}"

    def hidden_fields(self) -> str:
        return (
            f'<input type="hidden" name="rate" value="{e(self.rate)}">'
            f'<input type="hidden" name="ramp" value="{e(self.ramp)}">'
        )


@dataclass(frozen=True, slots=True)
class Plan:
    queue: str
    group_id: str
    action: str
    """``retry``, ``move`` or ``discard``."""
    pace: PaceFields
    would: int
    read: int
    targets: Mapping[str, int]
    """Where the letters would go (retry), by queue."""
    failing: int
    reasons: Sequence[str] = ()
    to: str = ""
    """A move's target."""
    picks: Sequence[str] = ()
    """A selection's form values (console/selection.py): the plan is of those letters."""
    selected: str = ""
    """The selection in words (``letters a, b``), or "" for the whole group."""
    selected_where: str = ""
    """The selection as a ``--where`` expression (``ids=a,b``), or "" when none names it."""


_PAST = {"retry": "retried", "move": "moved", "discard": "discarded"}


def plan_page(plan: Plan, *, csrf: str) -> str:
    verb = _PAST[plan.action]
    rows = "".join(f"<li>{n:,} to {e(target)}</li>" for target, n in sorted(plan.targets.items()))
    failing = (
        f'<p class="note failing">{counted(plan.failing, "dead letter")} would fail and stay in '
        f"{e(plan.queue)}: " + e("; ".join(plan.reasons[:5])) + "</p>"
        if plan.failing
        else ""
    )
    action = f"/queues/{path_part(plan.queue)}/groups/{path_part(plan.group_id)}/run"
    among = " (of the group's letters, the ones selected among them)"
    export = (
        '<p class="note">Discarded letters are gone for good. To keep a copy first'
        + (among if plan.picks and not plan.selected_where else "")
        + f": <code>{e(export_command(plan.queue, plan.group_id, plan.selected_where))}</code>"
        "</p>"
        if plan.action == "discard" and plan.would
        else ""
    )
    if not plan.would:
        confirm = f'<p class="note">Nothing would be {verb}.</p>'
    else:
        label = (
            f"{plan.action.capitalize()} the {counted(plan.would, 'other')}"
            if plan.failing
            else f"{plan.action.capitalize()} {'it' if plan.would == 1 else 'them'}"
        )
        danger = " danger" if plan.action == "discard" else ""
        confirm = (
            f'<form method="post" action="{action}">{csrf_field(csrf)}'
            f'<input type="hidden" name="action" value="{e(plan.action)}">'
            + plan.pace.hidden_fields()
            + f'<input type="hidden" name="to" value="{e(plan.to)}">'
            f'<input type="hidden" name="expect" value="{plan.would}">'
            + "".join(f'<input type="hidden" name="pick" value="{e(v)}">' for v in plan.picks)
            + f'<button class="confirm{danger}">{e(label)}</button></form>'
        )
    which = (
        f"the {e(plan.selected)} selected of group {e(plan.group_id)}"
        if plan.picks
        else f"group {e(plan.group_id)}"
    )
    body = (
        f'<p class="plan">{plan.would:,} of {counted(plan.read, "dead letter")} in '
        f"{e(plan.queue)} would be {verb}{plan.pace.words()} ({which}).</p>"
        + (f"<ul>{rows}</ul>" if rows else "")
        + failing
        + export
        + confirm
        + (
            f'<p><a href="{e(letters_path(plan.queue, plan.group_id))}">back to the letters</a></p>'
            if plan.picks
            else f'<p><a href="/queues/{path_part(plan.queue)}/groups">back to the groups</a></p>'
        )
    )
    return page(f"{plan.action.capitalize()} group {plan.group_id}", body)


def export_command(queue: str, group_id: str, where: str = "") -> str:
    """The ``rr dlq export`` that keeps a copy of a group's letters in a file (``where``:
    only those it matches too, ``ids=a,b`` for a selection)."""
    return (
        f"rr dlq export {shlex.quote(queue)} {shlex.quote(group_id)}.jsonl "
        f"--where group={shlex.quote(group_id)}"
        + (f" --where {shlex.quote(where)}" if where else "")
    )
