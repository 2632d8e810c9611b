"""CustomResourceDefinitions over HTTP: creating one serves its resource, its names and
conditions are kept in its status, deleting it deletes its objects and stops serving, and
a restarted server serves what is stored."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from apiserver_fixture import RunningApiServer, running_apiserver

from watchcache.etcd.process import EtcdCluster

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
MERGE = {"Content-Type": "application/merge-patch+json"}

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {
            "plural": "widgets",
            "singular": "widget",
            "kind": "Widget",
            "shortNames": ["wd"],
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "color": {"type": "string"},
                                    "replicas": {"type": "integer", "default": 1},
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {"replicas": {"type": "integer"}},
                            },
                        },
                    }
                },
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                    },
                },
                "additionalPrinterColumns": [
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color"}
                ],
                "selectableFields": [{"jsonPath": ".spec.color"}],
            }
        ],
    },
}


def widget(name: str, color: str = "red") -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"color": color},
    }


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def condition(http: httpx.AsyncClient, name: str, kind: str) -> dict[str, Any]:
    crd = (await http.get(f"{CRDS}/{name}")).json()
    for c in (crd.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return dict(c)
    return {}


async def terminating_reasons(http: httpx.AsyncClient, since: str, last: str) -> list[str]:
    """The reasons of the widgets CRD's Terminating condition, in the order its watch from
    ``since`` shows them, up to ``last``."""
    reasons: list[str] = []
    params = {
        "watch": "1",
        "resourceVersion": since,
        "fieldSelector": "metadata.name=widgets.example.com",
    }
    async with http.stream("GET", CRDS, params=params) as stream:
        async for line in stream.aiter_lines():
            crd = json.loads(line)["object"]
            for c in (crd.get("status") or {}).get("conditions") or []:
                if c["type"] == "Terminating" and (not reasons or reasons[-1] != c["reason"]):
                    reasons.append(c["reason"])
            if reasons and reasons[-1] == last:
                break
    return reasons


async def established(http: httpx.AsyncClient, name: str) -> bool:
    return (await condition(http, name, "Established")).get("status") == "True"


async def test_a_crd_is_served_once_created_and_gone_once_deleted(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    made = await http.post(CRDS, json=WIDGET_CRD)
    assert made.status_code == 201, made.text
    started = asyncio.get_running_loop().time()
    await eventually(lambda: established(http, "widgets.example.com"))
    assert asyncio.get_running_loop().time() - started < 1.0
    crd = (await http.get(f"{CRDS}/widgets.example.com")).json()
    assert crd["status"]["acceptedNames"]["plural"] == "widgets"
    assert crd["status"]["storedVersions"] == ["v1"]
    names = await condition(http, "widgets.example.com", "NamesAccepted")
    assert (names["status"], names["reason"]) == ("True", "NoConflicts")
    group = (await http.get("/apis/example.com/v1")).json()
    assert "apis/example.com/v1" in (await http.get("/openapi/v3")).json()["paths"]
    assert [r["name"] for r in group["resources"]] == [
        "widgets",
        "widgets/scale",
        "widgets/status",
    ]
    created = await http.post(WIDGETS, json={**widget("w1"), "spec": {"color": "red", "x": 1}})
    assert created.status_code == 201, created.text
    assert created.json()["spec"] == {"color": "red", "replicas": 1}
    await http.post(WIDGETS, json=widget("w2", "blue"))
    red = (await http.get(WIDGETS, params={"fieldSelector": "spec.color=red"})).json()
    assert [i["metadata"]["name"] for i in red["items"]] == ["w1"]
    scale = (await http.get(f"{WIDGETS}/w1/scale")).json()
    assert scale["spec"] == {"replicas": 1}
    # A finalizer holds one object: the CRD waits for it.
    await http.patch(f"{WIDGETS}/w2", content=b'{"metadata":{"finalizers":["x/y"]}}', headers=MERGE)
    deleted = await http.delete(f"{CRDS}/widgets.example.com")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["metadata"]["finalizers"] == [
        "customresourcecleanup.apiextensions.k8s.io"
    ]

    async def w1_gone() -> bool:
        return (await http.get(f"{WIDGETS}/w1")).status_code == 404

    await eventually(w1_gone)
    refused = await http.post(WIDGETS, json=widget("w3"))
    assert refused.status_code == 405, refused.text
    assert refused.json()["message"] == (
        "create not allowed while custom resource definition is terminating"
    )

    # The controller waits for w2: it says so, then says InstanceDeletionInProgress again at
    # each recheck, as Kubernetes' finalizer controller does, so polling may keep landing on
    # that half; the CRD's watch shows every condition it writes.
    since = deleted.json()["metadata"]["resourceVersion"]
    reasons = await asyncio.wait_for(terminating_reasons(http, since, "InstanceDeletionCheck"), 10)
    assert reasons[0] == "InstanceDeletionInProgress"
    assert reasons[-1] == "InstanceDeletionCheck"
    await http.patch(f"{WIDGETS}/w2", content=b'{"metadata":{"finalizers":null}}', headers=MERGE)

    async def crd_gone() -> bool:
        return (await http.get(f"{CRDS}/widgets.example.com")).status_code == 404

    await eventually(crd_gone)

    async def not_served() -> bool:
        return (await http.get(WIDGETS)).status_code == 404

    await eventually(not_served)
    assert await api.client.get(b"/registry/example.com/widgets/default/w2") is None
    # Discovery and OpenAPI forget it too.
    assert (await http.get("/apis/example.com")).status_code == 404
    assert "apis/example.com/v1" not in (await http.get("/openapi/v3")).json()["paths"]
    v2 = (await http.get("/openapi/v2")).json()
    assert not [name for name in v2["definitions"] if "example.com" in name]


async def test_conflicting_names_are_not_accepted(http: httpx.AsyncClient) -> None:
    await http.post(CRDS, json=WIDGET_CRD)
    await eventually(lambda: established(http, "widgets.example.com"))
    other = copy.deepcopy(WIDGET_CRD)
    other["metadata"]["name"] = "gizmos.example.com"
    other["spec"]["names"] = {"plural": "gizmos", "kind": "Widget"}
    assert (await http.post(CRDS, json=other)).status_code == 201

    async def refused() -> bool:
        found = await condition(http, "gizmos.example.com", "NamesAccepted")
        return found.get("status") == "False"

    await eventually(refused)
    found = await condition(http, "gizmos.example.com", "NamesAccepted")
    # The last conflict found names the condition, as Kubernetes' naming controller does.
    assert (found["reason"], found["message"]) == (
        "ListKindConflict",
        '"WidgetList" is already in use',
    )
    assert (await http.get("/apis/example.com/v1/namespaces/default/gizmos")).status_code == 404


async def test_an_invalid_crd_is_refused(http: httpx.AsyncClient) -> None:
    bad = copy.deepcopy(WIDGET_CRD)
    bad["metadata"]["name"] = "wrong.example.com"
    bad["spec"]["scope"] = "Galaxy"
    answer = await http.post(CRDS, json=bad)
    assert answer.status_code == 422, answer.text
    fields = {c["field"] for c in answer.json()["details"]["causes"]}
    assert {"metadata.name", "spec.scope"} <= fields


async def test_a_restarted_server_serves_the_stored_crds(
    etcd: EtcdCluster, api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    await http.post(CRDS, json=WIDGET_CRD)
    await eventually(lambda: established(http, "widgets.example.com"))
    assert (await http.post(WIDGETS, json=widget("w1"))).status_code == 201
    async with (
        running_apiserver(etcd.endpoints) as second,
        httpx.AsyncClient(base_url=second.url) as other,
    ):
        # Served as soon as the server is up: no window of 404s.
        got = await other.get(f"{WIDGETS}/w1")
        assert got.status_code == 200, got.text
        assert (await other.post(WIDGETS, json=widget("w2"))).status_code == 201

        async def seen_by_first() -> bool:
            return (await http.get(f"{WIDGETS}/w2")).status_code == 200

        await eventually(seen_by_first)


async def test_several_versions_share_the_objects_of_one_storage_version(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    crd = copy.deepcopy(WIDGET_CRD)
    v1 = crd["spec"]["versions"][0]
    beta = {
        **copy.deepcopy(v1),
        "name": "v1beta1",
        "storage": False,
        "deprecated": True,
        "additionalPrinterColumns": [],
    }
    crd["spec"]["versions"] = [beta, v1]
    assert (await http.post(CRDS, json=crd)).status_code == 201
    await eventually(lambda: established(http, "widgets.example.com"))
    beta_widgets = "/apis/example.com/v1beta1/namespaces/default/widgets"

    async def both_served() -> bool:
        return (await http.get(beta_widgets)).status_code == 200

    await eventually(both_served)
    made = await http.post(beta_widgets, json={**widget("w1"), "apiVersion": "example.com/v1beta1"})
    assert made.status_code == 201, made.text
    assert made.headers.get_list("warning") == ['299 - "example.com/v1beta1 Widget is deprecated"']
    kv = await api.client.get(b"/registry/example.com/widgets/default/w1")
    assert kv is not None and b'"apiVersion":"example.com/v1"' in kv.value
    got = (await http.get(f"{WIDGETS}/w1")).json()
    assert got["apiVersion"] == "example.com/v1" and got["spec"] == {"color": "red", "replicas": 1}
    group = (await http.get("/apis/example.com")).json()
    assert group["preferredVersion"]["version"] == "v1"
    # Moving storage to v1beta1 records both versions as stored. Both versions' URLs
    # answer throughout: the versions swap which one the controllers follow, and a swap
    # done one version at a time left one of them unserved for a moment (found in CI:
    # a DELETE of w2 answered 404 "could not find the requested resource").
    answers: list[tuple[str, int]] = []
    moving = True

    async def read_both_versions() -> None:
        while moving:
            for url in (f"{WIDGETS}/w1", f"{beta_widgets}/w1"):
                answers.append((url, (await http.get(url)).status_code))

    reading = asyncio.create_task(read_both_versions())
    current = (await http.get(f"{CRDS}/widgets.example.com")).json()
    current["spec"]["versions"][0]["storage"] = True
    current["spec"]["versions"][1]["storage"] = False
    moved = await http.put(f"{CRDS}/widgets.example.com", json=current)
    assert moved.status_code == 200, moved.text
    assert moved.json()["status"]["storedVersions"] == ["v1", "v1beta1"]

    async def stored_as_beta() -> bool:
        answer = await http.post(WIDGETS, json=widget("w2"))
        assert answer.status_code == 201, answer.text
        kv = await api.client.get(b"/registry/example.com/widgets/default/w2")
        assert kv is not None
        if b'"apiVersion":"example.com/v1beta1"' in kv.value:
            return True
        deleted = await http.delete(f"{WIDGETS}/w2")
        assert deleted.status_code == 200, deleted.text
        return False

    try:
        await eventually(stored_as_beta)
    finally:
        moving = False
        await reading
    assert answers and {status for _, status in answers} == {200}, answers


async def test_a_deprecation_warning_past_latin1_is_sent_in_utf8(http: httpx.AsyncClient) -> None:
    """Regression (found by tests/reliability/test_fuzz_inputs.py): a deprecated version's
    ``deprecationWarning`` may hold any printable UTF-8; one with a character past U+00FF
    made every request to that version fail in Starlette's Latin-1 header encoding, after
    the handler had run. Kubernetes sends the warning's UTF-8 bytes."""
    crd = copy.deepcopy(WIDGET_CRD)
    beta = copy.deepcopy(crd["spec"]["versions"][0])
    beta.update(name="v1beta1", storage=False, deprecated=True, deprecationWarning="☃ use v1")
    crd["spec"]["versions"].append(beta)
    assert (await http.post(CRDS, json=crd)).status_code == 201
    await eventually(lambda: established(http, "widgets.example.com"))
    beta_widgets = "/apis/example.com/v1beta1/namespaces/default/widgets"
    made = await http.post(beta_widgets, json={**widget("w1"), "apiVersion": "example.com/v1beta1"})
    assert made.status_code == 201, made.text
    listed = await http.get(beta_widgets)
    assert listed.status_code == 200, listed.text
    for answer in (made, listed):
        warnings = [v for k, v in answer.headers.raw if k.lower() == b"warning"]
        assert warnings == ['299 - "☃ use v1"'.encode()]


async def test_a_changed_crd_is_served_without_a_gap(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    """Found by tests/reliability/test_fuzz_inputs.py: after an update that changes a
    version's schema (even cosmetically: a protobuf round trip drops an empty
    ``required``), the resource answered 404 until the new cache had listed. Kubernetes'
    CRD handler keeps serving the old storage until the new one is ready, so clients and
    controllers never see the resource vanish. Here the new cache's start is held, which
    makes the window as long as a slow etcd would."""
    assert (await http.post(CRDS, json=WIDGET_CRD)).status_code == 201
    await eventually(lambda: established(http, "widgets.example.com"))
    assert (await http.post(WIDGETS, json=widget("w1"))).status_code == 201
    release = asyncio.Event()
    adding = asyncio.Event()
    change_resources = api.server.change_resources

    async def held_change_resources(**changes: Any) -> None:
        adding.set()
        await release.wait()
        await change_resources(**changes)

    api.server.change_resources = held_change_resources  # type: ignore[method-assign]
    try:
        crd = (await http.get(f"{CRDS}/widgets.example.com")).json()
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        schema["properties"]["spec"]["properties"]["size"] = {"type": "integer"}
        assert (await http.put(f"{CRDS}/widgets.example.com", json=crd)).status_code == 200
        await asyncio.wait_for(adding.wait(), 10)
        listed = await http.get(WIDGETS)
        assert listed.status_code == 200, listed.text
        release.set()

        attempts = iter(range(1000))

        async def new_schema_served() -> bool:
            # The old schema prunes spec.size; the new one keeps it.
            body = {**widget(f"n{next(attempts)}"), "spec": {"color": "red", "size": 2}}
            made = await http.post(WIDGETS, json=body)
            return made.status_code == 201 and made.json()["spec"].get("size") == 2

        await eventually(new_schema_served)
        assert (await http.get(f"{WIDGETS}/w1")).status_code == 200
    finally:
        release.set()
        api.server.change_resources = change_resources  # type: ignore[method-assign]


async def test_a_crd_whose_names_were_never_accepted_can_be_deleted(
    http: httpx.AsyncClient,
) -> None:
    """Found while extending tests/reliability/test_fuzz_inputs.py: a CRD whose names
    conflict is never served; its DELETE adds the cleanup finalizer like any CRD's, and
    nothing removes it. Kubernetes' finalizer controller removes it from a CRD that was
    never established (condition Terminating False, reason NeverEstablished, "resource
    was never established"), so the CRD goes away."""
    await http.post(CRDS, json=WIDGET_CRD)
    await eventually(lambda: established(http, "widgets.example.com"))
    other = copy.deepcopy(WIDGET_CRD)
    other["metadata"]["name"] = "gizmos.example.com"
    other["spec"]["names"] = {"plural": "gizmos", "kind": "Widget"}
    assert (await http.post(CRDS, json=other)).status_code == 201

    async def refused() -> bool:
        found = await condition(http, "gizmos.example.com", "NamesAccepted")
        return found.get("status") == "False"

    await eventually(refused)
    deleted = await http.delete(f"{CRDS}/gizmos.example.com")
    assert deleted.status_code == 200, deleted.text

    async def gone() -> bool:
        return (await http.get(f"{CRDS}/gizmos.example.com")).status_code == 404

    await eventually(gone, seconds=3)  # nothing else to wait for: no objects to delete
