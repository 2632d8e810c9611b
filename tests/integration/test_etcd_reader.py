"""Reads served straight from etcd (``EtcdReader``, a resource that is not cached) give the
answers the watch cache gives over the same etcd: the same pages, remainingItemCount and
continue positions, the same objects at an exact resourceVersion, the same watch events
(selector transitions included); and where the cache would wait, etcd answers at once as
kube's etcd3 store does (docs/semantics.md §6).

Each test works under a prefix of its own in the module's etcd, with a SyncedCache and an
EtcdReader on that prefix side by side.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from conformance_backends import POD_FIELDS
from kubeobjects import pod_value

from watchcache._core import Item
from watchcache.cache.backing_store import ListResult, Source
from watchcache.cache.reads import EventStream, ResourceReader
from watchcache.cache.watcher import WatchEvent
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster
from watchcache.etcd.reader import EtcdReader
from watchcache.sync.synced import SyncedCache
from watchcache.wire.errors import (
    BadRequestError,
    ExpiredError,
    NotFoundError,
    TooLargeResourceVersionError,
)
from watchcache.wire.options import ListOptions, WatchOptions
from watchcache.wire.tokens import decode_continue

STEP = 10.0


@dataclass
class Pair:
    """A cache and an etcd reader over one prefix, and the client that writes to it."""

    client: EtcdClient
    prefix: str
    synced: SyncedCache
    reader: EtcdReader

    @property
    def both(self) -> tuple[ResourceReader, ResourceReader]:
        return self.synced.cache, self.reader

    def key(self, name: str, namespace: str = "a") -> str:
        return f"{self.prefix}{namespace}/{name}"

    async def create(self, name: str, namespace: str = "a", **labels: str) -> int:
        result = await self.client.create(
            self.key(name, namespace).encode(), pod_value(namespace, name, labels=labels)
        )
        assert result.succeeded
        return await self._caught_up(result.revision)

    async def update(self, name: str, namespace: str = "a", **labels: str) -> int:
        key = self.key(name, namespace).encode()
        current = await self.client.get(key)
        assert current is not None
        result = await self.client.update(
            key, pod_value(namespace, name, labels=labels), int(current.mod_revision)
        )
        assert result.succeeded
        return await self._caught_up(result.revision)

    async def delete(self, name: str, namespace: str = "a") -> int:
        result = await self.client.delete(self.key(name, namespace).encode())
        assert result.succeeded
        return await self._caught_up(result.revision)

    async def _caught_up(self, revision: int) -> int:
        await asyncio.wait_for(self.synced.cache.wait_for_rv(revision, timeout=STEP), STEP)
        return revision


@pytest.fixture
async def pair(module_etcd: EtcdCluster, rng: random.Random) -> AsyncIterator[Pair]:
    prefix = f"/registry/reader-{rng.randrange(16**8):08x}/pods/"
    async with EtcdClient(module_etcd.endpoints, timeout=STEP) as client:
        synced = SyncedCache(
            client, prefix, resource="pods", kind="Pod", codec=POD_FIELDS, wait_timeout=0.2
        )
        reader = EtcdReader(client, prefix, resource="pods", kind="Pod", codec=POD_FIELDS)
        await synced.start(timeout=STEP)
        try:
            yield Pair(client, prefix, synced, reader)
        finally:
            await synced.stop()


def page(result: ListResult, prefix: str) -> tuple[list[tuple[str, bytes]], int | None, Any]:
    """A page as a client sees it: items, remainingItemCount, and where the continue token
    resumes (cache and etcd tokens differ as text: docs/semantics.md §1.4)."""
    resumes = decode_continue(result.continue_token, prefix) if result.continue_token else None
    return [(i.key, i.value) for i in result.items], result.remaining_item_count, resumes


async def walk(reader: ResourceReader, prefix: str, **query: str) -> list[Any]:
    """Every page of a paginated LIST, as ``page`` describes them."""
    pages = []
    result = await reader.list(ListOptions.from_query(query))
    pages.append((page(result, prefix), result.resource_version))
    while result.continue_token:
        result = await reader.list(
            ListOptions.from_query({**query, "continue": result.continue_token})
        )
        pages.append((page(result, prefix), result.resource_version))
    return pages


async def take(stream: EventStream, count: int) -> list[WatchEvent]:
    got: list[WatchEvent] = []
    async with asyncio.timeout(STEP):
        async for event in stream:
            got.append(event)
            if len(got) == count:
                break
    return got


def summary(events: Sequence[WatchEvent]) -> list[tuple[str, str, int, bytes]]:
    out = []
    for event in events:
        name = json.loads(event.object)["metadata"].get("name", "")
        out.append((str(event.type), name, event.resource_version, event.object))
    return out


async def started(reader: ResourceReader, **query: str) -> EventStream:
    stream = reader.watch(WatchOptions.from_query(query))
    await stream.start()
    return stream


# -- LIST -----------------------------------------------------------------------------------


async def test_lists_are_the_same_from_the_cache_and_from_etcd(pair: Pair) -> None:
    for i in range(7):
        await pair.create(f"p{i}", app="x" if i % 2 else "y")
    await pair.create("q", namespace="b", app="x")
    cache, etcd = pair.both
    for query in (
        {},
        {"resourceVersion": "0"},
        {"labelSelector": "app=x"},
        {"fieldSelector": "metadata.name!=p3"},
    ):
        from_cache, from_etcd = (
            await cache.list(ListOptions.from_query(query)),
            await etcd.list(ListOptions.from_query(query)),
        )
        assert page(from_etcd, pair.prefix) == page(from_cache, pair.prefix), query
        assert from_etcd.source is Source.STORE
    # Pagination: the same pages, counts and resume points, all at the first page's rv.
    for query in ({"limit": "3"}, {"limit": "2", "labelSelector": "app=x"}):
        assert await walk(etcd, pair.prefix, **query) == await walk(cache, pair.prefix, **query)
    namespace_b = f"{pair.prefix}b/"
    assert page(await etcd.list(ListOptions(), prefix=namespace_b), namespace_b)[0] == [
        (pair.key("q", "b"), (await cache.get(pair.key("q", "b"))).value)
    ]


async def test_an_exact_list_reads_the_past_like_a_snapshot_does(pair: Pair) -> None:
    first = await pair.create("p1", app="x")
    await pair.create("p2", app="x")
    before = await pair.update("p1", app="y")
    await pair.delete("p2")
    cache, etcd = pair.both
    for query in (
        {"resourceVersion": str(before), "resourceVersionMatch": "Exact"},
        {"resourceVersion": str(first), "limit": "5"},  # legacy exact: RV with a limit
    ):
        from_cache = await cache.list(ListOptions.from_query(query))
        from_etcd = await etcd.list(ListOptions.from_query(query))
        assert page(from_etcd, pair.prefix) == page(from_cache, pair.prefix), query
        assert from_etcd.resource_version == from_cache.resource_version


async def test_etcd_answers_a_future_rv_at_once_with_504(pair: Pair) -> None:
    written = await pair.create("p1")
    future = written + 1000
    with pytest.raises(TooLargeResourceVersionError) as from_etcd:
        await pair.reader.list(ListOptions(resource_version=str(future)))
    assert from_etcd.value.message == (
        f"Timeout: Too large resource version: {future}, current: {written}"
    )
    assert from_etcd.value.retry_after_seconds == 0  # kube's etcd3 store: no retry hint
    with pytest.raises(TooLargeResourceVersionError):  # the cache, after its wait
        await pair.synced.cache.list(ListOptions(resource_version=str(future)))


async def test_a_continuation_of_a_compacted_revision_is_410_with_a_fresh_token(
    pair: Pair,
) -> None:
    for i in range(4):
        await pair.create(f"p{i}")
    first = await pair.reader.list(ListOptions(limit=2))
    await pair.update("p0", app="z")
    await pair.client.compact(await pair.client.current_revision(b"/"))
    with pytest.raises(ExpiredError) as info:
        await pair.reader.list(ListOptions(limit=2, continue_token=first.continue_token))
    assert info.value.continue_token
    start, rv = decode_continue(info.value.continue_token, pair.prefix)
    assert (start, rv) == (pair.key("p1") + "\0", -1)
    resumed = await pair.reader.list(ListOptions(limit=2, continue_token=info.value.continue_token))
    assert [i.key for i in resumed.items] == [pair.key("p2"), pair.key("p3")]


async def test_a_prefix_outside_the_resource_is_refused(pair: Pair) -> None:
    with pytest.raises(BadRequestError):
        await pair.reader.list(ListOptions(), prefix="/registry/secrets/")
    with pytest.raises(BadRequestError):
        await pair.reader.list(ListOptions(), prefix=f"{pair.prefix}../")


# -- GET ------------------------------------------------------------------------------------


async def test_get_is_the_same_object_and_the_same_404(pair: Pair) -> None:
    written = await pair.create("p1", app="x")
    cache, etcd = pair.both
    for rv in ("", "0", str(written)):
        assert (await etcd.get(pair.key("p1"), rv)).value == (
            await cache.get(pair.key("p1"), rv)
        ).value
    for reader in (cache, etcd):
        with pytest.raises(NotFoundError) as info:
            await reader.get(pair.key("nope"))
        assert info.value.message == 'pods "nope" not found'
    with pytest.raises(TooLargeResourceVersionError) as too_new:
        await etcd.get(pair.key("p1"), str(written + 50))
    assert too_new.value.message.endswith(f"{written + 50}, current: {written}")
    with pytest.raises(BadRequestError):
        await etcd.get(pair.key("p1"), "abc")


# -- WATCH ----------------------------------------------------------------------------------


async def test_watches_from_an_rv_see_the_same_events(pair: Pair) -> None:
    start = await pair.create("p1", app="x")
    await pair.create("p2", app="y")
    streams = [
        await started(r, resourceVersion=str(start), labelSelector="app=x") for r in pair.both
    ]
    await pair.update("p2", app="x")  # enters the selector: ADDED
    await pair.update("p1", app="y")  # leaves it: DELETED at the new rv
    await pair.create("p3", app="x")
    await pair.update("p3", app="x")  # stays: MODIFIED
    await pair.delete("p3")
    from_cache, from_etcd = [summary(await take(s, 5)) for s in streams]
    assert from_etcd == from_cache
    assert [e[:2] for e in from_etcd] == [
        ("ADDED", "p2"),
        ("DELETED", "p1"),
        ("ADDED", "p3"),
        ("MODIFIED", "p3"),
        ("DELETED", "p3"),
    ]
    for stream in streams:
        await stream.aclose()


async def test_watch_list_sends_the_state_then_the_annotated_bookmark(pair: Pair) -> None:
    await pair.create("p1", app="x")
    await pair.create("p2", app="x")
    query = {
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
    }
    streams = [await started(r, **query) for r in pair.both]
    from_cache, from_etcd = [summary(await take(s, 3)) for s in streams]
    assert from_etcd == from_cache
    assert [e[0] for e in from_etcd] == ["ADDED", "ADDED", "BOOKMARK"]
    assert b'"k8s.io/initial-events-end":"true"' in from_etcd[2][3]
    later = await pair.create("p3")
    for stream in streams:
        assert summary(await take(stream, 1))[0][:3] == ("ADDED", "p3", later)
        await stream.aclose()


async def test_watch_without_initial_events_starts_at_etcds_revision(pair: Pair) -> None:
    await pair.create("p1")
    stream = await started(
        pair.reader, sendInitialEvents="false", resourceVersionMatch="NotOlderThan"
    )
    later = await pair.create("p2")
    assert summary(await take(stream, 1))[0][:3] == ("ADDED", "p2", later)
    await stream.aclose()


async def test_watch_list_above_etcds_revision_is_504(pair: Pair) -> None:
    written = await pair.create("p1")
    stream = pair.reader.watch(
        WatchOptions.from_query(
            {
                "resourceVersion": str(written + 100),
                "sendInitialEvents": "true",
                "resourceVersionMatch": "NotOlderThan",
                "allowWatchBookmarks": "true",
            }
        )
    )
    with pytest.raises(TooLargeResourceVersionError) as info:
        await stream.start()
    assert 1 <= info.value.retry_after_seconds <= 3


async def test_watch_at_a_compacted_rv_ends_with_one_410_event(pair: Pair) -> None:
    old = await pair.create("p1")
    await pair.update("p1", app="z")
    await pair.update("p1", app="zz")  # compacting here leaves old + 1 unreadable
    await pair.client.compact(await pair.client.current_revision(b"/"))
    stream = await started(pair.reader, resourceVersion=str(old))
    async with asyncio.timeout(STEP):
        events = [event async for event in stream]
    assert len(events) == 1 and events[0].type == "ERROR"
    status = json.loads(events[0].object)
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"] == "The resourceVersion for the provided watch is too old."


async def test_an_undecodable_value_ends_the_watch_with_a_500_event(pair: Pair) -> None:
    start = await pair.create("p1")
    stream = await started(pair.reader, resourceVersion=str(start))
    await pair.client.put(pair.key("bad").encode(), b"not json")
    async with asyncio.timeout(STEP):
        events = [event async for event in stream]
    assert [e.type for e in events] == ["ERROR"]
    assert json.loads(events[0].object)["code"] == 500


async def test_a_watch_ends_at_its_timeout(pair: Pair) -> None:
    start = await pair.create("p1")
    stream = await started(pair.reader, resourceVersion=str(start), timeoutSeconds="1")
    began = asyncio.get_running_loop().time()
    assert [event async for event in stream] == []
    assert 0.9 < asyncio.get_running_loop().time() - began < 3


def test_item_values_are_what_the_cache_stores() -> None:
    # The reader decodes with the resource's codec: resourceVersion set, fields extracted.
    reader = EtcdReader(
        EtcdClient(["127.0.0.1:1"]),
        "/registry/pods/",
        resource="pods",
        kind="Pod",
        codec=POD_FIELDS,
    )
    item: Item = reader.decode(b"/registry/pods/a/p", pod_value("a", "p", node="n1"), 42)
    assert json.loads(item.value)["metadata"]["resourceVersion"] == "42"
    assert item.fields["spec.nodeName"] == "n1"
