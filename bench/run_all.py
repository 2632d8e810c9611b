"""Run every benchmark scenario, one after the other, and write the summary: ``make bench``
(quick mode, about 5 minutes on 2 cores) and ``make bench-full`` (``--full``).

Each step is a command of its own (listed by ``--list``), run from the repository root
with this interpreter; each scenario writes bench/results/<scenario>.json and .png and
replaces its own section of bench/README.md. Then this script writes
bench/results/run.json (the commands, their wall times, the total) and the README's
summary section: the headline numbers of every scenario JSON present (watchcache vs etcd
vs Kubernetes' published figures), the machine and the commands.

A failing step does not stop the others; the exit status says whether all passed.
``--only kep2340,pagination`` runs some steps (the summary still shows the latest JSON of
every scenario, each with its own date and mode); ``--summary-only`` just rewrites it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness import README, RESULTS
from reporting import (
    REPO,
    Headline,
    load_results,
    machine,
    machine_line,
    markdown,
    replace_section,
)

#: Scenarios in the order the summary shows them.
ORDER = ("kep2340", "pagination", "watch", "snapshot-memory", "kubelet", "list-memory", "peers")


@dataclass
class Step:
    scenario: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)

    @property
    def command(self) -> str:
        env = "".join(f"{k}={shlex.quote(v)} " for k, v in self.env.items())
        return f"{env}python {shlex.join(self.args)}"


def steps(full: bool) -> list[Step]:
    flag = ["--full"] if full else []
    quick = [] if full else ["--quick"]
    results = "bench/results"
    pytest = ["-m", "pytest", "bench", "--benchmark-only", *quick]
    return [
        Step("peers", [*pytest, f"--benchmark-json={results}/engine.json"]),
        Step(
            "peers",
            [
                *pytest,
                "-k",
                "scan_items or scan_rendered",
                f"--benchmark-json={results}/engine-1k.json",
            ],
            {"WATCHCACHE_BENCH_VALUE_BYTES": "1024"},
        ),
        Step(
            "peers",
            [
                "bench/memory.py",
                "--n",
                "1000000" if full else "100000",
                "--json",
                f"{results}/memory.json",
            ],
        ),
        Step(
            "peers",
            [
                "bench/peers_report.py",
                f"{results}/engine.json",
                f"{results}/engine-1k.json",
                "--memory",
                f"{results}/memory.json",
            ],
        ),
        Step("kep2340", ["bench/kep2340.py", *flag]),
        Step("pagination", ["bench/pagination.py", *flag]),
        Step("watch", ["bench/watch_fanout.py", *flag]),
        Step("snapshot-memory", ["bench/snapshot_memory.py", *flag]),
        Step("kubelet", ["bench/kubelet.py", *flag]),
        Step("list-memory", ["bench/list_memory.py", *flag]),
        Step("cache-scenarios", ["bench/cache_scenarios.py", *flag]),
        Step("etcd-scenarios", ["bench/etcd_scenarios.py", *flag]),
    ]


def run(selected: list[Step]) -> list[dict[str, Any]]:
    done = []
    for step in selected:
        print(f"\n=== {step.command}", flush=True)
        started = time.perf_counter()
        code = subprocess.call(
            [sys.executable, *step.args], cwd=REPO, env={**os.environ, **step.env}
        )
        seconds = time.perf_counter() - started
        print(f"=== {step.scenario}: exit {code}, {seconds:,.0f} s", flush=True)
        done.append(
            asdict(step) | {"command": step.command, "seconds": seconds, "returncode": code}
        )
    return done


def duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def scenario_row(doc: dict[str, Any], run_doc: dict[str, Any] | None) -> list[str]:
    """A scenario's line: its wall time and commands are those of the last run_all run
    when the scenario's JSON came from it (peers: several commands), else its own."""
    steps = [s for s in (run_doc or {}).get("steps", []) if s["scenario"] == doc["scenario"]]
    if not (run_doc and steps and doc["started"][:19] >= run_doc["started"][:19]):
        steps = [{"seconds": doc["seconds"], "command": doc["command"]}]
    return [
        doc["scenario"],
        doc["mode"],
        doc["started"][:16].replace("T", " "),
        duration(sum(s["seconds"] for s in steps)),
        f"{doc['machine']['load_average'][0]}",
        "<br>".join(f"`{s['command']}`" for s in steps),
    ]


def summary(results: Path, run_doc: dict[str, Any] | None) -> str:
    docs = load_results(results)
    ordered = [docs[s] for s in ORDER if s in docs]
    ordered += [d for s, d in docs.items() if s not in ORDER]
    rows = []
    for doc in ordered:
        for h in (Headline(**line) for line in doc["headline"]):
            rows.append([h.scenario, h.metric, h.watchcache, h.etcd, h.kubernetes, h.note])
    header = ["scenario", "metric", "watchcache", "through etcd (our client)",
              "Kubernetes, published (KEP-2340; not measured here)", "notes"]  # fmt: skip
    info = ordered[0]["machine"] if ordered else machine()
    etcd_versions = {d["data"].get("etcd_version") for d in ordered} - {None}
    lines = [
        "## Summary",
        "",
        f"Machine: {machine_line(info)}; etcd {', '.join(sorted(etcd_versions)) or '?'}. "
        "The machine is shared with other work: compare numbers within one run (the ratios), "
        "and mind each scenario's load average.",
        "",
        markdown(header, rows, "llrrrl"),
        "",
        "Each scenario's date, mode and exact commands (from the repository root):",
        "",
        markdown(
            ["scenario", "mode", "date (UTC)", "wall time", "load avg at start", "commands"],
            [scenario_row(d, run_doc) for d in ordered],
            "llllrl",
        ),
    ]
    if run_doc is not None:
        failed = [s["command"] for s in run_doc["steps"] if s["returncode"]]
        lines += [
            "",
            f"The last `python bench/run_all.py{' --full' if run_doc['mode'] == 'full' else ''}` "
            f"(`make bench{'-full' if run_doc['mode'] == 'full' else ''}`) took "
            f"{duration(run_doc['seconds'])} in all ({run_doc['mode']} mode, started "
            f"{run_doc['started'][:16].replace('T', ' ')} UTC)"
            + (f"; these failed: {', '.join(f'`{c}`' for c in failed)}." if failed else "."),
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().split("\n", 1)[0])
    p.add_argument("--full", action="store_true", help="full sizes and rounds (default: quick)")
    p.add_argument("--only", help="comma-separated scenarios (see --list)")
    p.add_argument("--list", action="store_true", help="print the steps and exit")
    p.add_argument("--summary-only", action="store_true", help="only rewrite the summary")
    p.add_argument("--readme", type=Path, default=README)
    args = p.parse_args(argv)
    selected = steps(args.full)
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {s.scenario for s in selected}
        if unknown:
            p.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
        selected = [s for s in selected if s.scenario in wanted]
    if args.list:
        print("\n".join(f"{s.scenario:16s} {s.command}" for s in selected))
        return 0
    run_path = RESULTS / "run.json"
    failed = False
    if not args.summary_only:
        started = time.time()
        begin = time.perf_counter()
        done = run(selected)
        failed = any(s["returncode"] for s in done)
        run_doc: dict[str, Any] = {
            "mode": "full" if args.full else "quick",
            "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(started)),
            "seconds": time.perf_counter() - begin,
            "steps": done,
        }
        RESULTS.mkdir(parents=True, exist_ok=True)
        run_path.write_text(json.dumps(run_doc, indent=1) + "\n")
        print(f"\nall steps: {duration(run_doc['seconds'])}" + (" (some FAILED)" if failed else ""))
    run_doc_read = json.loads(run_path.read_text()) if run_path.exists() else None
    replace_section(args.readme, "summary", summary(RESULTS, run_doc_read))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
