"""Property tests: ``scan(..., selector=...)`` against a Python oracle of Kubernetes selector
semantics (apimachinery ``labels.Requirement.Matches`` and ``fields`` selectors).

Oracle rules, per the stub of ``Selector``:

* ``=`` / ``in``: the label is present and its value is (one of) the value(s);
* ``!=`` / ``notin``: the label is absent, or present with another value;
* ``exists`` / ``!``: the label is present / absent;
* ``gt`` / ``lt``: the label is present, both it and the requirement parse as base-10 int64
  (Go's ``strconv.ParseInt``: optional sign, digits only, no overflow), and compare;
* fields: ``=`` / ``!=`` against the field's value, an absent field reading as ``""``;
* all requirements must hold.

Scan rules: ``limit`` counts selected items. A page that filled its limit reports
``next_key = last_key + "\\0"`` iff at least one item of the scanned range (selected or not)
follows the last returned item, and ``remaining`` = the range's items after it, ignoring the
selector. A page that did not fill its limit examined the whole range: no ``next_key``,
``remaining == 0`` -- Kubernetes' ``hasMore`` (docs/semantics.md section 2.5 and case 10), which
the stub's wording leaves implicit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hypothesis import given, note
from hypothesis import strategies as st

from watchcache import _core

LabelReq = tuple[str, str, Sequence[str]]
FieldReq = tuple[str, str, str]

KEYS = st.text(alphabet="ab/é", min_size=1, max_size=4)
LABEL_KEYS = st.sampled_from(["app", "tier", "n"])
# Integers with and without leading zeros, an int64 overflow, non-integers and the empty value.
LABEL_VALUES = st.sampled_from(["", "x", "y", "a1", "1", "2", "10", "007", "99999999999999999999"])
INT_VALUES = st.sampled_from(["-1", "0", "1", "2", "7", "9", "10"])
FIELD_KEYS = st.sampled_from(["spec.nodeName", "status.phase"])
FIELD_VALUES = st.sampled_from(["", "n1", "n2"])

LABELS = st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=3)
FIELDS = st.dictionaries(FIELD_KEYS, FIELD_VALUES, max_size=2)


def _values(
    min_size: int, max_size: int, elements: st.SearchStrategy[str]
) -> st.SearchStrategy[Sequence[str]]:
    """Value lists, passed as a list or a tuple (any Sequence[str] is accepted)."""
    as_list = st.lists(elements, min_size=min_size, max_size=max_size)
    return st.one_of(as_list, as_list.map(tuple))


LABEL_REQS: st.SearchStrategy[LabelReq] = st.one_of(
    st.tuples(LABEL_KEYS, st.sampled_from(["=", "!="]), _values(1, 1, LABEL_VALUES)),
    st.tuples(LABEL_KEYS, st.sampled_from(["in", "notin"]), _values(1, 3, LABEL_VALUES)),
    st.tuples(LABEL_KEYS, st.sampled_from(["exists", "!"]), _values(0, 0, LABEL_VALUES)),
    st.tuples(LABEL_KEYS, st.sampled_from(["gt", "lt"]), _values(1, 1, INT_VALUES)),
)
FIELD_REQS: st.SearchStrategy[FieldReq] = st.tuples(
    FIELD_KEYS, st.sampled_from(["=", "!="]), FIELD_VALUES
)


@dataclass(frozen=True)
class Spec:
    labels: list[LabelReq]
    fields: list[FieldReq]

    def compile(self) -> _core.Selector:
        return _core.Selector(labels=self.labels, fields=self.fields)


SELECTORS = st.builds(
    Spec, labels=st.lists(LABEL_REQS, max_size=3), fields=st.lists(FIELD_REQS, max_size=2)
)

_INT64 = re.compile(r"[+-]?[0-9]+")


def parse_int64(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64), None on error."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def label_matches(req: LabelReq, labels: Mapping[str, str]) -> bool:
    key, op, values = req
    present = key in labels
    value = labels.get(key, "")
    if op == "=":
        return present and value == values[0]
    if op == "!=":
        return not present or value != values[0]
    if op == "in":
        return present and value in values
    if op == "notin":
        return not present or value not in values
    if op == "exists":
        return present
    if op == "!":
        return not present
    have, want = parse_int64(value), parse_int64(values[0])
    if not present or have is None or want is None:
        return False
    return have > want if op == "gt" else have < want


def field_matches(req: FieldReq, fields: Mapping[str, str]) -> bool:
    key, op, value = req
    return (fields.get(key, "") == value) is (op == "=")


def oracle(spec: Spec, labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
    return all(label_matches(r, labels) for r in spec.labels) and all(
        field_matches(r, fields) for r in spec.fields
    )


@dataclass
class Entry:
    labels: dict[str, str]
    fields: dict[str, str]


def patterned_entry(i: int) -> Entry:
    """Deterministic labels for bulk items, so big trees cost nothing to generate."""
    labels: dict[str, str] = {}
    if i % 3:
        labels["app"] = "xy"[i % 3 - 1]
    if i % 5:
        labels["n"] = str(i % 13) if i % 11 else "9" * 20  # 9...9 overflows int64
    if i % 7 == 0:
        labels["tier"] = ""
    fields = {"spec.nodeName": f"n{i % 3}"} if i % 4 else {}
    return Entry(labels, fields)


@st.composite
def stores(draw: st.DrawFn) -> dict[str, Entry]:
    """A few hand-drawn items plus, often, hundreds of patterned ones spanning many leaves."""
    store = draw(
        st.dictionaries(KEYS, st.builds(Entry, labels=LABELS, fields=FIELDS), max_size=40),
        label="drawn items",
    )
    bulk = draw(st.sampled_from([0, 0, _core.FANOUT + 1, 5 * _core.FANOUT, 400]), label="bulk")
    for i in range(bulk):
        store[f"a/{i:05d}"] = patterned_entry(i)
    return store


def build(store: Mapping[str, Entry], as_snapshot: bool) -> _core.Tree | _core.Snapshot:
    tree = _core.Tree()
    for key, entry in store.items():
        tree.put(key, key.encode(), 0, labels=entry.labels, fields=entry.fields)
    return tree.snapshot() if as_snapshot else tree


def in_scan_range(
    keys: list[str], prefix: str, start_at: str | None, start_after: str | None
) -> list[str]:
    return [
        k
        for k in keys
        if k.startswith(prefix)
        and (start_at is None or k >= start_at)
        and (start_after is None or k > start_after)
    ]


PREFIXES = st.sampled_from(["", "a", "a/", "a/00", "a/001", "b", "é", "a/b"])
STARTS = st.one_of(
    st.none(),
    st.tuples(
        st.sampled_from(["start_at", "start_after"]),
        st.one_of(KEYS, st.sampled_from(["a/00100", "a/0"])),
    ),
)


@given(
    store=stores(),
    spec=SELECTORS,
    prefix=PREFIXES,
    start=STARTS,
    limit=st.integers(0, 50),
    as_snapshot=st.booleans(),
)
def test_scan_with_selector_returns_what_kubernetes_semantics_select(
    *,
    store: dict[str, Entry],
    spec: Spec,
    prefix: str,
    start: tuple[str, str] | None,
    limit: int,
    as_snapshot: bool,
) -> None:
    view = build(store, as_snapshot)
    start_at = start[1] if start is not None and start[0] == "start_at" else None
    start_after = start[1] if start is not None and start[0] == "start_after" else None
    selector = spec.compile()
    result = view.scan(
        prefix, start_at=start_at, start_after=start_after, limit=limit, selector=selector
    )

    in_range = in_scan_range(sorted(store), prefix, start_at, start_after)
    selected = [k for k in in_range if oracle(spec, store[k].labels, store[k].fields)]
    returned = selected[:limit] if limit else selected
    note(f"range={in_range} selected={selected} returned={returned}")

    assert result.keys() == returned
    assert [item.labels for item in result] == [store[k].labels for k in returned]
    assert [item.fields for item in result] == [store[k].fields for k in returned]
    limit_reached = bool(limit) and len(returned) == limit
    if not limit_reached:
        assert result.last_key == (returned[-1] if returned else None)
        assert result.next_key is None, "a page short of its limit has no continuation"
        assert result.remaining == 0
        assert result.scanned == len(in_range), "a page short of its limit examined the whole range"
        return
    last = returned[-1]
    after = in_range[in_range.index(last) + 1 :]
    assert result.last_key == last
    assert result.next_key == (last + "\0" if after else None), (
        "next_key is set iff any item of the range, selected or not, follows the last returned one"
    )
    assert result.remaining == len(after), (
        "remaining counts the range after the last item, selected or not"
    )
    assert in_range.index(last) + 1 <= result.scanned <= len(in_range)


@given(store=stores(), spec=SELECTORS, prefix=PREFIXES, limit=st.integers(1, 40))
def test_following_next_key_with_a_selector_yields_every_selected_item_once(
    store: dict[str, Entry], spec: Spec, prefix: str, limit: int
) -> None:
    view = build(store, as_snapshot=True)
    selector = spec.compile()
    in_range = in_scan_range(sorted(store), prefix, None, None)
    expected = [k for k in in_range if oracle(spec, store[k].labels, store[k].fields)]
    seen: list[str] = []
    start_at: str | None = None
    for _ in range(len(in_range) + 1):
        page = view.scan(prefix, start_at=start_at, limit=limit, selector=selector)
        assert len(page) <= limit
        seen.extend(page.keys())
        if page.next_key is None:
            break
        start_at = page.next_key
    else:
        raise AssertionError("pagination did not end")
    assert seen == expected


@given(store=stores(), spec=SELECTORS)
def test_selector_matches_and_matches_item_agree_with_the_oracle(
    store: dict[str, Entry], spec: Spec
) -> None:
    selector = spec.compile()
    assert selector.empty is (not spec.labels and not spec.fields)
    view = build(store, as_snapshot=False)
    for key, entry in store.items():
        expected = oracle(spec, entry.labels, entry.fields)
        assert selector.matches(entry.labels, entry.fields) is expected, (key, entry)
        item = view.get_item(key)
        assert item is not None
        assert selector.matches_item(item) is expected, (key, entry)
    assert selector.matches({}) is oracle(spec, {}, {}), (
        "absent labels; absent fields read as empty"
    )


@given(store=stores(), prefix=PREFIXES, start=STARTS, limit=st.integers(0, 50))
def test_empty_selector_scans_exactly_like_no_selector(
    store: dict[str, Entry], prefix: str, start: tuple[str, str] | None, limit: int
) -> None:
    view = build(store, as_snapshot=True)
    start_at = start[1] if start is not None and start[0] == "start_at" else None
    start_after = start[1] if start is not None and start[0] == "start_after" else None
    empty = _core.Selector()
    assert empty.empty
    plain = view.scan(prefix, start_at=start_at, start_after=start_after, limit=limit)
    filtered = view.scan(
        prefix, start_at=start_at, start_after=start_after, limit=limit, selector=empty
    )
    assert filtered.items() == plain.items()
    assert (filtered.next_key, filtered.last_key, filtered.remaining) == (
        plain.next_key,
        plain.last_key,
        plain.remaining,
    )
