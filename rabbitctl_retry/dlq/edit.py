"""Pure. ``rr dlq edit``: one dead letter's edited copy, and what may be edited.

The copy is the replay's copy (dlq/replay.py: a fresh start, to its origin or ``--to``) with the
new body, the headers set and removed, and two headers more (docs/reference/dlq.md, "Edit and
retry"):

* ``rr-edited-at``: when (ISO 8601 UTC);
* ``rr-original-body-sha256``: the SHA-256 of the body before the edit (hex), so the copy
  names the original that the export line kept beside it.

A header rr or the broker owns cannot be set or removed (the retry header, ``x-death`` and the
broker's other headers, rr's failure, replay and edit headers): the replay writes those.

The new body is what the user wrote, byte for byte, never re-serialised: the file ``--body``
names, what ``$EDITOR`` saved, or the console's edit box (whose line breaks are the one thing a
browser rewrites: :func:`box_problem`, :func:`box_body`). The diff compares the two bodies as
they are (:func:`diff_lines`). A JSON body that is no longer JSON (RFC 8259, strictly:
:func:`json_problem`) is refused unless forced (:func:`body_problem`).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from rabbitctl_retry.dlq.choice import Choice, Chooser, Send
from rabbitctl_retry.dlq.origin import Contents
from rabbitctl_retry.dlq.replay import ReplayPlan
from rabbitctl_retry.dlq.replay import choose as choose_replay
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import (
    REPLAYED_AT_HEADER,
    REPLAYED_COUNT_HEADER,
    RR_DEATH_HEADERS,
    is_broker_header,
    utc_stamp,
)

EDITED_AT_HEADER = "rr-edited-at"
ORIGINAL_SHA256_HEADER = "rr-original-body-sha256"
_OWNED = frozenset(
    {EDITED_AT_HEADER, ORIGINAL_SHA256_HEADER, REPLAYED_AT_HEADER, REPLAYED_COUNT_HEADER}
    | RR_DEATH_HEADERS
    | {"rr-replay-run", "CC", "BCC"}
)
MAX_DIFF_LINES = 200
"""How many lines of the body's diff are shown before the question."""


def sha256_hex(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


@dataclass(frozen=True, slots=True)
class EditRequest:
    """What the operator changed."""

    body: bytes
    set_headers: tuple[tuple[str, str], ...] = ()
    remove_headers: tuple[str, ...] = ()
    original_sha256: str = ""

    @property
    def changes_headers(self) -> bool:
        return bool(self.set_headers or self.remove_headers)


def header_problem(name: str, retry_header: str) -> str | None:
    """Why the header ``name`` cannot be edited, or None."""
    if not name:
        return "a header needs a name"
    if len(name.encode("utf-8", "surrogatepass")) > 255:
        return f"header name {name[:40]!r}... is longer than 255 bytes"
    if name == retry_header or name in _OWNED or is_broker_header(name):
        return (
            f"{name!r} is written by rr or the broker (the copy starts afresh: no retry "
            "header, no death headers); edit the application's headers only"
        )
    return None


def parse_assignment(text: str, retry_header: str) -> tuple[str, str]:
    """``--set-header NAME=VALUE`` -> (name, value); :class:`ValueError` naming the problem."""
    name, equals, value = text.partition("=")
    if not equals:
        raise ValueError(f"--set-header {text[:60]!r}: use NAME=VALUE")
    problem = header_problem(name.strip(), retry_header)
    if problem is not None:
        raise ValueError(f"--set-header {text[:60]!r}: {problem}")
    return name.strip(), value


def edited_headers(
    replayed: Mapping[str, FieldValue], request: EditRequest, now: datetime
) -> dict[str, FieldValue]:
    """The replay's copy headers with the edit applied and marked."""
    headers = dict(replayed)
    for name in request.remove_headers:
        headers.pop(name, None)
    for name, value in request.set_headers:
        headers[name] = value
    headers[EDITED_AT_HEADER] = utc_stamp(now)
    headers[ORIGINAL_SHA256_HEADER] = request.original_sha256
    return headers


def edit_choice(replayed: Choice, request: EditRequest, now: datetime) -> Choice:
    """The replay's choice for the letter, with the edit: a copy goes out with the new body
    and headers; a letter the replay would not send (no origin, ...) fails as it would."""
    if not isinstance(replayed, Send) or replayed.verbatim:
        return replayed
    return Send(
        to=replayed.to,
        headers=edited_headers(replayed.headers, request, now),
        body=request.body,
    )


def edit_chooser(plan: ReplayPlan, request: EditRequest) -> Chooser:
    """The transfer engine's chooser for an edit: the replay's choice for the letter, turned
    into its edited copy."""

    def choose(
        headers: Mapping[str, FieldValue] | None,
        now: datetime,
        undecodable: tuple[str, ...] = (),
        contents: Contents | None = None,
    ) -> Choice:
        replayed = choose_replay(plan, headers, now, undecodable, contents)
        return edit_choice(replayed, request, now)

    return choose


# --------------------------------------------------------------------------- the body


def _is_json_type(content_type: str | None) -> bool:
    if not content_type:
        return False
    base = content_type.split(";", 1)[0].strip().lower()
    return base == "application/json" or base.endswith("+json")


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def json_problem(body: bytes) -> str | None:
    """Why ``body`` is not a JSON text as RFC 8259 has it (UTF-8; no ``NaN``, ``Infinity`` or
    ``-Infinity``; no byte order mark), or None. Numbers are checked as text, never turned
    into values (``1e400`` and ``1.00000000000000001`` are JSON)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        return f"not UTF-8 (byte {error.start:,})"
    try:
        json.loads(text, parse_constant=_no_constant, parse_int=str, parse_float=str)
    except json.JSONDecodeError as error:
        return f"{error.msg.removesuffix(' at')} at line {error.lineno:,} column {error.colno:,}"
    except RecursionError:
        return "nested too deeply to be checked"
    except ValueError as error:
        return str(error)
    return None


def _was_json(content_type: str | None, body: bytes) -> bool:
    """A JSON content type, or a body that was a JSON object or array without saying so."""
    return _is_json_type(content_type) or (
        body.lstrip(b" \t\r\n")[:1] in (b"{", b"[") and json_problem(body) is None
    )


def _is_text(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


FORCE_OPTION = "--force publishes it anyway"
"""How ``rr dlq edit`` publishes a body that no longer fits (the console says it its way)."""


def body_problem(
    content_type: str | None, before: bytes, after: bytes, *, force: str = FORCE_OPTION
) -> str | None:
    """Why ``after`` does not fit the letter's content type, or None: a JSON letter (its
    content type says so, or its body was a JSON object or array) whose new body is not
    JSON (:func:`json_problem`), a UTF-8 text that no longer is. ``force``: how to publish
    it anyway, in the words of the tool that asks."""
    if _was_json(content_type, before) and (problem := json_problem(after)) is not None:
        return f"the edited body is not JSON: {problem} ({force})"
    if _is_text(before) and not _is_text(after):
        return f"the edited body is not UTF-8 text any more ({force})"
    return None


# --------------------------------------------------------------------------- the console's box

_BREAK = re.compile(r"\r\n|\r|\n")
MAX_BOX_BYTES = 64 * 1024
"""The largest body the console's edit box holds (docs/reference/console.md: a page shows the first
64 KiB of a body; a larger one is downloaded and edited with ``rr dlq edit --body FILE``)."""


def box_size_problem(body: bytes, *, edited: bool = False) -> str | None:
    """Why ``body`` is too large for the edit box (:data:`MAX_BOX_BYTES`), or None."""
    if len(body) <= MAX_BOX_BYTES:
        return None
    which = "the edited body" if edited else "it"
    return (
        f"{which} is {len(body):,} bytes, more than the {MAX_BOX_BYTES // 1024} KiB the box holds"
    )


def _kept_in_box(char: str) -> bool:
    """A character an HTML edit box hands back as it is (line breaks aside)."""
    return char in "\t\r\n" or unicodedata.category(char) not in ("Cc", "Cs")


def box_problem(body: bytes) -> str | None:
    """Why the console's edit box cannot hand ``body`` back byte for byte, or None
    (docs/reference/console.md): it is not UTF-8, it holds a control character (NUL, ESC, ...; a tab
    is fine), a carriage return that ends no line, or lines ending in both CRLF and LF. A
    browser sends every line break of a box as CRLF, so only a body whose line breaks are all
    LF or all CRLF gets them back (:func:`box_body`). A body past :data:`MAX_BOX_BYTES` is
    not put in the box at all (a page shows its first 64 KiB)."""
    if (too_large := box_size_problem(body)) is not None:
        return too_large
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "it is not UTF-8 text"
    odd = next((char for char in text if not _kept_in_box(char)), None)
    if odd is not None:
        return f"it holds the control character {odd.encode('unicode_escape').decode()}"
    crlf = text.count("\r\n")
    if text.count("\r") != crlf:
        return "it holds a carriage return (CR) that does not end a line with LF"
    if crlf and text.count("\n") != crlf:
        return "its lines end in CRLF and in LF both"
    return None


def box_text_problem(text: str) -> str | None:
    """Why the text a box sent cannot be a body (a control character pasted into it), or
    None."""
    odd = next((char for char in text if not _kept_in_box(char)), None)
    if odd is None:
        return None
    return f"the edited text holds the control character {odd.encode('unicode_escape').decode()}"


def box_body(before: bytes, text: str) -> bytes:
    """The box's text as the new body, byte for byte but its line breaks: each (a browser
    sends CRLF) is written as the original's are: CRLF when its lines end in CRLF, else LF.
    ``before`` is a body :func:`box_problem` passed, ``text`` one :func:`box_text_problem`
    passed."""
    newline = "\r\n" if b"\r\n" in before else "\n"
    return newline.join(_BREAK.split(text)).encode("utf-8")


# --------------------------------------------------------------------------- the diff

NO_FINAL_NEWLINE = "\\ No newline at end of file"


def diff_lines(before: bytes, after: bytes) -> list[str]:
    """A unified diff of the two bodies as they are, byte for byte (text; binary bodies by
    size and checksum), cut after :data:`MAX_DIFF_LINES`. Lines are split at LF only: a CR
    stays in its line (the caller shows it escaped, ``\\r``), and a last line without a line
    break is followed by :data:`NO_FINAL_NEWLINE`."""
    if not (_is_text(before) and _is_text(after)):
        return [
            f"- {len(before):,} bytes, sha256 {sha256_hex(before)[:16]}",
            f"+ {len(after):,} bytes, sha256 {sha256_hex(after)[:16]}",
        ]
    lines: list[str] = []
    diff = difflib.unified_diff(
        _lines(before), _lines(after), fromfile="body before", tofile="body after", lineterm=""
    )
    for index, line in enumerate(diff):
        if index < 2 or line.startswith("@@"):
            lines.append(line)
        elif line.endswith("\n"):
            lines.append(line[:-1])
        else:
            lines.extend((line, NO_FINAL_NEWLINE))
    if len(lines) > MAX_DIFF_LINES:
        cut = len(lines) - MAX_DIFF_LINES
        lines = [*lines[:MAX_DIFF_LINES], f"... ({cut:,} more lines)"]
    return lines


def _lines(body: bytes) -> list[str]:
    """A text body's lines, each with its LF (the last one may have none)."""
    *ended, last = body.decode("utf-8").split("\n")
    return [line + "\n" for line in ended] + ([last] if last else [])


def header_lines(before: Mapping[str, FieldValue] | None, request: EditRequest) -> Iterable[str]:
    """The header changes, one line each (``- name`` removed, ``+ name=value`` set)."""
    table = before or {}
    for name in request.remove_headers:
        yield f"- {name}" + ("" if name in table else " (not there)")
    for name, value in request.set_headers:
        yield f"+ {name}={value}"
