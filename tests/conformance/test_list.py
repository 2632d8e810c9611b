"""LIST conformance: docs/semantics.md §2, §6.4 and §11 behaviours, against a WatchCache that is
its own source of truth (no store). The etcd issue runs the delegating rows against a real
etcd; the rows here are those a cache answers by itself.

Cluster used by most cases: pods a/p1 a/p2 a/p3 b/p1 created at rv 10..13 (relisted at 9),
then a/p2 relabelled at 20 and b/p1 deleted at 21 — so snapshots at 9..13, 20, 21 exist.
"""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from kubeobjects import PREFIX, added, deleted, modified, names, pod, pod_key, rv_of

from watchcache.cache.backing_store import ListResult, Source
from watchcache.cache.watch_cache import WatchCache
from watchcache.wire.errors import (
    INCONSISTENT_CONTINUE_MESSAGE,
    BadRequestError,
    ExpiredError,
    TooLargeResourceVersionError,
    TooManyRequestsError,
)
from watchcache.wire.options import ListOptions
from watchcache.wire.tokens import encode_continue, parse_continue


def make_cache(**kwargs: object) -> WatchCache:
    cache = WatchCache(PREFIX, resource="pods", kind="Pod", **kwargs)  # type: ignore[arg-type]
    cache.replace([], 9)
    p1 = pod("a", "p1", 10, {"app": "web"})
    p2 = pod("a", "p2", 11, {"app": "db"})
    p3 = pod("a", "p3", 12, {"app": "web"})
    b1 = pod("b", "p1", 13, {"app": "web"})
    for item in (p1, p2, p3, b1):
        cache.apply(added(item))
    cache.apply(modified(pod("a", "p2", 20, {"app": "web"}), p2))
    cache.apply(deleted(b1, 21))
    cache.check_invariants()
    return cache


async def list_(cache: WatchCache, prefix: str | None = None, **query: str) -> ListResult:
    try:
        return await cache.list(ListOptions.from_query(query), prefix=prefix)
    finally:
        cache.check_invariants()


def body(cache: WatchCache, result: ListResult) -> dict[str, object]:
    parsed: dict[str, object] = json.loads(cache.render(result))
    return parsed


async def test_rv0_with_limit_is_honoured_by_default() -> None:
    cache = make_cache()
    result = await list_(cache, limit="1", resourceVersion="0")
    assert names(result.items) == ["a/p1"]
    assert result.continue_token
    assert result.remaining_item_count == 2
    assert result.resource_version == 21


async def test_rv0_with_limit_ignored_in_kubernetes_compat_mode() -> None:
    cache = make_cache(ignore_limit_for_rv0=True)
    result = await list_(cache, limit="1", resourceVersion="0")
    assert names(result.items) == ["a/p1", "a/p2", "a/p3"]
    assert result.continue_token == ""
    assert result.remaining_item_count is None
    assert result.resource_version == 21


async def test_first_page_has_token_and_remaining_count() -> None:
    cache = make_cache()
    result = await list_(cache, limit="2")
    assert names(result.items) == ["a/p1", "a/p2"]
    assert result.remaining_item_count == 1
    token = parse_continue(result.continue_token)
    assert token.resource_version == result.resource_version == 21
    # cacher style: relative to the request prefix without its trailing slash
    assert token.start == "/a/p2\x00"
    meta = body(cache, result)["metadata"]
    assert meta == {
        "resourceVersion": "21",
        "continue": result.continue_token,
        "remainingItemCount": 1,
    }


async def test_selector_page_has_no_remaining_count_and_token_only_if_items_follow() -> None:
    cache = make_cache()
    result = await list_(cache, limit="1", labelSelector="app=web")
    assert names(result.items) == ["a/p1"]
    assert result.remaining_item_count is None
    assert parse_continue(result.continue_token).start == "/a/p1\x00"
    # the page that takes the last match: a/p3 is last under the prefix → no token
    result = await list_(cache, limit="3", labelSelector="app=web")
    assert names(result.items) == ["a/p1", "a/p2", "a/p3"]
    assert result.continue_token == ""


async def test_selector_token_when_only_non_matching_items_follow() -> None:
    """Kubernetes: hasMore if *any* item follows the one that filled the page."""
    cache = make_cache()
    cache.apply(added(pod("c", "z", 30, {"app": "other"})))
    result = await list_(cache, limit="3", labelSelector="app=web")
    assert names(result.items) == ["a/p1", "a/p2", "a/p3"]
    assert parse_continue(result.continue_token).start == "/a/p3\x00"
    rest = await list_(cache, labelSelector="app=web", **{"continue": result.continue_token})
    assert names(rest.items) == []
    assert rest.continue_token == ""
    assert json.loads(cache.render(rest))["items"] == []


async def test_continuation_is_served_from_the_snapshot_at_the_token_rv() -> None:
    cache = make_cache()
    first = await list_(cache, limit="2")
    # writes after the first page must not show in the continuation
    cache.apply(added(pod("a", "p25", 40)))
    cache.apply(modified(pod("a", "p3", 41, {"app": "changed"}), pod("a", "p3", 12)))
    rest = await list_(cache, limit="2", **{"continue": first.continue_token})
    assert rest.source is Source.SNAPSHOT
    assert names(rest.items) == ["a/p3"]
    assert rv_of(rest.items[0].value) == 12
    assert rest.resource_version == 21
    assert rest.continue_token == ""
    assert rest.remaining_item_count is None


async def test_exact_list_reports_the_requested_rv_from_an_older_snapshot() -> None:
    cache = make_cache()
    result = await list_(cache, resourceVersion="15", resourceVersionMatch="Exact")
    # nothing changed between 13 and 20: the snapshot at 13 answers for 15
    assert names(result.items) == ["a/p1", "a/p2", "a/p3", "b/p1"]
    assert result.resource_version == 15
    assert result.source is Source.SNAPSHOT
    assert rv_of(result.items[1].value) == 11


async def test_legacy_exact_limit_with_rv_pins_the_snapshot() -> None:
    cache = make_cache()
    result = await list_(cache, resourceVersion="12", limit="10")
    assert names(result.items) == ["a/p1", "a/p2", "a/p3"]
    assert result.resource_version == 12


async def test_rv_n_without_limit_is_not_older_than() -> None:
    cache = make_cache()
    result = await list_(cache, resourceVersion="12")
    assert names(result.items) == ["a/p1", "a/p2", "a/p3"]
    assert result.resource_version == 21
    assert result.waited_seconds == 0.0


async def test_rv_n_ahead_of_the_cache_waits_for_it() -> None:
    cache = make_cache()

    async def later() -> None:
        await asyncio.sleep(0.05)
        cache.advance(25)

    task = asyncio.create_task(later())
    result = await list_(cache, resourceVersion="25")
    await task
    assert result.resource_version == 25
    assert result.waited_seconds > 0
    assert cache.stats.read_wait.count == 1


async def test_exact_ahead_of_the_cache_times_out_with_504() -> None:
    cache = make_cache(wait_timeout=0.05)
    with pytest.raises(TooLargeResourceVersionError) as info:
        await list_(cache, resourceVersion="105", resourceVersionMatch="Exact")
    err = info.value
    assert err.code == 504
    assert err.message == "Timeout: Too large resource version: 105, current: 21"
    assert err.headers() == {"Retry-After": "1"}
    assert err.status()["details"] == {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }


async def test_exact_below_every_snapshot_is_expired() -> None:
    cache = make_cache(history_lower_bound=2, history_upper_bound=2, window_seconds=0.001)
    # the history keeps 2 events, so snapshots below the oldest buffered one are gone
    with pytest.raises(ExpiredError) as info:
        await list_(cache, resourceVersion="10", resourceVersionMatch="Exact")
    assert info.value.code == 410
    assert info.value.message.startswith("too old resource version: 10")


async def test_continuation_whose_snapshot_is_gone_gets_410_with_inconsistent_token() -> None:
    cache = make_cache(history_lower_bound=2, history_upper_bound=2, window_seconds=0.001)
    token = encode_continue(pod_key("a", "p1") + "\x00", PREFIX[:-1], 11)
    with pytest.raises(ExpiredError) as info:
        await list_(cache, limit="1", **{"continue": token})
    err = info.value
    assert err.message == INCONSISTENT_CONTINUE_MESSAGE
    replacement = parse_continue(err.continue_token)
    assert replacement.resource_version == -1
    assert replacement.start == "/a/p1\x00"
    assert err.status()["metadata"] == {"continue": err.continue_token}
    # using the replacement continues on the latest state, with a new rv
    rest = await list_(cache, limit="5", **{"continue": err.continue_token})
    assert names(rest.items) == ["a/p2", "a/p3"]
    assert rest.resource_version == 21


async def test_namespace_prefix_lists_only_that_namespace() -> None:
    cache = make_cache()
    cache.apply(added(pod("b", "p9", 30)))
    result = await list_(cache, prefix=f"{PREFIX}b/")
    assert names(result.items) == ["b/p9"]
    page = await list_(cache, prefix=f"{PREFIX}a", limit="1")
    assert parse_continue(page.continue_token).start == "/p1\x00"


async def test_token_cannot_reach_outside_the_request_prefix() -> None:
    cache = make_cache()
    cache.apply(added(pod("b", "p9", 30)))
    # a token minted in namespace a, presented in namespace b, stays in namespace b
    page = await list_(cache, prefix=f"{PREFIX}a/", limit="1")
    rest = await list_(cache, prefix=f"{PREFIX}b/", **{"continue": page.continue_token})
    assert names(rest.items) == ["b/p9"]


@pytest.mark.parametrize(
    "start",
    ["../key", "./key", "./../key", "key/../..", "a//b", "a/"],
)
async def test_traversal_in_token_start_is_400(start: str) -> None:
    cache = make_cache()
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": 21, "start": start}).encode()
    token = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    with pytest.raises(BadRequestError) as info:
        await list_(cache, **{"continue": token})
    assert info.value.message == (f"invalid continue token: continue key is not valid: {start}")


async def test_rendered_body_is_the_list_object() -> None:
    cache = make_cache()
    result = await list_(cache, limit="2")
    parsed = body(cache, result)
    assert parsed["kind"] == "PodList"
    assert parsed["apiVersion"] == "v1"
    items = parsed["items"]
    assert isinstance(items, list)
    assert [i["metadata"]["name"] for i in items] == ["p1", "p2"]


async def test_empty_cache_lists_nonzero_rv_and_empty_items() -> None:
    cache = WatchCache(PREFIX, kind="Pod")
    cache.replace([], 7)
    result = await list_(cache)
    assert json.loads(cache.render(result)) == {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "7"},
        "items": [],
    }


async def test_not_ready_cache_answers_429_with_retry_after() -> None:
    now = [100.0]
    cache = WatchCache(PREFIX, clock=lambda: now[0])
    now[0] += 14
    with pytest.raises(TooManyRequestsError) as info:
        await list_(cache, resourceVersion="0")
    assert info.value.message == "storage is (re)initializing"
    assert info.value.headers() == {"Retry-After": "2"}


async def test_large_filtered_list_runs_off_the_event_loop() -> None:
    cache = WatchCache(PREFIX, kind="Pod")
    cache.replace([pod("ns", f"p{i:06d}", 5) for i in range(25_000)], 10)
    result = await list_(cache, labelSelector="app=none")
    assert len(result.items) == 0
    result = await list_(cache, fieldSelector="metadata.name=p000007")
    assert names(result.items) == ["ns/p000007"]
