"""etcd's database size, defragmentation and the NOSPACE alarm (etcd/storage_monitor.py)
on a real etcd with a small backend quota: a full quota refuses writes; once compaction
freed the old revisions, the monitor defragments the member, lifts the alarm, and writes
are accepted again. An etcd the server does not maintain is only measured."""

from __future__ import annotations

import pytest

from watchcache.etcd.client import EtcdClient, EtcdError
from watchcache.etcd.process import EtcdCluster
from watchcache.etcd.proto import rpc_pb2
from watchcache.etcd.storage_monitor import StorageMonitor

QUOTA = 24 * 1024 * 1024
VALUE = b"x" * (1024 * 1024)


async def fill(client: EtcdClient) -> int:
    """Overwrite one key with 1 MiB values until etcd refuses (NOSPACE); the count."""
    for written in range(200):
        try:
            await client.put(b"/registry/big", VALUE, timeout=10)
        except EtcdError as error:
            assert "space" in str(error).lower(), error
            return written
    raise AssertionError("the quota never filled")


async def test_nospace_is_lifted_after_compaction_and_defragmentation() -> None:
    with EtcdCluster(1, extra_args=[f"--quota-backend-bytes={QUOTA}"]) as etcd:
        async with EtcdClient(etcd.endpoints, timeout=10) as client:
            assert await fill(client) > 5
            raised = await client.alarms()
            assert [a.alarm for a in raised] == [rpc_pb2.NOSPACE]

            watcher_only = StorageMonitor(client, "etcd-0")
            await watcher_only.poll()
            assert watcher_only.db_size >= QUOTA * 0.9
            assert watcher_only.defragmentations == 0 and await client.alarms()

            revision = await client.current_revision(b"/registry/big")
            await client.compact(revision)
            monitor = StorageMonitor(
                client, "etcd-0", defragment=True, quota_bytes=QUOTA, defragment_min_bytes=1
            )
            await monitor.poll()
            assert monitor.defragmentations == 1
            assert monitor.db_size < QUOTA / 2
            assert monitor.disarmed == 1
            assert await client.alarms() == []
            await client.put(b"/registry/small", b"ok")


async def test_nothing_is_done_while_the_data_in_use_fills_the_quota() -> None:
    with EtcdCluster(1, extra_args=[f"--quota-backend-bytes={QUOTA}"]) as etcd:
        async with EtcdClient(etcd.endpoints, timeout=10) as client:
            # Many live keys: compaction frees nothing, so the alarm must stay.
            for i in range(200):
                try:
                    await client.put(f"/registry/k{i}".encode(), VALUE, timeout=10)
                except EtcdError:
                    break
            else:
                pytest.fail("the quota never filled")
            monitor = StorageMonitor(
                client, "etcd-0", defragment=True, quota_bytes=QUOTA, defragment_min_bytes=1
            )
            await monitor.poll()
            assert monitor.disarmed == 0
            assert await client.alarms()
