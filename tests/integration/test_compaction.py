"""etcd compaction as kube-apiserver does it (etcd/compactor.py), on a real etcd: one
compaction per interval between several servers, to the revision seen one interval
earlier; the caches drop their snapshots below it, so a continue token older than the
compaction gets Kubernetes' 410 with a token to continue at the latest state, while a
newer one is still served from the cache."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from apiserver_fixture import running_apiserver

from watchcache.etcd.client import EtcdClient
from watchcache.etcd.compactor import COMPACT_REV_KEY, Compactor, compaction_step
from watchcache.etcd.process import EtcdCluster
from watchcache.wire.errors import CompactedError


async def test_the_first_step_records_and_the_next_compacts_to_what_it_recorded(
    client: EtcdClient,
) -> None:
    await client.put(b"/registry/x", b"1")
    first = await compaction_step(client, 0, 0)
    assert (first.version, first.compacted) == (1, 0)
    seen = first.revision
    await client.put(b"/registry/x", b"2")
    second = await compaction_step(client, first.version, first.revision)
    assert (second.version, second.compacted) == (2, seen)
    assert second.revision > seen
    # Revisions below the compacted one are gone; the compacted one itself is readable.
    with pytest.raises(CompactedError):
        await client.range(b"/registry/x", revision=seen - 1)
    await client.range(b"/registry/x", revision=seen)
    kv = await client.get(COMPACT_REV_KEY)
    assert kv is not None and (int(kv.value), kv.version) == (seen, 2)


async def test_two_servers_compact_once_per_interval_between_them(client: EtcdClient) -> None:
    one, two = Compactor(client, 1.0), Compactor(client, 1.0)
    told: list[int] = []
    two.add_listener(told.append)
    for round_ in range(6):
        await client.put(b"/registry/x", str(round_).encode())
        # Both run their step each interval, in either order.
        first, second = (one, two) if round_ % 2 else (two, one)
        await first.step()
        await second.step()
    # Each round one compare holds: the winner of round r expected the version round r-1
    # left. The very first claim only records; every later round compacts once.
    assert one.steps == two.steps == 6
    assert one.compactions + two.compactions == 5
    kv = await client.get(COMPACT_REV_KEY)
    assert kv is not None
    assert one.compacted_revision == two.compacted_revision == int(kv.value) > 0
    assert told == sorted(set(told)) and told[-1] == two.compacted_revision
    third = Compactor(client, 0.0)
    assert await third.refresh() == int(kv.value)


async def test_a_failed_step_is_retried_at_the_next_interval(etcd: EtcdCluster) -> None:
    async with EtcdClient(["127.0.0.1:1"], timeout=0.2) as nowhere:
        compactor = Compactor(nowhere, 0.05, poll_interval=0.05, timeout=0.2)
        task = asyncio.create_task(compactor.run())
        try:
            for _ in range(200):
                if compactor.failures >= 2:
                    break
                await asyncio.sleep(0.05)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert compactor.failures >= 2 and compactor.compactions == 0


async def test_tokens_older_than_the_compaction_are_410_and_newer_ones_served(
    etcd: EtcdCluster,
) -> None:
    async with (
        running_apiserver(etcd.endpoints, compaction_interval=3600) as api,
        httpx.AsyncClient(base_url=api.url, timeout=10) as http,
    ):
        for i in range(4):
            made = await http.post(
                "/api/v1/namespaces/default/configmaps",
                json={"metadata": {"name": f"c{i}"}, "data": {"k": str(i)}},
            )
            assert made.status_code == 201, made.text
        old = (await http.get("/api/v1/configmaps", params={"limit": "1"})).json()
        old_token = old["metadata"]["continue"]
        made = await http.post(
            "/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "c9"}}
        )
        assert made.status_code == 201
        compactor = api.server.compactor_for(api.client)
        await compactor.step()  # records the revision now: after old's, before new's
        await http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "d"}})
        new = (await http.get("/api/v1/configmaps", params={"limit": "1"})).json()
        new_token = new["metadata"]["continue"]
        assert int(new["metadata"]["resourceVersion"]) > int(old["metadata"]["resourceVersion"])
        before = await http.get("/api/v1/configmaps", params={"limit": "1", "continue": old_token})
        assert before.status_code == 200  # served from the cache's snapshot
        await compactor.step()  # compacts to the revision the first step saw
        assert compactor.compacted_revision > int(old["metadata"]["resourceVersion"])

        gone = await http.get("/api/v1/configmaps", params={"limit": "1", "continue": old_token})
        assert gone.status_code == 410, gone.text
        status = gone.json()
        assert status["reason"] == "Expired"
        assert "inconsistent" in status["message"]
        # The token in the Status continues at the latest state, from the same key.
        resumed = await http.get(
            "/api/v1/configmaps", params={"limit": "1", "continue": status["metadata"]["continue"]}
        )
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["items"][0]["metadata"]["name"] != old["items"][0]["metadata"]["name"]

        still = await http.get("/api/v1/configmaps", params={"limit": "1", "continue": new_token})
        assert still.status_code == 200, still.text
        exact_old = await http.get(
            "/api/v1/configmaps",
            params={
                "resourceVersion": old["metadata"]["resourceVersion"],
                "resourceVersionMatch": "Exact",
            },
        )
        assert exact_old.status_code == 410, exact_old.text
        assert json.loads(exact_old.text)["reason"] == "Expired"
        cache = api.server.caches["configmaps"].cache
        assert cache.stats.compacted_revision == compactor.compacted_revision
        # The database size, polled at start as kube-apiserver does.
        metrics = (await http.get("/metrics")).text
        assert 'apiserver_storage_size_bytes{storage_cluster_id="etcd-0"}' in metrics
