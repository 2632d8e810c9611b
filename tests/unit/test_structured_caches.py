"""What the engine keeps between writes never answers for a value it was not made from:
decoded FieldsV1 sets (by text and by decoded object), sets written as FieldsV1 (read
back as the same set only when reading them gives the same texts), shared subtrees of
field sets, reconciliation's memo, and whole field-manager writes with the caches
against the same writes with them emptied before each; and types changed in place are
walked as they now are (the quick walks keep nothing about a type)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from structured_builders import NUMERIC, STRING, atomic_list, list_map, map_of, set_of, struct

from watchcache.registry.apply_types import builtin_atom
from watchcache.registry.managed_fields import FieldManager
from watchcache.structured import fieldpath
from watchcache.structured.compare import quick_comparison
from watchcache.structured.fieldpath import (
    Path,
    PathElement,
    Set,
    clear_fields_v1_cache,
    fields_v1_from_set,
    fields_v1_object,
    path_string,
    set_from_fields_v1,
    shared_set_from_fields_v1,
)
from watchcache.structured.reconcile import reconciled_field_set
from watchcache.structured.schema import ATOMIC, MapType, StructField
from watchcache.structured.typed import to_field_set

F = PathElement.of_field
K = PathElement.of_key
V = PathElement.of_value


def p(*parts: str | PathElement) -> Path:
    return tuple(part if isinstance(part, PathElement) else F(part) for part in parts)


def fresh_read(raw: Any) -> Set:
    """The set a FieldsV1 value describes, read without any cache."""
    return fieldpath._read(raw)


@pytest.fixture(autouse=True)
def _empty_caches() -> None:
    clear_fields_v1_cache()


# --- decoded sets -------------------------------------------------------------------------


def test_a_changed_fields_v1_object_is_read_again_not_served_from_the_cache() -> None:
    raw: dict[str, Any] = {"f:metadata": {"f:labels": {"f:a": {}}}}
    first = shared_set_from_fields_v1(raw)
    assert shared_set_from_fields_v1(copy.deepcopy(raw)) is first  # same value: cached
    raw["f:metadata"]["f:labels"]["f:b"] = {}  # the same dict, changed in place
    second = shared_set_from_fields_v1(raw)
    assert second == fresh_read(raw) == Set([p("metadata", "labels", n) for n in "ab"])
    assert second != first
    # Member order is part of the value (a repeated element's subtree is the last one).
    reordered: dict[str, Any] = {"f:b": {}, "f:a": {}}
    assert shared_set_from_fields_v1(reordered) == Set([p("a"), p("b")])


def test_values_python_finds_equal_are_different_keys() -> None:
    # marshal's form tells 1 from True from 1.0: a FieldsV1 object holding them is not
    # a valid one, and each is refused as the reader refuses it.
    for bad in ({"f:a": 1}, {"f:a": True}, {"f:a": 1.0}):
        with pytest.raises(fieldpath.FieldsV1Error):
            shared_set_from_fields_v1(bad)


def test_read_sets_are_shared_and_frozen_copies_are_not() -> None:
    text = b'{"f:a":{"f:b":{}}}'
    shared = shared_set_from_fields_v1(text)
    assert shared_set_from_fields_v1(text) is shared
    with pytest.raises(TypeError, match="shared"):
        shared.insert(p("c"))
    mine = set_from_fields_v1(text)
    mine.insert(p("a", "c"))
    mine.insert(p("d"))
    assert set_from_fields_v1(text) == Set([p("a", "b")])
    assert shared == Set([p("a", "b")])


def test_the_cache_is_bounded_least_recently_used_first_out() -> None:
    cache = fieldpath._DecodedSets(entries=2, characters=1000)
    a, b, c = Set([p("a")]), Set([p("b")]), Set([p("c")])
    cache.remember("a", a)
    cache.remember("b", b)
    assert cache.recall("a") is a  # now the most recent
    cache.remember("c", c)
    assert cache.recall("b") is None
    assert cache.recall("a") is a
    assert cache.recall("c") is c
    small = fieldpath._DecodedSets(entries=100, characters=80)
    small.remember("x" * 20, a)  # more than an eighth of the bound: never kept
    assert small.recall("x" * 20) is None


# --- written sets, read back ------------------------------------------------------------


def test_a_written_set_reads_back_as_itself() -> None:
    written = Set([p("spec", "replicas"), p("spec", "containers", K({"name": "web"}), "image")])
    obj = fields_v1_object(written)
    assert json.dumps(obj) == json.dumps(json.loads(fields_v1_from_set(written)))
    # Written again, the object is rebuilt from its cached form: the same, and new.
    again = fields_v1_object(shared_set_from_fields_v1(obj))
    assert again == obj
    assert again is not obj
    assert json.dumps(again) == json.dumps(obj)
    read = shared_set_from_fields_v1(copy.deepcopy(obj))
    assert read == written == fresh_read(obj)
    assert shared_set_from_fields_v1(fields_v1_from_set(written)) == written


@pytest.mark.parametrize(
    "element",
    [
        K({"port": 10**6}),  # reads back as 1e+06 in Path.String()
        K({"port": -(10**7)}),
        V(0),  # equal to -0.0, which writes "-0"
        V(-0.0),
        V(2**60),  # reads back rounded
        F("bad\ud800surrogate"),  # written as U+FFFD
        V("bad\udfff"),
    ],
)
def test_a_written_set_that_reads_back_differently_is_not_kept(element: PathElement) -> None:
    written = Set([(F("list"), element, F("x"))])
    obj = fields_v1_object(written)
    text = fields_v1_from_set(written)
    assert json.dumps(obj) == json.dumps(json.loads(text))
    for read in (shared_set_from_fields_v1(obj), shared_set_from_fields_v1(text)):
        expected = fresh_read(obj)
        assert [path_string(x) for x in read] == [path_string(x) for x in expected]
        assert fields_v1_from_set(read) == fields_v1_from_set(expected)


def test_equal_elements_that_write_differently_are_not_confused() -> None:
    # The text table holds faithful elements only; -0.0 equals 0 but writes "-0".
    assert fields_v1_from_set(Set([(V(0),)])) == b'{"v:0":{}}'
    assert fields_v1_from_set(Set([(V(-0.0),)])) == b'{"v:-0":{}}'
    assert fields_v1_from_set(Set([(V(0),)])) == b'{"v:0":{}}'
    assert fields_v1_from_set(Set([(V(1),)])) == b'{"v:1":{}}'
    assert fields_v1_from_set(Set([(V(1.0),)])) == b'{"v:1":{}}'
    assert fields_v1_from_set(Set([(V(10**21),)])) == b'{"v:1000000000000000000000":{}}'
    assert fields_v1_from_set(Set([(V(1e21),)])) == b'{"v:1e+21":{}}'


# --- shared subtrees ----------------------------------------------------------------------


def test_operations_share_subtrees_but_results_change_independently() -> None:
    left = Set([p("spec", "a"), p("spec", "b"), p("status", "x")])
    right = Set([p("metadata", "name")])
    union = left.union(right)
    difference = left.difference(Set([p("status", "x")]))
    left.insert(p("spec", "c"))
    left.insert(p("status", "y"))
    assert union == Set([p("spec", "a"), p("spec", "b"), p("status", "x"), p("metadata", "name")])
    assert difference == Set([p("spec", "a"), p("spec", "b")])
    union.insert(p("spec", "d"))
    assert left == Set([p("spec", n) for n in "abc"] + [p("status", n) for n in "xy"])
    copied = left.copy()
    copied.insert(p("spec", "e"))
    assert not left.has(p("spec", "e"))


# --- reconciliation, types changed in place --------------------------------------------------


def test_reconciliation_remembers_a_fit_per_type_only() -> None:
    granular = struct(items=list_map(struct(name=STRING, v=STRING), "name"))
    atomic = struct(items=atomic_list(struct(name=STRING, v=STRING)))
    shared = shared_set_from_fields_v1(b'{"f:items":{"k:{\\"name\\":\\"a\\"}":{"f:v":{}}}}')
    assert reconciled_field_set(shared, granular) is None
    assert reconciled_field_set(shared, granular) is None
    fitted = reconciled_field_set(shared, atomic)
    assert fitted == Set([p("items")])
    assert reconciled_field_set(shared, granular) is None


def test_a_type_changed_in_place_is_walked_as_it_now_is() -> None:
    atom = struct(a=STRING)
    assert to_field_set({"a": "x"}, atom) == Set([p("a")])
    assert atom.map is not None
    atom.map.fields["b"] = StructField("b", NUMERIC)  # grown (a test's schema, not ours)
    assert to_field_set({"a": "x", "b": 1}, atom) == Set([p("a"), p("b")])
    atom.map.fields = {"c": StructField("c", set_of(STRING))}  # replaced
    assert to_field_set({"c": ["x"]}, atom) == Set([p("c", V("x"))])
    atom.map.fields["c"] = StructField("c", STRING)  # an entry replaced
    assert to_field_set({"c": "x"}, atom) == Set([p("c")])
    assert quick_comparison({}, {"c": ["x"]}, atom) is None  # a list for a string
    labels = map_of(STRING)
    holder = struct(labels=labels)
    assert to_field_set({"labels": {"a": "b"}}, holder) == Set([p("labels", "a")])
    assert labels.map is not None
    labels.map.relationship = ATOMIC
    assert to_field_set({"labels": {"a": "b"}}, holder) == Set([p("labels")])
    labels.map = MapType(element=NUMERIC)
    assert to_field_set({"labels": {"a": 1}}, holder) == Set([p("labels", "a")])
    assert quick_comparison({}, {"labels": {"a": "b"}}, holder) is None


def test_quick_comparison_of_a_type_changed_in_place() -> None:
    atom = struct(spec=struct(a=STRING))
    assert quick_comparison({}, {"spec": {"a": "x"}}, atom) is not None
    assert atom.map is not None
    atom.map.fields["spec"] = StructField("spec", struct(b=STRING))
    # "a" is no longer declared: the general walks report it.
    assert quick_comparison({}, {"spec": {"a": "x"}}, atom) is None


# --- whole writes ---------------------------------------------------------------------------


def _pod(containers: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "containers": [
                {
                    "name": f"c{i}",
                    "image": "nginx",
                    "ports": [{"containerPort": 80 + i, "protocol": "TCP"}],
                    "env": [{"name": "A", "value": "1"}],
                }
                for i in range(containers)
            ]
        },
    }


def _writes(fm: FieldManager, clear: bool) -> list[str]:
    """A create, updates by two managers, applies (one conflicting, one forced), each
    result as JSON; ``clear``: caches emptied before every write."""
    out: list[str] = []

    def step(result: dict[str, Any]) -> dict[str, Any]:
        out.append(json.dumps(result))
        return result

    def maybe_clear() -> None:
        if clear:
            clear_fields_v1_cache()

    live = _pod(2)
    maybe_clear()
    fm.update(None, live, "kubectl")
    step(live)
    new = copy.deepcopy(live)
    new["metadata"]["labels"]["tier"] = "fe"
    new["spec"]["containers"][1]["image"] = "nginx:2"
    maybe_clear()
    fm.update(live, new, "ctl")
    live = step(new)
    # The client sends back managedFields it changed: a manager's entry dropped.
    new = copy.deepcopy(live)
    kept = [e for e in new["metadata"]["managedFields"] if e["manager"] == "kubectl"]
    new["metadata"]["managedFields"] = kept
    new["spec"]["containers"].append({"name": "c9", "image": "x"})
    maybe_clear()
    fm.update(live, new, "ctl")
    live = step(new)
    config = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    config["spec"] = {"containers": [{"name": "c0", "image": "other"}]}
    maybe_clear()
    try:
        fm.apply(live, config, "ssa", force=False)
    except Exception as error:  # the conflict, compared by its text
        out.append(str(error))
    maybe_clear()
    live = step(fm.apply(live, config, "ssa", force=True))
    maybe_clear()
    live = step(fm.apply(live, {**config, "spec": {"containers": []}}, "ssa", force=True))
    return out


def test_writes_with_the_caches_are_the_writes_without_them() -> None:
    atom = builtin_atom("v1", "Pod")
    assert atom is not None

    def fm() -> FieldManager:
        return FieldManager("v1", "Pod", lambda: atom, clock=lambda: "2026-01-01T00:00:00Z")

    cold = _writes(fm(), clear=True)
    warm = _writes(fm(), clear=False)
    again = _writes(fm(), clear=False)  # now every text was seen before
    assert warm == cold
    assert again == cold
    assert any("conflict" in text for text in cold)
