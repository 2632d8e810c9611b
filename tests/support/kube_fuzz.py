"""Near-valid Kubernetes API inputs for the fuzz harness (tests/reliability/
test_fuzz_inputs.py): CustomResourceDefinitions with random schema trees, custom objects
drawn against a schema, patches of an object, Accept headers for discovery and OpenAPI,
and a tree mutation that edits any of them.

Why near-valid: the write path checks a body in stages (media type, decoding, pruning,
defaulting, validation, the strategy, storage, then a controller for a CRD), and random
noise dies in the first. So every strategy here starts from something valid — a CRD whose
printer columns, selectable fields and scale paths point at fields its schema has, an
object whose values respect its schema's enum, bounds and formats — and
:func:`mutated_tree` then makes a few edits (replace, delete, insert a keyword, copy a
subtree, change a value's JSON type), as ``mutated`` does to text in the harness. Each
generator also leaves the valid path by itself now and then (a wrong type, a value one
past a bound, a keyword the server refuses), so the 4xx answers are not all from the
mutation.

Every strategy is a hypothesis strategy, so runs stay derandomized (or seeded) and
shrink. Nothing here talks to a server.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import yaml
from hypothesis import strategies as st

from watchcache.wire import protobuf as pb
from watchcache.wire import schema

# ---------------------------------------------------------------------------------------------
# JSON values and the tree mutation

#: Leaves a mutation puts in: every JSON type, the edges of Go's integer types, strings that
#: mean something to a parser somewhere.
LEAVES: Final = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, -1, 1, 2**31 - 1, 2**31, -(2**31) - 1, 2**63 - 1, 2**63, -(2**64)]),
    st.integers(-1000, 1000),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from([0.5, -0.0, 1e308, 1e-320, 3.0]),
    st.sampled_from(["", "a", "v1", "Fast", "true", "1", "-1", "1.5", ".spec.x", "x" * 70]),
    st.sampled_from(["\x00", "\ud800", "\u212a", "é", "a/b", "a.b", "$ref", "#/x", "*"]),
    st.text(max_size=8),
)
JSON_VALUES: Final = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)

#: Every member a JSONSchemaProps has, and what the CRD spec has: the names an insertion
#: or a rename draws, so a mutation reaches a check rather than the unknown-field pruning.
SCHEMA_KEYWORDS: Final = (
    "type", "format", "title", "description", "default", "maximum", "exclusiveMaximum",
    "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems",
    "minItems", "uniqueItems", "multipleOf", "enum", "maxProperties", "minProperties",
    "required", "items", "allOf", "oneOf", "anyOf", "not", "properties",
    "additionalProperties", "patternProperties", "dependencies", "additionalItems",
    "definitions", "externalDocs", "example", "nullable", "id", "$schema", "$ref",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys", "x-kubernetes-list-type",
    "x-kubernetes-map-type", "x-kubernetes-validations",
)  # fmt: skip
CRD_KEYS: Final = (
    "group", "names", "plural", "singular", "kind", "listKind", "shortNames", "categories",
    "scope", "versions", "name", "served", "storage", "deprecated", "deprecationWarning",
    "schema", "openAPIV3Schema", "subresources", "status", "scale", "specReplicasPath",
    "statusReplicasPath", "labelSelectorPath", "additionalPrinterColumns", "jsonPath",
    "priority", "selectableFields", "conversion", "strategy", "webhook", "clientConfig",
    "conversionReviewVersions", "preserveUnknownFields", "rule", "message", "fieldPath",
    "reason", "messageExpression", "optionalOldSelf", "acceptedNames", "storedVersions",
    "conditions", "finalizers", "generateName", "resourceVersion", "uid", "annotations",
    "labels", "deletionTimestamp", "ownerReferences", "apiVersion", "metadata", "spec",
)  # fmt: skip
OBJECT_KEYS: Final = (
    "apiVersion", "kind", "metadata", "spec", "status", "name", "namespace", "labels",
    "annotations", "finalizers", "generateName", "resourceVersion", "replicas", "selector",
    "mode", "items", "x", "a", "b",
)  # fmt: skip


def _slots(tree: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) of ``tree`` below its root, depth first."""
    found: list[tuple[Any, Any]] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                found.append((node, key))
                stack.append(value)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                found.append((node, index))
                stack.append(value)
    return found


def _containers(tree: Any) -> list[dict[str, Any]]:
    found = [tree] if isinstance(tree, dict) else []
    found.extend(c[k] for c, k in _slots(tree) if isinstance(c[k], dict))
    return found


def _retyped(value: Any) -> Any:
    """The same information in another JSON type (what a client with the wrong type in
    its struct would send)."""
    if isinstance(value, bool):
        return "true" if value else 0
    if isinstance(value, int):
        return str(value) if value % 2 else float(value) + 0.5
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**70 else str(value)
    if isinstance(value, str):
        return [value] if value else None
    if isinstance(value, list):
        return {str(i): v for i, v in enumerate(value)}
    if isinstance(value, dict):
        return list(value.values())
    return {}


#: Edits of :func:`mutated_tree`, nudges the most frequent.
EDITS: Final = (
    "nudge",
    "nudge",
    "nudge",
    "replace",
    "delete",
    "insert",
    "rename",
    "copy",
    "retype",
)


def _nudged(draw: st.DrawFn, value: Any, keys: Sequence[str]) -> Any:
    """Another value of the same JSON type (what passes decoding and meets validation)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return draw(st.sampled_from([0, -1, 1, value + 1, value - 1, 2**31, 2**53 + 1]))
    if isinstance(value, float):
        return draw(st.sampled_from([0.0, -0.5, value * 2, 1e-9, 1e300]))
    if isinstance(value, str):
        return draw(st.sampled_from([*keys, "", value.upper(), value + "-x", "ü", "a" * 300]))
    if isinstance(value, list):
        if draw(st.booleans()) and value:
            return value[1:]
        return [*value, *value[:1]]
    if isinstance(value, dict) and value:
        dropped = draw(st.sampled_from(sorted(value)))
        return {k: v for k, v in value.items() if k != dropped}
    return value


@st.composite
def mutated_tree(draw: st.DrawFn, base: Any, keys: Sequence[str] = OBJECT_KEYS) -> Any:
    """A deep copy of ``base`` (a JSON value) with 0-3 edits, none or one most often:
    nudge a value within its JSON type (most often: it passes decoding), replace it by a
    leaf of any type, delete a member or an item, insert a member named from ``keys``,
    rename a member, copy a subtree over another, or change a value's JSON type."""
    tree = copy.deepcopy(base)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 1, 1, 2, 3]))):
        slots = _slots(tree)
        edit = draw(st.sampled_from(EDITS))
        if edit == "insert" or not slots:
            containers = _containers(tree)
            if not containers:
                continue
            target = draw(st.sampled_from(containers))
            name = draw(st.sampled_from(keys) | st.text(max_size=6))
            target[name] = draw(LEAVES | JSON_VALUES | st.just({}) | st.just([]))
            continue
        container, key = draw(st.sampled_from(slots))
        if edit == "nudge":
            container[key] = _nudged(draw, container[key], keys)
        elif edit == "replace":
            container[key] = draw(LEAVES)
        elif edit == "delete":
            del container[key]
        elif edit == "rename" and isinstance(container, dict):
            new = draw(st.sampled_from(keys))
            container[new] = container.pop(key)
        elif edit == "copy":
            source, at = draw(st.sampled_from(slots))
            container[key] = copy.deepcopy(source[at])
        else:
            container[key] = _retyped(container[key])
    return tree


# ---------------------------------------------------------------------------------------------
# Bodies: JSON, YAML, protobuf

PROTOBUF: Final = "application/vnd.kubernetes.protobuf"
SCHEMA: Final = schema.load()


def to_json(obj: Any) -> bytes:
    """Compact JSON, everything past ASCII escaped, so a lone surrogate a mutation put in
    reaches the server as the ``\\ud800`` escape a client can send."""
    return json.dumps(obj, separators=(",", ":")).encode()


def to_yaml(obj: Any) -> bytes:
    # PyYAML writes a lone surrogate as an escape in a double-quoted scalar, which is YAML.
    return yaml.safe_dump(obj, allow_unicode=False, sort_keys=False).encode()


def to_protobuf(obj: Any, api_version: str, kind: str) -> bytes | None:
    """What a Go client sends for ``obj`` as ``kind``, or None when the kind has no
    protobuf or the (mutated) object has a member of the wrong type for it."""
    message = SCHEMA.kind(api_version, kind)
    if message is None or not isinstance(obj, dict):
        return None
    members = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    try:
        raw = pb.encode_object(members, message)
    except (ValueError, TypeError, OverflowError):
        return None
    return pb.encode_envelope(raw, api_version=api_version, kind=kind)


@st.composite
def encoded(
    draw: st.DrawFn, obj: Any, api_version: str, kind: str, *, protobuf: bool = True
) -> tuple[bytes, str]:
    """``obj`` as a body and its Content-Type: JSON, YAML, or protobuf when ``protobuf``
    and the kind has one (else JSON). A custom kind has no protobuf: without
    ``protobuf``, now and then a protobuf Content-Type carrying JSON (a 415)."""
    form = draw(st.sampled_from(["json", "json", "yaml", "protobuf" if protobuf else "json"]))
    if form == "json" and not protobuf and draw(st.integers(0, 9)) == 0:
        form = "protobuf"
    if form == "yaml":
        return to_yaml(obj), "application/yaml"
    if form == "protobuf":
        body = to_protobuf(obj, api_version, kind) if protobuf else None
        if body is not None:
            return body, PROTOBUF
        if not protobuf:
            return to_json(obj), PROTOBUF
    return to_json(obj), "application/json"


# ---------------------------------------------------------------------------------------------
# Schema trees

PROPERTY_NAMES: Final = st.sampled_from(
    ["a", "b", "c", "name", "size", "items", "kind", "replicas", "camelCase", "x-y", "n1",
     "type", "with.dot", "Ünï", "spec"]
)  # fmt: skip
#: Go RE2 patterns Kubernetes takes.
GOOD_PATTERNS: Final = (
    "^[a-z]+$", "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "^x", "\\d{1,3}", "^$", ".*",
    "[[:alpha:]]", "(?i)^abc$", "^a{2,5}$", "\\Q.*\\E", "(?P<n>a)",
)  # fmt: skip
#: Patterns Go refuses (lookahead, backreferences, bad ranges, repeats over 1000) or this
#: server does not support (a Unicode class, \C).
BAD_PATTERNS: Final = ("(?=a)", "\\1", "[z-a]", "a{1001}", "(", "^\\p{Greek}+$", "\\C")
GOOD_FORMATS: Final = (
    "date-time", "datetime", "date", "email", "ipv4", "ipv6", "cidr", "uuid", "duration",
    "byte", "hostname", "uri", "mac", "password", "k8s-short-name", "isbn", "hexcolor",
)  # fmt: skip
#: Formats Kubernetes refuses on a string, or accepts and then strips as unsupported.
ODD_FORMATS: Final = ("int32", "float", "color", "")
#: CEL rules: kept and checked statically only (never evaluated), so a bad one is a 422.
GOOD_CEL_RULES: Final = (
    {"rule": "self.size() >= 0"}, {"rule": "self == oldSelf", "message": "immutable"},
    {"rule": "has(self.a)", "messageExpression": "'a is required'"}, {"rule": "true"},
    {"rule": "self == self", "reason": "FieldValueForbidden"},
    {"rule": "oldSelf == self", "optionalOldSelf": True},
)  # fmt: skip
BAD_CEL_RULES: Final = (
    {"rule": "self.x >", "message": "broken"},
    {"rule": "true", "reason": "FieldValueForbidden", "fieldPath": ".a"},
    {"rule": "true", "reason": "Nope"}, {"rule": ""},
)  # fmt: skip
FORMAT_SAMPLES: Final[Mapping[str, tuple[str, ...]]] = {
    "date-time": ("2024-01-02T03:04:05Z", "2024-01-02T03:04:05.123+02:00", "2024-13-01T00:00:00Z",
                  "yesterday"),
    "datetime": ("2024-01-02T03:04:05Z", "2024-01-02 03:04:05"),
    "date": ("2024-02-29", "2023-02-29", "2024-1-1"),
    "email": ("a@example.com", "not-an-email", "a@b"),
    "ipv4": ("10.0.0.1", "010.0.0.1", "999.1.1.1"),
    "ipv6": ("::1", "fe80::1%eth0", "1::2::3"),
    "cidr": ("10.0.0.0/8", "10.0.0.0/33", "::/0"),
    "uuid": ("123e4567-e89b-12d3-a456-426614174000", "123e4567e89b12d3a456426614174000", "x"),
    "duration": ("1h2m3s", "1.5h", "-3ms", "1x", ""),
    "byte": ("AAE=", "AAE", "!!", ""),
    "hostname": ("example.com", "-bad-.com", "a" * 64),
    "uri": ("http://example.com/a?b", "/relative", "::"),
    "mac": ("00:11:22:33:44:55", "00-11-22-33-44-55", "0011.2233.4455", "zz"),
    "hexcolor": ("#fff", "#ggg"),
    "isbn": ("0306406152", "9780306406157", "123"),
}  # fmt: skip


def _pick(draw: st.DrawFn, good: Sequence[Any], bad: Sequence[Any], tame: bool) -> Any:
    """One of ``good``, or (unless ``tame``, one time in six) one of ``bad``."""
    if not tame and draw(st.integers(0, 5)) == 0:
        return copy.deepcopy(draw(st.sampled_from(bad)))
    return copy.deepcopy(draw(st.sampled_from(good)))


def _bounded(draw: st.DrawFn, node: dict[str, Any], low: str, high: str, values: Any) -> None:
    if draw(st.booleans()):
        node[low] = draw(values)
    if draw(st.booleans()):
        node[high] = node.get(low, 0) + draw(st.sampled_from([0, 1, 5, 100]))


@st.composite
def schema_nodes(
    draw: st.DrawFn, depth: int = 0, max_depth: int = 3, tame: bool = False
) -> dict[str, Any]:
    """A structural schema node with a random type and the keywords that type can carry
    (enum, pattern, formats, bounds, list and map types, int-or-string, preserved and
    embedded objects, nullable, CEL rules, allOf/anyOf/oneOf/not, defaults). Unless
    ``tame``, now and then a keyword value Kubernetes refuses (a bad pattern, format, CEL
    rule or map type, ``uniqueItems``); a drawn default may be invalid either way."""
    kinds = ["string", "string", "integer", "number", "boolean", "int-or-string"]
    if depth < max_depth:
        kinds += ["object", "object", "object", "map", "array", "array", "preserve", "embedded"]
    kind = draw(st.sampled_from(kinds))
    node: dict[str, Any]
    if kind == "string":
        node = {"type": "string"}
        extra = draw(st.sampled_from(["", "", "enum", "pattern", "format", "length"]))
        if extra == "enum":
            node["enum"] = draw(st.lists(st.sampled_from(["A", "b", "Fast", "", "x y"]),
                                         min_size=1, max_size=4, unique=True))  # fmt: skip
        elif extra == "pattern":
            node["pattern"] = _pick(draw, GOOD_PATTERNS, BAD_PATTERNS, tame)
        elif extra == "format":
            node["format"] = _pick(draw, GOOD_FORMATS, ODD_FORMATS, tame)
        elif extra == "length":
            _bounded(draw, node, "minLength", "maxLength", st.integers(0, 5))
    elif kind in ("integer", "number"):
        node = {"type": kind}
        if draw(st.booleans()):
            formats = ["int32", "int64"] if kind == "integer" else ["float", "double"]
            node["format"] = _pick(draw, formats, ["int32", "x"], tame)
        numbers = st.integers(-10, 10) if kind == "integer" else st.sampled_from([-1.5, 0, 0.25])
        _bounded(draw, node, "minimum", "maximum", numbers)
        if "minimum" in node and draw(st.booleans()):
            node["exclusiveMinimum"] = True
        if "maximum" in node and draw(st.booleans()):
            node["exclusiveMaximum"] = True
        if draw(st.integers(0, 4)) == 0:
            node["multipleOf"] = _pick(draw, [2, 3, 0.5, 0.1], [0, -1], tame)
        if draw(st.integers(0, 5)) == 0:
            node["enum"] = draw(st.lists(numbers, min_size=1, max_size=3))
    elif kind == "boolean":
        node = {"type": "boolean"}
    elif kind == "int-or-string":
        node = {"x-kubernetes-int-or-string": True}
        if draw(st.booleans()):
            node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        if draw(st.integers(0, 3)) == 0:
            node["pattern"] = _pick(draw, GOOD_PATTERNS, BAD_PATTERNS, tame)
    elif kind in ("object", "embedded"):
        node = {"type": "object"}
        names = draw(st.lists(PROPERTY_NAMES, max_size=4, unique=True))
        if names:
            node["properties"] = {n: draw(schema_nodes(depth + 1, max_depth, tame)) for n in names}
            if draw(st.booleans()):
                node["required"] = draw(
                    st.lists(st.sampled_from([*names, "missing"]), max_size=2, unique=True)
                )
        if kind == "embedded":
            node["x-kubernetes-embedded-resource"] = True
            if not names or draw(st.booleans()):
                node["x-kubernetes-preserve-unknown-fields"] = True
        elif draw(st.integers(0, 4)) == 0:
            node["x-kubernetes-preserve-unknown-fields"] = True
        if draw(st.integers(0, 4)) == 0:
            node["x-kubernetes-map-type"] = _pick(draw, ["granular", "atomic"], ["x"], tame)
        if len(names) >= 2 and draw(st.integers(0, 4)) == 0:
            # One of two members, as a union is written: value validations only.
            node[draw(st.sampled_from(["oneOf", "anyOf"]))] = [
                {"required": [names[0]]},
                {"required": [names[1]]},
            ]
        if draw(st.integers(0, 5)) == 0:
            _bounded(draw, node, "minProperties", "maxProperties", st.integers(0, 2))
    elif kind == "map":
        node = {"type": "object"}
        if draw(st.integers(0, 5)) == 0:
            node["additionalProperties"] = draw(st.booleans())
        else:
            node["additionalProperties"] = draw(schema_nodes(depth + 1, max_depth, tame))
        if draw(st.booleans()):
            node["maxProperties"] = draw(st.integers(0, 4))
    elif kind == "array":
        items = draw(schema_nodes(depth + 1, max_depth, tame))
        node = {"type": "array", "items": items}
        list_type = draw(st.sampled_from(["", "", "atomic", "set", "map"]))
        if list_type:
            node["x-kubernetes-list-type"] = list_type
        if list_type == "set" and items.get("type") == "object" and draw(st.integers(0, 4)):
            items["x-kubernetes-map-type"] = "atomic"  # set items must be atomic
        if list_type == "map" and items.get("type") != "object" and draw(st.integers(0, 4)):
            items = node["items"] = {
                "type": "object",
                "properties": {"name": {"type": "string"}, "value": items},
            }
        if list_type == "map":
            scalars = [
                n for n, p in (items.get("properties") or {}).items()
                if p.get("type") in ("string", "integer", "boolean")
            ]  # fmt: skip
            keys = draw(st.lists(st.sampled_from(scalars or ["name"]), min_size=1, max_size=2,
                                 unique=True))  # fmt: skip
            node["x-kubernetes-list-map-keys"] = keys
            if items.get("type") == "object" and draw(st.integers(0, 4)):
                items["required"] = sorted({*items.get("required", []), *keys})
        _bounded(draw, node, "minItems", "maxItems", st.integers(0, 3))
        if not tame and draw(st.integers(0, 9)) == 0:
            node["uniqueItems"] = True  # refused by Kubernetes: set lists say it instead
    else:  # preserve: an untyped subtree kept as it is sent
        node = {"x-kubernetes-preserve-unknown-fields": True}
        if draw(st.booleans()):
            node["type"] = "object"
    if draw(st.integers(0, 6)) == 0:
        node["nullable"] = True
    if draw(st.integers(0, 6)) == 0:
        node["description"] = draw(st.sampled_from(["A field.", "", "ünïcode"]))
    if draw(st.integers(0, 10)) == 0:
        node["x-kubernetes-validations"] = [_pick(draw, GOOD_CEL_RULES, BAD_CEL_RULES, tame)]
    if draw(st.integers(0, 6)) == 0 and kind in ("string", "integer", "number"):
        node["not"] = {"enum": [draw(LEAVES)]}
    if draw(st.integers(0, 30 if tame else 6)) == 0:
        # A default drawn for the node itself: often valid, often not (a 422).
        node["default"] = draw(values_for(node, depth=4))
    return node


@st.composite
def root_schemas(draw: st.DrawFn, max_depth: int = 3, tame: bool = False) -> dict[str, Any]:
    """An ``openAPIV3Schema``: an object with ``spec`` and ``status`` objects (as CRDs
    have them), sometimes restricted ``metadata``, other members, or preserve-unknown."""
    spec = draw(schema_nodes(1, max_depth, tame))
    if spec.get("type") != "object" and draw(st.integers(0, 4)):
        spec = {"type": "object", "properties": {"value": spec}}
    root: dict[str, Any] = {"type": "object", "properties": {"spec": spec}}
    if draw(st.integers(0, 3)):
        root["properties"]["status"] = {
            "type": "object",
            "properties": {
                "phase": {"type": "string"},
                "observed": {"type": "integer"},
                **(draw(schema_nodes(2, max_depth, tame)).get("properties") or {}),
            },
        }
    if draw(st.integers(0, 5)) == 0:
        root["properties"]["metadata"] = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": draw(st.sampled_from([3, 20, 63]))}
            },
        }
    if draw(st.integers(0, 5)) == 0:
        root["properties"][draw(PROPERTY_NAMES)] = draw(schema_nodes(1, max_depth, tame))
    if draw(st.integers(0, 5)) == 0:
        root["x-kubernetes-preserve-unknown-fields"] = True
    if draw(st.integers(0, 5)) == 0:
        root["required"] = ["spec"]
    return root


def scalar_paths(node: Any, prefix: str = "") -> list[tuple[str, str]]:
    """``(.a.b, type)`` of the string, integer, number and boolean fields reachable
    through object properties: what columns, selectable fields and scale paths point at."""
    found: list[tuple[str, str]] = []
    if not isinstance(node, dict):
        return found
    properties = node.get("properties")
    if not isinstance(properties, dict):
        return found
    for name, child in properties.items():
        if not isinstance(child, dict) or "." in name or not name:
            continue
        path = f"{prefix}.{name}"
        kind = child.get("type")
        if kind in ("string", "integer", "number", "boolean"):
            found.append((path, kind))
        elif kind == "object":
            found.extend(scalar_paths(child, path))
    return found


# ---------------------------------------------------------------------------------------------
# Values for a schema

_STRINGS: Final = st.sampled_from(["", "a", "abc", "Fast", "A", "x y", "a" * 64, "ü", "07"])


def _member_types(node: Mapping[str, Any]) -> str:
    kind = node.get("type")
    if node.get("x-kubernetes-int-or-string") is True:
        return "int-or-string"
    return kind if isinstance(kind, str) else ""


@st.composite
def values_for(draw: st.DrawFn, node: Any, depth: int = 0) -> Any:
    """A value for schema ``node`` near its edges: enum members, bounds and one past
    them, format samples valid and not, required members mostly present, map and list
    keys mostly unique; now and then a value of another JSON type. Works on any JSON
    (a mutated schema): what it cannot read gets random JSON."""
    if not isinstance(node, Mapping) or depth > 8:
        return draw(LEAVES)
    if draw(st.integers(0, 19)) == 0:
        return draw(LEAVES)  # off the schema
    if node.get("nullable") is True and draw(st.integers(0, 5)) == 0:
        return None
    enum = node.get("enum")
    if isinstance(enum, list) and enum and draw(st.integers(0, 3)):
        return copy.deepcopy(draw(st.sampled_from(enum)))
    kind = _member_types(node)
    if kind == "int-or-string":
        return draw(st.integers(-5, 100) | _STRINGS | st.sampled_from(["50%", "80"]))
    if kind == "string":
        fmt = node.get("format")
        samples = FORMAT_SAMPLES.get(fmt) if isinstance(fmt, str) else None
        if samples and draw(st.integers(0, 3)):
            return draw(st.sampled_from(samples))
        return _bounded_text(draw, node)
    if kind == "boolean":
        return draw(st.booleans())
    if kind in ("integer", "number"):
        return _bounded_number(draw, node, kind)
    if kind == "array":
        return _array(draw, node, depth)
    if kind == "object" or node.get("x-kubernetes-preserve-unknown-fields") is True:
        return _object(draw, node, depth)
    return draw(JSON_VALUES)


def _bounded_text(draw: st.DrawFn, node: Mapping[str, Any]) -> str:
    text = draw(_STRINGS)
    for bound, delta in (("minLength", -1), ("maxLength", 1)):
        limit = node.get(bound)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 0 <= limit < 100:
            continue
        if draw(st.integers(0, 3)) == 0:
            text = "b" * max(0, limit + draw(st.sampled_from([0, delta])))
    return text


def _bounded_number(draw: st.DrawFn, node: Mapping[str, Any], kind: str) -> int | float:
    edges: list[int | float] = [0, 1, -1, 2**31 - 1, 2**31, 2**63 - 1]
    for bound in ("minimum", "maximum", "multipleOf"):
        value = node.get(bound)
        if isinstance(value, int | float) and not isinstance(value, bool):
            edges += [value, value - 1, value + 1]
    value = draw(st.sampled_from(edges) | st.integers(-100, 100))
    if kind == "number" and draw(st.integers(0, 2)) == 0:
        return float(value) + draw(st.sampled_from([0.0, 0.5, 0.125, 1e-9]))
    return value


def _array(draw: st.DrawFn, node: Mapping[str, Any], depth: int) -> list[Any]:
    items = node.get("items")
    size = draw(st.integers(0, 3))
    values = [draw(values_for(items, depth + 1)) for _ in range(size)]
    keys = node.get("x-kubernetes-list-map-keys")
    if isinstance(keys, list) and draw(st.integers(0, 3)):
        # Map lists: distinct keys mostly (a duplicate is a 422).
        for i, value in enumerate(values):
            if isinstance(value, dict):
                for k in keys:
                    if isinstance(k, str) and isinstance(value.get(k, ""), str):
                        value[k] = f"k{i}"
    if node.get("x-kubernetes-list-type") == "set" and draw(st.integers(0, 3)):
        unique: list[Any] = []
        for value in values:
            if value not in unique:
                unique.append(value)
        values = unique
    return values


def _object(draw: st.DrawFn, node: Mapping[str, Any], depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    properties = node.get("properties")
    required = node.get("required")
    required = required if isinstance(required, list) else []
    if isinstance(properties, Mapping):
        for name, child in properties.items():
            wanted = name in required and draw(st.integers(0, 9))
            if wanted or draw(st.integers(0, 2)):
                out[name] = draw(values_for(child, depth + 1))
    additional = node.get("additionalProperties")
    if isinstance(additional, Mapping | bool) and additional is not False:
        for name in draw(st.lists(st.sampled_from(["k1", "k2", "x", "ü", ""]), max_size=3)):
            out[name] = draw(values_for(additional if isinstance(additional, Mapping) else {},
                                        depth + 1))  # fmt: skip
    if node.get("x-kubernetes-embedded-resource") is True:
        embedded: dict[str, Any] = draw(st.sampled_from(
            [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}},
             {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels":
                                                                          {"a": "b"}}},
             {"apiVersion": "v1", "kind": "Pod"}, {"kind": "Pod"}, {"apiVersion": "v1"},
             {"apiVersion": "v1", "kind": "X", "metadata": {"name": "Not_Valid"}},
             {"apiVersion": "v1", "kind": "X", "metadata": {"unknown": 1, "name": "x"}}]
        ))  # fmt: skip
        out.update(copy.deepcopy(embedded))
    if node.get("x-kubernetes-preserve-unknown-fields") is True and draw(st.booleans()):
        out.update(draw(st.dictionaries(st.sampled_from(["free", "extra", "z"]), JSON_VALUES,
                                        max_size=2)))  # fmt: skip
    if draw(st.integers(0, 9)) == 0:
        out[draw(st.sampled_from(["unknown", "bogus"]))] = draw(LEAVES)  # pruned, or Strict
    return out


# ---------------------------------------------------------------------------------------------
# CustomResourceDefinitions

#: Groups of the generated CRDs: none is a built-in group, so an accepted CRD never
#: shadows a built-in resource; ``fuzz.k8s.io`` needs the API-approval annotation.
GROUPS: Final = ("gen.fuzz.example.com", "fuzz.example.com", "x.example.com") * 2 + ("fuzz.k8s.io",)
KINDS: Final = ("Gadget", "Widget", "Sprocket", "FuzzThing", "Zed")
VERSIONS: Final = ("v1", "v1beta1", "v2", "v1alpha1", "v3beta2")
COLUMN_TYPES: Final = ("string", "integer", "number", "boolean", "date")


@st.composite
def crds(draw: st.DrawFn, groups: Sequence[str] = GROUPS, tame: bool = False) -> dict[str, Any]:
    """A CustomResourceDefinition: random schema trees (one per version, or one shared),
    subresources whose scale paths exist, printer columns and selectable fields pointing
    at fields of the schema, deprecations, conversion ``None`` or (refused here)
    ``Webhook``. About half are valid; with ``tame`` most are (no deliberately refused
    keyword, annotation or conversion: what is left are defaults the schema refuses and
    combinations the generator does not steer clear of)."""
    group = draw(st.sampled_from(groups))
    kind = draw(st.sampled_from(KINDS))
    plural = kind.lower() + "s"
    names: dict[str, Any] = {"plural": plural, "singular": kind.lower(), "kind": kind}
    if draw(st.integers(0, 4)) == 0:
        # A kind another CRD of the group may have taken (the fixture's FuzzThing): the
        # naming controller refuses it (NamesAccepted False), the CRD is never served.
        names["kind"] = kind = draw(st.sampled_from(KINDS))
    if draw(st.booleans()):
        names["listKind"] = kind + "List"
    if draw(st.booleans()):
        # "ft" is the fixture's short name: a conflict in its group.
        names["shortNames"] = draw(st.lists(st.sampled_from(["fz", "ft", kind.lower()[:2]]),
                                            max_size=2, unique=True))  # fmt: skip
    if draw(st.integers(0, 3)) == 0:
        names["categories"] = ["all", "fuzz"]
    count = draw(st.integers(1, 3))
    version_names = draw(st.lists(st.sampled_from(VERSIONS), min_size=count, max_size=count,
                                  unique=True))  # fmt: skip
    storage = draw(st.integers(0, count - 1))
    shared = draw(root_schemas(tame=tame)) if draw(st.booleans()) else None
    versions = []
    for i, name in enumerate(version_names):
        root = shared if shared is not None else draw(root_schemas(tame=tame))
        version: dict[str, Any] = {
            "name": name,
            "served": i == storage or draw(st.integers(0, 3)) > 0,
            "storage": i == storage,
            "schema": {"openAPIV3Schema": root},
        }
        _subresources(draw, version, root)
        paths = scalar_paths(root)
        if draw(st.booleans()) and paths:
            version["additionalPrinterColumns"] = [
                _column(draw, path, kind, tame)
                for path, kind in draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3))
            ]
        selectable = [p for p, k in paths if k != "number" and not p.startswith(".metadata")]
        if draw(st.booleans()) and selectable:
            version["selectableFields"] = [
                {"jsonPath": p}
                for p in draw(st.lists(st.sampled_from(selectable), max_size=3, unique=True))
            ]
        if i != storage and draw(st.integers(0, 3)) == 0:
            version["deprecated"] = True
            if draw(st.booleans()):
                version["deprecationWarning"] = _pick(draw, ["old"], ["", "x" * 300], tame)
        versions.append(version)
    if shared is not None:
        # Shared: every version the same subresources and columns too, sometimes.
        alike = tame or draw(st.integers(0, 4)) > 0
        for version in versions[1:]:
            if alike:
                for member in ("subresources", "additionalPrinterColumns", "selectableFields"):
                    version.pop(member, None)
                    if member in versions[0]:
                        version[member] = copy.deepcopy(versions[0][member])
    crd: dict[str, Any] = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": names,
            "scope": draw(st.sampled_from(["Namespaced", "Namespaced", "Cluster"])),
            "versions": versions,
        },
    }
    if group.endswith(".k8s.io") and (tame or draw(st.integers(0, 3))):
        approval = _pick(
            draw,
            ["https://github.com/kubernetes/enhancements/pull/1", "unapproved, testing"],
            ["unapproved", "yes"],
            tame,
        )
        crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": approval}
    conversion = _pick(draw, ["", "None"], ["Webhook"], tame)
    if conversion == "Webhook":
        crd["spec"]["conversion"] = {
            "strategy": "Webhook",
            "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": "https://conv.example.com/convert"},
            },
        }
    elif conversion:
        crd["spec"]["conversion"] = {"strategy": conversion}
    if draw(st.integers(0, 9)) == 0:
        crd["spec"]["preserveUnknownFields"] = _pick(draw, [False], [True], tame)
    return crd


def _subresources(draw: st.DrawFn, version: dict[str, Any], root: dict[str, Any]) -> None:
    subresources: dict[str, Any] = {}
    if draw(st.booleans()):
        subresources["status"] = {}
    if draw(st.integers(0, 2)) == 0:
        # The paths exist in the schema (spec and status are objects in a root schema).
        spec = root["properties"]["spec"]
        if spec.get("type") == "object" and "additionalProperties" not in spec:
            spec.setdefault("properties", {})["replicas"] = {"type": "integer"}
        status = root["properties"].setdefault("status", {"type": "object"})
        status.setdefault("properties", {}).update(
            {"replicas": {"type": "integer"}, "selector": {"type": "string"}}
        )
        scale = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
        if draw(st.booleans()):
            scale["labelSelectorPath"] = ".status.selector"
        subresources["scale"] = scale
    if subresources:
        version["subresources"] = subresources


def _column(draw: st.DrawFn, path: str, kind: str, tame: bool) -> dict[str, Any]:
    column: dict[str, Any] = {
        "name": draw(st.sampled_from(["Value", "A", "Ready", "Age", "x"])) + path[-2:],
        "type": kind if kind != "number" or draw(st.booleans()) else "date",
        "jsonPath": path,
    }
    if draw(st.integers(0, 3)) == 0:
        column["priority"] = _pick(draw, [0, 1, 2], [-1, 2**31], tame)
    if draw(st.integers(0, 3)) == 0:
        column["format"] = _pick(draw, ["int32", "date-time", "password", "byte"], ["x"], tame)
    if draw(st.integers(0, 3)) == 0:
        column["description"] = "a column"
    return column


def storage_schema(crd: Mapping[str, Any]) -> Any:
    """The storage version's ``openAPIV3Schema`` of a (possibly mutated) CRD, or None."""
    spec = crd.get("spec")
    versions = spec.get("versions") if isinstance(spec, Mapping) else None
    for version in versions if isinstance(versions, list) else []:
        if isinstance(version, Mapping) and version.get("storage") is True:
            found = version.get("schema")
            return found.get("openAPIV3Schema") if isinstance(found, Mapping) else None
    return None


# ---------------------------------------------------------------------------------------------
# Custom objects and patches

OBJECT_NAMES: Final = ("o-1", "o-2", "o-3")


@st.composite
def custom_objects(
    draw: st.DrawFn, root: Any, api_version: str, kind: str, names: Sequence[str] = OBJECT_NAMES
) -> dict[str, Any]:
    """An object of ``kind`` for schema ``root``: values near the schema's edges, and
    metadata with a name (or a generateName), labels and annotations now and then."""
    body = draw(values_for(root))
    obj: dict[str, Any] = body if isinstance(body, dict) else {"spec": body}
    metadata: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        metadata["name"] = draw(st.sampled_from(names))
    else:
        metadata["generateName"] = draw(st.sampled_from(["g-", "G_", ""]))
    if draw(st.integers(0, 3)) == 0:
        metadata["labels"] = draw(st.dictionaries(st.sampled_from(["app", "tier", "a/b", "-x"]),
                                                  st.sampled_from(["web", "", "x" * 64]),
                                                  max_size=2))  # fmt: skip
    if draw(st.integers(0, 5)) == 0:
        metadata["annotations"] = {"note": draw(st.text(max_size=5))}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **{
        k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}}  # fmt: skip


def _pointers(tree: Any, prefix: str = "") -> list[str]:
    """JSON pointers of every node of ``tree``."""
    found = [prefix] if prefix else []
    if isinstance(tree, dict):
        for key, value in tree.items():
            escaped = key.replace("~", "~0").replace("/", "~1")
            found.extend(_pointers(value, f"{prefix}/{escaped}"))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            found.extend(_pointers(value, f"{prefix}/{index}"))
    return found


#: Patch types, merge and JSON patches the most often: custom kinds refuse strategic merge
#: patches, and server-side apply is not served (415s both).
PATCH_TYPES: Final = (
    "application/merge-patch+json",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)


def apply_configuration(obj: Any) -> Any:
    """What a server-side apply client sends for ``obj``: the object without the fields the
    server sets (a configuration that mostly passes, so the merge itself is fuzzed)."""
    if not isinstance(obj, dict):
        return obj
    config = {k: copy.deepcopy(v) for k, v in obj.items() if k != "status"}
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        config["metadata"] = {
            k: copy.deepcopy(v)
            for k, v in metadata.items()
            if k in ("name", "namespace", "labels", "annotations", "finalizers")
        }
    return config


@st.composite
def patches(draw: st.DrawFn, obj: Any, patch_type: str, keys: Sequence[str] = OBJECT_KEYS) -> bytes:
    """A patch of ``obj`` of ``patch_type``: a merge (or strategic) patch made of a
    mutated part of the object, or a JSON patch whose paths point into it (and past it)."""
    if patch_type == "application/json-patch+json":
        pointers = [*_pointers(obj), "/spec/-", "/metadata/labels/a", "/x~2", "/", "/spec/0"]
        operations = []
        for _ in range(draw(st.integers(0, 3))):
            op: dict[str, Any] = {
                "op": draw(
                    st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "x"])
                ),
                "path": draw(st.sampled_from(pointers)),
            }
            if op["op"] in ("add", "replace", "test"):
                op["value"] = draw(LEAVES | JSON_VALUES)
            if op["op"] in ("move", "copy"):
                op["from"] = draw(st.sampled_from(pointers))
            operations.append(op)
        return to_json(draw(mutated_tree(operations, ("op", "path", "value", "from"))))
    if patch_type == "application/apply-patch+yaml" and draw(st.integers(0, 3)) > 0:
        return to_yaml(draw(mutated_tree(apply_configuration(obj), keys)))
    part: Any = {}
    if isinstance(obj, dict):
        for member in draw(st.lists(st.sampled_from(sorted(obj) or ["spec"]), max_size=2)):
            part[member] = copy.deepcopy(obj.get(member))
    if patch_type == "application/strategic-merge-patch+json" and draw(st.booleans()):
        part["$patch"] = draw(st.sampled_from(["replace", "delete", "merge", "x"]))
    patch = draw(mutated_tree(part, keys))
    if patch_type == "application/apply-patch+yaml":
        return to_yaml(patch)
    return to_json(patch)


# ---------------------------------------------------------------------------------------------
# Accept headers for discovery and OpenAPI

AGGREGATED_V2: Final = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_V2BETA1: Final = (
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
)
#: What kubectl 1.30+ sends to /api and /apis.
KUBECTL_DISCOVERY: Final = f"{AGGREGATED_V2},{AGGREGATED_V2BETA1},application/json"
OPENAPI_V2_PROTOBUF: Final = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
OPENAPI_V2_PROTOBUF_DOT: Final = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
MEDIA_TYPES: Final = st.sampled_from(
    ["application/json", "application/json", "*/*", "application/*", "application/yaml",
     "application/vnd.kubernetes.protobuf", "text/html", "text/*", OPENAPI_V2_PROTOBUF,
     OPENAPI_V2_PROTOBUF_DOT, "application/com.github.proto-openapi.spec.v3@v1.0+protobuf",
     "APPLICATION/JSON", "application/json+x", "*/json", ""]
)  # fmt: skip
MEDIA_PARAMETERS: Final = st.sampled_from(
    ["g=apidiscovery.k8s.io", "v=v2", "v=v2beta1", "v=v3", "as=APIGroupDiscoveryList",
     "as=Table", "g=meta.k8s.io", "q=0.5", "q=0", "q=1.0", "q=x", "q=1e3", "q=-1", "sv=v1",
     "stream=watch", "stream=x", "profile=x", "charset=utf-8", 'v="v2"', "v=", "=v2", "g"]
)  # fmt: skip
ACCEPT_PIECES: Final = st.sampled_from(
    [";", ",", "=", "*", "/", " ", '"', "\t", "q=", "v=v2", ";;", ",,", "\xff", "\\"]
)


@st.composite
def accept_clauses(draw: st.DrawFn) -> str:
    media = draw(MEDIA_TYPES)
    parameters = draw(st.lists(MEDIA_PARAMETERS, max_size=4))
    separator = draw(st.sampled_from([";", "; ", " ; "]))
    return separator.join([media, *parameters])


#: Accept headers for /api, /apis and /openapi/*: what clients send, and clauses built
#: from media types and parameters (the aggregated-discovery ones included).
ACCEPT_HEADERS: Final = st.one_of(
    st.sampled_from(
        [
            KUBECTL_DISCOVERY,
            AGGREGATED_V2,
            AGGREGATED_V2BETA1,
            "application/json",
            "",
            OPENAPI_V2_PROTOBUF,
            f"{OPENAPI_V2_PROTOBUF}, application/json",
            "*/*",
        ]
    ),
    st.lists(accept_clauses(), min_size=1, max_size=4).map(",".join),
)


# ---------------------------------------------------------------------------------------------
# The CRDs the harness serves while it runs

#: A namespaced kind whose schema has a keyword of every kind a custom object is checked
#: against (enum, pattern, formats, bounds, required, nested arrays and maps, list and map
#: types, int-or-string, preserve-unknown-fields, defaults, embedded resources, a union),
#: status and scale subresources, printer columns of every type, selectable fields, and a
#: second served version (deprecated) over the same objects.
FUZZ_THINGS_YAML: Final = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: fuzzthings.fuzz.example.com
spec:
  group: fuzz.example.com
  scope: Namespaced
  names: {plural: fuzzthings, singular: fuzzthing, kind: FuzzThing, shortNames: [ft]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
    additionalPrinterColumns:
    - {name: Mode, type: string, jsonPath: .spec.mode}
    - {name: Replicas, type: integer, format: int32, jsonPath: .spec.replicas}
    - {name: Ratio, type: number, jsonPath: .spec.ratio, priority: 1}
    - {name: Enabled, type: boolean, jsonPath: .spec.enabled}
    - {name: When, type: date, jsonPath: .spec.when}
    - {name: Port, type: string, jsonPath: .spec.port}
    selectableFields:
    - {jsonPath: .spec.mode}
    - {jsonPath: .spec.replicas}
    - {jsonPath: .spec.enabled}
    - {jsonPath: .spec.name}
    schema:
      openAPIV3Schema: &schema
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            required: [mode]
            x-kubernetes-validations:
            - {rule: "self.replicas <= 1000", message: too many}
            properties:
              mode: {type: string, enum: [Fast, Slow, "Off"], default: Fast}
              name: {type: string, pattern: '^[a-z][a-z0-9-]{0,30}$', minLength: 1, maxLength: 31}
              replicas: {type: integer, format: int32, minimum: 0, maximum: 1000, default: 1}
              ratio: {type: number, minimum: 0, maximum: 1, exclusiveMaximum: true,
                      multipleOf: 0.125}
              enabled: {type: boolean, default: true}
              port:
                x-kubernetes-int-or-string: true
                anyOf: [{type: integer}, {type: string}]
              when: {type: string, format: date-time, nullable: true}
              email: {type: string, format: email}
              address: {type: string, format: ipv4}
              network: {type: string, format: cidr}
              id: {type: string, format: uuid}
              timeout: {type: string, format: duration, default: 30s}
              payload: {type: string, format: byte}
              tags:
                type: array
                x-kubernetes-list-type: set
                maxItems: 8
                items: {type: string, maxLength: 10}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name, protocol]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    protocol: {type: string, enum: [TCP, UDP], default: TCP}
                    port: {type: integer, minimum: 1, maximum: 65535}
              matrix:
                type: array
                items: {type: array, maxItems: 3, items: {type: integer, format: int64}}
              labels:
                type: object
                maxProperties: 5
                additionalProperties: {type: string, maxLength: 63}
              nested:
                type: object
                additionalProperties:
                  type: object
                  properties:
                    list:
                      type: array
                      items: {type: object, additionalProperties: {type: number}}
                    flag: {type: boolean, default: false}
              config: {type: object, x-kubernetes-preserve-unknown-fields: true}
              free: {x-kubernetes-preserve-unknown-fields: true}
              template:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
              typed:
                type: object
                x-kubernetes-embedded-resource: true
                properties:
                  spec: {type: object, properties: {size: {type: integer, default: 2}}}
              choice:
                type: object
                properties: {a: {type: string}, b: {type: integer}}
                oneOf: [{required: [a]}, {required: [b]}]
              fixed:
                type: object
                x-kubernetes-map-type: atomic
                properties: {k: {type: string}, v: {type: integer, maximum: 9}}
              requests:
                type: object
                x-kubernetes-map-type: granular
                minProperties: 1
                additionalProperties:
                  x-kubernetes-int-or-string: true
                  pattern: '^[0-9]+(m|Mi|Gi)?$'
          status:
            type: object
            properties:
              replicas: {type: integer, minimum: 0}
              selector: {type: string}
              phase: {type: string, enum: [Pending, Running]}
              conditions:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [type]
                items:
                  type: object
                  required: [type, status]
                  properties:
                    type: {type: string}
                    status: {type: string, enum: ["True", "False", Unknown]}
                    lastTransitionTime: {type: string, format: date-time}
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
    additionalPrinterColumns:
    - {name: Mode, type: string, jsonPath: .spec.mode}
    - {name: Replicas, type: integer, format: int32, jsonPath: .spec.replicas}
    - {name: Ratio, type: number, jsonPath: .spec.ratio, priority: 1}
    - {name: Enabled, type: boolean, jsonPath: .spec.enabled}
    - {name: When, type: date, jsonPath: .spec.when}
    - {name: Port, type: string, jsonPath: .spec.port}
    selectableFields:
    - {jsonPath: .spec.mode}
    - {jsonPath: .spec.replicas}
    - {jsonPath: .spec.enabled}
    - {jsonPath: .spec.name}
    schema:
      openAPIV3Schema: *schema
"""
FUZZ_THINGS_CRD: Final[Mapping[str, Any]] = yaml.safe_load(FUZZ_THINGS_YAML)
FUZZ_THINGS_SCHEMA: Final[Mapping[str, Any]] = FUZZ_THINGS_CRD["spec"]["versions"][0]["schema"][
    "openAPIV3Schema"
]
#: Its selectable fields, the built-in ones first.
FUZZ_THINGS_FIELDS: Final = (
    "metadata.name", "metadata.namespace", "spec.mode", "spec.replicas", "spec.enabled",
    "spec.name",
)  # fmt: skip

#: A cluster-scoped kind without subresources: a free-form spec and one selectable field.
CLUSTER_FUZZES_YAML: Final = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusterfuzzes.fuzz.example.com
spec:
  group: fuzz.example.com
  scope: Cluster
  names: {plural: clusterfuzzes, singular: clusterfuzz, kind: ClusterFuzz}
  versions:
  - name: v1
    served: true
    storage: true
    selectableFields: [{jsonPath: .spec.kind}]
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
            properties:
              kind: {type: string, default: plain}
"""
CLUSTER_FUZZES_CRD: Final[Mapping[str, Any]] = yaml.safe_load(CLUSTER_FUZZES_YAML)
CLUSTER_FUZZES_SCHEMA: Final[Mapping[str, Any]] = CLUSTER_FUZZES_CRD["spec"]["versions"][0][
    "schema"
]["openAPIV3Schema"]
