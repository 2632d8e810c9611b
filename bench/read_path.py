"""A/B of the read path (issue 24, deliverables 4 and 5): GET by name and small LISTs,
consistent and at ``resourceVersion=0``, under 32 connections from a native load generator,
and one client's latency, the Python code of a baseline revision against the working
tree's, with a bare ASGI app on the same uvicorn as the floor, in one run.

What it answers:

* does a consistent read cost one etcd round trip on a quiet cluster, and no more than
  ~1.5 ms over the same read at ``resourceVersion=0`` (one client, p50 of the paired
  differences: each consistent request is followed by the same request at RV=0);
* do consistent reads scale with clients (concurrent reads share the current-revision
  call) — GET by name with 32 connections, consistent and RV=0;
* how close the lean path comes to the floor: a bare ASGI app (one fixed JSON body) on
  the uvicorn configuration ``watchcache serve`` uses (``apiserver.http.uvicorn_config``,
  the guarded protocol, asyncio's event loop, as the default baseline's serve runs),
  measured with the same load in the same round; and the same bare app on uvloop, the loop
  of ``watchcache serve`` now.

Load: ``wrk`` from Debian (``scripts/install-wrk.sh`` unpacks it under .deps/wrk), ``-t2
-c32`` for D seconds per case, one fixed URL per case; its Non-2xx count must be 0. Both
the server and wrk share the machine's 2 cores, as in the issue's measurement: wrk's share
is the same for every case, so ratios compare; absolute rates are this machine's.

Sides, trees and rounds as in bench/ab_apiserver.py (whose helpers this uses): the
baseline is ``git archive <base> python`` (default: the commit before issue 24's read-path
work), the contender a copy of the working tree's python/ (or ``--contender REV``); both
run ``watchcache serve`` (default resources) through bench/tree_python.py on the installed
engine, one server at a time over one etcd, order swapped each round. With ``--uvloop`` a
third side runs the contender on uvloop: what the loop adds to a tree whose ``watchcache
serve`` runs on asyncio's loop (it runs on uvloop by default since ``--loop`` came; the
default baseline predates it).

Data: C configmaps of ~1 KB over C/10 namespaces (10 per namespace: the small LIST is one
namespace) and a quiet cluster: nothing writes while a side is measured, so after the
first consistent read (which waits for one progress notification, the server's own
start-up writes having moved etcd's revision) every consistent read finds the cache at
etcd's revision and costs exactly the current-revision call.

Where the time of a consistent read goes (``phases``, in this process, on the working
tree's code): a SyncedCache of the same configmaps; per consistent LIST of one namespace,
the time of the current-revision call, of the wait for the cache, and of the read, for a
quiet cluster and for one whose revision another prefix moved just before each read (the
cache then waits for a progress notification); and a bare current-revision call's wall
time and this process's CPU time (all threads).

Report: per metric the median over rounds of each side, the ratio contender / baseline
with each round's ratio, and the fraction of the round's floor. Ratios within +-10 % are
noise on this shared machine (bench/README.md). ``--profile DIR`` runs the servers under
cProfile (main thread) and keeps the stats: to find where time goes, not to time.

    python bench/read_path.py [--full] [--base REV] [--contender REV] [--uvloop]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ab_apiserver import (
    BOOT,
    WORKTREE,
    Http,
    Tree,
    TreeServer,
    cpu_ns,
    installed_core,
    prepare,
)
from harness import (
    KeepAliveClient,
    Server,
    etcd,
    etcd_version,
    load_configmaps,
    parser,
    workspace,
)
from reporting import REPO, Headline, Report, figure, markdown
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import free_ports

#: The commit before issue 24's consistent-read and read-path work: the default baseline.
DEFAULT_BASE = "66a060c"
INSTALL_WRK = REPO / "scripts" / "install-wrk.sh"
CONNECTIONS = 32
THREADS = 2
NOISE = 0.10
PER_NAMESPACE = 10
#: The issue's targets, measured on this machine when its floor was 38,336 req/s.
ISSUE_FLOOR = 38_336.0
TARGET_GET_CONSISTENT = 10_000.0
TARGET_GET_RV0 = 12_000.0
TARGET_LIST_OVERHEAD_MS = 1.5
_RATE = re.compile(r"Requests/sec:\s+([\d.]+)")
_REQUESTS = re.compile(r"(\d+) requests in")
_NON_2XX = re.compile(r"Non-2xx or 3xx responses:\s+(\d+)")
_ERRORS = re.compile(r"Socket errors:.*")
_STATUS = re.compile(r"^status (\d+): (\d+)$", re.MULTILINE)


# ---------------------------------------------------------------------------------------
# The cases


@dataclass(frozen=True)
class Case:
    name: str
    label: str
    path: str


def cases(namespaces: int) -> list[Case]:
    ns = f"demo-{namespaces // 2}"
    get = f"/api/v1/namespaces/{ns}/configmaps/configmap-{namespaces // 2:07d}"
    small = f"/api/v1/namespaces/{ns}/configmaps"
    return [
        Case("get", "GET one configmap, consistent", get),
        Case("get-rv0", "GET one configmap, resourceVersion=0", get + "?resourceVersion=0"),
        Case("list", f"LIST one namespace ({PER_NAMESPACE} configmaps), consistent", small),
        Case("list-rv0", "LIST one namespace, resourceVersion=0", small + "?resourceVersion=0"),
    ]


@dataclass
class Load:
    """One wrk run: requests per second and the server's CPU per request."""

    rate: float
    requests: int
    cpu_us: float
    non_2xx: int
    socket_errors: str
    #: The non-2xx answers by status, when the wrk script records them (``status N: M``
    #: lines; see kubelet.py's lua_script): empty otherwise.
    statuses: dict[int, int] = field(default_factory=dict)


@dataclass
class Latency:
    """One client, sequential: each consistent request followed by the same at RV=0."""

    consistent_ms: list[float] = field(default_factory=list)
    rv0_ms: list[float] = field(default_factory=list)

    @property
    def overhead_ms(self) -> list[float]:
        return [c - z for c, z in zip(self.consistent_ms, self.rv0_ms, strict=True)]


@dataclass
class Start:
    side: str
    round: int
    load: dict[str, Load]
    latency: dict[str, Latency]


@dataclass
class Floor:
    round: int
    loop: str
    rate: float
    cpu_us: float


# ---------------------------------------------------------------------------------------
# wrk


def wrk_binary() -> str:
    """wrk, installed under .deps/wrk by scripts/install-wrk.sh when missing."""
    out = subprocess.run([str(INSTALL_WRK)], check=True, capture_output=True, text=True).stdout
    return str(Path(out.strip().splitlines()[-1]) / "wrk")


def run_wrk(
    wrk: str,
    url: str,
    seconds: float,
    pid: int | None = None,
    *,
    script: Path | None = None,
    connections: int = CONNECTIONS,
    threads: int = THREADS,
    timeout: float = 10.0,
) -> Load:
    """wrk on ``url`` for ``seconds``; ``script``: a Lua script of wrk's (e.g. choosing
    each request's path); ``pid``: the server whose CPU per request to measure."""
    before = cpu_ns(pid) if pid else 0
    options = ["-s", str(script)] if script else []
    out = subprocess.run(
        [wrk, f"-t{threads}", f"-c{connections}", f"-d{seconds:g}s", "--timeout",
         f"{timeout:g}s", *options, url],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    used = cpu_ns(pid) - before if pid else 0
    rate, requests = _RATE.search(out), _REQUESTS.search(out)
    if rate is None or requests is None:
        raise RuntimeError(f"wrk printed no rate for {url}:\n{out}")
    count = int(requests.group(1))
    non_2xx = _NON_2XX.search(out)
    errors = _ERRORS.search(out)
    return Load(
        rate=float(rate.group(1)),
        requests=count,
        cpu_us=used / count / 1e3 if count else float("nan"),
        non_2xx=int(non_2xx.group(1)) if non_2xx else 0,
        socket_errors=errors.group(0) if errors else "",
        statuses=_statuses(out),
    )


def _statuses(out: str) -> dict[int, int]:
    """The ``status N: M`` lines a recording wrk script prints, one per thread and status,
    added up."""
    counts: dict[int, int] = {}
    for code, n in _STATUS.findall(out):
        counts[int(code)] = counts.get(int(code), 0) + int(n)
    return counts


# ---------------------------------------------------------------------------------------
# The floor: a bare ASGI app on the uvicorn configuration of `watchcache serve`

_FLOOR_BODY = b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"floor"}}'
ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


def floor_body(size: int = 0) -> bytes:
    """The floor's answer: the small object above, or a JSON object of ``size`` bytes
    (a floor for responses as large as the ones measured beside it)."""
    if size <= len(_FLOOR_BODY):
        return _FLOOR_BODY
    head = b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"floor"},"data":{"x":"'
    return head + b"x" * (size - len(head) - 3) + b'"}}'


def bare_app_of(body: bytes) -> ASGIApp:
    async def bare_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-length", b"%d" % len(body)),
                    (b"content-type", b"application/json"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return bare_app


bare_app = bare_app_of(_FLOOR_BODY)


def serve_floor(port: int, loop: str, body_bytes: int = 0) -> None:
    import uvicorn

    from watchcache.apiserver.http import uvicorn_config

    app = bare_app_of(floor_body(body_bytes))
    config = uvicorn_config(app, host="127.0.0.1", port=port, log_level="warning")
    config.lifespan = "off"
    server = uvicorn.Server(config)
    if loop == "uvloop":
        import uvloop

        uvloop.run(server.serve())
    else:
        asyncio.run(server.serve())


@contextlib.contextmanager
def floor_server(loop: str, body_bytes: int = 0) -> Iterator[tuple[str, int]]:
    port = free_ports(1)[0]
    process = subprocess.Popen(
        [sys.executable, __file__, "floor", "--port", str(port), "--loop", loop,
         "--body-bytes", str(body_bytes)],
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/api/v1/namespaces/demo/configmaps/floor", process.pid
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def measure_floors(wrk: str, round_index: int, seconds: float) -> list[Floor]:
    floors = []
    for loop in ("asyncio", "uvloop"):
        with floor_server(loop) as (url, pid):
            run_wrk(wrk, url, 1)
            load = run_wrk(wrk, url, seconds, pid)
            floors.append(Floor(round_index, loop, load.rate, load.cpu_us))
    print(
        f"  round {round_index} floor: "
        + ", ".join(f"{f.loop} {f.rate:,.0f}/s ({f.cpu_us:.0f} µs CPU)" for f in floors),
        flush=True,
    )
    return floors


# ---------------------------------------------------------------------------------------
# A server side


#: Runs its first argument as a script with uvloop's event loop policy installed, without
#: importing watchcache (tree_python.py must be first to import it).
_UVLOOP_BOOT = (
    "import runpy, sys, uvloop; uvloop.install(); sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


class UvloopTreeServer(TreeServer):
    """TreeServer with the event loop policy set to uvloop before ``watchcache serve``."""

    def __init__(self, endpoints: list[str], tree: Tree, core: str) -> None:
        super().__init__(endpoints, tree, core, [])
        boot = self.command.index(str(BOOT))
        self.command[boot:boot] = ["-c", _UVLOOP_BOOT]


async def measure_start(  # noqa: PLR0917
    server: Server, wrk: str, side: str, round_index: int, namespaces: int, args: argparse.Namespace
) -> Start:
    http = KeepAliveClient(server.port)
    chosen = cases(namespaces)
    # Warm-up, unmeasured: imports, the first consistent read's progress wait, caches.
    for case in chosen:
        for _ in range(20):
            await http.get(case.path)
    latency: dict[str, Latency] = {}
    for kind in ("get", "list"):
        consistent = next(c for c in chosen if c.name == kind)
        rv0 = next(c for c in chosen if c.name == f"{kind}-rv0")
        result = latency[kind] = Latency()
        for _ in range(args.latency_requests):
            t = time.perf_counter()
            await http.get(consistent.path)
            result.consistent_ms.append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            await http.get(rv0.path)
            result.rv0_ms.append((time.perf_counter() - t) * 1e3)
    await http.close()
    load: dict[str, Load] = {}
    for case in chosen:
        run_wrk(wrk, server.url + case.path, 1)
        load[case.name] = run_wrk(wrk, server.url + case.path, args.seconds, server.pid)
        if load[case.name].non_2xx:
            raise RuntimeError(f"{side}: {case.path} answered {load[case.name].non_2xx} non-2xx")
    line = ", ".join(f"{n} {x.rate:,.0f}/s ({x.cpu_us:.0f} µs CPU)" for n, x in load.items())
    over = {k: statistics.median(v.overhead_ms) for k, v in latency.items()}
    print(
        f"  round {round_index} {side:9s}: {line}; consistent - RV=0, one client: "
        + ", ".join(f"{k} {v:.2f} ms" for k, v in over.items()),
        flush=True,
    )
    return Start(side, round_index, load, latency)


# ---------------------------------------------------------------------------------------
# Phases of a consistent read, in this process


@dataclass
class Phases:
    state: str
    revision_ms: list[float] = field(default_factory=list)
    wait_ms: list[float] = field(default_factory=list)
    read_ms: list[float] = field(default_factory=list)
    total_ms: list[float] = field(default_factory=list)
    rv0_ms: list[float] = field(default_factory=list)


async def measure_phases(endpoints: list[str], namespaces: int, count: int) -> dict[str, Any]:
    from watchcache.registry.resources import CONFIGMAPS
    from watchcache.sync.synced import SyncedCache
    from watchcache.wire.options import ListOptions

    out: dict[str, Any] = {}
    async with EtcdClient(endpoints) as client:
        synced = SyncedCache(client, CONFIGMAPS.prefix, resource="configmaps", kind="ConfigMap")
        await synced.start()
        try:
            cache, store = synced.cache, synced.store
            prefix = CONFIGMAPS.collection_prefix(f"demo-{namespaces // 2}")
            rv0 = ListOptions(resource_version="0")
            for state in ("quiet", "lagging"):
                phases = Phases(state)
                for i in range(count + 10):
                    if state == "lagging":
                        await client.put(b"/registry/leases/bench/tick", b"%d" % i)
                    t0 = time.perf_counter()
                    revision = await store.current_resource_version()
                    t1 = time.perf_counter()
                    await cache.wait_for_rv(revision)
                    t2 = time.perf_counter()
                    await cache.list(rv0, prefix=prefix)
                    t3 = time.perf_counter()
                    if i >= 10:
                        phases.revision_ms.append((t1 - t0) * 1e3)
                        phases.wait_ms.append((t2 - t1) * 1e3)
                        phases.read_ms.append((t3 - t2) * 1e3)
                        phases.total_ms.append((t3 - t0) * 1e3)
                out[state] = asdict(phases)
            walls, cpu0 = [], time.process_time()
            for _ in range(count):
                t = time.perf_counter()
                await client.current_revision(b"/registry")
                walls.append((time.perf_counter() - t) * 1e3)
            out["call"] = {
                "wall_ms": walls,
                "cpu_us": (time.process_time() - cpu0) / count * 1e6,
            }
        finally:
            await synced.stop()
    return out


# ---------------------------------------------------------------------------------------
# The run


async def run(
    trees: list[Tree], *, core: str, wrk: str, args: argparse.Namespace, info: dict[str, Any]
) -> tuple[list[Start], list[Floor]]:
    starts: list[Start] = []
    floors: list[Floor] = []
    namespaces = args.configmaps // PER_NAMESPACE
    with etcd() as cluster:
        info["etcd_version"] = etcd_version(cluster)
        async with EtcdClient(cluster.endpoints, timeout=300) as client:
            t = time.perf_counter()
            await load_configmaps(client, args.configmaps, 1024, namespaces=namespaces)
            print(f"loaded {args.configmaps:,} configmaps in {time.perf_counter() - t:.1f} s")
        info["phases"] = await measure_phases(cluster.endpoints, namespaces, args.phase_requests)
        for r in range(args.rounds):
            floors += measure_floors(wrk, r, args.seconds)
            order = trees if r % 2 == 0 else trees[::-1]
            for tree in order:
                profile = args.profile / f"{tree.side}-round{r}.prof" if args.profile else None
                server: Server
                if tree.side == "uvloop":
                    server = UvloopTreeServer(cluster.endpoints, tree, core)
                else:
                    server = TreeServer(cluster.endpoints, tree, core, [], profile=profile)
                async with server:
                    starts.append(await measure_start(server, wrk, tree.side, r, namespaces, args))
    return starts, floors


# ---------------------------------------------------------------------------------------
# --callgrind: instructions per request


def callgrind_control(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def callgrind_total(pid: int, out: Path) -> int:
    """The instructions counted since the last zeroing, from a dump this asks for (the
    dump is removed after)."""
    before = set(out.parent.glob(out.name + "*"))
    callgrind_control(pid, "--dump")
    dumps = sorted(set(out.parent.glob(out.name + "*")) - before, key=lambda f: f.stat().st_mtime)
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


async def instructions_per_request(
    port: int, pid: int, out: Path, path: str, count: int, *, connections: int = 1
) -> float:
    """Warm up, zero the counters, send ``count`` GETs of ``path`` over ``connections``
    keep-alive connections (each sending its share one after the other), dump."""
    clients = [Http(port) for _ in range(connections)]
    for client in clients:
        for _ in range(5):
            await client.get(path)
    callgrind_control(pid, "--instr=on")
    callgrind_control(pid, "--zero")

    async def share(client: Http) -> None:
        for _ in range(count // connections):
            await client.get(path)

    await asyncio.gather(*(share(c) for c in clients))
    total = callgrind_total(pid, out)
    for client in clients:
        await client.close()
    return total / (count // connections * connections)


#: (case, connections): the four cases one request at a time, and the consistent GET with
#: 32 connections at once (how much of the current-revision call each read still pays).
CALLGRIND_CASES = (("get", 1), ("get-rv0", 1), ("list", 1), ("list-rv0", 1), ("get", 32))


def callgrind_label(name: str, connections: int) -> str:
    label = next(c.label for c in cases(PER_NAMESPACE * 2) if c.name == name)
    return f"{label}, {connections} connection{'s' if connections > 1 else ''}"


@contextlib.contextmanager
def floor_under_callgrind(folder: Path) -> Iterator[tuple[int, int, Path]]:
    port = free_ports(1)[0]
    out = folder / "floor.callgrind"
    process = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
         sys.executable, __file__, "floor", "--port", str(port)],
        stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            time.sleep(0.2)
        yield port, process.pid, out
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def run_callgrind(
    trees: list[Tree], *, core: str, folder: Path, args: argparse.Namespace,
    info: dict[str, Any],
) -> dict[str, dict[str, list[float]]]:  # fmt: skip
    """Instructions per request by side ("floor" too) and case, one value per round."""
    counts: dict[str, dict[str, list[float]]] = {"floor": {"floor": []}}
    namespaces = args.configmaps // PER_NAMESPACE
    paths = {c.name: c.path for c in cases(namespaces)}
    with etcd() as cluster:
        info["etcd_version"] = etcd_version(cluster)
        async with EtcdClient(cluster.endpoints, timeout=300) as client:
            await load_configmaps(client, args.configmaps, 1024, namespaces=namespaces)
        for r in range(args.rounds):
            with floor_under_callgrind(folder) as (port, pid, out):
                per = await instructions_per_request(port, pid, out, "/floor", args.requests)
                counts["floor"]["floor"].append(per)
            line = [f"floor {per / 1e6:.3f} M"]
            for tree in trees if r % 2 == 0 else trees[::-1]:
                out = folder / f"{tree.side}.callgrind"
                async with TreeServer(cluster.endpoints, tree, core, [], callgrind=out) as server:
                    for name, connections in CALLGRIND_CASES:
                        per = await instructions_per_request(
                            server.port, server.pid, out, paths[name], args.requests,
                            connections=connections,
                        )  # fmt: skip
                        key = f"{name}@{connections}"
                        counts.setdefault(tree.side, {}).setdefault(key, []).append(per)
                        line.append(f"{tree.side} {key} {per / 1e6:.3f} M")
            print(f"  round {r}: " + ", ".join(line), flush=True)
    return counts


def callgrind_table(counts: dict[str, dict[str, list[float]]], trees: list[Tree]) -> str:
    floor = statistics.median(counts["floor"]["floor"])
    header = ["request (one at a time unless said)", *(f"{t.side} ({t.commit[:7]})" for t in trees),
              "ratio", "per round", "contender / floor"]  # fmt: skip
    rows = [["bare ASGI app (the floor)", *(f"{floor / 1e6:.3f} M" for _ in trees), "", "", "1.00"]]
    for name, connections in CALLGRIND_CASES:
        key = f"{name}@{connections}"
        base, cont = counts["baseline"][key], counts["contender"][key]
        ratios = [c / b for b, c in zip(base, cont, strict=True)]
        values = [statistics.median(counts[t.side][key]) for t in trees]
        rows.append([
            callgrind_label(name, connections), *(f"{v / 1e6:.3f} M" for v in values),
            f"{statistics.median(cont) / statistics.median(base):.2f}",
            " ".join(f"{x:.2f}" for x in ratios), f"{statistics.median(cont) / floor:.2f}",
        ])  # fmt: skip
    return markdown(header, rows, "l" + "r" * (len(trees) + 1) + "lr")


# ---------------------------------------------------------------------------------------
# Summary


@dataclass
class Row:
    label: str
    unit: str
    values: dict[str, float]
    round_ratios: list[float]
    higher_is_better: bool
    #: Per side, how this compares with the floor ("63% of floor", "4.1x floor").
    floor_note: dict[str, str] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.values["contender"] / self.values["baseline"]


def per_side(starts: list[Start], side: str) -> list[Start]:
    return [s for s in starts if s.side == side]


def rows_of(starts: list[Start], floors: list[Floor], sides: list[str]) -> list[Row]:
    rounds = sorted({s.round for s in starts})
    floor = statistics.median(f.rate for f in floors if f.loop == "asyncio")
    floor_cpu = statistics.median(f.cpu_us for f in floors if f.loop == "asyncio")
    rows: list[Row] = []

    def add(
        label: str, unit: str, value: Callable[[list[Start]], float], higher: bool, share: bool
    ) -> None:
        values = {side: value(per_side(starts, side)) for side in sides}
        ratios = []
        for r in rounds:
            b = [s for s in starts if s.side == "baseline" and s.round == r]
            c = [s for s in starts if s.side == "contender" and s.round == r]
            ratios.append(value(c) / value(b))
        row = Row(label, unit, values, ratios, higher)
        if share and unit == "/s":
            row.floor_note = {side: f"{v / floor:.0%} of floor" for side, v in values.items()}
        elif share:
            row.floor_note = {side: f"{v / floor_cpu:.1f}x floor" for side, v in values.items()}
        rows.append(row)

    for case in cases(PER_NAMESPACE * 2):

        def rate(ss: list[Start], name: str = case.name) -> float:
            return statistics.median(s.load[name].rate for s in ss)

        def cpu(ss: list[Start], name: str = case.name) -> float:
            return statistics.median(s.load[name].cpu_us for s in ss)

        add(f"{case.label}, {CONNECTIONS} connections", "/s", rate, True, True)
        add("  server CPU per request", "µs", cpu, False, True)
    for kind, label in (("get", "GET by name"), ("list", "LIST of one namespace")):

        def q(p: float, attr: str, kind: str = kind) -> Callable[[list[Start]], float]:
            def value(ss: list[Start]) -> float:
                xs: list[float] = sorted(x for s in ss for x in getattr(s.latency[kind], attr))
                return xs[min(len(xs) - 1, int(p * len(xs)))]

            return value

        add(f"{label}, one client: consistent p50", "ms", q(0.5, "consistent_ms"), False, False)
        add("  consistent p99", "ms", q(0.99, "consistent_ms"), False, False)
        add("  resourceVersion=0 p50", "ms", q(0.5, "rv0_ms"), False, False)
        add("  consistent - RV=0, paired, p50", "ms", q(0.5, "overhead_ms"), False, False)
    return rows


def fmt(value: float, unit: str) -> str:
    if unit == "/s":
        return f"{value:,.0f}/s"
    digits = 2 if value < 10 else 1 if value < 100 else 0
    return f"{value:,.{digits}f} {unit}"


def verdict(row: Row) -> str:
    def worse(r: float) -> bool:
        return r < 1 - NOISE if row.higher_is_better else r > 1 + NOISE

    def better(r: float) -> bool:
        return r > 1 + NOISE if row.higher_is_better else r < 1 - NOISE

    every_round = "" if all(worse(r) for r in row.round_ratios) else "? (not every round)"
    if worse(row.ratio):
        return "**slower**" if not every_round else "slower" + every_round
    every_round = "" if all(better(r) for r in row.round_ratios) else "? (not every round)"
    if better(row.ratio):
        return "faster" + every_round
    return "noise"


def table(rows: list[Row], trees: list[Tree]) -> str:
    header = ["metric", *(f"{t.side} ({t.commit[:7]})" for t in trees), "ratio", "per round",
              "reading"]  # fmt: skip
    body = []
    for r in rows:
        cells = []
        for t in trees:
            cell = fmt(r.values[t.side], r.unit)
            if r.floor_note:
                cell += f" ({r.floor_note[t.side]})"
            cells.append(cell)
        body.append([r.label.replace("  ", "&nbsp;&nbsp;"), *cells, f"{r.ratio:.2f}",
                     " ".join(f"{x:.2f}" for x in r.round_ratios), verdict(r)])  # fmt: skip
    return markdown(header, body, "l" + "r" * (len(trees) + 1) + "ll")


def floor_table(floors: list[Floor]) -> str:
    rows = []
    for loop in ("asyncio", "uvloop"):
        rates = [f.rate for f in floors if f.loop == loop]
        cpu = statistics.median(f.cpu_us for f in floors if f.loop == loop)
        rows.append([f"bare ASGI app, uvicorn on {loop}", f"{statistics.median(rates):,.0f}/s",
                     f"{cpu:.0f} µs", " ".join(f"{x:,.0f}" for x in rates)])  # fmt: skip
    header = ["floor (same wrk load)", "median", "server CPU per request", "per round"]
    return markdown(header, rows, "lrrl")


def target_table(rows: list[Row], floors: list[Floor]) -> str:
    """The issue's targets next to this run: absolute, and scaled to this run's floor (the
    targets were set when the floor measured 38,336/s; the machine is shared)."""
    floor = statistics.median(f.rate for f in floors if f.loop == "asyncio")
    scale = floor / ISSUE_FLOOR
    by_label = {r.label: r for r in rows}
    get_c = by_label[f"GET one configmap, consistent, {CONNECTIONS} connections"]
    get_0 = by_label[f"GET one configmap, resourceVersion=0, {CONNECTIONS} connections"]
    over = [r for r in rows if r.label.strip().startswith("consistent - RV=0")][1]
    body = [
        ["GET by name, consistent, 32 connections", f"≥ {TARGET_GET_CONSISTENT:,.0f}/s",
         f"≥ {TARGET_GET_CONSISTENT * scale:,.0f}/s", fmt(get_c.values["contender"], "/s")],
        ["GET by name, RV=0, 32 connections", f"≥ {TARGET_GET_RV0:,.0f}/s",
         f"≥ {TARGET_GET_RV0 * scale:,.0f}/s", fmt(get_0.values["contender"], "/s")],
        ["consistent LIST over RV=0 LIST, quiet cluster, p50", f"≤ {TARGET_LIST_OVERHEAD_MS} ms",
         f"≤ {TARGET_LIST_OVERHEAD_MS} ms", fmt(over.values["contender"], "ms")],
    ]  # fmt: skip
    return markdown(["target (issue 24)", "absolute", f"scaled to this floor (x{scale:.2f})",
                     "contender"], body, "lrrr")  # fmt: skip


def phase_table(phases: dict[str, Any]) -> str:
    def p(xs: list[float], q: float) -> str:
        ordered = sorted(xs)
        return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))]:.2f}"

    rows = []
    for state in ("quiet", "lagging"):
        d = phases[state]
        phase_keys = ("revision_ms", "wait_ms", "read_ms", "total_ms")
        rows.append([state, *(f"{p(d[k], 0.5)} / {p(d[k], 0.99)}" for k in phase_keys)])
    call = phases["call"]
    wall = f"{p(call['wall_ms'], 0.5)} / {p(call['wall_ms'], 0.99)}"
    cpu = f"CPU {call['cpu_us']:.0f} µs/call"
    rows.append(["a bare current-revision call", wall, "", "", cpu])
    header = ["consistent LIST of one namespace, in process (ms, p50 / p99)",
              "current revision", "wait for the cache", "read", "total"]  # fmt: skip
    return markdown(header, rows, "lrrrr")


def plot(rows: list[Row]) -> Callable[[Path], None]:
    def draw(path: Path) -> None:
        shown = [r for r in rows if not r.label.startswith("  ")]
        with figure(path, title="Read path A/B: contender / baseline (band: +-10 % noise)",
                    size=(10, 0.5 * len(shown) + 1.5)) as (ax,):  # fmt: skip
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


def main_callgrind(args: argparse.Namespace) -> int:
    core = installed_core()
    report = Report(
        "read-path-callgrind",
        "Read path A/B: server instructions per request (issue 24)",
        "full" if args.full else "quick",
    )
    info: dict[str, Any] = {}
    with workspace("read-path") as folder:
        trees = [
            prepare("baseline", args.base, folder / "baseline", True),
            prepare("contender", args.contender, folder / "contender", True),
        ]
        counts = asyncio.run(run_callgrind(trees, core=core, folder=folder, args=args, info=info))
    report.how = (
        f"Baseline: {trees[0].description}; contender: {trees[1].description}; both on the "
        f"installed engine. etcd {info.get('etcd_version', '?')}; {args.configmaps:,} "
        f"configmaps of ~1 KB, {PER_NAMESPACE} per namespace; `watchcache serve` with its "
        "default resources, under `valgrind --tool=callgrind`, instrumentation off until "
        f"the warm-up is done; per case {args.requests} GETs over keep-alive connections, "
        "counting every thread of the server (the etcd client's gRPC threads too); the "
        "floor is the bare ASGI app on the same uvicorn configuration under callgrind. "
        f"{args.rounds} rounds, order swapped each round. Counts repeat to about 1 % "
        "whatever the machine does, and leave out cache misses and waiting."
    )
    report.tables.append(callgrind_table(counts, trees))
    report.data = {
        "trees": [asdict(t) | {"python": None} for t in trees],
        "configmaps": args.configmaps,
        "requests": args.requests,
        "etcd_version": info.get("etcd_version"),
        "instructions": counts,
    }
    report.publish_as_asked(args)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["floor"]:
        sub = argparse.ArgumentParser()
        sub.add_argument("--port", type=int, required=True)
        sub.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
        sub.add_argument("--body-bytes", type=int, default=0, help="size of the answer")
        floor_args = sub.parse_args(argv[1:])
        with contextlib.suppress(KeyboardInterrupt):
            serve_floor(floor_args.port, floor_args.loop, floor_args.body_bytes)
        return 0
    p = parser(__doc__)
    p.add_argument("--base", default=DEFAULT_BASE, help=f"baseline revision ({DEFAULT_BASE})")
    p.add_argument("--contender", default=WORKTREE, help="a revision, or WORKTREE (default)")
    p.add_argument("--rounds", type=int, help="rounds (quick 2, full 4)")
    p.add_argument("--seconds", type=float, help="wrk seconds per case (quick 4, full 8)")
    p.add_argument("--configmaps", type=int, default=10_000, help="multiple of 10")
    p.add_argument("--latency-requests", type=int, help="one-client pairs (quick 200, full 500)")
    p.add_argument("--phase-requests", type=int, default=300)
    p.add_argument("--uvloop", action="store_true", help="a third side: the contender on uvloop")
    p.add_argument("--profile", type=Path, help="cProfile the servers into this folder")
    p.add_argument(
        "--callgrind", action="store_true",
        help="count the servers' instructions per request (valgrind) instead of timing them",
    )  # fmt: skip
    p.add_argument("--requests", type=int, default=192, help="--callgrind: requests per case")
    args = p.parse_args(argv)
    args.rounds = args.rounds or (4 if args.full else 2)
    args.seconds = args.seconds or (8.0 if args.full else 4.0)
    args.latency_requests = args.latency_requests or (500 if args.full else 200)
    if args.configmaps % PER_NAMESPACE or args.configmaps < 2 * PER_NAMESPACE:
        p.error(f"--configmaps must be a multiple of {PER_NAMESPACE}, at least 20")
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    if args.callgrind:
        if not shutil.which("callgrind_control"):
            p.error("--callgrind needs valgrind (callgrind_control) on PATH")
        return main_callgrind(args)
    wrk = wrk_binary()
    core = installed_core()
    report = Report(
        "read-path",
        "Read path A/B: shared consistent reads and the lean GET/LIST path (issue 24)",
        "full" if args.full else "quick",
    )
    info: dict[str, Any] = {}
    with workspace("read-path") as folder:
        # Both sides run on the installed engine; the read path does not depend on engine
        # changes made since the baseline (others' work may be in flight there).
        trees = [
            prepare("baseline", args.base, folder / "baseline", True),
            prepare("contender", args.contender, folder / "contender", True),
        ]
        if args.uvloop:
            trees.append(Tree("uvloop", trees[1].spec, trees[1].commit, trees[1].python,
                              " on uvloop"))  # fmt: skip
        for tree in trees:
            print(f"{tree.label}: {tree.python}", flush=True)
        starts, floors = asyncio.run(run(trees, core=core, wrk=wrk, args=args, info=info))
    sides = [t.side for t in trees]
    rows = rows_of(starts, floors, sides)
    end_load = [round(x, 2) for x in os.getloadavg()]
    report.how = (
        f"Baseline: {trees[0].description}; contender: {trees[1].description}"
        f"{'; uvloop: the contender on uvloop' if args.uvloop else ''}; all on the installed "
        f"engine. etcd {info.get('etcd_version', '?')}; {args.configmaps:,} configmaps of ~1 KB, "
        f"{PER_NAMESPACE} per namespace; `watchcache serve` with its default resources; "
        f"{args.rounds} rounds, order swapped each round. Load: wrk -t{THREADS} "
        f"-c{CONNECTIONS}, {args.seconds:g} s per case after 1 s of warm-up; one client: "
        f"{args.latency_requests} pairs (consistent, then RV=0) per start. Values: the median "
        "of the rounds (one-client percentiles: of every sample); CPU: the server's, all "
        f"threads. Ratio: contender / baseline; within +-{NOISE:.0%} is noise here. Load "
        f"average at the end: {end_load[0]}. The method is the script's docstring."
    )
    report.tables += [
        table(rows, trees),
        floor_table(floors),
        target_table(rows, floors),
        phase_table(info["phases"]),
    ]
    by_label = {r.label: r for r in rows}
    get_c = by_label[f"GET one configmap, consistent, {CONNECTIONS} connections"]
    get_0 = by_label[f"GET one configmap, resourceVersion=0, {CONNECTIONS} connections"]
    report.headline = [
        Headline("read-path", "GET by name, 32 connections: consistent / RV=0",
                 f"{get_c.values['contender']:,.0f}/s / {get_0.values['contender']:,.0f}/s",
                 note=f"baseline {get_c.values['baseline']:,.0f}/s / "
                 f"{get_0.values['baseline']:,.0f}/s"),
    ]  # fmt: skip
    report.data = {
        "trees": [asdict(t) | {"python": None} for t in trees],
        "configmaps": args.configmaps,
        "etcd_version": info.get("etcd_version"),
        "load_average_end": end_load,
        "rows": [asdict(r) for r in rows],
        "floors": [asdict(f) for f in floors],
        "starts": [asdict(s) for s in starts],
        "phases": info["phases"],
    }
    report.publish_as_asked(args, plot=plot(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
