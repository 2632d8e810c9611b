"""What every scenario script does with its results: one JSON and one PNG in
bench/results/, and its own section of bench/README.md, replaced between markers.

A scenario builds a :class:`Report` (its tables, data and headline numbers) and calls
:meth:`Report.publish`. The JSON holds the command line, the mode, the machine, the wall
time, the headline lines that ``run_all.py`` gathers into the README's summary table, and
the scenario's own data (every sample a table or plot shows is derived from it). The
section is written between ``<!-- <scenario>:begin -->`` and ``<!-- <scenario>:end -->``,
so a rerun replaces it and never duplicates it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes

REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------
# Formatting


def fmt_time(seconds: float) -> str:
    """3 significant digits in the largest unit that keeps the number >= 1."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def fmt_ms(ms: float) -> str:
    """Milliseconds with the precision a reader needs: 0.42 ms, 12.3 ms, 1,234 ms."""
    if math.isnan(ms):  # nothing measured
        return "-"
    if ms < 10:
        return f"{ms:.2f} ms"
    if ms < 100:
        return f"{ms:.1f} ms"
    return f"{ms:,.0f} ms"


def fmt_ratio(x: float) -> str:
    return f"{x:,.0f}x" if x >= 100 else f"{x:.3g}x"


def fmt_mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """A markdown table; ``align`` has one character per column, "l", "r" or "c"
    (default: the first column left, the others right)."""
    align = align or "l" + "r" * (len(header) - 1)
    rules = {"l": "---", "r": "---:", "c": ":-:"}
    rule = "|" + "|".join(rules[a] for a in align) + "|"
    lines = ["| " + " | ".join(header) + " |", rule]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# The generic target table (cache_scenarios.py, etcd_scenarios.py)


@dataclass
class Row:
    """One measured scenario; ``met`` is None when the row has no target."""

    scenario: str
    n: int
    value: float
    unit: str
    baseline: float | None = None
    target: str = ""
    met: bool | None = None
    note: str = ""


def table(rows: Sequence[Row], count_label: str = "objects") -> str:
    body = []
    for r in rows:
        base = f"{r.baseline:,.2f} {r.unit}" if r.baseline is not None else "-"
        met = "" if r.met is None else ("yes" if r.met else "no")
        body.append(
            [r.scenario, f"{r.n:,}", f"{r.value:,.2f} {r.unit}", base, r.target, met, r.note]
        )
    header = ["scenario", count_label, "result", "baseline", "target", "met", "notes"]
    return markdown(header, body, "lrrrlcl")


def plot_rows(rows: Sequence[Row], title: str) -> Callable[[Path], None]:
    """A figure for a Row table: each scenario's result next to its baseline."""

    def draw(path: Path) -> None:
        with figure(path, title=title, size=(10, 0.6 * len(rows) + 1.5)) as (ax,):
            labels = [r.scenario for r in rows]
            ys = range(len(rows))
            ax.barh([y + 0.2 for y in ys], [r.value for r in rows], 0.4, label="result")
            ax.barh(
                [y - 0.2 for y in ys],
                [r.baseline or 0.0 for r in rows],
                0.4,
                label="baseline (same run)",
            )
            ax.set_yticks(list(ys), labels, fontsize=7)
            ax.set_xscale("log")
            ax.set_xlabel(f"{rows[0].unit if rows else ''} (log scale)")
            ax.invert_yaxis()
            ax.legend(fontsize=8)

    return draw


# ---------------------------------------------------------------------------------------
# Figures


@contextlib.contextmanager
def figure(
    path: Path, *, title: str, ncols: int = 1, nrows: int = 1, size: tuple[float, float] = (10, 4.5)
) -> Iterator[list[Axes]]:
    """A matplotlib figure (Agg: no display needed) with ``nrows * ncols`` axes, saved as
    ``path`` when the block ends without an error. matplotlib is imported here, lazily,
    so the scenarios run (without figures) where it is not installed."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, grid = plt.subplots(nrows, ncols, figsize=size, squeeze=False)
    try:
        yield [ax for row in grid for ax in row]
        fig.suptitle(title, fontsize=11)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)


# ---------------------------------------------------------------------------------------
# The machine


def machine() -> dict[str, Any]:
    """What the numbers were measured on: CPU, cores, memory, OS, Python, the engine's
    build, and the load average (the machine is shared: a high one means noisy numbers)."""
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        memory = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    info: dict[str, Any] = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_bytes": memory,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    with contextlib.suppress(ImportError):
        import watchcache
        from watchcache import _core

        info["watchcache"] = str(getattr(watchcache, "__version__", "?"))
        info["fanout"] = int(_core.FANOUT)
    return info


def machine_line(info: dict[str, Any]) -> str:
    return (
        f"{info.get('cpu', '?')}, {info.get('cores', '?')} cores, "
        f"{info.get('memory_bytes', 0) / 2**30:.0f} GiB, {info.get('platform', '?')}, "
        f"Python {info.get('python', '?')}"
    )


def command_line(argv: Sequence[str] | None = None) -> str:
    """This run's command as a reader would type it from the repository root."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve()
    with contextlib.suppress(ValueError):
        argv[0] = str(script.relative_to(REPO))
    return "python " + shlex.join(argv)


# ---------------------------------------------------------------------------------------
# Publishing


@dataclass
class Target:
    """One row of a scenario's table of an issue's targets: what is asked, what the run
    measured, and whether that meets it (None: only reported). ``scaled``: the target
    scaled to this run's floor, where a scenario shows that too."""

    label: str
    target: str
    value: str
    met: bool | None
    scaled: str = ""


@dataclass
class Headline:
    """One line of the README's summary table (formatted text; the numbers behind it are
    in the scenario's JSON). ``kubernetes``: figures published by Kubernetes, quoted, not
    measured here."""

    scenario: str
    metric: str
    watchcache: str
    etcd: str = ""
    kubernetes: str = ""
    note: str = ""


def splice(readme: str, section: str, begin: str, end: str) -> str:
    """Replace the text from ``begin`` to ``end`` (inclusive) with ``section``, or append."""
    start, stop = readme.find(begin), readme.find(end)
    if start == -1 or stop == -1 or stop < start:
        return readme.rstrip("\n") + "\n\n" + section
    rest = readme[stop + len(end) :].lstrip("\n")
    return readme[:start] + section + ("\n" + rest if rest else "")


def replace_section(readme: Path, marker: str, body: str) -> None:
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    section = f"{begin}\n{body.strip()}\n{end}\n"
    old = readme.read_text() if readme.exists() else "# Benchmarks\n"
    readme.write_text(splice(old, section, begin, end))


@dataclass
class Report:
    """One scenario run: fill ``tables``, ``data`` and ``headline``, then publish."""

    scenario: str
    title: str
    mode: str
    how: str = ""
    tables: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    headline: list[Headline] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    machine: dict[str, Any] = field(default_factory=machine)

    def publish_as_asked(
        self, args: argparse.Namespace, plot: Callable[[Path], None] | None = None
    ) -> None:
        """:meth:`publish` where the scenario's command line (harness.parser) says."""
        self.publish(
            results=args.results, readme=None if args.no_readme else args.readme, plot=plot
        )

    def publish(
        self,
        *,
        results: Path,
        readme: Path | None,
        plot: Callable[[Path], None] | None = None,
    ) -> None:
        """Print the tables; write ``<results>/<scenario>.json`` and (with matplotlib)
        ``.png``; replace this scenario's section of ``readme`` (None: leave it)."""
        seconds = time.time() - self.started
        text = "\n\n".join(self.tables)
        print(text, flush=True)
        results.mkdir(parents=True, exist_ok=True)
        png = results / f"{self.scenario}.png"
        figure_name: str | None = None
        if plot is not None:
            try:
                plot(png)
                figure_name = png.name
            except ImportError as error:
                print(f"{self.scenario}: no figure ({error}); `make bench` installs matplotlib")
        payload = {
            "scenario": self.scenario,
            "title": self.title,
            "mode": self.mode,
            "command": command_line(),
            "started": _iso(self.started),
            "seconds": round(seconds, 1),
            "machine": self.machine,
            "figure": figure_name,
            "headline": [asdict(h) for h in self.headline],
            "data": self.data,
        }
        (results / f"{self.scenario}.json").write_text(json.dumps(payload, indent=1) + "\n")
        if readme is None:
            return
        picture = ""
        if figure_name:
            picture = f"\n\n![{self.title}]({_relative(results / figure_name, readme.parent)})"
        body = (
            f"## {self.title}\n\n"
            f"`{payload['command']}` ({self.mode} mode, {_iso(self.started)[:16]} UTC; "
            f"load average at start {self.machine['load_average'][0]}).\n"
            f"{self.how.strip()}\n\n{text}{picture}"
        )
        replace_section(readme, self.scenario, body)


def _iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).isoformat(timespec="seconds")


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)


def load_results(results: Path) -> dict[str, dict[str, Any]]:
    """Every scenario JSON in ``results`` written by :meth:`Report.publish`, by scenario."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(results.glob("*.json")):
        with contextlib.suppress(ValueError, OSError):
            doc = json.loads(path.read_text())
            if isinstance(doc, dict) and "headline" in doc and "scenario" in doc:
                found[str(doc["scenario"])] = doc
    return found
