"""Scenario 4: the memory that snapshots pin. Steady writes of 1,000/s for 75 s to a
WatchCache of 100,000 pods of ~1 KB that keeps one snapshot per resourceVersion for its
75 s history window (Kubernetes' default), with its real history and snapshot registry.

Every second: the registry's snapshot count and ``pinned_bytes()`` (the engine's own
count of nodes and items that only snapshots keep alive), the history's length, and the
process's RSS. The same writes run at the same time, in a second process, on a cache with
snapshots off (``WatchCache(snapshots=False)``: the history still keeps every event and
the object it replaced): the difference between the two RSS curves is what the snapshots
cost the process, next to what the registry reports.

Each variant runs in a child process of its own (this script with ``--child``), so each
RSS is only its cache's; both are paced on their own clocks (1,000 MODIFIED events of
random pods per second, applied in 10 ms ticks). Quick: 25 s of writes (the window then
holds 25,000 snapshots, not 75,000; the per-snapshot figure is the same kind of number);
``--full``: 75 s. ``--seconds`` overrides.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cache_scenarios import loaded_cache, modifications, pods
from harness import mode, parser, rss
from reporting import Headline, Report, figure, fmt_mib, markdown

OBJECTS = 100_000
RATE = 1_000
TICK = 0.01


def child(snapshots: bool, seconds: float) -> dict[str, Any]:
    """Load the cache, then write at RATE for ``seconds``, sampling once a second."""
    items = pods(OBJECTS, 1024, 4)
    cache = loaded_cache(items, snapshots=snapshots)
    events = modifications(items, cache.resource_version, 4)
    del items
    gc.collect()
    registry, history = cache.registry, cache.history
    samples: list[dict[str, float]] = []
    begin = time.perf_counter()

    def sample(writes: int) -> None:
        samples.append(
            {
                "t": time.perf_counter() - begin,
                "writes": writes,
                "snapshots": len(registry),
                "pinned_bytes": registry.pinned_bytes(),
                "history": len(history),
                "rss": rss(),
            }
        )

    sample(0)
    total, done, next_sample = int(seconds * RATE), 0, 1.0
    while done < total:
        elapsed = time.perf_counter() - begin
        due = min(total, int(elapsed * RATE))
        for _ in range(due - done):
            cache.apply(next(events))
        done = max(done, due)
        if elapsed >= next_sample:
            sample(done)
            next_sample += 1.0
        time.sleep(TICK)
    sample(done)
    return {
        "snapshots_enabled": snapshots,
        "seconds": time.perf_counter() - begin,
        "writes": done,
        "samples": samples,
    }


async def run_children(seconds: float) -> list[dict[str, Any]]:
    async def one(flag: str) -> dict[str, Any]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--child", flag, "--seconds", str(seconds),
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"the {flag} child failed ({process.returncode})")
        parsed: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
        return parsed

    return list(await asyncio.gather(one("on"), one("off")))


def growth(run: dict[str, Any]) -> int:
    samples = run["samples"]
    return int(samples[-1]["rss"] - samples[0]["rss"])


def plot(runs: list[dict[str, Any]]) -> Callable[[Path], None]:
    def draw(path: Path) -> None:
        title = f"{RATE:,} writes/s to a cache of {OBJECTS:,} objects, one snapshot per rv"
        with figure(path, title=title, ncols=2, size=(13, 4.5)) as (memory, pinned):
            for run in runs:
                label = "snapshots on" if run["snapshots_enabled"] else "snapshots off"
                ts = [s["t"] for s in run["samples"]]
                memory.plot(ts, [s["rss"] / 2**20 for s in run["samples"]], label=f"RSS, {label}")
            on = next(r for r in runs if r["snapshots_enabled"])["samples"]
            ts = [s["t"] for s in on]
            memory.plot(ts, [s["pinned_bytes"] / 2**20 for s in on], label="pinned (registry)")
            memory.set_xlabel("seconds of writes")
            memory.set_ylabel("MiB")
            memory.legend(fontsize=8)
            # From one second of writes on: before, one snapshot and no writes say nothing.
            steady = [s for s in on if s["writes"] >= RATE]
            per = [s["pinned_bytes"] / s["snapshots"] for s in steady]
            pinned.plot([s["t"] for s in steady], per, color="tab:purple")
            pinned.set_ylim(0, max(per, default=1.0) * 1.25)
            pinned.set_xlabel("seconds of writes")
            pinned.set_ylabel("bytes pinned per stored snapshot", color="tab:purple")
            count = pinned.twinx()
            count.plot(ts, [s["snapshots"] for s in on], color="tab:grey", linestyle="--")
            count.set_ylabel("snapshots stored", color="tab:grey")

    return draw


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--seconds", type=float, help="seconds of writes (quick 25, full 75)")
    p.add_argument("--child", choices=["on", "off"], help="(internal) run one variant")
    args = p.parse_args(argv)
    seconds = args.seconds or (75.0 if args.full else 25.0)
    if args.child:
        print(json.dumps(child(args.child == "on", seconds)))
        return 0
    report = Report("snapshot-memory", "Scenario 4: memory pinned by snapshots", mode(args))
    runs = asyncio.run(run_children(seconds))
    on = next(r for r in runs if r["snapshots_enabled"])
    off = next(r for r in runs if not r["snapshots_enabled"])
    last = on["samples"][-1]
    per_snapshot = last["pinned_bytes"] / max(1, last["snapshots"])
    extra = growth(on) - growth(off)
    rows = []
    for run in (on, off):
        end = run["samples"][-1]
        stored = end["snapshots"]
        rows.append([
            "on" if run["snapshots_enabled"] else "off", f"{run['writes']:,}",
            f"{run['writes'] / run['seconds']:,.0f}/s", f"{stored:,}", f"{end['history']:,}",
            fmt_mib(end["pinned_bytes"]),
            f"{end['pinned_bytes'] / stored:,.0f} B" if stored else "-",
            fmt_mib(run["samples"][0]["rss"]), fmt_mib(end["rss"]), fmt_mib(growth(run)),
        ])  # fmt: skip
    header = ["snapshots", "writes", "rate", "snapshots stored", "history events",
              "pinned (registry)", "pinned per snapshot", "RSS at start", "RSS at end",
              "RSS growth"]  # fmt: skip
    report.tables.append(markdown(header, rows, "lrrrrrrrrr"))
    report.how = (
        f"{OBJECTS:,} pods of ~1 KB, {RATE:,} MODIFIED events/s for {seconds:.0f} s, history "
        "window 75 s (Kubernetes' default), each variant in its own process at the same time. "
        f"RSS growth with snapshots minus without: {fmt_mib(extra)}, "
        f"{extra / max(1, last['snapshots']):,.0f} B per stored snapshot."
        + ("" if args.full else " Quick mode: 25 s of writes, not 75 s.")
    )
    report.headline = [
        Headline(
            f"Snapshot memory, {RATE:,} writes/s for {seconds:.0f} s, {OBJECTS:,} x 1 KB",
            "bytes pinned per snapshot (registry); RSS cost per snapshot",
            f"{per_snapshot:,.0f} B; {extra / max(1, last['snapshots']):,.0f} B",
            "",
            "",
            f"{last['snapshots']:,} snapshots, {fmt_mib(last['pinned_bytes'])} pinned",
        )
    ]
    report.data = {
        "objects": OBJECTS,
        "rate": RATE,
        "seconds": seconds,
        "pinned_per_snapshot": per_snapshot,
        "rss_cost_of_snapshots": extra,
        "runs": runs,
    }
    report.publish_as_asked(args, plot=plot(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
