"""Where WatchCache.apply's time goes: the same MODIFIED events applied with one snapshot
per event (the default, history window growing), with snapshot retention capped, without
snapshots, and in a steady full window. Prints per-event times and the registry's pinned
bytes per stored snapshot. Usage: ``python bench/apply_cost.py [--n 100000]``.

It separates the engine's cost (a path copy per event, kept alive while the window holds
the snapshot) from the Python around it; see bench/README.md and issue 2's targets.
"""

from __future__ import annotations

import argparse
import itertools

from cache_scenarios import loaded_cache, modifications, pods, timed_fed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--ops", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    items = pods(args.n, 1024, 1)

    def window(size: int) -> dict[str, object]:
        return {"history_lower_bound": size, "history_upper_bound": size}

    variants: list[tuple[str, dict[str, object], int]] = [
        ("one snapshot per event, window growing", {}, 0),
        ("retention capped at 100 events", {"history_upper_bound": 100}, 0),
        ("no snapshots", {"snapshots": False}, 0),
        ("steady full window of 1,000", window(1000), 1000),
        ("steady full window of 10,000", window(10_000), 10_000),
    ]
    for label, options, warm in variants:
        cache = loaded_cache(items, **options)
        events = modifications(items, cache.resource_version, 1)
        for event in itertools.islice(events, warm):
            cache.apply(event)
        per_event = timed_fed(events, cache.apply, args.ops, args.repeats)
        stored = len(cache.registry)
        pinned = cache.registry.pinned_bytes() / stored if stored else 0.0
        timing = f"{per_event:6.2f} µs/event"
        memory = f"snapshots {stored:6d}  {pinned:6.0f} B pinned each"
        print(f"{label:40s} {timing}  {memory}")


if __name__ == "__main__":
    main()
