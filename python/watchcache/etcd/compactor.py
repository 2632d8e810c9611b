"""Compacting etcd's history, as kube-apiserver does, shared by every apiserver of a cluster.

Design note
-----------
Why. etcd keeps every revision of every key until it is compacted; nothing else frees
them. Without compaction a server taking 1,000 writes/s of 1 KB objects fills etcd's
default 2 GiB backend quota in about half an hour, and then etcd raises its NOSPACE alarm
and refuses every write. kube-apiserver compacts every ``--etcd-compaction-interval``
(5 minutes by default; 0 disables).

How (Kubernetes' ``storage/etcd3/compact.go``, docs/etcd.md, "Compaction"). Each interval one
transaction on the key ``compact_rev_key``: *if its version (how many times it was
written) is the one this server last saw, write into it the revision the previous step
observed*. Whoever's compare holds is the one compactor of the interval: it then compacts
etcd to that revision, which is at least one interval old, so no client reading at a
revision from within the last interval is cut off. Everyone else's compare fails; the
answer carries the key's current version and value, so they learn the compacted revision
and expect the new version next time. Servers started at different moments over one etcd
thus compact once per interval between them, without a lease or a leader. The first step
of a server (expected version 0, nothing observed yet) only records the revision.

What it gives the caches. :attr:`Compactor.compacted_revision` is the newest revision etcd
was compacted to, learned from this server's own compactions, from the key's value when
another server won, and by reading the key every ``poll_interval`` (Kubernetes watches it;
a read every few seconds gives the same answer, later by at most the poll). Every change
is passed to the ``on_compacted`` listeners: the watch caches drop their snapshots below
it (``WatchCache.compact``), so a continue token or an Exact read older than the
compaction goes to etcd and gets its 410, as Kubernetes' cacher does since snapshots.

Errors. A failed step (etcd unreachable, a timeout) is logged and retried at the next
interval with the same expectations, as Kubernetes does; a revision already compacted
(another process compacted further) counts as done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from watchcache.etcd.client import EtcdClient, EtcdError
from watchcache.etcd.proto import rpc_pb2
from watchcache.wire.errors import CompactedError

log = logging.getLogger(__name__)

#: The key every apiserver of a cluster coordinates on (Kubernetes' ``compactRevKey``).
COMPACT_REV_KEY: Final = b"compact_rev_key"
#: kube-apiserver's ``--etcd-compaction-interval`` default.
DEFAULT_COMPACTION_INTERVAL: Final = 300.0
#: How often the compacted revision is read back (Kubernetes watches the key).
DEFAULT_POLL_INTERVAL: Final = 5.0


@dataclass(frozen=True, slots=True)
class CompactionStep:
    """The outcome of one step: the key's ``version`` to expect next time, the store's
    ``revision`` when the step ran (what the next step compacts to), the revision etcd is
    now known to be compacted to (0: none known), and whether this step ``claimed`` the
    interval (its compare held: it recorded, and compacted if it had a revision)."""

    version: int
    revision: int
    compacted: int
    claimed: bool


async def compaction_step(
    client: EtcdClient, expected_version: int, revision: int, *, timeout: float | None = None
) -> CompactionStep:
    """One turn of the shared compaction: claim the interval by compare-and-swap on
    :data:`COMPACT_REV_KEY` and, when claimed with an observed ``revision``, compact etcd to
    it. Raises EtcdError (and its subclasses) when etcd cannot be reached."""
    compare = rpc_pb2.Compare(
        key=COMPACT_REV_KEY,
        target=rpc_pb2.Compare.VERSION,
        result=rpc_pb2.Compare.EQUAL,
        version=expected_version,
    )
    put = rpc_pb2.PutRequest(key=COMPACT_REV_KEY, value=str(revision).encode())
    get = rpc_pb2.RangeRequest(key=COMPACT_REV_KEY)
    response = await client.txn(
        rpc_pb2.TxnRequest(
            compare=[compare],
            success=[rpc_pb2.RequestOp(request_put=put)],
            failure=[rpc_pb2.RequestOp(request_range=get)],
        ),
        timeout=timeout,
    )
    current = int(response.header.revision)
    if not response.succeeded:
        kvs = response.responses[0].response_range.kvs
        if not kvs:  # deleted by hand: start over from version 0
            return CompactionStep(0, current, 0, False)
        try:
            compacted = int(kvs[0].value)
        except ValueError:
            compacted = 0
        return CompactionStep(int(kvs[0].version), current, compacted, False)
    if revision == 0:
        # A server's first claim only records the revision: nothing is an interval old yet.
        return CompactionStep(expected_version + 1, current, 0, True)
    with contextlib.suppress(CompactedError):
        await client.compact(revision)
    log.debug("compacted etcd to revision %d", revision)
    return CompactionStep(expected_version + 1, current, revision, True)


class Compactor:
    """Compacts one etcd cluster every ``interval`` seconds (0: never, but the compacted
    revision is still followed) and tells listeners the compacted revision."""

    def __init__(
        self,
        client: EtcdClient,
        interval: float = DEFAULT_COMPACTION_INTERVAL,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        timeout: float = 30.0,
    ) -> None:
        if interval < 0 or poll_interval <= 0:
            raise ValueError("the compaction interval must be >= 0 and the poll interval > 0")
        self.client = client
        self.interval = interval
        self.poll_interval = poll_interval
        self.timeout = timeout
        self._compacted = 0
        self._listeners: list[Callable[[int], None]] = []
        self._version = 0
        self._observed = 0
        #: Steps taken, compactions this server made, steps that failed.
        self.steps = 0
        self.compactions = 0
        self.failures = 0

    @property
    def compacted_revision(self) -> int:
        """The newest revision etcd is known to be compacted to (0: none known)."""
        return self._compacted

    def add_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(revision)`` whenever the known compacted revision grows (and now,
        when one is known already)."""
        self._listeners.append(listener)
        if self._compacted:
            listener(self._compacted)

    def _learn(self, revision: int) -> None:
        if revision <= self._compacted:
            return
        self._compacted = revision
        for listener in self._listeners:
            listener(revision)

    async def step(self) -> CompactionStep:
        """One compaction step now (the run loop calls it every interval)."""
        result = await compaction_step(
            self.client, self._version, self._observed, timeout=self.timeout
        )
        self.steps += 1
        if result.claimed and result.compacted:
            self.compactions += 1
        self._version, self._observed = result.version, result.revision
        self._learn(result.compacted)
        return result

    async def refresh(self) -> int:
        """Read the compacted revision other servers recorded; returns the known one."""
        kv = await self.client.get(COMPACT_REV_KEY, timeout=self.timeout)
        if kv is not None:
            with contextlib.suppress(ValueError):
                self._learn(int(kv.value))
        return self._compacted

    async def run(self) -> None:
        """Compact every interval and follow the key in between, until cancelled."""
        loop = asyncio.get_running_loop()
        next_step = loop.time() + self.interval if self.interval else None
        while True:
            now = loop.time()
            wait = self.poll_interval
            if next_step is not None:
                wait = min(wait, max(0.0, next_step - now))
            await asyncio.sleep(wait)
            try:
                if next_step is not None and loop.time() >= next_step:
                    next_step = loop.time() + self.interval
                    await self.step()
                else:
                    await self.refresh()
            except (TimeoutError, EtcdError) as error:
                self.failures += 1
                log.warning("etcd compaction: %s", error)
