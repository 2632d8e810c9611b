"""Scenario 5, the engine against its peers: pytest-benchmark JSONs (and optionally
memory.py's JSON) into bench/results/peers.json, peers.png and bench/README.md's section.

Run: ``python bench/peers_report.py bench/results/engine.json [bench/results/engine-1k.json ...]
[--memory bench/results/memory.json] [--results bench/results] [--readme bench/README.md]``;
``--print`` writes the section to stdout instead.

Each engine JSON is one pytest run at one value size (conftest.py records it); ``make
bench`` gives two, all operations at 100-byte values and the scans again at 1 KB. Files
with the same value size are merged (a later file's result replaces an earlier one's).

The README keeps its hand-written method and caveats; this script owns only the text
between the ``peers`` markers, replacing it whole, so a re-run never duplicates a
table. The section states the run's date, machine, seed and the exact command (recorded by
conftest.py in ``machine_info["watchcache_bench"]``), then:

- the docs/architecture.md targets, each checked against the run with the value size it names (100
  bytes, but 1 KB for the rendered body) at the largest item count that run measured; the
  targets are stated at 1M, so a ``--quick`` run only previews them;
- per value size, one table per item count: the median time per operation for each
  implementation, and how watchcache compares with the best peer (the fastest of the
  others) in the same run;
- the memory table, when given.

The figure shows, per operation and item count, each peer's median over watchcache's
(above 1: watchcache is faster), on a log scale.

Medians, not means: the machine is shared and a few preempted rounds skew a mean.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from contender import CONTENDERS, PEERS
from harness import README, RESULTS
from memory import table as memory_table
from reporting import Headline, Report, figure, fmt_ratio, fmt_time
from workload import size_label

ENGINE = "watchcache"
#: The value sizes the targets name: ~100-byte values, except the rendered 1 KB body.
SMALL_VALUES = 100
LARGE_VALUES = 1024

#: op -> row label, in table order.
OPS = {
    "build": "build from random order",
    "build-sorted": "build from sorted input",
    "snapshot": "snapshot (take + drop)",
    "put": "put, older snapshot alive",
    "put-after-snapshot": "snapshot, then put",
    "get": "get",
    "scan-items": "scan 500 → Python items",
    "scan-rendered": "scan 500 → JSON body",
    "iterate": "iterate all, in order",
    "count-prefix": "count one namespace",
}


@dataclass(frozen=True)
class Result:
    op: str
    impl: str
    n: int
    value_bytes: int
    median: float
    rounds: int


@dataclass(frozen=True)
class Run:
    """One engine JSON: pytest-benchmark's document and the results it holds."""

    path: Path
    doc: dict[str, Any]
    results: list[Result]

    @property
    def bench_info(self) -> dict[str, Any]:
        info: dict[str, Any] = self.doc["machine_info"].get("watchcache_bench", {})
        return info


ByKey = dict[tuple[str, str, int], Result]


@dataclass(frozen=True)
class Target:
    label: str
    limit: str
    #: The value size the target is stated for; checked on the run at that size.
    value_bytes: int
    #: Measured value (display string) and whether it meets the limit, or None if not run.
    check: Callable[[ByKey, int], tuple[str, bool] | None]


def fmt_bytes(b: int) -> str:
    """1024 -> "1 KB", 100 -> "100 B"."""
    return f"{b // 1024} KB" if b >= 1024 and b % 1024 == 0 else f"{b} B"


def values_heading(b: int) -> str:
    """1024 -> "1 KB values", 100 -> "100-byte values"."""
    return f"{b // 1024} KB values" if b >= 1024 and b % 1024 == 0 else f"{b}-byte values"


def load(path: Path) -> Run:
    doc = json.loads(path.read_text())
    value_bytes = doc["machine_info"].get("watchcache_bench", {}).get("value_bytes")
    if not isinstance(value_bytes, int):
        raise SystemExit(f"report: {path} records no value size (not made by bench/conftest.py)")
    results = []
    for b in doc["benchmarks"]:
        info = b.get("extra_info", {})
        if "op" not in info:
            continue
        s = b["stats"]
        results.append(
            Result(info["op"], info["impl"], info["n"], value_bytes, s["median"], s["rounds"])
        )
    return Run(path, doc, results)


def merge(runs: list[Run]) -> list[Result]:
    """Every run's results; for a repeated (op, impl, n, value size) the later run's."""
    merged: dict[tuple[str, str, int, int], Result] = {}
    for run in runs:
        for r in run.results:
            merged[(r.op, r.impl, r.n, r.value_bytes)] = r
    return list(merged.values())


def engine_time(by_key: ByKey, op: str, n: int) -> float | None:
    r = by_key.get((op, ENGINE, n))
    return r.median if r else None


def time_target(label: str, op: str, limit: float, value_bytes: int = SMALL_VALUES) -> Target:
    def check(by_key: ByKey, n: int) -> tuple[str, bool] | None:
        t = engine_time(by_key, op, n)
        return None if t is None else (fmt_time(t), t <= limit)

    return Target(label, f"≤ {fmt_time(limit)}", value_bytes, check)


def snapshot_flatness(by_key: ByKey, n: int) -> tuple[str, bool] | None:
    big, small = engine_time(by_key, "snapshot", n), engine_time(by_key, "snapshot", 1_000)
    if big is None or small is None:
        return None
    return f"{big / small:.2f}x ({size_label(n)} vs 1k)", big / small <= 1.5


TARGETS = [
    time_target("snapshot()", "snapshot", 0.3e-6),
    Target("snapshot() independent of size", "≤ 1.5x", SMALL_VALUES, snapshot_flatness),
    time_target("put with an older snapshot alive", "put", 2e-6),
    time_target("put right after a fresh snapshot", "put-after-snapshot", 2e-6),
    time_target("scan 500 → Python items", "scan-items", 35e-6),
    time_target("scan 500 → rendered body", "scan-rendered", 60e-6, LARGE_VALUES),
    time_target("count a prefix of n/1000 keys", "count-prefix", 2e-6),
]


def target_rows(results: list[Result], memory: list[dict[str, Any]] | None) -> list[str]:
    rows = [
        "| target | limit | checked at | measured | met |",
        "|---|---|---|---:|:-:|",
    ]
    largest = 0
    for t in TARGETS:
        mine = [r for r in results if r.value_bytes == t.value_bytes and r.op != "harness"]
        n = max((r.n for r in mine), default=0)
        got = t.check({(r.op, r.impl, r.n): r for r in mine}, n) if mine else None
        if got is None:
            at, measured, met = f"{fmt_bytes(t.value_bytes)} values", "not run", "—"
        else:
            at, measured, met = (
                f"{size_label(n)} items, {fmt_bytes(t.value_bytes)} values",
                got[0],
                "yes" if got[1] else "NO",
            )
            largest = max(largest, n)
        rows.append(f"| {t.label} | {t.limit} | {at} | {measured} | {met} |")
    rows += memory_target_rows(memory)
    intro = (
        "Targets from docs/architecture.md, each checked on the run with the value size it "
        "names, at the largest item count measured"
        + (" (a preview: the targets are stated at 1M)" if largest < 1_000_000 else "")
        + ". Times include calling from Python."
    )
    return [intro, "", *rows]


def memory_target_rows(memory: list[dict[str, Any]] | None) -> list[str]:
    if not memory:
        return []
    by_name = {m["impl"]: m for m in memory}
    wc, d = by_name.get(ENGINE), by_name.get("dict")
    if wc is None:
        return ["| memory per item | raw + 96 B, < dict | — | not run | — |"]
    n = wc["n"]
    at = f"{size_label(n)} items, {fmt_bytes(wc['value_bytes'])} values"
    overhead = (wc["rss_delta"] - wc["raw_bytes"]) / n
    rows = [
        f"| memory overhead per item | ≤ 96 B | {at} | {overhead:,.1f} B "
        f"| {'yes' if overhead <= 96 else 'NO'} |"
    ]
    if d is not None:
        ratio = wc["rss_delta"] / d["rss_delta"]
        rows.append(
            f"| memory vs a dict holding the same | < 1x | {at} | {ratio:.2f}x "
            f"| {'yes' if ratio < 1 else 'NO'} |"
        )
    return rows


def size_table(results: list[Result], n: int) -> list[str]:
    """One item count at one value size: ``results`` must hold a single value size."""
    impls = [name for name in CONTENDERS if any(r.impl == name and r.n == n for r in results)]
    by_key = {(r.op, r.impl): r for r in results if r.n == n}
    rows = [
        f"| {size_label(n)} items | " + " | ".join(impls) + " | watchcache vs best peer |",
        "|---|" + "---:|" * len(impls) + "---|",
    ]
    for op, op_label in OPS.items():
        cells = {impl: by_key[(op, impl)].median for impl in impls if (op, impl) in by_key}
        if not cells:
            continue
        best = min(cells.values())
        shown = [
            "—"
            if impl not in cells
            else (f"**{fmt_time(cells[impl])}**" if cells[impl] == best else fmt_time(cells[impl]))
            for impl in impls
        ]
        rows.append(f"| {op_label} | " + " | ".join(shown) + f" | {versus(cells)} |")
    return rows


def versus(cells: dict[str, float]) -> str:
    """ "120x faster than SortedDict" / "1.9x slower than dict" / "—"."""
    peers = {impl: t for impl, t in cells.items() if impl in PEERS}
    if ENGINE not in cells or not peers:
        return "—"
    best = min(peers, key=peers.__getitem__)
    ratio = peers[best] / cells[ENGINE]
    if ratio >= 1:
        return f"{fmt_ratio(ratio)} faster than {best}"
    return f"{fmt_ratio(1 / ratio)} slower than {best}"


def distinct(values: list[Any]) -> str:
    """The values, once each, in first-seen order: "32" or "32 / 16" when runs disagree."""
    return " / ".join(str(v) for v in dict.fromkeys(values))


def value_sizes_line(results: list[Result]) -> str:
    """ "100 bytes (every operation); 1024 bytes (scan 500 → Python items, ...)"."""
    parts = []
    for b in sorted({r.value_bytes for r in results}):
        ops = {r.op for r in results if r.value_bytes == b}
        if set(OPS) <= ops:
            parts.append(f"{b} bytes (every operation)")
        else:
            labels = ", ".join(label for op, label in OPS.items() if op in ops)
            parts.append(f"{b} bytes ({labels})")
    return "; ".join(parts)


def render(runs: list[Run], memory: dict[str, Any] | None, argv: list[str]) -> str:
    first = runs[0]
    info = first.doc["machine_info"]
    infos = [run.bench_info for run in runs]
    wb = infos[0]
    cpu = info.get("cpu", {}).get("brand_raw", info.get("processor", "?"))
    versions = ", ".join(f"{k} {v}" for k, v in wb.get("versions", {}).items())
    results = merge(runs)
    harness = [r for r in results if r.op == "harness"]
    commands = [f"`{i.get('command', '?')}`" for i in infos]
    if memory:
        commands.append(f"`{memory.get('command', 'python bench/memory.py')}`")
    out = [
        f"### Results of {first.doc['datetime'][:16].replace('T', ' ')} UTC",
        "",
        "- Made by " + ",\n  ".join(commands) + ",",
        f"  then `python bench/peers_report.py {' '.join(argv)}`.",
        f"- Machine: {cpu}, {wb.get('cpu_count', '?')} cores, {wb.get('platform', '?')}; "
        f"Python {wb.get('python', '?')}.",
        f"- Seed {distinct([i.get('seed', '?') for i in infos])}, "
        f"FANOUT {distinct([i.get('fanout') for i in infos])}; {versions}.",
        f"- Values: {value_sizes_line(results)}.",
    ]
    if harness:
        out.append(
            f"- Harness cost per call (closure + `next()` over pre-drawn keys), included in "
            f"put/get/scan/count times but not in snapshot: "
            f"{fmt_time(min(r.median for r in harness))}."
        )
    mem_rows = memory["results"] if memory else None
    out += ["", *target_rows(results, mem_rows), ""]
    out.append("Median time per operation; **bold** is the fastest in its row.")
    for b in sorted({r.value_bytes for r in results}):
        mine = [r for r in results if r.value_bytes == b and r.op != "harness"]
        if not mine:
            continue
        out += ["", f"#### {values_heading(b)}"]
        for n in sorted({r.n for r in mine}):
            out += ["", *size_table(mine, n)]
    if mem_rows:
        out += [
            "",
            "#### Memory",
            "",
            f"RSS growth to hold {size_label(mem_rows[0]['n'])} items "
            f"({mem_rows[0]['value_bytes']}-byte values), one fresh process each.",
            "",
            *memory_table(mem_rows),
        ]
    return "\n".join(out) + "\n"


#: The operations the summary table quotes (the issue's list), in its order.
HEADLINE_OPS = ("build", "snapshot", "put-after-snapshot", "scan-items", "iterate")


def headline(results: list[Result]) -> list[Headline]:
    """Per quoted operation, at the largest item count with small values: watchcache's
    median, and the best peer's and how it compares (plus OOBTree's, the other B-tree)."""
    small = [r for r in results if r.value_bytes == SMALL_VALUES and r.op != "harness"]
    if not small:
        return []
    n = max(r.n for r in small)
    cells = {(r.op, r.impl): r.median for r in small if r.n == n}
    lines: list[Headline] = []
    for op in HEADLINE_OPS:
        mine = {impl: t for (o, impl), t in cells.items() if o == op}
        if ENGINE not in mine:
            continue
        note = versus(mine)
        if "OOBTree" in mine and "OOBTree" not in note:
            note += f"; OOBTree {fmt_time(mine['OOBTree'])}"
        lines.append(
            Headline(
                "Engine vs peers" if not lines else "",
                f"{OPS[op]}, {size_label(n)} items",
                fmt_time(mine[ENGINE]),
                note=note,
            )
        )
    return lines


def plot(results: list[Result]) -> Callable[[Path], None]:
    def draw(path: Path) -> None:
        small = [r for r in results if r.value_bytes == SMALL_VALUES and r.op != "harness"]
        sizes = sorted({r.n for r in small if r.n >= 100_000}) or sorted({r.n for r in small})
        peers = [p for p in PEERS if any(r.impl == p for r in small)]
        ops = [op for op in OPS if any(r.op == op for r in small)]
        title = "Peer's median time / watchcache's (above 1: watchcache faster), 100-byte values"
        with figure(path, title=title, ncols=len(sizes), size=(7 * len(sizes), 6)) as axes:
            for ax, n in zip(axes, sizes, strict=True):
                cells = {(r.op, r.impl): r.median for r in small if r.n == n}
                width = 0.8 / max(1, len(peers))
                for i, peer in enumerate(peers):
                    ys = [k + i * width for k in range(len(ops))]
                    ratios = [
                        cells[(op, peer)] / cells[(op, ENGINE)]
                        if (op, peer) in cells and (op, ENGINE) in cells
                        else 0.0
                        for op in ops
                    ]
                    ax.barh(ys, ratios, width, label=peer)
                ax.axvline(1.0, color="black", linewidth=0.8)
                ax.set_xscale("log")
                ax.set_yticks([k + 0.4 - width / 2 for k in range(len(ops))], [OPS[o] for o in ops])
                ax.invert_yaxis()
                ax.set_title(f"{size_label(n)} items", fontsize=10)
                ax.legend(fontsize=8)

    return draw


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "engine_json",
        type=Path,
        nargs="+",
        help="pytest --benchmark-json output, one or more (one value size each)",
    )
    parser.add_argument("--memory", type=Path, help="memory.py --json output")
    parser.add_argument("--results", type=Path, default=RESULTS, help="for peers.json and .png")
    parser.add_argument("--readme", type=Path, default=README)
    parser.add_argument("--print", action="store_true", help="print, do not touch the README")
    args = parser.parse_args(argv)
    runs = [load(path) for path in args.engine_json]
    memory = json.loads(args.memory.read_text()) if args.memory else None
    section = render(runs, memory, argv)
    if args.print:
        sys.stdout.write(section)
        return 0
    results = merge(runs)
    quick = any(run.bench_info.get("quick") for run in runs)
    report = Report(
        "peers",
        "Scenario 5: the engine vs SortedDict, OOBTree, dict and immutables.Map",
        "quick" if quick else "full",
        how="Engine microbenchmarks (pytest-benchmark), each operation written once and run "
        "for every structure; see Method above."
        + (" Quick mode: 100k items only." if quick else ""),
        tables=[section],
        headline=headline(results),
        data={
            "results": [asdict(r) for r in results],
            "memory": memory["results"] if memory else None,
            "bench_info": [run.bench_info for run in runs],
        },
    )
    report.publish(results=args.results, readme=args.readme, plot=plot(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
