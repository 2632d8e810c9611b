"""Lifetimes and memory: nothing the engine allocates outlives the Python objects holding it,
dropped snapshots let replaced nodes and items be reclaimed, the registry's budget evicts the
oldest snapshots, and the memory reports (nbytes, usage, pinned_bytes) add up.

Every test measures ``_core.live_counters()`` against a baseline taken after ``gc.collect()``
in the same test, after a warm-up that lets any lazily built engine state exist first.
"""

from __future__ import annotations

import gc
import pickle
import random
from collections.abc import Iterator

import pytest

from watchcache import _core

KB = 1024


def settle() -> dict[str, int]:
    gc.collect()
    gc.collect()
    return _core.live_counters()


@pytest.fixture
def baseline() -> Iterator[dict[str, int]]:
    """Live counters with nothing of this test alive; checked again at the end of the test."""
    warm = _core.Tree({f"w{i}": b"w" for i in range(3 * _core.FANOUT)})
    warm.snapshot().scan(selector=_core.Selector(labels=[("a", "exists", [])])).render("L", "v1")
    _core.SnapshotRegistry(budget_bytes=1).add(1, warm.snapshot())
    del warm
    before = settle()
    yield before
    assert settle() == before, "engine objects outlived their Python owners"


def delta(before: dict[str, int]) -> dict[str, int]:
    now = _core.live_counters()
    return {name: now[name] - before[name] for name in ("nodes", "items", "bytes")}


def test_live_counters_report_nodes_items_and_bytes() -> None:
    counters = _core.live_counters()
    assert {"nodes", "items", "bytes"} <= set(counters)
    assert all(isinstance(v, int) and v >= 0 for v in counters.values())


def test_a_tree_counts_its_items_and_returns_them_when_dropped(baseline: dict[str, int]) -> None:
    n = 2 * _core.FANOUT**2
    tree = _core.Tree.from_sorted((f"k{i:06d}", b"v" * 100) for i in range(n))
    grown = delta(baseline)
    assert grown["items"] == n
    assert grown["nodes"] >= n // _core.FANOUT
    assert grown["bytes"] >= n * 100
    assert tree.nbytes >= n * 100
    snap = tree.snapshot()
    assert snap.nbytes == tree.nbytes, "right after a snapshot both reach the same nodes and items"
    after = delta(baseline)
    assert (after["nodes"], after["items"]) == (grown["nodes"], grown["items"]), (
        "a snapshot is O(1): it copies no nodes or items"
    )
    assert after["bytes"] - grown["bytes"] < KB


def test_a_standalone_item_accounts_exactly_its_nbytes(baseline: dict[str, int]) -> None:
    item = _core.Item("key", b"v" * 1000, 3, labels={"app": "web"}, fields={"f": "x"})
    grown = delta(baseline)
    assert grown["items"] == 1
    assert grown["bytes"] == item.nbytes
    assert item.nbytes >= len("key") + 1000 + len("appweb") + len("fx")


def test_dropping_every_kind_of_engine_object_returns_the_counters_to_baseline(
    baseline: dict[str, int], rng: random.Random
) -> None:
    n = 3 * _core.FANOUT**2
    tree = _core.Tree()
    for i in rng.sample(range(n), n):
        tree.put(f"k/{i:06d}", rng.randbytes(rng.randrange(200)), i, labels={"i": str(i % 7)})
    snapshots = [tree.snapshot()]
    for i in range(0, n, 3):
        tree.erase(f"k/{i:06d}")
        if i % 300 == 0:
            snapshots.append(tree.snapshot())
    registry = _core.SnapshotRegistry()
    for rv, snap in enumerate(snapshots, start=1):
        registry.add(rv, snap)
    selector = _core.Selector(labels=[("i", "in", ["1", "2"])], fields=[("f", "!=", "x")])
    results = [snap.scan("k/", limit=50, selector=selector) for snap in snapshots]
    body = results[0].render("List", "v1")
    cursor = snapshots[0].cursor()
    cursor.seek("k/000500")
    items = [tree.get_item("k/000001"), cursor.item, results[0][0], _core.Item("solo", b"x")]
    view = memoryview(items[0]) if items[0] is not None else None
    copy = pickle.loads(pickle.dumps(snapshots[-1]))
    loaded = _core.Tree.from_sorted(copy.scan())
    half_read = iter(snapshots[1].irange("k/"))
    next(half_read)
    half_read_items = iter(snapshots[2].irange_items(reverse=True))
    next(half_read_items)
    scan_iter = iter(results[1])
    next(scan_iter)
    usage = registry.usage()
    cycle: list[object] = [tree.snapshot()]
    cycle.append(cycle)
    assert delta(baseline)["items"] > 0
    if view is not None:
        view.release()
    del tree, snapshots, registry, selector, results, body, cursor, items, view, copy, loaded
    del half_read, half_read_items, scan_iter, usage, cycle, snap


def test_failed_writes_and_loads_leave_nothing_behind(baseline: dict[str, int]) -> None:
    tree = _core.Tree({"a": b"1"})
    before_failures = delta(baseline)
    for bad in (
        [("b", b"x" * 1000), ("c", "not bytes")],
        [("b", b"x" * 1000), ("", b"empty key")],
        [("b", b"x" * 1000), 42],
    ):
        with pytest.raises((TypeError, ValueError)):
            tree.put_many(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        _core.Tree.from_sorted([("b", b"x" * 1000), ("a", b"")])
    with pytest.raises(TypeError):
        _core.Tree([("b", b"x" * 1000), ("c", 3)])  # type: ignore[list-item]
    gc.collect()
    assert delta(baseline) == before_failures


def test_a_dropped_snapshot_lets_replaced_items_be_reclaimed(baseline: dict[str, int]) -> None:
    n = 4 * _core.FANOUT
    keys = [f"k{i:04d}" for i in range(n)]
    tree = _core.Tree(dict.fromkeys(keys, b"old" * 100))
    snap = tree.snapshot()
    tree.put_many([(k, b"new" * 100) for k in keys])
    assert delta(baseline)["items"] == 2 * n, "the snapshot keeps the replaced items"
    assert snap.values() == [b"old" * 100] * n
    del snap
    assert tree.collect() >= 0
    gc.collect()
    assert delta(baseline)["items"] == n, "nothing else reaches the replaced items"
    assert tree.values() == [b"new" * 100] * n


def _churn(
    tree: _core.Tree, keys: list[str], rounds: int, collect: bool, rng: random.Random
) -> list[int]:
    """snapshot + 50 overwrites + drop, ``rounds`` times; live bytes sampled every 10 rounds."""
    samples: list[int] = []
    for r in range(rounds):
        snap = tree.snapshot()
        tree.put_many([(k, bytes([r % 256]) * KB) for k in rng.sample(keys, 50)])
        assert snap.count() == len(keys)
        del snap
        if collect:
            tree.collect()
        if r % 10 == 0:
            samples.append(_core.live_counters()["bytes"])
    return samples


@pytest.mark.parametrize("explicit_collect", [True, False], ids=["collect", "automatic"])
def test_snapshot_write_drop_loop_does_not_grow_memory_without_bound(
    baseline: dict[str, int], rng: random.Random, explicit_collect: bool
) -> None:
    """Each round replaces ~50 KB; keeping them would double live bytes from the first half of
    the run to the second. Reclaiming (at once or in batches) keeps both halves level."""
    keys = [f"k{i:04d}" for i in range(500)]
    tree = _core.Tree(dict.fromkeys(keys, b"0" * KB))
    samples = _churn(tree, keys, rounds=1000, collect=explicit_collect, rng=rng)
    half = len(samples) // 2
    first, second = max(samples[:half]), max(samples[half:])
    assert second <= 1.5 * first + 256 * KB, f"live bytes grew from {first} to {second}"
    tree.collect()
    gc.collect()
    assert delta(baseline)["items"] == len(keys), "after collect only the live items remain"


def test_snapshot_usage_tells_exclusive_from_shared_bytes(baseline: dict[str, int]) -> None:
    n = 200
    keys = [f"k{i:03d}" for i in range(n)]
    tree = _core.Tree(dict.fromkeys(keys, b"a" * KB))
    registry = _core.SnapshotRegistry()
    registry.add(1, tree.snapshot())
    tree.put_many([(k, b"b" * KB) for k in keys])
    registry.add(2, tree.snapshot())

    usage = {u.resource_version: u for u in registry.usage()}
    assert set(usage) == {1, 2}
    assert usage[1].exclusive_bytes >= n * KB, "rv 1 alone keeps every replaced value alive"
    assert usage[2].exclusive_bytes < usage[1].exclusive_bytes // 10
    assert usage[2].shared_bytes >= n * KB, "rv 2 shares its values with the live tree"
    for rv in (1, 2):
        snap = registry.get(rv)
        assert snap is not None
        assert usage[rv].exclusive_bytes + usage[rv].shared_bytes == snap.nbytes
        assert usage[rv].exclusive_bytes >= 0
        assert usage[rv].shared_bytes >= 0
    assert registry.pinned_bytes() >= n * KB

    tree.put_many([(k, b"c" * KB) for k in keys])
    usage = {u.resource_version: u for u in registry.usage()}
    assert usage[2].exclusive_bytes >= n * KB, "now rv 2 alone keeps the b-values alive"

    assert registry.prune_below(3) == 2
    tree.collect()
    assert registry.pinned_bytes() < n * KB, "pruned snapshots pin nothing"


def test_registry_budget_evicts_the_oldest_snapshots_first(baseline: dict[str, int]) -> None:
    keys = [f"k{i:03d}" for i in range(100)]
    tree = _core.Tree(dict.fromkeys(keys, b"0" * KB))
    budget = 150 * KB
    registry = _core.SnapshotRegistry(budget_bytes=budget)
    assert registry.budget_bytes == budget
    last = 12
    for rv in range(1, last + 1):
        registry.add(rv, tree.snapshot())  # the registry holds the only reference
        tree.put_many([(k, bytes([rv]) * KB) for k in keys])  # the new snapshot now pins ~100 KB
    registry.add(last + 1, tree.snapshot())

    rvs = registry.resource_versions()
    assert registry.evicted > 0
    assert registry.evicted == last + 1 - len(rvs)
    assert rvs == list(range(rvs[0], last + 2)), "eviction takes the oldest, keeps a suffix"
    assert registry.pinned_bytes() <= budget or len(rvs) == 1


def test_registry_never_evicts_the_newest_snapshot(baseline: dict[str, int]) -> None:
    tree = _core.Tree({f"k{i}": b"x" * KB for i in range(50)})
    registry = _core.SnapshotRegistry()
    for rv in (1, 2, 3):
        registry.add(rv, tree.snapshot())
        tree.put_many([(f"k{i}", bytes([rv]) * KB) for i in range(50)])
    assert registry.evicted == 0, "no budget, no eviction"
    registry.budget_bytes = 1
    assert registry.budget_bytes == 1
    registry.add(4, tree.snapshot())
    assert registry.resource_versions() == [4]
    assert registry.evicted == 3
    latest = registry.latest()
    assert latest is not None
    assert latest[0] == 4
    assert latest[1].items() == tree.items()
