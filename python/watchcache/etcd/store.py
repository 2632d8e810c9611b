"""The planner's etcd backend: LISTs the cache cannot or must not serve, read from etcd the
way Kubernetes' etcd3 store reads them (docs/semantics.md §6).

- Revision: pinned for Exact reads and continuations, else the first Range's header
  revision, which then pins every further internal page of the same request.
- Current revision (consistent reads from the cache): one linearizable Range shared by
  every read that arrived before it was issued, across the resources of the same etcd
  client (:mod:`watchcache.etcd.current_revision`, which states why that is safe).
- Paging: one Range of ``limit`` keys; when a selector filters items out, more Ranges
  follow from the last examined key, doubling the page up to 10,000 (Kubernetes'
  over-fetching), until the page is full or the prefix ends.
- Continue tokens are encoded against the prefix *with* its "/" (the etcd3 store's
  ``preparedKey``), so ``start`` has no leading slash; the cache's tokens have one. Both
  decode to the same key (docs/semantics.md §1.4).
- Errors: a compacted revision is 410 — with the inconsistent-continue token (rv -1, at
  the start of the Range that failed) when the client sent a continue token —, a future
  revision 504 with the current revision, an unreachable etcd 504 ServerTimeout.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from watchcache._core import Item
from watchcache.cache.backing_store import (
    ListResult,
    Source,
    StoreListRequest,
    expired_continuation,
)
from watchcache.cache.objects import ObjectCodec, ObjectDecodeError
from watchcache.etcd.client import (
    EtcdClient,
    EtcdError,
    EtcdUnavailableError,
    FutureRevisionError,
    prefix_range_end,
)
from watchcache.etcd.current_revision import SharedRevision, shared_revision
from watchcache.wire.errors import (
    CompactedError,
    InternalError,
    NotFoundError,
    ServerTimeoutError,
    TooLargeResourceVersionError,
)
from watchcache.wire.tokens import next_page_token

#: Kubernetes' ``maxLimit``: internal pages never grow beyond this.
MAX_PAGE = 10_000
#: How long the Ranges of one LIST may take together: kube-apiserver's default
#: ``--request-timeout``, the deadline its etcd3 store reads a LIST under. The client's
#: per-call default (10 s) is for small calls; an unlimited LIST of 150,000 pods is one
#: Range of 170 MB, which two at once on two cores took over 10 s to read (bench/kubelet.py's
#: etcd case then had a non-2xx answer; none at this deadline).
LIST_TIMEOUT_SECONDS = 60.0


class EtcdStore:
    """:class:`~watchcache.cache.planner.BackingStore` over etcd for one key prefix.

    ``consistent_reads``: whether progress notifications can be trusted (the version
    safeguard's verdict, asked at every read since it starts unknown).
    """

    def __init__(
        self,
        client: EtcdClient,
        prefix: str,
        *,
        codec: ObjectCodec | None = None,
        consistent_reads: Callable[[], bool] = lambda: False,
    ) -> None:
        if not prefix.endswith("/"):
            raise ValueError(f"the key prefix must end with '/', got {prefix!r}")
        self.client = client
        self.prefix = prefix
        self.codec = codec or ObjectCodec()
        self._consistent_reads = consistent_reads
        # Kubernetes reads the current revision at the prefix without its "/": a key that
        # normally does not exist, so the answer is just the header. (Consistent reads ask
        # the shared reader below, which reads the storage root the same way.)
        self._revision_key = prefix[:-1].encode()
        #: Consistent reads share current-revision calls with every resource on ``client``.
        self.current_revision: SharedRevision = shared_revision(client, self._revision_key)
        self.lists = 0
        self.ranges = 0

    @property
    def consistent_reads_supported(self) -> bool:
        return self._consistent_reads()

    async def current_resource_version(self) -> int:
        """etcd's current revision, from a call issued after this read started (shared
        with the concurrent reads that may share it). Raises 504 when etcd is unreachable."""
        try:
            return await self.current_revision.current()
        except EtcdUnavailableError as error:
            raise ServerTimeoutError.timeout(str(error)) from error
        except EtcdError as error:
            raise InternalError.wrap(error) from error

    async def get(self, key: str, minimum: int, *, resource: str, group: str = "") -> Item:
        """The object at ``key`` from a quorum read (Kubernetes' etcd3 ``store.Get``): 504
        TooLargeResourceVersion when ``minimum`` is above etcd's revision, 404 when there is
        none (named ``resource``/``group`` in the message), 500 for an undecodable value,
        504 when etcd is unreachable. ``key`` is a valid object key of this prefix."""
        try:
            response = await self.client.range(key.encode())
        except EtcdUnavailableError as error:
            raise ServerTimeoutError.timeout(str(error)) from error
        except EtcdError as error:
            raise InternalError.wrap(error) from error
        current = int(response.header.revision)
        if minimum > current:
            raise TooLargeResourceVersionError(
                minimum=minimum, current=current, retry_after_seconds=0
            )
        if not response.kvs:
            raise NotFoundError.for_object(resource, key.rsplit("/", 1)[-1], group)
        kv = response.kvs[0]
        return self._decode(kv.key, kv.value, int(kv.mod_revision))

    async def list(self, request: StoreListRequest) -> ListResult:
        self.lists += 1
        start = (request.start_key or request.key_prefix).encode()
        try:
            return await self._list(request, start)
        except FutureRevisionError:
            current = 0
            with contextlib.suppress(EtcdError):
                current = await self.client.current_revision(self._revision_key)
            raise TooLargeResourceVersionError(
                minimum=request.revision, current=current, retry_after_seconds=0
            ) from None
        except EtcdUnavailableError as error:
            raise ServerTimeoutError.timeout(str(error)) from error
        except EtcdError as error:
            raise InternalError.wrap(error) from error

    async def _list(self, request: StoreListRequest, start: bytes) -> ListResult:
        end = prefix_range_end(request.key_prefix.encode())
        limit = request.limit
        selector = request.selector
        revision = request.revision
        page = limit
        items: list[Item] = []
        last_key = b""
        count = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LIST_TIMEOUT_SECONDS
        while True:
            try:
                response = await self.client.range(
                    start, end, revision=revision, limit=page, timeout=deadline - loop.time()
                )
            except CompactedError:
                if request.continued:
                    # Kubernetes resumes the rv=-1 token where the failing Range started:
                    # the client's start key, or the current internal page when a selector
                    # made this request read several (docs/semantics.md §1.7, §10 item 7).
                    raise expired_continuation(start.decode(), request.key_prefix) from None
                raise
            self.ranges += 1
            if revision == 0:
                revision = int(response.header.revision)
                if request.minimum > revision:
                    raise TooLargeResourceVersionError(
                        minimum=request.minimum, current=revision, retry_after_seconds=0
                    )
            kvs = response.kvs
            count = int(response.count)
            has_more = len(kvs) < count
            if not kvs and has_more:
                raise EtcdError(
                    "no results were found, but etcd indicated there were more values remaining"
                )
            for kv in kvs:
                if limit and len(items) >= limit:
                    has_more = True
                    break
                last_key = kv.key
                item = self._decode(kv.key, kv.value, int(kv.mod_revision))
                if selector is None or selector.matches_item(item):
                    items.append(item)
            if not has_more or not limit or len(items) >= limit:
                break
            if page < MAX_PAGE:
                page = min(page * 2, MAX_PAGE)
            start = last_key + b"\0"
        token = ""
        remaining: int | None = None
        if has_more:
            token = next_page_token(last_key.decode(), request.key_prefix, revision)
            if selector is None:
                remaining = count - limit
        return ListResult(items, revision, token, remaining, Source.STORE)

    def _decode(self, key: bytes, value: bytes, revision: int) -> Item:
        try:
            return self.codec.decode(key.decode(), value, revision)
        except (ObjectDecodeError, UnicodeDecodeError) as error:
            # Kubernetes aborts a LIST on an object it cannot decode.
            raise InternalError.wrap(error) from error
