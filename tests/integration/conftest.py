"""Fixtures for tests against a real etcd (never a fake): members start on free loopback
ports with a temporary data dir and are stopped by PID when the test ends, failed or not.

``etcd``: one member of trixie's etcd 3.5; ``etcd_cluster``: three members;
``etcd_34``: bookworm's 3.4.23 (progress-notify bug; for the version safeguard).
``client``: an :class:`EtcdClient` on ``etcd``, closed after the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster


@pytest.fixture
def etcd() -> Iterator[EtcdCluster]:
    with EtcdCluster(1) as cluster:
        yield cluster


@pytest.fixture
def etcd_cluster() -> Iterator[EtcdCluster]:
    with EtcdCluster(3) as cluster:
        yield cluster


@pytest.fixture
def etcd_34() -> Iterator[EtcdCluster]:
    with EtcdCluster(1, suite="bookworm") as cluster:
        yield cluster


@pytest.fixture
async def client(etcd: EtcdCluster) -> AsyncIterator[EtcdClient]:
    async with EtcdClient(etcd.endpoints, timeout=10.0) as etcd_client:
        yield etcd_client
