"""The etcd version safeguard against real etcd (docs/semantics.md §4): trixie's 3.5.16 passes,
bookworm's 3.4.23 (which has the progress-notify bugs) is refused, one 3.4.23 member among
3.5.16 ones is enough to refuse, and an unreachable member is retried until it answers.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster, free_ports
from watchcache.etcd.proto import rpc_pb2
from watchcache.etcd.version import (
    ConsistentReadsMode,
    ProgressRequestSupport,
    UnsafeEtcdVersionError,
)

LOGGER = "watchcache.etcd.version"


class CountingClient(EtcdClient):
    """A real client that counts its Maintenance.Status calls."""

    def __init__(self, endpoints: list[str], **options: float) -> None:
        super().__init__(endpoints, **options)
        self.status_calls = 0

    async def status(
        self, endpoint: str, *, timeout: float | None = None
    ) -> rpc_pb2.StatusResponse:
        self.status_calls += 1
        return await super().status(endpoint, timeout=timeout)


def fast() -> ProgressRequestSupport:
    return ProgressRequestSupport(backoff=0.005, backoff_factor=2.0, backoff_cap=0.05)


async def test_etcd_3_5_16_is_supported(client: EtcdClient, etcd: EtcdCluster) -> None:
    support = fast()
    await support.check(client)
    assert support.supported
    assert support.versions == {etcd.endpoints[0]: "3.5.16"}
    assert await support.verify(client, ConsistentReadsMode.FORCE) is True


async def test_a_3_5_16_cluster_is_supported(etcd_cluster: EtcdCluster) -> None:
    client = CountingClient(etcd_cluster.endpoints, timeout=5.0)
    async with client:
        support = fast()
        await support.check(client)
        assert support.versions == dict.fromkeys(etcd_cluster.endpoints, "3.5.16")
        assert client.status_calls == 3
        assert support.supported


async def test_etcd_3_4_23_is_refused(
    etcd_34: EtcdCluster, caplog: pytest.LogCaptureFixture
) -> None:
    (endpoint,) = etcd_34.endpoints
    async with EtcdClient(etcd_34.endpoints, timeout=5.0) as client:
        support = fast()
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            assert await support.verify(client, ConsistentReadsMode.AUTO) is False
        assert support.versions == {endpoint: "3.4.23"}
        assert support.verdict is False
        warnings = [r.getMessage() for r in caplog.records if r.name == LOGGER]
        assert len(warnings) == 1
        assert f"{endpoint} runs etcd 3.4.23" in warnings[0]

        with pytest.raises(UnsafeEtcdVersionError, match=f"{endpoint} runs etcd 3.4.23") as err:
            await fast().verify(client, ConsistentReadsMode.FORCE)
        assert err.value.endpoints == {endpoint: "3.4.23"}
        assert await fast().verify(client, ConsistentReadsMode.OFF) is False


async def test_one_3_4_member_among_3_5_refuses(etcd: EtcdCluster, etcd_34: EtcdCluster) -> None:
    good, bad = etcd.endpoints[0], etcd_34.endpoints[0]
    async with EtcdClient([good, bad], timeout=5.0) as client:
        support = fast()
        await support.check(client)
        assert support.versions == {good: "3.5.16", bad: "3.4.23"}
        assert support.supported is False
        assert support.unsupported_endpoints == {bad: "3.4.23"}


async def test_unreachable_member_keeps_it_unknown_and_cancels_cleanly() -> None:
    (port,) = free_ports(1)
    client = CountingClient([f"127.0.0.1:{port}"], timeout=0.05, retry_backoff=0.01)
    async with client:
        support = fast()
        task = support.start(client)
        async with asyncio.timeout(5):
            while client.status_calls < 3:
                await asyncio.sleep(0.01)
        assert support.verdict is None
        assert not support.enabled(ConsistentReadsMode.AUTO)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert support.versions == {}
        assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_member_down_at_startup_is_checked_once_it_is_back(etcd: EtcdCluster) -> None:
    (member,) = etcd.members
    member.stop()
    client = CountingClient(etcd.endpoints, timeout=0.1, retry_backoff=0.01)
    async with client:
        support = fast()
        task = support.start(client)
        async with asyncio.timeout(5):
            while client.status_calls < 2:
                await asyncio.sleep(0.01)
        assert support.verdict is None
        await asyncio.to_thread(etcd.restart, member)
        async with asyncio.timeout(5):
            await task
        assert support.versions == {member.endpoint: "3.5.16"}
        assert support.supported
