"""Rendering for ``rr dlq``: dead letters and replay reports as rich tables or JSON
(docs/reference/dlq.md).

Every piece of user data (queue names, headers, bodies) goes through :func:`cell`, so control
characters are escaped and nothing is read as markup.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rich.table import Table

from rabbitctl_retry.cli.dlq.report import inspect_summary
from rabbitctl_retry.cli.render import cell, count_cell, json_value
from rabbitctl_retry.dlq.letter import Letter, letter_of
from rabbitctl_retry.dlq.origin import WaitQueues
from rabbitctl_retry.dlq.report import (
    TransferOutcome,
    TransferReport,
    group_counts,
    outcome_text,
    target_counts,
)
from rabbitctl_retry.dlq.spill import SpilledRows
from rabbitctl_retry.dlq.view import death_line, encode_body, error_lines, show_body
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.json_text import StreamedArray
from rabbitctl_retry.retry.headers import deaths
from rabbitctl_retry.retry.properties import PROPERTY_NAMES
from rabbitctl_retry.telemetry.trace_context import trace_id_of
from rabbitctl_retry.transport.base import Delivery

_OUTCOME_STYLE = {
    TransferOutcome.SENT: "green",
    TransferOutcome.SKIPPED: "dim",
    TransferOutcome.FAILED: "bold red",
}

FAILURES_SHOWN = 50
"""Failed dead letters a replay table lists one by one (JSON lists all)."""


def letters(
    deliveries: Sequence[Delivery], *, retry_header: str, wait_queues: WaitQueues
) -> list[Letter[Delivery]]:
    """The read deliveries, numbered from 1 in queue order, with what rr reads from them."""
    return [
        letter_of(position, delivery, retry_header=retry_header, wait_queues=wait_queues)
        for position, delivery in enumerate(deliveries, start=1)
    ]


def properties_document(delivery: Delivery) -> dict[str, Any]:
    """Every set property but ``headers``; times as ISO 8601."""
    properties = delivery.properties
    document: dict[str, Any] = {}
    for name in PROPERTY_NAMES:
        value = getattr(properties, name)
        if value is not None:
            document[name] = value.isoformat() if isinstance(value, datetime) else value
    return document


def inspect_document(
    queue: str, messages: SpilledRows[dict[str, Any]], *, in_queue: int
) -> dict[str, Any]:
    """``rr dlq inspect --output json`` (docs/reference/dlq.md), from the :func:`message_document`
    of each message listed, in order; ``count``: the messages listed, ``in_queue``: the queue's
    depth when the read started. The messages are written one by one (``StreamedArray``)."""
    listed = StreamedArray(lambda: messages, len(messages))
    return {"queue": queue, "in_queue": in_queue, "count": len(listed), "messages": listed}


def message_document(letter: Letter[Delivery], *, with_body: bool = True) -> dict[str, Any]:
    """One dead letter of ``--output json`` (and one line of ``--output jsonl``)."""
    delivery = letter.delivery
    headers = delivery.properties.headers or {}
    body, encoding = encode_body(delivery.body) if with_body else ("", "utf-8")
    return {
        "position": letter.position,
        "message_id": delivery.properties.message_id,
        "exchange": delivery.exchange,
        "routing_key": delivery.routing_key,
        "redelivered": delivery.redelivered,
        "properties": properties_document(delivery),
        "headers": {key: json_value(value) for key, value in headers.items()},
        "retry_count": letter.retry_count,
        "delivery_count": letter.delivery_count,
        "origin_queue": letter.origin,
        "reason": letter.reason,
        "failed_at": _time(letter.failed_at),
        "trace_id": trace_id_of(headers),
        "undecodable": list(delivery.properties.undecodable),
        "deaths": [
            {
                "queue": death.queue,
                "reason": death.reason,
                "count": death.count,
                "exchange": death.exchange,
                "routing_keys": list(death.routing_keys),
                "time": _time(death.time),
            }
            for death in deaths(headers)
        ],
        "body": body,
        "body_encoding": encoding,
        "body_size": len(delivery.body),
    }


def _time(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def inspect_table(found: Sequence[Letter[Delivery]], *, with_body: bool = True) -> Table:
    """One row per dead letter: position, what rr reads from it, x-death, body."""
    table = Table(show_edge=False, pad_edge=False, header_style="bold", show_lines=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("message", overflow="fold", min_width=24)
    table.add_column("x-death (newest first)", overflow="fold", min_width=24)
    if with_body:
        table.add_column("body", overflow="fold", ratio=2)
    for letter in found:
        delivery = letter.delivery
        headers = delivery.properties.headers
        about = [
            f"id: {delivery.properties.message_id or '(none)'}",
            f"origin: {letter.origin or '(unknown)'}",
            f"reason: {letter.reason or '(unknown)'}",
            f"retries: {_count(letter.retry_count)}",
            f"deliveries: {_count(letter.delivery_count)}",
            *_trace_lines(headers),
            *error_lines(headers),
            *_undecodable_lines(delivery),
        ]
        history = [death_line(death) for death in deaths(headers)] or ["-"]
        row = [cell(str(letter.position)), cell("\n".join(about)), cell("\n".join(history))]
        if with_body:
            row.append(cell(show_body(delivery.body).display()))
        table.add_row(*row)
    return table


def _trace_lines(headers: Mapping[str, FieldValue] | None) -> list[str]:
    """The letter's trace id (its ``traceparent``'s; docs/reference/dlq.md), when it has one."""
    trace_id = trace_id_of(headers)
    return [] if trace_id is None else [f"trace: {trace_id}"]


def _undecodable_lines(delivery: Delivery) -> list[str]:
    undecodable = delivery.properties.undecodable
    if not undecodable:
        return []
    return [f"undecodable: {', '.join(undecodable)} (replay --undecodable moves it aside)"]


def inspect_footer(queue: str, found: Sequence[Letter[Delivery]], in_queue: int) -> str:
    groups = group_counts((letter.origin, letter.reason) for letter in found)
    return inspect_summary(queue, len(found), in_queue, groups)


def transfer_table(report: TransferReport) -> Table:
    """Where the messages went (counts per target and outcome), then each failure."""
    title = f"{report.source}" + (" (dry run)" if report.dry_run else "")
    table = Table(title=cell(title), show_edge=False, pad_edge=False, header_style="bold")
    for column in ("to", "outcome", "count", "reason"):
        table.add_column(column, overflow="fold")
    for to, outcome, reason, count in target_counts(
        result for result in report.results if result.outcome is not TransferOutcome.FAILED
    ):
        table.add_row(
            cell(to or "-"),
            cell(
                outcome_text(report.kind, TransferOutcome(outcome)),
                _OUTCOME_STYLE[TransferOutcome(outcome)],
            ),
            count_cell(count),
            cell(reason or ""),
        )
    failures = (result for result in report.results if result.outcome is TransferOutcome.FAILED)
    for result in itertools.islice(failures, FAILURES_SHOWN):
        table.add_row(
            cell(result.to or "-"),
            cell(result.outcome.value, _OUTCOME_STYLE[result.outcome]),
            cell(f"id {result.message_id}" if result.message_id else "(no message id)"),
            cell(result.reason or ""),
        )
    if report.failed > FAILURES_SHOWN:
        table.add_row(
            cell("..."),
            cell("failed", _OUTCOME_STYLE[TransferOutcome.FAILED]),
            cell(f"{report.failed - FAILURES_SHOWN:,} more"),
            cell("--output json lists every one"),
        )
    return table
