"""The kubelets' watch: 5,000 node watchers at 100 pod updates/s, with and without the
watcher index, in the same run (issue 24, deliverable 3).

Workload: a WatchCache of pods spread evenly over 5,000 nodes (quick: 25,000 pods, 5 per
node; ``--full``: 150,000, 30 per node, as KEP-2340's cluster), 1 KB each, 100 per
namespace. 5,000 watchers, one per node, ``fieldSelector=spec.nodeName=node-<i>`` over all
namespaces (what each kubelet asks for), each drained by its own task. Changes are applied
on the event loop at 100/s (``harness.paced``): 85 % status updates in place, 5 % moves to
another node (the old node's watcher gets a DELETED, the new one's an ADDED), 5 % deletes,
5 % creates on a random node.

Two variants, one after the other, on identical caches and event streams:

  indexed    the cache as configured by default: core pods file watchers by
             ``spec.nodeName`` (Kubernetes' trigger field), so an event is offered to the
             watchers of its new and previous node only;
  unindexed  the same cache with ``trigger_fields=()``: the node watchers are unfiled
             and every event is offered to all 5,000 (the dispatch before the index).

Each variant applies the paced events first, then ``--burst`` more back to back, 100 at
a time before yielding to the watchers' tasks (as the reflector applies one etcd watch
response). The two regimes differ on this machine: the process sleeps 10 ms between
paced events, and the first Python run after such a sleep is several times slower than
the same code run again (cold caches of a virtual CPU that halted). The run measures that
penalty on its own, on a fixed snippet (twenty dict lookups), so the paced numbers can be
read against it.

Reported per variant: dispatch cost per event (the time ``WatchCache._dispatch`` takes,
from finding the watchers to queueing the event and waking their tasks: mean, p50, p99)
paced and back to back; delivery delay of the paced events (``cache.apply`` called -> the
watcher's task has the event: p50, p99, max); deliveries expected (a brute force over the
nodes each event touches) and received, lost (per watcher, expected - received),
duplicated or reordered, watchers terminated. The ratios are the indexed mean dispatch
cost over the unindexed one, from the same run, per regime. Targets (paced): dispatch
<= 50 µs per event, delivery p99 <= 50 ms, nothing lost.

Usage: ``python bench/watch_dispatch.py [--full] [--seconds S] [--burst N]`` (quick:
25,000 pods and 10 s of paced events per variant; full: 150,000 and 60 s; 2,000 back to
back); prints a table and writes ``<results>/watch-dispatch.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness import RESULTS, distribution, paced, percentile
from watchcache import Item
from watchcache.cache.event import Event, EventType
from watchcache.cache.watch_cache import WatchCache
from watchcache.cache.watcher import Watcher
from watchcache.wire.errors import WatchTerminatedError
from watchcache.wire.options import WatchOptions

PREFIX = "/registry/pods/"
NODES = 5_000
RATE = 100.0
PODS_PER_NAMESPACE = 100
VALUE_BYTES = 1024
DRAIN_SECONDS = 10.0
#: Events applied back to back before yielding, as from one etcd watch response.
BATCH = 100
TARGET_DISPATCH_US = 50.0
TARGET_DELIVERY_P99_MS = 50.0


def node_name(node: int) -> str:
    return f"node-{node:05d}"


def pod(i: int, node: int, rv: int, phase: str) -> Item:
    """Pod ``i`` bound to ``node`` at ``rv``: a JSON object of VALUE_BYTES with the
    fields and labels the apiserver's codec extracts for pods."""
    namespace, name = f"ns-{i // PODS_PER_NAMESPACE:05d}", f"pod-{i:07d}"
    head = (
        f'{{"metadata":{{"name":"{name}","namespace":"{namespace}","resourceVersion":"{rv}"}},'
        f'"spec":{{"nodeName":"{node_name(node)}"}},"status":{{"phase":"{phase}"}},"pad":"'
    )
    value = (head + "x" * max(0, VALUE_BYTES - len(head) - 2) + '"}').encode()
    fields = {
        "metadata.name": name,
        "metadata.namespace": namespace,
        "spec.nodeName": node_name(node),
        "status.phase": phase,
    }
    return Item(f"{PREFIX}{namespace}/{name}", value, rv, {"app": f"app-{i % 100}"}, fields)


@dataclass
class Workload:
    """The initial pods (pod i on node i mod NODES) and the change stream, made once so
    both variants apply the very same events. ``touched[k]``: the nodes event k concerns
    (its new and its previous object's)."""

    initial: list[Item]
    events: list[Event]
    touched: list[tuple[int, ...]]


def workload(pods: int, count: int, seed: int) -> Workload:
    rng = random.Random(seed)
    node_of = {i: i % NODES for i in range(pods)}
    initial = [pod(i, node, 1, "Running") for i, node in node_of.items()]
    events: list[Event] = []
    touched: list[tuple[int, ...]] = []
    next_pod = pods
    live = list(node_of)
    for rv in range(2, count + 2):
        roll = rng.random()
        if roll < 0.05:
            i, next_pod = next_pod, next_pod + 1
            node_of[i] = rng.randrange(NODES)
            live.append(i)
            events.append(Event(EventType.ADDED, pod(i, node_of[i], rv, "Pending"), None, rv))
            touched.append((node_of[i],))
            continue
        slot = rng.randrange(len(live))
        i = live[slot]
        old = node_of[i]
        if roll < 0.10:
            live[slot] = live[-1]
            live.pop()
            del node_of[i]
            events.append(Event(EventType.DELETED, pod(i, old, rv, "Succeeded"), None, rv))
            touched.append((old,))
        elif roll < 0.15:
            node_of[i] = (old + 1 + rng.randrange(NODES - 1)) % NODES
            events.append(Event(EventType.MODIFIED, pod(i, node_of[i], rv, "Running"), None, rv))
            touched.append((node_of[i], old))
        else:
            phase = rng.choice(["Running", "Pending"])
            events.append(Event(EventType.MODIFIED, pod(i, old, rv, phase), None, rv))
            touched.append((old,))
    return Workload(initial, events, touched)


class TimedCache(WatchCache):
    """A WatchCache that records how long each event's dispatch takes."""

    def __init__(self, prefix: str, **kwargs: Any) -> None:
        super().__init__(prefix, **kwargs)
        self.dispatch_seconds: list[float] = []

    def _dispatch(self, event: Event, previous: Item | None, key: str) -> None:
        start = time.perf_counter()
        super()._dispatch(event, previous, key)
        self.dispatch_seconds.append(time.perf_counter() - start)


@dataclass
class VariantResult:
    variant: str
    pods: int
    watchers: int
    paced_events: int
    burst_events: int
    achieved_rate: float
    #: Dispatch per event while paced at RATE (the process idles between events).
    dispatch_us: dict[str, float]
    #: Dispatch per event applied back to back, BATCH at a time (caches warm).
    burst_dispatch_us: dict[str, float]
    #: cache.apply called -> the watcher's task has the event, paced events only.
    delivery_ms: dict[str, float]
    expected: int
    received: int
    lost: int
    duplicates_or_reordered: int
    terminated: int

    @property
    def met(self) -> bool:
        return (
            self.dispatch_us["mean"] <= TARGET_DISPATCH_US
            and self.delivery_ms["p99"] <= TARGET_DELIVERY_P99_MS
            and self.lost == 0
            and self.duplicates_or_reordered == 0
            and self.terminated == 0
        )


async def run_variant(
    name: str, work: Workload, paced_events: int, trigger_fields: tuple[str, ...] | None
) -> VariantResult:
    """One variant: the first ``paced_events`` events at RATE, the rest back to back in
    batches of BATCH (yielding to the watchers' tasks between batches)."""
    cache = TimedCache(PREFIX, resource="pods", kind="Pod", trigger_fields=trigger_fields)
    cache.replace(work.initial, 1)
    received = [0] * NODES
    last_rv = [0] * NODES
    bad = terminated = 0
    arrivals: list[tuple[int, float]] = []

    async def drain(node: int, watcher: Watcher) -> None:
        nonlocal bad, terminated
        now = time.perf_counter
        try:
            async for event in watcher:
                rv = event.resource_version
                arrivals.append((rv, now()))
                if rv <= last_rv[node]:
                    bad += 1
                last_rv[node] = rv
                received[node] += 1
        except WatchTerminatedError:
            terminated += 1

    watchers = []
    for node in range(NODES):
        opts = WatchOptions(resource_version="1", field_selector=f"spec.nodeName={node_name(node)}")
        watchers.append(await cache.watch(opts))
    tasks = [asyncio.create_task(drain(n, w)) for n, w in enumerate(watchers)]
    await asyncio.sleep(0)
    expected = [0] * NODES
    for nodes in work.touched:
        for node in nodes:
            expected[node] += 1
    applied: dict[int, float] = {}
    begin = time.perf_counter()
    async for k in paced(RATE, paced_events):
        event = work.events[k]
        applied[event.resource_version] = time.perf_counter()
        cache.apply(event)
    elapsed = time.perf_counter() - begin
    await settle(received, work.touched[:paced_events])
    paced_dispatch = cache.dispatch_seconds[:]
    cache.dispatch_seconds.clear()
    burst = work.events[paced_events:]
    for first in range(0, len(burst), BATCH):
        for event in burst[first : first + BATCH]:
            cache.apply(event)
        await asyncio.sleep(0)
    await settle(received, work.touched)
    for watcher in watchers:
        watcher.close()
    await asyncio.gather(*tasks, return_exceptions=True)
    return VariantResult(
        variant=name,
        pods=len(work.initial),
        watchers=NODES,
        paced_events=paced_events,
        burst_events=len(burst),
        achieved_rate=paced_events / elapsed,
        dispatch_us=distribution([s * 1e6 for s in paced_dispatch]),
        burst_dispatch_us=distribution([s * 1e6 for s in cache.dispatch_seconds]),
        delivery_ms=distribution([(t - applied[rv]) * 1e3 for rv, t in arrivals if rv in applied]),
        expected=sum(expected),
        received=sum(received),
        lost=sum(max(0, want - got) for want, got in zip(expected, received, strict=True)),
        duplicates_or_reordered=bad,
        terminated=terminated,
    )


async def settle(received: list[int], touched: list[tuple[int, ...]]) -> None:
    """Wait until the watchers have every delivery due for the events in ``touched`` (or
    DRAIN_SECONDS passed)."""
    due = sum(len(nodes) for nodes in touched)
    deadline = time.perf_counter() + DRAIN_SECONDS
    while sum(received) < due and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)


async def wake_penalty(seconds: float = 2.0) -> dict[str, float]:
    """How much slower this machine runs a fixed bit of Python right after the event loop
    slept 1/RATE s than right after running it: the same twenty dict lookups, timed
    first after the sleep (cold) and at once again (warm). Medians in µs."""
    table = {f"node-{i:05d}": i for i in range(NODES)}
    keys = [f"node-{i:05d}" for i in range(0, NODES, NODES // 20)]
    cold, warm = [], []
    async for _ in paced(RATE, int(RATE * seconds)):
        start = time.perf_counter()
        [table.get(key) for key in keys]
        middle = time.perf_counter()
        [table.get(key) for key in keys]
        cold.append(middle - start)
        warm.append(time.perf_counter() - middle)
    return {"cold_us": percentile(cold, 0.5) * 1e6, "warm_us": percentile(warm, 0.5) * 1e6}


def report(results: list[VariantResult]) -> str:
    lines = [
        "| variant | dispatch paced: mean / p50 / p99 (µs) | back to back: mean / p50 (µs) "
        "| delivery p50 / p99 / max (ms) | delivered / expected | lost | dup. | terminated "
        "| rate (/s) | targets |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        d, b, m = r.dispatch_us, r.burst_dispatch_us, r.delivery_ms
        lines.append(
            f"| {r.variant} | {d['mean']:,.1f} / {d['p50']:,.1f} / {d['p99']:,.1f} "
            f"| {b['mean']:,.1f} / {b['p50']:,.1f} "
            f"| {m['p50']:.2f} / {m['p99']:.2f} / {m['max']:.2f} | {r.received:,} / "
            f"{r.expected:,} | {r.lost} | {r.duplicates_or_reordered} | {r.terminated} "
            f"| {r.achieved_rate:.1f} | {'met' if r.met else 'missed'} |"
        )
    return "\n".join(lines)


def sizes(full: bool) -> tuple[int, float]:
    """Pods in the cache and seconds of paced events: quick 25,000 and 10 s, full
    150,000 and 60 s (bench/kubelet.py runs the indexed variant at the same sizes)."""
    return (150_000, 60.0) if full else (25_000, 10.0)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    pods, default_seconds = sizes(args.full)
    seconds = args.seconds or default_seconds
    paced_events = int(RATE * seconds)
    work = workload(pods, paced_events + args.burst, args.seed)
    penalty = await wake_penalty()
    results = [
        await run_variant("indexed", work, paced_events, None),
        await run_variant("unindexed", work, paced_events, ()),
    ]
    indexed, unindexed = results
    ratios = {
        regime: indexed_cost["mean"] / unindexed_cost["mean"]
        for regime, indexed_cost, unindexed_cost in (
            ("paced", indexed.dispatch_us, unindexed.dispatch_us),
            ("back_to_back", indexed.burst_dispatch_us, unindexed.burst_dispatch_us),
        )
    }
    print(
        f"{pods:,} pods, {NODES:,} node watchers, {RATE:.0f} updates/s for {seconds:.0f} s, "
        f"then {args.burst:,} back to back"
    )
    print(report(results))
    print(
        "dispatch cost, indexed / unindexed (same run): "
        + ", ".join(
            f"{regime} {ratio:.4f} ({1 / ratio:,.0f}x cheaper)" for regime, ratio in ratios.items()
        )
    )
    print(
        f"wake penalty of this machine: twenty dict lookups take {penalty['cold_us']:.1f} µs "
        f"right after a {1e3 / RATE:.0f} ms sleep, {penalty['warm_us']:.1f} µs warm"
    )
    return {
        "mode": "full" if args.full else "quick",
        "pods": pods,
        "watchers": NODES,
        "seconds": seconds,
        "rate": RATE,
        "burst_events": args.burst,
        "seed": args.seed,
        "targets": {"dispatch_us": TARGET_DISPATCH_US, "delivery_p99_ms": TARGET_DELIVERY_P99_MS},
        "dispatch_ratio_indexed_over_unindexed": ratios,
        "wake_penalty_us": penalty,
        "variants": [asdict(r) | {"met": r.met} for r in results],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").strip().split("\n", 1)[0])
    p.add_argument("--full", action="store_true", help="150,000 pods and 60 s per variant")
    p.add_argument("--seconds", type=float, default=0.0, help="seconds of paced events")
    p.add_argument("--burst", type=int, default=2_000, help="events applied back to back after")
    p.add_argument("--seed", type=int, default=24)
    p.add_argument("--results", type=Path, default=RESULTS, help="folder for the JSON")
    args = p.parse_args(argv)
    summary = asyncio.run(main_async(args))
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "watch-dispatch.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0 if summary["variants"][0]["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
