"""What serves a resource's reads: LIST, GET and WATCH with Kubernetes' semantics.

A :class:`~watchcache.cache.watch_cache.WatchCache` serves them from memory; an
:class:`~watchcache.etcd.reader.EtcdReader` straight from etcd, as kube-apiserver serves a
resource whose watch cache is disabled. The apiserver holds one :class:`ResourceReader` per
served resource and does not care which.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

from watchcache.cache.backing_store import BodyChunks, ListResult
from watchcache.cache.watcher import WatchEvent
from watchcache.wire.options import ListOptions, WatchOptions

if TYPE_CHECKING:
    from watchcache._core import Item


class EventStream(Protocol):
    """One client's watch: start it (start errors raise), iterate its events, close it."""

    async def start(self) -> None: ...

    def __aiter__(self) -> AsyncIterator[WatchEvent]: ...

    async def aclose(self) -> None: ...


class ResourceReader(Protocol):
    """LIST, GET and WATCH of one resource. Every method raises StatusError for what the
    client did wrong or what cannot be served."""

    async def list(self, opts: ListOptions, *, prefix: str | None = None) -> ListResult:
        """One page below ``prefix`` (a namespace's key prefix; None: every object)."""
        ...

    async def get(self, key: str, resource_version: str = "") -> Item:
        """The object at ``key`` (404 when there is none)."""
        ...

    def watch(self, opts: WatchOptions, *, prefix: str | None = None) -> EventStream:
        """A watch below ``prefix``, not started yet."""
        ...

    def render(self, result: ListResult) -> bytes:
        """The LIST body of ``result`` for this resource's kind."""
        ...

    def chunks(self, result: ListResult, chunk_bytes: int) -> BodyChunks:
        """:meth:`render`'s body in pieces of about ``chunk_bytes``, rendered as they are
        asked for (``ListResult.chunks``)."""
        ...
