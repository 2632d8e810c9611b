"""One client's watch: the events it receives, in order, from the cache it watches.

Design note
-----------
A :class:`Watcher` is an async iterator of :class:`WatchEvent`. It talks to its cache only
through :class:`WatchSource`, the cache's side of the contract: the cache registers the
watcher and hands it every applied event (:meth:`Watcher.offer`, never blocking: a full
buffer ends the watch), and the watcher reads the cache's state when it starts (the start
matrix of docs/semantics.md §5.2, in :meth:`Watcher.start`), when it replays history and when it
decides on a bookmark. How one event looks to one watcher (its type changes when the
object enters or leaves the watcher's selector, docs/semantics.md §5.5) is
:class:`EventConversions`, built once per event and shared by all watchers.

Ownership: a watcher belongs to the one task that iterates it; the cache's writer calls
:meth:`~Watcher.offer`, :meth:`~Watcher.overflowed` and :meth:`~Watcher.terminate` on the
same event loop. Nothing here is thread-safe.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Generator, Iterator
from typing import TYPE_CHECKING, Any, Final, Protocol

from watchcache._core import Item, Snapshot
from watchcache.cache.event import Event, EventType, bookmark_object, with_resource_version
from watchcache.wire.errors import InternalError, WatchTerminatedError
from watchcache.wire.options import WatchOptions

if TYPE_CHECKING:
    from watchcache.cache.backing_store import BackingStore
    from watchcache.cache.history import EventHistory

# Enum member lookups are descriptor calls on Python 3.11; the dispatch path, run for
# every event and every watcher it concerns, uses these.
_ADDED: Final = EventType.ADDED
_MODIFIED: Final = EventType.MODIFIED
_DELETED: Final = EventType.DELETED

#: A bookmark is sent this long before a watch's timeout closes it.
BOOKMARK_BEFORE_DEADLINE_SECONDS: Final = 2.0
#: Initial events are read from the snapshot this many at a time.
_INITIAL_CHUNK: Final = 512
#: The message Kubernetes sends when watch-list needs progress requests etcd cannot answer.
WATCH_LIST_UNSUPPORTED: Final = (
    "a watch stream was requested by the client but the required storage feature "
    "RequestWatchProgress is disabled"
)


class WatchSource(Protocol):
    """The cache as a watcher sees it (:class:`~watchcache.cache.watch_cache.WatchCache`).

    ``kind``/``api_version`` name bookmark objects; ``watch_buffer`` is how many live
    events a watcher may queue; ``bookmark_interval`` how often an idle watcher that allows
    bookmarks gets one."""

    kind: str
    api_version: str
    watch_buffer: int
    bookmark_interval: float

    @property
    def resource_version(self) -> int:
        """cacheRV."""
        ...

    @property
    def store(self) -> BackingStore | None: ...

    @property
    def history(self) -> EventHistory: ...

    def now(self) -> float:
        """The cache's clock (monotonic seconds)."""
        ...

    def check_ready(self) -> None:
        """Raise 429 when the cache is not ready or stopped."""
        ...

    async def wait_for_rv(self, resource_version: int, timeout: float | None = None) -> float:
        """Wait until cacheRV reaches ``resource_version`` (504 after the wait timeout)."""
        ...

    def snapshot(self) -> tuple[int, Snapshot]:
        """cacheRV and the newest state, together."""
        ...

    def add_watcher(self, watcher: Watcher) -> int:
        """Register: from now on the cache offers the watcher every event; its id."""
        ...

    def remove_watcher(self, watcher_id: int) -> None:
        """Unregister (idempotent)."""
        ...

    def initial_event_sent(self) -> None:
        """Count one initial event (``apiserver_init_events_total``)."""
        ...


class WatchEvent:
    """One event as a watcher receives it (read-only). ``object`` is the JSON of the object
    (for BOOKMARK the bookmark object, for ERROR the Status); ``item`` the native object
    (None for BOOKMARK and ERROR).

    Built from an item (``object`` None, :meth:`of_item`, :meth:`restamped`), the JSON is
    read out of the item when it is first asked for, and kept: the watchers that receive
    one event share its WatchEvents (:class:`EventConversions`), and the first to send it
    makes the copy (or, for a DELETED of an object that left a watcher's selector, the
    re-stamp at the event's rv: a parse and a serialization) in its own task, never the
    cache's writer while it dispatches."""

    __slots__ = ("_item", "_object", "_restamp", "initial_events_end", "resource_version", "type")

    def __init__(
        self,
        type: EventType,
        resource_version: int,
        object: bytes | None,
        item: Item | None = None,
        initial_events_end: bool = False,
    ) -> None:
        self.type = type
        self.resource_version = resource_version
        self._object: bytes | None = object
        self._item = item
        self._restamp: Item | None = None
        #: The bookmark that ends a watch's initial events (``k8s.io/initial-events-end``).
        self.initial_events_end = initial_events_end

    @classmethod
    def of_item(cls, type: EventType, resource_version: int, item: Item) -> WatchEvent:
        """``item`` as it is stored; its JSON is read on first use."""
        return cls(type, resource_version, None, item)

    @classmethod
    def restamped(cls, type: EventType, resource_version: int, previous: Item) -> WatchEvent:
        """``previous`` re-stamped at ``resource_version`` (its JSON's
        ``metadata.resourceVersion`` and its mod revision), made on first use; an object
        that is not JSON is delivered as stored rather than dropped."""
        event = cls.of_item(type, resource_version, previous)
        event._restamp = previous
        return event

    @property
    def item(self) -> Item | None:
        restamp = self._restamp
        if restamp is not None:
            with contextlib.suppress(ValueError):  # not JSON: the stored object, as it is
                self._item = with_resource_version(restamp, self.resource_version)
            self._restamp = None
        return self._item

    @property
    def object(self) -> bytes:
        body = self._object
        if body is None:
            item = self.item
            assert item is not None  # made from an item, or given its body
            body = self._object = item.value
        return body

    def to_json(self) -> bytes:
        """The wire form, one line of a Kubernetes watch stream (without the newline)."""
        return b'{"type":"' + self.type.encode() + b'","object":' + self.object + b"}"

    def _fields(self) -> tuple[Any, ...]:
        return (self.type, self.resource_version, self.object, self.item, self.initial_events_end)

    def __eq__(self, other: builtins.object) -> bool:
        if not isinstance(other, WatchEvent):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((self.type, self.resource_version, self.object))

    def __repr__(self) -> str:
        return (
            f"WatchEvent(type={self.type!r}, resource_version={self.resource_version!r}, "
            f"object={self.object!r}, item={self.item!r}, "
            f"initial_events_end={self.initial_events_end!r})"
        )


class EventConversions:
    """The WatchEvents one cache event can become, built once and shared by all watchers:
    the event as it happened, the same object as ADDED (it entered a watcher's selector)
    or MODIFIED, or a DELETED of the previous object re-stamped at the event's rv (it left
    the watcher's selector)."""

    __slots__ = ("_made", "event", "key", "new", "old")

    def __init__(self, event: Event, previous: Item | None, key: str | None = None) -> None:
        """``key``: the event's key when the caller has read it already (it is read from
        the native item, a new string each time)."""
        self.event = event
        self.key = event.key if key is None else key
        self.new: Item | None = None if event.type is _DELETED else event.object
        self.old = previous
        self._made: dict[EventType, WatchEvent] = {}

    def native(self) -> WatchEvent:
        return self.as_type(self.event.type)

    def as_type(self, kind: EventType) -> WatchEvent:
        """The event as ADDED, MODIFIED or DELETED, made on the first ask."""
        made = self._made.get(kind)
        if made is None:
            event = self.event
            if kind is _DELETED and event.type is not _DELETED:
                assert self.old is not None
                made = WatchEvent.restamped(kind, event.resource_version, self.old)
            else:
                made = WatchEvent.of_item(kind, event.resource_version, event.object)
            self._made[kind] = made
        return made


class Watcher:
    """One watch: an async iterator of :class:`WatchEvent`.

    Delivery: initial events (ADDED, key order, read lazily from a snapshot), then the
    initial-events-end BOOKMARK (watch-list), then buffered history after the start rv,
    then live events, each matching the watcher's prefix and selectors, rv strictly
    increasing. Bookmarks (``allowWatchBookmarks``) come when the watcher is idle, every
    ``bookmark_interval`` and once ``2 s`` before ``timeoutSeconds`` ends the watch, and
    only if the cache has moved past what the watcher already has.

    Ends with StopAsyncIteration at the timeout or after :meth:`aclose`; raises
    :class:`WatchTerminatedError` (after delivering everything queued) when the cache
    terminated it, StatusError when it cannot start. Not thread-safe: one consumer task.
    """

    def __init__(self, cache: WatchSource, opts: WatchOptions, key_prefix: str) -> None:
        self._cache = cache
        self.options = opts
        self.key_prefix = key_prefix
        self._selector = opts.selector()
        # Live events as (the event's conversions, the type this watcher sees it as): the
        # WatchEvent is made (or taken, when another watcher made it) by this watcher's
        # task as it sends the event, not by the writer that queues it for every watcher.
        self._queue: deque[tuple[EventConversions, EventType]] = deque()
        self._limit = cache.watch_buffer
        self._waiter: asyncio.Future[None] | None = None
        self.watcher_id = -1
        self._started = False
        self._closed = False
        self._terminated: str | None = None
        #: Events with rv <= floor are not delivered live (they are in the initial state
        #: or the history backlog, or before the requested start).
        self._floor = 0
        self._sent_rv = 0
        self._initial: Snapshot | None = None
        self._initial_done = False
        self._initial_after: str | None = None
        self._initial_chunk: deque[Item] = deque()
        self._initial_rv = 0
        self._end_bookmark = False
        self._backlog: Iterator[tuple[Event, Item | None]] | None = None
        self._bookmarks = opts.allow_watch_bookmarks
        now = cache.now()
        self._deadline = now + opts.timeout_seconds if opts.timeout_seconds else None
        self._next_bookmark: float | None = None
        self.last_resource_version = 0

    # Awaiting a watcher starts it, so start errors surface before the first event.
    def __await__(self) -> Generator[Any, None, Watcher]:
        return self._await_started().__await__()

    async def _await_started(self) -> Watcher:
        await self.start()
        return self

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self

    async def __aenter__(self) -> Watcher:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop watching; idempotent."""
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._cache.remove_watcher(self.watcher_id)
        self._queue.clear()
        self._initial = None
        self._backlog = None
        self._wake()

    @property
    def started(self) -> bool:
        return self._started

    async def start(self) -> None:
        """Run the start matrix (docs/semantics.md §5.2) and register; idempotent."""
        if self._started:
            return
        if self._closed:
            raise WatchTerminatedError("the watcher was closed", self.last_resource_version)
        cache = self._cache
        opts = self.options
        cache.check_ready()
        store = cache.store
        sie = opts.send_initial_events
        rv = opts.parsed_resource_version
        watch_list = sie and opts.allow_watch_bookmarks
        if watch_list and store is not None and not store.consistent_reads_supported:
            raise InternalError.wrap(WATCH_LIST_UNSUPPORTED)
        start_at = 0
        if sie:
            if opts.resource_version == "":
                target = await store.current_resource_version() if store else cache.resource_version
                await cache.wait_for_rv(target)
            elif rv > 0:
                await cache.wait_for_rv(rv)
        elif sie is False and opts.resource_version == "" and store is not None:
            start_at = await store.current_resource_version()
        cache.check_ready()
        if self._closed:
            raise WatchTerminatedError("the watcher was closed", 0)
        # From here to registration nothing awaits: the state read and the registration
        # see the same cacheRV, so no event is missed or repeated.
        cache_rv = cache.resource_version
        if sie or (sie is None and rv == 0):
            cache_rv, self._initial = cache.snapshot()
            self._initial_rv = cache_rv
            self._end_bookmark = bool(sie) and opts.allow_watch_bookmarks
            self._floor = cache_rv
            self._sent_rv = cache_rv
        elif rv == 0:
            self._floor = max(start_at, cache_rv)
            self._sent_rv = self._floor
        else:
            backlog = cache.history.changes_after(rv)  # raises 410 when too old
            if backlog:
                self._backlog = iter(backlog)
            self._floor = max(rv, cache_rv)
            self._sent_rv = rv
        self.watcher_id = cache.add_watcher(self)
        self._started = True
        self._schedule_bookmark(cache.now())

    def check_invariants(self) -> None:
        """A registered watcher is started and open; its queue holds at most the cache's
        ``watch_buffer`` events, in rv order, all above the rv it started from. O(queue)."""
        queued = [conversions.event.resource_version for conversions, _ in self._queue]
        if not self._started or self._closed:
            raise AssertionError("Watcher invariant broken: a registered watcher is started")
        if len(queued) > self._limit:
            raise AssertionError("Watcher invariant broken: the queue fits the buffer")
        if queued != sorted(queued) or (queued and queued[0] <= self._floor):
            raise AssertionError(
                "Watcher invariant broken: queued events are in rv order, after the start"
            )

    def _schedule_bookmark(self, now: float) -> None:
        if not self._bookmarks:
            return
        due = now + self._cache.bookmark_interval
        if self._deadline is not None:
            due = min(due, self._deadline - BOOKMARK_BEFORE_DEADLINE_SECONDS)
        self._next_bookmark = due if due > now else None

    async def __anext__(self) -> WatchEvent:
        if not self._started:
            await self.start()
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self._initial is not None:
                event = self._next_initial()
                if event is not None:
                    return event
                continue
            if self._backlog is not None:
                for change, previous in self._backlog:
                    converted = self._convert(change, previous)
                    if converted is not None:
                        return self._sent(converted)
                self._backlog = None
            if self._queue:
                conversions, kind = self._queue.popleft()
                return self._sent(conversions.as_type(kind))
            if self._terminated is not None:
                self._closed = True
                raise WatchTerminatedError(self._terminated, self.last_resource_version)
            now = self._cache.now()
            if self._deadline is not None and now >= self._deadline:
                self.close()
                raise StopAsyncIteration
            if self._next_bookmark is not None and now >= self._next_bookmark:
                self._schedule_bookmark(now)
                cache_rv = self._cache.resource_version
                if cache_rv > self._sent_rv:
                    return self._sent(self._bookmark(cache_rv, initial_end=False))
                continue
            await self._idle(now)

    async def _idle(self, now: float) -> None:
        wake_at = self._deadline
        if self._next_bookmark is not None:
            wake_at = self._next_bookmark if wake_at is None else min(wake_at, self._next_bookmark)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._waiter = future
        handle = None
        if wake_at is not None:
            handle = loop.call_later(max(wake_at - now, 0.0), self._wake)
        try:
            await future
        finally:
            self._waiter = None
            if handle is not None:
                handle.cancel()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _sent(self, event: WatchEvent) -> WatchEvent:
        rv = event.resource_version
        self._sent_rv = max(self._sent_rv, rv)
        self.last_resource_version = max(self.last_resource_version, rv)
        return event

    def _bookmark(self, rv: int, *, initial_end: bool) -> WatchEvent:
        cache = self._cache
        body = bookmark_object(cache.kind, cache.api_version, rv, initial_end=initial_end)
        return WatchEvent(EventType.BOOKMARK, rv, body, None, initial_end)

    def _next_initial(self) -> WatchEvent | None:
        """The next ADDED of the initial state (read a chunk at a time, so a huge state
        costs no memory up front), or at its end the end bookmark / None."""
        chunk = self._initial_chunk
        if not chunk:
            snap = self._initial
            if self._initial_done or snap is None:
                return self._finish_initial()
            scan = snap.scan(
                self.key_prefix,
                start_after=self._initial_after,
                limit=_INITIAL_CHUNK,
                selector=self._selector,
            )
            chunk.extend(scan)
            if scan.next_key is None:
                self._initial_done = True
            else:
                self._initial_after = scan.last_key
            if not chunk:
                return self._finish_initial()
        item = chunk.popleft()
        self._cache.initial_event_sent()
        # Initial objects carry their own (unordered) rvs; the resume point is the state's rv.
        return WatchEvent.of_item(EventType.ADDED, item.mod_revision, item)

    def _finish_initial(self) -> WatchEvent | None:
        self._initial = None
        self.last_resource_version = max(self.last_resource_version, self._initial_rv)
        if self._end_bookmark:
            self._end_bookmark = False
            return self._bookmark(self._initial_rv, initial_end=True)
        return None

    def _convert(self, event: Event, previous: Item | None) -> WatchEvent | None:
        conversions = EventConversions(event, previous)
        kind = _seen_as(self, conversions)
        return None if kind is None else conversions.as_type(kind)

    def offer(self, event: Event, conversions: EventConversions) -> bool:
        """Queue the event if it concerns this watcher; False when the buffer is full."""
        if event.resource_version <= self._floor or self._closed:
            return True
        kind = _seen_as(self, conversions)
        if kind is None:
            return True
        if len(self._queue) >= self._limit:
            return False
        self._queue.append((conversions, kind))
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        return True

    def overflowed(self, rv: int, reason: str) -> None:
        """Terminate because the buffer filled at an event of ``rv``. This watcher's events
        of ``rv`` already queued are dropped with it: one etcd transaction can change several
        keys at one revision, and a client resumes from the last rv it received, so had it
        received part of ``rv`` it would resume after the rest and never see it. (The buffer
        of 2 full at the third key of one transaction: the client got two, resumed from
        their rv, and the third was lost.) None of them has been delivered yet: the writer
        applies one revision's events without yielding to the loop."""
        queue = self._queue
        while queue and queue[-1][0].event.resource_version == rv:
            queue.pop()
        self.terminate(reason)

    def terminate(self, reason: str) -> None:
        if self._closed or self._terminated is not None:
            return
        self._terminated = reason
        self._wake()


def _seen_as(watcher: Watcher, conv: EventConversions) -> EventType | None:
    """The type one event has for one watcher (docs/semantics.md §5.5), None when it does
    not concern it: by prefix, then selector on the new and the previous object."""
    if not conv.key.startswith(watcher.key_prefix):
        return None
    selector = watcher._selector
    if selector is None:
        return conv.event.type
    new, old = conv.new, conv.old
    new_passes = new is not None and selector.matches_item(new)
    old_passes = old is not None and selector.matches_item(old)
    if new_passes:
        return _MODIFIED if old_passes else _ADDED
    if old_passes:
        return _DELETED
    return None
