"""Pure. A typed message encoded into a body and its content type: the mirror of
``runtime/decoding.py`` (docs/reference/publishing.md, "Typed messages").

* ``bytes`` (and ``bytearray``, ``memoryview``): the body as it is, ``application/octet-stream``;
* ``str``: UTF-8, ``text/plain; charset=utf-8``;
* a pydantic v2 model: ``model_dump_json()``; a msgspec ``Struct``: ``msgspec.json.encode``;
* a dataclass: its ``dataclasses.asdict`` as JSON; ``dict``, ``list``, ``tuple``, numbers,
  ``bool`` and ``None``: JSON. Each of these is ``application/json``, as UTF-8 with no
  ASCII escapes. An ``Enum`` inside is written as its value.

pydantic and msgspec are never imported here: a model is recognised by its methods
(``model_dump_json``) or its module (``msgspec``), so code that uses neither pays nothing.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
from typing import Any

JSON = "application/json"
TEXT = "text/plain; charset=utf-8"
BINARY = "application/octet-stream"


class EncodeFailure(TypeError):
    """The value cannot be encoded into a body; ``str()`` says why."""


def encode(value: object) -> tuple[bytes, str]:
    """``value`` as (body, content type): see the module doc; :class:`EncodeFailure` for a
    value of no kind above (or one JSON cannot hold)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value), BINARY
    if isinstance(value, str):
        return value.encode("utf-8"), TEXT
    dump_json = getattr(value, "model_dump_json", None)
    if callable(dump_json) and not isinstance(value, type):  # a pydantic v2 model
        return str(dump_json()).encode("utf-8"), JSON
    if _is_msgspec_struct(value):
        msgspec = sys.modules["msgspec"]  # imported already: the value is one of its types
        return bytes(msgspec.json.encode(value)), JSON
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _json(dataclasses.asdict(value)), JSON
    if value is None or isinstance(value, dict | list | tuple | int | float | bool):
        return _json(value), JSON
    raise EncodeFailure(
        f"rr cannot encode a {type(value).__name__}: give bytes, str, a dataclass, a pydantic "
        "model, a msgspec Struct or a JSON value (rr docs publishing)"
    )


def _is_msgspec_struct(value: object) -> bool:
    return any(
        klass.__module__.startswith("msgspec") and klass.__name__ == "Struct"
        for klass in type(value).__mro__
    )


def _default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise EncodeFailure(f"a {type(value).__name__} is not a JSON value")


def _json(value: object) -> bytes:
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=_default)
    except ValueError as error:  # NaN or an infinity: not JSON
        raise EncodeFailure(f"not JSON: {error}") from None
    return text.encode("utf-8")
