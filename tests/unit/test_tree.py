"""Behaviour of the Python face of the engine: Tree, Snapshot, Item, Cursor, ScanResult.

Mapping-style access, ordered reads, bulk writes and loads, snapshot isolation, pickling,
the Item buffer protocol and the lifetimes it promises, rendering of list bodies, and reads
from several threads while one thread writes.
"""

from __future__ import annotations

import ctypes
import gc
import json
import pickle
import queue
import random
import threading
from typing import Any

import pytest

from watchcache import _core

# Sorted by UTF-8 bytes (= by code point). U+FF5E (fullwidth tilde) sorts before U+1D11E (musical
# G clef) here but after it in UTF-16 order; "é" is two bytes whose lead byte is negative as a
# signed char.
UTF8_ORDERED_KEYS = ["A", "Z", "a", "a/b", "a0", "b", "z", "é", "\uff5e", "𝄞"]


ReadJob = tuple[_core.Snapshot, list[tuple[str, bytes]]]


def make_tree(n: int, prefix: str = "k/") -> _core.Tree:
    return _core.Tree.from_sorted((f"{prefix}{i:06d}", f"v{i}".encode()) for i in range(n))


# ---- Mapping-style access ------------------------------------------------------------------


def test_getitem_returns_the_value_and_raises_key_error_for_a_missing_key() -> None:
    tree = _core.Tree({"a": b"1", "b": b""})
    assert tree["a"] == b"1"
    assert tree["b"] == b""
    with pytest.raises(KeyError):
        tree["c"]
    snap = tree.snapshot()
    assert snap["a"] == b"1"
    with pytest.raises(KeyError):
        snap["c"]


def test_contains_is_false_for_missing_and_non_string_keys() -> None:
    tree = _core.Tree([("a", b"1")])
    assert "a" in tree
    assert "b" not in tree
    assert b"a" not in tree
    assert 1 not in tree
    assert None not in tree
    assert "a" in tree.snapshot()


def test_len_counts_distinct_keys() -> None:
    tree = _core.Tree()
    assert len(tree) == 0
    tree["a"] = b"1"
    tree["a"] = b"2"
    tree["b"] = b"3"
    assert len(tree) == 2
    del tree["a"]
    assert len(tree) == 1


def test_iteration_is_in_utf8_byte_order_and_reversed_is_descending() -> None:
    shuffled = UTF8_ORDERED_KEYS[::2] + UTF8_ORDERED_KEYS[1::2]
    tree = _core.Tree([(k, k.encode()) for k in shuffled])
    assert sorted(UTF8_ORDERED_KEYS, key=lambda k: k.encode()) == UTF8_ORDERED_KEYS
    assert list(tree) == UTF8_ORDERED_KEYS
    assert tree.keys() == UTF8_ORDERED_KEYS
    assert tree.values() == [k.encode() for k in UTF8_ORDERED_KEYS]
    assert tree.items() == [(k, k.encode()) for k in UTF8_ORDERED_KEYS]
    assert list(reversed(tree)) == UTF8_ORDERED_KEYS[::-1]
    assert list(reversed(tree.snapshot())) == UTF8_ORDERED_KEYS[::-1]


def test_iteration_over_many_leaves_visits_every_key_in_order() -> None:
    n = 5 * _core.FANOUT**2 // 2
    tree = make_tree(n)
    expected = [f"k/{i:06d}" for i in range(n)]
    assert list(tree) == expected
    assert list(reversed(tree)) == expected[::-1]


def test_setitem_overwrites_and_delitem_of_a_missing_key_raises_key_error() -> None:
    tree = _core.Tree()
    tree["a"] = b"1"
    tree["a"] = b"2"
    assert tree["a"] == b"2"
    del tree["a"]
    assert "a" not in tree
    with pytest.raises(KeyError):
        del tree["a"]


def test_tree_can_be_built_from_a_mapping_or_unsorted_pairs() -> None:
    assert _core.Tree({"b": b"2", "a": b"1"}).items() == [("a", b"1"), ("b", b"2")]
    assert _core.Tree([("b", b"2"), ("a", b"1")]).items() == [("a", b"1"), ("b", b"2")]
    assert _core.Tree(iter([("b", b"2")])).items() == [("b", b"2")]
    assert len(_core.Tree()) == 0
    assert len(_core.Tree(None)) == 0


def test_tree_from_shuffled_entries_with_repeats_equals_a_dict_of_them(rng: random.Random) -> None:
    entries: list[tuple[str, bytes, int]] = [
        (f"k/{rng.randrange(300):04d}", f"v{i}".encode(), i) for i in range(1000)
    ]
    want = {k: (v, rev) for k, v, rev in entries}  # a later entry wins, as in a dict
    tree = _core.Tree(entries)
    assert tree.items() == sorted((k, v) for k, (v, _) in want.items())
    assert [item.mod_revision for item in tree.scan()] == [want[k][1] for k in sorted(want)]
    tree.put_many(list(reversed(entries)))
    first = {k: (v, rev) for k, v, rev in reversed(entries)}
    assert [item.mod_revision for item in tree.scan()] == [first[k][1] for k in sorted(first)]


def test_a_superseded_entry_is_still_checked() -> None:
    bad: list[Any] = [("a", "not bytes"), ("a", b"1")]
    with pytest.raises(TypeError):
        _core.Tree(bad)
    tree = _core.Tree({"x": b"0"})
    with pytest.raises(TypeError):
        tree.put_many(bad)
    assert tree.items() == [("x", b"0")]


def test_get_returns_default_for_a_missing_key() -> None:
    tree = _core.Tree({"a": b"1"})
    assert tree.get("a") == b"1"
    assert tree.get("b") is None
    assert tree.get("b", b"d") == b"d"


def test_pop_returns_the_value_or_the_default_and_removes_the_key() -> None:
    tree = _core.Tree({"a": b"1"})
    assert tree.pop("a") == b"1"
    assert "a" not in tree
    assert tree.pop("a") is None
    assert tree.pop("a", b"d") == b"d"


def test_erase_reports_presence_and_erase_many_counts_only_present_keys() -> None:
    tree = _core.Tree({"a": b"1", "b": b"2", "c": b"3"})
    assert tree.erase("a") is True
    assert tree.erase("a") is False
    assert tree.erase_many(["b", "x", "b", "c"]) == 2
    assert len(tree) == 0


def test_clear_empties_the_tree_but_not_its_snapshots() -> None:
    tree = make_tree(3 * _core.FANOUT)
    snap = tree.snapshot()
    tree.clear()
    assert len(tree) == 0
    assert list(tree) == []
    tree.check_invariants()
    assert len(snap) == 3 * _core.FANOUT
    snap.check_invariants()
    tree["x"] = b"1"
    assert tree.items() == [("x", b"1")]


# ---- ranges, counts and scans --------------------------------------------------------------


@pytest.mark.parametrize(
    ("inclusive", "reverse", "expected"),
    [
        ((True, False), False, ["b", "c"]),
        ((True, True), False, ["b", "c", "d"]),
        ((False, False), False, ["c"]),
        ((False, True), False, ["c", "d"]),
        ((True, False), True, ["c", "b"]),
        ((True, True), True, ["d", "c", "b"]),
        ((False, False), True, ["c"]),
        ((False, True), True, ["d", "c"]),
    ],
)
def test_irange_honours_each_inclusive_combination_in_both_directions(
    inclusive: tuple[bool, bool], reverse: bool, expected: list[str]
) -> None:
    tree = _core.Tree({k: k.encode() for k in "abcde"})
    assert list(tree.irange("b", "d", inclusive=inclusive, reverse=reverse)) == expected
    items = list(tree.snapshot().irange_items("b", "d", inclusive=inclusive, reverse=reverse))
    assert items == [(k, k.encode()) for k in expected]


def test_irange_with_open_or_inverted_bounds() -> None:
    tree = _core.Tree(dict.fromkeys("abcde", b""))
    assert list(tree.irange()) == list("abcde")
    assert list(tree.irange(reverse=True)) == list("edcba")
    assert list(tree.irange(lo="c")) == list("cde")
    assert list(tree.irange(hi="c")) == list("ab")
    assert list(tree.irange(hi="c", inclusive=(True, True))) == list("abc")
    assert list(tree.irange("bb", "cc")) == ["c"]
    assert list(tree.irange("d", "b")) == []
    assert list(tree.irange("c", "c")) == []
    assert list(tree.irange("c", "c", inclusive=(True, True))) == ["c"]


def test_count_and_count_prefix_use_half_open_ranges() -> None:
    tree = _core.Tree(dict.fromkeys(["a", "a/1", "a/2", "a/3", "ab", "b"], b""))
    assert tree.count() == 6
    assert tree.count("a/") == 5
    assert tree.count("a/", "a/3") == 2
    assert tree.count(hi="a/3") == 3
    assert tree.count("a/3", "a/") == 0, "an inverted range is empty, not negative"
    assert tree.count_prefix("a/") == 3
    assert tree.count_prefix("a") == 5
    assert tree.count_prefix("") == 6
    assert tree.count_prefix("c") == 0


def test_count_prefix_is_exact_across_many_leaves() -> None:
    n = 3 * _core.FANOUT**2
    tree = make_tree(n)
    assert tree.count_prefix("k/") == n
    assert tree.count_prefix("k/0001") == 100
    assert tree.count("k/000100", "k/000200") == 100


def test_scan_pages_with_next_key_and_remaining() -> None:
    tree = _core.Tree({k: k.encode() for k in ["a/1", "a/2", "a/3", "a/4", "a/5", "b/1"]})
    first = tree.scan("a/", limit=2)
    assert first.keys() == ["a/1", "a/2"]
    assert first.last_key == "a/2"
    assert first.next_key == "a/2\0"
    assert first.remaining == 3
    second = tree.scan("a/", start_at=first.next_key, limit=2)
    assert second.keys() == ["a/3", "a/4"]
    last = tree.scan("a/", start_at=second.next_key, limit=2)
    assert last.keys() == ["a/5"]
    assert last.next_key is None
    assert last.remaining == 0
    assert tree.scan("a/", start_after="a/4").keys() == ["a/5"]
    assert tree.scan("a/", limit=5).next_key is None, "nothing under the prefix follows a/5"


def test_scan_result_is_a_sequence_of_items() -> None:
    tree = _core.Tree()
    tree.put("a", b"1", 5, labels={"app": "x"}, fields={"spec.nodeName": "n1"})
    tree.put("b", b"2", 6)
    result = tree.scan()
    assert len(result) == 2
    assert [item.key for item in result] == ["a", "b"]
    assert result.values() == [b"1", b"2"]
    assert result.items() == [("a", b"1"), ("b", b"2")]
    first = result[0]
    assert (first.key, first.value, first.mod_revision) == ("a", b"1", 5)
    assert first.labels == {"app": "x"}
    assert first.fields == {"spec.nodeName": "n1"}
    with pytest.raises(IndexError):
        result[2]
    empty = tree.scan("zzz")
    assert len(empty) == 0
    assert list(empty) == []
    assert (empty.next_key, empty.last_key, empty.remaining) == (None, None, 0)


# ---- bulk writes and loads -----------------------------------------------------------------


def test_get_many_returns_values_in_input_order_with_none_for_missing() -> None:
    tree = _core.Tree({"a": b"1", "b": b"2"})
    assert tree.get_many(["b", "x", "a", "b"]) == [b"2", None, b"1", b"2"]
    assert tree.get_many([]) == []
    assert tree.snapshot().get_many(("a",)) == [b"1"]


def test_put_many_accepts_pairs_triples_and_items() -> None:
    tree = _core.Tree()
    tree.put_many([("a", b"1"), ("b", b"2")])
    tree.put_many([("c", b"3", 7)])
    tree.put_many([_core.Item("d", b"4", 9, labels={"app": "x"}, fields={"f": "v"})])
    tree.put_many(iter([("e", b"5")]))
    assert tree.items() == [("a", b"1"), ("b", b"2"), ("c", b"3"), ("d", b"4"), ("e", b"5")]
    revisions = [item.mod_revision for item in tree.scan()]
    assert revisions == [0, 0, 7, 9, 0]
    d = tree.get_item("d")
    assert d is not None
    assert d.labels == {"app": "x"}
    assert d.fields == {"f": "v"}


def test_put_many_with_a_repeated_key_keeps_the_last_entry() -> None:
    tree = _core.Tree({"a": b"old"})
    tree.put_many([("a", b"1"), ("b", b"x"), ("a", b"2"), ("a", b"3")])
    assert tree.items() == [("a", b"3"), ("b", b"x")]


def test_put_keeps_revision_labels_and_fields_on_the_item() -> None:
    tree = _core.Tree()
    tree.put("k", b"v", 42, labels={"app": "web", "tier": ""}, fields={"status.phase": "Running"})
    item = tree.get_item("k")
    assert item is not None
    assert item.key == "k"
    assert item.value == b"v"
    assert item.mod_revision == 42
    assert item.labels == {"app": "web", "tier": ""}
    assert item.fields == {"status.phase": "Running"}
    assert item.nbytes >= len("k") + len(b"v")
    assert tree.get_item("missing") is None


def test_one_label_or_field_is_read_without_the_whole_map() -> None:
    item = _core.Item(
        "k", b"v", labels={"app": "web", "tier": ""}, fields={"spec.nodeName": "node-ä"}
    )
    assert [item.label(k) for k in ("app", "tier", "zone", "spec.nodeName")] == [
        "web",
        "",
        None,
        None,
    ]
    assert [item.field(k) for k in ("spec.nodeName", "app", "")] == ["node-ä", None, None]
    with pytest.raises(TypeError, match="must be str, not bytes"):
        item.field(b"spec.nodeName")  # type: ignore[arg-type]
    with pytest.raises(UnicodeEncodeError):
        item.label("\udc80")


def test_put_copies_a_mutable_value() -> None:
    tree = _core.Tree()
    buf = bytearray(b"before")
    tree.put("k", buf)
    buf[:] = b"after!"
    assert tree["k"] == b"before"


def test_from_sorted_builds_the_same_contents_as_individual_puts() -> None:
    n = 2 * _core.FANOUT**2 + 3
    entries = [(f"k/{i:06d}", str(i).encode()) for i in range(n)]
    tree = _core.Tree.from_sorted(entries)
    tree.check_invariants()
    assert tree.items() == entries
    assert len(tree) == n
    assert tree.count_prefix("k/") == n


def test_from_sorted_accepts_items_and_keeps_their_metadata() -> None:
    items = [
        _core.Item("a", b"1", 3, labels={"l": "1"}),
        _core.Item("b", b"2", 4, fields={"f": "2"}),
    ]
    tree = _core.Tree.from_sorted(items)
    assert [tree.get_item("a"), tree.get_item("b")] == items


def test_from_sorted_accepts_keys_sorted_by_utf8_bytes() -> None:
    tree = _core.Tree.from_sorted([(k, b"") for k in UTF8_ORDERED_KEYS])
    tree.check_invariants()
    assert tree.keys() == UTF8_ORDERED_KEYS


@pytest.mark.parametrize(
    "keys",
    [
        ["a", "c", "b"],
        ["a", "b", "b"],
        ["é", "z"],
        ["𝄞", "\uff5e"],
        [f"k{i:04d}" for i in range(3 * _core.FANOUT)] + ["k0000"],
    ],
    ids=["unsorted", "duplicate", "utf8-unsorted", "utf16-order", "late-duplicate"],
)
def test_from_sorted_rejects_keys_not_strictly_ascending_and_leaves_nothing_behind(
    keys: list[str],
) -> None:
    entries = [(k, b"x" * 100) for k in keys]
    gc.collect()
    before = _core.live_counters()
    with pytest.raises(ValueError, match=r"(?i)sort|ascend|order|duplicate"):
        _core.Tree.from_sorted(entries)
    gc.collect()
    assert _core.live_counters() == before


# ---- snapshots -----------------------------------------------------------------------------


def test_snapshot_is_unaffected_by_later_writes() -> None:
    tree = make_tree(4 * _core.FANOUT)
    expected = tree.items()
    snap = tree.snapshot()
    tree["k/000000"] = b"changed"
    tree["k/000001a"] = b"inserted"
    del tree["k/000002"]
    tree.put_many([(f"n/{i}", b"") for i in range(3 * _core.FANOUT)])
    tree.erase_many([f"k/{i:06d}" for i in range(10, 60)])
    assert snap.items() == expected
    assert snap["k/000000"] == b"v0"
    assert "k/000001a" not in snap
    snap.check_invariants()
    tree.clear()
    assert snap.items() == expected


def test_snapshot_version_is_the_tree_version_it_froze() -> None:
    tree = _core.Tree()
    version = tree.version
    snap = tree.snapshot()
    assert snap.version == version
    tree["a"] = b"1"
    assert tree.version > version
    version = tree.version
    later = tree.snapshot()
    assert later.version == version
    assert later.version > snap.version


def test_old_snapshots_survive_splits_and_merges_at_every_level(rng: random.Random) -> None:
    """Random inserts grow the tree three levels deep, random erases shrink it to nothing;
    snapshots taken all along must keep exactly what they saw."""
    fanout = _core.FANOUT
    keys = [f"k{i:06d}" for i in range(3 * fanout * fanout)]
    order = keys[:]
    rng.shuffle(order)
    tree = _core.Tree()
    model: dict[str, bytes] = {}
    history: list[tuple[_core.Snapshot, list[tuple[str, bytes]]]] = []
    every = 3 * fanout
    for i, key in enumerate(order):
        tree[key] = model[key] = f"{key}@{i}".encode()
        if i % every == 0:
            history.append((tree.snapshot(), sorted(model.items())))
    rng.shuffle(order)
    for i, key in enumerate(order):
        if i % 2:
            del tree[key]
        else:
            assert tree.erase(key)
        del model[key]
        if i % every == 0:
            history.append((tree.snapshot(), sorted(model.items())))
    tree.check_invariants()
    assert len(tree) == 0
    for snap, expected in history:
        snap.check_invariants()
        assert snap.items() == expected


def test_snapshot_pickle_round_trip_gives_an_equal_independent_snapshot() -> None:
    tree = _core.Tree()
    tree.put("a", b"1", 3, labels={"app": "x"}, fields={"spec.nodeName": "n"})
    tree.put_many([(f"k/{i:05d}", bytes([i % 256]) * 3, i) for i in range(3 * _core.FANOUT)])
    snap = tree.snapshot()
    expected_items = list(snap.scan())
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        copy = pickle.loads(pickle.dumps(snap, protocol=protocol))
        assert isinstance(copy, _core.Snapshot)
        copy.check_invariants()
        assert copy.items() == snap.items()
        assert list(copy.scan()) == expected_items
    copy = pickle.loads(pickle.dumps(snap))
    del snap, tree, expected_items
    gc.collect()
    assert len(copy) == 3 * _core.FANOUT + 1
    item = copy.get_item("a")
    assert item is not None
    assert (item.value, item.mod_revision, item.labels, item.fields) == (
        b"1",
        3,
        {"app": "x"},
        {"spec.nodeName": "n"},
    )


def test_pickled_empty_snapshot_round_trips() -> None:
    copy = pickle.loads(pickle.dumps(_core.Tree().snapshot()))
    assert len(copy) == 0
    assert copy.scan().keys() == []


# ---- items ---------------------------------------------------------------------------------


def test_items_compare_by_content_and_hash_consistently() -> None:
    a = _core.Item("k", b"v", 1, labels={"x": "1"})
    b = _core.Item("k", bytearray(b"v"), 1, labels={"x": "1"})
    assert a == b
    assert hash(a) == hash(b)
    assert a != _core.Item("k", b"v", 2, labels={"x": "1"})
    assert a != _core.Item("k", b"w", 1, labels={"x": "1"})
    assert a != _core.Item("j", b"v", 1, labels={"x": "1"})
    assert a != _core.Item("k", b"v", 1, labels={"x": "2"})
    assert a != _core.Item("k", b"v", 1, labels={"x": "1"}, fields={"f": ""})
    assert a != "k"
    assert len({a, b}) == 1


def test_item_pickle_round_trip_is_equal() -> None:
    item = _core.Item("ns/é", b"\x00\xff" * 10, 2**40, labels={"a": "b"}, fields={"c": "d"})
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        copy = pickle.loads(pickle.dumps(item, protocol=protocol))
        assert copy == item
        assert (copy.key, copy.value, copy.mod_revision) == ("ns/é", b"\x00\xff" * 10, 2**40)
        assert (copy.labels, copy.fields) == ({"a": "b"}, {"c": "d"})


class _PyBuffer(ctypes.Structure):
    """CPython's Py_buffer, to read the address an exporter hands out."""

    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


_capi = ctypes.PyDLL(None)
_capi.PyObject_GetBuffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_capi.PyObject_GetBuffer.restype = ctypes.c_int
_capi.PyBuffer_Release.argtypes = [ctypes.POINTER(_PyBuffer)]
_capi.PyBuffer_Release.restype = None


def buffer_address(exporter: object) -> int:
    view = _PyBuffer()
    _capi.PyObject_GetBuffer(exporter, ctypes.byref(view), 0)
    try:
        return view.buf or 0
    finally:
        _capi.PyBuffer_Release(ctypes.byref(view))


def test_memoryview_of_an_item_is_its_value_read_only() -> None:
    value = bytes(range(256)) * 4
    item = _core.Item("k", value)
    view = memoryview(item)
    assert view.readonly
    assert view.format == "B"
    assert view.itemsize == 1
    assert view.ndim == 1
    assert view.nbytes == len(value)
    assert view.tobytes() == value
    assert bytes(view) == item.value
    assert view.obj is item
    with pytest.raises(TypeError):
        view[0] = 1
    assert memoryview(_core.Item("e", b"")).tobytes() == b""


def test_memoryview_of_an_item_shares_the_engine_bytes_without_copying() -> None:
    tree = _core.Tree()
    tree["k"] = b"x" * 4096
    snap = tree.snapshot()
    from_tree, from_snapshot = tree.get_item("k"), snap.get_item("k")
    assert from_tree is not None
    assert from_snapshot is not None
    address = buffer_address(from_tree)
    assert address != 0
    assert buffer_address(from_tree) == address
    assert buffer_address(from_snapshot) == address, "the snapshot's item is the same bytes"
    cursor = snap.cursor()
    assert cursor.seek("k")
    assert buffer_address(cursor.item) == address
    assert buffer_address(snap.scan()[0]) == address


def test_memoryview_stays_valid_after_item_erased_tree_dropped_and_gc() -> None:
    value = bytes(range(256)) * 1024
    tree = _core.Tree({"k": value, "other": b"1"})
    item = tree.get_item("k")
    assert item is not None
    view = memoryview(item)
    del item
    assert tree.erase("k")
    del tree
    gc.collect()
    # Churn the allocator so freed memory would be overwritten.
    churn = _core.Tree({f"c{i}": bytes([i % 256]) * len(value) for i in range(8)})
    del churn
    gc.collect()
    assert view.tobytes() == value
    view.release()


# ---- cursors -------------------------------------------------------------------------------


def test_cursor_walks_forward_and_back_and_is_invalid_past_either_end() -> None:
    tree = _core.Tree({k: k.encode() for k in ["a", "b", "d"]})
    cursor = tree.snapshot().cursor()
    assert not cursor.valid
    assert cursor.seek("c") is True
    assert (cursor.key, cursor.value) == ("d", b"d")
    assert cursor.prev() is True
    assert cursor.key == "b"
    assert cursor.seek_after("b") is True
    assert cursor.key == "d"
    assert cursor.next() is False
    assert not cursor.valid
    assert cursor.seek_first() is True
    assert cursor.key == "a"
    assert cursor.prev() is False
    assert cursor.seek_last() is True
    assert cursor.item.key == "d"
    assert cursor.seek("e") is False
    assert _core.Tree().cursor().seek_first() is False


def test_cursor_walks_across_leaf_boundaries_both_ways() -> None:
    n = 3 * _core.FANOUT**2 // 2
    tree = make_tree(n)
    cursor = tree.cursor()
    keys: list[str] = []
    ok = cursor.seek_first()
    while ok:
        keys.append(cursor.key)
        ok = cursor.next()
    assert keys == tree.keys()
    back: list[str] = []
    ok = cursor.seek_last()
    while ok:
        back.append(cursor.key)
        ok = cursor.prev()
    assert back == keys[::-1]


def test_cursor_keeps_its_snapshot_alive_after_the_tree_changes_and_is_dropped() -> None:
    n = 3 * _core.FANOUT
    tree = make_tree(n)
    expected = tree.items()
    cursor = tree.snapshot().cursor()
    gc.collect()
    tree.clear()
    tree.put_many([(f"k/{i:06d}", b"new") for i in range(n)])
    del tree
    gc.collect()
    walked: list[tuple[str, bytes]] = []
    ok = cursor.seek_first()
    while ok:
        walked.append((cursor.key, cursor.value))
        ok = cursor.next()
    assert walked == expected


def test_scan_result_keeps_its_items_after_the_tree_is_dropped() -> None:
    tree = make_tree(2 * _core.FANOUT)
    result = tree.snapshot().scan("k/", limit=5)
    tree.clear()
    del tree
    gc.collect()
    assert result.items() == [(f"k/{i:06d}", f"v{i}".encode()) for i in range(5)]
    assert result.render("List", "v1")  # renders from engine memory that must still exist


# ---- rendering -----------------------------------------------------------------------------


def test_render_produces_the_kubernetes_list_json() -> None:
    tree = _core.Tree()
    objects = [
        {"metadata": {"name": "a", "resourceVersion": "5"}, "spec": {"x": [1, 2]}},
        {"metadata": {"name": "é"}, "s": 'quote " and \\ backslash'},
        {"metadata": {"name": "c"}},
    ]
    for i, obj in enumerate(objects):
        tree.put(f"pods/{i}", json.dumps(obj).encode())
    tree.put("services/x", b'{"not": "a pod"}')
    kind = 'Pod"List\\\n\t\x01é𝄞'
    body = (
        tree.snapshot().scan("pods/").render(kind, "v1", b'{"resourceVersion":"7","continue":""}')
    )
    assert isinstance(body, bytes)
    parsed = json.loads(body)
    assert parsed == {
        "kind": kind,
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "7", "continue": ""},
        "items": objects,
    }
    assert list(parsed) == ["kind", "apiVersion", "metadata", "items"]


def test_render_of_an_empty_scan_has_an_empty_items_list() -> None:
    body = _core.Tree().scan().render("PodList", "v1")
    assert json.loads(body) == {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []}
    tree = _core.Tree({"a": b"{}"})
    none_selected = tree.scan(selector=_core.Selector(labels=[("app", "exists", [])]))
    assert json.loads(none_selected.render("L", "v1"))["items"] == []


def test_render_contains_only_the_selected_page() -> None:
    tree = _core.Tree()
    for i in range(10):
        tree.put(f"p/{i}", json.dumps({"i": i}).encode(), labels={"even": str(i % 2 == 0)})
    selector = _core.Selector(labels=[("even", "=", ["True"])])
    page = tree.scan("p/", limit=3, selector=selector)
    assert json.loads(page.render("L", "v1"))["items"] == [{"i": 0}, {"i": 2}, {"i": 4}]


# ---- threads -------------------------------------------------------------------------------


def test_snapshots_read_from_threads_stay_consistent_while_the_main_thread_writes(
    rng: random.Random,
) -> None:
    readers = 4
    tree = _core.Tree()
    model: dict[str, bytes] = {}
    for i in range(2 * _core.FANOUT**2):
        key = f"k/{i:05d}"
        tree[key] = model[key] = b"0"
    jobs: queue.Queue[ReadJob | None] = queue.Queue()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            while (job := jobs.get()) is not None:
                snap, expected = job
                for limit in (0, 7, 500):
                    pages: list[tuple[str, bytes]] = []
                    start: str | None = None
                    while True:
                        page = snap.scan("k/", start_at=start, limit=limit)
                        pages.extend(page.items())
                        if page.next_key is None:
                            break
                        start = page.next_key
                    assert pages == expected
                assert len(snap) == len(expected)
                assert snap.count_prefix("k/") == len(expected)
                snap.check_invariants()
        except BaseException as error:  # reported from the main thread
            errors.append(error)

    threads = [threading.Thread(target=read, name=f"reader-{i}") for i in range(readers)]
    for thread in threads:
        thread.start()
    try:
        keys = list(model)
        for round_ in range(1, 40):
            for _ in range(60):
                key = rng.choice(keys)
                if rng.random() < 0.2:
                    tree.pop(key)
                    model.pop(key, None)
                else:
                    tree[key] = model[key] = f"{round_}".encode()
            snap = tree.snapshot()
            expected = sorted(model.items())
            for _ in range(readers):
                jobs.put((snap, expected))
            del snap  # the readers drop the last references, concurrently with writes
            assert tree.collect() >= 0
    finally:
        for _ in threads:
            jobs.put(None)
        for thread in threads:
            thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads), "a reader hung"
    if errors:
        raise errors[0]
    tree.check_invariants()
    assert tree.items() == sorted(model.items())


def test_registry_is_safe_to_query_from_threads_while_the_writer_adds_and_prunes(
    rng: random.Random,
) -> None:
    """At rv r every key holds str(r), so any snapshot a reader gets must be uniform."""
    keys = [f"k/{i:03d}" for i in range(2 * _core.FANOUT)]
    tree = _core.Tree()
    registry = _core.SnapshotRegistry()
    top = 0  # highest rv added; read racily by the readers, only as a hint
    kept_from = 1
    done = threading.Event()
    errors: list[BaseException] = []

    def query(seed: int) -> None:
        local = random.Random(seed)
        try:
            while not done.is_set():
                wanted = local.randint(1, top + 1)
                found = registry.floor(wanted)
                if found is not None:
                    rv, snap = found
                    assert rv <= wanted
                    assert snap.values() == [str(rv).encode()] * len(keys)
                    snap.check_invariants()
                exact = registry.get(wanted)
                if exact is not None:
                    assert exact.get("k/000") == str(wanted).encode()
                if local.random() < 0.05:
                    assert all(u.exclusive_bytes >= 0 for u in registry.usage())
                    assert registry.pinned_bytes() >= 0
                    rvs = registry.resource_versions()  # one call: the writer moves on
                    assert rvs == sorted(rvs)
        except BaseException as error:  # reported from the main thread
            errors.append(error)

    threads = [threading.Thread(target=query, args=(rng.random(),)) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for rv in range(1, 400):
            tree.put_many([(k, str(rv).encode()) for k in keys])
            registry.add(rv, tree.snapshot())
            top = rv
            if rv % 25 == 0:
                kept_from = rv - 10
                registry.prune_below(kept_from)
                tree.collect()
    finally:
        done.set()
        for thread in threads:
            thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads), "a reader hung"
    if errors:
        raise errors[0]
    assert registry.resource_versions() == list(range(kept_from, 400))


def test_module_exposes_version_and_fanout() -> None:
    assert isinstance(_core.__version__, str)
    assert _core.__version__
    assert isinstance(_core.FANOUT, int)
    assert _core.FANOUT >= 3


def test_a_watch_cache_with_snapshots_turns_prefaulting_on() -> None:
    from watchcache import _core
    from watchcache.cache.watch_cache import WatchCache

    _core.set_prefault(True)
    pooled = _core.set_prefault(True)  # False only in sanitizer builds (no pool)
    try:
        _core.set_prefault(False)
        WatchCache("/registry/pods/", resource="pods", kind="Pod", snapshots=False)
        assert _core.set_prefault(False) is False
        WatchCache("/registry/pods/", resource="pods", kind="Pod")
        assert _core.set_prefault(False) is pooled
    finally:
        _core.set_prefault(True)


def test_a_key_utf8_cannot_carry_is_refused() -> None:
    # A lone surrogate is not text UTF-8 can encode: refused, and nothing is stored.
    tree = _core.Tree()
    with pytest.raises(UnicodeEncodeError):
        tree["\ud800"] = b"v"
    assert len(tree) == 0
