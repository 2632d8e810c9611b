"""The kubelet scenario (issue 24, deliverable 6): every node's kubelet LISTs and WATCHes
the pods bound to it (``fieldSelector=spec.nodeName=<node>``). At 150,000 pods over 5,000
nodes, what does one such LIST cost over HTTP, how many can the apiserver serve, and what
does a pod update cost 5,000 node watchers?

What it answers:

* LIST of one node's pods over HTTP, at ``resourceVersion=0`` and consistent (no
  resourceVersion): one client's p50/p99, and LISTs per second under 32 connections from a
  native load generator, served from the indexed watch cache (``watchcache serve`` as it
  is), from the same cache without its LIST indexes (``--no-list-indexes``: every LIST scans
  every pod with the selector) and from etcd (``--uncached-resources pods``, as
  kube-apiserver serves pods with ``--watch-cache-sizes pods#0``: every LIST reads and
  decodes every pod), beside a bare ASGI app on the same uvicorn configuration and event
  loop (uvloop: the floor);
* whether the answers are right: the first, last and middle nodes' LISTs (from etcd, the
  first node's), both kinds, return exactly that node's pods;
* what 5,000 node watchers cost at 100 pod updates/s: dispatch per event, delivery p99,
  nothing lost (bench/watch_dispatch.py's indexed variant at its sizes, in this process).

Data, written once into one etcd 3.5 (free loopback ports, a temporary folder) that serves
every case: P pods of ~1 KB (a container with resources and a port, labels, an owner
reference, a running status with conditions) named ``pod-<i>``, pod i on ``node-<i mod N>``
(P/N = 30 pods per node), each in one of 100 namespaces ``ns-<k>`` (seeded), stored as the
apiserver stores them (JSON, transactions of 128 puts, 8 in flight, as ``watchcache load``
writes), and the 100 namespaces. Quick: 15,000 pods over 500 nodes; ``--full``: 150,000
over 5,000 (KEP-2340's cluster).

Cases, one server at a time over that etcd, each a fresh ``watchcache serve --resources
pods,namespaces --no-enable-garbage-collector`` child (collecting garbage is
kube-controller-manager's work, not kube-apiserver's, and nothing here deletes) plus the
case's flag, measured once its initial list is done (/readyz). Every server runs a copy
of the working tree's python/ taken when the run starts (``--tree REV``: a revision's), on
the installed engine, through bench/tree_python.py as read_path.py's sides do, so that
edits made meanwhile do not change what later cases run:

  indexed    the default: the pod cache indexes ``spec.nodeName``;
  no index   ``--no-list-indexes`` (skipped, with a note, while ``serve`` lacks the flag);
  etcd       ``--uncached-resources pods``: clients' reads go to etcd; the server still
             keeps its pod cache for its own controllers (docs/etcd.md §6.2), so its
             start and memory are those of the cached cases;
  floor      read_path.py's bare ASGI app, answering a body as large as one node's LIST,
             under the same wrk load (same script: it ignores the path).

Per server: a warm-up (unmeasured); the check; one client over one keep-alive connection
(harness.KeepAliveClient) sending R pairs, each a consistent LIST of a random node followed
by the same node's LIST at RV=0, so the difference is paired (the cluster is quiet: nothing
writes, so a consistent read costs the read plus one current-revision call); then wrk
(Debian's, scripts/install-wrk.sh) ``-t2 -c32`` for D seconds per kind of LIST after 1 s of
warm-up, with a Lua script choosing a random node for every request (seeded per wrk
thread; not a fixed URL, so the cache's hot paths see all nodes as the kubelets would);
its Non-2xx count must be 0. The server's CPU per LIST counts all its threads. From etcd a
LIST reads and decodes every pod, seconds at full size: 32 connections would queue minutes
of work and hold 32 copies of the prefix in memory, so that case runs wrk with 2
connections (enough to keep the server's one event loop busy), for longer, with a timeout
of 10 minutes, and fewer pairs. After every wrk run the bench waits for the server's CPU to
go idle, so that requests wrk abandons at its deadline do not run into the next measurement.

Targets (issue 24), shown met / missed beside the measurements, never asserted: LIST by
node at RV=0 p50 <= 1 ms, p99 <= 5 ms, >= 3,000 LIST/s with 32 connections; consistent
>= 2,000 LIST/s, and <= 1.5 ms above the same LIST at RV=0 on a quiet cluster (p50 of the
paired differences); watchers: dispatch <= 50 µs per event (paced mean), delivery p99 <=
50 ms, nothing lost; the index: at most 48 B of memory per indexed pod, and writes with it
at most 1.3x WatchCache.apply's cost without it (same-run ratio; status updates and pod
lifecycles, from bench/index_apply_cost.py, whose docstring has the method, run here at this
scenario's size after the servers have gone). Issue 24's rate targets date from a floor of
38,336/s on this machine (read_path.py's ISSUE_FLOOR), several times this shared machine's
floor nowadays: the table also shows them scaled to this run's floor.

Report: bench/results/kubelet.json (every sample), kubelet.png, this scenario's section of
bench/README.md, and its lines of the summary (``run_all.py``). Exit status 1 when a check
failed or wrk got a non-2xx answer.

    python bench/kubelet.py [--full] [--seconds D] [--pairs R] [--etcd-pairs R] [--tree REV]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ab_apiserver import BOOT, WORKTREE, Tree, TreeServer, cpu_ns, installed_core, prepare
from harness import KeepAliveClient, etcd, etcd_version, parser, percentile, rss, workspace
from index_apply_cost import LIFECYCLE, MODES, IndexWriteCost
from index_apply_cost import measure as measure_index_writes
from read_path import ISSUE_FLOOR, Latency, Load, floor_server, run_wrk, wrk_binary
from reporting import Headline, Report, Target, figure, fmt_ms, markdown
from watch_dispatch import RATE as WATCH_RATE
from watch_dispatch import (
    TARGET_DELIVERY_P99_MS,
    TARGET_DISPATCH_US,
    VariantResult,
    run_variant,
    sizes,
    wake_penalty,
    workload,
)
from watch_dispatch import report as watch_table
from watchcache.etcd.client import MAX_TXN_OPS, EtcdClient
from watchcache.etcd.proto import rpc_pb2
from watchcache.registry.resources import NAMESPACES, PODS
from watchcache.registry.system_namespaces import namespace_object

PODS_PER_NODE = 30
NAMESPACE_COUNT = 100
CONNECTIONS = 32
#: From etcd: enough connections for wrk's two threads to keep the server busy.
ETCD_CONNECTIONS = 2
ETCD_TIMEOUT_SECONDS = 600.0
SEED = 24
TARGET_P50_MS = 1.0
TARGET_P99_MS = 5.0
TARGET_RV0_RATE = 3_000.0
TARGET_CONSISTENT_RATE = 2_000.0
TARGET_OVERHEAD_MS = 1.5
TARGET_INDEX_BYTES = 48.0  # resident bytes per indexed pod
TARGET_WRITE_RATIO = 1.3  # WatchCache.apply with the index over without, same run
SERVE_FLAGS = ("--resources", "pods,namespaces", "--no-enable-garbage-collector")
NO_INDEX_FLAG = "--no-list-indexes"
KINDS = ("rv0", "consistent")
#: Events applied back to back after the paced ones: watch_dispatch.py's default.
WATCH_BURST = 2_000


# ---------------------------------------------------------------------------------------
# Sizes and cases


@dataclass(frozen=True)
class Sizes:
    pods: int
    nodes: int
    pairs: int  # one-client pairs per cached case
    etcd_pairs: int
    seconds: float  # wrk seconds per kind of LIST
    etcd_seconds: float
    watch_pods: int  # watch_dispatch.py's sizes
    watch_seconds: float

    @staticmethod
    def of(args: argparse.Namespace) -> Sizes:
        nodes = args.nodes or (5_000 if args.full else 500)
        watch_pods, watch_seconds = sizes(args.full)
        return Sizes(
            pods=nodes * PODS_PER_NODE,
            nodes=nodes,
            pairs=args.pairs or (500 if args.full else 150),
            etcd_pairs=args.etcd_pairs or 5,
            seconds=args.seconds or (10.0 if args.full else 3.0),
            etcd_seconds=args.etcd_seconds or (120.0 if args.full else 6.0),
            watch_pods=watch_pods,
            watch_seconds=watch_seconds,
        )


@dataclass(frozen=True)
class Case:
    name: str
    label: str
    flags: tuple[str, ...]
    connections: int
    seconds: float
    pairs: int
    timeout: float
    warm_up: bool
    #: How many nodes' LISTs to check (first, last, middle).
    checked: int


def cases(s: Sizes) -> list[Case]:
    return [
        Case("indexed", "watch cache, indexed (default)", (), CONNECTIONS, s.seconds, s.pairs,
             10.0, True, 3),
        Case("no-index", "watch cache, no index", (NO_INDEX_FLAG,), CONNECTIONS, s.seconds,
             s.pairs, 10.0, True, 3),
        # A LIST from etcd takes seconds: one pair is warm-up enough, one node's check too.
        Case("etcd", "from etcd (uncached)", ("--uncached-resources", "pods"), ETCD_CONNECTIONS,
             s.etcd_seconds, s.etcd_pairs, ETCD_TIMEOUT_SECONDS, False, 1),
    ]  # fmt: skip


def node_name(node: int) -> str:
    return f"node-{node}"


def list_path(node: int, kind: str) -> str:
    path = f"/api/v1/pods?fieldSelector=spec.nodeName%3D{node_name(node)}"
    return path + ("&resourceVersion=0" if kind == "rv0" else "")


# ---------------------------------------------------------------------------------------
# The pods


def pod(i: int, namespace: str, node: str) -> tuple[bytes, bytes]:
    """Pod ``i`` of a Deployment's ReplicaSet, running on ``node``: about 1 KB of JSON."""
    name, app = f"pod-{i:06d}", f"app-{i % 50}"
    template_hash = f"{i * 2654435761 % 16**10:010x}"
    started = "2026-01-01T00:00:00Z"
    image = f"registry.example/{app}:1.0"
    obj = {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "namespace": namespace, "uid": f"00000000-0000-4000-8000-{i:012d}",
            "creationTimestamp": started,
            "labels": {"app": app, "pod-template-hash": template_hash},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-{template_hash}",
                "uid": f"00000000-0000-4000-9000-{i % 50:012d}", "controller": True,
            }],
        },
        "spec": {
            "nodeName": node, "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
            "containers": [{
                "name": "app", "image": image, "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
            }],
        },
        "status": {
            "phase": "Running", "hostIP": "10.1.0.1",
            "podIP": f"10.0.{i // 250 % 250}.{i % 250}", "startTime": started,
            "qosClass": "Burstable",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": started}],
            "containerStatuses": [{
                "name": "app", "ready": True, "restartCount": 0, "image": image,
                "started": True, "state": {"running": {"startedAt": started}},
            }],
        },
    }  # fmt: skip
    return PODS.key(namespace, name).encode(), json.dumps(obj, separators=(",", ":")).encode()


@dataclass
class Placement:
    """Where every pod is: pod i on node i mod ``nodes``, in namespace ``namespace[i]``."""

    nodes: int
    namespace: list[int]

    @staticmethod
    def of(pods: int, nodes: int, seed: int) -> Placement:
        rng = random.Random(seed)
        return Placement(nodes, [rng.randrange(NAMESPACE_COUNT) for _ in range(pods)])

    def pods_of(self, node: int) -> set[tuple[str, str]]:
        """(namespace, name) of the pods on ``node``."""
        return {(f"ns-{self.namespace[i]}", f"pod-{i:06d}")
                for i in range(node, len(self.namespace), self.nodes)}  # fmt: skip


async def load_pods(client: EtcdClient, placement: Placement) -> int:
    """The namespaces and pods, straight into etcd; returns the bytes of pod JSON written."""
    for k in range(NAMESPACE_COUNT):
        await client.create(NAMESPACES.key("", f"ns-{k}").encode(), namespace_object(f"ns-{k}"))
    semaphore = asyncio.Semaphore(8)
    written = 0

    async def batch(first: int, last: int) -> None:
        nonlocal written
        ops = []
        for i in range(first, last):
            key, value = pod(i, f"ns-{placement.namespace[i]}", node_name(i % placement.nodes))
            written += len(value)
            ops.append(rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value)))
        async with semaphore:
            await client.txn(rpc_pb2.TxnRequest(success=ops))

    count = len(placement.namespace)
    await asyncio.gather(
        *(batch(i, min(i + MAX_TXN_OPS, count)) for i in range(0, count, MAX_TXN_OPS))
    )
    return written


async def load_into(endpoints: list[str], placement: Placement) -> tuple[int, float]:
    """:func:`load_pods` through a client of its own whose calls may take minutes (each Txn
    writes MAX_TXN_OPS pods): the bytes of pod JSON written and the seconds it took."""
    async with EtcdClient(endpoints, timeout=300) as client:
        started = time.perf_counter()
        written = await load_pods(client, placement)
        return written, time.perf_counter() - started


# ---------------------------------------------------------------------------------------
# One server


@dataclass(frozen=True)
class Code:
    """The apiserver's code every server runs: ``tree``'s python/ on the installed engine
    (``core``), through bench/tree_python.py."""

    tree: Tree
    core: str

    def server(self, endpoints: list[str], flags: tuple[str, ...]) -> TreeServer:
        return TreeServer(endpoints, self.tree, self.core, [*SERVE_FLAGS, *flags])

    def serve_has(self, flag: str) -> bool:
        """Whether this code's ``watchcache serve`` takes ``flag``."""
        usage = subprocess.run(
            [sys.executable, str(BOOT), str(self.tree.python), self.core, "--", "serve", "--help"],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        return flag in usage


@dataclass
class Outcome:
    """One case's measurements (``skipped``: why it was not measured)."""

    name: str
    label: str
    flags: list[str]
    connections: int
    skipped: str = ""
    ready_seconds: float = math.nan
    rss_bytes: int = 0
    body_bytes: int = 0
    problems: list[str] = field(default_factory=list)
    latency: Latency = field(default_factory=Latency)
    load: dict[str, Load] = field(default_factory=dict)
    #: The server's pod LIST counters from /metrics, after the measurements.
    counters: dict[str, float] = field(default_factory=dict)


async def check(http: KeepAliveClient, placement: Placement, nodes: int) -> tuple[list[str], int]:
    """LISTs of ``nodes`` nodes (the first, last, middle), both kinds: what differs from
    each node's pods (empty: right), and the largest body's bytes."""
    problems: list[str] = []
    largest = 0
    last = placement.nodes - 1
    for node in dict.fromkeys([0, last, last // 2][:nodes]):
        want = placement.pods_of(node)
        for kind in KINDS:
            body = await http.get(list_path(node, kind))
            largest = max(largest, len(body))
            items = json.loads(body)["items"]
            got = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in items}
            elsewhere = [o["metadata"]["name"] for o in items if o["spec"]["nodeName"]
                         != node_name(node)]  # fmt: skip
            if got != want or elsewhere or len(items) != len(got):
                problems.append(
                    f"{node_name(node)} {kind}: {len(items)} items, {len(want - got)} missing, "
                    f"{len(got - want)} not its own, {len(elsewhere)} on other nodes"
                )
    return problems, largest


async def pod_list_counters(http: KeepAliveClient) -> dict[str, float]:
    """The pod cache's LIST counters from /metrics (none when pods are not cached)."""
    counters: dict[str, float] = {}
    for line in (await http.get("/metrics")).decode().splitlines():
        name = line.split("{", 1)[0]
        if line.startswith("#") or "list" not in name or 'resource="pods"' not in line:
            continue
        sample, value = line.rsplit(" ", 1)
        counters[sample] = float(value)
    return counters


def lua_script(folder: Path, nodes: int, kind: str, *, statuses: bool = False) -> Path:
    """A wrk script sending each request to a random node's LIST (seeded per thread, so
    the two threads do not ask for the same nodes in the same order). ``statuses``: also
    count the answers of each non-2xx status and print them (``status N: M``) at the end;
    wrk then hands every body to Lua, so only for the slow cases (from etcd)."""
    prefix, _, suffix = list_path(0, kind).partition(node_name(0))
    path = folder / f"list-{kind}{'-statuses' if statuses else ''}.lua"
    recording = (
        "statuses = {}\n"
        "function response(status, headers, body)\n"
        "  if status < 200 or status > 299 then\n"
        "    statuses[status] = (statuses[status] or 0) + 1\n"
        "  end\n"
        "end\n"
        "function done(summary, latency, requests)\n"
        "  for _, thread in ipairs(all_threads) do\n"
        "    for status, n in pairs(thread:get('statuses')) do\n"
        "      io.write(string.format('status %d: %d\\n', status, n))\n"
        "    end\n"
        "  end\n"
        "end\n"
    )
    path.write_text(
        f"local nodes, prefix, suffix = {nodes}, {json.dumps(prefix + 'node-')}, "
        f"{json.dumps(suffix)}\n"
        "local threads = 0\n"
        "all_threads = {}\n"
        "function setup(thread)\n"
        "  threads = threads + 1\n"
        "  thread:set('seed', threads)\n"
        "  table.insert(all_threads, thread)\n"
        "end\n"
        "function init(args)\n"
        f"  math.randomseed({SEED} + seed)\n"
        "end\n"
        "function request()\n"
        "  return wrk.format('GET', prefix .. math.random(0, nodes - 1) .. suffix)\n"
        "end\n" + (recording if statuses else "")
    )
    return path


async def wait_idle(pid: int, timeout: float = ETCD_TIMEOUT_SECONDS) -> float:
    """Wait until ``pid`` uses under 5 % of a core over 0.5 s; returns the seconds
    waited. wrk stops at its deadline with requests in flight, which the server still
    answers: a LIST from etcd takes seconds."""
    begin = time.perf_counter()
    while time.perf_counter() - begin < timeout:
        before = cpu_ns(pid)
        await asyncio.sleep(0.5)
        if cpu_ns(pid) - before < 0.05 * 0.5e9:
            break
    return time.perf_counter() - begin


async def measure_case(  # noqa: PLR0917
    case: Case, code: Code, endpoints: list[str], placement: Placement, wrk: str, folder: Path
) -> Outcome:
    out = Outcome(case.name, case.label, list(case.flags), case.connections)
    async with code.server(endpoints, case.flags) as server:
        out.ready_seconds = server.ready_seconds
        http = KeepAliveClient(server.port)
        rng = random.Random(SEED)
        # Warm-up, unmeasured: imports, the first consistent read's progress wait.
        for _ in range(20 if case.warm_up else 1):
            node = rng.randrange(placement.nodes)
            for kind in KINDS:
                await http.get(list_path(node, kind))
        out.problems, out.body_bytes = await check(http, placement, case.checked)
        out.rss_bytes = rss(server.pid)
        for _ in range(case.pairs):
            node = rng.randrange(placement.nodes)
            t = time.perf_counter()
            await http.get(list_path(node, "consistent"))
            out.latency.consistent_ms.append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            await http.get(list_path(node, "rv0"))
            out.latency.rv0_ms.append((time.perf_counter() - t) * 1e3)
        await http.close()
        for kind in KINDS:
            # The slow cases (from etcd: a few requests in all) say which non-2xx they got.
            script = lua_script(folder, placement.nodes, kind, statuses=case.name == "etcd")
            if case.warm_up:
                run_wrk(wrk, server.url, 1, script=script, connections=case.connections)
                await wait_idle(server.pid)
            load = run_wrk(wrk, server.url, case.seconds, server.pid, script=script,
                           connections=case.connections, timeout=case.timeout)  # fmt: skip
            await wait_idle(server.pid)
            out.load[kind] = load
            if load.non_2xx:
                seen = ", ".join(f"{n} x {code}" for code, n in sorted(load.statuses.items()))
                out.problems.append(
                    f"{kind}: {load.non_2xx} non-2xx answers under wrk"
                    + (f" ({seen})" if seen else "")
                )
        http = KeepAliveClient(server.port)
        out.counters = await pod_list_counters(http)
        await http.close()
    print(f"  {case.name}: {summary_line(out)}", flush=True)
    return out


def summary_line(out: Outcome) -> str:
    lat = out.latency
    rates = ", ".join(f"{k} {x.rate:,.1f}/s ({x.cpu_us:,.0f} µs CPU)" for k, x in out.load.items())
    return (
        f"one client p50 RV=0 {fmt_ms(percentile(lat.rv0_ms, 0.5))}, consistent "
        f"{fmt_ms(percentile(lat.consistent_ms, 0.5))}; {rates}; ready in "
        f"{out.ready_seconds:.1f} s, RSS {out.rss_bytes / 2**20:,.0f} MiB"
        + (f"; CHECK FAILED: {'; '.join(out.problems)}" if out.problems else "; check ok")
    )


# ---------------------------------------------------------------------------------------
# The run


@dataclass
class Run:
    sizes: Sizes
    etcd_version: str = "?"
    load_seconds: float = 0.0
    pod_bytes: int = 0
    floor: Load | None = None
    floor_body_bytes: int = 0
    outcomes: list[Outcome] = field(default_factory=list)
    watch: VariantResult | None = None
    wake_penalty_us: dict[str, float] = field(default_factory=dict)
    index_writes: IndexWriteCost | None = None  # in this process, index_apply_cost.py
    index_memory_pods: int = 0
    index_bytes_per_pod: float = math.nan


async def run(s: Sizes, code: Code, wrk: str, folder: Path) -> Run:
    result = Run(s)
    placement = Placement.of(s.pods, s.nodes, SEED)
    no_index = code.serve_has(NO_INDEX_FLAG)
    with etcd() as cluster:
        result.etcd_version = etcd_version(cluster)
        result.pod_bytes, result.load_seconds = await load_into(cluster.endpoints, placement)
        print(f"loaded {s.pods:,} pods ({result.pod_bytes / s.pods:,.0f} B each) over "
              f"{s.nodes:,} nodes in {result.load_seconds:.1f} s", flush=True)  # fmt: skip
        for case in cases(s):
            if NO_INDEX_FLAG in case.flags and not no_index:
                note = f"`watchcache serve` has no {NO_INDEX_FLAG} yet"
                print(f"  {case.name}: skipped, {note}", flush=True)
                result.outcomes.append(Outcome(case.name, case.label, list(case.flags),
                                               case.connections, skipped=note))  # fmt: skip
                continue
            result.outcomes.append(
                await measure_case(case, code, cluster.endpoints, placement, wrk, folder)
            )
    # The floor answers as many bytes as the indexed cache's LIST of one node.
    result.floor_body_bytes = result.outcomes[0].body_bytes
    script = lua_script(folder, s.nodes, "rv0")
    with floor_server("uvloop", result.floor_body_bytes) as (url, pid):
        run_wrk(wrk, url, 1, script=script)
        result.floor = run_wrk(wrk, url, s.seconds, pid, script=script)
    print(f"  floor: {result.floor.rate:,.0f}/s ({result.floor.cpu_us:.0f} µs CPU)", flush=True)
    # The watchers last, alone on the machine: no server or etcd is left running.
    result.wake_penalty_us = await wake_penalty()
    paced_events = int(WATCH_RATE * s.watch_seconds)
    work = workload(s.watch_pods, paced_events + WATCH_BURST, SEED)
    result.watch = w = await run_variant("indexed", work, paced_events, None)
    print(f"  watchers: dispatch {w.dispatch_us['mean']:.1f} µs per event (paced mean), "
          f"delivery p99 {fmt_ms(w.delivery_ms['p99'])}, lost {w.lost}", flush=True)  # fmt: skip
    return result


# ---------------------------------------------------------------------------------------
# Report


def pct(values: list[float], q: float) -> float:
    return percentile(values, q) if values else math.nan


def rate(out: Outcome, kind: str) -> float:
    return out.load[kind].rate if kind in out.load else math.nan


def fmt_rate(x: float) -> str:
    if math.isnan(x):
        return "-"
    return f"{x:,.0f}/s" if x >= 100 else f"{x:,.2f}/s"


def served_from(out: Outcome) -> str:
    """Where the pod LISTs went, by the server's own counters: the index read and the
    objects each LIST examined, or etcd when the cache counted none."""
    lists: dict[str, float] = {}
    fetched: dict[str, float] = {}
    for sample, value in out.counters.items():
        if 'index="' not in sample:
            continue
        index = sample.split('index="', 1)[1].split('"', 1)[0] or "scan"
        if sample.startswith("apiserver_cache_list_total"):
            lists[index] = lists.get(index, 0) + value
        elif sample.startswith("apiserver_cache_list_fetched_objects_total"):
            fetched[index] = fetched.get(index, 0) + value
    if not lists:
        cached = sum(v for k, v in out.counters.items() if k.startswith("watchcache_list_total"))
        return "etcd" if not cached else f"cache ({cached:,.0f} LISTs)"
    return ", ".join(
        f"{index}: {n:,.0f} LISTs, {fetched.get(index, 0) / n:,.0f} objects examined each"
        for index, n in sorted(lists.items(), key=lambda kv: -kv[1])
    )


def case_table(r: Run) -> str:
    header = ["served from", "RV=0, one client: p50 / p99", "consistent: p50 / p99",
              "consistent - RV=0, paired p50", "RV=0, LIST/s", "consistent, LIST/s",
              "server CPU per LIST: RV=0 / consistent", "wrk connections", "check"]  # fmt: skip
    rows = []
    for out in r.outcomes:
        if out.skipped:
            rows.append([out.label, *["-"] * 7, "", f"skipped: {out.skipped}"])
            continue
        lat = out.latency
        cpu = " / ".join(fmt_ms(out.load[k].cpu_us / 1e3) for k in KINDS)
        rows.append([
            out.label,
            f"{fmt_ms(pct(lat.rv0_ms, 0.5))} / {fmt_ms(pct(lat.rv0_ms, 0.99))}",
            f"{fmt_ms(pct(lat.consistent_ms, 0.5))} / {fmt_ms(pct(lat.consistent_ms, 0.99))}",
            fmt_ms(pct(lat.overhead_ms, 0.5)),
            fmt_rate(rate(out, "rv0")), fmt_rate(rate(out, "consistent")), cpu,
            str(out.connections),
            "ok" if not out.problems else "**FAILED**: " + "; ".join(out.problems),
        ])  # fmt: skip
    if r.floor is not None:
        rows.append([f"floor: bare ASGI app, {r.floor_body_bytes:,} B answer", "", "", "",
                     fmt_rate(r.floor.rate), "", fmt_ms(r.floor.cpu_us / 1e3),
                     str(CONNECTIONS), ""])  # fmt: skip
    return markdown(header, rows, "lrrrrrrrl")


def detail_table(r: Run) -> str:
    header = ["served from", "pairs", "ready after", "RSS after the check",
              "answer bytes (largest checked)", "LISTs counted by the server",
              "wrk socket errors: RV=0; consistent"]  # fmt: skip
    rows = [
        [out.label, f"{len(out.latency.rv0_ms):,}", f"{out.ready_seconds:.1f} s",
         f"{out.rss_bytes / 2**20:,.0f} MiB", f"{out.body_bytes:,}", served_from(out),
         "; ".join(out.load[k].socket_errors.removeprefix("Socket errors: ") or "none"
                   for k in KINDS)]
        for out in r.outcomes if not out.skipped
    ]  # fmt: skip
    return markdown(header, rows, "lrrrrll")


def targets(r: Run) -> list[Target]:
    indexed = r.outcomes[0]
    lat = indexed.latency
    floor = r.floor.rate if r.floor else math.nan
    scale = floor / ISSUE_FLOOR

    def at_least(x: float, want: float) -> bool:
        return not math.isnan(x) and x >= want

    def at_most(x: float, want: float) -> bool:
        return not math.isnan(x) and x <= want

    p50, p99 = pct(lat.rv0_ms, 0.5), pct(lat.rv0_ms, 0.99)
    over = pct(lat.overhead_ms, 0.5)
    rv0, consistent = rate(indexed, "rv0"), rate(indexed, "consistent")
    out = [
        Target("LIST by node at RV=0, one client, p50", f"≤ {TARGET_P50_MS:g} ms", fmt_ms(p50),
               at_most(p50, TARGET_P50_MS)),
        Target("LIST by node at RV=0, one client, p99", f"≤ {TARGET_P99_MS:g} ms", fmt_ms(p99),
               at_most(p99, TARGET_P99_MS)),
        Target(f"LIST by node at RV=0, {CONNECTIONS} connections", f"≥ {TARGET_RV0_RATE:,.0f}/s",
               fmt_rate(rv0), at_least(rv0, TARGET_RV0_RATE),
               f"≥ {TARGET_RV0_RATE * scale:,.0f}/s: "
               f"{'met' if at_least(rv0, TARGET_RV0_RATE * scale) else 'missed'}"),
        Target(f"LIST by node, consistent, {CONNECTIONS} connections",
               f"≥ {TARGET_CONSISTENT_RATE:,.0f}/s", fmt_rate(consistent),
               at_least(consistent, TARGET_CONSISTENT_RATE),
               f"≥ {TARGET_CONSISTENT_RATE * scale:,.0f}/s: "
               f"{'met' if at_least(consistent, TARGET_CONSISTENT_RATE * scale) else 'missed'}"),
        Target("consistent LIST over the same at RV=0, quiet cluster (paired p50)",
               f"≤ {TARGET_OVERHEAD_MS:g} ms", fmt_ms(over), at_most(over, TARGET_OVERHEAD_MS)),
    ]  # fmt: skip
    if r.watch is not None:
        w = r.watch
        out += [
            Target(f"{w.watchers:,} node watchers, {WATCH_RATE:.0f} updates/s: dispatch per "
                   "event (paced mean)", f"≤ {TARGET_DISPATCH_US:g} µs",
                   f"{w.dispatch_us['mean']:,.1f} µs",
                   at_most(w.dispatch_us["mean"], TARGET_DISPATCH_US)),
            Target("  delivery p99", f"≤ {TARGET_DELIVERY_P99_MS:g} ms",
                   fmt_ms(w.delivery_ms["p99"]),
                   at_most(w.delivery_ms["p99"], TARGET_DELIVERY_P99_MS)),
            Target("  deliveries lost, duplicated or reordered; watchers terminated", "0",
                   f"{w.lost} / {w.duplicates_or_reordered} / {w.terminated}",
                   w.lost == 0 and w.duplicates_or_reordered == 0 and w.terminated == 0),
        ]  # fmt: skip
    if r.index_writes is not None:
        keeps, lifecycle = r.index_writes.mode("keeps"), r.index_writes.mode("lifecycle")
        out += [
            Target(f"index memory per indexed pod (RSS, declared on {r.index_memory_pods:,})",
                   f"≤ {TARGET_INDEX_BYTES:g} B", f"{r.index_bytes_per_pod:.1f} B",
                   at_most(r.index_bytes_per_pod, TARGET_INDEX_BYTES)),
            Target("writes with one index (WatchCache.apply, same run): status updates",
                   f"≤ {TARGET_WRITE_RATIO:g}x", f"{keeps.ratio:.2f}x",
                   at_most(keeps.ratio, TARGET_WRITE_RATIO)),
            Target("  pod lifecycles (create, bind, five updates, delete)",
                   f"≤ {TARGET_WRITE_RATIO:g}x", f"{lifecycle.ratio:.2f}x",
                   at_most(lifecycle.ratio, TARGET_WRITE_RATIO)),
        ]  # fmt: skip
    return out


#: Pods the index's memory is measured on at least: fewer fit in memory a process holds anyway.
INDEX_MEMORY_PODS = 150_000


def index_bytes_per_pod(s: Sizes) -> tuple[int, float]:
    """How many pods, and the index's resident bytes per pod, measured by index_apply_cost.py
    in a process of its own (in this one, node memory freed earlier would be reused)."""
    pods = max(s.pods, INDEX_MEMORY_PODS)
    script = Path(__file__).with_name("index_apply_cost.py")
    args = ["--memory-only", "--n", str(pods), "--nodes", str(pods // PODS_PER_NODE)]
    out = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, check=True
    )
    return pods, float(out.stdout.split()[-1])


def index_write_table(cost: IndexWriteCost) -> str:
    """WatchCache.apply without and with the spec.nodeName index, per kind of write and per
    step of a pod's lifecycle."""
    header = ["write (WatchCache.apply)", "no index, µs/event", "1 index, µs/event",
              "ratio: median of rounds", "ratio of all their time"]  # fmt: skip
    rows = []
    for m in cost.modes:
        rows.append([MODES[m.mode], f"{m.plain_us:.2f}", f"{m.indexed_us:.2f}", f"{m.ratio:.2f}x",
                     f"{m.mean_ratio:.2f}x"])  # fmt: skip
        for step in dict.fromkeys(LIFECYCLE) if m.steps else ():
            alone, with_index = m.steps[step]
            rows.append([f"&nbsp;&nbsp;{step}", f"{alone:.2f}", f"{with_index:.2f}",
                         f"{with_index / alone:.2f}x", ""])  # fmt: skip
    return markdown(header, rows, "lrrrr")


def target_table(r: Run) -> str:
    scale = (r.floor.rate if r.floor else math.nan) / ISSUE_FLOOR
    rows = [
        [t.label.replace("  ", "&nbsp;&nbsp;"), t.target, t.value,
         "" if t.met is None else ("met" if t.met else "**missed**"), t.scaled]
        for t in targets(r)
    ]  # fmt: skip
    header = ["target (issue 24; indexed cache)", "target", "this run", "",
              f"rate scaled to this run's floor (x{scale:.2f})"]  # fmt: skip
    return markdown(header, rows, "lrrll")


def headlines(r: Run) -> list[Headline]:
    s = r.sizes
    by = {o.name: o for o in r.outcomes if not o.skipped}
    indexed, from_etcd = by["indexed"], by.get("etcd")
    where = f"{PODS_PER_NODE} of {s.pods:,} pods"

    def rates(out: Outcome | None) -> str:
        if out is None:
            return ""
        return f"{fmt_rate(rate(out, 'rv0'))} / {fmt_rate(rate(out, 'consistent'))}"

    def p50s(out: Outcome | None) -> str:
        if out is None:
            return ""
        lat = out.latency
        return f"{fmt_ms(pct(lat.rv0_ms, 0.5))} / {fmt_ms(pct(lat.consistent_ms, 0.5))}"

    note = f"floor {fmt_rate(r.floor.rate)}" if r.floor else ""
    if "no-index" in by:
        note += f"; no index {rates(by['no-index'])}"
    if from_etcd is not None:
        note += f"; etcd with {from_etcd.connections} connections"
    lines = [
        Headline(f"Kubelet: LIST by node, {where}", f"RV=0 / consistent, {CONNECTIONS} "
                 "connections", rates(indexed), rates(from_etcd), note=note),
        Headline("", "one client, p50: RV=0 / consistent", p50s(indexed), p50s(from_etcd),
                 note=f"RV=0 p99 {fmt_ms(pct(indexed.latency.rv0_ms, 0.99))}; consistent - "
                 f"RV=0 {fmt_ms(pct(indexed.latency.overhead_ms, 0.5))}"),
    ]  # fmt: skip
    if r.watch is not None:
        w = r.watch
        lines.append(Headline(
            "", f"{w.watchers:,} node watchers, {WATCH_RATE:.0f} pod updates/s: dispatch per "
            "event (mean), delivery p99, lost",
            f"{w.dispatch_us['mean']:,.1f} µs, {fmt_ms(w.delivery_ms['p99'])}, lost {w.lost}",
            note=f"{w.pods:,} pods; back to back {w.burst_dispatch_us['mean']:,.1f} µs/event",
        ))  # fmt: skip
    if r.index_writes is not None:
        keeps, lifecycle = r.index_writes.mode("keeps"), r.index_writes.mode("lifecycle")
        lines.append(Headline(
            "", "the index: WatchCache.apply with it / without, status updates / pod "
            "lifecycles; memory per pod",
            f"{keeps.ratio:.2f}x / {lifecycle.ratio:.2f}x; {r.index_bytes_per_pod:.1f} B",
            note=f"targets ≤ {TARGET_WRITE_RATIO:g}x, ≤ {TARGET_INDEX_BYTES:g} B",
        ))  # fmt: skip
    return lines


def plot(r: Run) -> Callable[[Path], None]:
    def draw(path: Path) -> None:
        shown = [o for o in r.outcomes if not o.skipped]
        with figure(path, title=f"Kubelet scenario: LIST of one node's pods "
                    f"({PODS_PER_NODE} of {r.sizes.pods:,})", ncols=2,
                    size=(12, 4.5)) as (left, right):  # fmt: skip
            ys = list(range(len(shown)))
            for offset, kind, label in ((-0.2, "rv0", "RV=0"), (0.2, "consistent", "consistent")):
                values = [rate(o, kind) for o in shown]
                drawn = left.barh([y + offset for y in ys], values, 0.4, label=label)
                left.bar_label(drawn, [fmt_rate(v) for v in values], fontsize=6, padding=2)
            if r.floor is not None:
                left.axvline(r.floor.rate, color="black", linestyle="--", linewidth=1,
                             label=f"floor (bare ASGI) {r.floor.rate:,.0f}/s")  # fmt: skip
            left.axvline(TARGET_RV0_RATE, color="grey", linestyle=":", linewidth=1,
                         label=f"target RV=0 {TARGET_RV0_RATE:,.0f}/s")  # fmt: skip
            left.set_xscale("log")
            left.set_yticks(ys, [f"{o.label}\n({o.connections} conn.)" for o in shown],
                            fontsize=7)  # fmt: skip
            left.invert_yaxis()
            left.set_xlabel("LISTs per second (log scale)")
            left.legend(fontsize=7)
            bars = [("RV=0 p50", "rv0_ms", 0.5), ("RV=0 p99", "rv0_ms", 0.99),
                    ("consistent p50", "consistent_ms", 0.5),
                    ("consistent p99", "consistent_ms", 0.99)]  # fmt: skip
            width = 0.8 / len(bars)
            for k, (label, attr, q) in enumerate(bars):
                right.barh([y - 0.4 + width * (k + 0.5) for y in ys],
                           [pct(getattr(o.latency, attr), q) for o in shown], width,
                           label=label)  # fmt: skip
            right.axvline(TARGET_P50_MS, color="grey", linestyle=":", linewidth=1,
                          label="targets at RV=0: p50 1 ms, p99 5 ms")  # fmt: skip
            right.axvline(TARGET_P99_MS, color="grey", linestyle=":", linewidth=1)
            right.set_xscale("log")
            right.set_yticks(ys, [o.label for o in shown], fontsize=7)
            right.invert_yaxis()
            right.set_xlabel("one client, ms (log scale)")
            right.legend(fontsize=7)

    return draw


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--nodes", type=int, help="nodes, 30 pods each (quick 500, full 5,000)")
    p.add_argument("--seconds", type=float, help="wrk seconds per kind of LIST (quick 3, full 10)")
    p.add_argument("--pairs", type=int, help="one-client pairs per cached case (150, 500)")
    p.add_argument("--etcd-pairs", type=int, help="one-client pairs from etcd (5)")
    p.add_argument(
        "--tree", default=WORKTREE, help="the apiserver's code: a revision, or WORKTREE (default)"
    )
    p.add_argument("--etcd-seconds", type=float, help="wrk seconds from etcd (quick 6, full 120)")
    args = p.parse_args(argv)
    s = Sizes.of(args)
    wrk = wrk_binary()
    title = "Scenario 6: the kubelets' LIST and WATCH of one node's pods (issue 24)"
    report = Report("kubelet", title, "full" if args.full else "quick")
    with workspace("kubelet") as folder:
        # A copy of the tree, taken now: every server of the run runs the same code, whatever
        # is edited meanwhile (as read_path.py's sides).
        tree = prepare("kubelet", args.tree, folder / "tree", True)
        print(f"apiserver: {tree.description}", flush=True)
        r = asyncio.run(run(s, Code(tree, installed_core()), wrk, folder))
    # The index's cost to writes and memory, in this process (the working tree's cache on the
    # installed engine), after the servers have gone.
    print("index cost to WatchCache.apply and memory ...", flush=True)
    r.index_writes = w = measure_index_writes(s.pods, s.nodes, seed=SEED)
    r.index_memory_pods, r.index_bytes_per_pod = index_bytes_per_pod(s)
    end_load = [round(x, 2) for x in os.getloadavg()]
    e = next((o for o in r.outcomes if o.name == "etcd"), None)
    report.how = (
        f"The apiserver: {tree.description}, on the installed engine. etcd {r.etcd_version}; "
        f"{s.pods:,} pods of ~{r.pod_bytes / s.pods:,.0f} B over "
        f"{s.nodes:,} nodes ({PODS_PER_NODE} each) and {NAMESPACE_COUNT} namespaces, loaded "
        f"in {r.load_seconds:.1f} s; each case a fresh `watchcache serve "
        f"{' '.join(SERVE_FLAGS)}` plus its flag, over the same etcd. LIST: "
        "`/api/v1/pods?fieldSelector=spec.nodeName=<node>`, with `resourceVersion=0` or "
        f"without (consistent). One client: {s.pairs} pairs of a random node (consistent, "
        f"then RV=0){f', {len(e.latency.rv0_ms)} from etcd' if e else ''}. Throughput: "
        f"wrk -t2 -c{CONNECTIONS}, {s.seconds:g} s per kind after 1 s of warm-up, a random "
        f"node per request (Lua); from etcd -c{ETCD_CONNECTIONS}, {s.etcd_seconds:g} s (see "
        "the docstring). CPU: the server's, all threads. Watchers: bench/watch_dispatch.py's "
        f"indexed variant at its {'full' if args.full else 'quick'} size ({s.watch_pods:,} "
        f"pods, {s.watch_seconds:g} s at {WATCH_RATE:.0f}/s, then {WATCH_BURST:,} back to "
        "back; the same without the watcher index is its own section); this machine's wake "
        "penalty: "
        f"twenty dict lookups {r.wake_penalty_us.get('cold_us', math.nan):.1f} µs after a "
        f"10 ms sleep, {r.wake_penalty_us.get('warm_us', math.nan):.1f} µs warm. Writes: "
        f"bench/index_apply_cost.py's measurement in this process, {s.pods:,} pods over "
        f"{s.nodes:,} nodes in two caches, with and without the index, the same events in "
        f"alternating rounds ({w.rounds} rounds of {w.ops} events, history window "
        f"{w.window:,}), CPU time; the index's memory: RSS of declaring it on a tree of "
        f"{r.index_memory_pods:,} such pods, in a process of its own. Load average at the "
        f"end: {end_load[0]}. The method is the script's docstring."
    )
    report.tables += [case_table(r), target_table(r), detail_table(r), index_write_table(w)]
    if r.watch is not None:
        report.tables.append(watch_table([r.watch]))
    report.headline = headlines(r)
    report.data = {
        "sizes": asdict(s),
        "tree": asdict(tree) | {"python": None},
        "etcd_version": r.etcd_version,
        "load_seconds": r.load_seconds,
        "pod_bytes": r.pod_bytes,
        "load_average_end": end_load,
        "floor": asdict(r.floor) if r.floor else None,
        "floor_body_bytes": r.floor_body_bytes,
        "cases": [asdict(o) for o in r.outcomes],
        "targets": [asdict(t) for t in targets(r)],
        "watch": asdict(r.watch) | {"met": r.watch.met} if r.watch else None,
        "wake_penalty_us": r.wake_penalty_us,
        "index_writes": asdict(w),
        "index_memory_pods": r.index_memory_pods,
        "index_bytes_per_pod": r.index_bytes_per_pod,
    }
    report.publish_as_asked(args, plot=plot(r))
    failed = [o for o in r.outcomes if o.problems or any(x.non_2xx for x in o.load.values())]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
