"""Unknown fields removed from custom objects, as kube-apiserver's decoder removes them.

Design note
-----------
A custom object keeps only what its CRD schema specifies: :func:`prune` is the decoding
step of apiextensions' ``unstructuredSchemaCoercer``, in its order, on the object in place:

1. **pruning** (``pruning.PruneWithOptions``): members of objects that the schema does
   not name are deleted, recursively; ``additionalProperties`` keeps every member (and
   prunes inside by its schema); ``x-kubernetes-preserve-unknown-fields`` keeps unknown
   members at that node and below, down to the next node that names properties (which
   prunes again). ``apiVersion``, ``kind`` and ``metadata`` are left alone at the root and
   in every ``x-kubernetes-embedded-resource``, since they are not data of the schema;
2. **nulls** (``PruneNonNullableNullsWithoutDefaults``): an object member that is null,
   whose node is not ``nullable`` and has no ``default``, is deleted (one with a default
   is left for defaulting to fill);
3. **embedded metadata** (``objectmeta.Coerce``): the ``metadata`` of each embedded
   resource loses the members ObjectMeta does not have, and the empty ones Go's round
   trip through ObjectMeta drops (``omitempty``). The root's metadata is the caller's.

It returns the removed paths for ``fieldValidation`` as kube-apiserver reports them:
pruned paths sorted (``spec.foo``, ``spec.list[0].bar``, map keys as path elements), then
the embedded metadata's (``spec.template.metadata.foo``); the caller words each as
``unknown field "<path>"`` (a warning with ``Warn``, a 400 with ``Strict``). Running it
again on its result removes nothing more.

Not modelled: metadata members of the wrong type are left for validation to report (the
Go decoder refuses such a body outright), and nested ObjectMeta structures
(ownerReferences, managedFields) are kept as sent.

Linear in the object; no allocation beyond the path strings it reports. Pure functions of
their arguments (which they change); safe from any thread on distinct objects. Callers:
the custom-resource write path, and ``registry.structural`` (checking that defaults are
pruned).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Final

from watchcache.registry.crd_embedded import object_meta_error
from watchcache.wire import schema as wire_schema

if TYPE_CHECKING:
    from watchcache.registry.structural import StructuralSchema

__all__ = ["drop_nulls", "prune", "prune_value", "unknown_field_message"]

_META_FIELDS: Final = frozenset({"apiVersion", "kind", "metadata"})
_OBJECT_META: Final = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def unknown_field_message(path: str) -> str:
    """How kube-apiserver words a pruned field in a warning or strict decoding error."""
    return f'unknown field "{path}"'


def prune(obj: dict[str, Any], schema: StructuralSchema) -> list[str]:
    """Prune a custom object in place (see the module note); returns the removed paths."""
    paths = prune_value(obj, schema, is_resource_root=True)
    drop_nulls(obj, schema)
    coerced: list[str] = []
    _coerce_metadata(None, obj, schema, schema.embedded, coerced)
    coerced.sort()
    return paths + coerced


def prune_value(
    value: Any, schema: StructuralSchema | None, *, is_resource_root: bool
) -> list[str]:
    """``PruneWithOptions``: unknown members of ``value`` removed in place; the sorted
    paths removed. ``is_resource_root``: ``value`` is a resource, so its apiVersion, kind
    and metadata stay."""
    removed: list[str] = []
    if is_resource_root:
        _prune_embedded_root(value, schema, removed)
    else:
        _prune(value, schema, "", removed)
    removed.sort()
    return removed


def _join(parent: str, name: str) -> str:
    return f"{parent}.{name}" if parent else name


def _prune_embedded_root(value: Any, s: StructuralSchema | None, removed: list[str]) -> None:
    """The root, pruned as if its schema were marked as an embedded resource."""
    if s is not None and s.preserve_unknown:
        _skip_prune(value, s, "", removed, embedded=True)
    elif isinstance(value, dict):
        _prune_object(value, s, "", removed, embedded=True)
    else:
        _prune(value, s, "", removed)


def _prune(value: Any, s: StructuralSchema | None, path: str, removed: list[str]) -> None:
    if s is not None and s.preserve_unknown:
        _skip_prune(value, s, path, removed, embedded=s.embedded)
    elif type(value) is dict or isinstance(value, dict):
        _prune_object(value, s, path, removed, embedded=s is not None and s.embedded)
    elif type(value) is list or isinstance(value, list):
        items = s.items if s is not None else None
        for i, item in enumerate(value):
            _prune(item, items, f"{path}[{i}]", removed)


def _prune_object(
    value: dict[str, Any],
    s: StructuralSchema | None,
    path: str,
    removed: list[str],
    *,
    embedded: bool,
) -> None:
    if s is None and not embedded:
        for name in list(value):
            removed.append(_join(path, name))
            del value[name]
        return
    # A resource root without a schema is pruned as if its schema were empty.
    properties = s.properties if s is not None else {}
    for name in list(value):
        if embedded and name in _META_FIELDS:
            continue
        prop = properties.get(name)
        if prop is not None:
            _prune(value[name], prop, _join(path, name), removed)
        elif s is not None and s.additional_given:
            _prune(value[name], s.additional, _join(path, name), removed)
        else:
            # Kubernetes records a meta field only below the root (where it is data).
            if name not in _META_FIELDS or path:
                removed.append(_join(path, name))
            del value[name]


def _skip_prune(
    value: Any, s: StructuralSchema | None, path: str, removed: list[str], *, embedded: bool
) -> None:
    """Below x-kubernetes-preserve-unknown-fields: unknown members stay; named ones are
    pruned by their own nodes."""
    if s is None:
        return
    if isinstance(value, dict):
        for name in list(value):
            if embedded and name in _META_FIELDS:
                continue
            prop = s.properties.get(name)
            if prop is not None:
                _prune(value[name], prop, _join(path, name), removed)
            elif s.additional_given:
                _prune(value[name], s.additional, _join(path, name), removed)
    elif isinstance(value, list):
        items = s.items
        for i, item in enumerate(value):
            _skip_prune(
                item, items, f"{path}[{i}]", removed, embedded=items is not None and items.embedded
            )


def drop_nulls(value: Any, schema: StructuralSchema | None) -> None:
    """``PruneNonNullableNullsWithoutDefaults``: null members whose node is neither
    nullable nor defaulted are deleted (array items stay)."""
    if schema is None:
        return  # below an unknown member every node is unknown: nothing to delete
    if isinstance(value, dict):
        for name in list(value):
            member = value[name]
            node = _member_schema(name, schema)
            if member is None and node is not None and not node.nullable and not node.has_default:
                del value[name]
            else:
                drop_nulls(member, node)
    elif isinstance(value, list):
        items = schema.items
        for item in value:
            drop_nulls(item, items)


def _member_schema(name: str, s: StructuralSchema | None) -> StructuralSchema | None:
    if s is None:
        return None
    prop = s.properties.get(name)
    if prop is not None:
        return prop
    return s.additional if s.additional_given else None


# ---------------------------------------------------------------------------------------
# Embedded resources' metadata


@functools.cache
def _object_meta_fields() -> dict[str, tuple[bool, bool]]:
    """ObjectMeta's JSON members: (omitempty, pointer)."""
    message = wire_schema.load().message(_OBJECT_META)
    return {name: (fld.omitempty, fld.pointer) for name, fld in message.by_json.items()}


def _is_empty(value: Any) -> bool:
    return value is None or value in ("", 0, {}, [])


def _coerce_metadata(
    path: str | None, value: Any, s: StructuralSchema | None, embedded: bool, removed: list[str]
) -> None:
    if s is None or not (embedded or s.embedded_below):
        return
    if isinstance(value, dict):
        if embedded and isinstance(value.get("metadata"), dict):
            _round_trip_metadata(path, value["metadata"], removed)
        for name in list(value):
            prop = s.properties.get(name)
            if prop is not None:
                sub_path = f"{path}.{name}" if path else name
                _coerce_metadata(sub_path, value[name], prop, prop.embedded, removed)
            elif s.additional_given and s.additional is not None:
                additional = s.additional
                sub_path = f"{path or ''}[{name}]"
                _coerce_metadata(sub_path, value[name], additional, additional.embedded, removed)
    elif isinstance(value, list) and s.items is not None:
        items = s.items
        for i, item in enumerate(value):
            _coerce_metadata(f"{path or ''}[{i}]", item, items, items.embedded, removed)


def _round_trip_metadata(path: str | None, metadata: dict[str, Any], removed: list[str]) -> None:
    """What decoding into ObjectMeta and encoding again leaves of ``metadata``."""
    if object_meta_error(metadata) is not None:
        return
    fields = _object_meta_fields()
    prefix = f"{path}.metadata" if path else "metadata"
    for name in list(metadata):
        shape = fields.get(name)
        if shape is None:
            removed.append(f"{prefix}.{name}")
            del metadata[name]
            continue
        omitempty, pointer = shape
        member = metadata[name]
        if member is None or (omitempty and not pointer and _is_empty(member)):
            del metadata[name]
