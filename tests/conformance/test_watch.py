"""WATCH conformance: docs/semantics.md §5 and §11 behaviours 23-30, against a WatchCache
without a store (the etcd issue adds the store-dependent rows)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest
from kubeobjects import PREFIX, added, deleted, modified, pod, rv_of

from watchcache.cache.event import EventType
from watchcache.cache.watch_cache import WatchCache
from watchcache.cache.watcher import Watcher, WatchEvent
from watchcache.wire.errors import (
    ExpiredError,
    TooLargeResourceVersionError,
    TooManyRequestsError,
    WatchTerminatedError,
)
from watchcache.wire.options import WatchOptions

ADDED, MODIFIED, DELETED, BOOKMARK = (
    EventType.ADDED,
    EventType.MODIFIED,
    EventType.DELETED,
    EventType.BOOKMARK,
)


def make_cache(**kwargs: object) -> WatchCache:
    """Relisted at 9 with a/p1 and a/p2 (rv 5, 6)."""
    cache = WatchCache(PREFIX, resource="pods", kind="Pod", **kwargs)  # type: ignore[arg-type]
    cache.replace([pod("a", "p1", 5, {"app": "x"}), pod("a", "p2", 6, {"app": "y"})], 9)
    return cache


def watch(cache: WatchCache, prefix: str | None = None, **query: str) -> Watcher:
    return cache.watch(WatchOptions.from_query(query), prefix=prefix)


async def take(watcher: Watcher, n: int, timeout: float = 2.0) -> list[WatchEvent]:
    out: list[WatchEvent] = []
    async with asyncio.timeout(timeout):
        while len(out) < n:
            out.append(await anext(watcher))
    return out


async def nothing_more(watcher: Watcher, within: float = 0.05) -> bool:
    try:
        async with asyncio.timeout(within):
            await anext(watcher)
    except TimeoutError:
        return True
    return False


def summary(events: Sequence[WatchEvent]) -> list[tuple[str, str, int]]:
    out = []
    for e in events:
        name = json.loads(e.object)["metadata"].get("name", "")
        out.append((str(e.type), name, e.resource_version))
    return out


async def test_watch_from_rv_is_exclusive_and_replays_history() -> None:
    cache = make_cache()
    p3 = pod("a", "p3", 10)
    cache.apply(added(p3))
    cache.apply(added(pod("a", "p4", 11)))
    w = await watch(cache, resourceVersion="10")
    assert summary(await take(w, 1)) == [("ADDED", "p4", 11)]
    cache.apply(modified(pod("a", "p3", 12), p3))
    assert summary(await take(w, 1)) == [("MODIFIED", "p3", 12)]
    await w.aclose()


async def test_watch_too_old_is_410_with_oldest_servable() -> None:
    cache = make_cache()
    with pytest.raises(ExpiredError) as info:
        await watch(cache, resourceVersion="8")
    assert info.value.message == "too old resource version: 8 (9)"
    assert json.loads(info.value.watch_event()) == {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "too old resource version: 8 (9)",
            "reason": "Expired",
            "code": 410,
        },
    }


async def test_watch_from_list_rv_is_accepted_right_after_relist() -> None:
    cache = make_cache()
    w = await watch(cache, resourceVersion="9")
    assert await nothing_more(w)
    cache.apply(added(pod("a", "p3", 10)))
    assert summary(await take(w, 1)) == [("ADDED", "p3", 10)]


async def test_watch_after_eviction_uses_first_buffered_event() -> None:
    cache = make_cache(history_lower_bound=2, history_upper_bound=2, window_seconds=0.001)
    for rv in (10, 11, 12):
        cache.apply(added(pod("a", f"n{rv}", rv)))
    assert cache.oldest_rv == 10
    assert not cache.can_serve_watch(9)
    assert cache.can_serve_watch(10)
    with pytest.raises(ExpiredError, match=r"too old resource version: 9 \(10\)"):
        await watch(cache, resourceVersion="9")
    w = await watch(cache, resourceVersion="10")
    assert summary(await take(w, 2)) == [("ADDED", "n11", 11), ("ADDED", "n12", 12)]


async def test_watch_from_future_rv_waits_silently_and_skips_up_to_it() -> None:
    cache = make_cache()
    w = await watch(cache, resourceVersion="11")
    cache.apply(added(pod("a", "p10", 10)))
    cache.apply(added(pod("a", "p11", 11)))
    cache.apply(added(pod("a", "p12", 12)))
    assert summary(await take(w, 1)) == [("ADDED", "p12", 12)]


async def test_watch_without_rv_sends_state_then_live_events() -> None:
    cache = make_cache()
    w = await watch(cache)  # defaulted to watch-list: sendInitialEvents, NotOlderThan
    first = await take(w, 2)
    assert summary(first) == [("ADDED", "p1", 5), ("ADDED", "p2", 6)]
    cache.apply(added(pod("a", "p0", 10)))
    assert summary(await take(w, 1)) == [("ADDED", "p0", 10)]


async def test_watch_list_ends_initial_events_with_annotated_bookmark() -> None:
    cache = make_cache(bookmark_interval=0.1)
    cache.advance(15)
    w = await watch(
        cache,
        sendInitialEvents="true",
        resourceVersionMatch="NotOlderThan",
        allowWatchBookmarks="true",
    )
    events = await take(w, 3)
    assert summary(events) == [("ADDED", "p1", 5), ("ADDED", "p2", 6), ("BOOKMARK", "", 15)]
    end = json.loads(events[2].object)
    assert end == {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "resourceVersion": "15",
            "annotations": {"k8s.io/initial-events-end": "true"},
        },
    }
    cache.apply(added(pod("a", "p3", 16)))
    assert summary(await take(w, 1)) == [("ADDED", "p3", 16)]
    cache.advance(20)
    later = await take(w, 1)
    assert summary(later) == [("BOOKMARK", "", 20)]
    assert "annotations" not in json.loads(later[0].object)["metadata"]


async def test_watch_list_at_rv_ahead_of_cache_times_out_with_504() -> None:
    cache = make_cache(wait_timeout=0.05)
    with pytest.raises(TooLargeResourceVersionError) as info:
        await watch(
            cache,
            resourceVersion="105",
            sendInitialEvents="true",
            resourceVersionMatch="NotOlderThan",
            allowWatchBookmarks="true",
        )
    assert info.value.message == "Timeout: Too large resource version: 105, current: 9"
    assert info.value.retry_after_seconds == 1


async def test_watch_list_at_rv_sends_current_state_not_history() -> None:
    cache = make_cache()
    p1 = pod("a", "p1", 5, {"app": "x"})
    cache.apply(modified(pod("a", "p1", 10, {"app": "x"}), p1))
    w = await watch(
        cache, resourceVersion="6", sendInitialEvents="true", resourceVersionMatch="NotOlderThan"
    )
    assert summary(await take(w, 2)) == [("ADDED", "p1", 10), ("ADDED", "p2", 6)]


async def test_bookmarks_only_when_allowed_and_only_after_progress() -> None:
    cache = make_cache(bookmark_interval=0.05)
    with_bookmarks = await watch(cache, resourceVersion="9", allowWatchBookmarks="true")
    without = await watch(cache, resourceVersion="9")
    # no progress past the start: no bookmark
    assert await nothing_more(with_bookmarks, 0.15)
    cache.advance(12)
    assert summary(await take(with_bookmarks, 1)) == [("BOOKMARK", "", 12)]
    assert await nothing_more(without, 0.15)


async def test_bookmark_before_timeout_then_the_watch_ends() -> None:
    cache = make_cache(bookmark_interval=60.0)
    w = await watch(cache, resourceVersion="9", allowWatchBookmarks="true", timeoutSeconds="3")
    cache.advance(12)
    started = asyncio.get_running_loop().time()
    events = await take(w, 1, timeout=5)
    assert summary(events) == [("BOOKMARK", "", 12)]
    assert 0.5 < asyncio.get_running_loop().time() - started < 2.0  # about 3 s - 2 s
    with pytest.raises(StopAsyncIteration):
        async with asyncio.timeout(5):
            await anext(w)


async def test_label_change_out_of_selector_is_deleted_with_new_rv() -> None:
    cache = make_cache()
    w = await watch(cache, resourceVersion="9", labelSelector="app=x")
    old = pod("a", "p1", 5, {"app": "x"})
    moved = pod("a", "p1", 10, {"app": "z"})
    cache.apply(modified(moved, old))
    back = pod("a", "p1", 11, {"app": "x"})
    cache.apply(modified(back, moved))
    cache.apply(modified(pod("a", "p2", 12, {"app": "y2"}), pod("a", "p2", 6, {"app": "y"})))
    cache.apply(deleted(back, 13))
    events = await take(w, 3)
    assert summary(events) == [("DELETED", "p1", 10), ("ADDED", "p1", 11), ("DELETED", "p1", 13)]
    gone = json.loads(events[0].object)
    assert gone["metadata"]["labels"] == {"app": "x"}  # the pre-change object...
    assert rv_of(events[0].object) == 10  # ...at the update's rv


async def test_history_replay_applies_selector_transitions_too() -> None:
    cache = make_cache()
    old = pod("a", "p1", 5, {"app": "x"})
    cache.apply(modified(pod("a", "p1", 10, {"app": "z"}), old))
    w = await watch(cache, resourceVersion="9", labelSelector="app=x")
    assert summary(await take(w, 1)) == [("DELETED", "p1", 10)]


async def test_prefix_watch_sees_only_its_namespace() -> None:
    cache = make_cache()
    w = await watch(cache, prefix=f"{PREFIX}b", resourceVersion="9")
    cache.apply(added(pod("a", "x", 10)))
    cache.apply(added(pod("b", "y", 11)))
    assert summary(await take(w, 1)) == [("ADDED", "y", 11)]


async def test_slow_watcher_is_terminated_not_the_writer_blocked() -> None:
    cache = make_cache(watch_buffer=3)
    slow = await watch(cache, resourceVersion="9")
    fast = await watch(cache, resourceVersion="9")
    got: list[WatchEvent] = []
    for rv in range(10, 15):
        cache.apply(added(pod("a", f"n{rv}", rv)))
        got += await take(fast, 1)
    assert len(got) == 5
    assert cache.watcher_count == 1
    assert cache.stats.terminated_watchers == 1
    # what was queued is still delivered, then the error names where to resume
    assert [e.resource_version for e in await take(slow, 3)] == [10, 11, 12]
    with pytest.raises(WatchTerminatedError) as info:
        await anext(slow)
    assert info.value.resource_version == 12
    # resuming from there replays the rest from history
    again = await watch(cache, resourceVersion=str(info.value.resource_version))
    assert [e.resource_version for e in await take(again, 2)] == [13, 14]


async def test_relist_terminates_watchers() -> None:
    cache = make_cache()
    w = await watch(cache, resourceVersion="9")
    cache.replace([], 50)
    with pytest.raises(WatchTerminatedError):
        await take(w, 1)
    with pytest.raises(ExpiredError):
        await watch(cache, resourceVersion="9")


async def test_not_ready_watch_is_429() -> None:
    cache = WatchCache(PREFIX)
    with pytest.raises(TooManyRequestsError):
        await watch(cache, resourceVersion="0")


async def test_async_with_unregisters() -> None:
    cache = make_cache()
    async with watch(cache, resourceVersion="9") as w:
        assert cache.watcher_count == 1
        cache.apply(added(pod("a", "p3", 10)))
        assert summary(await take(w, 1)) == [("ADDED", "p3", 10)]
    assert cache.watcher_count == 0
    cache.apply(added(pod("a", "p4", 11)))  # nobody to dispatch to


async def test_wire_form_of_events() -> None:
    cache = make_cache()
    w = await watch(cache, resourceVersion="9")
    item = pod("a", "p3", 10)
    cache.apply(added(item))
    (event,) = await take(w, 1)
    assert event.to_json() == b'{"type":"ADDED","object":' + item.value + b"}"
