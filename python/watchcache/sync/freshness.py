"""Consistent reads from the cache (KEP-2340): the progress requester.

A consistent LIST asks etcd for its current revision (a cheap one-key range, in
:class:`~watchcache.etcd.store.EtcdStore`) and waits until the cache has reached it
(:meth:`~watchcache.cache.watch_cache.WatchCache.wait_for_rv`, 3 s, then fallback to etcd or 429 as
the planner says). When the revision moved because of writes to *other* prefixes, no event
of this prefix will ever raise the cache to it; only a progress notification can. So while
any read waits, the requester asks etcd for one on the cache's watch stream.

Timing. Kubernetes' requester sends its first request as soon as a read starts waiting
after an idle period, then one every 100 ms while anyone waits. Here a request goes out as
soon as *any* new read starts waiting (reads that start waiting in the same event-loop
iteration share one): the revision a read waits for was read from etcd just before, so only
a request sent after that can be answered with it, and a read that starts in the middle of
a 100 ms period would otherwise wait for the next tick (the target for a consistent read
right after a write is a p99 of 20 ms). Requests are tiny and only reads that find the
cache behind cause them.

Why re-send at all: etcd 3.5 silently drops a progress request that arrives while a watcher
on the stream is still catching up (docs/etcd.md); the next tick's request is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

#: Kubernetes' ``progressRequestPeriod``.
PERIOD_SECONDS = 0.1


class ProgressRequester:
    """Calls ``request()`` while reads wait; fed by ``waiting_changed(count)``
    (:meth:`WatchCache.add_wait_listener`). ``request`` returns False when no watch stream
    is open (the request is then retried on the next tick)."""

    def __init__(
        self,
        request: Callable[[], bool],
        *,
        period: float = PERIOD_SECONDS,
        enabled: Callable[[], bool] = lambda: True,
    ) -> None:
        self._request = request
        self.period = period
        self._enabled = enabled
        self._waiting = 0
        self._send_scheduled = False
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.requests_sent = 0
        self.requests_unsent = 0

    @property
    def waiting(self) -> int:
        return self._waiting

    def waiting_changed(self, count: int) -> None:
        grew = count > self._waiting
        self._waiting = count
        if self._stopped or count == 0 or not self._enabled():
            return
        loop = asyncio.get_running_loop()
        if grew and not self._send_scheduled:
            self._send_scheduled = True
            loop.call_soon(self._send_now)
        if self._task is None:
            self._task = loop.create_task(self._tick())

    async def _tick(self) -> None:
        try:
            while self._waiting > 0 and not self._stopped:
                await asyncio.sleep(self.period)
                if self._waiting > 0 and not self._stopped:
                    self._send()
        finally:
            self._task = None

    def _send_now(self) -> None:
        self._send_scheduled = False
        if self._waiting > 0 and not self._stopped:
            self._send()

    def _send(self) -> None:
        if self._request():
            self.requests_sent += 1
        else:
            self.requests_unsent += 1

    async def stop(self) -> None:
        self._stopped = True
        task = self._task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
