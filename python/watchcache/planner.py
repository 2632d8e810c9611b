"""The LIST decision table: serve from the newest snapshot, a stored snapshot, or the store.

Design note
-----------
Policy apart from mechanism: :func:`plan_list` is the whole of Kubernetes' routing for a
LIST (SEMANTICS.md §2.3, §2.4, Appendix B) as one function whose branches are the table's
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
    exact(n):   n > cacheRV ? (CRS ? cache, wait for n : store)
                            : (a snapshot <= n exists ? snapshot : store)
    consistent: CRS ? cache after waiting for the store's current rv : store

Then, for a cache route on a cache that is not ready: an unfiltered LIST with a limit goes
to the store; anything else is 429 (KEP-4568).

Two deliberate additions to Kubernetes' table, both about running without a store (the
cache embedded as the source of truth, or in benchmarks): a consistent read is served from
the newest state without waiting (the cache *is* the latest state), and where Kubernetes
would delegate, the request fails as the store would once its history is compacted: 410
``too old resource version`` for an exact read, and for a continuation the 410 with an
``rv: -1`` continue token that resumes at the same key on the latest state.

``limit`` with ``resourceVersion=0``: Kubernetes' cache ignores it (issue #108003: full list,
no token, also on continuations). We honour it by default; ``ignore_limit_for_rv0=True``
in the :class:`CacheView` restores Kubernetes' behaviour.

The :class:`BackingStore` protocol is what the store (etcd, issue 4) implements: a LIST
with the decided revision, its current revision for consistent reads, and whether it
supports progress requests. :class:`ListResult` is what both the cache and the store return.
"""

from __future__ import annotations

import enum
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from watchcache import gojson
from watchcache.errors import ExpiredError
from watchcache.options import ListOptions
from watchcache.tokens import encode_continue

# The base64url alphabet: a token made only of these needs no JSON escaping.
_BASE64URL = string.ascii_letters + string.digits + "-_"

if TYPE_CHECKING:
    from watchcache._core import Item, ScanResult, Selector


class Source(enum.StrEnum):
    """Where a read is (or was) served from."""

    CACHE = "cache"  #: the newest state of the cache
    SNAPSHOT = "snapshot"  #: a stored snapshot at or below a resourceVersion
    STORE = "etcd"  #: the backing store
    EXPIRED = "expired"  #: nowhere: no snapshot and no store — fails with 410


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

    def has_snapshot_at_or_below(self, rv: int, /) -> bool:
        """Is there a stored snapshot with rv <= the argument?"""
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
    request's key prefix (:func:`~watchcache.tokens.decode_continue`; both None without a
    continue). O(1) plus one snapshot lookup.
    """
    limit = opts.page_size
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


def not_ready_goes_to_store(opts: ListOptions, state: CacheView) -> bool:
    """§2.4: a cache-routed LIST on a cache that is not ready is read from the store when
    it has no selector and a limit; otherwise it gets 429."""
    return state.has_store and not opts.has_selector and opts.page_size > 0


def store_revision(opts: ListOptions, continue_rv: int | None) -> tuple[int, int]:
    """``(revision, minimum)`` for a LIST the store serves (SEMANTICS.md §6.2): a pinned
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


def expired_continuation(start_key: str, token_prefix: str) -> ExpiredError:
    """The 410 for a continuation whose data is gone everywhere: its ``metadata.continue``
    is a token with ``rv: -1`` that resumes at the same key on the latest state
    (an inconsistent list, as the message says)."""
    try:
        token = encode_continue(start_key, token_prefix, -1)
    except ValueError:
        token = ""
    return ExpiredError.inconsistent_continue(token)


# ---------------------------------------------------------------------------------------------
# What a LIST returns, from the cache or from the store


@dataclass(slots=True)
class ListResult:
    """One page of a LIST.

    ``items`` are native Items in key order (a ScanResult from the cache keeps its snapshot
    alive). ``resource_version`` is the list's ``metadata.resourceVersion``;
    ``continue_token`` is "" on the last page; ``remaining_item_count`` is set only for an
    unfiltered page that has a continuation. ``source``/``waited_seconds``/``row`` record
    where the read was served from and why, and how long it waited for freshness.
    """

    items: Sequence[Item] | ScanResult
    resource_version: int
    continue_token: str = ""
    remaining_item_count: int | None = None
    source: Source = Source.CACHE
    waited_seconds: float = 0.0
    row: str = ""
    fallback: str = ""

    def metadata(self) -> dict[str, object]:
        """``metav1.ListMeta`` in Go's member order."""
        meta: dict[str, object] = {"resourceVersion": str(self.resource_version)}
        if self.continue_token:
            meta["continue"] = self.continue_token
        if self.remaining_item_count is not None:
            meta["remainingItemCount"] = self.remaining_item_count
        return meta

    def metadata_json(self) -> bytes:
        """:meth:`metadata` as Go writes it. Tokens minted here are base64url, which JSON
        never escapes, so the usual page skips the general encoder (3 µs of a page)."""
        token = self.continue_token
        # str.strip with the alphabet leaves nothing of a base64url token: one C call,
        # where a regex match would run the (cold) regex engine on every page.
        if token and token.strip(_BASE64URL):
            return gojson.dumpb(self.metadata())
        text = f'{{"resourceVersion":"{self.resource_version}"'
        if token:
            text += f',"continue":"{token}"'
        if self.remaining_item_count is not None:
            text += f',"remainingItemCount":{self.remaining_item_count}'
        return (text + "}").encode()

    def render(self, kind: str, api_version: str) -> bytes:
        """The list body ``{"kind","apiVersion","metadata","items":[...]}`` as one bytes.
        From a ScanResult the engine copies each value once; otherwise values are joined."""
        metadata = self.metadata_json()
        render = getattr(self.items, "render", None)
        if render is not None:
            body: bytes = render(kind, api_version, metadata)
            return body
        head = gojson.dumpb({"kind": kind, "apiVersion": api_version})[:-1]
        return b"".join(
            (
                head,
                b',"metadata":',
                metadata,
                b',"items":[',
                b",".join(item.value for item in self.items),
                b"]}",
            )
        )


@dataclass(frozen=True, slots=True)
class StoreListRequest:
    """A LIST the store must answer, with the revision already decided.

    ``revision``: read at exactly this revision (0 = latest). ``minimum``: with a latest
    read, the answer must be at least this new (504 otherwise). ``key_prefix`` ends with
    "/"; ``start_key`` is where to start (a decoded continue, absolute). ``continued``:
    the client sent a continue token (so a compaction answers with the inconsistent
    410 of :func:`expired_continuation`).
    """

    key_prefix: str
    token_prefix: str
    start_key: str | None
    revision: int
    minimum: int
    limit: int
    selector: Selector | None
    continued: bool
    options: ListOptions


class BackingStore(Protocol):
    """The source of truth behind the cache (etcd). Implemented by the etcd issue."""

    @property
    def consistent_reads_supported(self) -> bool:
        """True once every endpoint is known to answer progress requests correctly."""
        ...

    async def current_resource_version(self) -> int:
        """The store's current revision (a cheap linearizable read)."""
        ...

    async def list(self, request: StoreListRequest) -> ListResult:
        """Serve the LIST; raise ExpiredError (compaction), TooLargeResourceVersionError
        (revision in the future) or another StatusError."""
        ...
