"""Prometheus text exposition of the caches' statistics, under Kubernetes' metric names.

Nothing is recorded here: caches, reflectors and checkers keep plain counters and
histograms (cheap on their hot paths), and a scrape reads them. Names and labels follow
docs/semantics.md §8 (``group``/``resource`` labels as in Kubernetes 1.34+), so dashboards
written for kube-apiserver's watch cache read these too; what Kubernetes has no name for
is prefixed ``watchcache_``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from watchcache._core import memory_stats
from watchcache.cache.histogram import Histogram
from watchcache.etcd.storage_monitor import StorageMonitor
from watchcache.sync.synced import SyncedCache

#: Kubernetes reports cacheRV modulo 10^15 so the gauge stays exact in a float64.
_RV_MODULUS = 10**15


@dataclass
class _Family:
    name: str
    kind: str  # counter | gauge | histogram
    help: str
    samples: list[str] = field(default_factory=list)


class _Exposition:
    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}

    def family(self, name: str, kind: str, help_text: str) -> _Family:
        found = self._families.get(name)
        if found is None:
            found = self._families[name] = _Family(name, kind, help_text)
        return found

    def sample(
        self, name: str, kind: str, help_text: str, labels: dict[str, str], value: float
    ) -> None:
        self.family(name, kind, help_text).samples.append(
            f"{name}{_labels(labels)} {_number(value)}"
        )

    def histogram(self, name: str, help_text: str, labels: dict[str, str], hist: Histogram) -> None:
        family = self.family(name, "histogram", help_text)
        for bound, count in hist.cumulative():
            le = "+Inf" if math.isinf(bound) else _number(bound)
            family.samples.append(f"{name}_bucket{_labels({**labels, 'le': le})} {count}")
        family.samples.append(f"{name}_sum{_labels(labels)} {_number(hist.sum)}")
        family.samples.append(f"{name}_count{_labels(labels)} {hist.count}")

    def text(self) -> str:
        lines: list[str] = []
        for family in self._families.values():
            lines.append(f"# HELP {family.name} {family.help}")
            lines.append(f"# TYPE {family.name} {family.kind}")
            lines.extend(family.samples)
        return "\n".join(lines) + "\n"


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def render(
    caches: Iterable[SyncedCache],
    etcd_versions: Mapping[str, str] | None = None,
    storage: Iterable[StorageMonitor] = (),
) -> str:
    """The Prometheus text format (version 0.0.4) for every cache, the version each etcd
    endpoint reported (the safeguard's answers) and each etcd cluster's database size."""
    out = _Exposition()
    for monitor in storage:
        if not monitor.members:
            continue
        cluster = {"storage_cluster_id": monitor.cluster_id}
        out.sample(
            "apiserver_storage_size_bytes",
            "gauge",
            "Size of the storage database file physically allocated in bytes.",
            cluster,
            monitor.db_size,
        )
        out.sample(
            "watchcache_storage_size_in_use_bytes",
            "gauge",
            "Bytes of the storage database holding live data (the rest is free pages).",
            cluster,
            monitor.db_size_in_use,
        )
        out.sample(
            "watchcache_storage_defragmentations_total",
            "counter",
            "Defragmentations of the embedded etcd's members.",
            cluster,
            monitor.defragmentations,
        )
    engine = memory_stats()
    for pool, chunks in (("nodes", engine["node_chunks"]), ("items", engine["item_chunks"])):
        out.sample(
            "watchcache_engine_memory_bytes",
            "gauge",
            "Memory the native engine holds for tree nodes and items, in 2 MiB chunks.",
            {"pool": pool},
            chunks * engine["chunk_bytes"],
        )
    for endpoint, version in sorted((etcd_versions or {}).items()):
        out.sample(
            "watchcache_etcd_info",
            "gauge",
            "etcd endpoints and the version each reported.",
            {"endpoint": endpoint, "version": version},
            1,
        )
    for synced in caches:
        cache = synced.cache
        stats = cache.stats
        reflector = synced.reflector.stats
        base = {"group": cache.group, "resource": cache.resource}
        counter = "counter"
        out.histogram(
            "apiserver_watch_cache_read_wait_seconds",
            "Time a read waited for the watch cache to become fresh.",
            base,
            stats.read_wait,
        )
        for (success, fallback), n in sorted(stats.consistent_reads.items()):
            out.sample(
                "apiserver_watch_cache_consistent_read_total",
                counter,
                "Consistent LISTs handled by the cache path, by success and fallback.",
                {**base, "success": str(success).lower(), "fallback": fallback},
                n,
            )
        for source, n in sorted(stats.lists.items()):
            out.sample(
                "watchcache_list_total",
                counter,
                "LISTs served, by where they were served from (cache, snapshot, etcd).",
                {**base, "source": str(source)},
                n,
            )
        for index, n in sorted(stats.list_by_index.items()):
            out.sample(
                "apiserver_cache_list_total",
                counter,
                "LISTs served from the cache, by the index read (empty: a scan).",
                {**base, "index": index},
                n,
            )
        for index, n in sorted(stats.list_fetched_objects.items()):
            out.sample(
                "apiserver_cache_list_fetched_objects_total",
                counter,
                "Objects examined by LISTs served from the cache, by the index read.",
                {**base, "index": index},
                n,
            )
        simple = (
            ("apiserver_watch_cache_events_received_total", stats.events_received,
             "Events received by the watch cache."),
            ("apiserver_watch_cache_events_dispatched_total", stats.events_dispatched,
             "Events dispatched to watchers."),
            ("apiserver_init_events_total", stats.init_events,
             "Initial events sent to new watchers."),
            ("apiserver_terminated_watchers_total", stats.terminated_watchers,
             "Watchers closed because they fell behind."),
            ("apiserver_cache_list_returned_objects_total", stats.list_returned_objects,
             "Objects returned by LISTs served from the cache."),
            ("apiserver_watch_cache_initializations_total", stats.initializations,
             "Times the watch cache was (re)listed from etcd."),
            ("apiserver_watch_cache_initialization_errors_total", reflector.list_errors,
             "Failed lists or watches that led to a relist."),
            ("apiserver_storage_decode_errors_total", reflector.decode_errors,
             "etcd values that could not be decoded."),
            ("etcd_bookmark_counts", reflector.progress_notifications,
             "Progress notifications received from etcd."),
            ("watchcache_progress_requests_total", synced.requester.requests_sent,
             "Progress requests sent to etcd for waiting reads."),
            ("watchcache_inconsistencies_total", stats.inconsistencies,
             "Consistency checks that found the cache different from etcd."),
        )  # fmt: skip
        for name, value, help_text in simple:
            out.sample(name, counter, help_text, base, value)
        for status, n in synced.checker.counts.items():
            out.sample(
                "apiserver_storage_consistency_checks_total",
                counter,
                "Cache-vs-etcd consistency checks, by outcome.",
                {**base, "status": status},
                n,
            )
        gauges = (
            ("apiserver_watch_cache_resource_version", cache.resource_version % _RV_MODULUS,
             "The watch cache's resourceVersion (modulo 10^15)."),
            ("watch_cache_capacity", cache.history.capacity,
             "Capacity of the watch cache's event history."),
            ("watchcache_objects", len(cache), "Objects in the watch cache."),
            ("watchcache_snapshots", len(cache.registry),
             "Snapshots kept for LISTs at past resourceVersions."),
            ("watchcache_snapshot_pinned_bytes", cache.registry.pinned_bytes(),
             "Memory kept alive only by stored snapshots."),
            ("watchcache_watchers", cache.watcher_count, "Open watchers."),
            ("watchcache_ready", int(cache.ready), "1 once the cache is listed and in sync."),
            ("watchcache_consistent", int(cache.consistent),
             "0 while a cache found inconsistent with etcd is rebuilt (reads go to etcd)."),
        )  # fmt: skip
        for name, value, help_text in gauges:
            out.sample(name, "gauge", help_text, base, value)
    return out.text()
