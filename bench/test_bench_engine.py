"""Engine microbenchmarks: watchcache against SortedDict, dict and immutables.Map.

Each benchmark is written once and runs for every (size, impl) pair (see conftest.py); its
``benchmark.group`` is "<op> <size>", so pytest-benchmark prints one side-by-side table per
operation and size, and ``peers_report.py`` turns the JSON into bench/README.md's tables.

Before timing, each benchmark checks once that the contender does the work claimed (scan
keys match the workload's order, prefix counts match, a render is a valid list body), so a
fast number cannot come from doing less. Timed loops cycle through pre-drawn random keys;
that costs the same for every contender and is measured on its own by ``test_harness``.

Operations (``op`` in extra_info):
  build              construct from 1 item per key in random order (pedantic, 3 rounds)
  build-sorted       construct from ascending items (watchcache: ``Tree.from_sorted``)
  snapshot           take a snapshot and drop it (also at 1k: cost must not grow with n)
  put                update a random existing key while an older snapshot is alive (after
                     one warm-up pass over the probe keys: see test_put)
  put-after-snapshot take a snapshot, then update a random key (one snapshot per event)
  get                value of a random existing key
  scan-items         500 items from a random key, as a list of (str, bytes)
  scan-rendered      the same 500 as one JSON list body (bytes)
  iterate            every (key, value) in key order
  count-prefix       keys in a random namespace (1/1000 of the keys)
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Sized
from itertools import cycle
from time import perf_counter

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from contender import RENDER_HEAD, RENDER_TAIL, Contender, Items, check_scan
from workload import SCAN_LIMIT, Workload, size_label

BUILD_ROUNDS = 3
WARMUP_SECONDS = 0.05
WARMUP_CALLS = 2_000


def label(benchmark: BenchmarkFixture, op: str, impl: str, n: int) -> None:
    benchmark.group = f"{op} {size_label(n)}"
    benchmark.extra_info.update(op=op, impl=impl, n=n)


def run(benchmark: BenchmarkFixture, op: Callable[[], object], warmup_calls: int = 0) -> None:
    """Warm ``op`` up (caches, lazily grown buffers) for ~50 ms or 2,000 calls, then time
    it. Without this, pytest-benchmark's calibration can see a cold first call above its
    5 µs round target, settle on 1 iteration per round, and time the timer as much as op.
    ``warmup_calls`` more calls run first whatever they take: see ``test_put``."""
    for _ in range(warmup_calls):
        op()
    deadline = perf_counter() + WARMUP_SECONDS
    for _ in range(WARMUP_CALLS):
        op()
        if perf_counter() >= deadline:
            break
    benchmark(op)


def run_rounds(benchmark: BenchmarkFixture, build: Callable[[Items], Sized], items: Items) -> Sized:
    """``build(items)`` timed BUILD_ROUNDS times, one call per round (pedantic mode): each
    round's result is freed outside the timed region."""
    pedantic: Callable[..., Sized] = benchmark.pedantic  # untyped in pytest-benchmark
    return pedantic(build, args=(items,), rounds=BUILD_ROUNDS)


def test_harness(benchmark: BenchmarkFixture, workload: Workload) -> None:
    """What every timed loop pays besides the operation: a closure call and ``next()``."""
    label(benchmark, "harness", "python", workload.n)
    it = cycle(workload.probe_keys)

    def op() -> str:
        return next(it)

    run(benchmark, op)


def test_build(
    benchmark: BenchmarkFixture, contender_type: type[Contender], workload: Workload
) -> None:
    label(benchmark, "build", contender_type.name, workload.n)
    built = run_rounds(benchmark, contender_type.construct, workload.shuffled)
    assert len(built) == workload.n


def test_build_sorted(
    benchmark: BenchmarkFixture, contender_type: type[Contender], workload: Workload
) -> None:
    label(benchmark, "build-sorted", contender_type.name, workload.n)
    built = run_rounds(benchmark, contender_type.construct_sorted, workload.items)
    assert len(built) == workload.n


@pytest.mark.extra_sizes(1_000)
def test_snapshot(benchmark: BenchmarkFixture, contender: Contender, workload: Workload) -> None:
    label(benchmark, "snapshot", contender.name, workload.n)
    assert len(contender.snapshot()) == workload.n
    run(benchmark, contender.snapshot)


def test_put(benchmark: BenchmarkFixture, contender: Contender, workload: Workload) -> None:
    """The first put to each probe key after the load copies its path away from the older
    snapshot, into memory fresh from the OS; the warm-up makes those first puts, so the
    timed ones are the steady state of a tree that an old snapshot shares. Without it the
    result depended on how many rounds calibration chose: 1.65-2.47 µs at 1M when the
    timed puts were all first puts (142 rounds), 0.9-1.0 µs when most were not. Copying
    paths is what ``test_put_after_snapshot`` times (with recycled memory); a growing
    cache's fresh memory is in bench/apply_cost.py."""
    label(benchmark, "put", contender.name, workload.n)
    put = contender.put
    it = cycle(workload.probe_puts)

    def op() -> None:
        key, value = next(it)
        put(key, value)

    run(benchmark, op, warmup_calls=len(workload.probe_puts))


def test_put_after_snapshot(
    benchmark: BenchmarkFixture, contender: Contender, workload: Workload
) -> None:
    label(benchmark, "put-after-snapshot", contender.name, workload.n)
    put, snapshot = contender.put, contender.snapshot
    it = cycle(workload.probe_puts)

    def op() -> None:
        key, value = next(it)
        pinned = snapshot()
        put(key, value)
        del pinned  # the write ran while the snapshot was alive; now release it

    run(benchmark, op)


def test_get(benchmark: BenchmarkFixture, contender: Contender, workload: Workload) -> None:
    label(benchmark, "get", contender.name, workload.n)
    get = contender.get
    assert get(workload.probe_keys[0]) is not None
    it = cycle(workload.probe_keys)

    def op() -> object:
        return get(next(it))

    run(benchmark, op)


def scan_op(fn: Callable[[str, int], object], workload: Workload) -> Callable[[], object]:
    it = cycle(workload.scan_starts)

    def op() -> object:
        return fn(next(it), SCAN_LIMIT)

    return op


def test_scan_items(benchmark: BenchmarkFixture, contender: Contender, workload: Workload) -> None:
    label(benchmark, "scan-items", contender.name, workload.n)
    for start in workload.scan_starts[:3]:
        check_scan(contender, workload.keys, start, SCAN_LIMIT)
    run(benchmark, scan_op(contender.scan_items, workload))


def test_scan_rendered(
    benchmark: BenchmarkFixture, contender: Contender, workload: Workload
) -> None:
    label(benchmark, "scan-rendered", contender.name, workload.n)
    keys = workload.keys
    start = workload.scan_starts[0]
    body = contender.scan_rendered(start, SCAN_LIMIT)
    want = keys[bisect_left(keys, start) :][:SCAN_LIMIT]
    expected = RENDER_HEAD + b",".join(contender.get(k) or b"null" for k in want) + RENDER_TAIL
    assert json.loads(body) == json.loads(expected), f"{contender.name}: render differs"
    benchmark.extra_info["body_bytes"] = len(body)
    run(benchmark, scan_op(contender.scan_rendered, workload))


def test_iterate(benchmark: BenchmarkFixture, contender: Contender, workload: Workload) -> None:
    label(benchmark, "iterate", contender.name, workload.n)
    keys = workload.keys
    seen = [k for k, _ in contender.iter_items()]
    assert seen == keys, f"{contender.name}: iteration order or content differs"
    del seen

    def op() -> None:
        deque(contender.iter_items(), maxlen=0)

    run(benchmark, op)


def test_count_prefix(
    benchmark: BenchmarkFixture, contender: Contender, workload: Workload
) -> None:
    label(benchmark, "count-prefix", contender.name, workload.n)
    count = contender.count_prefix
    for prefix, want in workload.count_prefixes[:5]:
        assert count(prefix) == want, f"{contender.name}: count_prefix({prefix!r})"
    it = cycle([prefix for prefix, _ in workload.count_prefixes])

    def op() -> int:
        return count(next(it))

    run(benchmark, op)
