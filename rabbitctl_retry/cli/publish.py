"""``rr publish``: messages from the command line or an export file, published with
confirms, and a report of what was confirmed, returned or refused (docs/reference/cli.md,
"rr publish")."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.dlq import common as dlq
from rabbitctl_retry.cli.dlq.report import bulk_exit_code, line_list
from rabbitctl_retry.cli.finish import Outcome, finish
from rabbitctl_retry.cli.render import cell
from rabbitctl_retry.dlq.jsonl import Record, parse_record
from rabbitctl_retry.dlq.rate import parse_pace
from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerUnreachable,
    DataError,
    ExitCode,
    PartialFailure,
    RrError,
    UsageError,
)
from rabbitctl_retry.ops import dlq as shell
from rabbitctl_retry.ops import publish as ops
from rabbitctl_retry.telemetry.switch import tracing_for
from rabbitctl_retry.user_files import (
    BODY_LIMIT_BYTES,
    IMPORT_LINE_LIMIT_BYTES,
    FileRefused,
    decoded,
    read_bytes,
    read_stream,
)

STDIN = "-"


QueueArgument = Annotated[
    str | None,
    typer.Argument(help="The queue to publish into (through the default exchange)."),
]

ExchangeOption = Annotated[
    str | None,
    typer.Option("--exchange", "-e", help="Publish to this exchange instead of a QUEUE (with -k)."),
]

RoutingKeyOption = Annotated[
    str | None,
    typer.Option("--routing-key", "-k", help="The routing key, with --exchange (default: empty)."),
]

BodyOption = Annotated[
    str | None,
    typer.Option(
        "--body",
        help="The body, as UTF-8 text. Without --body, --body-file or --file: an empty body.",
    ),
]

BodyFileOption = Annotated[
    str | None,
    typer.Option("--body-file", help="The body, the bytes of this file (- for stdin)."),
]

FileOption = Annotated[
    str | None,
    typer.Option(
        "--file",
        help="Publish every message of this JSON Lines file, as rr dlq export writes it "
        "(- for stdin), in its order: bodies, properties and headers as they are in it, "
        "--header and --property set over them.",
    ),
]

HeaderOption = Annotated[
    list[str] | None,
    typer.Option(
        "--header",
        "-H",
        help='A header: K=V (a string) or K:=JSON (5, true, {"$int32": 5}...). Repeat.',
    ),
]

PropertyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--property",
        "-P",
        help="A property: K=V (content_type=application/json, message_id=..., "
        "delivery_mode=1 for a transient message: persistent by default). Repeat.",
    ),
]

CountOption = Annotated[
    int,
    typer.Option(
        "--count",
        "-n",
        min=1,
        help="Publish the message N times; with --file, the whole file N times over, in "
        "its order (lines a, b with -n 3: a b a b a b). A message without a message_id "
        "gets a fresh one each time.",
        metavar="N",
    ),
]

RateOption = Annotated[
    str | None,
    common.rate_option(
        "At most this many messages a second (e.g. 200, or 0.5); default: full speed."
    ),
]


def publish_command(
    ctx: typer.Context,
    queue: QueueArgument = None,
    exchange: ExchangeOption = None,
    routing_key: RoutingKeyOption = None,
    body: BodyOption = None,
    body_file: BodyFileOption = None,
    file: FileOption = None,
    header: HeaderOption = None,
    prop: PropertyOption = None,
    count: CountOption = 1,
    rate: RateOption = None,
    ramp: common.RampOption = None,
    topology_file: Annotated[
        Path | None, common.topology_option("The topology file: its [broker] url.")
    ] = None,
    no_topology: common.NoTopologyOption = False,
    url: common.UrlOption = None,
    output: common.OutputOption = common.OutputFormat.TABLE,
) -> None:
    """Publish messages into a queue or an exchange, with publisher confirms.

    Every message is built and checked before the first is published: a bad --header or
    --property is exit 2, a bad file line or value exit 65, and nothing is published. Each
    message goes out mandatory (one no queue takes comes back as returned, never silently
    dropped); a message without a message_id gets a fresh one. The report counts the messages
    confirmed, returned (no queue took them), refused (nacked, e.g. a full queue that rejects
    publishes) and, when the connection dropped, unconfirmed (sent, no answer came: they may
    have arrived) and not sent; stderr names each one not confirmed. Exit 0 when all were
    confirmed, 3 when some were, 1 when none were, 69 when the connection dropped, 77 access
    refused (rr docs cli "rr publish").
    """
    with common.guard():
        target_exchange, key = _target(queue, exchange, routing_key)
        ops.check_target(target_exchange, key)
        pace = parse_pace(rate, ramp)
        topology = dlq.load_topology(topology_file, no_topology)
        broker_urls = common.resolve_urls(url, topology.broker.urls if topology else ())
        user = shell.login_user(broker_urls[0])
        records = _records(body, body_file, file, header or [], prop or [])
        messages = ops.checked_messages(records, count=count, user=user)
    broker = common.announce_target(broker_urls)
    report = common.run(
        ops.publish_run(
            common.connect_to(ctx, broker_urls, client_name="rr publish"),
            messages,
            exchange=target_exchange,
            routing_key=key,
            pace=pace,
            bar=partial(dlq.progress_bar, output),
            tracing=tracing_for(),
        )
    )
    finish(
        Outcome(
            document=lambda: common.carrying_broker(report_document(report), broker),
            table=lambda: [cell(report_summary(report))],
            notes=[cell(line) for line in failure_lines(report)],
            error=report_error(report),
        ),
        output,
    )


def _target(queue: str | None, exchange: str | None, routing_key: str | None) -> tuple[str, str]:
    """(exchange, routing key): QUEUE through the default exchange, or --exchange with
    --routing-key."""
    if queue is not None:
        if exchange is not None or routing_key is not None:
            raise UsageError("give a QUEUE or --exchange with --routing-key, not both")
        return "", queue
    if exchange is None:
        raise UsageError("name the QUEUE to publish into, or give --exchange and --routing-key")
    return exchange, routing_key or ""


def _records(
    body: str | None,
    body_file: str | None,
    file: str | None,
    headers: list[str],
    properties: list[str],
) -> list[tuple[str, Record]]:
    """The messages the options give, each with where it came from."""
    given = [name for name, value in (("--body", body), ("--body-file", body_file),
                                       ("--file", file)) if value is not None]  # fmt: skip
    if len(given) > 1:
        raise UsageError(f"give one of --body, --body-file and --file, not {' and '.join(given)}")
    if file is not None:
        records = list(_file_records(file))
        if not records:
            raise DataError(f"--file {_shown(file)}: holds no message; nothing was published")
        return [(where, ops.with_options(r, headers, properties)) for where, r in records]
    if body_file is not None:
        content = _read(body_file, "--body-file", BODY_LIMIT_BYTES)
        source = f"--body-file {_shown(body_file)}"
    else:
        content = (body or "").encode("utf-8", "surrogateescape")
        source = "--body"
    return [(source, ops.command_line_record(content, headers, properties))]


def _shown(path: str) -> str:
    return "- (stdin)" if path == STDIN else path


def _read(path: str, option: str, limit_bytes: int) -> bytes:
    try:
        if path == STDIN:
            return read_stream(sys.stdin.buffer, limit_bytes=limit_bytes)
        return read_bytes(path, limit_bytes=limit_bytes)
    except FileRefused as refused:
        raise DataError(f"{option} {_shown(path)}: {refused.reason}") from None


def _file_records(path: str) -> Iterator[tuple[str, Record]]:
    """An export file's records (``FILE:LINE``); stdin is read whole first, to the limit of
    one import line (docs/reference/cli.md, "Files rr reads")."""
    if path != STDIN:
        try:
            yield from ops.numbered(shell.read_records(Path(path)), path)
        except DataError as error:
            raise DataError(f"{error.message}; nothing was published") from None
        return
    data = _read(path, "--file", IMPORT_LINE_LIMIT_BYTES)
    try:
        text = decoded(data)
    except FileRefused as refused:
        raise DataError(f"--file - (stdin):{refused.line}: {refused.reason}") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            where = f"-:{number}"
            try:
                yield where, parse_record(line, where)
            except DataError as error:
                raise DataError(f"{error.message}; nothing was published") from None


# --------------------------------------------------------------------------- report


def _target_text(report: ops.PublishReport) -> str:
    if report.exchange:
        return f"exchange {report.exchange!r} with routing key {report.routing_key!r}"
    return f"queue {report.routing_key!r}"


def report_summary(report: ops.PublishReport) -> str:
    """``published 10 message(s) to queue 'q': 8 confirmed, 1 returned, 1 refused``."""
    parts = [f"{report.confirmed:,} confirmed"]
    for outcome in ("returned", "refused", "unencodable", "unconfirmed"):
        if number := report.count(outcome):
            parts.append(f"{number:,} {outcome}")
    if report.not_sent:
        parts.append(f"{report.not_sent:,} not sent")
    return f"{report.messages:,} message(s) to {_target_text(report)}: {', '.join(parts)}"


def failure_lines(report: ops.PublishReport, limit: int = 10) -> list[str]:
    """One stderr line per message not confirmed (the first ``limit``)."""
    lines = [
        f"message {failure.number} ({failure.source}, message_id {failure.message_id!r}) "
        f"{failure.outcome}: {failure.reason}"
        for failure in report.failures[:limit]
    ]
    if len(report.failures) > limit:
        lines.append(f"... and {len(report.failures) - limit:,} more not confirmed")
    return lines


def report_document(report: ops.PublishReport) -> dict[str, Any]:
    """``rr publish --output json`` (docs/reference/cli.md, "rr publish")."""
    return {
        "exchange": report.exchange,
        "routing_key": report.routing_key,
        "messages": report.messages,
        "confirmed": report.confirmed,
        "returned": report.count("returned"),
        "refused": report.count("refused"),
        "unencodable": report.count("unencodable"),
        "unconfirmed": report.count("unconfirmed"),
        "not_sent": report.not_sent,
        "failures": [
            {
                "message": failure.number,
                "source": failure.source,
                "message_id": failure.message_id,
                "outcome": failure.outcome,
                "reason": failure.reason,
            }
            for failure in report.failures
        ],
        "error": str(report.error) if report.error is not None else None,
    }


def report_error(report: ops.PublishReport) -> RrError | None:
    """The error line and exit code: None when all were confirmed; 77 access refused, 69
    the connection dropped, 3 some confirmed, 1 none (docs/reference/cli.md, "rr publish")."""
    failed = report.messages - report.confirmed
    if failed == 0:
        return None
    numbers = [failure.number for failure in report.failures]
    text = f"{failed:,} of {report.messages:,} message(s) not confirmed"
    if numbers:
        text += f" ({line_list(numbers).replace('line', 'message')})"
    if report.error is not None:
        text += f": {report.error}"
    if isinstance(report.error, AccessRefused):
        return AccessRefused(text)
    if isinstance(report.error, BrokerUnreachable):
        return BrokerUnreachable(text)
    if bulk_exit_code(report.confirmed, failed=failed) is ExitCode.PARTIAL:
        return PartialFailure(text)
    return RrError(text)
