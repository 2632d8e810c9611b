"""A/B of the apiserver's LIST and WATCH of core kinds: the Python code of a baseline git
revision against the working tree's, alternating on one etcd in one run, compared by
same-run ratios (contender / baseline).

Why one run: on this shared 2-core machine two separate runs of a benchmark differ by
10-30 % with the machine's phase (bench/README.md), far more than the regressions worth
finding. Alternating the two servers over the same etcd and data, several rounds with the
order swapped each round, exposes both to the same phases; the ratio of their medians is
what to read, and the per-round ratios show how much of it is noise.

Trees. The baseline is ``git archive <base> python`` extracted into a temporary folder
(read-only use, removed after; the repository is not touched). The contender is, by
default, the working tree's python/ copied at the start, so that edits others make while
the run goes on do not change what later rounds run (``--contender REV`` archives a
revision instead). Both run through bench/tree_python.py, which takes the editable
install's redirecting finder out and loads the tree's sources with the installed engine
(``watchcache._core``): the run refuses when the engine's sources differ between the two,
since the older Python would then run on a newer engine.

Data, loaded once into one etcd 3.5 (free loopback ports, temporary data folder): N
configmaps of ~1 KB over NS namespaces (``watchcache load``'s objects: labels
``app=a|b|c`` and ``index``) and P pods of ~2 KB (a container, status, node name).

Rounds. Each round starts one apiserver child per side (ABAB..., the order swapped every
round), with the same command line: ``watchcache serve --etcd ... --port ... --log-level
warning`` (each revision's default resources unless ``--resources``), waits for /readyz,
warms up (one walk, a few of each request, unmeasured), measures, and stops it by PID. Over
one keep-alive connection, one request at a time (this process's own minimal HTTP/1.1
client: httpx would cost more than some of the requests):

  walk        LIST of all configmaps, limit 500, following continue tokens to the end
  first       the first page only (limit 500)
  none        LIST with labelSelector app=nobody: a consistent read that scans every
              configmap and returns none
  namespace   LIST of one namespace's configmaps (N / NS objects), no limit
  get         GET of single configmaps (the same seeded names on both sides)
  table       the first page again with kubectl's Accept (a meta.k8s.io Table)
  pods-table  the first page of pods (limit 500) as a Table, as ``kubectl get pods -A``

Each also gets the server's CPU time per request (every thread of the child, from
/proc/<pid>/task/*/schedstat, ns resolution): less sensitive to other processes on the
machine than wall time, though not to frequency or cache effects.

WATCH. K watch connections to /api/v1/configmaps with labelSelector ``app=<a|b|c>`` (by
connection), from the current resourceVersion; a writer in a child process updates W
random configmaps (the same ones on both sides of a round) straight in etcd, keeping their
labels, so each update goes to about K/3 connections. Delay: the writer sends the put ->
the event's chunk arrives here (time.perf_counter is CLOCK_MONOTONIC, shared by
processes), matched by resourceVersion. Two phases on the same connections: ``paced`` (W
writes at R/s: delay p50/p99) and ``burst`` (W writes, 32 in flight, as fast as etcd takes
them: writes delivered to all their watchers per second, from the first send to the last
arrival, and delays under load). Also the server's CPU per write in each phase and
deliveries missing (must be 0). Events go through etcd and the writer's and this process's
Python too, so these are system numbers; the server's CPU per write is the server's own.

Also per start: seconds to /readyz (imports, the initial LISTs from etcd, each revision's
controllers), and RSS after the warm-up.

Report: per metric, the median over all rounds' samples on each side (throughput: the
median of the rounds'; CPU: total CPU / total requests) and the ratio contender /
baseline, with each round's ratio. Ratios within +-10 % are noise on this machine; a
metric counts as slower only beyond that and in every round. ``--base HEAD`` with no
changes in the working tree is an A/A run: it shows the bias of the method.

Sizes: quick (default) 20,000 configmaps, 2,000 pods, 4 rounds (an even number, so each
side starts first as often as second), 1,000 writes per watch phase; ``--full`` 6 rounds,
twice the samples, 2,000 writes per phase. ``--profile DIR``
runs every server under cProfile (its main thread) and keeps the stats per side and
round: timings under the profiler are not comparable, use it to find where time goes.

``--callgrind`` counts instructions instead of timing: each server runs under ``valgrind
--tool=callgrind`` with instrumentation off until its warm-up is done; counters are zeroed
before each batch and dumped after it (``callgrind_control``), giving the server's
instructions per request (all threads: the engine's scans too) and per watch write (one
paced phase at 20 writes/s, which valgrind keeps up with). They repeat to about 1 % from
start to start whatever else the machine does, so a difference of a few percent is
visible; they leave out cache misses and waiting. Defaults: 2 rounds, 5 of each LIST, 50
GETs, 1 walk, 200 writes. Its section is ``ab-apiserver-callgrind``.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import contextlib
import io
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from harness import (
    Server,
    distribution,
    etcd,
    etcd_version,
    load_configmaps,
    paced,
    parser,
    percentile,
    rss,
    workspace,
)
from reporting import REPO, Report, figure, markdown
from watchcache.cli.load import make_object
from watchcache.etcd.client import EtcdClient
from watchcache.registry.resources import CONFIGMAPS, PODS

BOOT = Path(__file__).resolve().parent / "tree_python.py"
#: The parent of the first commit of the issue-21 work (named API groups, Events and
#: Leases, OpenAPI, CRDs, conversion hooks, aggregated discovery): the default baseline.
DEFAULT_BASE = "580bb7b"
DEFAULT_CHANGE = "named groups, CRDs, conversion hooks and aggregated discovery (issue 21)"
WORKTREE = "WORKTREE"
#: What the engine is built from: both sides must agree on it to share the installed one.
ENGINE_PATHS = ("cpp", "CMakeLists.txt", "python/watchcache/_core.pyi")
LIMIT = 500
NOISE = 0.10
TABLE_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
BURST_IN_FLIGHT = 32
PACED_IN_FLIGHT = 64
DRAIN_SECONDS = 20.0
#: --callgrind: the paced watch phase's writes/s, and how long deliveries may take.
CALLGRIND_RATE = 20.0
CALLGRIND_DRAIN_SECONDS = 180.0
#: Instruction counts repeat to about 1 % between starts of the same tree.
NOISE_INSTRUCTIONS = 0.03
#: What a start measures, in order (``--only`` picks some: a focused rerun, a profile).
REQUESTS = ("walk", "first", "none", "namespace", "get", "table", "pods-table")
MEASUREMENTS = (*REQUESTS, "watch")
_RV = re.compile(rb'"resourceVersion":"(\d+)"')
_LIST_HEAD = b',"items":['
T = TypeVar("T")


# ---------------------------------------------------------------------------------------
# Settings


@dataclass
class Sizes:
    configmaps: int
    pods: int
    namespaces: int
    rounds: int
    walks: int
    requests: int  # per request kind, per start
    gets: int
    watchers: int
    writes: int  # per watch phase
    rate: float  # paced phase, writes/s
    only: tuple[str, ...]  # the measurements to run, of MEASUREMENTS
    callgrind: bool  # count the server's instructions instead of timing it

    @staticmethod
    def of(args: argparse.Namespace) -> Sizes:
        full = bool(args.full)
        if args.callgrind:
            # Under callgrind the server runs ~50x slower and its counts repeat to ~1 %:
            # few samples, and a write rate it keeps up with.
            return Sizes(
                configmaps=args.configmaps,
                pods=args.pods,
                namespaces=args.namespaces,
                rounds=args.rounds or 2,
                walks=1,
                requests=args.requests or 5,
                gets=50,
                watchers=args.watchers,
                writes=args.writes or 200,
                rate=CALLGRIND_RATE,
                only=tuple(m for m in MEASUREMENTS if not args.only or m in args.only.split(",")),
                callgrind=True,
            )
        return Sizes(
            configmaps=args.configmaps,
            pods=args.pods,
            namespaces=args.namespaces,
            rounds=args.rounds or (6 if full else 4),
            walks=6 if full else 3,
            requests=args.requests or (40 if full else 20),
            gets=400 if full else 200,
            watchers=args.watchers,
            writes=args.writes or (2000 if full else 1000),
            rate=args.rate,
            only=tuple(m for m in MEASUREMENTS if not args.only or m in args.only.split(",")),
            callgrind=False,
        )


@dataclass
class Probe:
    """One kind of request, measured ``count`` times back to back."""

    name: str
    label: str
    path: str
    accept: str = ""


def probes(sizes: Sizes) -> list[Probe]:
    per_ns = sizes.configmaps // sizes.namespaces
    return [
        Probe("first", f"LIST configmaps, first page (limit {LIMIT})",
              f"/api/v1/configmaps?limit={LIMIT}"),
        Probe("none", "LIST configmaps, label selector matching none (consistent read)",
              "/api/v1/configmaps?labelSelector=app%3Dnobody"),
        Probe("namespace", f"LIST one namespace ({per_ns:,} configmaps)",
              "/api/v1/namespaces/demo-7/configmaps"),
        Probe("table", f"LIST configmaps as Table, first page (limit {LIMIT})",
              f"/api/v1/configmaps?limit={LIMIT}", TABLE_ACCEPT),
        Probe("pods-table", f"LIST pods as Table, first page (limit {LIMIT})",
              f"/api/v1/pods?limit={LIMIT}", TABLE_ACCEPT),
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------
# The two trees


@dataclass
class Tree:
    side: str  # "baseline" | "contender"
    spec: str  # what was asked: a revision, or WORKTREE
    commit: str  # the revision, or HEAD for the working tree
    python: Path  # the tree's python/ folder
    note: str = ""

    @property
    def label(self) -> str:
        return f"{self.side} ({self.description})"

    @property
    def description(self) -> str:
        if self.spec == WORKTREE:
            return f"working tree at {self.commit[:7]}{self.note}"
        if self.commit.startswith(self.spec):
            return self.commit[:7]
        return f"{self.spec} = {self.commit[:7]}"


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()


def archive(revision: str, into: Path) -> None:
    """``git archive <revision> python`` extracted into ``into``: nothing in the
    repository (worktrees, index, refs) changes."""
    tar = subprocess.run(
        ["git", "archive", "--format=tar", revision, "python"], cwd=REPO, check=True,
        capture_output=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive_file:
        archive_file.extractall(into, filter="data")


def prepare(side: str, spec: str, into: Path, allow_engine_diff: bool) -> Tree:
    into.mkdir(parents=True)
    if spec == WORKTREE:
        commit = git("rev-parse", "HEAD")
        # A copy, so that what later rounds run is what the first ran.
        shutil.copytree(
            REPO / "python", into / "python",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"),
        )  # fmt: skip
        dirty = git("status", "--porcelain", "--", "python").splitlines()
        note = f" + {len(dirty)} uncommitted file(s) under python/" if dirty else ""
        engine_diff = git("diff", "--stat", commit, "--", *ENGINE_PATHS)
        engine_diff += git("status", "--porcelain", "--", *ENGINE_PATHS)
    else:
        commit = git("rev-parse", "--verify", f"{spec}^{{commit}}")
        archive(commit, into)
        note = ""
        engine_diff = git("diff", "--stat", commit, "--", *ENGINE_PATHS)
    if engine_diff and not allow_engine_diff:
        raise SystemExit(
            f"the engine's sources differ between {spec} and the working tree:\n{engine_diff}\n"
            "both sides run the installed engine; pass --allow-engine-diff to run anyway"
        )
    # Compiled now, so the first start of a side does not pay for compiling its modules.
    compileall.compile_dir(into / "python", quiet=1)
    return Tree(side, spec, commit, into / "python", note)


def installed_core() -> str:
    """The engine the editable install loads (found, not imported through the tree)."""
    import importlib.util

    spec = importlib.util.find_spec("watchcache._core")
    if spec is None or spec.origin is None:
        raise SystemExit("watchcache._core is not installed (make install)")
    return spec.origin


class TreeServer(Server):
    """harness.Server (free port, /readyz, stopped by PID), running ``tree``'s sources."""

    def __init__(
        self, endpoints: Sequence[str], tree: Tree, core: str, extra: Sequence[str], *,
        profile: Path | None = None, callgrind: Path | None = None,
    ) -> None:  # fmt: skip
        super().__init__(endpoints)
        self.command = [
            sys.executable, str(BOOT), str(tree.python), core,
            *(["--profile", str(profile)] if profile else []), "--",
            "serve", "--etcd", ",".join(endpoints), "--port", str(self.port),
            "--log-level", "warning", *extra,
        ]  # fmt: skip
        self.callgrind = callgrind
        if callgrind is not None:
            # Instrumentation starts off (the start and the warm-up run at valgrind's
            # uninstrumented speed) and counters are zeroed and dumped around each batch.
            self.command = [
                "valgrind", "--tool=callgrind", "--instr-atstart=no",
                f"--callgrind-out-file={callgrind}", *self.command,
            ]  # fmt: skip

    async def __aenter__(self) -> TreeServer:
        await super().__aenter__()
        return self

    def control(self, *args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(self.pid)], check=True, capture_output=True)

    def count_from_here(self) -> None:
        """Under callgrind: counters to zero (instrumentation on)."""
        if self.callgrind is not None:
            self.control("--instr=on")
            self.control("--zero")

    def instructions(self) -> int:
        """Under callgrind: the instructions since :meth:`count_from_here` (0 otherwise),
        from the dump this asks for (removed after)."""
        if self.callgrind is None:
            return 0
        folder, name = self.callgrind.parent, self.callgrind.name
        before = set(folder.glob(name + "*"))
        self.control("--dump")
        dumps = sorted(set(folder.glob(name + "*")) - before, key=lambda p: p.stat().st_mtime)
        if not dumps:
            raise RuntimeError("callgrind_control --dump wrote no file")
        total = next(
            int(line.split()[1])
            for line in dumps[-1].read_text().splitlines()
            if line.startswith(("totals:", "summary:"))
        )
        for dump in dumps:
            dump.unlink()
        return total


# ---------------------------------------------------------------------------------------
# Measuring a server


def cpu_ns(pid: int) -> int:
    """CPU time of every live thread of ``pid`` in ns (schedstat's first field). A thread
    that ends takes its time with it; the server's threads (event loop, executor) live as
    long as it does."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int((task / "schedstat").read_text().split()[0])
    return total


@dataclass
class Response:
    status: int
    body: bytes


class Http:
    """One keep-alive HTTP/1.1 connection, GET only, Content-Length or chunked bodies (the
    harness's KeepAliveClient, with an Accept header and chunked bodies)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, path: str, accept: str = "") -> Response:
        reused = self.writer is not None
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(
                "127.0.0.1", self.port, limit=2**20
            )
        assert self.reader is not None
        headers = f"Accept: {accept}\r\n" if accept else ""
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\n{headers}\r\n".encode())
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            await self.close()
            if not reused:
                raise
            # Closed while idle: a GET is safe to send again on a new connection.
            return await self.request(path, accept)
        status, fields = parse_head(head)
        if "content-length" in fields:
            body = await self.reader.readexactly(int(fields["content-length"]))
        else:
            body = b"".join([chunk async for chunk in chunks(self.reader)])
        return Response(status, body)

    async def get(self, path: str, accept: str = "") -> bytes:
        response = await self.request(path, accept)
        if response.status != 200:
            raise RuntimeError(f"GET {path}: {response.status} {response.body[:200]!r}")
        return response.body

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    fields = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            fields[name.strip().lower()] = value.strip()
    return int(lines[0].split(" ", 2)[1]), fields


async def chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """The chunks of a chunked body, as they arrive, until the last."""
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return
        yield (await reader.readexactly(size + 2))[:-2]


def list_meta(body: bytes) -> tuple[dict[str, Any], int]:
    """A LIST body's metadata and its item count, without decoding the items: each item
    has exactly one resourceVersion, and so does the list's metadata."""
    cut = body.index(_LIST_HEAD)
    meta: dict[str, Any] = json.loads(body[:cut] + b"}")["metadata"]
    return meta, body.count(b'"resourceVersion":"') - 1


@dataclass
class Batch:
    """What one start measured of one kind of request."""

    ms: list[float] = field(default_factory=list)
    cpu_ns: int = 0
    bytes: int = 0
    items: int = 0
    instructions: int = 0  # --callgrind: the server's, over the batch


async def timed(
    server: TreeServer, count: int, one: Callable[[int], Awaitable[T]]
) -> tuple[Batch, list[T]]:
    """``count`` calls of ``one``, one at a time: each one's wall time, and the server's
    CPU time (under callgrind: instructions) over them all."""
    batch, results = Batch(), []
    server.count_from_here()
    before = cpu_ns(server.pid)
    for i in range(count):
        t = time.perf_counter()
        results.append(await one(i))
        batch.ms.append((time.perf_counter() - t) * 1e3)
    batch.cpu_ns = cpu_ns(server.pid) - before
    batch.instructions = server.instructions()
    return batch, results


async def walk(http: Http) -> tuple[int, int]:
    """A full paginated LIST of configmaps: (items, bytes)."""
    items = size = 0
    token = ""
    while True:
        query = f"limit={LIMIT}" + (f"&continue={token}" if token else "")
        body = await http.get(f"/api/v1/configmaps?{query}")
        meta, count = list_meta(body)
        items, size = items + count, size + len(body)
        token = meta.get("continue", "")
        if not token:
            return items, size


async def measure_requests(server: TreeServer, sizes: Sizes, seed: int) -> dict[str, Batch]:
    http = Http(server.port)
    kinds = [p for p in probes(sizes) if p.name in sizes.only]
    names = random.Random(seed).sample(range(sizes.configmaps), sizes.gets)
    gets = [
        f"/api/v1/namespaces/demo-{i % sizes.namespaces}/configmaps/configmap-{i:07d}"
        for i in names
    ]
    # Unmeasured: the first requests of a fresh server import and warm what they use.
    await walk(http)
    for probe in kinds:
        for _ in range(3):
            await http.get(probe.path, probe.accept)
    for path in gets[:10]:
        await http.get(path)

    out: dict[str, Batch] = {}
    if "walk" in sizes.only:
        batch, walked = await timed(server, sizes.walks, lambda _: walk(http))
        batch.items, batch.bytes = walked[-1]
        if batch.items != sizes.configmaps:
            raise AssertionError(f"the walk saw {batch.items} configmaps, not {sizes.configmaps}")
        out["walk"] = batch
    for probe in kinds:

        def request(_: int, probe: Probe = probe) -> Awaitable[bytes]:
            return http.get(probe.path, probe.accept)

        batch, bodies = await timed(server, sizes.requests, request)
        batch.bytes = len(bodies[-1])
        out[probe.name] = batch
    if "get" in sizes.only:
        batch, _ = await timed(server, sizes.gets, lambda i: http.get(gets[i]))
        out["get"] = batch
    await http.close()
    return out


# ---------------------------------------------------------------------------------------
# WATCH


class WatchStream:
    """One watch connection: every event's (resourceVersion, arrival time)."""

    def __init__(self, port: int, path: str) -> None:
        self.port, self.path = port, path
        self.arrivals: list[tuple[int, float]] = []
        self.other_lines = 0
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> asyncio.StreamReader:
        reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port, limit=2**20)
        self.writer.write(f"GET {self.path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
        status, fields = parse_head(await reader.readuntil(b"\r\n\r\n"))
        if status != 200 or fields.get("transfer-encoding") != "chunked":
            raise RuntimeError(f"watch {self.path}: {status} {fields}")
        return reader

    async def read(self, reader: asyncio.StreamReader) -> None:
        pending = b""
        async for chunk in chunks(reader):
            now = time.perf_counter()
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                match = _RV.search(line)
                if match:
                    self.arrivals.append((int(match[1]), now))
                elif line.strip():
                    self.other_lines += 1

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


@dataclass
class WatchPhase:
    phase: str
    watchers: int
    writes: int
    write_rate: float  # as the writer achieved it
    delivered_rate: float  # writes / (last arrival - first send)
    expected: int
    received: int
    lost: int
    unexpected: int
    other_lines: int
    cpu_ns_per_write: float
    delay_ms: dict[str, float]
    delays: list[float] = field(repr=False, default_factory=list)
    instructions_per_write: float = 0.0  # --callgrind


async def watch_phase(
    phase: str, *, streams: list[WatchStream], server: TreeServer, endpoint: str, sizes: Sizes,
    rate: float, in_flight: int, seed: int,
) -> WatchPhase:  # fmt: skip
    for stream in streams:
        stream.arrivals, stream.other_lines = [], 0
    server.count_from_here()
    before = cpu_ns(server.pid)
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--writer", endpoint, "--configmaps", str(sizes.configmaps),
        "--namespaces", str(sizes.namespaces), "--writes", str(sizes.writes),
        "--rate", str(rate), "--in-flight", str(in_flight), "--seed", str(seed),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"the writer failed ({child.returncode})")
    wrote = json.loads(out.decode().strip().splitlines()[-1])
    sent = {int(rv): t for rv, t in wrote["sent"].items()}
    apps: dict[str, int] = wrote["apps"]
    expected = [apps.get(app_of(w), 0) for w in range(len(streams))]
    deadline = time.perf_counter() + (CALLGRIND_DRAIN_SECONDS if sizes.callgrind else DRAIN_SECONDS)
    while time.perf_counter() < deadline and any(
        len(s.arrivals) < want for s, want in zip(streams, expected, strict=True)
    ):
        await asyncio.sleep(0.05)
    cpu = cpu_ns(server.pid) - before
    instructions = server.instructions()
    delays = [(t - sent[rv]) * 1e3 for s in streams for rv, t in s.arrivals if rv in sent]
    last = max((t for s in streams for _, t in s.arrivals), default=0.0)
    received = sum(len(s.arrivals) for s in streams)
    return WatchPhase(
        phase, len(streams), len(sent), wrote["rate"],
        len(sent) / max(last - min(sent.values()), 1e-9), sum(expected), received,
        sum(max(0, want - len(s.arrivals)) for s, want in zip(streams, expected, strict=True)),
        sum(1 for s in streams for rv, _ in s.arrivals if rv not in sent),
        sum(s.other_lines for s in streams), cpu / max(len(sent), 1), distribution(delays),
        delays, instructions / max(len(sent), 1),
    )  # fmt: skip


def app_of(watcher: int) -> str:
    return "abc"[watcher % 3]


async def measure_watch(
    server: TreeServer, endpoint: str, sizes: Sizes, seed: int
) -> dict[str, WatchPhase]:
    http = Http(server.port)
    meta, _ = list_meta(await http.get("/api/v1/configmaps?limit=1"))
    await http.close()
    rv = meta["resourceVersion"]
    streams = [
        WatchStream(
            server.port,
            f"/api/v1/configmaps?watch=1&labelSelector=app%3D{app_of(w)}"
            f"&resourceVersion={rv}&timeoutSeconds=900",
        )
        for w in range(sizes.watchers)
    ]
    readers = [await s.open() for s in streams]
    tasks = [asyncio.create_task(s.read(r)) for s, r in zip(streams, readers, strict=True)]
    try:
        # The response head is sent once the watcher is registered; a moment more lets
        # every connection settle before the first write.
        await asyncio.sleep(0.5)
        if sizes.callgrind:
            # One slow phase: a burst would only queue up in front of valgrind.
            return {
                "paced": await watch_phase(
                    "paced", streams=streams, server=server, endpoint=endpoint, sizes=sizes,
                    rate=sizes.rate, in_flight=4, seed=seed,
                )
            }  # fmt: skip
        return {
            "paced": await watch_phase(
                "paced",
                streams=streams,
                server=server,
                endpoint=endpoint,
                sizes=sizes,
                rate=sizes.rate,
                in_flight=PACED_IN_FLIGHT,
                seed=seed,
            ),
            "burst": await watch_phase(
                "burst",
                streams=streams,
                server=server,
                endpoint=endpoint,
                sizes=sizes,
                rate=0.0,
                in_flight=BURST_IN_FLIGHT,
                seed=seed + 1,
            ),
        }
    finally:
        for stream in streams:
            stream.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def writer(args: argparse.Namespace) -> dict[str, Any]:
    """The writer child: ``--writes`` updates of random configmaps (labels kept), paced at
    ``--rate`` (0: as fast as ``--in-flight`` puts allow); the send time of each by the
    revision etcd gave it."""
    rng = random.Random(args.seed)
    indices = [rng.randrange(args.configmaps) for _ in range(args.writes)]
    sent: dict[int, float] = {}
    apps: dict[str, int] = {}
    semaphore = asyncio.Semaphore(args.in_flight)
    async with EtcdClient([args.writer], timeout=60) as client:

        async def update(i: int) -> None:
            index = indices[i]
            key, value = make_object(CONFIGMAPS, index, 1024, f"demo-{index % args.namespaces}")
            async with semaphore:
                t = time.perf_counter()
                revision = await client.put(key.encode(), value)
            sent[revision] = t
            app = json.loads(value)["metadata"]["labels"]["app"]
            apps[app] = apps.get(app, 0) + 1

        begin = time.perf_counter()
        if args.rate > 0:
            tasks = [asyncio.create_task(update(i)) async for i in paced(args.rate, args.writes)]
        else:
            tasks = [asyncio.create_task(update(i)) for i in range(args.writes)]
        await asyncio.gather(*tasks)
        seconds = time.perf_counter() - begin
    return {"sent": sent, "apps": apps, "rate": args.writes / seconds}


# ---------------------------------------------------------------------------------------
# Loading


def pod(index: int, namespace: str) -> tuple[bytes, bytes]:
    """A running pod of about 2 KB, with what ``kubectl get pods`` shows filled in."""
    name = f"pod-{index:06d}"
    started = "2026-01-01T00:00:00Z"
    container = {
        "name": "app", "image": "app:1.0",
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        "env": [{"name": f"VAR_{k}", "value": "x" * 40} for k in range(12)],
    }  # fmt: skip
    obj = {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "namespace": namespace, "uid": str(uuid.UUID(int=index)),
            "creationTimestamp": started, "labels": {"app": "abc"[index % 3]},
        },
        "spec": {
            "nodeName": f"node-{index % 10}", "restartPolicy": "Always",
            "schedulerName": "default-scheduler", "serviceAccountName": "default",
            "containers": [container],
        },
        "status": {
            "phase": "Running", "podIP": f"10.0.{index // 250 % 250}.{index % 250}",
            "startTime": started,
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{
                "name": "app", "ready": True, "restartCount": 0, "image": "app:1.0",
                "started": True, "state": {"running": {"startedAt": started}},
            }],
        },
    }  # fmt: skip
    return PODS.key(namespace, name).encode(), json.dumps(obj, separators=(",", ":")).encode()


async def load(client: EtcdClient, sizes: Sizes) -> None:
    await load_configmaps(client, sizes.configmaps, 1024, namespaces=sizes.namespaces)
    semaphore = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        key, value = pod(i, f"demo-{i % sizes.namespaces}")
        async with semaphore:
            await client.create(key, value)

    await asyncio.gather(*(one(i) for i in range(sizes.pods)))


# ---------------------------------------------------------------------------------------
# The run


@dataclass
class Start:
    """One server start of one side, in one round."""

    side: str
    round: int
    position: int  # 0: started first in its round
    ready_seconds: float
    rss_bytes: int
    requests: dict[str, Batch]
    watch: dict[str, WatchPhase]


async def one_start(
    tree: Tree, *, core: str, endpoints: list[str], sizes: Sizes, extra: Sequence[str],
    round_index: int, position: int, profile: Path | None,
) -> Start:  # fmt: skip
    profile_file = profile / f"{tree.side}-round{round_index}.prof" if profile else None
    callgrind = None
    if sizes.callgrind:
        # Next to the tree, so the final dump goes with the temporary folder.
        callgrind = tree.python.parent / "callgrind.out"
    async with TreeServer(
        endpoints, tree, core, extra, profile=profile_file, callgrind=callgrind
    ) as server:
        requests = await measure_requests(server, sizes, seed=round_index)
        rss_bytes = rss(server.pid)
        watch = {}
        if "watch" in sizes.only:
            seed = 1000 * (round_index + 1)
            watch = await measure_watch(server, endpoints[0], sizes, seed=seed)
        start = Start(
            tree.side, round_index, position, server.ready_seconds, rss_bytes, requests, watch
        )
    line = [f"ready {start.ready_seconds:.1f} s"]
    if sizes.callgrind:
        line += [f"{n} {b.instructions / len(b.ms) / 1e6:.3f} M instr" for n, b in requests.items()]
        line += [
            f"watch {p.instructions_per_write / 1e6:.3f} M instr/write" for p in watch.values()
        ]
        print(f"  round {round_index} {tree.side:9s}: {', '.join(line)}", flush=True)
        return start
    line += [f"{name} {statistics.median(b.ms):.2f} ms" for name, b in requests.items()]
    for name, phase in watch.items():
        line.append(
            f"{name} watch p50 {phase.delay_ms['p50']:.1f} ms p99 {phase.delay_ms['p99']:.1f} "
            f"ms {phase.delivered_rate:.0f}/s lost {phase.lost}"
        )
    print(f"  round {round_index} {tree.side:9s}: {', '.join(line)}", flush=True)
    return start


async def run(
    trees: tuple[Tree, Tree], *, core: str, sizes: Sizes, extra: Sequence[str],
    profile: Path | None, info: dict[str, Any],
) -> list[Start]:  # fmt: skip
    starts: list[Start] = []
    with etcd() as cluster:
        info["etcd_version"] = etcd_version(cluster)
        async with EtcdClient(cluster.endpoints, timeout=300) as client:
            t = time.perf_counter()
            await load(client, sizes)
            print(
                f"loaded {sizes.configmaps:,} configmaps and {sizes.pods:,} pods in "
                f"{time.perf_counter() - t:.1f} s",
                flush=True,
            )
        for r in range(sizes.rounds):
            order = trees if r % 2 == 0 else trees[::-1]
            for position, tree in enumerate(order):
                starts.append(
                    await one_start(
                        tree,
                        core=core,
                        endpoints=cluster.endpoints,
                        sizes=sizes,
                        extra=extra,
                        round_index=r,
                        position=position,
                        profile=profile,
                    )
                )
    return starts


# ---------------------------------------------------------------------------------------
# Summary


@dataclass
class Metric:
    """One row of the table: how to get a side's value from its starts (``pool``, the
    starts of a side) and from one start (for the per-round ratios)."""

    name: str
    label: str
    unit: str
    pool: Callable[[list[Start]], float]
    higher_is_better: bool = False


def median_ms(name: str) -> Callable[[list[Start]], float]:
    return lambda starts: statistics.median(ms for s in starts for ms in s.requests[name].ms)


def cpu_per_request(name: str) -> Callable[[list[Start]], float]:
    def value(starts: list[Start]) -> float:
        total = sum(s.requests[name].cpu_ns for s in starts)
        return total / sum(len(s.requests[name].ms) for s in starts) / 1e6

    return value


def watch_delay(phase: str, q: float) -> Callable[[list[Start]], float]:
    return lambda starts: percentile([d for s in starts for d in s.watch[phase].delays], q)


def watch_cpu(phase: str) -> Callable[[list[Start]], float]:
    def value(starts: list[Start]) -> float:
        total = sum(s.watch[phase].cpu_ns_per_write * s.watch[phase].writes for s in starts)
        return total / sum(s.watch[phase].writes for s in starts) / 1e3

    return value


def instructions_per_request(name: str) -> Callable[[list[Start]], float]:
    def value(starts: list[Start]) -> float:
        total = sum(s.requests[name].instructions for s in starts)
        return total / sum(len(s.requests[name].ms) for s in starts) / 1e6

    return value


def instructions_per_write(starts: list[Start]) -> float:
    phases = [s.watch["paced"] for s in starts]
    total = sum(p.instructions_per_write * p.writes for p in phases)
    return total / sum(p.writes for p in phases) / 1e6


def metrics(sizes: Sizes) -> list[Metric]:
    labels = {p.name: p.label for p in probes(sizes)}
    labels["walk"] = f"LIST all {sizes.configmaps:,} configmaps, paginated (limit {LIMIT})"
    labels["get"] = "GET one configmap"
    if sizes.callgrind:
        rows = [
            Metric(n, labels[n], "M instr", instructions_per_request(n))
            for n in REQUESTS
            if n in sizes.only
        ]
        if "watch" in sizes.only:
            label = f"WATCH, {sizes.watchers} watchers: per write"
            rows.append(Metric("watch", label, "M instr", instructions_per_write))
        return rows
    rows = []
    for name in (n for n in REQUESTS if n in sizes.only):
        rows.append(Metric(name, labels[name], "ms", median_ms(name)))
        rows.append(Metric(f"{name}-cpu", "  server CPU per request", "ms", cpu_per_request(name)))
    w = f"{sizes.watchers} watchers"
    watch_rows = [
        Metric("watch-p50", f"WATCH, {sizes.rate:.0f} writes/s, {w}: delay p50", "ms",
               watch_delay("paced", 0.5)),
        Metric("watch-p99", f"WATCH, {sizes.rate:.0f} writes/s, {w}: delay p99", "ms",
               watch_delay("paced", 0.99)),
        Metric("watch-cpu", "  server CPU per write", "µs", watch_cpu("paced")),
        Metric("burst-rate", f"WATCH burst, {w}: writes delivered per second", "/s",
               lambda ss: statistics.median(s.watch["burst"].delivered_rate for s in ss), True),
        Metric("burst-p50", f"WATCH burst, {w}: delay p50", "ms", watch_delay("burst", 0.5)),
        Metric("burst-p99", f"WATCH burst, {w}: delay p99", "ms", watch_delay("burst", 0.99)),
        Metric("burst-cpu", "  server CPU per write", "µs", watch_cpu("burst")),
    ]  # fmt: skip
    rows += watch_rows if "watch" in sizes.only else []
    rows += [
        Metric("ready", "start to /readyz", "s",
               lambda ss: statistics.median(s.ready_seconds for s in ss)),
        Metric("rss", "RSS after the warm-up", "MiB",
               lambda ss: statistics.median(s.rss_bytes for s in ss) / 2**20),
    ]  # fmt: skip
    return rows


def fmt(value: float, unit: str) -> str:
    if unit == "/s":
        return f"{value:,.0f}/s"
    digits = 2 if value < 10 else 1 if value < 100 else 0
    return f"{value:,.{digits}f} {unit}"


def verdict(ratio: float, rounds: list[float], higher_is_better: bool, noise: float) -> str:
    """Slower or faster only beyond the noise, and only if every round agrees."""

    def worse(r: float) -> bool:
        return r < 1 - noise if higher_is_better else r > 1 + noise

    def better(r: float) -> bool:
        return r > 1 + noise if higher_is_better else r < 1 - noise

    if worse(ratio):
        return "**slower**" if all(worse(r) for r in rounds) else "slower? (not every round)"
    if better(ratio):
        return "faster" if all(better(r) for r in rounds) else "faster? (not every round)"
    return "noise"


@dataclass
class Row:
    name: str
    label: str
    unit: str
    baseline: float
    contender: float
    ratio: float
    round_ratios: list[float]
    verdict: str


def summarize(starts: list[Start], sizes: Sizes) -> list[Row]:
    noise = NOISE_INSTRUCTIONS if sizes.callgrind else NOISE
    rows = []
    for m in metrics(sizes):
        sides = {side: [s for s in starts if s.side == side] for side in ("baseline", "contender")}
        base, cont = m.pool(sides["baseline"]), m.pool(sides["contender"])
        per_round = []
        for r in range(sizes.rounds):
            b = [s for s in sides["baseline"] if s.round == r]
            c = [s for s in sides["contender"] if s.round == r]
            per_round.append(m.pool(c) / m.pool(b))
        ratio = cont / base
        rows.append(
            Row(m.name, m.label, m.unit, base, cont, ratio, per_round,
                verdict(ratio, per_round, m.higher_is_better, noise))
        )  # fmt: skip
    return rows


def table(rows: list[Row], trees: tuple[Tree, Tree]) -> str:
    header = [
        "metric", f"baseline ({trees[0].commit[:7]})", f"contender ({trees[1].commit[:7]})",
        "ratio", "per round", "reading",
    ]  # fmt: skip
    body = [
        [
            r.label.replace("  ", "&nbsp;&nbsp;"), fmt(r.baseline, r.unit),
            fmt(r.contender, r.unit), f"{r.ratio:.2f}",
            " ".join(f"{x:.2f}" for x in r.round_ratios), r.verdict,
        ]
        for r in rows
    ]  # fmt: skip
    return markdown(header, body, "lrrrll")


def checks_table(starts: list[Start]) -> str:
    """What each side returned and delivered: the two did the same work."""
    header = ["side", "walk: items, bytes", "first page bytes", "Table page bytes",
              "pods Table bytes", "watch: expected / received / lost / other lines",
              "burst: the writer's rate (median)"]  # fmt: skip
    rows = []
    for side in ("baseline", "contender"):
        s = [x for x in starts if x.side == side]
        got = s[0].requests
        empty = Batch()
        phases = [p for x in s for p in x.watch.values()]
        bursts = [x.watch["burst"].write_rate for x in s if "burst" in x.watch]
        rows.append([
            side, f"{got.get('walk', empty).items:,}, {got.get('walk', empty).bytes:,}",
            f"{got.get('first', empty).bytes:,}", f"{got.get('table', empty).bytes:,}",
            f"{got.get('pods-table', empty).bytes:,}",
            f"{sum(p.expected for p in phases):,} / {sum(p.received for p in phases):,} / "
            f"{sum(p.lost for p in phases)} / {sum(p.other_lines for p in phases)}",
            f"{statistics.median(bursts):,.0f}/s" if bursts else "-",
        ])  # fmt: skip
    return markdown(header, rows, "lrrrrrr")


def plot(rows: list[Row]) -> Callable[[Path], None]:
    def draw(path: Path) -> None:
        shown = [r for r in rows if not r.label.startswith("  ")]
        title = "A/B: contender / baseline (1 = same; the band is +-10 % noise)"
        with figure(path, title=title, size=(10, 0.45 * len(shown) + 1.5)) as (ax,):
            ys = range(len(shown))
            ax.barh(list(ys), [r.ratio - 1 for r in shown], left=1, height=0.5)
            for y, r in zip(ys, shown, strict=True):
                ax.plot(r.round_ratios, [y] * len(r.round_ratios), "k.", markersize=4)
            ax.axvspan(1 - NOISE, 1 + NOISE, color="grey", alpha=0.15)
            ax.axvline(1, color="black", linewidth=0.8)
            ax.set_yticks(list(ys), [r.label for r in shown], fontsize=7)
            ax.invert_yaxis()
            ax.set_xlabel("ratio (dots: each round)")

    return draw


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--quick", action="store_true", help="the default: quick sizes and rounds")
    p.add_argument("--base", default=DEFAULT_BASE, help=f"baseline revision ({DEFAULT_BASE})")
    p.add_argument(
        "--contender", default=WORKTREE, help="a revision, or WORKTREE (default: a copy of "
        "the working tree's python/ taken at the start)",
    )  # fmt: skip
    p.add_argument("--change", help="what changed, for the title (default: issue 21's work)")
    p.add_argument("--rounds", type=int, help="rounds (quick 4, full 6)")
    p.add_argument("--requests", type=int, help="of each LIST per start (quick 20, full 40)")
    p.add_argument("--configmaps", type=int, default=20_000)
    p.add_argument("--pods", type=int, default=2_000)
    p.add_argument("--namespaces", type=int, default=20)
    p.add_argument("--watchers", type=int, default=50)
    p.add_argument("--writes", type=int, help="writes per watch phase (quick 1000, full 2000)")
    p.add_argument("--rate", type=float, default=200.0, help="paced watch phase, writes/s")
    p.add_argument("--only", help=f"comma-separated, of {','.join(MEASUREMENTS)} (default: all)")
    p.add_argument("--resources", help="passed to both servers (default: their own defaults)")
    p.add_argument("--allow-engine-diff", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--profile", type=Path, help="cProfile every server into this folder")
    p.add_argument(
        "--callgrind", action="store_true",
        help="count the servers' instructions per request (valgrind) instead of timing them",
    )  # fmt: skip
    p.add_argument("--keep", action="store_true", help="keep the temporary trees")
    # The writer child's options.
    p.add_argument("--writer", metavar="ENDPOINT", help=argparse.SUPPRESS)
    p.add_argument("--in-flight", type=int, default=PACED_IN_FLIGHT, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.writer:
        print(json.dumps(asyncio.run(writer(args))))
        return 0
    if args.quick and args.full:
        p.error("--quick and --full together")
    sizes = Sizes.of(args)
    if sizes.rounds < 1 or sizes.configmaps % sizes.namespaces:
        p.error("--rounds must be >= 1 and --configmaps a multiple of --namespaces")
    unknown = set(args.only.split(",") if args.only else ()) - set(MEASUREMENTS)
    if unknown:
        p.error(f"--only: unknown {', '.join(sorted(unknown))}")
    change = args.change or (DEFAULT_CHANGE if args.base == DEFAULT_BASE else args.base)
    if args.callgrind and not shutil.which("callgrind_control"):
        p.error("--callgrind needs valgrind (callgrind_control) on PATH")
    report = Report(
        "ab-apiserver-callgrind" if args.callgrind else "ab-apiserver",
        f"A/B: the apiserver's {'instructions per request' if args.callgrind else 'LIST and WATCH'}"
        f" before and after {change}",
        "full" if args.full else "quick",
    )
    extra = ["--resources", args.resources] if args.resources else []
    core = installed_core()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {}
    with workspace("ab", keep=args.keep) as folder:
        trees = (
            prepare("baseline", args.base, folder / "baseline", args.allow_engine_diff),
            prepare("contender", args.contender, folder / "contender", args.allow_engine_diff),
        )
        for tree in trees:
            print(f"{tree.label}: {tree.python}", flush=True)
        starts = asyncio.run(
            run(trees, core=core, sizes=sizes, extra=extra, profile=args.profile, info=info)
        )
    rows = summarize(starts, sizes)
    end_load = [round(x, 2) for x in os.getloadavg()]
    if sizes.callgrind:
        how = (
            f"Each server under `valgrind --tool=callgrind`, counting its instructions (every "
            f"thread) from just before a batch of requests to just after: per start "
            f"{sizes.walks} walk(s), {sizes.requests} of each LIST, {sizes.gets} GETs, and "
            f"{sizes.writes} writes at {sizes.rate:.0f}/s to {sizes.watchers} watch "
            "connections (per write: decoding the event, matching selectors, writing to "
            "the connections that match). Counts do not depend on the machine's load and "
            f"repeat to ~1 %: ratios within +-{NOISE_INSTRUCTIONS:.0%} are noise here. "
            "They leave out what instructions do not show (cache misses, waiting)."
        )
    else:
        how = (
            f"Per start {sizes.walks} walks, {sizes.requests} of each LIST, {sizes.gets} "
            f"GETs, {sizes.watchers} watch connections through {sizes.writes:,} paced and "
            f"{sizes.writes:,} burst writes. Value: the median of every sample of a side "
            "(burst rate, start and RSS: of the starts; CPU: total / requests). On this "
            f'shared 2-core machine ratios within +-{NOISE:.0%} are noise; "slower" needs '
            "the ratio beyond that in every round."
        )
    report.how = (
        f"Baseline: {trees[0].description}; contender: {trees[1].description}; both on the "
        f"installed engine. etcd {info.get('etcd_version', '?')}; {sizes.configmaps:,} "
        f"configmaps of ~1 KB and {sizes.pods:,} pods of ~2 KB over {sizes.namespaces} "
        f"namespaces; {sizes.rounds} rounds, each starting one server per side (order "
        f"swapped every round), same flags (`watchcache serve --etcd ... --log-level warning"
        f"{' --resources ' + args.resources if args.resources else ''}`). {how} Ratio: "
        "contender / baseline, over all rounds and per round. Load average at the end: "
        f"{end_load[0]}. The script's docstring has the method; `make bench-ab BASE=<rev>` "
        "runs it."
    )
    report.tables += [table(rows, trees), checks_table(starts)]
    report.data = {
        "sizes": asdict(sizes),
        "etcd_version": info.get("etcd_version"),
        "trees": [asdict(t) | {"python": None} for t in trees],
        "noise": NOISE_INSTRUCTIONS if sizes.callgrind else NOISE,
        "load_average_end": end_load,
        "rows": [asdict(r) for r in rows],
        "starts": [
            asdict(s) | {"watch": {k: asdict(w) | {"delays": None} for k, w in s.watch.items()}}
            for s in starts
        ],
    }
    report.publish_as_asked(args, plot=plot(rows))
    lost = sum(w.lost for s in starts for w in s.watch.values())
    return 1 if lost else 0


if __name__ == "__main__":
    raise SystemExit(main())
