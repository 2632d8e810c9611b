"""Soak: two ``watchcache serve`` processes on a 3-member etcd, random traffic over HTTP.

    .venv/bin/python tests/reliability/soak.py --minutes 10 --json results/soak.json

What runs (a script, not a pytest module: ``make soak`` runs it for ``SOAK_MINUTES``):

* a 3-member etcd (stopped by PID at the end) and two apiservers as subprocesses serving
  configmaps and namespaces, with the inconsistency detector on
  (``--check-consistency-every``);
* two writers doing random creates, updates (PUT with and without a resourceVersion),
  merge patches and deletes against either server, paced to ``--write-rate`` changes a
  second, and ``--workers`` readers listing as fast as they can: paginated or not, with
  pages taken alternately from both servers (continue tokens are portable), at no
  resourceVersion (consistent), ``0``, NotOlderThan or Exact an earlier list's rv, with
  label selectors, in one namespace or all. Every list is compared with etcd at the list's
  rv (a Range at that revision, the selector applied by the validator's own selector
  code); a consistent list must also be at least as new as etcd's revision read just
  before it;
* eight watchers (four per server) as informers are: list, watch from the list's rv with a
  timeout of 5-40 s, resume from the last rv seen, list again after a 410; or a watch-list
  (initial state, then changes). Filters: everything with bookmarks, ``app in (a,b)``,
  one namespace with ``tier!=x`` and bookmarks, and a watch-list of ``app=a``;
* every few seconds a probe: a watch from an older rv some watcher was delivered (it must
  get etcd's changes since, or a 410 once that rv has left the cache's event history);
* each server's RSS sampled from /proc throughout.

At the end a last write every watcher selects; once every watcher has it, etcd's history
since the start is read back and every watch session is validated
(tests/support/watch_validator.py), two watches per watcher are restarted from rvs they
were delivered and must get exactly the rest, each watcher's state and each server's full
LIST are compared with etcd, and each server's ``/metrics`` gives the detector's counts.

Passes when: 0 list mismatches, 0 watch violations (so 0 lost events), 0 failed consistency
checks, no 5xx, and each server's RSS grew less than ``--rss-growth-limit`` (10%) between
the end of the warm-up (the first 30% of the run, at least 180 s) and the end (not judged
when fewer than 30 s remain after the warm-up). Writes a JSON summary to
``--json`` and prints a human one; exits 1 when a guarantee failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

# The validator lives with the test support code; this file runs as a script.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from watch_validator import (
    BOOKMARK,
    DELETED,
    End,
    Guarantee,
    LabelSelector,
    WatchFilter,
    WatchSession,
    WatchValidator,
    read_oracle,
    read_state,
    summarize,
)

from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster, free_ports

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
#: Concurrent writers sharing the write pace (two hide one write's latency).
WRITERS = 2
DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "soak.json"


# -- the servers ----------------------------------------------------------------------------


@dataclass
class Server:
    """One ``watchcache serve`` subprocess, stopped by PID."""

    name: str
    port: int
    log: Path
    process: subprocess.Popen[bytes]
    rss_kib: list[tuple[float, int]] = field(default_factory=list)
    #: (t, event history capacity, stored snapshots, bytes they pin), summed over resources.
    caches: list[tuple[float, int, int, int]] = field(default_factory=list)

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


def start_server(name: str, endpoints: Sequence[str], workdir: Path, check_every: float) -> Server:
    port = free_ports(1)[0]
    log = workdir / f"{name}.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "watchcache", "serve", "--etcd", ",".join(endpoints),
             "--port", str(port), "--resources", "configmaps,namespaces",
             "--log-level", "warning", "--check-consistency-every", str(check_every)],
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


def key_of(namespace: str, name: str) -> str:
    return f"{PREFIX}{namespace}/{name}"


def configmap(namespace: str, name: str, rng: random.Random, rv: str = "") -> dict[str, Any]:
    labels = {"app": rng.choice(APPS)}
    if rng.random() < 0.7:
        labels["tier"] = rng.choice(TIERS)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if rv:
        metadata["resourceVersion"] = rv
    size = rng.choice((16, 200, 1500))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {"blob": rng.randbytes(size // 2).hex()},
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
    lists_checked: int = 0
    list_pages: int = 0
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
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"{status}: {body[:200]}")
        self.status = status


async def list_pages(
    servers: Sequence[httpx.AsyncClient],
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
        response = await rng.choice(servers).get(path, params=query)
        tally.list_pages += 1
        if response.status_code != 200:
            raise ListError(response.status_code, response.text)
        body = response.json()
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


def differences(got: dict[str, int], want: dict[str, int]) -> str:
    missing = sorted(want.keys() - got.keys())[:3]
    extra = sorted(got.keys() - want.keys())[:3]
    other = sorted(k for k in got.keys() & want.keys() if got[k] != want[k])[:3]
    return f"missing {missing} extra {extra} other rv {other}"


# -- the workload ---------------------------------------------------------------------------


class Workload:
    def __init__(
        self,
        servers: Sequence[httpx.AsyncClient],
        etcd: EtcdClient,
        tally: Traffic,
        rng: random.Random,
        write_rate: float = 0.0,
    ) -> None:
        self.servers = servers
        self.etcd = etcd
        self.tally = tally
        self.rng = rng
        self.seen_rvs: list[int] = []
        self.write_interval = 1.0 / write_rate if write_rate > 0 else 0.0
        self._next_write = 0.0

    async def _pace(self) -> None:
        """Wait for the next write slot: the writers share one pace of ``write_rate``."""
        now = time.monotonic()
        slot = max(now, self._next_write)
        self._next_write = slot + self.write_interval
        if slot > now:
            await asyncio.sleep(slot - now)

    def _refund(self) -> None:
        """A write that changed nothing (404, 409) gives its slot back, so the pace is of
        changes: what sizes the cache's event history."""
        self._next_write -= self.write_interval

    async def write(self, until: float, seed: float) -> None:
        """Creates, updates, patches and deletes, paced (apart from the readers, whose
        speed follows the machine's load)."""
        rng = random.Random(seed)
        while time.monotonic() < until:
            await self._pace()
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
            except httpx.HTTPError as error:
                self.tally.unexpected.append(f"{type(error).__name__}: {error}")

    async def read(self, until: float, seed: float) -> None:
        rng = random.Random(seed)
        while time.monotonic() < until:
            try:
                await self.list(rng)
            except httpx.HTTPError as error:
                self.tally.unexpected.append(f"{type(error).__name__}: {error}")
            await asyncio.sleep(rng.random() * 0.02)

    def _target(self, rng: random.Random) -> tuple[httpx.AsyncClient, str, str]:
        namespace = rng.choice(NAMESPACES)
        return rng.choice(self.servers), namespace, f"cm-{rng.randrange(NAMES_PER_NAMESPACE):03d}"

    def _write(self, op: str, response: httpx.Response) -> None:
        self.tally.ops[op] += 1
        self.tally.code(op, response.status_code)
        if response.status_code >= 300:
            self._refund()
        if response.status_code >= 500:
            self.tally.server_errors.append(f"{op}: {response.status_code} {response.text[:200]}")
        elif response.status_code not in EXPECTED_WRITE_CODES:
            self.tally.unexpected.append(f"{op}: {response.status_code} {response.text[:200]}")

    async def create(self, rng: random.Random) -> None:
        server, namespace, name = self._target(rng)
        body = configmap(namespace, name, rng)
        response = await server.post(f"/api/v1/namespaces/{namespace}/configmaps", json=body)
        self._write("create", response)

    async def update(self, rng: random.Random) -> None:
        server, namespace, name = self._target(rng)
        path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
        rv = ""
        if rng.random() < 0.5:
            # With the resourceVersion just read: a compare-and-swap that may conflict.
            current = await server.get(path)
            self.tally.code("get", current.status_code)
            if current.status_code != 200:
                self._refund()
                return
            rv = current.json()["metadata"]["resourceVersion"]
        response = await server.put(path, json=configmap(namespace, name, rng, rv))
        self._write("update", response)

    async def patch(self, rng: random.Random) -> None:
        server, namespace, name = self._target(rng)
        patch = {
            "metadata": {"labels": {"app": rng.choice(APPS)}},
            "data": {"n": str(rng.random())},
        }
        response = await server.patch(
            f"/api/v1/namespaces/{namespace}/configmaps/{name}",
            content=json.dumps(patch),
            headers={"content-type": "application/merge-patch+json"},
        )
        self._write("patch", response)

    async def delete(self, rng: random.Random) -> None:
        server, namespace, name = self._target(rng)
        response = await server.delete(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
        self._write("delete", response)

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
            floor = rng.choice(self.seen_rvs[-200:])
            params["resourceVersion"] = str(floor)
            if mode == "exact":
                params["resourceVersionMatch"] = "Exact"
        op = f"list {mode}{' paged' if 'limit' in params else ''}"
        self.tally.ops[op] += 1
        try:
            listed = await list_pages(self.servers, namespace, params, rng, self.tally)
        except ListError as error:
            self.tally.code("list", error.status)
            if error.status >= 500:
                self.tally.server_errors.append(f"{op}: {error}")
            else:
                self.tally.unexpected.append(f"{op}: {error}")
            return
        except AssertionError as error:
            self.tally.mismatch(f"{op} {params} in {namespace or 'all'}: {error}")
            return
        self.tally.code("list", 200)
        self.seen_rvs.append(listed.rv)
        if mode == "exact" and "resourceVersion" in params and listed.rv != floor:
            self.tally.mismatch(f"{op}: asked for exactly {floor}, got {listed.rv}")
        elif listed.rv < floor:
            self.tally.mismatch(f"{op}: list at {listed.rv}, older than the {floor} asked for")
        want = await etcd_selected(self.etcd, namespace, selector, listed.rv)
        self.tally.lists_checked += 1
        if listed.items != want:
            self.tally.mismatch(
                f"{op} {params} in {namespace or 'all'} at {listed.rv}: "
                f"{differences(listed.items, want)}"
            )


# -- the watchers ---------------------------------------------------------------------------


class Watcher:
    """An informer over HTTP (see the module note)."""

    def __init__(
        self,
        name: str,
        server: httpx.AsyncClient,
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
        self.sessions: list[WatchSession] = []
        self.lists: list[Listed] = []
        self.state: dict[str, int] = {}
        self.last_rv = 0
        self.retries = 0
        self.errors: list[str] = []

    @property
    def path(self) -> str:
        if self.namespace:
            return f"/api/v1/namespaces/{self.namespace}/configmaps"
        return "/api/v1/configmaps"

    async def _list(self, tally: Traffic) -> int:
        while True:
            params = {"labelSelector": self.selector} if self.selector else {}
            try:
                listed = await list_pages([self.server], self.namespace, params, self.rng, tally)
            except (ListError, httpx.HTTPError) as error:
                self.errors.append(f"list: {error}")
                self.retries += 1
                await asyncio.sleep(0.2)
                continue
            self.lists.append(listed)
            self.state = dict(listed.items)
            self.last_rv = max(self.last_rv, listed.rv)
            return listed.rv

    async def run(self, tally: Traffic) -> None:
        rv = 0 if self.watch_list else await self._list(tally)
        while True:
            params = {"watch": "true", "timeoutSeconds": str(self.rng.randint(5, 40))}
            if self.selector:
                params["labelSelector"] = self.selector
            if self.bookmarks or rv == 0:
                params["allowWatchBookmarks"] = "true"
            if rv:
                params["resourceVersion"] = str(rv)
            name = f"{self.name}#{len(self.sessions)}"
            session = WatchSession(self.flt, rv, name=name, initial=rv == 0)
            try:
                await self._stream(session, params)
            except httpx.HTTPError as error:
                if session in self.sessions:
                    session.finish(End.TERMINATED, f"{type(error).__name__}: {error}")
                else:
                    self.retries += 1
                    await asyncio.sleep(0.2)
            finally:
                if session.end is End.OPEN:
                    session.finish(End.CLOSED)
            if session.end is End.ERROR:
                self.errors.append(f"{session.name}: {session.error}")
            if session.end is End.EXPIRED:
                rv = 0 if self.watch_list else await self._list(tally)
            elif session in self.sessions:
                rv = 0 if session.initial and session.initial_rv is None else session.last_rv

    async def _stream(self, session: WatchSession, params: dict[str, str]) -> None:
        timeout = httpx.Timeout(10.0, read=None)
        async with self.server.stream("GET", self.path, params=params, timeout=timeout) as response:
            if response.status_code in (429, 504):
                self.retries += 1
                await asyncio.sleep(0.2)
                return
            self.sessions.append(session)
            if response.status_code != 200:
                session.finish(End.ERROR, f"{response.status_code} {await response.aread()!r}")
                return
            initial: dict[str, int] = {}
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                event = json.loads(line)
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


async def rewatch(
    watcher: Watcher, rv: int, *, through: int | None = None, seconds: float = 60.0
) -> WatchSession:
    """A watch with ``watcher``'s filter from ``rv``, read until an event or bookmark at
    ``through`` (then it vouches for everything up to it) or for ``seconds``. A 410 ends it
    as EXPIRED; the caller judges whether that was legitimate."""
    session = WatchSession(watcher.flt, rv, name=f"{watcher.name} re-watch at {rv}")
    params = {"watch": "true", "resourceVersion": str(rv), "timeoutSeconds": "60"}
    if watcher.selector:
        params["labelSelector"] = watcher.selector
    timeout = httpx.Timeout(10.0, read=None)
    with contextlib.suppress(TimeoutError):
        async with (
            asyncio.timeout(seconds),
            watcher.server.stream("GET", watcher.path, params=params, timeout=timeout) as response,
        ):
            if response.status_code != 200:
                session.finish(End.ERROR, f"{response.status_code}")
                return session
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                event = json.loads(line)
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
    session.finish(End.CLOSED)
    return session


async def probe(
    watchers: Sequence[Watcher], rng: random.Random, until: float, probes: list[WatchSession]
) -> None:
    """Every few seconds, a watch from an rv some watcher was delivered, any age: it must
    get what etcd did since, or 410 once that rv has left the cache's history window."""
    while time.monotonic() < until:
        await asyncio.sleep(rng.uniform(1.0, 4.0))
        watcher = rng.choice(watchers)
        delivered = [e.rv for session in watcher.sessions for e in session.changes]
        if delivered:
            with contextlib.suppress(httpx.HTTPError):
                probes.append(await rewatch(watcher, rng.choice(delivered), seconds=2.0))


# -- metrics and memory ---------------------------------------------------------------------


def consistency_checks(metrics_text: str) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for line in metrics_text.splitlines():
        if line.startswith("apiserver_storage_consistency_checks_total{"):
            labels, value = line.rsplit(" ", 1)
            status = labels.split('status="', 1)[1].split('"', 1)[0]
            counts[status] += int(float(value))
    return dict(counts)


def metric_sums(metrics_text: str, names: Sequence[str]) -> list[int]:
    """Each named metric summed over its label sets."""
    sums = dict.fromkeys(names, 0.0)
    for line in metrics_text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in sums:
            sums[name] += float(line.rsplit(" ", 1)[1])
    return [int(sums[name]) for name in names]


CACHE_GAUGES = ("watch_cache_capacity", "watchcache_snapshots", "watchcache_snapshot_pinned_bytes")


def rss_growth(server: Server, warmup: float, measured: float = 30.0) -> dict[str, Any]:
    """Growth of RSS after the warm-up (``warmup`` seconds): the median of the first three
    samples after it against the median of the last three. None when the run left less
    than ``measured`` seconds after the warm-up: too short to tell growth from filling.
    Also reports the event history's capacity then and at the end: a capacity that doubled
    after the warm-up (Kubernetes' sizing: the write rate rose past capacity / 75 s) fills
    with events and snapshots, which is growth but not a leak."""
    samples = server.rss_kib
    peak = max((rss for _, rss in samples), default=0)
    after = [rss for t, rss in samples if t >= warmup]
    end = samples[-1][0] if samples else 0.0
    capacities = [capacity for t, capacity, _, _ in server.caches if t >= warmup]
    if end - warmup < measured or len(after) < 6:
        reason = f"run too short: {end:.0f} s, warm-up {warmup:.0f} s + {measured:.0f} s needed"
        return {"growth": None, "reason": reason, "peak_kib": peak}
    baseline = statistics.median(after[:3])
    final = statistics.median(after[-3:])
    return {
        "baseline_kib": baseline,
        "final_kib": final,
        "peak_kib": peak,
        "growth": (final - baseline) / baseline,
        "warmup_seconds": warmup,
        "history_capacity": [capacities[0], capacities[-1]] if capacities else None,
    }


async def sample_memory(
    servers: Sequence[Server],
    clients: Sequence[httpx.AsyncClient],
    every: float,
    until: float,
    t0: float,
) -> None:
    while time.monotonic() < until:
        for server, client in zip(servers, clients, strict=True):
            t = time.monotonic() - t0
            with contextlib.suppress(OSError, RuntimeError):
                server.rss_kib.append((t, server.rss()))
            with contextlib.suppress(httpx.HTTPError):
                gauges = metric_sums((await client.get("/metrics")).text, CACHE_GAUGES)
                server.caches.append((t, gauges[0], gauges[1], gauges[2]))
        await asyncio.sleep(every)


# -- the run --------------------------------------------------------------------------------


async def write_sentinel(server: httpx.AsyncClient, rng: random.Random) -> int:
    body = configmap(SENTINEL_NAMESPACE, SENTINEL, rng)
    # Every watcher's filter selects it: app=a (in (a,b) too), a tier that is not x.
    body["metadata"]["labels"] = {"app": "a", "tier": "sentinel"}
    path = f"/api/v1/namespaces/{SENTINEL_NAMESPACE}/configmaps"
    await server.delete(f"{path}/{SENTINEL}")
    response = await server.post(path, json=body)
    response.raise_for_status()
    return int(response.json()["metadata"]["resourceVersion"])


async def soak(
    args: argparse.Namespace, cluster: EtcdCluster, servers: list[Server]
) -> dict[str, Any]:
    rng = random.Random(args.seed)
    tally = Traffic()
    duration = args.minutes * 60
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=32)
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=s.url, timeout=30.0, limits=limits)
            )
            for s in servers
        ]
        etcd = await stack.enter_async_context(EtcdClient(cluster.endpoints, timeout=30.0))
        for namespace in NAMESPACES:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            response = await clients[0].post("/api/v1/namespaces", json=body)
            assert response.status_code in (201, 409), response.text
        first = await etcd.current_revision(PREFIX.encode()) + 1

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
        watch_tasks = [asyncio.create_task(w.run(tally), name=w.name) for w in watchers]

        t0 = time.monotonic()
        until = t0 + duration
        sampler = asyncio.create_task(sample_memory(servers, clients, args.sample_every, until, t0))
        workload = Workload(clients, etcd, tally, rng, args.write_rate)
        progress = asyncio.create_task(report_progress(tally, watchers, servers, t0, until))
        probes: list[WatchSession] = []
        await asyncio.gather(
            *(workload.write(until, rng.random()) for _ in range(WRITERS)),
            *(workload.read(until, rng.random()) for _ in range(args.workers)),
            probe(watchers, random.Random(rng.random()), until, probes),
        )
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
            if watcher.sessions and watcher.last_rv >= sentinel:
                watcher.sessions[-1].synced_to = sentinel

        last = await etcd.current_revision(PREFIX.encode())
        oracle = await read_oracle(etcd, PREFIX, first, last)
        validator = WatchValidator(oracle)
        for watcher in watchers:
            latest = watcher.sessions[-1] if watcher.sessions else None
            if latest is None or latest.start_rv == 0:
                continue
            rvs = sorted({e.rv for e in latest.changes if e.rv < sentinel})
            for rv in rng.sample(rvs, min(2, len(rvs))):
                again = await rewatch(watcher, rv, through=sentinel)
                if again.end is End.EXPIRED:
                    # Its latest session is recent: far inside the cache's history window.
                    again.finish(End.ERROR, f"410 re-watching at {rv}: {again.error}")
                validator.check_resumed(latest, again)
        for session in probes:
            validator.check(session)
        for task in watch_tasks:
            task.cancel()
        await asyncio.gather(*watch_tasks, return_exceptions=True)
        for watcher in watchers:
            for session in watcher.sessions:
                if session.end is End.OPEN:
                    session.finish(End.CLOSED)
                validator.check(session)
            validator.check_chain(watcher.sessions)
            for listed in watcher.lists:
                validator.check_state(f"{watcher.name} list", watcher.flt, listed.rv, listed.items)
            validator.check_state(
                f"{watcher.name} state", watcher.flt, watcher.last_rv, watcher.state
            )

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
            checks[server.name] = consistency_checks((await client.get("/metrics")).text)

    violations = validator.violations
    lost = [v for v in violations if v.guarantee is Guarantee.RELIABLE and "lost" in v.message]
    warmup = max(args.warmup * duration, args.min_warmup)
    memory = {s.name: rss_growth(s, warmup) for s in servers}
    failed_checks = sum(c.get("failure", 0) for c in checks.values())
    ok_checks = sum(c.get("success", 0) for c in checks.values())
    verdicts = {
        "no list mismatches": not tally.list_mismatches,
        "no watch violations": not violations,
        "no lost events": not lost,
        "consistency checks ran and none failed": ok_checks > 0 and failed_checks == 0,
        "no server errors": not tally.server_errors,
        "no unexpected answers": not tally.unexpected,
        "every watcher synced": all(w.last_rv >= sentinel for w in watchers),
    }
    if all(m["growth"] is not None for m in memory.values()):
        verdicts[f"RSS growth below {args.rss_growth_limit:.0%} after warm-up"] = all(
            m["growth"] < args.rss_growth_limit for m in memory.values()
        )
    return {
        "minutes": args.minutes,
        "seed": args.seed,
        "passed": all(verdicts.values()),
        "verdicts": verdicts,
        "ops": dict(tally.ops),
        "ops_total": sum(tally.ops.values()),
        "status_codes": dict(tally.codes),
        "lists_checked": tally.lists_checked,
        "list_pages": tally.list_pages,
        "list_mismatches": tally.list_mismatches[:50],
        "etcd_revisions": {"first": first, "last": last, "changes": len(oracle.changes)},
        "watch": {
            "watchers": len(watchers),
            "sessions": validator.sessions_checked,
            "events_checked": validator.events_checked,
            "expired_sessions": sum(s.end is End.EXPIRED for w in watchers for s in w.sessions),
            "probes": len(probes),
            "probes_expired": sum(s.end is End.EXPIRED for s in probes),
            "violations_by_guarantee": summarize(violations),
            "violations": [str(v) for v in violations[:50]],
            "lost_events": len(lost),
            "retries": sum(w.retries for w in watchers),
        },
        "final_lists": final_lists,
        "consistency_checks": checks,
        "server_errors": tally.server_errors[:50],
        "unexpected": tally.unexpected[:50],
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
    tally: Traffic, watchers: Sequence[Watcher], servers: Sequence[Server], t0: float, until: float
) -> None:
    while time.monotonic() < until:
        await asyncio.sleep(min(30.0, max(1.0, until - time.monotonic())))
        rss = ", ".join(f"{s.name} {s.rss_kib[-1][1] // 1024} MiB" for s in servers if s.rss_kib)
        events = sum(len(s.events) for w in watchers for s in w.sessions)
        print(
            f"[{time.monotonic() - t0:6.0f} s] ops {sum(tally.ops.values())}, lists checked "
            f"{tally.lists_checked}, watch events {events}, mismatches "
            f"{len(tally.list_mismatches)}; RSS {rss}",
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


def human(summary: dict[str, Any]) -> str:
    watch = summary["watch"]
    lines = [
        f"soak: {summary['minutes']} min, seed {summary['seed']}: "
        f"{'PASSED' if summary['passed'] else 'FAILED'}",
        f"  ops {summary['ops_total']}: "
        + ", ".join(f"{k} {v}" for k, v in sorted(summary["ops"].items())),
        f"  lists checked against etcd {summary['lists_checked']} "
        f"({summary['list_pages']} pages), mismatches {len(summary['list_mismatches'])}",
        f"  watch: {watch['watchers']} watchers, {watch['sessions']} sessions, "
        f"{watch['events_checked']} events checked, {watch['expired_sessions']} ended by 410, "
        f"{watch['probes']} probes from old rvs ({watch['probes_expired']} got 410), "
        f"violations {watch['violations_by_guarantee'] or 0}, lost events {watch['lost_events']}",
        "  consistency checks: "
        + "; ".join(f"{name} {counts}" for name, counts in summary["consistency_checks"].items()),
        "  RSS: " + "; ".join(rss_line(name, m) for name, m in summary["rss"].items()),
    ]
    for verdict, ok in summary["verdicts"].items():
        lines.append(f"  [{'ok' if ok else 'FAIL'}] {verdict}")
    for key in ("list_mismatches", "server_errors", "unexpected"):
        for message in summary[key][:5]:
            lines.append(f"  {key}: {message}")
    for message in watch["violations"][:10]:
        lines.append(f"  violation: {message}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="traffic duration (10)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="summary file")
    parser.add_argument("--seed", type=int, default=None, help="random seed ($WATCHCACHE_SEED)")
    parser.add_argument("--workers", type=int, default=4, help="concurrent list loops (4)")
    # A steady rate of changes keeps the event history's capacity steady. Kubernetes' sizing
    # doubles it when 75 s of events no longer fit and halves it when a quarter of it spans
    # more than 75 s, so capacity C holds for rates between C/300 and C/75 per second.
    # Unpaced, the rate follows the machine's load: in a 10 min run here it crossed C/75
    # after 8 minutes, the capacity doubled and RSS grew 19% while the history filled. 15/s
    # settles at C = 1600 (from 100, doubling while C/75 < rate), well inside 5.3-21.3/s.
    parser.add_argument(
        "--write-rate", type=float, default=15.0,
        help="successful writes per second, both writers together (15; 0: unpaced)",
    )  # fmt: skip
    parser.add_argument(
        "--check-every", type=float, default=None,
        help="inconsistency detector period, seconds (default: a tenth of the run, 3-30)",
    )  # fmt: skip
    parser.add_argument("--sample-every", type=float, default=None, help="RSS sampling period")
    parser.add_argument("--warmup", type=float, default=0.3, help="warm-up fraction (0.3)")
    # The event history keeps at least its 75 s window and, as Kubernetes' does, up to
    # twice that after its capacity doubles (with one snapshot per event): it fills for
    # about 150 s of steady traffic. Growth before that is filling, not leaking.
    parser.add_argument(
        "--min-warmup", type=float, default=180.0,
        help="shortest warm-up, seconds (180: the cache's event history fills first)",
    )  # fmt: skip
    parser.add_argument("--rss-growth-limit", type=float, default=0.10, help="0.10 = 10%%")
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error("--minutes must be positive")
    if args.seed is None:
        raw = os.environ.get("WATCHCACHE_SEED", "").strip()
        args.seed = int(raw, 0) if raw else random.SystemRandom().randrange(2**32)
    seconds = args.minutes * 60
    if args.check_every is None:
        args.check_every = min(30.0, max(3.0, seconds / 10))
    if args.sample_every is None:
        args.sample_every = min(10.0, max(0.5, seconds / 60))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"soak: {args.minutes} min, seed {args.seed} (WATCHCACHE_SEED={args.seed} reruns it)")
    with tempfile.TemporaryDirectory(prefix="watchcache-soak-") as tmp, EtcdCluster(3) as cluster:
        workdir = Path(tmp)
        servers: list[Server] = []
        try:
            for i in range(2):
                name = f"server-{i}"
                servers.append(start_server(name, cluster.endpoints, workdir, args.check_every))
            for server in servers:
                wait_ready(server)
            summary = asyncio.run(soak(args, cluster, servers))
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
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
