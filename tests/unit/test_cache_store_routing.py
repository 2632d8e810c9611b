"""WatchCache.list with a backing store: the fallbacks of docs/semantics.md §2.4, §2.7 and §3.5.

The store here is a small multi-version dict that records every call — an oracle for the
routing rules only (which requests reach the store, with which revision, and what the
cache does with the answer). The same rows run against a real etcd in the etcd issue's
integration tests.
"""

from __future__ import annotations

import asyncio

import pytest
from kubeobjects import PREFIX, added, names, pod, pod_key

from watchcache import Item
from watchcache.cache.backing_store import ListResult, Source, StoreListRequest
from watchcache.cache.watch_cache import WatchCache
from watchcache.cache.watcher import WATCH_LIST_UNSUPPORTED
from watchcache.wire.errors import InternalError, NotFoundError, TooManyRequestsError
from watchcache.wire.options import ListOptions, WatchOptions
from watchcache.wire.tokens import encode_continue


class VersionedStore:
    """Revision → contents, like etcd's MVCC keyspace, plus a log of what was asked."""

    def __init__(self, consistent_reads_supported: bool = True) -> None:
        self.consistent_reads_supported = consistent_reads_supported
        self.revisions: dict[int, dict[str, Item]] = {}
        self.current = 0
        self.requests: list[StoreListRequest] = []
        self.gets: list[str] = []
        self.rv_reads = 0

    def put(self, rv: int, item: Item) -> None:
        contents = dict(self.revisions.get(self.current, {}))
        contents[item.key] = item
        self.revisions[rv] = contents
        self.current = rv

    async def current_resource_version(self) -> int:
        self.rv_reads += 1
        return self.current

    async def get(self, key: str, minimum: int, *, resource: str, group: str = "") -> Item:
        self.gets.append(key)
        item = self.revisions[self.current].get(key)
        if item is None:
            raise NotFoundError.for_object(resource, key.rsplit("/", 1)[-1], group)
        return item

    async def list(self, request: StoreListRequest) -> ListResult:
        self.requests.append(request)
        revision = request.revision or self.current
        contents = self.revisions[max(r for r in self.revisions if r <= revision)]
        keys = sorted(k for k in contents if k.startswith(request.key_prefix))
        if request.start_key is not None:
            keys = [k for k in keys if k >= request.start_key]
        if request.limit:
            keys = keys[: request.limit]
        return ListResult([contents[k] for k in keys], revision, source=Source.STORE)


def setup(store: VersionedStore, **kwargs: object) -> WatchCache:
    cache = WatchCache(PREFIX, kind="Pod", store=store, wait_timeout=0.05, **kwargs)  # type: ignore[arg-type]
    first = pod("a", "p1", 10)
    store.put(10, first)
    cache.replace([first], 10)
    return cache


async def test_consistent_read_of_a_fresh_cache_does_not_list_the_store() -> None:
    store = VersionedStore()
    cache = setup(store)
    result = await cache.list(ListOptions(limit=5))
    assert (result.source, result.row, result.fallback) == (Source.CACHE, "C3", "false")
    assert store.rv_reads == 1
    assert store.requests == []
    assert cache.stats.consistent_reads == {(True, "false"): 1}


async def test_consistent_read_waits_for_the_cache_and_signals_the_progress_requester() -> None:
    store = VersionedStore()
    cache = setup(store)
    counts: list[int] = []
    cache.add_wait_listener(counts.append)
    store.put(11, pod("a", "p2", 11))

    async def catch_up() -> None:
        await asyncio.sleep(0.01)
        cache.apply(added(pod("a", "p2", 11)))

    task = asyncio.create_task(catch_up())
    result = await cache.list(ListOptions())
    await task
    assert result.source is Source.CACHE
    assert names(result.items) == ["a/p1", "a/p2"]
    assert result.waited_seconds > 0
    assert counts == [1, 0]


async def test_consistent_read_that_times_out_falls_back_to_the_store() -> None:
    store = VersionedStore()
    cache = setup(store)
    store.put(12, pod("a", "p2", 12))  # the cache never sees it
    result = await cache.list(ListOptions())
    assert (result.source, result.fallback) == (Source.STORE, "true")
    assert names(result.items) == ["a/p1", "a/p2"]
    assert cache.stats.consistent_reads == {(True, "true"): 1}


async def test_consistent_read_timeout_without_fallback_is_429() -> None:
    store = VersionedStore()
    cache = setup(store, skip_consistent_fallback=True)
    store.put(12, pod("a", "p2", 12))
    with pytest.raises(TooManyRequestsError) as info:
        await cache.list(ListOptions())
    assert info.value.message == "Timeout: Too large resource version: 12, current: 10"
    assert info.value.retry_after_seconds == 1
    assert store.requests == []
    assert cache.stats.consistent_reads == {(False, "skipped"): 1}


async def test_consistent_get_that_times_out_reads_the_object_from_the_store() -> None:
    # Kubernetes reads a GET without resourceVersion from etcd, so a cache that lags must
    # not turn it into a 504.
    store = VersionedStore()
    cache = setup(store)
    store.put(12, pod("a", "p2", 12))  # the cache never sees it
    got = await cache.get(f"{PREFIX}a/p2")
    assert got.mod_revision == 12
    assert store.gets == [f"{PREFIX}a/p2"]
    assert cache.stats.gets_from_store == 1
    with pytest.raises(NotFoundError):
        await cache.get(f"{PREFIX}a/missing")


async def test_consistent_get_timeout_without_fallback_is_429() -> None:
    store = VersionedStore()
    cache = setup(store, skip_consistent_fallback=True)
    store.put(12, pod("a", "p2", 12))
    with pytest.raises(TooManyRequestsError) as info:
        await cache.get(f"{PREFIX}a/p2")
    assert info.value.message == "Timeout: Too large resource version: 12, current: 10"
    assert store.gets == []


async def test_without_progress_support_consistent_reads_go_to_the_store() -> None:
    store = VersionedStore(consistent_reads_supported=False)
    cache = setup(store)
    result = await cache.list(ListOptions())
    assert result.source is Source.STORE
    assert store.requests[0].revision == 0


async def test_continuation_whose_snapshot_is_gone_is_read_from_the_store_at_its_rv() -> None:
    store = VersionedStore()
    cache = setup(store)
    store.put(5, pod("a", "p0", 5))  # an old revision the cache never had a snapshot of
    token = encode_continue(pod_key("a", "p0") + "\x00", PREFIX[:-1], 5)
    result = await cache.list(ListOptions(limit=1, continue_token=token))
    assert result.source is Source.STORE
    request = store.requests[0]
    assert (request.revision, request.start_key, request.continued) == (
        5,
        pod_key("a", "p0") + "\x00",
        True,
    )


@pytest.mark.parametrize(
    ("opts", "served_by_store"),
    [
        (ListOptions(limit=500), True),
        (ListOptions(limit=500, label_selector="app=x"), False),
        (ListOptions(resource_version="0"), False),
    ],
    ids=["unfiltered-page", "selector", "rv0-no-limit"],
)
async def test_not_ready_cache_reads_unfiltered_pages_from_the_store(
    opts: ListOptions, served_by_store: bool
) -> None:
    store = VersionedStore()
    cache = setup(store)
    cache.mark_not_ready("watch lost")
    if served_by_store:
        assert (await cache.list(opts)).source is Source.STORE
    else:
        with pytest.raises(TooManyRequestsError, match="storage is \\(re\\)initializing"):
            await cache.list(opts)


async def test_watch_list_needs_progress_support() -> None:
    store = VersionedStore(consistent_reads_supported=False)
    cache = setup(store)
    opts = WatchOptions.from_query(
        {
            "sendInitialEvents": "true",
            "allowWatchBookmarks": "true",
            "resourceVersionMatch": "NotOlderThan",
        }
    )
    with pytest.raises(InternalError) as info:
        await cache.watch(opts)
    assert info.value.message == f"Internal error occurred: {WATCH_LIST_UNSUPPORTED}"
    assert info.value.code == 500


async def test_the_planner_reads_the_cache_live() -> None:
    """The cache is the planner's CacheView: what it reports follows the store and the
    registry at the moment of each LIST, not a copy taken earlier."""
    store = VersionedStore(consistent_reads_supported=False)
    cache = setup(store)
    assert (cache.has_store, cache.consistent_reads_supported) == (True, False)
    assert cache.has_snapshot_at_or_below(10) and cache.has_snapshot_at_or_below(11)
    assert not cache.has_snapshot_at_or_below(9)
    assert (await cache.list(ListOptions())).source is Source.STORE
    store.consistent_reads_supported = True
    assert (cache.has_store, cache.consistent_reads_supported) == (True, True)
    assert (await cache.list(ListOptions())).source is Source.CACHE
    bare = WatchCache(PREFIX, kind="Pod")
    assert not bare.has_store and not bare.consistent_reads_supported
    assert not bare.has_snapshot_at_or_below(10)
