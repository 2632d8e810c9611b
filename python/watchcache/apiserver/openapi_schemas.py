"""The served kinds' schemas as OpenAPI: v3 components and the v2 definitions derived from them.

Design note
-----------
What it produces. For a set of served resources, a :class:`Catalog`: every schema the
resources reach, by the name Kubernetes publishes it under (``io.k8s.api.core.v1.Pod``,
``io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta``), in OpenAPI v3 form (references as
``allOf: [{$ref}]``, as Kubernetes writes them), with ``x-kubernetes-group-version-kind`` on
the served kinds, their lists and the meta kinds the operations use. :func:`to_v2` derives
the Swagger 2.0 form of any v3 schema, so the two documents cannot disagree.

Where the content comes from. Built-in kinds: the schema of ``wire/k8s_schema.json``
(``wire.schema``): a field's JSON name, list or map shape, scalar type (``int32``/``int64``
formats, ``[]byte`` as ``format: byte``), and the hand-written JSON forms of Time, Quantity,
IntOrString and friends. ``required`` follows the rule Kubernetes' generator applies to Go
structs: a field is required unless it is ``omitempty`` (or ``omitzero``) or marked
``+optional`` — the schema does not carry ``+optional``, so the few fields marked so
without ``omitempty`` are listed here; for the served kinds this gives exactly what
Kubernetes publishes (``containers`` of PodSpec, ``name`` of Container, ``items`` of lists).
The strategic-merge facts are the server's own: ``registry.patch.MERGE_KEYS`` says which
lists get ``x-kubernetes-patch-strategy``/``-patch-merge-key`` (kubectl's client-side apply
computes its patches from them, so they must say what our patch code does), with the
strategy Kubernetes declares for that field (``merge,retainKeys`` for a pod's volumes). The
other markers are Kubernetes' own, as the schema's generator recorded them from the Go
sources: ``x-kubernetes-list-type``/``-list-map-keys`` and ``x-kubernetes-map-type`` on
fields (``+listType``, ``+listMapKey``, ``+mapType``, ``+structType``) and the map type of
struct types (``+structType=atomic`` on LocalObjectReference); server-side apply merges by
the same markers (``registry.apply_types``). A CRD's
own ``openAPIV3Schema`` (``ResourceSpec.openapi_schema``, when present) replaces the built-in
schema, with ``apiVersion``, ``kind`` and ``metadata`` (ObjectMeta) filled in as Kubernetes
does. We have no descriptions and do not copy Kubernetes' texts, so there are none.

Costs. The v3 schema of a built-in message and the names it references are computed once
per process and shared (read-only) by every catalog; a catalog for the four core kinds
walks about 150 messages (building all their documents takes about 20 ms). Callers must
not mutate what a catalog returns. Called by ``apiserver.openapi_paths`` and
``apiserver.openapi``.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from watchcache.registry.patch import MERGE_KEYS
from watchcache.registry.resources import ResourceSpec
from watchcache.wire import schema as wire_schema
from watchcache.wire.schema import (
    BOOL,
    BYTES,
    DOUBLE,
    INT32,
    INT64,
    LIST,
    MAP,
    STRING,
    Field,
    Message,
)

__all__ = [
    "META",
    "V2_REF",
    "V3_REF",
    "Catalog",
    "KindNames",
    "component_name",
    "crd_component_name",
    "group_version_kind",
    "openapi_schema_of",
    "to_v2",
]

JSON: TypeAlias = Any
Schema: TypeAlias = dict[str, Any]

V3_REF: Final = "#/components/schemas/"
V2_REF: Final = "#/definitions/"

_META_PACKAGE: Final = "k8s.io.apimachinery.pkg.apis.meta.v1."


@dataclass(frozen=True, slots=True)
class _Meta:
    """The meta messages operations refer to, by schema message name."""

    object_meta: str = _META_PACKAGE + "ObjectMeta"
    list_meta: str = _META_PACKAGE + "ListMeta"
    status: str = _META_PACKAGE + "Status"
    delete_options: str = _META_PACKAGE + "DeleteOptions"
    patch: str = _META_PACKAGE + "Patch"


META: Final = _Meta()

#: The JSON forms of messages with hand-written (un)marshalling, by ``Message.special``.
#: Quantity and IntOrString are alternatives in v3 (as Kubernetes publishes them), which
#: :func:`to_v2` turns into ``type: string`` (what Kubernetes' v2 says, and what kubectl
#: 1.20's validation accepts numbers for).
_SPECIAL: Final[Mapping[str, Schema]] = {
    "time": {"type": "string", "format": "date-time"},
    "microtime": {"type": "string", "format": "date-time"},
    "quantity": {"oneOf": [{"type": "string"}, {"type": "number"}]},
    "intorstring": {
        "format": "int-or-string",
        "oneOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    },
    "rawextension": {"type": "object"},
    "fieldsv1": {"type": "object"},
    "duration": {"type": "string"},
    "groupversion": {"type": "string"},
    "verbs": {"type": "array", "items": {"type": "string"}},
    # apiextensions' JSON and JSONSchemaProps wrappers: no type (their OpenAPISchemaType is
    # nil, so Kubernetes publishes them without one), as any JSON value may be one.
    "json": {},
    "orbool": {},
    "orarray": {},
    "orstringarray": {},
}

_SCALARS: Final[Mapping[int, Schema]] = {
    STRING: {"type": "string"},
    BOOL: {"type": "boolean"},
    INT32: {"type": "integer", "format": "int32"},
    INT64: {"type": "integer", "format": "int64"},
    DOUBLE: {"type": "number", "format": "double"},
    BYTES: {"type": "string", "format": "byte"},
}

#: Fields marked ``+optional`` in Kubernetes without ``omitempty`` (the schema cannot tell),
#: as (message, JSON name).
_OPTIONAL: Final = frozenset(
    {
        ("k8s.io.api.core.v1.AzureFilePersistentVolumeSource", "secretNamespace"),
        ("k8s.io.api.core.v1.ContainerImage", "names"),
        ("k8s.io.api.core.v1.Event", "reportingComponent"),
        ("k8s.io.api.core.v1.Event", "reportingInstance"),
        ("k8s.io.api.core.v1.GRPCAction", "service"),
        ("k8s.io.api.core.v1.ProjectedVolumeSource", "sources"),
        ("k8s.io.api.core.v1.TypedLocalObjectReference", "apiGroup"),
        ("k8s.io.api.core.v1.TypedObjectReference", "apiGroup"),
    }
)


def component_name(message_name: str) -> str:
    """Kubernetes' OpenAPI name of a schema message: the Go package path with its domain
    reversed (``k8s.io.api.core.v1.Pod`` → ``io.k8s.api.core.v1.Pod``). protobuf packages
    cannot hold the ``-`` of ``k8s.io/apiextensions-apiserver``; the Go path has it."""
    if message_name.startswith("k8s.io.apiextensions_apiserver."):
        return (
            "io.k8s.apiextensions-apiserver."
            + message_name[len("k8s.io.apiextensions_apiserver.") :]
        )
    if message_name.startswith("k8s.io."):
        return "io.k8s." + message_name[len("k8s.io.") :]
    return message_name


def crd_component_name(group: str, version: str, kind: str) -> str:
    """The name Kubernetes publishes a CRD's schema under: the group reversed, then version
    and kind (``stable.example.com``/v1 CronTab → ``com.example.stable.v1.CronTab``)."""
    reversed_group = ".".join(reversed(group.split("."))) if group else "core"
    return f"{reversed_group}.{version}.{kind}"


def group_version_kind(group: str, version: str, kind: str) -> dict[str, str]:
    """One ``x-kubernetes-group-version-kind`` entry, keys in Kubernetes' order."""
    return {"group": group, "kind": kind, "version": version}


def openapi_schema_of(spec: ResourceSpec) -> Mapping[str, JSON] | None:
    """A CRD's own ``openAPIV3Schema``, when the spec carries one (a field to come)."""
    value = getattr(spec, "openapi_schema", None)
    return value if isinstance(value, Mapping) else None


def _ref(name: str) -> Schema:
    return {"allOf": [{"$ref": V3_REF + name}]}


# -- built-in messages ----------------------------------------------------------------------


def _declared(message: Message) -> list[tuple[Field, Message]]:
    """The message's JSON fields with ``,inline`` structs promoted (the shallower
    declaration wins, as ``wire.schema`` resolves names), each with its declaring message."""
    own: list[tuple[Field, Message]] = []
    promoted: list[tuple[Field, Message]] = []
    for fld in message.fields:
        if fld.hidden:
            continue
        if fld.inline:
            assert fld.message is not None
            promoted.extend(_declared(fld.message))
        else:
            own.append((fld, message))
    names = {fld.json_name for fld, _ in own}
    out = list(own)
    for fld, owner in promoted:
        if fld.json_name not in names:
            names.add(fld.json_name)
            out.append((fld, owner))
    return out


@functools.cache
def _merge_extensions() -> Mapping[tuple[str, str], Mapping[str, JSON]]:
    """``x-kubernetes-patch-*`` per (message, JSON name), from the server's MERGE_KEYS
    paths walked through each kind's schema (``spec.containers[].ports`` → Container.ports).
    MERGE_KEYS names kinds without their group: the core kind wins a shared name. A path
    the schema does not have is skipped (tests check every served one is published)."""
    schema = wire_schema.load()
    roots: dict[str, Message] = {}
    for (api_version, kind), candidate in schema.kinds.items():
        if api_version == "v1" or kind not in roots:
            roots[kind] = candidate
    out: dict[tuple[str, str], dict[str, JSON]] = {}
    for kind, paths in MERGE_KEYS.items():
        root = roots.get(kind)
        for path, key in paths.items():
            message: Message | None = root
            steps = path.split(".")
            for i, step in enumerate(steps):
                name = step.removesuffix("[]")
                fld = message.by_json.get(name) if message is not None else None
                if fld is None or message is None:
                    break
                if i == len(steps) - 1:
                    entry = out.setdefault((_owner(message, name), name), {})
                    # Kubernetes' own strategy when it merges (keeps retainKeys).
                    declared = fld.patch_strategy
                    strategy = declared if declared.startswith("merge") else "merge"
                    entry["x-kubernetes-patch-strategy"] = strategy
                    if key is not None:
                        entry["x-kubernetes-patch-merge-key"] = key
                message = fld.message
    return out


def _owner(message: Message, json_name: str) -> str:
    for fld, owner in _declared(message):
        if fld.json_name == json_name:
            return owner.name
    raise KeyError(json_name)


def _element(fld: Field) -> Schema:
    if fld.message is not None:
        return _ref(component_name(fld.message.name))
    return dict(_SCALARS[fld.kind])


def _marker_extensions(fld: Field) -> dict[str, JSON]:
    """The field's ``x-kubernetes-list-type``/``-list-map-keys``/``-map-type``, as
    Kubernetes publishes them from its markers."""
    out: dict[str, JSON] = {}
    if fld.list_type:
        out["x-kubernetes-list-type"] = fld.list_type
    if fld.list_map_keys:
        out["x-kubernetes-list-map-keys"] = list(fld.list_map_keys)
    if fld.openapi_map_type:
        out["x-kubernetes-map-type"] = fld.openapi_map_type
    return out


def _field_schema(fld: Field, owner: str) -> Schema:
    element = _element(fld)
    if fld.shape == LIST:
        out: Schema = {"type": "array", "items": element}
    elif fld.shape == MAP:
        out = {"type": "object", "additionalProperties": element}
    else:
        out = element
    key = (owner, fld.json_name)
    extensions = {**_merge_extensions().get(key, {}), **_marker_extensions(fld)}
    out.update(sorted(extensions.items()))
    return out


def _is_required(fld: Field, owner: str) -> bool:
    return not (fld.omitempty or fld.omitzero or (owner, fld.json_name) in _OPTIONAL)


@functools.cache
def _message_component(message_name: str) -> Schema:
    """The v3 schema of one built-in message (shared; never mutate it)."""
    message = wire_schema.load().message(message_name)
    if message.special:
        return copy.deepcopy(_SPECIAL[message.special])
    fields = _declared(message)
    out: Schema = {"type": "object"}
    required = [fld.json_name for fld, owner in fields if _is_required(fld, owner.name)]
    if required:
        out["required"] = required
    if fields:
        out["properties"] = {
            fld.json_name: _field_schema(fld, owner.name)
            for fld, owner in sorted(fields, key=lambda pair: pair[0].json_name)
        }
    if message.openapi_map_type:
        out["x-kubernetes-map-type"] = message.openapi_map_type
    return out


@functools.cache
def _message_refs(message_name: str) -> frozenset[str]:
    return frozenset(_refs(_message_component(message_name)))


def _refs(value: JSON) -> set[str]:
    """The component names a v3 schema refers to."""
    out: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and ref.startswith(V3_REF):
                out.add(ref[len(V3_REF) :])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


@functools.cache
def _builtin_names() -> Mapping[str, str]:
    """Component name → schema message name, for every built-in message."""
    return {component_name(name): name for name in wire_schema.load().messages}


# -- CRD schemas ----------------------------------------------------------------------------


def _crd_kind(spec: ResourceSpec, own: Mapping[str, JSON]) -> Schema:
    """A CRD's ``openAPIV3Schema`` as Kubernetes publishes it: an object whose
    ``apiVersion``, ``kind`` and ``metadata`` are the standard ones."""
    # A JSON round trip copies it and refuses what is not JSON.
    out: Schema = json.loads(json.dumps(own))
    out["type"] = "object"
    properties = out.setdefault("properties", {})
    properties["apiVersion"] = {"type": "string"}
    properties["kind"] = {"type": "string"}
    properties["metadata"] = _ref(component_name(META.object_meta))
    out["properties"] = dict(sorted(properties.items()))
    return out


def _unknown_kind() -> Schema:
    """A kind without a schema: any content, with the standard object fields."""
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": _ref(component_name(META.object_meta)),
        },
        "x-kubernetes-preserve-unknown-fields": True,
    }


def _list_of(item_name: str) -> Schema:
    return {
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "items": {"type": "array", "items": _ref(item_name)},
            "kind": {"type": "string"},
            "metadata": _ref(component_name(META.list_meta)),
        },
    }


# -- the catalog ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KindNames:
    """The component names of one resource's kind and list kind."""

    kind: str
    list: str


class Catalog:
    """The schemas a set of resources reaches. ``names[spec.served_key]`` gives a resource's
    kind and list components; :meth:`component` any schema by name, GVK extensions
    included; :meth:`closure` the names reachable from some roots, sorted."""

    def __init__(self, resources: Sequence[ResourceSpec]) -> None:
        schema = wire_schema.load()
        self.names: dict[str, KindNames] = {}
        self._own: dict[str, Schema] = {}  # CRD and schema-less kinds and their lists
        gvks: dict[str, list[dict[str, str]]] = {}
        group_versions: dict[tuple[str, str], None] = {}
        for spec in resources:
            group_versions[(spec.group, spec.version)] = None
            own = openapi_schema_of(spec)
            message = schema.kind(spec.api_version, spec.kind) if own is None else None
            list_message = schema.kind(spec.api_version, spec.list_kind) if message else None
            if message is not None and list_message is not None:
                names = KindNames(component_name(message.name), component_name(list_message.name))
            else:
                kind = crd_component_name(spec.group, spec.version, spec.kind)
                names = KindNames(kind, kind + "List")
                self._own[names.kind] = _crd_kind(spec, own) if own is not None else _unknown_kind()
                self._own[names.list] = _list_of(names.kind)
            self.names[spec.served_key] = names
            for name, kind in ((names.kind, spec.kind), (names.list, spec.list_kind)):
                entry = group_version_kind(spec.group, spec.version, kind)
                if entry not in gvks.setdefault(name, []):
                    gvks[name].append(entry)
        # Status and DeleteOptions are kinds of every served group-version, as in Kubernetes.
        for message_name in (META.status, META.delete_options):
            kind = message_name.rsplit(".", 1)[1]
            gvks[component_name(message_name)] = [
                group_version_kind(group, version, kind) for group, version in group_versions
            ]
        self._gvks = gvks

    def component(self, name: str, group_version: tuple[str, str] | None = None) -> Schema:
        """The v3 schema named ``name`` (KeyError if no resource reaches it). With
        ``group_version``, its ``x-kubernetes-group-version-kind`` names only that one: a
        group-version's v3 document then does not change when another group comes or goes
        (Status and DeleteOptions are kinds of every group-version)."""
        base = self._own.get(name)
        if base is None:
            base = _message_component(_builtin_names()[name])
        gvks = self._gvks.get(name)
        if gvks and group_version is not None:
            group, version = group_version
            gvks = [e for e in gvks if e["group"] == group and e["version"] == version]
        if gvks:
            return {**base, "x-kubernetes-group-version-kind": gvks}
        return base

    def _references(self, name: str) -> Iterable[str]:
        if name in self._own:
            return _refs(self._own[name])
        return _message_refs(_builtin_names()[name])

    def closure(self, roots: Iterable[str]) -> list[str]:
        """``roots`` and every component they reach, sorted by name."""
        seen: set[str] = set()
        stack = list(roots)
        while stack:
            name = stack.pop()
            if name not in seen:
                seen.add(name)
                stack.extend(self._references(name))
        return sorted(seen)


# -- v3 → v2 --------------------------------------------------------------------------------

#: Members a Swagger 2.0 schema may have (gnostic's openapi_v2.Schema); others are v3-only.
_V2_MEMBERS: Final = frozenset(
    {
        "$ref", "format", "title", "description", "default", "multipleOf", "maximum",
        "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength",
        "pattern", "maxItems", "minItems", "uniqueItems", "maxProperties", "minProperties",
        "required", "enum", "additionalProperties", "type", "items", "allOf", "properties",
        "discriminator", "readOnly", "externalDocs", "example",
    }
)  # fmt: skip
_PRIMITIVES: Final = ("string", "number", "integer", "boolean")


def to_v2(schema: JSON) -> JSON:
    """The Swagger 2.0 form of a v3 schema, as kube-openapi and kubectl 1.20 read it:

    * ``allOf: [{$ref}]`` becomes the ``$ref`` itself (``#/definitions/``), siblings other
      than ``description`` and extensions dropped (kubectl refuses a ``$ref`` with a type);
    * ``oneOf``/``anyOf`` of primitive types becomes ``type: string`` when a string is
      allowed (Quantity, IntOrString), else the widest number type; other alternatives,
      ``not`` and ``nullable`` are dropped, a ``nullable`` schema losing its ``type`` so
      that null passes;
    * ``x-kubernetes-preserve-unknown-fields`` drops ``properties`` and ``required``, so
      kubectl 1.20 does not call unknown fields errors;
    * v3-only members are dropped; extensions (``x-``) are kept.
    """
    if not isinstance(schema, dict):
        return schema
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
        target = str(all_of[0]["$ref"])
        out: Schema = {"$ref": V2_REF + target.removeprefix(V3_REF)}
        for key, value in schema.items():
            if key == "description" or key.startswith("x-"):
                out[key] = value
        return out
    out = {}
    for key, value in schema.items():
        if key.startswith("x-"):
            out[key] = value
        elif key == "$ref":
            out[key] = V2_REF + str(value).removeprefix(V3_REF)
        elif key == "properties":
            out[key] = {name: to_v2(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = [to_v2(s) for s in value] if isinstance(value, list) else to_v2(value)
        elif key == "allOf":
            out[key] = [to_v2(s) for s in value]
        elif key in _V2_MEMBERS:
            out[key] = value
    alternatives = schema.get("oneOf") or schema.get("anyOf")
    if "type" not in out and isinstance(alternatives, list):
        kinds = {alt.get("type") for alt in alternatives if isinstance(alt, dict)}
        if kinds and kinds <= set(_PRIMITIVES):
            if "string" in kinds:
                out["type"] = "string"
            elif kinds <= {"number", "integer"}:
                out["type"] = "number" if "number" in kinds else "integer"
    if schema.get("nullable") is True:
        out.pop("type", None)
    if schema.get("x-kubernetes-preserve-unknown-fields") is True:
        out.pop("properties", None)
        out.pop("required", None)
    return out
