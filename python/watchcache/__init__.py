"""watchcache: a native-accelerated Kubernetes-style watch cache.

The engine (``watchcache._core``) is a persistent copy-on-write B+tree with O(1) snapshots;
this package re-exports it and the public names of the layers built on it, so that user
code imports from ``watchcache`` and not from where a name happens to live:

========  ====================================================================================
wire      ``StatusError`` and its kinds, ``ListOptions``, ``WatchOptions``, the write options
cache     ``WatchCache``, ``Watcher``, ``WatchEvent``, ``Event``, ``EventType``, ``ObjectCodec``,
          ``ListResult``, ``BackingStore``
etcd      ``EtcdClient``, ``EtcdStore``, ``EtcdReader``
sync      ``SyncedCache``
registry  ``ResourceSpec``, ``PrinterColumn``, ``ScaleSubresource``, ``DEFAULT_RESOURCES``
apiserver ``ApiServer``
========  ====================================================================================

The engine types load with the package; everything else on first use (PEP 562), so that
``import watchcache`` for the tree alone does not import grpc or Starlette.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from watchcache._core import (
    FANOUT,
    Cursor,
    Item,
    ScanResult,
    Selector,
    Snapshot,
    SnapshotRegistry,
    SnapshotUsage,
    Tree,
    __version__,
    live_counters,
)

if TYPE_CHECKING:
    from watchcache.apiserver.app import ApiServer
    from watchcache.cache.backing_store import BackingStore, ListResult
    from watchcache.cache.event import Event, EventType
    from watchcache.cache.objects import ObjectCodec
    from watchcache.cache.watch_cache import WatchCache
    from watchcache.cache.watcher import Watcher, WatchEvent
    from watchcache.etcd.client import EtcdClient
    from watchcache.etcd.reader import EtcdReader
    from watchcache.etcd.store import EtcdStore
    from watchcache.registry.resources import (
        DEFAULT_RESOURCES,
        PrinterColumn,
        ResourceSpec,
        ScaleSubresource,
    )
    from watchcache.sync.synced import SyncedCache
    from watchcache.wire.errors import (
        AlreadyExistsError,
        BadRequestError,
        ConflictError,
        ExpiredError,
        InvalidError,
        NotFoundError,
        StatusError,
        TooLargeResourceVersionError,
        TooManyRequestsError,
        WatchTerminatedError,
    )
    from watchcache.wire.options import ListOptions, WatchOptions
    from watchcache.wire.write_options import (
        CreateOptions,
        DeleteOptions,
        PatchOptions,
        UpdateOptions,
    )

#: Public name -> the module that defines it.
_LAZY: dict[str, str] = {
    "ApiServer": "watchcache.apiserver.app",
    "BackingStore": "watchcache.cache.backing_store",
    "ListResult": "watchcache.cache.backing_store",
    "Event": "watchcache.cache.event",
    "EventType": "watchcache.cache.event",
    "ObjectCodec": "watchcache.cache.objects",
    "WatchCache": "watchcache.cache.watch_cache",
    "WatchEvent": "watchcache.cache.watcher",
    "Watcher": "watchcache.cache.watcher",
    "EtcdClient": "watchcache.etcd.client",
    "EtcdStore": "watchcache.etcd.store",
    "EtcdReader": "watchcache.etcd.reader",
    "ResourceSpec": "watchcache.registry.resources",
    "PrinterColumn": "watchcache.registry.resources",
    "ScaleSubresource": "watchcache.registry.resources",
    "DEFAULT_RESOURCES": "watchcache.registry.resources",
    "SyncedCache": "watchcache.sync.synced",
    "ListOptions": "watchcache.wire.options",
    "WatchOptions": "watchcache.wire.options",
    "CreateOptions": "watchcache.wire.write_options",
    "DeleteOptions": "watchcache.wire.write_options",
    "PatchOptions": "watchcache.wire.write_options",
    "UpdateOptions": "watchcache.wire.write_options",
    **dict.fromkeys(
        (
            "AlreadyExistsError",
            "BadRequestError",
            "ConflictError",
            "ExpiredError",
            "InvalidError",
            "NotFoundError",
            "StatusError",
            "TooLargeResourceVersionError",
            "TooManyRequestsError",
            "WatchTerminatedError",
        ),
        "watchcache.wire.errors",
    ),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'watchcache' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "DEFAULT_RESOURCES",
    "FANOUT",
    "AlreadyExistsError",
    "ApiServer",
    "BackingStore",
    "BadRequestError",
    "ConflictError",
    "CreateOptions",
    "Cursor",
    "DeleteOptions",
    "EtcdClient",
    "EtcdReader",
    "EtcdStore",
    "Event",
    "EventType",
    "ExpiredError",
    "InvalidError",
    "Item",
    "ListOptions",
    "ListResult",
    "NotFoundError",
    "ObjectCodec",
    "PatchOptions",
    "PrinterColumn",
    "ResourceSpec",
    "ScaleSubresource",
    "ScanResult",
    "Selector",
    "Snapshot",
    "SnapshotRegistry",
    "SnapshotUsage",
    "StatusError",
    "SyncedCache",
    "TooLargeResourceVersionError",
    "TooManyRequestsError",
    "Tree",
    "UpdateOptions",
    "WatchCache",
    "WatchEvent",
    "WatchOptions",
    "WatchTerminatedError",
    "Watcher",
    "__version__",
    "live_counters",
]
