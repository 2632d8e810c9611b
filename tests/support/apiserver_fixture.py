"""A real apiserver for tests: ApiServer under uvicorn on a free loopback port, over a real
etcd, in the test's own event loop (so async tests can drive kubectl subprocesses and
HTTP clients while it serves)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import uvicorn

from watchcache.apiserver.app import ApiServer
from watchcache.apiserver.http import GuardedHttpProtocol, uvicorn_config
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import free_ports
from watchcache.registry.resources import DEFAULT_RESOURCES, ResourceSpec


@dataclass
class RunningApiServer:
    url: str
    server: ApiServer
    client: EtcdClient


@contextlib.asynccontextmanager
async def running_apiserver(
    endpoints: Sequence[str],
    resources: Sequence[ResourceSpec] = DEFAULT_RESOURCES,
    *,
    protocol: type[GuardedHttpProtocol] = GuardedHttpProtocol,
    **options: Any,
) -> AsyncIterator[RunningApiServer]:
    """The apiserver as ``watchcache serve`` runs it (``http.uvicorn_config``: the guarded
    HTTP protocol, or ``protocol`` with other deadlines)."""
    async with EtcdClient(endpoints) as client:
        server = ApiServer(client, resources, **options)
        port = free_ports(1)[0]
        config = uvicorn_config(
            server.app(),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            timeout_graceful_shutdown=1,
            protocol=protocol,
        )
        uv = uvicorn.Server(config)
        task = asyncio.create_task(uv.serve())
        try:
            for _ in range(3000):
                if uv.started or task.done():
                    break
                await asyncio.sleep(0.01)
            if task.done():
                task.result()
            assert uv.started, "uvicorn did not start"
            yield RunningApiServer(f"http://127.0.0.1:{port}", server, client)
        finally:
            uv.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, 10)
