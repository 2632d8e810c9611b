"""A whole prefix's scan taken when the list body is first rendered (cache/deferred_scan.py):
what it answers without scanning, that what it answers after is exactly the scan of its
snapshot, however the cache changed meanwhile, and which LISTs the cache defers."""

from __future__ import annotations

import gc

import pytest
from kubeobjects import PREFIX, pod

from watchcache import _core
from watchcache.cache import watch_cache
from watchcache.cache.backing_store import BodyChunks, ListResult
from watchcache.cache.deferred_scan import DeferredScan
from watchcache.cache.event import Event, EventType
from watchcache.cache.watch_cache import WatchCache
from watchcache.wire.options import ListOptions, ResourceVersionMatch

META = b'{"resourceVersion":"7"}'


def pieces_of(chunks: BodyChunks) -> list[bytes]:
    out: list[bytes] = []
    while not chunks.done:
        out.append(next(chunks))
    return out


def tree(n: int) -> _core.Tree:
    return _core.Tree.from_sorted(
        (f"/registry/{group}/k{i:04d}", b'{"i":%d}' % i) for group in "ab" for i in range(n)
    )


def test_what_is_known_without_the_items_is_answered_without_the_scan() -> None:
    snap = tree(30).snapshot()
    deferred = DeferredScan(snap, "/registry/a/", snap.count_prefix("/registry/a/"))
    assert (len(deferred), deferred.scanned, deferred.next_key, deferred.remaining) == (
        30,
        30,
        None,
        0,
    )
    chunks = deferred.chunks("List", "v1", META, 64)
    assert not chunks.done
    assert not deferred.ran, "asking for the pieces does not render or scan yet"
    next(chunks)
    assert deferred.ran


@pytest.mark.parametrize("n", [0, 1, 30])
@pytest.mark.parametrize("chunk_bytes", [1, 64, 1 << 20])
def test_the_deferred_scan_is_the_scan_of_its_snapshot(n: int, chunk_bytes: int) -> None:
    built = tree(n)
    snap = built.snapshot()
    scan = snap.scan("/registry/b/")
    deferred = DeferredScan(snap, "/registry/b/", snap.count_prefix("/registry/b/"))
    # The tree moves on before the deferred scan runs: it still reads its snapshot.
    built.put("/registry/b/k0000", b'{"changed":true}')
    built.pop_item("/registry/b/k0001")
    built.put("/registry/b/new", b"{}")
    del built, snap
    gc.collect()
    assert b"".join(pieces_of(deferred.chunks("List", "v1", META, chunk_bytes))) == scan.render(
        "List", "v1", META
    )
    assert [item.key for item in deferred] == deferred.keys() == scan.keys()
    assert deferred.values() == scan.values()
    assert deferred.items() == scan.items()
    assert deferred.render("List", "v1", META) == scan.render("List", "v1", META)
    assert deferred.last_key == scan.last_key
    assert len(deferred) == len(scan) == n
    if n:
        assert deferred[n - 1].key == scan[n - 1].key


def test_pieces_ask_for_a_positive_size() -> None:
    snap = tree(1).snapshot()
    with pytest.raises(ValueError):
        DeferredScan(snap, "", 2).chunks("List", "v1", META, 0)


@pytest.fixture
def defer_from_50(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scans of 50 items and more are deferred (16,384 by default)."""
    monkeypatch.setattr(watch_cache, "DEFERRED_SCAN_ITEMS", 50)


def _cache(n: int) -> WatchCache:
    cache = WatchCache(PREFIX, kind="Pod")
    cache.replace([pod("ns", f"p{i:03d}", 10 + i) for i in range(n)], 10 + n)
    return cache


@pytest.mark.usefixtures("defer_from_50")
async def test_a_large_unfiltered_unlimited_list_is_scanned_when_rendered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = _cache(60)
    deferred = await cache.list(ListOptions())
    assert isinstance(deferred.items, DeferredScan) and not deferred.items.ran
    assert (deferred.continue_token, deferred.remaining_item_count) == ("", None)
    assert cache.stats.list_returned_objects == 60
    assert cache.stats.list_fetched_objects == {"": 60}
    # A write after the read changes nothing of what the read answers.
    newer = pod("ns", "p000", 100, {"changed": "yes"})
    cache.apply(Event(EventType.MODIFIED, newer, None, 100))
    monkeypatch.setattr(watch_cache, "DEFERRED_SCAN_ITEMS", 1 << 30)
    at_once = await cache.list(
        ListOptions(resource_version="70", resource_version_match=ResourceVersionMatch.EXACT)
    )
    assert not isinstance(at_once.items, DeferredScan)
    assert _body(deferred) == _body(at_once)
    assert b"changed" not in _body(deferred)


@pytest.mark.parametrize(
    "opts",
    [
        ListOptions(limit=100),
        ListOptions(label_selector="app!=x"),
        ListOptions(field_selector="metadata.name!=p001"),
    ],
)
@pytest.mark.usefixtures("defer_from_50")
async def test_pages_and_filtered_lists_are_scanned_at_once(opts: ListOptions) -> None:
    result = await _cache(60).list(opts)
    assert not isinstance(result.items, DeferredScan)


@pytest.mark.usefixtures("defer_from_50")
async def test_a_continuation_without_a_limit_is_scanned_from_its_key() -> None:
    cache = _cache(60)
    first = await cache.list(ListOptions(limit=10))
    rest = await cache.list(ListOptions(continue_token=first.continue_token))
    assert not isinstance(rest.items, DeferredScan)
    assert [item.key for item in rest.items] == [f"{PREFIX}ns/p{i:03d}" for i in range(10, 60)]


async def test_below_the_threshold_the_scan_is_taken_at_once() -> None:
    result = await _cache(60).list(ListOptions())
    assert not isinstance(result.items, DeferredScan)


async def test_a_namespace_list_defers_the_scan_of_its_prefix_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(watch_cache, "DEFERRED_SCAN_ITEMS", 5)
    cache = _cache(8)
    cache.apply(Event(EventType.ADDED, pod("other", "q", 30), None, 30))
    result = await cache.list(ListOptions(), prefix=f"{PREFIX}ns")
    assert isinstance(result.items, DeferredScan)
    assert len(result.items) == 8
    assert [item.key for item in result.items] == [f"{PREFIX}ns/p{i:03d}" for i in range(8)]


def test_the_body_floor_is_never_above_the_body() -> None:
    for values in ([], [b""], [b"{}"], [b"{}", b"", b'{"a":1}']):
        items = [_core.Item(f"/k{i}", v) for i, v in enumerate(values)]
        result = ListResult(items, 3)
        assert result.body_floor() == 3 * len(values)
        assert result.body_floor() <= len(result.render("List", "v1"))


def _body(result: ListResult) -> bytes:
    return b"".join(pieces_of(result.chunks("PodList", "v1", 1000)))
