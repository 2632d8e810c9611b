"""PATCH semantics: JSON merge patch, JSON patch and strategic merge patch over JSON values.

Design note
-----------
The apiserver's PATCH handler calls :func:`apply_patch` with the request's Content-Type, the
current object (parsed JSON) and the raw body; it gets the patched object back, or a
:class:`~watchcache.wire.errors.StatusError` it writes as the response. Everything here is a pure
function of JSON values (``dict``/``list``/``str``/``int``/``float``/``bool``/``None``):
no I/O, no shared state, safe from any thread. **Inputs are never mutated and the result
shares no container with them** (untouched subtrees are copied), so the caller may keep,
cache or mutate either side. Cost: O(size of target + size of patch) time and memory, plus
O(n·m) list scans where a keyed list of n items meets m patch items (lists are short). The
caller decides whether the result differs from the current object (a no-op PATCH must not
bump ``resourceVersion``); nothing here validates the object beyond "is a JSON object".

The three patch types (``PATCH_CONTENT_TYPES``), as Kubernetes serves them:

* ``application/merge-patch+json`` — RFC 7386 (:func:`apply_merge_patch`): objects merge
  recursively, ``null`` deletes a member, anything else (arrays included) replaces.
* ``application/json-patch+json`` — RFC 6902 (:func:`apply_json_patch`): add, remove,
  replace, move, copy, test over RFC 6901 pointers (``~1`` is ``/``, ``~0`` is ``~``, ``-``
  is the end of an array, indexes are ``0`` or digits without a leading zero). Operations
  apply in order to a copy; the first failure fails the whole patch.
* ``application/strategic-merge-patch+json`` — what ``kubectl apply`` (client-side) and the
  Python client send for dict bodies (:func:`apply_strategic_merge_patch`). It is a merge
  patch, except for the lists :data:`MERGE_KEYS` names: those merge element by element
  (matched on the merge key, or as a set for lists of scalars) instead of being replaced,
  and the patch may carry these directives, all of which are consumed (never stored):

  - ``"$patch": "replace"`` in an object: the object replaces the current one;
    ``"$patch": "delete"`` in an object: it becomes ``{}``;
  - ``{"<key>": v, "$patch": "delete"}`` in a keyed list: deletes the element whose merge
    key is ``v``; ``{"$patch": "replace"}`` in a keyed list: the list becomes the patch's
    other elements;
  - ``"$retainKeys": [names]``: members of the current object not named are dropped first
    (the patch's own non-null members must be named);
  - ``"$deleteFromPrimitiveList/<list>": [values]``: removes values from a list of scalars
    that merges as a set (``metadata.finalizers``);
  - ``"$setElementOrder/<list>": [...]``: the order kubectl wants for a merging list (see
    "Order" below); on a list that does not merge it is accepted and dropped.

  Any other member whose name starts with ``$`` is rejected (400): Kubernetes' typed
  decoding would silently drop it, but our objects are stored as JSON, so it would persist.
  None of the four kinds has a legitimate field or map key starting with ``$``.

  New members and elements are applied to "nothing": nested ``null`` members and
  directives are removed, as Kubernetes' typed decoding of the patched map ends up doing.

  Order of a merging list: current elements keep their positions (deleted ones leave),
  merged ones are updated in place, new ones are appended in patch order. With a
  ``$setElementOrder`` directive, the positions held by elements the directive names are
  refilled in the directive's order; elements it does not name (e.g. a sidecar another
  writer added) keep their positions. Kubernetes interleaves the latter by their old
  neighbours instead; both honour the directive for everything kubectl sent.

Errors, as Kubernetes' ``apiserver/pkg/endpoints/handlers/patch.go`` and
``apimachinery/pkg/util/mergepatch`` produce them:

* **415 UnsupportedMediaType** — the Content-Type (compared without parameters, case-
  insensitively) is not one of the three: ``the body of the request was in an unknown
  format - accepted media types include: <the four>`` (the three, and server-side
  apply's ``application/apply-patch+yaml``, served by ``registry.managed_fields``).
* **400 BadRequest** ``error decoding patch: <why>`` — the body is not JSON (NaN, invalid
  UTF-8 and duplicate member names included); a json-patch body is not an array of
  objects; a merge-patch body is null or a scalar; a strategic body is not an object
  (``null`` counts as ``{}``, as in Kubernetes).
* **400 BadRequest** with mergepatch's text — a malformed directive (``invalid patch format
  of retainKeys`` / ``setElementOrder list`` / ``primitive list``), an unknown ``$patch``
  value (``unknown patch type: ...``), an unknown ``$`` member, a keyed-list element
  without its merge key (``map: ... does not contain declared merge key: name``).
  Kubernetes answers the unknown ``$patch`` value and the missing merge key with a bare
  500; a client's mistake is not a server error.
* **413 RequestEntityTooLarge** — more than 10000 json-patch operations (Kubernetes'
  ``maxJSONPatchOperations``), checked before any is applied.
* **422 Invalid** ``the server rejected our request due to an error in our request`` — a
  json-patch operation fails (missing path, failed test, unknown op, bad index, ...),
  patch content outside ``$retainKeys``, non-scalars where scalars merge as a set.
  Kubernetes (``NewGenericServerResponse(422, ...)``) drops the reason from the Status and
  sends ``"details":{}``; :class:`UnprocessablePatchError` keeps the same message and
  puts the reason in ``details.causes`` (field ``patch``), so clients can say what failed.
* **422 Invalid** `` "" is invalid: patch: Invalid value: "<json>": ...`` (cause on field
  ``patch``) — the patched document is not an object; Kubernetes fails the same way when
  the patched JSON does not decode into the kind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from watchcache.wire import gojson
from watchcache.wire.errors import (
    BadRequestError,
    InvalidError,
    RequestEntityTooLargeError,
    StatusCause,
    UnprocessablePatchError,
    UnsupportedMediaTypeError,
)

#: A parsed JSON value: dict, list, str, int, float, bool or None.
JSON: TypeAlias = Any

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"

#: The PATCH media types served, in Kubernetes' order, to the function that applies each.
PATCH_CONTENT_TYPES: Final[Mapping[str, str]] = MappingProxyType(
    {
        JSON_PATCH: "apply_json_patch",
        MERGE_PATCH: "apply_merge_patch",
        STRATEGIC_MERGE_PATCH: "apply_strategic_merge_patch",
    }
)

#: Server-side apply's media type: not a patch of the document but an applied configuration
#: (``registry.managed_fields``); listed with the others wherever patch types are offered.
APPLY_PATCH: Final = "application/apply-patch+yaml"
#: Every PATCH media type served, in Kubernetes' order.
SERVED_PATCH_TYPES: Final = (*PATCH_CONTENT_TYPES, APPLY_PATCH)

#: Kubernetes' ``maxJSONPatchOperations``.
MAX_JSON_PATCH_OPERATIONS: Final = 10_000

# Lists that merge in a strategic merge patch, by kind: path -> merge key. A path names
# fields from the object's root joined with "."; "[]" steps into a list's elements. A merge
# key of None means a list of scalars that merges as a set. Lists not named here (e.g.
# spec.tolerations, spec.containers[].args, status.containerStatuses) are replaced, like
# Kubernetes' lists without `patchStrategy:"merge"`. Source: the `patchStrategy`/
# `patchMergeKey` struct tags of k8s.io/api core/v1 and apimachinery ObjectMeta.
_OBJECT_META_LISTS: Final[dict[str, str | None]] = {
    "metadata.finalizers": None,
    "metadata.ownerReferences": "uid",
}
_CONTAINER_FIELDS: Final = ("containers", "initContainers", "ephemeralContainers")
_CONTAINER_LISTS: Final[dict[str, str]] = {
    "ports": "containerPort",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}
_POD_LISTS: Final[dict[str, str | None]] = {
    **{f"spec.{field}": "name" for field in _CONTAINER_FIELDS},
    **{
        f"spec.{field}[].{name}": key
        for field in _CONTAINER_FIELDS
        for name, key in _CONTAINER_LISTS.items()
    },
    "spec.volumes": "name",
    "spec.imagePullSecrets": "name",
    "spec.hostAliases": "ip",
    "spec.topologySpreadConstraints": "topologyKey",
    "spec.schedulingGates": "name",
    "spec.resourceClaims": "name",
    "status.conditions": "type",
    "status.podIPs": "ip",
    "status.hostIPs": "ip",
}

#: Strategic merge patch's merging lists per kind (see the table's comment above). Any other
#: kind gets the ObjectMeta lists only.
MERGE_KEYS: Final[Mapping[str, Mapping[str, str | None]]] = MappingProxyType(
    {
        "ConfigMap": MappingProxyType(dict(_OBJECT_META_LISTS)),
        "Secret": MappingProxyType(dict(_OBJECT_META_LISTS)),
        "Namespace": MappingProxyType({**_OBJECT_META_LISTS, "status.conditions": "type"}),
        "Pod": MappingProxyType({**_OBJECT_META_LISTS, **_POD_LISTS}),
    }
)
_DEFAULT_MERGE_KEYS: Final[Mapping[str, str | None]] = MappingProxyType(dict(_OBJECT_META_LISTS))

_ARRAY_INDEX: Final = re.compile(r"0|[1-9][0-9]*")
_BAD_ESCAPE: Final = re.compile(r"~(?![01])")
_OPERATIONS: Final = ("add", "remove", "replace", "move", "copy", "test")

_DIRECTIVE: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_SET_ELEMENT_ORDER: Final = "$setElementOrder"
_DELETE_FROM_PRIMITIVE_LIST: Final = "$deleteFromPrimitiveList"
_BAD_ORDER: Final = "invalid patch format of setElementOrder list"
_BAD_PRIMITIVE_LIST: Final = "invalid patch format of primitive list"
_BAD_RETAIN_KEYS: Final = "invalid patch format of retainKeys"


class _OperationError(Exception):
    """One JSON-patch operation failed; becomes an UnprocessablePatchError naming it."""


def apply_patch(content_type: str, target: JSON, body: bytes, kind: str) -> dict[str, Any]:
    """Apply a PATCH request body to ``target`` (the current object) and return the result.

    ``content_type`` is the request's Content-Type (parameters such as ``charset`` are
    ignored); ``kind`` (``"Pod"``, ...) picks the strategic merge patch's merging lists.
    Raises UnsupportedMediaTypeError (415), BadRequestError (400),
    RequestEntityTooLargeError (413), UnprocessablePatchError or InvalidError (422): see
    the module note. Cost: parsing the body plus the patch function's cost.
    """
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type not in PATCH_CONTENT_TYPES:
        raise UnsupportedMediaTypeError.accepting(SERVED_PATCH_TYPES)
    patch = _decode(body)
    try:
        if media_type == JSON_PATCH:
            result = apply_json_patch(target, patch)
        elif media_type == MERGE_PATCH:
            # Kubernetes (evanphx MergePatch) rejects null and scalars; an array replaces
            # the document and then fails as "not an object" below.
            if not isinstance(patch, dict | list):
                raise BadRequestError(
                    f"error decoding patch: a merge patch must be a JSON object, "
                    f"not {_json_type(patch)}"
                )
            result = apply_merge_patch(target, patch)
        else:
            # Kubernetes decodes the body into a map; `null` decodes to an empty one.
            result = apply_strategic_merge_patch(target, {} if patch is None else patch, kind)
    except RecursionError:
        raise BadRequestError("error decoding patch: the document is nested too deeply") from None
    if not isinstance(result, dict):
        raise InvalidError.for_fields(
            "",
            "",
            "",
            [
                StatusCause(
                    reason="FieldValueInvalid",
                    message=f"Invalid value: {json.dumps(_compact(result))}: "
                    f"the patched document is {_json_type(result)}, not an object",
                    field="patch",
                )
            ],
        )
    return result


def apply_merge_patch(target: JSON, patch: JSON) -> JSON:
    """RFC 7386 JSON merge patch of ``target`` by ``patch``; a new value.

    An object patch merges member by member (``null`` deletes; a non-object target counts
    as ``{}``); any other patch replaces the target. Never raises. Cost: O(|target|+|patch|).
    """
    if not isinstance(patch, dict):
        return _clone(patch)
    base = target if isinstance(target, dict) else {}
    out: dict[str, JSON] = {}
    for key, value in base.items():
        if key not in patch:
            out[key] = _clone(value)
        elif patch[key] is not None:
            out[key] = apply_merge_patch(value, patch[key])
    for key, value in patch.items():
        if key not in base and value is not None:
            out[key] = apply_merge_patch(None, value)
    return out


def apply_json_patch(target: JSON, operations: JSON) -> JSON:
    """RFC 6902 JSON patch: apply ``operations`` in order to a copy of ``target``.

    Raises BadRequestError (400) when ``operations`` is not a list of objects,
    RequestEntityTooLargeError (413) above :data:`MAX_JSON_PATCH_OPERATIONS`, and
    UnprocessablePatchError (422) when an operation fails (the target is unchanged, as it
    always is). Members other than op, path, from and value are ignored. Cost: one copy of
    the target plus the operations' cost (an array insert or remove is O(array length)).
    """
    if not isinstance(operations, list) or not all(isinstance(op, dict) for op in operations):
        raise BadRequestError(
            "error decoding patch: a JSON patch must be an array of operation objects"
        )
    if len(operations) > MAX_JSON_PATCH_OPERATIONS:
        raise RequestEntityTooLargeError(
            "Request entity too large: The allowed maximum operations in a JSON patch is "
            f"{MAX_JSON_PATCH_OPERATIONS}, got {len(operations)}"
        )
    document = _clone(target)
    for index, operation in enumerate(operations):
        try:
            document = _apply_operation(document, operation)
        except _OperationError as exc:
            raise UnprocessablePatchError(
                f"operation {index} {_compact(operation)}: {exc}"
            ) from None
    return document


def apply_strategic_merge_patch(target: JSON, patch: JSON, kind: str) -> dict[str, JSON]:
    """Kubernetes' strategic merge patch of the object ``target`` by the object ``patch``.

    ``kind`` selects the merging lists (:data:`MERGE_KEYS`); directives and order are as in
    the module note. A non-object target counts as ``{}``. Raises BadRequestError (400) for
    a patch that is not an object or has a malformed or unknown directive, and
    UnprocessablePatchError (422) for content that cannot merge. Cost: O(|target|+|patch|)
    plus keyed-list scans.
    """
    if not isinstance(patch, dict):
        raise BadRequestError(
            f"error decoding patch: a strategic merge patch must be a JSON object, "
            f"not {_json_type(patch)}"
        )
    return _merge_object(target, patch, "", MERGE_KEYS.get(kind, _DEFAULT_MERGE_KEYS))


# --- strategic merge patch ------------------------------------------------------------------


def _merge_object(
    original: JSON, patch: dict[str, JSON], path: str, lists: Mapping[str, str | None]
) -> dict[str, JSON]:
    if _DIRECTIVE in patch:
        directive = patch[_DIRECTIVE]
        if directive == "replace":
            rest = {key: value for key, value in patch.items() if key != _DIRECTIVE}
            return _merge_object(None, rest, path, lists)
        if directive == "delete":
            return {}
        raise BadRequestError(
            f"unknown patch type: {_compact(directive)} in map: {_compact(patch)}"
        )

    fields: dict[str, JSON] = {}
    orders: dict[str, list[JSON]] = {}
    deletions: dict[str, list[JSON]] = {}
    retain: list[JSON] | None = None
    for key, value in patch.items():
        if not key.startswith("$"):
            fields[key] = value
        elif key == _RETAIN_KEYS:
            if not isinstance(value, list):
                raise BadRequestError(_BAD_RETAIN_KEYS)
            retain = value
        elif key.startswith(_SET_ELEMENT_ORDER):
            orders[_directive_target(key, _SET_ELEMENT_ORDER, _BAD_ORDER)] = _list_or(
                value, _BAD_ORDER
            )
        elif key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            field = _directive_target(key, _DELETE_FROM_PRIMITIVE_LIST, _BAD_PRIMITIVE_LIST)
            if lists.get(_child(path, field), "") is not None:
                raise BadRequestError(
                    f"{_BAD_PRIMITIVE_LIST}: {_child(path, field)} is not a list of scalars "
                    "that merges"
                )
            deletions[field] = _list_or(value, _BAD_PRIMITIVE_LIST)
        else:
            raise BadRequestError(f"unknown strategic merge patch directive {json.dumps(key)}")

    base: dict[str, JSON] = original if isinstance(original, dict) else {}
    if retain is not None:
        if any(value is not None and key not in retain for key, value in fields.items()):
            raise UnprocessablePatchError("patch content doesn't match retainKeys list")
        base = {key: value for key, value in base.items() if key in retain}

    out: dict[str, JSON] = {}
    for key, value in base.items():
        if key not in fields:
            out[key] = _clone(value)
        elif fields[key] is not None:
            out[key] = _merge_value(value, fields[key], _child(path, key), lists)
    for key, value in fields.items():
        if key not in base and value is not None:
            out[key] = _merge_value(None, value, _child(path, key), lists)

    for field, doomed in deletions.items():
        current = out.get(field)
        if isinstance(current, list):
            out[field] = [v for v in current if not any(_json_equal(v, d) for d in doomed)]
    for field, order in orders.items():
        current = out.get(field)
        child = _child(path, field)
        if isinstance(current, list) and child in lists:
            out[field] = _reorder(current, order, lists[child])
    return out


def _merge_value(original: JSON, patch: JSON, path: str, lists: Mapping[str, str | None]) -> JSON:
    if isinstance(patch, dict):
        return _merge_object(original, patch, path, lists)
    if isinstance(patch, list):
        if path in lists:
            current = original if isinstance(original, list) else []
            return _merge_list(current, patch, path, lists[path], lists)
        return [_merge_value(None, item, path + "[]", lists) for item in patch]
    return patch


def _merge_list(
    original: list[JSON],
    patch: list[JSON],
    path: str,
    merge_key: str | None,
    lists: Mapping[str, str | None],
) -> list[JSON]:
    if merge_key is None:
        # A list of scalars with merge strategy: a union, current order first.
        out = list(original)
        for item in patch:
            if isinstance(item, dict | list):
                raise UnprocessablePatchError(
                    f"{path}: expected a list of scalars, got {_compact(item)}"
                )
            if not any(_json_equal(item, existing) for existing in out):
                out.append(item)
        return [_clone(item) for item in out]

    element_path = path + "[]"
    replace = False
    deleted: list[JSON] = []
    merges: list[dict[str, JSON]] = []
    for item in patch:
        if not isinstance(item, dict):
            raise BadRequestError(
                f"{path}: expected objects with merge key {merge_key}, got {_compact(item)}"
            )
        directive = item.get(_DIRECTIVE)
        if directive == "replace":
            replace = True
            continue
        if merge_key not in item:
            raise BadRequestError(
                f"map: {_compact(item)} does not contain declared merge key: {merge_key}"
            )
        if directive == "delete":
            deleted.append(item[merge_key])
        elif directive == "merge":
            raise BadRequestError("merging lists cannot yet be specified in the patch")
        elif _DIRECTIVE in item:
            raise BadRequestError(
                f"unknown patch type: {_compact(directive)} in map: {_compact(item)}"
            )
        else:
            merges.append(item)
    if replace:
        return [_merge_object(None, item, element_path, lists) for item in merges]

    result: list[JSON] = [
        item
        for item in original
        if not any(_json_equal(_key_of(item, merge_key), d) for d in deleted)
    ]
    fresh: set[int] = set()  # indexes of result holding new dicts (the rest alias `original`)
    for item in merges:
        at = _find(result, merge_key, item[merge_key])
        if at is None:
            result.append(_merge_object(None, item, element_path, lists))
            fresh.add(len(result) - 1)
        else:
            result[at] = _merge_object(result[at], item, element_path, lists)
            fresh.add(at)
    return [item if i in fresh else _clone(item) for i, item in enumerate(result)]


def _reorder(items: list[JSON], order: list[JSON], merge_key: str | None) -> list[JSON]:
    """Refill the positions of the items ``order`` names in ``order``'s order (stable)."""
    if merge_key is None:
        wanted = order
    else:
        if not all(isinstance(entry, dict) and merge_key in entry for entry in order):
            raise BadRequestError(_BAD_ORDER)
        wanted = [entry[merge_key] for entry in order]

    def rank(item: JSON) -> int | None:
        ident = item if merge_key is None else _key_of(item, merge_key)
        return next((i for i, w in enumerate(wanted) if _json_equal(ident, w)), None)

    ranked = [(r, i) for i, item in enumerate(items) if (r := rank(item)) is not None]
    out = list(items)
    for (_, slot), (_, source) in zip(ranked, sorted(ranked), strict=True):
        out[slot] = items[source]
    return out


_NO_KEY: Final = object()


def _key_of(item: JSON, merge_key: str) -> JSON:
    """The item's merge-key value; a marker no value equals when there is none."""
    if isinstance(item, dict) and merge_key in item:
        return item[merge_key]
    return _NO_KEY


def _find(items: list[JSON], merge_key: str, value: JSON) -> int | None:
    for i, item in enumerate(items):
        if _json_equal(_key_of(item, merge_key), value):
            return i
    return None


def _directive_target(key: str, prefix: str, error: str) -> str:
    field = key[len(prefix) :]
    if not field.startswith("/") or len(field) == 1:
        raise BadRequestError(error)
    return field[1:]


def _list_or(value: JSON, error: str) -> list[JSON]:
    if not isinstance(value, list):
        raise BadRequestError(error)
    return value


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# --- JSON patch ------------------------------------------------------------------------------


def _apply_operation(document: JSON, operation: dict[str, JSON]) -> JSON:
    """One RFC 6902 operation on ``document`` (owned: mutated in place); the new root."""
    op = operation.get("op")
    if op not in _OPERATIONS:
        raise _OperationError(f"unknown op {_compact(op)}")
    path = _pointer(operation, "path")
    if op == "add":
        return _add(document, path, _clone(_value(operation)))
    if op == "remove":
        _remove(document, path)
        return document
    if op == "replace":
        value = _clone(_value(operation))
        if not path:
            return value
        parent, last = _parent(document, path)
        if isinstance(parent, dict):
            if last not in parent:
                raise _OperationError(f"{_show_pointer(path)} does not exist")
            parent[last] = value
        else:
            parent[_index(last, len(parent), path)] = value
        return document
    if op == "test":
        expected = _value(operation)
        if not _json_equal(_get(document, path), expected):
            raise _OperationError(f"test failed: the value at {_show_pointer(path)} differs")
        return document
    source = _pointer(operation, "from")
    if op == "copy":
        return _add(document, path, _clone(_get(document, source)))
    # move
    if path[: len(source)] == source and len(path) > len(source):
        raise _OperationError("cannot move a value into one of its own children")
    if path == source:
        _get(document, source)
        return document
    return _add(document, path, _remove(document, source))


def _add(document: JSON, path: list[str], value: JSON) -> JSON:
    if not path:
        return value
    parent, last = _parent(document, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif last == "-":
        parent.append(value)
    else:
        parent.insert(_index(last, len(parent) + 1, path), value)
    return document


def _remove(document: JSON, path: list[str]) -> JSON:
    if not path:
        raise _OperationError("cannot remove the whole document")
    parent, last = _parent(document, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise _OperationError(f"{_show_pointer(path)} does not exist")
        return parent.pop(last)
    return parent.pop(_index(last, len(parent), path))


def _get(document: JSON, path: list[str]) -> JSON:
    node = document
    for depth, token in enumerate(path):
        node = _step(node, token, path[: depth + 1])
    return node


def _parent(document: JSON, path: list[str]) -> tuple[dict[str, JSON] | list[JSON], str]:
    parent = _get(document, path[:-1])
    if not isinstance(parent, dict | list):
        raise _OperationError(f"{_show_pointer(path[:-1])} is not an object or an array")
    return parent, path[-1]


def _step(node: JSON, token: str, path: list[str]) -> JSON:
    if isinstance(node, dict):
        if token not in node:
            raise _OperationError(f"{_show_pointer(path)} does not exist")
        return node[token]
    if isinstance(node, list):
        return node[_index(token, len(node), path)]
    raise _OperationError(f"{_show_pointer(path[:-1])} is not an object or an array")


def _index(token: str, bound: int, path: list[str]) -> int:
    """An RFC 6901 array index below ``bound``."""
    if not _ARRAY_INDEX.fullmatch(token):
        raise _OperationError(f"{_show_pointer(path)}: {json.dumps(token)} is not an array index")
    index = int(token)
    if index >= bound:
        raise _OperationError(f"{_show_pointer(path)}: index {index} is out of range")
    return index


def _pointer(operation: dict[str, JSON], member: str) -> list[str]:
    """The operation's ``path``/``from`` pointer as unescaped tokens."""
    if member not in operation:
        raise _OperationError(f'missing "{member}"')
    pointer = operation[member]
    if not isinstance(pointer, str):
        raise _OperationError(f'"{member}" must be a string')
    if not pointer:
        return []
    if not pointer.startswith("/") or _BAD_ESCAPE.search(pointer):
        raise _OperationError(f"{json.dumps(pointer)} is not a JSON pointer")
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def _show_pointer(path: list[str]) -> str:
    return json.dumps("".join("/" + t.replace("~", "~0").replace("/", "~1") for t in path))


def _value(operation: dict[str, JSON]) -> JSON:
    if "value" not in operation:
        raise _OperationError('missing "value"')
    return operation["value"]


# --- JSON values -----------------------------------------------------------------------------


def _decode(body: bytes) -> JSON:
    """The body as JSON; 400 for anything Go's decoder would not accept as plain JSON."""
    try:
        return gojson.loads(body, object_pairs_hook=_unique_members, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise BadRequestError(f"error decoding patch: {exc}") from None


def _unique_members(pairs: list[tuple[str, JSON]]) -> dict[str, JSON]:
    out: dict[str, JSON] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate field {json.dumps(key)}")
        out[key] = value
    return out


def _no_constant(name: str) -> JSON:
    raise ValueError(f"{name} is not valid JSON")


def _clone(value: JSON) -> JSON:
    """A copy sharing no container with ``value`` (scalars are immutable)."""
    if isinstance(value, dict):
        return {key: _clone(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clone(item) for item in value]
    return value


def _json_equal(a: JSON, b: JSON) -> bool:
    """JSON equality: numbers by value, but ``true`` is not ``1`` (unlike Python's ``==``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(_json_equal(value, b[key]) for key, value in a.items())
        )
    if isinstance(a, list):
        return (
            isinstance(b, list)
            and len(a) == len(b)
            and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    return type(a) is type(b) and bool(a == b)


def _json_type(value: JSON) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _compact(value: JSON) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=repr)
