"""Server-side apply and managedFields over HTTP against real etcd: create by apply, merge
by the kind's schema, ownership per manager and operation, conflicts and force, removal
of fields a manager stopped applying, subresources, dry run, and the request errors
Kubernetes gives."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from apiserver_fixture import RunningApiServer

CM = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
NAMESPACES = "/api/v1/namespaces"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
MERGE = {"Content-Type": "application/merge-patch+json"}


def configmap(name: str, data: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, **meta},
    }
    if data is not None:
        out["data"] = data
    return out


async def apply(
    http: httpx.AsyncClient,
    path: str,
    body: dict[str, Any] | str,
    manager: str,
    **params: str,
) -> httpx.Response:
    content = body if isinstance(body, str) else json.dumps(body)
    return await http.patch(
        path, content=content, headers=APPLY, params={"fieldManager": manager, **params}
    )


def entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list(obj["metadata"].get("managedFields") or [])


def fields_of(obj: dict[str, Any], manager: str, operation: str = "Apply") -> dict[str, Any]:
    for entry in entries(obj):
        if entry.get("manager") == manager and entry["operation"] == operation:
            return dict(entry["fieldsV1"])
    raise AssertionError(f"no {operation} entry of {manager} in {entries(obj)}")


async def test_apply_creates_then_merges_and_records_ownership(
    http: httpx.AsyncClient,
) -> None:
    made = await apply(http, f"{CM}/ssa", configmap("ssa", {"a": "1"}, labels={"x": "y"}), "alpha")
    assert made.status_code == 201, made.text
    obj = made.json()
    assert obj["data"] == {"a": "1"} and obj["metadata"]["labels"] == {"x": "y"}
    [entry] = entries(obj)
    assert entry["manager"] == "alpha" and entry["operation"] == "Apply"
    assert entry["apiVersion"] == "v1" and entry["fieldsType"] == "FieldsV1"
    assert entry["time"].endswith("Z")
    assert entry["fieldsV1"] == {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:x": {}}}}

    again = await apply(http, f"{CM}/ssa", configmap("ssa", {"a": "1"}, labels={"x": "y"}), "alpha")
    assert again.status_code == 200, again.text
    assert again.json()["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]

    beta = await apply(http, f"{CM}/ssa", configmap("ssa", {"b": "2"}), "beta")
    assert beta.status_code == 200, beta.text
    merged = beta.json()
    assert merged["data"] == {"a": "1", "b": "2"}
    assert fields_of(merged, "beta") == {"f:data": {"f:b": {}}}
    assert fields_of(merged, "alpha") == entry["fieldsV1"]


async def test_a_conflict_is_a_409_per_field_and_force_takes_the_field(
    http: httpx.AsyncClient,
) -> None:
    await apply(http, f"{CM}/fight", configmap("fight", {"a": "1", "b": "1"}), "alpha")
    refused = await apply(http, f"{CM}/fight", configmap("fight", {"a": "2"}), "beta")
    assert refused.status_code == 409, refused.text
    status = refused.json()
    assert status["reason"] == "Conflict"
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "alpha": .data.a'
    assert status["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "alpha"', "field": ".data.a"}
    ]

    both = await apply(http, f"{CM}/fight", configmap("fight", {"a": "2", "b": "2"}), "beta")
    assert both.status_code == 409
    assert both.json()["message"] == (
        'Apply failed with 2 conflicts: conflicts with "alpha":\n- .data.a\n- .data.b'
    )
    assert len(both.json()["details"]["causes"]) == 2

    forced = await apply(http, f"{CM}/fight", configmap("fight", {"a": "2"}), "beta", force="true")
    assert forced.status_code == 200, forced.text
    obj = forced.json()
    assert obj["data"] == {"a": "2", "b": "1"}
    assert fields_of(obj, "beta") == {"f:data": {"f:a": {}}}
    assert fields_of(obj, "alpha") == {"f:data": {"f:b": {}}}


async def test_the_same_value_is_shared_and_a_dropped_field_is_removed(
    http: httpx.AsyncClient,
) -> None:
    await apply(http, f"{CM}/share", configmap("share", {"a": "1", "b": "1"}), "alpha")
    shared = await apply(http, f"{CM}/share", configmap("share", {"a": "1"}), "beta")
    assert shared.status_code == 200, shared.text
    # alpha stops applying a (beta still owns it: it stays) and b (nobody else: it goes).
    dropped = await apply(http, f"{CM}/share", configmap("share"), "alpha")
    assert dropped.status_code == 200, dropped.text
    assert dropped.json()["data"] == {"a": "1"}
    assert all(e["manager"] != "alpha" for e in entries(dropped.json()))


async def test_non_apply_writes_are_recorded_under_their_manager(
    http: httpx.AsyncClient,
) -> None:
    created = await http.post(
        CM, json=configmap("upd", {"a": "1"}), params={"fieldManager": "maker"}
    )
    assert created.status_code == 201, created.text
    assert fields_of(created.json(), "maker", "Update") == {"f:data": {".": {}, "f:a": {}}}
    [entry] = entries(created.json())
    assert entry["apiVersion"] == "v1" and "subresource" not in entry

    patched = await http.patch(
        f"{CM}/upd",
        json={"data": {"b": "2"}},
        headers={**MERGE, "User-Agent": "my-controller/1.2 (linux/amd64)"},
    )
    assert patched.status_code == 200, patched.text
    assert fields_of(patched.json(), "my-controller", "Update") == {"f:data": {"f:b": {}}}

    conflict = await apply(http, f"{CM}/upd", configmap("upd", {"b": "3"}), "applier")
    assert conflict.status_code == 409
    assert conflict.json()["details"]["causes"][0]["message"] == (
        'conflict with "my-controller" using v1'
    )

    # An update that lists no managedFields keeps them; an empty list resets them.
    current = (await http.get(f"{CM}/upd")).json()
    current["metadata"].pop("managedFields")
    current["data"]["c"] = "3"
    kept = await http.put(f"{CM}/upd", json=current, params={"fieldManager": "maker"})
    assert kept.status_code == 200, kept.text
    assert {e["manager"] for e in entries(kept.json())} == {"maker", "my-controller"}
    reset = kept.json()
    reset["metadata"]["managedFields"] = []
    cleared = await http.put(f"{CM}/upd", json=reset)
    assert cleared.status_code == 200, cleared.text
    assert "managedFields" not in cleared.json()["metadata"]


async def test_an_object_stored_untracked_is_adopted_before_the_first_apply(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    legacy = configmap("legacy", {"old": "1"}, uid="6f1b3c1e-0000-4000-8000-000000000001")
    legacy["metadata"].update(namespace="default", creationTimestamp="2026-01-01T00:00:00Z")
    await api.client.create(b"/registry/configmaps/default/legacy", json.dumps(legacy).encode())
    put = await http.get(f"{CM}/legacy")
    assert put.status_code == 200
    # Updates of an untracked object stay untracked...
    changed = await http.patch(f"{CM}/legacy", json={"data": {"old": "2"}}, headers=MERGE)
    assert "managedFields" not in changed.json()["metadata"]
    # ...until the first apply, which records what was there as before-first-apply.
    applied = await apply(http, f"{CM}/legacy", configmap("legacy", {"new": "1"}), "alpha")
    assert applied.status_code == 200, applied.text
    obj = applied.json()
    assert fields_of(obj, "before-first-apply", "Update") == {"f:data": {".": {}, "f:old": {}}}
    assert fields_of(obj, "alpha") == {"f:data": {"f:new": {}}}


async def test_status_is_owned_through_its_subresource(http: httpx.AsyncClient) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ssa-status"}}
    made = await apply(http, f"{NAMESPACES}/ssa-status", ns, "alpha")
    assert made.status_code == 201, made.text
    status = {**ns, "status": {"conditions": [{"type": "Custom", "status": "True"}]}}
    # Through the main resource the status is ignored...
    ignored = await apply(http, f"{NAMESPACES}/ssa-status", status, "alpha")
    assert ignored.status_code == 200, ignored.text
    assert "conditions" not in (ignored.json().get("status") or {})
    # ...through /status it is written and owned by an entry naming the subresource.
    written = await apply(http, f"{NAMESPACES}/ssa-status/status", status, "alpha")
    assert written.status_code == 200, written.text
    obj = written.json()
    assert obj["status"]["conditions"][0]["type"] == "Custom"
    [entry] = [e for e in entries(obj) if e.get("subresource") == "status"]
    assert entry["manager"] == "alpha" and entry["operation"] == "Apply"
    assert "f:status" in entry["fieldsV1"]


async def test_pod_containers_merge_by_name(http: httpx.AsyncClient) -> None:
    def pod(*containers: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web"},
            "spec": {"containers": list(containers)},
        }

    made = await apply(http, f"{PODS}/web", pod({"name": "app", "image": "app:1"}), "alpha")
    assert made.status_code == 201, made.text
    sidecar = await apply(
        http,
        f"{PODS}/web",
        pod({"name": "log", "image": "log:1", "ports": [{"containerPort": 80}]}),
        "beta",
    )
    assert sidecar.status_code == 200, sidecar.text
    obj = sidecar.json()
    assert [c["name"] for c in obj["spec"]["containers"]] == ["app", "log"]
    beta = fields_of(obj, "beta")["f:spec"]["f:containers"]
    assert set(beta) == {'k:{"name":"log"}'}
    port_keys = set(beta['k:{"name":"log"}']["f:ports"])
    assert port_keys == {'k:{"containerPort":80,"protocol":"TCP"}'}


async def test_dry_run_apply_writes_nothing(api: RunningApiServer, http: httpx.AsyncClient) -> None:
    before = await api.client.current_revision(b"/registry")
    made = await apply(http, f"{CM}/dry", configmap("dry", {"a": "1"}), "alpha", dryRun="All")
    assert made.status_code == 201, made.text
    assert entries(made.json())[0]["manager"] == "alpha"
    assert "resourceVersion" not in made.json()["metadata"]
    assert await api.client.current_revision(b"/registry") == before
    assert (await http.get(f"{CM}/dry")).status_code == 404


@pytest.mark.parametrize(
    ("params", "body", "headers", "code", "message"),
    [
        (
            {},
            configmap("bad"),
            APPLY,
            422,
            "fieldManager: Required value: is required for apply patch",
        ),
        (
            {"fieldManager": "m", "force": "true"},
            {"data": {}},
            MERGE,
            422,
            "force: Forbidden: may not be specified for non-apply patch",
        ),
        (
            {"fieldManager": "m"},
            {**configmap("bad"), "metadata": {"name": "bad", "managedFields": []}},
            APPLY,
            400,
            "metadata.managedFields must be nil",
        ),
        (
            {"fieldManager": "m"},
            {**configmap("bad"), "kind": "Secret"},
            APPLY,
            400,
            "invalid object type: /v1, Kind=Secret",
        ),
        ({"fieldManager": "m"}, "a: [", APPLY, 400, "error decoding patch"),
        ({"fieldManager": "m"}, configmap("other"), APPLY, 400, "does not match the name"),
        (
            {"fieldManager": "m"},
            {**configmap("bad"), "spec": {"x": 1}},
            APPLY,
            400,
            ".spec: field not declared in schema",
        ),
    ],
)
async def test_bad_apply_requests_get_kubernetes_errors(  # noqa: PLR0917 (parametrized)
    http: httpx.AsyncClient,
    params: dict[str, str],
    body: dict[str, Any] | str,
    headers: dict[str, str],
    code: int,
    message: str,
) -> None:
    content = body if isinstance(body, str) else json.dumps(body)
    answer = await http.patch(f"{CM}/bad", content=content, headers=headers, params=params)
    assert answer.status_code == code, answer.text
    assert message in answer.json()["message"], answer.text
    assert (await http.get(f"{CM}/bad")).status_code == 404


GADGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "parts": {
                                        "type": "array",
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["name"],
                                        "items": {
                                            "type": "object",
                                            "required": ["name"],
                                            "properties": {
                                                "name": {"type": "string"},
                                                "size": {"type": "integer"},
                                            },
                                        },
                                    },
                                    "tags": {
                                        "type": "array",
                                        "x-kubernetes-list-type": "set",
                                        "items": {"type": "string"},
                                    },
                                    "command": {"type": "array", "items": {"type": "string"}},
                                    "extra": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {"ready": {"type": "boolean"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}
GADGETS = "/apis/example.com/v1/namespaces/default/gadgets"


async def test_a_custom_kind_merges_by_its_schema_markers(http: httpx.AsyncClient) -> None:
    made = await http.post(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=GADGET_CRD
    )
    assert made.status_code == 201, made.text
    for _ in range(100):
        if (await http.get(GADGETS)).status_code == 200:
            break
        await asyncio.sleep(0.05)

    def gadget(**spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "example.com/v1",
            "kind": "Gadget",
            "metadata": {"name": "g"},
            "spec": spec,
        }

    first = await apply(
        http,
        f"{GADGETS}/g",
        gadget(
            parts=[{"name": "a", "size": 1}], tags=["x"], command=["run"], extra={"k": {"v": 1}}
        ),
        "alpha",
    )
    assert first.status_code == 201, first.text
    second = await apply(
        http,
        f"{GADGETS}/g",
        gadget(parts=[{"name": "b", "size": 2}], tags=["y"], extra={"k": {"w": 2}}),
        "beta",
    )
    assert second.status_code == 200, second.text
    spec = second.json()["spec"]
    # map and set lists merge element by element; the preserved subtree merges as maps.
    assert spec["parts"] == [{"name": "a", "size": 1}, {"name": "b", "size": 2}]
    assert spec["tags"] == ["x", "y"]
    assert spec["extra"] == {"k": {"v": 1, "w": 2}}
    beta = fields_of(second.json(), "beta")["f:spec"]
    assert set(beta["f:parts"]) == {'k:{"name":"b"}'}
    assert set(beta["f:tags"]) == {'v:"y"'}
    # An atomic list belongs to one manager whole: another value is a conflict.
    atomic = await apply(http, f"{GADGETS}/g", gadget(command=["stop"]), "beta")
    assert atomic.status_code == 409, atomic.text
    assert atomic.json()["details"]["causes"][0]["field"] == ".spec.command"
    # Status through the main resource is not the applier's.
    status = await apply(http, f"{GADGETS}/g", {**gadget(), "status": {"ready": True}}, "gamma")
    assert status.status_code == 200, status.text
    assert "status" not in status.json()
