"""Pure. The request head a client of ``rr run --metrics-port`` sends, read as bytes arrive,
and the bytes of rr's answer (docs/reference/metrics.md, "Metrics and health").

:func:`read_head` says, of the bytes received so far, whether the head is whole (a
:class:`Request`), cannot be served (a :class:`Refusal`: its HTTP status and the reason rr
logs) or needs more. A head is the request line and the header lines up to the blank line,
at most :data:`MAX_HEAD_BYTES`; a body, if any, is never read (rr answers and closes).
Nothing here reads a socket or a clock: the server (runtime/metrics_server.py) feeds the
bytes and holds the deadline, :data:`HEAD_TIMEOUT_S`.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_HEAD_BYTES = 8192
"""The most bytes of a request head (request line and headers) rr reads: 8 KiB, many times a
Prometheus scrape's or a probe's; past it rr answers 414 or 431 and closes."""

HEAD_TIMEOUT_S = 5.0
"""The time a client has, from its connection, to send its whole request head; then rr
closes the connection (an idle client, or one that sends a byte now and then)."""

SEND_TIMEOUT_S = 5.0
"""The time a client has to take rr's whole answer; then rr closes the connection."""


@dataclass(frozen=True, slots=True)
class Request:
    """A whole request head: its method and its path (the query left out)."""

    method: str
    path: str


@dataclass(frozen=True, slots=True)
class Refusal:
    """A head rr does not serve: the HTTP ``status`` it answers and the ``reason`` it logs."""

    status: int
    reason: str


def _end_of_head(buffer: bytes) -> int | None:
    """Where the head in ``buffer`` ends (after its blank line), if it does."""
    ends = [
        index + len(blank) for blank in (b"\r\n\r\n", b"\n\n") if (index := buffer.find(blank)) >= 0
    ]
    return min(ends) if ends else None


def read_head(buffer: bytes) -> Request | Refusal | None:
    """What the bytes received so far make: a :class:`Request`, a :class:`Refusal`, or
    ``None`` while the head is not whole yet."""
    end = _end_of_head(buffer)
    if end is not None and end <= MAX_HEAD_BYTES:
        return _parse(buffer[:end])
    if len(buffer) <= MAX_HEAD_BYTES:
        return None
    if b"\n" not in buffer[:MAX_HEAD_BYTES]:
        return Refusal(414, "request line too long")
    return Refusal(431, "request head too large")


def _parse(head: bytes) -> Request | Refusal:
    malformed = Refusal(400, "malformed request")
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        return malformed
    lines = text.replace("\r\n", "\n").split("\n")
    words = lines[0].split(" ")
    if len(words) != 3 or not all(words) or not words[2].startswith("HTTP/1."):
        return malformed
    method, target, _ = words
    if target.startswith(("http://", "https://")):  # the absolute form, as to a proxy
        target = "/" + target.split("/", 3)[3] if target.count("/") >= 3 else "/"
    if not method.isalpha() or not target.startswith("/") or not target.isprintable():
        return malformed
    if any(line and ":" not in line for line in lines[1:]):
        return malformed
    return Request(method, target.partition("?")[0])


STATUS_TEXT = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    414: "URI Too Long",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def answer(status: int, body: bytes, content_type: str, *, head_only: bool = False) -> bytes:
    """The bytes of an HTTP/1.1 answer that closes the connection (``head_only``: the
    answer to a HEAD request, without the body)."""
    lines = [
        f"HTTP/1.1 {status} {STATUS_TEXT.get(status, 'Error')}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    if status == 405:
        lines.append("Allow: GET, HEAD")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")
    return head if head_only else head + body


__all__ = [
    "HEAD_TIMEOUT_S",
    "MAX_HEAD_BYTES",
    "SEND_TIMEOUT_S",
    "Refusal",
    "Request",
    "answer",
    "read_head",
]
