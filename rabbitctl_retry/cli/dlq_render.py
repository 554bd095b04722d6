"""Rendering for ``rr dlq``: dead letters and replay reports as rich tables or JSON (docs/dlq.md).

Every piece of user data (queue names, headers, bodies) goes through :func:`cell`, so control
characters are escaped and nothing is read as markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.table import Table

from rabbitctl_retry.cli.dlq_report import inspect_summary, outcome_text
from rabbitctl_retry.cli.render import cell, json_value
from rabbitctl_retry.dlq.origin import WaitQueues, death_reason, origin_queue
from rabbitctl_retry.dlq.report import TransferOutcome, TransferReport, group_counts, target_counts
from rabbitctl_retry.dlq.view import death_line, encode_body, error_lines, show_body
from rabbitctl_retry.retry.headers import count_value, deaths, delivery_count
from rabbitctl_retry.retry.properties import PROPERTY_NAMES
from rabbitctl_retry.transport.base import Delivery

_OUTCOME_STYLE = {
    TransferOutcome.SENT: "green",
    TransferOutcome.SKIPPED: "dim",
    TransferOutcome.FAILED: "bold red",
}

FAILURES_SHOWN = 50
"""Failed dead letters a replay table lists one by one (JSON lists all)."""


@dataclass(frozen=True, slots=True)
class Letter:
    """One dead letter as inspect shows it."""

    position: int
    delivery: Delivery
    retry_count: int | None
    delivery_count: int | None
    origin: str | None
    reason: str | None


def letters(
    deliveries: Sequence[Delivery], *, retry_header: str, wait_queues: WaitQueues
) -> list[Letter]:
    """The read deliveries, numbered from 1 in queue order, with what rr reads from them."""
    result = []
    for position, delivery in enumerate(deliveries, start=1):
        headers = delivery.properties.headers or {}
        origin = origin_queue(headers, wait_queues)
        raw_retry = headers.get(retry_header)
        result.append(
            Letter(
                position=position,
                delivery=delivery,
                retry_count=count_value(raw_retry) if raw_retry is not None else None,
                delivery_count=delivery_count(headers),
                origin=origin,
                reason=death_reason(headers, origin),
            )
        )
    return result


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
    queue: str, found: Sequence[Letter], *, with_body: bool = True
) -> dict[str, Any]:
    """``rr dlq inspect --output json`` (docs/dlq.md); ``count``: the messages listed."""
    messages = []
    for letter in found:
        delivery = letter.delivery
        headers = delivery.properties.headers or {}
        body, encoding = encode_body(delivery.body) if with_body else ("", "utf-8")
        messages.append(
            {
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
                "undecodable": list(delivery.properties.undecodable),
                "deaths": [
                    {
                        "queue": death.queue,
                        "reason": death.reason,
                        "count": death.count,
                        "exchange": death.exchange,
                        "routing_keys": list(death.routing_keys),
                        "time": death.time.isoformat() if death.time is not None else None,
                    }
                    for death in deaths(headers)
                ],
                "body": body,
                "body_encoding": encoding,
                "body_size": len(delivery.body),
            }
        )
    return {"queue": queue, "count": len(messages), "messages": messages}


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def inspect_table(found: Sequence[Letter], *, with_body: bool = True) -> Table:
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
            *error_lines(headers),
            *_undecodable_lines(delivery),
        ]
        history = [death_line(death) for death in deaths(headers)] or ["-"]
        row = [cell(str(letter.position)), cell("\n".join(about)), cell("\n".join(history))]
        if with_body:
            row.append(cell(show_body(delivery.body).display()))
        table.add_row(*row)
    return table


def _undecodable_lines(delivery: Delivery) -> list[str]:
    undecodable = delivery.properties.undecodable
    if not undecodable:
        return []
    return [f"undecodable: {', '.join(undecodable)} (replay --undecodable moves it aside)"]


def inspect_footer(queue: str, found: Sequence[Letter], in_queue: int) -> str:
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
            cell(f"{count:,}"),
            cell(reason or ""),
        )
    failures = [result for result in report.results if result.outcome is TransferOutcome.FAILED]
    for result in failures[:FAILURES_SHOWN]:
        table.add_row(
            cell(result.to or "-"),
            cell(result.outcome.value, _OUTCOME_STYLE[result.outcome]),
            cell(f"id {result.message_id}" if result.message_id else "(no message id)"),
            cell(result.reason or ""),
        )
    if len(failures) > FAILURES_SHOWN:
        table.add_row(
            cell("..."),
            cell("failed", _OUTCOME_STYLE[TransferOutcome.FAILED]),
            cell(f"{len(failures) - FAILURES_SHOWN:,} more"),
            cell("--output json lists every one"),
        )
    return table
