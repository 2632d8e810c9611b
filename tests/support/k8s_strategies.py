"""Hypothesis strategies for Kubernetes objects, generated from ``wire.schema``.

Design note
-----------
A generated object is *canonical*: exactly what Go's ``json.Marshal`` writes for some Go
value of the message's struct. The rules are written here a second time, independently of
``wire.protobuf``'s renderer, so a round trip (encode, then decode) that returns the same
JSON, member order included, checks both against one reading of Go's rules:

* a pointer is absent (``omitempty``) or ``null`` when nil, and any value when set, zero
  included;
* a non-pointer scalar under ``omitempty``/``omitzero`` is absent when zero, so it is either
  absent or non-zero; without them it is always present;
* a non-pointer struct is always present (``omitempty`` never drops a struct), except under
  ``omitzero`` when it is zero; a zero ``metav1.Time`` is ``null``;
* a nil list or map is absent (``omitempty``) or ``null``; a present one is non-empty (Go
  cannot tell an empty protobuf list from a missing one); map keys come sorted;
* ``[]byte`` is canonical base64; Quantity a canonical quantity; IntOrString an int32 or a
  string; times are UTC RFC 3339 at Go's precision (seconds, or microseconds for MicroTime);
  a float64 is finite, and an integer when integral (Go writes ``5``, not ``5.0``);
* apiextensions' JSON is any non-null JSON value; JSONSchemaPropsOrBool a bool or a
  schema; ...OrArray a schema or a non-empty list of schemas; ...OrStringArray a schema or
  a non-empty list of strings (an empty list is written as null).

Optional members are drawn less often as objects nest (``max_depth``), so a Pod stays small.
"""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import strategies as st

from watchcache.wire import gotime
from watchcache.wire.schema import (
    BOOL,
    BYTES,
    DOUBLE,
    INT32,
    INT64,
    LIST,
    MAP,
    MESSAGE,
    SINGLE,
    STRING,
    Field,
    Message,
)

INT32S = st.integers(-(2**31), 2**31 - 1)
INT64S = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=12)
KEYS = st.text(min_size=0, max_size=8)
QUANTITIES = st.sampled_from(["0", "1", "100m", "1500m", "1Gi", "512Mi", "2", "10", "1k", "5e3"])
# Year 1 to 9999, the zero time (0001-01-01T00:00:00Z) left out: Go writes that as null.
SECONDS = st.integers(gotime.ZERO_TIME_SECONDS + 1, 253402300799)
JSON_LEAVES = st.none() | st.booleans() | INT32S | st.text(max_size=6)
DOUBLES = st.floats(allow_nan=False, allow_infinity=False).map(
    lambda value: int(value) if value.is_integer() and abs(value) < 1e21 else value
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=6,
)


def scalar(kind: int, *, non_zero: bool = False) -> st.SearchStrategy[Any]:
    if kind == STRING:
        return st.text(min_size=1, max_size=12) if non_zero else TEXT
    if kind == BOOL:
        return st.just(True) if non_zero else st.booleans()
    if kind in (INT32, INT64):
        values = INT32S if kind == INT32 else INT64S
        return values.filter(bool) if non_zero else values
    if kind == DOUBLE:
        return DOUBLES.filter(bool) if non_zero else DOUBLES
    assert kind == BYTES
    raw = st.binary(min_size=1 if non_zero else 0, max_size=12)
    return raw.map(lambda data: base64.b64encode(data).decode("ascii"))


def special(message: Message, depth: int = 0, max_depth: int = 3) -> st.SearchStrategy[Any]:
    """A non-zero value of a type with hand-written JSON (Verbs: a non-empty list); the
    schemas inside apiextensions' wrappers are objects at ``depth + 1``."""
    kind = message.special
    if kind == "time":
        return SECONDS.map(gotime.format_time)
    if kind == "microtime":
        return st.tuples(SECONDS, st.integers(0, 999_999)).map(
            lambda pair: gotime.format_micro_time(pair[0], pair[1] * 1000)
        )
    if kind == "quantity":
        return QUANTITIES
    if kind == "intorstring":
        return INT32S | TEXT
    if kind == "fieldsv1":
        return st.dictionaries(KEYS, JSON_VALUES, max_size=3)
    if kind in ("rawextension", "json"):
        return JSON_VALUES.filter(lambda value: value is not None)
    if kind in ("orbool", "orarray", "orstringarray"):
        schema_field = message.by_number[2 if kind == "orbool" else 1]
        assert schema_field.message is not None
        schemas = objects(schema_field.message, depth + 1, max_depth)
        if kind == "orbool":
            return st.booleans() | schemas
        if kind == "orarray":
            return schemas | st.lists(schemas, min_size=1, max_size=2)
        return schemas | st.lists(TEXT, min_size=1, max_size=3)
    if kind == "duration":
        return INT64S.map(gotime.duration_string)
    if kind == "groupversion":
        part = st.text(alphabet="abcdefgh.0123456789", min_size=1, max_size=6)
        return st.one_of(
            st.just("v1"), part.map(lambda v: "v" + v), st.tuples(part, part).map("/".join)
        )
    assert kind == "verbs"
    return st.lists(TEXT, min_size=1, max_size=3)


def _zero_special(message: Message) -> Any:
    # json.Marshal of the zero value of a special type.
    return {"quantity": "0", "intorstring": 0, "duration": "0s", "groupversion": ""}.get(
        message.special
    )


@st.composite
def objects(
    draw: st.DrawFn, message: Message, depth: int = 0, max_depth: int = 3
) -> dict[str, Any]:
    """A canonical JSON object of ``message`` (its TypeMeta members left out)."""
    out: dict[str, Any] = {}
    _fill(draw, message, out, depth, max_depth)
    return out


def _optional(draw: st.DrawFn, depth: int, max_depth: int) -> bool:
    return depth < max_depth and draw(st.integers(0, 3 + 2 * depth)) == 0


def _fill(
    draw: st.DrawFn, message: Message, out: dict[str, Any], depth: int, max_depth: int
) -> None:
    for fld in message.fields:
        if fld.hidden or (fld.inline and fld.json_only):
            continue
        if fld.inline:
            assert fld.message is not None
            _fill(draw, fld.message, out, depth, max_depth)
            continue
        present, value = _member(draw, fld, depth, max_depth)
        if present:
            out[fld.json_name] = value


def _nil(fld: Field) -> tuple[bool, Any]:
    return (False, None) if fld.omitempty or fld.omitzero else (True, None)


def _member(draw: st.DrawFn, fld: Field, depth: int, max_depth: int) -> tuple[bool, Any]:
    if fld.shape != SINGLE:
        if not _optional(draw, depth, max_depth):
            return _nil(fld)
        size = draw(st.integers(1, 2))
        if fld.shape == LIST:
            return True, [_element(draw, fld, depth, max_depth) for _ in range(size)]
        assert fld.shape == MAP
        keys = sorted(draw(st.sets(KEYS, min_size=1, max_size=size)), key=str.encode)
        return True, {key: _element(draw, fld, depth, max_depth) for key in keys}
    if fld.kind != MESSAGE:
        if fld.pointer or fld.kind == BYTES:
            if not _optional(draw, depth, max_depth + 1):
                return _nil(fld)
            non_zero = fld.kind == BYTES and (fld.omitempty or fld.omitzero)
            return True, draw(scalar(fld.kind, non_zero=non_zero))
        if fld.omitempty or fld.omitzero:
            if not _optional(draw, depth, max_depth + 1):
                return False, None
            return True, draw(scalar(fld.kind, non_zero=True))
        return True, draw(scalar(fld.kind))
    message = fld.message
    assert message is not None
    if message.special:
        if message.special == "verbs":
            if not _optional(draw, depth, max_depth + 1):
                return _nil(fld)
            return True, draw(special(message))
        if fld.pointer or message.special in ("time", "microtime", "rawextension", "fieldsv1"):
            if not _optional(draw, depth, max_depth + 1):
                if fld.pointer:
                    return _nil(fld)
                # A nil RawExtension/FieldsV1, or a zero time: null, or absent under omitzero.
                return (False, None) if fld.omitzero else (True, None)
            return True, draw(special(message, depth, max_depth))
        if _optional(draw, depth, max_depth + 1):
            return True, draw(special(message, depth, max_depth))
        return True, _zero_special(message)
    if fld.pointer and not _optional(draw, depth, max_depth):
        return _nil(fld)
    return True, draw(objects(message, depth + 1, max_depth))


def _element(draw: st.DrawFn, fld: Field, depth: int, max_depth: int) -> Any:
    if fld.kind != MESSAGE:
        return draw(scalar(fld.kind))
    message = fld.message
    assert message is not None
    if message.special:
        return draw(special(message, depth, max_depth))
    return draw(objects(message, depth + 1, max_depth))
