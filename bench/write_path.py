"""A/B of the write path (issue 22, deliverable 4): update, patch, server-side apply and
delete over HTTP, the Python code of a baseline revision (writes read the object from
etcd first) against the working tree's (writes start from the watch cache's copy), in one
run.

What it answers: is a write through HTTP at least 1.3x faster (p50, one client) now that
it no longer reads the object from etcd before its compare-and-swap, and does it cost one
etcd round trip instead of two. Both are measured: the latency per write from this
process, the server's CPU per write, and etcd's own count of the Range and Txn calls it
served per write (``grpc_server_handled_total`` from the side's etcd's /metrics, all
callers: its server does nothing else meanwhile).

The writes, one client, one at a time, over one keep-alive connection (this process's own
minimal HTTP/1.1 client), each to configmaps of ~1 KB created for the round (unmeasured)
in a namespace of their own, P of them, taken in turn, so that an object's previous write
is P writes old and the cache has it (the common case; the cache is caught up at the start
by a consistent GET):

  update      PUT of the object as its last answer gave it, one data value changed, with
              its resourceVersion (what ``kubectl replace`` and controllers send)
  patch       merge patch of one data value, no resourceVersion (``kubectl patch``,
              ``kubectl label``)
  apply       server-side apply of one data value by one field manager
  delete      DELETE of an object created for it (and caught up by the cache) before
  patch-hot   merge patches of one object back to back, the next sent when the answer
              to the last arrives: the cache has the last write only if its watch event
              came first; when it has not, the contender's compare fails and it retries
              from the object etcd returned, without a read (its Txn per write above 1 is
              how often that happened)

Sides, paired: the baseline is ``git archive <base> python`` (default: the commit before
the change), the contender a copy of the working tree's python/ (or ``--contender REV``);
both run ``watchcache serve`` (default resources) through bench/tree_python.py (as
bench/ab_apiserver.py, whose helpers this uses) on the installed engine. On this shared
2-core machine, running one side after the other lets the machine's phases (others' tests)
decide the ratio; so here both servers run at once, each on an etcd of its own (new each
round), and their writes alternate one by one, the order swapped every pair: both sides
meet the same load. Rounds restart both servers and etcds, the start order swapped.

Report: per write kind the p50 and p99 over all rounds' samples of each side, the server's
CPU per write (each server's own, over the alternating batch), its etcd's Range and Txn
calls per write, and the speedup baseline / contender with each round's; a speedup within
1 +-10 % is noise on this shared machine.

    python bench/write_path.py [--full] [--base REV] [--contender REV] [--writes N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ab_apiserver import (
    WORKTREE,
    Tree,
    TreeServer,
    chunks,
    cpu_ns,
    installed_core,
    parse_head,
    prepare,
)
from harness import etcd, etcd_version, parser, percentile
from reporting import Headline, Report, figure, markdown

#: The commit before writes started from the cache: the default baseline.
DEFAULT_BASE = "dbc6f12"
NOISE = 0.10
TARGET_SPEEDUP = 1.3
NAMESPACE = "bench-writes"
POOL = 100
VALUE_BYTES = 1024
KINDS = ("update", "patch", "apply", "delete", "patch-hot")
LABELS = {
    "update": "PUT with resourceVersion",
    "patch": "merge PATCH",
    "apply": "server-side apply",
    "delete": "DELETE",
    "patch-hot": "merge PATCH, one object back to back",
}
_HANDLED = re.compile(
    r'^grpc_server_handled_total\{[^}]*grpc_method="(Range|Txn)"[^}]*\} (\S+)$', re.M
)


# ---------------------------------------------------------------------------------------
# HTTP


@dataclass
class Answer:
    status: int
    body: bytes

    def json(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.body)
        return value


class Client:
    """One keep-alive HTTP/1.1 connection; any method, a JSON or YAML body."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def send(
        self, method: str, path: str, body: bytes = b"", content_type: str = "application/json"
    ) -> Answer:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        head = f"{method} {path} HTTP/1.1\r\nHost: bench\r\n"
        if body:
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode() + b"\r\n" + body)
        status, fields = parse_head(await self.reader.readuntil(b"\r\n\r\n"))
        if "content-length" in fields:
            data = await self.reader.readexactly(int(fields["content-length"]))
        else:
            data = b"".join([chunk async for chunk in chunks(self.reader)])
        return Answer(status, data)

    async def expect(self, status: int, method: str, path: str, body: bytes = b"",
                     content_type: str = "application/json") -> Answer:  # fmt: skip
        answer = await self.send(method, path, body, content_type)
        if answer.status != status:
            raise RuntimeError(f"{method} {path}: {answer.status} {answer.body[:300]!r}")
        return answer

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


# ---------------------------------------------------------------------------------------
# One start


@dataclass
class Batch:
    """What one start measured of one kind of write."""

    ms: list[float] = field(default_factory=list)
    cpu_ns: int = 0
    ranges: float = 0.0  # etcd Range calls served, all callers
    txns: float = 0.0

    @property
    def count(self) -> int:
        return len(self.ms)


@dataclass
class Start:
    side: str
    round: int
    batches: dict[str, Batch]


def etcd_calls(metrics_url: str) -> tuple[float, float]:
    """etcd's Range and Txn calls handled so far (every gRPC code)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    totals = {"Range": 0.0, "Txn": 0.0}
    for method, value in _HANDLED.findall(text):
        totals[method] += float(value)
    return totals["Range"], totals["Txn"]


def configmap(name: str, value: str) -> bytes:
    return json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
         "data": {"k": value, "pad": "x" * VALUE_BYTES}}
    ).encode()  # fmt: skip


class Side:
    """One server under test: its objects, its writes, and what they cost."""

    def __init__(self, name: str, server: TreeServer, metrics_url: str, writes: int) -> None:
        self.name = name
        self.server = server
        self.metrics_url = metrics_url
        self.http = Client(server.port)
        self.base = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
        self.pool = [f"pool-{i}" for i in range(POOL)]
        self.doomed = [f"del-{i}" for i in range(writes)]
        self.last: dict[str, dict[str, Any]] = {}
        # Every write sets a value no write before it set: none is a no-op.
        self.values = itertools.count(1)
        self.ops: dict[str, Callable[[int], Awaitable[None]]] = {
            "update": self.update, "patch": self.patch, "apply": self.apply,
            "delete": self.delete, "patch-hot": self.patch_hot,
        }  # fmt: skip

    async def prepare(self) -> None:
        """The namespace, the pool and the objects to delete (the server's etcd is its own
        and new)."""
        namespace = json.dumps({"metadata": {"name": NAMESPACE}}).encode()
        await self.http.expect(201, "POST", "/api/v1/namespaces", namespace)
        for name in self.pool + self.doomed:
            answer = await self.http.expect(201, "POST", self.base, configmap(name, "0"))
            self.last[name] = answer.json()

    async def caught_up(self) -> None:
        """A consistent read: returns once the cache has every write so far."""
        await self.http.expect(200, "GET", f"{self.base}/{self.pool[-1]}")

    async def update(self, i: int) -> None:
        name = self.pool[i % POOL]
        obj = self.last[name]
        obj["data"]["k"] = str(next(self.values))
        answer = await self.http.expect(200, "PUT", f"{self.base}/{name}", json.dumps(obj).encode())
        self.last[name] = answer.json()

    async def patch(self, i: int) -> None:
        body = b'{"data":{"k":"%d"}}' % next(self.values)
        await self.http.expect(200, "PATCH", f"{self.base}/{self.pool[i % POOL]}", body,
                               "application/merge-patch+json")  # fmt: skip

    async def apply(self, i: int) -> None:
        name = self.pool[i % POOL]
        config = (
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
            f"data:\n  applied: '{next(self.values)}'\n"
        )
        await self.http.expect(200, "PATCH", f"{self.base}/{name}?fieldManager=bench&force=true",
                               config.encode(), "application/apply-patch+yaml")  # fmt: skip

    async def delete(self, i: int) -> None:
        await self.http.expect(200, "DELETE", f"{self.base}/{self.doomed[i]}")

    async def patch_hot(self, _: int) -> None:
        body = b'{"data":{"k":"%d"}}' % next(self.values)
        await self.http.expect(200, "PATCH", f"{self.base}/{self.pool[0]}", body,
                               "application/merge-patch+json")  # fmt: skip


async def measure_round(sides: list[Side], round_index: int, writes: int) -> list[Start]:
    """Each kind of write on both sides, alternating one write of each (the order swapped
    every pair), so both see the same phases of the machine."""
    starts = [Start(side.name, round_index, {}) for side in sides]
    for kind in KINDS:
        for side in sides:
            # Warm-up, unmeasured: the first writes of a kind import and warm what they
            # use; the apply also makes the manager own its field, so measured applies
            # change it.
            if kind != "delete":
                for i in range(POOL):
                    await side.ops[kind](i)
            await side.caught_up()
        batches = [start.batches.setdefault(kind, Batch()) for start in starts]
        calls = [etcd_calls(side.metrics_url) for side in sides]
        cpu = [cpu_ns(side.server.pid) for side in sides]
        for i in range(writes):
            for j in (0, 1) if i % 2 == 0 else (1, 0):
                t = time.perf_counter()
                await sides[j].ops[kind](i)
                batches[j].ms.append(round((time.perf_counter() - t) * 1e3, 3))
        for j, side in enumerate(sides):
            batches[j].cpu_ns = cpu_ns(side.server.pid) - cpu[j]
            ranges, txns = etcd_calls(side.metrics_url)
            batches[j].ranges, batches[j].txns = ranges - calls[j][0], txns - calls[j][1]
    for start in starts:
        line = ", ".join(
            f"{n} {statistics.median(b.ms):.2f} ms ({b.ranges / b.count:.2f} R + "
            f"{b.txns / b.count:.2f} T)"
            for n, b in start.batches.items()
        )
        print(f"  round {round_index} {start.side:9s}: {line}", flush=True)
    return starts


async def run(trees: list[Tree], *, core: str, args: argparse.Namespace,
              info: dict[str, Any]) -> list[Start]:  # fmt: skip
    """Per round, both sides' servers at once, each on an etcd of its own (new each
    round, so both start from the same empty store); started in turn, the order swapped
    each round."""
    starts: list[Start] = []
    for r in range(args.rounds):
        with etcd() as first, etcd() as second:
            info["etcd_version"] = etcd_version(first)
            clusters = [first, second] if r % 2 == 0 else [second, first]
            order = [0, 1] if r % 2 == 0 else [1, 0]
            servers: list[TreeServer | None] = [None, None]
            async with contextlib.AsyncExitStack() as stack:
                for j in order:
                    servers[j] = await stack.enter_async_context(
                        TreeServer(clusters[j].endpoints, trees[j], core, [])
                    )
                sides = []
                for j, tree in enumerate(trees):
                    server = servers[j]
                    assert server is not None
                    url = f"{clusters[j].members[0].url}/metrics"
                    sides.append(Side(tree.side, server, url, args.writes))
                for side in sides:
                    await side.prepare()
                starts += await measure_round(sides, r, args.writes)
                for side in sides:
                    await side.http.close()
    return starts


# ---------------------------------------------------------------------------------------
# Report


@dataclass
class Row:
    kind: str
    p50: dict[str, float]
    p99: dict[str, float]
    cpu_us: dict[str, float]
    ranges: dict[str, float]
    txns: dict[str, float]
    round_speedups: list[float]

    @property
    def speedup(self) -> float:
        return self.p50["baseline"] / self.p50["contender"]


def rows_of(starts: list[Start]) -> list[Row]:
    rounds = sorted({s.round for s in starts})
    rows = []
    for kind in KINDS:

        def of(side: str, r: int | None = None, kind: str = kind) -> list[Batch]:
            return [s.batches[kind] for s in starts
                    if s.side == side and (r is None or s.round == r)]  # fmt: skip

        def values(get: Callable[[list[Batch]], float]) -> dict[str, float]:
            return {side: get(of(side)) for side in ("baseline", "contender")}

        def p(q: float) -> Callable[[list[Batch]], float]:
            return lambda bs: percentile([x for b in bs for x in b.ms], q)

        def per_write(attr: str) -> Callable[[list[Batch]], float]:
            return lambda bs: sum(getattr(b, attr) for b in bs) / sum(b.count for b in bs)

        speedups = [
            percentile([x for b in of("baseline", r) for x in b.ms], 0.5)
            / percentile([x for b in of("contender", r) for x in b.ms], 0.5)
            for r in rounds
        ]
        rows.append(Row(
            kind, values(p(0.5)), values(p(0.99)),
            {k: v / 1e3 for k, v in values(per_write("cpu_ns")).items()},
            values(per_write("ranges")), values(per_write("txns")), speedups,
        ))  # fmt: skip
    return rows


def verdict(row: Row) -> str:
    every = all(s > 1 + NOISE for s in row.round_speedups)
    if row.speedup > 1 + NOISE:
        return "faster" if every else "faster? (not every round)"
    if row.speedup < 1 - NOISE:
        slower_every = all(s < 1 - NOISE for s in row.round_speedups)
        return "**slower**" if slower_every else "slower? (not every round)"
    return "noise"


def table(rows: list[Row], trees: list[Tree]) -> str:
    b, c = (f"{t.side} ({t.commit[:7]})" for t in trees)
    header = ["write (one client)", f"p50 {b}", f"p50 {c}", "speedup p50", "per round",
              f"p99 {b}", f"p99 {c}", "server CPU / write", "etcd Range + Txn / write",
              "reading"]  # fmt: skip
    body = []
    for r in rows:
        body.append([
            LABELS[r.kind], f"{r.p50['baseline']:.2f} ms", f"{r.p50['contender']:.2f} ms",
            f"{r.speedup:.2f}x", " ".join(f"{s:.2f}" for s in r.round_speedups),
            f"{r.p99['baseline']:.2f} ms", f"{r.p99['contender']:.2f} ms",
            f"{r.cpu_us['baseline']:,.0f} → {r.cpu_us['contender']:,.0f} µs",
            f"{r.ranges['baseline']:.2f} + {r.txns['baseline']:.2f} → "
            f"{r.ranges['contender']:.2f} + {r.txns['contender']:.2f}",
            verdict(r),
        ])  # fmt: skip
    return markdown(header, body, "lrrrlrrrll")


def target_table(rows: list[Row]) -> str:
    body = []
    for r in rows:
        if r.kind == "patch-hot":
            continue
        met = "yes" if r.speedup >= TARGET_SPEEDUP else "no"
        body.append([LABELS[r.kind], f"≥ {TARGET_SPEEDUP}x", f"{r.speedup:.2f}x", met])
    return markdown(["target (issue 22): p50 over HTTP", "target", "this run", "met"], body, "lrrl")


def plot(rows: list[Row]) -> Callable[[Path], None]:
    def draw(path: Path) -> None:
        with figure(path, title="Write path: p50 over HTTP, one client (ms)",
                    size=(9, 4)) as (ax,):  # fmt: skip
            xs = range(len(rows))
            ax.bar([x - 0.2 for x in xs], [r.p50["baseline"] for r in rows], 0.4, label="baseline")
            ax.bar(
                [x + 0.2 for x in xs], [r.p50["contender"] for r in rows], 0.4, label="contender"
            )
            ax.set_xticks(list(xs), [r.kind for r in rows])
            ax.set_ylabel("ms")
            ax.legend()

    return draw


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--base", default=DEFAULT_BASE, help=f"baseline revision ({DEFAULT_BASE})")
    p.add_argument("--contender", default=WORKTREE, help="a revision, or WORKTREE (default)")
    p.add_argument("--rounds", type=int, help="rounds (quick 4, full 6)")
    p.add_argument(
        "--writes", type=int, help="measured writes per kind and start (quick 300, full 1000)"
    )
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    args.rounds = args.rounds or (6 if args.full else 4)
    args.writes = args.writes or (1000 if args.full else 300)
    core = installed_core()
    report = Report("write-path", "Write path A/B: writes from the cached object (issue 22)",
                    "full" if args.full else "quick")  # fmt: skip
    info: dict[str, Any] = {}
    folder = Path(tempfile.mkdtemp(prefix="watchcache-write-path-"))
    try:
        # Both on the installed engine: the write path does not depend on the engine.
        trees = [
            prepare("baseline", args.base, folder / "baseline", True),
            prepare("contender", args.contender, folder / "contender", True),
        ]
        for tree in trees:
            print(f"{tree.label}: {tree.python}", flush=True)
        starts = asyncio.run(run(trees, core=core, args=args, info=info))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rows = rows_of(starts)
    end_load = [round(x, 2) for x in os.getloadavg()]
    report.how = (
        f"Baseline: {trees[0].description}; contender: {trees[1].description}; both on the "
        f"installed engine. etcd {info.get('etcd_version', '?')}; `watchcache serve` with its "
        f"default resources; both servers at once, each on its own etcd, their writes "
        f"alternating (the order swapped every pair); {args.rounds} rounds, each with new "
        f"servers and etcds; per round and kind {args.writes} writes a side by one client "
        "over one keep-alive connection, to "
        f"{POOL} configmaps of ~{VALUE_BYTES} B taken in turn (delete: to objects created "
        "for it). Latency: over all rounds' samples; speedup: baseline p50 / contender p50 "
        "(per round: that round's). Server CPU: all its threads. etcd calls: etcd's own "
        "`grpc_server_handled_total` for Range and Txn over the batch, divided by the "
        f"writes. Load average at the end: {end_load[0]}. The method is the script's "
        "docstring."
    )
    report.tables += [table(rows, trees), target_table(rows)]
    by_kind = {r.kind: r for r in rows}
    report.headline = [
        Headline("write-path", "update / patch / apply / delete p50 speedup over HTTP",
                 " / ".join(f"{by_kind[k].speedup:.2f}x" for k in KINDS[:4]),
                 note="writes start from the cached object (one etcd round trip)"),
    ]  # fmt: skip
    report.data = {
        "trees": [asdict(t) | {"python": None} for t in trees],
        "writes": args.writes,
        "pool": POOL,
        "etcd_version": info.get("etcd_version"),
        "load_average_end": end_load,
        "rows": [asdict(r) for r in rows],
        "starts": [asdict(s) for s in starts],
    }
    report.publish_as_asked(args, plot=plot(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
