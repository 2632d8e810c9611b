"""The long-running soak's report: bench/README.md's "long-running" section and its plot.

    python bench/long_running.py tests/reliability/results/soak-long.json

The numbers come from the soak's JSON summary (tests/reliability/soak.py, which calls
:func:`publish` itself when run with ``--long``; this command redraws both from a summary
already written). The section goes between ``<!-- long-running:begin -->`` and
``<!-- long-running:end -->``; the plot (etcd's database file and the bytes in use in it,
each server's RSS, the write rate, over the run) is drawn only when matplotlib can be
imported, and the section says when it was not. A summary of an unpaced run of the same
configuration next to the source (``soak-long-unpaced.json``: ``soak.py --long
--write-rate 0``) adds the rate the machine sustained, which is why the paced rate is what
it is.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reporting import REPO, figure, markdown, replace_section

MARKER = "long-running"
TITLE = "Long-running: etcd's database and the servers' memory under a soak (issue 22)"
MIB = 1024 * 1024
DEFAULT_SOURCE = REPO / "tests" / "reliability" / "results" / "soak-long.json"
DEFAULT_PLOT = REPO / "bench" / "results" / "long-running.png"
DEFAULT_README = REPO / "bench" / "README.md"
UNPACED = "soak-long-unpaced.json"


def mib(n: float) -> str:
    return f"{n / MIB:,.1f} MiB"


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def rates(summary: dict[str, Any]) -> tuple[list[float], list[float]]:
    """Changes a second between consecutive samples, at each interval's end."""
    samples = summary["write_rate"]["samples"]
    times, values = [], []
    for (t0, n0), (t1, n1) in itertools.pairwise(samples):
        if t1 > t0:
            times.append(t1)
            values.append((n1 - n0) / (t1 - t0))
    return times, values


def draw(summary: dict[str, Any], path: Path) -> None:
    """Two panels over the run: etcd (every member's file, the largest member's bytes in
    use, defragmentations, the quota when it is in range) and the servers (RSS, with the
    write rate on a second axis); the warm-up shaded."""
    etcd = summary["etcd"]
    warmup = summary["configuration"]["warmup_s"]
    with figure(path, title=TITLE, nrows=2, size=(10, 7.5)) as (top, bottom):
        times = [t for t, _, _ in etcd["samples"]]
        members = len(etcd["members"])
        for i in range(members):
            top.plot(
                [t / 60 for t in times],
                [sizes[i] / MIB for _, sizes, _ in etcd["samples"]],
                lw=1.2,
                label=f"member {i}: file (db size)",
            )
        top.plot(
            [t / 60 for t in times],
            [max(used) / MIB for _, _, used in etcd["samples"]],
            lw=0.8,
            color="grey",
            label="largest in use (dbSizeInUse)",
        )
        for defrag in etcd["defragmentations"]:
            top.axvline(defrag["t"] / 60, color="red", lw=0.6, ls=":")
        quota = etcd["quota_backend_bytes"]
        peak = max((max(sizes) for _, sizes, _ in etcd["samples"]), default=0)
        if quota and peak > quota / 4:
            top.axhline(quota / MIB, color="black", lw=0.8, ls="--", label="quota")
        quota_note = f"; quota {mib(quota)}" if quota else ""
        top.set_ylabel(f"etcd MiB{quota_note}")
        top.set_ylim(bottom=0)
        compactions = etcd["compactions"]
        defrags = len(etcd["defragmentations"])
        top.set_title(
            f"etcd: {compactions} compactions, {defrags} defragmentations (dotted red)",
            fontsize=9,
        )
        top.legend(fontsize=7, loc="upper left")

        for name, memory in summary["rss"].items():
            samples = memory["samples"]
            bottom.plot(
                [t / 60 for t, _ in samples], [kib / 1024 for _, kib in samples], label=name
            )
        bottom.set_ylabel("RSS MiB")
        bottom.set_ylim(bottom=0)
        bottom.set_xlabel("minutes")
        rate_t, rate_v = rates(summary)
        twin = bottom.twinx()
        twin.plot([t / 60 for t in rate_t], rate_v, color="grey", lw=0.6, label="changes/s")
        twin.set_ylabel("changes / s")
        twin.set_ylim(bottom=0)
        target = summary["write_rate"]["target"]
        bottom.set_title(
            f"servers: RSS; writes paced to {target:g} changes/s (grey, right axis)", fontsize=9
        )
        lines, labels = bottom.get_legend_handles_labels()
        more, more_labels = twin.get_legend_handles_labels()
        bottom.legend(lines + more, labels + more_labels, fontsize=7, loc="lower right")
        for ax in (top, bottom):
            ax.axvspan(0, warmup / 60, color="grey", alpha=0.08)
            ax.grid(alpha=0.3)


def _growth(judged: dict[str, Any], unit: str) -> str:
    if judged["growth"] is None:
        return f"not judged ({judged['reason']})"
    scale = MIB if unit == "B" else 1024
    return (
        f"{judged['baseline'] / scale:,.1f} → {judged['final'] / scale:,.1f} MiB "
        f"({judged['growth']:+.1%})"
    )


def code_line(code: dict[str, Any] | None) -> str:
    if not code:
        return "not recorded in this summary (the soak records it since)"
    modified = code.get("modified") or []
    if not modified:
        return f"the working tree at {code['head']}"
    return f"the working tree at {code['head']} with uncommitted changes to " + ", ".join(
        f"`{path}`" for path in modified
    )


def cores(machine: dict[str, Any]) -> str:
    """The cores each process used over the traffic, and their sum, of the machine's."""
    used = machine.get("cpu_cores_used")
    if not used:
        return "not recorded"
    servers = [v for k, v in used.items() if k.startswith("server")]
    parts = [
        f"servers {' + '.join(f'{v:.2f}' for v in servers)}",
        f"etcd {used.get('etcd', 0):.2f} (3 members)",
        f"soak {used.get('soak', 0):.2f} (load, checks, oracle)",
    ]
    return f"{', '.join(parts)}: {sum(used.values()):.2f} of {machine.get('cores', '?')}"


def load(machine: dict[str, Any]) -> str:
    start, end = machine.get("load_average") or ("?", "?")
    return f"load average {start} at the start of the traffic, {end} at its end"


def direct_text(config: dict[str, Any]) -> str:
    """The writes straight into etcd, as the configuration sentence names them."""
    rate = config.get("direct_write_rate") or 0
    if not rate:
        return ""
    return (
        f" and `etcd_writer.py` writing {rate:g} changes/s straight into etcd, "
        f"{config.get('direct_batch', 1)} keys a transaction"
    )


def behind_text(summary: dict[str, Any]) -> str:
    behind = summary.get("lists_behind") or {}
    return (
        f"{behind.get('continue', 0)} for a continue token, "
        f"{behind.get('resourceVersion', 0)} for a resourceVersion"
    )


def section(
    summary: dict[str, Any], source: Path, plot: Path | None, unpaced: dict[str, Any] | None
) -> str:
    config = summary["configuration"]
    rate = summary["write_rate"]
    etcd = summary["etcd"]
    watch = summary["watch"]
    machine = summary.get("machine", {})
    quota = config["quota_backend_bytes"]
    interval = config["compaction_interval_s"]
    lines = [
        f"## {TITLE}",
        "",
        f"`{summary['command']}` ({summary['minutes']:g} min from {summary.get('started', '?')}, "
        f"seed {summary['seed']}, {machine.get('cores', '?')} cores shared with other work, "
        f"{load(machine)}): {'passed' if summary['passed'] else '**FAILED**'}. Summary: "
        f'`{_relative(source)}`; the method is tests/reliability/README.md\'s "Soak"; code: '
        f"{code_line(summary.get('code'))}. `make soak SOAK_MINUTES=60` runs the same for "
        "an hour (then the long fuzzing run).",
        "",
        "Configuration (`--long`): two `watchcache serve` over a 3-member etcd 3.5 with "
        f"`--etcd-compaction-interval {interval:g}s` and the detector every "
        f"{config['check_every_s']:g} s; every member `--quota-backend-bytes {quota}` "
        f"({mib(quota) if quota else 'etcd default'}); {config['writers']} writers paced to "
        f"{config['write_rate']:g} changes/s of ~{config['object_bytes']} B configmaps "
        f"through the servers{direct_text(config)} "
        f"(mean stored {summary['oracle']['mean_object_bytes']} B); "
        f"{config['workers']} readers paced to {config['list_rate']:g} lists/s; 8 watchers; "
        f"probes; a member defragmented by the soak once "
        f"{config['defragment_free_fraction']:.0%} of its file and "
        f"{mib(config['defragment_min_bytes'])} are free. Warm-up {config['warmup_s']:.0f} s "
        f"(shaded); growth limit {config['growth_limit']:.0%}.",
        "",
    ]
    measured = ""
    if unpaced is not None:
        un_machine = unpaced.get("machine", {})
        measured = (
            f" Unpaced, the same configuration sustained "
            f"{unpaced['write_rate']['achieved']:,.0f} changes/s (`{unpaced['command']}`, "
            f"{unpaced.get('started', '?')}, {load(un_machine)}; cores: {cores(un_machine)}); "
            "the pace is set below that, where the event history's capacity cannot change "
            "(tests/reliability/README.md)."
        )
    direct = rate.get("direct")
    if direct:
        split = (
            f"; {rate['through_servers']:,} through the servers, {direct['changes']:,} straight "
            f"into etcd in {direct['transactions']:,} transactions"
        )
        lines += [
            "Write rate: issue 22 asks for 1,000 writes/s of 1 KB objects. The servers' own "
            "write path does not sustain that on these cores beside etcd and the checks."
            f"{measured or ' See tests/reliability/README.md.'} So the rest reaches "
            "etcd from `tests/reliability/etcd_writer.py`, as the writes of other apiservers "
            "sharing the etcd would: the servers' caches, watches and lists take every "
            "change, and etcd's history grows as fast."
            f" This run: target {rate['target']:g}/s, **{rate['achieved']:,.1f} changes/s** "
            f"({rate['changes']:,} in {rate['seconds']:,.0f} s{split}); cores: "
            f"{cores(machine)}.",
            "",
        ]
    else:
        lines += [
            f"Write rate: issue 22 asks for 1,000 writes/s of 1 KB objects; two Python "
            f"servers, three etcd members and the load generator on these cores do not "
            f"sustain it.{measured} This run: target {rate['target']:g}/s, "
            f"**{rate['achieved']:,.1f} changes/s** ({rate['changes']:,} in "
            f"{rate['seconds']:,.0f} s); cores: {cores(machine)}.",
            "",
        ]
    db = etcd["db_size"]
    after = [(t, max(used)) for t, _, used in etcd["samples"] if t >= config["warmup_s"]]
    in_use = [used for _, used in after]
    rows = [
        [
            "etcd db size (largest member's file)",
            _growth(db, "B"),
            mib(db["peak"]),
            f"{db['peak'] / quota:.1%} of the {mib(quota)} quota at peak" if quota else "",
        ],
        [
            "etcd bytes in use (largest member)",
            f"{mib(min(in_use))} to {mib(max(in_use))}" if in_use else "-",
            mib(max(in_use)) if in_use else "",
            "saw-tooth: each compaction frees a minute of history, writes refill it",
        ],
    ]
    for name, memory in summary["rss"].items():
        judged = {
            "growth": memory["growth"],
            "reason": memory.get("reason", ""),
            "baseline": memory.get("baseline_kib", 0),
            "final": memory.get("final_kib", 0),
        }
        capacity = memory.get("history_capacity")
        note = "high-water marks of the first and last two compaction intervals"
        if capacity:
            note += f"; event history capacity {capacity[0]:,} → {capacity[1]:,}"
        rows.append(
            [f"{name} RSS", _growth(judged, "KiB"), f"{memory['peak_kib'] / 1024:,.1f} MiB", note]
        )
    lines += [
        markdown(["", "after the warm-up → end", "peak", "note"], rows, "llrl"),
        "",
    ]
    defrags = etcd["defragmentations"]
    if defrags:
        done = ", ".join(
            f"{d['endpoint']} at {d['t']:.0f} s ({mib(d['db_before'])} → "
            f"{mib(d['db_after'])}, {d['seconds']} s)"
            for d in defrags
        )
        quota_text = f"the soak defragmented {len(defrags)} times: {done}."
    else:
        quota_text = (
            "no member was defragmented (none had the free pages the rule asks for): after "
            "each compaction bbolt reuses the pages it freed, so the file stops at the "
            "high-water mark of the bytes in use, two compaction intervals of history."
        )
    if in_use and interval and rate["achieved"]:
        per_change = max(in_use) / (2 * interval * rate["achieved"])
        projected = 2 * interval * 1000 * per_change
        of_quota = f", {projected / quota:.0%} of the quota" if quota else ""
        quota_text += (
            f" That mark is {per_change:,.0f} B per change of history here; at 1,000 changes/s "
            f"it would be about {mib(projected)}{of_quota} (extrapolated, not measured)."
        )
    expired = summary["lists_expired"]
    checks = summary["consistency_checks"]
    passed = sum(c.get("success", 0) for c in checks.values())
    failed = sum(c.get("failure", 0) for c in checks.values())
    found = sum(c.get("inconsistencies", 0) for c in checks.values())
    broken = [name for name, held in summary["verdicts"].items() if not held]
    verdicts = (
        f"**failed**: {'; '.join(broken)}"
        if broken
        else f"all {len(summary['verdicts'])} held ({'; '.join(summary['verdicts'])})"
    )
    lines += [
        f"- etcd: {quota_text} {etcd['compactions']} compactions; alarms: "
        f"{', '.join(etcd['alarms']) or 'none'}; writes refused for lack of space: "
        f"{summary['refused_for_space']}.",
        f"- lists: {summary['lists_checked']:,} compared with etcd at their rv "
        f"({summary['list_pages']:,} pages), {len(summary['list_mismatches'])} mismatches, "
        f"{summary['lists_unchecked_compacted']} left unchecked (their rv compacted first); "
        f"410 for what compaction removed: {expired.get('resourceVersion', 0)} for an Exact "
        f"rv, {expired.get('continue', 0)} for a continue token; 504 from a server whose "
        f"cache had not reached a page's rv within its wait: {behind_text(summary)} "
        f"({summary['list_restarts']} lists restarted).",
        f"- watches: {watch['events_checked']:,} events checked in {watch['sessions']:,} "
        f"sessions of {watch['watchers']} watchers against the oracle recorded from etcd, "
        f"{watch['probes']} probes from older rvs ({watch['probes_expired']} got 410), "
        f"{watch['rewatches']} re-watches; violations {watch['violations_by_guarantee'] or 0}, "
        f"lost {watch['lost_events']}, duplicated {watch['duplicated_events']}.",
        f"- consistency detector: {passed} checks passed, {failed} failed, {found} "
        "inconsistencies.",
        f"- verdicts: {verdicts}.",
        "",
    ]
    if plot is not None:
        lines.append(f"![{TITLE}]({_relative(plot).removeprefix('bench/')})")
    else:
        lines.append("(No plot: matplotlib was not importable when this was written.)")
    return "\n".join(lines)


def publish(
    summary: dict[str, Any], source: Path, *, plot: Path | None, readme: Path | None
) -> list[str]:
    """Draw the plot (if matplotlib imports) and write the README section; returns what
    was done, one line each."""
    done: list[str] = []
    drawn: Path | None = None
    if plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            done.append("no plot: matplotlib is not installed (make bench installs it)")
        else:
            plot.parent.mkdir(parents=True, exist_ok=True)
            draw(summary, plot)
            drawn = plot
            done.append(f"plot written to {plot}")
    if readme is not None:
        sibling = source.parent / UNPACED
        unpaced = json.loads(sibling.read_text()) if sibling.exists() else None
        replace_section(readme, MARKER, section(summary, source, drawn, unpaced))
        done.append(f"section {MARKER!r} of {readme} written")
    return done


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("summary", type=Path, nargs="?", default=DEFAULT_SOURCE)
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT)
    parser.add_argument("--readme", type=Path, default=DEFAULT_README)
    args = parser.parse_args(argv)
    summary = json.loads(args.summary.read_text())
    for line in publish(summary, args.summary, plot=args.plot, readme=args.readme):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
