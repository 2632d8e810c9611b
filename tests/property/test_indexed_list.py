"""A LIST read through a secondary index is the LIST a scan gives, at every version.

Two caches receive the same events: one declares indexes on ``spec.nodeName`` and the
label ``app``, the other none. For any contents, selector (index-usable requirements, ones
that are not, and mixtures), request prefix, page size and route — the latest state, an
Exact read of an earlier version, continued pages across later writes — both answer the
same page: the same items, resourceVersion, continue token and remainingItemCount. With
exact counts on, remainingItemCount is the number of matching objects after the page,
counted by brute force. The indexed cache must really have used an index for a usable
selector.
"""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st
from kubeobjects import PREFIX, added, deleted, modified, pod, pod_key

from watchcache import Item
from watchcache.cache.list_index import usable_requirements
from watchcache.cache.watch_cache import WatchCache
from watchcache.wire.options import ListOptions, ResourceVersionMatch

EXACT = ResourceVersionMatch.EXACT
UNSET = ResourceVersionMatch.UNSET

NAMESPACES = ("a", "b", "c")
APPS = ("x", "y", "z")
NODES = ("", "n1", "n2", "n3")
INDEXES = (("field", "spec.nodeName"), ("label", "app"))

# (labelSelector, fieldSelector)
SELECTORS = (
    ("", "spec.nodeName=n1"),
    ("", "spec.nodeName=="),
    ("", "spec.nodeName!=n1"),
    ("app=x", ""),
    ("app in (x,z)", ""),
    ("app notin (x)", ""),
    ("app=x", "spec.nodeName=n2"),
    ("app in (y,z)", "spec.nodeName=n1,metadata.name!=p03"),
    ("!app", "spec.nodeName=n3"),
    ("app", "spec.nodeName=n1,spec.nodeName=n2"),
    ("", "metadata.namespace=b,spec.nodeName=n2"),
    ("", ""),
)

Write = tuple[tuple[str, str], tuple[str | None, str] | None]  # None = delete
keys = st.tuples(st.sampled_from(NAMESPACES), st.integers(0, 25).map(lambda i: f"p{i:02d}"))
states = st.tuples(st.sampled_from((*APPS, None)), st.sampled_from(NODES))
writes = st.lists(st.tuples(keys, st.one_of(st.none(), states)), max_size=12)


class Twins:
    """An indexed and an unindexed cache fed the same events, and what they hold."""

    def __init__(self, initial: dict[tuple[str, str], tuple[str | None, str]], exact: bool):
        self.indexed = WatchCache(
            PREFIX, kind="Pod", list_indexes=INDEXES, exact_remaining_counts=exact
        )
        self.plain = WatchCache(PREFIX, kind="Pod", list_indexes=(), exact_remaining_counts=exact)
        self.rv = 100
        self.items: dict[str, Item] = {}
        for (ns, name), (app, node) in initial.items():
            item = pod(ns, name, self.rv, {"app": app} if app else {}, node)
            self.items[item.key] = item
        for cache in (self.indexed, self.plain):
            cache.replace(list(self.items.values()), self.rv)

    def write(self, ns: str, name: str, state: tuple[str | None, str] | None) -> None:
        key = pod_key(ns, name)
        previous = self.items.get(key)
        if state is None and previous is None:
            return
        self.rv += 1
        if state is None:
            assert previous is not None
            event = deleted(previous, self.rv)
            del self.items[key]
        else:
            app, node = state
            item = pod(ns, name, self.rv, {"app": app} if app else {}, node)
            event = added(item) if previous is None else modified(item, previous)
            self.items[key] = item
        for cache in (self.indexed, self.plain):
            cache.apply(event)


def _page(cache: WatchCache, options: ListOptions, prefix: str | None) -> tuple[object, ...]:
    result = asyncio.run(cache.list(options, prefix=prefix))
    return (
        [(item.key, item.value) for item in result.items],
        result.resource_version,
        result.continue_token,
        result.remaining_item_count,
    )


@given(
    initial=st.dictionaries(keys, states, max_size=50),
    selector=st.sampled_from(SELECTORS),
    namespace=st.sampled_from((None, "a", "c")),
    limit=st.integers(0, 7),
    exact_rv=st.booleans(),
    exact_counts=st.booleans(),
    before=writes,
    between=st.lists(writes, max_size=6),
)
def test_indexed_pages_equal_scanned_pages(
    *,
    initial: dict[tuple[str, str], tuple[str | None, str]],
    selector: tuple[str, str],
    namespace: str | None,
    limit: int,
    exact_rv: bool,
    exact_counts: bool,
    before: list[Write],
    between: list[list[Write]],
) -> None:
    twins = Twins(initial, exact_counts)
    first_rv = twins.rv
    for (ns, name), state in before:
        twins.write(ns, name, state)
    labels, fields = selector
    prefix = None if namespace is None else f"{PREFIX}{namespace}/"
    options = ListOptions(
        label_selector=labels,
        field_selector=fields,
        limit=limit,
        resource_version=str(first_rv) if exact_rv else "",
        resource_version_match=EXACT if exact_rv else UNSET,
    )
    used_before = sum(n for name, n in twins.indexed.stats.list_by_index.items() if name)
    pages = 0
    while True:
        page = _page(twins.indexed, options, prefix)
        assert page == _page(twins.plain, options, prefix)
        pages += 1
        items, _rv, token, remaining = page
        if exact_counts and token and (labels or fields):
            assert remaining == _matches_after(twins, options, items, prefix, page)
        if not token:
            break
        for (ns, name), state in between[(pages - 1) % len(between)] if between else []:
            twins.write(ns, name, state)
        options = ListOptions(
            label_selector=labels, field_selector=fields, limit=limit, continue_token=str(token)
        )
    twins.indexed.check_invariants()
    used = sum(n for name, n in twins.indexed.stats.list_by_index.items() if name) - used_before
    usable = usable_requirements(
        ListOptions(label_selector=labels).label_requirements,
        ListOptions(field_selector=fields).field_requirements,
        INDEXES,
    )
    assert used == (pages if usable else 0)
    assert not any(twins.plain.stats.list_by_index.get(name) for name in ("f:spec.nodeName",))


def _matches_after(
    twins: Twins,
    options: ListOptions,
    items: object,
    prefix: str | None,
    page: tuple[object, ...],
) -> int:
    """Brute force: the objects after the page's last key, in the page's snapshot, that
    the selector accepts (read from the unindexed cache without a limit)."""
    assert isinstance(items, list) and items
    rv = page[1]
    assert isinstance(rv, int)
    everything = ListOptions(
        label_selector=options.label_selector,
        field_selector=options.field_selector,
        resource_version=str(rv),
        resource_version_match=EXACT,
    )
    result = asyncio.run(twins.plain.list(everything, prefix=prefix))
    last_key = items[-1][0]
    return sum(1 for item in result.items if item.key > last_key)
