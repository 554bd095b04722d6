"""The JSON schema of each message type a handler takes (docs/reference/handlers.md, "Typed
messages"), for ``rr asyncapi`` (docs/reference/topology.md, "The contract").

A dataclass, an ``Enum`` and the scalar and container types rr decodes are written here,
with the rules rr decodes by (every field without a default required, other keys allowed);
a pydantic model gives its own ``model_json_schema()``, a msgspec ``Struct``
``msgspec.json.schema_components``. Every named type (a dataclass, an ``Enum``, a model, a
``Struct``) is a schema of ``components.schemas``, referred to as
``#/components/schemas/NAME``; the message's own type is written in its payload, unless
another schema refers to it. ``bytes``, ``str`` and the delivery itself have no schema: the
body is whatever the producer sends.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from rabbitctl_retry.asyncapi.document import JSON_CONTENT_TYPE, MessageSpec
from rabbitctl_retry.errors import HandlerLoadError
from rabbitctl_retry.runtime.decoding import decoder_for, type_name

SCHEMA_REF = "#/components/schemas/{name}"
"""Where a named type's schema is: the ``ref_template`` msgspec is given (pydantic's names
the name ``{model}``)."""

JsonSchema = dict[str, Any]

_SCALARS: dict[Any, JsonSchema] = {
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    None: {"type": "null"},
    Any: {},
    object: {},
}


@dataclass
class Schemas:
    """The named schemas the messages refer to: ``components.schemas``, filled as the
    messages' types are read."""

    named: dict[str, JsonSchema] = field(default_factory=dict)

    def message(self, hint: Any, *, where: str) -> MessageSpec:
        """The message a first parameter annotated ``hint`` takes (None: the delivery
        itself); ``where`` names the parameter in a :class:`HandlerLoadError`, as rr run
        would refuse the type."""
        if hint is None or hint is bytes or hint is str:
            return MessageSpec()
        decoder_for(hint, where=where)  # refuse what rr run refuses, with its words
        payload = self.schema(hint, where=where)
        name = _ref_name(payload)
        if name is not None and not self._referred_to(name):
            payload = self.named.pop(name)
        return MessageSpec(
            name=name or None,
            payload=payload,
            content_type=JSON_CONTENT_TYPE,
            description=_description(hint),
        )

    def _referred_to(self, name: str) -> bool:
        target = json.dumps(SCHEMA_REF.format(name=name))
        return any(target in json.dumps(schema) for schema in self.named.values())

    def schema(self, hint: Any, *, where: str) -> JsonSchema:
        """The JSON schema of ``hint``, a type rr decodes into."""
        scalar = _SCALARS.get(hint)
        if scalar is not None:
            return dict(scalar)
        origin = typing.get_origin(hint)
        arguments = typing.get_args(hint)
        if origin is typing.Annotated:
            return self.schema(arguments[0], where=where)
        if hint is list or origin is list:
            items = self.schema(arguments[0], where=where) if arguments else {}
            return {"type": "array", **({"items": items} if items else {})}
        if hint is dict or origin is dict:
            values = self.schema(arguments[1], where=where) if arguments else {}
            return {"type": "object", **({"additionalProperties": values} if values else {})}
        if origin is Union or origin is types.UnionType:
            return {"anyOf": [self.schema(argument, where=where) for argument in arguments]}
        if origin is Literal:
            return {"enum": [_json_value(argument) for argument in arguments]}
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return self._named(hint, lambda: _enum_schema(hint))
        if _module_of(hint).startswith("pydantic"):
            return self._pydantic(hint)
        if _module_of(hint).startswith("msgspec"):
            return self._msgspec(hint)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return self._named(hint, lambda: self._dataclass(hint, where=where))
        raise HandlerLoadError(f"{where}: rr asyncapi has no schema for {type_name(hint)}")

    def _named(self, kind: type, build: typing.Callable[[], JsonSchema]) -> JsonSchema:
        name = kind.__name__
        if name not in self.named:
            self.named[name] = {}  # a recursive type refers to itself while it is built
            self.named[name] = build()
        return {"$ref": SCHEMA_REF.format(name=name)}

    def _dataclass(self, kind: type, *, where: str) -> JsonSchema:
        hints = typing.get_type_hints(kind, include_extras=True)
        properties: dict[str, JsonSchema] = {}
        required: list[str] = []
        for item in dataclasses.fields(kind):
            if not item.init:
                continue
            field_where = f"{where} (field {item.name} of {kind.__name__})"
            schema = self.schema(hints[item.name], where=field_where)
            if item.default is not dataclasses.MISSING:
                if _is_json_scalar(item.default):
                    schema["default"] = item.default
            elif item.default_factory is dataclasses.MISSING:
                required.append(item.name)
            properties[item.name] = schema
        schema = {"title": kind.__name__, "type": "object", "properties": properties}
        if required:
            schema["required"] = required
        description = _description(kind)
        return schema | ({"description": description} if description else {})

    def _add(self, named: dict[str, JsonSchema]) -> None:
        """Named schemas a library wrote; a name already known keeps its first schema (two
        types of one name are one schema in the document: name them apart)."""
        for name, schema in named.items():
            self.named.setdefault(name, schema)

    def _pydantic(self, model: Any) -> JsonSchema:
        schema: JsonSchema = model.model_json_schema(
            ref_template=SCHEMA_REF.replace("{name}", "{model}")
        )
        self._add(schema.pop("$defs", {}))
        if "$ref" in schema:  # a model that refers to itself: its schema is among $defs
            return schema
        self.named[model.__name__] = schema
        return {"$ref": SCHEMA_REF.format(name=model.__name__)}

    def _msgspec(self, struct: Any) -> JsonSchema:
        import msgspec

        (schema,), named = msgspec.json.schema_components([struct], ref_template=SCHEMA_REF)
        self._add(named)
        return dict(schema)


def _ref_name(schema: JsonSchema) -> str | None:
    """The name of the one named schema ``schema`` is a reference to, else None."""
    reference = schema.get("$ref")
    prefix = SCHEMA_REF.format(name="")
    if len(schema) != 1 or not isinstance(reference, str) or not reference.startswith(prefix):
        return None
    return reference[len(prefix) :]


def _module_of(hint: Any) -> str:
    return type(hint).__module__ if isinstance(hint, type) else ""


def _enum_schema(kind: type[enum.Enum]) -> JsonSchema:
    schema: JsonSchema = {"title": kind.__name__, "enum": [_json_value(m) for m in kind]}
    description = _description(kind)
    return schema | ({"description": description} if description else {})


def _json_value(value: Any) -> Any:
    """A ``Literal`` argument or an ``Enum`` member as the JSON value rr compares with."""
    return value.value if isinstance(value, enum.Enum) else value


def _is_json_scalar(value: object) -> bool:
    return (
        value is None
        or isinstance(value, bool | int | str)
        or (isinstance(value, float) and value == value and abs(value) != float("inf"))
    )


def _description(kind: Any) -> str | None:
    """The first paragraph of a class's own docstring (not a dataclass's generated one, not
    one it inherits)."""
    if not isinstance(kind, type):
        return None
    text = kind.__dict__.get("__doc__")
    if not isinstance(text, str) or text.startswith(f"{kind.__name__}("):
        return None
    if isinstance(kind, enum.EnumMeta) and text == "An enumeration.":
        return None
    first = inspect.cleandoc(text).split("\n\n")[0]
    return " ".join(first.split()) or None


__all__ = ["SCHEMA_REF", "Schemas"]
