"""WatchCache: one key prefix of etcd, kept in memory, served with Kubernetes semantics.

Design note
-----------
Ownership. One writer — the asyncio task that calls :meth:`WatchCache.replace`,
:meth:`~WatchCache.apply` and :meth:`~WatchCache.advance` (the reflector) — owns the live
:class:`~watchcache._core.Tree`, the :class:`~watchcache.cache.history.EventHistory` and the
watcher set. Everything else reads immutable Snapshots. All methods must be called on the
event loop's thread; native scans run in a worker thread when they are large (the GIL is
released), so a 300k-object LIST does not stall the loop.

State per applied event (rv never decreasing)::

    tree.swap_item / pop_item          O(log n), path copy after the last snapshot
    history.append(event, previous)    O(1)
    registry.add_tree_snapshot(rv, tree, prune_below=oldest buffered rv if it evicted)
                                       O(1): one snapshot per event, as Kubernetes clones;
                                       snapshots below the history window go with it
    dispatch to watchers               O(candidates): the watcher index (watchindex.py)
                                       names those filed under the event's namespace,
                                       name, trigger field or label values, plus the
                                       unfiled; one native selector test each
    wake reads waiting for rv          O(woken · log waiting)

Invariants (checked by :meth:`WatchCache.check_invariants`, which tests call after
mutations):

1. ``resource_version`` (cacheRV) never decreases, and no buffered event is newer;
2. the newest stored snapshot holds exactly the live tree's state, at the newest change's
   rv (progress notifications raise cacheRV without a new snapshot: nothing changed);
3. every stored snapshot's rv is the list rv or the rv of a buffered event (snapshots
   below the history window go when their events go);
4. no read waits for an rv the cache has reached;
5. every registered watcher is started and open, and its queue holds at most
   ``watch_buffer`` events in rv order, all above the rv it started from — so a watcher
   receives every matching event with rv above its start exactly once, in order, or is
   terminated with :class:`~watchcache.wire.errors.WatchTerminatedError` naming the rv to
   resume from; it never blocks the writer;
6. the tree, the history and the watcher index keep their own invariants.

Event validation is strict because a silently accepted gap is a cache that lies: an rv
below cacheRV (or equal to it, unless the previous change was an event at that same rv: one
etcd transaction may change several keys at one revision), an ADDED for a key that exists,
a MODIFIED or DELETED for one that does not, or a ``prev_object`` whose mod revision
differs from the cached one all raise
:class:`EventOrderError` and change nothing; the reflector answers with a relist. (etcd
revisions are global, so jumps in rv between events of one prefix are normal.)

LIST: the planner decides (:func:`~watchcache.cache.planner.plan_list`, and when a cache
route fails, :func:`~watchcache.cache.planner.plan_fallback`); :meth:`WatchCache.list`
executes. WATCH: :meth:`WatchCache.watch` returns a
:class:`~watchcache.cache.watcher.Watcher`, which talks to the cache through
:class:`~watchcache.cache.watcher.WatchSource`; the start matrix of docs/semantics.md §5.2 is in
:meth:`Watcher.start <watchcache.cache.watcher.Watcher.start>`.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from watchcache._core import (
    Item,
    ScanResult,
    Snapshot,
    SnapshotRegistry,
    Tree,
    set_prefault,
)
from watchcache.cache.backing_store import (
    BackingStore,
    BodyChunks,
    ListResult,
    Source,
    StoreListRequest,
    expired_continuation,
)
from watchcache.cache.deferred_scan import DeferredScan
from watchcache.cache.event import Event, EventType
from watchcache.cache.histogram import READ_WAIT_BUCKETS, Histogram
from watchcache.cache.history import DEFAULT_WINDOW_SECONDS, LOWER_BOUND_CAPACITY, EventHistory
from watchcache.cache.list_index import (
    FIELD,
    IndexChoice,
    IndexName,
    choose_index,
    remaining_matches,
    scan_page,
)
from watchcache.cache.planner import (
    Failure,
    Fallback,
    ListPlan,
    plan_fallback,
    plan_list,
    store_revision,
)
from watchcache.cache.watcher import EventConversions, Watcher
from watchcache.cache.watchindex import Filing, WatcherIndex, default_trigger_fields
from watchcache.wire.errors import (
    BadRequestError,
    ExpiredError,
    NotFoundError,
    StatusError,
    TooLargeResourceVersionError,
    TooManyRequestsError,
)
from watchcache.wire.options import ListOptions, WatchOptions, parse_resource_version
from watchcache.wire.tokens import decode_continue, next_page_token

# Enum member lookups are descriptor calls on Python 3.11; hot paths use these.
_CACHE: Final = Source.CACHE
_SNAPSHOT: Final = Source.SNAPSHOT
_ADDED: Final = EventType.ADDED
_DELETED: Final = EventType.DELETED

#: Kubernetes' blockTimeout: how long a read waits for the cache to reach an rv.
WAIT_TIMEOUT_SECONDS: Final = 3.0
#: Kubernetes' bookmark frequency for watchers that allow bookmarks.
BOOKMARK_INTERVAL_SECONDS: Final = 60.0
#: Live events a watcher may have queued before it counts as too slow and is terminated.
DEFAULT_WATCH_BUFFER: Final = 1024
#: Scans expected to examine more items than this run in a worker thread.
THREAD_SCAN_THRESHOLD: Final = 20_000
#: An unlimited scan without a selector copies whole leaves of item pointers, about 1 ns
#: per item against 15-25 ns for a scan that steps item by item (150,000 items: 0.13 ms
#: against 2.9-3.8 ms): its items count this much less against the threshold, so a full
#: LIST of 150,000 pods is scanned on the loop, without a thread's round trip before its
#: first byte.
LEAF_COPY_DISCOUNT: Final = 16
#: An unlimited scan of a whole prefix without a selector (not a continuation) of at
#: least this many items, run on the loop, is taken when its body is first rendered
#: (deferred_scan.py), so that the response's head can leave before it; below, a scan
#: costs under ~30 µs and is taken at once.
DEFERRED_SCAN_ITEMS: Final = 16_384


def request_key_prefix(resource_prefix: str, prefix: str | None) -> str:
    """Validate a request's key prefix (a namespace, say ``/registry/pods/ns/``) as
    Kubernetes' ``PrepareKey`` does: inside ``resource_prefix``, no empty, ``.`` or ``..``
    segments; a trailing "/" is added. None is the whole resource. Raises BadRequestError."""
    if prefix is None or prefix == resource_prefix:
        return resource_prefix
    if not prefix.endswith("/"):
        prefix += "/"
    if not prefix.startswith(resource_prefix):
        raise BadRequestError(f'invalid key: "{prefix}" lacks resource prefix: "{resource_prefix}"')
    for segment in prefix[len(resource_prefix) : -1].split("/"):
        if segment in ("", ".", ".."):
            raise BadRequestError(f'invalid key: "{prefix}"')
    return prefix


class EventOrderError(ValueError):
    """An event the cache refused because it contradicts what the cache holds (see the
    module note). ``resource_version`` is the cache's rv; nothing was changed."""

    def __init__(self, message: str, resource_version: int) -> None:
        super().__init__(message)
        self.resource_version = resource_version


@dataclass(slots=True)
class CacheStats:
    """Counters for metrics (Kubernetes names in comments)."""

    events_received: int = 0  # apiserver_watch_cache_events_received_total
    events_dispatched: int = 0  # apiserver_watch_cache_events_dispatched_total
    init_events: int = 0  # apiserver_init_events_total
    terminated_watchers: int = 0  # apiserver_terminated_watchers_total
    lists: dict[str, int] = field(default_factory=dict)  # per source
    list_returned_objects: int = 0
    # apiserver_cache_list_total and _fetched_objects_total, per index ("" = a plain scan;
    # Kubernetes' names: "f:<field>", "l:<label>"): cache reads and the items they examined.
    list_by_index: dict[str, int] = field(default_factory=dict)
    list_fetched_objects: dict[str, int] = field(default_factory=dict)
    consistent_reads: dict[tuple[bool, str], int] = field(default_factory=dict)
    # apiserver_watch_cache_read_wait_seconds: reads that had to wait for freshness.
    read_wait: Histogram = field(default_factory=lambda: Histogram(READ_WAIT_BUCKETS))
    initializations: int = 0
    compacted_revision: int = 0  # the newest store compaction the cache was told of
    gets_from_store: int = 0  # GETs read from the store while the cache was not ready
    inconsistencies: int = 0  # times a consistency check found the cache wrong


class WatchCache:
    """An in-memory, snapshotting copy of one key prefix with Kubernetes LIST/WATCH.

    ``prefix``: the etcd key prefix, ending in "/" (e.g. ``/registry/pods/``).
    ``resource``/``kind``/``api_version``: names used in bodies and messages.
    ``store``: the backing store for delegation and consistent reads (None: the cache is
    the source of truth, see planner.py). ``ignore_limit_for_rv0``: Kubernetes'
    compatibility switch (its cache ignores ``limit`` with ``resourceVersion=0``).
    ``skip_consistent_fallback``: a consistent read that times out gets 429 instead of
    going to the store (Kubernetes' ``ConsistentListFromCacheSkipTimeoutFallback``).
    ``trigger_fields``: the selectable fields whose ``=`` requirement files a watcher
    (besides namespace and name, see watchindex.py); None: Kubernetes' choice for the
    resource (core pods: ``spec.nodeName``, the kubelets' watch), else none.
    ``list_indexes``: the secondary indexes LISTs read through, ``(source, name)`` pairs
    with source ``"field"`` or ``"label"`` (list_index.py); None: a field index on each
    trigger field, as Kubernetes indexes pods by ``spec.nodeName``; ``()``: none.
    ``exact_remaining_counts``: also send ``remainingItemCount`` on filtered pages (never
    sent by Kubernetes; O(log n) when the selector is one indexed requirement, else one
    more pass over the candidates).

    The cache is not ready until the first :meth:`replace`; reads before that get 429.
    """

    def __init__(
        self,
        prefix: str,
        *,
        resource: str = "",
        group: str = "",
        kind: str = "Object",
        api_version: str = "v1",
        store: BackingStore | None = None,
        window_seconds: float = DEFAULT_WINDOW_SECONDS,
        history_lower_bound: int = LOWER_BOUND_CAPACITY,
        history_upper_bound: int | None = None,
        snapshots: bool = True,
        snapshot_budget_bytes: int = 0,
        watch_buffer: int = DEFAULT_WATCH_BUFFER,
        wait_timeout: float = WAIT_TIMEOUT_SECONDS,
        bookmark_interval: float = BOOKMARK_INTERVAL_SECONDS,
        ignore_limit_for_rv0: bool = False,
        skip_consistent_fallback: bool = False,
        trigger_fields: Iterable[str] | None = None,
        list_indexes: Iterable[tuple[str, str]] | None = None,
        exact_remaining_counts: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not prefix.startswith("/") or not prefix.endswith("/"):
            raise ValueError(f"prefix must start and end with '/': {prefix!r}")
        if watch_buffer < 1:
            raise ValueError("watch_buffer must be at least 1")
        if wait_timeout <= 0 or bookmark_interval <= 0:
            raise ValueError("wait_timeout and bookmark_interval must be positive")
        self.prefix = prefix
        self.resource = resource or prefix.rstrip("/").rsplit("/", 1)[-1]
        self.group = group
        self.kind = kind
        self.list_kind = kind + "List"
        self.api_version = api_version
        self.store = store
        self.snapshots_enabled = snapshots
        # False from a failed consistency check until one passes again (mark_inconsistent).
        self._consistent = True
        self._snapshotting = snapshots
        self.ignore_limit_for_rv0 = ignore_limit_for_rv0
        self.skip_consistent_fallback = skip_consistent_fallback
        self.wait_timeout = wait_timeout
        self.bookmark_interval = bookmark_interval
        self.watch_buffer = watch_buffer
        self.stats = CacheStats()
        self._clock = clock
        if snapshots:
            # One snapshot per event: while the history window fills, each event's path copy
            # and item is new memory; faulted in ahead by a helper thread, the writer does
            # not wait for the kernel to zero it (chunk_source.hpp).
            set_prefault(True)
        if trigger_fields is None:
            trigger_fields = default_trigger_fields(group, self.resource)
        trigger_fields = tuple(trigger_fields)
        if list_indexes is None:
            list_indexes = [(FIELD, name) for name in trigger_fields]
        self._list_indexes = tuple(dict.fromkeys(list_indexes))
        # Raises for a bad index before anything else is built.
        self._tree = Tree(indexes=self._list_indexes)
        self._declared_indexes: frozenset[IndexName] = frozenset(self._tree.indexes)
        self.exact_remaining_counts = exact_remaining_counts
        self._registry = SnapshotRegistry(snapshot_budget_bytes)
        self._history = EventHistory(
            window_seconds,
            lower_bound=history_lower_bound,
            upper_bound=history_upper_bound,
            clock=clock,
        )
        # The newest state, taken when first asked for after a change (_newest()): apply()
        # makes no Python Snapshot, and a cache nobody reads copies no paths.
        self._latest: Snapshot | None = None
        self._rv = 0
        self._highest_checked_rv = 0
        self._ready = False
        self._stopped = False
        self._ready_changed_at = clock()
        self._last_error = ""
        self._watchers: WatcherIndex[Watcher] = WatcherIndex(prefix, trigger_fields)
        # A live view, so apply() asks "any watchers?" without a Python-level __len__.
        self._watching = self._watchers.values()
        self._watcher_ids = itertools.count()
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._waiter_seq = itertools.count()
        self._waiting = 0
        self._wait_listeners: list[Callable[[int], None]] = []

    # -----------------------------------------------------------------------------------
    # Introspection

    @property
    def resource_version(self) -> int:
        """cacheRV: the newest rv seen (events and progress notifications); 0 before ready."""
        return self._rv

    @property
    def ready(self) -> bool:
        return self._ready

    @property
    def oldest_rv(self) -> int:
        """The smallest rv a watch may start from; watches below it get 410."""
        return self._history.oldest_watchable

    def can_serve_watch(self, resource_version: int) -> bool:
        """Would a watch from this rv start (rather than get 410)? O(1)."""
        return self._ready and self._history.can_serve(resource_version)

    def can_serve_exact(self, resource_version: int) -> bool:
        """Can an exact LIST (or a continuation) at this rv be served from a snapshot now?"""
        return (
            self._ready
            and self.snapshots_enabled
            and 0 < resource_version <= self._rv
            and self._registry.floor_resource_version(resource_version) is not None
        )

    @property
    def has_store(self) -> bool:
        return self.store is not None

    @property
    def consistent_reads_supported(self) -> bool:
        """Consistent reads may wait on this cache: its store answers progress requests
        correctly (etcd version safeguard). False without a store."""
        store = self.store
        return store is not None and store.consistent_reads_supported

    def has_snapshot_at_or_below(self, resource_version: int, /) -> bool:
        """Is there a stored snapshot with rv <= resource_version? O(log s)."""
        return self._registry.floor_resource_version(resource_version) is not None

    def __len__(self) -> int:
        return len(self._tree)

    @property
    def registry(self) -> SnapshotRegistry:
        """The rv → Snapshot registry (read-only use: memory reports, tests)."""
        return self._registry

    @property
    def history(self) -> EventHistory:
        return self._history

    @property
    def watcher_count(self) -> int:
        return len(self._watchers)

    @property
    def list_indexes(self) -> tuple[tuple[str, str], ...]:
        """The secondary indexes LISTs read through, as declared."""
        return self._list_indexes

    @property
    def trigger_fields(self) -> frozenset[str]:
        """The fields besides namespace and name that watchers are filed by."""
        return self._watchers.trigger_fields

    def watcher_filing(self, watcher_id: int) -> Filing | None:
        """Where a registered watcher is filed (None: it is offered every event). O(1)."""
        return self._watchers.filing(watcher_id)

    @property
    def waiting_reads(self) -> int:
        """Reads currently waiting for the cache to reach an rv."""
        return self._waiting

    def snapshot(self) -> tuple[int, Snapshot]:
        """The newest state and cacheRV. O(1)."""
        return self._rv, self._newest()

    def _newest(self) -> Snapshot:
        latest = self._latest
        if latest is None:
            latest = self._latest = self._tree.snapshot()
        return latest

    def add_wait_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(n)`` whenever the number of waiting reads changes (the progress
        requester starts on 0 → 1 and stops at 0)."""
        self._wait_listeners.append(listener)

    def check_invariants(self) -> None:
        """Verify the invariants of the module note; raises AssertionError naming the broken
        one. O(n + snapshots + watchers · buffer): for tests, after mutations."""

        def require(condition: bool, invariant: str) -> None:
            if not condition:
                raise AssertionError(f"WatchCache invariant broken: {invariant}")

        rv = self._rv
        require(rv >= self._highest_checked_rv, "resource_version never decreases")
        self._highest_checked_rv = rv
        self._tree.check_invariants()
        history = self._history
        history.check_invariants()
        self._watchers.check_invariants()
        newest_event = history.newest_resource_version
        require(newest_event is None or newest_event <= rv, "no buffered event is newer")
        if self._ready and self.snapshots_enabled and len(self._registry):
            latest = self._registry.latest()
            assert latest is not None
            newest_change = history.list_resource_version if newest_event is None else newest_event
            require(latest[0] == newest_change, "the newest snapshot is at the newest change")
            require(
                latest[1].items() == self._tree.items(),
                "the newest snapshot holds the live tree's state",
            )
            kept = {history.list_resource_version, *(e.resource_version for e in history)}
            require(
                all(snapshot_rv in kept for snapshot_rv in self._registry.resource_versions()),
                "every snapshot is at the list rv or a buffered event's rv",
            )
        require(
            all(wanted > rv for wanted, _, future in self._waiters if not future.done()),
            "no read waits for an rv the cache has reached",
        )
        for watcher_id, watcher in self._watchers.items():
            require(watcher.watcher_id == watcher_id, "a watcher is registered under its id")
            watcher.check_invariants()

    # -----------------------------------------------------------------------------------
    # The writer side

    def replace(self, items: Iterable[Item], resource_version: int) -> None:
        """(Re)initialise from a full LIST at ``resource_version``: the cache holds exactly
        ``items``, snapshots and history restart there, every watcher is terminated (its
        client re-watches and, being older than the list, gets 410). Marks the cache ready.
        Raises ValueError for a non-positive rv, duplicate keys or keys outside the prefix.
        O(n log n)."""
        if resource_version <= 0:
            raise ValueError(f"list resourceVersion must be > 0, got {resource_version}")
        entries = sorted(items, key=lambda item: item.key)
        for item in entries:
            if not item.key.startswith(self.prefix):
                raise ValueError(f"key {item.key!r} is outside the prefix {self.prefix!r}")
        tree = Tree.from_sorted(entries, indexes=self._list_indexes)
        self._tree = tree
        self._registry.clear()
        self._latest = None
        if self._snapshotting:
            self._registry.add_tree_snapshot(resource_version, tree)
        self._history.reset(resource_version)
        self._rv = resource_version
        self._terminate_all("the cache was relisted")
        self._set_ready(True)
        self.stats.initializations += 1
        self._wake_waiters()

    def apply(self, event: Event) -> None:
        """Apply one change (see the module note for the checks; EventOrderError changes
        nothing). O(log n + the watchers the event can concern). The hot path of the
        cache: kept to plain local operations, about 2 µs of Python around the native put
        (``python bench/apply_cost.py`` separates the two)."""
        rv = event.resource_version
        if (rv <= self._rv or not self._ready) and not self._continues_revision(rv):
            raise self._order_error(event, "is not above the cache's resourceVersion")
        obj = event.object
        key = obj.key
        if not key.startswith(self.prefix):
            raise self._order_error(event, f"is outside the prefix {self.prefix!r}")
        tree = self._tree
        kind = event.type
        if kind is _DELETED:
            previous = tree.pop_item(key)
            if previous is None:
                raise self._order_error(event, "deletes a key that is not in the cache")
        else:
            previous = tree.swap_item(obj)
            if (previous is None) is not (kind is _ADDED):
                self._undo(key, previous)
                state = "already in" if previous is not None else "not in"
                raise self._order_error(event, f"finds the key {state} the cache")
        expected = event.prev_object
        if (
            expected is not None
            and previous is not None
            and expected.mod_revision != previous.mod_revision
        ):
            self._undo(key, previous)
            raise self._order_error(
                event,
                f"names previous revision {expected.mod_revision} but the cache has "
                f"{previous.mod_revision} (an event was missed)",
            )
        self._latest = None
        history = self._history
        # Watchers replaying history need the previous state to judge selector changes.
        evicted = history.append(event, previous)
        if self._snapshotting:
            # Snapshots below the oldest buffered event go with the events evicted.
            oldest = history.oldest_event_resource_version if evicted else None
            self._registry.add_tree_snapshot(rv, tree, oldest or 0)
        self._rv = rv
        self.stats.events_received += 1
        if self._watching:
            self._dispatch(event, previous, key)
        if self._waiters:
            self._wake_waiters()

    def _continues_revision(self, rv: int) -> bool:
        """Another key changed by the transaction the last applied event came from."""
        return self._ready and rv == self._rv and self._history.newest_resource_version == rv

    def _order_error(self, event: Event, problem: str) -> EventOrderError:
        if not self._ready:
            problem = "arrived before the cache was listed"
        return EventOrderError(
            f"{event.type} {event.key!r} at resourceVersion {event.resource_version} {problem} "
            f"(cache at {self._rv})",
            self._rv,
        )

    def _undo(self, key: str, previous: Item | None) -> None:
        if previous is None:
            self._tree.erase(key)
        else:
            self._tree.put_item(previous)

    def advance(self, resource_version: int) -> None:
        """A progress notification: everything up to ``resource_version`` has been
        delivered. Raises cacheRV (a lower value is ignored: etcd may answer a progress
        request below the watch's start, etcd#20221). No snapshot: nothing changed."""
        if resource_version > self._rv and self._ready:
            self._rv = resource_version
            if self._waiters:
                self._wake_waiters()

    def compact(self, resource_version: int) -> int:
        """The store was compacted to ``resource_version``: drop the snapshots below it, as
        Kubernetes' cacher does (``WatchCacheStorage.Compact``), so that an Exact read or
        a continue token older than the compaction goes to the store and gets its 410
        rather than a page the store could no longer give. Watch history is kept (a watch
        from the cache may still start there). Returns how many snapshots were dropped."""
        dropped = self._registry.prune_below(resource_version)
        self.stats.compacted_revision = max(self.stats.compacted_revision, resource_version)
        return dropped

    @property
    def consistent(self) -> bool:
        """False between a failed consistency check and the next one that passes."""
        return self._consistent

    @property
    def serve_from_store(self) -> bool:
        """Reads go to the store: the cache was found inconsistent with it (planner row I)."""
        return not self._consistent and self.store is not None

    def mark_inconsistent(self) -> None:
        """The consistency checker found the cache differs from the store: drop every
        snapshot and take no more, and serve LISTs and GETs from the store, until
        :meth:`mark_consistent`. Kubernetes drops the snapshots too (``MarkConsistent(false)``)
        but keeps serving its latest state; a cache known to be wrong serves nothing here.
        Watches are not refused: the relist that rebuilds the cache ends them."""
        self._consistent = False
        self._snapshotting = False
        self._registry.clear()
        self.stats.inconsistencies += 1

    def mark_consistent(self) -> None:
        """A consistency check passed: snapshots and reads from the cache again, starting
        with a snapshot of the state now, at the newest change it holds."""
        self._consistent = True
        self._snapshotting = self.snapshots_enabled
        if self._snapshotting and self._ready and not len(self._registry):
            history = self._history
            newest = history.newest_resource_version
            changed = history.list_resource_version if newest is None else newest
            self._registry.add_tree_snapshot(changed, self._tree)

    def mark_not_ready(self, error: str = "") -> None:
        """The reflector lost its watch and will relist; reads get 429 until then."""
        self._last_error = error
        self._set_ready(False)

    def stop(self) -> None:
        """Terminal: reads get 429 ``apiserver cacher is stopped``; watchers end."""
        self._stopped = True
        self._set_ready(False)
        self._terminate_all("the cache was stopped")

    def _set_ready(self, ready: bool) -> None:
        if ready != self._ready:
            self._ready = ready
            self._ready_changed_at = self._clock()

    def check_ready(self) -> None:
        """Raise 429 when the cache is not ready (``storage is (re)initializing``, Retry-After
        growing with the downtime) or stopped."""
        if self._stopped:
            raise TooManyRequestsError.retry_after("apiserver cacher is stopped", 1)
        if not self._ready:
            raise TooManyRequestsError.not_ready(
                self._clock() - self._ready_changed_at, self._last_error
            )

    # -----------------------------------------------------------------------------------
    # Waiting for freshness

    async def wait_for_rv(self, resource_version: int, timeout: float | None = None) -> float:
        """Wait until cacheRV >= ``resource_version``; returns the seconds waited (0.0 when
        already there, without yielding). After ``timeout`` (default: the cache's
        ``wait_timeout``, 3 s) raises TooLargeResourceVersionError (504, Retry-After 1).
        Request cancellation is honoured (unlike Kubernetes, whose wait ignores it)."""
        if resource_version <= self._rv:
            return 0.0
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._waiters, (resource_version, next(self._waiter_seq), future))
        start = self._clock()
        self._waiting_changed(+1)
        try:
            await asyncio.wait_for(future, self.wait_timeout if timeout is None else timeout)
        except TimeoutError:
            raise TooLargeResourceVersionError(
                minimum=resource_version, current=self._rv, retry_after_seconds=1
            ) from None
        finally:
            self._waiting_changed(-1)
            waited = self._clock() - start
            self.stats.read_wait.observe(waited)
        return waited

    def _waiting_changed(self, delta: int) -> None:
        self._waiting += delta
        for listener in self._wait_listeners:
            listener(self._waiting)

    def _wake_waiters(self) -> None:
        waiters = self._waiters
        while waiters and waiters[0][0] <= self._rv:
            future = heapq.heappop(waiters)[2]
            if not future.done():
                future.set_result(None)

    # -----------------------------------------------------------------------------------
    # LIST

    def request_prefix(self, prefix: str | None) -> str:
        """Validate a request's key prefix (see :func:`request_key_prefix`)."""
        return request_key_prefix(self.prefix, prefix)

    async def list(self, opts: ListOptions, *, prefix: str | None = None) -> ListResult:
        """Serve a LIST exactly as Kubernetes' cache (+ store) would: see planner.py.

        ``prefix``: the request's key prefix (default: the whole cache). The result holds
        the page's items, the list rv, the continue token and remainingItemCount;
        ``result.render(...)`` (or :meth:`render`) gives the JSON body. Raises StatusError:
        400 (bad continue token or prefix), 410, 429, 504. Cost: O(log n + page) for a
        page; a full scan of a large prefix runs in a worker thread.
        """
        key_prefix = self.prefix if prefix is None else self.request_prefix(prefix)
        continue_rv: int | None = None
        start_key: str | None = None
        if opts.continue_token:
            start_key, continue_rv = decode_continue(opts.continue_token, key_prefix)
        plan = plan_list(opts, continue_rv, start_key, recursive=True, state=self)
        source = plan.source
        if (
            (source is _SNAPSHOT or source is _CACHE)
            and not plan.wait_for
            and not plan.consistent
            and not plan.not_ready
        ):
            # Nothing to wait for (most pages): read now. No await comes between the plan
            # and the choice of snapshot, so the snapshot the plan counted on is still there.
            return await self._read(plan, opts, key_prefix, 0.0)
        return await self._list_routed(plan, opts, continue_rv, key_prefix)

    async def _list_routed(
        self, plan: ListPlan, opts: ListOptions, continue_rv: int | None, key_prefix: str
    ) -> ListResult:
        """A LIST that waits for freshness, goes to the store or fails; when a cache route
        fails, the planner's fallback decides what happens instead."""
        if plan.source is Source.STORE and not plan.not_ready:
            return await self._list_store(plan, opts, continue_rv, key_prefix)
        if plan.source is Source.EXPIRED:
            raise self._expired(plan, opts, key_prefix)
        failure: Failure
        error: StatusError | None = None
        if plan.not_ready:
            failure = Failure.NOT_READY
        else:
            try:
                result = await self._list_cached(plan, opts, key_prefix)
            except ExpiredError as expired:
                failure, error = Failure.EXPIRED, expired
            except TooLargeResourceVersionError as timeout:
                failure, error = Failure.TIMEOUT, timeout
            else:
                if plan.consistent:
                    result.fallback = "false"
                    self._count_consistent(True, "false")
                return result
        fallback = plan_fallback(plan, failure, opts, self)
        action = fallback.action
        if action is Fallback.STORE:
            if failure is not Failure.TIMEOUT:
                return await self._list_store(plan, opts, continue_rv, key_prefix)
            try:
                result = await self._list_store(plan, opts, continue_rv, key_prefix)
            except StatusError:
                self._count_consistent(False, "true")
                raise
            result.fallback = "true"
            self._count_consistent(True, "true")
            return result
        if action is Fallback.EXPIRED:
            raise self._expired(plan, opts, key_prefix) from None
        if action is Fallback.TOO_MANY_REQUESTS:
            if failure is Failure.NOT_READY:
                # Raises the 429 that says why (initialising, or stopped). Nothing awaited
                # since the plan, so the cache cannot have become ready in between.
                self.check_ready()
            assert error is not None
            self._count_consistent(False, "skipped")
            raise TooManyRequestsError.retry_after(error.message, 1) from None
        assert error is not None
        raise error

    def render(self, result: ListResult) -> bytes:
        """The LIST body for this cache's kind: ``{"kind":"<Kind>List",...}``."""
        return result.render(self.list_kind, self.api_version)

    def chunks(self, result: ListResult, chunk_bytes: int) -> BodyChunks:
        """:meth:`render`'s body in pieces of about ``chunk_bytes`` (``ListResult.chunks``)."""
        return result.chunks(self.list_kind, self.api_version, chunk_bytes)

    def _count_consistent(self, success: bool, fallback: str) -> None:
        key = (success, fallback)
        self.stats.consistent_reads[key] = self.stats.consistent_reads.get(key, 0) + 1

    def _expired(self, plan: ListPlan, opts: ListOptions, key_prefix: str) -> ExpiredError:
        """Without a store, what a compacted store would answer: the inconsistent-continue
        410 for a continuation, ``too old resource version`` for an exact read."""
        if plan.start_key is not None:
            return expired_continuation(plan.start_key, key_prefix[:-1])
        oldest = self._registry.oldest()
        requested = plan.exact if plan.exact is not None else opts.parsed_resource_version
        return ExpiredError.too_old_resource_version(
            requested, oldest[0] if oldest is not None else None
        )

    async def _list_cached(self, plan: ListPlan, opts: ListOptions, key_prefix: str) -> ListResult:
        waited = 0.0
        if plan.consistent:
            assert self.store is not None
            waited = await self.wait_for_rv(await self.store.current_resource_version())
        elif plan.wait_for:
            waited = await self.wait_for_rv(plan.wait_for)
        return await self._read(plan, opts, key_prefix, waited)

    async def _read(
        self, plan: ListPlan, opts: ListOptions, key_prefix: str, waited: float
    ) -> ListResult:
        """The page a cache-served plan names, from the snapshot it names. Raises 429 when
        the cache is not ready, 410 when that snapshot is gone."""
        if self._stopped or not self._ready:
            self.check_ready()
        if plan.exact is not None:
            found = self._registry.floor(plan.exact) if self.snapshots_enabled else None
            if found is None:
                raise ExpiredError.too_old_resource_version(plan.exact)
            snap, rv = found[1], plan.exact
        else:
            snap, rv = self._newest(), self._rv
        selector = opts.selector()
        start_key, limit = plan.start_key, plan.limit
        choice: IndexChoice | None = None
        index_name = ""
        count = 0
        if selector is None:
            count = 0 if limit else snap.count_prefix(key_prefix)
            work = count // LEAF_COPY_DISCOUNT
        else:
            chosen = None
            if self._declared_indexes:
                labels, fields = opts.label_requirements, opts.field_requirements
                chosen = choose_index(snap, key_prefix, labels, fields, self._declared_indexes)
            if chosen is None:
                work = snap.count_prefix(key_prefix)
            else:
                choice, work = chosen
                index_name = ("f:" if choice.source == FIELD else "l:") + choice.name
        # The items a page may examine: a page without a selector reads O(limit); otherwise
        # the prefix or the index's candidates bound it, and a large read runs in a worker
        # thread (the GIL is released) to keep the loop free.
        scan: ScanResult | DeferredScan
        if count >= DEFERRED_SCAN_ITEMS and start_key is None and work <= THREAD_SCAN_THRESHOLD:
            scan = DeferredScan(snap, key_prefix, count)
        elif work <= THREAD_SCAN_THRESHOLD:
            scan = scan_page(
                snap, key_prefix, choice, start_key=start_key, limit=limit, selector=selector
            )
        else:
            scan = await asyncio.to_thread(
                scan_page, snap, key_prefix, choice, start_key=start_key, limit=limit,
                selector=selector,
            )  # fmt: skip
        token = ""
        remaining: int | None = None
        # next_key first: a deferred scan answers it without scanning (it is None).
        if scan.next_key is not None and (last_key := scan.last_key) is not None:
            # Encoded against the prefix without its "/", as Kubernetes' cacher does: the
            # start key then begins with "/" (docs/semantics.md §1.4).
            token = next_page_token(last_key, key_prefix[:-1], rv)
            if selector is None:
                remaining = scan.remaining
            elif self.exact_remaining_counts:
                remaining = remaining_matches(snap, key_prefix, choice, last_key, selector)
        stats = self.stats
        stats.lists[plan.source] = stats.lists.get(plan.source, 0) + 1
        stats.list_returned_objects += len(scan)
        stats.list_by_index[index_name] = stats.list_by_index.get(index_name, 0) + 1
        fetched = stats.list_fetched_objects
        fetched[index_name] = fetched.get(index_name, 0) + scan.scanned
        return ListResult(scan, rv, token, remaining, plan.source, waited, plan.row)

    async def _list_store(
        self, plan: ListPlan, opts: ListOptions, continue_rv: int | None, key_prefix: str
    ) -> ListResult:
        store = self.store
        if store is None:
            raise self._expired(plan, opts, key_prefix)
        revision, minimum = store_revision(opts, continue_rv)
        request = StoreListRequest(
            key_prefix=key_prefix,
            token_prefix=key_prefix[:-1],
            start_key=plan.start_key,
            revision=revision,
            minimum=minimum,
            limit=opts.page_size,
            selector=opts.selector(),
            continued=bool(opts.continue_token),
            options=opts,
        )
        result = await store.list(request)
        result.row = plan.row
        self.stats.lists[Source.STORE] = self.stats.lists.get(Source.STORE, 0) + 1
        return result

    # -----------------------------------------------------------------------------------
    # GET

    async def get(self, key: str, resource_version: str = "") -> Item:
        """One object by its full key. ``resource_version`` "" is a consistent read (with a
        store: wait for its current rv, and read the object from the store if the wait times
        out; Kubernetes reads etcd instead — same answer, no etcd read of the object), "0"
        any, N: at least N (504 after the wait timeout).
        While the cache is not ready (initialising, relisting) a cache with a store reads
        the object from it, as Kubernetes' delegator does (KEP-4568); without one, 429.
        Raises NotFoundError (404), BadRequestError, TooManyRequestsError."""
        if not key.startswith(self.prefix) or key.endswith("/"):
            raise BadRequestError(f'invalid key: "{key}" lacks resource prefix: "{self.prefix}"')
        rv = parse_resource_version(resource_version)
        if not self._ready or self._stopped or not self._consistent:
            if self.store is None or self._stopped:
                self.check_ready()
            return await self._get_from_store(key, rv)
        if resource_version == "" and self.store is not None:
            try:
                await self.wait_for_rv(await self.store.current_resource_version())
            except TooLargeResourceVersionError as timeout:
                # Kubernetes answers this GET from etcd, so a cache that lags gives no
                # error there: read the object from the store, as a consistent LIST that
                # times out does (row F7; F6's 429 when that fallback is skipped).
                if self.skip_consistent_fallback:
                    raise TooManyRequestsError.retry_after(timeout.message, 1) from None
                return await self._get_from_store(key, 0)
        elif rv:
            await self.wait_for_rv(rv)
        item = self._newest().get_item(key)
        if item is None:
            name = key.rsplit("/", 1)[-1]
            raise NotFoundError.for_object(self.resource, name, self.group)
        return item

    async def _get_from_store(self, key: str, minimum: int) -> Item:
        assert self.store is not None
        self.stats.gets_from_store += 1
        return await self.store.get(key, minimum, resource=self.resource, group=self.group)

    # -----------------------------------------------------------------------------------
    # WATCH

    def watch(self, opts: WatchOptions, *, prefix: str | None = None) -> Watcher:
        """A watch over ``prefix`` (default: the whole cache). Use as ``async for event in
        cache.watch(opts)`` or ``watcher = await cache.watch(opts)`` to start it (and see
        start errors) before iterating. Start errors: 429 not ready (Kubernetes answers
        this one directly), 410 too old, 504 too large RV for sendInitialEvents, 500 for
        watch-list without progress requests; Kubernetes sends all but the 429 as one ERROR
        event (``err.watch_event()``). Close with ``await watcher.aclose()`` or
        ``async with``."""
        return Watcher(self, opts, self.request_prefix(prefix))

    # The watchers' side of the cache (watcher.WatchSource).

    def add_watcher(self, watcher: Watcher) -> int:
        """Register a started watcher: from now on it is offered every event that can
        concern it (filed by its key prefix and selector, watchindex.py). Its id. O(1)."""
        watcher_id = next(self._watcher_ids)
        opts = watcher.options
        self._watchers.add(
            watcher_id,
            watcher,
            watcher.key_prefix,
            opts.label_requirements,
            opts.field_requirements,
        )
        return watcher_id

    def remove_watcher(self, watcher_id: int) -> None:
        self._watchers.remove(watcher_id)

    def now(self) -> float:
        return self._clock()

    def initial_event_sent(self) -> None:
        self.stats.init_events += 1

    def _terminate_all(self, reason: str) -> None:
        watchers = list(self._watchers.values())
        self._watchers.clear()
        for watcher in watchers:
            watcher.terminate(reason)

    def _dispatch(self, event: Event, previous: Item | None, key: str) -> None:
        conversions = EventConversions(event, previous, key)
        overflowed: list[Watcher] = []
        # Only the watchers the event's namespace, name, trigger field and label values
        # can concern (all of them while none is filed); each watcher's selector decides.
        targets = self._watchers.candidates(conversions.key, conversions.new, conversions.old)
        for watcher in targets:
            if not watcher.offer(event, conversions):
                overflowed.append(watcher)
        for watcher in overflowed:
            self.remove_watcher(watcher.watcher_id)
            self.stats.terminated_watchers += 1
            watcher.overflowed(event.resource_version, f"it fell {self.watch_buffer} events behind")
        self.stats.events_dispatched += 1
