"""The type model server-side apply merges a served kind by: built-in kinds from
Kubernetes' markers, custom resources from their schema.

Design note
-----------
What. For every served resource, :func:`atom_for` gives the root
:class:`~watchcache.structured.schema.Atom` of its objects: which lists are merged element
by element (and by which key fields), which maps and structs are owned entry by entry,
what has no schema. kube-apiserver builds the same thing from its OpenAPI definitions with
kube-openapi's ``schemaconv`` (``ToSchemaFromOpenAPI``); the rules here are that
conversion's, applied to what the server knows directly, so the two agree field by field:

* **Built-in kinds** (:func:`builtin_atom`), from ``wire/k8s_schema.json`` and its
  markers. Every message is one named atom, named as Kubernetes publishes its definition
  (``io.k8s.api.core.v1.Pod``), so recursive types work and ``to_smd_yaml`` exports them.
  A struct is a map of its JSON fields (``,inline`` members promoted), atomic under
  ``+structType=atomic``/``+mapType=atomic``, separable otherwise; a struct without fields
  takes any member (deduced), one with fields no others. A list field is ``+listType``'s
  (``map`` with the ``+listMapKey`` keys, ``set``, ``atomic``), else, without one, its
  ``patchStrategy``: ``merge`` (or ``merge,retainKeys``) with a ``patchMergeKey`` is
  associative by that key, without one a set; ``retainKeys`` alone and no marker at all
  are atomic. A Go map is a separable map of its element, atomic under
  ``+mapType=atomic``; ``+mapType``/``+structType`` on a struct-typed field overrides that
  struct's relationship at the field. Scalars: integers and floats ``numeric``, strings
  and ``[]byte`` ``string``, bools ``boolean``. The types Kubernetes writes by hand: Time
  and MicroTime are untyped scalars (a ``date-time`` string converts so), Duration a
  string, Quantity an untyped scalar (schemaconv hard-codes it), IntOrString any value
  whose maps are deduced (its v3 definition is a ``oneOf`` without a ``type``),
  RawExtension any value owned whole (hard-coded: ``__untyped_atomic_``'s shape), FieldsV1
  a map of deduced values (``type: object``), apiextensions' JSON and JSONSchemaProps'
  ``Or*`` wrappers any value, maps deduced (no ``type``); JSONSchemaProps is an ordinary,
  recursive, named struct; GroupVersion, which no field has, is the string its JSON is.
  Field defaults are what openapi-gen publishes: ``+default`` (recorded by the generator),
  else the zero value it enforces on a non-pointer field (``""``, ``0``, ``false`` for
  scalars without ``omitempty``, ``{}`` for structs); only list-map key fields' defaults
  matter to merging (a port without ``protocol`` is keyed ``TCP``).
* **Custom resources** (:func:`custom_atom`), from the compiled structural schema
  (``registry.structural``) as apiextensions-apiserver builds its models for apply
  (``BuildOpenAPIV3``, then ``schemaconv``): ``type`` object/array/scalar as above, a node
  without ``type`` (``x-kubernetes-int-or-string``, a bare ``x-kubernetes-preserve-
  unknown-fields``) any value; ``x-kubernetes-list-type``/``-list-map-keys``/``-map-type``
  as for built-ins; ``additionalProperties`` the element of a map, ``true`` deduced,
  absent deduced only when the object names no properties or under
  ``x-kubernetes-preserve-unknown-fields`` (which holds for the node and all below it);
  ``nullable`` kept on the reference; each property's ``default`` kept. The root and every
  ``x-kubernetes-embedded-resource`` get ``apiVersion`` and ``kind`` (strings) and
  ``metadata`` (the built-in ObjectMeta), replacing what the schema said, as the builder
  does. A kind without a schema is, as Kubernetes builds it then, an object of deduced
  members (``metadata`` included).

Invariants: atoms are immutable once returned and shared between callers and threads;
every cycle passes through a named atom; a conversion error (an unknown list or map type,
a ``map`` list without keys) raises :class:`ApplyTypeError`, as schemaconv's error fails
kube-apiserver's type converter.

Costs: the built-in atoms are built once per process, on first use (all 350 messages in
about 10 ms, after the wire schema's own loading); a custom resource's atom is built once
per :class:`ResourceSpec` object (linear in its schema) and kept while the spec is among
the last :data:`CUSTOM_CACHE_SIZE` seen. Callers: the server-side apply path (``registry``'s
object store and managed fields), and tests exporting the schemas.

Not modelled: Kubernetes drops the fields of disabled feature gates from its definitions
(here every field of the schema is known); ``x-kubernetes-unions`` (the v3 conversion
ignores them too); a CRD's ``spec.preserveUnknownFields`` (v1 forbids it) is applied to
the custom resource's own nodes but not, as in kube-apiserver, to the built-in metadata
types converted alongside them.
"""

from __future__ import annotations

import threading
from typing import Any, Final

from watchcache.registry.custom_resource import compile_schema
from watchcache.registry.resources import ResourceSpec
from watchcache.registry.spec_memo import SpecMemo
from watchcache.registry.structural import META_FIELDS, StructuralSchema
from watchcache.structured.schema import (
    ASSOCIATIVE,
    ATOMIC,
    DEDUCED,
    SEPARABLE,
    UNTYPED_ATOMIC,
    Atom,
    ListType,
    MapType,
    Relationship,
    StructField,
    with_relationship,
)
from watchcache.wire import schema as wire_schema
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

__all__ = [
    "CUSTOM_CACHE_SIZE",
    "ApplyTypeError",
    "atom_for",
    "builtin_atom",
    "builtin_name",
    "custom_atom",
    "custom_name",
]

#: How many custom resources' atoms are kept (one per ResourceSpec object).
CUSTOM_CACHE_SIZE: Final = 256

_OBJECT_META: Final = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"

# Shared scalar atoms (inline: Kubernetes' definitions write scalars in place).
_STRING: Final = Atom(scalar="string")
_NUMERIC: Final = Atom(scalar="numeric")
_BOOLEAN: Final = Atom(scalar="boolean")
_UNTYPED_SCALAR: Final = Atom(scalar="untyped")

_SCALAR_ATOMS: Final = {
    STRING: _STRING,
    BYTES: _STRING,  # format "byte": a base64 string
    INT32: _NUMERIC,
    INT64: _NUMERIC,
    DOUBLE: _NUMERIC,
    BOOL: _BOOLEAN,
}
_ZERO: Final[dict[int, Any]] = {STRING: "", INT32: 0, INT64: 0, DOUBLE: 0.0, BOOL: False}


class ApplyTypeError(ValueError):
    """A kind's schema cannot be turned into apply's type model (a marker or extension
    with a value Kubernetes' conversion refuses); the message names the place."""


# -- relationships ----------------------------------------------------------------------------


def _list_relationship(
    where: str,
    list_type: str | None,
    keys: tuple[str, ...] | None,
    patch_strategy: str = "",
    patch_merge_key: str = "",
) -> tuple[Relationship, tuple[str, ...]]:
    """schemaconv's ``getListElementRelationship``: the list type wins, then the patch
    strategy; neither is atomic."""
    if list_type is not None and list_type != "":
        if list_type == "atomic":
            return ATOMIC, ()
        if list_type == "set":
            return ASSOCIATIVE, ()
        if list_type == "map":
            if not keys:
                raise ApplyTypeError(f"{where}: list type map without map keys")
            return ASSOCIATIVE, tuple(keys)
        raise ApplyTypeError(f"{where}: unknown list type {list_type!r}")
    if patch_strategy in ("merge", "merge,retainKeys"):
        return ASSOCIATIVE, (patch_merge_key,) if patch_merge_key else ()
    if patch_strategy in ("", "retainKeys"):
        return ATOMIC, ()
    raise ApplyTypeError(f"{where}: unknown patch strategy {patch_strategy!r}")


def _map_relationship(where: str, map_type: str | None) -> Relationship | None:
    """schemaconv's ``getMapElementRelationship``; None when unspecified."""
    if map_type is None or map_type == "":
        return None
    if map_type == "atomic":
        return ATOMIC
    if map_type == "granular":
        return SEPARABLE
    raise ApplyTypeError(f"{where}: unknown map type {map_type!r}")


# -- built-in kinds ---------------------------------------------------------------------------


def builtin_name(message_name: str) -> str:
    """The name Kubernetes publishes a message's definition under (the Go package path
    with its domain reversed): ``k8s.io.api.core.v1.Pod`` → ``io.k8s.api.core.v1.Pod``."""
    if message_name.startswith("k8s.io.apiextensions_apiserver."):
        return "io.k8s.apiextensions-apiserver." + message_name.removeprefix(
            "k8s.io.apiextensions_apiserver."
        )
    if message_name.startswith("k8s.io."):
        return "io.k8s." + message_name.removeprefix("k8s.io.")
    return message_name


def _any_value(name: str, map_relationship: Relationship, map_element: Atom) -> Atom:
    """A named type that is a scalar, a list (atomic, of anything owned whole) and a map."""
    atom = Atom(scalar="untyped", name=name)
    atom.list = ListType(UNTYPED_ATOMIC, ATOMIC)
    atom.map = MapType(element=map_element, relationship=map_relationship)
    return atom


def _special_atom(message: Message) -> Atom | None:
    """The atom of a message whose JSON Kubernetes writes by hand (None: Verbs, which is a
    plain list of strings written in place)."""
    name = builtin_name(message.name)
    special = message.special
    if special in ("time", "microtime", "quantity"):
        return Atom(scalar="untyped", name=name)
    if special in ("duration", "groupversion"):
        return Atom(scalar="string", name=name)
    if special == "rawextension":
        return _any_value(name, ATOMIC, UNTYPED_ATOMIC)
    if special in ("intorstring", "json", "orbool", "orarray", "orstringarray"):
        return _any_value(name, SEPARABLE, DEDUCED)
    if special == "fieldsv1":
        return Atom(map=MapType(element=DEDUCED), name=name)
    if special == "verbs":
        return None
    raise ApplyTypeError(f"{message.name}: no apply type for special form {special!r}")


class _Builtins:
    """Every message's named atom, built in two passes so references may form cycles."""

    def __init__(self, schema: wire_schema.Schema) -> None:
        self.atoms: dict[str, Atom] = {}
        structs: list[Message] = []
        for message in schema.messages.values():
            if message.special:
                atom = _special_atom(message)
                if atom is not None:
                    self.atoms[message.name] = atom
            else:
                self.atoms[message.name] = Atom(name=builtin_name(message.name))
                structs.append(message)
        for message in structs:
            self.atoms[message.name].map = self._struct(message)

    def _struct(self, message: Message) -> MapType:
        where = builtin_name(message.name)
        fields = {
            json_name: StructField(
                json_name, self._field_type(fld, f"{where}.{json_name}"), _default_of(fld)
            )
            for json_name, fld in message.by_json.items()
        }
        # openapi-gen writes no additionalProperties: a struct without properties is a
        # free-form object, one with properties takes no others.
        element = None if fields else DEDUCED
        relationship = _map_relationship(where, message.openapi_map_type) or SEPARABLE
        return MapType(fields, element, relationship)

    def _element(self, fld: Field) -> Atom:
        if fld.kind == MESSAGE:
            atom = self.atoms.get(fld.message_name)
            if atom is None:  # Verbs: only ever a field of its own, never an element
                raise ApplyTypeError(f"{fld.message_name} cannot be a list or map element")
            return atom
        return _SCALAR_ATOMS[fld.kind]

    def _field_type(self, fld: Field, where: str) -> Atom:
        if fld.shape == LIST:
            relationship, keys = _list_relationship(
                where, fld.list_type, fld.list_map_keys, fld.patch_strategy, fld.patch_merge_key
            )
            return Atom(list=ListType(self._element(fld), relationship, keys))
        if fld.shape == MAP:
            map_relationship = _map_relationship(where, fld.openapi_map_type) or SEPARABLE
            return Atom(map=MapType(element=self._element(fld), relationship=map_relationship))
        if fld.kind == MESSAGE and fld.message is not None and fld.message.special == "verbs":
            # A named slice type: openapi-gen writes the slice in place, with the field's
            # own list markers.
            relationship, keys = _list_relationship(
                where, fld.list_type, fld.list_map_keys, fld.patch_strategy, fld.patch_merge_key
            )
            return Atom(list=ListType(_STRING, relationship, keys))
        atom = self._element(fld)
        override = _map_relationship(where, fld.openapi_map_type)
        if override is not None and fld.kind == MESSAGE:
            return with_relationship(atom, override)
        return atom


def _default_of(fld: Field) -> Any:
    """The field's OpenAPI default as openapi-gen writes it: ``+default``, else the zero
    value it enforces (``mustEnforceDefault``)."""
    if fld.default is not None:
        return fld.default
    if fld.pointer or fld.shape != SINGLE or fld.kind == BYTES:
        return None  # pointers, slices ([]byte too) and maps: none
    if fld.kind != MESSAGE:
        return None if fld.omitempty else _ZERO[fld.kind]
    return _struct_zero(fld.message, fld.omitempty)


def _struct_zero(message: Message | None, omitempty: bool) -> Any:
    if message is None or message.special == "verbs":
        return None
    if message.special == "duration":
        # struct{ time.Duration }: one embedded member, treated as that int64.
        return None if omitempty else 0
    if message.special:
        return {}
    if len(message.fields) == 1 and message.fields[0].inline:
        # A struct of one embedded member is treated as that member's type.
        only = message.fields[0]
        if only.pointer:
            return None
        return _struct_zero(only.message, omitempty)
    return {}


_BUILTINS: list[_Builtins] = []
_BUILTINS_LOCK = threading.Lock()


def _builtins() -> _Builtins:
    # Built once under a lock: every caller must see the same atoms (identity matters to
    # with_relationship's cache and to anyone comparing types).
    if not _BUILTINS:
        with _BUILTINS_LOCK:
            if not _BUILTINS:
                _BUILTINS.append(_Builtins(wire_schema.load()))
    return _BUILTINS[0]


def builtin_atom(api_version: str, kind: str) -> Atom | None:
    """The named atom of a built-in kind (``v1``, ``Pod``), or None when the wire schema
    does not have it. Raises ApplyTypeError if the built-in markers cannot be converted."""
    message = wire_schema.load().kind(api_version, kind)
    if message is None:
        return None
    return _builtins().atoms[message.name]


def _object_meta() -> Atom:
    return _builtins().atoms[_OBJECT_META]


# -- custom resources -------------------------------------------------------------------------


def custom_name(group: str, version: str, kind: str) -> str:
    """The name Kubernetes gives a custom resource's definition: the group reversed, then
    version and kind (``stable.example.com``/v1 CronTab → ``com.example.stable.v1.CronTab``)."""
    return ".".join(reversed(group.split("."))) + f".{version}.{kind}"


def _type_meta_fields() -> dict[str, StructField]:
    # TypeMeta's apiVersion and kind: omitempty strings, so no default.
    return {
        "apiVersion": StructField("apiVersion", _STRING),
        "kind": StructField("kind", _STRING),
        "metadata": StructField("metadata", _object_meta()),
    }


class _CustomConverter:
    """One structural schema's nodes to atoms (schemaconv's ``parseSchema`` over the
    schema apiextensions' builder publishes)."""

    def node(self, s: StructuralSchema, where: str, preserve: bool, *, root: bool = False) -> Atom:
        preserve = preserve or s.preserve_unknown
        kind = s.type
        if kind == "":
            # No type: any value (int-or-string, or preserved unknown content).
            return Atom(
                scalar="untyped",
                list=self._list(s, where, preserve),
                map=self._object(s, where, preserve, root=root),
            )
        if kind == "object":
            return Atom(map=self._object(s, where, preserve, root=root))
        if kind == "array":
            return Atom(list=self._list(s, where, preserve))
        if kind in ("integer", "number"):
            return _NUMERIC
        if kind == "boolean":
            return _BOOLEAN
        if kind == "string":
            # Only plain strings and base64 bytes stay strings; any other format (a
            # date-time, an int-or-string) converts to an untyped scalar.
            return _STRING if s.format in ("", "byte") else _UNTYPED_SCALAR
        raise ApplyTypeError(f"{where}: unrecognized type {kind!r}")

    def ref(self, s: StructuralSchema, where: str, preserve: bool) -> Atom:
        atom = self.node(s, where, preserve)
        if s.nullable:
            # A nullable reference is a copy: the shared scalar atoms stay as they are.
            atom = Atom(atom.scalar, atom.list, atom.map, nullable=True)
        return atom

    def _object(self, s: StructuralSchema, where: str, preserve: bool, *, root: bool) -> MapType:
        # The builder sets apiVersion, kind and metadata of the root and of embedded
        # resources (addTypeMetaProperties, addEmbeddedProperties), replacing the schema's.
        standard = root or s.embedded
        fields = {
            name: StructField(
                name,
                self.ref(prop, f"{where}.{name}", preserve),
                prop.default if prop.has_default else None,
            )
            for name, prop in s.property_items
            if not (standard and name in META_FIELDS)
        }
        if standard:
            fields.update(_type_meta_fields())
        element: Atom | None
        if not s.additional_given:
            element = DEDUCED if preserve or not fields else None
        elif s.additional is not None:
            element = self.ref(s.additional, f"{where}[*]", preserve)
        else:
            element = DEDUCED if s.additional_allows else None
        relationship = _map_relationship(where, s.map_type) or SEPARABLE
        return MapType(fields, element, relationship)

    def _list(self, s: StructuralSchema, where: str, preserve: bool) -> ListType:
        relationship, keys = _list_relationship(where, s.list_type, s.list_map_keys)
        if s.items is not None:
            return ListType(self.ref(s.items, f"{where}[*]", preserve), relationship, keys)
        if s.type:
            raise ApplyTypeError(f"{where}: items must be specified on arrays")
        # No items and no type (preserved unknown content): elements of any kind.
        return ListType(UNTYPED_ATOMIC, relationship, keys)


def custom_atom(
    structural: StructuralSchema | None,
    *,
    preserve_unknown_fields: bool = False,
    name: str = "",
) -> Atom:
    """The atom of a custom resource's objects from its compiled schema (see the module
    note), named ``name``. ``structural`` None: a kind without a schema (any members,
    deduced). ``preserve_unknown_fields``: the CRD's ``spec.preserveUnknownFields``.
    Raises ApplyTypeError."""
    if structural is None:
        return Atom(map=MapType(element=DEDUCED), name=name)
    where = name or "<root>"
    root = _CustomConverter().node(structural, where, preserve_unknown_fields, root=True)
    if root.map is None:
        raise ApplyTypeError(f"{where}: the root of a schema must be an object")
    root.name = name  # a fresh atom: objects and untyped nodes are never shared
    return root


# -- served resources -------------------------------------------------------------------------


def atom_for(spec: ResourceSpec) -> Atom:
    """The atom of a served resource's objects: the built-in kind's when the spec has no
    schema of its own and the wire schema knows its kind, else the custom resource's from
    ``spec.openapi_schema`` (none: deduced members). Cached per spec object. Raises
    ApplyTypeError, or InvalidSchemaError for a schema that is not structural."""
    if spec.openapi_schema is None:
        builtin = builtin_atom(spec.api_version, spec.kind)
        if builtin is not None:
            return builtin
    return _CUSTOM_ATOMS(spec)


def _custom_atom_of(spec: ResourceSpec) -> Atom:
    structural = compile_schema(spec) if spec.openapi_schema is not None else None
    return custom_atom(structural, name=custom_name(spec.group, spec.version, spec.kind))


_CUSTOM_ATOMS: Final = SpecMemo(_custom_atom_of, CUSTOM_CACHE_SIZE)
