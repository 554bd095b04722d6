"""Rendering: plans and topologies -> rich tables or JSON documents (docs/reference/cli.md,
"Output").

User data (queue names, argument values) is wrapped in :class:`rich.text.Text` with its
control characters escaped, so nothing a broker or a file holds can style or move the
terminal.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from rabbitctl_retry.cli.plain_table import Rows
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import Placement, Policy
from rabbitctl_retry.topology.effective import EffectiveSetting
from rabbitctl_retry.topology.expand import Desired
from rabbitctl_retry.topology.inequivalence import display_value
from rabbitctl_retry.topology.model import Queue, QueueType, ServerDelayReturns, Topology
from rabbitctl_retry.topology.naming import format_duration_ms
from rabbitctl_retry.topology.plan import REBUILD_DETAIL, Operation, OpKind, Plan, Status
from rabbitctl_retry.topology.settings import REBUILD, Change, Setting

if (
    TYPE_CHECKING
):  # not at run time: rr topology validate loads no operation (docs/reference/cli.md)
    from rabbitctl_retry.ops.live import LiveQueue

_STATUS_STYLE = {
    Status.CREATED: "green",
    Status.UNCHANGED: "dim",
    Status.PLANNED: "cyan",
    Status.LIVE: "yellow",
    Status.CHANGED: "green",
    Status.CONFLICT: "bold red",
}


def printable(text: str) -> str:
    """``text`` with control characters escaped (``\\x1b`` stays four visible characters)."""
    if text.isprintable():
        return text
    return "".join(
        char if char.isprintable() or char == " " else char.encode("unicode_escape").decode()
        for char in text
    )


class Cell(Text):
    """A table cell as shown, escaped (:func:`cell`), that keeps its raw value: what
    ``--output tsv`` writes (``cli/tsv.py``; docs/reference/cli.md, "Output formats")."""

    __slots__ = ("raw",)

    def __init__(self, raw: str, shown: str, style: str = "") -> None:
        super().__init__(shown, style=style)
        self.raw = raw


def cell(text: str, style: str = "") -> Text:
    """A table cell of user data; line breaks are kept, other control characters escaped."""
    return Cell(text, escaped(text), style)


def count_cell(count: int | None) -> Text:
    """A count: ``1,234`` in a table, ``1234`` in TSV; ``-`` (an empty TSV field) when
    there is none."""
    if count is None:
        return Cell("", "-")
    return Cell(str(count), f"{count:,}")


def escaped(text: str) -> str:
    """``text`` with its line breaks kept and other control characters escaped."""
    return "\n".join(printable(line) for line in text.split("\n"))


def format_arguments(arguments: Mapping[str, FieldValue], separator: str = "\n") -> str:
    """One ``key=value`` per line (tables), sorted by key."""
    return separator.join(
        f"{key}={display_value(value)}" for key, value in sorted(arguments.items())
    )


def json_value(value: FieldValue) -> Any:
    """A table value as JSON: bytes as base64 strings, times as ISO 8601."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list):
        return [json_value(item) for item in value]
    if isinstance(value, dict):
        return {key: json_value(item) for key, item in value.items()}
    return value


def json_arguments(arguments: Mapping[str, FieldValue]) -> dict[str, Any]:
    return {key: json_value(value) for key, value in arguments.items()}


def plan_document(result: Plan, *, dry_run: bool) -> dict[str, Any]:
    """``rr declare --output json`` (docs/reference/cli.md): per queue also rr's policy for it
    and its settings, each classified (docs/how-to/migrate-to-quorum.md, "Changing a
    topology")."""
    return {
        "dry_run": dry_run,
        "operations": [_operation_document(result, operation) for operation in result.operations],
    }


def _operation_document(result: Plan, operation: Operation) -> dict[str, Any]:
    document: dict[str, Any] = {
        "op": operation.op.value,
        "name": operation.name,
        "arguments": json_arguments(operation.arguments),
        "status": operation.status.value,
        "detail": operation.detail,
        "placement": _placement_document(result.placements.get(operation.name))
        if operation.op is OpKind.DECLARE_QUEUE
        else None,
    }
    if operation.op is OpKind.DECLARE_QUEUE:
        policy = getattr(operation.entity, "policy", None)
        document["policy"] = None if policy is None else policy.name
        document["broker_type"] = operation.broker_type
        document["settings"] = [_setting_document(row) for row in operation.settings]
    return document


def _setting_document(row: Setting) -> dict[str, str]:
    return {
        "key": row.key,
        "held_by": row.held_by.value,
        "desired": row.desired,
        "current": row.current,
        "change": row.change.value,
        "reason": row.reason,
    }


MUST_BE_REBUILT = "must be rebuilt (below)"
"""What the table and the setting lines say of a queue to rebuild: the why, the same for
every such queue, is said once after them (:func:`rebuild_line`)."""


def _short_detail(detail: str) -> str:
    """``detail`` with the rebuild's explanation left for :func:`rebuild_line`."""
    for joint in ("; ", ": "):
        if detail.endswith(joint + REBUILD_DETAIL):
            return detail.removesuffix(joint + REBUILD_DETAIL) + "; " + MUST_BE_REBUILT
    return detail


def _short_reason(reason: str) -> str:
    if reason.endswith(REBUILD):
        return reason.removesuffix(REBUILD).rstrip(": ") or MUST_BE_REBUILT
    return reason


def setting_lines(result: Plan) -> list[str]:
    """One compact line per setting of an existing queue that changes (``live``) or cannot
    (``migration``): ``payouts: delivery-limit 2 -> 4 (live: ...)``; then, when a queue must
    be rebuilt, why, once (however many queues)."""
    lines = []
    for operation in result.operations:
        for row in operation.settings:
            if row.change in (Change.LIVE, Change.MIGRATION):
                lines.append(
                    printable(
                        f"{operation.name}: {row.key} {row.current} -> {row.desired} "
                        f"({row.change.value}: {_short_reason(row.reason)})"
                    )
                )
    if any(op.rebuild for op in result.operations):
        lines.append(rebuild_line())
    return lines


def rebuild_line() -> str:
    """Why a queue must be rebuilt, said once for all of them."""
    return (
        "must be rebuilt: RabbitMQ changes no type, durability or x- argument of an existing "
        "queue, and rr declare deletes nothing; rr migrate TOPOLOGY rebuilds such a queue with "
        'its messages (rr docs migrate-to-quorum "Migrating a queue")'
    )


def _placement_document(placement: Placement | None) -> dict[str, Any] | None:
    if placement is None:
        return None
    return {"leader": placement.leader, "members": list(placement.members)}


def _members_cell(operation: Operation, placements: Mapping[str, Placement]) -> Text:
    placement = placements.get(operation.name)
    if operation.op is not OpKind.DECLARE_QUEUE or placement is None:
        return cell("")
    several = len(placement.members) > 1
    members = [
        f"{member} (leader)" if several and member == placement.leader else member
        for member in placement.members
    ]
    return cell(", ".join(members))


def plan_table(result: Plan) -> Table:
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    columns = ["op", "name", "status", "arguments", "detail"]
    if result.placements:
        columns.append("members")
    for column in columns:
        table.add_column(column, overflow="fold")
    for operation in result.operations:
        row = [
            cell(operation.op.value),
            cell(operation.name),
            cell(operation.status.value, _STATUS_STYLE[operation.status]),
            cell(_arguments_text(operation)),
            cell(_short_detail(operation.detail or "")),
        ]
        if result.placements:
            row.append(_members_cell(operation, result.placements))
        table.add_row(*row)
    return table


def _arguments_text(operation: Operation) -> str:
    """The declare's arguments; then, for a queue whose settings rr holds in a policy, the
    policy's name and keys."""
    return _queue_arguments_text(operation.arguments, getattr(operation.entity, "policy", None))


def _policy_document(policy: Policy | None) -> dict[str, Any] | None:
    """rr's policy for a queue (``settings = "policy"``), as the management API states it."""
    if policy is None:
        return None
    return {
        "name": policy.name,
        "pattern": policy.pattern,
        "apply-to": policy.apply_to,
        "priority": policy.priority,
        "definition": policy.keys,
    }


def _queue_arguments_text(arguments: Mapping[str, FieldValue], policy: Policy | None) -> str:
    shown = format_arguments(arguments)
    if policy is None:
        return shown
    keys = "\n".join(f"  {key}={display_value(value)}" for key, value in policy.definition)
    return "\n".join(part for part in (shown, f"policy {policy.name}:", keys) if part)


def default_type_line(default_queue_type: str) -> str:
    """What ``rr declare``, ``rr status`` and ``rr topology show --live`` say of the vhost's
    default queue type, when the management API states it (docs/reference/topology.md, "The
    queue's type")."""
    return (
        f"the vhost's default queue type: {default_queue_type} (from the management API): "
        "what a queue declared without x-queue-type becomes; rr declares every queue with "
        "its type"
    )


def plan_summary(result: Plan, *, dry_run: bool) -> str:
    counts: dict[Status, int] = {}
    for operation in result.operations:
        counts[operation.status] = counts.get(operation.status, 0) + 1
    parts = [
        f"{counts[status]} {status.value}"
        + ("s" if status is Status.CONFLICT and counts[status] != 1 else "")
        for status in Status
        if status in counts
    ]
    if result.conflicts:
        tail = "nothing was changed on the broker"
    elif dry_run:
        tail = "dry run: nothing was changed"
    elif Status.CREATED not in counts and Status.CHANGED not in counts:
        tail = "the broker already matches the file"
    else:
        tail = "applied"
    return f"{', '.join(parts) or 'nothing to do'}; {tail}"


def topology_document(topology: Topology, desired: Desired) -> dict[str, Any]:
    """``rr topology show --output json``: policies per queue, then every entity."""
    return {
        "retry_header": topology.broker.retry_header,
        "policies": [
            {
                "queue": queue.name,
                "type": queue.type.value,
                "max_attempts": queue.max_attempts,
                "dead_letter": queue.dead_letter,
                "rejected": queue.rejected,
                "attempts_counted_by": _counted_by(queue.type, queue.max_attempts),
                "delay": queue.delay.value,
                "wait_queues": list(queue.wait_queue_names),
                "delay_tiers": [format_duration_ms(ms) for ms in queue.delay_tiers_ms],
                "delay_exchange": queue.delay_exchange,
                "server_delay": None
                if queue.server_delay is None
                else {
                    "min": format_duration_ms(queue.server_delay[0]),
                    "max": format_duration_ms(queue.server_delay[1]),
                    "returns": (queue.delay_returns or ServerDelayReturns.FAILED).value,
                },
                "publish": queue.publish.value,
                "dead_letter_strategy": _strategy(queue),
            }
            for queue in topology.queues
        ],
        "exchanges": [
            {
                "name": exchange.name,
                "type": exchange.type,
                "durable": exchange.durable,
                "arguments": json_arguments(exchange.arguments),
                "role": exchange.role,
            }
            for exchange in desired.exchanges
        ],
        "queues": [
            {
                "name": queue.name,
                "durable": queue.durable,
                "arguments": json_arguments(queue.arguments),
                "role": queue.role,
                "policy": _policy_document(queue.policy),
            }
            for queue in desired.queues
        ],
        "bindings": [
            {
                "exchange": binding.exchange,
                "queue": binding.queue,
                "routing_key": binding.routing_key,
                "arguments": json_arguments(binding.arguments),
                "role": binding.role,
            }
            for binding in desired.bindings
        ],
        "required_exchanges": list(desired.referenced_exchanges),
    }


def _strategy(queue: Queue) -> str | None:
    """How the server moves the queue's dead letters (quorum queues with a route only)."""
    strategy = queue.effective_dead_letter_strategy
    return None if strategy is None else strategy.value


def _counted_by(queue_type: QueueType, max_attempts: int | None) -> str | None:
    if max_attempts is None:
        return None
    return "server" if queue_type is QueueType.QUORUM else "rr"


MISSING = "missing"
"""The state of a queue of the file the broker does not hold, and of a setting the file gives
a queue that nothing on the broker sets (docs/reference/cli.md, "Output")."""
TYPE_DIFFERS = "type differs"
"""The state of the type of a queue that is not of the file's type."""


def _live_state(queue: LiveQueue, key: str, effective: FieldValue) -> str:
    file = queue.file_value(key)
    if file is not None and effective is None:
        return MISSING
    if key == "x-queue-type" and file is not None and effective != file:
        return TYPE_DIFFERS
    return ""


def _live_settings(queue: LiveQueue) -> list[EffectiveSetting]:
    """The queue's settings on the broker, and those the file gives it that the broker does
    not set (all four values None), sorted by name."""
    shown = {row.key for row in queue.settings}
    absent = [
        EffectiveSetting(key=key, argument=None, policy=None, operator_policy=None, effective=None)
        for key, _ in queue.file
        if key not in shown
    ]
    return sorted((*queue.settings, *absent), key=lambda row: row.key)


def live_document(queues: Sequence[LiveQueue]) -> list[dict[str, Any]]:
    """``rr topology show --live --output json``: per queue of the file, whether it exists,
    its type on the broker, the policy and operator policy that apply to it, what the file
    gives it that the broker does not set (``missing``), and each setting's values."""
    return [
        {
            "queue": queue.name,
            "exists": queue.exists,
            "type": queue.kind,
            "policy": queue.policy,
            "operator_policy": queue.operator_policy,
            "missing": list(queue.missing),
            "settings": [
                {
                    "key": row.key,
                    "file": json_value(queue.file_value(row.key)),
                    "argument": json_value(row.argument),
                    "policy": row.policy,
                    "operator_policy": row.operator_policy,
                    "effective": json_value(row.effective),
                    "state": _live_state(queue, row.key, row.effective) or None,
                }
                for row in (_live_settings(queue) if queue.exists else ())
            ],
        }
        for queue in queues
    ]


LIVE_COLUMNS = (
    "queue",
    "setting",
    "file",
    "argument",
    "policy",
    "operator policy",
    "effective",
    "state",
)


def live_rows(queues: Sequence[LiveQueue]) -> Rows:
    """``rr topology show --live``: one row per setting of each queue on the broker and per
    setting of the file it lacks (``missing``); a queue the broker does not hold is one row,
    ``missing``."""
    rows: list[tuple[str, ...]] = []
    for queue in queues:
        if not queue.exists:
            rows.append((queue.name, "(no such queue)", "", "", "", "", "", MISSING))
            continue
        policy = f" ({queue.policy})" if queue.policy else ""
        operator = f" ({queue.operator_policy})" if queue.operator_policy else ""
        for row in _live_settings(queue):
            rows.append(
                (
                    queue.name,
                    row.key,
                    _shown(queue.file_value(row.key)),
                    _shown(row.argument),
                    _shown(row.policy) + (policy if row.policy is not None else ""),
                    _shown(row.operator_policy)
                    + (operator if row.operator_policy is not None else ""),
                    _shown(row.effective),
                    _live_state(queue, row.key, row.effective),
                )
            )
    return Rows("live settings", LIVE_COLUMNS, rows)


def _shown(value: FieldValue) -> str:
    return "-" if value is None else display_value(value)


def topology_rows(topology: Topology, desired: Desired) -> tuple[Rows, Rows]:
    """``rr topology show``: the retry policies and the entities, as raw text (escaped where
    they are printed: :func:`rich_table`, :func:`escaped_rows`)."""
    policies = []
    for queue in topology.queues:
        delay = queue.delay.value
        if queue.wait_queue_names:
            delay += " via " + ", ".join(queue.wait_queue_names)
        elif queue.delay_exchange:
            delay += " via " + queue.delay_exchange
        elif queue.server_delay is not None:
            delay += " " + "..".join(format_duration_ms(ms) for ms in queue.server_delay)
        policies.append(
            (
                queue.name,
                queue.type.value,
                "unlimited" if queue.max_attempts is None else str(queue.max_attempts),
                _counted_by(queue.type, queue.max_attempts) or "-",
                queue.dead_letter or "-",
                delay,
            )
        )
    entities = [
        (
            f"exchange ({exchange.type})",
            exchange.name,
            display_value(exchange.durable),
            format_arguments(exchange.arguments),
            exchange.role,
        )
        for exchange in desired.exchanges
    ]
    entities += [
        (
            "queue",
            entity.name,
            display_value(entity.durable),
            _queue_arguments_text(entity.arguments, entity.policy),
            entity.role,
        )
        for entity in desired.queues
    ]
    entities += [
        ("binding", b.name, "", format_arguments(b.arguments), b.role) for b in desired.bindings
    ]
    return (
        Rows("retry policies", POLICY_COLUMNS, policies),
        Rows("entities", ENTITY_COLUMNS, entities),
    )


POLICY_COLUMNS = ("queue", "type", "attempts", "counted by", "dead letter", "delay")
ENTITY_COLUMNS = ("kind", "name", "durable", "arguments", "role")


def escaped_rows(rows: Rows) -> Rows:
    """``rows`` with every cell :func:`escaped` (plain lines: ``cli/plain_table.py``)."""
    return Rows(
        rows.title, rows.columns, [tuple(escaped(text) for text in row) for row in rows.rows]
    )


def rich_table(rows: Rows) -> Table:
    """``rows`` (raw text) as a rich table (``show_edge=False``, cells escaped and folded to
    fit)."""
    table = Table(title=rows.title, show_edge=False, header_style="bold")
    for column in rows.columns:
        table.add_column(column, overflow="fold")
    for row in rows.rows:
        table.add_row(*(cell(text) for text in row))
    return table
