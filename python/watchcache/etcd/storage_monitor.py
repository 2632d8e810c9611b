"""How big etcd's database is, and giving the space compaction frees back to the disk.

Design note
-----------
Compaction (compactor.py) frees the pages old revisions held inside etcd's backend
file, but the file does not shrink: etcd reuses the pages, and only a *defragmentation*
returns them to the file system. The backend quota (``--quota-backend-bytes``, 2 GiB by
default) counts the file's size, so a member whose file has grown to the quota raises its
NOSPACE alarm and refuses writes even when most of the file is free.

Measuring, as kube-apiserver does (``--etcd-db-metric-poll-interval``, 30 s by default):
every poll each member's ``Maintenance.Status`` gives ``dbSize`` (the file) and
``dbSizeInUse`` (the pages holding live data); the largest member is the cluster's figure,
exported as Kubernetes' ``apiserver_storage_size_bytes{storage_cluster_id}`` and
``watchcache_storage_size_in_use_bytes``.

Maintaining, for the embedded etcd only (``defragment=True``; an operator's own etcd is
theirs to maintain, and kube-apiserver never defragments): a member whose free space —
``dbSize - dbSizeInUse`` — is at least ``defragment_free_fraction`` of its file and at least
``defragment_min_bytes`` is defragmented (it answers nothing else meanwhile: about a second
per 100 MB on this machine, so rarely, and one member at a time); then a NOSPACE alarm
raised earlier is disarmed once the data in use fits the quota again with room to spare,
so the server accepts writes again without an operator.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Final

from watchcache.etcd.client import EtcdClient, EtcdError
from watchcache.etcd.proto import rpc_pb2

log = logging.getLogger(__name__)

#: kube-apiserver's ``--etcd-db-metric-poll-interval`` default.
DEFAULT_POLL_INTERVAL: Final = 30.0
#: Defragment a member once half its file is free ...
DEFAULT_DEFRAGMENT_FREE_FRACTION: Final = 0.5
#: ... and that half is worth a pause of the member.
DEFAULT_DEFRAGMENT_MIN_BYTES: Final = 32 * 1024 * 1024
#: Disarm NOSPACE once the data in use is below this fraction of the quota.
NOSPACE_DISARM_FRACTION: Final = 0.8


@dataclass(frozen=True, slots=True)
class MemberSize:
    endpoint: str
    db_size: int  #: bytes of the backend file
    db_size_in_use: int  #: bytes of its pages holding live data

    @property
    def free(self) -> int:
        return max(0, self.db_size - self.db_size_in_use)


class StorageMonitor:
    """Polls one etcd cluster's database size every ``poll_interval`` seconds; with
    ``defragment``, also defragments members and disarms NOSPACE (module note).
    ``quota_bytes``: the members' backend quota (0: unknown, NOSPACE is left alone)."""

    def __init__(
        self,
        client: EtcdClient,
        cluster_id: str,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        defragment: bool = False,
        quota_bytes: int = 0,
        defragment_free_fraction: float = DEFAULT_DEFRAGMENT_FREE_FRACTION,
        defragment_min_bytes: int = DEFAULT_DEFRAGMENT_MIN_BYTES,
        timeout: float = 60.0,
    ) -> None:
        if poll_interval <= 0:
            raise ValueError("the poll interval must be > 0")
        self.client = client
        #: Kubernetes' ``storage_cluster_id`` label: ``etcd-<i>`` by the cluster's order.
        self.cluster_id = cluster_id
        self.poll_interval = poll_interval
        self.defragment = defragment
        self.quota_bytes = quota_bytes
        self.defragment_free_fraction = defragment_free_fraction
        self.defragment_min_bytes = defragment_min_bytes
        self.timeout = timeout
        #: The latest answer of each member that answered.
        self.members: dict[str, MemberSize] = {}
        self.defragmentations = 0
        self.disarmed = 0
        self.failures = 0

    @property
    def db_size(self) -> int:
        """The largest member's backend file, bytes (0 before the first poll)."""
        return max((m.db_size for m in self.members.values()), default=0)

    @property
    def db_size_in_use(self) -> int:
        """Live data of the member with the largest file, bytes."""
        if not self.members:
            return 0
        return max(self.members.values(), key=lambda m: m.db_size).db_size_in_use

    async def poll(self) -> list[MemberSize]:
        """Read every member's size now (a member that does not answer keeps its last
        figure and counts a failure); with ``defragment``, maintain them."""
        sizes: list[MemberSize] = []
        for endpoint in self.client.endpoints:
            try:
                status = await self.client.status(endpoint, timeout=self.timeout)
            except EtcdError as error:
                self.failures += 1
                log.warning("etcd %s: no status: %s", endpoint, error)
                continue
            size = MemberSize(endpoint, int(status.dbSize), int(status.dbSizeInUse))
            self.members[endpoint] = size
            sizes.append(size)
        if self.defragment:
            await self._maintain(sizes)
        return sizes

    async def _maintain(self, sizes: list[MemberSize]) -> None:
        for size in sizes:
            if (
                size.free >= self.defragment_min_bytes
                and size.free >= size.db_size * self.defragment_free_fraction
            ):
                try:
                    await self.client.defragment(size.endpoint, timeout=self.timeout)
                except EtcdError as error:
                    self.failures += 1
                    log.warning("etcd %s: defragmentation failed: %s", size.endpoint, error)
                    continue
                self.defragmentations += 1
                log.info(
                    "etcd %s defragmented: %d of %d bytes were free",
                    size.endpoint,
                    size.free,
                    size.db_size,
                )
                status = await self.client.status(size.endpoint, timeout=self.timeout)
                self.members[size.endpoint] = MemberSize(
                    size.endpoint, int(status.dbSize), int(status.dbSizeInUse)
                )
        if not self.quota_bytes:
            return
        in_use = max((m.db_size_in_use for m in self.members.values()), default=0)
        if in_use >= self.quota_bytes * NOSPACE_DISARM_FRACTION:
            return
        for raised in await self.client.alarms():
            if raised.alarm == rpc_pb2.NOSPACE:
                await self.client.disarm(raised)
                self.disarmed += 1
                log.warning(
                    "etcd member %x: NOSPACE disarmed, %d bytes in use", raised.memberID, in_use
                )

    async def run(self) -> None:
        """Poll every interval until cancelled; a failed poll is logged and retried."""
        while True:
            try:
                await self.poll()
            except EtcdError as error:
                self.failures += 1
                log.warning("etcd storage poll: %s", error)
            await asyncio.sleep(self.poll_interval)
