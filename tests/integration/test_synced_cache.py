"""A WatchCache synced from a real etcd: list-then-watch, consistent reads from the cache,
progress requests, relist on compaction, multi-key transactions, tokens across instances,
and the inconsistency detector checking the cache against etcd at every checked rv."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest
from kubeobjects import PREFIX, names, pod_key, pod_value, rv_of

from watchcache.cache.backing_store import Source
from watchcache.cache.event import EventType
from watchcache.cache.objects import ObjectCodec
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster
from watchcache.etcd.proto import rpc_pb2
from watchcache.etcd.version import ConsistentReadsMode
from watchcache.sync.synced import SyncedCache
from watchcache.wire.errors import ExpiredError, WatchTerminatedError
from watchcache.wire.options import ListOptions, ResourceVersionMatch, WatchOptions

POD_FIELDS = ObjectCodec(("metadata.name", "metadata.namespace", "spec.nodeName"))


async def put_pod(client: EtcdClient, namespace: str, name: str, **kw: object) -> int:
    return await client.put(pod_key(namespace, name).encode(), pod_value(namespace, name, **kw))  # type: ignore[arg-type]


@pytest.fixture
async def pods(client: EtcdClient) -> AsyncIterator[SyncedCache]:
    synced = SyncedCache(client, PREFIX, resource="pods", kind="Pod", codec=POD_FIELDS)
    yield synced
    await synced.stop()


async def eventually(condition: object, timeout: float = 5.0) -> None:
    assert callable(condition)
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


async def test_initial_list_is_paginated_at_one_revision_and_marks_ready(
    client: EtcdClient, pods: SyncedCache
) -> None:
    for i in range(25):
        await put_pod(client, "a", f"p{i:02d}", labels={"app": "x" if i % 2 else "y"})
    await client.put(b"/registry/podsX", b"{}")  # outside the prefix
    pods.reflector.page_size = 10  # three Range pages
    ready_before = pods.cache.ready
    await pods.start()
    assert (ready_before, pods.cache.ready) == (False, True)
    assert len(pods.cache) == 25
    result = await pods.cache.list(ListOptions(label_selector="app=x"))
    assert names(result.items) == [f"a/p{i:02d}" for i in range(1, 25, 2)]
    # Every value carries its etcd mod revision as metadata.resourceVersion.
    for item in result.items:
        assert rv_of(item.value) == item.mod_revision
    assert (await pods.checker.check()).status == "success"


async def test_watch_events_reach_the_cache_and_its_watchers(
    client: EtcdClient, pods: SyncedCache
) -> None:
    await put_pod(client, "a", "p1")
    await pods.start()
    watcher = await pods.cache.watch(
        WatchOptions(resource_version=str(pods.cache.resource_version))
    )
    rv2 = await put_pod(client, "a", "p2", node="n1")
    rv3 = await put_pod(client, "a", "p1", labels={"k": "v"})
    deleted = await client.delete_range(pod_key("a", "p2").encode())
    rv4 = int(deleted.header.revision)
    got = [await asyncio.wait_for(anext(watcher), 5) for _ in range(3)]
    await watcher.aclose()
    assert [(e.type, e.resource_version) for e in got] == [
        (EventType.ADDED, rv2),
        (EventType.MODIFIED, rv3),
        (EventType.DELETED, rv4),
    ]
    # The deleted object is its last state, stamped with the delete's revision.
    assert rv_of(got[2].object) == rv4
    result = await pods.cache.list(ListOptions(field_selector="spec.nodeName=n1"))
    assert len(result.items) == 0


async def test_consistent_list_returns_a_write_made_just_before_it(
    client: EtcdClient, pods: SyncedCache
) -> None:
    await pods.start()
    for i in range(20):
        rv = await put_pod(client, "a", f"p{i}")
        result = await pods.cache.list(ListOptions())
        assert result.source is Source.CACHE
        assert result.resource_version >= rv
        assert f"a/p{i}" in names(result.items)
    assert pods.cache.stats.consistent_reads.get((True, "false")) == 20


async def test_progress_requests_advance_an_idle_cache(
    client: EtcdClient, pods: SyncedCache
) -> None:
    await put_pod(client, "a", "p1")
    await pods.start()
    before = pods.cache.resource_version
    # Writes elsewhere move etcd's revision; no event of this prefix will follow.
    for i in range(5):
        await client.put(f"/registry/configmaps/a/c{i}".encode(), b"{}")
    current = await client.current_revision(b"/registry/pods")
    assert current > before
    result = await pods.cache.list(ListOptions())
    assert result.source is Source.CACHE
    assert result.resource_version >= current
    assert pods.requester.requests_sent >= 1
    assert pods.reflector.stats.progress_notifications >= 1
    assert result.waited_seconds < 1.0


async def test_consistent_reads_go_to_etcd_when_the_safeguard_says_no(
    client: EtcdClient,
) -> None:
    synced = SyncedCache(client, PREFIX, kind="Pod", mode=ConsistentReadsMode.OFF)
    try:
        await synced.start()
        rv = await put_pod(client, "a", "p1")
        result = await synced.cache.list(ListOptions())
        assert result.source is Source.STORE
        assert result.resource_version >= rv
        assert synced.requester.requests_sent == 0
    finally:
        await synced.stop()


async def test_a_transaction_changing_several_keys_is_applied_as_one_revision(
    client: EtcdClient, pods: SyncedCache
) -> None:
    await pods.start()
    ops = [
        rpc_pb2.RequestOp(
            request_put=rpc_pb2.PutRequest(
                key=pod_key("t", f"p{i}").encode(), value=pod_value("t", f"p{i}")
            )
        )
        for i in range(3)
    ]
    response = await client.txn(rpc_pb2.TxnRequest(success=ops))
    rv = int(response.header.revision)
    result = await pods.cache.list(ListOptions())
    assert names(result.items) == ["t/p0", "t/p1", "t/p2"]
    assert {item.mod_revision for item in result.items} == {rv}
    exact = await pods.cache.list(
        ListOptions(resource_version=str(rv), resource_version_match=ResourceVersionMatch.EXACT)
    )
    assert exact.source is Source.SNAPSHOT
    assert names(exact.items) == ["t/p0", "t/p1", "t/p2"]
    assert pods.reflector.stats.relists_after_order_errors == 0


async def test_compaction_while_the_watch_is_down_relists_and_old_watchers_get_410(
    etcd_cluster: EtcdCluster,
) -> None:
    # The cache talks to member 0 only; while it is down the others take writes and
    # compact, so the watch comes back below the compacted revision.
    member = etcd_cluster.members[0]
    async with (
        EtcdClient([member.endpoint], timeout=5.0) as client,
        EtcdClient(etcd_cluster.endpoints[1:], timeout=10.0) as others,
    ):
        await put_pod(others, "a", "p0")
        pods = SyncedCache(client, PREFIX, kind="Pod")
        try:
            await pods.start()
            start_rv = pods.cache.resource_version
            watcher = await pods.cache.watch(WatchOptions(resource_version=str(start_rv)))
            member.stop(kill=True)
            last = 0
            for i in range(5):
                last = await put_pod(others, "a", f"p{i}")
            await others.compact(last)
            await asyncio.to_thread(etcd_cluster.restart, member)
            await eventually(lambda: pods.reflector.stats.relists_after_compaction >= 1, 20)
            await eventually(lambda: pods.cache.ready and pods.cache.resource_version >= last)
            assert len(pods.cache) == 5
            with pytest.raises(WatchTerminatedError):
                while True:
                    await asyncio.wait_for(anext(watcher), 5)
            with pytest.raises(ExpiredError):
                await pods.cache.watch(WatchOptions(resource_version=str(start_rv)))
            assert (await pods.checker.check()).status == "success"
        finally:
            await pods.stop()


async def test_two_caches_continue_each_others_tokens(client: EtcdClient) -> None:
    for i in range(30):
        await put_pod(client, "a", f"p{i:02d}")
    one = SyncedCache(client, PREFIX, kind="Pod")
    two = SyncedCache(client, PREFIX, kind="Pod")
    try:
        await one.start()
        await two.start()
        first = await one.cache.list(ListOptions(limit=10))
        await put_pod(client, "a", "p05", labels={"changed": "yes"})  # after the first page
        second = await two.cache.list(ListOptions(limit=10, continue_token=first.continue_token))
        third = await one.cache.list(ListOptions(limit=10, continue_token=second.continue_token))
        assert names([*first.items, *second.items, *third.items]) == [
            f"a/p{i:02d}" for i in range(30)
        ]
        assert first.resource_version == second.resource_version == third.resource_version
        assert third.continue_token == ""
        # Both the snapshot path and the etcd path keep the list at its first revision.
        assert all(item.mod_revision <= first.resource_version for item in second.items)
    finally:
        await one.stop()
        await two.stop()


async def test_cache_equals_etcd_at_every_checked_rv_under_concurrent_writes(
    client: EtcdClient, pods: SyncedCache, rng: random.Random
) -> None:
    await pods.start()
    live: set[str] = set()

    async def writer() -> None:
        for step in range(300):
            name = f"p{rng.randrange(40)}"
            if name in live and rng.random() < 0.3:
                await client.delete_range(pod_key("w", name).encode())
                live.discard(name)
            else:
                await put_pod(client, "w", name, labels={"step": str(step)})
                live.add(name)

    task = asyncio.create_task(writer())
    checks = 0
    while not task.done():
        result = await pods.checker.check()
        assert result.status == "success", result
        checks += 1
        await asyncio.sleep(0.005)
    await task
    final = await pods.cache.list(ListOptions())
    assert sorted(names(final.items)) == sorted(f"w/{n}" for n in live)
    assert (await pods.checker.check()).status == "success"
    assert checks > 3
    assert pods.checker.counts["failure"] == 0


async def test_leader_killed_mid_stream_loses_and_repeats_nothing(
    etcd_cluster: EtcdCluster,
) -> None:
    async with EtcdClient(etcd_cluster.endpoints, timeout=15.0) as client:
        leader_id = (await client.status(etcd_cluster.endpoints[0])).leader
        members = (await client.member_list()).members
        leader_url = next(m.clientURLs[0] for m in members if leader_id == m.ID)
        leader = next(m for m in etcd_cluster.members if m.url == leader_url)
        # The cache's stream goes to the leader, which is about to die.
        client.prefer(leader.endpoint)
        pods = SyncedCache(client, PREFIX, kind="Pod")
        try:
            await pods.start()
            watcher = await pods.cache.watch(
                WatchOptions(resource_version=str(pods.cache.resource_version))
            )
            seen: list[tuple[str, int]] = []

            async def consume() -> None:
                async for event in watcher:
                    assert event.item is not None
                    seen.append((event.item.key, event.resource_version))

            consumer = asyncio.create_task(consume())
            committed: list[int] = []

            async def writer() -> None:
                for i in range(150):
                    while True:
                        try:
                            committed.append(await put_pod(client, "k", f"p{i % 30}"))
                            break
                        except Exception:
                            await asyncio.sleep(0.05)

            task = asyncio.create_task(writer())
            await eventually(lambda: len(committed) >= 40)
            leader.stop(kill=True)
            await asyncio.wait_for(task, 60)
            await eventually(lambda: pods.cache.resource_version >= committed[-1], 20)
            await eventually(lambda: len(seen) >= len(set(committed)), 10)
            consumer.cancel()
            revisions = [rv for _, rv in seen]
            assert revisions == sorted(set(revisions)), "events repeated or out of order"
            # Every write that etcd committed reached the cache's watcher (a retried put
            # may have committed twice; both revisions must be there).
            history = await client.range_prefix(PREFIX.encode(), revision=0)
            assert set(committed) <= set(revisions)
            assert (await pods.checker.check()).status == "success"
            assert pods.reflector.stats.relists_after_order_errors == 0
            assert len(history.kvs) == len(pods.cache)
        finally:
            await pods.stop()


async def test_a_cache_found_inconsistent_serves_from_etcd_until_rebuilt_and_checked(
    client: EtcdClient, pods: SyncedCache
) -> None:
    # An undecodable value is skipped by the reflector (and every relist), so the cache
    # lacks a key etcd has: the check fails until the value is fixed in etcd.
    await put_pod(client, "a", "p1")
    await client.put(pod_key("z", "bad").encode(), b"not json")
    await pods.start()
    cache = pods.cache
    assert (await pods.checker.check()).status == "failure"
    lists = pods.reflector.stats.lists
    rebuild = asyncio.create_task(pods.checker.rebuild(pods.relist))
    await asyncio.sleep(0)

    def state() -> tuple[bool, bool]:
        return cache.consistent, cache.serve_from_store

    assert state() == (False, True)
    assert len(cache.registry) == 0
    page = await cache.list(ListOptions(resource_version="0"), prefix=f"{PREFIX}a/")
    assert (page.source, page.row, names(page.items)) == (Source.STORE, "I", ["a/p1"])
    gets = cache.stats.gets_from_store
    assert (await cache.get(pod_key("a", "p1"), "0")).key == pod_key("a", "p1")
    assert cache.stats.gets_from_store == gets + 1
    await eventually(lambda: pods.reflector.stats.lists > lists + 1)  # rebuilt, still wrong
    assert not rebuild.done()
    assert state() == (False, True)

    await put_pod(client, "z", "bad")  # now decodable: the next relist takes it
    await asyncio.wait_for(rebuild, 10)
    assert state() == (True, False)
    page = await cache.list(ListOptions(resource_version="0"))
    assert (page.source, sorted(names(page.items))) == (Source.CACHE, ["a/p1", "z/bad"])
    assert len(cache.registry) >= 1  # snapshots again
    assert cache.stats.inconsistencies == 1
    assert pods.checker.counts["success"] >= 1
    cache.check_invariants()
