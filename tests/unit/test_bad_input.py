"""Bad input is rejected with the documented exception and leaves the engine unchanged.

Wrong types raise TypeError; well-typed but invalid values (empty key, negative revision,
unknown selector op, wrong number of selector values, non-increasing resource version) raise
ValueError with a message naming the problem. A write that fails changes nothing: put_many
with a bad entry anywhere applies none of its entries. Nothing crashes the interpreter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from watchcache import _core

NON_STR_KEYS: list[Any] = [b"key", 1, None, 1.5, ["k"]]
NON_BYTES_VALUES: list[Any] = ["text", 1, None, ["b"], 1.5]
NON_INT_REVISIONS: list[Any] = ["5", 1.5, None, b"5"]


def loaded_tree() -> tuple[_core.Tree, list[tuple[str, bytes]]]:
    tree = _core.Tree()
    tree.put("a", b"1", 1, labels={"app": "x"})
    tree.put("b", b"2", 2)
    return tree, tree.items()


def assert_unchanged(tree: _core.Tree, items: list[tuple[str, bytes]]) -> None:
    assert tree.items() == items
    assert len(tree) == len(items)
    tree.check_invariants()


# ---- keys, values, revisions ---------------------------------------------------------------


@pytest.mark.parametrize("key", NON_STR_KEYS, ids=repr)
def test_put_rejects_a_non_str_key_with_type_error(key: Any) -> None:
    tree, items = loaded_tree()
    with pytest.raises(TypeError):
        tree.put(key, b"v")
    with pytest.raises(TypeError):
        tree[key] = b"v"
    with pytest.raises(TypeError):
        _core.Item(key, b"v")
    assert_unchanged(tree, items)


@pytest.mark.parametrize("value", NON_BYTES_VALUES, ids=repr)
def test_put_rejects_a_non_bytes_value_with_type_error(value: Any) -> None:
    tree, items = loaded_tree()
    with pytest.raises(TypeError):
        tree.put("a", value)
    with pytest.raises(TypeError):
        tree["c"] = value
    with pytest.raises(TypeError):
        _core.Item("c", value)
    assert_unchanged(tree, items)


@pytest.mark.parametrize("revision", NON_INT_REVISIONS, ids=repr)
def test_put_rejects_a_non_int_revision_with_type_error(revision: Any) -> None:
    tree, items = loaded_tree()
    with pytest.raises(TypeError):
        tree.put("a", b"v", revision)
    with pytest.raises(TypeError):
        _core.Item("a", b"v", revision)
    assert_unchanged(tree, items)


def test_empty_key_is_rejected_with_value_error_naming_the_key() -> None:
    tree, items = loaded_tree()
    with pytest.raises(ValueError, match=r"(?i)key"):
        tree.put("", b"v")
    with pytest.raises(ValueError, match=r"(?i)key"):
        tree[""] = b"v"
    with pytest.raises(ValueError, match=r"(?i)key"):
        _core.Item("", b"v")
    assert_unchanged(tree, items)


def test_negative_revision_is_rejected_with_value_error_naming_the_revision() -> None:
    tree, items = loaded_tree()
    with pytest.raises(ValueError, match=r"(?i)revision"):
        tree.put("a", b"v", -1)
    with pytest.raises(ValueError, match=r"(?i)revision"):
        _core.Item("a", b"v", -1)
    assert_unchanged(tree, items)


def test_revision_beyond_int64_is_rejected() -> None:
    tree, items = loaded_tree()
    with pytest.raises((TypeError, ValueError, OverflowError)):
        tree.put("a", b"v", 2**64)
    assert_unchanged(tree, items)


@pytest.mark.parametrize(
    ("labels", "fields"),
    [({"app": 1}, None), ({1: "x"}, None), (None, {"f": b"x"}), ("app=x", None)],
    ids=["label-value", "label-key", "field-value", "string"],
)
def test_put_rejects_labels_or_fields_that_are_not_str_to_str(labels: Any, fields: Any) -> None:
    tree, items = loaded_tree()
    with pytest.raises(TypeError):
        tree.put("a", b"v", 0, labels=labels, fields=fields)
    assert_unchanged(tree, items)


def test_put_item_rejects_a_non_item() -> None:
    tree, items = loaded_tree()
    bad: Any = ("c", b"3")
    with pytest.raises(TypeError):
        tree.put_item(bad)
    assert_unchanged(tree, items)


def test_reads_reject_a_non_str_key_with_type_error() -> None:
    tree, _ = loaded_tree()
    bad: Any = 1
    for read in (tree.__getitem__, tree.get, tree.get_item, tree.count_prefix, tree.erase):
        with pytest.raises(TypeError):
            read(bad)
    with pytest.raises(TypeError):
        tree.get_many(bad)
    with pytest.raises(TypeError):
        tree.get_many(["a", bad])
    with pytest.raises(TypeError):
        tree.scan(bad)
    with pytest.raises(TypeError):
        tree.scan(start_at=bad)
    with pytest.raises(TypeError):
        tree.count(bad)
    with pytest.raises(TypeError):
        tree.cursor().seek(bad)


def test_missing_keys_raise_key_error() -> None:
    tree, items = loaded_tree()
    with pytest.raises(KeyError):
        tree["missing"]
    with pytest.raises(KeyError):
        del tree["missing"]
    with pytest.raises(KeyError):
        tree.snapshot()["missing"]
    assert_unchanged(tree, items)


# ---- put_many is all or nothing ------------------------------------------------------------


class _Boom(Exception):
    pass


def _exploding_entries() -> Iterator[tuple[str, bytes]]:
    yield ("a", b"new")
    yield ("c", b"3")
    raise _Boom


@pytest.mark.parametrize(
    ("entries", "error"),
    [
        ([("a", b"new"), ("c", "text"), ("d", b"4")], TypeError),
        ([("a", b"new"), (3, b"3"), ("d", b"4")], TypeError),
        ([("a", b"new"), ("c", b"3", "rev"), ("d", b"4")], TypeError),
        ([("a", b"new"), ("c",), ("d", b"4")], TypeError),
        ([("a", b"new"), ("c", b"3", 1, "x"), ("d", b"4")], TypeError),
        ([("a", b"new"), 7, ("d", b"4")], TypeError),
        ([("a", b"new"), ("", b"3"), ("d", b"4")], ValueError),
        ([("a", b"new"), ("c", b"3", -1), ("d", b"4")], ValueError),
        ([("c", b"3")] * 50 + [("a", b"new"), ("d", "text")], TypeError),
    ],
    ids=[
        "str-value",
        "int-key",
        "str-revision",
        "1-tuple",
        "4-tuple",
        "not-a-tuple",
        "empty-key",
        "negative-revision",
        "bad-last-entry",
    ],
)
def test_put_many_with_a_bad_entry_applies_nothing(
    entries: list[Any], error: type[Exception]
) -> None:
    tree, items = loaded_tree()
    snap = tree.snapshot()
    with pytest.raises(error):
        tree.put_many(entries)
    assert_unchanged(tree, items)
    assert tree["a"] == b"1"
    assert snap.items() == items


def test_put_many_propagates_an_error_from_its_iterable_and_applies_nothing() -> None:
    tree, items = loaded_tree()
    with pytest.raises(_Boom):
        tree.put_many(_exploding_entries())
    assert_unchanged(tree, items)


def test_tree_constructor_rejects_bad_entries() -> None:
    bad: list[Any] = [("a", b"1"), ("b", "text")]
    with pytest.raises(TypeError):
        _core.Tree(bad)
    with pytest.raises(ValueError):
        _core.Tree([("", b"1")])
    not_iterable: Any = 42
    with pytest.raises(TypeError):
        _core.Tree(not_iterable)


def test_from_sorted_rejects_bad_entries_with_type_error() -> None:
    bad: list[Any] = [("a", b"1"), ("b", 2)]
    with pytest.raises(TypeError):
        _core.Tree.from_sorted(bad)
    with pytest.raises(TypeError):
        _core.Tree.from_sorted([("a", b"1"), None])  # type: ignore[list-item]


def test_erase_many_rejects_a_non_str_key_with_type_error() -> None:
    tree, _ = loaded_tree()
    bad: list[Any] = ["a", 1]
    with pytest.raises(TypeError):
        tree.erase_many(bad)
    tree.check_invariants()


# ---- scans and selectors -------------------------------------------------------------------


def test_scan_rejects_a_negative_limit() -> None:
    tree, _ = loaded_tree()
    with pytest.raises((ValueError, TypeError, OverflowError)):
        tree.scan(limit=-1)


@pytest.mark.parametrize(
    "call",
    [
        lambda: _core.Tree().scan(limit=2**64),
        lambda: _core.SnapshotRegistry(budget_bytes=2**64),
        lambda: _core.Tree().put("k", b"v", 2**64),
        lambda: _core.SnapshotRegistry().get(2**64),
    ],
    ids=["scan-limit", "budget", "revision", "registry-get"],
)
def test_integers_beyond_64_bits_fail_with_a_clear_error(call: Callable[[], object]) -> None:
    """Either accepted or a ValueError/OverflowError, never pybind11's bare "Unable to cast"."""
    try:
        call()
    except (ValueError, OverflowError, TypeError) as error:
        assert "Unable to cast" not in str(error)


def test_scan_rejects_a_selector_that_is_not_a_selector() -> None:
    tree, _ = loaded_tree()
    bad: Any = "app=x"
    with pytest.raises(TypeError):
        tree.scan(selector=bad)


@pytest.mark.parametrize(
    ("labels", "fields"),
    [
        ([("app", "=")], []),
        ([("app", "=", ["x"], "extra")], []),
        (["app=x"], []),
        ([("app", "=", [1])], []),
        ([(1, "=", ["x"])], []),
        ([("app", 1, ["x"])], []),
        ([("app", "=", None)], []),
        ([], [("f", "=")]),
        ([], [("f", "=", "x", "y")]),
        ([], [("f", "=", ["x"])]),
        ([], [("f", "=", 1)]),
        ([], ["f=x"]),
        ("app", []),
    ],
)
def test_selector_rejects_wrongly_shaped_requirements_with_type_error(
    labels: Any, fields: Any
) -> None:
    with pytest.raises(TypeError):
        _core.Selector(labels=labels, fields=fields)


@pytest.mark.parametrize("op", ["==", "~", "", "IN", "exist", "gte", ">"])
def test_selector_rejects_an_unknown_label_op_naming_it(op: str) -> None:
    with pytest.raises(ValueError) as caught:
        _core.Selector(labels=[("app", op, ["1"])])
    assert op in str(caught.value) or repr(op) in str(caught.value), str(caught.value)


@pytest.mark.parametrize("op", ["==", "in", "notin", "exists", "gt", ""])
def test_selector_rejects_an_unknown_field_op_naming_it(op: str) -> None:
    with pytest.raises(ValueError) as caught:
        _core.Selector(fields=[("spec.nodeName", op, "n1")])
    assert op in str(caught.value) or repr(op) in str(caught.value), str(caught.value)


@pytest.mark.parametrize(
    ("op", "values"),
    [
        ("=", []),
        ("=", ["a", "b"]),
        ("!=", []),
        ("!=", ["a", "b"]),
        ("exists", ["a"]),
        ("!", ["a"]),
        ("gt", []),
        ("gt", ["1", "2"]),
        ("lt", []),
    ],
)
def test_selector_rejects_a_wrong_number_of_values(op: str, values: list[str]) -> None:
    with pytest.raises(ValueError, match=r".+"):
        _core.Selector(labels=[("app", op, values)])


@pytest.mark.parametrize("op", ["in", "notin"])
def test_selector_set_ops_need_at_least_one_value_as_in_kubernetes(op: str) -> None:
    with pytest.raises(ValueError, match=r".+"):
        _core.Selector(labels=[("app", op, [])])


def test_selector_matches_rejects_non_str_maps() -> None:
    selector = _core.Selector(labels=[("app", "exists", [])])
    bad: Any = {"app": 1}
    with pytest.raises(TypeError):
        selector.matches(bad)
    with pytest.raises(TypeError):
        selector.matches_item(bad)


def test_render_rejects_non_bytes_metadata_and_non_str_kind() -> None:
    result = _core.Tree({"a": b"{}"}).scan()
    bad: Any = {"resourceVersion": "1"}
    with pytest.raises(TypeError):
        result.render("List", "v1", bad)
    with pytest.raises(TypeError):
        result.render(bad, "v1")


def test_scan_result_index_past_the_end_raises_index_error() -> None:
    tree, _ = loaded_tree()
    result = tree.scan()
    with pytest.raises(IndexError):
        result[len(result)]
    with pytest.raises(IndexError):
        _core.Tree().scan()[0]


# ---- cursors -------------------------------------------------------------------------------


@pytest.mark.parametrize("attribute", ["key", "value", "item"])
def test_invalid_cursor_raises_key_error_on_access(attribute: str) -> None:
    tree, _ = loaded_tree()
    fresh = tree.cursor()
    with pytest.raises(KeyError):
        getattr(fresh, attribute)
    past_end = tree.cursor()
    assert past_end.seek_last()
    assert not past_end.next()
    with pytest.raises(KeyError):
        getattr(past_end, attribute)
    before_start = tree.cursor()
    assert before_start.seek_first()
    assert not before_start.prev()
    with pytest.raises(KeyError):
        getattr(before_start, attribute)
    empty = _core.Tree().cursor()
    assert not empty.seek_first()
    with pytest.raises(KeyError):
        getattr(empty, attribute)


# ---- registry ------------------------------------------------------------------------------


def registry_with(*rvs: int) -> tuple[_core.SnapshotRegistry, _core.Tree]:
    tree = _core.Tree()
    registry = _core.SnapshotRegistry()
    for rv in rvs:
        tree["rv"] = str(rv).encode()
        registry.add(rv, tree.snapshot())
    return registry, tree


@pytest.mark.parametrize("rv", [0, -1, -(2**40)])
def test_registry_add_rejects_a_resource_version_not_above_zero(rv: int) -> None:
    registry, tree = registry_with()
    with pytest.raises(ValueError, match=r"(?i)resource.?version|rv"):
        registry.add(rv, tree.snapshot())
    assert len(registry) == 0


@pytest.mark.parametrize("rv", [4, 1])
def test_registry_add_rejects_a_resource_version_below_the_stored_ones(rv: int) -> None:
    registry, tree = registry_with(3, 5)
    with pytest.raises(ValueError, match=r"(?i)resource.?version|rv"):
        registry.add(rv, tree.snapshot())
    assert registry.resource_versions() == [3, 5]
    latest = registry.latest()
    assert latest is not None
    assert latest[1]["rv"] == b"5"


def test_registry_add_rejects_wrong_types() -> None:
    registry, tree = registry_with(1)
    bad: Any = "2"
    with pytest.raises(TypeError):
        registry.add(bad, tree.snapshot())
    with pytest.raises(TypeError):
        registry.add(2, bad)
    with pytest.raises(TypeError):
        registry.add(2, tree)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        registry.add(2.0, tree.snapshot())  # type: ignore[arg-type]
    assert registry.resource_versions() == [1]


def test_registry_add_tree_snapshot_stores_the_tree_now_and_prunes_below() -> None:
    registry, tree = registry_with(3, 5)
    tree["rv"] = b"7"
    registry.add_tree_snapshot(7, tree, prune_below=5)
    assert registry.resource_versions() == [5, 7]
    stored = registry.get(7)
    assert stored is not None
    tree["rv"] = b"8"
    assert stored["rv"] == b"7", "the stored snapshot is the tree as it was, not a view of it"
    registry.add_tree_snapshot(8, tree)
    assert registry.resource_versions() == [5, 7, 8], "prune_below=0 prunes nothing"


def test_registry_add_tree_snapshot_rejects_bad_input_and_changes_nothing() -> None:
    registry, tree = registry_with(3, 5)
    for rv in (0, -1, 4):
        with pytest.raises(ValueError, match=r"(?i)resource.?version"):
            registry.add_tree_snapshot(rv, tree, prune_below=5)
    bad: Any = "6"
    with pytest.raises(TypeError):
        registry.add_tree_snapshot(bad, tree)
    with pytest.raises(TypeError):
        registry.add_tree_snapshot(6, tree.snapshot())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        registry.add_tree_snapshot(6, tree, prune_below=bad)
    assert registry.resource_versions() == [3, 5]


def test_registry_lookups_with_a_foreign_type_do_not_match() -> None:
    registry, _ = registry_with(1)
    assert "1" not in registry
    assert None not in registry
    assert -1 not in registry
    assert 2**64 not in registry, "`in` takes any object and answers, as dict does"
    bad: Any = "1"
    with pytest.raises(TypeError):
        registry.get(bad)
    with pytest.raises(TypeError):
        registry.floor(bad)
    with pytest.raises(TypeError):
        registry.floor_resource_version(bad)


# ---- nothing crashes -----------------------------------------------------------------------


def _calls_on_an_empty_tree() -> list[Callable[[], object]]:
    tree = _core.Tree()
    snap = tree.snapshot()
    return [
        tree.scan,
        lambda: tree.scan("x", start_at="y", limit=1),
        lambda: tree.scan(start_after="\U0010ffff"),
        lambda: tree.count("b", "a"),
        lambda: tree.count_prefix(""),
        lambda: list(tree.irange("z", "a", reverse=True)),
        lambda: snap.scan().render("L", "v1"),
        lambda: tree.pop("x"),
        lambda: tree.erase_many([]),
        lambda: tree.put_many([]),
        lambda: _core.Tree.from_sorted([]),
        tree.collect,
    ]


def test_edge_calls_on_an_empty_tree_return_normally() -> None:
    for call in _calls_on_an_empty_tree():
        call()


@pytest.mark.parametrize("step", ["next", "prev"])
def test_stepping_an_unpositioned_cursor_does_not_crash(step: str) -> None:
    """Unspecified by the contract; it may position the cursor or raise, but never crash."""
    for tree in (_core.Tree(), _core.Tree({"a": b"1", "b": b"2"})):
        cursor = tree.cursor()
        try:
            moved = getattr(cursor, step)()
        except (KeyError, ValueError, RuntimeError, IndexError):
            continue
        assert moved is cursor.valid
        if moved:
            assert cursor.key in tree


def test_snapshots_come_only_from_a_tree_a_registry_or_unpickling() -> None:
    with pytest.raises(TypeError, match="cannot create"):
        _core.Snapshot()
    tree, _ = loaded_tree()
    snapshot = tree.snapshot()
    assert type(snapshot) is _core.Snapshot
    # A method of one type called on the other is refused, not misread.
    foreign: Any = snapshot
    with pytest.raises(TypeError):
        _core.Tree.snapshot(foreign)
    with pytest.raises(TypeError):
        _core.Snapshot.scan(tree, limit=1)
    with pytest.raises(TypeError):
        _core.Snapshot.__len__(tree)
    with pytest.raises(TypeError):
        _core.Tree.snapshot(tree, 1)  # type: ignore[call-arg]
    assert snapshot.items() == [("a", b"1"), ("b", b"2")]
