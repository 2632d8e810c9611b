"""WatcherIndex: narrowing the watchers an event is offered to never drops one whose
selector matches the event's new or previous object, and filing follows the selector."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from watchcache import _core
from watchcache.cache.watchindex import WatcherIndex, filing_requirement
from watchcache.wire.selectors import compile_selector, parse_label_selector

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


def item(labels: dict[str, str]) -> _core.Item:
    return _core.Item("/k", b"{}", 1, labels, {})


@settings(max_examples=300, deadline=None)
@given(
    st.lists(selectors(), max_size=12),
    st.one_of(st.none(), labels_st),
    st.one_of(st.none(), labels_st),
)
def test_candidates_include_every_watcher_the_event_concerns(
    texts: list[str], new: dict[str, str] | None, old: dict[str, str] | None
) -> None:
    index: WatcherIndex[int] = WatcherIndex()
    for watcher_id, text in enumerate(texts):
        index.add(watcher_id, watcher_id, parse_label_selector(text))
    candidates = list(index.candidates(new, old))
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
    index: WatcherIndex[str] = WatcherIndex()
    index.add(1, "in", parse_label_selector("app in (a,b)"))
    index.add(2, "all", ())
    assert sorted(index.candidates({"app": "a"}, {"app": "b"})) == ["all", "in"]


def test_filing_prefers_the_requirement_with_fewest_values() -> None:
    filing = filing_requirement(parse_label_selector("app in (a,b,c),tier=x,!zone"))
    assert filing is not None and (filing.key, filing.values) == ("tier", ("x",))
    assert filing_requirement(parse_label_selector("app!=a,zone")) is None


def test_remove_unfiles_and_forgets_empty_buckets() -> None:
    index: WatcherIndex[str] = WatcherIndex()
    index.add(1, "web", parse_label_selector("app=web"))
    index.add(2, "any", ())
    assert len(index) == 2
    assert list(index.candidates({"app": "web"}, None)) == ["any", "web"]
    index.remove(1)
    index.remove(1)  # twice is harmless: a watcher can end from both sides
    assert not index.filed
    assert list(index.candidates({"app": "web"}, None)) == ["any"]
    index.remove(2)
    assert len(index) == 0 and list(index.values()) == []
