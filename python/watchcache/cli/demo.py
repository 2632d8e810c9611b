"""``python -m watchcache demo``: the engine's story in under a minute, with its own checks.

Three phases, each timed, on one live ``Tree`` owned by this function (the single writer):

1. **load** N pod keys (``/registry/pods/ns-00042/pod-0001234``, 1,000 namespaces, values
   are JSON of ``--value-bytes``) with ``Tree.put_many`` in ascending batches, one item per
   resource version, as a reflector's initial list would; a progress bar on stderr.
2. **write** ``--writes`` events (90 % updates, 5 % creates, 5 % deletes) and take a
   snapshot every ``--snapshot-every`` events into a ``SnapshotRegistry`` keyed by the rv it
   froze, as the cache does; the snapshot call and the write right after it (which pays
   the path copy) are timed on their own.
3. **page** through the oldest snapshot (taken right after the load) with
   ``scan(prefix, start_at=next_key, limit=500)``, rendering each page as a LIST body,
   until ``next_key`` is None.

Checks, any failure exits 1 with a message: the page walk sees exactly the snapshot's
``count_prefix`` (which must equal N: later writes must not leak into it) in ascending
order; keys updated after the snapshot still read their old value from it; the live tree
holds N + creates - deletes. Per-call times have the timer's own cost (calibrated at start)
subtracted. Cost at the default 1M keys: ~0.9 GB RSS and ~5 s on the 2-core dev machine.
"""

from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from time import perf_counter, perf_counter_ns
from typing import TextIO

from watchcache._core import Snapshot, SnapshotRegistry, Tree
from watchcache.cli.progress import Progress

PREFIX = "/registry/pods/"
NAMESPACES = 1_000
POD_SPACE = 10_000_000
LOAD_BATCH = 50_000
PAGE_LIMIT = 500
#: Updated keys whose pre-write value is re-read from the old snapshot at the end.
ISOLATION_SAMPLE = 1_000


@dataclass(frozen=True)
class DemoOptions:
    """What ``python -m watchcache demo`` was asked for (see ``cli.py`` for the flags)."""

    keys: int = 1_000_000
    seed: int = 42
    value_bytes: int = 256
    writes: int = 100_000
    snapshot_every: int = 10


def pod_key(ns: int, pod: int) -> str:
    return f"{PREFIX}ns-{ns:05d}/pod-{pod:07d}"


def pod_value(key: str, rv: int, size: int) -> bytes:
    """A Pod-shaped JSON object padded to ``size`` bytes (longer if size is too small)."""
    ns, name = key.removeprefix(PREFIX).split("/")
    head = (
        f'{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"{ns}",'
        f'"resourceVersion":"{rv}"}},"spec":{{"pad":"'
    )
    return (head + "x" * max(0, size - len(head) - 3) + '"}}').encode()


def pod_keys(n: int, rng: random.Random) -> list[str]:
    """n distinct keys, ascending: an even share per namespace, sparse random pod numbers."""
    per_ns, extra = divmod(n, NAMESPACES)
    keys: list[str] = []
    for ns in range(NAMESPACES):
        count = per_ns + (1 if ns < extra else 0)
        keys.extend(pod_key(ns, pod) for pod in sorted(rng.sample(range(POD_SPACE), count)))
    return keys


def rss_bytes() -> int:
    """Resident set size from /proc (0 where there is none)."""
    try:
        fields = Path("/proc/self/statm").read_text().split()
    except OSError:
        return 0
    return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")


def timer_cost_ns() -> int:
    """Median cost of one ``perf_counter_ns()`` interval, subtracted from per-call times."""
    samples = []
    for _ in range(2_001):
        t0 = perf_counter_ns()
        samples.append(perf_counter_ns() - t0)
    return int(median(samples))


@dataclass
class Clock:
    """Sum and count of per-call intervals, minus the timer's own cost per interval."""

    overhead_ns: int
    total_ns: int = 0
    intervals: int = 0
    calls: int = 0

    def add(self, interval_ns: int, calls: int = 1) -> None:
        self.total_ns += interval_ns
        self.intervals += 1
        self.calls += calls

    def per_call_ns(self) -> float:
        if not self.calls:
            return 0.0
        return max(0.0, (self.total_ns - self.intervals * self.overhead_ns) / self.calls)


@dataclass
class WriteStats:
    snapshot: Clock
    first_write: Clock
    other_writes: Clock
    rounds: int = 0
    updates: int = 0
    creates: int = 0
    deletes: int = 0
    #: key -> the value the old snapshot held before the key was first updated
    updated_sample: dict[str, bytes] = field(default_factory=dict)


class DemoError(Exception):
    """A check failed; the message says which and with what numbers."""


def load(tree: Tree, keys: list[str], opts: DemoOptions, err: TextIO) -> float:
    """Phase 1; returns seconds spent in ``put_many`` (value generation excluded)."""
    progress = Progress("load", len(keys), err)
    spent = 0.0
    for lo in range(0, len(keys), LOAD_BATCH):
        batch = [
            (key, pod_value(key, rv, opts.value_bytes), rv)
            for rv, key in enumerate(keys[lo : lo + LOAD_BATCH], start=lo + 1)
        ]
        t0 = perf_counter()
        tree.put_many(batch)
        spent += perf_counter() - t0
        progress.update(lo + len(batch))
    progress.finish()
    return spent


def write(
    tree: Tree,
    registry: SnapshotRegistry,
    old: Snapshot,
    *,
    keys: list[str],
    opts: DemoOptions,
    rng: random.Random,
    err: TextIO,
) -> WriteStats:
    """Phase 2: ``opts.writes`` events from rv len(keys)+1 on, a snapshot before every
    ``opts.snapshot_every``-th, stored under the rv it froze."""
    overhead = timer_cost_ns()
    stats = WriteStats(Clock(overhead), Clock(overhead), Clock(overhead))
    deleted: set[str] = set()
    rv = len(keys)
    progress = Progress("write", opts.writes, err)
    done = 0
    while done < opts.writes:
        # The round's events, prepared untimed: (key, value or None for a delete, rv).
        events: list[tuple[str, bytes | None, int]] = []
        for event_rv in range(rv + 1, rv + 1 + min(opts.snapshot_every, opts.writes - done)):
            roll = rng.random()
            # Creates also stand in for updates and deletes once half the loaded keys are
            # gone (tiny --keys), so picking a live key below never spins.
            if roll < 0.05 or len(deleted) * 2 >= len(keys):
                key = pod_key(NAMESPACES + stats.creates % 100, stats.creates)
                stats.creates += 1
                events.append((key, pod_value(key, event_rv, opts.value_bytes), event_rv))
                continue
            key = rng.choice(keys)
            while key in deleted:  # keep "live = N + creates - deletes" exact
                key = rng.choice(keys)
            if roll < 0.10:
                deleted.add(key)
                events.append((key, None, event_rv))
            else:
                stats.updates += 1
                if len(stats.updated_sample) < ISOLATION_SAMPLE:
                    stats.updated_sample.setdefault(key, old[key])
                events.append((key, pod_value(key, event_rv, opts.value_bytes), event_rv))
        (key, value, event_rv), rest = events[0], events[1:]

        t0 = perf_counter_ns()
        snap = tree.snapshot()
        t1 = perf_counter_ns()
        if value is None:
            stats.deletes += tree.erase(key)
        else:
            tree.put(key, value, event_rv)
        t2 = perf_counter_ns()
        for key, value, event_rv in rest:
            if value is None:
                stats.deletes += tree.erase(key)
            else:
                tree.put(key, value, event_rv)
        t3 = perf_counter_ns()

        registry.add(rv, snap)
        stats.snapshot.add(t1 - t0)
        stats.first_write.add(t2 - t1)
        if rest:
            stats.other_writes.add(t3 - t2, len(rest))
        stats.rounds += 1
        rv += len(events)
        done += len(events)
        progress.update(done)
    progress.finish()
    return stats


@dataclass
class WalkStats:
    seconds: float
    pages: int
    items: int
    body_bytes: int


def walk(snapshot: Snapshot, expected: int, err: TextIO) -> WalkStats:
    """Phase 3: page through ``snapshot`` under PREFIX, PAGE_LIMIT items a page, rendering
    each page; raises DemoError if pages overlap, go backwards or miscount."""
    progress = Progress("page", expected, err)
    pages = items = body_bytes = 0
    last: str | None = None
    next_key: str | None = None
    spent = 0.0
    while True:
        t0 = perf_counter()
        page = snapshot.scan(PREFIX, start_at=next_key, limit=PAGE_LIMIT)
        body = page.render("PodList", "v1")
        spent += perf_counter() - t0
        pages += 1
        items += len(page)
        body_bytes += len(body)
        if len(page):
            first = page[0].key
            if last is not None and first <= last:
                raise DemoError(f"page {pages} starts at {first!r}, not after {last!r}")
            last = page.last_key
            if page.remaining != expected - items:
                raise DemoError(
                    f"page {pages}: remaining={page.remaining}, expected {expected - items}"
                )
        progress.update(items)
        next_key = page.next_key
        if next_key is None:
            break
    progress.finish()
    if items != expected:
        raise DemoError(f"the page walk saw {items:,} items; count_prefix says {expected:,}")
    return WalkStats(spent, pages, items, body_bytes)


def fmt_ns(ns: float) -> str:
    return f"{ns / 1000:,.2f} µs" if ns >= 1000 else f"{ns:,.0f} ns"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if abs(n) < 1024:
            return f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.2f} GiB"


def run(opts: DemoOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run the demo, tables on ``out`` and progress on ``err``. Returns 0 when every check
    passed, 1 when one failed and 2 for invalid options (the reason goes to ``err``)."""
    if opts.keys < 1 or opts.writes < 1 or opts.snapshot_every < 1:
        err.write("demo: --keys, --writes and --snapshot-every must be at least 1\n")
        return 2
    rng = random.Random(opts.seed)
    out.write(
        f"watchcache demo: {opts.keys:,} keys, {opts.value_bytes}-byte values, "
        f"{opts.writes:,} writes, a snapshot every {opts.snapshot_every}, seed {opts.seed}\n"
    )
    out.flush()
    rss_start = rss_bytes()
    keys = pod_keys(opts.keys, rng)
    tree = Tree()
    load_s = load(tree, keys, opts, err)

    registry = SnapshotRegistry()
    old = tree.snapshot()
    old_rv = len(keys)
    try:
        stats = write(tree, registry, old, keys=keys, opts=opts, rng=rng, err=err)
        expected = old.count_prefix(PREFIX)
        if expected != opts.keys:
            raise DemoError(f"snapshot rv={old_rv} counts {expected:,} keys, loaded {opts.keys:,}")
        walked = walk(old, expected, err)
        changed = [k for k, v in stats.updated_sample.items() if old.get(k) != v]
        if changed:
            raise DemoError(f"{len(changed)} keys written after snapshot rv={old_rv} changed in it")
        live = opts.keys + stats.creates - stats.deletes
        if len(tree) != live:
            raise DemoError(f"live tree holds {len(tree):,} keys, expected {live:,}")
    except DemoError as exc:
        err.write(f"demo: check failed: {exc}\n")
        return 1

    rows = [
        (
            "load (put_many)",
            f"{load_s:.2f} s",
            f"{fmt_ns(load_s * 1e9 / opts.keys)}/key, {opts.keys / load_s:,.0f} keys/s",
        ),
        (
            "snapshot()",
            fmt_ns(stats.snapshot.per_call_ns()),
            f"avg of {stats.rounds:,}",
        ),
        (
            "write right after a snapshot",
            fmt_ns(stats.first_write.per_call_ns()),
            "avg, pays the path copy",
        ),
        (
            "other writes",
            fmt_ns(stats.other_writes.per_call_ns()),
            f"avg of {stats.other_writes.calls:,} ({stats.updates:,} updates, "
            f"{stats.creates:,} creates, {stats.deletes:,} deletes in all)",
        ),
        (
            f"page walk, snapshot rv={old_rv:,}",
            f"{walked.seconds:.2f} s",
            f"{walked.pages:,} pages of {PAGE_LIMIT}, "
            f"{fmt_ns(walked.seconds * 1e9 / walked.pages)}/page, "
            f"{walked.items / walked.seconds:,.0f} items/s, "
            f"{fmt_bytes(walked.body_bytes)} rendered",
        ),
        (
            "registry",
            f"{len(registry):,} snaps",
            f"pinned {fmt_bytes(registry.pinned_bytes())} "
            f"({fmt_bytes(registry.pinned_bytes() / max(len(registry), 1))}/snapshot)",
        ),
        ("RSS", fmt_bytes(rss_bytes()), f"grew {fmt_bytes(rss_bytes() - rss_start)} in the demo"),
    ]
    width = max(len(r[0]) for r in rows)
    out.write(f"\n{'phase':<{width}}  {'time':>12}  detail\n")
    for name, value, detail in rows:
        out.write(f"{name:<{width}}  {value:>12}  {detail}\n")
    out.write(
        f"\nchecks passed: the walk saw {walked.items:,} keys = count_prefix of snapshot "
        f"rv={old_rv:,} (live tree now {len(tree):,}); {len(stats.updated_sample):,} keys "
        f"updated later still read their old value from it.\n"
        f"Per-call times exclude the timer's own {stats.snapshot.overhead_ns} ns.\n"
    )
    return 0
