"""The quick walks of the structured-merge engine answer exactly what the general walks
answer, or leave the value to them: validation, comparison, merge and field sets over
generated schemas and values (valid ones, and valid ones spoiled in the ways validation
reports), and the fixed cases where a shortcut would be easiest to get wrong (``true``
against ``1`` in an untyped field, which Python's equality takes for equal)."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structured_builders import (
    NUMERIC,
    STRING,
    UNTYPED,
    atomic_list,
    list_map,
    map_of,
    set_of,
    struct,
)
from structured_strategies import atoms, combined, json_values, pruned, root_atoms, values

from watchcache.structured.compare import comparison_of, quick_comparison
from watchcache.structured.fieldpath import Set
from watchcache.structured.merge import NOT_PLAIN, merge_of, quick_merge
from watchcache.structured.schema import DEDUCED, Atom
from watchcache.structured.tofieldset import field_set, quick_field_set
from watchcache.structured.typed import TypedValueError
from watchcache.structured.validate import is_valid, validation_errors

EXAMPLES = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _spoiled(data: st.DataObject, value: Any, depth: int = 0) -> Any:
    """``value`` with some parts replaced the ways validation refuses (a scalar of
    another kind, a null or repeated list element, a list for a map, an unknown field), or
    by the values Python's equality confuses (``True`` for ``1``)."""
    if depth > 4:
        return value
    if isinstance(value, dict):
        out = {
            key: (_spoiled(data, item, depth + 1) if data.draw(st.booleans()) else item)
            for key, item in value.items()
        }
        if data.draw(st.integers(0, 9)) == 0:
            out[data.draw(st.sampled_from(["zz", "a", "k"]))] = data.draw(json_values(1))
        return out
    if isinstance(value, list):
        out_list = [
            _spoiled(data, item, depth + 1) if data.draw(st.booleans()) else item for item in value
        ]
        choice = data.draw(st.integers(0, 9))
        if choice == 0 and out_list:
            out_list.append(copy.deepcopy(out_list[0]))
        elif choice == 1:
            out_list.append(None)
        return out_list
    choice = data.draw(st.integers(0, 7))
    if choice == 0:
        return True if value == 1 else 1
    if choice == 1:
        return str(value)
    if choice == 2:
        return None
    if choice == 3:
        return [value]
    return value


def _shuffled(data: st.DataObject, value: Any) -> Any:
    """``value`` with the elements of its lists reordered (merge orders them by rules of
    its own)."""
    if isinstance(value, dict):
        return {key: _shuffled(data, item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shuffled(data, item) for item in data.draw(st.permutations(value))]
    return value


def _same_sets(found: Any, expected: Any) -> None:
    for which in ("removed", "modified", "added"):
        assert getattr(found, which) == getattr(expected, which), which
        assert str(getattr(found, which)) == str(getattr(expected, which)), which


def _check_comparison(lhs: Any, rhs: Any, atom: Atom) -> bool:
    """The quick comparison, if it answers, is the general one and both values are valid
    (duplicates allowed); True when it answered."""
    quick = quick_comparison(lhs, rhs, atom)
    if quick is None:
        return False
    assert not validation_errors(lhs, atom, allow_duplicates=True)
    assert not validation_errors(rhs, atom, allow_duplicates=True)
    expected, errors = comparison_of(lhs, rhs, atom)
    assert not errors
    _same_sets(quick, expected)
    return True


def _check_merge(lhs: Any, rhs: Any, atom: Atom) -> bool:
    quick = quick_merge(lhs, rhs, atom)
    if quick is NOT_PLAIN:
        return False
    assert not validation_errors(lhs, atom, allow_duplicates=True)
    assert not validation_errors(rhs, atom, allow_duplicates=False)
    expected, errors = merge_of(lhs, rhs, atom)
    assert not errors
    # Member order too: it is what the stored object's bytes are made of.
    assert json.dumps(quick) == json.dumps(expected)
    return True


def _check_field_set(value: Any, atom: Atom) -> bool:
    quick = quick_field_set(value, atom)
    try:
        expected = field_set(value, atom)
    except TypedValueError:
        assert quick is None
        return False
    if quick is None:
        return False
    assert quick == expected
    assert str(quick) == str(expected)
    return True


def _check_validity(value: Any, atom: Atom) -> None:
    for duplicates in (False, True):
        errors = validation_errors(value, atom, allow_duplicates=duplicates)
        assert is_valid(value, atom, allow_duplicates=duplicates) == (not errors), errors


@EXAMPLES
@given(data=st.data())
def test_quick_walks_answer_valid_values_as_the_general_walks_do(data: st.DataObject) -> None:
    atom = data.draw(root_atoms(), label="schema")
    first = data.draw(values(atom), label="first")
    second = data.draw(combined(atom, first, data.draw(values(atom))), label="second")
    smaller = data.draw(pruned(atom, first), label="smaller")
    reordered = _shuffled(data, combined_with_first := data.draw(combined(atom, second, first)))
    # Some of the same elements in another order: where merge's order rules matter.
    fewer_reordered = _shuffled(data, data.draw(pruned(atom, first)))
    _check_validity(first, atom)
    # Values drawn valid and without repeated elements are the quick walks' to answer.
    assert _check_field_set(first, atom)
    assert _check_comparison({}, first, atom)
    assert _check_comparison(first, copy.deepcopy(first), atom)
    assert _check_merge(first, copy.deepcopy(first), atom)
    pairs = [(first, second), (second, first), (first, smaller), (smaller, first)]
    pairs += [(first, reordered), (reordered, second), (combined_with_first, reordered)]
    pairs += [(first, fewer_reordered), (fewer_reordered, first)]
    for lhs, rhs in pairs:
        _check_comparison(lhs, rhs, atom)
        _check_merge(lhs, rhs, atom)


@EXAMPLES
@given(data=st.data())
def test_quick_walks_leave_what_they_do_not_handle_to_the_general_walks(
    data: st.DataObject,
) -> None:
    atom = data.draw(st.one_of(root_atoms(), atoms()), label="schema")
    valid = data.draw(values(atom), label="valid")
    spoiled = _spoiled(data, valid)
    anything = data.draw(json_values(), label="anything")
    for value in (spoiled, anything):
        _check_validity(value, atom)
        _check_field_set(value, atom)
        for lhs, rhs in ((valid, value), (value, valid), (value, value)):
            _check_comparison(lhs, rhs, atom)
            _check_merge(lhs, rhs, atom)


def test_true_is_not_one_where_a_field_takes_both() -> None:
    # Python's equality takes True for 1; SMD's does not, and an untyped field (or a
    # deduced value) holds either.
    atom = struct(spec=struct(port=UNTYPED, extra=DEDUCED, items=atomic_list(UNTYPED)))
    before = {"spec": {"port": 1, "extra": {"a": [1, 0]}, "items": [1]}}
    after = {"spec": {"port": True, "extra": {"a": [True, 0]}, "items": [True]}}
    assert before == after  # what a shortcut on Python's equality would see
    quick = quick_comparison(before, after, atom)
    assert quick is not None
    assert str(quick.modified) == ".spec.items\n.spec.port\n.spec.extra.a"
    _check_comparison(before, after, atom)
    _check_merge(before, after, atom)


ORDERED = struct(items=list_map(struct(name=STRING, v=STRING), "name"), tags=set_of(STRING))


@EXAMPLES
@given(
    live=st.lists(st.sampled_from("abcdef"), unique=True, max_size=6),
    config=st.lists(st.sampled_from("abcdef"), unique=True, max_size=6),
    values_from=st.sampled_from(["live", "config", "both"]),
)
def test_merged_lists_are_ordered_as_the_general_walk_orders_them(
    live: list[str], config: list[str], values_from: str
) -> None:
    def items(names: list[str], mark: str) -> list[dict[str, str]]:
        return [
            {"name": n, "v": mark} if values_from in (mark, "both") else {"name": n} for n in names
        ]

    lhs = {"items": items(live, "live"), "tags": list(live)}
    rhs = {"items": items(config, "config"), "tags": list(config)}
    assert _check_merge(lhs, rhs, ORDERED)
    assert _check_comparison(lhs, rhs, ORDERED)


def test_merged_elements_keep_merges_order() -> None:
    # Shared elements in the applied order, the live object's others where they stood.
    atom = struct(items=list_map(struct(name=STRING, v=STRING), "name"))
    live = {"items": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}
    config = {"items": [{"name": "c"}, {"name": "a", "v": "x"}]}
    merged = quick_merge(live, config, atom)
    assert merged == {"items": [{"name": "b"}, {"name": "c"}, {"name": "a", "v": "x"}]}
    assert _check_merge(live, config, atom)


def test_a_boolean_for_a_number_is_refused_though_python_finds_them_equal() -> None:
    atom = struct(spec=struct(replicas=NUMERIC, ports=list_map(struct(port=NUMERIC), "port")))
    live = {"spec": {"replicas": 1, "ports": [{"port": 1}]}}
    new = {"spec": {"replicas": True, "ports": [{"port": 1}]}}
    assert quick_comparison(live, new, atom) is None
    assert quick_comparison(new, live, atom) is None
    assert quick_merge(live, new, atom) is NOT_PLAIN
    assert not is_valid(new, atom)


def test_unchanged_parts_are_still_validated() -> None:
    # The same invalid value on both sides compares as unchanged, but is not valid.
    atom = struct(spec=struct(name=STRING, labels=map_of(STRING)))
    live = {"spec": {"name": 1, "labels": {"a": "b"}}}
    assert quick_comparison(live, copy.deepcopy(live), atom) is None
    assert validation_errors(live, atom)


def test_repeated_elements_are_left_to_the_general_walks() -> None:
    atom = struct(items=list_map(struct(name=STRING, value=STRING), "name"))
    live = {"items": [{"name": "a", "value": "1"}, {"name": "a", "value": "2"}]}
    new = {"items": [{"name": "a", "value": "1"}]}
    assert is_valid(live, atom, allow_duplicates=True)
    assert not is_valid(live, atom)
    assert quick_comparison(live, new, atom) is None
    assert quick_merge(live, new, atom) is NOT_PLAIN
    assert quick_field_set(live, atom) is None


def test_quick_results_are_sets_of_their_own() -> None:
    atom = struct(spec=struct(a=STRING, b=STRING))
    quick = quick_comparison({}, {"spec": {"a": "x"}}, atom)
    assert quick is not None
    quick.added.insert((next(iter(quick.added))[0],))  # a set the caller may change
    again = quick_comparison({}, {"spec": {"a": "x"}}, atom)
    assert again is not None
    assert str(again.added) == ".spec\n.spec.a"
    fields = quick_field_set({"spec": {"a": "x", "b": "y"}}, atom)
    assert fields is not None
    fields.insert(())
    assert isinstance(fields, Set)
