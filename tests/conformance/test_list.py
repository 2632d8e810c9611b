"""LIST conformance: docs/semantics.md §1, §2, §3.5, §6 and §11 behaviours, one suite run on
every backend of tests/support/conformance_backends.py: ``[cache]`` (a WatchCache that is
its own source of truth), ``[synced]`` (a SyncedCache over a real etcd) and ``[store]``
(the etcd store alone). Rows that only some backends can answer say why; the rows of the
planner's fallback table (F1-F7) that need a store run on ``synced`` against real etcd.

The cluster most rows use (``make_cluster``): pods a/p1 (app=web), a/p2 (app=db), a/p3
(app=web) and b/p1 (app=web) created one write each, then the revision moves outside the
prefix (``gap``: nothing of the prefix changed there), then a/p2 is relabelled app=web and
b/p1 deleted. Rows assert against the rvs those writes returned, never fixed numbers.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass
from typing import Any

import pytest
from conformance_backends import Backend, StoreBackend, SyncedBackend
from kubeobjects import rv_of

from watchcache.cache.backing_store import ListResult, Source
from watchcache.etcd.version import ConsistentReadsMode
from watchcache.wire.errors import (
    EXPIRED_LIST_MESSAGE,
    INCONSISTENT_CONTINUE_MESSAGE,
    BadRequestError,
    ExpiredError,
    TooLargeResourceVersionError,
    TooManyRequestsError,
)
from watchcache.wire.tokens import decode_continue, encode_continue, parse_continue

#: A history of two events: every older snapshot goes as soon as two more events arrive.
SMALL_HISTORY: dict[str, Any] = {
    "history_lower_bound": 2,
    "history_upper_bound": 2,
    "window_seconds": 0.001,
}
TOO_LARGE_CAUSES = [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]


@dataclass(frozen=True, slots=True)
class Cluster:
    """The rvs of ``make_cluster``'s writes."""

    p1: int
    p2: int
    p3: int
    b1: int
    gap: int  # the revision moved outside the prefix: nothing of it changed there
    relabel: int  # a/p2 app=db → app=web
    gone: int  # b/p1 deleted


async def make_cluster(backend: Backend, **cache_options: Any) -> Cluster:
    await backend.start(**cache_options)
    p1 = await backend.create("p1", labels={"app": "web"})
    p2 = await backend.create("p2", labels={"app": "db"})
    p3 = await backend.create("p3", labels={"app": "web"})
    b1 = await backend.create("p1", "b", labels={"app": "web"})
    gap = await backend.advance()
    relabel = await backend.relabel("p2", {"app": "web"})
    gone = await backend.delete("p1", "b")
    return Cluster(p1, p2, p3, b1, gap, relabel, gone)


def expected_start(by_etcd: bool, below_request_prefix: str) -> str:
    """A token's ``start`` as text (docs/semantics.md §1.4): the cacher encodes against the
    request prefix without its "/" (a leading "/"), the etcd3 store against the prefix with
    it (none). Both decode to the same key."""
    return ("" if by_etcd else "/") + below_request_prefix + "\x00"


def body(backend: Backend, result: ListResult) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(backend.render(result))
    return parsed


# ---------------------------------------------------------------------------------------------
# Pages, tokens and remainingItemCount (§2.5, §6.3, §6.4, §1.4)


async def test_rv0_with_limit_is_honoured_by_default(backend: Backend) -> None:
    cluster = await make_cluster(backend)
    result = await backend.list(limit="1", resourceVersion="0")
    assert backend.names(result.items) == ["a/p1"]
    assert result.continue_token
    assert result.remaining_item_count == 2
    assert result.resource_version == cluster.gone


@pytest.mark.backends("cache", "synced", why="a WatchCache switch; etcd always honours the limit")
async def test_rv0_with_limit_ignored_in_kubernetes_compat_mode(backend: Backend) -> None:
    cluster = await make_cluster(backend, ignore_limit_for_rv0=True)
    result = await backend.list(limit="1", resourceVersion="0")
    assert backend.names(result.items) == ["a/p1", "a/p2", "a/p3"]
    assert result.continue_token == ""
    assert result.remaining_item_count is None
    assert result.resource_version == cluster.gone


async def test_first_page_has_token_and_remaining_count(backend: Backend) -> None:
    cluster = await make_cluster(backend)
    result = await backend.list(limit="2")
    assert backend.names(result.items) == ["a/p1", "a/p2"]
    assert result.remaining_item_count == 1
    token = parse_continue(result.continue_token)
    assert token.resource_version == result.resource_version == cluster.gone
    assert token.start == expected_start(result.source is Source.STORE, "a/p2")
    assert decode_continue(result.continue_token, backend.prefix) == (
        backend.key("p2") + "\x00",
        cluster.gone,
    )
    assert body(backend, result)["metadata"] == {
        "resourceVersion": str(cluster.gone),
        "continue": result.continue_token,
        "remainingItemCount": 1,
    }


async def test_selector_page_has_no_remaining_count_and_token_only_if_items_follow(
    backend: Backend,
) -> None:
    await make_cluster(backend)
    result = await backend.list(limit="1", labelSelector="app=web")
    assert backend.names(result.items) == ["a/p1"]
    assert result.remaining_item_count is None
    by_etcd = result.source is Source.STORE
    assert parse_continue(result.continue_token).start == expected_start(by_etcd, "a/p1")
    # the page that takes the last match: a/p3 is last under the prefix → no token
    result = await backend.list(limit="3", labelSelector="app=web")
    assert backend.names(result.items) == ["a/p1", "a/p2", "a/p3"]
    assert result.continue_token == ""


async def test_selector_token_when_only_non_matching_items_follow(backend: Backend) -> None:
    """Kubernetes: hasMore if *any* item follows the one that filled the page."""
    await make_cluster(backend)
    await backend.create("z", "c", labels={"app": "other"})
    result = await backend.list(limit="3", labelSelector="app=web")
    assert backend.names(result.items) == ["a/p1", "a/p2", "a/p3"]
    by_etcd = result.source is Source.STORE
    assert parse_continue(result.continue_token).start == expected_start(by_etcd, "a/p3")
    rest = await backend.list(labelSelector="app=web", **{"continue": result.continue_token})
    assert backend.names(rest.items) == []
    assert rest.continue_token == ""
    assert body(backend, rest)["items"] == []


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 7])
async def test_unfiltered_walk_counts_what_remains_on_every_page(
    backend: Backend, limit: int
) -> None:
    await backend.start()
    last = await backend.create_many([f"p{i}" for i in range(5)])
    pages = [await backend.list(limit=str(limit))]
    while pages[-1].continue_token:
        token = pages[-1].continue_token
        pages.append(await backend.list(limit=str(limit), **{"continue": token}))
    assert [backend.names(page.items) for page in pages] == [
        [f"a/p{i}" for i in range(lo, min(lo + limit, 5))] for lo in range(0, 5, limit)
    ]
    remaining = [page.remaining_item_count for page in pages]
    assert remaining == [5 - min(lo + limit, 5) or None for lo in range(0, 5, limit)]
    assert {page.resource_version for page in pages} == {last}


async def test_paginated_selector_walk_returns_every_match_once_at_one_rv(
    backend: Backend,
) -> None:
    await make_cluster(backend)
    c0 = await backend.create("p0", "c", labels={"app": "web"})
    first = await backend.list(limit="1", labelSelector="app=web")
    pages = [first]
    while pages[-1].continue_token:
        # writes between pages must not show in the walk
        await backend.relabel("p1", {"app": f"web-{len(pages)}"})
        token = pages[-1].continue_token
        query = {"limit": "1", "labelSelector": "app=web", "continue": token}
        pages.append(await backend.list(**query))
    assert [backend.names(page.items) for page in pages] == [
        ["a/p1"],
        ["a/p2"],
        ["a/p3"],
        ["c/p0"],
    ]
    assert {page.resource_version for page in pages} == {c0}
    assert all(page.remaining_item_count is None for page in pages)


async def test_continuation_is_served_at_the_token_rv(backend: Backend) -> None:
    cluster = await make_cluster(backend)
    first = await backend.list(limit="2")
    # writes after the first page must not show in the continuation
    await backend.create("p25")
    await backend.update("p3", labels={"app": "changed"})
    rest = await backend.list(limit="2", **{"continue": first.continue_token})
    assert rest.source is backend.served(Source.SNAPSHOT)
    assert backend.names(rest.items) == ["a/p3"]
    assert rv_of(rest.items[0].value) == cluster.p3
    assert rest.resource_version == first.resource_version == cluster.gone
    assert rest.continue_token == ""
    assert rest.remaining_item_count is None


async def test_namespace_prefix_lists_only_that_namespace(backend: Backend) -> None:
    await make_cluster(backend)
    await backend.create("p9", "b")
    result = await backend.list(within="b/")
    assert backend.names(result.items) == ["b/p9"]
    page = await backend.list(within="a", limit="1")
    assert backend.names(page.items) == ["a/p1"]
    assert page.remaining_item_count == 2  # a/p2 and a/p3: only the namespace counts
    by_etcd = page.source is Source.STORE
    assert parse_continue(page.continue_token).start == expected_start(by_etcd, "p1")


async def test_token_cannot_reach_outside_the_request_prefix(backend: Backend) -> None:
    await make_cluster(backend)
    await backend.create("p9", "b")
    # a token minted in namespace a, presented in namespace b, stays in namespace b
    page = await backend.list(within="a/", limit="1")
    rest = await backend.list(within="b/", **{"continue": page.continue_token})
    assert backend.names(rest.items) == ["b/p9"]


@pytest.mark.parametrize("start", ["../key", "./key", "./../key", "key/../..", "a//b", "a/"])
async def test_traversal_in_token_start_is_400(backend: Backend, start: str) -> None:
    await backend.start()
    await backend.create("p1")
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": backend.revision, "start": start}).encode()
    token = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    with pytest.raises(BadRequestError) as info:
        await backend.list(**{"continue": token})
    assert info.value.message == f"invalid continue token: continue key is not valid: {start}"


async def test_rendered_body_is_the_list_object(backend: Backend) -> None:
    await make_cluster(backend)
    parsed = body(backend, await backend.list(limit="2"))
    assert parsed["kind"] == "PodList"
    assert parsed["apiVersion"] == "v1"
    assert [item["metadata"]["name"] for item in parsed["items"]] == ["p1", "p2"]


async def test_empty_prefix_lists_nonzero_rv_and_empty_items(backend: Backend) -> None:
    await backend.start()
    result = await backend.list()
    assert backend.revision > 0
    assert body(backend, result) == {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(backend.revision)},
        "items": [],
    }


async def test_large_filtered_list_is_complete(backend: Backend) -> None:
    """More items than a scan does on the event loop (the cache scans in a worker thread)."""
    await backend.create_many([f"p{i:06d}" for i in range(25_000)], "ns")
    await backend.start()
    result = await backend.list(labelSelector="app=none")
    assert len(result.items) == 0
    result = await backend.list(fieldSelector="metadata.name=p000007")
    assert backend.names(result.items) == ["ns/p000007"]


# ---------------------------------------------------------------------------------------------
# Exact, legacy exact and NotOlderThan (§2.3 rows A, C2, C5; §2.5; §6.2)


async def test_exact_list_reports_the_requested_rv_from_an_older_snapshot(
    backend: Backend,
) -> None:
    cluster = await make_cluster(backend)
    result = await backend.list(resourceVersion=str(cluster.gap), resourceVersionMatch="Exact")
    # nothing of the prefix changed at the gap: the snapshot at b1 answers for it
    assert backend.names(result.items) == ["a/p1", "a/p2", "a/p3", "b/p1"]
    assert result.resource_version == cluster.gap
    assert result.source is backend.served(Source.SNAPSHOT)
    assert rv_of(result.items[1].value) == cluster.p2


async def test_legacy_exact_limit_with_rv_pins_the_revision(backend: Backend) -> None:
    cluster = await make_cluster(backend)
    result = await backend.list(resourceVersion=str(cluster.p3), limit="10")
    assert backend.names(result.items) == ["a/p1", "a/p2", "a/p3"]
    assert result.resource_version == cluster.p3


@pytest.mark.parametrize(
    "query",
    [{}, {"resourceVersionMatch": "NotOlderThan"}],
    ids=["C5-N-without-limit", "B-not-older-than-N"],
)
async def test_rv_n_without_limit_is_not_older_than(
    backend: Backend, query: dict[str, str]
) -> None:
    cluster = await make_cluster(backend)
    result = await backend.list(resourceVersion=str(cluster.p3), **query)
    assert backend.names(result.items) == ["a/p1", "a/p2", "a/p3"]
    assert result.resource_version == cluster.gone
    assert result.waited_seconds == 0.0


@pytest.mark.backends("cache", "synced", why="etcd does not wait for a revision (the next row)")
async def test_rv_n_ahead_of_the_cache_waits_for_it(backend: Backend) -> None:
    await make_cluster(backend)
    target = backend.revision + 1  # the revision the advance below makes
    waits = backend.cache.stats.read_wait.count

    async def later() -> None:
        await asyncio.sleep(0.05)
        assert await backend.advance() == target

    task = asyncio.create_task(later())
    result = await backend.list(resourceVersion=str(target))
    await task
    assert result.resource_version == target
    assert result.waited_seconds > 0
    assert backend.cache.stats.read_wait.count == waits + 1


@pytest.mark.backends("store", why="etcd answers a future revision at once; the cache waits")
@pytest.mark.parametrize(
    "query",
    [{}, {"resourceVersionMatch": "NotOlderThan"}],
    ids=["N-without-limit", "not-older-than-N"],
)
async def test_rv_n_ahead_of_etcd_is_504_at_once(backend: Backend, query: dict[str, str]) -> None:
    await make_cluster(backend)
    target = backend.revision + 1
    with pytest.raises(TooLargeResourceVersionError) as info:
        await backend.list(resourceVersion=str(target), **query)
    error = info.value
    assert (
        error.message
        == f"Timeout: Too large resource version: {target}, current: {backend.revision}"
    )
    assert (error.retry_after_seconds, error.headers()) == (0, {})


async def test_exact_ahead_of_every_revision_is_504(backend: Backend) -> None:
    cluster = await make_cluster(backend, wait_timeout=0.05)
    future = cluster.gone + 100
    with pytest.raises(TooLargeResourceVersionError) as info:
        await backend.list(resourceVersion=str(future), resourceVersionMatch="Exact")
    error = info.value
    assert error.code == 504
    assert (
        error.message == f"Timeout: Too large resource version: {future}, current: {cluster.gone}"
    )
    details = error.status()["details"]
    if isinstance(backend, StoreBackend):
        # etcd's ErrFutureRev at once: retry 0, so no Retry-After (§3.3)
        assert error.headers() == {}
        assert details == {"causes": TOO_LARGE_CAUSES}
    else:
        # the cache waited its 3 s (here 0.05 s); F5: not a consistent read, the 504 stands
        assert error.headers() == {"Retry-After": "1"}
        assert details == {"causes": TOO_LARGE_CAUSES, "retryAfterSeconds": 1}


# ---------------------------------------------------------------------------------------------
# Revisions that are gone (§1.7, §2.6, §6.5)


async def test_exact_below_every_snapshot_and_compacted_is_410(backend: Backend) -> None:
    cluster = await make_cluster(backend, **SMALL_HISTORY)
    await backend.compact()
    if not isinstance(backend, StoreBackend):
        # the history keeps 2 events, so snapshots below the oldest buffered one are gone
        assert not backend.cache.has_snapshot_at_or_below(cluster.p1)
    with pytest.raises(ExpiredError) as info:
        await backend.list(resourceVersion=str(cluster.p1), resourceVersionMatch="Exact")
    assert info.value.code == 410
    if backend.has_store:
        # the cache delegates (no snapshot); etcd's revision is compacted
        assert info.value.message == EXPIRED_LIST_MESSAGE
    else:
        # no store: the cache answers as a compacted store would
        assert info.value.message.startswith(f"too old resource version: {cluster.p1} ")


async def test_continuation_whose_revision_is_gone_gets_410_with_inconsistent_token(
    backend: Backend,
) -> None:
    cluster = await make_cluster(backend, **SMALL_HISTORY)
    await backend.compact()
    token = encode_continue(backend.key("p1") + "\x00", backend.prefix[:-1], cluster.p2)
    with pytest.raises(ExpiredError) as info:
        await backend.list(limit="1", **{"continue": token})
    error = info.value
    assert error.message == INCONSISTENT_CONTINUE_MESSAGE
    replacement = parse_continue(error.continue_token)
    assert replacement.resource_version == -1
    # etcd answers for a backend with a store (§1.7); the cache alone mints the same token
    assert replacement.start == expected_start(backend.has_store, "a/p1")
    assert decode_continue(error.continue_token, backend.prefix) == (
        backend.key("p1") + "\x00",
        -1,
    )
    assert error.status()["metadata"] == {"continue": error.continue_token}
    # using the replacement continues on the latest state, with a new rv
    rest = await backend.list(limit="5", **{"continue": error.continue_token})
    assert backend.names(rest.items) == ["a/p2", "a/p3"]
    assert rest.resource_version == backend.revision


@pytest.mark.backends("synced", why="no store: the cache answers 410 where Kubernetes delegates")
async def test_reads_at_a_revision_no_snapshot_holds_are_served_by_etcd(backend: Backend) -> None:
    """Rows A, C2 and C1a, ``exact(n)`` without a snapshot at or below n: delegated to etcd,
    which still has the revision (not compacted), so the answer is as of n."""
    assert isinstance(backend, SyncedBackend)
    cluster = await make_cluster(backend, **SMALL_HISTORY)
    assert not backend.cache.has_snapshot_at_or_below(cluster.p3)
    exact = await backend.list(resourceVersion=str(cluster.p3), resourceVersionMatch="Exact")
    assert (exact.source, exact.row, exact.resource_version) == (Source.STORE, "A", cluster.p3)
    assert backend.names(exact.items) == ["a/p1", "a/p2", "a/p3"]
    assert exact.items[1].labels == {"app": "db"}  # before the relabel
    legacy = await backend.list(resourceVersion=str(cluster.p3), limit="10")
    assert (legacy.source, legacy.row, legacy.resource_version) == (Source.STORE, "C2", cluster.p3)
    assert backend.names(legacy.items) == ["a/p1", "a/p2", "a/p3"]
    token = encode_continue(backend.key("p1") + "\x00", backend.prefix[:-1], cluster.b1)
    rest = await backend.list(limit="2", **{"continue": token})
    assert (rest.source, rest.row, rest.resource_version) == (Source.STORE, "C1a", cluster.b1)
    assert backend.names(rest.items) == ["a/p2", "a/p3"]
    assert rest.remaining_item_count == 1  # b/p1 still existed at b1
    assert parse_continue(rest.continue_token).start == expected_start(True, "a/p3")
    assert backend.synced.store.lists == 3


# ---------------------------------------------------------------------------------------------
# Consistent reads (§2.3 rows C3, C1b; §3)


@pytest.mark.backends("cache", why="no store: the cache is the latest state, nothing to wait for")
async def test_consistent_read_without_a_store_is_the_newest_state_at_once(
    backend: Backend,
) -> None:
    await backend.start()
    written = await backend.create("p1")
    result = await backend.list()
    assert (result.source, result.row, result.resource_version) == (Source.CACHE, "C3", written)
    assert result.waited_seconds == 0.0
    assert backend.cache.stats.consistent_reads == {}


@pytest.mark.backends("synced", why="consistent reads wait for etcd's current revision")
async def test_consistent_read_waits_for_etcds_current_revision(backend: Backend) -> None:
    assert isinstance(backend, SyncedBackend)
    await backend.start()
    await backend.create("p1")
    # the cache hears of a revision outside its prefix only through a progress notification
    elsewhere = await backend.write_elsewhere()
    assert backend.cache.resource_version < elsewhere
    result = await backend.list()
    assert (result.source, result.row, result.fallback) == (Source.CACHE, "C3", "false")
    assert result.resource_version == elsewhere
    assert backend.names(result.items) == ["a/p1"]
    assert backend.synced.requester.requests_sent >= 1
    assert backend.cache.stats.consistent_reads == {(True, "false"): 1}
    assert backend.synced.store.lists == 0


@pytest.mark.backends("synced", why="the etcd version safeguard (§4) is about a cache's store")
async def test_consistent_read_goes_to_etcd_when_progress_is_not_trusted(
    backend: Backend,
) -> None:
    assert isinstance(backend, SyncedBackend)
    await backend.start(mode=ConsistentReadsMode.OFF)
    await backend.create("p1")
    written = await backend.create("p2")
    result = await backend.list(limit="1")
    assert (result.source, result.row, result.fallback) == (Source.STORE, "C3", "")
    assert result.resource_version == written
    assert parse_continue(result.continue_token).start == expected_start(True, "a/p1")
    assert backend.synced.requester.requests_sent == 0
    assert backend.cache.stats.consistent_reads == {}


# ---------------------------------------------------------------------------------------------
# The fallback rows (planner.py F1-F7: a cache route that cannot be served as planned)


@pytest.mark.backends("cache", "synced", why="etcd has no initialisation: only a cache is unready")
async def test_not_ready_cache_answers_429_with_retry_after(backend: Backend) -> None:
    now = [100.0]
    await backend.start(ready=False, clock=lambda: now[0])
    now[0] += 14
    with pytest.raises(TooManyRequestsError) as info:
        await backend.list(resourceVersion="0")  # F2: no limit
    assert info.value.message == "storage is (re)initializing"
    assert info.value.headers() == {"Retry-After": "2"}


@pytest.mark.backends("synced", why="F1 reads the page from the cache's store (KEP-4568)")
async def test_not_ready_cache_reads_an_unfiltered_page_from_etcd(backend: Backend) -> None:
    assert isinstance(backend, SyncedBackend)
    await backend.start()
    for name in ("p1", "p2", "p3"):
        await backend.create(name, labels={"app": "web"})
    await backend.stop_following()
    backend.cache.mark_not_ready("relisting")  # what the reflector does before a relist
    page = await backend.list(limit="2")  # F1: limit, no selector
    assert (page.source, page.row) == (Source.STORE, "C3")
    assert backend.names(page.items) == ["a/p1", "a/p2"]
    assert (page.resource_version, page.remaining_item_count) == (backend.revision, 1)
    with pytest.raises(TooManyRequestsError):  # F2: a selector
        await backend.list(limit="2", labelSelector="app=web")
    with pytest.raises(TooManyRequestsError):  # F2: no limit
        await backend.list(resourceVersion="0")


@pytest.mark.backends("cache", why="F1 needs a store to read from: without one the row is F2")
async def test_not_ready_cache_without_a_store_refuses_an_unfiltered_page_too(
    backend: Backend,
) -> None:
    await backend.start(ready=False)
    with pytest.raises(TooManyRequestsError) as info:
        await backend.list(limit="2")
    assert info.value.message == "storage is (re)initializing"


async def prune_while_waiting(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> int:
    """An exact read of the next revision waits for it; meanwhile the cache reaches it and
    moves on, and its history of two evicts that revision's snapshot (rows F3/F4). Returns
    that revision."""
    await backend.start(**SMALL_HISTORY)
    await backend.create("p1")
    target = backend.revision + 1
    wait_for_rv = backend.cache.wait_for_rv

    async def pruned_meanwhile(resource_version: int, timeout: float | None = None) -> float:
        assert resource_version == target
        assert await backend.create("p2") == target
        await backend.create("p3")
        await backend.create("p4")
        assert not backend.cache.has_snapshot_at_or_below(target)
        return await wait_for_rv(resource_version, timeout)

    monkeypatch.setattr(backend.cache, "wait_for_rv", pruned_meanwhile)
    return target


@pytest.mark.backends("synced", why="F3 delegates to the cache's store (the next row has none)")
async def test_snapshot_pruned_while_the_read_waits_is_read_from_etcd(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = await prune_while_waiting(backend, monkeypatch)
    result = await backend.list(resourceVersion=str(target), resourceVersionMatch="Exact")
    assert (result.source, result.row, result.resource_version) == (Source.STORE, "A", target)
    assert backend.names(result.items) == ["a/p1", "a/p2"]


@pytest.mark.backends("cache", why="no store: the cache answers 410 where Kubernetes delegates")
async def test_snapshot_pruned_while_the_read_waits_is_410_without_a_store(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = await prune_while_waiting(backend, monkeypatch)
    with pytest.raises(ExpiredError) as info:  # F4
        await backend.list(resourceVersion=str(target), resourceVersionMatch="Exact")
    assert info.value.message.startswith(f"too old resource version: {target} ")


@pytest.mark.backends("synced", why="only a cache behind etcd can lag a revision etcd has")
async def test_exact_read_the_cache_cannot_reach_is_504_though_etcd_has_it(
    backend: Backend,
) -> None:
    """F5 and §10 item 5: an exact read above cacheRV waits on the cache (CRS holds) and is
    not retried on etcd when the wait times out: it is not a consistent read."""
    assert isinstance(backend, SyncedBackend)
    await backend.start(wait_timeout=0.05)
    await backend.create("p1")
    await backend.stop_following()
    cache_rv = backend.cache.resource_version
    written = await backend.create("p2")
    with pytest.raises(TooLargeResourceVersionError) as info:
        await backend.list(resourceVersion=str(written), resourceVersionMatch="Exact")
    assert info.value.message == (
        f"Timeout: Too large resource version: {written}, current: {cache_rv}"
    )
    assert info.value.headers() == {"Retry-After": "1"}
    assert backend.synced.store.lists == 0


@pytest.mark.backends("synced", why="F6/F7: a consistent read's timeout and its store fallback")
@pytest.mark.parametrize("skip_fallback", [False, True], ids=["F7-fallback", "F6-skip-fallback"])
async def test_consistent_read_the_cache_cannot_catch_up_with(
    backend: Backend, skip_fallback: bool
) -> None:
    assert isinstance(backend, SyncedBackend)
    await backend.create("p0")
    await backend.create("p1")
    await backend.start(wait_timeout=0.05, skip_consistent_fallback=skip_fallback)
    assert backend.synced.store.consistent_reads_supported  # etcd passes the safeguard
    await backend.stop_following()  # the cache can no longer catch up
    cache_rv = backend.cache.resource_version
    written = await backend.create("p2")
    if skip_fallback:
        with pytest.raises(TooManyRequestsError) as info:
            await backend.list()
        error = info.value
        assert (error.code, error.retry_after_seconds) == (429, 1)
        assert error.message == (
            f"Timeout: Too large resource version: {written}, current: {cache_rv}"
        )
        assert error.headers() == {"Retry-After": "1"}
        assert backend.synced.store.lists == 0
        assert backend.cache.stats.consistent_reads == {(False, "skipped"): 1}
        return
    result = await backend.list()
    assert (result.source, result.row, result.fallback) == (Source.STORE, "C3", "true")
    assert result.resource_version == written
    assert backend.names(result.items) == ["a/p0", "a/p1", "a/p2"]
    assert backend.synced.store.lists == 1
    assert backend.cache.stats.consistent_reads == {(True, "true"): 1}
    assert backend.cache.resource_version == cache_rv
