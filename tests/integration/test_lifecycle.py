"""The object lifecycle over HTTP against real etcd, as kube-apiserver's generic registry
and kube-controller-manager's namespace controller and garbage collector run it:
finalizers and deletionTimestamp, propagation policies, preconditions, generation, the
status subresource, deletecollection, Secrets' stringData, and what DELETE answers."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from apiserver_fixture import RunningApiServer

CM = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
MERGE = {"Content-Type": "application/merge-patch+json"}


def configmap(name: str, **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **metadata}}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec},
    }


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 15.0) -> None:
    """Wait until ``check()`` holds (controllers act asynchronously)."""
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.05)


async def gone(http: httpx.AsyncClient, path: str) -> bool:
    return (await http.get(path)).status_code == 404


async def stored(api: RunningApiServer, key: str) -> dict[str, Any] | None:
    kv = await api.client.get(key.encode())
    return None if kv is None else dict(json.loads(kv.value))


# -- finalizers and deletionTimestamp ------------------------------------------------------


async def test_delete_of_an_object_with_finalizers_marks_it_and_the_last_removal_deletes_it(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    created = await http.post(CM, json=configmap("fin", finalizers=["example.com/hold"]))
    assert created.status_code == 201, created.text

    deleted = await http.delete(f"{CM}/fin")
    assert deleted.status_code == 200, deleted.text
    body = deleted.json()
    # The object, not a Status: it is still there, marked.
    assert body["kind"] == "ConfigMap"
    assert body["metadata"]["deletionTimestamp"].endswith("Z")
    assert body["metadata"]["deletionGracePeriodSeconds"] == 0
    assert body["metadata"]["finalizers"] == ["example.com/hold"]
    assert (await http.get(f"{CM}/fin")).status_code == 200

    # A second DELETE changes nothing and answers the same object.
    again = await http.delete(f"{CM}/fin")
    assert again.status_code == 200
    assert again.json()["metadata"]["deletionTimestamp"] == body["metadata"]["deletionTimestamp"]
    assert again.json()["metadata"]["resourceVersion"] == body["metadata"]["resourceVersion"]

    # Once deletion has started, finalizers may go but not come.
    current = (await http.get(f"{CM}/fin")).json()
    current["metadata"]["finalizers"].append("example.com/late")
    refused = await http.put(f"{CM}/fin", json=current)
    assert refused.status_code == 422, refused.text
    cause = refused.json()["details"]["causes"][0]
    assert cause["field"] == "metadata.finalizers"
    assert cause["message"] == (
        "Forbidden: no new finalizers can be added if the object is being deleted, found new "
        'finalizers []string{"example.com/late"}'
    )
    # ... and deletionTimestamp is the server's, whatever the body says.
    current = (await http.get(f"{CM}/fin")).json()
    current["metadata"]["deletionTimestamp"] = "2000-01-01T00:00:00Z"
    current["metadata"]["labels"] = {"touched": "yes"}
    kept = await http.put(f"{CM}/fin", json=current)
    assert kept.status_code == 200, kept.text
    assert kept.json()["metadata"]["deletionTimestamp"] == body["metadata"]["deletionTimestamp"]

    # Removing the last finalizer deletes it.
    released = await http.patch(
        f"{CM}/fin",
        content=b'{"metadata":{"finalizers":null}}',
        headers=MERGE,
    )
    assert released.status_code == 200, released.text
    assert await gone(http, f"{CM}/fin")
    assert await stored(api, "/registry/configmaps/default/fin") is None


async def test_the_watch_sees_modified_then_deleted_for_a_finalized_delete(
    http: httpx.AsyncClient,
) -> None:
    created = (await http.post(CM, json=configmap("w-fin", finalizers=["a.b/c"]))).json()
    rv = created["metadata"]["resourceVersion"]
    events: list[tuple[str, dict[str, Any]]] = []

    async def watch() -> None:
        params = {"watch": "1", "resourceVersion": rv, "fieldSelector": "metadata.name=w-fin"}
        async with http.stream("GET", CM, params=params) as stream:
            async for line in stream.aiter_lines():
                event = json.loads(line)
                events.append((event["type"], event["object"]))
                if event["type"] == "DELETED":
                    return

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0.2)
    assert (await http.delete(f"{CM}/w-fin")).status_code == 200
    patched = await http.patch(
        f"{CM}/w-fin", content=b'{"metadata":{"finalizers":[]}}', headers=MERGE
    )
    assert patched.status_code == 200
    await asyncio.wait_for(watcher, 10)
    assert [kind for kind, _ in events] == ["MODIFIED", "DELETED"]
    assert events[0][1]["metadata"]["deletionTimestamp"]


async def test_create_of_a_name_being_deleted_says_so(http: httpx.AsyncClient) -> None:
    await http.post(CM, json=configmap("busy", finalizers=["a.b/c"]))
    await http.delete(f"{CM}/busy")
    again = await http.post(CM, json=configmap("busy"))
    assert again.status_code == 409
    assert again.json()["message"] == 'object is being deleted: configmaps "busy" already exists'
    await http.patch(f"{CM}/busy", content=b'{"metadata":{"finalizers":null}}', headers=MERGE)


async def test_delete_preconditions_are_checked_with_kubernetes_words(
    http: httpx.AsyncClient,
) -> None:
    created = (await http.post(CM, json=configmap("pre"))).json()
    uid = created["metadata"]["uid"]
    wrong_uid = await http.request("DELETE", f"{CM}/pre", json={"preconditions": {"uid": "x"}})
    assert wrong_uid.status_code == 409
    assert wrong_uid.json()["message"] == (
        'Operation cannot be fulfilled on ConfigMap "pre": the UID in the precondition (x) '
        f"does not match the UID in record ({uid}). The object might have been deleted and "
        "then recreated"
    )
    wrong_rv = await http.request(
        "DELETE", f"{CM}/pre", json={"preconditions": {"resourceVersion": "1"}}
    )
    assert wrong_rv.status_code == 409
    right = await http.request(
        "DELETE",
        f"{CM}/pre",
        json={
            "preconditions": {"uid": uid, "resourceVersion": created["metadata"]["resourceVersion"]}
        },
    )
    assert right.status_code == 200, right.text
    assert right.json()["kind"] == "Status"
    assert right.json()["details"] == {"name": "pre", "kind": "configmaps", "uid": uid}


# -- what DELETE answers ---------------------------------------------------------------------


async def test_delete_answers_the_pod_and_the_namespace_but_a_status_for_a_configmap(
    http: httpx.AsyncClient,
) -> None:
    made = (await http.post(PODS, json=pod("p-del"))).json()
    # Not bound to a node: nothing runs it, so it goes at once, and the answer is the pod.
    answer = await http.delete(f"{PODS}/p-del")
    assert answer.status_code == 200
    assert answer.json()["kind"] == "Pod"
    assert answer.json()["metadata"]["uid"] == made["metadata"]["uid"]
    assert await gone(http, f"{PODS}/p-del")

    await http.post(CM, json=configmap("c-del"))
    status = (await http.delete(f"{CM}/c-del")).json()
    assert status["kind"] == "Status" and status["status"] == "Success"


async def test_a_pod_bound_to_a_node_is_deleted_gracefully(http: httpx.AsyncClient) -> None:
    created = await http.post(PODS, json=pod("p-grace", nodeName="node-1"))
    assert created.status_code == 201
    assert created.json()["metadata"]["generation"] == 1
    answer = (await http.delete(f"{PODS}/p-grace", params={"gracePeriodSeconds": "20"})).json()
    assert answer["metadata"]["deletionGracePeriodSeconds"] == 20
    assert answer["metadata"]["generation"] == 2
    # A shorter grace period moves it forward; zero deletes it.
    now = await http.delete(f"{PODS}/p-grace", params={"gracePeriodSeconds": "0"})
    assert now.status_code == 200
    assert await gone(http, f"{PODS}/p-grace")


# -- propagation and the garbage collector ---------------------------------------------------


async def owned(
    http: httpx.AsyncClient, name: str, owner: dict[str, Any], *, block: bool = False
) -> dict[str, Any]:
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }
    if block:
        reference["blockOwnerDeletion"] = True
    made = await http.post(CM, json=configmap(name, ownerReferences=[reference]))
    assert made.status_code == 201, made.text
    body: dict[str, Any] = made.json()
    return body


async def test_background_deletion_takes_the_dependents_with_it(http: httpx.AsyncClient) -> None:
    owner = (await http.post(CM, json=configmap("bg-owner"))).json()
    await owned(http, "bg-child-1", owner)
    await owned(http, "bg-child-2", owner)
    assert (await http.delete(f"{CM}/bg-owner")).status_code == 200
    await eventually(lambda: gone(http, f"{CM}/bg-child-1"))
    await eventually(lambda: gone(http, f"{CM}/bg-child-2"))


async def test_orphan_deletion_keeps_the_dependents_without_the_reference(
    http: httpx.AsyncClient,
) -> None:
    owner = (await http.post(CM, json=configmap("or-owner"))).json()
    await owned(http, "or-child", owner)
    marked = await http.delete(f"{CM}/or-owner", params={"propagationPolicy": "Orphan"})
    assert marked.status_code == 200
    assert marked.json()["metadata"]["finalizers"] == ["orphan"]
    await eventually(lambda: gone(http, f"{CM}/or-owner"))
    child = (await http.get(f"{CM}/or-child")).json()
    assert "ownerReferences" not in child["metadata"]


async def test_foreground_deletion_waits_for_blocking_dependents(http: httpx.AsyncClient) -> None:
    owner = (await http.post(CM, json=configmap("fg-owner"))).json()
    await owned(http, "fg-child", owner, block=True)
    marked = await http.request(
        "DELETE", f"{CM}/fg-owner", json={"propagationPolicy": "Foreground"}
    )
    assert marked.status_code == 200
    assert marked.json()["metadata"]["finalizers"] == ["foregroundDeletion"]
    await eventually(lambda: gone(http, f"{CM}/fg-child"))
    await eventually(lambda: gone(http, f"{CM}/fg-owner"))


async def test_orphan_dependents_false_is_accepted_with_202(http: httpx.AsyncClient) -> None:
    await http.post(CM, json=configmap("legacy", finalizers=["a.b/hold"]))
    answer = await http.request("DELETE", f"{CM}/legacy", json={"orphanDependents": False})
    assert answer.status_code == 202, answer.text
    await http.patch(f"{CM}/legacy", content=b'{"metadata":{"finalizers":null}}', headers=MERGE)


async def test_a_dependent_whose_owner_never_existed_is_collected(http: httpx.AsyncClient) -> None:
    ghost = {"metadata": {"name": "ghost", "uid": "00000000-0000-0000-0000-000000000000"}}
    await owned(http, "orphaned-at-birth", ghost)
    await eventually(lambda: gone(http, f"{CM}/orphaned-at-birth"))


async def test_an_owner_of_a_kind_not_served_leaves_the_dependent_alone(
    http: httpx.AsyncClient,
) -> None:
    reference = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u-1"}
    await http.post(CM, json=configmap("unverifiable", ownerReferences=[reference]))
    await asyncio.sleep(1.0)
    assert (await http.get(f"{CM}/unverifiable")).status_code == 200


# -- namespaces ------------------------------------------------------------------------------


async def test_namespace_deletion_terminates_empties_and_removes_it(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    assert (await http.post("/api/v1/namespaces", json={"metadata": {"name": "doomed"}})).is_success
    inside = "/api/v1/namespaces/doomed/configmaps"
    await http.post(inside, json=configmap("a"))
    await http.post(inside, json=configmap("held", finalizers=["example.com/hold"]))
    await http.post("/api/v1/namespaces/doomed/pods", json=pod("p"))

    answer = await http.delete("/api/v1/namespaces/doomed")
    assert answer.status_code == 200
    body = answer.json()
    assert body["kind"] == "Namespace"
    assert body["status"]["phase"] == "Terminating"
    assert body["spec"]["finalizers"] == ["kubernetes"]

    refused = await http.post(inside, json=configmap("late"))
    assert refused.status_code == 403
    status = refused.json()
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        'configmaps "late" is forbidden: unable to create new content in namespace doomed '
        "because it is being terminated"
    )
    assert status["details"]["causes"] == [
        {
            "reason": "NamespaceTerminating",
            "message": "namespace doomed is being terminated",
            "field": "metadata.namespace",
        }
    ]

    # Everything without a finalizer goes; the held configmap waits, and says so.
    await eventually(lambda: gone(http, f"{inside}/a"))
    await eventually(lambda: gone(http, "/api/v1/namespaces/doomed/pods/p"))

    async def waiting_on_the_finalizer() -> bool:
        ns = (await http.get("/api/v1/namespaces/doomed")).json()
        conditions = {c["type"]: c for c in ns["status"].get("conditions", [])}
        remaining = conditions.get("NamespaceFinalizersRemaining", {})
        return str(remaining.get("message", "")).endswith(
            "example.com/hold in 1 resource instances"
        )

    await eventually(waiting_on_the_finalizer)
    assert (await http.get("/api/v1/namespaces/doomed")).status_code == 200

    await http.patch(f"{inside}/held", content=b'{"metadata":{"finalizers":null}}', headers=MERGE)
    await eventually(lambda: gone(http, "/api/v1/namespaces/doomed"))
    assert await stored(api, "/registry/namespaces/doomed") is None


async def test_namespace_status_and_finalize_are_subresources(http: httpx.AsyncClient) -> None:
    await http.post("/api/v1/namespaces", json={"metadata": {"name": "sub-ns"}})
    status = await http.get("/api/v1/namespaces/sub-ns/status")
    assert status.status_code == 200 and status.json()["kind"] == "Namespace"
    # The main resource cannot change spec.finalizers or status ...
    ns = status.json()
    ns["spec"]["finalizers"] = []
    ns["status"]["phase"] = "Terminating"
    kept = (await http.put("/api/v1/namespaces/sub-ns", json=ns)).json()
    assert kept["spec"]["finalizers"] == ["kubernetes"]
    assert kept["status"]["phase"] == "Active"
    # ... /finalize changes spec.finalizers only.
    ns = kept
    ns["spec"]["finalizers"] = []
    ns["metadata"]["labels"] = {"ignored": "yes"}
    finalized = await http.put("/api/v1/namespaces/sub-ns/finalize", json=ns)
    assert finalized.status_code == 200, finalized.text
    assert finalized.json()["spec"].get("finalizers", []) == []
    assert "labels" not in finalized.json()["metadata"]
    assert (await http.delete("/api/v1/namespaces/sub-ns")).status_code == 200


# -- generation and status -------------------------------------------------------------------


async def test_pod_generation_and_the_status_subresource(http: httpx.AsyncClient) -> None:
    created = (await http.post(PODS, json=pod("gen"))).json()
    assert created["metadata"]["generation"] == 1
    assert created["status"] == {"phase": "Pending", "qosClass": "BestEffort"}

    labelled = await http.patch(
        f"{PODS}/gen", content=b'{"metadata":{"labels":{"a":"b"}}}', headers=MERGE
    )
    assert labelled.json()["metadata"]["generation"] == 1
    respec = await http.patch(
        f"{PODS}/gen", content=b'{"spec":{"activeDeadlineSeconds":60}}', headers=MERGE
    )
    assert respec.json()["metadata"]["generation"] == 2

    # The main resource leaves status alone ...
    ignored = await http.patch(
        f"{PODS}/gen", content=b'{"status":{"phase":"Running"}}', headers=MERGE
    )
    assert ignored.json()["status"]["phase"] == "Pending"
    # ... the status subresource changes status and nothing else.
    running = await http.patch(
        f"{PODS}/gen/status",
        content=b'{"status":{"phase":"Running"},"metadata":{"labels":{"x":"y"}},'
        b'"spec":{"activeDeadlineSeconds":5}}',
        headers=MERGE,
    )
    assert running.status_code == 200, running.text
    body = running.json()
    assert body["status"]["phase"] == "Running"
    assert body["metadata"]["labels"] == {"a": "b"}
    assert body["spec"]["activeDeadlineSeconds"] == 60
    assert body["metadata"]["generation"] == 2
    got = await http.get(f"{PODS}/gen/status")
    assert got.json()["status"]["phase"] == "Running"

    no_status = await http.get(f"{CM}/anything/status")
    assert no_status.status_code == 404


# -- deletecollection -------------------------------------------------------------------------


async def test_deletecollection_deletes_what_the_selector_finds(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    await http.post("/api/v1/namespaces", json={"metadata": {"name": "dc"}})
    base = "/api/v1/namespaces/dc/configmaps"
    for i in range(5):
        labels = {"app": "web" if i % 2 else "db"}
        assert (await http.post(base, json=configmap(f"c{i}", labels=labels))).is_success
    before = await api.client.current_revision(b"/registry")
    dry = await http.delete(base, params={"labelSelector": "app=web", "dryRun": "All"})
    assert dry.status_code == 200, dry.text
    assert [i["metadata"]["name"] for i in dry.json()["items"]] == ["c1", "c3"]
    assert await api.client.current_revision(b"/registry") == before

    deleted = await http.delete(base, params={"labelSelector": "app=web"})
    assert deleted.status_code == 200
    body = deleted.json()
    assert body["kind"] == "ConfigMapList"
    assert [i["metadata"]["name"] for i in body["items"]] == ["c1", "c3"]
    left = (await http.get(base)).json()
    assert [i["metadata"]["name"] for i in left["items"]] == ["c0", "c2", "c4"]

    everything = await http.delete(base)
    assert len(everything.json()["items"]) == 3
    assert (await http.get(base)).json()["items"] == []
    # Namespaces have no deletecollection, as in Kubernetes.
    assert (await http.delete("/api/v1/namespaces")).status_code == 405


# -- secrets ------------------------------------------------------------------------------------


async def test_secret_string_data_type_and_base64(http: httpx.AsyncClient) -> None:
    secrets = "/api/v1/namespaces/default/secrets"
    made = await http.post(
        secrets,
        json={"metadata": {"name": "s"}, "data": {"a": "YQ=="}, "stringData": {"b": "bee"}},
    )
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["type"] == "Opaque"
    assert "stringData" not in body
    assert body["data"] == {"a": "YQ==", "b": base64.b64encode(b"bee").decode()}

    bad = await http.post(secrets, json={"metadata": {"name": "s2"}, "data": {"a": "not base64!"}})
    assert 400 <= bad.status_code < 500
    assert (await http.get(f"{secrets}/s2")).status_code == 404

    body["type"] = "kubernetes.io/tls"
    retyped = await http.put(f"{secrets}/s", json=body)
    assert retyped.status_code == 422
    assert retyped.json()["details"]["causes"][0]["field"] == "type"
