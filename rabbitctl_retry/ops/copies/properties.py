"""A copy's properties, by the one rule of ``retry/properties.py``: those of a replayed,
moved or imported copy (:func:`copy_properties`) and those of ``rr run``'s retry and
dead-letter copies (:func:`retry_copy_properties`).

With tracing on (``telemetry/switch.py``), a copy carries the trace context of the span that
publishes it (``traceparent``, ``tracestate``) and a fresh publish stamp
(``x-ruststream-published-at``); every other header keeps its bytes. A verbatim copy stays
verbatim: it carries the original's trace context and stamp, if any (docs/reference/runtime.md,
"Tracing and metrics")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rabbitctl_retry.fields import FieldValue, like
from rabbitctl_retry.retry.policy import Copy
from rabbitctl_retry.retry.properties import COPIED_PROPERTIES
from rabbitctl_retry.transport.base import Properties

if TYPE_CHECKING:
    from rabbitctl_retry.telemetry.tracing import Tracing


def copy_properties(
    original: Properties,
    headers: Mapping[str, FieldValue],
    *,
    tracing: Tracing | None = None,
    context: object | None = None,
    **overrides: Any,
) -> Properties:
    """The properties of a copy of a message with ``original``'s: the copied ones (not
    ``expiration``, not ``user_id``), ``headers``, and ``overrides`` (say, a retry copy's
    ``delivery_mode`` and ``expiration``). ``headers`` keep the bytes of ``original``'s
    headers: each one the copy kept as it was goes out as it came, type tag and all
    (``fields.py`` ``EncodedTable``; docs/explanation/attempts.md, "What a copy keeps"). ``tracing``
    (on): stamped with the trace context of ``context`` (else the current one) and the
    publish time (module doc)."""
    if tracing is not None:
        headers = tracing.stamp(headers, context)
    kept: dict[str, Any] = {name: getattr(original, name) for name in COPIED_PROPERTIES}
    kept.update(overrides)
    return Properties(**kept, headers=like(original.headers, headers))


PERSISTENT = 2


def retry_copy_properties(
    original: Properties,
    copy: Copy,
    *,
    tracing: Tracing | None = None,
    context: object | None = None,
) -> Properties:
    """A retry or dead-letter copy's properties: the copied ones of the original
    (``retry/properties.py``), the copy's headers, persistent, and the copy's own expiration;
    a verbatim copy's are the original's, as received."""
    if copy.verbatim:
        return original
    return copy_properties(
        original,
        copy.headers,
        tracing=tracing,
        context=context,
        delivery_mode=PERSISTENT,
        expiration=str(copy.expiration_ms) if copy.expiration_ms is not None else None,
    )
