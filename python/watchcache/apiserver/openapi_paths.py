"""The served resources' HTTP operations as OpenAPI ``paths``, in v3 and v2 form.

Design note
-----------
Each resource becomes the path items Kubernetes publishes for it (collection, object,
all-namespaces list, subresources), each operation with the verb's query parameters,
``x-kubernetes-action`` (``get``, ``list``, ``post``, ``put``, ``patch``, ``delete``,
``deletecollection``: Kubernetes' names, which are not the RBAC verbs) and
``x-kubernetes-group-version-kind``. Clients read these, not just people:

* kubectl 1.20 runs ``--dry-run=server`` only if the v2 PATCH operation of the kind has a
  ``dryRun`` query parameter (its DryRunVerifier); the first PATCH operation carrying the
  GVK decides, so every PATCH operation lists ``dryRun``, inline (1.20 cannot follow
  shared ``#/parameters`` references);
* kubectl 1.2x and newer send ``fieldValidation=Strict`` instead of validating themselves
  when the v3 PATCH operation lists ``fieldValidation``;
* client-side apply uses the v3 schemas only when the PATCH operation accepts
  ``application/strategic-merge-patch+json`` (not for CRDs, as in Kubernetes);
* ``kubectl explain`` finds a resource's GVK on the operations of its paths.

Watches are the ``watch`` parameter of the list operations: the legacy ``/watch/`` paths
are not served, so they are not published. An operation is described once
(:class:`Operation`) and rendered twice, so v2 and v3 list the same things. Responses name
only ``application/json`` (the server answers JSON). Delete answers the object for kinds
whose strategy returns it (pods, namespaces), a Status otherwise.

Pure functions over :class:`~watchcache.registry.resources.ResourceSpec`; a few dicts per
operation. Caller: ``apiserver.openapi``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from watchcache.apiserver.openapi_schemas import (
    META,
    V2_REF,
    V3_REF,
    KindNames,
    component_name,
    openapi_schema_of,
)
from watchcache.registry.patch import SERVED_PATCH_TYPES, STRATEGIC_MERGE_PATCH
from watchcache.registry.resources import ResourceSpec
from watchcache.registry.strategies import strategy_class

__all__ = ["Operation", "Parameter", "PathItem", "render_v2", "render_v3", "resource_paths"]

JSON_MEDIA: Final = "application/json"
WATCH_MEDIA: Final = "application/json;stream=watch"
_DESCRIPTIONS: Final = {"200": "OK", "201": "Created", "202": "Accepted"}


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    type: str  # "string", "integer" or "boolean"
    location: str = "query"  # or "path"


def _query(*entries: tuple[str, str]) -> tuple[Parameter, ...]:
    return tuple(Parameter(name, kind) for name, kind in entries)


_PRETTY: Final = Parameter("pretty", "string")
_LIST: Final = _query(
    ("allowWatchBookmarks", "boolean"),
    ("continue", "string"),
    ("fieldSelector", "string"),
    ("labelSelector", "string"),
    ("limit", "integer"),
    ("resourceVersion", "string"),
    ("resourceVersionMatch", "string"),
    ("sendInitialEvents", "boolean"),
    ("timeoutSeconds", "integer"),
    ("watch", "boolean"),
)
_WATCH_ONLY: Final = frozenset({"allowWatchBookmarks", "sendInitialEvents", "watch"})
_WRITE: Final = _query(
    ("dryRun", "string"), ("fieldManager", "string"), ("fieldValidation", "string")
)
_DELETE: Final = _query(
    ("dryRun", "string"),
    ("gracePeriodSeconds", "integer"),
    ("orphanDependents", "boolean"),
    ("propagationPolicy", "string"),
)
_DELETE_COLLECTION: Final = tuple(
    sorted(
        _DELETE + tuple(p for p in _LIST if p.name not in ("allowWatchBookmarks", "watch")),
        key=lambda p: p.name,
    )
)


@dataclass(frozen=True, slots=True)
class Operation:
    method: str  # get, post, put, patch, delete
    action: str  # x-kubernetes-action
    operation_id: str
    tag: str
    group_version_kind: tuple[str, str, str]
    parameters: tuple[Parameter, ...]
    body: str = ""  # component name of the request body, if any
    body_required: bool = False
    consumes: tuple[str, ...] = ()
    responses: tuple[tuple[str, str], ...] = ()  # (status code, component name)
    produces: tuple[str, ...] = (JSON_MEDIA,)


@dataclass(frozen=True, slots=True)
class PathItem:
    path: str
    parameters: tuple[Parameter, ...]
    operations: tuple[Operation, ...]

    def components(self) -> set[str]:
        """The components this item's operations name (bodies and responses)."""
        out: set[str] = set()
        for op in self.operations:
            if op.body:
                out.add(op.body)
            out.update(name for _, name in op.responses)
        return out


def _camel(text: str) -> str:
    return text[:1].upper() + text[1:]


def _group_words(group: str) -> str:
    """``rbac.authorization.k8s.io`` → ``RbacAuthorization``; the core group is ``Core``."""
    if not group:
        return "Core"
    words = group.removesuffix(".k8s.io").replace("-", ".").split(".")
    return "".join(_camel(word) for word in words if word)


def _tag(spec: ResourceSpec) -> str:
    words = _group_words(spec.group)
    return f"{words[:1].lower()}{words[1:]}_{spec.version}"


def resource_paths(spec: ResourceSpec, names: KindNames) -> list[PathItem]:
    """The path items of one resource, as Kubernetes lays them out."""
    verbs = set(spec.verbs)
    gv = _group_words(spec.group) + _camel(spec.version)
    scope = "Namespaced" if spec.namespaced else ""
    gvk = (spec.group, spec.version, spec.kind)
    tag = _tag(spec)
    root = f"/apis/{spec.group}/{spec.version}" if spec.group else f"/api/{spec.version}"
    collection = (
        f"{root}/namespaces/{{namespace}}/{spec.name}" if spec.namespaced else f"{root}/{spec.name}"
    )
    item_path = f"{collection}/{{name}}"
    scope_params = (Parameter("namespace", "string", "path"),) if spec.namespaced else ()
    item_params = (Parameter("name", "string", "path"), *scope_params)
    status = component_name(META.status)
    delete_answer = names.kind if strategy_class(spec).returns_deleted_object else status
    patch_types = tuple(
        media
        for media in SERVED_PATCH_TYPES
        if media != STRATEGIC_MERGE_PATCH or openapi_schema_of(spec) is None
    )
    list_params = tuple(p for p in _LIST if "watch" in verbs or p.name not in _WATCH_ONLY)
    list_produces = (JSON_MEDIA, WATCH_MEDIA) if "watch" in verbs else (JSON_MEDIA,)

    def op(method: str, action: str, verb: str, suffix: str = "", **more: Any) -> Operation:
        return Operation(
            method,
            action,
            f"{verb}{gv}{suffix or scope + spec.kind}",
            tag,
            gvk,
            **more,
        )

    def writes(verb: str, method: str, action: str, suffix: str = "") -> Operation:
        return op(
            method,
            action,
            verb,
            suffix,
            parameters=_WRITE,
            body=names.kind,
            body_required=True,
            consumes=("*/*",),
            responses=(("200", names.kind), ("201", names.kind))
            + ((("202", names.kind),) if action == "post" else ()),
        )

    def patch(suffix: str = "") -> Operation:
        return op(
            "patch",
            "patch",
            "patch",
            suffix,
            parameters=_WRITE,
            body=component_name(META.patch),
            body_required=True,
            consumes=patch_types,
            responses=(("200", names.kind), ("201", names.kind)),
        )

    def read(suffix: str = "") -> Operation:
        return op("get", "get", "read", suffix, parameters=(), responses=(("200", names.kind),))

    items: list[PathItem] = []
    ops: list[Operation] = []
    if "list" in verbs:
        ops.append(
            op(
                "get",
                "list",
                "list",
                parameters=list_params,
                responses=(("200", names.list),),
                produces=list_produces,
            )
        )
    if "create" in verbs:
        ops.append(writes("create", "post", "post"))
    if "deletecollection" in verbs:
        ops.append(
            op(
                "delete",
                "deletecollection",
                "delete",
                f"Collection{scope}{spec.kind}",
                parameters=_DELETE_COLLECTION,
                body=component_name(META.delete_options),
                consumes=("*/*",),
                responses=(("200", status),),
            )
        )
    if ops:
        items.append(PathItem(collection, (*scope_params, _PRETTY), tuple(ops)))

    ops = []
    if "get" in verbs:
        ops.append(read())
    if "update" in verbs:
        ops.append(writes("replace", "put", "put"))
    if "patch" in verbs:
        ops.append(patch())
    if "delete" in verbs:
        ops.append(
            op(
                "delete",
                "delete",
                "delete",
                parameters=_DELETE,
                body=component_name(META.delete_options),
                consumes=("*/*",),
                responses=(("200", delete_answer), ("202", delete_answer)),
            )
        )
    if ops:
        items.append(PathItem(item_path, (*item_params, _PRETTY), tuple(ops)))

    if spec.namespaced and "list" in verbs:
        every = op(
            "get",
            "list",
            "list",
            f"{spec.kind}ForAllNamespaces",
            parameters=list_params,
            responses=(("200", names.list),),
            produces=list_produces,
        )
        items.append(PathItem(f"{root}/{spec.name}", (_PRETTY,), (every,)))

    for sub in spec.subresources:
        suffix = f"{scope}{spec.kind}{_camel(sub)}"
        sub_verbs = spec.subresource_verbs(sub)
        ops = []
        if "get" in sub_verbs:
            ops.append(read(suffix))
        if "update" in sub_verbs:
            ops.append(writes("replace", "put", "put", suffix))
        if "patch" in sub_verbs:
            ops.append(patch(suffix))
        if ops:
            items.append(PathItem(f"{item_path}/{sub}", (*item_params, _PRETTY), tuple(ops)))
    return items


# -- rendering ------------------------------------------------------------------------------


def _gvk(op: Operation) -> dict[str, str]:
    group, version, kind = op.group_version_kind
    return {"group": group, "version": version, "kind": kind}


def _v3_parameter(p: Parameter) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name, "in": p.location}
    if p.location == "path":
        out["required"] = True
    out["schema"] = {"type": p.type}
    return out


def _v3_operation(op: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {"tags": [op.tag], "operationId": op.operation_id}
    if op.parameters:
        out["parameters"] = [_v3_parameter(p) for p in op.parameters]
    if op.body:
        ref = {"schema": {"$ref": V3_REF + op.body}}
        out["requestBody"] = {"content": dict.fromkeys(op.consumes, ref)}
        if op.body_required:
            out["requestBody"]["required"] = True
    out["responses"] = {
        code: {
            "description": _DESCRIPTIONS[code],
            "content": {media: {"schema": {"$ref": V3_REF + name}} for media in op.produces},
        }
        for code, name in op.responses
    }
    out["x-kubernetes-action"] = op.action
    out["x-kubernetes-group-version-kind"] = _gvk(op)
    return out


def _v2_parameter(p: Parameter) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name, "in": p.location, "type": p.type}
    if p.location == "path":
        out["required"] = True
    return out


def _v2_operation(op: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {"tags": [op.tag], "operationId": op.operation_id}
    if op.consumes:
        out["consumes"] = list(op.consumes)
    out["produces"] = list(op.produces)
    parameters = [_v2_parameter(p) for p in op.parameters]
    if op.body:
        body: dict[str, Any] = {"name": "body", "in": "body"}
        if op.body_required:
            body["required"] = True
        body["schema"] = {"$ref": V2_REF + op.body}
        parameters.append(body)
    if parameters:
        out["parameters"] = parameters
    out["responses"] = {
        code: {"description": _DESCRIPTIONS[code], "schema": {"$ref": V2_REF + name}}
        for code, name in op.responses
    }
    out["x-kubernetes-action"] = op.action
    out["x-kubernetes-group-version-kind"] = _gvk(op)
    return out


def render_v3(items: Iterable[PathItem]) -> dict[str, Any]:
    """OpenAPI v3 ``paths``, sorted by path."""
    out: dict[str, Any] = {}
    for item in sorted(items, key=lambda i: i.path):
        entry: dict[str, Any] = {op.method: _v3_operation(op) for op in item.operations}
        entry["parameters"] = [_v3_parameter(p) for p in item.parameters]
        out[item.path] = entry
    return out


def render_v2(items: Iterable[PathItem]) -> dict[str, Any]:
    """Swagger 2.0 ``paths``, sorted by path."""
    out: dict[str, Any] = {}
    for item in sorted(items, key=lambda i: i.path):
        entry: dict[str, Any] = {op.method: _v2_operation(op) for op in item.operations}
        entry["parameters"] = [_v2_parameter(p) for p in item.parameters]
        out[item.path] = entry
    return out
