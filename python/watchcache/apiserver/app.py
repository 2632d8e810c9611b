"""The ASGI apiserver: Kubernetes' core/v1 routes for the configured resources.

Reads (list, get, watch) are served by each resource's :class:`SyncedCache`; writes go to
etcd through :class:`~watchcache.registry.object_store.ObjectStore` and come back through the
watch. Every failure is a ``metav1.Status`` with its HTTP code; watch errors that happen
after the stream started (and 410s, which kubectl needs in the stream) are ``ERROR``
events. List and get answer a ``meta.k8s.io/v1`` Table when the Accept header asks for one
(``kubectl get``).

:class:`ApiServer` owns the caches; :meth:`ApiServer.app` is the ASGI app, which can be
mounted in any ASGI app (its lifespan starts and stops the caches).

Design note (the read path). Nearly all load is GETs of one object and LISTs, so
:meth:`ApiServer.app` puts :class:`LeanReads` in front of the Starlette app: those requests,
when they are answered in plain JSON, go from the ASGI scope to the reader and back without
Starlette's routing, Request, Response and middleware (several times the cost of the read
itself); everything else, and every request a route would refuse before reading, goes
through Starlette unchanged. Both call :meth:`ApiServer._read_one` and
:meth:`ApiServer._read_page` and turn failures into the same Status, so a request gets the
same answer either way (tests/integration/test_lean_reads.py compares them). Both send
LIST and GET answers with :func:`~watchcache.apiserver.streaming.send_body`: a LIST body
streamed in pieces from its snapshot, gzip for large answers (apiserver/streaming.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import email.utils
import json
import logging
import random
import time
import urllib.parse
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterator,
    Mapping,
    Sequence,
)
from datetime import UTC, datetime
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from watchcache import metrics
from watchcache._core import Item
from watchcache.apiserver import aggregated_discovery, discovery, tables
from watchcache.apiserver.openapi import Document, OpenAPIDocuments, openapi_documents
from watchcache.apiserver.streaming import (
    CHUNK_BYTES,
    GZIP_THRESHOLD_BYTES,
    BodyResponse,
    WholeBody,
    accepts_gzip,
    send_body,
)
from watchcache.cache.backing_store import BodyChunks, ListResult
from watchcache.cache.reads import ResourceReader
from watchcache.cache.watch_cache import WatchCache
from watchcache.controllers.crd import CustomResourceDefinitionController
from watchcache.controllers.garbage_collector import GarbageCollector
from watchcache.controllers.namespace import NamespaceController
from watchcache.etcd.client import EtcdClient, EtcdUnavailableError
from watchcache.etcd.compactor import DEFAULT_COMPACTION_INTERVAL, Compactor
from watchcache.etcd.reader import EtcdReader
from watchcache.etcd.storage_monitor import DEFAULT_POLL_INTERVAL, StorageMonitor
from watchcache.etcd.version import ConsistentReadsMode, ProgressRequestSupport
from watchcache.registry.admission import MAX_BODY_BYTES
from watchcache.registry.managed_fields import manager_from_user_agent
from watchcache.registry.object_store import NamespacePhase, ObjectStore, Subresource
from watchcache.registry.patch import APPLY_PATCH
from watchcache.registry.resources import (
    CUSTOM_RESOURCE_DEFINITIONS,
    DEFAULT_RESOURCES,
    ResourceSpec,
)
from watchcache.registry.system_namespaces import ensure_namespaces
from watchcache.sync.synced import SyncedCache
from watchcache.wire import gojson
from watchcache.wire.body import (
    decode_body,
    warning_header_value,
)
from watchcache.wire.errors import (
    BadRequestError,
    InternalError,
    MethodNotAllowedError,
    NotAcceptableError,
    NotFoundError,
    RequestEntityTooLargeError,
    ServerTimeoutError,
    StatusError,
    WatchTerminatedError,
)
from watchcache.wire.options import ListOptions, WatchOptions, parse_query
from watchcache.wire.write_options import (
    CreateOptions,
    DeleteOptions,
    FieldValidation,
    PatchOptions,
    UpdateOptions,
)

log = logging.getLogger(__name__)

JSON = "application/json"
#: Kubernetes' --min-request-timeout: a watch without timeoutSeconds ends after a random
#: 30-60 minutes, so long-lived clients spread their re-watches.
MIN_REQUEST_TIMEOUT_SECONDS = 1800
#: How long a hash-addressed OpenAPI v3 document may be cached (kube-apiserver: a year).
OPENAPI_V3_MAX_AGE_SECONDS = 365 * 24 * 3600
#: What /openapi/v2 answers in.
OPENAPI_V2_MEDIA_TYPES = (
    "application/json",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
)
#: The largest page served; a larger ``limit`` gets this many and a continue token.
DEFAULT_MAX_LIMIT = 10_000
#: How long a replaced resource (a CRD changed) waits for the requests that found it
#: before its cache stops: kube-apiserver's CRD handler waits twice its request timeout.
RETIRE_DRAIN_SECONDS = 120.0


class ApiServer:
    """Serves ``resources`` from watch caches synced with the etcd behind ``client``, and
    runs the controllers a cluster needs: the namespace controller (when namespaces are
    served) and, unless ``garbage_collection`` is off, the garbage collector.

    ``etcd_overrides`` puts resources on etcd clusters of their own (kube-apiserver's
    ``--etcd-servers-overrides``): every etcd request of a resource whose storage
    ``group_resource`` it names goes to that client, resources added later included.
    Clients' reads of a resource in ``uncached_resources`` (or declared ``cached=False``)
    are served from etcd, not from its watch cache, which the controllers still follow
    (docs/etcd.md §6)."""

    def __init__(
        self,
        client: EtcdClient,
        resources: Sequence[ResourceSpec] = DEFAULT_RESOURCES,
        *,
        max_limit: int = DEFAULT_MAX_LIMIT,
        consistent_reads: ConsistentReadsMode = ConsistentReadsMode.AUTO,
        min_request_timeout: int = MIN_REQUEST_TIMEOUT_SECONDS,
        garbage_collection: bool = True,
        etcd_overrides: Mapping[str, EtcdClient] | None = None,
        uncached_resources: Collection[str] = (),
        compaction_interval: float = DEFAULT_COMPACTION_INTERVAL,
        db_metric_poll_interval: float = DEFAULT_POLL_INTERVAL,
        etcd_maintenance: bool = False,
        etcd_quota_bytes: int = 0,
        response_compression: bool = True,
        **cache_options: Any,
    ) -> None:
        self.client = client
        #: gzip for LIST and GET answers over 128 KiB to clients that accept it (kube's
        #: APIResponseCompression; apiserver/streaming.py).
        self.response_compression = response_compression
        #: Seconds between compactions of each etcd cluster (0: never; the compacted
        #: revision is still followed). See etcd/compactor.py.
        self.compaction_interval = compaction_interval
        #: One compactor per etcd cluster (set of endpoints), as kube-apiserver has.
        self.compactors: dict[frozenset[str], Compactor] = {}
        self._compactor_tasks: list[asyncio.Task[None]] = []
        #: One database-size monitor per etcd cluster (storage_monitor.py); with
        #: ``etcd_maintenance`` (the embedded etcd) they also defragment and disarm NOSPACE
        #: against ``etcd_quota_bytes``.
        self.storage_monitors: list[StorageMonitor] = []
        self.db_metric_poll_interval = db_metric_poll_interval
        self.etcd_maintenance = etcd_maintenance
        self.etcd_quota_bytes = etcd_quota_bytes
        #: The client of each resource placed on another cluster, by storage group_resource.
        self.etcd_overrides: dict[str, EtcdClient] = dict(etcd_overrides or {})
        #: Resources (by storage group_resource) whose reads clients get from etcd.
        self.uncached_resources = frozenset(uncached_resources)
        #: One progress-request verdict per etcd cluster (set of endpoints): a member of
        #: one cluster must not decide for the resources of another.
        self._supports: dict[frozenset[str], ProgressRequestSupport] = {}
        self.garbage_collection = garbage_collection
        self.consistent_reads = consistent_reads
        self.cache_options = cache_options
        self._controllers: list[asyncio.Task[None]] = []
        self._controller_objects: list[NamespaceController | GarbageCollector] = []
        self._started = False
        self.max_limit = max_limit
        self.min_request_timeout = min_request_timeout
        self.support = self.support_for(client)
        #: Served resources by ``ResourceSpec.served_key``: the ``group_resource`` for the
        #: version objects are stored in, which is all the controllers follow (a CRD's
        #: other versions are the same objects).
        self._by_key: dict[str, _Served] = {}
        #: The same by URL: (group, version, plural). A request looks its resource up once
        #: and uses what it found to the end, even if the resource is replaced.
        self._by_path: dict[tuple[str, str, str], _Served] = {}
        #: Read-only views of the served resources by served key, as they are when asked:
        #: their specs, caches and stores, and what serves clients' reads (the watch cache,
        #: or etcd for an uncached resource).
        self.resources: Mapping[str, ResourceSpec] = _ServedParts(self._by_key, _spec_of)
        self.caches: Mapping[str, SyncedCache] = _ServedParts(self._by_key, _synced_of)
        self.stores: Mapping[str, ObjectStore] = _ServedParts(self._by_key, _store_of)
        self.readers: Mapping[str, ResourceReader] = _ServedParts(self._by_key, _reader_of)
        #: Replaced resources whose caches stop once their requests are done.
        self._retiring: dict[asyncio.Task[None], _Served] = {}
        self._serves_namespaces = any(spec.group_resource == "namespaces" for spec in resources)
        for spec in resources:
            self._install(spec)

    def client_for(self, storage_group_resource: str) -> EtcdClient:
        """The etcd client of the resource stored as ``storage_group_resource``."""
        return self.etcd_overrides.get(storage_group_resource, self.client)

    def support_for(self, client: EtcdClient) -> ProgressRequestSupport:
        """The progress-request verdict of the etcd cluster ``client`` talks to."""
        cluster = frozenset(client.endpoints)
        support = self._supports.get(cluster)
        if support is None:
            support = self._supports[cluster] = ProgressRequestSupport()
        return support

    def compactor_for(self, client: EtcdClient) -> Compactor:
        """The compactor of the etcd cluster ``client`` talks to; it tells the caches on
        that cluster each compaction (``WatchCache.compact``)."""
        cluster = frozenset(client.endpoints)
        compactor = self.compactors.get(cluster)
        if compactor is None:
            compactor = self.compactors[cluster] = Compactor(client, self.compaction_interval)

            def compacted(revision: int) -> None:
                for synced in self.caches.values():
                    if frozenset(synced.client.endpoints) == cluster:
                        synced.cache.compact(revision)

            compactor.add_listener(compacted)
        return compactor

    def serves_from_etcd(self, spec: ResourceSpec) -> bool:
        """Whether clients' reads of ``spec`` are served from etcd, not its watch cache."""
        return not spec.cached or spec.storage_group_resource in self.uncached_resources

    @property
    def etcd_versions(self) -> dict[str, str]:
        """The version every endpoint of every etcd cluster reported."""
        return {e: v for s in self._supports.values() for e, v in s.versions.items()}

    def _install(self, spec: ResourceSpec) -> None:
        name = spec.served_key
        if name in self.resources:
            raise ValueError(f"the resource {name} is served already")
        self._register(self._build(spec))

    def _build(self, spec: ResourceSpec) -> _Served:
        """A resource's store, cache and reader, not yet served (its cache not started)."""
        client = self.client_for(spec.storage_group_resource)
        # The store first: its codec (conversion to this version, schema defaults) is the
        # one the cache ingests with. A schema that is not structural raises here.
        store = ObjectStore(
            client,
            spec,
            namespace_phase=self._namespace_phase if self._serves_namespaces else None,
            garbage_collection=self.garbage_collection,
        )
        # An uncached resource keeps its cache too: the controllers follow it.
        synced = SyncedCache(
            client,
            spec.prefix,
            resource=spec.name,
            kind=spec.kind,
            group=spec.group,
            api_version=spec.api_version,
            codec=store.codec,
            mode=self.consistent_reads,
            support=self.support_for(client),
            **self.cache_options,
        )
        store.cache = synced.cache
        reader: ResourceReader = synced.cache
        if self.serves_from_etcd(spec):
            reader = EtcdReader(
                client,
                spec.prefix,
                resource=spec.name,
                kind=spec.kind,
                group=spec.group,
                api_version=spec.api_version,
                codec=store.codec,
            )
        return _Served(spec, store, synced, reader)

    def _register(self, served: _Served) -> None:
        self._by_key[served.spec.served_key] = served
        self._by_path[_path(served.spec)] = served

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self, *, timeout: float | None = 120.0) -> None:
        """Start the caches (waiting at most ``timeout`` for their first list), then the
        controllers; the resources of the CRDs stored already are served on return, and the
        system namespaces exist."""
        await ensure_namespaces(self.client_for("namespaces"), list(self.resources.values()))
        await asyncio.gather(*(c.start(timeout=timeout) for c in self.caches.values()))
        clients = {frozenset(c.endpoints): c for c in (self.client, *self.etcd_overrides.values())}
        self.storage_monitors = [
            StorageMonitor(
                c,
                f"etcd-{i}",
                poll_interval=self.db_metric_poll_interval,
                defragment=self.etcd_maintenance,
                quota_bytes=self.etcd_quota_bytes,
            )
            for i, c in enumerate(clients.values())
        ]
        self._compactor_tasks = [
            *(
                asyncio.create_task(
                    self.compactor_for(c).run(), name=f"compactor {sorted(cluster)}"
                )
                for cluster, c in clients.items()
            ),
            *(
                asyncio.create_task(m.run(), name=f"storage monitor {m.cluster_id}")
                for m in self.storage_monitors
            ),
        ]
        caches = _ServedParts(self._by_key, _cache_of)
        stored = _StoredVersions(self.resources)
        controllers: list[NamespaceController | GarbageCollector] = []
        if self._serves_namespaces:
            controllers.append(NamespaceController(stored, caches, self.stores))
        if self.garbage_collection:
            controllers.append(GarbageCollector(stored, caches, self.stores))
        self._controller_objects = controllers
        self._controllers = [
            asyncio.create_task(c.run(), name=type(c).__name__) for c in controllers
        ]
        self._started = True
        crds = self.caches.get(CUSTOM_RESOURCE_DEFINITIONS.group_resource)
        if crds is not None:
            crd_controller = CustomResourceDefinitionController(self, crds.cache)
            await crd_controller.serve_existing()
            self._controllers.append(
                asyncio.create_task(crd_controller.run(), name="CustomResourceDefinitionController")
            )

    async def stop(self) -> None:
        self._started = False
        tasks = [*self._controllers, *self._compactor_tasks]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._controllers = []
        self._compactor_tasks = []
        self._controller_objects = []
        retiring = list(self._retiring.values())
        for task in list(self._retiring):
            task.cancel()
        await asyncio.gather(*(c.stop() for c in self.caches.values()))
        await asyncio.gather(*(served.synced.stop() for served in retiring))

    # -- resources while serving ------------------------------------------------------------

    async def add_resource(
        self, spec: ResourceSpec, *, timeout: float | None = 120.0, replace: bool = False
    ) -> None:
        """Serve ``spec`` from now on: routes, discovery and OpenAPI include it once its
        cache has listed (at most ``timeout``), and the controllers follow it. With
        ``replace``, a resource served under the same ``served_key`` (a CRD version whose
        schema changed) keeps being served until the new one is ready, then gives way at
        once. Raises ValueError when a resource with that ``served_key`` is served already
        (without ``replace``), and ``InvalidSchemaError`` (a ValueError) when its OpenAPI
        schema is not structural."""
        retired = [spec.served_key] if replace and spec.served_key in self.resources else []
        await self.change_resources(add=[spec], remove=retired, timeout=timeout)

    async def remove_resource(self, served_key: str) -> ResourceSpec:
        """Stop serving a resource (its objects stay in etcd). Raises KeyError when it is
        not served."""
        spec = self.resources[served_key]
        await self.change_resources(remove=[served_key])
        return spec

    async def change_resources(
        self,
        *,
        add: Sequence[ResourceSpec] = (),
        remove: Collection[str] = (),
        timeout: float | None = 120.0,
    ) -> None:
        """Stop serving the resources whose ``served_key`` is in ``remove`` and serve
        ``add`` instead, as one change: the new caches list first (at most ``timeout``)
        while the old resources keep serving, then requests see the new set at once, never
        a mix or a gap. A CRD whose storage version moves needs this: its versions swap
        served keys, so no one of them can be replaced alone without a moment in which one
        of its URLs is not served.

        Raises, changing nothing: KeyError for a key in ``remove`` that is not served;
        ValueError when a served key or a URL would be served twice; InvalidSchemaError (a
        ValueError) when a schema in ``add`` is not structural."""
        retired = [self.resources[key] for key in remove]
        kept = {key: spec for key, spec in self.resources.items() if key not in remove}
        paths = {_path(spec) for spec in kept.values()}
        for spec in add:
            if spec.served_key in kept:
                raise ValueError(f"the resource {spec.served_key} is served already")
            if _path(spec) in paths:
                raise ValueError(f"{spec.api_root}/{spec.name} is served already")
            kept[spec.served_key] = spec
            paths.add(_path(spec))
        built = [self._build(spec) for spec in add]
        if self._started:
            try:
                await asyncio.gather(*(served.synced.start(timeout=timeout) for served in built))
            except BaseException:
                await asyncio.gather(*(served.synced.stop() for served in built))
                raise
        # From here to the last registration nothing awaits: requests see the old
        # resources or the new ones, never neither.
        old = [self._unregister(spec.served_key) for spec in retired]
        for spec in retired:
            if self._started and spec.stored_as_served:
                for controller in self._controller_objects:
                    controller.resource_removed(spec)
        for served in built:
            self._register(served)
            if self._started and served.spec.stored_as_served:
                for controller in self._controller_objects:
                    controller.resource_added(served.spec)
        idle = [served for served in old if not served.requests]
        for served in old:
            if served.requests:
                task = asyncio.create_task(self._retire(served), name=f"retire {served.spec}")
                self._retiring[task] = served
                task.add_done_callback(self._retiring.pop)
        await asyncio.gather(*(served.synced.stop() for served in idle))

    async def _retire(self, served: _Served) -> None:
        """Stop a replaced resource's cache once the requests that found it are done (at
        most ``RETIRE_DRAIN_SECONDS``), as Kubernetes' CRD handler tears down an old
        storage; its watches end then, and their clients watch the new one."""
        try:
            await asyncio.wait_for(served.drained(), RETIRE_DRAIN_SECONDS)
        except TimeoutError:
            log.warning(
                "%s: %d requests still running after %ss; stopping its replaced cache",
                served.spec.served_key,
                served.requests,
                RETIRE_DRAIN_SECONDS,
            )
        await served.synced.stop()

    def _unregister(self, name: str) -> _Served:
        served = self._by_key.pop(name)
        del self._by_path[_path(served.spec)]
        return served

    @property
    def ready(self) -> bool:
        return all(c.cache.ready for c in self.caches.values())

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        await self.start()
        try:
            yield
        finally:
            await self.stop()

    def app(self, *, manage_lifecycle: bool = True) -> LeanReads:
        """The ASGI app. With ``manage_lifecycle`` its lifespan starts and stops the caches;
        without, the caller does (e.g. when several apps share one server). GETs of one
        object and LISTs in JSON take the lean path (:class:`LeanReads`); everything else
        goes through the Starlette app, whose routes are these."""
        # Resource routes first: Starlette tries routes in order, and nearly every request
        # is one of these (each route ahead of them costs every request a regex match).
        # No resource route matches a discovery, health or OpenAPI path.
        routes = [
            Route(
                "/api/v1/namespaces/{namespace}/{resource}/{name}/{subresource}",
                self._item,
                methods=_SUBRESOURCE,
            ),
            Route("/api/v1/namespaces/{namespace}/{resource}/{name}", self._item, methods=_ITEM),
            Route(
                "/api/v1/namespaces/{namespace}/{resource}",
                self._collection_or_namespace_subresource,
                methods=[*_COLL, *_SUBRESOURCE],
            ),
            Route(
                "/api/v1/{resource}/{name}/{subresource}",
                self._cluster_item,
                methods=_SUBRESOURCE,
            ),
            Route("/api/v1/{resource}/{name}", self._cluster_item, methods=_ITEM),
            Route("/api/v1/{resource}", self._cluster_collection, methods=_COLL),
            Route(
                "/apis/{group}/{version}/namespaces/{namespace}/{resource}/{name}/{subresource}",
                self._item,
                methods=_SUBRESOURCE,
            ),
            Route(
                "/apis/{group}/{version}/namespaces/{namespace}/{resource}/{name}",
                self._item,
                methods=_ITEM,
            ),
            Route(
                "/apis/{group}/{version}/namespaces/{namespace}/{resource}",
                self._collection,
                methods=_COLL,
            ),
            Route(
                "/apis/{group}/{version}/{resource}/{name}/{subresource}",
                self._cluster_item,
                methods=_SUBRESOURCE,
            ),
            Route("/apis/{group}/{version}/{resource}/{name}", self._cluster_item, methods=_ITEM),
            Route("/apis/{group}/{version}/{resource}", self._cluster_collection, methods=_COLL),
            Route("/version", self._version),
            Route("/api", self._api),
            Route("/apis", self._apis),
            Route("/api/v1", self._api_v1),
            Route("/apis/{group}", self._api_group),
            Route("/apis/{group}/{version}", self._api_group_version),
            Route("/healthz", self._healthz),
            Route("/livez", self._healthz),
            Route("/readyz", self._readyz),
            Route("/metrics", self._metrics),
            Route("/openapi/v2", self._openapi_v2),
            Route("/openapi/v3", self._openapi_v3_index),
            Route("/openapi/v3/{group_version:path}", self._openapi_v3),
        ]
        routed = Starlette(
            routes=routes,
            lifespan=self.lifespan if manage_lifecycle else None,
            exception_handlers={404: self._not_found, 405: self._method_not_allowed},
        )
        return LeanReads(self, routed)

    # -- discovery and health ---------------------------------------------------------------

    async def _version(self, _request: Request) -> Response:
        return _json(discovery.version_info_json())

    async def _api(self, request: Request) -> Response:
        # The Accept header picks aggregated discovery (or a 304/406) or the legacy
        # document, as kube-apiserver's discovery wrapper does (aggregated_discovery).
        aggregated = aggregated_discovery.answer(
            request.headers.get("accept"),
            request.headers.get("if-none-match"),
            self.resources.values(),
            aggregated_discovery.Endpoint.CORE,
        )
        if aggregated is not None:
            return Response(aggregated.body, aggregated.status, dict(aggregated.headers))
        host = request.headers.get("host", "")
        return _json(discovery.api_versions_json(host))

    async def _apis(self, request: Request) -> Response:
        aggregated = aggregated_discovery.answer(
            request.headers.get("accept"),
            request.headers.get("if-none-match"),
            self.resources.values(),
            aggregated_discovery.Endpoint.NAMED_GROUPS,
        )
        if aggregated is not None:
            return Response(aggregated.body, aggregated.status, dict(aggregated.headers))
        return _json(discovery.api_group_list_json(self.resources.values()))

    async def _api_v1(self, _request: Request) -> Response:
        return _json(discovery.api_resource_list_json(list(self.resources.values())))

    async def _api_group(self, request: Request) -> Response:
        group = discovery.api_group(self.resources.values(), request.path_params["group"])
        if group is None:
            return await self._not_found(request, LookupError())
        return _json(gojson.dumpb(group))

    async def _api_group_version(self, request: Request) -> Response:
        params = request.path_params
        group_version = f"{params['group']}/{params['version']}"
        served = [s for s in self.resources.values() if s.api_version == group_version]
        if not served:
            return await self._not_found(request, LookupError())
        return _json(discovery.api_resource_list_json(served, group_version))

    async def _healthz(self, _request: Request) -> Response:
        return PlainTextResponse("ok")

    async def _readyz(self, _request: Request) -> Response:
        waiting = [name for name, c in self.caches.items() if not c.cache.ready]
        if waiting:
            return PlainTextResponse(
                f"not ready: caches not synced: {', '.join(waiting)}\n", status_code=500
            )
        return PlainTextResponse("ok")

    async def _metrics(self, _request: Request) -> Response:
        return PlainTextResponse(
            metrics.render(self.caches.values(), self.etcd_versions, self.storage_monitors),
            media_type="text/plain; version=0.0.4; charset=utf-8",
        )

    def openapi(self) -> OpenAPIDocuments:
        """The OpenAPI documents of the resources served now (built once per set of
        resources and kept; cheap to ask for again)."""
        return openapi_documents(self.resources.values(), version=discovery.GIT_VERSION)

    async def _openapi_v2(self, request: Request) -> Response:
        # Swagger 2.0 as JSON or as kubectl's protobuf, by Accept (docs/clients.md §1.8).
        document = self.openapi().v2(request.headers.get("accept"))
        if document is None:
            return _status_response(NotAcceptableError.accepting(OPENAPI_V2_MEDIA_TYPES))
        return _document(request, document, "no-cache, private")

    async def _openapi_v3_index(self, request: Request) -> Response:
        return _document(request, self.openapi().v3_index, "no-cache, private")

    async def _openapi_v3(self, request: Request) -> Response:
        """One group-version's document. With ``?hash=`` (the index's links) it is
        immutable and cached for a year; a stale hash is redirected to the current one, as
        kube-apiserver does."""
        docs = self.openapi()
        group_version = request.path_params["group_version"]
        document = docs.v3(group_version)
        if document is None:
            return await self._not_found(request, LookupError())
        if not docs.accepts_v3(request.headers.get("accept")):
            return _status_response(NotAcceptableError.accepting([JSON]))
        wanted = request.query_params.get("hash")
        if wanted is None:
            return _document(request, document, "no-cache, private")
        if wanted != document.hash:
            return RedirectResponse(docs.v3_url(group_version), status_code=301)
        response = _document(request, document, "public, immutable")
        response.headers["Expires"] = email.utils.formatdate(
            time.time() + OPENAPI_V3_MAX_AGE_SECONDS, usegmt=True
        )
        return response

    async def _not_found(self, _request: Request, _exc: Exception) -> Response:
        return _status_response(NotFoundError("the server could not find the requested resource"))

    async def _method_not_allowed(self, _request: Request, _exc: Exception) -> Response:
        return _status_response(MethodNotAllowedError())

    # -- routing ----------------------------------------------------------------------------

    def _resource(self, request: Request, *, namespaced_path: bool) -> _Served:
        params = request.path_params
        served = self._by_path.get(
            (params.get("group", ""), params.get("version", "v1"), params["resource"])
        )
        if served is None or (namespaced_path and not served.spec.namespaced):
            raise NotFoundError("the server could not find the requested resource")
        return served

    async def _collection_or_namespace_subresource(self, request: Request) -> Response:
        # /api/v1/namespaces/x/status is namespace x's status, not a resource "status".
        params = request.path_params
        resource = params["resource"]
        if ("", "v1", resource) not in self._by_path and resource in _NAMESPACE_SUBRESOURCES:
            params.update(resource="namespaces", name=params.pop("namespace"))
            params["subresource"] = resource
            return await _guard(self._serve_item(request, None))
        if request.method not in _COLL:
            return _status_response(MethodNotAllowedError())
        return await _guard(self._serve_collection(request, params["namespace"]))

    async def _collection(self, request: Request) -> Response:
        answer = await _guard(self._serve_collection(request, request.path_params["namespace"]))
        return self._warn_if_deprecated(request, answer)

    async def _cluster_collection(self, request: Request) -> Response:
        answer = await _guard(self._serve_collection(request, None))
        return self._warn_if_deprecated(request, answer)

    async def _item(self, request: Request) -> Response:
        answer = await _guard(self._serve_item(request, request.path_params["namespace"]))
        return self._warn_if_deprecated(request, answer)

    async def _cluster_item(self, request: Request) -> Response:
        answer = await _guard(self._serve_item(request, None))
        return self._warn_if_deprecated(request, answer)

    def _warn_if_deprecated(self, request: Request, response: Response) -> Response:
        """Every answer from a deprecated version carries its warning, errors included,
        as kube-apiserver's deprecation filter adds it."""
        params = request.path_params
        served = self._by_path.get(
            (params.get("group", ""), params.get("version", "v1"), params.get("resource", ""))
        )
        if served is not None and served.spec.deprecation_warning:
            _add_warning(response, served.spec.deprecation_warning)
        return response

    async def _serve_collection(self, request: Request, namespace: str | None) -> Response:
        return await self._with_resource(self._serve_collection_of, request, namespace)

    async def _serve_item(self, request: Request, namespace: str | None) -> Response:
        return await self._with_resource(self._serve_item_of, request, namespace)

    async def _with_resource(
        self,
        handler: Callable[[_Served, Request, str | None], Awaitable[Response]],
        request: Request,
        namespace: str | None,
    ) -> Response:
        """Run ``handler`` on the resource ``request`` names, counted as one of its
        requests while it runs: a replaced resource's cache stops only after."""
        served = self._resource(request, namespaced_path=namespace is not None)
        with served.serving():
            return await handler(served, request, namespace)

    async def _serve_collection_of(
        self, served: _Served, request: Request, namespace: str | None
    ) -> Response:
        spec = served.spec
        _check_accept(request)
        if request.method == "POST":
            if spec.namespaced and namespace is None:
                raise MethodNotAllowedError()
            body = await _read_body(request)
            create = CreateOptions.from_query(_query(request))
            store = served.store
            obj, warnings = store.decode(
                body, request.headers.get("content-type", ""), create.field_validation
            )
            created = await store.create(
                namespace or "",
                obj,
                dry_run=create.dry_run,
                manager=_manager(request, create.field_manager),
            )
            return _json(created, status=201, warnings=warnings)
        if request.method == "DELETE":
            if "deletecollection" not in spec.verbs:
                raise MethodNotAllowedError()
            body = await _read_body(request)
            query = _query(request)
            selection = parse_query(query, watch_list=False)
            if isinstance(selection, WatchOptions):
                raise BadRequestError("a watch cannot delete a collection")
            _check_fields(spec, selection.field_requirements)
            deleted = await served.store.delete_collection(
                namespace or "", selection, _delete_options(request, body, query)
            )
            return _json(deleted)
        opts = parse_query(_query(request))
        if isinstance(opts, WatchOptions):
            return await self._watch(request, served, namespace or "", opts)
        return await self._list(request, served, namespace or "", opts)

    async def _serve_item_of(
        self, served: _Served, request: Request, namespace: str | None
    ) -> Response:
        spec = served.spec
        _check_accept(request)
        if spec.namespaced and namespace is None:
            # /api/v1/configmaps/x is not a route Kubernetes has.
            raise NotFoundError("the server could not find the requested resource")
        name = request.path_params["name"]
        subresource = request.path_params.get("subresource")
        part = Subresource.MAIN
        if subresource is not None:
            if subresource not in spec.subresources:
                raise NotFoundError("the server could not find the requested resource")
            part = Subresource(subresource)
            if _VERBS[request.method] not in spec.subresource_verbs(subresource):
                raise MethodNotAllowedError()
        store = served.store
        ns = namespace or ""
        method = request.method
        if method == "GET":
            if part is Subresource.SCALE:
                return _json(await store.get_scale(ns, name))
            return await self._get(request, served, ns, name)
        body = await _read_body(request)
        query = _query(request)
        if method == "PUT":
            update = UpdateOptions.from_query(query)
            if part is Subresource.SCALE:
                answer = await store.update_scale(
                    ns,
                    name,
                    request.headers.get("content-type", ""),
                    body,
                    patch=False,
                    dry_run=update.dry_run,
                    field_validation=update.field_validation,
                    manager=_manager(request, update.field_manager),
                )
                return _json(answer.body, warnings=answer.warnings)
            obj, warnings = store.decode(
                body, request.headers.get("content-type", ""), update.field_validation
            )
            updated = await store.update(
                ns,
                name,
                obj,
                dry_run=update.dry_run,
                subresource=part,
                manager=_manager(request, update.field_manager),
            )
            return _json(updated, warnings=warnings)
        if method == "PATCH":
            content_type = request.headers.get("content-type", "")
            apply = _media_type(content_type) == APPLY_PATCH
            patch = PatchOptions.from_query(query, apply=apply)
            if apply and part is not Subresource.SCALE:
                answer = await store.apply(
                    ns,
                    name,
                    body,
                    manager=patch.field_manager,
                    force=patch.force,
                    dry_run=patch.dry_run,
                    subresource=part,
                    field_validation=patch.field_validation,
                )
                return _json(answer.body, status=answer.code, warnings=answer.warnings)
            if part is Subresource.SCALE:
                answer = await store.update_scale(
                    ns,
                    name,
                    content_type,
                    body,
                    patch=True,
                    dry_run=patch.dry_run,
                    field_validation=patch.field_validation,
                    manager=_manager(request, patch.field_manager),
                )
                return _json(answer.body, warnings=answer.warnings)
            answer = await store.patch(
                ns,
                name,
                content_type,
                body,
                dry_run=patch.dry_run,
                subresource=part,
                field_validation=patch.field_validation,
                manager=_manager(request, patch.field_manager),
            )
            return _json(answer.body, warnings=answer.warnings)
        if method == "DELETE":
            answer = await store.delete(ns, name, _delete_options(request, body, query))
            return _json(answer.body, status=answer.code)
        raise MethodNotAllowedError()

    # -- reads ------------------------------------------------------------------------------

    async def _list(
        self, request: Request, served: _Served, namespace: str, opts: ListOptions
    ) -> Response:
        reader, result = await self._read_page(served, namespace, opts)
        spec = served.spec
        table = _table_request(request)
        if table is not None:
            body = tables.render_table(
                spec,
                (item.value for item in result.items),
                list_meta=result.metadata(),
                now=datetime.now(UTC),
                version=table[0],
                include_object=table[1],
            )
            return self._answer(request, WholeBody(body))
        return self._answer(
            request, reader.chunks(result, CHUNK_BYTES), size_floor=result.body_floor()
        )

    async def _get(self, request: Request, served: _Served, namespace: str, name: str) -> Response:
        item = await self._read_one(served, namespace, name, _resource_version(_query(request)))
        spec = served.spec
        table = _table_request(request)
        if table is not None:
            body = tables.render_table(
                spec,
                [item.value],
                list_meta={"resourceVersion": str(item.mod_revision)},
                now=datetime.now(UTC),
                version=table[0],
                include_object=table[1],
            )
            return self._answer(request, WholeBody(body))
        return self._answer(request, WholeBody(item.value))

    def _answer(self, request: Request, body: BodyChunks, *, size_floor: int = 0) -> Response:
        """A LIST or GET answer in JSON, sent as the lean path sends it (:func:`send_body`)."""
        gzip = self.response_compression and accepts_gzip(
            request.headers.get("accept-encoding", "")
        )
        return BodyResponse(body, gzip=gzip, media_type=JSON, size_floor=size_floor)

    async def _read_page(
        self, served: _Served, namespace: str, opts: ListOptions
    ) -> tuple[ResourceReader, ListResult]:
        """One LIST page of ``served`` (both routes: :meth:`_list` and the lean path)."""
        spec = served.spec
        _check_fields(spec, opts.field_requirements)
        if opts.limit > self.max_limit:
            opts = dataclasses.replace(opts, limit=self.max_limit)
        reader = served.reader
        return reader, await reader.list(opts, prefix=spec.collection_prefix(namespace))

    async def _read_one(
        self, served: _Served, namespace: str, name: str, resource_version: str
    ) -> Item:
        """One object of ``served`` (both routes: :meth:`_get` and the lean path)."""
        return await served.reader.get(served.spec.key(namespace, name), resource_version)

    async def _watch(
        self, request: Request, served: _Served, namespace: str, opts: WatchOptions
    ) -> Response:
        spec = served.spec
        _check_fields(spec, opts.field_requirements)
        if opts.timeout_seconds is None:
            timeout = int(self.min_request_timeout * (1 + random.random()))
            opts = dataclasses.replace(opts, timeout_seconds=timeout)
        table = _table_request(request)
        reader = served.reader
        watcher = reader.watch(opts, prefix=spec.collection_prefix(namespace))
        first_error: bytes | None = None
        try:
            await watcher.start()
        except StatusError as error:
            if error.code in {400, 429}:
                raise
            # Kubernetes reports a watch that cannot start (410, 504...) inside a 200
            # stream; kubectl drops the message of an HTTP error on a Table request.
            first_error = error.watch_event() + b"\n"

        async def lines() -> AsyncIterator[bytes]:
            if first_error is not None:
                yield first_error
                return
            columns_sent = False
            try:
                async for event in watcher:
                    if table is not None and event.item is not None:
                        yield tables.render_table_event(
                            spec,
                            str(event.type),
                            event.object,
                            now=datetime.now(UTC),
                            with_columns=not columns_sent,
                            version=table[0],
                            include_object=table[1],
                        )
                        columns_sent = True
                    else:
                        yield event.to_json() + b"\n"
            except WatchTerminatedError as ended:
                # The cache ended this watch (relist, or it fell behind): close the stream;
                # the client re-watches from the last rv it saw.
                log.info("watch on %s ended: %s", spec.name, ended)
            finally:
                await watcher.aclose()

        media = JSON if table is None else f"application/json;as=Table;v={table[0]};g=meta.k8s.io"
        return StreamingResponse(lines(), media_type=media, headers={"Cache-Control": "no-cache"})

    async def _namespace_phase(self, namespace: str) -> NamespacePhase | None:
        """The namespace's phase as the cache has it (None: no such namespace)."""
        served = self._by_key["namespaces"]
        try:
            item = await served.synced.cache.get(served.spec.key("", namespace), "")
        except NotFoundError:
            return None
        obj = json.loads(item.value)
        terminating = (obj.get("status") or {}).get("phase") == NamespacePhase.TERMINATING
        return NamespacePhase.TERMINATING if terminating else NamespacePhase.ACTIVE


class LeanReads:
    """The ASGI app of :meth:`ApiServer.app`: the requests nearly all load is made of — a GET
    of one object, a LIST, both answered in plain JSON — are served from the ASGI scope
    directly; every other request goes to ``routed``, the Starlette app.

    Why: a GET served from the cache costs a few microseconds of cache work, and
    Starlette's dispatch around it (a regular-expression match per route tried, Request
    and Headers objects, a Response object, two middleware layers, the exception
    handlers) cost several times that; bench/README.md ("Lean reads") has the profile and
    the numbers before and after.

    What takes the lean path: method GET, no ``root_path`` (the app is not mounted under a
    prefix), a path that Starlette's resource routes would give to a served resource's
    object or collection (no subresource, no empty segment; namespaced paths only for
    namespaced resources, an object by name outside a namespace only for cluster-scoped
    ones), a resource without a deprecation warning, an Accept header that JSON satisfies
    and that asks for no Table, and for a collection, a query that is not a watch.
    Anything else — including every request that would be refused before its read (404,
    405, 406) — goes to Starlette, unchanged.

    Invariant: a request taken here gets the answer the Starlette route would give it,
    status, body and headers: both call the same read functions
    (:meth:`ApiServer._read_one`, :meth:`ApiServer._read_page`) and failures become the
    same Status (:func:`_error_response`); tests/integration/test_lean_reads.py asks both
    routes the same requests and compares. Costs: a split of the path, a few dict lookups,
    one scan of the headers; the Accept verdict and the parsed query are remembered per
    distinct value (:meth:`_remember`), so clients that repeat a request (informers,
    kubelets) do not pay for parsing it again.
    """

    __slots__ = ("_accept_verdicts", "_options", "_routed", "_server", "_versions")

    #: Distinct values each memo keeps (Accept headers, GET queries, LIST queries).
    REMEMBERED = 256

    def __init__(self, server: ApiServer, routed: Starlette) -> None:
        self._server = server
        self._routed = routed
        self._accept_verdicts: dict[str, bool] = {}
        #: A GET's resourceVersion by raw query string.
        self._versions: dict[bytes, str] = {}
        #: A LIST's parsed options by raw query string (immutable, so shared; a query that
        #: fails to parse is never kept and fails again).
        self._options: dict[bytes, ListOptions] = {}

    @property
    def routed(self) -> Starlette:
        """The Starlette app behind the lean path."""
        return self._routed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or scope.get("root_path"):
            await self._routed(scope, receive, send)
            return
        target = _read_target(scope["path"])
        if target is None:
            await self._routed(scope, receive, send)
            return
        group, api_version, namespace, resource, name = target
        served = self._server._by_path.get((group, api_version, resource))
        if (
            served is None
            or served.spec.deprecation_warning
            or (namespace is not None and not served.spec.namespaced)
            or (namespace is None and name is not None and served.spec.namespaced)
            or not self._plain_json(_header(scope, b"accept"))
        ):
            await self._routed(scope, receive, send)
            return
        query: bytes = scope["query_string"]
        try:
            if name is not None:
                resource_version = self._versions.get(query) if query else ""
                if resource_version is None:
                    resource_version = _resource_version(_parse_query_string(query))
                    self._remember(self._versions, query, resource_version)
                with served.serving():
                    item = await self._server._read_one(
                        served, namespace or "", name, resource_version
                    )
                body = item.value
                size_floor = 0  # the body is at hand: its size is known exactly
                if len(body) > GZIP_THRESHOLD_BYTES:
                    chunks: BodyChunks | None = WholeBody(body)
                else:
                    chunks = None  # sent below, as it always was: no header to read
            else:
                opts = self._options.get(query) if query else _NO_LIST_OPTIONS
                if opts is None:
                    parsed = parse_query(_parse_query_string(query))
                    if isinstance(parsed, WatchOptions):
                        await self._routed(scope, receive, send)
                        return
                    opts = parsed
                    self._remember(self._options, query, opts)
                with served.serving():
                    reader, result = await self._server._read_page(served, namespace or "", opts)
                chunks = reader.chunks(result, CHUNK_BYTES)
                size_floor = result.body_floor()
                del result  # the pieces hold the page until they are sent
        except Exception as error:
            await _error_response(error)(scope, receive, send)
            return
        if chunks is not None:
            gzip = self._server.response_compression and accepts_gzip(
                _header(scope, b"accept-encoding")
            )
            await send_body(
                send, receive, chunks, content_type=_JSON_BYTES, gzip=gzip, size_floor=size_floor
            )
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", b"%d" % len(body)), _JSON_CONTENT_TYPE],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _plain_json(self, accept: str) -> bool:
        """Whether JSON, not a Table, answers ``accept`` (the Starlette route's 406 and
        Table negotiation, decided once per distinct value)."""
        verdict = self._accept_verdicts.get(accept)
        if verdict is None:
            verdict = _accepts_json(accept) and tables.table_version(accept) is None
            self._remember(self._accept_verdicts, accept, verdict)
        return verdict

    def _remember(self, memo: dict[_K, _V], key: _K, value: _V) -> None:
        """Keep ``value`` for ``key``; a full memo starts over (clients repeat a few
        values — informers, kubelets — and a walk's continue tokens never repeat)."""
        if len(memo) >= self.REMEMBERED:
            memo.clear()
        memo[key] = value


_K = TypeVar("_K")
_V = TypeVar("_V")

#: What a request path names, by Starlette's resource routes: (group, version, namespace or
#: None, resource, name or None).
_ReadTarget = tuple[str, str, str | None, str, str | None]


def _path(spec: ResourceSpec) -> tuple[str, str, str]:
    """What a resource's URLs are told apart by (the key of ``ApiServer._by_path``)."""
    return spec.group, spec.version, spec.name


def _read_target(path: str) -> _ReadTarget | None:
    """The object or collection ``path`` names as the resource routes of
    :meth:`ApiServer.app` would match it, in their order (so ``/api/v1/namespaces/x/y`` is
    collection ``y`` in namespace ``x``, not an object of "namespaces" with subresource
    ``y``); None for anything else (subresources, discovery, empty segments)."""
    parts = path.split("/")
    if parts[0] or "" in parts[1:]:
        return None
    if len(parts) >= 4 and parts[1] == "api" and parts[2] == "v1":
        group, version, rest = "", "v1", parts[3:]
    elif len(parts) >= 5 and parts[1] == "apis":
        group, version, rest = parts[2], parts[3], parts[4:]
    else:
        return None
    count = len(rest)
    if count >= 3 and rest[0] == "namespaces":
        if count == 3:
            return group, version, rest[1], rest[2], None
        if count == 4:
            return group, version, rest[1], rest[2], rest[3]
        return None
    if count == 1:
        return group, version, None, rest[0], None
    if count == 2:
        return group, version, None, rest[0], rest[1]
    return None


def _header(scope: Scope, name: bytes) -> str:
    """The first value of header ``name`` (lower case), decoded as Starlette decodes it."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return ""


def _parse_query_string(query_string: bytes) -> list[tuple[str, str]]:
    """A request's parameters from its raw query string, as Go's url.ParseQuery reads them:
    raw bytes as UTF-8 and ``%XX`` escapes unquoted. An invalid byte reads as U+FFFD, so
    it fails validation (400) where Go keeps it raw, rather than failing the request."""
    return urllib.parse.parse_qsl(query_string.decode("utf-8", "replace"), keep_blank_values=True)


_NO_LIST_OPTIONS = ListOptions()
_JSON_BYTES = JSON.encode()
_JSON_CONTENT_TYPE = (b"content-type", _JSON_BYTES)


class _Served:
    """What serving one resource takes: its spec, store, cache and what reads go to; and
    how many requests are using them, so that a replaced resource's cache is stopped only
    once they are done (``ApiServer._retire``)."""

    __slots__ = ("_idle", "reader", "requests", "spec", "store", "synced")

    def __init__(
        self, spec: ResourceSpec, store: ObjectStore, synced: SyncedCache, reader: ResourceReader
    ) -> None:
        self.spec = spec
        self.store = store
        self.synced = synced
        self.reader = reader
        self.requests = 0
        self._idle: asyncio.Event | None = None

    def serving(self) -> _Served:
        """``with served.serving():`` counts one request (a watch only while it starts)
        for the time it runs. A class's context manager, not a generator's, since every
        read pays for it: an empty ``with`` costs 0.5 against 1.8 µs (timeit)."""
        return self

    def __enter__(self) -> None:
        self.requests += 1

    def __exit__(self, *_exc: object) -> None:
        self.requests -= 1
        if not self.requests and self._idle is not None:
            self._idle.set()

    async def drained(self) -> None:
        """Until no request is using this resource."""
        if self.requests:
            self._idle = asyncio.Event()
            await self._idle.wait()


class _StoredVersions(Mapping[str, ResourceSpec]):
    """The served resources in the version their objects are stored in, as they are when
    asked: what the controllers follow (a CRD's other served versions are the same
    objects again)."""

    def __init__(self, served: Mapping[str, ResourceSpec]) -> None:
        self._served = served

    def __getitem__(self, name: str) -> ResourceSpec:
        spec = self._served[name]
        if not spec.stored_as_served:
            raise KeyError(name)
        return spec

    def __iter__(self) -> Iterator[str]:
        return (name for name, spec in self._served.items() if spec.stored_as_served)

    def __len__(self) -> int:
        return sum(1 for spec in self._served.values() if spec.stored_as_served)


_P = TypeVar("_P")


class _ServedParts(Mapping[str, _P]):
    """One part of every served resource (its spec, cache, store...) by served key, as the
    resources are when asked: they come and go while the server and its controllers run."""

    __slots__ = ("_part", "_served")

    def __init__(self, served: Mapping[str, _Served], part: Callable[[_Served], _P]) -> None:
        self._served = served
        self._part = part

    def __getitem__(self, name: str) -> _P:
        return self._part(self._served[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._served)

    def __len__(self) -> int:
        return len(self._served)


def _spec_of(served: _Served) -> ResourceSpec:
    return served.spec


def _synced_of(served: _Served) -> SyncedCache:
    return served.synced


def _cache_of(served: _Served) -> WatchCache:
    return served.synced.cache


def _store_of(served: _Served) -> ObjectStore:
    return served.store


def _reader_of(served: _Served) -> ResourceReader:
    return served.reader


_ITEM = ["GET", "PUT", "PATCH", "DELETE"]
_COLL = ["GET", "POST", "DELETE"]
_SUBRESOURCE = ["GET", "PUT", "PATCH"]
_VERBS = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "POST": "create"}
#: Subresources of a namespace, whose paths look like a namespaced collection's.
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


async def _read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request body, refused (413) as soon as it passes ``limit`` — never buffered
    whole first."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RequestEntityTooLargeError(f"Request entity too large: limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestEntityTooLargeError(f"Request entity too large: limit is {limit}")
        chunks.append(chunk)
    return b"".join(chunks)


def _manager(request: Request, field_manager: str) -> str:
    """Who a write's changed fields belong to: its ``fieldManager``, else its User-Agent's
    product name (Kubernetes' managerOrUserAgent)."""
    return field_manager or manager_from_user_agent(request.headers.get("user-agent", ""))


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _query(request: Request) -> list[tuple[str, str]]:
    # From the scope, not request.url: building the URL (host, scheme, path, then split
    # again) cost 25 us of a write's CPU for the query string alone.
    return _parse_query_string(request.scope["query_string"])


def _check_fields(spec: ResourceSpec, requirements: Sequence[Any]) -> None:
    for requirement in requirements:
        if requirement.key not in spec.selectable_fields:
            raise BadRequestError(f"field label not supported: {requirement.key}")


#: Media ranges an answer in JSON satisfies.
_JSON_RANGES = frozenset({"*/*", "application/*", JSON})


def _check_accept(request: Request) -> None:
    """406 when the client accepts nothing this server answers in (JSON, or the Table
    form of it): a client that wants protobuf only. Every real client also accepts JSON."""
    if not _accepts_json(request.headers.get("accept", "")):
        raise NotAcceptableError.accepting([JSON])


def _accepts_json(accept: str) -> bool:
    """Whether an Accept header is satisfied by JSON (a missing or blank one is)."""
    if not accept.strip():
        return True
    for media_range in accept.split(","):
        media, *params = (part.strip() for part in media_range.split(";"))
        rejected = any(p.replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000") for p in params)
        if media.lower() in _JSON_RANGES and not rejected:
            return True
    return False


def _delete_options(request: Request, body: bytes, query: list[tuple[str, str]]) -> DeleteOptions:
    decoded: dict[str, Any] | None = None
    if body.strip():
        decoded, _ = decode_body(
            body,
            request.headers.get("content-type", ""),
            kind=None,
            api_version=None,
            field_validation=FieldValidation.IGNORE,
        )
    return DeleteOptions.decode(query, decoded)


def _resource_version(query: list[tuple[str, str]]) -> str:
    """A GET's ``resourceVersion``: the first one given, as Go's query conversion takes it
    (``url.Values`` → ``GetOptions``), "" when there is none."""
    for name, value in query:
        if name == "resourceVersion":
            return value
    return ""


def _table_request(request: Request) -> tuple[str, str] | None:
    """``(Table version, includeObject)`` when the client asked for a Table, else None."""
    version = tables.table_version(request.headers.get("accept", ""))
    if version is None:
        return None
    include = dict(_query(request)).get("includeObject", "Metadata")
    # Checked here, before anything is served: a watch would otherwise meet a bad value in
    # its first event, after its 200, and break off the stream with a server error.
    if (include or "Metadata") not in tables.INCLUDE_OBJECT_POLICIES:
        raise BadRequestError(f"unrecognized includeObject value: {gojson.dumps(include)}")
    return version, include


def _json(body: bytes, status: int = 200, warnings: Sequence[str] = ()) -> Response:
    response = Response(body, status_code=status, media_type=JSON)
    for text in dict.fromkeys(warnings):
        _add_warning(response, text)
    return response


def _add_warning(response: Response, text: str) -> None:
    """A ``Warning`` header with ``text`` in UTF-8, as Go's server writes it. Starlette
    encodes header values as Latin-1, which refuses any character past U+00FF (an unknown
    field named "☃" made the write a 500 after it was stored) and would send the rest in
    the wrong encoding: it is handed the UTF-8 bytes as Latin-1 text. A text that is not
    Unicode (a lone surrogate) is dropped, as Kubernetes' NewWarningHeader refuses
    invalid UTF-8 and its recorder then skips the warning."""
    try:
        value = warning_header_value(text).encode("utf-8").decode("latin-1")
    except UnicodeEncodeError:
        return
    response.headers.append("Warning", value)


def _document(request: Request, document: Document, cache_control: str) -> Response:
    """An OpenAPI document with its ETag; 304 when the client has it already."""
    headers = {"ETag": document.etag, "Vary": "Accept", "Cache-Control": cache_control}
    if document.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    return Response(document.body, headers=headers, media_type=document.content_type)


def _status_response(error: StatusError) -> Response:
    return Response(
        error.to_json(), status_code=error.code, media_type=JSON, headers=error.headers()
    )


async def _guard(handler: Awaitable[Response]) -> Response:
    """Every failure as a Status (:func:`_error_response`)."""
    try:
        return await handler
    except Exception as error:
        return _error_response(error)


def _error_response(error: Exception) -> Response:
    """A failure as a Status: ours as they are, a client gone mid-body as a 400 nobody
    reads, etcd being unreachable as a 504, anything else as a 500 (logged: it is a bug).
    Called from an ``except`` block (the log records the traceback being handled)."""
    if isinstance(error, StatusError):
        return _status_response(error)
    if isinstance(error, ClientDisconnect):
        # The client went away before its body was complete (or the server's body deadline
        # closed the connection): nobody reads this answer, and it is not a server fault.
        log.debug("client disconnected before the request body was complete")
        return _status_response(BadRequestError("the request body is incomplete"))
    if isinstance(error, EtcdUnavailableError):
        return _status_response(ServerTimeoutError.timeout(str(error)))
    log.exception("internal error")
    return _status_response(InternalError.wrap(error))
