"""``watchcache serve``: the apiserver under uvicorn, on a given etcd or on its own.

Without ``--etcd`` it starts an etcd of its own (the installed binary, data in the user's
data folder, so objects survive restarts) and stops it on the way out — Ctrl-C, SIGTERM,
or an error — by PID; etcd also dies with this process if it is killed outright.
At start it makes sure the namespaces every cluster has exist (``default``,
``kube-system``, ``kube-public``) and, when asked, loads demo configmaps once.

Hostile clients: uvicorn's HTTP protocol has no deadline for a request's head and no cap on
its size, so a client could hold a connection forever by sending headers one byte at a time
(slowloris) or make the server buffer an endless header. :func:`uvicorn_config` serves with
:class:`GuardedHttpProtocol`, which adds the limits Kubernetes' Go server has (see there).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from watchcache.apiserver.app import DEFAULT_MAX_LIMIT, ApiServer
from watchcache.apiserver.loader import load_objects, namespace_object
from watchcache.apiserver.resources import CONFIGMAPS, DEFAULT_RESOURCES, ResourceSpec
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster, embedded_etcd
from watchcache.etcd.version import ConsistentReadsMode
from watchcache.progress import Progress

log = logging.getLogger(__name__)

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public")


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "watchcache" / "etcd"


@dataclass
class ServeOptions:
    etcd: Sequence[str] = ()
    host: str = "127.0.0.1"
    port: int = 8080
    resources: Sequence[ResourceSpec] = DEFAULT_RESOURCES
    data_dir: Path = field(default_factory=default_data_dir)
    demo_configmaps: int = 0
    max_limit: int = DEFAULT_MAX_LIMIT
    consistent_reads: ConsistentReadsMode = ConsistentReadsMode.AUTO
    log_level: str = "info"
    #: Run the inconsistency detector (consistency.py) every this many seconds; None: off.
    check_consistency_every: float | None = None


@dataclass
class LoadOptions:
    resource: ResourceSpec
    count: int
    size: int = 1024
    namespaces: int = 1
    etcd: Sequence[str] = ()
    data_dir: Path = field(default_factory=default_data_dir)


def run_load(options: LoadOptions) -> int:
    """``watchcache load``: on ``--etcd``, or on the embedded etcd (started for the load
    when no ``serve`` is running on it)."""
    return asyncio.run(_load(options))


async def _load(options: LoadOptions) -> int:
    etcd: EtcdCluster | None = None
    endpoints = list(options.etcd)
    if not endpoints:
        running = embedded_etcd(options.data_dir, reuse_running=True)
        if running.members[0].healthy():
            endpoints = running.endpoints  # a running serve's etcd: leave it running
        else:
            etcd = embedded_etcd(options.data_dir)
            await asyncio.to_thread(etcd.start)
            endpoints = etcd.endpoints
    try:
        async with EtcdClient(endpoints, timeout=60) as client:
            progress = Progress("load", options.count, sys.stderr)
            done = 0

            def step(n: int) -> None:
                nonlocal done
                done += n
                progress.update(done)

            created = await load_objects(
                client,
                options.resource,
                count=options.count,
                size=options.size,
                namespaces=options.namespaces,
                progress=step,
            )
            progress.finish()
            print(
                f"created {created:,} {options.resource.name} ({options.count - created:,} existed)"
            )
    finally:
        if etcd is not None:
            etcd.stop()
    return 0


def run(options: ServeOptions) -> int:
    logging.basicConfig(
        level=options.log_level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    etcd: EtcdCluster | None = None
    endpoints = list(options.etcd)
    if not endpoints:
        # Started from the main thread, so it also dies if this process is killed outright.
        etcd = embedded_etcd(options.data_dir)
        etcd.start()
        endpoints = etcd.endpoints
        log.info(
            "embedded etcd %s on %s, data in %s",
            etcd.members[0].version(),
            endpoints[0],
            options.data_dir,
        )
    # uvicorn re-raises the signal that stopped it; SIGTERM then unwinds like Ctrl-C, so
    # the embedded etcd is stopped cleanly below instead of dying with the process.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(options, endpoints, embedded=etcd is not None))
    finally:
        signal.signal(signal.SIGTERM, previous)
        if etcd is not None:
            etcd.stop()
    return 0


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


async def serve(options: ServeOptions, endpoints: Sequence[str], *, embedded: bool) -> None:
    async with EtcdClient(endpoints) as client:
        await ensure_namespaces(client, options.resources)
        if options.demo_configmaps and CONFIGMAPS in options.resources:
            await load_demo(client, options.demo_configmaps)
        server = ApiServer(
            client,
            options.resources,
            max_limit=options.max_limit,
            consistent_reads=options.consistent_reads,
            check_consistency_every=options.check_consistency_every,
        )
        config = uvicorn_config(
            server.app(), host=options.host, port=options.port, log_level=options.log_level
        )
        print_banner(options, endpoints, embedded=embedded)
        await uvicorn.Server(config).serve()


#: Go's net/http as Kubernetes configures it: ``ReadHeaderTimeout`` 32 s, ``MaxHeaderBytes``
#: 1 MiB (Go's default); the body deadline is the apiserver's default ``--request-timeout``.
HEAD_TIMEOUT_SECONDS = 32.0
MAX_HEAD_BYTES = 1 << 20
BODY_TIMEOUT_SECONDS = 60.0
#: How long a response sent before its request body arrived (an early 413, 400, 404) keeps
#: discarding what the client still sends before the connection closes. Closing at once
#: would reset a client still writing, and it could lose the response; reading on forever
#: would let it stream a body without end (Go waits 500 ms for the same reason).
LINGER_SECONDS = 1.0

_HEADERS_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\n\r\n"
    b"431 Request Header Fields Too Large"
)


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with deadlines and a size cap on what a client sends.

    * the head of a request (request line and headers) must arrive within ``head_timeout``
      of the connection opening, or of its first byte on a kept-alive connection; else the
      connection is closed without an answer, as Go does (idle kept-alive connections are
      uvicorn's ``timeout_keep_alive``);
    * a head past ``max_head_bytes`` gets Go's plain-text 431 and the connection ends as
      below (the count is per read, so it may pass the cap by one read);
    * a request body must arrive within ``body_timeout`` of its head; else the connection
      closes and the handler sees a client disconnect;
    * a response completed before its request body was read (an early 413) ends the
      connection: half-closed at once, input discarded for ``LINGER_SECONDS``, then closed.

    Memory per connection is thereby bounded by the head cap plus the body limit the
    handlers enforce (``admission.MAX_BODY_BYTES``), and time by the deadlines. The hooks
    overridden are uvicorn's parser callbacks; everything else is uvicorn's.
    """

    head_timeout: float = HEAD_TIMEOUT_SECONDS
    max_head_bytes: int = MAX_HEAD_BYTES
    body_timeout: float = BODY_TIMEOUT_SECONDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._in_head = True
        self._head_bytes = 0
        self._lingering = False

    def _arm(self, seconds: float, expired: Callable[[], None]) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _close(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm(self.head_timeout, self._close)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        if self._in_head:
            self._head_bytes += len(data)
            if self._head_bytes > self.max_head_bytes:
                self.transport.write(_HEADERS_TOO_LARGE)
                self._linger()
                return
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        if self._deadline is None:
            self._arm(self.head_timeout, self._close)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._arm(self.body_timeout, self._close)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        cycle = self.cycle
        unread_body = cycle is not None and cycle.response_complete and cycle.more_body
        super().on_response_complete()
        if self.cycle is None or self.cycle.response_complete:
            # No pipelined request is in flight: the next byte starts a head, and counts.
            self._in_head = True
        if unread_body and not self.transport.is_closing():
            self._unset_keepalive_if_required()
            self._linger()

    def _linger(self) -> None:
        """End the connection after what was written, ignoring what still comes in."""
        self._lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._arm(LINGER_SECONDS, self._close)


def guarded_protocol(
    *,
    head_timeout: float = HEAD_TIMEOUT_SECONDS,
    max_head_bytes: int = MAX_HEAD_BYTES,
    body_timeout: float = BODY_TIMEOUT_SECONDS,
) -> type[GuardedHttpProtocol]:
    """:class:`GuardedHttpProtocol` with other limits (uvicorn takes a class, not an
    instance, so the limits are class attributes of a subclass)."""
    limits = {
        "head_timeout": head_timeout,
        "max_head_bytes": max_head_bytes,
        "body_timeout": body_timeout,
    }
    return type("GuardedHttpProtocol", (GuardedHttpProtocol,), limits)


def uvicorn_config(
    app: Any,
    *,
    host: str,
    port: int,
    log_level: str = "info",
    timeout_graceful_shutdown: int = 3,
    protocol: type[GuardedHttpProtocol] = GuardedHttpProtocol,
) -> uvicorn.Config:
    """How ``watchcache serve`` runs ``app`` under uvicorn: its lifespan on, and
    ``protocol`` (the guarded HTTP protocol, see :func:`guarded_protocol`) for HTTP/1.1."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=timeout_graceful_shutdown,
        lifespan="on",
        http=protocol,
    )


async def ensure_namespaces(client: EtcdClient, resources: Sequence[ResourceSpec]) -> None:
    if not any(r.name == "namespaces" for r in resources):
        return
    for name in SYSTEM_NAMESPACES:
        await client.create(f"/registry/namespaces/{name}".encode(), namespace_object(name))


async def load_demo(client: EtcdClient, count: int) -> None:
    existing = await client.range_prefix(CONFIGMAPS.prefix.encode(), count_only=True)
    if existing.count:
        return
    log.info("loading %d demo configmaps (first run)", count)
    await load_objects(client, CONFIGMAPS, count=count, size=512, namespaces=10)


def print_banner(options: ServeOptions, endpoints: Sequence[str], *, embedded: bool) -> None:
    url = f"http://{options.host}:{options.port}"
    print(
        f"""
watchcache apiserver on {url} (etcd: {", ".join(endpoints)})
Try:
  kubectl --server {url} get configmaps -A --chunk-size=50
  kubectl --server {url} get cm -n demo-0 -l app=a
  kubectl --server {url} get cm -n default -w
  kubectl --server {url} create configmap hello --from-literal=k=v
  curl -s '{url}/api/v1/configmaps?limit=2'
Ctrl-C stops it{" and its etcd" if embedded else ""}.
""",
        flush=True,
    )
