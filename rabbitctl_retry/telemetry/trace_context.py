"""Pure. The W3C trace context header (``traceparent``) read without OpenTelemetry: what
``rr dlq inspect`` shows of a letter's trace (docs/reference/dlq.md, "JSON output").

``traceparent`` is ``VERSION-TRACE_ID-PARENT_ID-FLAGS``: 2, 32, 16 and 2 lowercase hex digits
(https://www.w3.org/TR/trace-context/#traceparent-header). Version ``ff`` is invalid, as are an
all-zero trace or parent id; a version other than ``00`` may carry more fields after the
flags. Anything else, a value that is not text (a table, a number), or one longer than
:data:`MAX_LENGTH` is malformed: it is read as no trace context, never an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import TRACEPARENT_HEADER

MAX_LENGTH = 512
"""The longest ``traceparent`` rr reads; a longer value is malformed."""

_FORM = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


@dataclass(frozen=True, slots=True)
class TraceParent:
    """A well-formed ``traceparent``."""

    version: str
    trace_id: str
    """32 lowercase hex digits."""
    parent_id: str
    """The id of the span that published the message: 16 lowercase hex digits."""
    flags: int

    @property
    def sampled(self) -> bool:
        return bool(self.flags & 1)

    def header(self) -> str:
        return f"{self.version}-{self.trace_id}-{self.parent_id}-{self.flags:02x}"


def header_text(value: object) -> str | None:
    """A header's value as ASCII text (a string, or bytes that are ASCII), or ``None`` when
    it is another type, not ASCII or longer than :data:`MAX_LENGTH`."""
    if isinstance(value, bytes):
        if len(value) > MAX_LENGTH or not value.isascii():
            return None
        return value.decode("ascii")
    if isinstance(value, str) and len(value) <= MAX_LENGTH and value.isascii():
        return value
    return None


def parse_traceparent(value: object) -> TraceParent | None:
    """``value`` as a ``traceparent`` (module doc), or ``None`` when it is malformed."""
    text = header_text(value)
    if text is None:
        return None
    match = _FORM.fullmatch(text.strip(" \t"))
    if match is None:
        return None
    version, trace_id, parent_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    if trace_id == _ZERO_TRACE or parent_id == _ZERO_SPAN:
        return None
    return TraceParent(version, trace_id, parent_id, int(flags, 16))


def trace_id_of(headers: Mapping[str, FieldValue] | None) -> str | None:
    """The trace id of the ``traceparent`` in ``headers``, or ``None`` (none, or malformed)."""
    if not headers:
        return None
    parsed = parse_traceparent(headers.get(TRACEPARENT_HEADER))
    return parsed.trace_id if parsed is not None else None
