"""Scenario 3: watch fan-out. 1,000 watchers, each with a label selector that matches 1 %
of the events, while 5,000 events/s are applied; delay from apply to delivery, events
lost (expected - received, per watcher: must be 0), and whether the applier kept the rate.

Three variants, from the cache alone to the whole stack:

  cache        a WatchCache of 10,000 pods (labels ``app=app-<0..99>`` at random) and 1,000
               watchers (``app=app-<w mod 100>``: 10 per label value), each drained by its
               own task. MODIFIED events of random pods are applied on the event loop at
               5,000/s: the events due so far, at most 50 before yielding to the
               watchers' tasks (an etcd watch response carries a batch of events the same
               way), sleeping when none is due. Delay: ``cache.apply`` called -> the
               watcher's task receives it.
  etcd         the same 1,000 watchers on a SyncedCache (reflector + cache) in this
               process; a writer in a child process creates configmaps (labels
               ``shard=<0..99>``) in etcd at 500/s (this process decodes, applies and
               dispatches every event on one thread, next to etcd and the writer).
               Delay: the writer sends the create -> a watcher here receives it
               (CLOCK_MONOTONIC is shared by processes), so it includes etcd's commit, its
               watch stream and the reflector.
  HTTP         ``watchcache serve`` in a child process; 200 watch connections (one per
               namespace, no selector) read with httpx, while this process creates
               configmaps in etcd at 500/s. Delay: create sent -> the line arrives.

Rates: "achieved" is the rate events were applied (cache) or written (etcd, HTTP);
"delivered" is events / (last delivery - first apply or write), the rate watchers got
them at. A variant keeps its rate when both are within 5 % of the target; when the
applier cannot keep it, events wait before being applied, and that wait is not in the
cache variant's delay (it counts from apply). Quick: 5 s of events
(cache, etcd) and 5 s with 50 connections (HTTP); ``--full``: 30 s and 20 s with 200.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from cache_scenarios import APPS, loaded_cache, modifications, pods
from harness import Server, distribution, etcd, etcd_version, load_configmaps, mode, paced, parser
from reporting import Headline, Report, figure, fmt_ms, markdown
from watchcache.cache.watch_cache import WatchCache
from watchcache.cache.watcher import Watcher
from watchcache.etcd.client import EtcdClient
from watchcache.registry.resources import CONFIGMAPS
from watchcache.sync.synced import SyncedCache
from watchcache.wire.errors import WatchTerminatedError
from watchcache.wire.options import WatchOptions

WATCHERS = 1_000
CACHE_RATE = 5_000
ETCD_RATE = 500
HTTP_RATE = 500
BATCH = 50
KEPT = 0.95  # a rate within 5 % of the target counts as kept
DRAIN_SECONDS = 10.0


@dataclass
class VariantResult:
    variant: str
    watchers: int
    events: int
    target_rate: float
    achieved_rate: float
    delivered_rate: float
    delays_ms: list[float] = field(repr=False)
    expected: int
    received: int
    lost: int
    duplicates_or_reordered: int
    terminated: int

    @property
    def kept_rate(self) -> bool:
        return min(self.achieved_rate, self.delivered_rate) >= KEPT * self.target_rate

    def summary(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k != "delays_ms"}
        return d | {"delay_ms": distribution(self.delays_ms), "cdf_ms": cdf(self.delays_ms)}


def cdf(values: list[float], points: int = 200) -> list[float]:
    """``points`` evenly spaced quantiles (for the plot; the samples themselves are many)."""
    ordered = sorted(values)
    if not ordered:
        return []
    return [ordered[min(len(ordered) - 1, i * len(ordered) // points)] for i in range(points)]


class Tally:
    """What 1,000 watchers received: per watcher the count and the last rv (an rv not above
    the last is a duplicate or out of order), and every delivery's (rv, arrival time)."""

    def __init__(self, watchers: int) -> None:
        self.received = [0] * watchers
        self.last_rv = [0] * watchers
        self.bad = 0
        self.terminated = 0
        self.arrivals: list[tuple[int, float]] = []

    async def drain(self, index: int, watcher: Watcher) -> None:
        arrivals, now = self.arrivals, time.perf_counter
        try:
            async for event in watcher:
                rv = event.resource_version
                arrivals.append((rv, now()))
                if rv <= self.last_rv[index]:
                    self.bad += 1
                self.last_rv[index] = rv
                self.received[index] += 1
        except WatchTerminatedError:
            self.terminated += 1

    def result(
        self, variant: str, *, expected: list[int], target: float, achieved: float,
        sent: dict[int, float],
    ) -> VariantResult:  # fmt: skip
        """The variant's result. ``expected``: deliveries due to each watcher; ``sent``: when
        each event (by rv) was applied or written."""
        received = sum(self.received)
        lost = sum(max(0, want - got) for want, got in zip(expected, self.received, strict=True))
        delays = [(t - sent[rv]) * 1e3 for rv, t in self.arrivals if rv in sent]
        span = max((t for _, t in self.arrivals), default=0.0) - min(sent.values(), default=0.0)
        return VariantResult(
            variant, WATCHERS, len(sent), target, achieved, len(sent) / max(span, 1e-9),
            delays, sum(expected), received, lost, self.bad, self.terminated,
        )  # fmt: skip


async def watchers_on(
    cache: WatchCache, selector: str, tally: Tally
) -> tuple[list[Watcher], list[asyncio.Task[None]]]:
    """WATCHERS watchers from the cache's rv, the w-th selecting ``selector.format(w % 100)``,
    each drained into ``tally`` by a task of its own."""
    rv = str(cache.resource_version)
    watchers = [
        await cache.watch(
            WatchOptions(resource_version=rv, label_selector=selector.format(w % APPS))
        )
        for w in range(WATCHERS)
    ]
    return watchers, [asyncio.create_task(tally.drain(i, w)) for i, w in enumerate(watchers)]


async def settle(tally: Tally, expected: list[int], tasks: list[asyncio.Task[None]]) -> None:
    """Wait until every expected delivery arrived (or DRAIN_SECONDS passed), then stop."""
    deadline = time.perf_counter() + DRAIN_SECONDS
    while sum(tally.received) < sum(expected) and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# ---------------------------------------------------------------------------------------
# Variant 1: the cache alone


async def cache_variant(seconds: float) -> VariantResult:
    items = pods(10_000, 1024, 3)
    cache = loaded_cache(items)
    tally = Tally(WATCHERS)
    watchers, tasks = await watchers_on(cache, "app=app-{}", tally)
    total = int(seconds * CACHE_RATE)
    events = modifications(items, cache.resource_version, 3)
    per_label = [0] * APPS
    applied: dict[int, float] = {}
    begin = time.perf_counter()
    done = 0
    while done < total:
        now = time.perf_counter()
        due = min(total, int((now - begin) * CACHE_RATE) + 1)
        if due <= done:
            await asyncio.sleep(begin + done / CACHE_RATE - now)
            continue
        for _ in range(min(due - done, BATCH)):
            event = next(events)
            per_label[int(event.object.labels["app"].removeprefix("app-"))] += 1
            applied[event.resource_version] = time.perf_counter()
            cache.apply(event)
            done += 1
        await asyncio.sleep(0)
    elapsed = time.perf_counter() - begin
    expected = [per_label[w % APPS] for w in range(WATCHERS)]
    await settle(tally, expected, tasks)
    for watcher in watchers:
        watcher.close()
    return tally.result(
        "cache", expected=expected, target=CACHE_RATE, achieved=total / elapsed, sent=applied
    )


# ---------------------------------------------------------------------------------------
# Variant 2: through etcd, the writer in a child process


def configmap(namespace: str, name: str, labels: dict[str, str], payload: int) -> bytes:
    """A configmap as the writers store it in etcd (with ``payload`` bytes of data)."""
    metadata = {"name": name, "namespace": namespace, "labels": labels}
    obj = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": metadata}
    if payload:
        obj["data"] = {"payload": "x" * payload}
    return json.dumps(obj, separators=(",", ":")).encode()


async def writer(endpoint: str, rate: float, seconds: float) -> dict[str, Any]:
    """Create configmaps labelled ``shard=<i mod 100>`` at ``rate``; the send time of each,
    by the revision etcd gave it."""
    sent: dict[int, float] = {}
    shards = [0] * APPS
    semaphore = asyncio.Semaphore(64)
    total = int(rate * seconds)
    async with EtcdClient([endpoint], timeout=60) as client:

        async def create(i: int) -> None:
            ns, name, shard = f"fan-{i % 10}", f"cm-{i:07d}", i % APPS
            value = configmap(ns, name, {"shard": str(shard)}, 900)
            async with semaphore:
                t = time.perf_counter()
                created = await client.create(CONFIGMAPS.key(ns, name).encode(), value)
            sent[created.revision] = t
            shards[shard] += 1

        begin = time.perf_counter()
        tasks = [asyncio.create_task(create(i)) async for i in paced(rate, total)]
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - begin
    return {"sent": sent, "shards": shards, "rate": total / elapsed}


async def etcd_variant(endpoint: str, seconds: float) -> VariantResult:
    async with EtcdClient([endpoint], timeout=120) as client:
        await load_configmaps(client, 10_000, 1024)
        synced = SyncedCache(
            client, CONFIGMAPS.prefix, resource="configmaps", kind="ConfigMap",
            codec=CONFIGMAPS.codec(),
        )  # fmt: skip
        await synced.start(timeout=300)
        tally = Tally(WATCHERS)
        try:
            watchers, tasks = await watchers_on(synced.cache, "shard={}", tally)
            child = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--writer", endpoint, "--rate", str(ETCD_RATE),
                "--seconds", str(seconds), stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, _ = await child.communicate()
            if child.returncode != 0:
                raise RuntimeError(f"the writer failed ({child.returncode})")
            wrote = json.loads(out.decode().strip().splitlines()[-1])
            sent = {int(rv): t for rv, t in wrote["sent"].items()}
            expected = [wrote["shards"][w % APPS] for w in range(WATCHERS)]
            await settle(tally, expected, tasks)
            for watcher in watchers:
                watcher.close()
        finally:
            await synced.stop()
    return tally.result(
        "etcd", expected=expected, target=ETCD_RATE, achieved=wrote["rate"], sent=sent
    )


# ---------------------------------------------------------------------------------------
# Variant 3: over HTTP


async def http_variant(endpoints: list[str], connections: int, seconds: float) -> VariantResult:
    namespaces = [f"http-{i:03d}" for i in range(connections)]
    arrivals: dict[str, float] = {}
    duplicates = 0
    ready = asyncio.Event()
    started = 0

    async def watch(http: httpx.AsyncClient, ns: str, rv: str) -> None:
        nonlocal duplicates, started
        params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": str(int(seconds) + 60)}
        async with http.stream("GET", f"/api/v1/namespaces/{ns}/configmaps", params=params) as r:
            started += 1
            if started == connections:
                ready.set()
            async for line in r.aiter_lines():
                if line:
                    event = json.loads(line)
                    name = event["object"]["metadata"]["name"]
                    duplicates += name in arrivals
                    arrivals[name] = time.perf_counter()

    sent: dict[str, float] = {}
    limits = httpx.Limits(max_connections=connections + 10)
    async with (
        Server(endpoints) as server,
        EtcdClient(endpoints, timeout=60) as client,
        httpx.AsyncClient(base_url=server.url, timeout=None, limits=limits) as http,
    ):
        listed = await http.get("/api/v1/configmaps", params={"limit": "1"})
        rv = listed.json()["metadata"]["resourceVersion"]
        tasks = [asyncio.create_task(watch(http, ns, rv)) for ns in namespaces]
        await asyncio.wait_for(ready.wait(), 60)
        semaphore = asyncio.Semaphore(64)

        async def create(i: int) -> None:
            ns, name = namespaces[i % connections], f"w-{i:06d}"
            value = configmap(ns, name, {}, 0)
            async with semaphore:
                sent[name] = time.perf_counter()
                await client.create(CONFIGMAPS.key(ns, name).encode(), value)

        total = int(seconds * HTTP_RATE)
        begin = time.perf_counter()
        await asyncio.gather(
            *[asyncio.create_task(create(i)) async for i in paced(HTTP_RATE, total)]
        )
        achieved = total / (time.perf_counter() - begin)
        deadline = time.perf_counter() + DRAIN_SECONDS
        while len(arrivals) < total and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    delays = [(arrivals[n] - t) * 1e3 for n, t in sent.items() if n in arrivals]
    span = max(arrivals.values(), default=0.0) - min(sent.values(), default=0.0)
    return VariantResult(
        "HTTP", connections, total, HTTP_RATE, achieved, total / max(span, 1e-9), delays,
        total, len(delays), total - len(delays), duplicates, 0,
    )  # fmt: skip


async def scenario(args: argparse.Namespace, versions: dict[str, str]) -> list[VariantResult]:
    seconds = 30.0 if args.full else 5.0
    results = [await cache_variant(seconds)]
    progress(results[-1])
    with etcd() as cluster:
        versions["etcd"] = etcd_version(cluster)
        results.append(await etcd_variant(cluster.endpoints[0], seconds))
        progress(results[-1])
    with etcd() as cluster:
        http_seconds, connections = (20.0, 200) if args.full else (5.0, 50)
        results.append(await http_variant(cluster.endpoints, connections, http_seconds))
        progress(results[-1])
    return results


def progress(r: VariantResult) -> None:
    d = distribution(r.delays_ms)
    print(
        f"  {r.variant}: delay p50 {fmt_ms(d['p50'])}, p99 {fmt_ms(d['p99'])}, lost {r.lost}, "
        f"{r.delivered_rate:,.0f} events/s delivered",
        flush=True,
    )


def table(results: list[VariantResult]) -> str:
    rows = []
    for r in results:
        d = distribution(r.delays_ms)
        rows.append([
            r.variant, f"{r.watchers:,}", f"{r.events:,}", f"{r.target_rate:,.0f}/s",
            f"{r.achieved_rate:,.0f}/s", f"{r.delivered_rate:,.0f}/s",
            "yes" if r.kept_rate else "no", fmt_ms(d["p50"]),
            fmt_ms(d["p99"]), fmt_ms(d["max"]), f"{r.expected:,}", f"{r.lost:,}",
            f"{r.duplicates_or_reordered}", f"{r.terminated}",
        ])  # fmt: skip
    header = ["variant", "watchers", "events", "target rate", "achieved", "delivered", "kept",
              "delay p50", "delay p99", "max", "deliveries expected", "lost",
              "repeated / out of order", "watchers terminated"]  # fmt: skip
    return markdown(header, rows, "lrrrrrcrrrrrrr")


def plot(results: list[VariantResult]) -> Callable[[Path], None]:
    def draw(path: Path) -> None:
        title = "Watch fan-out: delivery delay, cumulative distribution"
        with figure(path, title=title, size=(9, 5)) as (ax,):
            for r in results:
                ordered = sorted(r.delays_ms)
                if not ordered:
                    continue
                ys = [(i + 1) / len(ordered) for i in range(len(ordered))]
                step = max(1, len(ordered) // 2000)
                ax.plot(
                    ordered[::step], ys[::step],
                    label=f"{r.variant}: {r.watchers:,} watchers, {r.delivered_rate:,.0f} events/s "
                    f"delivered, lost {r.lost}",
                )  # fmt: skip
            ax.set_xscale("log")
            ax.set_xlabel("delay from apply (cache) or write (etcd, HTTP) to delivery, ms (log)")
            ax.set_ylabel("fraction of deliveries")
            ax.axhline(0.99, color="grey", linewidth=0.5, linestyle=":")
            ax.legend(fontsize=8, loc="lower right")

    return draw


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--writer", metavar="ENDPOINT", help=argparse.SUPPRESS)
    p.add_argument("--rate", type=float, help=argparse.SUPPRESS)
    p.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.writer:
        print(json.dumps(asyncio.run(writer(args.writer, args.rate, args.seconds))))
        return 0
    versions: dict[str, str] = {}
    report = Report("watch", "Scenario 3: watch fan-out, 1,000 label-selected watchers", mode(args))
    results = asyncio.run(scenario(args, versions))
    report.how = (
        f"etcd {versions.get('etcd', '?')}. Each cache/etcd watcher's selector matches 1 % of "
        "the events (10 watchers per event). Lost = deliveries expected - received; delays "
        "in ms. See the script's docstring for the method."
        + ("" if args.full else " Quick mode: 5 s of events per variant, 50 HTTP connections.")
    )
    report.tables.append(table(results))
    for r in results:
        d = distribution(r.delays_ms)
        report.headline.append(
            Headline(
                "Watch fan-out" if r is results[0] else "",
                f"{r.variant}: {r.watchers:,} watchers at {r.target_rate:,.0f} events/s: "
                "delay p50 / p99, lost",
                f"{fmt_ms(d['p50'])} / {fmt_ms(d['p99'])}, lost {r.lost}",
                "",
                "",
                f"applied/written {r.achieved_rate:,.0f}/s, delivered {r.delivered_rate:,.0f}/s"
                + ("" if r.kept_rate else " (rate not kept)"),
            )
        )
    report.data = {
        "watchers": WATCHERS,
        "etcd_version": versions.get("etcd"),
        "variants": [r.summary() for r in results],
    }
    report.publish_as_asked(args, plot=plot(results))
    return 0 if all(r.lost == 0 and not r.duplicates_or_reordered for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
