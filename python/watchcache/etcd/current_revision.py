"""etcd's current revision for consistent reads: one call in flight, shared by every read
that arrived before it was issued.

Design note
-----------
What. A consistent read from the cache (KEP-2340, docs/semantics.md §3.1) first learns
etcd's current revision from a linearizable one-key Range, then waits until the cache has
reached it. One Range per read made a consistent GET cost a gRPC round trip of its own —
about half a millisecond of this process's CPU in grpc.aio alone — so consistent reads
stopped scaling with clients long before the cache did. :class:`SharedRevision` lets
concurrent reads share those calls.

The rule (linearizability). A read that starts at time *t* must see every write
acknowledged before *t*. etcd serves a linearizable Range after a ReadIndex confirmed at
the time it serves it, so the header revision of any call *issued after t* is at least the
revision of every write acknowledged before *t*. A call already issued when a read starts
may have been served before such a write was acknowledged: its answer can be older than
the read, and adopting it would let the read miss a write it must see. Hence:

* a read joins the call that has not been issued yet, if there is one (it is issued after
  the read arrived, so its answer is recent enough);
* at most one call is in flight; reads that arrive while it is in flight join the *next*
  call, which is issued as soon as the one in flight ends, for all of them at once;
* a call is "issued" when its task starts the RPC; from that step on it takes no one new.

A read therefore waits for at most two round trips (the end of the call in flight, then
its own), and etcd sees at most one call per round trip however many reads there are. This
is the scheme etcd uses for linearizable reads itself (its read loop sends one ReadIndex
for every read that arrived before it was sent; later reads wait for the next one), here
one level up, where Kubernetes makes one call per read.

Which key. Kubernetes reads the resource's prefix without its slash (``/registry/pods``),
a key that normally does not exist; only the header revision matters, and it is the
cluster's revision whatever key is read. So the reads of every resource on the same etcd
client and storage root share one :class:`SharedRevision` (:func:`shared_revision`), which
reads the root without its slash (``/registry``): a read of pods and a read of configmaps
that arrive together share a call as two reads of pods do.

Failures. An error of the shared call (etcd unreachable, client closed) is the error of
every read that shared it; the next call is issued for the reads that queued meanwhile.
A read that is cancelled (its client went away) leaves the call to the others.

Costs: per read, one future of its own to await (a cancelled read cancels no one else's
wait) and a place in a list; per call, one task. Callers: :class:`~watchcache.etcd.store.
EtcdStore` (``current_resource_version``), hence every consistent LIST and GET served from
the cache, and continuations with an rv of -1.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Awaitable, Callable

from watchcache.etcd.client import EtcdClient, EtcdError

#: Every key of a storage root shares the root's reader; this is how the root is found.
_SEPARATOR = b"/"


class SharedRevision:
    """etcd's current revision, read by ``fetch`` (an awaitable of the revision), with
    concurrent reads sharing calls by the rule of the module note.

    ``calls`` counts the calls issued, ``reads`` the reads answered (both for tests and
    metrics: their ratio is how many reads a call served on average)."""

    def __init__(self, fetch: Callable[[], Awaitable[int]]) -> None:
        self._fetch = fetch
        #: The reads of the call not issued yet, which reads arriving now join (None: no
        #: such call). Each read waits on a future of its own, so that a cancelled read
        #: cancels nobody else's wait, and an answer wakes each read in one step.
        self._next: list[asyncio.Future[int]] | None = None
        #: The task running the issued call, if one is in flight.
        self._in_flight: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.calls = 0
        self.reads = 0

    @property
    def in_flight(self) -> bool:
        """Whether a call has been issued and has not ended."""
        return self._in_flight is not None

    async def current(self) -> int:
        """etcd's current revision, from a call issued after this read started. Raises
        what the call raised (EtcdError and its subclasses)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A reader from another event loop (tests run one loop each): the state of the
            # old loop's calls means nothing here, and its futures cannot be awaited.
            self._loop, self._next, self._in_flight = loop, None, None
        self.reads += 1
        waiter: asyncio.Future[int] = loop.create_future()
        reads = self._next
        if reads is not None:
            reads.append(waiter)
        else:
            reads = self._next = [waiter]
            if self._in_flight is None:
                self._issue(reads)
            # else: issued when the call in flight ends (_call_ended).
        return await waiter

    def _issue(self, reads: list[asyncio.Future[int]]) -> None:
        assert self._loop is not None
        task = self._loop.create_task(self._run(reads))
        self._in_flight = task
        task.add_done_callback(functools.partial(self._ended, reads))

    async def _run(self, reads: list[asyncio.Future[int]]) -> None:
        # From this step on the call is issued: reads arriving later must not adopt it.
        if self._next is reads:
            self._next = None
        self.calls += 1
        revision, error = 0, None
        try:
            revision = await self._fetch()
        except Exception as failure:
            error = failure
        finally:
            # The next call is issued before this one's reads are woken: its task's first
            # step, which starts the RPC, then runs ahead of their steps instead of after
            # every one of them (a LIST's page read and first piece each).
            self._call_ended(asyncio.current_task())
        for waiter in reads:
            if waiter.done():
                continue
            if error is None:
                waiter.set_result(revision)
            else:
                waiter.set_exception(error)

    def _ended(self, reads: list[asyncio.Future[int]], task: asyncio.Task[None]) -> None:
        """The task's end, however it ended: a task cancelled before its first step (the
        loop shutting down) never ran ``_run``'s cleanup, and its reads must not hang."""
        if self._next is reads:
            self._next = None
        for waiter in reads:
            if not waiter.done():
                waiter.cancel()
        self._call_ended(task)

    def _call_ended(self, task: asyncio.Task[None] | None) -> None:
        if task is None or self._in_flight is not task:
            return
        self._in_flight = None
        queued = self._next
        if queued is not None:
            self._issue(queued)


#: One reader per etcd client and storage root (module note, "Which key").
_SHARED: weakref.WeakKeyDictionary[EtcdClient, dict[bytes, SharedRevision]] = (
    weakref.WeakKeyDictionary()
)


def storage_root(key: bytes) -> bytes:
    """The first segment of a key, without a trailing slash: ``/registry`` for
    ``/registry/pods``, and the key itself when it has one segment."""
    if not key.startswith(_SEPARATOR):
        return key
    end = key.find(_SEPARATOR, 1)
    return key if end < 0 else key[:end]


def shared_revision(client: EtcdClient, key: bytes) -> SharedRevision:
    """The :class:`SharedRevision` of ``client`` for the storage root of ``key`` (created on
    first use; it lives as long as the client)."""
    root = storage_root(key)
    readers = _SHARED.get(client)
    if readers is None:
        readers = _SHARED[client] = {}
    reader = readers.get(root)
    if reader is None:
        # Weakly: the reader is a value of a dict keyed weakly by the client, and a strong
        # reference back would keep every client alive for good.
        owner = weakref.ref(client)

        async def fetch() -> int:
            live = owner()
            if live is None:
                raise EtcdError("the etcd client is gone")
            return await live.current_revision(root)

        reader = readers[root] = SharedRevision(fetch)
    return reader
