"""Request bodies as Kubernetes decodes them: JSON, YAML or protobuf, with field validation.

Design note
-----------
:func:`decode_body` is the one door a write's body goes through. It returns the object as
a JSON-ready dict and the warnings to send (``Warning: 299 - "..."``), or raises a
``StatusError`` with the status and the words kube-apiserver uses for the same body:

* **Media type** (``Content-Type``, parameters ignored, case-insensitive; empty means
  JSON): ``application/json``, ``application/yaml``, ``application/vnd.kubernetes.protobuf``;
  anything else is 415 naming those three (``NegotiateInputSerializer``).
* **Parsing**: JSON as Go's decoder reads it (invalid UTF-8 inside strings becomes U+FFFD,
  ``NaN`` is refused, syntax errors in Go's words as far as Python reports the same
  place); YAML with PyYAML's safe loader adjusted to goyaml v2, which Kubernetes uses:
  timestamps stay text, keys become strings as sigs.k8s.io/yaml makes them, and what JSON
  cannot carry (binary, sets, NaN, other keys) is refused; alias expansion is bounded by
  goyaml's ratio rule, so a "billion laughs" document is a 400, not a hang. Protobuf goes
  through ``wire.protobuf``.
* **The schema walk** (:class:`_Walk`): the parsed object is checked against the kind's
  message (``wire.schema``) in one pass. Wrong JSON types are 400 with
  ``encoding/json``'s text (``json: cannot unmarshal string into Go struct field
  ObjectMeta.metadata.generation of type int64``), so are invalid base64 in ``[]byte``
  fields, times, quantities and IntOrStrings, each with the message its Go ``Unmarshal``
  gives; Go's order of precedence is kept (a custom unmarshaler's error ends decoding, a
  plain type error is remembered and decoding goes on). Unknown fields and duplicate fields
  are strict errors in sigs.k8s.io/json's words and paths (``unknown field
  "spec.containers[0].foo"``, ``duplicate field "metadata.name"``, at most 100, each once),
  except inside a CRD schema's ``items``, ``additionalProperties``, ``additionalItems`` and
  ``dependencies``, which apiextensions decodes with a plain ``json.Unmarshal`` of its own
  (``_Walk.wrapper``): there they are dropped without a word, as Kubernetes drops them;
  duplicate YAML keys are goyaml's (``line 4: key "a" already set in map``). Unknown fields
  are removed from the object in every mode; a duplicated field keeps what Go's decoder
  keeps (it decodes the later value into the earlier one: objects merge, lists merge
  element by element, maps gain keys, scalars are replaced).
* **fieldValidation**: ``Strict`` → 400 ``<Kind> in version "<v>" cannot be handled as a
  <Kind>: strict decoding error: <e1>, <e2>`` (``transformDecodeError`` in the apiserver's
  handlers, ``strictDecodingError`` in apimachinery); ``Warn`` → one warning per error
  (the YAML error split into its lines, as ``parseYAMLWarnings`` does); ``Ignore`` →
  nothing. Protobuf fields the schema does not know are reported the same way (Kubernetes
  drops them silently), named by their number: ``unknown field "spec.#42"``.

The object is otherwise returned as the client sent it (no defaults, no canonical
re-encoding of quantities or base64), except that a number given for a Quantity becomes
its text, as Go would store it; a protobuf body becomes exactly the JSON a JSON client
sends for the same object, ``kind`` and ``apiVersion`` first. A ``DeleteOptions`` body
(``kind=None``) is decoded as Kubernetes decodes it: never strictly, and its errors are
plain 400s without the "cannot be handled" prefix.

Costs: one parse and one walk, both linear; per field one dict lookup in tables built once.
A 1 KB ConfigMap decodes in tens of microseconds. No state; safe from any thread. The
caller checks the body's size first (3 MiB); nesting is limited to :data:`MAX_DEPTH`
levels, the bound ``registry.admission`` applies. Callers: the apiserver's write handlers.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, Final

import yaml

from watchcache.wire import goscalars, gotime
from watchcache.wire import protobuf as pb
from watchcache.wire.errors import BadRequestError, UnsupportedMediaTypeError
from watchcache.wire.gostrconv import go_quote
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
from watchcache.wire.write_options import FieldValidation

__all__ = [
    "JSON",
    "MAX_DEPTH",
    "MEDIA_TYPES",
    "PROTOBUF",
    "UNSTRUCTURED_MEDIA_TYPES",
    "YAML",
    "decode_apply_configuration",
    "decode_body",
    "decode_unstructured",
    "has_schema",
    "warning_header_value",
]

JSON: Final = "application/json"
YAML: Final = "application/yaml"
PROTOBUF: Final = "application/vnd.kubernetes.protobuf"
#: What a write body may be, in the order Kubernetes lists them in its 415.
MEDIA_TYPES: Final = (JSON, YAML, PROTOBUF)
#: Nesting allowed in an object (``registry.admission.MAX_DEPTH``: the same bound).
MAX_DEPTH: Final = pb.MAX_DEPTH
_TOO_DEEP: Final = pb.TOO_DEEP
#: sigs.k8s.io/json keeps at most this many strict errors.
_MAX_STRICT_ERRORS: Final = 100
_INT32_RANGE: Final = (-(2**31), 2**31 - 1)
_INT64_RANGE: Final = (-(2**63), 2**63 - 1)
# The anonymous struct apimachinery's SimpleMetaFactory decodes kind and apiVersion into.
_FIND_KIND: Final = (
    'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
    'Kind string "json:\\"kind,omitempty\\"" }'
)
_DELETE_OPTIONS: Final = "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions"


def warning_header_value(text: str) -> str:
    """The ``Warning`` header value Kubernetes sends for a warning text
    (``NewWarningHeader(299, "-", text)``: ``"`` and ``\\`` escaped, nothing else)."""
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------------------------------
# Errors


class _Fatal(Exception):
    """A decoding error that ends decoding at once (a custom unmarshaler's)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _json_kind(value: Any) -> str:
    """How encoding/json names a JSON value in an UnmarshalTypeError."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "number"


def _number_text(value: int | float) -> str:
    return value.text if isinstance(value, _GoNumber) else str(value)


def _summary(body: bytes, limit: int = 30) -> str:
    """apiserver's ``summarizeData``: JSON-looking text as text, anything else as hex."""
    if not body:
        return "<empty>"
    cut = body[:limit]
    more = " ..." if len(body) > limit else ""
    if body[:1] == b"{":
        return cut.decode("utf-8", "replace") + more
    return cut.hex() + more


# ---------------------------------------------------------------------------------------
# Parsing JSON


class _GoNumber(float):
    """A JSON number with a fraction or exponent, keeping its text (Go's errors quote it)."""

    text: str

    def __new__(cls, text: str) -> _GoNumber:
        number = super().__new__(cls, text)
        number.text = text
        return number


class _Duplicated(dict[str, Any]):
    """A JSON object with a repeated key: the dict (last value wins) plus the pairs in
    order, which the schema walk needs to decode duplicates as Go does."""

    pairs: list[tuple[str, Any]]


def _object_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    duplicated = _Duplicated(obj)
    duplicated.pairs = pairs
    return duplicated


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"invalid character {_quote_char(name[0])} looking for beginning of value")


_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")


def _parse_json(body: bytes) -> Any:
    """``body`` as Go's encoding/json reads it; raises ValueError in Go's words."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        # Go replaces each invalid byte inside a string by U+FFFD (outside, it is a
        # syntax error either way).
        text = _LONE_SURROGATE.sub("\ufffd", body.decode("utf-8", "surrogateescape"))
    try:
        value = json.loads(
            text,
            object_pairs_hook=_object_hook,
            parse_float=_GoNumber,
            parse_constant=_refuse_constant,
        )
    except json.JSONDecodeError as error:
        raise ValueError(_go_syntax_error(error)) from None
    if "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None:
        value = _replace_surrogates(value)
    return value


def _replace_surrogates(value: Any) -> Any:
    # An unpaired \uD800 escape is U+FFFD in Go; json.loads keeps a lone surrogate.
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(item) for item in value]
    if isinstance(value, dict):
        pairs = [(_replace_surrogates(k), _replace_surrogates(v)) for k, v in _pairs(value)]
        return _object_hook(pairs)
    return value


def _pairs(obj: dict[str, Any]) -> list[tuple[str, Any]]:
    return obj.pairs if isinstance(obj, _Duplicated) else list(obj.items())


def _quote_char(char: str) -> str:
    # encoding/json's quoteChar, of the byte Go stops at (a character's first byte).
    code = char.encode("utf-8", "surrogateescape")[0] if char else 0
    if code == 0x27:
        return "'\\''"
    if code == 0x22:
        return "'\"'"
    return "'" + go_quote(chr(code))[1:-1] + "'"


def _go_syntax_error(error: json.JSONDecodeError) -> str:
    """Go's text for the syntax error Python found at the same place."""
    document, position, message = error.doc, error.pos, error.msg
    if position >= len(document) or message.startswith("Unterminated string"):
        return "unexpected end of JSON input"
    char = _quote_char(document[position])
    if message.startswith("Unexpected UTF-8 BOM"):
        return f"invalid character {_quote_char(document[0])} looking for beginning of value"
    if message.startswith("Expecting value"):
        return f"invalid character {char} looking for beginning of value"
    if message.startswith("Expecting property name"):
        return f"invalid character {char} looking for beginning of object key string"
    if message.startswith("Expecting ':'"):
        return f"invalid character {char} after object key"
    if message.startswith("Expecting ','"):
        inside = (
            "object key:value pair" if _innermost(document, position) == "{" else ("array element")
        )
        return f"invalid character {char} after {inside}"
    if message.startswith("Extra data"):
        return f"invalid character {char} after top-level value"
    if message.startswith("Invalid control character"):
        return f"invalid character {char} in string literal"
    if message.startswith("Invalid \\"):
        return f"invalid character {char} in string escape code"
    return message


def _innermost(document: str, position: int) -> str:
    stack: list[str] = []
    in_string = escaped = False
    for char in document[:position]:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append(char)
        elif char in "}]" and stack:
            stack.pop()
    return stack[-1] if stack else ""


# ---------------------------------------------------------------------------------------
# Parsing YAML

_YAML_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# goyaml v2's limits on alias expansion (decode.go: allowedAliasRatio).
_ALIAS_RATIO_LOW: Final = 400_000
_ALIAS_RATIO_HIGH: Final = 4_000_000


class _YamlLoader(_YAML_BASE):  # type: ignore[misc]
    """PyYAML's safe loader, reporting duplicate keys as goyaml v2's strict mode does and
    keeping timestamps as text (goyaml decodes them into strings for untyped values)."""

    def __init__(self, stream: bytes) -> None:
        super().__init__(stream)
        self.duplicates: list[str] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # Depth first (deep=True), so duplicates are found in document order as goyaml
        # finds them; keys compared with their YAML type (1 and true differ, as in Go) and
        # stored as the strings sigs.k8s.io/yaml makes of them.
        self.flatten_mapping(node)
        mapping: dict[str, Any] = {}
        seen: set[tuple[type, Any]] = set()
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, list | dict | set):
                raise yaml.constructor.ConstructorError(
                    None, None, f"invalid map key: {key!r}", key_node.start_mark
                )
            typed = (type(key), key)
            if typed in seen:
                line = value_node.start_mark.line + 1
                self.duplicates.append(f"line {line}: key {_go_repr(key)} already set in map")
            seen.add(typed)
            mapping[_yaml_key(key)] = self.construct_object(value_node, deep=True)
        return mapping

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> list[Any]:
        return [self.construct_object(child, deep=True) for child in node.value]


_YamlLoader.add_constructor("tag:yaml.org,2002:timestamp", _YamlLoader.construct_yaml_str)


def _go_repr(value: Any) -> str:
    """Go's ``%#v`` of a YAML key."""
    if isinstance(value, str):
        return go_quote(value)
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _parse_yaml(body: bytes) -> tuple[Any, list[str]]:
    """The YAML document as JSON values, and goyaml's duplicate-key errors."""
    loader = _YamlLoader(body)
    try:
        document = loader.get_single_data()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise ValueError(f"error converting YAML to JSON: yaml: {line}{error.problem}") from None
    except yaml.YAMLError as error:
        raise ValueError(f"error converting YAML to JSON: yaml: {error}") from None
    finally:
        loader.dispose()
    converter = _YamlToJson()
    return converter.convert(document, 1), loader.duplicates


class _YamlToJson:
    """sigs.k8s.io/yaml's conversion of decoded YAML into JSON values, copying aliased
    subtrees (so later edits do not alias) within goyaml's expansion budget."""

    __slots__ = ("alias_decodes", "decodes", "in_alias", "seen")

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.decodes = 0
        self.alias_decodes = 0
        self.in_alias = 0

    def count(self) -> None:
        self.decodes += 1
        if self.in_alias:
            self.alias_decodes += 1
        if self.alias_decodes > 100 and self.decodes > 1000:
            ratio = self.alias_decodes / self.decodes
            if ratio > _allowed_alias_ratio(self.decodes):
                raise ValueError(
                    "error converting YAML to JSON: yaml: document contains excessive aliasing"
                )

    def convert(self, value: Any, depth: int) -> Any:
        self.count()
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise _Fatal(_TOO_DEEP)
            alias = id(value) in self.seen
            self.seen.add(id(value))
            self.in_alias += alias
            try:
                if isinstance(value, list):
                    return [self.convert(item, depth + 1) for item in value]
                return {_yaml_key(k): self.convert(v, depth + 1) for k, v in value.items()}
            finally:
                self.in_alias -= alias
        if value is None or isinstance(value, str | bool | int):
            return value
        if isinstance(value, float):
            if math.isnan(value) or math.isinf(value):
                raise ValueError(f"json: unsupported value: {_go_float(value)}")
            # json.Marshal writes an integral float64 without a fraction: it is an int.
            if value.is_integer() and abs(value) < 1e21:
                return int(value)
            return _GoNumber(repr(value))
        raise ValueError(
            f"error converting YAML to JSON: a {type(value).__name__} value cannot be "
            "represented in JSON"
        )


def _allowed_alias_ratio(decodes: int) -> float:
    if decodes <= _ALIAS_RATIO_LOW:
        return 0.99
    if decodes >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decodes - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


def _go_float(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "+Inf" if value > 0 else "-Inf"


def _yaml_key(key: Any) -> str:
    # sigs.k8s.io/yaml's convertToJSONableObject: strings, integers and booleans.
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    raise ValueError(
        f"error converting YAML to JSON: unsupported map key of type: {type(key).__name__}, "
        f"key: {key!r}"
    )


# ---------------------------------------------------------------------------------------
# The schema walk


class _Walk:
    """One walk of a parsed body against its message: type checks, unknown and duplicate
    fields, Go's merge of duplicates. Strict errors are collected, never raised here.

    ``depth`` is always the nesting level of the value being looked at (the body is 1), the
    unit ``registry.admission`` counts in. ``path`` is sigs.k8s.io/json's strict path
    (``spec.containers[0]``), ``stack`` encoding/json's field stack (struct fields only:
    ``spec.containers``), ``struct`` the Go struct a type error names.

    A walk with ``context`` stands for the plain ``json.Unmarshal`` that apiextensions'
    JSONSchemaProps wrappers call (:meth:`wrapper`): it reports no strict errors, and every
    type error it makes names ``context``, the (struct, field stack) where the outermost
    wrapper was met, because each enclosing decoder's ``addErrorContext`` overwrites the
    names an inner decoder gave."""

    __slots__ = ("context", "saved", "seen_strict", "strict")

    def __init__(self, context: tuple[str, str] | None = None) -> None:
        self.strict: list[str] = []
        self.seen_strict: set[str] = set()
        self.saved: str | None = None  # the first plain type error (Go's savedError)
        self.context = context

    # -- errors ----------------------------------------------------------------------------

    def strict_error(self, what: str, parent: str, name: str) -> None:
        if self.context is not None:
            return  # a plain json.Unmarshal: unknown and duplicate fields pass silently
        path = f"{parent}.{name}" if parent else name
        text = f"{what} {go_quote(path)}"
        if text in self.seen_strict or len(self.strict) >= _MAX_STRICT_ERRORS:
            return
        self.seen_strict.add(text)
        self.strict.append(text)

    def type_error_text(
        self, value: Any, go_type: str, struct: str, stack: str, *, integer: bool = False
    ) -> str:
        """encoding/json's UnmarshalTypeError text; an integer target quotes the number."""
        if self.context is not None:
            struct, stack = self.context
        shown = _json_kind(value)
        if shown == "number" and integer:
            shown = f"number {_number_text(value)}"
        if not struct and not stack:
            return f"json: cannot unmarshal {shown} into Go value of type {go_type}"
        return (
            f"json: cannot unmarshal {shown} into Go struct field {struct}.{stack} "
            f"of type {go_type}"
        )

    def type_error(
        self, value: Any, go_type: str, struct: str, stack: str, *, integer: bool = False
    ) -> None:
        if self.saved is None:
            self.saved = self.type_error_text(value, go_type, struct, stack, integer=integer)

    # -- objects ---------------------------------------------------------------------------

    def struct(
        self, obj: dict[str, Any], message: Message, path: str, stack: str, depth: int
    ) -> dict[str, Any]:
        """Check ``obj`` as ``message`` (members of inline structs included); returns it
        without unknown fields (the same dict, changed in place, when nothing repeats)."""
        if depth > MAX_DEPTH:
            raise _Fatal(_TOO_DEEP)
        if isinstance(obj, _Duplicated):
            return self.duplicated_struct(obj, message, path, stack, depth)
        by_json = message.by_json
        struct_name = message.go_name
        unknown: list[str] | None = None
        for key, value in obj.items():
            fld = by_json.get(key)
            if fld is None:
                self.strict_error("unknown field", path, key)
                if unknown is None:
                    unknown = []
                unknown.append(key)
                continue
            if value is None:
                continue  # null decodes into anything
            checked = self.member(value, fld, struct_name, path, stack, depth=depth + 1)
            if checked is not value:
                obj[key] = checked
        if unknown:
            for key in unknown:
                del obj[key]
        return obj

    def duplicated_struct(
        self, obj: _Duplicated, message: Message, path: str, stack: str, depth: int
    ) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in obj.pairs:
            fld = message.by_json.get(key)
            if fld is None:
                self.strict_error("unknown field", path, key)
                continue
            repeated = key in result
            if repeated:  # Go reports it before decoding the value
                self.strict_error("duplicate field", path, key)
            checked = (
                None
                if value is None
                else self.member(value, fld, message.go_name, path, stack, depth=depth + 1)
            )
            result[key] = _merge(result[key], checked, fld) if repeated else checked
        return result

    def member(
        self, value: Any, fld: Field, struct: str, path: str, stack: str, *, depth: int
    ) -> Any:
        """The non-null value of member ``fld`` of the struct named ``struct``."""
        name = fld.json_name
        field_stack = f"{stack}.{name}" if stack else name
        shape = fld.shape
        if shape == SINGLE:
            kind = fld.kind
            if kind == STRING:
                if type(value) is not str:
                    self.type_error(value, fld.go_type, struct, field_stack)
                return value
            if kind != MESSAGE:
                return self.scalar(value, kind, fld.go_type, struct, field_stack)
            message = fld.message
            assert message is not None
            child_path = f"{path}.{name}" if path else name
            if message.special:
                return self.special(value, message, fld.go_type, struct, field_stack, depth=depth)
            if not isinstance(value, dict):
                self.type_error(value, fld.go_type, struct, field_stack)
                return value
            return self.struct(value, message, child_path, field_stack, depth)
        child_path = f"{path}.{name}" if path else name
        if shape == LIST:
            if not isinstance(value, list):
                self.type_error(value, fld.go_type, struct, field_stack)
                return value
            return self.list_items(value, fld, struct, child_path, field_stack, depth=depth)
        if not isinstance(value, dict):
            self.type_error(value, fld.go_type, struct, field_stack)
            return value
        return self.map_entries(value, fld, struct, child_path, field_stack, depth=depth)

    def scalar(self, value: Any, kind: int, go_type: str, struct: str, stack: str) -> Any:
        if kind == STRING:
            if type(value) is not str:
                self.type_error(value, go_type, struct, stack)
        elif kind == BOOL:
            if type(value) is not bool:
                self.type_error(value, go_type, struct, stack)
        elif kind in (INT32, INT64):
            low, high = _INT32_RANGE if kind == INT32 else _INT64_RANGE
            if type(value) is not int or not low <= value <= high:
                self.type_error(value, go_type, struct, stack, integer=True)
        elif kind == BYTES:
            if type(value) is not str:
                self.type_error(value, go_type, struct, stack)
            else:
                try:
                    goscalars.decode_base64(value.encode("utf-8"))
                except goscalars.Base64Error as error:
                    if self.saved is None:
                        self.saved = str(error)
        elif kind == DOUBLE:
            return self.double(value, go_type, struct, stack)
        return value

    def double(self, value: Any, go_type: str, struct: str, stack: str) -> Any:
        """A float64: any JSON number that ``strconv.ParseFloat`` takes without overflow;
        the text is quoted when it overflows (``number 1e400``), as Go quotes it."""
        if type(value) is int:
            try:
                float(value)
            except OverflowError:
                self.type_error(value, go_type, struct, stack, integer=True)
            return value
        if isinstance(value, float) and not isinstance(value, bool):
            if math.isinf(value):
                self.type_error(value, go_type, struct, stack, integer=True)
                return value
            return float(value)  # our parsing helper (_GoNumber) removed
        self.type_error(value, go_type, struct, stack)
        return value

    def list_items(
        self, items: list[Any], fld: Field, struct: str, path: str, stack: str, *, depth: int
    ) -> list[Any]:
        if depth > MAX_DEPTH:
            raise _Fatal(_TOO_DEEP)
        if fld.kind == MESSAGE:
            for index, item in enumerate(items):
                if item is not None:
                    checked = self.element(
                        item, fld, struct, f"{path}[{index}]", stack, depth=depth + 1
                    )
                    if checked is not item:
                        items[index] = checked
            return items
        for item in items:
            if item is not None:
                self.scalar(item, fld.kind, fld.elem_go_type, struct, stack)
        return items

    def map_entries(
        self,
        entries: dict[str, Any],
        fld: Field,
        struct: str,
        path: str,
        stack: str,
        *,
        depth: int,
    ) -> dict[str, Any]:
        if depth > MAX_DEPTH:
            raise _Fatal(_TOO_DEEP)
        if isinstance(entries, _Duplicated):
            seen: set[str] = set()
            for key, _ in entries.pairs:
                if key in seen:
                    self.strict_error("duplicate field", path, key)
                seen.add(key)
            entries = dict(entries)  # a map keeps the last value of a repeated key
        if fld.kind == MESSAGE:
            for key, item in entries.items():
                if item is not None:
                    checked = self.element(
                        item, fld, struct, f"{path}.{key}", stack, depth=depth + 1
                    )
                    if checked is not item:
                        entries[key] = checked
            return entries
        for item in entries.values():
            if item is not None:
                self.scalar(item, fld.kind, fld.elem_go_type, struct, stack)
        return entries

    def element(
        self, item: Any, fld: Field, struct: str, path: str, stack: str, *, depth: int
    ) -> Any:
        """A list item or map value of message type."""
        message = fld.message
        assert message is not None
        if message.special:
            return self.special(item, message, fld.elem_go_type, struct, stack, depth=depth)
        if not isinstance(item, dict):
            self.type_error(item, fld.elem_go_type, struct, stack)
            return item
        return self.struct(item, message, path, stack, depth)

    def special(
        self, value: Any, message: Message, go_type: str, struct: str, stack: str, *, depth: int
    ) -> Any:
        """A value of a type with its own UnmarshalJSON: its errors end decoding, and a
        type error inside it names the field it was decoded for."""
        special = message.special
        if special in ("time", "microtime"):
            if type(value) is not str:
                raise _Fatal(self.type_error_text(value, "string", struct, stack))
            try:
                gotime.parse_time(value, micro=special == "microtime")
            except gotime.TimeParseError as error:
                raise _Fatal(str(error)) from None
            return value
        if special == "quantity":
            return _quantity(value)
        if special == "intorstring":
            if type(value) is str:
                return value
            if type(value) is not int or not _INT32_RANGE[0] <= value <= _INT32_RANGE[1]:
                raise _Fatal(self.type_error_text(value, "int32", struct, stack, integer=True))
            return value
        if special in ("rawextension", "fieldsv1", "json"):
            return _plain(value, depth)
        if special in WRAPPERS:
            return self.wrapper(value, message, struct, stack, depth=depth)
        if special == "duration":
            if type(value) is not str:
                raise _Fatal(self.type_error_text(value, "string", struct, stack))
            try:
                gotime.parse_duration(value)
            except gotime.TimeParseError as error:
                raise _Fatal(str(error)) from None
            return value
        if special == "groupversion":
            if type(value) is not str:
                raise _Fatal(self.type_error_text(value, "string", struct, stack))
            if value.count("/") > 1:
                raise _Fatal(f"unexpected GroupVersion string: {value}")
            return value
        if special == "verbs":
            if not isinstance(value, list):
                self.type_error(value, go_type, struct, stack)
                return value
            for item in value:
                if item is not None:
                    self.scalar(item, STRING, "string", struct, stack)
            return value
        raise AssertionError(f"unknown special message {special}")

    def wrapper(self, value: Any, message: Message, struct: str, stack: str, *, depth: int) -> Any:
        """apiextensions' UnmarshalJSON (marshal.go) of JSONSchemaPropsOrBool (a schema
        object, or true or false; anything else ends decoding with "boolean or JSON schema
        expected"), JSONSchemaPropsOrArray (a schema, or an array of schemas) and
        JSONSchemaPropsOrStringArray (a schema, or an array of strings). The last two ignore
        any other value, and so keep the zero wrapper, which Go writes as null: so is an
        empty array. What comes back is what Go would write for the wrapper.

        The schemas inside are decoded by apimachinery's plain ``json.Unmarshal``, not the
        strict decoder: Kubernetes drops their unknown fields without a word (kubernetes
        issue 128033), and their type errors end decoding (see the class note)."""
        special = message.special
        inner = _Walk(self.context or (struct, stack))
        if isinstance(value, dict):
            schema_field = message.by_number[2 if special == "orbool" else 1]
            assert schema_field.message is not None
            checked: Any = inner.struct(value, schema_field.message, "", "", depth)
        elif special == "orbool":
            if type(value) is not bool:
                raise _Fatal("boolean or JSON schema expected")
            return value
        elif not isinstance(value, list) or not value:
            return None
        else:
            if depth > MAX_DEPTH:
                raise _Fatal(_TOO_DEEP)
            list_field = message.by_number[2]
            element = list_field.message
            checked = value
            for index, item in enumerate(value):
                if item is None:
                    continue  # kept, as in any other list
                if element is None:  # []string
                    if type(item) is not str:
                        inner.type_error(item, "string", "", "")
                elif isinstance(item, dict):
                    value[index] = inner.struct(item, element, "", "", depth + 1)
                else:
                    inner.type_error(item, element.go_type, "", "")
        if inner.saved is not None:
            raise _Fatal(inner.saved)  # the inner Unmarshal's error is its caller's end
        return checked


def _quantity(value: Any) -> str:
    """``Quantity.UnmarshalJSON``: a string or any other JSON text, trimmed, parsed."""
    text = value.strip() if type(value) is str else _json_text(value)
    try:
        goscalars.check_quantity(text)
    except goscalars.QuantityError as error:
        raise _Fatal(str(error)) from None
    return text


def _json_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number_text(value)
    return json.dumps(_plain(value, 1), separators=(",", ":"))


def _plain(value: Any, depth: int) -> Any:
    """Embedded JSON kept as it is, with our parsing helpers removed (duplicates keep the
    last value, numbers with a fraction are plain floats)."""
    if depth > MAX_DEPTH and isinstance(value, dict | list):
        raise _Fatal(_TOO_DEEP)
    if isinstance(value, dict):
        return {key: _plain(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item, depth + 1) for item in value]
    if isinstance(value, _GoNumber):
        return float(value)
    return value


#: Types whose UnmarshalJSON turns null into the zero value (others ignore a null).
_NULL_RESETS: Final = frozenset({"time", "microtime", "quantity", "verbs"})


def _merge(old: Any, new: Any, fld: Field) -> Any:
    """What Go's decoder leaves in ``fld`` when a later ``new`` is decoded into an earlier
    ``old`` (both already checked)."""
    special = fld.message.special if fld.message is not None else ""
    if new is None:
        # null clears pointers, slices and maps, and the types that reset on null; any
        # other value keeps what it had.
        if fld.pointer or fld.shape != SINGLE or fld.kind == BYTES or special in _NULL_RESETS:
            return None
        if special == "intorstring":
            return old if type(old) is int else 0  # Type becomes Int, IntVal stays
        return old
    if old is None:
        return new
    message = fld.message
    if fld.shape == SINGLE:
        if message is not None and not special and isinstance(old, dict):
            return _merge_struct(old, new, message)
        return new
    if fld.shape == MAP:
        if isinstance(old, dict) and isinstance(new, dict):
            return {**old, **new}
        return new
    if not isinstance(old, list) or not isinstance(new, list):
        return new
    # Go decodes a list into the existing elements, then cuts it to the new length.
    merged: list[Any] = []
    for index, item in enumerate(new):
        previous = old[index] if index < len(old) else None
        if item is None:
            merged.append(None if special in _NULL_RESETS else previous)
        elif message is not None and not special and isinstance(previous, dict):
            merged.append(_merge_struct(previous, item, message))
        else:
            merged.append(item)
    return merged


def _merge_struct(old: dict[str, Any], new: Any, message: Message) -> Any:
    if not isinstance(new, dict):
        return new
    result = dict(old)
    for key, value in new.items():
        fld = message.by_json[key]
        result[key] = _merge(old[key], value, fld) if key in old else value
    return result


# ---------------------------------------------------------------------------------------
# decode_body


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower() or JSON


def _version_of(api_version: str) -> str:
    return api_version.rsplit("/", 1)[-1]


#: What an object of a kind the built-in schema does not know (a custom resource, an
#: embedder's kind) may be sent as: Kubernetes has no protobuf for them.
UNSTRUCTURED_MEDIA_TYPES: Final = (JSON, YAML)


def has_schema(api_version: str, kind: str) -> bool:
    """Whether the built-in schema knows the kind (else bodies decode unstructured)."""
    return load().kind(api_version, kind) is not None


def decode_unstructured(
    body: bytes,
    content_type: str,
    *,
    kind: str,
    api_version: str,
    field_validation: FieldValidation,
    prune: Callable[[dict[str, Any]], list[str]] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Decode the JSON or YAML ``body`` of an object whose kind has no built-in schema.

    The same parsing, nesting bound, kind/apiVersion checks and duplicate-field rules as
    :func:`decode_body` (a duplicated field is a strict error; the later value wins).
    Unknown fields cannot be told without a schema: ``prune`` (a CRD's structural schema)
    removes them from the decoded object and returns their paths, which are strict errors
    after the duplicates, as apiextensions' schema-coercing decoder orders them. Returns
    the object and the warnings (``Warn``). Raises 415 (protobuf and anything else) and
    400."""
    media = _media_type(content_type)
    if media not in UNSTRUCTURED_MEDIA_TYPES:
        raise UnsupportedMediaTypeError.accepting(UNSTRUCTURED_MEDIA_TYPES)
    context = _Context(body, False, kind, api_version)
    value, yaml_errors = _parse_text(body, media, context)
    context.check_kind(_type_meta(value, "kind", context), _type_meta(value, "apiVersion", context))
    duplicates: list[str] = []
    obj = _undup(value, "", duplicates)
    strict = [f'duplicate field "{path}"' for path in duplicates]
    if prune is not None:
        strict.extend(f'unknown field "{path}"' for path in prune(obj))
    return obj, _field_validation(field_validation, strict, yaml_errors, context)


def _field_validation(
    field_validation: FieldValidation, strict: list[str], yaml_errors: list[str], context: _Context
) -> list[str]:
    """What ``field_validation`` makes of the strict errors: nothing (Ignore), warnings
    (Warn), or the 400 (Strict, the YAML errors first as one error)."""
    if field_validation == FieldValidation.IGNORE or not (strict or yaml_errors):
        return []
    if field_validation == FieldValidation.STRICT:
        errors = list(strict)
        if yaml_errors:
            errors.insert(0, "yaml: unmarshal errors:\n  " + "\n  ".join(yaml_errors))
        raise BadRequestError(context.cannot_handle("strict decoding error: " + ", ".join(errors)))
    return [*yaml_errors, *strict]


def _undup(value: Any, path: str, duplicates: list[str]) -> Any:
    """Plain dicts and lists from a parsed value; each duplicated member's path (the last
    value kept, as an unstructured decode keeps it) goes to ``duplicates``."""
    if isinstance(value, list):
        return [_undup(item, f"{path}[{i}]", duplicates) for i, item in enumerate(value)]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in _pairs(value):
        child = f"{path}.{key}" if path else key
        if key in out and child not in duplicates:
            duplicates.append(child)
        out[key] = _undup(item, child, duplicates)
    return out


def decode_body(
    body: bytes,
    content_type: str,
    *,
    kind: str | None,
    api_version: str | None,
    field_validation: FieldValidation,
) -> tuple[dict[str, Any], list[str]]:
    """Decode a write's ``body`` (JSON, YAML or protobuf, by ``content_type``) as an object
    of ``kind`` in ``api_version`` (both None: a DeleteOptions body), applying
    ``field_validation`` to unknown and duplicate fields.

    Returns the object (unknown fields removed) and the warning texts (``Warn`` only).
    Raises UnsupportedMediaTypeError (415) and BadRequestError (400) with Kubernetes'
    messages; LookupError when ``kind`` is not in the schema (a caller's mistake).
    """
    media = _media_type(content_type)
    if media not in MEDIA_TYPES:
        raise UnsupportedMediaTypeError.accepting(MEDIA_TYPES)
    schema = load()
    if kind is None:
        message = schema.message(_DELETE_OPTIONS)
        field_validation = FieldValidation.IGNORE  # Kubernetes never decodes it strictly
        expected_kind, expected_version = "DeleteOptions", api_version or "v1"
    else:
        assert api_version is not None
        found = schema.kind(api_version, kind)
        if found is None:
            raise LookupError(f"no schema for {api_version} {kind}")
        message, expected_kind, expected_version = found, kind, api_version
    context = _Context(body, kind is None, expected_kind, expected_version)
    if media == PROTOBUF:
        obj, strict, yaml_errors = _decode_protobuf(body, message, context)
    else:
        obj, strict, yaml_errors = _decode_text(body, media, message, context)
    return obj, _field_validation(field_validation, strict, yaml_errors, context)


class _Context:
    """What the error messages of one decode need: the body, and the kind it should be."""

    __slots__ = ("body", "body_kind", "body_version", "delete_options", "kind", "version")

    def __init__(self, body: bytes, delete_options: bool, kind: str, api_version: str) -> None:
        self.body = body
        self.delete_options = delete_options
        self.kind = kind
        self.version = api_version
        self.body_kind = ""
        self.body_version = ""

    def cannot_handle(self, detail: str) -> str:
        """``transformDecodeError`` once the kind is known."""
        if self.delete_options:
            return detail
        kind = self.body_kind or self.kind
        version = _version_of(self.body_version or self.version)
        return f'{kind} in version "{version}" cannot be handled as a {self.kind}: {detail}'

    def unrecognized(self, detail: str) -> BadRequestError:
        """``transformDecodeError`` before the kind is known."""
        if self.delete_options:
            return BadRequestError(detail)
        return BadRequestError(
            f"the object provided is unrecognized (must be of type {self.kind}): {detail} "
            f"({_summary(self.body)})"
        )

    def check_kind(self, body_kind: str, body_version: str) -> None:
        self.body_kind, self.body_version = body_kind, body_version
        if self.delete_options:
            if body_kind not in ("", "DeleteOptions"):
                raise BadRequestError("decoded object cannot be converted to DeleteOptions")
            return
        # registry.admission says the same about a mismatch it finds later.
        if body_version and body_version != self.version:
            raise BadRequestError(
                f"the API version in the data ({body_version}) does not match the expected "
                f"API version ({self.version})"
            )
        if body_kind and body_kind != self.kind:
            raise BadRequestError(
                f"the kind in the data ({body_kind}) does not match the expected kind ({self.kind})"
            )


def _decode_protobuf(
    body: bytes, message: Message, context: _Context
) -> tuple[dict[str, Any], list[str], list[str]]:
    if not body:
        raise context.unrecognized("empty data")
    if not body.startswith(pb.MAGIC):
        raise context.unrecognized(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
        )
    if len(body) == len(pb.MAGIC):
        raise context.unrecognized("empty body")
    try:
        envelope = pb.decode_envelope(body)
    except pb.ProtobufError as error:
        raise context.unrecognized(str(error)) from None
    context.check_kind(envelope.kind, envelope.api_version)
    try:
        decoded, unknown = pb.decode_object(envelope.raw or b"", message)
    except pb.NestingError as error:
        raise BadRequestError(str(error)) from None
    except pb.ProtobufError as error:
        raise BadRequestError(context.cannot_handle(str(error))) from None
    obj: dict[str, Any] = {
        "kind": envelope.kind or context.kind,
        "apiVersion": envelope.api_version or context.version,
    }
    obj.update(decoded)
    # Reported as sigs.k8s.io/json reports JSON's: each path once, at most 100.
    strict = [f"unknown field {go_quote(path)}" for path in dict.fromkeys(unknown)]
    return obj, strict[:_MAX_STRICT_ERRORS], []


def _parse_text(body: bytes, media: str, context: _Context) -> tuple[dict[str, Any], list[str]]:
    """A JSON or YAML body parsed into an object (and goyaml's errors), or the 400 the
    Go decoder gives before it knows the kind."""
    yaml_errors: list[str] = []
    try:
        if media == YAML:
            value, yaml_errors = _parse_yaml(body)
        else:
            value = _parse_json(body)
    except ValueError as error:
        # YAMLToJSON's errors come as they are; JSON's come from SimpleMetaFactory.Interpret.
        prefix = "" if media == YAML else "couldn't get version/kind; json parse error: "
        raise context.unrecognized(f"{prefix}{error}") from None
    except _Fatal as error:
        raise BadRequestError(error.message) from None
    except RecursionError:
        raise BadRequestError(_TOO_DEEP) from None
    # Unknown fields are dropped, not walked: the bound must hold for them too, or a
    # later step (a patch of the stored object, a table) would recurse that deep.
    if media == YAML or not _brackets_within(body, MAX_DEPTH):
        check_depth(value)
    if not isinstance(value, dict):
        raise context.unrecognized(
            "couldn't get version/kind; json parse error: json: cannot unmarshal "
            f"{'null' if value is None else _json_kind(value)} into Go value of type {_FIND_KIND}"
        )
    return value, yaml_errors


def _decode_text(
    body: bytes, media: str, message: Message, context: _Context
) -> tuple[dict[str, Any], list[str], list[str]]:
    value, yaml_errors = _parse_text(body, media, context)
    body_kind = _type_meta(value, "kind", context)
    body_version = _type_meta(value, "apiVersion", context)
    context.check_kind(body_kind, body_version)
    walk = _Walk()
    try:
        obj = walk.struct(value, message, "", "", 1)
    except _Fatal as error:
        if error.message == _TOO_DEEP:
            raise BadRequestError(_TOO_DEEP) from None
        raise BadRequestError(context.cannot_handle(error.message)) from None
    if walk.saved is not None:
        raise BadRequestError(context.cannot_handle(walk.saved))
    return obj, walk.strict, yaml_errors


def decode_apply_configuration(body: bytes) -> tuple[dict[str, Any], list[str]]:
    """A server-side apply body (``application/apply-patch+yaml``: YAML, of which JSON is a
    part) as an object, read as sigs.k8s.io/yaml reads it, and goyaml's duplicate-key
    errors (a strict decoder's refusals). Raises 400 "error decoding patch: ..."."""
    try:
        value, duplicates = _parse_yaml(body)
    except ValueError as error:
        raise BadRequestError(f"error decoding patch: {error}") from None
    except _Fatal as error:
        raise BadRequestError(error.message) from None
    except RecursionError:
        raise BadRequestError(_TOO_DEEP) from None
    check_depth(value)
    if not isinstance(value, dict):
        shown = "null" if value is None else _json_kind(value)
        raise BadRequestError(
            "error decoding patch: json: cannot unmarshal "
            f"{shown} into Go value of type map[string]interface {{}}"
        )
    return value, duplicates


def check_depth(value: Any) -> None:
    """400 when a parsed value nests deeper than :data:`MAX_DEPTH` containers (a patch
    can deepen a stored object, so the registry checks patched objects with this too)."""
    if _nests_deeper(value, MAX_DEPTH):
        raise BadRequestError(_TOO_DEEP)


def _nests_deeper(value: Any, limit: int) -> bool:
    """Whether ``value`` nests deeper than ``limit`` containers; level by level, O(size)."""
    level = [value] if isinstance(value, dict | list) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for node in level:
            children = node.values() if isinstance(node, dict) else node
            below.extend(child for child in children if isinstance(child, dict | list))
        level = below
    return False


def _brackets_within(body: bytes, limit: int) -> bool:
    """Whether the JSON ``body`` opens at most ``limit`` containers, counting every bracket
    (those inside strings too): then what it parses to cannot nest deeper than ``limit``,
    and a body of a few containers needs no walk. (Not for YAML: block collections open
    without brackets.)"""
    return body.count(b"{") + body.count(b"[") <= limit


def _type_meta(obj: dict[str, Any], name: str, context: _Context) -> str:
    # SimpleMetaFactory.Interpret reads kind and apiVersion before anything else.
    value = obj.get(name)
    if value is None:
        return ""
    if type(value) is not str:
        raise context.unrecognized(
            "couldn't get version/kind; json parse error: json: cannot unmarshal "
            f"{_json_kind(value)} into Go struct field .{name} of type string"
        )
    return value
