"""A message body decoded into a handler's type: pure, no I/O (docs/reference/handlers.md,
"Typed messages").

:func:`decoder_for` reads a type once, when the consumer starts, and returns a
:data:`Decoder`: ``(body, content_type, content_encoding) -> value``, raising
:class:`DecodeFailure` with the reason when the body does not fit. A type rr cannot decode
into is a :class:`~rabbitctl_retry.errors.HandlerLoadError` then, never a failure per message.

* ``bytes``: the body; ``str``: the body as text (the ``charset`` of ``content_type``, else
  ``content_encoding``, else UTF-8); both take any content type.
* everything else is JSON, so the content type must be JSON (:func:`is_json`):
  ``dict``, ``list`` (also ``dict[str, X]``, ``list[X]``), ``Any`` and ``object`` (any JSON
  value), ``int``, ``float``, ``str`` and ``bool`` inside them, ``X | None``, ``Literal``,
  ``Enum``, a dataclass (nested too), a pydantic v2 model (``model_validate_json``), a msgspec
  ``Struct`` (``msgspec.json.decode``). pydantic and msgspec are imported only when a handler
  names one of their types.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Union

from rabbitctl_retry.errors import HandlerLoadError

Decoder = Callable[[bytes, str | None, str | None], Any]
"""``(body, content_type, content_encoding) -> value``; raises :class:`DecodeFailure`."""

Convert = Callable[[Any, str], Any]
"""A parsed JSON value (and where it sits, for the reason) -> the value of the type."""

JSON_MEDIA_TYPES = frozenset({"application/json", "text/json"})
JSON_HINT = "application/json, text/json, application/*+json, or none"


class DecodeFailure(Exception):
    """The body of a delivery does not decode into the handler's type; ``str()`` says why."""


def media_type(content_type: str | None) -> str:
    """``content_type`` without its parameters, lower case (``""`` for none)."""
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def is_json(content_type: str | None) -> bool:
    """JSON: no content type, ``application/json``, ``text/json``, ``application/*+json``
    (any parameters, e.g. ``; charset=utf-8``)."""
    media = media_type(content_type)
    return (
        media == ""
        or media in JSON_MEDIA_TYPES
        or (media.startswith("application/") and media.endswith("+json"))
    )


def charset_of(content_type: str | None, content_encoding: str | None) -> str:
    """The text encoding of a body: ``charset=`` of the content type, else
    ``content_encoding``, else UTF-8."""
    if content_type:
        for parameter in content_type.split(";")[1:]:
            key, _, value = parameter.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                return value.strip().strip('"')
    return content_encoding or "utf-8"


def type_name(hint: Any) -> str:
    """How a type reads in a reason: ``Order``, ``list[Order]``, ``int | None``."""
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    return repr(hint).replace("typing.", "")


def as_bytes(body: bytes, content_type: str | None, content_encoding: str | None) -> bytes:
    return body


def as_text(body: bytes, content_type: str | None, content_encoding: str | None) -> str:
    codec = charset_of(content_type, content_encoding)
    try:
        return body.decode(codec)
    except LookupError:
        raise DecodeFailure(
            f"the body's encoding {codec!r} is not a text encoding; annotate the parameter "
            "bytes or Message to take it"
        ) from None
    except UnicodeDecodeError as error:
        raise DecodeFailure(f"the body is not {codec} text: {error}") from None


def _not_json(content_type: str | None, target: str) -> DecodeFailure:
    return DecodeFailure(
        f"content type {content_type} is not JSON ({JSON_HINT}), which {target} takes; "
        "annotate the parameter bytes, str or Message to take this body"
    )


def _parse(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError
        raise DecodeFailure(f"the body is not JSON: {error}") from None


def decoder_for(hint: Any, *, where: str) -> Decoder:
    """The decoder of a first parameter annotated ``hint`` (not :class:`Message`, which the
    caller passes through). ``where`` names the parameter in a load error."""
    if hint is bytes:
        return as_bytes
    if hint is str:
        return as_text
    name = type_name(hint)
    if _is_pydantic(hint):
        return _pydantic_decoder(hint, name)
    if _is_msgspec(hint):
        return _msgspec_decoder(hint, name)
    convert = converter_for(hint, where=where)
    return _json_only(name, lambda body: convert(_parse(body), ""))


def _json_only(name: str, read: Callable[[bytes], Any]) -> Decoder:
    """A decoder into ``name`` that refuses a body whose ``content_type`` says it is not JSON
    and hands the others to ``read``."""

    def decode(body: bytes, content_type: str | None, content_encoding: str | None) -> Any:
        if content_type and not is_json(content_type):
            raise _not_json(content_type, name)
        return read(body)

    return decode


def _is_pydantic(hint: Any) -> bool:
    return isinstance(hint, type) and type(hint).__module__.startswith("pydantic")


def _is_msgspec(hint: Any) -> bool:
    return isinstance(hint, type) and type(hint).__module__.startswith("msgspec")


def _pydantic_reason(name: str, error: Exception) -> str:
    """pydantic's ``ValidationError`` in one line: ``Order: amount: Input should be ...``."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return f"the body does not fit {name}: {error}"
    parts = []
    for item in errors(include_url=False):
        place = ".".join(str(part) for part in item.get("loc", ()))
        parts.append(f"{place}: {item.get('msg')}" if place else str(item.get("msg")))
    return f"the body does not fit {name}: " + "; ".join(parts)


def _pydantic_decoder(model: Any, name: str) -> Decoder:
    validate = model.model_validate_json

    def read(body: bytes) -> Any:
        try:
            return validate(body)
        except ValueError as error:  # pydantic_core.ValidationError is a ValueError
            raise DecodeFailure(_pydantic_reason(name, error)) from None

    return _json_only(name, read)


def _msgspec_decoder(struct: Any, name: str) -> Decoder:
    import msgspec  # the handler names a msgspec type: msgspec is installed

    reader = msgspec.json.Decoder(type=struct)
    failure = msgspec.MsgspecError

    def read(body: bytes) -> Any:
        try:
            return reader.decode(body)
        except failure as error:
            raise DecodeFailure(f"the body does not fit {name}: {error}") from None

    return _json_only(name, read)


# -- JSON values into types: built once per type, checked per message ---------------------


def _at(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _wrong(path: str, expected: str, value: Any) -> DecodeFailure:
    got = "null" if value is None else type(value).__name__
    place = f"{path}: " if path else ""
    return DecodeFailure(f"{place}expected {expected}, got {got}")


def _exact(kind: type, expected: str) -> Convert:
    def convert(value: Any, path: str) -> Any:
        if type(value) is not kind:  # bool is not an int here, int is not a bool
            raise _wrong(path, expected, value)
        return value

    return convert


def _float(value: Any, path: str) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise _wrong(path, "a number", value)


def _none(value: Any, path: str) -> None:
    if value is not None:
        raise _wrong(path, "null", value)


def _anything(value: Any, path: str) -> Any:
    return value


_SCALARS: dict[Any, Convert] = {
    int: _exact(int, "an integer"),
    str: _exact(str, "a string"),
    bool: _exact(bool, "true or false"),
    float: _float,
    type(None): _none,
    None: _none,
    Any: _anything,
    object: _anything,
}

SUPPORTED = (
    "int, float, str, bool, None, Any, list, list[X], dict, dict[str, X], X | None, "
    "Literal, Enum, a dataclass, a pydantic model, a msgspec Struct"
)


def converter_for(hint: Any, *, where: str, _seen: dict[Any, Convert] | None = None) -> Convert:
    """How a parsed JSON value becomes a ``hint``; a :class:`HandlerLoadError` naming
    ``where`` for a type rr does not decode into."""
    seen = {} if _seen is None else _seen
    scalar = _SCALARS.get(hint)
    if scalar is not None:
        return scalar
    origin = typing.get_origin(hint)
    arguments = typing.get_args(hint)
    if origin is typing.Annotated:
        return converter_for(arguments[0], where=where, _seen=seen)
    if hint is list or origin is list:
        item = converter_for(arguments[0], where=where, _seen=seen) if arguments else None
        return _list(None if item is _anything else item)
    if hint is dict or origin is dict:
        if arguments and arguments[0] is not str:
            raise HandlerLoadError(f"{where}: JSON object keys are strings, not {type_name(hint)}")
        value = converter_for(arguments[1], where=where, _seen=seen) if arguments else None
        return _dict(None if value is _anything else value)
    if origin is Union or origin is types.UnionType:
        return _union(
            hint, [converter_for(argument, where=where, _seen=seen) for argument in arguments]
        )
    if origin is Literal:
        return _literal(hint, arguments)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum(hint)
    if _is_pydantic(hint):
        return _pydantic_value(hint)
    if _is_msgspec(hint):
        return _msgspec_value(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass(hint, where=where, seen=seen)
    raise HandlerLoadError(
        f"{where}: rr does not decode a message into {type_name(hint)}; it decodes into "
        f"{SUPPORTED}, or passes bytes, str or the Message itself"
    )


def _list(item: Convert | None) -> Convert:
    def convert(value: Any, path: str) -> Any:
        if type(value) is not list:
            raise _wrong(path, "a list", value)
        if item is None:
            return value
        return [item(element, _at(path, index)) for index, element in enumerate(value)]

    return convert


def _dict(member: Convert | None) -> Convert:
    def convert(value: Any, path: str) -> Any:
        if type(value) is not dict:
            raise _wrong(path, "an object", value)
        if member is None:
            return value
        return {key: member(element, _at(path, key)) for key, element in value.items()}

    return convert


def _union(hint: Any, members: list[Convert]) -> Convert:
    expected = type_name(hint)

    def convert(value: Any, path: str) -> Any:
        for member in members:
            try:
                return member(value, path)
            except DecodeFailure:
                continue
        raise _wrong(path, expected, value)

    return convert


def _literal(hint: Any, allowed: tuple[Any, ...]) -> Convert:
    expected = " or ".join(json.dumps(choice) for choice in allowed)

    def convert(value: Any, path: str) -> Any:
        for choice in allowed:
            if value == choice and type(value) is type(choice):
                return choice
        place = f"{path}: " if path else ""
        raise DecodeFailure(f"{place}expected {expected}, got {json.dumps(value)[:80]}")

    return convert


def _enum(kind: type[enum.Enum]) -> Convert:
    expected = " or ".join(json.dumps(member.value) for member in kind)

    def convert(value: Any, path: str) -> Any:
        try:
            return kind(value)
        except (ValueError, TypeError):
            place = f"{path}: " if path else ""
            shown = json.dumps(value)[:80]
            raise DecodeFailure(f"{place}expected {expected}, got {shown}") from None

    return convert


def _pydantic_value(model: Any) -> Convert:
    validate = model.model_validate
    name = type_name(model)

    def convert(value: Any, path: str) -> Any:
        try:
            return validate(value)
        except ValueError as error:
            reason = _pydantic_reason(name, error)
            raise DecodeFailure(f"{path}: {reason}" if path else reason) from None

    return convert


def _msgspec_value(struct: Any) -> Convert:
    import msgspec

    name = type_name(struct)

    def convert(value: Any, path: str) -> Any:
        try:
            return msgspec.convert(value, type=struct)
        except msgspec.MsgspecError as error:
            reason = f"the body does not fit {name}: {error}"
            raise DecodeFailure(f"{path}: {reason}" if path else reason) from None

    return convert


def _dataclass(kind: type[Any], *, where: str, seen: dict[Any, Convert]) -> Convert:
    """A JSON object into the dataclass ``kind``: every field without a default present,
    each of its type; keys that are not fields are ignored (a producer may add fields before
    its consumers know them); an object that is not an object, a missing field, a value of
    the wrong type is a :class:`DecodeFailure` naming the field's path."""
    if kind in seen:  # a recursive dataclass: the converter being built
        return seen[kind]
    fields: list[tuple[str, Convert, bool]] = []

    def convert(value: Any, path: str) -> Any:
        if type(value) is not dict:
            raise _wrong(path, f"an object ({kind.__name__})", value)
        arguments = {}
        for field_name, field_convert, required in fields:
            if field_name in value:
                arguments[field_name] = field_convert(value[field_name], _at(path, field_name))
            elif required:
                place = f"{path}: " if path else ""
                raise DecodeFailure(f"{place}{kind.__name__} needs the field {field_name!r}")
        try:
            return kind(**arguments)
        except (ValueError, TypeError) as error:  # its __post_init__ refused the values
            place = f"{path}: " if path else ""
            raise DecodeFailure(f"{place}{kind.__name__}: {error}") from None

    seen[kind] = convert
    try:
        hints = typing.get_type_hints(kind, include_extras=True)
    except Exception as error:
        raise HandlerLoadError(
            f"{where}: the fields of {kind.__name__} cannot be resolved ({error}); define the "
            "types they name at module level"
        ) from None
    for item in dataclasses.fields(kind):
        if not item.init:
            continue
        required = (
            item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
        )
        field_where = f"{where} (field {item.name} of {kind.__name__})"
        fields.append(
            (item.name, converter_for(hints[item.name], where=field_where, _seen=seen), required)
        )
    return convert
