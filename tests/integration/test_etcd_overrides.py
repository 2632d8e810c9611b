"""Resources on an etcd cluster of their own (``ApiServer(etcd_overrides=...)``, the CLI's
``--etcd-servers-overrides``) and resources whose reads are served from etcd
(``uncached_resources``), over HTTP against two real etcd clusters: ``etcd`` (the default)
and ``second_etcd`` (events, and a CRD's widgets). Keys are checked in each etcd directly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from apiserver_fixture import RunningApiServer, running_apiserver

from watchcache.etcd.client import EtcdClient, EtcdError
from watchcache.etcd.process import EtcdCluster
from watchcache.etcd.reader import EtcdReader

EVENTS = "/api/v1/namespaces/default/events"
EVENTS_V1 = "/apis/events.k8s.io/v1/namespaces/default/events"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


@dataclass
class Placed:
    api: RunningApiServer
    http: httpx.AsyncClient
    main: EtcdClient  # the default cluster
    events: EtcdClient  # the second cluster

    async def where(self, key: str) -> tuple[bool, bool]:
        """Whether ``key`` is in (the default cluster, the second cluster)."""
        return (
            await self.main.get(key.encode()) is not None,
            await self.events.get(key.encode()) is not None,
        )


@pytest.fixture(params=["cached", "uncached"])
async def placed(
    request: pytest.FixtureRequest, etcd: EtcdCluster, second_etcd: EtcdCluster
) -> AsyncIterator[Placed]:
    """Events and widgets on ``second_etcd``; with ``uncached``, clients read both from
    etcd instead of their caches."""
    uncached = {"events", "widgets.example.com"} if request.param == "uncached" else set()
    async with EtcdClient(second_etcd.endpoints) as events_client:
        overrides = {"events": events_client, "widgets.example.com": events_client}
        async with (
            running_apiserver(
                etcd.endpoints,
                min_request_timeout=5,
                etcd_overrides=overrides,
                uncached_resources=uncached,
            ) as api,
            httpx.AsyncClient(base_url=api.url, timeout=10) as http,
        ):
            yield Placed(api, http, api.client, events_client)


def event(name: str, reason: str = "Started") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
        "reason": reason,
        "message": f"{reason} happened",
        "type": "Normal",
        "source": {"component": "tester"},
    }


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def test_events_are_stored_on_their_own_cluster_only(placed: Placed) -> None:
    made = await placed.http.post(EVENTS, json=event("e1"))
    assert made.status_code == 201, made.text
    made = await placed.http.post(CONFIGMAPS, json={"metadata": {"name": "c1"}})
    assert made.status_code == 201, made.text
    # events.k8s.io/v1 Events are the core Events' keys: they follow /events.
    v1 = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e2"},
        "eventTime": "2025-01-01T00:00:00.000000Z",
        "reportingController": "tester",
        "reportingInstance": "tester-1",
        "action": "Start",
        "reason": "Started",
        "regarding": {"kind": "Pod", "name": "web", "namespace": "default"},
        "type": "Normal",
    }
    made = await placed.http.post(EVENTS_V1, json=v1)
    assert made.status_code == 201, made.text
    assert await placed.where("/registry/events/default/e1") == (False, True)
    assert await placed.where("/registry/events/default/e2") == (False, True)
    assert await placed.where("/registry/configmaps/default/c1") == (True, False)
    main_keys = await placed.main.range_prefix(b"/registry/events/", keys_only=True)
    assert main_keys.kvs == []
    # The system namespaces are the default cluster's (namespaces are not overridden).
    assert await placed.where("/registry/namespaces/default") == (True, False)


async def test_reads_writes_watches_and_deletes_work_on_that_cluster(placed: Placed) -> None:
    http = placed.http
    first = await http.post(EVENTS, json=event("e1"))
    start = first.json()["metadata"]["resourceVersion"]
    seen: list[dict[str, Any]] = []

    async def watch() -> None:
        params = {"watch": "true", "resourceVersion": start, "timeoutSeconds": "5"}
        async with http.stream("GET", EVENTS, params=params) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line:
                    seen.append(json.loads(line))
                    if len(seen) == 3:
                        return

    watching = asyncio.create_task(watch())
    await asyncio.sleep(0.3)
    made = await http.post(EVENTS, json=event("e2"))
    assert made.status_code == 201, made.text
    patched = await http.patch(
        f"{EVENTS}/e2",
        content=b'{"message":"again"}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200, patched.text
    gone = await http.delete(f"{EVENTS}/e2")
    assert gone.status_code == 200, gone.text
    await asyncio.wait_for(watching, 10)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in seen] == [
        ("ADDED", "e2"),
        ("MODIFIED", "e2"),
        ("DELETED", "e2"),
    ]
    # Every resourceVersion is a revision of the events cluster.
    events_revision = await placed.events.current_revision(b"/registry/events")
    assert int(seen[-1]["object"]["metadata"]["resourceVersion"]) == events_revision
    kv = await placed.events.get(b"/registry/events/default/e1")
    assert kv is not None
    got = await http.get(f"{EVENTS}/e1")
    assert got.json()["metadata"]["resourceVersion"] == str(kv.mod_revision)

    async def listed() -> list[str]:
        body = (await http.get(EVENTS)).json()
        assert body["metadata"]["resourceVersion"] == str(
            await placed.events.current_revision(b"/registry/events")
        )
        return [i["metadata"]["name"] for i in body["items"]]

    assert await listed() == ["e1"]
    assert (await http.get(f"{EVENTS}/e2")).status_code == 404
    collection = await http.delete(EVENTS)
    assert collection.status_code == 200, collection.text
    assert await placed.where("/registry/events/default/e1") == (False, False)


async def test_the_ttl_lease_is_granted_on_the_events_cluster(placed: Placed) -> None:
    made = await placed.http.post(EVENTS, json=event("e1"))
    assert made.status_code == 201, made.text
    kv = await placed.events.get(b"/registry/events/default/e1")
    assert kv is not None and kv.lease != 0
    # etcd refuses a lease it did not grant: the default cluster has no such lease.
    with pytest.raises(EtcdError, match="lease not found"):
        await placed.main.create(b"/registry/lease-probe", b"{}", lease=int(kv.lease))


async def test_a_crds_resource_is_placed_by_the_same_mapping(placed: Placed) -> None:
    http = placed.http
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    made = await http.post(CRDS, json=crd)
    assert made.status_code == 201, made.text

    async def served() -> bool:
        return (await http.get(WIDGETS)).status_code == 200

    await eventually(served)
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}}
    made = await http.post(WIDGETS, json=widget)
    assert made.status_code == 201, made.text
    assert await placed.where("/registry/example.com/widgets/default/w1") == (False, True)
    # The CRD itself is the default cluster's.
    assert await placed.where(
        "/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com"
    ) == (True, False)
    got = await http.get(f"{WIDGETS}/w1")
    assert got.json()["metadata"]["resourceVersion"] == made.json()["metadata"]["resourceVersion"]
    # --uncached-resources names a CRD's resource before it exists, as overrides do.
    server = placed.api.server
    uncached = server.serves_from_etcd(server.resources["events"])
    assert isinstance(server.readers["widgets.example.com"], EtcdReader) is uncached
    listed = (await http.get(WIDGETS)).json()
    assert [i["metadata"]["name"] for i in listed["items"]] == ["w1"]


async def test_consistent_reads_wait_for_their_own_clusters_revision(placed: Placed) -> None:
    await placed.http.post(EVENTS, json=event("e1"))
    # The default cluster's revision runs far ahead: a consistent read of events that
    # waited for it would time out instead of being served at once.
    for i in range(200):
        await placed.main.put(f"/registry/filler/{i}".encode(), b"{}")
    cache = placed.api.server.caches["events"].cache
    before = dict(cache.stats.consistent_reads)
    started = asyncio.get_running_loop().time()
    body = (await placed.http.get(EVENTS)).json()
    # Waiting for the default cluster's revision would take the cache's 3 s wait timeout.
    assert asyncio.get_running_loop().time() - started < 2.5
    assert body["metadata"]["resourceVersion"] == str(
        await placed.events.current_revision(b"/registry/events")
    )
    served_from_cache = cache.stats.consistent_reads.get((True, "false"), 0)
    if placed.api.server.serves_from_etcd(placed.api.server.resources["events"]):
        assert served_from_cache == before.get((True, "false"), 0)  # clients never read it
    else:
        assert served_from_cache == before.get((True, "false"), 0) + 1


async def test_an_uncached_resource_is_read_from_etcd_and_still_followed(placed: Placed) -> None:
    server = placed.api.server
    reader = server.readers["events"]
    uncached = server.serves_from_etcd(server.resources["events"])
    assert isinstance(reader, EtcdReader) is uncached
    assert server.readers["configmaps"] is server.caches["configmaps"].cache
    await placed.http.post("/api/v1/namespaces", json={"metadata": {"name": "doomed"}})
    made = await placed.http.post(
        "/api/v1/namespaces/doomed/events",
        json={
            **event("e1"),
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "doomed"},
        },
    )
    assert made.status_code == 201, made.text
    if isinstance(reader, EtcdReader):
        lists = reader.store.lists
        assert (await placed.http.get("/api/v1/namespaces/doomed/events")).status_code == 200
        assert reader.store.lists == lists + 1
    # The namespace controller still empties the namespace of its events.
    assert (await placed.http.delete("/api/v1/namespaces/doomed")).status_code == 200

    async def emptied() -> bool:
        return await placed.events.get(b"/registry/events/doomed/e1") is None

    await eventually(emptied)


async def test_the_progress_verdict_is_per_cluster(etcd: EtcdCluster, etcd_34: EtcdCluster) -> None:
    """Events on an etcd 3.4.23 (the progress-notify bug): their consistent reads go to
    etcd, while every other resource's are still served by its cache."""
    async with (
        EtcdClient(etcd_34.endpoints) as old,
        running_apiserver(etcd.endpoints, etcd_overrides={"events": old}) as api,
    ):
        server = api.server
        assert server.support_for(old).verdict is False
        assert server.support_for(server.client).verdict is True
        assert not server.caches["events"].store.consistent_reads_supported
        assert server.caches["configmaps"].store.consistent_reads_supported
        versions = server.etcd_versions
        assert versions[etcd_34.endpoints[0].removeprefix("http://")].startswith("3.4.")
        assert versions[etcd.endpoints[0].removeprefix("http://")].startswith("3.5.")
        async with httpx.AsyncClient(base_url=api.url, timeout=10) as http:
            metrics = (await http.get("/metrics")).text
        assert metrics.count("watchcache_etcd_info{") == 2
