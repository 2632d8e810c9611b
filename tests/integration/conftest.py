"""Fixtures of the integration tests, each on the ``etcd`` fixture (tests/conftest.py):

* ``client``: an :class:`EtcdClient`, closed after the test;
* ``api``: the apiserver as ``watchcache serve`` runs it (watches end after 5 s);
* ``http``: an ``httpx.AsyncClient`` on ``api``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from apiserver_fixture import RunningApiServer, running_apiserver

from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster


@pytest.fixture
async def client(etcd: EtcdCluster) -> AsyncIterator[EtcdClient]:
    async with EtcdClient(etcd.endpoints, timeout=10.0) as etcd_client:
        yield etcd_client


@pytest.fixture
async def api(etcd: EtcdCluster) -> AsyncIterator[RunningApiServer]:
    async with running_apiserver(etcd.endpoints, min_request_timeout=5) as running:
        yield running


@pytest.fixture
async def http(api: RunningApiServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api.url, timeout=10) as client:
        yield client
