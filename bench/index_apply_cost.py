"""What one secondary index adds to ``WatchCache.apply`` (issue 24's write target: a write
with one index costs at most 1.3x the same write without, same-run ratio).

Two caches of the same pods (the kubelet scenario: ``--n`` pods over ``--nodes`` nodes, each
item with the selectable fields of a pod), one as a pods cache is made by default (its tree
indexes ``spec.nodeName``, the trigger field) and one with ``list_indexes=()``, receive the
same events in alternating rounds (each round both caches, the first of them
alternating): events shaped as the reflector makes them (no previous object), drawn in
untimed batches of 100 right before they are applied (as :func:`cache_scenarios.timed_fed`
does), timed in CPU time of this process (so that the other tenants of a shared machine,
which preempt us, do not land in one cache's rounds more than in the other's; they still
share the caches). Three kinds of event: a status update (the pod stays on its node: the
index entry is repointed); a rescheduling (the pod moves to a random node: its entry moves
between runs; Kubernetes never does this, a pod's ``spec.nodeName`` is set once, by its
binding, so this is the worst case); and pod lifecycles (:data:`LIFECYCLE`: create, bind,
five updates that keep the node, delete: the writes a pods cache receives, of which only
the bind moves an entry). The history window is steady at
``--window`` events (snapshots below it go with it), so what a write pins is bounded.
Printed: median µs per event for each cache over its rounds and the median of the
per-round ratios (the index gathers its changes and folds them into its trees once per epoch
of 4,096 changes: a round is longer than that, :data:`ROUND_EVENTS`, so every round pays
for a fold), the ratio of the two caches' whole CPU time beside it, for pod lifecycles the
means per step of a lifecycle (over the batches of that step, folds included where they
fell), the registry's pinned bytes per stored snapshot, and the resident
memory per entry that declaring the index adds to a bulk-loaded tree of the same pods
(issue 24's other index target: at most 48 B).

Usage: ``python bench/index_apply_cost.py [--n 150000] [--nodes 5000] [--ops 4500]
[--repeats 10] [--window 10000] [--memory-only]``. The native counterpart (the tree's write
path alone, memory per entry, LIST by node) is ``build/bench/index_bench`` (``make
bench-native``).
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from cache_scenarios import loaded_cache
from harness import rss
from watchcache import Item, Tree
from watchcache.cache.event import Event, EventType
from watchcache.cache.watch_cache import WatchCache
from watchcache.sync.reflector import release_free_heap
from workload import PREFIX, make_value, seed_from_env

NODE_INDEX = ("field", "spec.nodeName")


def pod(i: int, node: int | None, rv: int, value_bytes: int) -> Item:
    """Pod i (in one of 1,000 namespaces) on node ``node`` (None: not scheduled yet), with a
    pod's nine selectable fields."""
    ns, name = i % 1_000, f"pod-{i:07d}"
    fields = {
        "metadata.name": name,
        "metadata.namespace": f"ns-{ns:05d}",
        "spec.nodeName": "" if node is None else f"node-{node:05d}",
        "spec.restartPolicy": "Always",
        "spec.schedulerName": "default-scheduler",
        "spec.serviceAccountName": "default",
        "status.phase": "Running",
        "status.podIP": "10.0.0.1",
        "status.nominatedNodeName": "",
    }
    key = f"{PREFIX}ns-{ns:05d}/{name}"
    return Item(key, make_value(ns, i, rv, value_bytes), rv, {"app": f"app-{i % 100}"}, fields)


def updates(
    placement: list[int], nodes: int, start_rv: int, value_bytes: int, *, moves: bool, seed: int
) -> Iterator[Event]:
    """Endless MODIFIED events of random pods from ``start_rv + 1`` on; with ``moves`` each
    pod goes to a random node, else it stays on its own. ``placement`` is this stream's own
    copy of where the pods are."""
    rng = random.Random(seed)
    for rv in itertools.count(start_rv + 1):
        i = rng.randrange(len(placement))
        if moves:
            placement[i] = rng.randrange(nodes)
        yield Event(EventType.MODIFIED, pod(i, placement[i], rv, value_bytes), None, rv)


#: A pod's writes from creation to deletion, as its node index sees them: created
#: unscheduled, bound to a node (the one change of ``spec.nodeName`` Kubernetes allows:
#: binding refuses a pod that has a node, and an update may not change it), three status
#: updates on the way to Running, the graceful delete's deletionTimestamp, the kubelet's
#: last status, the delete.
LIFECYCLE = ("create", "bind", "status", "status", "status", "terminate", "status", "delete")
#: Pods going through their lifecycles at once, one step each in turn.
IN_FLIGHT = 100


def lifecycles(
    first_pod: int, nodes: int, start_rv: int, value_bytes: int, *, seed: int
) -> Iterator[Event]:
    """Endless events of new pods (numbered from ``first_pod``) each going through
    :data:`LIFECYCLE`, :data:`IN_FLIGHT` of them interleaved, from ``start_rv + 1`` on."""
    rng = random.Random(seed)
    rvs = itertools.count(start_rv + 1)
    fresh = itertools.count(first_pod)
    flight = [(next(fresh), rng.randrange(nodes), 0) for _ in range(IN_FLIGHT)]
    while True:
        for slot, (i, node, step) in enumerate(flight):
            rv = next(rvs)
            kind = LIFECYCLE[step]
            if kind == "create":
                yield Event(EventType.ADDED, pod(i, None, rv, value_bytes), None, rv)
            elif kind == "delete":
                yield Event(EventType.DELETED, pod(i, node, rv, value_bytes), None, rv)
            else:
                yield Event(EventType.MODIFIED, pod(i, node, rv, value_bytes), None, rv)
            if step + 1 < len(LIFECYCLE):
                flight[slot] = (i, node, step + 1)
            else:
                flight[slot] = (next(fresh), rng.randrange(nodes), 0)


def lifecycle_kind(position: int) -> str:
    """The kind of the event at ``position`` (from 0) of a :func:`lifecycles` stream: its pods
    take their steps in lockstep, so each :data:`IN_FLIGHT` events in a row are one kind."""
    return LIFECYCLE[position // IN_FLIGHT % len(LIFECYCLE)]


#: Events drawn, then timed, at a time; one lifecycle step of every pod in flight.
BATCH = IN_FLIGHT


def cpu_us_per_batch(events: Iterator[Event], cache: WatchCache, ops: int) -> list[float]:
    """CPU µs per ``cache.apply`` in each of the batches of :data:`BATCH` events that make
    ``ops``, each drawn untimed right before it is applied."""
    per_batch = []
    for _ in range(0, ops, BATCH):
        batch = list(itertools.islice(events, BATCH))
        start = time.process_time_ns()
        for event in batch:
            cache.apply(event)
        per_batch.append((time.process_time_ns() - start) / len(batch) / 1e3)
    return per_batch


#: Events per round: more than an index epoch holds changes (IndexEpoch::kCapacity, 4,096),
#: so that every round of every kind of write holds a fold of the index's changes into its
#: trees, and a median of rounds counts them.
ROUND_EVENTS = 4_500

#: The three kinds of write, as :func:`measure` names them, with their labels.
MODES = {
    "keeps": "status update (keeps node)",
    "moves": "rescheduled (moves node)",
    "lifecycle": "pod lifecycles (8 writes)",
}


@dataclass
class ModeCost:
    """One kind of write: median CPU µs per event of each cache's rounds, the median of the
    per-round ratios (indexed / plain; every round holds a fold, :data:`ROUND_EVENTS`), and
    the ratio of the two caches' whole CPU time (`mean_ratio`: where a pause of the shared
    machine or a garbage collection lands moves it more); for lifecycles the mean of each
    step, ``{step: [plain, indexed]}``."""

    mode: str
    plain_us: float
    indexed_us: float
    ratio: float
    mean_ratio: float
    steps: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class IndexWriteCost:
    """What :func:`measure` found, with the sizes it ran at."""

    pods: int
    nodes: int
    value_bytes: int
    window: int
    ops: int
    rounds: int
    modes: list[ModeCost]
    pinned_per_snapshot: dict[str, float]  # "plain", "indexed": registry bytes per snapshot

    def mode(self, name: str) -> ModeCost:
        return next(m for m in self.modes if m.mode == name)


def measure(
    n: int, nodes: int, *, value_bytes: int = 1024, ops: int = ROUND_EVENTS, repeats: int = 10,
    window: int = 10_000, seed: int = 1,
) -> IndexWriteCost:  # fmt: skip
    """The same events applied to two caches of ``n`` pods over ``nodes`` nodes, one indexing
    ``spec.nodeName`` and one without indexes, in alternating rounds (the module docstring)."""
    if ops % BATCH or window % BATCH:
        raise ValueError(f"ops and window are counts of whole batches of {BATCH} events")
    rng = random.Random(seed)
    placement = [rng.randrange(nodes) for _ in range(n)]
    items = [pod(i, placement[i], i + 1, value_bytes) for i in range(n)]
    history = {"history_lower_bound": window, "history_upper_bound": window}
    plain = loaded_cache(items, list_indexes=(), **history)
    indexed = loaded_cache(items, **history)
    assert indexed.list_indexes == (NODE_INDEX,), indexed.list_indexes
    costs = []
    for mode in MODES:

        def stream(cache: WatchCache, mode: str = mode) -> Iterator[Event]:
            rv = cache.resource_version
            if mode == "lifecycle":
                return lifecycles(n, nodes, rv, value_bytes, seed=seed + 1)
            return updates(
                list(placement), nodes, rv, value_bytes, moves=mode == "moves", seed=seed + 1
            )

        streams = {id(cache): stream(cache) for cache in (plain, indexed)}
        for cache in (plain, indexed):  # fill the windows, untimed
            for event in itertools.islice(streams[id(cache)], window):
                cache.apply(event)
        times: dict[int, list[float]] = {id(plain): [], id(indexed): []}
        by_kind: dict[int, dict[str, list[float]]] = {id(plain): {}, id(indexed): {}}
        drawn = dict.fromkeys(times, window)
        ratios = []
        for r in range(2 * repeats):
            order: tuple[WatchCache, WatchCache] = (
                (plain, indexed) if r % 2 == 0 else (indexed, plain)
            )
            for cache in order:
                batches = cpu_us_per_batch(streams[id(cache)], cache, ops)
                times[id(cache)].append(statistics.fmean(batches))
                for b, us in enumerate(batches):
                    kind = lifecycle_kind(drawn[id(cache)] + b * BATCH)
                    by_kind[id(cache)].setdefault(kind, []).append(us)
                drawn[id(cache)] += len(batches) * BATCH
            ratios.append(times[id(indexed)][-1] / times[id(plain)][-1])
        steps = {}
        if mode == "lifecycle":  # where a lifecycle's cost is, step by step
            steps = {
                kind: [statistics.fmean(by_kind[id(c)][kind]) for c in (plain, indexed)]
                for kind in dict.fromkeys(LIFECYCLE)
            }
        plain_us, indexed_us = (statistics.median(times[id(c)]) for c in (plain, indexed))
        mean_ratio = statistics.fmean(times[id(indexed)]) / statistics.fmean(times[id(plain)])
        costs.append(
            ModeCost(mode, plain_us, indexed_us, statistics.median(ratios), mean_ratio, steps)
        )
    pinned = {}
    for name, cache in (("plain", plain), ("indexed", indexed)):
        stored = len(cache.registry)
        pinned[name] = cache.registry.pinned_bytes() / stored if stored else 0.0
    # The index kept up with every event: one node's pods, through it and by a full scan.
    snap = indexed.snapshot()[1]
    on_node = [it.key for it in snap.scan() if it.fields["spec.nodeName"] == "node-00001"]
    assert snap.scan_index(*NODE_INDEX, ["node-00001"]).keys() == on_node
    return IndexWriteCost(n, nodes, value_bytes, window, ops, 2 * repeats, costs, pinned)


def rss_per_entry(n: int, nodes: int, *, value_bytes: int = 1024, seed: int = 1) -> float:
    """Resident bytes per entry that declaring the ``spec.nodeName`` index adds to a tree of
    ``n`` pods (bulk-loaded: its leaves full, as a cache's after a relist). Meaningful from
    ~100,000 pods, in a process that has not freed engine nodes before: a smaller index fits
    in memory the process already holds (15,000 pods read 0 B)."""
    rng = random.Random(seed)
    items = sorted(
        (pod(i, rng.randrange(nodes), i + 1, value_bytes) for i in range(n)), key=lambda it: it.key
    )
    tree = Tree.from_sorted(items)
    del items
    release_free_heap()
    before = rss()
    tree.add_index(*NODE_INDEX)
    release_free_heap()  # the build's sort buffer is malloc'ed and freed
    grown = rss() - before
    assert len(tree.snapshot().scan_index(*NODE_INDEX, [pod(0, 0, 1, 0).fields["spec.nodeName"]]))
    return grown / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n", type=int, default=150_000)
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--ops", type=int, default=ROUND_EVENTS)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--window", type=int, default=10_000)
    parser.add_argument(
        "--memory-only", action="store_true", help="print only the index's bytes per entry"
    )
    args = parser.parse_args()
    if args.ops % BATCH or args.window % BATCH:
        parser.error(f"--ops and --window are counts of whole batches of {BATCH} events")
    seed = seed_from_env()
    # First, in a fresh process: node memory freed by the caches below would be reused.
    per_entry = rss_per_entry(args.n, args.nodes, value_bytes=args.value_bytes, seed=seed)
    if args.memory_only:
        print(f"{per_entry:.2f}")
        return
    print(
        f"{args.n:,} pods on {args.nodes:,} nodes, {args.value_bytes} B values, history window "
        f"{args.window:,}; {args.ops:,} events per round, {2 * args.repeats} rounds"
    )
    cost = measure(
        args.n, args.nodes, value_bytes=args.value_bytes, ops=args.ops, repeats=args.repeats,
        window=args.window, seed=seed,
    )  # fmt: skip
    for m in cost.modes:
        print(
            f"{MODES[m.mode]:28s} no index {m.plain_us:6.2f} µs/event   "
            f"1 index {m.indexed_us:6.2f} µs/event   "
            f"ratio {m.ratio:.2f}x median of rounds (target ≤ 1.30x), "
            f"{m.mean_ratio:.2f}x of all their time"
        )
        for kind, (alone, with_index) in m.steps.items():
            print(
                f"  {kind:26s} no index {alone:6.2f} µs/event   1 index {with_index:6.2f} "
                f"µs/event   ratio {with_index / alone:.2f}x"
            )
    for name, label in (("plain", "no index"), ("indexed", "1 index")):
        print(f"pinned per stored snapshot, {label}: {cost.pinned_per_snapshot[name]:,.0f} B")
    print(
        f"index RSS per entry, declared on {args.n:,} bulk-loaded pods: {per_entry:.1f} B "
        "(target ≤ 48 B)"
    )


if __name__ == "__main__":
    main()
