"""Memory per item: RSS growth from building N items in watchcache and in its peers.

Run: ``python bench/memory.py [--n 1000000] [--value-bytes 100] [--json PATH]``.

Each structure is built in a fresh child process (this script with ``--child NAME``) so
allocator state from one build cannot hide or inflate another. The child imports
everything, reads resident memory from /proc/self/statm (field 2, pages), builds the
structure from a stream of the workload's ascending (key, value) pairs, collects garbage
and reads it again; the delta is what holding N items costs. Python structures keep the
key ``str`` and value ``bytes`` objects alive, so their delta includes them; watchcache
copies keys and values into its items and the stream's Python objects are freed, so its
delta is the engine alone (it also reports the engine's own ``Tree.nbytes``). "raw" is
the UTF-8 key bytes plus value bytes, the floor for any store; overhead = delta - raw.

Target (docs/architecture.md): watchcache at 1M items with ~40-byte keys and 100-byte
values costs at most raw + 96 B/item and less than a dict holding the same. Cost: ~10 s
per child at 1M.
RSS is coarse (pages, allocator caching): trust differences of a few bytes/item at 1M,
not at 1k.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator, Sized
from pathlib import Path
from typing import Any

from workload import entries, seed_from_env

PAGE = os.sysconf("SC_PAGE_SIZE")
Entries = Iterator[tuple[str, bytes]]


def rss_bytes() -> int:
    with Path("/proc/self/statm").open() as f:
        return int(f.read().split()[1]) * PAGE


def build_watchcache(stream: Entries) -> Sized:
    from watchcache import _core

    tree: Sized = _core.Tree.from_sorted(stream)
    return tree


def build_dict(stream: Entries) -> Sized:
    return dict(stream)


def build_sorteddict(stream: Entries) -> Sized:
    from sortedcontainers import SortedDict

    sd: Sized = SortedDict(stream)
    return sd


def build_oobtree(stream: Entries) -> Sized:
    from BTrees.OOBTree import OOBTree

    tree = OOBTree()
    for key, value in stream:  # update() wants a mapping or a sequence, not a stream
        tree[key] = value
    built: Sized = tree
    return built


def build_immutables(stream: Entries) -> Sized:
    import immutables

    m: Sized = immutables.Map(stream)
    return m


BUILDERS: dict[str, tuple[str, Callable[[Entries], Sized]]] = {
    "watchcache": ("watchcache._core", build_watchcache),
    "dict": ("builtins", build_dict),
    "SortedDict": ("sortedcontainers", build_sorteddict),
    "OOBTree": ("BTrees.OOBTree", build_oobtree),
    "immutables.Map": ("immutables", build_immutables),
}


def child(name: str, n: int, seed: int, value_bytes: int) -> dict[str, Any]:
    """Build one structure in this process and return its measurements."""
    module, build = BUILDERS[name]
    __import__(module)
    raw = sum(len(k.encode()) + len(v) for k, v in entries(n, seed, value_bytes))
    gc.collect()
    before = rss_bytes()
    built = build(entries(n, seed, value_bytes))
    gc.collect()
    after = rss_bytes()
    assert len(built) == n, f"{name} holds {len(built)} items, expected {n}"
    result: dict[str, Any] = {
        "impl": name,
        "n": n,
        "value_bytes": value_bytes,
        "rss_delta": after - before,
        "raw_bytes": raw,
    }
    engine_bytes = getattr(built, "nbytes", None)
    if isinstance(engine_bytes, int):
        result["engine_nbytes"] = engine_bytes
    return result


def measure(name: str, n: int, seed: int, value_bytes: int) -> dict[str, Any] | str:
    """Run ``child`` in a fresh interpreter; its result, or why it could not run."""
    try:
        __import__(BUILDERS[name][0])
    except ImportError as exc:
        return f"unavailable: {exc}"
    cmd = [sys.executable, __file__, "--child", name, "--n", str(n), "--seed", str(seed)]
    cmd += ["--value-bytes", str(value_bytes)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return f"failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}"
    parsed: dict[str, Any] = json.loads(proc.stdout)
    return parsed


def table(results: list[dict[str, Any]]) -> list[str]:
    """Markdown rows, bytes per item; "vs dict" is this RSS delta over dict's."""
    by_name = {r["impl"]: r for r in results}
    dict_delta = by_name["dict"]["rss_delta"] if "dict" in by_name else None
    rows = [
        "| structure | RSS delta | bytes/item | raw bytes/item | overhead/item | vs dict |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        n = r["n"]
        per_item = r["rss_delta"] / n
        raw = r["raw_bytes"] / n
        vs_dict = f"{r['rss_delta'] / dict_delta:.2f}x" if dict_delta else "—"
        rows.append(
            f"| {r['impl']} | {r['rss_delta'] / 2**20:,.1f} MiB | {per_item:,.1f} | {raw:,.1f} "
            f"| {per_item - raw:,.1f} | {vs_dict} |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="items (default 1M)")
    parser.add_argument("--value-bytes", type=int, default=100, help="value size (default 100)")
    parser.add_argument("--seed", type=int, default=seed_from_env(), help="WATCHCACHE_SEED")
    parser.add_argument("--impl", action="append", choices=list(BUILDERS), help="repeatable")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", choices=list(BUILDERS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.n, args.seed, args.value_bytes)))
        return 0

    print(f"memory: n={args.n:,} value_bytes={args.value_bytes} seed={args.seed}", flush=True)
    results: list[dict[str, Any]] = []
    for name in args.impl or list(BUILDERS):
        got = measure(name, args.n, args.seed, args.value_bytes)
        if isinstance(got, str):
            print(f"  {name}: skipped, {got}", flush=True)
            continue
        results.append(got)
        line = f"  {name}: {got['rss_delta'] / args.n:,.1f} B/item RSS"
        if "engine_nbytes" in got:
            line += f", engine's own count {got['engine_nbytes'] / args.n:,.1f} B/item"
        print(line, flush=True)
    print("\n".join(table(results)))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        command = "python bench/memory.py " + shlex.join(sys.argv[1:] if argv is None else argv)
        doc = {"seed": args.seed, "command": command, "results": results}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if results else 1


if __name__ == "__main__":
    raise SystemExit(main())
