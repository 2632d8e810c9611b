"""One conformance suite, several backends: the LIST/WATCH rows of tests/conformance run
against each of them, as Kubernetes' ``apiserver/pkg/storage/testing/store_tests.go`` runs
one suite against its etcd3 store and against the cacher.

Backends (``open_backend(name, ...)``):

* ``cache``: a :class:`WatchCache` alone, its own source of truth (no store). A write is
  an event applied by hand at the next revision; revisions start at a random base (from the
  test's seed), so a test can only pass by asserting relative to the rvs writes returned.
* ``synced``: a :class:`SyncedCache` over a real etcd. A write is a compare-and-swap
  create, update or delete of the pod's JSON as the apiserver stores it (no
  resourceVersion: etcd's revision is the version); the revision etcd answers is the rv,
  and the write returns once the cache has applied it.
* ``store``: an :class:`EtcdReader` over a real etcd, no cache: LISTs as Kubernetes' etcd3
  store serves them (the revision chosen by the planner's ``store_revision``, the continue
  token decoded against the request's prefix), as the apiserver serves a resource that is
  not cached. The watch rows do not run on it (etcd's watch differs from the cache's:
  tests/integration/test_etcd_reader.py).

Every backend of a test works under its own key prefix (``/registry/conformance/<id>/pods/``),
so the tests of a module can share one etcd. The API, the same for all:

* ``start(**cache_options)``: writes made before it are the initial state (the cache's
  first list); ``cache_options`` go to the WatchCache (ignored by ``store``);
  ``start(ready=False)`` leaves the cache unlisted (not ready);
* ``create``/``update``/``relabel``/``delete``/``create_many`` return the write's rv;
  ``advance()`` moves the revision outside the prefix and lets the cache hear of it (a
  progress notification); ``compact()`` makes every earlier revision unreadable from the
  source of truth (etcd's compaction; the cache alone has no record beyond its history);
* ``list(within, **query)`` / ``watch(within, **query)``: ``within`` is a path below the
  prefix (a namespace, ``"a"`` or ``"a/"``), the query is the request's parameters;
* ``revision``: the newest revision the test made (a write, ``advance``, ``compact``) or the
  one the backend started at; ``list_rv``: the revision of the cache's first list;
* ``relist()`` (cache, synced): the cache lists again; for ``synced`` also
  ``write_elsewhere()`` (etcd's revision moves, the cache hears nothing) and
  ``stop_following()`` (the reflector stops: the cache can no longer catch up).

Every write, LIST and watch step ends with ``check()``: the WatchCache's
``check_invariants()`` (for ``synced``: ``synced.cache``); ``store`` has no cache.
"""

from __future__ import annotations

import abc
import asyncio
import builtins
import contextlib
import random
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from kubeobjects import pod_value

from watchcache._core import Item
from watchcache.cache.backing_store import ListResult, Source
from watchcache.cache.event import Event, EventType
from watchcache.cache.objects import ObjectCodec
from watchcache.cache.watch_cache import WatchCache
from watchcache.cache.watcher import Watcher, WatchEvent
from watchcache.etcd.client import MAX_TXN_OPS, EtcdClient
from watchcache.etcd.proto import rpc_pb2
from watchcache.etcd.reader import EtcdReader
from watchcache.sync.synced import SyncedCache
from watchcache.wire.options import ListOptions, WatchOptions

#: The backends, in the order tests run on them.
BACKENDS: Final = ("cache", "synced", "store")
#: The fields selectors can use, for every backend (the reflector's and the store's codec).
POD_FIELDS: Final = ObjectCodec(("metadata.name", "metadata.namespace", "spec.nodeName"))
#: Upper bound for one await on etcd or the cache: a hang fails the test, it does not stall.
STEP_SECONDS: Final = 10.0
#: A key outside every test's prefix: writes to it move etcd's revision and nothing else.
ELSEWHERE_PREFIX: Final = "/registry/conformance-elsewhere/"

Labels = Mapping[str, str] | None


class Backend(abc.ABC):
    """What a conformance row sees of a backend (see the module note)."""

    name: str
    #: A real etcd is the source of truth (a cache then delegates instead of answering 410).
    has_store: bool

    def __init__(self, prefix: str, base_revision: int) -> None:
        self.prefix = prefix
        self.revision = base_revision
        self.list_rv = 0
        self.started = False
        self._watches: list[BackendWatch] = []

    # -- the cache under test ---------------------------------------------------------------

    @property
    def cache(self) -> WatchCache:
        """The WatchCache under test (``synced``: ``synced.cache``). Not for ``store``."""
        raise TypeError(f"the {self.name} backend has no WatchCache")

    @abc.abstractmethod
    def check(self) -> None:
        """The WatchCache's invariants (nothing to check for ``store``)."""

    def served(self, source: Source) -> Source:
        """The source this backend reports for a page a cache serves from ``source``
        (``store`` answers everything itself)."""
        return source

    # -- lifecycle --------------------------------------------------------------------------

    @abc.abstractmethod
    async def start(self, *, ready: bool = True, **cache_options: Any) -> None:
        """Build the backend over the writes made so far (see the module note)."""

    async def close(self) -> None:
        """End every watch this backend started (without checks: the test is over)."""
        for watch in self._watches:
            await watch.watcher.aclose()

    async def relist(self) -> None:
        """The cache lists again, at the current revision (every watcher ends)."""
        raise TypeError(f"the {self.name} backend has no cache to relist")

    # -- writes -----------------------------------------------------------------------------

    def key(self, name: str, namespace: str = "a") -> str:
        return f"{self.prefix}{namespace}/{name}"

    async def create(
        self, name: str, namespace: str = "a", *, labels: Labels = None, node: str = ""
    ) -> int:
        """A new pod; its rv."""
        value = pod_value(namespace, name, labels=labels, node=node)
        return await self._written(await self._put(self.key(name, namespace), value, create=True))

    async def update(
        self, name: str, namespace: str = "a", *, labels: Labels = None, node: str = ""
    ) -> int:
        """Replace an existing pod (labels and node as given); its rv."""
        value = pod_value(namespace, name, labels=labels, node=node)
        return await self._written(await self._put(self.key(name, namespace), value, create=False))

    async def relabel(self, name: str, labels: Labels, namespace: str = "a") -> int:
        return await self.update(name, namespace, labels=labels)

    async def delete(self, name: str, namespace: str = "a") -> int:
        return await self._written(await self._delete(self.key(name, namespace)))

    async def create_many(
        self, names: Sequence[str], namespace: str = "a", *, labels: Labels = None
    ) -> int:
        """New pods, in transactions of up to 128 keys (several keys at one revision);
        the rv of the last transaction."""
        revision = self.revision
        for lo in range(0, len(names), MAX_TXN_OPS):
            batch = [
                (self.key(name, namespace), pod_value(namespace, name, labels=labels))
                for name in names[lo : lo + MAX_TXN_OPS]
            ]
            revision = await self._written(await self._create_batch(batch))
        return revision

    @abc.abstractmethod
    async def advance(self) -> int:
        """Move the revision without touching the prefix; the cache hears of it."""

    @abc.abstractmethod
    async def compact(self) -> int:
        """Make every revision before now unreadable from the source of truth; the rv."""

    async def _written(self, revision: int) -> int:
        self.revision = revision
        await self._caught_up(revision)
        self.check()
        return revision

    @abc.abstractmethod
    async def _caught_up(self, revision: int) -> None:
        """Return once the cache has applied ``revision`` (when it follows the writes)."""

    @abc.abstractmethod
    async def _put(self, key: str, value: bytes, *, create: bool) -> int: ...

    @abc.abstractmethod
    async def _delete(self, key: str) -> int: ...

    @abc.abstractmethod
    async def _create_batch(self, batch: Sequence[tuple[str, bytes]]) -> int: ...

    # -- reads ------------------------------------------------------------------------------

    def request_prefix(self, within: str | None) -> str | None:
        return None if within is None else self.prefix + within

    async def list(self, within: str | None = None, **query: str) -> ListResult:
        """A LIST with the request's query parameters, below ``within`` (whole prefix)."""
        try:
            opts = ListOptions.from_query(query)
            return await asyncio.wait_for(self._list(opts, within), STEP_SECONDS)
        finally:
            self.check()

    @abc.abstractmethod
    async def _list(self, opts: ListOptions, within: str | None) -> ListResult: ...

    async def watch(self, within: str | None = None, **query: str) -> BackendWatch:
        """A started watch (start errors raise here)."""
        try:
            opts = WatchOptions.from_query(query)
            watcher = self.cache.watch(opts, prefix=self.request_prefix(within))
            await asyncio.wait_for(watcher.start(), STEP_SECONDS)
        finally:
            self.check()
        watch = BackendWatch(watcher, self.check)
        self._watches.append(watch)
        return watch

    def render(self, result: ListResult) -> bytes:
        return result.render("PodList", "v1")

    def names(self, items: Iterable[Item]) -> builtins.list[str]:
        """``namespace/name`` of each item (the key below the prefix)."""
        return [item.key[len(self.prefix) :] for item in items]


class BackendWatch:
    """A started watcher whose every step ends with the backend's invariant check."""

    def __init__(self, watcher: Watcher, check: Callable[[], None]) -> None:
        self.watcher = watcher
        self._check = check

    async def next(self, timeout: float = STEP_SECONDS) -> WatchEvent:
        """The next event; StopAsyncIteration at the end, TimeoutError if none comes."""
        try:
            async with asyncio.timeout(timeout):
                return await anext(self.watcher)
        finally:
            self._check()

    async def take(self, n: int, timeout: float = 2.0) -> list[WatchEvent]:
        out: list[WatchEvent] = []
        try:
            async with asyncio.timeout(timeout):
                while len(out) < n:
                    out.append(await anext(self.watcher))
        finally:
            self._check()
        return out

    async def nothing_more(self, within: float = 0.05) -> bool:
        """True when no event comes ``within`` seconds."""
        try:
            await self.next(within)
        except TimeoutError:
            return True
        return False

    async def aclose(self) -> None:
        await self.watcher.aclose()
        self._check()

    async def __aenter__(self) -> BackendWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# ---------------------------------------------------------------------------------------------
# cache: a WatchCache alone


class CacheBackend(Backend):
    name = "cache"
    has_store = False

    def __init__(self, prefix: str, base_revision: int) -> None:
        super().__init__(prefix, base_revision)
        self._cache: WatchCache | None = None
        self._items: dict[str, Item] = {}

    @property
    def cache(self) -> WatchCache:
        assert self._cache is not None, "start() the backend first"
        return self._cache

    def check(self) -> None:
        if self._cache is not None:
            self._cache.check_invariants()

    async def start(self, *, ready: bool = True, **cache_options: Any) -> None:
        self._cache = WatchCache(self.prefix, resource="pods", kind="Pod", **cache_options)
        self.started = True
        if ready:
            self._cache.replace(list(self._items.values()), self.revision)
            self.list_rv = self.revision
        self.check()

    async def relist(self) -> None:
        """The cache lists again, at the current revision."""
        self.cache.replace(list(self._items.values()), self.revision)
        self.list_rv = self.revision
        self.check()

    async def _caught_up(self, revision: int) -> None:
        """Events are applied as they are written."""

    def _apply(self, event: Event) -> None:
        if self._cache is not None and self._cache.ready:
            self._cache.apply(event)

    async def _put(self, key: str, value: bytes, *, create: bool) -> int:
        previous = self._items.get(key)
        assert (previous is None) is create, f"{key} {'exists' if create else 'does not exist'}"
        revision = self.revision + 1
        item = POD_FIELDS.decode(key, value, revision)
        kind = EventType.ADDED if create else EventType.MODIFIED
        self._apply(Event(kind, item, previous, revision))
        self._items[key] = item
        return revision

    async def _delete(self, key: str) -> int:
        previous = self._items.pop(key)
        revision = self.revision + 1
        gone = POD_FIELDS.restamp(previous, revision)
        self._apply(Event(EventType.DELETED, gone, previous, revision))
        return revision

    async def _create_batch(self, batch: Sequence[tuple[str, bytes]]) -> int:
        revision = self.revision + 1
        for key, value in batch:
            assert key not in self._items, f"{key} exists"
            item = POD_FIELDS.decode(key, value, revision)
            self._apply(Event(EventType.ADDED, item, None, revision))
            self._items[key] = item
        return revision

    async def advance(self) -> int:
        self.revision += 1
        if self._cache is not None:
            self._cache.advance(self.revision)
        self.check()
        return self.revision

    async def compact(self) -> int:
        # The cache is its own source of truth: what its history evicted is gone already.
        return self.revision

    async def _list(self, opts: ListOptions, within: str | None) -> ListResult:
        return await self.cache.list(opts, prefix=self.request_prefix(within))


# ---------------------------------------------------------------------------------------------
# synced and store: a real etcd


class EtcdBackend(Backend):
    has_store = True

    def __init__(self, prefix: str, base_revision: int, client: EtcdClient) -> None:
        super().__init__(prefix, base_revision)
        self.client = client
        self._elsewhere = f"{ELSEWHERE_PREFIX}{prefix.strip('/').replace('/', '-')}".encode()
        self._mod_revisions: dict[str, int] = {}

    async def _put(self, key: str, value: bytes, *, create: bool) -> int:
        raw = key.encode()
        if create:
            result = await asyncio.wait_for(self.client.create(raw, value), STEP_SECONDS)
        else:
            current = self._mod_revisions[key]
            result = await asyncio.wait_for(self.client.update(raw, value, current), STEP_SECONDS)
        assert result.succeeded, f"the {'create' if create else 'update'} of {key} failed"
        self._mod_revisions[key] = result.revision
        return result.revision

    async def _delete(self, key: str) -> int:
        current = self._mod_revisions.pop(key)
        result = await asyncio.wait_for(self.client.delete(key.encode(), current), STEP_SECONDS)
        assert result.succeeded, f"the delete of {key} failed"
        return result.revision

    async def _create_batch(self, batch: Sequence[tuple[str, bytes]]) -> int:
        compares = [
            rpc_pb2.Compare(
                key=key.encode(),
                target=rpc_pb2.Compare.CREATE,
                result=rpc_pb2.Compare.EQUAL,
                create_revision=0,
            )
            for key, _ in batch
        ]
        puts = [
            rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key.encode(), value=value))
            for key, value in batch
        ]
        request = rpc_pb2.TxnRequest(compare=compares, success=puts)
        response = await asyncio.wait_for(self.client.txn(request), STEP_SECONDS)
        assert response.succeeded, "a key of the batch exists"
        revision = int(response.header.revision)
        for key, _ in batch:
            self._mod_revisions[key] = revision
        return revision

    async def write_elsewhere(self) -> int:
        """A write outside the prefix: etcd's revision moves, the cache hears nothing."""
        self.revision = await asyncio.wait_for(
            self.client.put(self._elsewhere, b"{}"), STEP_SECONDS
        )
        return self.revision

    async def compact(self) -> int:
        revision = await self.write_elsewhere()
        await asyncio.wait_for(self.client.compact(revision), STEP_SECONDS)
        return revision

    async def current_revision(self) -> int:
        return await asyncio.wait_for(
            self.client.current_revision(self.prefix[:-1].encode()), STEP_SECONDS
        )


class SyncedBackend(EtcdBackend):
    name = "synced"

    def __init__(self, prefix: str, base_revision: int, client: EtcdClient) -> None:
        super().__init__(prefix, base_revision, client)
        self._synced: SyncedCache | None = None
        #: The reflector applies etcd's changes (started and not stopped).
        self.following = False

    @property
    def synced(self) -> SyncedCache:
        assert self._synced is not None, "start() the backend first"
        return self._synced

    @property
    def cache(self) -> WatchCache:
        return self.synced.cache

    def check(self) -> None:
        if self._synced is not None:
            self._synced.cache.check_invariants()

    async def start(self, *, ready: bool = True, **cache_options: Any) -> None:
        self._synced = SyncedCache(
            self.client, self.prefix, resource="pods", kind="Pod", codec=POD_FIELDS, **cache_options
        )
        self.started = True
        if ready:
            await self._synced.start(timeout=STEP_SECONDS)
            self.following = True
            self.list_rv = self._synced.cache.resource_version
            self.revision = max(self.revision, self.list_rv)
        self.check()

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            if self._synced is not None:
                await asyncio.wait_for(self._synced.stop(), STEP_SECONDS)

    async def stop_following(self) -> None:
        """Stop the reflector: the cache keeps its state and can no longer catch up."""
        reflector = self.synced.reflector
        await self._quiet_watch()
        await asyncio.wait_for(reflector.stop(), STEP_SECONDS)
        await self._until(lambda: reflector.watch is None, "the reflector stopped")
        self.following = False

    async def relist(self) -> None:
        """End the reflector's watch: it lists again, at etcd's current revision."""
        before = self.cache.stats.initializations
        await self._quiet_watch()
        watch = self.synced.reflector.watch
        assert watch is not None
        await watch.close()
        await self._until(lambda: self.cache.stats.initializations > before, "a relist")
        self.list_rv = self.cache.resource_version
        self.check()

    async def _quiet_watch(self) -> None:
        """Return once the reflector's etcd watch is established and no write on its stream
        is in flight: the revision moves outside the prefix and the cache hears of it (a
        progress notification: the watch answered). Closing an EtcdWatch while a write is
        in flight (the create request right after the watch opens, or a progress request)
        leaves its iteration hanging, since grpc.aio's ``write`` never returns once the
        call is cancelled: the reflector would neither stop nor relist."""
        await self.advance()
        await asyncio.sleep(0.05)  # the last progress request's write has long completed

    async def _caught_up(self, revision: int) -> None:
        if self.following:
            await self._until(lambda: self.cache.resource_version >= revision, f"rv {revision}")

    async def advance(self) -> int:
        revision = await self.write_elsewhere()
        if self.following:
            # Only a progress notification tells the cache (no event of its prefix follows).
            await self._until(
                lambda: self.cache.resource_version >= revision,
                f"progress to rv {revision}",
                progress=True,
            )
        self.check()
        return revision

    async def _until(self, done: Callable[[], bool], what: str, *, progress: bool = False) -> None:
        """Poll (without waiting as a read would: no read-wait sample, no progress
        requester) until ``done()``; with ``progress``, ask etcd for progress meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STEP_SECONDS
        next_request = loop.time()
        while not done():
            if loop.time() > deadline:
                raise AssertionError(f"the synced cache did not reach {what} in time")
            if progress and loop.time() >= next_request:
                self.synced.reflector.request_progress()
                next_request = loop.time() + 0.02
            await asyncio.sleep(0.001)

    async def _list(self, opts: ListOptions, within: str | None) -> ListResult:
        return await self.cache.list(opts, prefix=self.request_prefix(within))


class StoreBackend(EtcdBackend):
    name = "store"

    def __init__(self, prefix: str, base_revision: int, client: EtcdClient) -> None:
        super().__init__(prefix, base_revision, client)
        self.reader = EtcdReader(client, prefix, resource="pods", kind="Pod", codec=POD_FIELDS)
        self.store = self.reader.store

    def served(self, source: Source) -> Source:
        return Source.STORE

    def check(self) -> None:
        """No cache, no invariants."""

    async def _caught_up(self, revision: int) -> None:
        """No cache to wait for."""

    async def start(self, *, ready: bool = True, **cache_options: Any) -> None:
        # No cache: nothing to list, no options to take.
        self.started = True
        self.list_rv = self.revision

    async def advance(self) -> int:
        return await self.write_elsewhere()

    async def _list(self, opts: ListOptions, within: str | None) -> ListResult:
        """As the apiserver serves a resource that is not cached: EtcdReader.list, kube's
        etcd3 ``GetList`` (docs/semantics.md §6)."""
        return await self.reader.list(opts, prefix=self.request_prefix(within))


@contextlib.asynccontextmanager
async def open_backend(
    name: str, rng: random.Random, endpoints: Sequence[str] | None
) -> AsyncIterator[Backend]:
    """The backend ``name`` under a fresh prefix (not started); closed on the way out,
    failed test or not. ``endpoints``: the etcd of ``synced`` and ``store``."""
    prefix = f"/registry/conformance/{rng.randrange(16**8):08x}/pods/"
    if name == "cache":
        backend: Backend = CacheBackend(prefix, rng.randrange(10, 100_000))
        try:
            yield backend
        finally:
            await backend.close()
        return
    assert endpoints, f"the {name} backend needs etcd"
    async with EtcdClient(endpoints, timeout=STEP_SECONDS) as client:
        revision = await asyncio.wait_for(
            client.current_revision(prefix[:-1].encode()), STEP_SECONDS
        )
        if name == "synced":
            backend = SyncedBackend(prefix, revision, client)
        elif name == "store":
            backend = StoreBackend(prefix, revision, client)
        else:
            raise ValueError(f"no backend named {name!r}; the backends are {BACKENDS}")
        try:
            yield backend
        finally:
            await backend.close()
