"""Scenario 2 (KEP-365 pagination, KEP-4988 snapshots): a full paginated LIST of 100,000
configmaps (~1 KB) in pages of 500, served from the cache's snapshots vs read from etcd,
while 100 writes/s change the collection.

Three kinds of process, so that each RSS is its own:

  server   the apiserver in a child process, one of
             snapshots  ``watchcache serve --resources configmaps``: the first page is a
                        consistent read from the cache, every continuation is served from
                        the snapshot at the continue token's resourceVersion (KEP-4988);
             etcd       ``bench/harness.py serve-from-etcd --no-snapshots``: the apiserver with
                        snapshots and consistent reads from the cache off, so every page is
                        a Range on etcd at the first page's revision, as Kubernetes served
                        paginated LISTs before KEP-4988 (each Range also counts the rest of
                        the prefix, so a walk costs etcd O(pages x objects)).
  client   a child process (this script, ``--walk``) with a minimal keep-alive HTTP
           client: a few first pages alone (first-page latency), then one whole walk. It
           extracts each item's key and resourceVersion from the page, checks keys
           strictly increase across the walk (so no object appears twice) and that every
           page reports the first page's resourceVersion, and folds (key, rv) into a
           SHA-256 digest.
  this     loads etcd, runs the servers and clients, and writes 100 times a second to
           etcd for as long as the walks of one server run (a third each creates,
           updates and deletes configmaps).

Consistency: the walk's digest must equal the digest of etcd's own state at the first
page's revision (a Range at that revision): every object exactly once, as it was at that
rv, while writes went on. Memory: the server's and etcd's peak RSS during each walk
(VmHWM, reset just before it) and the client's own peak.

Sizes: 100,000 objects in both modes; quick: 3 walks from snapshots, 1 from etcd;
``--full``: 5 and 3. ``--objects`` overrides the count.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness import (
    KeepAliveClient,
    Server,
    distribution,
    etcd,
    etcd_pid,
    etcd_version,
    load_configmaps,
    mode,
    paced,
    parser,
    peak_rss,
    reset_peak_rss,
    rss,
)
from reporting import Headline, Report, figure, fmt_mib, fmt_ms, fmt_ratio, markdown
from watchcache.cli.load import make_object
from watchcache.etcd.client import EtcdClient
from watchcache.registry.resources import CONFIGMAPS

LIMIT = 500
WRITES_PER_SECOND = 100
FIRST_PAGES = 5
NAMESPACES = 100
PREFIX = CONFIGMAPS.prefix
_NAMES = re.compile(rb'"metadata":\{"name":"([^"]+)","namespace":"([^"]+)"')
_VERSIONS = re.compile(rb'"resourceVersion":"(\d+)"')
_ITEMS = b',"items":['


# ---------------------------------------------------------------------------------------
# The client process


def page_entries(body: bytes) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A LIST page's metadata and its items' (key, resourceVersion), in page order.
    Reads only what it needs (no JSON decoding of 500 objects): the objects are the
    loader's, whose metadata starts with name and namespace and has one resourceVersion."""
    cut = body.index(_ITEMS)
    meta: dict[str, Any] = json.loads(body[:cut] + b"}")["metadata"]
    items = body[cut:]
    names, versions = _NAMES.findall(items), _VERSIONS.findall(items)
    if len(names) != len(versions):
        raise AssertionError(f"{len(names)} names but {len(versions)} resourceVersions")
    keys = [f"{PREFIX}{ns.decode()}/{name.decode()}" for name, ns in names]
    return meta, list(zip(keys, (v.decode() for v in versions), strict=True))


async def walk(port: int, first_pages: int) -> dict[str, Any]:
    http = KeepAliveClient(port)
    first_ms = []
    for _ in range(first_pages):
        t = time.perf_counter()
        await http.get(f"/api/v1/configmaps?limit={LIMIT}")
        first_ms.append((time.perf_counter() - t) * 1e3)
    digest = hashlib.sha256()
    page_ms: list[float] = []
    items, last_key, rv, token = 0, "", "", ""
    problems: list[str] = []
    begin = time.perf_counter()
    while True:
        query = f"limit={LIMIT}" + (f"&continue={token}" if token else "")
        t = time.perf_counter()
        body = await http.get(f"/api/v1/configmaps?{query}")
        page_ms.append((time.perf_counter() - t) * 1e3)
        meta, entries = page_entries(body)
        rv = rv or meta["resourceVersion"]
        if meta["resourceVersion"] != rv:
            problems.append(f"page {len(page_ms)} at rv {meta['resourceVersion']}, not {rv}")
        for key, version in entries:
            if key <= last_key:
                problems.append(f"{key} after {last_key}")
            last_key = key
            digest.update(f"{key} {version}\n".encode())
        items += len(entries)
        token = meta.get("continue", "")
        if not token:
            break
    walk_ms = (time.perf_counter() - begin) * 1e3
    await http.close()
    return {
        "first_page_ms": [*first_ms, page_ms[0]],
        "walk_ms": walk_ms,
        "page_ms": page_ms,
        "pages": len(page_ms),
        "items": items,
        "resource_version": int(rv),
        "digest": digest.hexdigest(),
        "problems": problems[:10],
        "client_peak_rss": peak_rss(),
    }


# ---------------------------------------------------------------------------------------
# The writer and the expected state


class Writer:
    """100 writes/s to etcd, a third each creating, updating and deleting configmaps, until
    stopped; the loaded objects are the pool it updates and deletes from."""

    def __init__(self, client: EtcdClient, loaded: int, seed: int = 2) -> None:
        self.client = client
        self.alive = list(range(loaded))
        self.next_index = loaded
        self.rng = random.Random(seed)
        self.counts = {"create": 0, "update": 0, "delete": 0}
        self.seconds = 0.0
        self._stop = asyncio.Event()

    def _object(self, index: int) -> tuple[bytes, bytes]:
        key, value = make_object(CONFIGMAPS, index, 1024, f"demo-{index % NAMESPACES}")
        return key.encode(), value

    async def _write(self, i: int) -> None:
        kind = ("create", "update", "delete")[i % 3]
        if kind == "create":
            key, value = self._object(self.next_index)
            self.alive.append(self.next_index)
            self.next_index += 1
            await self.client.create(key, value)
        else:
            slot = self.rng.randrange(len(self.alive))
            key, value = self._object(self.alive[slot])
            if kind == "update":
                await self.client.put(key, value)
            else:
                self.alive[slot] = self.alive[-1]
                self.alive.pop()
                await self.client.delete(key)
        self.counts[kind] += 1

    async def run(self) -> None:
        begin = time.perf_counter()
        pending: set[asyncio.Task[None]] = set()
        async for i in paced(WRITES_PER_SECOND, 10**9):
            if self._stop.is_set():
                break
            task = asyncio.create_task(self._write(i))
            pending.add(task)
            task.add_done_callback(pending.discard)
        await asyncio.gather(*pending)
        self.seconds = time.perf_counter() - begin

    def stop(self) -> None:
        self._stop.set()

    @property
    def rate(self) -> float:
        return sum(self.counts.values()) / self.seconds if self.seconds else 0.0


async def digest_at(client: EtcdClient, revision: int) -> tuple[str, int]:
    """Digest and count of the collection as etcd holds it at ``revision``."""
    response = await client.range_prefix(PREFIX.encode(), revision=revision, keys_only=True)
    digest = hashlib.sha256()
    for kv in response.kvs:  # etcd returns keys in byte order, the walk's order
        digest.update(kv.key + f" {kv.mod_revision}\n".encode())
    return digest.hexdigest(), len(response.kvs)


# ---------------------------------------------------------------------------------------
# The orchestration


@dataclass
class WalkResult:
    path: str
    walk_ms: float
    first_page_ms: list[float]
    page_ms: list[float]
    pages: int
    items: int
    resource_version: int
    consistent: bool
    problems: list[str]
    server_rss_before: int
    server_peak_rss: int
    etcd_peak_rss: int
    client_peak_rss: int


@dataclass
class PathRun:
    path: str
    walks: list[WalkResult] = field(default_factory=list)
    writes: dict[str, int] = field(default_factory=dict)
    write_rate: float = 0.0
    sources: dict[str, int] = field(default_factory=dict)
    server_ready_seconds: float = 0.0


async def one_walk(path: str, server: Server, client: EtcdClient, etcd_process: int) -> WalkResult:
    before = rss(server.pid)
    reset_peak_rss(server.pid)
    reset_peak_rss(etcd_process)
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--walk", str(server.port), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"the walking client failed ({child.returncode})")
    server_peak, etcd_peak = peak_rss(server.pid), peak_rss(etcd_process)
    got = json.loads(out.decode().strip().splitlines()[-1])
    expected, count = await digest_at(client, got["resource_version"])
    consistent = not got["problems"] and got["digest"] == expected and got["items"] == count
    if not consistent:
        got["problems"].append(f"digest/count {got['items']} vs etcd's {count} at the rv")
    return WalkResult(
        path, got["walk_ms"], got["first_page_ms"], got["page_ms"], got["pages"],
        got["items"], got["resource_version"], consistent, got["problems"], before,
        server_peak, etcd_peak, got["client_peak_rss"],
    )  # fmt: skip


async def run_path(
    path: str, endpoints: list[str], client: EtcdClient, etcd_process: int, walks: int
) -> PathRun:
    run = PathRun(path)
    async with Server(endpoints, from_etcd=path == "etcd", snapshots=path != "etcd") as server:
        run.server_ready_seconds = server.ready_seconds
        metrics = KeepAliveClient(server.port)
        before = await metrics.lists_by_source()
        writer = Writer(client, await count_objects(client))
        writing = asyncio.create_task(writer.run())
        try:
            await asyncio.sleep(1.0)  # writes under way before the first page
            for _ in range(walks):
                run.walks.append(await one_walk(path, server, client, etcd_process))
                w = run.walks[-1]
                print(
                    f"  {path}: walk {w.walk_ms:,.0f} ms, {w.pages} pages, {w.items:,} items, "
                    f"consistent {w.consistent}",
                    flush=True,
                )
        finally:
            writer.stop()
            await writing
        after = await metrics.lists_by_source()
        await metrics.close()
    run.writes, run.write_rate = writer.counts, writer.rate
    run.sources = {k: v - before.get(k, 0) for k, v in after.items() if v > before.get(k, 0)}
    # The proof the routing is the one claimed (/metrics counts every page, first pages too).
    want = {"cache", "snapshot"} if path == "snapshots" else {"etcd"}
    if set(run.sources) != want:
        raise AssertionError(f"{path}: pages were served from {run.sources}")
    return run


async def count_objects(client: EtcdClient) -> int:
    return int((await client.range_prefix(PREFIX.encode(), count_only=True)).count)


async def scenario(objects: int, walks: dict[str, int], versions: dict[str, str]) -> list[PathRun]:
    with etcd() as cluster:
        versions["etcd"] = etcd_version(cluster)
        async with EtcdClient(cluster.endpoints, timeout=300) as client:
            t = time.perf_counter()
            await load_configmaps(client, objects, 1024, namespaces=NAMESPACES)
            print(f"loaded {objects:,} x 1 KB in {time.perf_counter() - t:.1f} s", flush=True)
            return [
                await run_path(path, cluster.endpoints, client, etcd_pid(cluster), walks[path])
                for path in ("snapshots", "etcd")
            ]


def median(values: list[float]) -> float:
    return distribution(values)["p50"]


def table(runs: list[PathRun]) -> str:
    rows = []
    for run in runs:
        w = run.walks
        rows.append([
            run.path, f"{len(w)}", f"{w[0].items:,}", fmt_ms(median([x.walk_ms for x in w])),
            fmt_ms(median([f for x in w for f in x.first_page_ms])),
            fmt_mib(max(x.server_rss_before for x in w)),
            fmt_mib(max(x.server_peak_rss for x in w)), fmt_mib(max(x.etcd_peak_rss for x in w)),
            fmt_mib(max(x.client_peak_rss for x in w)), f"{run.write_rate:.0f}/s",
            "yes" if all(x.consistent for x in w) else "NO",
        ])  # fmt: skip
    header = ["served from", "walks", "objects", "full walk (median)", "first page (median)",
              "server RSS before", "server peak RSS", "etcd peak RSS", "client peak RSS",
              "writes during", "every object once, at the first page's rv"]  # fmt: skip
    return markdown(header, rows, "lrrrrrrrrrc")


def plot(runs: list[PathRun]) -> Callable[[Path], None]:
    def draw(path: Path) -> None:
        title = (
            f"Paginated LIST (limit {LIMIT}) with {WRITES_PER_SECOND} writes/s: snapshots vs etcd"
        )
        with figure(path, title=title, ncols=3, size=(15, 4.5)) as (pages, walks, memory):
            for run in runs:
                pages.plot(run.walks[0].page_ms, label=run.path, linewidth=0.8)
            pages.set_yscale("log")
            pages.set_xlabel("page")
            pages.set_ylabel("page latency (ms, log)")
            pages.legend(fontsize=8)
            names = [run.path for run in runs]
            walks.bar(names, [median([w.walk_ms for w in run.walks]) / 1e3 for run in runs])
            walks.set_ylabel("full walk (s, median)")
            kinds = (
                ("server", "server_peak_rss"),
                ("etcd", "etcd_peak_rss"),
                ("client", "client_peak_rss"),
            )
            for i, (label, attribute) in enumerate(kinds):
                heights = [max(getattr(w, attribute) for w in run.walks) / 2**20 for run in runs]
                memory.bar(
                    [x + (i - 1) * 0.27 for x in range(len(runs))], heights, 0.27, label=label
                )
            memory.set_xticks(range(len(runs)), names)
            memory.set_ylabel("peak RSS during the walk (MiB)")
            memory.legend(fontsize=8)

    return draw


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--objects", type=int, default=100_000)
    p.add_argument("--walk", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.walk:
        print(json.dumps(asyncio.run(walk(args.walk, FIRST_PAGES))))
        return 0
    walks = {"snapshots": 5, "etcd": 3} if args.full else {"snapshots": 3, "etcd": 1}
    versions: dict[str, str] = {}
    report = Report(
        "pagination", "Scenario 2: paginated LIST from snapshots vs etcd, under writes", mode(args)
    )
    runs = asyncio.run(scenario(args.objects, walks, versions))
    snap, store = runs
    walk_ratio = median([w.walk_ms for w in store.walks]) / median([w.walk_ms for w in snap.walks])
    first = {r.path: median([f for w in r.walks for f in w.first_page_ms]) for r in runs}
    report.how = (
        f"etcd {versions.get('etcd', '?')}; {args.objects:,} configmaps of ~1 KB, limit {LIMIT}, "
        f"{WRITES_PER_SECOND} writes/s to etcd during the walks; the server, the walking client "
        f"and etcd are separate processes (the client's RSS is mostly its interpreter). "
        f"Walks from snapshots {walk_ratio:.1f}x faster. See the script's docstring for the "
        "method and the consistency check."
    )
    report.tables.append(table(runs))
    report.headline = [
        Headline(
            f"Paginated LIST, {args.objects:,} x 1 KB, limit {LIMIT}, {WRITES_PER_SECOND} writes/s",
            "full walk (median)",
            fmt_ms(median([w.walk_ms for w in snap.walks])),
            fmt_ms(median([w.walk_ms for w in store.walks])),
            "",
            f"snapshots {fmt_ratio(walk_ratio)} faster; consistent: "
            + ("yes" if all(w.consistent for r in runs for w in r.walks) else "NO"),
        ),
        Headline("", "first page (median)", fmt_ms(first["snapshots"]), fmt_ms(first["etcd"])),
        Headline(
            "",
            "server / etcd peak RSS during the walk",
            f"{fmt_mib(max(w.server_peak_rss for w in snap.walks))} / "
            f"{fmt_mib(max(w.etcd_peak_rss for w in snap.walks))}",
            f"{fmt_mib(max(w.server_peak_rss for w in store.walks))} / "
            f"{fmt_mib(max(w.etcd_peak_rss for w in store.walks))}",
        ),
    ]
    report.data = {
        "objects": args.objects,
        "limit": LIMIT,
        "writes_per_second": WRITES_PER_SECOND,
        "etcd_version": versions.get("etcd"),
        "walk_ratio": walk_ratio,
        "paths": [asdict(r) for r in runs],
    }
    report.publish_as_asked(args, plot=plot(runs))
    return 0 if all(w.consistent for r in runs for w in r.walks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
