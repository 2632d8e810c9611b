"""Aggregated discovery over HTTP against real etcd: /api and /apis answer an
APIGroupDiscoveryList when the Accept header asks for one (with ETag, Vary and 304s),
the legacy documents otherwise, and follow resources added and removed while serving,
a CRD's versions included."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from apiserver_fixture import RunningApiServer

from watchcache import ResourceSpec

V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
#: What kubectl 1.37 sends to /api and /apis.
KUBECTL_1_37 = f"{V2},application/json"
PROTOBUF_ONLY = (
    "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
)
GADGETS = ResourceSpec("gadgets", "gadget", "Gadget", group="example.com", namespaced=False)


async def test_kubectls_accept_header_gets_the_aggregated_documents(
    http: httpx.AsyncClient,
) -> None:
    core = await http.get("/api", headers={"Accept": KUBECTL_1_37})
    assert core.status_code == 200, core.text
    assert core.headers["content-type"] == V2
    assert core.headers["vary"] == "Accept"
    assert core.headers["cache-control"] == "public"
    assert core.headers["etag"].startswith('"') and len(core.headers["etag"]) == 130
    body = core.json()
    assert (body["kind"], body["apiVersion"]) == ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2")
    (group,) = body["items"]
    assert group["metadata"] == {}
    (version,) = group["versions"]
    assert (version["version"], version["freshness"]) == ("v1", "Current")
    by_name = {r["resource"]: r for r in version["resources"]}
    assert by_name["configmaps"]["shortNames"] == ["cm"]
    assert by_name["namespaces"]["scope"] == "Cluster"
    assert [s["subresource"] for s in by_name["namespaces"]["subresources"]] == [
        "finalize",
        "status",
    ]

    named = await http.get("/apis", headers={"Accept": KUBECTL_1_37})
    assert named.headers["content-type"] == V2
    groups = {g["metadata"]["name"]: g for g in named.json()["items"]}
    assert list(groups) == sorted(groups)
    resource = groups["coordination.k8s.io"]["versions"][0]["resources"][0]
    assert resource["resource"] == "leases"
    assert resource["responseKind"] == {"group": "", "version": "", "kind": "Lease"}


async def test_a_cached_document_is_revalidated_with_its_etag(http: httpx.AsyncClient) -> None:
    first = await http.get("/apis", headers={"Accept": KUBECTL_1_37})
    etag = first.headers["etag"]
    again = await http.get("/apis", headers={"Accept": KUBECTL_1_37, "If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == etag and again.headers["vary"] == "Accept"
    stale = await http.get("/apis", headers={"Accept": KUBECTL_1_37, "If-None-Match": '"x"'})
    assert stale.status_code == 200 and stale.content == first.content


async def test_v2beta1_clients_get_v2beta1(http: httpx.AsyncClient) -> None:
    answer = await http.get("/apis", headers={"Accept": f"{V2BETA1},application/json"})
    assert answer.headers["content-type"] == V2BETA1
    assert answer.json()["apiVersion"] == "apidiscovery.k8s.io/v2beta1"


async def test_other_clients_still_get_the_legacy_documents(http: httpx.AsyncClient) -> None:
    for accept in ("application/json, */*", "application/json", None):
        headers = {"Accept": accept} if accept is not None else {}
        core = await http.get("/api", headers=headers)
        assert core.status_code == 200
        assert core.headers["content-type"] == "application/json"
        assert core.json()["kind"] == "APIVersions"
        assert "etag" not in core.headers
        named = await http.get("/apis", headers=headers)
        assert named.headers["content-type"] == "application/json"
        assert named.json()["kind"] == "APIGroupList"


async def test_aggregated_discovery_only_in_protobuf_is_406(http: httpx.AsyncClient) -> None:
    refused = await http.get("/api", headers={"Accept": PROTOBUF_ONLY})
    assert refused.status_code == 406
    assert refused.json()["reason"] == "NotAcceptable"
    # With JSON accepted too, kube-apiserver's order picks the first clause it can write.
    fine = await http.get("/api", headers={"Accept": f"{PROTOBUF_ONLY},{V2}"})
    assert fine.headers["content-type"] == V2
    legacy = await http.get("/api", headers={"Accept": f"{PROTOBUF_ONLY},application/json"})
    assert legacy.json()["kind"] == "APIVersions"


async def test_resources_added_and_removed_while_serving_show_at_once(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    async def groups() -> tuple[list[str], str]:
        answer = await http.get("/apis", headers={"Accept": KUBECTL_1_37})
        return [g["metadata"]["name"] for g in answer.json()["items"]], answer.headers["etag"]

    names, etag = await groups()
    assert "example.com" not in names
    await api.server.add_resource(GADGETS)
    added, added_etag = await groups()
    assert added == sorted([*names, "example.com"])
    assert added_etag != etag
    # A client holding the old ETag gets the new document, not a 304.
    revalidated = await http.get("/apis", headers={"Accept": KUBECTL_1_37, "If-None-Match": etag})
    assert revalidated.status_code == 200
    (example,) = [g for g in revalidated.json()["items"] if g["metadata"]["name"] == "example.com"]
    gadgets = example["versions"][0]["resources"][0]
    assert (gadgets["resource"], gadgets["scope"]) == ("gadgets", "Cluster")
    await api.server.remove_resource("gadgets.example.com")
    assert await groups() == (names, etag)


def _version(name: str, *, storage: bool = False, scale: bool = False) -> dict[str, Any]:
    subresources: dict[str, Any] = {"status": {}}
    if scale:
        subresources["scale"] = {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
        }
    return {
        "name": name,
        "served": True,
        "storage": storage,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
        "subresources": subresources,
    }


THINGS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "things.stuff.example.com"},
    "spec": {
        "group": "stuff.example.com",
        "names": {"plural": "things", "singular": "thing", "kind": "Thing", "shortNames": ["th"]},
        "scope": "Namespaced",
        # Declared in no particular order; discovery lists the most preferred first.
        "versions": [
            _version("v1alpha1"),
            _version("v1beta1", storage=True),
            _version("v1", scale=True),
        ],
    },
}


async def test_a_crds_versions_are_listed_most_preferred_first(http: httpx.AsyncClient) -> None:
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    made = await http.post(crds, json=THINGS_CRD)
    assert made.status_code == 201, made.text

    async def things() -> dict[str, Any] | None:
        answer = await http.get("/apis", headers={"Accept": KUBECTL_1_37})
        for group in answer.json()["items"]:
            if group["metadata"]["name"] == "stuff.example.com":
                return dict(group)
        return None

    async with asyncio.timeout(10):
        while (group := await things()) is None or len(group["versions"]) < 3:
            await asyncio.sleep(0.05)
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1", "v1alpha1"]
    (v1_things,) = group["versions"][0]["resources"]
    assert v1_things["shortNames"] == ["th"]
    assert v1_things["subresources"] == [
        {
            "subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"],
        },
        {
            "subresource": "status",
            "responseKind": {"group": "", "version": "", "kind": "Thing"},
            "verbs": ["get", "patch", "update"],
        },
    ]
    assert (await http.delete(f"{crds}/things.stuff.example.com")).status_code == 200
    async with asyncio.timeout(10):
        while await things() is not None:
            await asyncio.sleep(0.05)
