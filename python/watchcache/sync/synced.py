"""A WatchCache kept in sync with etcd: the pieces of docs/architecture.md's data flow, wired.

:class:`SyncedCache` owns, for one key prefix, the
:class:`~watchcache.cache.watch_cache.WatchCache`, the
:class:`~watchcache.etcd.store.EtcdStore` the planner delegates to, the
:class:`~watchcache.sync.reflector.Reflector` that fills the cache, the
:class:`~watchcache.sync.freshness.ProgressRequester` that consistent reads wake, and
optionally a :class:`~watchcache.sync.consistency.ConsistencyChecker`. Consistent reads are
served from the cache only while the version safeguard
(:class:`~watchcache.etcd.version.ProgressRequestSupport`, shared by every resource on the
same etcd) says etcd's progress notifications can be trusted; otherwise they go to etcd.
``mode`` is the user's wish: AUTO follows the verdict, FORCE refuses to start on an etcd
that fails it (UnsafeEtcdVersionError), OFF always reads etcd.

    async with EtcdClient(["127.0.0.1:2379"]) as client:
        pods = SyncedCache(client, "/registry/pods/", resource="pods", kind="Pod")
        await pods.start()
        page = await pods.cache.list(ListOptions(limit=500))
        ...
        await pods.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from watchcache.cache.objects import ObjectCodec
from watchcache.cache.watch_cache import WatchCache
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.store import EtcdStore
from watchcache.etcd.version import ConsistentReadsMode, ProgressRequestSupport
from watchcache.sync.consistency import DEFAULT_CHECK_INTERVAL, ConsistencyChecker
from watchcache.sync.freshness import ProgressRequester
from watchcache.sync.reflector import Reflector

#: How long start() waits, after the first list, for the etcd version verdict.
VERSION_CHECK_GRACE_SECONDS = 5.0


class SyncedCache:
    """One resource's cache, synced from etcd. ``cache_options`` go to WatchCache."""

    def __init__(
        self,
        client: EtcdClient,
        prefix: str,
        *,
        resource: str = "",
        kind: str = "",
        group: str = "",
        api_version: str = "v1",
        codec: ObjectCodec | None = None,
        mode: ConsistentReadsMode = ConsistentReadsMode.AUTO,
        support: ProgressRequestSupport | None = None,
        check_consistency_every: float | None = DEFAULT_CHECK_INTERVAL,
        **cache_options: Any,
    ) -> None:
        self.client = client
        self.codec = codec or ObjectCodec()
        self.mode = mode
        self.support = support or ProgressRequestSupport()

        def consistent_reads() -> bool:
            return self.support.enabled(mode)

        self.store = EtcdStore(client, prefix, codec=self.codec, consistent_reads=consistent_reads)
        self.cache = WatchCache(
            prefix,
            resource=resource,
            group=group,
            kind=kind,
            api_version=api_version,
            store=self.store,
            **cache_options,
        )
        self.reflector = Reflector(client, self.cache, codec=self.codec)
        self.requester = ProgressRequester(
            self.reflector.request_progress, enabled=consistent_reads
        )
        self.cache.add_wait_listener(self.requester.waiting_changed)
        self.checker = ConsistencyChecker(client, self.cache)
        self.check_consistency_every = check_consistency_every
        self._tasks: list[asyncio.Task[Any]] = []

    @property
    def prefix(self) -> str:
        return self.cache.prefix

    async def start(self, *, wait: bool = True, timeout: float | None = 60.0) -> None:
        """Start syncing; with ``wait``, return once the first list is in the cache."""
        if self._tasks:
            return
        if self.mode is ConsistentReadsMode.FORCE:
            await self.support.verify(self.client, self.mode)
        versions: asyncio.Task[bool] | None = None
        if self.mode is ConsistentReadsMode.AUTO:
            versions = asyncio.create_task(self.support.verify(self.client, self.mode))
            self._tasks.append(versions)
        run = asyncio.create_task(self.reflector.run(), name=f"reflector {self.prefix}")
        self._tasks.append(run)
        if self.check_consistency_every:
            self._tasks.append(
                asyncio.create_task(self.checker.run(self.check_consistency_every, self.relist))
            )
        if wait:
            synced = asyncio.create_task(self.reflector.synced.wait())
            try:
                done, _ = await asyncio.wait(
                    {run, synced}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                synced.cancel()
            if run in done:
                # The reflector only ends on its own by a bug: report it, don't wait forever.
                run.result()
                raise RuntimeError(f"the reflector of {self.prefix} ended before its first list")
            if not done:
                raise TimeoutError(f"{self.prefix} was not listed from etcd within {timeout} s")
            if versions is not None:
                # Usually answered long before the list; a member that does not answer
                # keeps consistent reads on etcd until it does, without holding up start.
                await asyncio.wait({versions}, timeout=VERSION_CHECK_GRACE_SECONDS)

    async def relist(self) -> None:
        """Rebuild the cache from a fresh list; returns once that list is in it."""
        lists = self.reflector.stats.lists
        await self.reflector.relist("rebuilding the cache")
        while self.reflector.stats.lists == lists:
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """Stop syncing; the cache stops (reads get 429, watchers end)."""
        await self.reflector.stop()
        await self.requester.stop()
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.cache.stop()

    async def __aenter__(self) -> SyncedCache:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
