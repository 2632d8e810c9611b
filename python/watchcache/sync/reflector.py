"""List-then-watch from etcd into a WatchCache.

The reflector is the cache's only writer. It lists the prefix at one revision (pages of
10,000 keys pinned to the first page's revision: docs/etcd.md shows small pages are quadratic in
etcd), replaces the cache with the result, then watches from that revision + 1 and applies
every event. Each value is decoded once, into an Item with ``metadata.resourceVersion`` set
to its mod revision and its labels and selector fields extracted.

Relists: a compacted watch revision, an event the cache refuses (a missed or repeated
change: the cache is wrong, so start over), or a failed list. The cache is marked not ready
while it relists (reads get 429 or go to etcd, as the planner says) and ``replace`` ends
every watcher, whose clients then re-watch and get 410 for rvs older than the new list.

Objects that are not valid Kubernetes JSON are left out of the cache and counted (a write
through another tool can put anything into etcd); if such a key later holds a valid object
it enters the cache as ADDED, and if a cached object becomes undecodable watchers see it
DELETED. Relisting would not help: the next list reads the same bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import random
import time
from dataclasses import dataclass

from watchcache._core import Item
from watchcache.cache.event import Event, EventType
from watchcache.cache.objects import ObjectCodec, ObjectDecodeError
from watchcache.cache.watch_cache import EventOrderError, WatchCache
from watchcache.etcd.client import EtcdClient, EtcdError, prefix_range_end
from watchcache.etcd.proto import kv_pb2
from watchcache.etcd.watch import EtcdWatch
from watchcache.wire.errors import CompactedError

log = logging.getLogger(__name__)

#: Keys per Range of the initial list (Kubernetes' ``maxLimit``).
LIST_PAGE_SIZE = 10_000

_PUT = kv_pb2.Event.PUT
#: A list this big leaves ~20% of the cache's size in freed pages (protobuf pages, parsed
#: JSON) that glibc keeps unless asked to give them back.
TRIM_AFTER_LIST_ITEMS = 10_000


@dataclass(slots=True)
class ReflectorStats:
    lists: int = 0
    list_errors: int = 0
    relists_after_compaction: int = 0
    relists_after_order_errors: int = 0
    relists_requested: int = 0
    events: int = 0
    progress_notifications: int = 0
    decode_errors: int = 0
    last_list_seconds: float = 0.0
    last_list_items: int = 0


class Reflector:
    """Keeps ``cache`` in sync with the keys under ``cache.prefix`` in etcd.

    ``run()`` is the task; ``synced`` is set once the first list is in the cache;
    ``request_progress()`` asks etcd for a progress notification on the current watch.
    """

    def __init__(
        self,
        client: EtcdClient,
        cache: WatchCache,
        *,
        codec: ObjectCodec | None = None,
        page_size: int = LIST_PAGE_SIZE,
        max_backoff: float = 5.0,
    ) -> None:
        self.client = client
        self.cache = cache
        self.codec = codec or ObjectCodec()
        self.page_size = page_size
        self.max_backoff = max_backoff
        self.prefix = cache.prefix.encode()
        self.stats = ReflectorStats()
        self.synced = asyncio.Event()
        self.watch: EtcdWatch | None = None
        self._undecodable: set[str] = set()
        self._stopping = False

    # -- control ----------------------------------------------------------------------------

    def request_progress(self) -> bool:
        watch = self.watch
        return watch is not None and watch.request_progress()

    async def stop(self) -> None:
        self._stopping = True
        watch = self.watch
        if watch is not None:
            await watch.close()

    async def relist(self, reason: str) -> None:
        """End the current watch so that the run loop lists the prefix again (the cache is
        replaced: its watchers end and re-watch). Returns at once; ``stats.lists`` grows
        when the new list is in the cache."""
        log.warning("watch cache %s: relisting: %s", self.cache.prefix, reason)
        self.stats.relists_requested += 1
        watch = self.watch
        if watch is not None:
            await watch.close()

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self.synced.wait(), timeout)

    # -- the loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        backoff = 0.1
        while not self._stopping:
            try:
                revision = await self.list_into_cache()
                backoff = 0.1
                await self.watch_from(revision + 1)
            except CompactedError as error:
                self.stats.relists_after_compaction += 1
                self._not_ready(f"watch revision compacted ({error.compact_revision}); relisting")
            except EventOrderError as error:
                self.stats.relists_after_order_errors += 1
                log.error("cache %s refused an event, relisting: %s", self.cache.prefix, error)
                self._not_ready(str(error))
            except (EtcdError, OSError) as error:
                self.stats.list_errors += 1
                self._not_ready(f"listing {self.cache.prefix} failed: {error}")
                await asyncio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, self.max_backoff)
            finally:
                watch, self.watch = self.watch, None
                if watch is not None:
                    await watch.close()

    def _not_ready(self, reason: str) -> None:
        log.warning("watch cache %s: %s", self.cache.prefix, reason)
        if not self._stopping:
            self.cache.mark_not_ready(reason)

    async def list_into_cache(self) -> int:
        """List the prefix at one revision into the cache; returns that revision."""
        started = time.perf_counter()
        end = prefix_range_end(self.prefix)
        start = self.prefix
        revision = 0
        items: list[Item] = []
        undecodable: set[str] = set()
        while True:
            response = await self.client.range(start, end, revision=revision, limit=self.page_size)
            if revision == 0:
                revision = int(response.header.revision)
            for kv in response.kvs:
                try:
                    key = _key(kv.key)
                    items.append(self.codec.decode(key, kv.value, int(kv.mod_revision)))
                except ObjectDecodeError as error:
                    self._decode_failed(error)
                    undecodable.add(error.key)
            if not response.more or not response.kvs:
                break
            start = response.kvs[-1].key + b"\0"
        self.cache.replace(items, revision)
        count = len(items)
        del items
        if count >= TRIM_AFTER_LIST_ITEMS:
            release_free_heap()
        self._undecodable = undecodable
        self.stats.lists += 1
        self.stats.last_list_items = count
        self.stats.last_list_seconds = time.perf_counter() - started
        self.synced.set()
        return revision

    async def watch_from(self, revision: int) -> None:
        """Apply events from ``revision`` on until the watch ends (only by ``stop()``
        or an error: CompactedError, EventOrderError)."""
        watch = EtcdWatch(self.client, self.prefix, start_revision=revision)
        self.watch = watch
        cache = self.cache
        stats = self.stats
        async for batch in watch:
            if batch.progress:
                stats.progress_notifications += 1
                cache.advance(batch.revision)
                continue
            for event in batch.events:
                change = self._event(event)
                if change is not None:
                    cache.apply(change)
            stats.events += len(batch.events)

    # -- one etcd event -> one cache event ----------------------------------------------------

    def _event(self, event: kv_pb2.Event) -> Event | None:
        kv = event.kv
        revision = int(kv.mod_revision)
        try:
            key = _key(kv.key)
        except ObjectDecodeError as error:
            # Not a key Kubernetes could have written; it never enters the cache.
            self._decode_failed(error)
            return None
        if event.type == _PUT:
            try:
                item = self.codec.decode(key, kv.value, revision)
            except ObjectDecodeError as error:
                self._decode_failed(error)
                return self._forget(key, revision)
            if key in self._undecodable:
                self._undecodable.discard(key)
                return Event(EventType.ADDED, item, None, revision)
            kind = EventType.ADDED if kv.create_revision == kv.mod_revision else EventType.MODIFIED
            return Event(kind, item, None, revision)
        if key in self._undecodable:
            self._undecodable.discard(key)
            return None
        return self._deleted(key, event, revision)

    def _deleted(self, key: str, event: kv_pb2.Event, revision: int) -> Event:
        # The deleted object is its last state stamped with the delete's revision. etcd sends
        # it as prev_kv; without it (its revision compacted) the cache still has it.
        previous: Item | None = None
        if event.HasField("prev_kv"):
            with contextlib.suppress(ObjectDecodeError):
                previous = self.codec.decode(key, event.prev_kv.value, revision)
        if previous is None:
            cached = self.cache.snapshot()[1].get_item(key)
            if cached is None:
                raise EventOrderError(
                    f"DELETED {key!r} at resourceVersion {revision}: not in the cache",
                    self.cache.resource_version,
                )
            previous = self.codec.restamp(cached, revision)
        return Event(EventType.DELETED, previous, None, revision)

    def _forget(self, key: str, revision: int) -> Event | None:
        """A key whose new value cannot be decoded: it leaves the cache."""
        self._undecodable.add(key)
        cached = self.cache.snapshot()[1].get_item(key)
        if cached is None:
            return None
        return Event(EventType.DELETED, self.codec.restamp(cached, revision), None, revision)

    def _decode_failed(self, error: ObjectDecodeError) -> None:
        self.stats.decode_errors += 1
        log.warning("watch cache %s: %s", self.cache.prefix, error)


def _key(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise ObjectDecodeError(raw.decode(errors="replace"), "the key is not UTF-8") from None


def release_free_heap() -> None:
    """Return freed heap pages to the OS (glibc's ``malloc_trim``; a no-op elsewhere)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)
