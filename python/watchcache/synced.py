"""A WatchCache kept in sync with etcd: the pieces of DESIGN.md's data flow, wired.

:class:`SyncedCache` owns, for one key prefix, the :class:`~watchcache.cache.WatchCache`,
the :class:`~watchcache.etcd.store.EtcdStore` the planner delegates to, the
:class:`~watchcache.reflector.Reflector` that fills the cache, the
:class:`~watchcache.freshness.ProgressRequester` that consistent reads wake, and
optionally a :class:`~watchcache.consistency.ConsistencyChecker`. Consistent reads are
served from the cache only while ``consistent_reads()`` says etcd's progress notifications
can be trusted (the version safeguard); otherwise they go to etcd.

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
from collections.abc import Callable
from typing import Any

from watchcache.cache import WatchCache
from watchcache.consistency import ConsistencyChecker
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.store import EtcdStore
from watchcache.freshness import ProgressRequester
from watchcache.objects import ObjectCodec
from watchcache.reflector import Reflector


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
        consistent_reads: Callable[[], bool] = lambda: True,
        check_consistency_every: float | None = None,
        **cache_options: Any,
    ) -> None:
        self.client = client
        self.codec = codec or ObjectCodec()
        self._consistent_reads = consistent_reads
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
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def prefix(self) -> str:
        return self.cache.prefix

    async def start(self, *, wait: bool = True, timeout: float | None = 60.0) -> None:
        """Start syncing; with ``wait``, return once the first list is in the cache."""
        if self._tasks:
            return
        self._tasks.append(
            asyncio.create_task(self.reflector.run(), name=f"reflector {self.prefix}")
        )
        if self.check_consistency_every:
            self._tasks.append(asyncio.create_task(self.checker.run(self.check_consistency_every)))
        if wait:
            await self.reflector.wait_synced(timeout)

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
