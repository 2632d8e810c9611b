"""etcd scenario benchmarks: the issue-4 targets, against a real etcd started here.
(The paginated LIST against etcd is scenario 2, pagination.py.)

  fresh-consistent   consistent LIST (RV unset, limit 500) from an up-to-date cache of 10k
                     pods. Baseline: one etcd round trip (the current-revision Range). The
                     overhead the target bounds is (consistent LIST - RV=0 LIST), reported
                     as its own row.
  after-write        put one pod, then a consistent LIST (limit 1): the time the read waited
                     for the cache (p50 and p99 over the run). Also after a write to another
                     prefix, which only a progress notification can bring into the cache.
  initial-sync       list 300k x 1 KB pods from etcd into a fresh cache, in a child process:
                     time, peak RSS, and the cache's RSS over the raw bytes (target <= 1.5x).

Usage: ``python bench/etcd_scenarios.py [--full]`` (quick: 50 rounds, 30k objects to sync;
full: 200 rounds, 300k). Writes bench/results/etcd-scenarios.json and .png and its
section of bench/README.md. etcd's data dir is a temp folder, removed at the end; loading
300k objects needs about 1.5 GB of disk.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from typing import Any

from harness import etcd, mode, parser, peak_rss, percentile, rss
from reporting import Report, Row, plot_rows, table
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster
from watchcache.etcd.proto import rpc_pb2
from watchcache.sync.synced import SyncedCache
from watchcache.wire.options import ListOptions

PREFIX = "/registry/pods/"


def pod_value(i: int, size: int) -> bytes:
    ns = f"ns-{i % 100:03d}"
    head = (
        f'{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"pod-{i:07d}",'
        f'"namespace":"{ns}","labels":{{"app":"app-{i % 50}","tier":"backend"}}}},'
        f'"spec":{{"nodeName":"node-{i % 500}"}},"data":"'
    )
    pad = max(0, size - len(head) - 2)
    return (head + "x" * pad + '"}').encode()


def pod_key(i: int) -> bytes:
    return f"{PREFIX}ns-{i % 100:03d}/pod-{i:07d}".encode()


async def load(client: EtcdClient, n: int, size: int, start: int = 0) -> int:
    """Put n pods with transactions of 128 puts, 8 in flight (docs/etcd.md: ~4.6 s for 300k)."""
    batches = [range(i, min(i + 128, start + n)) for i in range(start, start + n, 128)]
    semaphore = asyncio.Semaphore(8)
    raw = 0

    async def put(batch: range) -> None:
        nonlocal raw
        ops = [
            rpc_pb2.RequestOp(
                request_put=rpc_pb2.PutRequest(key=pod_key(i), value=pod_value(i, size))
            )
            for i in batch
        ]
        raw += sum(len(op.request_put.key) + len(op.request_put.value) for op in ops)
        async with semaphore:
            await client.txn(rpc_pb2.TxnRequest(success=ops))

    await asyncio.gather(*(put(b) for b in batches))
    return raw


async def timed(op: Any, rounds: int) -> float:
    for _ in range(min(rounds, 20)):
        await op()
    samples = []
    for _ in range(rounds):
        t = time.perf_counter()
        await op()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1e3


async def freshness_scenarios(client: EtcdClient, rounds: int) -> list[Row]:
    await load(client, 10_000, 1024)
    async with SyncedCache(client, PREFIX, resource="pods", kind="Pod") as pods:
        cache = pods.cache

        async def consistent() -> None:
            await cache.list(ListOptions(limit=500))

        async def any_rv() -> None:
            await cache.list(ListOptions(limit=500, resource_version="0"))

        async def round_trip() -> None:
            await client.current_revision(b"/registry/pods")

        fresh = await timed(consistent, rounds)
        rv0 = await timed(any_rv, rounds)
        rtt = await timed(round_trip, rounds)
        rows = [
            Row("fresh-consistent LIST (limit 500)", 10_000, fresh, "ms", rtt),
            Row(
                "fresh-consistent overhead (vs RV=0)",
                10_000,
                fresh - rv0,
                "ms",
                rtt,
                "≤ 2 ms (one etcd round trip)",
                fresh - rv0 <= 2.0,
            ),
        ]
        for label, key in (
            ("after-write (same prefix)", None),
            ("after-write (other prefix)", b"/registry/configmaps/ns/c"),
        ):
            waits = []
            for i in range(rounds):
                if key is None:
                    await client.put(pod_key(1_000_000 + i), pod_value(1_000_000 + i, 1024))
                else:
                    await client.put(key + str(i).encode(), b"{}")
                result = await cache.list(ListOptions(limit=1))
                waits.append(result.waited_seconds * 1e3)
            p99 = percentile(waits, 0.99)
            rows.append(
                Row(
                    f"{label}: consistent LIST wait p99",
                    rounds,
                    p99,
                    "ms",
                    target="p99 ≤ 20 ms",
                    met=p99 <= 20.0,
                    note=f"p50 {percentile(waits, 0.5):.2f} ms, max {max(waits):.2f} ms",
                )
            )
        return rows


def sync_scenario(endpoint: str, n: int, raw: int) -> Row:
    child = subprocess.run(
        [sys.executable, __file__, "--sync-child", endpoint],
        check=True,
        capture_output=True,
        text=True,
    )
    data = json.loads(child.stdout.strip().splitlines()[-1])
    cache_mb = (data["rss_after"] - data["rss_before"]) / 2**20
    ratio = (data["rss_after"] - data["rss_before"]) / raw
    return Row(
        "initial-sync from etcd",
        data["items"],
        data["seconds"] * 1e3,
        "ms",
        target="cache RSS ≤ 1.5x raw",
        met=ratio <= 1.5,
        note=(
            f"raw {raw / 2**20:,.0f} MiB; cache RSS {cache_mb:,.0f} MiB ({ratio:.2f}x); "
            f"peak RSS {(data['rss_peak'] - data['rss_before']) / 2**20:,.0f} MiB over start"
        ),
    )


async def sync_child(endpoint: str) -> dict[str, float]:
    async with EtcdClient([endpoint], timeout=120) as client:
        await client.current_revision(b"/registry/pods")  # channel up before the baseline
        before = rss()
        pods = SyncedCache(client, PREFIX, resource="pods", kind="Pod")
        t = time.perf_counter()
        await pods.start(timeout=600)
        seconds = time.perf_counter() - t
        gc.collect()
        after, peak = rss(), peak_rss()
        items = len(pods.cache)
        await pods.stop()
    return {
        "seconds": seconds,
        "rss_before": before,
        "rss_after": after,
        "rss_peak": peak,
        "items": items,
    }


async def main_async(args: argparse.Namespace, cluster: EtcdCluster) -> list[Row]:
    rounds = 200 if args.full else 50
    sync_n = 300_000 if args.full else 30_000
    async with EtcdClient(cluster.endpoints, timeout=120) as client:
        rows = await freshness_scenarios(client, rounds)
        await client.delete_range(PREFIX.encode(), b"/registry/pods0")
        raw = await load(client, sync_n, 1024)
    rows.append(sync_scenario(cluster.endpoints[0], sync_n, raw))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--sync-child", metavar="ENDPOINT", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.sync_child:
        print(json.dumps(asyncio.run(sync_child(args.sync_child))))
        return 0
    title = "etcd scenarios (issue 4 targets)"
    report = Report("etcd-scenarios", title, mode(args))
    with etcd() as cluster:
        rows = asyncio.run(main_async(args, cluster))
    report.how = "A real etcd 3.5 started by the script. Baselines are measured in the same run."
    report.tables.append(table(rows))
    report.data = {"rows": [asdict(r) for r in rows]}
    report.publish_as_asked(args, plot=plot_rows(rows, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
