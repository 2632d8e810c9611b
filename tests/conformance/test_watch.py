"""WATCH conformance: docs/semantics.md §5 and §11 behaviours 23-30, one suite run on the
backends that serve watches: ``[cache]`` (a WatchCache that is its own source of truth) and
``[synced]`` (a SyncedCache over a real etcd). Rows that need etcd's current revision
(§5.2's rows for an unset resourceVersion, the watch-list safeguard of §4.5) run on
``synced`` only.

The state most rows start from (``make_watched``): a/p1 (app=x) and a/p2 (app=y) written
before the cache's first list, so the cache starts with them and no buffered event. Rows
assert against the rvs the writes returned and the list's rv, never fixed numbers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from conformance_backends import POD_FIELDS, Backend, SyncedBackend
from kubeobjects import pod_value, rv_of

from watchcache.cache.watcher import WATCH_LIST_UNSUPPORTED, WatchEvent
from watchcache.etcd.version import ConsistentReadsMode
from watchcache.wire.errors import (
    ExpiredError,
    InternalError,
    TooLargeResourceVersionError,
    TooManyRequestsError,
    WatchTerminatedError,
)

pytestmark = pytest.mark.backends(
    "cache", "synced", why="every watch is served by a cache; etcd's own watch is not served (§6.6)"
)

WATCH_LIST = {
    "sendInitialEvents": "true",
    "resourceVersionMatch": "NotOlderThan",
    "allowWatchBookmarks": "true",
}
#: A history of two events: older events go as soon as two more arrive.
SMALL_HISTORY: dict[str, Any] = {
    "history_lower_bound": 2,
    "history_upper_bound": 2,
    "window_seconds": 0.001,
}


@dataclass(frozen=True, slots=True)
class Initial:
    p1: int
    p2: int
    list_rv: int  # the cache's first list


async def make_watched(backend: Backend, **cache_options: Any) -> Initial:
    p1 = await backend.create("p1", labels={"app": "x"})
    p2 = await backend.create("p2", labels={"app": "y"})
    await backend.start(**cache_options)
    return Initial(p1, p2, backend.list_rv)


def summary(events: Sequence[WatchEvent]) -> list[tuple[str, str, int]]:
    out = []
    for event in events:
        name = json.loads(event.object)["metadata"].get("name", "")
        out.append((str(event.type), name, event.resource_version))
    return out


# ---------------------------------------------------------------------------------------------
# Where a watch starts (§5.2, §5.4)


async def test_watch_from_rv_is_exclusive_and_replays_history(backend: Backend) -> None:
    await make_watched(backend)
    p3 = await backend.create("p3")
    p4 = await backend.create("p4")
    w = await backend.watch(resourceVersion=str(p3))
    assert summary(await w.take(1)) == [("ADDED", "p4", p4)]
    changed = await backend.update("p3", labels={"v": "2"})
    assert summary(await w.take(1)) == [("MODIFIED", "p3", changed)]
    await w.aclose()


async def test_watch_too_old_is_410_with_oldest_servable(backend: Backend) -> None:
    initial = await make_watched(backend)
    too_old = initial.list_rv - 1
    message = f"too old resource version: {too_old} ({initial.list_rv})"
    with pytest.raises(ExpiredError) as info:
        await backend.watch(resourceVersion=str(too_old))
    assert info.value.message == message
    assert json.loads(info.value.watch_event()) == {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "Expired",
            "code": 410,
        },
    }


async def test_watch_from_list_rv_is_accepted_right_after_relist(backend: Backend) -> None:
    initial = await make_watched(backend)
    w = await backend.watch(resourceVersion=str(initial.list_rv))
    assert await w.nothing_more()
    p3 = await backend.create("p3")
    assert summary(await w.take(1)) == [("ADDED", "p3", p3)]


async def test_watch_after_eviction_uses_first_buffered_event(backend: Backend) -> None:
    await make_watched(backend, **SMALL_HISTORY)
    await backend.create("n1")
    n2 = await backend.create("n2")
    n3 = await backend.create("n3")
    # n1 was evicted: the oldest servable start is just below the first buffered event
    oldest = n2 - 1
    assert backend.cache.oldest_rv == oldest
    assert not backend.cache.can_serve_watch(oldest - 1)
    assert backend.cache.can_serve_watch(oldest)
    with pytest.raises(ExpiredError) as info:
        await backend.watch(resourceVersion=str(oldest - 1))
    assert info.value.message == f"too old resource version: {oldest - 1} ({oldest})"
    w = await backend.watch(resourceVersion=str(oldest))
    assert summary(await w.take(2)) == [("ADDED", "n2", n2), ("ADDED", "n3", n3)]


async def test_one_transaction_reaches_watchers_as_one_revision(backend: Backend) -> None:
    initial = await make_watched(backend)
    w = await backend.watch(resourceVersion=str(initial.list_rv))
    together = await backend.create_many(["t0", "t1", "t2"])
    assert summary(await w.take(3)) == [("ADDED", f"t{i}", together) for i in range(3)]
    # a watch from that revision has all of it already
    after = await backend.watch(resourceVersion=str(together))
    assert await after.nothing_more()


async def test_eviction_inside_one_revision_makes_that_revision_the_oldest_start(
    backend: Backend,
) -> None:
    """§5.4's refinement: a watch from just below a revision whose events were partly
    evicted would miss them, so the oldest start is that revision itself."""
    await make_watched(backend, **SMALL_HISTORY)
    together = await backend.create_many(["t0", "t1", "t2"])  # the history keeps two of three
    assert backend.cache.oldest_rv == together
    with pytest.raises(ExpiredError) as info:
        await backend.watch(resourceVersion=str(together - 1))
    assert info.value.message == f"too old resource version: {together - 1} ({together})"
    w = await backend.watch(resourceVersion=str(together))
    assert await w.nothing_more()


async def test_watch_from_future_rv_waits_silently_and_skips_up_to_it(backend: Backend) -> None:
    await make_watched(backend)
    start = backend.revision + 2  # the second of the writes below
    w = await backend.watch(resourceVersion=str(start))
    written = [await backend.create(name) for name in ("q1", "q2", "q3")]
    assert written == [start - 1, start, start + 1]
    assert summary(await w.take(1)) == [("ADDED", "q3", start + 1)]


async def test_watch_without_rv_sends_state_then_live_events(backend: Backend) -> None:
    initial = await make_watched(backend)
    w = await backend.watch()  # defaulted to watch-list: sendInitialEvents, NotOlderThan
    assert summary(await w.take(2)) == [("ADDED", "p1", initial.p1), ("ADDED", "p2", initial.p2)]
    p0 = await backend.create("p0")
    assert summary(await w.take(1)) == [("ADDED", "p0", p0)]


# ---------------------------------------------------------------------------------------------
# Watch-list and bookmarks (§5.2, §5.6)


async def test_watch_list_ends_initial_events_with_annotated_bookmark(backend: Backend) -> None:
    initial = await make_watched(backend, bookmark_interval=0.1)
    progressed = await backend.advance()
    w = await backend.watch(**WATCH_LIST)
    events = await w.take(3)
    assert summary(events) == [
        ("ADDED", "p1", initial.p1),
        ("ADDED", "p2", initial.p2),
        ("BOOKMARK", "", progressed),
    ]
    assert json.loads(events[2].object) == {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "resourceVersion": str(progressed),
            "annotations": {"k8s.io/initial-events-end": "true"},
        },
    }
    p3 = await backend.create("p3")
    assert summary(await w.take(1)) == [("ADDED", "p3", p3)]
    later_progress = await backend.advance()
    later = await w.take(1)
    assert summary(later) == [("BOOKMARK", "", later_progress)]
    assert "annotations" not in json.loads(later[0].object)["metadata"]


async def test_watch_list_at_rv_ahead_of_cache_times_out_with_504(backend: Backend) -> None:
    await make_watched(backend, wait_timeout=0.05)
    future = backend.revision + 96
    with pytest.raises(TooLargeResourceVersionError) as info:
        await backend.watch(resourceVersion=str(future), **WATCH_LIST)
    assert info.value.message == (
        f"Timeout: Too large resource version: {future}, current: {backend.revision}"
    )
    assert info.value.retry_after_seconds == 1


async def test_watch_list_at_rv_sends_current_state_not_history(backend: Backend) -> None:
    initial = await make_watched(backend)
    changed = await backend.update("p1", labels={"app": "x"})
    w = await backend.watch(
        resourceVersion=str(initial.p2),
        sendInitialEvents="true",
        resourceVersionMatch="NotOlderThan",
    )
    assert summary(await w.take(2)) == [("ADDED", "p1", changed), ("ADDED", "p2", initial.p2)]


async def test_bookmarks_only_when_allowed_and_only_after_progress(backend: Backend) -> None:
    initial = await make_watched(backend, bookmark_interval=0.05)
    start = str(initial.list_rv)
    with_bookmarks = await backend.watch(resourceVersion=start, allowWatchBookmarks="true")
    without = await backend.watch(resourceVersion=start)
    # no progress past the start: no bookmark
    assert await with_bookmarks.nothing_more(0.15)
    progressed = await backend.advance()
    assert summary(await with_bookmarks.take(1)) == [("BOOKMARK", "", progressed)]
    assert await without.nothing_more(0.15)


async def test_bookmark_before_timeout_then_the_watch_ends(backend: Backend) -> None:
    initial = await make_watched(backend, bookmark_interval=60.0)
    w = await backend.watch(
        resourceVersion=str(initial.list_rv), allowWatchBookmarks="true", timeoutSeconds="3"
    )
    progressed = await backend.advance()
    started = asyncio.get_running_loop().time()
    events = await w.take(1, timeout=5)
    assert summary(events) == [("BOOKMARK", "", progressed)]
    assert 0.5 < asyncio.get_running_loop().time() - started < 2.0  # about 3 s - 2 s
    with pytest.raises(StopAsyncIteration):
        await w.next(timeout=5)


# ---------------------------------------------------------------------------------------------
# Selectors, prefixes and delivery (§5.5)


async def test_label_change_out_of_selector_is_deleted_with_new_rv(backend: Backend) -> None:
    initial = await make_watched(backend)
    w = await backend.watch(resourceVersion=str(initial.list_rv), labelSelector="app=x")
    moved = await backend.relabel("p1", {"app": "z"})
    back = await backend.relabel("p1", {"app": "x"})
    await backend.relabel("p2", {"app": "y2"})
    gone = await backend.delete("p1")
    events = await w.take(3)
    assert summary(events) == [
        ("DELETED", "p1", moved),
        ("ADDED", "p1", back),
        ("DELETED", "p1", gone),
    ]
    before = json.loads(events[0].object)
    assert before["metadata"]["labels"] == {"app": "x"}  # the pre-change object...
    assert rv_of(events[0].object) == moved  # ...at the update's rv


async def test_history_replay_applies_selector_transitions_too(backend: Backend) -> None:
    initial = await make_watched(backend)
    moved = await backend.relabel("p1", {"app": "z"})
    w = await backend.watch(resourceVersion=str(initial.list_rv), labelSelector="app=x")
    assert summary(await w.take(1)) == [("DELETED", "p1", moved)]


async def test_prefix_watch_sees_only_its_namespace(backend: Backend) -> None:
    initial = await make_watched(backend)
    w = await backend.watch(within="b", resourceVersion=str(initial.list_rv))
    await backend.create("x", "a")
    y = await backend.create("y", "b")
    assert summary(await w.take(1)) == [("ADDED", "y", y)]


async def test_slow_watcher_is_terminated_not_the_writer_blocked(backend: Backend) -> None:
    initial = await make_watched(backend, watch_buffer=3)
    slow = await backend.watch(resourceVersion=str(initial.list_rv))
    fast = await backend.watch(resourceVersion=str(initial.list_rv))
    written: list[int] = []
    got: list[WatchEvent] = []
    for i in range(5):
        written.append(await backend.create(f"n{i}"))
        got += await fast.take(1)
    assert [event.resource_version for event in got] == written
    assert backend.cache.watcher_count == 1
    assert backend.cache.stats.terminated_watchers == 1
    # what was queued is still delivered, then the error names where to resume
    assert [event.resource_version for event in await slow.take(3)] == written[:3]
    with pytest.raises(WatchTerminatedError) as info:
        await slow.next()
    assert info.value.resource_version == written[2]
    # resuming from there replays the rest from history
    again = await backend.watch(resourceVersion=str(info.value.resource_version))
    assert [event.resource_version for event in await again.take(2)] == written[3:]


async def test_relist_terminates_watchers(backend: Backend) -> None:
    initial = await make_watched(backend)
    w = await backend.watch(resourceVersion=str(initial.list_rv))
    await backend.advance()  # so the relist is at a newer revision
    await backend.relist()
    assert backend.list_rv > initial.list_rv
    with pytest.raises(WatchTerminatedError):
        await w.take(1)
    with pytest.raises(ExpiredError):
        await backend.watch(resourceVersion=str(initial.list_rv))


async def test_not_ready_watch_is_429(backend: Backend) -> None:
    await backend.start(ready=False)
    with pytest.raises(TooManyRequestsError):
        await backend.watch(resourceVersion="0")


async def test_async_with_unregisters(backend: Backend) -> None:
    initial = await make_watched(backend)
    async with await backend.watch(resourceVersion=str(initial.list_rv)) as w:
        assert backend.cache.watcher_count == 1
        p3 = await backend.create("p3")
        assert summary(await w.take(1)) == [("ADDED", "p3", p3)]
    assert backend.cache.watcher_count == 0
    await backend.create("p4")  # nobody to dispatch to


async def test_wire_form_of_events(backend: Backend) -> None:
    initial = await make_watched(backend)
    w = await backend.watch(resourceVersion=str(initial.list_rv))
    written = await backend.create("p3")
    (event,) = await w.take(1)
    # the stored JSON with metadata.resourceVersion set to the write's revision
    stored = POD_FIELDS.decode(backend.key("p3"), pod_value("a", "p3"), written).value
    assert rv_of(stored) == written
    assert event.to_json() == b'{"type":"ADDED","object":' + stored + b"}"


# ---------------------------------------------------------------------------------------------
# Rows that need etcd's current revision (§5.2 with resourceVersion unset, §4.5)


@pytest.mark.backends("synced", why="only a cache with a store fetches etcd's revision to wait for")
async def test_watch_list_without_rv_waits_for_etcds_current_revision(backend: Backend) -> None:
    assert isinstance(backend, SyncedBackend)
    initial = await make_watched(backend, bookmark_interval=60.0)
    # the cache hears of a revision outside its prefix only through a progress notification
    elsewhere = await backend.write_elsewhere()
    assert backend.cache.resource_version < elsewhere
    w = await backend.watch(**WATCH_LIST)
    assert summary(await w.take(3)) == [
        ("ADDED", "p1", initial.p1),
        ("ADDED", "p2", initial.p2),
        ("BOOKMARK", "", elsewhere),
    ]


@pytest.mark.backends("synced", why="only a cache with a store fetches etcd's revision to start at")
async def test_watch_without_initial_events_or_rv_starts_at_etcds_current_revision(
    backend: Backend,
) -> None:
    """sendInitialEvents=false with no rv: the first event delivered is above etcd's
    revision when the watch started, whether or not the cache had applied it yet."""
    assert isinstance(backend, SyncedBackend)
    await make_watched(backend)
    # in etcd before the watch starts; the cache applies it before or after, unwaited
    await backend.client.put(backend.key("early").encode(), pod_value("a", "early"))
    w = await backend.watch(sendInitialEvents="false", resourceVersionMatch="NotOlderThan")
    late = await backend.create("late")
    assert summary(await w.take(1)) == [("ADDED", "late", late)]


@pytest.mark.backends("synced", why="the etcd version safeguard (§4) is about a cache's store")
async def test_watch_list_without_trusted_progress_is_500(backend: Backend) -> None:
    await make_watched(backend, mode=ConsistentReadsMode.OFF)
    with pytest.raises(InternalError) as info:
        await backend.watch(**WATCH_LIST)
    assert info.value.code == 500
    assert info.value.message == f"Internal error occurred: {WATCH_LIST_UNSUPPORTED}"
