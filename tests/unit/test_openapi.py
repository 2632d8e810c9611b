"""The OpenAPI documents of ``apiserver.openapi``: names and shapes as Kubernetes publishes
them, every served kind reachable by ``x-kubernetes-group-version-kind``, the operations
kubectl inspects, v2 and v3 agreeing, the protobuf decoding back to the v2 JSON (with a
decoder written here from gnostic's ``OpenAPIv2.proto``, independently of the encoder),
hashes, Accept negotiation and the cache. kubectl itself reads them in
tests/e2e/test_kubectl_openapi.py."""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from watchcache.apiserver import openapi
from watchcache.apiserver.openapi import (
    V2_PROTOBUF_CONTENT_TYPE,
    OpenAPIDocuments,
    build_documents,
    openapi_documents,
)
from watchcache.apiserver.openapi_schemas import component_name, crd_component_name, to_v2
from watchcache.registry.patch import MERGE_KEYS
from watchcache.registry.resources import (
    CONFIGMAPS,
    NAMESPACES,
    PODS,
    SECRETS,
    ResourceSpec,
)
from watchcache.wire import schema as wire_schema
from watchcache.wire.openapi_v2_pb import encode_document

CORE = (CONFIGMAPS, SECRETS, PODS, NAMESPACES)
V1 = "io.k8s.api.core.v1."
META = "io.k8s.apimachinery.pkg.apis.meta.v1."
GVK = "x-kubernetes-group-version-kind"


@dataclass(frozen=True, slots=True)
class CrdSpec(ResourceSpec):
    """A resource with its own schema (``ResourceSpec.openapi_schema``, as a CRD's)."""

    openapi_schema: Mapping[str, Any] | None = None


CRONTAB_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["cronSpec"],
            "properties": {
                "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?$"},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "nullable": True},
                "port": {
                    "x-kubernetes-int-or-string": True,
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                },
                "extra": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"known": {"type": "string"}},
                },
            },
        },
    },
}
CRONTABS = CrdSpec(
    "crontabs", "crontab", "CronTab", group="stable.example.com", openapi_schema=CRONTAB_SCHEMA
)


@pytest.fixture(scope="module")
def docs() -> OpenAPIDocuments:
    return build_documents(CORE)


def v2(docs: OpenAPIDocuments) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(docs.v2_json.body)
    return result


def v3(docs: OpenAPIDocuments, group_version: str = "api/v1") -> dict[str, Any]:
    document = docs.v3(group_version)
    assert document is not None
    result: dict[str, Any] = json.loads(document.body)
    return result


def operations(paths: Mapping[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in paths.items():
        for method, op in item.items():
            if method != "parameters":
                yield path, method, op


def refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        if isinstance(value.get("$ref"), str):
            yield value["$ref"]
        for item in value.values():
            yield from refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from refs(item)


def gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "version": version, "kind": kind}


# -- names and structure ------------------------------------------------------------------


def test_names_are_kubernetes_names() -> None:
    assert component_name("k8s.io.api.core.v1.ConfigMap") == V1 + "ConfigMap"
    assert component_name("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta") == META + "ObjectMeta"
    assert component_name("k8s.io.apimachinery.pkg.util.intstr.IntOrString") == (
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
    )
    assert crd_component_name("stable.example.com", "v1", "CronTab") == (
        "com.example.stable.v1.CronTab"
    )


def test_v3_document_structure(docs: OpenAPIDocuments) -> None:
    index = json.loads(docs.v3_index.body)
    assert list(index) == ["paths"]
    assert list(index["paths"]) == ["api/v1"]
    document = v3(docs)
    assert document["openapi"].startswith("3.0")
    schemas = document["components"]["schemas"]
    for name in ("ConfigMap", "ConfigMapList", "Secret", "Pod", "PodSpec", "Container",
                 "Namespace", "NamespaceList"):  # fmt: skip
        assert V1 + name in schemas
    for name in ("ObjectMeta", "ListMeta", "Status", "DeleteOptions", "Patch", "Time"):
        assert META + name in schemas
    assert schemas[V1 + "ConfigMap"]["properties"]["metadata"] == {
        "allOf": [{"$ref": "#/components/schemas/" + META + "ObjectMeta"}]
    }
    items = schemas[V1 + "PodSpec"]["properties"]["containers"]["items"]
    assert items == {"allOf": [{"$ref": "#/components/schemas/" + V1 + "Container"}]}
    # Every reference resolves inside the document; nothing unreachable is included.
    targets = {ref.removeprefix("#/components/schemas/") for ref in refs(document)}
    assert targets <= set(schemas)
    assert set(schemas) == targets | {
        name for name, s in schemas.items() if "x-kubernetes-group-version-kind" in s
    }
    assert docs.v3("apis/apps/v1") is None


def test_v2_document_structure(docs: OpenAPIDocuments) -> None:
    document = v2(docs)
    assert document["swagger"] == "2.0"
    definitions = document["definitions"]
    assert definitions[V1 + "ConfigMap"]["properties"]["metadata"] == {
        "$ref": "#/definitions/" + META + "ObjectMeta"
    }
    for ref in refs(document):
        assert ref.startswith("#/definitions/")
        assert ref.removeprefix("#/definitions/") in definitions
    for schema in definitions.values():
        # kubectl 1.20 refuses a $ref beside a type or properties, and v3-only members.
        for sub in _subschemas(schema):
            if "$ref" in sub:
                assert not {"type", "properties", "allOf"} & set(sub)
            assert not {"oneOf", "anyOf", "nullable", "not"} & set(sub)


def _subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(schema, dict):
        return
    yield schema
    for sub in schema.get("properties", {}).values():
        yield from _subschemas(sub)
    for key in ("items", "additionalProperties"):
        yield from _subschemas(schema.get(key))
    for sub in schema.get("allOf", []):
        yield from _subschemas(sub)


def test_types_formats_and_extensions(docs: OpenAPIDocuments) -> None:
    schemas = v3(docs)["components"]["schemas"]
    meta = schemas[META + "ObjectMeta"]["properties"]
    assert meta["generation"] == {"type": "integer", "format": "int64"}
    assert meta["creationTimestamp"] == {
        "allOf": [{"$ref": "#/components/schemas/" + META + "Time"}]
    }
    assert schemas[META + "Time"] == {"type": "string", "format": "date-time"}
    assert meta["finalizers"]["x-kubernetes-patch-strategy"] == "merge"
    assert "x-kubernetes-patch-merge-key" not in meta["finalizers"]
    assert meta["ownerReferences"]["x-kubernetes-patch-merge-key"] == "uid"
    assert meta["labels"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert schemas[V1 + "Secret"]["properties"]["data"]["additionalProperties"] == {
        "type": "string",
        "format": "byte",
    }
    container = schemas[V1 + "Container"]["properties"]
    assert container["env"]["x-kubernetes-patch-merge-key"] == "name"
    assert container["ports"]["x-kubernetes-patch-merge-key"] == "containerPort"
    assert container["ports"]["x-kubernetes-list-type"] == "map"
    assert container["ports"]["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    assert schemas[V1 + "ContainerPort"]["properties"]["containerPort"] == {
        "type": "integer",
        "format": "int32",
    }
    spec = schemas[V1 + "PodSpec"]["properties"]
    assert spec["volumes"]["x-kubernetes-patch-strategy"] == "merge,retainKeys"
    int_or_string = schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
    assert int_or_string["x-kubernetes-int-or-string"] is True
    assert {"type": "integer"} in int_or_string["oneOf"]
    definitions = v2(docs)["definitions"]
    assert definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["type"] == "string"
    assert definitions["io.k8s.apimachinery.pkg.api.resource.Quantity"] == {"type": "string"}


def test_kubernetes_markers_are_published(docs: OpenAPIDocuments) -> None:
    """The list, map and struct types Kubernetes declares (wire.schema's markers), on the
    same fields and types as its own documents, in v3 and v2."""
    schemas = v3(docs)["components"]["schemas"]
    meta = schemas[META + "ObjectMeta"]["properties"]
    assert meta["finalizers"]["x-kubernetes-list-type"] == "set"
    assert meta["ownerReferences"]["x-kubernetes-list-type"] == "map"
    assert meta["ownerReferences"]["x-kubernetes-list-map-keys"] == ["uid"]
    assert meta["managedFields"]["x-kubernetes-list-type"] == "atomic"
    assert "x-kubernetes-map-type" not in meta["labels"]
    assert schemas[META + "OwnerReference"]["x-kubernetes-map-type"] == "atomic"
    assert schemas[V1 + "LocalObjectReference"]["x-kubernetes-map-type"] == "atomic"
    assert "x-kubernetes-map-type" not in schemas[V1 + "PodSpec"]
    spec = schemas[V1 + "PodSpec"]["properties"]
    assert spec["nodeSelector"]["x-kubernetes-map-type"] == "atomic"
    assert spec["tolerations"]["x-kubernetes-list-type"] == "atomic"
    assert spec["topologySpreadConstraints"]["x-kubernetes-list-map-keys"] == [
        "topologyKey",
        "whenUnsatisfiable",
    ]
    assert spec["resourceClaims"]["x-kubernetes-patch-strategy"] == "merge,retainKeys"
    assert spec["containers"]["x-kubernetes-list-map-keys"] == ["name"]
    # Lists the server's strategic merge replaces carry no patch strategy (kubectl would
    # otherwise send merge directives for them), whatever Kubernetes declares elsewhere.
    assert "x-kubernetes-patch-strategy" not in spec["tolerations"]
    definitions = v2(docs)["definitions"]
    assert definitions[V1 + "LocalObjectReference"]["x-kubernetes-map-type"] == "atomic"
    assert definitions[V1 + "PodSpec"]["properties"]["imagePullSecrets"]["items"] == {
        "$ref": "#/definitions/" + V1 + "LocalObjectReference"
    }
    assert definitions[V1 + "Container"]["properties"]["ports"]["x-kubernetes-list-type"] == "map"


def test_the_servers_merge_keys_are_kubernetes_ones() -> None:
    """registry.patch.MERGE_KEYS names each list with the strategy and key Kubernetes
    declares on it (the patchStrategy/patchMergeKey struct tags)."""
    schema = wire_schema.load()
    roots = {kind: schema.kind("v1", kind) for kind in MERGE_KEYS}
    checked = 0
    for kind, paths in MERGE_KEYS.items():
        for path, key in paths.items():
            message = roots[kind]
            fld = None
            for step in path.split("."):
                assert message is not None, path
                fld = message.by_json[step.removesuffix("[]")]
                message = fld.message
            assert fld is not None
            assert fld.patch_strategy.startswith("merge"), (kind, path)
            assert (fld.patch_merge_key or None) == key, (kind, path)
            checked += 1
    assert checked >= 20


def test_required_fields_are_kubernetes_ones(docs: OpenAPIDocuments) -> None:
    schemas = v3(docs)["components"]["schemas"]
    assert schemas[V1 + "PodSpec"]["required"] == ["containers"]
    assert schemas[V1 + "Container"]["required"] == ["name"]
    assert schemas[V1 + "ContainerPort"]["required"] == ["containerPort"]
    assert schemas[V1 + "EnvVar"]["required"] == ["name"]
    assert schemas[META + "OwnerReference"]["required"] == ["apiVersion", "kind", "name", "uid"]
    for kind in ("ConfigMap", "Secret", "Pod", "Namespace"):
        assert "required" not in schemas[V1 + kind]
        assert schemas[V1 + kind + "List"]["required"] == ["items"]
    assert "required" not in schemas[META + "ObjectMeta"]
    # Pointer fields marked +optional without omitempty are not required.
    assert "required" not in schemas.get(V1 + "TypedLocalObjectReference", {}) or (
        "apiGroup" not in schemas[V1 + "TypedLocalObjectReference"]["required"]
    )


def test_merge_keys_are_the_servers(docs: OpenAPIDocuments) -> None:
    """Every merging list of registry.patch is published, with its key, on its field."""
    schemas = v3(docs)["components"]["schemas"]

    def field_schema(kind: str, path: str) -> dict[str, Any]:
        schema = schemas[V1 + kind]
        found: dict[str, Any] = {}
        for step in path.split("."):
            found = schema["properties"][step.removesuffix("[]")]
            target = found["items"] if step.endswith("[]") else found
            ref = next(refs(target), None)
            if ref is not None:
                schema = schemas[ref.removeprefix("#/components/schemas/")]
        return found

    checked = 0
    for kind, paths in MERGE_KEYS.items():
        if V1 + kind not in schemas:
            continue
        for path, key in paths.items():
            field = field_schema(kind, path)
            assert field["x-kubernetes-patch-strategy"].split(",")[0] == "merge", path
            assert field.get("x-kubernetes-patch-merge-key") == key, path
            checked += 1
    assert checked >= 20


# -- operations ---------------------------------------------------------------------------


ACTIONS = {
    "create": "post",
    "update": "put",
    "patch": "patch",
    "delete": "delete",
    "deletecollection": "deletecollection",
    "get": "get",
    "list": "list",
}


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_every_served_kind_is_reachable_by_its_gvk(docs: OpenAPIDocuments, version: str) -> None:
    document = v2(docs) if version == "v2" else v3(docs)
    schemas = document["definitions"] if version == "v2" else document["components"]["schemas"]
    by_gvk: dict[tuple[str, str, str], list[str]] = {}
    for name, schema in schemas.items():
        for entry in schema.get("x-kubernetes-group-version-kind", []):
            by_gvk.setdefault((entry["group"], entry["version"], entry["kind"]), []).append(name)
    for spec in CORE:
        assert by_gvk[(spec.group, spec.version, spec.kind)] == [V1 + spec.kind]
        assert by_gvk[(spec.group, spec.version, spec.list_kind)] == [V1 + spec.list_kind]
        actions = {
            op["x-kubernetes-action"]
            for _, _, op in operations(document["paths"])
            if op["x-kubernetes-group-version-kind"] == gvk(spec.group, spec.version, spec.kind)
        }
        assert actions == {ACTIONS[verb] for verb in spec.verbs if verb != "watch"}


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_patch_operations_list_dry_run_and_field_validation(
    docs: OpenAPIDocuments, version: str
) -> None:
    """kubectl 1.20's DryRunVerifier and newer kubectls' fieldValidation check look here."""
    document = v2(docs) if version == "v2" else v3(docs)
    seen = set()
    for _, method, op in operations(document["paths"]):
        if method != "patch":
            continue
        assert op["x-kubernetes-action"] == "patch"
        names = {p["name"] for p in op["parameters"] if p["in"] == "query"}
        assert {"dryRun", "fieldManager", "fieldValidation"} <= names
        seen.add(op["x-kubernetes-group-version-kind"]["kind"])
        if version == "v3":
            assert "application/strategic-merge-patch+json" in op["requestBody"]["content"]
    assert seen == {"ConfigMap", "Secret", "Pod", "Namespace"}


def test_paths_and_parameters(docs: OpenAPIDocuments) -> None:
    paths = v3(docs)["paths"]
    assert set(paths) == {
        "/api/v1/configmaps",
        "/api/v1/namespaces/{namespace}/configmaps",
        "/api/v1/namespaces/{namespace}/configmaps/{name}",
        "/api/v1/secrets",
        "/api/v1/namespaces/{namespace}/secrets",
        "/api/v1/namespaces/{namespace}/secrets/{name}",
        "/api/v1/pods",
        "/api/v1/namespaces/{namespace}/pods",
        "/api/v1/namespaces/{namespace}/pods/{name}",
        "/api/v1/namespaces/{namespace}/pods/{name}/status",
        "/api/v1/namespaces",
        "/api/v1/namespaces/{name}",
        "/api/v1/namespaces/{name}/finalize",
        "/api/v1/namespaces/{name}/status",
    }
    collection = paths["/api/v1/namespaces/{namespace}/configmaps"]
    assert collection["get"]["operationId"] == "listCoreV1NamespacedConfigMap"
    list_names = [p["name"] for p in collection["get"]["parameters"]]
    for name in ("watch", "limit", "continue", "labelSelector", "fieldSelector",
                 "resourceVersion", "timeoutSeconds", "allowWatchBookmarks"):  # fmt: skip
        assert name in list_names
    assert "application/json;stream=watch" in collection["get"]["responses"]["200"]["content"]
    assert collection["post"]["x-kubernetes-action"] == "post"
    assert collection["delete"]["x-kubernetes-action"] == "deletecollection"
    assert {"gracePeriodSeconds", "propagationPolicy", "dryRun"} <= {
        p["name"] for p in collection["delete"]["parameters"]
    }
    assert {p["name"]: p["in"] for p in collection["parameters"]} == {
        "namespace": "path",
        "pretty": "query",
    }
    item = paths["/api/v1/namespaces/{namespace}/pods/{name}"]
    assert set(item) == {"get", "put", "patch", "delete", "parameters"}
    assert item["get"]["operationId"] == "readCoreV1NamespacedPod"
    # Pods answer a delete with the pod, configmaps with a Status (the strategies').
    assert next(refs(item["delete"]["responses"]["200"])).endswith(V1 + "Pod")
    cm_item = paths["/api/v1/namespaces/{namespace}/configmaps/{name}"]
    assert next(refs(cm_item["delete"]["responses"]["200"])).endswith(META + "Status")
    status = paths["/api/v1/namespaces/{namespace}/pods/{name}/status"]
    assert status["patch"]["operationId"] == "patchCoreV1NamespacedPodStatus"
    assert status["patch"]["x-kubernetes-group-version-kind"] == gvk("", "v1", "Pod")
    finalize = paths["/api/v1/namespaces/{name}/finalize"]
    assert set(finalize) == {"put", "parameters"}
    assert finalize["put"]["operationId"] == "replaceCoreV1NamespaceFinalize"
    assert "delete" not in paths["/api/v1/namespaces"]  # no deletecollection of namespaces
    every = paths["/api/v1/pods"]["get"]
    assert every["operationId"] == "listCoreV1PodForAllNamespaces"


# -- v2 and v3 agree ----------------------------------------------------------------------


@pytest.mark.parametrize("resources", [CORE, (*CORE, CRONTABS)], ids=["core", "crd"])
def test_v2_and_v3_agree(resources: tuple[ResourceSpec, ...]) -> None:
    docs = build_documents(resources)
    swagger = v2(docs)
    v3_schemas: dict[str, Any] = {}
    v3_gvks: dict[str, list[dict[str, str]]] = {}
    v3_paths: dict[str, Any] = {}
    for group_version in docs.v3_documents:
        document = v3(docs, group_version)
        for name, schema in document["components"]["schemas"].items():
            # Each group-version's document names only its own GVKs (Status, DeleteOptions).
            v3_gvks.setdefault(name, []).extend(schema.get(GVK, []))
            v3_schemas[name] = {k: v for k, v in schema.items() if k != GVK}
        v3_paths.update(document["paths"])
    assert set(swagger["definitions"]) == set(v3_schemas)
    for name, schema in v3_schemas.items():
        definition = dict(swagger["definitions"][name])
        assert sorted(definition.pop(GVK, []), key=str) == sorted(v3_gvks[name], key=str)
        assert definition == to_v2(schema), name
    assert set(swagger["paths"]) == set(v3_paths)
    for path, method, op in operations(v3_paths):
        other = swagger["paths"][path][method]
        for key in ("operationId", "x-kubernetes-action", "x-kubernetes-group-version-kind"):
            assert other[key] == op[key]
        assert [(p["name"], p["in"], p["schema"]["type"]) for p in op.get("parameters", [])] == [
            (p["name"], p["in"], p["type"])
            for p in other.get("parameters", [])
            if p["in"] != "body"
        ]
        body = [p for p in other.get("parameters", []) if p["in"] == "body"]
        if "requestBody" in op:
            content = op["requestBody"]["content"]
            assert list(content) == other["consumes"]
            assert {c["schema"]["$ref"].rsplit("/", 1)[1] for c in content.values()} == {
                body[0]["schema"]["$ref"].rsplit("/", 1)[1]
            }
        else:
            assert not body
        assert {
            code: next(refs(answer)).rsplit("/", 1)[1] for code, answer in op["responses"].items()
        } == {
            code: answer["schema"]["$ref"].rsplit("/", 1)[1]
            for code, answer in other["responses"].items()
        }


def test_to_v2_conversions() -> None:
    assert to_v2({"allOf": [{"$ref": "#/components/schemas/X"}], "default": {}}) == {
        "$ref": "#/definitions/X"
    }
    assert to_v2({"oneOf": [{"type": "string"}, {"type": "number"}]}) == {"type": "string"}
    assert to_v2({"anyOf": [{"type": "integer"}, {"type": "number"}]}) == {"type": "number"}
    assert to_v2({"type": "integer", "nullable": True, "minimum": 1}) == {"minimum": 1}
    assert to_v2(
        {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "required": ["a"],
            "properties": {"a": {"type": "string"}},
        }
    ) == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert to_v2({"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/Y"}]}}) == {
        "type": "array",
        "items": {"$ref": "#/definitions/Y"},
    }


# -- protobuf -----------------------------------------------------------------------------

# gnostic's openapi_v2 messages, from OpenAPIv2.proto: field number → (JSON member, type).
# Types: "s" string, "S" repeated string, "b" bool, "i" int64, "d" double, "a" Any,
# "A" repeated Any, "x" vendor extensions (repeated NamedAny), or a message name below; a
# leading "*" marks a repeated message, "map:" a repeated Named* keyed by name.
_VALIDATIONS = [
    ("type", "s"), ("format", "s"), ("items", "PrimitivesItems"), ("collectionFormat", "s"),
    ("default", "a"), ("maximum", "d"), ("exclusiveMaximum", "b"), ("minimum", "d"),
    ("exclusiveMinimum", "b"), ("maxLength", "i"), ("minLength", "i"), ("pattern", "s"),
    ("maxItems", "i"), ("minItems", "i"), ("uniqueItems", "b"), ("enum", "A"),
    ("multipleOf", "d"),
]  # fmt: skip


def _numbered(first: int, members: list[tuple[str, str]]) -> dict[int, tuple[str, str]]:
    return {first + i: member for i, member in enumerate(members)}


GNOSTIC: dict[str, dict[int, tuple[str, str]]] = {
    "Document": {
        1: ("swagger", "s"), 2: ("info", "Info"), 3: ("host", "s"), 4: ("basePath", "s"),
        5: ("schemes", "S"), 6: ("consumes", "S"), 7: ("produces", "S"), 8: ("paths", "Paths"),
        9: ("definitions", "map:Schema"), 16: ("", "x"),
    },
    "Info": {1: ("title", "s"), 2: ("version", "s"), 3: ("description", "s"), 7: ("", "x")},
    "PathItem": {
        1: ("$ref", "s"), 2: ("get", "Operation"), 3: ("put", "Operation"),
        4: ("post", "Operation"), 5: ("delete", "Operation"), 6: ("options", "Operation"),
        7: ("head", "Operation"), 8: ("patch", "Operation"),
        9: ("parameters", "*ParametersItem"), 10: ("", "x"),
    },
    "Operation": {
        1: ("tags", "S"), 2: ("summary", "s"), 3: ("description", "s"), 5: ("operationId", "s"),
        6: ("produces", "S"), 7: ("consumes", "S"), 8: ("parameters", "*ParametersItem"),
        9: ("responses", "Responses"), 10: ("schemes", "S"), 11: ("deprecated", "b"),
        13: ("", "x"),
    },
    "BodyParameter": {
        1: ("description", "s"), 2: ("name", "s"), 3: ("in", "s"), 4: ("required", "b"),
        5: ("schema", "Schema"), 6: ("", "x"),
    },
    "QueryParameterSubSchema": {
        1: ("required", "b"), 2: ("in", "s"), 3: ("description", "s"), 4: ("name", "s"),
        5: ("allowEmptyValue", "b"), **_numbered(6, _VALIDATIONS), 23: ("", "x"),
    },
    "PathParameterSubSchema": {
        1: ("required", "b"), 2: ("in", "s"), 3: ("description", "s"), 4: ("name", "s"),
        **_numbered(5, _VALIDATIONS), 22: ("", "x"),
    },
    "PrimitivesItems": {**_numbered(1, _VALIDATIONS), 18: ("", "x")},
    "Response": {1: ("description", "s"), 2: ("schema", "SchemaItem"), 5: ("", "x")},
    "JsonReference": {1: ("$ref", "s"), 2: ("description", "s")},
    "Schema": {
        1: ("$ref", "s"), 2: ("format", "s"), 3: ("title", "s"), 4: ("description", "s"),
        5: ("default", "a"), 6: ("multipleOf", "d"), 7: ("maximum", "d"),
        8: ("exclusiveMaximum", "b"), 9: ("minimum", "d"), 10: ("exclusiveMinimum", "b"),
        11: ("maxLength", "i"), 12: ("minLength", "i"), 13: ("pattern", "s"),
        14: ("maxItems", "i"), 15: ("minItems", "i"), 16: ("uniqueItems", "b"),
        17: ("maxProperties", "i"), 18: ("minProperties", "i"), 19: ("required", "S"),
        20: ("enum", "A"), 21: ("additionalProperties", "AdditionalPropertiesItem"),
        22: ("type", "TypeItem"), 23: ("items", "ItemsItem"), 24: ("allOf", "*Schema"),
        25: ("properties", "map:Schema"), 26: ("discriminator", "s"), 27: ("readOnly", "b"),
        30: ("example", "a"), 31: ("", "x"),
    },
}  # fmt: skip


def wire_fields(data: bytes) -> list[tuple[int, int | bytes | float]]:
    """(field number, value) of a protobuf message, in order: varints as ints,
    length-delimited as bytes, fixed64 as doubles."""
    out: list[tuple[int, int | bytes | float]] = []
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return result

    while pos < len(data):
        key = varint()
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            out.append((number, varint()))
        elif wire_type == 2:
            length = varint()
            out.append((number, data[pos : pos + length]))
            pos += length
        elif wire_type == 1:
            out.append((number, struct.unpack("<d", data[pos : pos + 8])[0]))
            pos += 8
        else:
            raise AssertionError(f"wire type {wire_type}")
    assert pos == len(data)
    return out


def _any(raw: bytes) -> Any:
    fields = dict(wire_fields(raw))
    assert set(fields) == {2}, "an Any carries its YAML only"
    text = fields[2]
    assert isinstance(text, bytes)
    return yaml.safe_load(text.decode())


def _named(raw: bytes) -> tuple[str, bytes]:
    fields = dict(wire_fields(raw))
    name, value = fields[1], fields.get(2, b"")
    assert isinstance(name, bytes) and isinstance(value, bytes)
    return name.decode(), value


def _only(raw: bytes) -> tuple[int, bytes]:
    """The single member of a oneof wrapper."""
    fields = wire_fields(raw)
    assert len(fields) == 1
    number, value = fields[0]
    assert isinstance(value, bytes)
    return number, value


def _parameter(raw: bytes) -> Any:
    number, value = _only(raw)  # ParametersItem
    if number == 2:
        return decode("JsonReference", value)
    number, value = _only(value)  # Parameter
    if number == 1:
        return decode("BodyParameter", value)
    number, value = _only(value)  # NonBodyParameter
    kind = {3: "QueryParameterSubSchema", 4: "PathParameterSubSchema"}[number]
    return decode(kind, value)


def _paths(raw: bytes) -> dict[str, Any]:
    entries = [_named(v) for n, v in wire_fields(raw) if n == 2 and isinstance(v, bytes)]
    return {name: decode("PathItem", value) for name, value in entries}


def _responses(raw: bytes) -> dict[str, Any]:
    entries = [_named(v) for n, v in wire_fields(raw) if n == 1 and isinstance(v, bytes)]
    return {code: decode("Response", _only(value)[1]) for code, value in entries}


def _strings(raw: bytes) -> list[str]:
    return [v.decode() for _, v in wire_fields(raw) if isinstance(v, bytes)]


def _schema_list(raw: bytes) -> list[Any]:
    return [decode("Schema", v) for _, v in wire_fields(raw) if isinstance(v, bytes)]


def _additional_properties(raw: bytes) -> Any:
    fields = wire_fields(raw)
    assert len(fields) == 1, "a oneof holds one member"
    number, value = fields[0]
    if number == 1:
        assert isinstance(value, bytes)
        return decode("Schema", value)
    return bool(value)


_SPECIAL_DECODERS: dict[str, Callable[[bytes], Any]] = {
    "Paths": _paths,
    "Responses": _responses,
    "ParametersItem": _parameter,
    "SchemaItem": lambda raw: decode("Schema", _only(raw)[1]),
    "TypeItem": _strings,
    "ItemsItem": _schema_list,
    "AdditionalPropertiesItem": _additional_properties,
}


def decode(message: str, raw: bytes) -> Any:
    """A gnostic message back into Swagger JSON (single types and items unwrapped)."""
    special = _SPECIAL_DECODERS.get(message)
    if special is not None:
        return special(raw)
    table = GNOSTIC[message]
    out: dict[str, Any] = {}
    for number, value in wire_fields(raw):
        name, kind = table[number]
        if kind == "x":
            assert isinstance(value, bytes)
            key, any_raw = _named(value)
            out[key] = _any(any_raw)
        elif kind == "s":
            assert isinstance(value, bytes)
            out[name] = value.decode()
        elif kind == "S":
            assert isinstance(value, bytes)
            out.setdefault(name, []).append(value.decode())
        elif kind == "b":
            out[name] = bool(value)
        elif kind in ("i", "d"):
            out[name] = value
        elif kind == "a":
            assert isinstance(value, bytes)
            out[name] = _any(value)
        elif kind == "A":
            assert isinstance(value, bytes)
            out.setdefault(name, []).append(_any(value))
        elif kind.startswith("map:"):
            assert isinstance(value, bytes)
            entries = out.setdefault(name, {})
            for _, entry in wire_fields(value):
                assert isinstance(entry, bytes)
                key, item = _named(entry)
                entries[key] = decode(kind[4:], item)
        elif kind.startswith("*"):
            assert isinstance(value, bytes)
            out.setdefault(name, []).append(decode(kind[1:], value))
        else:
            assert isinstance(value, bytes)
            out[name] = decode(kind, value)
    if isinstance(out.get("type"), list) and len(out["type"]) == 1:
        out["type"] = out["type"][0]
    if isinstance(out.get("items"), list) and message == "Schema" and len(out["items"]) == 1:
        out["items"] = out["items"][0]
    return out


def test_protobuf_decodes_back_to_the_v2_json(docs: OpenAPIDocuments) -> None:
    assert docs.v2_protobuf.content_type == V2_PROTOBUF_CONTENT_TYPE
    assert "@" not in docs.v2_protobuf.content_type
    decoded = decode("Document", docs.v2_protobuf.body)
    assert decoded == v2(docs)


def test_protobuf_of_a_crd_document_decodes_back() -> None:
    documents = build_documents((*CORE, CRONTABS))
    assert decode("Document", documents.v2_protobuf.body) == json.loads(documents.v2_json.body)


def test_protobuf_details() -> None:
    # Swagger "2.0" is field 1; a oneof boolean is written even when false; numbers.
    assert encode_document({"swagger": "2.0"}) == b"\x0a\x032.0"
    document = {
        "swagger": "2.0",
        "definitions": {
            "X": {"type": "object", "additionalProperties": False, "maximum": 2.5,
                  "maxLength": 3, "enum": ["a", 1], "x-kubernetes-map-type": "atomic"},
        },
    }  # fmt: skip
    assert decode("Document", encode_document(document)) == document
    with pytest.raises(ValueError, match=r"\$\.definitions\.X\.oneOf"):
        encode_document({"definitions": {"X": {"oneOf": []}}})
    with pytest.raises(ValueError, match="parameter location"):
        encode_document({"paths": {"/": {"get": {"parameters": [{"in": "cookie"}]}}}})


def test_vendor_extensions_are_yaml_kubectl_reads() -> None:
    """kubectl unmarshals each extension's YAML (go-yaml v2) into plain values."""
    documents = build_documents(CORE)
    raw = dict(wire_fields(documents.v2_protobuf.body))[8]  # paths
    assert isinstance(raw, bytes)
    for number, item in wire_fields(raw):
        assert isinstance(item, bytes) and number == 2
        name, path_item = _named(item)
        patch = dict(wire_fields(path_item)).get(8)
        if patch is None:
            continue
        assert isinstance(patch, bytes)
        extensions = [_named(v) for n, v in wire_fields(patch) if n == 13 and isinstance(v, bytes)]
        texts = {key: dict(wire_fields(value))[2] for key, value in extensions}
        assert texts["x-kubernetes-action"] == b'"patch"'
        gvk_text = texts["x-kubernetes-group-version-kind"]
        assert isinstance(gvk_text, bytes)
        assert yaml.safe_load(gvk_text)["version"] == "v1", name


# -- hashes, negotiation, cache -----------------------------------------------------------


def test_hashes_are_sha512_of_the_bytes(docs: OpenAPIDocuments) -> None:
    for document in (docs.v2_json, docs.v2_protobuf, docs.v3_index, *docs.v3_documents.values()):
        assert document.hash == hashlib.sha512(document.body).hexdigest().upper()
        assert document.etag == f'"{document.hash}"'
    index = json.loads(docs.v3_index.body)
    core = docs.v3("api/v1")
    assert core is not None
    assert index["paths"]["api/v1"]["serverRelativeURL"] == f"/openapi/v3/api/v1?hash={core.hash}"
    assert docs.v3_url("/openapi/v3/api/v1") == docs.v3_url("api/v1")
    assert docs.v3("/openapi/v3/api/v1") is core


PROTOBUF_ASKED = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (PROTOBUF_ASKED, "protobuf"),
        (V2_PROTOBUF_CONTENT_TYPE, "protobuf"),
        ("application/json", "json"),
        (None, "json"),
        ("", "json"),
        ("*/*", "json"),
        ("application/*", "json"),
        ("text/html", None),
        (f"application/json;q=0.5, {PROTOBUF_ASKED}", "protobuf"),
        ("application/json;q=0", None),
        (f"*/*;q=0.1, {V2_PROTOBUF_CONTENT_TYPE};q=0.9", "protobuf"),
        (f"{PROTOBUF_ASKED}, application/json", "protobuf"),
    ],
)
def test_v2_negotiation(docs: OpenAPIDocuments, accept: str | None, expected: str | None) -> None:
    chosen = docs.v2(accept)
    want = {"json": docs.v2_json, "protobuf": docs.v2_protobuf, None: None}[expected]
    assert chosen is want
    assert docs.accepts_v3("application/json, */*")
    assert not docs.accepts_v3("application/vnd.kubernetes.protobuf")


def test_documents_are_cached_per_set_of_resources() -> None:
    first = openapi_documents(CORE)
    assert openapi_documents(tuple(reversed(CORE))) is first
    with_crd = openapi_documents((*CORE, CRONTABS))
    assert with_crd is not first
    assert openapi_documents(CORE) is first
    changed = CrdSpec(
        "crontabs", "crontab", "CronTab", group="stable.example.com",
        openapi_schema={**CRONTAB_SCHEMA, "description": "changed"},
    )  # fmt: skip
    assert openapi_documents((*CORE, changed)) is not with_crd
    assert openapi.CACHE_SIZE >= 2


def test_a_crd_schema_replaces_the_builtin_one() -> None:
    documents = build_documents((*CORE, CRONTABS))
    assert set(documents.v3_documents) == {"api/v1", "apis/stable.example.com/v1"}
    document = v3(documents, "apis/stable.example.com/v1")
    schemas = document["components"]["schemas"]
    kind = schemas["com.example.stable.v1.CronTab"]
    assert kind["x-kubernetes-group-version-kind"] == [
        {"group": "stable.example.com", "kind": "CronTab", "version": "v1"}
    ]
    assert kind["properties"]["metadata"] == {
        "allOf": [{"$ref": "#/components/schemas/" + META + "ObjectMeta"}]
    }
    assert kind["properties"]["apiVersion"] == {"type": "string"}
    assert kind["properties"]["spec"] == CRONTAB_SCHEMA["properties"]["spec"]
    assert schemas["com.example.stable.v1.CronTabList"]["required"] == ["items"]
    assert META + "ObjectMeta" in schemas and META + "ListMeta" in schemas
    paths = document["paths"]
    item = paths["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]
    assert item["patch"]["operationId"] == "patchStableExampleComV1NamespacedCronTab"
    # No strategic merge patch for custom resources, as in Kubernetes; apply for all.
    assert list(item["patch"]["requestBody"]["content"]) == [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ]
    spec = json.loads(documents.v2_json.body)["definitions"]["com.example.stable.v1.CronTab"]
    v2_spec = spec["properties"]["spec"]["properties"]
    assert v2_spec["port"]["type"] == "string"
    assert "type" not in v2_spec["replicas"]  # nullable: null must validate
    assert "properties" not in v2_spec["extra"]  # unknown fields kept: not kubectl's error
    # The core documents are unchanged by the CRD, so their hash is too.
    assert documents.v3("api/v1") == build_documents(CORE).v3("api/v1")


def test_a_named_group_gets_a_document_of_its_own() -> None:
    leases = ResourceSpec("leases", "lease", "Lease", group="coordination.k8s.io")
    documents = build_documents((*CORE, leases))
    index = json.loads(documents.v3_index.body)
    assert list(index["paths"]) == ["api/v1", "apis/coordination.k8s.io/v1"]
    document = v3(documents, "apis/coordination.k8s.io/v1")
    schemas = document["components"]["schemas"]
    assert schemas["io.k8s.api.coordination.v1.Lease"][GVK] == [
        {"group": "coordination.k8s.io", "kind": "Lease", "version": "v1"}
    ]
    assert schemas[META + "Status"][GVK] == [
        {"group": "coordination.k8s.io", "kind": "Status", "version": "v1"}
    ]
    assert not any(name.startswith(V1) for name in schemas)
    item = document["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]
    assert item["patch"]["operationId"] == "patchCoordinationV1NamespacedLease"
    assert item["patch"]["tags"] == ["coordination_v1"]
    assert "application/strategic-merge-patch+json" in item["patch"]["requestBody"]["content"]
    swagger = json.loads(documents.v2_json.body)
    assert swagger["definitions"][META + "Status"][GVK] == [
        {"group": "", "kind": "Status", "version": "v1"},
        {"group": "coordination.k8s.io", "kind": "Status", "version": "v1"},
    ]


def test_crd_messages_have_components_as_kubernetes_publishes_them() -> None:
    # Named by the Go path (apiextensions-apiserver), not the protobuf package; float64 is
    # a double number; the hand-written JSON types have no type, as Kubernetes' have none.
    from watchcache.apiserver import openapi_schemas

    props = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"
    assert component_name(props) == (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"
    )
    members = openapi_schemas._message_component(props)["properties"]
    assert members["maximum"] == {"type": "number", "format": "double"}
    assert members["items"] == {
        "allOf": [{"$ref": "#/components/schemas/" + component_name(props + "OrArray")}]
    }
    for special in ("OrArray", "OrBool", "OrStringArray"):
        assert openapi_schemas._message_component(props + special) == {}
    assert openapi_schemas._message_component(props.replace("JSONSchemaProps", "JSON")) == {}
