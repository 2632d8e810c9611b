"""LIST memory (issue 22, deliverables 2 and 3): 8 concurrent full LISTs of P pods over
HTTP, answered by today's whole-body LIST and by the streamed one (apiserver/streaming.py),
in the same run; and the streamed LIST gzipped.

What it answers:

* how much the server's memory grows while 8 clients each LIST every pod at once (peak
  RSS during the burst minus RSS before it): a whole body is rendered, then queued on the
  connection, for every LIST in flight (148 MB each at 150,000 pods); a streamed one holds
  its snapshot and a piece or two;
* how soon the first byte of a LIST leaves (time to first byte, TTFB), alone and in the
  burst, and how long a GET of one pod waits meanwhile (the same wait for any request:
  what the server's saturation costs, not the LIST's); and the total throughput of the
  burst (LISTs and body bytes per second);
* with ``Accept-Encoding: gzip``: the bytes on the wire against the body's, and the
  server's CPU per LIST, against the same LISTs uncompressed;
* that every answer is right: one LIST per server is read whole and hashed, and every
  side's body must be the same bytes (the same etcd, at the same revision), the gzipped
  one once decompressed.

Sides. ``baseline``: the apiserver's Python of a git revision before streaming (``--base``,
default :data:`DEFAULT_BASE`), ``git archive``d into a temporary folder; ``streamed``: a
copy of the working tree's python/ taken at the start (``--contender REV`` for a
revision). Both run through bench/tree_python.py on the installed engine, as
ab_apiserver.py's sides do, so both get what the engine gained meanwhile: pieces
(``ScanResult.chunks``, which the baseline never calls; ``render`` is the same loop) and
an unlimited scan without a selector that copies whole leaves (the baseline's full LISTs
scan faster too). The Python is what differs (``--allow-engine-diff`` is implied;
ab_apiserver.py explains the check).

Data, written once into one etcd 3.5 (free loopback ports, a temporary folder) that serves
every server: bench/kubelet.py's pods (about 1 KB of JSON each, a Deployment's pod running
on a node) over 100 namespaces. Quick: 20,000 pods; ``--full``: 150,000 (issue 22's).

Per round, one server per side (the order swapped each round), each a fresh ``watchcache
serve --resources pods,namespaces --no-enable-garbage-collector``, measured once ready:

  check   one LIST read whole: its SHA-256 and its item count (and, for the streamed
          side, the same LIST gzipped, decompressed and hashed);
  alone   ``--alone`` LISTs one after the other: TTFB each;
  burst   C client threads (``--clients``, 8) each send L LISTs (``--lists``: quick 2,
          full 3) back to back, all starting together: each LIST's TTFB, the wall time of
          the burst, the server's peak RSS during it (VmHWM, reset before) against its RSS
          before it, the server's CPU (all threads) over it; and meanwhile a GET of one pod
          every 20 ms, from this process (its TTFB);
  gzip    (streamed side only) the burst again with ``Accept-Encoding: gzip``.

The LIST is ``GET /api/v1/pods`` (consistent: from the cache once it has caught up with
etcd's current revision; ``--rv0`` sends ``resourceVersion=0``). Each client of a burst
is a process of its own (bench/list_client.py), so that no client waits for
another's share of a GIL before it sees its first byte; they start together, each over
fresh connections, reading with 1 MiB buffers and discarding (each chunk's framing
parsed, nothing decoded). Between phases the bench waits for the server to go idle; an
RSS sampler (every 20 ms) draws the figure.

Targets (issue 22), shown met / missed beside the measurements, never asserted: in the
burst at full size, server RSS grows <= 150 MB (today +1,393 MB), TTFB p50 <= 5 ms, total
throughput not lower than the baseline's; gzip: bytes on the wire <= 0.25x; CPU per LIST
reported.

Report: bench/results/list-memory.json (every sample), list-memory.png, this scenario's
section of bench/README.md and its lines of the summary. Exit status 1 when a check failed.

    python bench/list_memory.py [--full] [--pods P] [--clients C] [--lists L] [--rounds R]
                                [--base REV] [--contender REV] [--rv0]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ab_apiserver import WORKTREE, Tree, TreeServer, cpu_ns, installed_core, prepare
from harness import (
    etcd,
    etcd_version,
    parser,
    peak_rss,
    percentile,
    reset_peak_rss,
    rss,
    workspace,
)
from kubelet import NAMESPACE_COUNT, PODS_PER_NODE, SEED, SERVE_FLAGS, Placement, load_into
from list_client import Sample, get
from reporting import Headline, Report, Target, figure, fmt_mib, fmt_ms, markdown

#: The last revision whose LISTs are rendered whole (the commit before streaming).
DEFAULT_BASE = "30aa213"
CLIENTS = 8
TARGET_GROWTH_BYTES = 150 * 10**6
TARGET_TTFB_MS = 5.0
TARGET_WIRE_RATIO = 0.25
#: The issue's measurement of today's code, for the table (not measured here).
ISSUE_GROWTH = "+1,393 MB (299 -> 1,692 MiB)"
SAMPLE_SECONDS = 0.02
CLIENT = Path(__file__).resolve().parent / "list_client.py"


# ---------------------------------------------------------------------------------------
# Sizes


@dataclass(frozen=True)
class Sizes:
    pods: int
    clients: int
    lists: int  # per client in a burst
    alone: int
    rounds: int
    rv0: bool

    @staticmethod
    def of(args: argparse.Namespace) -> Sizes:
        return Sizes(
            pods=args.pods or (150_000 if args.full else 20_000),
            clients=args.clients,
            lists=args.lists or (3 if args.full else 2),
            alone=args.alone,
            rounds=args.rounds or (2 if args.full else 1),
            rv0=args.rv0,
        )

    @property
    def path(self) -> str:
        return "/api/v1/pods" + ("?resourceVersion=0" if self.rv0 else "")


# ---------------------------------------------------------------------------------------
# One server


@dataclass
class Burst:
    """C clients x L LISTs, all at once."""

    gzip: bool
    samples: list[Sample] = field(default_factory=list)
    wall_seconds: float = 0.0
    rss_before: int = 0
    rss_peak: int = 0
    cpu_seconds: float = 0.0
    #: (seconds since the burst started, RSS bytes), every 20 ms.
    rss_over_time: list[tuple[float, int]] = field(default_factory=list)
    #: Time to first byte (ms) of GETs of one pod sent meanwhile, one every 20 ms: how long
    #: any request waits.
    probes: list[float] = field(default_factory=list)

    @property
    def growth(self) -> int:
        return self.rss_peak - self.rss_before

    @property
    def lists(self) -> int:
        return len(self.samples)

    def ttfb(self, q: float) -> float:
        return percentile([s.ttfb_ms for s in self.samples], q)

    def probe_ttfb(self, q: float) -> float:
        return percentile(self.probes, q)

    @property
    def lists_per_second(self) -> float:
        return self.lists / self.wall_seconds if self.wall_seconds else math.nan

    @property
    def cpu_ms_per_list(self) -> float:
        return self.cpu_seconds * 1e3 / self.lists if self.lists else math.nan

    @property
    def wire_bytes(self) -> int:
        return sum(s.wire_bytes for s in self.samples)


@dataclass
class Start:
    """One server of one side in one round."""

    side: str
    round: int
    ready_seconds: float = 0.0
    rss_idle: int = 0
    body_sha256: str = ""
    body_bytes: int = 0
    items: int = 0
    gzip_sha256: str = ""
    gzip_wire_bytes: int = 0
    check_chunked: bool = False
    alone: list[Sample] = field(default_factory=list)
    bursts: list[Burst] = field(default_factory=list)


def check(start: Start, port: int, path: str, streamed: bool) -> None:
    kept: list[bytes] = []
    sample = get(port, path, gzip=False, keep=kept)
    body = b"".join(kept)
    start.body_sha256 = hashlib.sha256(body).hexdigest()
    start.body_bytes = len(body)
    start.items = body.count(b'{"kind":"Pod"')
    start.check_chunked = sample.chunked
    if streamed:
        kept = []
        packed = get(port, path, gzip=True, keep=kept)
        start.gzip_wire_bytes = packed.wire_bytes
        data = b"".join(kept)
        plain = zlib.decompress(data, 16 + zlib.MAX_WBITS) if packed.gzipped else data
        start.gzip_sha256 = hashlib.sha256(plain).hexdigest()


def burst(pid: int, port: int, sizes: Sizes, probe: str, *, gzip: bool) -> Burst:
    out = Burst(gzip)
    out.rss_before = rss(pid)
    reset_peak_rss(pid)
    done = threading.Event()

    def sampler(begin: float) -> None:
        while not done.wait(SAMPLE_SECONDS):
            with contextlib.suppress(OSError):
                out.rss_over_time.append((time.perf_counter() - begin, rss(pid)))

    def prober() -> None:
        while not done.wait(SAMPLE_SECONDS):
            out.probes.append(get(port, probe, gzip=False).ttfb_ms)

    # One process per client (bench/list_client.py), so that no client waits for another's
    # share of a GIL before it sees its first byte; all go at once, when all are ready.
    command = [sys.executable, str(CLIENT), str(port), sizes.path, str(sizes.lists),
               "gzip" if gzip else "plain"]  # fmt: skip
    clients = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stdin=subprocess.PIPE)
        for _ in range(sizes.clients)
    ]
    for c in clients:
        assert c.stdout is not None
        if c.stdout.readline() != b"ready\n":
            raise RuntimeError("a client did not start")
    cpu_before = cpu_ns(pid)
    begin = time.perf_counter()
    watcher = threading.Thread(target=sampler, args=(begin,))
    watcher.start()
    probing = threading.Thread(target=prober)
    probing.start()
    for c in clients:
        assert c.stdin is not None
        c.stdin.write(b"go\n")
        c.stdin.flush()
    outputs = [c.communicate(timeout=3600)[0] for c in clients]
    out.wall_seconds = time.perf_counter() - begin
    out.cpu_seconds = (cpu_ns(pid) - cpu_before) / 1e9
    done.set()
    watcher.join()
    probing.join()
    out.rss_peak = peak_rss(pid)
    for c, text in zip(clients, outputs, strict=True):
        if c.returncode != 0:
            raise RuntimeError(f"a client failed ({c.returncode})")
        out.samples += [Sample(**sample) for sample in json.loads(text)]
    return out


def wait_idle(pid: int, timeout: float = 120.0) -> None:
    """Until the server uses under 5 % of a core over 0.3 s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = cpu_ns(pid)
        time.sleep(0.3)
        if cpu_ns(pid) - before < 0.05 * 0.3e9:
            return


async def one_start(
    tree: Tree, core: str, endpoints: list[str], sizes: Sizes, probe: str, *, round_index: int
) -> Start:
    start = Start(tree.side, round_index)
    streamed = tree.side == "streamed"
    async with TreeServer(endpoints, tree, core, SERVE_FLAGS) as server:
        start.ready_seconds = server.ready_seconds
        pid, port = server.pid, server.port
        # Warm-up and check: the first consistent read waits for the cache to catch up.
        await asyncio.to_thread(check, start, port, sizes.path, streamed)
        await asyncio.to_thread(wait_idle, pid)
        start.rss_idle = rss(pid)
        for _ in range(sizes.alone):
            start.alone.append(await asyncio.to_thread(get, port, sizes.path, gzip=False))
        await asyncio.to_thread(wait_idle, pid)
        for gzip in (False, True) if streamed else (False,):
            start.bursts.append(await asyncio.to_thread(burst, pid, port, sizes, probe, gzip=gzip))
            await asyncio.to_thread(wait_idle, pid)
    print(f"  round {round_index + 1}, {tree.side}: {summary_line(start)}", flush=True)
    return start


def summary_line(s: Start) -> str:
    parts = [f"ready {s.ready_seconds:.1f} s, body {s.body_bytes / 1e6:,.1f} MB ({s.items:,} pods)"]
    for b in s.bursts:
        parts.append(
            f"{'gzip' if b.gzip else 'plain'}: RSS +{b.growth / 1e6:,.0f} MB, TTFB p50 "
            f"{fmt_ms(b.ttfb(0.5))} (a GET meanwhile {fmt_ms(b.probe_ttfb(0.5))}), "
            f"{b.lists_per_second:,.2f} LIST/s, CPU "
            f"{b.cpu_ms_per_list:,.0f} ms/LIST"
        )
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------
# The run


@dataclass
class Run:
    sizes: Sizes
    trees: dict[str, str] = field(default_factory=dict)
    etcd_version: str = "?"
    load_seconds: float = 0.0
    pod_bytes: int = 0
    starts: list[Start] = field(default_factory=list)


async def run(sizes: Sizes, trees: tuple[Tree, Tree], core: str) -> Run:
    result = Run(sizes, {t.side: t.description for t in trees})
    placement = Placement.of(sizes.pods, max(1, sizes.pods // PODS_PER_NODE), SEED)
    probe = f"/api/v1/namespaces/ns-{placement.namespace[0]}/pods/pod-000000"
    with etcd() as cluster:
        result.etcd_version = etcd_version(cluster)
        result.pod_bytes, result.load_seconds = await load_into(cluster.endpoints, placement)
        print(f"loaded {sizes.pods:,} pods ({result.pod_bytes / sizes.pods:,.0f} B each) in "
              f"{result.load_seconds:.1f} s", flush=True)  # fmt: skip
        for r in range(sizes.rounds):
            for tree in trees if r % 2 == 0 else trees[::-1]:
                result.starts.append(
                    await one_start(tree, core, cluster.endpoints, sizes, probe, round_index=r)
                )
    return result


# ---------------------------------------------------------------------------------------
# Report


def bursts(r: Run, side: str, gzip: bool) -> list[Burst]:
    return [b for s in r.starts if s.side == side for b in s.bursts if b.gzip is gzip]


def pooled_ttfb(group: list[Burst], q: float) -> float:
    return percentile([x.ttfb_ms for b in group for x in b.samples], q)


def pooled_probe(group: list[Burst], q: float) -> float:
    return percentile([x for b in group for x in b.probes], q)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def problems(r: Run) -> list[str]:
    found = []
    hashes = {s.body_sha256 for s in r.starts}
    if len(hashes) != 1:
        found.append(f"the sides' bodies differ ({len(hashes)} distinct SHA-256)")
    for s in r.starts:
        if s.items != r.sizes.pods:
            found.append(f"{s.side} round {s.round + 1}: {s.items:,} pods listed")
        if s.side == "streamed" and s.gzip_sha256 != s.body_sha256:
            found.append(f"round {s.round + 1}: the gzipped body decompresses to other bytes")
        bad = [x.status for b in s.bursts for x in b.samples if x.status != 200]
        if bad:
            found.append(f"{s.side} round {s.round + 1}: statuses {sorted(set(bad))}")
    return found


@dataclass
class Column:
    label: str
    group: list[Burst]
    alone: list[Sample]


def columns(r: Run) -> list[Column]:
    def alone(side: str) -> list[Sample]:
        return [x for s in r.starts if s.side == side for x in s.alone]

    return [
        Column("baseline: whole body", bursts(r, "baseline", False), alone("baseline")),
        Column("streamed", bursts(r, "streamed", False), alone("streamed")),
        Column("streamed, gzip", bursts(r, "streamed", True), []),
    ]


def results_table(r: Run) -> str:
    cols = columns(r)
    base = cols[0].group
    body = median([float(s.body_bytes) for s in r.starts]) or math.nan

    def row(label: str, value: Callable[[list[Burst]], str]) -> list[str]:
        return [label, *(value(c.group) if c.group else "-" for c in cols)]

    def ratio(value: Callable[[list[Burst]], float]) -> Callable[[list[Burst]], str]:
        return lambda g: f"{value(g) / value(base):.2f}x" if base else "-"

    def growth(g: list[Burst]) -> float:
        return median([float(b.growth) for b in g])

    def rate(g: list[Burst]) -> float:
        return median([b.lists_per_second for b in g])

    def cpu(g: list[Burst]) -> float:
        return median([b.cpu_ms_per_list for b in g])

    def wire(g: list[Burst]) -> float:
        return median([b.wire_bytes / b.lists for b in g])

    rows = [
        row("server RSS growth in the burst (peak - before), median",
            lambda g: f"+{growth(g) / 1e6:,.1f} MB"),
        row("", ratio(growth)),
        row("server RSS before the burst", lambda g: fmt_mib(median([float(b.rss_before)
                                                                    for b in g]))),
        row("time to first byte in the burst: p50 / p90 / max",
            lambda g: f"{fmt_ms(pooled_ttfb(g, 0.5))} / {fmt_ms(pooled_ttfb(g, 0.9))} / "
                      f"{fmt_ms(pooled_ttfb(g, 1.0))}"),
        row("  of a GET of one pod meanwhile (every 20 ms): p50 / p90 / max",
            lambda g: f"{fmt_ms(pooled_probe(g, 0.5))} / {fmt_ms(pooled_probe(g, 0.9))} / "
                      f"{fmt_ms(pooled_probe(g, 1.0))}"),
        [f"time to first byte, one LIST alone: p50 ({r.sizes.alone} each)",
         *(fmt_ms(percentile([x.ttfb_ms for x in c.alone], 0.5)) if c.alone else "-"
           for c in cols)],
        row("LIST time in the burst, p50",
            lambda g: fmt_ms(percentile([x.total_ms for b in g for x in b.samples], 0.5))),
        row("burst throughput: LISTs/s (median of rounds)", lambda g: f"{rate(g):,.2f}"),
        row("", ratio(rate)),
        row("  body MB/s", lambda g: f"{rate(g) * body / 1e6:,.0f}"),
        row("server CPU per LIST (all threads)", lambda g: f"{cpu(g):,.0f} ms"),
        row("bytes on the wire per LIST", lambda g: f"{wire(g) / 1e6:,.2f} MB"),
        row("  / the body", lambda g: f"{wire(g) / body:.3f}x"),
        row("framing", lambda g: ", ".join(sorted(
            {("chunked" if x.chunked else "Content-Length") + (", gzip" if x.gzipped else "")
             for b in g for x in b.samples}))),
    ]  # fmt: skip
    header = ["", *(c.label for c in cols)]
    return markdown(header, rows, "lrrr")


def targets(r: Run) -> list[Target]:
    cols = columns(r)
    base, streamed, packed = (c.group for c in cols)
    body = median([float(s.body_bytes) for s in r.starts]) or math.nan
    growth = median([float(b.growth) for b in streamed])
    ttfb = pooled_ttfb(streamed, 0.5)
    probe = pooled_probe(streamed, 0.5)
    alone = percentile([x.ttfb_ms for x in cols[1].alone], 0.5)
    rate_base = median([b.lists_per_second for b in base])
    rate_new = median([b.lists_per_second for b in streamed])
    wire = median([b.wire_bytes / b.lists for b in packed]) / body
    cpu_plain = median([b.cpu_ms_per_list for b in streamed])
    cpu_gzip = median([b.cpu_ms_per_list for b in packed])
    full = r.sizes.pods >= 150_000
    scope = "" if full else f" (at {r.sizes.pods:,} pods; the targets are for 150,000)"
    return [
        Target(f"{r.sizes.clients} concurrent full LISTs: server RSS growth{scope}",
               f"≤ {TARGET_GROWTH_BYTES / 1e6:,.0f} MB (today {ISSUE_GROWTH})",
               f"+{growth / 1e6:,.1f} MB", growth <= TARGET_GROWTH_BYTES),
        Target("  time to first byte, p50", f"≤ {TARGET_TTFB_MS:g} ms",
               f"{fmt_ms(ttfb)} (a GET of one pod meanwhile: {fmt_ms(probe)})",
               ttfb <= TARGET_TTFB_MS),
        Target("  time to first byte of one LIST alone, p50", f"≤ {TARGET_TTFB_MS:g} ms",
               fmt_ms(alone), alone <= TARGET_TTFB_MS),
        Target("  total throughput", "not lower than the baseline's",
               f"{rate_new / rate_base:.2f}x ({rate_new:,.2f} vs {rate_base:,.2f} LIST/s)",
               rate_new >= rate_base),
        Target("gzip: bytes on the wire / body", f"≤ {TARGET_WIRE_RATIO:g}x", f"{wire:.3f}x",
               wire <= TARGET_WIRE_RATIO),
        Target("  server CPU per LIST: gzip / plain", "reported",
               f"{cpu_gzip:,.0f} ms / {cpu_plain:,.0f} ms", None),
    ]  # fmt: skip


def target_table(r: Run) -> str:
    rows = [
        [t.label.replace("  ", "&nbsp;&nbsp;"), t.target, t.value,
         "" if t.met is None else ("met" if t.met else "**missed**")]
        for t in targets(r)
    ]  # fmt: skip
    return markdown(["target (issue 22)", "target", "this run", ""], rows, "lrrl")


def rounds_table(r: Run) -> str:
    rows = []
    for s in r.starts:
        for b in s.bursts:
            rows.append([
                f"{s.round + 1}", s.side + (", gzip" if b.gzip else ""),
                f"{s.ready_seconds:.1f} s", fmt_mib(s.rss_idle), f"+{b.growth / 1e6:,.1f} MB",
                fmt_ms(b.ttfb(0.5)), f"{b.wall_seconds:,.2f} s", f"{b.lists_per_second:,.2f}",
                f"{b.cpu_ms_per_list:,.0f} ms",
            ])  # fmt: skip
    header = ["round", "side", "ready after", "RSS idle", "RSS growth", "TTFB p50",
              "burst wall time", "LIST/s", "CPU/LIST"]  # fmt: skip
    return markdown(header, rows, "llrrrrrrr")


def headlines(r: Run) -> list[Headline]:
    cols = columns(r)
    base, streamed, packed = (c.group for c in cols)
    body = median([float(s.body_bytes) for s in r.starts]) or math.nan

    def growth(g: list[Burst]) -> float:
        return median([float(b.growth) for b in g])

    rate_base = median([b.lists_per_second for b in base])
    rate_new = median([b.lists_per_second for b in streamed])
    wire = median([b.wire_bytes / b.lists for b in packed]) / body
    what = f"{r.sizes.clients} concurrent full LISTs, {r.sizes.pods:,} pods of ~1 KB"
    return [
        Headline(what, "server RSS growth: streamed / whole body (today)",
                 f"+{growth(streamed) / 1e6:,.0f} MB / +{growth(base) / 1e6:,.0f} MB",
                 note=f"TTFB p50 {fmt_ms(pooled_ttfb(streamed, 0.5))} / "
                      f"{fmt_ms(pooled_ttfb(base, 0.5))}"),
        Headline("", "throughput: streamed / whole body; gzip bytes on the wire",
                 f"{rate_new:,.2f} / {rate_base:,.2f} LIST/s; {wire:.3f}x",
                 note=f"CPU per LIST {median([b.cpu_ms_per_list for b in streamed]):,.0f} "
                      f"ms, gzip {median([b.cpu_ms_per_list for b in packed]):,.0f} ms"),
    ]  # fmt: skip


def plot(r: Run) -> Callable[[Path], None]:
    def draw(path: Path) -> None:
        with figure(path, title=f"{r.sizes.clients} concurrent full LISTs of "
                    f"{r.sizes.pods:,} pods: server RSS during the burst", ncols=1,
                    size=(10, 4.5)) as (ax,):  # fmt: skip
            for s in r.starts:
                for b in s.bursts:
                    label = f"{s.side}{', gzip' if b.gzip else ''} (round {s.round + 1})"
                    xs = [t for t, _ in b.rss_over_time]
                    ys = [(v - b.rss_before) / 1e6 for _, v in b.rss_over_time]
                    ax.plot(xs, ys, label=label, linewidth=1)
            ax.axhline(TARGET_GROWTH_BYTES / 1e6, color="grey", linestyle=":", linewidth=1,
                       label="target growth")  # fmt: skip
            ax.set_xlabel("seconds since the burst started")
            ax.set_ylabel("RSS - RSS before the burst, MB")
            ax.legend(fontsize=7)

    return draw


def rounded(value: object) -> object:
    """``value`` with every float to 3 decimals (µs for ms, ms for seconds): the JSON's
    size halves, and no sample loses a digit that was measured."""
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--pods", type=int, help="pods (quick 20,000, full 150,000)")
    p.add_argument("--clients", type=int, default=CLIENTS, help="LISTs at once (8)")
    p.add_argument("--lists", type=int, help="LISTs per client in a burst (quick 2, full 3)")
    p.add_argument("--alone", type=int, default=5, help="LISTs one at a time, for TTFB (5)")
    p.add_argument("--rounds", type=int, help="rounds, each side once per round (1, full 2)")
    p.add_argument("--rv0", action="store_true", help="LIST at resourceVersion=0")
    p.add_argument("--base", default=DEFAULT_BASE, help=f"baseline revision ({DEFAULT_BASE})")
    p.add_argument("--contender", default=WORKTREE, help="a revision, or WORKTREE (default)")
    args = p.parse_args(argv)
    sizes = Sizes.of(args)
    title = "Scenario 7: concurrent full LISTs, streamed and gzipped (issue 22)"
    report = Report("list-memory", title, "full" if args.full else "quick")
    with workspace("list-memory") as folder:
        base = prepare("baseline", args.base, folder / "baseline", True)
        contender = prepare("streamed", args.contender, folder / "streamed", True)
        print(f"baseline: {base.description}; streamed: {contender.description}", flush=True)
        r = asyncio.run(run(sizes, (base, contender), installed_core()))
    found = problems(r)
    end_load = [round(x, 2) for x in os.getloadavg()]
    checks = "; ".join(found) or (
        "every side sent the same body (SHA-256), with every pod, and the gzipped one "
        "decompressed to it"
    )
    report.how = (
        f"Baseline: {r.trees['baseline']}; streamed: {r.trees['streamed']}; both on the "
        f"installed engine. etcd {r.etcd_version}; {sizes.pods:,} pods of "
        f"~{r.pod_bytes / sizes.pods:,.0f} B over {NAMESPACE_COUNT} namespaces, loaded in "
        f"{r.load_seconds:.1f} s; every server a fresh `watchcache serve "
        f"{' '.join(SERVE_FLAGS)}` over the same etcd, {sizes.rounds} round(s), the sides' "
        f"order swapped each round. LIST: `{sizes.path}`; a burst is {sizes.clients} client "
        f"processes x {sizes.lists} LISTs back to back, fresh connections, bodies read and "
        "discarded, and a GET of one pod every 20 ms meanwhile. Checks: "
        f"{checks}. Load average at the end: {end_load[0]}. Reading the time to first byte "
        "in the burst: the server's one event loop is busy with 8 streams, on 2 cores it "
        "shares with the 8 clients; the GET of one pod sent meanwhile waits about as long, "
        "so that wait is the saturated server's, not the LIST's (alone, the same LIST's "
        "first byte leaves within a few ms). The method is the script's docstring."
    )
    report.tables += [results_table(r), target_table(r), rounds_table(r)]
    report.headline = headlines(r)
    report.data = {
        "sizes": asdict(sizes),
        "trees": r.trees,
        "etcd_version": r.etcd_version,
        "load_seconds": r.load_seconds,
        "pod_bytes": r.pod_bytes,
        "load_average_end": end_load,
        "problems": found,
        "starts": rounded([asdict(s) for s in r.starts]),
        "targets": [asdict(t) for t in targets(r)],
    }
    report.publish_as_asked(args, plot=plot(r))
    if found:
        print("CHECK FAILED: " + "; ".join(found), file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
