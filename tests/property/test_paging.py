"""Paging through a snapshot while writes continue yields exactly the filtered snapshot.

For any cache contents, page size, selector and request prefix, following continue tokens
from a first page returns each object that matched at the first page's rv exactly once, in
key order, at the version it had then — whatever is added, changed or deleted between
pages. Unfiltered pages also report remainingItemCount = how many objects are still to come.
And random text in any LIST parameter gives a StatusError (400/422), never anything else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st
from kubeobjects import PREFIX, added, deleted, modified, pod, pod_key

from watchcache import Item
from watchcache.cache.watch_cache import WatchCache
from watchcache.wire.errors import StatusError
from watchcache.wire.options import ListOptions

NAMESPACES = ("a", "b", "c")
APPS = ("x", "y", "z")
SELECTORS: dict[str, Callable[[str], bool]] = {
    "": lambda app: True,
    "app=x": lambda app: app == "x",
    "app!=y": lambda app: app != "y",
    "app in (x,z)": lambda app: app in ("x", "z"),
    "app notin (x)": lambda app: app != "x",
}

keys = st.tuples(st.sampled_from(NAMESPACES), st.integers(0, 30).map(lambda i: f"p{i:02d}"))
write = st.tuples(keys, st.sampled_from((*APPS, None)))  # None = delete


class Cluster:
    """The cache plus a plain-dict oracle of what it holds."""

    def __init__(self, initial: dict[tuple[str, str], str]) -> None:
        self.cache = WatchCache(PREFIX, kind="Pod")
        self.rv = 100
        self.model: dict[str, tuple[Item, str]] = {}
        items = []
        for (ns, name), app in initial.items():
            item = pod(ns, name, self.rv, {"app": app})
            items.append(item)
            self.model[item.key] = (item, app)
        self.cache.replace(items, self.rv)
        self.cache.check_invariants()

    def write(self, ns: str, name: str, app: str | None) -> None:
        key = pod_key(ns, name)
        self.rv += 1
        previous = self.model.get(key)
        if app is None:
            if previous is None:
                return
            self.cache.apply(deleted(previous[0], self.rv))
            del self.model[key]
            self.cache.check_invariants()
            return
        item = pod(ns, name, self.rv, {"app": app})
        self.cache.apply(added(item) if previous is None else modified(item, previous[0]))
        self.model[key] = (item, app)
        self.cache.check_invariants()


@given(
    initial=st.dictionaries(keys, st.sampled_from(APPS), max_size=60),
    limit=st.integers(1, 9),
    selector=st.sampled_from(sorted(SELECTORS)),
    namespace=st.sampled_from((None, "a", "b")),
    writes=st.lists(st.lists(write, max_size=4), max_size=40),
)
def test_paging_returns_the_filtered_snapshot_while_writes_continue(
    initial: dict[tuple[str, str], str],
    limit: int,
    selector: str,
    namespace: str | None,
    writes: list[list[tuple[tuple[str, str], str | None]]],
) -> None:
    asyncio.run(_page_through(initial, limit, selector, namespace, writes))


async def _page_through(
    initial: dict[tuple[str, str], str],
    limit: int,
    selector: str,
    namespace: str | None,
    writes: list[list[tuple[tuple[str, str], str | None]]],
) -> None:
    cluster = Cluster(initial)
    prefix = PREFIX if namespace is None else f"{PREFIX}{namespace}/"
    accepts = SELECTORS[selector]
    expected = [
        (key, item.mod_revision)
        for key, (item, app) in sorted(cluster.model.items())
        if key.startswith(prefix) and accepts(app)
    ]
    seen: list[tuple[str, int]] = []
    token = ""
    list_rv = None
    pending = iter(writes)
    while True:
        opts = ListOptions(limit=limit, label_selector=selector, continue_token=token)
        page = await cluster.cache.list(opts, prefix=prefix)
        if list_rv is None:
            list_rv = page.resource_version
        assert page.resource_version == list_rv
        assert len(page.items) <= limit
        seen.extend((item.key, item.mod_revision) for item in page.items)
        token = page.continue_token
        if selector == "" and token:
            assert page.remaining_item_count == len(expected) - len(seen)
        else:
            assert page.remaining_item_count is None
        if not token:
            break
        for (ns, name), app in next(pending, []):
            cluster.write(ns, name, app)
    assert seen == expected


LIST_PARAMS = (
    "resourceVersion",
    "resourceVersionMatch",
    "limit",
    "continue",
    "labelSelector",
    "fieldSelector",
    "sendInitialEvents",
)


@given(st.dictionaries(st.sampled_from(LIST_PARAMS), st.text(max_size=40), max_size=5))
def test_random_list_parameters_give_a_status_error_or_a_page(params: dict[str, str]) -> None:
    async def attempt() -> None:
        cache = WatchCache(PREFIX, kind="Pod", wait_timeout=0.01)
        cache.replace([pod("a", "p1", 5, {"app": "x"})], 10)
        try:
            opts = ListOptions.from_query(params)
            await cache.list(opts, prefix=f"{PREFIX}a/")
        except StatusError as err:
            assert err.code in (400, 410, 422, 504), err
            err.to_json()

    asyncio.run(attempt())


@given(st.text(max_size=200))
def test_random_continue_tokens_are_bad_requests(token: str) -> None:
    async def attempt() -> None:
        cache = WatchCache(PREFIX, kind="Pod", wait_timeout=0.01)
        cache.replace([pod("a", "p1", 5)], 10)
        try:
            await cache.list(ListOptions(continue_token=token))
        except StatusError as err:
            assert err.code in (400, 410, 504), err

    asyncio.run(attempt())
