"""The Prometheus exposition: Kubernetes' names and labels, valid text format, histogram
buckets cumulative, values read from the live statistics."""

from __future__ import annotations

import re

import pytest
from kubeobjects import PREFIX, added, pod

from watchcache import _core, metrics
from watchcache.cache.histogram import Histogram
from watchcache.etcd.client import EtcdClient
from watchcache.sync.synced import SyncedCache
from watchcache.wire.options import ListOptions

SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_]+="[^"]*",?)*\})? -?[0-9.e+Inf]+$')


async def test_render_exposes_cache_statistics_under_kubernetes_names() -> None:
    client = EtcdClient(["127.0.0.1:1"])  # never contacted: rendering reads local state
    synced = SyncedCache(client, PREFIX, resource="pods", kind="Pod")
    cache = synced.cache
    cache.replace([pod("a", "p1", 10, node="n1")], 10)
    cache.apply(added(pod("a", "p2", 11, node="n2")))
    cache.stats.read_wait.observe(0.003)
    cache.stats.read_wait.observe(0.07)
    cache.stats.consistent_reads[(True, "false")] = 2
    await cache.list(ListOptions(resource_version="0"))
    await cache.list(ListOptions(resource_version="0", field_selector="spec.nodeName=n2"))

    text = metrics.render([synced])
    await client.close()

    lines = text.splitlines()
    samples = [line for line in lines if not line.startswith("#")]
    assert samples and all(SAMPLE.match(line) for line in samples), [
        line for line in samples if not SAMPLE.match(line)
    ]
    base = 'group="",resource="pods"'
    assert f'apiserver_watch_cache_read_wait_seconds_bucket{{{base},le="0.005"}} 1' in lines
    assert f'apiserver_watch_cache_read_wait_seconds_bucket{{{base},le="0.1"}} 2' in lines
    assert f'apiserver_watch_cache_read_wait_seconds_bucket{{{base},le="+Inf"}} 2' in lines
    assert f"apiserver_watch_cache_read_wait_seconds_count{{{base}}} 2" in lines
    assert (
        f'apiserver_watch_cache_consistent_read_total{{{base},success="true",fallback="false"}} 2'
        in lines
    )
    assert f"apiserver_watch_cache_events_received_total{{{base}}} 1" in lines
    assert f"apiserver_watch_cache_resource_version{{{base}}} 11" in lines
    assert f"watchcache_objects{{{base}}} 2" in lines
    assert f'watchcache_list_total{{{base},source="cache"}} 2' in lines
    # Pods' LISTs by node read the spec.nodeName index: one item examined, not two.
    assert f'apiserver_cache_list_total{{{base},index=""}} 1' in lines
    assert f'apiserver_cache_list_total{{{base},index="f:spec.nodeName"}} 1' in lines
    assert f'apiserver_cache_list_fetched_objects_total{{{base},index=""}} 2' in lines
    fetched = "apiserver_cache_list_fetched_objects_total"
    assert f'{fetched}{{{base},index="f:spec.nodeName"}} 1' in lines
    assert f'apiserver_storage_consistency_checks_total{{{base},status="failure"}} 0' in lines
    # The engine's memory, process-wide: whole chunks, nodes and items apart (none in
    # sanitizer builds, which bypass the chunks).
    engine = {
        line.split('"')[1]: int(line.rsplit(" ", 1)[1])
        for line in lines
        if line.startswith("watchcache_engine_memory_bytes{")
    }
    assert set(engine) == {"nodes", "items"}
    chunk = _core.memory_stats()["chunk_bytes"]
    assert all(value % chunk == 0 for value in engine.values())
    # One HELP and one TYPE per family, before its samples.
    types = [line.split()[2] for line in lines if line.startswith("# TYPE")]
    assert len(types) == len(set(types))
    assert "# TYPE watch_cache_capacity gauge" in lines


def test_histogram_counts_are_cumulative_and_bounds_inclusive() -> None:
    hist = Histogram((0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 2.0):
        hist.observe(value)
    assert hist.cumulative() == [(0.1, 2), (1.0, 3), (float("inf"), 4)]
    assert (hist.count, hist.sum) == (4, 2.65)
    assert hist.quantile(0.5) == 0.1
    assert hist.quantile(0.99) == float("inf")
    assert Histogram((1.0,)).quantile(0.5) == 0.0


@pytest.mark.parametrize("bounds", [(1.0, 0.5), (1.0, 1.0)])
def test_histogram_rejects_bounds_that_do_not_increase(bounds: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        Histogram(bounds)
