"""An etcd watch on a key range that survives the loss of its stream.

:class:`EtcdWatch` delivers :class:`WatchBatch` es in revision order: each is either the
events of one etcd response (fragments reassembled: all events of a revision arrive
together) or a progress notification ("every event up to ``revision`` has been sent").
When the stream breaks (member killed, network, "no leader") it reconnects, with backoff
and trying the other endpoints, from the last delivered revision + 1, so nothing is lost
or repeated. A compacted start revision ends the iteration with
:class:`~watchcache.etcd.client.CompactedError`: the consumer must list again.

etcd quirks handled here (../shared/docs/etcd.md):
- a progress answer can report a revision below the watch's start (etcd#20221): progress
  is only ever reported forward, never below what was already delivered;
- events below the start revision are dropped;
- 3.5 drops a progress request that arrives while the watcher is catching up: callers
  re-send (the freshness requester ticks every 100 ms), so :meth:`request_progress` is
  cheap and never blocks.

grpc.aio allows one write in flight per stream (a second concurrent ``write`` fails the
whole call with ``INTERNAL``), so every write on a stream (the create request, progress
requests) goes through that stream's lock, and a progress request not yet written makes
further ones redundant.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import cast

import grpc
import grpc.aio

from watchcache.etcd.client import EtcdClient, EtcdError, _cancelling, prefix_range_end
from watchcache.etcd.proto import kv_pb2, rpc_pb2
from watchcache.wire.errors import CompactedError

log = logging.getLogger(__name__)

_WatchCall = grpc.aio.StreamStreamCall[rpc_pb2.WatchRequest, rpc_pb2.WatchResponse]

_WATCH_METHOD = "/etcdserverpb.Watch/Watch"
#: Kubernetes' watches require a leader: a member cut off from the quorum cancels the
#: watch instead of silently serving a stale stream.
_REQUIRE_LEADER = (("hasleader", "true"),)


@dataclass(frozen=True, slots=True)
class WatchBatch:
    """Events of one etcd response (``progress`` False) or a progress notification.

    ``revision`` is the header revision for events, and for progress the revision up to
    which everything has been delivered.
    """

    revision: int
    events: list[kv_pb2.Event] = field(default_factory=list)
    progress: bool = False


class WatchStreamLostError(EtcdError):
    """Internal: the stream ended or failed in a way a reconnect may fix."""


class EtcdWatch:
    """Watch ``key`` (with ``prefix`` every key under it) from ``start_revision``.

    Iterate with ``async for``; ``close()`` (or leaving ``async with``) ends it.
    ``next_revision`` is where a reconnect would resume.
    """

    def __init__(
        self,
        client: EtcdClient,
        key: bytes,
        *,
        start_revision: int,
        prefix: bool = True,
        prev_kv: bool = True,
        progress_notify: bool = True,
        max_backoff: float = 2.0,
    ) -> None:
        if start_revision <= 0:
            raise ValueError("a watch needs a positive start revision")
        self.client = client
        self.key = key
        self.range_end = prefix_range_end(key) if prefix else b""
        self.prev_kv = prev_kv
        self.progress_notify = progress_notify
        self.max_backoff = max_backoff
        self.start_revision = start_revision
        self.next_revision = start_revision
        #: Highest revision known complete on this watch (events or progress).
        self.progress_revision = start_revision - 1
        self.reconnects = 0
        self.progress_requests_sent = 0
        self.endpoint: str | None = None
        self._call: _WatchCall | None = None
        #: Serializes the writes on ``_call`` (grpc.aio: one write in flight per stream).
        self._write_lock = asyncio.Lock()
        #: A progress request is queued behind the lock and not written yet.
        self._progress_queued = False
        self._closed = False
        #: Set by close(): wakes a reconnect backoff at once.
        self._closed_event = asyncio.Event()

    # -- control ----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def request_progress(self) -> bool:
        """Ask etcd for a progress notification on this stream. Returns False when no
        stream is open (the next connection's first answers will do)."""
        call = self._call
        if call is None or self._closed or call.done():
            return False
        if self._progress_queued:
            # One not yet written is enough: its answer will be at least as recent.
            return True
        self._progress_queued = True
        task = asyncio.ensure_future(self._write_progress_request(call, self._write_lock))
        task.add_done_callback(_ignore_write_failure)
        self.progress_requests_sent += 1
        return True

    async def _write_progress_request(self, call: _WatchCall, lock: asyncio.Lock) -> None:
        async with lock:
            if call is self._call:
                self._progress_queued = False
            await self._write(
                call, rpc_pb2.WatchRequest(progress_request=rpc_pb2.WatchProgressRequest())
            )

    async def _write(self, call: _WatchCall, request: rpc_pb2.WatchRequest) -> None:
        """Write ``request`` on ``call``, or give up when the watch is closed meanwhile.

        grpc.aio's ``write`` never returns once the call has been cancelled under it (a
        close() racing the create request), so the write is raced against the close and
        abandoned (cancelled, never awaited) if the close wins: the iteration then ends
        instead of hanging."""
        write = asyncio.ensure_future(call.write(request))
        closed = asyncio.ensure_future(self._closed_event.wait())
        try:
            await asyncio.wait({write, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
        if write.done():
            write.result()
            return
        write.cancel()
        write.add_done_callback(_ignore_write_failure)
        raise WatchStreamLostError("the watch was closed while a request was being written")

    async def close(self) -> None:
        """End the iteration: a consumer waiting for the next batch sees the end of the
        iteration (not an error), a reconnect backoff is cut short."""
        self._closed = True
        self._closed_event.set()
        call, self._call = self._call, None
        if call is not None:
            call.cancel()

    async def __aenter__(self) -> EtcdWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the stream -------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[WatchBatch]:
        return self._batches()

    async def _batches(self) -> AsyncIterator[WatchBatch]:
        backoff = 0.05
        attempt = 0
        try:
            while not self._closed:
                endpoints = self.client.endpoint_order()
                endpoint = endpoints[attempt % len(endpoints)]
                try:
                    async for batch in self._stream(endpoint):
                        backoff = 0.05
                        yield batch
                    if self.closed:
                        return
                    raise WatchStreamLostError("etcd closed the watch stream")
                except CompactedError:
                    raise
                except asyncio.CancelledError:
                    # grpc.aio raises CancelledError from a read or write on a call that
                    # close() cancelled: that is the end of the iteration, not a
                    # cancellation of the consumer (unless it is also being cancelled).
                    if self.closed and not _cancelling():
                        return
                    raise
                except (
                    grpc.aio.AioRpcError,
                    WatchStreamLostError,
                    asyncio.InvalidStateError,
                ) as error:
                    # InvalidStateError: a write on a call that had already ended.
                    if self.closed:
                        return
                    log.info(
                        "etcd watch on %s lost (%s); resuming at revision %d",
                        endpoint,
                        _describe(error),
                        self.next_revision,
                    )
                attempt += 1
                self.reconnects += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self._closed_event.wait(), backoff * (0.5 + random.random())
                    )
                backoff = min(backoff * 2, self.max_backoff)
        finally:
            call, self._call = self._call, None
            if call is not None:
                call.cancel()

    async def _stream(self, endpoint: str) -> AsyncIterator[WatchBatch]:
        method = self.client.channel(endpoint).stream_stream(
            _WATCH_METHOD,
            request_serializer=rpc_pb2.WatchRequest.SerializeToString,
            response_deserializer=rpc_pb2.WatchResponse.FromString,
        )
        call = cast("_WatchCall", method(metadata=_REQUIRE_LEADER))
        lock = asyncio.Lock()
        self._call, self._write_lock, self._progress_queued = call, lock, False
        self.endpoint = endpoint
        create = rpc_pb2.WatchCreateRequest(
            key=self.key,
            range_end=self.range_end,
            start_revision=self.next_revision,
            progress_notify=self.progress_notify,
            prev_kv=self.prev_kv,
            fragment=True,
        )
        async with lock:
            await self._write(call, rpc_pb2.WatchRequest(create_request=create))
        created = False
        pending: list[kv_pb2.Event] = []
        while True:
            response = await call.read()
            if response is grpc.aio.EOF:
                return
            assert isinstance(response, rpc_pb2.WatchResponse)
            if response.canceled:
                if response.compact_revision:
                    raise CompactedError(
                        "The resourceVersion for the provided watch is too old.",
                        compact_revision=int(response.compact_revision),
                    )
                raise WatchStreamLostError(
                    f"etcd canceled the watch: {response.cancel_reason or 'no reason given'}"
                )
            if response.created:
                created = True
                self.client.prefer(endpoint)
                if not response.events:
                    continue
            if not created:
                continue
            if response.events or pending:
                pending.extend(response.events)
                if response.fragment:
                    continue
                batch, pending = self._deliver(pending, int(response.header.revision)), []
                if batch is not None:
                    yield batch
                continue
            progress = self._progress(int(response.header.revision))
            if progress is not None:
                yield progress

    def _deliver(self, events: list[kv_pb2.Event], header_revision: int) -> WatchBatch | None:
        start = self.next_revision
        if events and events[0].kv.mod_revision < start:
            events = [e for e in events if e.kv.mod_revision >= start]
        if not events:
            return None
        last = int(events[-1].kv.mod_revision)
        self.next_revision = last + 1
        self.progress_revision = max(self.progress_revision, last)
        return WatchBatch(header_revision, events)

    def _progress(self, revision: int) -> WatchBatch | None:
        # etcd#20221: the answer may lie below what this watch already covers.
        if revision <= self.progress_revision:
            return None
        self.progress_revision = revision
        self.next_revision = max(self.next_revision, revision + 1)
        return WatchBatch(revision, progress=True)


def _ignore_write_failure(task: asyncio.Future[None]) -> None:
    # A write racing a broken stream fails; the reconnect path reports the loss.
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()


def _describe(error: Exception) -> str:
    if isinstance(error, grpc.aio.AioRpcError):
        return f"{error.code().name}: {error.details()}"
    return str(error)
