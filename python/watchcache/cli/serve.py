"""``watchcache serve``: the apiserver under uvicorn, on a given etcd or on its own.

Without ``--etcd`` it starts an etcd of its own (the installed binary, data in the user's
data folder, so objects survive restarts) and stops it on the way out — Ctrl-C, SIGTERM,
or an error — by PID; etcd also dies with this process if it is killed outright.
At start it makes sure the namespaces every cluster has exist (``default``,
``kube-system``, ``kube-public``) and, when asked, loads demo configmaps once. HTTP is
served with the hardened protocol of :mod:`watchcache.apiserver.http`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn

from watchcache.apiserver.app import DEFAULT_MAX_LIMIT, ApiServer
from watchcache.apiserver.http import uvicorn_config
from watchcache.cli.load import load_objects
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster, default_data_dir, embedded_etcd
from watchcache.etcd.version import ConsistentReadsMode
from watchcache.registry.resources import CONFIGMAPS, DEFAULT_RESOURCES, ResourceSpec
from watchcache.registry.system_namespaces import ensure_namespaces

log = logging.getLogger(__name__)


@dataclass
class ServeOptions:
    etcd: Sequence[str] = ()
    host: str = "127.0.0.1"
    port: int = 8080
    resources: Sequence[ResourceSpec] = DEFAULT_RESOURCES
    data_dir: Path = field(default_factory=default_data_dir)
    demo_configmaps: int = 0
    max_limit: int = DEFAULT_MAX_LIMIT
    consistent_reads: ConsistentReadsMode = ConsistentReadsMode.AUTO
    log_level: str = "info"
    #: Run the inconsistency detector (consistency.py) every this many seconds; None: off.
    check_consistency_every: float | None = None
    #: The garbage collector (ownerReferences); off leaves dependents alone.
    garbage_collection: bool = True


def run(options: ServeOptions) -> int:
    logging.basicConfig(
        level=options.log_level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    etcd: EtcdCluster | None = None
    endpoints = list(options.etcd)
    if not endpoints:
        # Started from the main thread, so it also dies if this process is killed outright.
        etcd = embedded_etcd(options.data_dir)
        etcd.start()
        endpoints = etcd.endpoints
        log.info(
            "embedded etcd %s on %s, data in %s",
            etcd.members[0].version(),
            endpoints[0],
            options.data_dir,
        )
    # uvicorn re-raises the signal that stopped it; SIGTERM then unwinds like Ctrl-C, so
    # the embedded etcd is stopped cleanly below instead of dying with the process.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(options, endpoints, embedded=etcd is not None))
    finally:
        signal.signal(signal.SIGTERM, previous)
        if etcd is not None:
            etcd.stop()
    return 0


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


async def serve(options: ServeOptions, endpoints: Sequence[str], *, embedded: bool) -> None:
    async with EtcdClient(endpoints) as client:
        await ensure_namespaces(client, options.resources)
        if options.demo_configmaps and CONFIGMAPS in options.resources:
            await load_demo(client, options.demo_configmaps)
        server = ApiServer(
            client,
            options.resources,
            max_limit=options.max_limit,
            consistent_reads=options.consistent_reads,
            check_consistency_every=options.check_consistency_every,
            garbage_collection=options.garbage_collection,
        )
        config = uvicorn_config(
            server.app(), host=options.host, port=options.port, log_level=options.log_level
        )
        print_banner(options, endpoints, embedded=embedded)
        await uvicorn.Server(config).serve()


async def load_demo(client: EtcdClient, count: int) -> None:
    existing = await client.range_prefix(CONFIGMAPS.prefix.encode(), count_only=True)
    if existing.count:
        return
    log.info("loading %d demo configmaps (first run)", count)
    await load_objects(client, CONFIGMAPS, count=count, size=512, namespaces=10)


def print_banner(options: ServeOptions, endpoints: Sequence[str], *, embedded: bool) -> None:
    url = f"http://{options.host}:{options.port}"
    print(
        f"""
watchcache apiserver on {url} (etcd: {", ".join(endpoints)})
Try:
  kubectl --server {url} get configmaps -A --chunk-size=50
  kubectl --server {url} get cm -n demo-0 -l app=a
  kubectl --server {url} get cm -n default -w
  kubectl --server {url} create configmap hello --from-literal=k=v
  curl -s '{url}/api/v1/configmaps?limit=2'
Ctrl-C stops it{" and its etcd" if embedded else ""}.
""",
        flush=True,
    )
