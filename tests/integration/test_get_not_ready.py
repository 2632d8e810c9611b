"""A GET while the cache is not ready (initialising, or relisting after a lost watch) is
read from etcd, as Kubernetes' delegator does (KEP-4568), with the store's answers: the
object, 404, 504 for a resourceVersion etcd has not reached. LISTs keep their rule (an
unfiltered page from etcd, anything else 429), and a stopped cache still answers 429."""

from __future__ import annotations

import pytest
from kubeobjects import PREFIX, pod_key, pod_value

from watchcache.cache.objects import ObjectCodec
from watchcache.cache.watch_cache import WatchCache
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.store import EtcdStore
from watchcache.wire.errors import (
    NotFoundError,
    TooLargeResourceVersionError,
    TooManyRequestsError,
)
from watchcache.wire.options import ListOptions

CODEC = ObjectCodec(("metadata.name", "metadata.namespace", "spec.nodeName"))


async def test_get_reads_etcd_until_the_cache_is_ready(client: EtcdClient) -> None:
    written = await client.put(pod_key("a", "p1").encode(), pod_value("a", "p1", node="n1"))
    cache = WatchCache(
        PREFIX, kind="Pod", resource="pods", store=EtcdStore(client, PREFIX, codec=CODEC)
    )
    assert not cache.ready
    for rv in ("", "0", str(written)):
        item = await cache.get(pod_key("a", "p1"), rv)
        assert (item.key, item.mod_revision, item.fields["spec.nodeName"]) == (
            pod_key("a", "p1"),
            written,
            "n1",
        )
    with pytest.raises(NotFoundError) as missing:
        await cache.get(pod_key("a", "nope"), "0")
    assert missing.value.message == 'pods "nope" not found'
    with pytest.raises(TooLargeResourceVersionError):
        await cache.get(pod_key("a", "p1"), str(written + 1000))
    assert cache.stats.gets_from_store == 5

    # LISTs keep their rule: a filtered LIST is told to come back later.
    with pytest.raises(TooManyRequestsError):
        await cache.list(ListOptions(label_selector="a=b", resource_version="0"))

    # Once ready the cache answers (it does not know p1: it was listed without it).
    cache.replace([], written)
    with pytest.raises(NotFoundError):
        await cache.get(pod_key("a", "p1"), "0")
    assert cache.stats.gets_from_store == 5

    # A relist in progress reads etcd again; a stopped cache does not.
    cache.mark_not_ready("the watch was lost")
    assert (await cache.get(pod_key("a", "p1"), "0")).mod_revision == written
    cache.stop()
    with pytest.raises(TooManyRequestsError):
        await cache.get(pod_key("a", "p1"), "0")
