"""An embedder's own kind, served by the same machinery as the built-in ones: declared as
a ResourceSpec and passed to ApiServer, or added and removed while it runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from apiserver_fixture import RunningApiServer, running_apiserver

from watchcache import PrinterColumn, ResourceSpec
from watchcache.etcd.process import EtcdCluster
from watchcache.registry.resources import DEFAULT_RESOURCES

WIDGETS = ResourceSpec(
    "widgets",
    "widget",
    "Widget",
    group="example.com",
    short_names=("wd",),
    categories=("all",),
    fields=("spec.color",),
    subresources=("status",),
    printer_columns=(
        PrinterColumn("Color", "string", ".spec.color"),
        PrinterColumn("Size", "integer", ".spec.size", priority=1),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
    ),
)
GADGETS = ResourceSpec("gadgets", "gadget", "Gadget", group="example.com", namespaced=False)
BASE = "/apis/example.com/v1"


def widget(name: str, color: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"color": color, **spec},
    }


@pytest.fixture
async def api(etcd: EtcdCluster) -> AsyncIterator[RunningApiServer]:
    resources = (*DEFAULT_RESOURCES, WIDGETS)
    async with running_apiserver(etcd.endpoints, resources, min_request_timeout=5) as running:
        yield running


async def test_a_declared_kind_is_served_like_a_built_in_one(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    widgets = f"{BASE}/namespaces/default/widgets"
    for name, color in (("w1", "red"), ("w2", "blue")):
        made = await http.post(widgets, json=widget(name, color, size=3))
        assert made.status_code == 201, made.text
    assert await api.client.get(b"/registry/example.com/widgets/default/w1") is not None
    discovered = (await http.get(BASE)).json()["resources"]
    assert [r["name"] for r in discovered] == ["widgets", "widgets/status"]
    assert discovered[0]["shortNames"] == ["wd"] and discovered[0]["categories"] == ["all"]
    red = (await http.get(widgets, params={"fieldSelector": "spec.color=red"})).json()
    assert red["kind"] == "WidgetList" and [i["metadata"]["name"] for i in red["items"]] == ["w1"]
    table = (
        await http.get(widgets, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    ).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Color", "Size", "Age"]
    assert [r["cells"][:3] for r in table["rows"]] == [["w1", "red", 3], ["w2", "blue", 3]]
    # The status subresource, and a main write that leaves status alone.
    status = await http.patch(
        f"{widgets}/w1/status",
        content=b'{"status":{"ready":true},"spec":{"color":"green"}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status.status_code == 200, status.text
    assert status.json()["status"] == {"ready": True} and status.json()["spec"]["color"] == "red"
    # A watch sees writes.
    async with http.stream("GET", widgets, params={"watch": "1", "resourceVersion": "0"}) as s:
        lines = s.aiter_lines()
        seen = [json.loads(await anext(lines))["object"]["metadata"]["name"] for _ in range(2)]
    assert sorted(seen) == ["w1", "w2"]
    # Protobuf is not a format for kinds without a built-in schema.
    refused = await http.post(
        widgets, content=b"k8s\x00", headers={"Content-Type": "application/vnd.kubernetes.protobuf"}
    )
    assert refused.status_code == 415


async def test_kinds_added_and_removed_while_serving(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    assert (await http.get(f"{BASE}/gadgets")).status_code == 404
    await api.server.add_resource(GADGETS)
    made = await http.post(
        f"{BASE}/gadgets",
        json={"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}},
    )
    assert made.status_code == 201, made.text
    names = [r["name"] for r in (await http.get(BASE)).json()["resources"]]
    assert "gadgets" in names
    assert "apis/example.com/v1" in (await http.get("/openapi/v3")).json()["paths"]
    removed = await api.server.remove_resource("gadgets.example.com")
    assert removed is GADGETS
    assert (await http.get(f"{BASE}/gadgets")).status_code == 404
    # Its objects stay in etcd: serving it again finds them.
    await api.server.add_resource(GADGETS)
    listed = (await http.get(f"{BASE}/gadgets")).json()
    assert [i["metadata"]["name"] for i in listed["items"]] == ["g1"]
    with pytest.raises(ValueError, match="served already"):
        await api.server.add_resource(GADGETS)


async def test_a_replaced_kind_finishes_the_requests_that_found_it(
    api: RunningApiServer, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request that found a resource before it was replaced (a CRD whose schema or
    storage version changed) runs to its end on what it found; the replaced cache stops
    only then. Stopping it at once left such a GET waiting on a stopped cache until it
    timed out with 504."""
    await api.server.add_resource(GADGETS)
    body = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}}
    assert (await http.post(f"{BASE}/gadgets", json=body)).status_code == 201
    old = api.server.caches["gadgets.example.com"]
    reading, release = asyncio.Event(), asyncio.Event()
    get = old.cache.get

    async def held_get(key: str, resource_version: str = "") -> Any:
        reading.set()
        await release.wait()
        return await get(key, resource_version)

    monkeypatch.setattr(old.cache, "get", held_get)
    found = asyncio.create_task(http.get(f"{BASE}/gadgets/g1"))
    await asyncio.wait_for(reading.wait(), 10)
    await api.server.add_resource(GADGETS, replace=True)
    assert api.server.caches["gadgets.example.com"] is not old
    # New requests go to the new resource while the old one still serves its request.
    assert (await http.get(f"{BASE}/gadgets/g1")).status_code == 200

    def old_running() -> bool:
        return old.cache.ready

    assert old_running()
    release.set()
    answer = await found
    assert answer.status_code == 200, answer.text
    for _ in range(200):
        if not old_running():
            break
        await asyncio.sleep(0.05)
    assert not old_running(), "the replaced cache was not stopped after its request ended"


async def test_the_garbage_collector_follows_kinds_added_later(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    await api.server.add_resource(GADGETS)
    owner = await http.post(
        f"{BASE}/gadgets",
        json={"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "owner"}},
    )
    uid = owner.json()["metadata"]["uid"]
    ref = {"apiVersion": "example.com/v1", "kind": "Gadget", "name": "owner", "uid": uid}
    dependent = await http.post(
        "/api/v1/namespaces/default/configmaps",
        json={"metadata": {"name": "owned-by-gadget", "ownerReferences": [ref]}},
    )
    assert dependent.status_code == 201
    assert (await http.delete(f"{BASE}/gadgets/owner")).status_code == 200
    async with asyncio.timeout(15):
        while (
            await http.get("/api/v1/namespaces/default/configmaps/owned-by-gadget")
        ).status_code != 404:
            await asyncio.sleep(0.05)
