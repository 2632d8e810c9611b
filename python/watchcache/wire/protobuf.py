"""Kubernetes' protobuf wire format, decoded into (and encoded from) the JSON Go writes.

Design note
-----------
A protobuf request body is ``k8s\\x00`` followed by a ``runtime.Unknown`` message
{typeMeta{apiVersion, kind}, raw, contentEncoding, contentType} whose ``raw`` is the
object's message. :func:`decode_envelope` reads the envelope; :func:`decode_object` turns
``raw`` into exactly the JSON object a JSON client would have sent for the same Go object:
``json.Marshal`` of the struct that Kubernetes' generated (gogo) ``Unmarshal`` would fill.
That takes two passes, because Go's result depends on the whole message:

1. **Unmarshal** (:func:`_decode_fields`), a port of gogo's generated code driven by the
   schema (``wire.schema``): one value slot per field; a scalar's last occurrence wins, a
   message's occurrences merge, lists append, map entries overwrite; wrong wire types,
   truncation, overflowing varints and negative lengths fail with gogo's error texts. A
   field number the schema does not know is skipped as gogo skips it, and its path (JSON
   names, ``[i]`` for list items, ``#N`` for the number) is reported to the caller, which
   applies ``fieldValidation`` to it: nothing unknown is kept.
2. **Marshal** (:func:`_render`): fields in Go declaration order with ``encoding/json``'s
   rules: a pointer that is set is written even when zero; a non-pointer zero scalar, a nil
   slice or map, disappears under ``omitempty``; a struct never does (a zero ``metav1.Time``
   is ``null``) except under ``omitzero``; ``[]byte`` is base64; map keys are sorted.
   A ``double`` (float64) is a JSON number, an integral one without a fraction as Go
   writes it; NaN and infinities fail as ``json.Marshal`` fails on them.
   Types with hand-written JSON follow their Go methods: Time (RFC 3339, seconds),
   MicroTime (microseconds), Quantity (the string, checked as ``ParseQuantity`` checks it),
   IntOrString (an int or a string), RawExtension and FieldsV1 (their embedded JSON),
   Duration (``1h0m0s``), GroupVersion (``group/version``), Verbs (a list), and
   apiextensions' (``marshal.go``): JSON (its embedded JSON, ``null`` when empty),
   JSONSchemaPropsOrBool (the schema if set, else the bool), JSONSchemaPropsOrArray (the
   list of schemas if not empty, else the schema or ``null``), JSONSchemaPropsOrStringArray
   (the strings if not empty, else the schema or ``null``). Those three wrappers are not a
   level of their own in JSON, so an unknown field inside one is named by the JSON path
   (``items[1].#99``, not ``items.jSONSchemas[1].#99``).

:func:`encode_object` is the inverse and writes the bytes Go's generated ``Marshal`` would:
fields in number order, non-pointer scalars and structs always, pointers when set, maps in
key order. Round-trip tests rely on it, and protobuf responses can use it.

Costs: both passes are linear in the body; no regular expression, no name parsing, one dict
lookup per field (the schema's tables are built once). Decoding a 1 KB ConfigMap takes some
tens of microseconds. Deliberate differences from Go: a Quantity keeps the client's text
instead of its canonical form (a Go client always sends the canonical form); a RawExtension
or FieldsV1 must hold JSON (Go also accepts protobuf and CBOR there, which no request uses);
times beyond ±2**62 seconds are refused where Go would wrap around.

Pure functions; safe from any thread. Callers: ``wire.body`` (request bodies), tests.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from watchcache.wire import gojson, gotime
from watchcache.wire.goscalars import QuantityError, check_quantity, decode_base64
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
    WRAPPERS,
    Field,
    Message,
    load,
)

__all__ = [
    "MAGIC",
    "Envelope",
    "ProtobufError",
    "decode_envelope",
    "decode_object",
    "encode_envelope",
    "encode_object",
]

#: The four bytes every Kubernetes protobuf body starts with.
MAGIC: Final = b"k8s\x00"

# gogo's errors, in Go's words.
_UNEXPECTED_EOF: Final = "unexpected EOF"
_INT_OVERFLOW: Final = "proto: integer overflow"
_INVALID_LENGTH: Final = "proto: negative length found during unmarshaling"
_END_OF_GROUP: Final = "proto: unexpected end of group"

_MASK64: Final = (1 << 64) - 1
_INT64_MAX: Final = (1 << 63) - 1
#: Nesting allowed in a decoded object, in containers (``registry.admission``'s bound).
MAX_DEPTH: Final = 100
TOO_DEEP: Final = f"the body of the request is nested too deeply (more than {MAX_DEPTH} levels)"


class ProtobufError(ValueError):
    """A body Kubernetes' protobuf decoding refuses; ``str()`` is Go's error text."""


class NestingError(ProtobufError):
    """An object nested deeper than :data:`MAX_DEPTH` levels (our bound, not Go's)."""


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


#: A slot no occurrence filled (typed Any: slots hold values of every kind).
_UNSET: Final[Any] = _Unset()


@dataclass(frozen=True, slots=True)
class Envelope:
    """A decoded ``runtime.Unknown``."""

    api_version: str
    kind: str
    raw: bytes | None
    content_encoding: str
    content_type: str


# ---------------------------------------------------------------------------------------
# Reading


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _int64(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value > _INT64_MAX else value


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """A varint ending before ``end``; bits past the 64th are dropped, as Go drops them."""
    result = 0
    shift = 0
    while True:
        if shift >= 64:
            raise ProtobufError(_INT_OVERFLOW)
        if pos >= end:
            raise ProtobufError(_UNEXPECTED_EOF)
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _MASK64, pos
        shift += 7


def _length(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """A length prefix and the end of what it measures, checked as gogo checks it."""
    length, pos = _varint(data, pos, end)
    length = _int64(length)
    if length < 0 or pos + length > _INT64_MAX:
        raise ProtobufError(_INVALID_LENGTH)
    post = pos + length
    if post > end:
        raise ProtobufError(_UNEXPECTED_EOF)
    return pos, post


def _skip(data: bytes, pos: int, end: int) -> int:
    """gogo's ``skipGenerated``: the position after one unknown field (maybe past ``end``,
    which the caller refuses)."""
    depth = 0
    while pos < end:
        wire, pos = _varint(data, pos, end)
        wire_type = wire & 7
        if wire_type == 0:
            shift = 0
            while True:
                if shift >= 64:
                    raise ProtobufError(_INT_OVERFLOW)
                if pos >= end:
                    raise ProtobufError(_UNEXPECTED_EOF)
                pos += 1
                if data[pos - 1] < 0x80:
                    break
                shift += 7
        elif wire_type == 1:
            pos += 8
        elif wire_type == 2:
            length, pos = _varint(data, pos, end)
            length = _int64(length)
            if length < 0:
                raise ProtobufError(_INVALID_LENGTH)
            pos += length
        elif wire_type == 3:
            depth += 1
        elif wire_type == 4:
            if depth == 0:
                raise ProtobufError(_END_OF_GROUP)
            depth -= 1
        elif wire_type == 5:
            pos += 4
        else:
            raise ProtobufError(f"proto: illegal wireType {wire_type}")
        if pos > _INT64_MAX:
            raise ProtobufError(_INVALID_LENGTH)
        if depth == 0:
            return pos
    raise ProtobufError(_UNEXPECTED_EOF)


def _text(raw: bytes) -> str:
    """Go's ``string(bytes)`` as ``json.Marshal`` writes it: each byte that is not UTF-8
    becomes U+FFFD."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        escaped = raw.decode("utf-8", "surrogateescape")
        return "".join("\ufffd" if "\udc80" <= ch <= "\udcff" else ch for ch in escaped)


def _wrong_wire_type(wire_type: int, fld: Field) -> ProtobufError:
    return ProtobufError(f"proto: wrong wireType = {wire_type} for field {fld.go_name}")


class _Decoder:
    """One decode: the body and the unknown fields found in it.

    The loops read one-byte tags and lengths inline (nearly every tag and most lengths in a
    Kubernetes object are below 128) and fall back to :func:`_varint`/:func:`_length` for
    the rest; this halves the cost of a typical body."""

    __slots__ = ("data", "unknown")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.unknown: list[str] = []

    def message(
        self,
        pos: int,
        end: int,
        message: Message,
        slots: list[Any] | None,
        *,
        path: str,
        depth: int,
    ) -> list[Any]:
        """gogo's ``Unmarshal`` of ``data[pos:end]`` into ``slots`` (merged, as Go merges
        into an existing struct)."""
        if depth > MAX_DEPTH:
            raise NestingError(TOO_DEEP)
        if slots is None:
            slots = [_UNSET] * len(message.fields)
        data = self.data
        by_number = message.by_number
        while pos < end:
            start = pos
            wire = data[pos]
            pos += 1
            if wire >= 0x80:
                wire, pos = _varint(data, start, end)
            wire_type = wire & 7
            if wire_type == 4:
                raise ProtobufError(f"proto: {message.go_name}: wiretype end group for non-group")
            number = wire >> 3
            if number > 0x7FFFFFFF:
                number = _int32(number)
            if number <= 0:
                raise ProtobufError(
                    f"proto: {message.go_name}: illegal tag {number} (wire type {wire})"
                )
            fld = by_number.get(number)
            if fld is None:
                pos = _skip(data, start, end)
                if pos > end:
                    raise ProtobufError(_UNEXPECTED_EOF)
                self.unknown.append(f"{path}.#{number}" if path else f"#{number}")
                continue
            if wire_type == 2 and fld.kind == STRING:
                # Strings and map<string, string> entries as Go writes them are most of an
                # object: read here, without a call.
                length = data[pos] if pos < end else 0x80
                if length < 0x80:
                    if fld.shape == SINGLE:
                        post = pos + 1 + length
                        if post <= end:
                            try:
                                slots[fld.slot] = data[pos + 1 : post].decode("utf-8")
                            except UnicodeDecodeError:
                                slots[fld.slot] = _text(data[pos + 1 : post])
                            pos = post
                            continue
                    elif fld.shape == MAP and pos + 3 < end and data[pos + 1] == 0x0A:
                        key_length = data[pos + 2]
                        key_end = pos + 3 + key_length
                        entry_end = pos + 1 + length
                        if (
                            key_length < 0x80
                            and key_end + 2 <= entry_end <= end
                            and data[key_end] == 0x12
                            and key_end + 2 + data[key_end + 1] == entry_end
                        ):
                            entries = slots[fld.slot]
                            if entries is _UNSET:
                                entries = slots[fld.slot] = {}
                            try:
                                text = data[key_end + 2 : entry_end].decode("utf-8")
                            except UnicodeDecodeError:
                                text = _text(data[key_end + 2 : entry_end])
                            entries[data[pos + 3 : key_end]] = text
                            pos = entry_end
                            continue
            pos = self.field(pos, end, wire_type, fld, slots=slots, path=path, depth=depth)
        return slots

    def field(
        self,
        pos: int,
        end: int,
        wire_type: int,
        fld: Field,
        *,
        slots: list[Any],
        path: str,
        depth: int,
    ) -> int:
        data = self.data
        kind = fld.kind
        shape = fld.shape
        if fld.varint:
            if wire_type == 0:
                raw = data[pos] if pos < end else 0x80
                if raw < 0x80:
                    pos += 1
                else:
                    raw, pos = _varint(data, pos, end)
                if shape == SINGLE:
                    slots[fld.slot] = _scalar(kind, raw)
                else:
                    self.append(slots, fld, _scalar(kind, raw))
                return pos
            if wire_type == 2 and shape == LIST:
                pos, post = _length(data, pos, end)
                while pos < post:
                    raw, pos = _varint(data, pos, end)
                    self.append(slots, fld, _scalar(kind, raw))
                return pos
            raise _wrong_wire_type(wire_type, fld)
        if kind == DOUBLE:
            return self.double(pos, end, wire_type, fld, slots)
        if wire_type != 2:
            raise _wrong_wire_type(wire_type, fld)
        if shape == MAP:
            return self.map_entry(pos, end, fld, slots=slots, path=path, depth=depth)
        length = data[pos] if pos < end else 0x80
        if length < 0x80:
            pos += 1
            post = pos + length
            if post > end:
                raise ProtobufError(_UNEXPECTED_EOF)
        else:
            pos, post = _length(data, pos, end)
        if kind == STRING:
            value: Any = _text(data[pos:post])
        elif kind == BYTES:
            value = data[pos:post]
        else:
            assert fld.message is not None
            child_path = self.child_path(path, fld, slots)
            special = fld.message.special
            if special in ("time", "microtime"):
                # metav1.Time's own Unmarshal: every occurrence replaces the value, and an
                # empty one is the zero time.
                stamp = self.message(pos, post, fld.message, None, path=child_path, depth=depth + 1)
                value = None if pos == post else (_or0(stamp[0]), _or0(stamp[1]))
            elif shape == SINGLE:
                existing = slots[fld.slot]
                value = self.message(
                    pos,
                    post,
                    fld.message,
                    None if existing is _UNSET else existing,
                    path=child_path,
                    depth=depth + 1,
                )
            else:
                value = self.message(pos, post, fld.message, None, path=child_path, depth=depth + 1)
        if shape == SINGLE:
            slots[fld.slot] = value
        else:
            self.append(slots, fld, value)
        return post

    def double(self, pos: int, end: int, wire_type: int, fld: Field, slots: list[Any]) -> int:
        """A float64: eight little-endian bytes (gogo's code for ``double``; a packed list
        is length-delimited)."""
        data = self.data
        if wire_type == 1:
            if pos + 8 > end:
                raise ProtobufError(_UNEXPECTED_EOF)
            value = _DOUBLE.unpack_from(data, pos)[0]
            if fld.shape == SINGLE:
                slots[fld.slot] = value
            else:
                self.append(slots, fld, value)
            return pos + 8
        if wire_type == 2 and fld.shape == LIST:
            pos, post = _length(data, pos, end)
            if (post - pos) % 8:
                raise ProtobufError(_UNEXPECTED_EOF)
            for index in range(pos, post, 8):
                self.append(slots, fld, _DOUBLE.unpack_from(data, index)[0])
            return post
        raise _wrong_wire_type(wire_type, fld)

    @staticmethod
    def append(slots: list[Any], fld: Field, value: Any) -> None:
        items = slots[fld.slot]
        if items is _UNSET:
            slots[fld.slot] = [value]
        else:
            items.append(value)

    @staticmethod
    def child_path(path: str, fld: Field, slots: list[Any]) -> str:
        if fld.inline:
            return path
        if fld.transparent:  # a wrapper's member is the wrapper's JSON value itself
            base = path
        else:
            name = fld.json_name or fld.go_name
            base = f"{path}.{name}" if path else name
        if fld.shape == LIST:
            items = slots[fld.slot]
            return f"{base}[{0 if items is _UNSET else len(items)}]"
        return base

    def map_entry(
        self,
        pos: int,
        end: int,
        fld: Field,
        *,
        slots: list[Any],
        path: str,
        depth: int,
    ) -> int:
        """One ``map<string, V>`` entry, read as gogo reads it: key and value are taken as
        length-delimited whatever their wire type, and their lengths are checked against
        the enclosing message, not the entry."""
        data = self.data
        length = data[pos] if pos < end else 0x80
        if length < 0x80:
            pos += 1
            entry_end = pos + length
            if entry_end > end:
                raise ProtobufError(_UNEXPECTED_EOF)
        else:
            pos, entry_end = _length(data, pos, end)
        key = b""
        kind = fld.kind
        value: Any = "" if kind == STRING else b"" if kind == BYTES else None
        while pos < entry_end:
            entry_start = pos
            tag = data[pos]
            pos += 1
            if tag >= 0x80:
                tag, pos = _varint(data, entry_start, end)
            number = tag >> 3
            if number == 1 or number == 2:  # noqa: PLR1714 (a set costs more)
                length = data[pos] if pos < end else 0x80
                if length < 0x80:
                    pos += 1
                    post = pos + length
                    if post > end:
                        raise ProtobufError(_UNEXPECTED_EOF)
                else:
                    pos, post = _length(data, pos, end)
                if number == 1:
                    key = data[pos:post]
                elif kind == STRING:
                    value = _text(data[pos:post])
                elif kind == BYTES:
                    value = data[pos:post]
                else:
                    assert fld.message is not None
                    where = f"{path}.{fld.json_name}" if path else fld.json_name
                    value = self.message(
                        pos, post, fld.message, None, path=f"{where}.{_text(key)}", depth=depth + 1
                    )
                pos = post
            else:
                pos = _skip(data, entry_start, end)
                if pos > entry_end:
                    raise ProtobufError(_UNEXPECTED_EOF)
                where = f"{path}.{fld.json_name}" if path else fld.json_name
                self.unknown.append(f"{where}.#{_int32(number)}")
        entries = slots[fld.slot]
        if entries is _UNSET:
            entries = slots[fld.slot] = {}
        entries[key] = value
        return entry_end


#: A protobuf ``double``: eight bytes, little-endian.
_DOUBLE: Final = struct.Struct("<d")


def _or0(value: Any) -> int:
    return 0 if value is _UNSET else int(value)


def _scalar(kind: int, raw: int) -> int | bool:
    if kind == INT32:
        return _int32(raw)
    if kind == INT64:
        return _int64(raw)
    return raw != 0


def decode_envelope(data: bytes) -> Envelope:
    """The ``runtime.Unknown`` of a body that starts with :data:`MAGIC` (checked by the
    caller). Raises :class:`ProtobufError`."""
    unknown_message = load().message("k8s.io.apimachinery.pkg.runtime.Unknown")
    decoder = _Decoder(data)
    slots = decoder.message(len(MAGIC), len(data), unknown_message, None, path="", depth=0)
    type_meta = slots[0]
    api_version = kind = ""
    if type_meta is not _UNSET:
        api_version = "" if type_meta[0] is _UNSET else type_meta[0]
        kind = "" if type_meta[1] is _UNSET else type_meta[1]
    raw = None if slots[1] is _UNSET else bytes(slots[1])
    return Envelope(
        api_version=api_version,
        kind=kind,
        raw=raw,
        content_encoding="" if slots[2] is _UNSET else slots[2],
        content_type="" if slots[3] is _UNSET else slots[3],
    )


def decode_object(raw: bytes, message: Message) -> tuple[dict[str, Any], list[str]]:
    """``json.Marshal`` of the Go object that ``raw`` unmarshals into, as a dict in Go's
    member order, and the paths of the protobuf fields the schema does not know (dropped).

    Raises :class:`ProtobufError` with Go's text for what Go refuses: malformed protobuf,
    and values Go's JSON encoding of the object would fail on (an invalid Quantity, an
    IntOrString of an unknown type, a RawExtension that is not JSON)."""
    decoder = _Decoder(raw)
    slots = decoder.message(0, len(raw), message, None, path="", depth=0)
    out: dict[str, Any] = {}
    _render(slots, message, out, 1)
    return out, decoder.unknown


# ---------------------------------------------------------------------------------------
# Marshal: slots → JSON


def _render(slots: list[Any] | None, message: Message, out: dict[str, Any], depth: int) -> None:
    """Fill ``out`` (an object at nesting level ``depth``) with ``message``'s members."""
    for fld in message.fields:
        if fld.hidden:
            continue
        value = _UNSET if slots is None else slots[fld.slot]
        if fld.inline:
            assert fld.message is not None
            _render(None if value is _UNSET else value, fld.message, out, depth)
            continue
        name = fld.json_name
        if fld.shape == SINGLE:
            if fld.kind == MESSAGE:
                assert fld.message is not None
                if value is _UNSET and fld.pointer:
                    if not fld.omitempty and not fld.omitzero:
                        out[name] = None
                    continue
                special = fld.message.special
                if special == "verbs":  # a slice in Go: omitempty applies
                    items = _UNSET if value is _UNSET else value[0]
                    if items is _UNSET:
                        if not (fld.omitempty or fld.omitzero):
                            out[name] = None
                        continue
                    out[name] = list(items)
                    continue
                if fld.omitzero and _is_zero_message(value, fld.message):
                    continue
                out[name] = _render_message(
                    None if value is _UNSET else value, fld.message, depth + 1
                )
                continue
            if value is _UNSET:
                if fld.pointer or fld.kind == BYTES:
                    if not (fld.omitempty or fld.omitzero):
                        out[name] = None
                    continue
                if fld.omitempty or fld.omitzero:
                    continue
                out[name] = _ZERO[fld.kind]
                continue
            if not fld.pointer and (fld.omitempty or fld.omitzero) and not value:
                continue  # "", 0, false, and an empty []byte
            if fld.kind == BYTES:
                value = base64.b64encode(value).decode("ascii")
            elif fld.kind == DOUBLE:
                value = _json_double(value)
            out[name] = value
            continue
        if value is _UNSET:  # a nil slice or map
            if not (fld.omitempty or fld.omitzero):
                out[name] = None
            continue
        if fld.shape == LIST:
            out[name] = [_render_element(item, fld, depth + 2) for item in value]
        else:
            out[name] = {
                _text(key): _render_element(value[key], fld, depth + 2) for key in sorted(value)
            }


_ZERO: Final[dict[int, Any]] = {STRING: "", BOOL: False, INT32: 0, INT64: 0, DOUBLE: 0}


def _render_element(value: Any, fld: Field, depth: int) -> Any:
    if fld.kind == MESSAGE:
        assert fld.message is not None
        return _render_message(value, fld.message, depth)
    if fld.kind == BYTES:
        return base64.b64encode(value).decode("ascii")
    if fld.kind == DOUBLE:
        return _json_double(value)
    return value


def _json_double(value: float) -> float | int:
    """A float64 as ``json.Marshal`` writes it: an integral value has no fraction (Go
    writes ``5``, not ``5.0``), and NaN or an infinity is an error."""
    if math.isnan(value) or math.isinf(value):
        text = "NaN" if math.isnan(value) else "+Inf" if value > 0 else "-Inf"
        raise ProtobufError(f"json: unsupported value: {text}")
    if value.is_integer() and abs(value) < 1e21:  # Go's switch to exponents
        return int(value)
    return value


def _is_zero_message(value: Any, message: Message) -> bool:
    """Go's ``omitzero`` test: ``IsZero()`` for the time types, else the zero struct."""
    if value is _UNSET or value is None:
        return True
    if message.special == "time":
        return bool(value[0] == gotime.ZERO_TIME_SECONDS)
    if message.special == "microtime":
        return _micro_parts(value) == (gotime.ZERO_TIME_SECONDS, 0)
    return False


def _micro_parts(stamp: tuple[int, int]) -> tuple[int, int]:
    seconds, nanos = stamp
    truncated = -(-nanos // 1000 * 1000) if nanos < 0 else nanos // 1000 * 1000
    total = seconds * 1_000_000_000 + truncated
    return divmod(total, 1_000_000_000)


def _render_message(slots: Any, message: Message, depth: int) -> Any:
    """The JSON value of a message at nesting level ``depth``."""
    special = message.special
    if not special:
        out: dict[str, Any] = {}
        _render(slots, message, out, depth)
        return out
    if special in ("time", "microtime"):
        return _render_time(slots, special == "microtime")
    values = slots if slots is not None else [_UNSET] * len(message.fields)
    if special == "quantity":
        text = "0" if values[0] is _UNSET else values[0]
        try:
            check_quantity(text)
        except QuantityError as error:
            raise ProtobufError(str(error)) from None
        return text
    if special == "intorstring":
        kind = _or0(values[0])
        if kind == 0:
            return _or0(values[1])
        if kind == 1:
            return "" if values[2] is _UNSET else values[2]
        raise ProtobufError(
            "json: error calling MarshalJSON for type intstr.IntOrString: "
            "impossible IntOrString.Type"
        )
    if special in ("rawextension", "fieldsv1", "json"):
        raw = values[0]
        # RawExtension writes an empty Raw as it is (and fails on it); the others null.
        if raw is _UNSET or (special != "rawextension" and not raw):
            return None
        return _embedded_json(raw, message, depth)
    if special in WRAPPERS:
        return _render_wrapper(values, message, depth)
    if special == "duration":
        return gotime.duration_string(_or0(values[0]))
    if special == "groupversion":
        group = "" if values[0] is _UNSET else values[0]
        version = "" if values[1] is _UNSET else values[1]
        text = _group_version(group, version)
        if text.count("/") > 1:
            raise ProtobufError(
                "json: error calling MarshalJSON for type v1.GroupVersion: illegal "
                f"GroupVersion {text}: contains more than one /"
            )
        return text
    if special == "verbs":
        return None if values[0] is _UNSET else list(values[0])
    raise AssertionError(f"unknown special message {special}")


def _render_wrapper(values: list[Any], message: Message, depth: int) -> Any:
    """The MarshalJSON of JSONSchemaPropsOrBool {1 allows, 2 schema}: the schema if set,
    else the bool; of ...OrArray and ...OrStringArray {1 schema, 2 list}: the list if not
    empty, else the schema, else null."""
    if message.special == "orbool":
        allows, schema_field = message.by_number[1], message.by_number[2]
        schema = values[schema_field.slot]
        if schema is _UNSET:
            return bool(values[allows.slot] is not _UNSET and values[allows.slot])
    else:
        schema_field, list_field = message.by_number[1], message.by_number[2]
        items = values[list_field.slot]
        if items is not _UNSET and items:
            return [_render_element(item, list_field, depth + 1) for item in items]
        schema = values[schema_field.slot]
        if schema is _UNSET:
            return None
    assert schema_field.message is not None
    return _render_message(schema, schema_field.message, depth)


def _render_time(stamp: tuple[int, int] | None, micro: bool) -> str | None:
    if stamp is None:
        return None
    try:
        if micro:
            seconds, nanos = _micro_parts(stamp)
            if seconds == gotime.ZERO_TIME_SECONDS and nanos == 0:
                return None
            return gotime.format_micro_time(seconds, nanos)
        # metav1.Time keeps whole seconds only (its Unmarshal drops the nanoseconds).
        if stamp[0] == gotime.ZERO_TIME_SECONDS:
            return None
        return gotime.format_time(stamp[0])
    except ValueError as error:
        raise ProtobufError(str(error)) from None


def _group_version(group: str, version: str) -> str:
    if not group and not version:
        return ""
    if not group and version == "v1":
        return version
    return f"{group}/{version}" if group else version


def _embedded_json(raw: bytes, message: Message, depth: int) -> Any:
    # Go's MarshalJSON writes these bytes into the output, where they must be valid JSON.
    try:
        value = gojson.loads(raw)
    except RecursionError:
        raise NestingError(TOO_DEEP) from None
    except ValueError as error:
        raise ProtobufError(
            f"json: error calling MarshalJSON for type {message.go_type}: "
            f"the embedded object is not JSON ({error})"
        ) from None
    if _nests_deeper(value, MAX_DEPTH - depth + 1):
        raise NestingError(TOO_DEEP)
    return value


def _nests_deeper(value: Any, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` containers; iterative, O(size)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, list):
            continue
        stack.extend((child, depth + 1) for child in node if isinstance(child, dict | list))
    return False


# ---------------------------------------------------------------------------------------
# Encoding: JSON → bytes, as Go's generated Marshal writes them


def _put_varint(out: bytearray, value: int) -> None:
    value &= _MASK64
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _put_bytes(out: bytearray, tag: int, payload: bytes | bytearray) -> None:
    out.append(tag) if tag < 0x80 else _put_varint(out, tag)
    _put_varint(out, len(payload))
    out += payload


def _tag(number: int, wire_type: int) -> int:
    return number << 3 | wire_type


def _number_order(message: Message) -> tuple[Field, ...]:
    cached = _ORDER.get(message.name)
    if cached is None:
        cached = tuple(sorted((f for f in message.fields if f.number), key=lambda f: f.number))
        _ORDER[message.name] = cached
    return cached


_ORDER: dict[str, tuple[Field, ...]] = {}


def encode_object(obj: Mapping[str, Any] | None, message: Message) -> bytes:
    """The protobuf bytes of the JSON object ``obj`` (already valid for ``message``: what
    ``wire.body`` accepts). Raises ValueError for a value of the wrong type."""
    out = bytearray()
    _encode_message(out, obj, message)
    return bytes(out)


def _encode_message(out: bytearray, obj: Any, message: Message) -> None:
    special = message.special
    if special:
        _encode_special(out, obj, message)
        return
    if obj is not None and not isinstance(obj, Mapping):
        raise ValueError(f"{message.go_type}: expected an object, got {type(obj).__name__}")
    members: Mapping[str, Any] = obj if obj is not None else {}
    for fld in _number_order(message):
        if fld.inline:
            child = bytearray()
            assert fld.message is not None
            _encode_message(child, members, fld.message)
            _put_bytes(out, _tag(fld.number, 2), child)
            continue
        value = members.get(fld.json_name) if fld.json_name else None
        if fld.shape == SINGLE:
            _encode_single(out, fld, value)
        elif fld.shape == LIST:
            for item in value or ():
                _encode_element(out, fld, item)
        else:
            _encode_map(out, fld, value)


def _encode_single(out: bytearray, fld: Field, value: Any) -> None:
    kind = fld.kind
    if kind == MESSAGE:
        if value is None and fld.pointer:
            return
        assert fld.message is not None
        child = bytearray()
        _encode_message(child, value, fld.message)
        _put_bytes(out, _tag(fld.number, 2), child)
        return
    if value is None:
        if fld.pointer or kind == BYTES:
            return
        value = _ZERO[kind]
    _encode_scalar(out, fld.number, kind, value)


def _encode_element(out: bytearray, fld: Field, item: Any) -> None:
    if item is None and fld.kind != MESSAGE:
        item = "" if fld.kind == BYTES else _ZERO[fld.kind]
    if fld.kind == MESSAGE:
        assert fld.message is not None
        child = bytearray()
        _encode_message(child, item, fld.message)
        _put_bytes(out, _tag(fld.number, 2), child)
    else:
        _encode_scalar(out, fld.number, fld.kind, item)


def _encode_scalar(out: bytearray, number: int, kind: int, value: Any) -> None:
    if kind == STRING:
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {type(value).__name__}")
        _put_bytes(out, _tag(number, 2), value.encode("utf-8"))
    elif kind == BYTES:
        if not isinstance(value, str):
            raise ValueError(f"expected base64 text, got {type(value).__name__}")
        _put_bytes(out, _tag(number, 2), decode_base64(value.encode("utf-8")))
    elif kind == BOOL:
        if not isinstance(value, bool):
            raise ValueError(f"expected a boolean, got {type(value).__name__}")
        _put_varint(out, _tag(number, 0))
        out.append(1 if value else 0)
    elif kind == DOUBLE:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"expected a number, got {type(value).__name__}")
        _put_varint(out, _tag(number, 1))
        out += _DOUBLE.pack(float(value))
    else:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {type(value).__name__}")
        _put_varint(out, _tag(number, 0))
        _put_varint(out, value)


def _encode_map(out: bytearray, fld: Field, value: Any) -> None:
    if not value:
        return
    if not isinstance(value, Mapping):
        raise ValueError(f"{fld.json_name}: expected an object")
    tag = _tag(fld.number, 2)
    for key in sorted(value, key=lambda text: text.encode("utf-8")):
        entry = bytearray()
        _put_bytes(entry, 0x0A, key.encode("utf-8"))
        item = value[key]
        if fld.kind == MESSAGE:
            assert fld.message is not None
            child = bytearray()
            _encode_message(child, item, fld.message)
            _put_bytes(entry, 0x12, child)
        elif fld.kind == BYTES:
            if item is not None:  # a nil []byte value is left out
                _encode_scalar(entry, 2, BYTES, item)
        else:
            _encode_scalar(entry, 2, fld.kind, "" if item is None else item)
        _put_bytes(out, tag, entry)


def _encode_special(out: bytearray, value: Any, message: Message) -> None:
    special = message.special
    if special in ("time", "microtime"):
        if value is None:
            return  # the zero time marshals to nothing
        if not isinstance(value, str):
            raise ValueError(f"{message.go_type}: expected a string")
        seconds, nanos = gotime.parse_time(value, micro=special == "microtime")
        nanos = 0 if special == "time" else nanos // 1000 * 1000
        if seconds == gotime.ZERO_TIME_SECONDS and nanos == 0:
            return
        _put_varint(out, 0x08)
        _put_varint(out, seconds)
        _put_varint(out, 0x10)
        _put_varint(out, nanos)
    elif special == "quantity":
        text = "0" if value is None else value
        if isinstance(text, bool) or not isinstance(text, str | int | float):
            raise ValueError("resource.Quantity: expected a string or a number")
        _put_bytes(out, 0x0A, str(text).encode("utf-8"))
    elif special == "intorstring":
        if value is None:
            value = 0
        if isinstance(value, str):
            kind, number, text = 1, 0, value
        elif isinstance(value, int) and not isinstance(value, bool):
            kind, number, text = 0, value, ""
        else:
            raise ValueError("intstr.IntOrString: expected an integer or a string")
        out += b"\x08"
        _put_varint(out, kind)
        out += b"\x10"
        _put_varint(out, number)
        _put_bytes(out, 0x1A, text.encode("utf-8"))
    elif special in ("rawextension", "fieldsv1", "json"):
        if value is not None:
            _put_bytes(out, 0x0A, gojson.dumpb(value))
    elif special in WRAPPERS:
        _encode_wrapper(out, value, message)
    elif special == "duration":
        nanoseconds = 0 if value is None else gotime.parse_duration(str(value))
        out += b"\x08"
        _put_varint(out, nanoseconds)
    elif special == "groupversion":
        text = "" if value is None else str(value)
        group, _, version = text.rpartition("/") if "/" in text else ("", "", text)
        _put_bytes(out, 0x0A, group.encode("utf-8"))
        _put_bytes(out, 0x12, version.encode("utf-8"))
    elif special == "verbs":
        for verb in value or ():
            _put_bytes(out, 0x0A, str(verb).encode("utf-8"))
    else:
        raise AssertionError(f"unknown special message {special}")


def _encode_wrapper(out: bytearray, value: Any, message: Message) -> None:
    """What gogo writes for the Go value a wrapper's UnmarshalJSON makes of ``value``
    (the field numbers are those of :func:`_render_wrapper`)."""
    if message.special == "orbool":
        schema_field = message.by_number[2]
        # Allows is a plain bool: always written; a schema implies true.
        if value is None or isinstance(value, bool):
            out += b"\x08\x01" if value else b"\x08\x00"
            return
        if not isinstance(value, Mapping):
            raise ValueError(f"{message.go_type}: expected a boolean or an object")
        out += b"\x08\x01"
    else:
        schema_field = message.by_number[1]
        if value is None:
            return
        if isinstance(value, list):
            for item in value:
                _encode_element(out, message.by_number[2], item)
            return
        if not isinstance(value, Mapping):
            raise ValueError(f"{message.go_type}: expected an object or a list")
    assert schema_field.message is not None
    child = bytearray()
    _encode_message(child, value, schema_field.message)
    _put_bytes(out, _tag(schema_field.number, 2), child)


def encode_envelope(raw: bytes, *, api_version: str, kind: str) -> bytes:
    """:data:`MAGIC` and the ``runtime.Unknown`` around ``raw``, as Go writes it (empty
    contentEncoding and contentType included)."""
    type_meta = bytearray()
    _put_bytes(type_meta, 0x0A, api_version.encode("utf-8"))
    _put_bytes(type_meta, 0x12, kind.encode("utf-8"))
    out = bytearray(MAGIC)
    _put_bytes(out, 0x0A, type_meta)
    _put_bytes(out, 0x12, raw)
    out += b"\x1a\x00\x22\x00"
    return bytes(out)
