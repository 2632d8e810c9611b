"""Consistent reads sharing etcd current-revision calls, against a real etcd: a read that
starts after a write was acknowledged sees it, with many reads in flight on two resources
that share calls, writes to both and to a third prefix (so caches lag behind etcd's
revision and reads also wait for progress notifications), and the sharing really happens.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from kubeobjects import PREFIX, pod_key, pod_value

from watchcache.cache.objects import ObjectCodec
from watchcache.etcd.client import EtcdClient
from watchcache.sync.synced import SyncedCache
from watchcache.wire.errors import NotFoundError
from watchcache.wire.options import ListOptions

POD_FIELDS = ObjectCodec(("metadata.name", "metadata.namespace", "spec.nodeName"))
CONFIGMAPS = "/registry/configmaps/"


def configmap_key(name: str) -> str:
    return f"{CONFIGMAPS}a/{name}"


async def test_reads_started_after_an_acknowledged_write_see_it_while_sharing_calls(
    client: EtcdClient, rng: random.Random
) -> None:
    pods = SyncedCache(client, PREFIX, resource="pods", kind="Pod", codec=POD_FIELDS)
    configmaps = SyncedCache(client, CONFIGMAPS, resource="configmaps", kind="ConfigMap")
    await asyncio.gather(pods.start(), configmaps.start())
    shared = pods.store.current_revision
    assert configmaps.store.current_revision is shared, "one reader per etcd client"
    calls_before, reads_before = shared.calls, shared.reads
    stop = asyncio.Event()
    checked = 0

    async def background_reads() -> None:
        # Keeps calls in flight, so the checked reads below often arrive during one.
        while not stop.is_set():
            gets = [pods.cache.get(pod_key("a", f"p{rng.randrange(4)}")) for _ in range(8)]
            lists = [configmaps.cache.list(ListOptions(limit=5)) for _ in range(4)]
            await asyncio.gather(*gets, *lists, return_exceptions=True)

    async def writer(index: int) -> None:
        nonlocal checked
        for round_ in range(25):
            pod = pod_key("a", f"p{index}")
            written = await client.put(pod.encode(), pod_value("a", f"p{index}"))
            # Every read below starts after the put was acknowledged: all must see it.
            got = await asyncio.gather(*(pods.cache.get(pod) for _ in range(6)))
            assert all(item.mod_revision >= written for item in got), (written, got)
            listed = await pods.cache.list(ListOptions())
            assert listed.resource_version >= written
            assert any(i.key == pod and i.mod_revision >= written for i in listed.items)
            configmap = configmap_key(f"c{index}")
            written = await client.put(configmap.encode(), b'{"metadata":{"name":"c"}}')
            listed = await configmaps.cache.list(ListOptions())
            assert listed.resource_version >= written
            assert any(i.key == configmap and i.mod_revision >= written for i in listed.items)
            # Elsewhere: neither cache gets an event; their reads must wait for progress.
            written = await client.put(f"/registry/leases/x/l{index}-{round_}".encode(), b"{}")
            got = await asyncio.gather(*(pods.cache.get(pod) for _ in range(3)))
            assert pods.cache.resource_version >= written
            assert all(item.mod_revision <= pods.cache.resource_version for item in got)
            checked += 1

    background = asyncio.ensure_future(background_reads())
    try:
        # The first gets of keys not written yet may 404; that is not what is checked.
        for i in range(4):
            await client.put(pod_key("a", f"p{i}").encode(), pod_value("a", f"p{i}"))
        await asyncio.wait_for(asyncio.gather(*(writer(i) for i in range(4))), 120)
    finally:
        stop.set()
        await background
    assert checked == 100
    calls, reads = shared.calls - calls_before, shared.reads - reads_before
    assert reads >= 2 * calls, f"{reads} reads made {calls} calls: little sharing"
    await asyncio.gather(pods.stop(), configmaps.stop())


async def test_a_lone_consistent_get_makes_one_call(client: EtcdClient) -> None:
    pods = SyncedCache(client, PREFIX, resource="pods", kind="Pod", codec=POD_FIELDS)
    try:
        await pods.start()
        shared = pods.store.current_revision
        calls = shared.calls
        written = await client.put(pod_key("a", "p").encode(), pod_value("a", "p"))
        assert (await pods.cache.get(pod_key("a", "p"))).mod_revision == written
        assert shared.calls == calls + 1
        with pytest.raises(NotFoundError):
            await pods.cache.get(pod_key("a", "missing"))
        assert shared.calls == calls + 2
    finally:
        await pods.stop()
