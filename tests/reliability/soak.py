"""Soak: two ``watchcache serve`` processes on a 3-member etcd, random traffic over HTTP.

    .venv/bin/python tests/reliability/soak.py --minutes 10            # the default run
    .venv/bin/python tests/reliability/soak.py --long --minutes 60     # what make soak runs

Two configurations; every option of either can be set on its own (``--help``):

* the default, as the soak ran before compaction existed: 15 changes/s of mixed sizes from
  2 writers, no compaction, etcd's own quota; summary in ``results/soak.json``;
* ``--long``, the long-running configuration (issue 22): ~1 KB objects at the rate this
  machine sustains through the servers (``LONG_WRITE_RATE``, measured: see its note) from
  64 writers, and the rest of 1,000 a second straight into etcd (``etcd_writer.py``,
  ``LONG_DIRECT_WRITE_RATE`` in transactions of ``LONG_DIRECT_BATCH`` keys), a 256 MiB
  backend quota on every member, compaction every minute by the servers, the members
  defragmented by the soak as an operator would (``--defragment-free-fraction``), lists
  paced; summary in ``results/soak-long.json``, and the plot and bench/README.md's
  "long-running" section (bench/long_running.py).

What runs (a script, not a pytest module):

* a 3-member etcd (stopped by PID at the end) and two apiservers as subprocesses serving
  configmaps and namespaces, with the inconsistency detector on
  (``--check-consistency-every``) and ``--etcd-compaction-interval``;
* writers doing random creates, updates (PUT with and without a resourceVersion), merge
  patches and deletes against either server, paced to ``--write-rate`` changes a second,
  and ``--workers`` readers listing (as fast as they can, or paced to ``--list-rate``):
  paginated or not, with pages taken alternately from both servers (continue tokens are
  portable), at no resourceVersion (consistent), ``0``, NotOlderThan or Exact an earlier
  list's rv, with label selectors, in one namespace or all. Every list is compared with
  etcd at the list's rv (a Range at that revision, the selector applied by the validator's
  own selector code) as soon as it is complete, before a compaction can pass that rv; one
  whose rv was compacted all the same is counted as unchecked, apart. A 410 for a continue
  token or an Exact rv older than the compaction is Kubernetes' answer: counted, and the
  reader lists again from the start as client-go's pager does;
* eight watchers (four per server) as informers are: list, watch from the list's rv with a
  timeout of 5-40 s, resume from the last rv seen, list again after a 410; or a watch-list
  (initial state, then changes). Filters: everything with bookmarks, ``app in (a,b)``,
  one namespace with ``tier!=x`` and bookmarks, and a watch-list of ``app=a``;
* every few seconds a probe: a watch from an older rv some watcher was delivered (it must
  get etcd's changes since, or a 410 once that rv has left the cache's event history);
* the oracle of every watch check recorded as the run goes, from a watch on etcd started
  before the first write (an etcd watch that keeps up is not cut by compaction,
  watch_validator.OracleRecorder); each watch session, list and state is checked against
  it when it ends, and the oracle forgets what nothing needs any more;
* sampled every ``--sample-every``: each server's RSS (/proc) and event history (/metrics),
  each member's database file and in-use bytes (Maintenance.Status), the alarms, the
  compacted revision, the changes made so far.

At the end a last write every watcher selects; once every watcher has it, the watchers stop,
their last sessions are checked, two watches per watcher are restarted from rvs they were
delivered and must get exactly the rest, each watcher's state and each server's full LIST
are compared with etcd, and each server's ``/metrics`` gives the detector's counts.

Passes when: 0 list mismatches, 0 watch violations (so no lost or duplicated events), the
detector's checks ran and none failed nor found the cache inconsistent, no 5xx, no NOSPACE
alarm and no write refused for lack of space, and each server's RSS and etcd's database
file (its largest member's) grew less than ``--growth-limit`` (10%) between the end of the
warm-up (the first 30% of the run, at least ``--min-warmup``) and the end: each as its
high-water mark in the first two compaction intervals after the warm-up against the last
two (both are saw-tooths: compaction and defragmentation shrink the file, and compaction
drops the snapshots whose path copies fill the servers' memory); neither is judged when
too little of the run is left after the warm-up. With compaction on, etcd must also have been
compacted. Writes a JSON summary to ``--json`` and prints a human one; exits 1 when a
guarantee failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import uvloop

# The validator lives with the test support code and the report with the benchmarks; this
# file runs as a script.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from watch_validator import (
    BOOKMARK,
    DELETED,
    Chain,
    End,
    Guarantee,
    LabelSelector,
    OracleRecorder,
    RecordingLostError,
    RunningChecks,
    SessionCheck,
    StateCheck,
    WatchFilter,
    WatchSession,
    read_state,
    summarize,
)

from watchcache.etcd.client import EtcdClient, EtcdError
from watchcache.etcd.compactor import COMPACT_REV_KEY
from watchcache.etcd.process import EtcdCluster, free_ports
from watchcache.etcd.proto import rpc_pb2
from watchcache.etcd.storage_monitor import DEFAULT_DEFRAGMENT_MIN_BYTES
from watchcache.wire.errors import CompactedError

REPO = Path(__file__).resolve().parents[2]
PREFIX = "/registry/configmaps/"
NAMESPACES = ("soak-0", "soak-1", "soak-2", "soak-3")
NAMES_PER_NAMESPACE = 40
APPS = ("a", "b", "c")
TIERS = ("x", "y")
SELECTORS = ("", "app=a", "app in (a,b)", "tier!=x", "app=b,tier=y", "!tier")
SENTINEL_NAMESPACE, SENTINEL = "soak-0", "zz-sentinel"
INITIAL_END = "k8s.io/initial-events-end"
#: Codes a write may get in a race with other writers: conflicts and vanished objects.
EXPECTED_WRITE_CODES = frozenset({200, 201, 404, 409})
#: etcd's words when a write is refused because the backend quota is full.
NO_SPACE = re.compile(r"database space exceeded|NOSPACE|no space", re.IGNORECASE)
RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_JSON = RESULTS / "soak.json"
LONG_JSON = RESULTS / "soak-long.json"
LONG_PLOT = REPO / "bench" / "results" / "long-running.png"
LONG_README = REPO / "bench" / "README.md"
MIB = 1024 * 1024
#: Changes a second of the long configuration. Issue 22 asks for 1,000/s of ~1 KB objects;
#: two Python servers, three etcd members and this load generator on the two shared cores
#: here sustain far less: unpaced (``--long --write-rate 0``, results/soak-long-unpaced.json)
#: 162 changes/s on a quiet machine, 92/s with the cores shared with other work (load
#: average 3-10). 80 is under both, and a rate whose event history capacity cannot change:
#: capacity C holds for rates in (C/300, C/75], the pace never runs above its target, and 80
#: settles at C = 6,400 (21.3-85.3/s), so RSS judged after the warm-up is not a capacity
#: doubling mid-run.
LONG_WRITE_RATE = 80.0
#: Changes a second the long configuration writes straight into etcd besides, as the other
#: apiservers of a cluster would (etcd_writer.py, a process of its own): with what the
#: servers' own writes reach of LONG_WRITE_RATE (59/s in the hour of results/soak-long.json),
#: the 1,000 a second issue 22 asks etcd, the caches and the watches to take, while the
#: servers' own write path stays at the rate it sustains here.
LONG_DIRECT_WRITE_RATE = 960.0
#: Changes per etcd transaction of those writes. One transaction a change takes more of the
#: two cores than they have: with the soak's servers, checks and load generator on them,
#: single-key transactions reached 245 changes/s (309 in all; ``--direct-batch 1``, 3 min)
#: with etcd and the writer starved, and ten keys a transaction 737/s (730 in all, 2 min).
#: Twenty write the same bytes and make the same events for the servers; etcd's
#: revisions advance twenty times slower.
LONG_DIRECT_BATCH = 20
ETCD_WRITER = Path(__file__).resolve().parent / "etcd_writer.py"
#: Lists a second in the long configuration: enough to page through every server state
#: often, few enough to leave the cores to the writes.
LONG_LIST_RATE = 10.0


# -- the servers ----------------------------------------------------------------------------


@dataclass
class Server:
    """One ``watchcache serve`` subprocess, stopped by PID."""

    name: str
    port: int
    log: Path
    process: subprocess.Popen[bytes]
    rss_kib: list[tuple[float, int]] = field(default_factory=list)
    #: (t, *CACHE_GAUGES): history capacity, snapshots, bytes they pin, engine memory.
    caches: list[tuple[float, ...]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rss(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError(f"no VmRSS for {self.process.pid}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def start_server(
    name: str, endpoints: Sequence[str], workdir: Path, args: argparse.Namespace
) -> Server:
    port = free_ports(1)[0]
    log = workdir / f"{name}.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "watchcache", "serve", "--etcd", ",".join(endpoints),
             "--port", str(port), "--resources", "configmaps,namespaces",
             "--log-level", "warning",
             "--check-consistency-every", f"{args.check_every:g}s",
             "--etcd-compaction-interval", f"{args.compaction_interval:g}s"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    return Server(name, port, log, process)


def wait_ready(server: Server, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited:\n{server.log_tail()}")
        with (
            contextlib.suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(f"{server.url}/readyz", timeout=2) as response,
        ):
            if response.status == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{server.name} not ready after {timeout:.0f} s:\n{server.log_tail()}")


# -- objects --------------------------------------------------------------------------------

#: What the server adds to a configmap the soak sends (uid, creationTimestamp,
#: resourceVersion, managedFields), in bytes, so ``--object-bytes`` is the stored size.
STORED_OVERHEAD = 460


def key_of(namespace: str, name: str) -> str:
    return f"{PREFIX}{namespace}/{name}"


def configmap(
    namespace: str, name: str, rng: random.Random, rv: str = "", size: int = 0
) -> dict[str, Any]:
    """A configmap with random labels; ``size`` its stored size in bytes (about), 0 for
    the default mix of small, medium and large ones."""
    labels = {"app": rng.choice(APPS)}
    if rng.random() < 0.7:
        labels["tier"] = rng.choice(TIERS)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if rv:
        metadata["resourceVersion"] = rv
    blob = max(16, size - STORED_OVERHEAD) if size else rng.choice((16, 200, 1500))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {"blob": rng.randbytes(blob // 2).hex()},
    }


def event_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return key_of(str(meta.get("namespace", "")), str(meta.get("name", "")))


# -- the tally ------------------------------------------------------------------------------


@dataclass
class Traffic:
    ops: Counter[str] = field(default_factory=Counter)
    codes: Counter[str] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    #: Writes that changed something (2xx): what the pace counts.
    changes: int = 0
    #: Writes refused because etcd's quota was full (NOSPACE).
    refused_for_space: int = 0
    lists_checked: int = 0
    #: Lists whose rv etcd had compacted before they could be compared with it.
    lists_unchecked: int = 0
    list_pages: int = 0
    #: 410s Kubernetes gives for what compaction removed: by "continue" or "resourceVersion".
    lists_expired: Counter[str] = field(default_factory=Counter)
    #: Lists started again from the first page after their continue token expired.
    list_restarts: int = 0
    #: 504s Kubernetes gives a read at a resourceVersion the serving cache has not reached
    #: within its wait (a page whose token came from the other, further server): by
    #: "continue" or "resourceVersion".
    lists_behind: Counter[str] = field(default_factory=Counter)
    list_mismatches: list[str] = field(default_factory=list)

    def code(self, op: str, status: int) -> None:
        self.codes[f"{op} {status}"] += 1

    def mismatch(self, message: str) -> None:
        self.list_mismatches.append(message)
        print(f"MISMATCH {message}", file=sys.stderr, flush=True)


# -- lists ----------------------------------------------------------------------------------


@dataclass
class Listed:
    rv: int
    items: dict[str, int]  # key -> rv


class ListError(Exception):
    """A page answered with an error; ``rv``: the list's rv when a later page failed (its
    continue token was refused), 0 when the first page did."""

    def __init__(self, status: int, body: str, rv: int = 0) -> None:
        super().__init__(f"{status}: {body[:200]}")
        self.status = status
        self.body = body
        self.rv = rv


async def list_pages(
    servers: Sequence[aiohttp.ClientSession],
    namespace: str | None,
    params: dict[str, str],
    rng: random.Random,
    tally: Traffic,
) -> Listed:
    """A whole list, page by page, each page from a random server (tokens are portable)."""
    path = f"/api/v1/namespaces/{namespace}/configmaps" if namespace else "/api/v1/configmaps"
    items: dict[str, int] = {}
    rv = 0
    token = ""
    last_key = ""
    while True:
        query = dict(params)
        if token:
            query = {k: v for k, v in query.items() if k in ("limit", "labelSelector")}
            query["continue"] = token
        async with rng.choice(servers).get(path, params=query) as response:
            status, raw = response.status, await response.read()
        tally.list_pages += 1
        if status != 200:
            raise ListError(status, raw.decode(errors="replace"), rv)
        body = json.loads(raw)
        page_rv = int(body["metadata"]["resourceVersion"])
        if rv and page_rv != rv:
            raise AssertionError(f"page at rv {page_rv}, the list's first page at {rv}")
        rv = page_rv
        for obj in body["items"]:
            key = event_key(obj)
            if key <= last_key:
                raise AssertionError(f"{key} out of order after {last_key} in a list")
            last_key = key
            items[key] = int(obj["metadata"]["resourceVersion"])
        token = body["metadata"].get("continue", "")
        if not token:
            return Listed(rv, items)


async def etcd_selected(
    etcd: EtcdClient, namespace: str | None, selector: str, rv: int
) -> dict[str, int]:
    prefix = f"{PREFIX}{namespace}/" if namespace else PREFIX
    compiled = LabelSelector.parse(selector)
    state = await read_state(etcd, prefix, rv)
    return {k: mod for k, (mod, labels) in state.items() if compiled.matches(labels)}


async def compacted_revision(etcd: EtcdClient) -> int:
    """The revision the servers last compacted etcd to (0: never), from their shared key."""
    kv = await etcd.get(COMPACT_REV_KEY)
    with contextlib.suppress(ValueError):
        return int(kv.value) if kv is not None else 0
    return 0


def differences(got: dict[str, int], want: dict[str, int]) -> str:
    missing = sorted(want.keys() - got.keys())[:3]
    extra = sorted(got.keys() - want.keys())[:3]
    other = sorted(k for k in got.keys() & want.keys() if got[k] != want[k])[:3]
    return f"missing {missing} extra {extra} other rv {other}"


# -- the workload ---------------------------------------------------------------------------


class Pace:
    """Slots ``1 / rate`` apart shared by every task that waits on it (0: no wait). A task
    that falls behind takes the next slot now: no burst to catch up, so the rate never
    runs above the target."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._next = 0.0

    async def wait(self) -> None:
        now = time.monotonic()
        slot = max(now, self._next)
        self._next = slot + self.interval
        if slot > now:
            await asyncio.sleep(slot - now)

    def refund(self) -> None:
        self._next -= self.interval


class Workload:
    def __init__(
        self,
        servers: Sequence[aiohttp.ClientSession],
        etcd: EtcdClient,
        tally: Traffic,
        args: argparse.Namespace,
    ) -> None:
        self.servers = servers
        self.etcd = etcd
        self.tally = tally
        self.object_bytes: int = args.object_bytes
        self.seen_rvs: deque[int] = deque(maxlen=200)
        self.writes = Pace(args.write_rate)
        self.lists = Pace(args.list_rate)

    async def write(self, until: float, seed: float) -> None:
        """Creates, updates, patches and deletes, paced to changes a second: a write that
        changed nothing (404, 409) gives its slot back, since the rate of changes is what
        sizes the cache's event history."""
        rng = random.Random(seed)
        while time.monotonic() < until:
            await self.writes.wait()
            roll = rng.random()
            try:
                if roll < 0.4:
                    await self.create(rng)
                elif roll < 0.65:
                    await self.update(rng)
                elif roll < 0.8:
                    await self.patch(rng)
                else:
                    await self.delete(rng)
            except (aiohttp.ClientError, TimeoutError) as error:
                self.tally.unexpected.append(f"write: {type(error).__name__}: {error}")

    async def read(self, until: float, seed: float) -> None:
        rng = random.Random(seed)
        while time.monotonic() < until:
            await self.lists.wait()
            try:
                await self.list(rng)
            except (aiohttp.ClientError, TimeoutError) as error:
                self.tally.unexpected.append(f"list: {type(error).__name__}: {error}")
            if not self.lists.interval:
                await asyncio.sleep(rng.random() * 0.02)

    def _target(self, rng: random.Random) -> tuple[aiohttp.ClientSession, str, str]:
        namespace = rng.choice(NAMESPACES)
        return rng.choice(self.servers), namespace, f"cm-{rng.randrange(NAMES_PER_NAMESPACE):03d}"

    def _write(self, op: str, status: int, body: bytes) -> None:
        self.tally.ops[op] += 1
        self.tally.code(op, status)
        if status < 300:
            self.tally.changes += 1
        else:
            self.writes.refund()
        text = body[:300].decode(errors="replace")
        if status >= 500:
            self.tally.server_errors.append(f"{op}: {status} {text}")
            if NO_SPACE.search(text):
                self.tally.refused_for_space += 1
        elif status not in EXPECTED_WRITE_CODES:
            self.tally.unexpected.append(f"{op}: {status} {text}")

    async def create(self, rng: random.Random) -> None:
        server, namespace, name = self._target(rng)
        body = configmap(namespace, name, rng, size=self.object_bytes)
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        async with server.post(path, json=body) as response:
            self._write("create", response.status, await response.read())

    async def update(self, rng: random.Random) -> None:
        server, namespace, name = self._target(rng)
        path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
        rv = ""
        if rng.random() < 0.5:
            # With the resourceVersion just read: a compare-and-swap that may conflict.
            async with server.get(path) as current:
                self.tally.code("get", current.status)
                if current.status != 200:
                    self.writes.refund()
                    return
                rv = json.loads(await current.read())["metadata"]["resourceVersion"]
        body = configmap(namespace, name, rng, rv, size=self.object_bytes)
        async with server.put(path, json=body) as response:
            self._write("update", response.status, await response.read())

    async def patch(self, rng: random.Random) -> None:
        server, namespace, name = self._target(rng)
        patch = {
            "metadata": {"labels": {"app": rng.choice(APPS)}},
            "data": {"n": str(rng.random())},
        }
        async with server.patch(
            f"/api/v1/namespaces/{namespace}/configmaps/{name}",
            data=json.dumps(patch),
            headers={"content-type": "application/merge-patch+json"},
        ) as response:
            self._write("patch", response.status, await response.read())

    async def delete(self, rng: random.Random) -> None:
        server, namespace, name = self._target(rng)
        path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
        async with server.delete(path) as response:
            self._write("delete", response.status, await response.read())

    async def list(self, rng: random.Random) -> None:
        namespace = rng.choice((None, *NAMESPACES))
        selector = rng.choice(SELECTORS)
        params: dict[str, str] = {}
        if selector:
            params["labelSelector"] = selector
        if rng.random() < 0.6:
            params["limit"] = str(rng.choice((1, 7, 50, 500)))
        mode = rng.choice(("consistent", "consistent", "0", "notOlderThan", "exact"))
        floor = 0
        if mode == "consistent":
            floor = await self.etcd.current_revision(PREFIX.encode())
        elif mode == "0":
            params["resourceVersion"] = "0"
        elif self.seen_rvs:
            floor = rng.choice(self.seen_rvs)
            params["resourceVersion"] = str(floor)
            if mode == "exact":
                params["resourceVersionMatch"] = "Exact"
        op = f"list {mode}{' paged' if 'limit' in params else ''}"
        self.tally.ops[op] += 1
        where = f"{op} {params} in {namespace or 'all'}"
        while True:
            try:
                listed = await list_pages(self.servers, namespace, params, rng, self.tally)
                break
            except ListError as error:
                self.tally.code("list", error.status)
                if error.status == 410 and await self._expired(where, error, floor):
                    if error.rv:
                        # As client-go's pager: the token is gone, list again from the start.
                        self.tally.list_restarts += 1
                        continue
                    return
                if error.status == 504 and self._behind(error, params):
                    # Retried from the start, as a reflector lists again after an error.
                    self.tally.list_restarts += 1
                    continue
                if error.status >= 500:
                    self.tally.server_errors.append(f"{where}: {error}")
                else:
                    self.tally.unexpected.append(f"{where}: {error}")
                return
            except AssertionError as error:
                self.tally.mismatch(f"{where}: {error}")
                return
        self.tally.code("list", 200)
        self.seen_rvs.append(listed.rv)
        if mode == "exact" and "resourceVersion" in params and listed.rv != floor:
            self.tally.mismatch(f"{op}: asked for exactly {floor}, got {listed.rv}")
        elif listed.rv < floor:
            self.tally.mismatch(f"{op}: list at {listed.rv}, older than the {floor} asked for")
        try:
            want = await etcd_selected(self.etcd, namespace, selector, listed.rv)
        except CompactedError:
            self.tally.lists_unchecked += 1
            return
        self.tally.lists_checked += 1
        if listed.items != want:
            self.tally.mismatch(f"{where} at {listed.rv}: {differences(listed.items, want)}")

    def _behind(self, error: ListError, params: dict[str, str]) -> bool:
        """Whether a 504 is the one Kubernetes gives a read at a resourceVersion the cache
        has not reached within its wait (a continuation, or an Exact/NotOlderThan first
        page): its cause ``ResourceVersionTooLarge``. A consistent first page never gets
        it: that read falls back to etcd. Counted by kind."""
        at_rv = params.get("resourceVersion", "0") != "0"
        if not (error.rv or at_rv) or "ResourceVersionTooLarge" not in error.body:
            return False
        self.tally.lists_behind["continue" if error.rv else "resourceVersion"] += 1
        return True

    async def _expired(self, where: str, error: ListError, floor: int) -> bool:
        """Whether a 410 is the one Kubernetes gives for a revision compaction removed: a
        continue token or an Exact rv older than the compacted revision. Counted by kind."""
        rv = error.rv or floor
        compacted = await compacted_revision(self.etcd)
        if not rv or rv >= compacted:
            self.tally.unexpected.append(f"{where}: 410 at rv {rv}, compacted only to {compacted}")
            return False
        self.tally.lists_expired["continue" if error.rv else "resourceVersion"] += 1
        return True


# -- the watchers ---------------------------------------------------------------------------


class Watcher:
    """An informer over HTTP (see the module note)."""

    def __init__(
        self,
        name: str,
        server: aiohttp.ClientSession,
        namespace: str | None,
        selector: str,
        rng: random.Random,
        *,
        bookmarks: bool = False,
        watch_list: bool = False,
    ) -> None:
        self.name = name
        self.server = server
        self.namespace = namespace
        self.selector = selector
        self.flt = WatchFilter(f"{PREFIX}{namespace}/" if namespace else PREFIX, selector)
        self.rng = rng
        self.bookmarks = bookmarks
        self.watch_list = watch_list
        self.stopping = asyncio.Event()
        self.current: WatchSession | None = None
        self.started = 0
        self.state: dict[str, int] = {}
        self.last_rv = 0
        self.retries = 0
        self.errors: list[str] = []
        #: Delivered rvs, about ten a second, for probes to start from.
        self.delivered: deque[int] = deque(maxlen=6000)
        self._sampled = 0.0
        self._opened = False
        self.chain = Chain()

    @property
    def path(self) -> str:
        if self.namespace:
            return f"/api/v1/namespaces/{self.namespace}/configmaps"
        return "/api/v1/configmaps"

    async def _list(self, tally: Traffic, checker: RunningChecks) -> int:
        while True:
            params = {"labelSelector": self.selector} if self.selector else {}
            # A consistent list is at least as new as anything the oracle has recorded.
            hold = checker.hold(checker.oracle.last)
            try:
                listed = await list_pages([self.server], self.namespace, params, self.rng, tally)
            except (ListError, aiohttp.ClientError, TimeoutError) as error:
                checker.release(hold)
                self.errors.append(f"list: {error}")
                self.retries += 1
                await asyncio.sleep(0.2)
                continue
            checker.submit(StateCheck(f"{self.name} list", self.flt, listed.rv, listed.items, hold))
            self.state = dict(listed.items)
            self.last_rv = max(self.last_rv, listed.rv)
            return listed.rv

    async def run(self, tally: Traffic, checker: RunningChecks, etcd: EtcdClient) -> None:
        rv = 0 if self.watch_list else await self._list(tally, checker)
        while not self.stopping.is_set():
            # A watch-list's initial state is at least as new as what the oracle has.
            hold = checker.hold(rv or checker.oracle.last)
            params = {"watch": "true", "timeoutSeconds": str(self.rng.randint(5, 40))}
            if self.selector:
                params["labelSelector"] = self.selector
            if self.bookmarks or rv == 0:
                params["allowWatchBookmarks"] = "true"
            if rv:
                params["resourceVersion"] = str(rv)
            session = WatchSession(
                self.flt, rv, name=f"{self.name}#{self.started}", initial=rv == 0
            )
            self.current = session
            self._opened = False
            await self._watch(session, params)
            if session.end is End.OPEN:
                session.finish(End.CLOSED)
            if not self._opened:
                checker.release(hold)
                self.retries += 1
                await asyncio.sleep(0.2)
                continue
            self.started += 1
            checker.submit(SessionCheck(session, await ceiling_of(etcd), hold, self.chain))
            if session.end is End.ERROR:
                self.errors.append(f"{session.name}: {session.error}")
            if session.end is End.EXPIRED:
                rv = 0 if self.watch_list else await self._list(tally, checker)
            else:
                rv = 0 if session.initial and session.initial_rv is None else session.last_rv

    async def _watch(self, session: WatchSession, params: dict[str, str]) -> None:
        """One watch request, until it ends or the watcher is stopped (then CLOSED)."""
        stream = asyncio.create_task(self._stream(session, params))
        stop = asyncio.create_task(self.stopping.wait())
        try:
            await asyncio.wait({stream, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            stream.cancel()
        session.cut = not stream.done()
        try:
            await stream
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            if self._opened:
                session.cut = True
                session.finish(End.TERMINATED, f"{type(error).__name__}: {error}")

    async def _stream(self, session: WatchSession, params: dict[str, str]) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0)
        async with self.server.get(self.path, params=params, timeout=timeout) as response:
            if response.status in (429, 504):
                return
            self._opened = True
            if response.status != 200:
                session.finish(End.ERROR, f"{response.status} {await response.read()!r}")
                return
            initial: dict[str, int] = {}
            async for raw in response.content:
                if not raw.strip():
                    continue
                event = json.loads(raw)
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    code = int(obj.get("code") or 0)
                    end = End.EXPIRED if code == 410 else End.ERROR
                    session.finish(end, f"{code} {obj.get('message', '')}")
                    return
                meta = obj["metadata"]
                rv = int(meta["resourceVersion"])
                annotations = meta.get("annotations") or {}
                initial_end = kind == BOOKMARK and annotations.get(INITIAL_END) == "true"
                key = "" if kind == BOOKMARK else event_key(obj)
                if session.initial and session.initial_rv is None:
                    if initial_end:
                        self.state = initial
                    elif kind != BOOKMARK:
                        initial[key] = rv
                elif kind == DELETED:
                    self.state.pop(key, None)
                elif kind != BOOKMARK:
                    self.state[key] = rv
                session.record(kind, key, rv, initial_end=initial_end)
                if not session.initial or session.initial_rv is not None:
                    self.last_rv = max(self.last_rv, rv)
                    if kind != BOOKMARK:
                        self._sample(rv)

    def _sample(self, rv: int) -> None:
        now = time.monotonic()
        if now - self._sampled >= 0.1:
            self._sampled = now
            self.delivered.append(rv)


async def ceiling_of(etcd: EtcdClient) -> int:
    """etcd's revision now: nothing a session that has ended was delivered may be above it.
    Asked again while etcd is busy (a member being defragmented answers nothing)."""
    while True:
        with contextlib.suppress(EtcdError):
            return await etcd.current_revision(PREFIX.encode())
        await asyncio.sleep(0.5)


async def rewatch(
    watcher: Watcher, rv: int, *, through: int | None = None, seconds: float = 60.0
) -> WatchSession:
    """A watch with ``watcher``'s filter from ``rv``, read until an event or bookmark at
    ``through`` (then it vouches for everything up to it) or for ``seconds``. A 410 ends it
    as EXPIRED; the caller judges whether that was legitimate."""
    session = WatchSession(watcher.flt, rv, name=f"{watcher.name} re-watch at {rv}")
    # Until the server ends the stream or ``through`` arrives, the timer may cut it.
    session.cut = True
    params = {"watch": "true", "resourceVersion": str(rv), "timeoutSeconds": "60"}
    if watcher.selector:
        params["labelSelector"] = watcher.selector
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0)
    with contextlib.suppress(TimeoutError):
        async with (
            asyncio.timeout(seconds),
            watcher.server.get(watcher.path, params=params, timeout=timeout) as response,
        ):
            if response.status != 200:
                session.finish(End.ERROR, f"{response.status}")
                return session
            async for raw in response.content:
                if not raw.strip():
                    continue
                event = json.loads(raw)
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    code = int(obj.get("code") or 0)
                    end = End.EXPIRED if code == 410 else End.ERROR
                    session.finish(end, f"{code} {obj.get('message', '')}")
                    return session
                event_rv = int(obj["metadata"]["resourceVersion"])
                session.record(kind, "" if kind == BOOKMARK else event_key(obj), event_rv)
                if through is not None and event_rv >= through:
                    session.synced_to = through
                    break
            else:
                session.cut = False
    session.finish(End.CLOSED)
    return session


async def probe(
    watchers: Sequence[Watcher],
    checker: RunningChecks,
    etcd: EtcdClient,
    rng: random.Random,
    until: float,
) -> list[WatchSession]:
    """Every few seconds, a watch from an rv some watcher was delivered, any age the oracle
    still holds: it must get what etcd did since, or 410 once that rv has left the cache's
    history window. Returns the probes (their events are checked and may be dropped)."""
    probes: list[WatchSession] = []
    while time.monotonic() < until:
        await asyncio.sleep(rng.uniform(1.0, 4.0))
        watcher = rng.choice(watchers)
        floor = checker.oracle.first - 1
        delivered = [rv for rv in watcher.delivered if rv >= floor]
        if not delivered:
            continue
        hold = checker.hold(rng.choice(delivered))
        try:
            session = await rewatch(watcher, hold, seconds=2.0)
        except aiohttp.ClientError:
            checker.release(hold)
            continue
        checker.submit(SessionCheck(session, await ceiling_of(etcd), hold))
        probes.append(WatchSession(session.flt, session.start_rv, end=session.end))
    return probes


# -- etcd's database ------------------------------------------------------------------------


@dataclass
class Storage:
    """etcd's database over the run (module note), and what the soak did to it."""

    endpoints: list[str]
    #: (t, each member's file bytes, each member's in-use bytes), members in endpoint order.
    samples: list[tuple[float, list[int], list[int]]] = field(default_factory=list)
    #: (t, the revision etcd was compacted to by then).
    compacted: list[tuple[float, int]] = field(default_factory=list)
    #: Alarms seen: "t s: member <id> <alarm>", each once.
    alarms: list[str] = field(default_factory=list)
    defragmentations: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    async def sample(self, etcd: EtcdClient, t: float) -> None:
        sizes, in_use = [], []
        for endpoint in self.endpoints:
            status = await etcd.status(endpoint, timeout=60.0)
            sizes.append(int(status.dbSize))
            in_use.append(int(status.dbSizeInUse))
        self.samples.append((t, sizes, in_use))
        self.compacted.append((t, await compacted_revision(etcd)))
        for raised in await etcd.alarms():
            line = f"member {raised.memberID:x} {rpc_pb2.AlarmType.Name(raised.alarm)}"
            if not any(a.endswith(line) for a in self.alarms):
                self.alarms.append(f"{t:.0f} s: {line}")

    async def maintain(
        self, etcd: EtcdClient, t: float, free_fraction: float, min_bytes: int
    ) -> None:
        """Defragment the one member (if any) whose free pages are at least
        ``free_fraction`` of its file and ``min_bytes``, as an operator's cron'd
        ``etcdctl defrag`` would: one member at a time, the others keep serving."""
        if not free_fraction or not self.samples:
            return
        _, sizes, in_use = self.samples[-1]
        candidates = [
            (size - used, endpoint, size, used)
            for endpoint, size, used in zip(self.endpoints, sizes, in_use, strict=True)
            if size - used >= max(min_bytes, free_fraction * size)
        ]
        if not candidates:
            return
        _, endpoint, size, used = max(candidates)
        started = time.monotonic()
        await etcd.defragment(endpoint, timeout=120.0)
        seconds = time.monotonic() - started
        after = await etcd.status(endpoint, timeout=60.0)
        self.defragmentations.append(
            {
                "t": round(t, 1),
                "endpoint": endpoint,
                "db_before": size,
                "in_use_before": used,
                "db_after": int(after.dbSize),
                "seconds": round(seconds, 2),
            }
        )

    def largest_file(self) -> list[tuple[float, int]]:
        return [(t, max(sizes)) for t, sizes, _ in self.samples]


# -- metrics and memory ---------------------------------------------------------------------


def consistency_checks(metrics_text: str) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for line in metrics_text.splitlines():
        if line.startswith("apiserver_storage_consistency_checks_total{"):
            labels, value = line.rsplit(" ", 1)
            status = labels.split('status="', 1)[1].split('"', 1)[0]
            counts[status] += int(float(value))
    counts["inconsistencies"] = metric_sums(metrics_text, ["watchcache_inconsistencies_total"])[0]
    return dict(counts)


def metric_sums(metrics_text: str, names: Sequence[str]) -> list[int]:
    """Each named metric summed over its label sets."""
    sums = dict.fromkeys(names, 0.0)
    for line in metrics_text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in sums:
            sums[name] += float(line.rsplit(" ", 1)[1])
    return [int(sums[name]) for name in names]


#: Per server: its caches' history capacity, snapshots and bytes they alone pin, summed;
#: and the engine's chunks for nodes and items together (the bulk of RSS).
CACHE_GAUGES = (
    "watch_cache_capacity",
    "watchcache_snapshots",
    "watchcache_snapshot_pinned_bytes",
    "watchcache_engine_memory_bytes",
)


def growth_after(
    samples: Sequence[tuple[float, int]],
    warmup: float,
    measured: float = 30.0,
    *,
    window: float = 0.0,
) -> dict[str, Any]:
    """Growth of a sampled size after the warm-up (``warmup`` seconds): the median of the
    first three samples after it against the median of the last three; with ``window``,
    the largest sample in the first ``window`` seconds after the warm-up against the
    largest in the last ``window`` seconds (for a saw-tooth: etcd's bytes in use fall at
    each compaction, a member's file at each defragmentation, and what must not grow is
    the high-water mark). None when the run left less than ``measured`` seconds (and
    ``window``) after the warm-up: too short to tell growth from filling."""
    peak = max((value for _, value in samples), default=0)
    after = [(t, value) for t, value in samples if t >= warmup]
    end = samples[-1][0] if samples else 0.0
    if end - warmup < max(measured, window) or len(after) < 6:
        needed = max(measured, window)
        reason = f"run too short: {end:.0f} s, warm-up {warmup:.0f} s + {needed:.0f} s needed"
        return {"growth": None, "reason": reason, "peak": peak}
    baseline: float
    final: float
    if window:
        baseline = max(value for t, value in after if t <= warmup + window)
        final = max(value for t, value in after if t >= end - window)
    else:
        baseline = statistics.median(value for _, value in after[:3])
        final = statistics.median(value for _, value in after[-3:])
    return {
        "baseline": baseline,
        "final": final,
        "peak": peak,
        "growth": (final - baseline) / baseline,
        "warmup_seconds": warmup,
        "window_seconds": window,
    }


def rss_growth(server: Server, warmup: float, window: float) -> dict[str, Any]:
    """:func:`growth_after` of RSS (KiB), its high-water mark in the first ``window``
    seconds after the warm-up against the last ``window``, with the event history's
    capacity then and at the end: a capacity that doubled after the warm-up (Kubernetes'
    sizing: the write rate rose past capacity / 75 s) fills with events and snapshots,
    which is growth but not a leak. A high-water mark, because RSS is a saw-tooth: the
    snapshots kept between two compactions pin path copies, and the engine gives the
    chunks they free back (node_pool.hpp)."""
    judged = growth_after(server.rss_kib, warmup, window=window)
    memory = {f"{k}_kib" if k in ("baseline", "final", "peak") else k: v for k, v in judged.items()}
    if judged["growth"] is not None:
        capacities = [capacity for t, capacity, *_ in server.caches if t >= warmup]
        memory["history_capacity"] = [capacities[0], capacities[-1]] if capacities else None
    return memory


async def sample(
    *,
    servers: Sequence[Server],
    clients: Sequence[aiohttp.ClientSession],
    etcd: EtcdClient,
    storage: Storage,
    changes_made: Callable[[], int],
    changes: list[tuple[float, int]],
    args: argparse.Namespace,
    until: float,
    t0: float,
) -> None:
    """Every ``--sample-every`` until ``until`` and once after: RSS and event history of
    each server, etcd's database, the changes made so far; then the defragmentation the
    policy calls for."""
    while True:
        last = time.monotonic() >= until
        for server, client in zip(servers, clients, strict=True):
            t = time.monotonic() - t0
            with contextlib.suppress(OSError, RuntimeError):
                server.rss_kib.append((t, server.rss()))
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with client.get("/metrics") as response:
                    gauges = metric_sums(await response.text(), CACHE_GAUGES)
                server.caches.append((t, *gauges))
        t = time.monotonic() - t0
        changes.append((t, changes_made()))
        try:
            await storage.sample(etcd, t)
            if not last:
                await storage.maintain(
                    etcd, t, args.defragment_free_fraction, args.defragment_min_bytes
                )
        except EtcdError as error:
            storage.errors.append(f"{t:.0f} s: {error}")
        if last:
            return
        await asyncio.sleep(max(0.0, min(args.sample_every, until - time.monotonic())))


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_of(servers: Sequence[Server], cluster: EtcdCluster) -> dict[str, float]:
    """CPU seconds so far of each server, of etcd's members together, and of this process
    (the load generator, the checks and the oracle's watch)."""
    used = {s.name: cpu_seconds(s.process.pid) for s in servers}
    used["etcd"] = sum(cpu_seconds(m.pid) for m in cluster.members if m.pid is not None)
    used["soak"] = cpu_seconds(os.getpid())
    return used


# -- the direct writer ----------------------------------------------------------------------


class DirectWriter:
    """etcd_writer.py running as a process of its own (module note of that script)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.cpu_seconds = 0.0

    async def finish(self, tally: Traffic) -> dict[str, Any]:
        """Its report once it has stopped (at the end of its ``--seconds``); the writes
        etcd refused for lack of space count as the servers' would."""
        try:
            async with asyncio.timeout(60):
                out, _ = await self.process.communicate()
        except TimeoutError:
            tally.unexpected.append("the direct writer did not stop within 60 s")
            return {"changes": 0, "error": "did not stop"}
        try:
            report: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            tally.unexpected.append(f"the direct writer exited {self.process.returncode}: {out!r}")
            return {"changes": 0, "error": "no report"}
        self.cpu_seconds = report["cpu_seconds"]
        tally.refused_for_space += report["refused_for_space"]
        if report["failed"]:
            tally.unexpected.append(
                f"direct writes failed: {report['failed']}: {report['failures'][:3]}"
            )
        return report


@contextlib.asynccontextmanager
async def direct_writer(
    cluster: EtcdCluster, args: argparse.Namespace, seconds: float, seed: int
) -> AsyncIterator[DirectWriter | None]:
    """Start etcd_writer.py for ``seconds`` when ``--direct-write-rate`` asks for it; stop
    it by PID on the way out, whatever happened."""
    if not args.direct_write_rate:
        yield None
        return
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(ETCD_WRITER),
        "--endpoints", ",".join(cluster.endpoints),
        "--rate", f"{args.direct_write_rate:g}",
        "--seconds", f"{seconds:g}",
        "--namespaces", ",".join(NAMESPACES),
        "--object-bytes", str(args.object_bytes or 1024),
        "--seed", str(seed),
        "--batch", str(args.direct_batch),
        "--in-flight", "64",
        stdout=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield DirectWriter(process)
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


# -- the run --------------------------------------------------------------------------------


async def write_sentinel(server: aiohttp.ClientSession, rng: random.Random) -> int:
    body = configmap(SENTINEL_NAMESPACE, SENTINEL, rng)
    # Every watcher's filter selects it: app=a (in (a,b) too), a tier that is not x.
    body["metadata"]["labels"] = {"app": "a", "tier": "sentinel"}
    path = f"/api/v1/namespaces/{SENTINEL_NAMESPACE}/configmaps"
    async with server.delete(f"{path}/{SENTINEL}") as response:
        await response.read()
    async with server.post(path, json=body) as response:
        response.raise_for_status()
        return int((await response.json())["metadata"]["resourceVersion"])


def make_watchers(clients: Sequence[aiohttp.ClientSession], rng: random.Random) -> list[Watcher]:
    watchers: list[Watcher] = []
    for i, client in enumerate(clients):
        seed = rng.random
        watchers += [
            Watcher(f"s{i} all+bm", client, None, "", random.Random(seed()), bookmarks=True),
            Watcher(f"s{i} app in (a,b)", client, None, "app in (a,b)", random.Random(seed())),
            Watcher(f"s{i} soak-0 tier!=x+bm", client, "soak-0", "tier!=x",
                    random.Random(seed()), bookmarks=True),
            Watcher(f"s{i} watch-list app=a", client, None, "app=a", random.Random(seed()),
                    watch_list=True),
        ]  # fmt: skip
    return watchers


async def soak(
    args: argparse.Namespace, cluster: EtcdCluster, servers: list[Server]
) -> dict[str, Any]:
    rng = random.Random(args.seed)
    tally = Traffic()
    duration = args.minutes * 60
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                aiohttp.ClientSession(
                    base_url=s.url,
                    connector=aiohttp.TCPConnector(limit=args.writers + args.workers + 32),
                    timeout=aiohttp.ClientTimeout(total=60.0),
                )
            )
            for s in servers
        ]
        etcd = await stack.enter_async_context(EtcdClient(cluster.endpoints, timeout=30.0))
        for namespace in NAMESPACES:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            async with clients[0].post("/api/v1/namespaces", json=body) as response:
                assert response.status in (201, 409), await response.text()
        first = await etcd.current_revision(PREFIX.encode()) + 1
        recorder = await stack.enter_async_context(OracleRecorder(etcd, PREFIX))
        await recorder.start(first)
        checker = RunningChecks(recorder, args.oracle_retention)
        background = [
            asyncio.create_task(checker.run(), name="checker"),
            asyncio.create_task(checker.forget(), name="forget"),
        ]

        watchers = make_watchers(clients, rng)
        watch_tasks = [
            asyncio.create_task(w.run(tally, checker, etcd), name=w.name) for w in watchers
        ]
        storage = Storage(list(etcd.endpoints))
        changes: list[tuple[float, int]] = []
        cpu_before = cpu_of(servers, cluster)
        cpu_before["etcd_writer"] = 0.0
        load_before = os.getloadavg()[0]
        t0 = time.monotonic()
        until = t0 + duration
        sampler = asyncio.create_task(
            sample(
                servers=servers,
                clients=clients,
                etcd=etcd,
                storage=storage,
                changes_made=lambda: recorder.recorded,
                changes=changes,
                args=args,
                until=until,
                t0=t0,
            )
        )
        workload = Workload(clients, etcd, tally, args)
        progress = asyncio.create_task(
            report_progress(recorder, tally, servers, storage, t0=t0, until=until)
        )
        writer = await stack.enter_async_context(
            direct_writer(cluster, args, duration, rng.randrange(2**32))
        )
        _, _, probes = await asyncio.gather(
            asyncio.gather(*(workload.write(until, rng.random()) for _ in range(args.writers))),
            asyncio.gather(*(workload.read(until, rng.random()) for _ in range(args.workers))),
            probe(watchers, checker, etcd, random.Random(rng.random()), until),
        )
        traffic_seconds = time.monotonic() - t0
        direct = await writer.finish(tally) if writer is not None else None
        cpu_after = cpu_of(servers, cluster)
        if writer is not None:
            cpu_after["etcd_writer"] = writer.cpu_seconds
        machine = {
            "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "cores": os.cpu_count(),
            "cpu_cores_used": {
                name: round((cpu_after[name] - cpu_before[name]) / traffic_seconds, 2)
                for name in cpu_after
            },
        }
        await sampler
        progress.cancel()

        sentinel = await write_sentinel(clients[0], rng)
        try:
            async with asyncio.timeout(120):
                while any(w.last_rv < sentinel for w in watchers):
                    await asyncio.sleep(0.05)
        except TimeoutError:
            behind = [w.name for w in watchers if w.last_rv < sentinel]
            tally.unexpected.append(f"watchers never saw the last write at {sentinel}: {behind}")
        for watcher in watchers:
            if watcher.current is not None and watcher.last_rv >= sentinel:
                watcher.current.synced_to = sentinel
            watcher.stopping.set()
        try:
            async with asyncio.timeout(60):
                ends = await asyncio.gather(*watch_tasks, return_exceptions=True)
            for watcher, end in zip(watchers, ends, strict=True):
                if isinstance(end, BaseException):
                    tally.unexpected.append(f"{watcher.name} failed: {end!r}")
        except TimeoutError:
            tally.unexpected.append("watchers did not stop within 60 s")
        for watcher in watchers:
            hold = checker.hold(watcher.last_rv)
            checker.submit(
                StateCheck(f"{watcher.name} state", watcher.flt, watcher.last_rv,
                           dict(watcher.state), hold)
            )  # fmt: skip
        try:
            async with asyncio.timeout(300):
                await checker.queue.join()
        except TimeoutError:
            checker.failures.append(f"{checker.queue.qsize()} checks left after 300 s")

        validator = checker.validator
        try:
            await recorder.wait_for(sentinel)
        except (RecordingLostError, TimeoutError) as error:
            checker.failures.append(f"{type(error).__name__}: {error}")
        rewatches = 0
        for watcher in watchers:
            latest = watcher.chain.with_events
            if latest is None or checker.failures:
                continue
            floor = checker.oracle.first - 1
            rvs = sorted({e.rv for e in latest.changes if floor <= e.rv < sentinel})
            for rv in rng.sample(rvs, min(2, len(rvs))):
                again = await rewatch(watcher, rv, through=sentinel)
                if again.end is End.EXPIRED:
                    # Its latest session is recent: far inside the cache's history window.
                    again.finish(End.ERROR, f"410 re-watching at {rv}: {again.error}")
                validator.check_resumed(latest, again)
                rewatches += 1
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)

        final_lists = {}
        for server, client in zip(servers, clients, strict=True):
            listed = await list_pages([client], None, {"limit": "500"}, rng, tally)
            want = await etcd_selected(etcd, None, "", listed.rv)
            same = listed.items == want
            final_lists[server.name] = {
                "rv": listed.rv,
                "objects": len(listed.items),
                "equal": same,
            }
            if not same:
                tally.mismatch(f"final list of {server.name}: {differences(listed.items, want)}")

        checks: dict[str, dict[str, int]] = {}
        for server, client in zip(servers, clients, strict=True):
            async with client.get("/metrics") as response:
                checks[server.name] = consistency_checks(await response.text())
        last = await etcd.current_revision(PREFIX.encode())
        recorded = {
            "changes": recorder.recorded,
            "mean_object_bytes": round(recorder.value_bytes / recorder.puts)
            if recorder.puts
            else 0,
            "forgotten_through": checker.forgotten_through,
            "error": str(recorder.error) if recorder.error else None,
        }

    return summarize_run(
        args=args, tally=tally, servers=servers, watchers=watchers, checker=checker,
        storage=storage, changes=changes, first=first, last=last, sentinel=sentinel,
        probes=probes, rewatches=rewatches,
        final_lists=final_lists, checks=checks, recorded=recorded,
        traffic_seconds=traffic_seconds, machine=machine, direct=direct,
    )  # fmt: skip


def summarize_run(
    *,
    args: argparse.Namespace,
    tally: Traffic,
    servers: Sequence[Server],
    watchers: Sequence[Watcher],
    checker: RunningChecks,
    storage: Storage,
    changes: Sequence[tuple[float, int]],
    first: int,
    last: int,
    sentinel: int,
    probes: list[WatchSession],
    rewatches: int,
    final_lists: dict[str, Any],
    checks: dict[str, dict[str, int]],
    recorded: dict[str, Any],
    traffic_seconds: float,
    machine: dict[str, Any],
    direct: dict[str, Any] | None,
) -> dict[str, Any]:
    validator = checker.validator
    violations = validator.violations
    lost = [v for v in violations if v.guarantee is Guarantee.RELIABLE and "lost" in v.message]
    duplicated = [v for v in violations if v.guarantee is Guarantee.UNIQUE]
    warmup = max(args.warmup * args.minutes * 60, args.min_warmup)
    # Two compaction intervals: the file's and the servers' high-water marks are reached
    # once per interval.
    window = max(30.0, 2 * args.compaction_interval)
    memory = {s.name: rss_growth(s, warmup, window) for s in servers}
    database = growth_after(storage.largest_file(), warmup, window=window)
    failed_checks = sum(c.get("failure", 0) for c in checks.values())
    ok_checks = sum(c.get("success", 0) for c in checks.values())
    inconsistencies = sum(c.get("inconsistencies", 0) for c in checks.values())
    compactions = sorted({rev for _, rev in storage.compacted if rev})
    nospace = [a for a in storage.alarms if "NOSPACE" in a]
    verdicts = {
        "no list mismatches": not tally.list_mismatches,
        "no watch violations": not violations and not checker.failures,
        "no lost events": not lost,
        "no duplicated events": not duplicated,
        "consistency checks ran and none failed": ok_checks > 0 and failed_checks == 0,
        "the detector found no inconsistency": inconsistencies == 0,
        "no server errors": not tally.server_errors,
        "no unexpected answers": not tally.unexpected,
        "every watcher synced": all(w.last_rv >= sentinel for w in watchers),
        "no NOSPACE alarm": not nospace,
        "no write refused for lack of space": tally.refused_for_space == 0,
    }
    if args.compaction_interval and traffic_seconds >= 3 * args.compaction_interval:
        verdicts["etcd was compacted during the run"] = len(compactions) >= 1
    if all(m["growth"] is not None for m in memory.values()):
        verdicts[f"RSS growth below {args.growth_limit:.0%} after warm-up"] = all(
            m["growth"] < args.growth_limit for m in memory.values()
        )
    if database["growth"] is not None:
        verdicts[f"etcd db size growth below {args.growth_limit:.0%} after warm-up"] = (
            database["growth"] < args.growth_limit
        )
    direct_changes = direct["changes"] if direct else 0
    total = tally.changes + direct_changes
    achieved = total / traffic_seconds if traffic_seconds else 0.0
    return {
        "minutes": args.minutes,
        "seed": args.seed,
        "command": args.command,
        "started": args.started,
        "code": args.code,
        "passed": all(verdicts.values()),
        "verdicts": verdicts,
        "configuration": {
            "profile": "long" if args.long else "default",
            "write_rate": args.write_rate,
            "direct_write_rate": args.direct_write_rate,
            "direct_batch": args.direct_batch,
            "writers": args.writers,
            "object_bytes": args.object_bytes,
            "workers": args.workers,
            "list_rate": args.list_rate,
            "quota_backend_bytes": args.etcd_quota_bytes,
            "compaction_interval_s": args.compaction_interval,
            "defragment_free_fraction": args.defragment_free_fraction,
            "defragment_min_bytes": args.defragment_min_bytes,
            "check_every_s": args.check_every,
            "sample_every_s": args.sample_every,
            "warmup_s": warmup,
            "growth_limit": args.growth_limit,
        },
        "write_rate": {
            "target": args.write_rate + args.direct_write_rate,
            "achieved": round(achieved, 1),
            "changes": total,
            "through_servers": tally.changes,
            "direct": direct,
            "seconds": round(traffic_seconds, 1),
            "samples": [[round(t, 1), n] for t, n in changes],
        },
        # Cores each process used over the traffic, and the machine's load around it: what
        # the rate was bound by on these shared cores.
        "machine": machine,
        "ops": dict(tally.ops),
        "ops_total": sum(tally.ops.values()),
        "status_codes": dict(tally.codes),
        "lists_checked": tally.lists_checked,
        "lists_unchecked_compacted": tally.lists_unchecked,
        "lists_expired": dict(tally.lists_expired),
        "lists_behind": dict(tally.lists_behind),
        "list_restarts": tally.list_restarts,
        "list_pages": tally.list_pages,
        "list_mismatches": tally.list_mismatches[:50],
        "etcd_revisions": {"first": first, "last": last, "changes": recorded["changes"]},
        "oracle": recorded,
        "watch": {
            "watchers": len(watchers),
            "sessions": validator.sessions_checked,
            "events_checked": validator.events_checked,
            "expired_sessions": checker.expired_sessions,
            "probes": len(probes),
            "probes_expired": sum(p.end is End.EXPIRED for p in probes),
            "rewatches": rewatches,
            "violations_by_guarantee": summarize(violations),
            "violations": [str(v) for v in violations[:50]],
            "check_failures": checker.failures[:50],
            "lost_events": len(lost),
            "duplicated_events": len(duplicated),
            "retries": sum(w.retries for w in watchers),
        },
        "final_lists": final_lists,
        "consistency_checks": checks,
        "server_errors": tally.server_errors[:50],
        "unexpected": tally.unexpected[:50],
        "refused_for_space": tally.refused_for_space,
        "etcd": {
            "members": storage.endpoints,
            "quota_backend_bytes": args.etcd_quota_bytes,
            "db_size": database,
            "samples_columns": ["t", "db_size per member", "db_size_in_use per member"],
            "samples": [[round(t, 1), sizes, used] for t, sizes, used in storage.samples],
            "compactions": len(compactions),
            "compacted": [[round(t, 1), rev] for t, rev in storage.compacted],
            "alarms": storage.alarms,
            "defragmentations": storage.defragmentations,
            "errors": storage.errors[:50],
        },
        "rss": {
            s.name: {
                **memory[s.name],
                "samples": [[round(t, 1), kib] for t, kib in s.rss_kib],
                "caches": [[round(t, 1), *gauges] for t, *gauges in s.caches],
                "caches_columns": ["t", *CACHE_GAUGES],
            }
            for s in servers
        },
    }


async def report_progress(
    recorder: OracleRecorder,
    tally: Traffic,
    servers: Sequence[Server],
    storage: Storage,
    *,
    t0: float,
    until: float,
) -> None:
    before = (0.0, 0)
    while time.monotonic() < until:
        await asyncio.sleep(min(30.0, max(1.0, until - time.monotonic())))
        now = (time.monotonic() - t0, recorder.recorded)
        rate = (now[1] - before[1]) / max(1e-9, now[0] - before[0])
        before = now
        rss = ", ".join(f"{s.name} {s.rss_kib[-1][1] // 1024} MiB" for s in servers if s.rss_kib)
        db = ""
        if storage.samples:
            _, sizes, used = storage.samples[-1]
            db = f"; etcd db {max(sizes) / MIB:.0f} MiB ({max(used) / MIB:.0f} in use)"
        print(
            f"[{now[0]:6.0f} s] changes {now[1]} ({rate:.0f}/s), lists checked "
            f"{tally.lists_checked}, mismatches {len(tally.list_mismatches)}; "
            f"RSS {rss}{db}",
            flush=True,
        )


def rss_line(name: str, memory: dict[str, Any]) -> str:
    peak = memory["peak_kib"] / 1024
    if memory["growth"] is None:
        return f"{name} peak {peak:.0f} MiB, growth not judged ({memory['reason']})"
    capacity = memory["history_capacity"]
    history = f", history capacity {capacity[0]} -> {capacity[1]}" if capacity else ""
    return (
        f"{name} {memory['baseline_kib'] / 1024:.0f} -> {memory['final_kib'] / 1024:.0f} MiB "
        f"after a {memory['warmup_seconds']:.0f} s warm-up (peak {peak:.0f}{history}), growth "
        f"{memory['growth']:+.1%}"
    )


def db_line(etcd: dict[str, Any]) -> str:
    db = etcd["db_size"]
    quota = etcd["quota_backend_bytes"]
    of = f" of a {quota / MIB:.0f} MiB quota" if quota else ""
    if db["growth"] is None:
        judged = f"growth not judged ({db['reason']})"
    else:
        judged = (
            f"{db['baseline'] / MIB:.1f} -> {db['final'] / MIB:.1f} MiB after the warm-up, "
            f"growth {db['growth']:+.1%}"
        )
    return (
        f"largest file peak {db['peak'] / MIB:.1f} MiB{of}, {judged}; {etcd['compactions']} "
        f"compactions, {len(etcd['defragmentations'])} defragmentations, alarms "
        f"{etcd['alarms'] or 'none'}"
    )


def human(summary: dict[str, Any]) -> str:
    watch = summary["watch"]
    rate = summary["write_rate"]
    lines = [
        f"soak: {summary['minutes']} min ({summary['configuration']['profile']}), seed "
        f"{summary['seed']}: {'PASSED' if summary['passed'] else 'FAILED'}",
        f"  changes {rate['changes']} in {rate['seconds']:.0f} s: {rate['achieved']:.1f}/s "
        f"(target {rate['target']:g}/s; {rate.get('through_servers', rate['changes'])} through "
        f"the servers, {(rate.get('direct') or {}).get('changes', 0)} straight into etcd); "
        f"mean object {summary['oracle']['mean_object_bytes']} B",
        f"  cores used: {summary['machine']['cpu_cores_used']}, load average "
        f"{summary['machine']['load_average']}",
        f"  ops {summary['ops_total']}: "
        + ", ".join(f"{k} {v}" for k, v in sorted(summary["ops"].items())),
        f"  lists checked against etcd {summary['lists_checked']} "
        f"({summary['list_pages']} pages), mismatches {len(summary['list_mismatches'])}, "
        f"unchecked (rv compacted) {summary['lists_unchecked_compacted']}, 410 "
        f"{summary['lists_expired'] or 0}, 504 behind {summary.get('lists_behind') or 0} "
        f"({summary['list_restarts']} restarted)",
        f"  watch: {watch['watchers']} watchers, {watch['sessions']} sessions, "
        f"{watch['events_checked']} events checked, {watch['expired_sessions']} ended by 410, "
        f"{watch['probes']} probes from old rvs ({watch['probes_expired']} got 410), "
        f"{watch['rewatches']} re-watches, violations {watch['violations_by_guarantee'] or 0}, "
        f"lost events {watch['lost_events']}, duplicated {watch['duplicated_events']}",
        "  consistency checks: "
        + "; ".join(f"{name} {counts}" for name, counts in summary["consistency_checks"].items()),
        "  RSS: " + "; ".join(rss_line(name, m) for name, m in summary["rss"].items()),
        "  etcd: " + db_line(summary["etcd"]),
    ]
    for verdict, ok in summary["verdicts"].items():
        lines.append(f"  [{'ok' if ok else 'FAIL'}] {verdict}")
    for key in ("list_mismatches", "server_errors", "unexpected"):
        for message in summary[key][:5]:
            lines.append(f"  {key}: {message}")
    for message in watch["violations"][:10] + watch["check_failures"][:5]:
        lines.append(f"  violation: {message}")
    return "\n".join(lines)


# -- options --------------------------------------------------------------------------------


def byte_size(text: str) -> int:
    """argparse type: bytes, plain or with a Ki/Mi/Gi suffix (``256Mi``)."""
    match = re.fullmatch(r"\s*(\d+)\s*(Ki|Mi|Gi)?\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 268435456 or 256Mi)")
    scale = {None: 1, "Ki": 1024, "Mi": MIB, "Gi": 1024 * MIB}[match[2]]
    return int(match[1]) * scale


#: Each configuration's values of the options that differ (module note).
PROFILES: dict[str, dict[str, Any]] = {
    "default": {
        "write_rate": 15.0,
        "writers": 2,
        "object_bytes": 0,
        "list_rate": 0.0,
        "etcd_quota_bytes": 0,
        "compaction_interval": 0.0,
        "defragment_free_fraction": 0.0,
        "direct_write_rate": 0.0,
        "direct_batch": 1,
        "json": DEFAULT_JSON,
        "plot": None,
        "readme": None,
    },
    "long": {
        "write_rate": LONG_WRITE_RATE,
        "writers": 64,
        "object_bytes": 1024,
        "list_rate": LONG_LIST_RATE,
        "etcd_quota_bytes": 256 * MIB,
        "compaction_interval": 60.0,
        "defragment_free_fraction": 0.5,
        "direct_write_rate": LONG_DIRECT_WRITE_RATE,
        "direct_batch": LONG_DIRECT_BATCH,
        "json": LONG_JSON,
        "plot": LONG_PLOT,
        "readme": LONG_README,
    },
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="traffic duration (10)")
    parser.add_argument(
        "--long", action="store_true",
        help="the long-running configuration (module note); the options below override it",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, help="summary file (results/soak[-long].json)")
    parser.add_argument("--seed", type=int, default=None, help="random seed ($WATCHCACHE_SEED)")
    parser.add_argument("--workers", type=int, default=4, help="concurrent list loops (4)")
    # A steady rate of changes keeps the event history's capacity steady. Kubernetes' sizing
    # doubles it when 75 s of events no longer fit and halves it when a quarter of it spans
    # more than 75 s, so capacity C holds for rates between C/300 and C/75 per second.
    # Unpaced, the rate follows the machine's load: in a 10 min run here it crossed C/75
    # after 8 minutes, the capacity doubled and RSS grew 19% while the history filled. 15/s
    # settles at C = 1600 (from 100, doubling while C/75 < rate), well inside 5.3-21.3/s;
    # LONG_WRITE_RATE at 6,400 (21.3-85.3/s).
    parser.add_argument(
        "--write-rate", type=float,
        help=f"changes per second, all writers together (15; long {LONG_WRITE_RATE:g}; 0: "
        "unpaced, to measure what the machine sustains)",
    )  # fmt: skip
    parser.add_argument("--writers", type=int, help="concurrent writers (2; long 64)")
    parser.add_argument(
        "--direct-write-rate", type=float,
        help="changes per second written straight into etcd by etcd_writer.py, as other "
        f"apiservers' writes arrive (0; long {LONG_DIRECT_WRITE_RATE:g})",
    )  # fmt: skip
    parser.add_argument(
        "--direct-batch", type=int,
        help=f"changes per etcd transaction of those writes (1; long {LONG_DIRECT_BATCH})",
    )  # fmt: skip
    parser.add_argument(
        "--object-bytes", type=int,
        help="stored size of the objects written (0: a mix of ~0.4, 0.6 and 1.9 KB; long 1024)",
    )  # fmt: skip
    parser.add_argument(
        "--list-rate", type=float,
        help=f"lists per second, all readers together (0: as fast as they can; long "
        f"{LONG_LIST_RATE:g})",
    )  # fmt: skip
    parser.add_argument(
        "--etcd-quota-bytes", type=byte_size,
        help="every member's --quota-backend-bytes (0: etcd's 2 GiB; long 256Mi)",
    )  # fmt: skip
    parser.add_argument(
        "--compaction-interval", type=float,
        help="the servers' --etcd-compaction-interval, seconds (0: never; long 60)",
    )  # fmt: skip
    parser.add_argument(
        "--defragment-free-fraction", type=float,
        help="defragment a member once this share of its file is free (0: never; long 0.5)",
    )  # fmt: skip
    parser.add_argument(
        "--defragment-min-bytes", type=byte_size, default=DEFAULT_DEFRAGMENT_MIN_BYTES,
        help="... and at least this many bytes (32Mi, the embedded etcd's rule)",
    )  # fmt: skip
    parser.add_argument(
        "--check-every", type=float, default=None,
        help="inconsistency detector period, seconds (default: a tenth of the run, 3-30)",
    )  # fmt: skip
    parser.add_argument("--sample-every", type=float, default=None, help="sampling period, s")
    parser.add_argument("--warmup", type=float, default=0.3, help="warm-up fraction (0.3)")
    # The event history keeps at least its 75 s window and, as Kubernetes' does, up to
    # twice that after its capacity doubles (with one snapshot per event): it fills for
    # about 150 s of steady traffic. Growth before that is filling, not leaking. etcd's
    # file grows until compaction frees pages to reuse: compaction runs one interval after
    # a server starts and compacts to the revision of one interval before, so the history
    # kept is one to two intervals long and the file reaches its size in about three.
    parser.add_argument(
        "--min-warmup", type=float, default=None,
        help="shortest warm-up, seconds (180, or 4 compaction intervals if longer: the "
        "event history and etcd's file fill first)",
    )  # fmt: skip
    parser.add_argument(
        "--growth-limit", "--rss-growth-limit", type=float, default=0.10,
        help="largest growth of RSS and etcd's db size after the warm-up (0.10 = 10%%)",
    )  # fmt: skip
    parser.add_argument(
        "--oracle-retention", type=float, default=300.0,
        help="seconds of etcd's history the watch oracle keeps for probes (300)",
    )  # fmt: skip
    parser.add_argument("--plot", type=Path, help="write the long-running plot here")
    parser.add_argument("--readme", type=Path, help="write the long-running section here")
    parser.add_argument(
        "--no-report", action="store_true", help="neither plot nor README section"
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error("--minutes must be positive")
    for name, value in PROFILES["long" if args.long else "default"].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.no_report:
        args.plot = args.readme = None
    if args.writers < 1 or args.workers < 0:
        parser.error("--writers must be at least 1 and --workers at least 0")
    if args.seed is None:
        raw = os.environ.get("WATCHCACHE_SEED", "").strip()
        args.seed = int(raw, 0) if raw else random.SystemRandom().randrange(2**32)
    seconds = args.minutes * 60
    if args.check_every is None:
        args.check_every = min(30.0, max(3.0, seconds / 10))
    if args.sample_every is None:
        args.sample_every = min(10.0, max(0.5, seconds / 60))
    if args.min_warmup is None:
        args.min_warmup = max(180.0, 4 * args.compaction_interval)
    args.command = " ".join(["tests/reliability/soak.py", *(argv or sys.argv[1:])])
    args.started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    args.code = code_under_test()
    return args


def code_under_test() -> dict[str, Any]:
    """The commit the servers ran and the files changed on top of it: the working tree is
    what ``python -m watchcache`` imports (an editable install)."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
            ).stdout.rstrip("\n")
        except (OSError, subprocess.CalledProcessError):
            return ""

    changed = git("status", "--porcelain", "--untracked-files=no", "--", "python", "cpp")
    return {
        "head": git("rev-parse", "--short", "HEAD"),
        "modified": [line[3:] for line in changed.splitlines()],
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"soak: {args.minutes} min, seed {args.seed} (WATCHCACHE_SEED={args.seed} reruns it)")
    extra = ["--quota-backend-bytes", str(args.etcd_quota_bytes)] if args.etcd_quota_bytes else []
    with (
        tempfile.TemporaryDirectory(prefix="watchcache-soak-") as tmp,
        EtcdCluster(3, extra_args=extra) as cluster,
    ):
        workdir = Path(tmp)
        servers: list[Server] = []
        try:
            for i in range(2):
                servers.append(start_server(f"server-{i}", cluster.endpoints, workdir, args))
            for server in servers:
                wait_ready(server)
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                summary = runner.run(soak(args, cluster, servers))
        finally:
            for server in servers:
                server.stop()
        if not summary["passed"]:
            for server in servers:
                print(f"--- {server.name} log tail ---\n{server.log_tail()}", file=sys.stderr)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(summary, indent=1) + "\n")
    print(human(summary))
    print(f"summary written to {args.json}")
    if args.plot or args.readme:
        from long_running import publish

        for line in publish(summary, args.json, plot=args.plot, readme=args.readme):
            print(line)
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
