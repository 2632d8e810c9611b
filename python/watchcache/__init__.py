"""watchcache: a native-accelerated Kubernetes-style watch cache.

The engine (``watchcache._core``) is a persistent copy-on-write B+tree with O(1) snapshots;
this package re-exports it and adds the Kubernetes semantics layered on top.
"""

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

__all__ = [
    "FANOUT",
    "Cursor",
    "Item",
    "ScanResult",
    "Selector",
    "Snapshot",
    "SnapshotRegistry",
    "SnapshotUsage",
    "Tree",
    "__version__",
    "live_counters",
]
