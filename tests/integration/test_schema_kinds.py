"""Kinds declared with an OpenAPI v3 schema, as a CRD declares them: bodies pruned and
defaulted by the schema, validated against it, status and scale subresources, and a second
served version over the same stored objects."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from apiserver_fixture import RunningApiServer, running_apiserver

from watchcache import ResourceSpec
from watchcache.etcd.process import EtcdCluster
from watchcache.registry.custom_resource import InvalidSchemaError
from watchcache.registry.resources import DEFAULT_RESOURCES, ScaleSubresource

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["color"],
            "properties": {
                "color": {"type": "string", "enum": ["red", "blue"]},
                "size": {"type": "integer", "default": 3, "minimum": 1},
                "replicas": {"type": "integer"},
                "selector": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {
            "type": "object",
            "properties": {"replicas": {"type": "integer"}, "selector": {"type": "string"}},
        },
    },
}
SCALE = ScaleSubresource(".spec.replicas", ".status.replicas", ".status.selector")
GIZMOS = ResourceSpec(
    "gizmos",
    "gizmo",
    "Gizmo",
    group="example.com",
    subresources=("scale", "status"),
    openapi_schema=SCHEMA,
    scale=SCALE,
)
GIZMOS_BETA = ResourceSpec(
    "gizmos",
    "gizmo",
    "Gizmo",
    group="example.com",
    version="v1beta1",
    storage_version="v1",
    subresources=("scale", "status"),
    openapi_schema=SCHEMA,
    scale=SCALE,
    deprecation_warning="example.com/v1beta1 Gizmo is deprecated; use example.com/v1 Gizmo",
)
V1 = "/apis/example.com/v1/namespaces/default/gizmos"
BETA = "/apis/example.com/v1beta1/namespaces/default/gizmos"
MERGE = {"Content-Type": "application/merge-patch+json"}


def gizmo(name: str, version: str = "v1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"example.com/{version}",
        "kind": "Gizmo",
        "metadata": {"name": name},
        "spec": {"color": "red", **spec},
    }


@pytest.fixture
async def api(etcd: EtcdCluster) -> AsyncIterator[RunningApiServer]:
    resources = (*DEFAULT_RESOURCES, GIZMOS, GIZMOS_BETA)
    async with running_apiserver(etcd.endpoints, resources, min_request_timeout=5) as running:
        yield running


async def stored(api: RunningApiServer, name: str) -> dict[str, Any]:
    kv = await api.client.get(f"/registry/example.com/gizmos/default/{name}".encode())
    assert kv is not None
    value: dict[str, Any] = json.loads(kv.value)
    return value


async def test_unknown_fields_are_pruned_and_reported_as_field_validation_asks(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    body = gizmo("g1", bogus=1, extra={"anything": {"goes": True}}, labels={"a": "b"})
    made = await http.post(V1, json=body)
    assert made.status_code == 201, made.text
    assert made.headers.get_list("warning") == ['299 - "unknown field \\"spec.bogus\\""']
    spec = made.json()["spec"]
    assert "bogus" not in spec and spec["extra"] == {"anything": {"goes": True}}
    assert spec["size"] == 3  # the schema's default
    assert "bogus" not in (await stored(api, "g1"))["spec"]
    strict = await http.post(
        V1, json=gizmo("g2", bogus=1, other=2), params={"fieldValidation": "Strict"}
    )
    assert strict.status_code == 400, strict.text
    assert strict.json()["message"] == (
        'Gizmo in version "v1" cannot be handled as a Gizmo: strict decoding error: '
        'unknown field "spec.bogus", unknown field "spec.other"'
    )
    assert await api.client.get(b"/registry/example.com/gizmos/default/g2") is None
    # A patch cannot add what a body could not.
    patched = await http.patch(
        f"{V1}/g1",
        content=b'{"spec":{"sneaky":1}}',
        headers=MERGE,
        params={"fieldValidation": "Strict"},
    )
    assert patched.status_code == 422, patched.text
    assert 'unknown field \\"spec.sneaky\\"' in patched.json()["message"] or (
        "spec.sneaky" in patched.json()["message"]
    )


async def test_objects_are_validated_against_the_schema(http: httpx.AsyncClient) -> None:
    bad = await http.post(V1, json=gizmo("g1", color="purple", size=0))
    assert bad.status_code == 422, bad.text
    status = bad.json()
    assert status["reason"] == "Invalid"
    causes = {(c["field"], c["message"]) for c in status["details"]["causes"]}
    assert causes == {
        ("spec.color", 'Unsupported value: "purple": supported values: "red", "blue"'),
        ("spec.size", "Invalid value: 0: spec.size in body should be greater than or equal to 1"),
    }
    assert status["details"] == {**status["details"], "name": "g1", "group": "example.com"}
    missing = await http.post(V1, json={**gizmo("g2"), "spec": {}})
    assert missing.status_code == 422
    assert missing.json()["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.color"}
    ]
    smp = await http.patch(
        f"{V1}/g1",
        content=b"{}",
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert smp.status_code == 415, smp.text


async def test_status_is_a_subresource_and_generation_follows_the_spec(
    http: httpx.AsyncClient,
) -> None:
    made = await http.post(V1, json={**gizmo("g1"), "status": {"replicas": 9}})
    assert made.status_code == 201
    assert "status" not in made.json() and made.json()["metadata"]["generation"] == 1
    status = await http.patch(
        f"{V1}/g1/status", content=b'{"status":{"replicas":2}}', headers=MERGE
    )
    assert status.json()["status"] == {"replicas": 2}
    assert status.json()["metadata"]["generation"] == 1
    main = await http.patch(
        f"{V1}/g1", content=b'{"spec":{"size":5},"status":{"replicas":7}}', headers=MERGE
    )
    assert main.json()["status"] == {"replicas": 2} and main.json()["metadata"]["generation"] == 2
    same = await http.patch(f"{V1}/g1", content=b'{"metadata":{"labels":{"a":"b"}}}', headers=MERGE)
    assert same.json()["metadata"]["generation"] == 2


async def test_scale_reads_and_writes_the_declared_paths(http: httpx.AsyncClient) -> None:
    await http.post(V1, json=gizmo("g1", replicas=2))
    await http.patch(
        f"{V1}/g1/status",
        content=b'{"status":{"replicas":1,"selector":"app=g1"}}',
        headers=MERGE,
    )
    scale = (await http.get(f"{V1}/g1/scale")).json()
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 1, "selector": "app=g1"}
    assert scale["metadata"]["name"] == "g1" and scale["metadata"]["namespace"] == "default"
    put = await http.put(
        f"{V1}/g1/scale",
        json={**scale, "spec": {"replicas": 4}},
    )
    assert put.status_code == 200, put.text
    assert put.json()["spec"] == {"replicas": 4}
    stale = await http.put(f"{V1}/g1/scale", json={**scale, "spec": {"replicas": 5}})
    assert stale.status_code == 409, stale.text
    patched = await http.patch(f"{V1}/g1/scale", content=b'{"spec":{"replicas":6}}', headers=MERGE)
    assert patched.status_code == 200, patched.text
    obj = (await http.get(f"{V1}/g1")).json()
    assert obj["spec"]["replicas"] == 6 and obj["metadata"]["generation"] == 3
    negative = await http.patch(
        f"{V1}/g1/scale", content=b'{"spec":{"replicas":-1}}', headers=MERGE
    )
    assert negative.status_code == 422, negative.text
    assert negative.json()["details"]["causes"][0]["field"] == "spec.replicas"
    assert (await http.get(f"{V1}/nope/scale")).status_code == 404


async def test_a_second_version_serves_the_same_objects(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    made = await http.post(BETA, json=gizmo("g1", version="v1beta1"))
    assert made.status_code == 201, made.text
    assert made.json()["apiVersion"] == "example.com/v1beta1"
    assert made.headers.get_list("warning") == [
        '299 - "example.com/v1beta1 Gizmo is deprecated; use example.com/v1 Gizmo"'
    ]
    assert (await stored(api, "g1"))["apiVersion"] == "example.com/v1"
    await http.post(V1, json=gizmo("g2"))
    for base, version in ((V1, "v1"), (BETA, "v1beta1")):
        for _ in range(50):
            listed = (await http.get(base)).json()
            if len(listed["items"]) == 2:
                break
            await asyncio.sleep(0.05)
        assert listed["apiVersion"] == f"example.com/{version}"
        assert {i["apiVersion"] for i in listed["items"]} == {f"example.com/{version}"}
        got = (await http.get(f"{base}/g2")).json()
        assert got["apiVersion"] == f"example.com/{version}"
    updated = await http.patch(f"{BETA}/g2", content=b'{"spec":{"size":4}}', headers=MERGE)
    assert updated.json()["apiVersion"] == "example.com/v1beta1"
    assert (await stored(api, "g2"))["apiVersion"] == "example.com/v1"


async def test_defaults_apply_to_objects_stored_without_them(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    raw = {
        "apiVersion": "example.com/v1",
        "kind": "Gizmo",
        "metadata": {"name": "old", "namespace": "default", "uid": "u"},
        "spec": {"color": "blue"},
    }
    await api.client.put(b"/registry/example.com/gizmos/default/old", json.dumps(raw).encode())
    for _ in range(50):
        got = await http.get(f"{V1}/old")
        if got.status_code == 200:
            break
        await asyncio.sleep(0.05)
    assert got.json()["spec"] == {"color": "blue", "size": 3}


async def test_a_schema_that_is_not_structural_is_refused(api: RunningApiServer) -> None:
    broken = ResourceSpec(
        "broken",
        "broken",
        "Broken",
        group="example.com",
        openapi_schema={"type": "object", "properties": {"spec": {}}},
    )
    with pytest.raises(InvalidSchemaError, match=r"properties\[spec\]\.type: Required value"):
        await api.server.add_resource(broken)
    assert "broken.example.com" not in api.server.resources


async def test_legacy_discovery_prefers_the_highest_version_and_names_the_scale_kind(
    http: httpx.AsyncClient,
) -> None:
    group = (await http.get("/apis/example.com")).json()
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
    assert group["preferredVersion"]["version"] == "v1"
    listed = (await http.get("/apis/example.com/v1beta1")).json()["resources"]
    scale = next(r for r in listed if r["name"] == "gizmos/scale")
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    status = next(r for r in listed if r["name"] == "gizmos/status")
    assert "group" not in status and status["kind"] == "Gizmo"
