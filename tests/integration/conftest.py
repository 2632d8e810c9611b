"""``client``: an :class:`EtcdClient` on the ``etcd`` fixture (tests/conftest.py), closed
after the test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster


@pytest.fixture
async def client(etcd: EtcdCluster) -> AsyncIterator[EtcdClient]:
    async with EtcdClient(etcd.endpoints, timeout=10.0) as etcd_client:
        yield etcd_client
