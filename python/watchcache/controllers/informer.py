"""Following a watch cache forever: what a controller sees of a resource, and the work
queue it turns changes into.

Design note
-----------
:class:`Follower` is an informer: it lists a
:class:`~watchcache.cache.watch_cache.WatchCache` (``resourceVersion=0``: the cache's
current state, no wait) and delivers every object as ADDED, then watches from the list's
resourceVersion and delivers every change; whenever the watch ends (the cache relisted,
the watcher fell behind, the cache was not ready) it starts over the same way. Handlers are
therefore level-based: they must accept seeing an object again. An object deleted while the
watch was down is delivered as DELETED, with no object (``b""``), when the next list no
longer has it.

Events carry the object's JSON; :attr:`ObjectEvent.object` decodes it on first use, so a
handler that needs only a few objects (the garbage collector looks at those with owners or
being deleted) does not decode the others.

:class:`WorkQueue` is client-go's rate-limited queue in small: a key queued twice before a
worker takes it is processed once; a failed key comes back after a delay that doubles per
failure (5 ms up to 30 s); a key is never processed by two workers at once.

Everything runs on the event loop that owns the caches; nothing here is thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Final, Generic, TypeVar

from watchcache.cache.event import EventType
from watchcache.cache.watch_cache import WatchCache
from watchcache.wire.errors import StatusError, WatchTerminatedError
from watchcache.wire.options import ListOptions, WatchOptions

log = logging.getLogger(__name__)

#: A replay reads this many objects at a time.
_PAGE: Final = 500
#: How long to wait before watching again after a watch could not start.
RETRY_SECONDS: Final = 0.5
#: client-go's default controller rate limiter: 5 ms doubling to 1000 s; capped lower here
#: because a server's own controllers retry against the same process.
BASE_DELAY_SECONDS: Final = 0.005
MAX_DELAY_SECONDS: Final = 30.0

K = TypeVar("K", bound=Hashable)


class ObjectEvent:
    """One change as a controller sees it: the event type, the object's key and JSON (for
    DELETED, its last state, or ``b""`` when a relist found it gone)."""

    __slots__ = ("_object", "key", "type", "value")

    def __init__(self, kind: EventType, key: str, value: bytes) -> None:
        self.type = kind
        self.key = key
        self.value = value
        self._object: dict[str, Any] | None = None

    @property
    def object(self) -> dict[str, Any]:
        """The decoded object ({} when the JSON is not an object)."""
        if self._object is None:
            decoded: Any = {}
            with contextlib.suppress(ValueError):
                decoded = json.loads(self.value)
            self._object = decoded if isinstance(decoded, dict) else {}
        return self._object


Handler = Callable[[ObjectEvent], None]


class Follower:
    """Keeps ``handler`` informed of every object under a cache, across watch restarts.

    ``synced`` is set once the first full state has been delivered (controllers that must
    not act on a partial view, like the garbage collector, wait for it). With
    ``replay=False`` only changes are delivered, from whatever state the cache is in when
    the watch starts (for controllers that are only woken by changes): no list, no keys
    kept.
    """

    def __init__(self, cache: WatchCache, handler: Handler, *, replay: bool = True) -> None:
        self.cache = cache
        self.handler = handler
        self.replay = replay
        self.synced = asyncio.Event()
        self._known: set[str] = set()

    async def run(self) -> None:
        """Watch until cancelled."""
        while True:
            try:
                await self._watch_once()
            except (StatusError, WatchTerminatedError) as error:
                log.debug("watch of %s ended: %s", self.cache.prefix, error)
            await asyncio.sleep(RETRY_SECONDS)

    async def _watch_once(self) -> None:
        if self.replay:
            start = await self._replay()
        else:
            start, _ = self.cache.snapshot()
            self.synced.set()
        async with self.cache.watch(WatchOptions(resource_version=str(start))) as watcher:
            async for event in watcher:
                changed = event.item
                if changed is None:
                    continue
                if self.replay:
                    if event.type is EventType.DELETED:
                        self._known.discard(changed.key)
                    else:
                        self._known.add(changed.key)
                self._deliver(event.type, changed.key, event.object)

    async def _replay(self) -> int:
        """Deliver the cache's current state as ADDED (and what a relist found gone as
        DELETED); the resourceVersion to watch from. Read a page at a time from one
        snapshot, yielding to the event loop between pages, so that following a large
        cache never holds the loop (or a copy of every object) at once."""
        present: set[str] = set()
        opts = ListOptions(resource_version="0", limit=_PAGE)
        page = await self.cache.list(opts)
        start = page.resource_version
        while True:
            for item in page.items:
                present.add(item.key)
                self._deliver(EventType.ADDED, item.key, item.value)
            if not page.continue_token:
                break
            await asyncio.sleep(0)
            page = await self.cache.list(
                ListOptions(limit=_PAGE, continue_token=page.continue_token)
            )
        for key in self._known - present:
            self._deliver(EventType.DELETED, key, b"")
        self._known = present
        self.synced.set()
        return start

    def _deliver(self, kind: EventType, key: str, value: bytes) -> None:
        try:
            self.handler(ObjectEvent(kind, key, value))
        except Exception:  # a handler's bug must not stop the watch
            log.exception("handler failed for %s %s", kind, key)


class FollowerSet:
    """The followers a controller runs, one per resource, started and stopped while it
    runs as resources come and go (CRDs, an embedder's kinds)."""

    def __init__(self) -> None:
        self._running: dict[str, tuple[Follower, asyncio.Task[None]]] = {}

    def start(self, name: str, follower: Follower) -> None:
        """Follow under ``name`` (a resource's group_resource); replaces one running."""
        self.stop(name)
        task = asyncio.create_task(follower.run(), name=f"follow {name}")
        self._running[name] = (follower, task)

    def stop(self, name: str) -> None:
        running = self._running.pop(name, None)
        if running is not None:
            running[1].cancel()

    def followers(self) -> list[Follower]:
        return [follower for follower, _ in self._running.values()]

    async def close(self) -> None:
        tasks = [task for _, task in self._running.values()]
        self._running.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


class WorkQueue(Generic[K]):
    """Deduplicating work queue with per-key exponential retry (module note)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._again: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, asyncio.TimerHandle] = {}

    def add(self, key: K) -> None:
        """Process ``key`` (once, however often it is added before a worker takes it)."""
        if key in self._active:
            self._again.add(key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: K, seconds: float) -> None:
        if key in self._timers:
            return
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(seconds, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def __len__(self) -> int:
        return len(self._queued) + len(self._active)

    async def run(self, process: Callable[[K], Awaitable[bool | None]], workers: int = 1) -> None:
        """Run ``workers`` loops calling ``process(key)`` until cancelled. A key whose
        processing raises, or returns False (not done yet), is retried with backoff."""
        async with asyncio.TaskGroup() as group:
            for index in range(workers):
                group.create_task(self._work(process), name=f"{self.name} worker {index}")

    async def _work(self, process: Callable[[K], Awaitable[bool | None]]) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            self._active.add(key)
            done = False
            try:
                done = await process(key) is not False
            except asyncio.CancelledError:
                raise
            except Exception as error:
                level = logging.DEBUG if isinstance(error, StatusError) else logging.WARNING
                log.log(level, "%s: %r failed: %s", self.name, key, error, exc_info=True)
            finally:
                self._active.discard(key)
            if done:
                self._failures.pop(key, None)
            else:
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
                delay = min(BASE_DELAY_SECONDS * 2 ** min(failures, 30), MAX_DELAY_SECONDS)
                self.add_after(key, delay)
            if key in self._again:
                self._again.discard(key)
                self.add(key)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
