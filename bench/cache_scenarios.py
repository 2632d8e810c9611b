"""WatchCache scenario benchmarks: the issue-3 targets, each with a baseline from the same run.

Each scenario times the WatchCache path end to end and, in the same process and run, the
smallest thing it could possibly cost (its baseline), and reports both plus the ratio, so a
number means something on this noisy shared machine:

  list-page        ``await cache.list(limit=500, continue=<random position>)`` + render, on a
                   100k-object cache with 1 KB objects (served from the snapshot the token
                   names). Baseline: the native ``snapshot.scan(...).render(...)`` alone.
  list-first-page  the same without a continue token (RV unset: a consistent read, which
                   without a store is served from the newest state).
  list-selector    full LIST of 300k x 1 KB objects with a label selector matching none
                   (runs in a worker thread). Baseline: the native scan called directly.
  apply            one MODIFIED event (tree + history + snapshot registry), 100k objects,
                   shaped as the reflector makes it (no previous object: the cache names
                   it), on a cache with Kubernetes' default history bounds (the window
                   grows, as in the first 75 s of a busy resource). Events are made in
                   untimed batches of 100 right before they are applied (timed_fed).
                   Baseline: ``tree.swap_item`` + ``tree.snapshot()`` alone.
  dispatch-1000    the same event with 1,000 idle watchers whose label selectors do not
                   match; reported: extra time per event over ``apply`` = dispatch cost.

Timing: each measurement is the median of ``--repeats`` rounds, a round being a loop of
``ops`` operations divided by ``ops`` (asynchronous calls run inside one event loop, so no
loop start-up is counted). Usage: ``python bench/cache_scenarios.py [--full]`` (quick: 20k
and 30k objects; full: 100k and 300k); it writes bench/results/cache-scenarios.json and
.png and its section of bench/README.md. The other scenario scripts reuse its workload:
:func:`pods`, :func:`loaded_cache`, :func:`modifications`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TypeVar

from harness import mode, parser
from reporting import Report, Row, plot_rows, table
from watchcache import Item, Tree
from watchcache.cache.event import Event, EventType
from watchcache.cache.watch_cache import WatchCache
from watchcache.wire.options import ListOptions, WatchOptions
from watchcache.wire.tokens import encode_continue
from workload import PREFIX, make_value, seed_from_env


@dataclass
class Result:
    scenario: str
    n: int
    per_op_us: float
    baseline_us: float
    target_us: float | None

    @property
    def ratio(self) -> float:
        return self.per_op_us / self.baseline_us if self.baseline_us else float("nan")

    def row(self) -> Row:
        target = f"≤ {self.target_us:,.0f} µs" if self.target_us else ""
        met = None if self.target_us is None else self.per_op_us <= self.target_us
        return Row(
            self.scenario, self.n, self.per_op_us, "µs", self.baseline_us, target, met,
            f"{self.ratio:.2f}x the baseline",
        )  # fmt: skip


#: Distinct ``app`` label values of :func:`pods`: ``app=app-7`` selects 1 % of them.
APPS = 100


def pods(n: int, value_bytes: int, seed: int) -> list[Item]:
    """n pods of ``value_bytes``, 100 per namespace, labelled ``app=app-<0..99>`` at
    random and ``tier=backend``."""
    rng = random.Random(f"{seed}:{n}")
    namespaces = max(1, n // 100)
    out = []
    for i in range(n):
        ns = i % namespaces
        key = f"{PREFIX}ns-{ns:05d}/pod-{i:07d}"
        labels = {"app": f"app-{rng.randrange(APPS)}", "tier": "backend"}
        fields = {"metadata.name": f"pod-{i:07d}", "metadata.namespace": f"ns-{ns:05d}"}
        out.append(Item(key, make_value(ns, i, i + 1, value_bytes), i + 1, labels, fields))
    return out


def timed(op: Callable[[], object], ops: int, repeats: int) -> float:
    for _ in range(min(ops, 200)):
        op()
    rounds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(ops):
            op()
        rounds.append((time.perf_counter() - start) / ops)
    return statistics.median(rounds) * 1e6


T = TypeVar("T")


def timed_fed(source: Iterator[T], op: Callable[[T], object], ops: int, repeats: int) -> float:
    """:func:`timed` for an op that consumes an input (an event): the inputs are drawn from
    ``source`` in untimed batches of 100 right before they are used, as a reflector decodes
    an event right before it applies it. Inputs built all up front would be cold in the CPU
    caches by their turn, and those misses would be timed as the op's cost."""
    batch = 100
    for item in itertools.islice(source, min(ops, 200)):
        op(item)
    rounds = []
    for _ in range(repeats):
        elapsed = 0.0
        for _ in range(0, ops, batch):
            inputs = list(itertools.islice(source, batch))
            start = time.perf_counter()
            for item in inputs:
                op(item)
            elapsed += time.perf_counter() - start
        rounds.append(elapsed / ops)
    return statistics.median(rounds) * 1e6


async def timed_async(op: Callable[[], Awaitable[object]], ops: int, repeats: int) -> float:
    for _ in range(min(ops, 50)):
        await op()
    rounds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(ops):
            await op()
        rounds.append((time.perf_counter() - start) / ops)
    return statistics.median(rounds) * 1e6


def loaded_cache(items: list[Item], **kwargs: object) -> WatchCache:
    cache = WatchCache(PREFIX, resource="pods", kind="Pod", **kwargs)  # type: ignore[arg-type]
    cache.replace(items, len(items) + 1)
    return cache


async def list_scenarios(n: int, repeats: int, seed: int) -> list[Result]:
    items = pods(n, 1024, seed)
    cache = loaded_cache(items)
    rv = cache.resource_version
    rng = random.Random(seed)
    tokens = [
        encode_continue(items[rng.randrange(n - 600)].key + "\x00", PREFIX[:-1], rv)
        for _ in range(256)
    ]
    pages = [ListOptions(limit=500, continue_token=t) for t in tokens]
    starts = [items[rng.randrange(n - 600)].key for _ in range(256)]
    state = {"i": 0}

    async def page() -> bytes:
        state["i"] = (state["i"] + 1) % len(pages)
        return cache.render(await cache.list(pages[state["i"]]))

    first = ListOptions(limit=500)

    async def first_page() -> bytes:
        return cache.render(await cache.list(first))

    _, snap = cache.snapshot()

    def native_page() -> bytes:
        state["i"] = (state["i"] + 1) % len(starts)
        scan = snap.scan(PREFIX, start_at=starts[state["i"]], limit=500)
        return scan.render("PodList", "v1", b'{"resourceVersion":"1"}')

    check = json.loads(await page())
    assert len(check["items"]) == 500 and check["metadata"]["continue"]
    baseline = timed(native_page, 200, repeats)
    return [
        Result("list-page", n, await timed_async(page, 200, repeats), baseline, 100.0),
        Result("list-first-page", n, await timed_async(first_page, 200, repeats), baseline, None),
    ]


async def selector_scenario(n: int, repeats: int, seed: int) -> Result:
    cache = loaded_cache(pods(n, 1024, seed))
    opts = ListOptions(label_selector="app=none")
    selector = opts.selector()
    _, snap = cache.snapshot()

    async def full_list() -> object:
        result = await cache.list(opts)
        assert len(result.items) == 0
        return result

    def native() -> object:
        return snap.scan(PREFIX, selector=selector)

    baseline = timed(native, 3, repeats)
    return Result("list-selector", n, await timed_async(full_list, 3, repeats), baseline, 20_000.0)


def modifications(items: list[Item], start_rv: int, seed: int) -> Iterator[Event]:
    """Endless MODIFIED events of random objects from ``start_rv + 1`` on, shaped as the
    reflector hands them to the cache: no previous object (etcd's watch sends none for a
    put; the cache finds it), so apply() pays for naming it. Labels never change."""
    rng = random.Random(seed)
    for rv in itertools.count(start_rv + 1):
        previous = items[rng.randrange(len(items))]
        item = Item(previous.key, previous.value, rv, previous.labels, previous.fields)
        yield Event(EventType.MODIFIED, item, None, rv)


async def apply_scenarios(n: int, repeats: int, seed: int) -> list[Result]:
    items = pods(n, 1024, seed)
    ops = 5_000
    cache = loaded_cache(items)
    apply_time = timed_fed(
        modifications(items, cache.resource_version, seed), cache.apply, ops, repeats
    )

    ordered: list[Item] = sorted(items, key=lambda item: item.key)
    tree = Tree.from_sorted(ordered)

    def raw(event: Event) -> None:
        tree.swap_item(event.object)
        tree.snapshot()

    baseline = timed_fed(modifications(items, cache.resource_version, seed), raw, ops, repeats)
    results = [Result("apply", n, apply_time, baseline, 5.0)]

    watched = loaded_cache(items)
    watchers = [
        await watched.watch(WatchOptions(resource_version="0", label_selector=f"app=w{i}"))
        for i in range(1000)
    ]
    dispatch_time = timed_fed(
        modifications(items, watched.resource_version, seed), watched.apply, ops, repeats
    )
    assert watched.watcher_count == len(watchers)
    results.append(
        Result("dispatch-1000", n, max(dispatch_time - apply_time, 0.0), apply_time, 1_000.0)
    )
    for watcher in watchers:
        watcher.close()
    return results


async def main_async(args: argparse.Namespace) -> list[Result]:
    seed = seed_from_env()
    small = 100_000 if args.full else 20_000
    large = 300_000 if args.full else 30_000
    results = await list_scenarios(small, args.repeats, seed)
    results.append(await selector_scenario(large, args.repeats, seed))
    results += await apply_scenarios(small, args.repeats, seed)
    return results


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    title = "WatchCache scenarios (issue 3 targets)"
    report = Report("cache-scenarios", title, mode(args))
    rows = [r.row() for r in asyncio.run(main_async(args))]
    report.how = (
        f"Seed {seed_from_env()}. Per-op times are medians of rounds; the baseline is the "
        "cheapest native way to do the same work, in the same run."
    )
    report.tables.append(table(rows))
    report.data = {"seed": seed_from_env(), "rows": [asdict(r) for r in rows]}
    report.publish_as_asked(args, plot=plot_rows(rows, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
