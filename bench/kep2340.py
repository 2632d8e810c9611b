"""Scenario 1 (KEP-2340): consistent LISTs with a label selector matching none, served from
the watch cache vs from etcd, on a real etcd holding 300,000 configmaps of ~1 KB (and,
as a second variant, 300 of ~1 MB).

Kubernetes' KEP-2340 ("consistent reads from cache") motivates serving these LISTs from
the cache with exactly this load: 1 LIST/s, no resourceVersion (a consistent read), a
label selector that matches nothing, so the whole cost is reading and filtering every
object. Its published latencies (small objects) are quoted as a reference row; they were
measured by Kubernetes on its own machines, not here.

Four paths, one after the other on the same etcd and data, each measured the same way:

  cache, in process   a SyncedCache (reflector + cache) in this process; the LIST waits
                      for the cache to reach etcd's current revision (one small Range),
                      then scans the newest snapshot with the selector (native, in a
                      worker thread).
  etcd, in process    the same SyncedCache with consistent reads off
                      (ConsistentReadsMode.OFF): the LIST goes to etcd through the
                      planner's store, one Range of the whole prefix, every object decoded
                      and tested here, as Kubernetes does with the feature disabled.
  cache, HTTP         ``watchcache serve --resources configmaps`` in a child process,
                      ``GET /api/v1/configmaps?labelSelector=app=nobody``.
  etcd, HTTP          the same apiserver with consistent reads from the cache off
                      (``watchcache serve --consistent-reads off``, started through
                      ``bench/harness.py serve-from-etcd`` for a 60 s etcd timeout).

Per LIST: wall time; CPU seconds of the process doing the work (this process in
process, the server over HTTP; all threads) and of etcd (/proc/<pid>/stat), since on the
etcd paths the work moves there. The server's /metrics (or the LIST result in process)
confirms where each LIST was served from. Pacing: 1 LIST/s; a LIST slower than a second
is followed at once by the next (one LIST in flight, so a path that cannot keep up shows
its latency instead of a queue). One unmeasured LIST warms each path up.

Sizes (objects, rounds per cache path / per etcd path): quick 100,000 x 1 KB and
100 x 1 MB, 10 / 4 rounds; ``--full`` 300,000 x 1 KB and 300 x 1 MB, 200 / 100 rounds
(about 50 minutes). ``--rounds`` and ``--etcd-rounds`` override the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness import (
    KeepAliveClient,
    Server,
    cpu_seconds,
    distribution,
    etcd,
    etcd_pid,
    etcd_version,
    load_configmaps,
    mode,
    paced,
    parser,
)
from reporting import Headline, Report, figure, fmt_ms, fmt_ratio, markdown
from watchcache.cache.backing_store import Source
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.version import ConsistentReadsMode
from watchcache.registry.resources import CONFIGMAPS
from watchcache.sync.synced import SyncedCache
from watchcache.wire.options import ListOptions

SELECTOR = "app=nobody"
RATE = 1.0  # LISTs per second
WARMUP = 1
#: KEP-2340's published latencies for this load (small objects), p50/p90/p99 in ms.
KEP_ENABLED = (499.0, 582.0, 648.0)
KEP_DISABLED = (10_494.0, 17_911.0, 21_800.0)


@dataclass
class Variant:
    name: str
    count: int
    size: int
    #: KEP figures (enabled, disabled) when the KEP published some for this variant.
    kep: tuple[tuple[float, ...], tuple[float, ...]] | None = None


@dataclass
class PathResult:
    variant: str
    path: str  # "cache" | "etcd"
    transport: str  # "in process" | "HTTP"
    objects: int
    latency_ms: list[float] = field(default_factory=list)
    #: CPU seconds per LIST of the process serving it, and of etcd.
    server_cpu: list[float] = field(default_factory=list)
    etcd_cpu: list[float] = field(default_factory=list)
    achieved_rate: float = 0.0
    sources: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.path}, {self.transport}"


async def measure(
    result: PathResult, list_once: Callable[[], Awaitable[None]], rounds: int,
    server_pid: int | None, etcd_process: int,
) -> PathResult:  # fmt: skip
    for _ in range(WARMUP):
        await list_once()
    starts = []
    async for _ in paced(RATE, rounds):
        server0, etcd0 = cpu_seconds(server_pid), cpu_seconds(etcd_process)
        t = time.perf_counter()
        starts.append(t)
        await list_once()
        result.latency_ms.append((time.perf_counter() - t) * 1e3)
        result.server_cpu.append(cpu_seconds(server_pid) - server0)
        result.etcd_cpu.append(cpu_seconds(etcd_process) - etcd0)
    # The rate LISTs were started at: the pacing's 1/s unless the path is slower.
    if len(starts) > 1:
        result.achieved_rate = (len(starts) - 1) / (starts[-1] - starts[0])
    return result


async def in_process(
    client: EtcdClient, variant: Variant, path: str, rounds: int, etcd_process: int
) -> PathResult:
    consistent = ConsistentReadsMode.AUTO if path == "cache" else ConsistentReadsMode.OFF
    synced = SyncedCache(
        client,
        CONFIGMAPS.prefix,
        resource="configmaps",
        kind="ConfigMap",
        codec=CONFIGMAPS.codec(),
        mode=consistent,
    )
    await synced.start(timeout=900)
    result = PathResult(variant.name, path, "in process", len(synced.cache))
    want = Source.CACHE if path == "cache" else Source.STORE
    opts = ListOptions(label_selector=SELECTOR)

    async def list_once() -> None:
        listed = await synced.cache.list(opts)
        if listed.items or listed.source is not want:
            raise AssertionError(f"{len(listed.items)} items from {listed.source}, not 0 / {want}")
        result.sources[str(listed.source)] = result.sources.get(str(listed.source), 0) + 1

    try:
        return await measure(result, list_once, rounds, None, etcd_process)
    finally:
        await synced.stop()


async def over_http(
    endpoints: list[str], variant: Variant, path: str, rounds: int, etcd_process: int
) -> PathResult:
    async with Server(endpoints, from_etcd=path == "etcd") as server:
        http = KeepAliveClient(server.port)
        result = PathResult(variant.name, path, "HTTP", variant.count)
        query = f"/api/v1/configmaps?labelSelector={SELECTOR}"

        async def list_once() -> None:
            body = await http.get(query)
            if b'"items":[]' not in body:
                raise AssertionError(f"the selector matched objects: {body[:200]!r}")

        try:
            before = await http.lists_by_source()
            await measure(result, list_once, rounds, server.pid, etcd_process)
            after = await http.lists_by_source()
        finally:
            await http.close()
        result.sources = {k: v - before.get(k, 0) for k, v in after.items() if v > before.get(k, 0)}
        want = "cache" if path == "cache" else "etcd"
        if set(result.sources) != {want}:
            raise AssertionError(f"{path} over HTTP was served from {result.sources}")
        return result


async def run_variant(
    variant: Variant, rounds: dict[str, int], versions: dict[str, str]
) -> list[PathResult]:
    results = []
    with etcd() as cluster:
        versions["etcd"] = etcd_version(cluster)
        pid = etcd_pid(cluster)
        async with EtcdClient(cluster.endpoints, timeout=900) as client:
            t = time.perf_counter()
            await load_configmaps(client, variant.count, variant.size)
            print(
                f"{variant.name}: loaded {variant.count:,} x {variant.size:,} B in "
                f"{time.perf_counter() - t:.1f} s",
                flush=True,
            )
            for path in ("cache", "etcd"):
                results.append(await in_process(client, variant, path, rounds[path], pid))
                progress(results[-1])
        for path in ("cache", "etcd"):
            results.append(await over_http(cluster.endpoints, variant, path, rounds[path], pid))
            progress(results[-1])
    return results


def progress(r: PathResult) -> None:
    d = distribution(r.latency_ms)
    print(f"  {r.label}: p50 {fmt_ms(d['p50'])}, p99 {fmt_ms(d['p99'])}", flush=True)


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def rows_for(variant: Variant, results: list[PathResult]) -> list[list[str]]:
    rows = []
    for r in results:
        d = distribution(r.latency_ms)
        server, etcd_cpu = mean(r.server_cpu), mean(r.etcd_cpu)
        rows.append([
            f"{r.label}", f"{r.objects:,}", f"{len(r.latency_ms)}", fmt_ms(d["p50"]),
            fmt_ms(d["p90"]), fmt_ms(d["p99"]), f"{server * 1e3:,.1f} ms",
            f"{etcd_cpu * 1e3:,.1f} ms", f"{r.achieved_rate:.2f}/s",
        ])  # fmt: skip
    if variant.kep is not None:
        for label, (p50, p90, p99) in zip(("enabled", "disabled"), variant.kep, strict=True):
            rows.append([
                f"*Kubernetes, feature {label} (published in KEP-2340, not measured here)*",
                "300,000", "", fmt_ms(p50), fmt_ms(p90), fmt_ms(p99), "", "", "1/s",
            ])  # fmt: skip
    return rows


def headline(variant: Variant, results: list[PathResult]) -> list[Headline]:
    def pick(path: str, transport: str) -> PathResult:
        return next(r for r in results if r.path == path and r.transport == transport)

    def triple(r: PathResult) -> str:
        d = distribution(r.latency_ms)
        return f"{fmt_ms(d['p50'])} / {fmt_ms(d['p90'])} / {fmt_ms(d['p99'])}"

    def cpu(r: PathResult) -> str:
        return f"{mean(r.server_cpu) * 1e3:,.1f} + {mean(r.etcd_cpu) * 1e3:,.1f} ms"

    kep = ""
    if variant.kep is not None:
        on, off = variant.kep
        kep = (
            f"enabled {on[0]:,.0f} / {on[1]:,.0f} / {on[2]:,.0f} ms; "
            f"disabled {off[0]:,.0f} / {off[1]:,.0f} / {off[2]:,.0f} ms (300,000 objects)"
        )
    lines = []
    for transport in ("HTTP", "in process"):
        cache, store = pick("cache", transport), pick("etcd", transport)
        ratio = distribution(store.latency_ms)["p50"] / distribution(cache.latency_ms)["p50"]
        lines += [
            Headline(
                "", f"p50 / p90 / p99, {transport}", triple(cache), triple(store),
                kep if transport == "HTTP" else "", f"p50: cache {fmt_ratio(ratio)} faster",
            ),
            Headline("", f"CPU per LIST (server + etcd), {transport}", cpu(cache), cpu(store)),
        ]  # fmt: skip
    lines[
        0
    ].scenario = (
        f"KEP-2340: consistent LIST, selector matching none, {variant.count:,} x {variant.name}"
    )
    return lines


def plot(variants: list[Variant], results: list[PathResult]) -> Callable[[Path], None]:
    def draw(path: Path) -> None:
        title = "KEP-2340: consistent LIST, label selector matching none (1 LIST/s)"
        with figure(path, title=title, ncols=len(variants), nrows=2, size=(13, 8)) as axes:
            for col, variant in enumerate(variants):
                mine = [r for r in results if r.variant == variant.name]
                top, bottom = axes[col], axes[len(variants) + col]
                labels = [r.label for r in mine]
                top.boxplot([r.latency_ms for r in mine], whis=(0, 100))
                top.set_xticks(range(1, len(mine) + 1), labels, fontsize=8)
                top.set_yscale("log")
                top.set_ylabel("latency per LIST (ms, log)")
                top.set_title(f"{variant.count:,} x {variant.name}", fontsize=10)
                if variant.kep is not None:
                    for (p50, _, p99), label, color in zip(
                        variant.kep, ("enabled", "disabled"), ("tab:green", "tab:red"), strict=True
                    ):
                        top.axhspan(p50, p99, alpha=0.15, color=color)
                        top.text(0.55, p50, f"Kubernetes {label}, p50-p99 (KEP)", fontsize=7)
                xs = range(len(mine))
                server = [mean(r.server_cpu) * 1e3 for r in mine]
                etcd_cpu = [mean(r.etcd_cpu) * 1e3 for r in mine]
                bottom.bar(xs, server, label="serving process")
                bottom.bar(xs, etcd_cpu, bottom=server, label="etcd")
                bottom.set_xticks(list(xs), labels, fontsize=8)
                bottom.set_yscale("symlog", linthresh=1)
                bottom.set_ylabel("CPU per LIST (ms, log)")
                bottom.legend(fontsize=8)

    return draw


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--rounds", type=int, help="LISTs per cache path")
    p.add_argument("--etcd-rounds", type=int, help="LISTs per etcd path")
    p.add_argument("--small", type=int, help="number of ~1 KB objects")
    p.add_argument("--large", type=int, help="number of ~1 MB objects")
    args: argparse.Namespace = p.parse_args(argv)
    small, large = (300_000, 300) if args.full else (100_000, 100)
    variants = [
        Variant("1 KB", args.small or small, 1024, (KEP_ENABLED, KEP_DISABLED)),
        Variant("1 MB", args.large or large, 1_000_000),
    ]
    rounds = {
        "cache": args.rounds or (200 if args.full else 10),
        "etcd": args.etcd_rounds or (100 if args.full else 4),
    }
    report = Report(
        "kep2340", "Scenario 1: KEP-2340, consistent LIST from cache vs etcd", mode(args)
    )
    versions: dict[str, str] = {}
    results: list[PathResult] = []
    for variant in variants:
        results += asyncio.run(run_variant(variant, rounds, versions))
    header = ["path", "objects", "LISTs", "p50", "p90", "p99", "CPU/LIST serving process",
              "CPU/LIST etcd", "rate"]  # fmt: skip
    for variant in variants:
        mine = [r for r in results if r.variant == variant.name]
        report.tables.append(
            f"**{variant.count:,} configmaps x {variant.name}**\n\n"
            + markdown(header, rows_for(variant, mine))
        )
        report.headline += headline(variant, mine)
    quick_note = (
        "" if args.full else " Quick mode: fewer objects (100,000 small, 100 large, where "
        "the KEP's load has 300,000) and few rounds: a preview, not the numbers to quote."
    )  # fmt: skip
    report.how = (
        f"etcd {versions.get('etcd', '?')}; 1 LIST/s (back to back when slower), "
        f"{rounds['cache']} LISTs per cache path, {rounds['etcd']} per etcd path; "
        "CPU per LIST is the mean over the LISTs (in process: this process; HTTP: the server "
        "process), etcd's from /proc (counted in 10 ms clock ticks: a mean over n LISTs is "
        "good to 10/n ms). See the script's docstring for the method." + quick_note
    )
    report.data = {
        "selector": SELECTOR,
        "rate": RATE,
        "rounds": rounds,
        "etcd_version": versions.get("etcd"),
        "variants": [asdict(v) for v in variants],
        "kep2340_published_ms": {"enabled": KEP_ENABLED, "disabled": KEP_DISABLED},
        "paths": [asdict(r) | {"latency": distribution(r.latency_ms)} for r in results],
    }
    report.publish_as_asked(args, plot=plot(variants, results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
