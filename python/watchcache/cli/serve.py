"""``watchcache serve``: the apiserver under uvicorn, on a given etcd or on its own.

Without ``--etcd`` it starts an etcd of its own (the installed binary, data in the user's
data folder, so objects survive restarts) and stops it on the way out — Ctrl-C, SIGTERM,
or an error — by PID; etcd also dies with this process if it is killed outright.
At start it makes sure the namespaces every cluster has exist (``default``,
``kube-system``, ``kube-public``) and, when asked, loads demo configmaps once. HTTP is
served with the hardened protocol of :mod:`watchcache.apiserver.http`.

Resources named by ``--etcd-servers-overrides`` live on etcd clusters of their own: one
client per distinct cluster, each checked at start (an unreachable one fails at once, with
its address) and closed on the way out; ``--uncached-resources`` are read from etcd
(docs/etcd.md §6).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import uvicorn
import uvloop

from watchcache.apiserver.app import DEFAULT_MAX_LIMIT, ApiServer
from watchcache.apiserver.http import uvicorn_config
from watchcache.cli.load import load_objects
from watchcache.cli.placement import describe
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.compactor import DEFAULT_COMPACTION_INTERVAL
from watchcache.etcd.process import EtcdCluster, default_data_dir, embedded_etcd
from watchcache.etcd.storage_monitor import DEFAULT_POLL_INTERVAL
from watchcache.etcd.version import ConsistentReadsMode
from watchcache.registry.resources import CONFIGMAPS, DEFAULT_RESOURCES, ResourceSpec
from watchcache.sync.consistency import DEFAULT_CHECK_INTERVAL

log = logging.getLogger(__name__)

#: The event loops ``serve`` can run on. uvloop is uvicorn's own choice when installed: it
#: lifts a bare ASGI app's rate under wrk -t2 -c32 by ~35 % on 2 cores (10,100 to 13,800
#: req/s: ``python bench/read_path.py floor --loop asyncio|uvloop`` under that wrk), and a
#: GET at RV=0 by ~25 % (bench/README.md, "Read path A/B"). asyncio's loop stays available
#: for debugging tools that only know it.
EventLoop = Literal["uvloop", "asyncio"]
EVENT_LOOPS: tuple[EventLoop, ...] = ("uvloop", "asyncio")

#: etcd's own ``--quota-backend-bytes`` default.
ETCD_DEFAULT_QUOTA_BYTES = 2 * 1024**3


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
    check_consistency_every: float | None = DEFAULT_CHECK_INTERVAL
    #: The garbage collector (ownerReferences); off leaves dependents alone.
    garbage_collection: bool = True
    #: Resources on etcd clusters of their own: storage group_resource -> endpoints
    #: (--etcd-servers-overrides).
    etcd_overrides: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: Resources whose reads clients get from etcd, not a watch cache (--uncached-resources).
    uncached_resources: frozenset[str] = frozenset()
    #: LISTs read through the caches' secondary indexes (pods: spec.nodeName); off: scans.
    list_indexes: bool = True
    #: remainingItemCount on filtered pages too (Kubernetes never sends it).
    exact_remaining_counts: bool = False
    #: Seconds between etcd compactions (--etcd-compaction-interval); 0: never.
    compaction_interval: float = DEFAULT_COMPACTION_INTERVAL
    #: Seconds between reads of etcd's database size (--etcd-db-metric-poll-interval).
    db_metric_poll_interval: float = DEFAULT_POLL_INTERVAL
    #: The embedded etcd's backend quota in bytes (0: etcd's default, 2 GiB).
    quota_backend_bytes: int = 0
    #: gzip for large LIST and GET answers to clients that accept it (--response-compression).
    response_compression: bool = True
    #: The event loop everything runs on (--loop): uvloop, as uvicorn picks by default.
    event_loop: EventLoop = "uvloop"


def run(options: ServeOptions) -> int:
    logging.basicConfig(
        level=options.log_level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    etcd: EtcdCluster | None = None
    endpoints = list(options.etcd)
    if not endpoints:
        # Started from the main thread, so it also dies if this process is killed outright.
        etcd = embedded_etcd(options.data_dir, quota_backend_bytes=options.quota_backend_bytes)
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
            main = serve(options, endpoints, embedded=etcd is not None)
            if options.event_loop == "uvloop":
                uvloop.run(main)
            else:
                asyncio.run(main)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if etcd is not None:
            etcd.stop()
    return 0


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


async def serve(options: ServeOptions, endpoints: Sequence[str], *, embedded: bool) -> None:
    async with contextlib.AsyncExitStack() as stack:
        client, placed = await open_etcd_clients(stack, endpoints, options.etcd_overrides)
        # Ask every cluster for its revision now: one that cannot be reached fails the
        # start with its address (exit 1), instead of the server's startup failing later.
        clusters = {client, *placed.values()}
        await asyncio.gather(*(c.current_revision(b"/registry") for c in clusters))
        served = {spec.storage_group_resource for spec in options.resources}
        for name in sorted((set(placed) | options.uncached_resources) - served):
            log.info("%s is not served now; it is placed so once a CRD defines it", name)
        if options.demo_configmaps and CONFIGMAPS in options.resources:
            configmaps = placed.get(CONFIGMAPS.storage_group_resource, client)
            await load_demo(configmaps, options.demo_configmaps)
        # None: each cache's default indexes (its trigger fields); (): none.
        indexes: dict[str, Any] = {} if options.list_indexes else {"list_indexes": ()}
        server = ApiServer(
            client,
            options.resources,
            max_limit=options.max_limit,
            consistent_reads=options.consistent_reads,
            check_consistency_every=options.check_consistency_every,
            garbage_collection=options.garbage_collection,
            etcd_overrides=placed,
            uncached_resources=options.uncached_resources,
            exact_remaining_counts=options.exact_remaining_counts,
            compaction_interval=options.compaction_interval,
            db_metric_poll_interval=options.db_metric_poll_interval,
            # The embedded etcd is ours to maintain: defragment it, lift NOSPACE.
            etcd_maintenance=embedded,
            etcd_quota_bytes=options.quota_backend_bytes or ETCD_DEFAULT_QUOTA_BYTES,
            response_compression=options.response_compression,
            **indexes,
        )
        config = uvicorn_config(
            server.app(), host=options.host, port=options.port, log_level=options.log_level
        )
        print_banner(options, endpoints, embedded=embedded)
        await uvicorn.Server(config).serve()


async def open_etcd_clients(
    stack: contextlib.AsyncExitStack,
    endpoints: Sequence[str],
    overrides: Mapping[str, Sequence[str]],
) -> tuple[EtcdClient, dict[str, EtcdClient]]:
    """The default cluster's client, and the client of each resource in ``overrides``: one
    client per distinct set of endpoints (in any order; the default cluster's included),
    each closed with ``stack``."""
    default: EtcdClient = await stack.enter_async_context(EtcdClient(endpoints))
    clients = {frozenset(default.endpoints): default}
    placed: dict[str, EtcdClient] = {}
    for name, servers in overrides.items():
        candidate = EtcdClient(servers)  # no connection yet: it normalizes the endpoints
        cluster = frozenset(candidate.endpoints)
        if cluster not in clients:
            clients[cluster] = await stack.enter_async_context(candidate)
        placed[name] = clients[cluster]
    return default, placed


async def load_demo(client: EtcdClient, count: int) -> None:
    existing = await client.range_prefix(CONFIGMAPS.prefix.encode(), count_only=True)
    if existing.count:
        return
    log.info("loading %d demo configmaps (first run)", count)
    await load_objects(client, CONFIGMAPS, count=count, size=512, namespaces=10)


def print_banner(options: ServeOptions, endpoints: Sequence[str], *, embedded: bool) -> None:
    url = f"http://{options.host}:{options.port}"
    placement = "".join(f"\n  {line}" for line in describe(options.etcd_overrides))
    if options.uncached_resources:
        uncached = ", ".join(sorted(options.uncached_resources))
        placement += f"\n  served from etcd, not cached: {uncached}"
    print(
        f"""
watchcache apiserver on {url} (etcd: {", ".join(endpoints)}){placement}
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
