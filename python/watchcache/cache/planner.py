"""The LIST decision table: serve from the newest snapshot, a stored snapshot, or the store.

Design note
-----------
Policy apart from mechanism: :func:`plan_list` is the whole of Kubernetes' routing for a
LIST (docs/semantics.md §2.3, §2.4, Appendix B) as one function whose branches are the table's
rows, each labelled with the row name so tests can assert one case per row and a served
read can say why it went where it went. It decides; ``WatchCache.list`` executes. It has
no side effects: everything it needs it reads from a :class:`CacheView`, the cache's state
as the call sees it.

The rows (RVM = resourceVersionMatch, LFCS = snapshots on, CRS = the store can answer
progress requests, so consistent reads may wait on the cache)::

    A    Exact N, recursive         LFCS ? exact(N) : store
    A'   Exact N, one object        store
    B    NotOlderThan (N or 0)      cache, wait for N
    C1a  continue, token rv > 0     LFCS and recursive ? exact(rv) : store
    C1b  continue, token rv < 0     LFCS and recursive ? consistent : store
    C2   RV N > 0 with limit        LFCS and recursive ? exact(N) : store  ("legacy exact")
    C3   RV unset                   consistent
    C4   RV "0"                     cache, no wait
    C5   RV N without limit         cache, wait for N
    I    any, cache found inconsistent  store (until a consistency check passes)
    exact(n):   n > cacheRV ? (CRS ? cache, wait for n : store)
                            : (a snapshot <= n exists ? snapshot : store)
    consistent: CRS ? cache after waiting for the store's current rv : store

When a cache route cannot be served, :func:`plan_fallback` decides what happens instead
(Kubernetes' delegator and ``Cacher.GetList`` error handling, docs/semantics.md §2.4, §2.7,
§3.5); each outcome is a row too::

    F1  not ready, store, unfiltered page (limit, no selector)   store       (KEP-4568)
    F2  not ready, anything else                                 429
    F3  snapshot pruned during the wait, store and snapshots on  store
    F4  snapshot pruned during the wait, otherwise               410 as a compacted store
    F5  rv not reached in time, not a consistent read            504 (the error stands)
    F6  consistent read timed out, fallback skipped              429 (ConsistentListFromCache-
                                                                      SkipTimeoutFallback)
    F7  consistent read timed out                                store

Two deliberate additions to Kubernetes' table, both about running without a store (the
cache embedded as the source of truth, or in benchmarks): a consistent read is served from
the newest state without waiting (the cache *is* the latest state), and where Kubernetes
would delegate, the request fails as the store would once its history is compacted: 410
``too old resource version`` for an exact read, and for a continuation the 410 with an
``rv: -1`` continue token that resumes at the same key on the latest state.

``limit`` with ``resourceVersion=0``: Kubernetes' cache ignores it (issue #108003: full list,
no token, also on continuations). We honour it by default; ``ignore_limit_for_rv0=True``
in the :class:`CacheView` restores Kubernetes' behaviour.

What a store must answer, and what both return, is the contract in
:mod:`watchcache.cache.backing_store`; :func:`store_revision` decides the revision a store
reads at.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from watchcache.cache.backing_store import Source
from watchcache.wire.options import ListOptions

# Every page goes through the planner, and on Python 3.11 each ``Source.X`` lookup is a
# descriptor call (~80 ns, far more with cold caches): the rows use these.
_CACHE: Final = Source.CACHE
_SNAPSHOT: Final = Source.SNAPSHOT
_STORE: Final = Source.STORE
_EXPIRED: Final = Source.EXPIRED


class CacheView(Protocol):
    """What the planner needs to know about the cache and its store, read when it decides.
    A WatchCache is one (it is read live: no per-LIST copy); tests pass a CacheState."""

    @property
    def resource_version(self) -> int:
        """cacheRV: the highest rv the cache has seen (events or progress)."""
        ...

    @property
    def ready(self) -> bool: ...

    @property
    def has_store(self) -> bool: ...

    @property
    def consistent_reads_supported(self) -> bool:
        """The store answers progress requests correctly (etcd version safeguard, §4)."""
        ...

    @property
    def snapshots_enabled(self) -> bool:
        """Snapshots are kept and used (KEP-4988 ``ListFromCacheSnapshot``)."""
        ...

    @property
    def ignore_limit_for_rv0(self) -> bool: ...

    @property
    def skip_consistent_fallback(self) -> bool:
        """A consistent read that times out gets 429 rather than going to the store."""
        ...

    def has_snapshot_at_or_below(self, rv: int, /) -> bool:
        """Is there a stored snapshot with rv <= the argument?"""
        ...

    @property
    def serve_from_store(self) -> bool:
        """The cache was found inconsistent with its store: every read goes there."""
        ...


@dataclass(slots=True)
class CacheState:
    """A fixed :class:`CacheView`: the cache and its store as of one moment, for tests and
    for callers planning without a cache."""

    resource_version: int  #: cacheRV: the highest rv the cache has seen (events or progress)
    ready: bool = True
    has_store: bool = False
    #: The store answers progress requests correctly (etcd version safeguard, §4).
    consistent_reads_supported: bool = False
    #: Snapshots are kept and used (KEP-4988 ``ListFromCacheSnapshot``).
    snapshots_enabled: bool = True
    #: Is there a stored snapshot with rv <= the argument?
    has_snapshot_at_or_below: Callable[[int], bool] = lambda _rv: False
    ignore_limit_for_rv0: bool = False
    skip_consistent_fallback: bool = False
    #: The cache was found inconsistent with its store: every read goes there.
    serve_from_store: bool = False


@dataclass(slots=True)
class ListPlan:
    """The decision for one LIST.

    ``wait_for``: rv the cache must reach first (0: none); ``consistent``: fetch the store's
    current rv and wait for that; ``exact``: serve the newest snapshot at or below it and
    report it as the list's rv; ``start_key``: absolute key to start at (continue);
    ``limit``: page size after the rv=0 rule (0 = all).
    """

    source: Source
    row: str
    limit: int
    start_key: str | None = None
    wait_for: int = 0
    exact: int | None = None
    consistent: bool = False
    #: Cache route on a cache that is not ready (→ 429 when executed).
    not_ready: bool = False


def plan_list(
    opts: ListOptions,
    continue_rv: int | None,
    start_key: str | None,
    *,
    recursive: bool,
    state: CacheView,
) -> ListPlan:
    """Decide where a validated LIST is served from (the table in the module note).

    ``continue_rv`` and ``start_key`` come from decoding ``opts.continue_token`` against the
    request's key prefix (:func:`~watchcache.wire.tokens.decode_continue`; both None without a
    continue). O(1) plus one snapshot lookup.
    """
    limit = opts.page_size
    if state.serve_from_store:
        return ListPlan(_STORE, "I", limit, start_key)
    if opts.resource_version == "0" and state.ignore_limit_for_rv0:
        limit = 0
    rv = opts.parsed_resource_version
    snapshots = state.snapshots_enabled and recursive

    match_ = opts.resource_version_match
    if match_ == "Exact":
        if not recursive:
            return _store_or_expired(state, "A'", limit, start_key)
        if not snapshots:
            return _store_or_expired(state, "A", limit, start_key)
        return _exact(state, rv, "A", limit, start_key)
    if match_ == "NotOlderThan":
        return _cache(state, "B", limit, start_key, wait_for=rv)
    if continue_rv is not None:
        if not snapshots:
            row = "C1'" if not recursive else ("C1a" if continue_rv > 0 else "C1b")
            return _store_or_expired(state, row, limit, start_key)
        if continue_rv > 0:
            return _exact(state, continue_rv, "C1a", limit, start_key)
        return _consistent(state, "C1b", limit, start_key)
    if limit > 0 and rv > 0:
        if not snapshots:
            return _store_or_expired(state, "C2" if recursive else "C2'", limit, start_key)
        return _exact(state, rv, "C2", limit, start_key)
    if opts.resource_version == "":
        return _consistent(state, "C3", limit, start_key)
    if rv == 0:
        return _cache(state, "C4", limit, start_key)
    return _cache(state, "C5", limit, start_key, wait_for=rv)


def _exact(state: CacheView, n: int, row: str, limit: int, start_key: str | None) -> ListPlan:
    if n > state.resource_version:
        if not state.has_store or state.consistent_reads_supported:
            return _cache(state, row, limit, start_key, wait_for=n, exact=n)
        return ListPlan(_STORE, row, limit, start_key)
    if state.has_snapshot_at_or_below(n):
        return ListPlan(_SNAPSHOT, row, limit, start_key, 0, n)  # exact=n
    return _store_or_expired(state, row, limit, start_key)


def _consistent(state: CacheView, row: str, limit: int, start_key: str | None) -> ListPlan:
    if not state.has_store:
        return _cache(state, row, limit, start_key)
    if state.consistent_reads_supported:
        return _cache(state, row, limit, start_key, consistent=True)
    return ListPlan(_STORE, row, limit, start_key)


def _cache(
    state: CacheView,
    row: str,
    limit: int,
    start_key: str | None,
    *,
    wait_for: int = 0,
    exact: int | None = None,
    consistent: bool = False,
) -> ListPlan:
    source = _SNAPSHOT if exact is not None else _CACHE
    if not state.ready:
        # KEP-4568: an unfiltered page can be cheaply read from the store while the cache
        # (re)initialises; everything else is told to come back later.
        return ListPlan(source, row, limit, start_key, wait_for, exact, consistent, not_ready=True)
    return ListPlan(source, row, limit, start_key, wait_for, exact, consistent)


def _store_or_expired(state: CacheView, row: str, limit: int, start_key: str | None) -> ListPlan:
    if state.has_store:
        return ListPlan(_STORE, row, limit, start_key)
    return ListPlan(_EXPIRED, row, limit, start_key)


class Failure(enum.Enum):
    """Why a cache route could not be served as planned."""

    NOT_READY = "not ready"  #: the cache is (re)initialising or stopped
    EXPIRED = "expired"  #: the snapshot the plan named was pruned while the read waited
    TIMEOUT = "timeout"  #: the cache did not reach the rv the read waits for in time


class Fallback(enum.Enum):
    """What happens instead."""

    STORE = "store"  #: read from the backing store
    TOO_MANY_REQUESTS = "429"  #: come back later (Retry-After)
    EXPIRED = "410"  #: what a compacted store would answer (no store to ask)
    FAIL = "fail"  #: the failure itself is the answer


@dataclass(frozen=True, slots=True)
class FallbackPlan:
    """The decision for a failed cache route; ``row`` is its row of the table."""

    action: Fallback
    row: str


def plan_fallback(
    plan: ListPlan, failure: Failure, opts: ListOptions, state: CacheView
) -> FallbackPlan:
    """Decide what a LIST planned for the cache does when ``failure`` stops it (rows F1-F7
    of the module note). O(1), no side effects."""
    if failure is Failure.NOT_READY:
        if state.has_store and not opts.has_selector and opts.page_size > 0:
            return FallbackPlan(Fallback.STORE, "F1")
        return FallbackPlan(Fallback.TOO_MANY_REQUESTS, "F2")
    if failure is Failure.EXPIRED:
        if state.has_store and state.snapshots_enabled:
            return FallbackPlan(Fallback.STORE, "F3")
        return FallbackPlan(Fallback.EXPIRED, "F4")
    if not plan.consistent:
        return FallbackPlan(Fallback.FAIL, "F5")
    if state.skip_consistent_fallback:
        return FallbackPlan(Fallback.TOO_MANY_REQUESTS, "F6")
    return FallbackPlan(Fallback.STORE, "F7")


def store_revision(opts: ListOptions, continue_rv: int | None) -> tuple[int, int]:
    """``(revision, minimum)`` for a LIST the store serves (docs/semantics.md §6.2): a pinned
    revision for continuations (0 = latest for an ``rv: -1`` token), Exact and legacy
    exact (RV + limit); otherwise the latest revision, which must be at least RV.
    ``continue_rv``: the continue token's rv, None without a continue."""
    rv = opts.parsed_resource_version
    if continue_rv is not None:
        return max(continue_rv, 0), 0
    match_ = opts.resource_version_match
    if match_ == "Exact" or (match_ == "" and rv > 0 and opts.page_size > 0):
        return rv, 0
    return 0, rv
