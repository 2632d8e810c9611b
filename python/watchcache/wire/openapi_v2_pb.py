"""OpenAPI v2 (Swagger 2.0) documents in gnostic's protobuf form, ``openapi_v2.Document``.

Design note
-----------
kubectl asks ``/openapi/v2`` for ``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``
and unmarshals the answer into gnostic's ``openapi_v2.Document`` (github.com/google/gnostic-
models, ``openapiv2/OpenAPIv2.proto``). :func:`encode_document` turns the Swagger JSON value
(the dict a JSON answer would carry) into those bytes. The field numbers below are facts of
that .proto; the code is ours.

The encoder is a set of small table-driven writers, one per gnostic message, because
Swagger's JSON is not a plain mapping of the proto: objects keyed by name become repeated
``Named*`` messages (``paths``, ``definitions``, ``properties``, ``responses``), members
starting with ``x-`` become ``vendor_extension`` entries whose value is YAML text, and a few
members are oneofs chosen by content (a parameter by its ``in``, ``$ref`` or not,
``additionalProperties`` as a schema or a boolean, ``items`` as one schema or several).
A member the proto has no field for raises ValueError naming its path, so a document the
encoder cannot represent fails in tests instead of losing content in kubectl.

Values gnostic keeps as ``Any`` (vendor extensions, ``default``, ``enum``, ``example``) are
written as YAML; we write JSON with a space after every ``:`` and ``,``, which YAML parsers
(go-yaml v2 in kubectl) read as flow collections. Proto3 rules apply: scalars equal to their
default are left out, except inside a oneof.

Cost: linear in the document, a few milliseconds for the core/v1 kinds; pure functions,
safe from any thread. Caller: ``apiserver.openapi``, once per set of served resources.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

__all__ = ["encode_document", "yaml_text"]

JSON: TypeAlias = Any

_VARINT: Final = 0
_FIXED64: Final = 1
_LEN: Final = 2

# Scalar field types of the tables below.
_STR: Final = "string"
_STRS: Final = "repeated string"
_BOOL: Final = "bool"
_INT: Final = "int64"
_DOUBLE: Final = "double"
_ANY: Final = "Any"
_ANYS: Final = "repeated Any"


#: A member's writer: (writer, field number, JSON value, path for errors).
_Write: TypeAlias = "Callable[[_Writer, int, JSON, str], None]"


class _Writer:
    """Protobuf wire format into one buffer. Kept here rather than shared with
    ``wire.protobuf`` because that module's writers are private to Kubernetes objects."""

    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def varint(self, value: int) -> None:
        value &= 0xFFFFFFFFFFFFFFFF  # negative int64s take ten bytes, as in Go
        out = self.out
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)

    def tag(self, number: int, wire_type: int) -> None:
        self.varint(number << 3 | wire_type)

    def bytes_field(self, number: int, payload: bytes | bytearray) -> None:
        self.tag(number, _LEN)
        self.varint(len(payload))
        self.out += payload

    def string(self, number: int, text: str) -> None:
        self.bytes_field(number, text.encode("utf-8"))

    def bool_field(self, number: int, value: bool) -> None:
        self.tag(number, _VARINT)
        self.out.append(1 if value else 0)

    def int_field(self, number: int, value: int) -> None:
        self.tag(number, _VARINT)
        self.varint(value)

    def double(self, number: int, value: float) -> None:
        self.tag(number, _FIXED64)
        self.out += struct.pack("<d", value)

    def message(self, number: int, write: Callable[[_Writer], None]) -> None:
        inner = _Writer()
        write(inner)
        self.bytes_field(number, inner.out)

    def wrapped(
        self, number: int, inner_number: int, write: _Write, value: JSON, path: str
    ) -> None:
        """A message holding one member, written by ``write``: gnostic's oneof wrappers."""
        inner = _Writer()
        write(inner, inner_number, value, path)
        self.bytes_field(number, inner.out)

    def any_field(self, number: int, value: JSON) -> None:
        """An ``Any`` (its ``yaml``, field 2)."""
        inner = _Writer()
        inner.string(2, yaml_text(value))
        self.bytes_field(number, inner.out)

    def named_any(self, number: int, name: str, value: JSON) -> None:
        """A ``NamedAny`` (name 1, Any 2): one vendor extension."""
        inner = _Writer()
        inner.string(1, name)
        inner.any_field(2, value)
        self.bytes_field(number, inner.out)


def yaml_text(value: JSON) -> str:
    """The YAML gnostic keeps for an ``Any``: JSON, which is YAML with flow collections."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _scalar(w: _Writer, number: int, kind: str, value: JSON, path: str) -> None:
    """One scalar member, left out when it equals the proto3 default."""
    if kind == _STR:
        _expect(value, str, path)
        if value:
            w.string(number, value)
    elif kind == _STRS:
        _expect(value, list, path)
        for item in value:
            _expect(item, str, path)
            w.string(number, item)
    elif kind == _BOOL:
        _expect(value, bool, path)
        if value:
            w.bool_field(number, True)
    elif kind == _INT:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{path}: expected an integer, got {value!r}")
        if value:
            w.int_field(number, value)
    elif kind == _DOUBLE:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ValueError(f"{path}: expected a number, got {value!r}")
        if value:
            w.double(number, float(value))
    elif kind == _ANY:
        w.any_field(number, value)
    elif kind == _ANYS:
        _expect(value, list, path)
        for item in value:
            w.any_field(number, item)
    else:  # pragma: no cover - the tables only name the kinds above
        raise AssertionError(kind)


def _expect(value: JSON, kind: type, path: str) -> None:
    if not isinstance(value, kind):
        raise ValueError(f"{path}: expected {kind.__name__}, got {value!r}")


#: A member's writer: a scalar kind above, or a function writing a nested message.
_Member: TypeAlias = "str | _Write"


def _object(
    w: _Writer,
    value: JSON,
    path: str,
    fields: Mapping[str, tuple[int, _Member]],
    extensions: int,
) -> None:
    """A gnostic message from a JSON object: members by the table, ``x-`` members as
    vendor extensions (field ``extensions``; 0 when the message has none)."""
    _expect(value, dict, path)
    for key, member in value.items():
        here = f"{path}.{key}"
        if key.startswith("x-") and extensions:
            w.named_any(extensions, key, member)
            continue
        entry = fields.get(key)
        if entry is None:
            raise ValueError(f"{here}: no field for this member in gnostic's openapi_v2")
        number, kind = entry
        if isinstance(kind, str):
            _scalar(w, number, kind, member, here)
        else:
            kind(w, number, member, here)


def _nested(fields: Mapping[str, tuple[int, _Member]], extensions: int) -> _Write:
    """A member that is one nested message described by ``fields``."""

    def write(w: _Writer, number: int, value: JSON, path: str) -> None:
        w.message(number, lambda inner: _object(inner, value, path, fields, extensions))

    return write


def _named_map(entry: _Write, *, extensions: int = 0, entries: int = 1) -> _Write:
    """A JSON object keyed by name: a message of repeated ``Named*`` entries (name 1,
    value 2) in field ``entries``, and ``x-`` members in field ``extensions`` if any."""

    def write(w: _Writer, number: int, value: JSON, path: str) -> None:
        _expect(value, dict, path)

        def body(inner: _Writer) -> None:
            for name, item in value.items():
                if extensions and name.startswith("x-"):
                    inner.named_any(extensions, name, item)
                    continue

                def named(n: _Writer, name: str = name, item: JSON = item) -> None:
                    n.string(1, name)
                    entry(n, 2, item, f"{path}.{name}")

                inner.message(entries, named)

        w.message(number, body)

    return write


def _repeated(entry: _Write) -> _Write:
    """A JSON array of messages: one field occurrence per element."""

    def write(w: _Writer, number: int, value: JSON, path: str) -> None:
        _expect(value, list, path)
        for i, item in enumerate(value):
            entry(w, number, item, f"{path}[{i}]")

    return write


# -- Schema ---------------------------------------------------------------------------------


def _schema(w: _Writer, number: int, value: JSON, path: str) -> None:
    w.message(number, lambda inner: _object(inner, value, path, _SCHEMA, 31))


def _schemas(w: _Writer, number: int, value: JSON, path: str) -> None:
    _expect(value, list, path)
    for i, item in enumerate(value):
        _schema(w, number, item, f"{path}[{i}]")


def _additional_properties(w: _Writer, number: int, value: JSON, path: str) -> None:
    # oneof {Schema schema = 1; bool boolean = 2;}: a set oneof member is always written.
    if isinstance(value, bool):
        w.message(number, lambda inner: inner.bool_field(2, value))
    else:
        w.message(number, lambda inner: _schema(inner, 1, value, path))


def _type(w: _Writer, number: int, value: JSON, path: str) -> None:
    names = value if isinstance(value, list) else [value]
    w.message(number, lambda inner: _scalar(inner, 1, _STRS, names, path))


def _items(w: _Writer, number: int, value: JSON, path: str) -> None:
    schemas = value if isinstance(value, list) else [value]
    w.message(number, lambda inner: _schemas(inner, 1, schemas, path))


_EXTERNAL_DOCS: Final = _nested({"description": (1, _STR), "url": (2, _STR)}, 3)
_XML: Final = _nested(
    {
        "name": (1, _STR),
        "namespace": (2, _STR),
        "prefix": (3, _STR),
        "attribute": (4, _BOOL),
        "wrapped": (5, _BOOL),
    },
    6,
)

_SCHEMA: Final[Mapping[str, tuple[int, _Member]]] = {
    "$ref": (1, _STR),
    "format": (2, _STR),
    "title": (3, _STR),
    "description": (4, _STR),
    "default": (5, _ANY),
    "multipleOf": (6, _DOUBLE),
    "maximum": (7, _DOUBLE),
    "exclusiveMaximum": (8, _BOOL),
    "minimum": (9, _DOUBLE),
    "exclusiveMinimum": (10, _BOOL),
    "maxLength": (11, _INT),
    "minLength": (12, _INT),
    "pattern": (13, _STR),
    "maxItems": (14, _INT),
    "minItems": (15, _INT),
    "uniqueItems": (16, _BOOL),
    "maxProperties": (17, _INT),
    "minProperties": (18, _INT),
    "required": (19, _STRS),
    "enum": (20, _ANYS),
    "additionalProperties": (21, _additional_properties),
    "type": (22, _type),
    "items": (23, _items),
    "allOf": (24, _schemas),
    "properties": (25, _named_map(_schema)),
    "discriminator": (26, _STR),
    "readOnly": (27, _BOOL),
    "xml": (28, _XML),
    "externalDocs": (29, _EXTERNAL_DOCS),
    "example": (30, _ANY),
}

# -- Parameters -----------------------------------------------------------------------------


def _primitives_items(w: _Writer, number: int, value: JSON, path: str) -> None:
    w.message(number, lambda inner: _object(inner, value, path, _PRIMITIVES_ITEMS, 18))


def _validations(first: int) -> dict[str, tuple[int, _Member]]:
    """The members every non-body parameter and PrimitivesItems share, numbered from
    ``first`` (gnostic numbers them consecutively after each message's own members)."""
    names: list[tuple[str, _Member]] = [
        ("type", _STR),
        ("format", _STR),
        ("items", _primitives_items),
        ("collectionFormat", _STR),
        ("default", _ANY),
        ("maximum", _DOUBLE),
        ("exclusiveMaximum", _BOOL),
        ("minimum", _DOUBLE),
        ("exclusiveMinimum", _BOOL),
        ("maxLength", _INT),
        ("minLength", _INT),
        ("pattern", _STR),
        ("maxItems", _INT),
        ("minItems", _INT),
        ("uniqueItems", _BOOL),
        ("enum", _ANYS),
        ("multipleOf", _DOUBLE),
    ]
    return {name: (first + i, kind) for i, (name, kind) in enumerate(names)}


_PRIMITIVES_ITEMS: Final = _validations(1)  # vendor extensions: 18
_PARAMETER_HEAD: Final[dict[str, tuple[int, _Member]]] = {
    "required": (1, _BOOL),
    "in": (2, _STR),
    "description": (3, _STR),
    "name": (4, _STR),
}
#: QueryParameterSubSchema and FormDataParameterSubSchema (vendor extensions: 23).
_QUERY_PARAMETER: Final = {**_PARAMETER_HEAD, "allowEmptyValue": (5, _BOOL), **_validations(6)}
#: PathParameterSubSchema and HeaderParameterSubSchema (vendor extensions: 22).
_PATH_PARAMETER: Final = {**_PARAMETER_HEAD, **_validations(5)}
_BODY_PARAMETER: Final[Mapping[str, tuple[int, _Member]]] = {
    "description": (1, _STR),
    "name": (2, _STR),
    "in": (3, _STR),
    "required": (4, _BOOL),
    "schema": (5, _schema),
}
_BODY_PARAMETER_WRITER: Final = _nested(_BODY_PARAMETER, 6)
#: NonBodyParameter's oneof members by the parameter's ``in``.
_NON_BODY: Final[Mapping[str, tuple[int, _Write]]] = {
    "header": (1, _nested(_PATH_PARAMETER, 22)),
    "formData": (2, _nested(_QUERY_PARAMETER, 23)),
    "query": (3, _nested(_QUERY_PARAMETER, 23)),
    "path": (4, _nested(_PATH_PARAMETER, 22)),
}


def _json_reference(w: _Writer, number: int, value: JSON, path: str) -> None:
    fields = {"$ref": (1, _STR), "description": (2, _STR)}
    w.message(number, lambda inner: _object(inner, value, path, fields, 0))


def _parameter(w: _Writer, number: int, value: JSON, path: str) -> None:
    """Parameter: oneof {BodyParameter body_parameter = 1; NonBodyParameter = 2}."""
    _expect(value, dict, path)
    where = value.get("in")
    if where == "body":
        w.wrapped(number, 1, _BODY_PARAMETER_WRITER, value, path)
    elif isinstance(where, str) and where in _NON_BODY:
        w.wrapped(number, 2, _non_body, value, path)
    else:
        raise ValueError(f"{path}.in: unknown parameter location {where!r}")


def _non_body(w: _Writer, number: int, value: JSON, path: str) -> None:
    """NonBodyParameter: a oneof of the four locations' sub-schemas."""
    inner_number, write = _NON_BODY[value["in"]]
    w.wrapped(number, inner_number, write, value, path)


def _parameters_items(w: _Writer, number: int, value: JSON, path: str) -> None:
    """repeated ParametersItem: oneof {Parameter parameter = 1; JsonReference = 2}."""
    _expect(value, list, path)
    for i, item in enumerate(value):
        here = f"{path}[{i}]"
        if isinstance(item, dict) and "$ref" in item:
            w.wrapped(number, 2, _json_reference, item, here)
        else:
            w.wrapped(number, 1, _parameter, item, here)


# -- Responses, operations, paths -----------------------------------------------------------


def _schema_item(w: _Writer, number: int, value: JSON, path: str) -> None:
    """SchemaItem: oneof {Schema schema = 1; FileSchema file_schema = 2}."""
    w.wrapped(number, 1, _schema, value, path)


_RESPONSE: Final[Mapping[str, tuple[int, _Member]]] = {
    "description": (1, _STR),
    "schema": (2, _schema_item),
}
_RESPONSE_WRITER: Final = _nested(_RESPONSE, 5)


def _response_value(w: _Writer, number: int, value: JSON, path: str) -> None:
    """ResponseValue: oneof {Response response = 1; JsonReference json_reference = 2}."""
    if isinstance(value, dict) and "$ref" in value:
        w.wrapped(number, 2, _json_reference, value, path)
    else:
        w.wrapped(number, 1, _RESPONSE_WRITER, value, path)


_OPERATION: Final[Mapping[str, tuple[int, _Member]]] = {
    "tags": (1, _STRS),
    "summary": (2, _STR),
    "description": (3, _STR),
    "externalDocs": (4, _EXTERNAL_DOCS),
    "operationId": (5, _STR),
    "produces": (6, _STRS),
    "consumes": (7, _STRS),
    "parameters": (8, _parameters_items),
    "responses": (9, _named_map(_response_value, extensions=2)),
    "schemes": (10, _STRS),
    "deprecated": (11, _BOOL),
}
_OPERATION_WRITER: Final = _nested(_OPERATION, 13)
_PATH_ITEM: Final[Mapping[str, tuple[int, _Member]]] = {
    "$ref": (1, _STR),
    "get": (2, _OPERATION_WRITER),
    "put": (3, _OPERATION_WRITER),
    "post": (4, _OPERATION_WRITER),
    "delete": (5, _OPERATION_WRITER),
    "options": (6, _OPERATION_WRITER),
    "head": (7, _OPERATION_WRITER),
    "patch": (8, _OPERATION_WRITER),
    "parameters": (9, _parameters_items),
}
_INFO: Final[Mapping[str, tuple[int, _Member]]] = {
    "title": (1, _STR),
    "version": (2, _STR),
    "description": (3, _STR),
    "termsOfService": (4, _STR),
    "contact": (5, _nested({"name": (1, _STR), "url": (2, _STR), "email": (3, _STR)}, 4)),
    "license": (6, _nested({"name": (1, _STR), "url": (2, _STR)}, 3)),
}
_DOCUMENT: Final[Mapping[str, tuple[int, _Member]]] = {
    "swagger": (1, _STR),
    "info": (2, _nested(_INFO, 7)),
    "host": (3, _STR),
    "basePath": (4, _STR),
    "schemes": (5, _STRS),
    "consumes": (6, _STRS),
    "produces": (7, _STRS),
    # Paths: vendor_extension = 1, repeated NamedPathItem path = 2.
    "paths": (8, _named_map(_nested(_PATH_ITEM, 10), extensions=1, entries=2)),
    "definitions": (9, _named_map(_schema)),
    "parameters": (10, _named_map(_parameter)),
    "responses": (11, _named_map(_RESPONSE_WRITER)),
    "tags": (14, _repeated(_nested({"name": (1, _STR), "description": (2, _STR)}, 4))),
    "externalDocs": (15, _EXTERNAL_DOCS),
}


def encode_document(document: Mapping[str, JSON]) -> bytes:
    """The ``openapi_v2.Document`` protobuf bytes of a Swagger 2.0 JSON document. Raises
    ValueError (naming the member's path) for content gnostic's messages cannot hold."""
    w = _Writer()
    _object(w, document, "$", _DOCUMENT, 16)
    return bytes(w.out)
