"""What the scenario scripts share at run time: their command line, a real etcd, the
apiserver in a child process, a minimal HTTP client, pacing, loading objects, and reading
CPU time and memory of any process from /proc.

Every process started here is stopped by its PID on the way out, failures included: etcd
by :class:`~watchcache.etcd.process.EtcdCluster`, the apiserver by :class:`Server`.

``python bench/harness.py serve-from-etcd --etcd HOST:PORT --port N [--no-snapshots]`` is
the apiserver with consistent LISTs read from etcd (``watchcache serve --consistent-reads
off``) and, with ``--no-snapshots``, continuations too, so every page of a paginated LIST
is read from etcd, as Kubernetes served them before KEP-4988. ``watchcache serve`` has no
switch for snapshots; and its etcd client gives every call 10 s, while reading a whole
300,000-object prefix in one Range can take longer on a loaded machine (Kubernetes allows
a LIST 60 s), so this launcher gives etcd calls 60 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from watchcache.cli.load import load_objects, make_object
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster, die_with_parent_prefix, free_ports
from watchcache.registry.resources import CONFIGMAPS

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
README = BENCH / "README.md"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: etcd's default 2 GB backend quota is too small for 300k objects plus their history.
ETCD_ARGS = ("--quota-backend-bytes", str(8 * 2**30))
#: Objects larger than this are written one per request: etcd refuses requests above
#: 1.5 MiB (``--max-request-bytes``), so a transaction of 128 would not fit.
ONE_PER_REQUEST_BYTES = 8 * 1024


# ---------------------------------------------------------------------------------------
# Command line


def parser(doc: str | None) -> argparse.ArgumentParser:
    """The options every scenario script takes: ``--full`` (default: the quick mode),
    where results go, and which README to splice the section into."""
    first_line = (doc or "").strip().split("\n", 1)[0]
    p = argparse.ArgumentParser(description=first_line)
    p.add_argument("--full", action="store_true", help="full sizes and rounds (default: quick)")
    p.add_argument(
        "--results", type=Path, default=RESULTS, help="folder for <scenario>.json and .png"
    )
    p.add_argument("--readme", type=Path, default=README, help="README to splice results into")
    p.add_argument("--no-readme", action="store_true", help="leave the README alone")
    return p


def mode(args: argparse.Namespace) -> str:
    return "full" if args.full else "quick"


# ---------------------------------------------------------------------------------------
# Statistics


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 1]): a value that was measured, never an
    interpolation between two; with fewer than 100 samples p99 is the maximum."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    # The epsilon keeps 100 * 0.07 (7.000000000000001) at rank 7.
    rank = math.ceil(len(ordered) * q - 1e-9)
    return ordered[min(max(rank, 1), len(ordered)) - 1]


def distribution(values: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/max/mean of a sample (NaN when empty), for JSON and tables."""
    return {
        "n": float(len(values)),
        "p50": percentile(values, 0.5),
        "p90": percentile(values, 0.9),
        "p99": percentile(values, 0.99),
        "max": max(values) if values else float("nan"),
        "mean": statistics.fmean(values) if values else float("nan"),
    }


# ---------------------------------------------------------------------------------------
# Processes, from /proc


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU time of a whole process (all its threads) so far. For this
    process, ``time.process_time()`` (ns resolution); for another, /proc/<pid>/stat, in
    clock ticks (10 ms): sum it over many operations, don't trust one."""
    if pid is None or pid == os.getpid():
        return time.process_time()
    # The command name may hold spaces or parentheses; the fields follow the last ")".
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _status_kib(pid: int | None, field: str) -> int:
    path = Path(f"/proc/{pid or 'self'}/status")
    for line in path.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(f"{field} not in {path}")


def rss(pid: int | None = None) -> int:
    """Resident memory in bytes (VmRSS)."""
    return _status_kib(pid, "VmRSS")


def peak_rss(pid: int | None = None) -> int:
    """The most resident memory since the process started or since reset_peak_rss
    (VmHWM), in bytes."""
    return _status_kib(pid, "VmHWM")


def reset_peak_rss(pid: int | None = None) -> None:
    """Start VmHWM over from the current RSS (Linux: "5" into clear_refs), so the peak of
    one phase is not the peak of loading before it."""
    Path(f"/proc/{pid or 'self'}/clear_refs").write_text("5")


# ---------------------------------------------------------------------------------------
# etcd


@contextlib.contextmanager
def workspace(name: str, *, keep: bool = False) -> Iterator[Path]:
    """A fresh temporary folder ``watchcache-<name>-*`` for one run, removed at the end
    (unless ``keep``) whatever happened."""
    folder = Path(tempfile.mkdtemp(prefix=f"watchcache-{name}-"))
    try:
        yield folder
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def etcd() -> Iterator[EtcdCluster]:
    """One etcd 3.5 member on free loopback ports in a temp folder, removed after."""
    with EtcdCluster(1, extra_args=ETCD_ARGS) as cluster:
        yield cluster


def etcd_pid(cluster: EtcdCluster) -> int:
    pid = cluster.members[0].pid
    assert pid is not None, "etcd is not running"
    return pid


def etcd_version(cluster: EtcdCluster) -> str:
    return cluster.members[0].version()


async def load_configmaps(
    client: EtcdClient, count: int, size: int, *, namespaces: int = 100, start: int = 0
) -> None:
    """Create ``count`` configmaps of about ``size`` bytes (``watchcache load``'s objects:
    labels ``app=a|b|c``, so a selector ``app=nobody`` matches none). Large objects are
    written one per request, 4 in flight."""
    if size <= ONE_PER_REQUEST_BYTES:
        await load_objects(
            client, CONFIGMAPS, count=count, size=size, namespaces=namespaces, start=start
        )
        return
    semaphore = asyncio.Semaphore(4)

    async def one(i: int) -> None:
        key, value = make_object(CONFIGMAPS, i, size, f"demo-{i % namespaces}")
        async with semaphore:
            await client.create(key.encode(), value)

    await asyncio.gather(*(one(i) for i in range(start, start + count)))


# ---------------------------------------------------------------------------------------
# The apiserver in a child process


class Server:
    """The apiserver on a free port, serving configmaps from ``endpoints``, in a child
    process of its own (so its CPU time and RSS are its own): ``watchcache serve``, or with
    ``from_etcd`` the launcher below (consistent LISTs from etcd; with ``snapshots=False``
    continuations too). Use ``async with``: it waits for /readyz (the first list from etcd
    done) and stops the child by PID."""

    def __init__(
        self, endpoints: Sequence[str], *, from_etcd: bool = False, snapshots: bool = True
    ) -> None:
        self.port = free_ports(1)[0]
        self.url = f"http://127.0.0.1:{self.port}"
        etcd_list = ",".join(endpoints)
        if from_etcd:
            self.command = [
                sys.executable, __file__, "serve-from-etcd", "--etcd", etcd_list,
                "--port", str(self.port), *([] if snapshots else ["--no-snapshots"]),
            ]  # fmt: skip
        else:
            self.command = [
                sys.executable, "-m", "watchcache", "serve", "--etcd", etcd_list,
                "--port", str(self.port), "--resources", "configmaps", "--log-level", "warning",
            ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None
        self.ready_seconds = 0.0

    @property
    def pid(self) -> int:
        assert self.process is not None, "the server is not running"
        return self.process.pid

    async def __aenter__(self) -> Server:
        started = time.perf_counter()
        # Dies with this process even when it is killed outright, as etcd does.
        self.process = subprocess.Popen(
            [*die_with_parent_prefix(), *self.command],
            stdout=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        try:
            await self._ready(600)
        except BaseException:
            self.stop()
            raise
        self.ready_seconds = time.perf_counter() - started
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()

    async def _ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(base_url=self.url) as http:
            while time.monotonic() < deadline:
                with contextlib.suppress(httpx.TransportError):
                    if (await http.get("/readyz")).status_code == 200:
                        return
                assert self.process is not None
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.command[:4]} exited ({self.process.returncode})")
                await asyncio.sleep(0.2)
        raise TimeoutError("the apiserver did not become ready")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def serve_from_etcd(endpoints: list[str], port: int, *, snapshots: bool) -> None:
    """The apiserver with LISTs read from etcd (see the module note)."""
    import uvicorn

    from watchcache.apiserver.app import ApiServer
    from watchcache.etcd.version import ConsistentReadsMode

    async with EtcdClient(endpoints, timeout=60) as client:
        server = ApiServer(
            client, [CONFIGMAPS], consistent_reads=ConsistentReadsMode.OFF, snapshots=snapshots
        )
        config = uvicorn.Config(server.app(), port=port, log_level="warning", lifespan="on")
        await uvicorn.Server(config).serve()


@dataclass
class Response:
    status: int
    body: bytes


class KeepAliveClient:
    """The smallest HTTP/1.1 GET client: one keep-alive connection, Content-Length or
    chunked bodies (a LIST over 128 KiB is streamed in chunks). httpx spends 2-3 ms of
    Python per 500 KB page, more than the server does; with this the client's share is
    small, as with a Go client such as kubectl."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, path: str) -> Response:
        reused = self.writer is not None
        if self.writer is None:
            # A 300 MB body arrives in fewer pauses with a buffer above the 64 KB default.
            self.reader, self.writer = await asyncio.open_connection(
                "127.0.0.1", self.port, limit=2**20
            )
        assert self.reader is not None
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            await self.close()
            if not reused:
                raise
            # The server closed the connection after it sat idle (uvicorn: 5 s); a GET
            # is safe to send again on a new one.
            return await self.request(path)
        status = int(head.split(b" ", 2)[1])
        lines = head.lower().split(b"\r\n")
        for line in lines:
            if line.startswith(b"content-length:"):
                return Response(status, await self.reader.readexactly(int(line[15:])))
        if b"transfer-encoding: chunked" not in lines:
            raise RuntimeError(f"GET {path}: neither a Content-Length nor chunks: {head!r}")
        pieces = []
        while size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16):
            pieces.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)
        await self.reader.readuntil(b"\r\n")  # the end of the last chunk (no trailers)
        return Response(status, b"".join(pieces))

    async def get(self, path: str) -> bytes:
        response = await self.request(path)
        if response.status != 200:
            raise RuntimeError(f"GET {path}: {response.status} {response.body[:200]!r}")
        return response.body

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    async def lists_by_source(self) -> dict[str, int]:
        """The server's ``watchcache_list_total`` counters by source (cache, snapshot,
        etcd), from /metrics: proof of where the LISTs being timed were served from."""
        counts: dict[str, int] = {}
        for line in (await self.get("/metrics")).decode().splitlines():
            if line.startswith("watchcache_list_total{") and 'resource="configmaps"' in line:
                source = line.split(',source="', 1)[1].split('"', 1)[0]
                counts[source] = counts.get(source, 0) + int(float(line.rsplit(" ", 1)[1]))
        return counts


# ---------------------------------------------------------------------------------------
# Pacing


async def paced(rate: float, count: int) -> AsyncIterator[int]:
    """Yield 0..count-1, the i-th at ``start + i / rate``, or at once when the caller is
    behind (then without catching up in bursts it could not sustain either)."""
    begin = time.perf_counter()
    for i in range(count):
        delay = begin + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        yield i


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="bench helpers (see the module note)")
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve-from-etcd", help="the apiserver with LISTs from etcd")
    serve.add_argument("--etcd", required=True, help="endpoints, comma-separated")
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("--no-snapshots", action="store_true", help="continuations from etcd")
    args = p.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(
            serve_from_etcd(args.etcd.split(","), args.port, snapshots=not args.no_snapshots)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
