"""Which requirement a LIST reads through an index, and how a cache declares its indexes."""

from __future__ import annotations

import pytest
from kubeobjects import PREFIX, pod

from watchcache.cache.list_index import IndexChoice, choose_index, usable_requirements
from watchcache.cache.watch_cache import WatchCache
from watchcache.wire.options import ListOptions

DECLARED = (("field", "spec.nodeName"), ("label", "app"), ("label", "tier"))


def usable(labels: str = "", fields: str = "") -> list[IndexChoice]:
    opts = ListOptions(label_selector=labels, field_selector=fields)
    return usable_requirements(opts.label_requirements, opts.field_requirements, DECLARED)


@pytest.mark.parametrize(
    ("labels", "fields", "expected"),
    [
        ("", "spec.nodeName=n1", [IndexChoice("field", "spec.nodeName", ("n1",), True)]),
        ("", "spec.nodeName==n1", [IndexChoice("field", "spec.nodeName", ("n1",), True)]),
        # The scheduler's unscheduled pods: an absent field is indexed under "".
        ("", "spec.nodeName=", [IndexChoice("field", "spec.nodeName", ("",), True)]),
        ("app=web", "", [IndexChoice("label", "app", ("web",), True)]),
        ("app in (b,a)", "", [IndexChoice("label", "app", ("a", "b"), True)]),
        (
            "tier=db",
            "spec.nodeName=n1",
            [
                IndexChoice("field", "spec.nodeName", ("n1",), False),
                IndexChoice("label", "tier", ("db",), False),
            ],
        ),
        # Requirements that match objects outside any value set, or are not indexed.
        ("", "spec.nodeName!=n1", []),
        ("app!=web", "", []),
        ("app notin (web)", "", []),
        ("app", "", []),
        ("!app", "", []),
        ("other=x", "metadata.namespace=a", []),
        ("", "spec.restartPolicy=Always", []),
    ],
)
def test_usable_requirements(labels: str, fields: str, expected: list[IndexChoice]) -> None:
    assert usable(labels, fields) == expected


def test_the_requirement_with_fewest_candidates_in_the_prefix_is_chosen() -> None:
    cache = WatchCache(PREFIX, kind="Pod", list_indexes=DECLARED)
    items = [pod("a", f"p{i}", 10, {"app": "web"}, "n1") for i in range(5)]
    items.append(pod("a", "q", 10, {"app": "db"}, "n2"))
    items += [pod("b", f"r{i}", 10, {"app": "db"}, "n2") for i in range(5)]
    cache.replace(items, 10)
    snap = cache.snapshot()[1]

    def chosen(labels: str, fields: str, prefix: str) -> tuple[str, int] | None:
        opts = ListOptions(label_selector=labels, field_selector=fields)
        found = choose_index(
            snap, prefix, opts.label_requirements, opts.field_requirements, DECLARED
        )
        return None if found is None else (found[0].name, found[1])

    # Namespace a: app=db has one candidate there, spec.nodeName=n1 five.
    assert chosen("app=db", "spec.nodeName=n1", f"{PREFIX}a/") == ("app", 1)
    # Across namespaces app=db has six, spec.nodeName=n1 five.
    assert chosen("app=db", "spec.nodeName=n1", PREFIX) == ("spec.nodeName", 5)
    assert chosen("app!=db", "", PREFIX) is None


async def test_a_filtered_page_reads_only_candidates_and_counts_exactly_on_request() -> None:
    for exact in (False, True):
        cache = WatchCache(PREFIX, kind="Pod", exact_remaining_counts=exact)
        assert cache.list_indexes == (("field", "spec.nodeName"),)  # pods' default
        cache.replace([pod("a", f"p{i:02d}", 10, node=f"n{i % 4}") for i in range(40)], 10)
        opts = ListOptions(field_selector="spec.nodeName=n1", limit=3)
        page = await cache.list(opts)
        assert [item.key for item in page.items] == _keys(1, 3)
        assert page.continue_token
        assert page.remaining_item_count == (7 if exact else None)
        assert cache.stats.list_fetched_objects == {"f:spec.nodeName": 3}
        # With a second requirement the count is of matches, not of the index's candidates.
        opts = ListOptions(field_selector="spec.nodeName=n1,metadata.name!=p37", limit=3)
        page = await cache.list(opts)
        assert page.remaining_item_count == (6 if exact else None)


def _keys(node: int, count: int) -> list[str]:
    return [f"{PREFIX}a/p{i:02d}" for i in range(node, 40, 4)][:count]


async def test_without_indexes_pages_are_scanned() -> None:
    cache = WatchCache(PREFIX, kind="Pod", list_indexes=())
    cache.replace([pod("a", f"p{i:02d}", 10, node=f"n{i % 4}") for i in range(40)], 10)
    page = await cache.list(ListOptions(field_selector="spec.nodeName=n1"))
    assert len(page.items) == 10
    assert cache.stats.list_by_index == {"": 1}
    assert cache.stats.list_fetched_objects == {"": 40}


@pytest.mark.parametrize("indexes", [[("annotation", "a")], [("label", "")]])
def test_a_bad_index_declaration_raises(indexes: list[tuple[str, str]]) -> None:
    with pytest.raises(ValueError):
        WatchCache(PREFIX, kind="Pod", list_indexes=indexes)
