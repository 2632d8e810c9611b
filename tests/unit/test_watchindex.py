"""WatcherIndex: narrowing the watchers an event is offered to never drops one whose
prefix and selector match the event's new or previous object, and filing picks the most
selective of scope, name, trigger field and label."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from watchcache import _core
from watchcache.cache.watch_cache import WatchCache
from watchcache.cache.watchindex import (
    Filing,
    WatcherIndex,
    choose_filing,
    default_trigger_fields,
    key_segment,
)
from watchcache.wire.options import WatchOptions
from watchcache.wire.selectors import compile_selector, parse_field_selector, parse_label_selector

PREFIX = "/registry/pods/"
KEYS = ["app", "tier", "zone"]
VALUES = ["a", "b", "c"]

labels_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)


@st.composite
def selectors(draw: st.DrawFn) -> str:
    terms = []
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True)):
        op = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!"]))
        if op in ("in", "notin"):
            values = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True))
            terms.append(f"{key} {op} ({','.join(values)})")
        elif op == "exists":
            terms.append(key)
        elif op == "!":
            terms.append(f"!{key}")
        else:
            terms.append(f"{key}{op}{draw(st.sampled_from(VALUES))}")
    return ",".join(terms)


def item(labels: dict[str, str], fields: dict[str, str] | None = None) -> _core.Item:
    return _core.Item(PREFIX + "ns/p", b"{}", 1, labels, fields or {})


def filing(key_prefix: str, labels: str = "", fields: str = "") -> Filing | None:
    return choose_filing(
        PREFIX,
        key_prefix,
        parse_label_selector(labels),
        parse_field_selector(fields),
        ("spec.nodeName",),
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(selectors(), max_size=12),
    st.one_of(st.none(), labels_st),
    st.one_of(st.none(), labels_st),
)
def test_candidates_include_every_watcher_the_event_concerns(
    texts: list[str], new: dict[str, str] | None, old: dict[str, str] | None
) -> None:
    index: WatcherIndex[int] = WatcherIndex(PREFIX)
    for watcher_id, text in enumerate(texts):
        index.add(watcher_id, watcher_id, PREFIX, parse_label_selector(text))
    index.check_invariants()
    new_item = None if new is None else item(new)
    old_item = None if old is None else item(old)
    candidates = list(index.candidates(PREFIX + "ns/p", new_item, old_item))
    assert len(candidates) == len(set(candidates)), "each watcher is offered an event once"
    for watcher_id, text in enumerate(texts):
        selector = compile_selector(text, "")
        concerned = any(
            labels is not None and (selector is None or selector.matches_item(item(labels)))
            for labels in (new, old)
        )
        if concerned:
            assert watcher_id in candidates, text


def test_each_candidate_comes_once_even_when_both_objects_match() -> None:
    index: WatcherIndex[str] = WatcherIndex(PREFIX)
    index.add(1, "in", PREFIX, parse_label_selector("app in (a,b)"))
    index.add(2, "all", PREFIX)
    found = index.candidates(PREFIX + "ns/p", item({"app": "a"}), item({"app": "b"}))
    assert sorted(found) == ["all", "in"]


def test_filing_prefers_fewest_values_then_name_trigger_label_namespace() -> None:
    assert filing(PREFIX, "app in (a,b,c),tier=x,!zone") == Filing(None, "label", "tier", ("x",))
    assert filing(PREFIX, "app!=a,zone") is None
    everything = "metadata.namespace=ns,app=web,spec.nodeName=n1,metadata.name=p"
    assert filing(PREFIX, fields=everything) == Filing(None, "field", "metadata.name", ("p",))
    assert filing(PREFIX, "app=web", "metadata.namespace=ns,spec.nodeName=n1") == Filing(
        None, "field", "spec.nodeName", ("n1",)
    )
    assert filing(PREFIX, "app=web", "metadata.namespace=ns") == Filing(
        None, "label", "app", ("web",)
    )
    assert filing(PREFIX, "app in (a,b)", "metadata.namespace=ns") == Filing(
        None, "field", "metadata.namespace", ("ns",)
    )


def test_filing_combines_the_namespace_of_the_key_prefix_with_a_value() -> None:
    assert filing(PREFIX + "ns/") == Filing("ns", "scope", "", ("",))
    assert filing(PREFIX + "ns/", fields="metadata.name=p") == Filing(
        "ns", "field", "metadata.name", ("p",)
    )
    # The key prefix fixes the namespace already: a namespace requirement adds nothing.
    assert filing(PREFIX + "ns/", fields="metadata.namespace=ns") == Filing(
        "ns", "scope", "", ("",)
    )


def test_only_equality_on_name_namespace_and_trigger_fields_files() -> None:
    assert filing(PREFIX, fields="spec.nodeName!=n1,status.phase=Running") is None
    assert filing(PREFIX, fields="spec.nodeName==n1") == Filing(
        None, "field", "spec.nodeName", ("n1",)
    )
    assert filing(PREFIX, fields="spec.nodeName=") == Filing(None, "field", "spec.nodeName", ("",))
    untriggered = choose_filing(PREFIX, PREFIX, (), parse_field_selector("spec.nodeName=n1"))
    assert untriggered is None


def test_key_segment_is_the_first_directory_below_the_prefix() -> None:
    assert key_segment(PREFIX, PREFIX + "ns/p") == "ns"
    assert key_segment(PREFIX, PREFIX + "ns/") == "ns"
    assert key_segment(PREFIX, PREFIX + "ns/a/b/") == "ns"
    assert key_segment(PREFIX, PREFIX + "cluster-scoped") is None
    assert key_segment(PREFIX, PREFIX) is None
    assert key_segment(PREFIX, "/registry/other/ns/p") is None


def test_field_and_scope_filings_are_found_by_the_objects_values() -> None:
    index: WatcherIndex[str] = WatcherIndex(PREFIX, ("spec.nodeName",))
    index.add(1, "n1", PREFIX, (), parse_field_selector("spec.nodeName=n1"))
    index.add(2, "n2", PREFIX, (), parse_field_selector("spec.nodeName=n2"))
    index.add(3, "unbound", PREFIX, (), parse_field_selector("spec.nodeName="))
    index.add(4, "ns", PREFIX + "ns/")
    index.add(5, "other-ns", PREFIX + "other/")
    index.add(6, "ns/p", PREFIX + "ns/", (), parse_field_selector("metadata.name=p"))
    index.check_invariants()
    key = PREFIX + "ns/p"
    moved = index.candidates(key, item({}, {"spec.nodeName": "n2"}), item({}, {}))
    # An absent field reads as "": the old object was unbound.
    assert sorted(moved) == ["n2", "ns", "unbound"]
    named = index.candidates(key, None, item({}, {"metadata.name": "p", "spec.nodeName": "n1"}))
    assert sorted(named) == ["n1", "ns", "ns/p"]
    # A cluster-scoped key has no namespace: no scoped watcher is asked.
    assert sorted(index.candidates(PREFIX + "p", item({}, {}), None)) == ["unbound"]


def test_remove_unfiles_and_forgets_empty_buckets() -> None:
    index: WatcherIndex[str] = WatcherIndex(PREFIX)
    index.add(1, "web", PREFIX, parse_label_selector("app=web"))
    index.add(2, "any", PREFIX)
    assert len(index) == 2
    assert list(index.candidates(PREFIX + "ns/p", item({"app": "web"}), None)) == ["any", "web"]
    index.remove(1)
    index.remove(1)  # twice is harmless: a watcher can end from both sides
    assert not index.filed
    index.check_invariants()
    assert list(index.candidates(PREFIX + "ns/p", item({"app": "web"}), None)) == ["any"]
    index.remove(2)
    assert len(index) == 0 and list(index.values()) == []


def test_adding_a_registered_id_refiles_it() -> None:
    index: WatcherIndex[str] = WatcherIndex(PREFIX)
    index.add(1, "w", PREFIX, parse_label_selector("app=web"))
    index.add(1, "w", PREFIX + "ns/")
    index.check_invariants()
    assert index.filing(1) == Filing("ns", "scope", "", ("",)) and len(index) == 1


def test_core_pods_are_filed_by_node_like_kubernetes() -> None:
    assert default_trigger_fields("", "pods") == ("spec.nodeName",)
    assert default_trigger_fields("", "configmaps") == ()
    assert WatchCache(PREFIX).trigger_fields == {"spec.nodeName"}
    assert WatchCache("/registry/configmaps/").trigger_fields == frozenset()
    assert WatchCache(PREFIX, trigger_fields=()).trigger_fields == frozenset()
    custom = WatchCache("/registry/secrets/", trigger_fields=["type"])
    assert custom.trigger_fields == {"type"}


async def test_the_cache_files_a_kubelets_watch_under_its_node() -> None:
    cache = WatchCache(PREFIX)
    cache.replace([], 1)
    kubelet = await cache.watch(
        WatchOptions(resource_version="1", field_selector="spec.nodeName=n1")
    )
    one = await cache.watch(
        WatchOptions(resource_version="1", field_selector="metadata.name=p"), prefix=PREFIX + "ns"
    )
    everything = await cache.watch(WatchOptions(resource_version="1"))
    assert cache.watcher_filing(kubelet.watcher_id) == Filing(
        None, "field", "spec.nodeName", ("n1",)
    )
    assert cache.watcher_filing(one.watcher_id) == Filing("ns", "field", "metadata.name", ("p",))
    assert cache.watcher_filing(everything.watcher_id) is None
    cache.check_invariants()
    for watcher in (kubelet, one, everything):
        await watcher.aclose()
    assert cache.watcher_count == 0
    cache.check_invariants()
