"""Server-side apply, differentially: every operation runs through the reference
implementation (structured-merge-diff v4.1.2, ``smd_reference`` fixture) and through
watchcache's engine (``watchcache.structured``), and the two must agree on the resulting
object, on every manager's managed fields (FieldsV1, byte for byte) and on the conflicts
(manager and path text). See tests/differential/README.md.

The engine follows SMD master, which is what current Kubernetes runs; the reference is the
v4.1.2 that Debian packages. Where the two versions differ, this module expects master's
behaviour. Each such difference is an entry of :data:`KNOWN_DIFFERENCES`, with a fixed case
(``test_known_difference_*``) asserting the difference itself: the reference shows v4.1.2's
behaviour and the engine master's. The hypothesis test accounts for the differences its
inputs can reach (the order of merged associative lists, and whether an apply changed
anything) by checking the engine against a model of master's rule and the reference against
v4.1.2's, and compares everything else exactly; inputs that reach the other differences
(list-map elements missing a key field, duplicate elements) are not generated.

Where the engine disagrees with both versions, the defect is an entry of
:data:`ENGINE_DEFECTS` with a strict xfail case (``test_engine_defect_*``) reproducing it;
the generated test steps over the engine errors listed there, counting each as a hypothesis
event, so that a known, reported bug does not make every run fail at random.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from smd_reference import Conflict, ManagerEntry, Outcome, SmdReference
from structured_strategies import combined, element_key, pruned, root_atoms, values

from watchcache.structured import typed, updater
from watchcache.structured.fieldpath import (
    ManagedFields,
    VersionedSet,
    fields_v1_from_set,
    set_from_fields_v1,
)
from watchcache.structured.pathelement import path_string
from watchcache.structured.schema import (
    ASSOCIATIVE,
    ATOMIC,
    DEDUCED,
    UNTYPED_ATOMIC,
    Atom,
    ListType,
    MapType,
    StructField,
    to_smd_yaml,
)

ROOT = "root"
VERSION = "v1"
MANAGERS = ("alice", "bob", "carol")
#: The root field every generated configuration sets (as Kubernetes' set ``kind``).
IDENTITY = "kind"
#: Examples per generated test: the module takes about 35 s on two cores, within its
#: budget of a minute (a sequence costs about 22 ms, a field set and merge about 7 ms).
SEQUENCE_EXAMPLES = 1200
FIELD_SET_EXAMPLES = 800


@dataclass(frozen=True)
class KnownDifference:
    """Where SMD v4.1.2 (the reference) and SMD master (Kubernetes, the engine) differ."""

    name: str
    master_change: str
    behaviour: str


#: Every behaviour of SMD v4.1.2 that master changed and that these tests reach, with the
#: master change that made it. Each has a ``test_known_difference_<name>`` case.
KNOWN_DIFFERENCES = (
    KnownDifference(
        "merged_list_order",
        "v4.2.0 and v4.2.1, PRs #203 and #205 (a new merge algorithm for associative lists)",
        "a merged associative list keeps the live order and appends the config's new "
        "elements in v4.1.2; master places shared and new elements in the config's order, "
        "live-only elements where they stood",
    ),
    KnownDifference(
        "noop_apply",
        "v4.3.0, PR #237 (do not use Compare for equality checks)",
        "v4.1.2 reports an apply as changing nothing when no field was added, removed or "
        "modified, so an apply that only reorders an associative list leaves the live "
        "object as it was; master compares the values, so the reordered object is kept",
    ),
    KnownDifference(
        "partial_list_map_key",
        "v6.3.0, PR #298 (support optional map keys)",
        "v4.1.2 rejects a list-map element that omits a key field without a default; "
        "master accepts it when at least one key field is there, the key made of those",
    ),
    KnownDifference(
        "conflict_path_aliasing",
        "v4.3.0, commit 24aa83d (deep copy slice object during append)",
        "v4.1.2's ConflictsFromManagers keeps the path its set iteration reuses, so the "
        "conflicts of one manager can all show the last path iterated; master copies each "
        "path. The count and the managers are right in both",
    ),
    KnownDifference(
        "duplicate_elements",
        "v4.4.0 and v4.4.1, PRs #247, #249, #251, #253 and #254 (duplicates in lists)",
        "v4.1.2 rejects a live object whose associative list repeats an element; master "
        "(and Kubernetes, which types live and updated objects with AllowDuplicates) "
        "accepts it, owns the repeated element as a whole, and an apply replaces the "
        "repeats by the applied element",
    ),
)


@dataclass(frozen=True)
class EngineDefect:
    """Where the engine disagrees with SMD, master included: a bug of the engine, known and
    reported. ``error`` is the start of the engine's error text when the defect shows as
    one (the generated test then skips the rest of that step, counting it as an event);
    None when the generated test does not reach it."""

    name: str
    error: str | None
    behaviour: str


#: The engine's known defects. Each has a strict xfail case ``test_engine_defect_<name>``:
#: when the engine is fixed that case passes and so fails; then delete the entry and the
#: mark together.
ENGINE_DEFECTS = (
    EngineDefect(
        "null_element_in_prune",
        "associative list with keys may not have a null element",
        "an apply that keeps a list-map element (by its defaulted key alone) but no longer "
        "applies its other fields: SMD's prune passes through an object holding that "
        "element as null (its fields removed, not the element), names it with the error "
        "ignored, and ends with the list removed; the engine refuses the null element",
    ),
)


def _engine_defect(error: str) -> EngineDefect | None:
    for defect in ENGINE_DEFECTS:
        if defect.error is not None and defect.error in error:
            return defect
    return None


# --- the engine, in the reference's terms ----------------------------------------------


def _engine_managers(entries: Mapping[str, ManagerEntry]) -> ManagedFields:
    return {
        name: VersionedSet(
            set_from_fields_v1(entry["fieldsV1JSON"]), entry["apiVersion"], entry["applied"]
        )
        for name, entry in entries.items()
    }


def _entries(managers: ManagedFields) -> dict[str, ManagerEntry]:
    out = {}
    for name, versioned in managers.items():
        text = fields_v1_from_set(versioned.set).decode()
        out[name] = {
            "fieldsV1": json.loads(text),
            "fieldsV1JSON": text,
            "apiVersion": versioned.api_version,
            "applied": versioned.applied,
        }
    return out


def _conflicts_outcome(error: updater.ConflictsError) -> Outcome:
    return Outcome(
        conflicts=tuple(Conflict(c.manager, path_string(c.path)) for c in error.conflicts)
    )


def engine_apply(
    atom: Atom,
    live: Any,
    config: Any,
    *,
    managers: Mapping[str, ManagerEntry],
    manager: str,
    force: bool,
) -> Outcome:
    """``updater.apply``, answered as the reference answers (an unchanged object is the
    live one, flagged)."""
    try:
        obj, after = updater.apply(
            live, config, VERSION, _engine_managers(managers), manager, atom, force=force
        )
    except updater.ConflictsError as error:
        return _conflicts_outcome(error)
    except typed.TypedValueError as error:
        return Outcome(error=str(error))
    if obj is updater.UNCHANGED:
        return Outcome(object=live, managers=_entries(after), unchanged=True)
    return Outcome(object=obj, managers=_entries(after))


def engine_update(
    atom: Atom, live: Any, new_object: Any, *, managers: Mapping[str, ManagerEntry], manager: str
) -> Outcome:
    """``updater.update``, answered as the reference answers."""
    try:
        obj, after = updater.update(
            live, new_object, VERSION, _engine_managers(managers), manager, atom
        )
    except typed.TypedValueError as error:
        return Outcome(error=str(error))
    return Outcome(object=obj, managers=_entries(after))


# --- comparing answers ------------------------------------------------------------------


def _normal(value: Any) -> Any:
    """``value`` as JSON compares it: integral floats as integers (Go writes ``2.0`` as
    ``2``), booleans kept apart from numbers, map order ignored."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _text(value: Any) -> str:
    return json.dumps(_normal(value), sort_keys=True, ensure_ascii=False)


def _managers_text(managers: Mapping[str, ManagerEntry] | None) -> dict[str, Any]:
    return {
        name: (entry["fieldsV1JSON"], entry["apiVersion"], entry["applied"])
        for name, entry in (managers or {}).items()
    }


def _conflicts(outcome: Outcome) -> list[tuple[str, str]] | None:
    if outcome.conflicts is None:
        return None
    return sorted((c.manager, c.path) for c in outcome.conflicts)


def _master_conflicts(reference: Outcome, engine: Outcome) -> list[tuple[str, str]] | None:
    """The reference's conflicts as master reports them (known difference
    conflict_path_aliasing): when v4.1.2 lists one (manager, path) more than once, its paths
    alias one buffer, so only each manager's count and that every path it shows is a real
    conflict (one the engine found) carry over; then the engine's paths stand for them."""
    listed = _conflicts(reference)
    found = _conflicts(engine)
    if listed is None or found is None or len(set(listed)) == len(listed):
        return listed
    per_manager = sorted(manager for manager, _ in listed)
    if sorted(manager for manager, _ in found) != per_manager or not set(listed) <= set(found):
        return listed
    if currently_in_test_context():
        event("known difference conflict_path_aliasing")
    return found


# --- the order of associative lists (known differences merged_list_order, noop_apply) ---


def master_merge_order(live: list[Any], config: list[Any]) -> list[Any]:
    """The order SMD master gives a merged associative list, from its elements' keys in
    ``live`` and ``config`` (typed/merge.go ``visitListItems``, without duplicates)."""
    in_live, in_config = set(live), set(config)
    shared = [key for key in config if key in in_live]
    next_shared = shared.pop(0) if shared else None
    out: list[Any] = []
    merged: set[Any] = set()
    left = right = 0
    while left < len(live) or right < len(config):
        if left < len(live) and right < len(config):
            key = live[left]
            if key == config[right]:
                out.append(key)
                merged.add(key)
                left, right = left + 1, right + 1
                next_shared = shared.pop(0) if shared else None
                continue
            if key in in_config and next_shared is not None and next_shared != key:
                left += 1
                continue
        if left < len(live):
            key = live[left]
            if key not in in_config:
                out.append(key)
                left += 1
                continue
            if key in merged:
                left += 1
        if right < len(config):
            key = config[right]
            merged.add(key)
            out.append(key)
            right += 1
            if next_shared == key:
                next_shared = shared.pop(0) if shared else None
    return out


def v4_merge_order(live: list[Any], config: list[Any]) -> list[Any]:
    """The order SMD v4.1.2 gives a merged associative list: the live order, then the
    config's new elements in its order."""
    in_live = set(live)
    return list(live) + [key for key in config if key not in in_live]


def _order_mismatches(
    atom: Atom | None,
    out: Any,
    live: Any,
    config: Any,
    *,
    order: Callable[[list[Any], list[Any]], list[Any]],
    where: str = "",
) -> Iterator[str]:
    """Every associative list of ``out`` (a merge of ``config`` over ``live``, perhaps
    pruned) whose order is not ``order(live keys, config keys)`` restricted to its keys."""
    if atom is None or atom is UNTYPED_ATOMIC:
        return
    if isinstance(out, dict):
        map_type = atom.map if atom is not DEDUCED else MapType(element=DEDUCED)
        if map_type is None or map_type.relationship == ATOMIC:
            return
        for name, item in out.items():
            fld = map_type.fields.get(name)
            item_atom = fld.type if fld is not None else map_type.element
            yield from _order_mismatches(
                item_atom,
                item,
                live.get(name) if isinstance(live, dict) else None,
                config.get(name) if isinstance(config, dict) else None,
                order=order,
                where=f"{where}.{name}",
            )
    elif isinstance(out, list) and atom.list is not None:
        list_type = atom.list
        if list_type.relationship == ATOMIC:
            return
        live_list = live if isinstance(live, list) else []
        config_list = config if isinstance(config, list) else []
        keys = [element_key(list_type, e) for e in out]
        wanted = order(
            [element_key(list_type, e) for e in live_list],
            [element_key(list_type, e) for e in config_list],
        )
        present = set(keys)
        if keys != [key for key in wanted if key in present]:
            yield f"{where}: {keys} is not in the order {wanted}"
        if list_type.keys:
            live_by_key = {element_key(list_type, e): e for e in live_list}
            config_by_key = {element_key(list_type, e): e for e in config_list}
            for key, element in zip(keys, out, strict=True):
                yield from _order_mismatches(
                    list_type.element,
                    element,
                    live_by_key.get(key),
                    config_by_key.get(key),
                    order=order,
                    where=f"{where}[{key}]",
                )


def _sorted_lists(atom: Atom | None, value: Any) -> Any:
    """``value`` with every associative list sorted by key: equal under any order."""
    if atom is None or atom is UNTYPED_ATOMIC:
        return value
    if isinstance(value, dict):
        map_type = atom.map if atom is not DEDUCED else MapType(element=DEDUCED)
        if map_type is None or map_type.relationship == ATOMIC:
            return value
        out = {}
        for name, item in value.items():
            fld = map_type.fields.get(name)
            out[name] = _sorted_lists(fld.type if fld is not None else map_type.element, item)
        return out
    if isinstance(value, list) and atom.list is not None:
        list_type = atom.list
        if list_type.relationship == ATOMIC:
            return value
        items = [_sorted_lists(list_type.element, e) for e in value]
        return sorted(items, key=lambda e: repr(element_key(list_type, e)))
    return value


# --- one step through both --------------------------------------------------------------


@dataclass
class State:
    """The object and its managed fields between steps (taken from the reference)."""

    live: Any = None
    managers: dict[str, ManagerEntry] | None = None


@dataclass(frozen=True)
class Step:
    """One write: an apply of a configuration or an update to a new object."""

    op: str
    manager: str
    obj: Any
    force: bool = False

    def __str__(self) -> str:
        return f"{self.op} by {self.manager} (force={self.force}) of {self.obj!r}"


@dataclass(frozen=True)
class Kind:
    """A root type, and the same in the reference's schema form."""

    atom: Atom
    schema: str

    @classmethod
    def of(cls, atom: Atom) -> Kind:
        return cls(atom, to_smd_yaml({ROOT: atom}))


def check_step(
    reference: SmdReference,
    kind: Kind,
    state: State,
    step: Step,
    *,
    tolerate_defects: bool = False,
) -> Outcome:
    """Runs one step through both; asserts they agree (up to the known differences, and,
    with ``tolerate_defects``, the engine errors of :data:`ENGINE_DEFECTS`); returns the
    reference's outcome."""
    managers = state.managers or {}
    live, atom, obj = state.live, kind.atom, step.obj
    if step.op == "apply":
        expected = reference.apply(
            kind.schema, ROOT, live, obj, managers=managers, manager=step.manager, force=step.force
        )
        actual = engine_apply(
            atom, live, obj, managers=managers, manager=step.manager, force=step.force
        )
    else:
        expected = reference.update(
            kind.schema, ROOT, live, obj, managers=managers, manager=step.manager
        )
        actual = engine_update(atom, live, obj, managers=managers, manager=step.manager)
    context = f"{step} onto {live!r} owned by {managers!r}"
    assert expected.error is None, f"the reference refused a valid {context}: {expected.error}"
    if actual.error is not None and tolerate_defects:
        defect = _engine_defect(actual.error)
        if defect is not None:
            event(f"engine defect {defect.name}")
            return expected
    assert actual.error is None, f"the engine refused {context}: {actual.error}"
    assert _conflicts(actual) == _master_conflicts(expected, actual), context
    if expected.conflicts is not None:
        return expected
    assert _managers_text(actual.managers) == _managers_text(expected.managers), context
    if step.op == "update":
        assert _text(actual.object) == _text(expected.object), context
        return expected
    # Known difference noop_apply: when no field changed, v4.1.2 keeps the live object and
    # master the merged one, which can differ from it only in the order of associative
    # lists (or be an empty object where a create started from none).
    same_as = (live if live is not None else {}) if expected.unchanged else expected.object
    # Known difference merged_list_order: equal but for the order of associative lists,
    # which each side must give as its version orders them.
    assert _text(_sorted_lists(atom, actual.object)) == _text(_sorted_lists(atom, same_as)), context
    if not expected.unchanged:
        assert not list(
            _order_mismatches(atom, expected.object, live, obj, order=v4_merge_order)
        ), context
    assert not list(_order_mismatches(atom, actual.object, live, obj, order=master_merge_order)), (
        context
    )
    changed = live is None or _text(actual.object) != _text(live)
    assert actual.unchanged != changed, context
    return expected


# --- fixed cases ----------------------------------------------------------------------


def _string() -> Atom:
    return Atom(scalar="string")


def _struct(*fields: tuple[str, Atom], defaults: Mapping[str, Any] | None = None) -> Atom:
    given_defaults = defaults or {}
    return Atom(
        map=MapType(fields={n: StructField(n, t, given_defaults.get(n)) for n, t in fields})
    )


def _workload() -> Atom:
    port = _struct(
        ("port", Atom(scalar="numeric")),
        ("protocol", _string()),
        ("name", _string()),
        defaults={"protocol": "TCP"},
    )
    container = _struct(
        ("name", _string()),
        ("image", _string()),
        ("ports", Atom(list=ListType(port, ASSOCIATIVE, ("port", "protocol")))),
        ("env", Atom(map=MapType(element=_string()))),
    )
    return _struct(
        ("replicas", Atom(scalar="numeric")),
        ("labels", Atom(map=MapType(element=_string()))),
        ("selector", Atom(map=MapType(element=_string(), relationship=ATOMIC))),
        ("containers", Atom(list=ListType(container, ASSOCIATIVE, ("name",)))),
        ("finalizers", Atom(list=ListType(_string(), ASSOCIATIVE))),
        ("args", Atom(list=ListType(_string(), ATOMIC))),
        ("extra", DEDUCED),
        ("raw", UNTYPED_ATOMIC),
    )


WORKLOAD = _workload()
WORKLOAD_SCHEMA = to_smd_yaml({ROOT: WORKLOAD})

# Sequences whose every step must agree.
FIXED_SEQUENCES: dict[str, list[Step]] = {
    "conflict_then_force": [
        Step("apply", "alice", {"replicas": 1, "labels": {"a": "1"}}, False),
        Step("apply", "bob", {"replicas": 2}, False),
        Step("apply", "bob", {"replicas": 2}, True),
        Step("apply", "alice", {"labels": {"a": "1"}}, False),
    ],
    "shared_then_dropped": [
        Step("apply", "alice", {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]}, False),
        Step("apply", "bob", {"labels": {"a": "1"}, "finalizers": ["y"]}, False),
        Step("apply", "alice", {"finalizers": ["x"]}, False),
        Step("apply", "bob", {}, False),
    ],
    "nested_list_maps": [
        Step(
            "apply",
            "alice",
            {"containers": [{"name": "c", "image": "i", "ports": [{"port": 80}]}]},
            False,
        ),
        Step(
            "apply",
            "bob",
            {"containers": [{"name": "c", "ports": [{"port": 80, "protocol": "UDP"}]}]},
            False,
        ),
        Step("apply", "alice", {"containers": [{"name": "c", "image": "i"}]}, False),
        Step(
            "update",
            "editor",
            {"containers": [{"name": "c", "image": "j", "env": {"E": "1"}}]},
            False,
        ),
        Step(
            "apply",
            "alice",
            {"containers": [{"name": "c", "image": "k"}, {"name": "d"}]},
            True,
        ),
    ],
    "atomic_and_untyped": [
        Step(
            "apply",
            "alice",
            {"selector": {"a": "b"}, "args": ["1", "2"], "raw": {"x": [1]}, "extra": {"e": 1}},
            False,
        ),
        Step(
            "apply", "bob", {"selector": {"a": "b"}, "raw": {"x": [1]}, "extra": {"f": [2]}}, False
        ),
        Step("update", "editor", {"selector": {"c": "d"}, "args": [], "extra": {"e": 2}}, False),
        Step("apply", "alice", {"args": ["3"], "extra": {"e": 3}}, True),
    ],
    "escaped_names_and_values": [
        Step(
            "apply",
            "alice",
            {"labels": {"<&>": "\u2028", 'q"': "\\"}, "finalizers": ["<a>", "é", 'x"y']},
            False,
        ),
        Step("apply", "bob", {"finalizers": ["<a>"], "labels": {"<&>": "other"}}, False),
        Step("apply", "bob", {"finalizers": ["<a>"]}, False),
    ],
    "nulls": [
        Step("apply", "alice", {"replicas": None, "labels": {"a": None}, "extra": {"x": None}}),
        Step("apply", "bob", {"labels": {"a": None, "b": "2"}, "extra": {"x": None}}),
        Step("apply", "bob", {"replicas": 3}),
        Step("update", "editor", {"replicas": None, "labels": None, "extra": None}),
        Step("apply", "alice", {"labels": {"a": "1"}}, force=True),
    ],
    "numbers": [
        Step("apply", "alice", {"replicas": 2.0, "extra": {"n": 1.5}, "raw": 3}, False),
        Step("apply", "bob", {"replicas": 2, "extra": {"n": 1.5}}, False),
        Step("update", "editor", {"replicas": 2.5, "extra": {"n": 1.5}, "raw": 3.0}, False),
    ],
}


def _run_sequence(reference: SmdReference, kind: Kind, steps: list[Step]) -> State:
    state = State()
    for step in steps:
        outcome = check_step(reference, kind, state, step)
        if outcome.conflicts is None:
            state = State(outcome.object, outcome.managers)
    return state


@pytest.mark.parametrize("name", sorted(FIXED_SEQUENCES))
def test_fixed_sequences_match_the_reference(smd_reference: SmdReference, name: str) -> None:
    _run_sequence(smd_reference, Kind(WORKLOAD, WORKLOAD_SCHEMA), FIXED_SEQUENCES[name])


def test_fixed_field_sets_and_merges_match_the_reference(smd_reference: SmdReference) -> None:
    live = {
        "containers": [{"name": "a", "ports": [{"port": 1}, {"port": 1, "protocol": "UDP"}]}],
        "labels": {"x": "1"},
        "extra": {"k": {"l": [1, {"m": 2}]}},
    }
    config = {"containers": [{"name": "b"}, {"name": "a", "image": "i"}], "raw": None}
    for obj in (live, config, {}):
        expected = smd_reference.field_set(WORKLOAD_SCHEMA, ROOT, obj)
        assert fields_v1_from_set(typed.to_field_set(obj, WORKLOAD)).decode() == (
            expected.fields_v1_json
        )
    merged = smd_reference.merge(WORKLOAD_SCHEMA, ROOT, live, {"labels": {"y": "2"}})
    assert _text(typed.merge(live, {"labels": {"y": "2"}}, WORKLOAD)) == _text(merged.object)


def _defect(name: str) -> EngineDefect:
    (found,) = [d for d in ENGINE_DEFECTS if d.name == name]
    return found


def test_an_apply_emptying_the_object_answers_the_null_object(
    smd_reference: SmdReference,
) -> None:
    # The unchanged answer is a sentinel, not None, so a prune that leaves nothing is told
    # apart from a no-op (as SMD's nil object and null value are).
    steps = [Step("apply", "alice", {"replicas": 1}), Step("apply", "alice", {})]
    _run_sequence(smd_reference, Kind(WORKLOAD, WORKLOAD_SCHEMA), steps)


@pytest.mark.xfail(reason=_defect("null_element_in_prune").behaviour, strict=True)
def test_engine_defect_null_element_in_prune(smd_reference: SmdReference) -> None:
    element = _struct(("name", _string()), ("a", Atom(scalar="numeric")), defaults={"name": ""})
    root = _struct(("items", Atom(list=ListType(element, ASSOCIATIVE, ("name",)))))
    steps = [Step("apply", "alice", {"items": [{"a": 1}]}), Step("apply", "alice", {"items": [{}]})]
    state = _run_sequence(smd_reference, Kind.of(root), steps)
    assert state.live == {"items": None}


# --- known differences, asserted as such --------------------------------------------------


def _known(name: str) -> KnownDifference:
    (found,) = [d for d in KNOWN_DIFFERENCES if d.name == name]
    return found


def test_known_difference_merged_list_order(smd_reference: SmdReference) -> None:
    _known("merged_list_order")
    live = {"finalizers": ["a", "b", "c"]}
    config = {"finalizers": ["d", "c", "a"]}
    reference = smd_reference.merge(WORKLOAD_SCHEMA, ROOT, live, config)
    assert reference.object == {"finalizers": ["a", "b", "c", "d"]}  # v4.1.2
    # master: the live-only b keeps its place at the front; the shared c and a, and the new
    # d before them, come in the config's order.
    assert typed.merge(live, config, WORKLOAD) == {"finalizers": ["b", "d", "c", "a"]}
    assert master_merge_order(["a", "b", "c"], ["d", "c", "a"]) == ["b", "d", "c", "a"]


def test_known_difference_noop_apply(smd_reference: SmdReference) -> None:
    _known("noop_apply")
    first = smd_reference.apply(
        WORKLOAD_SCHEMA, ROOT, None, {"finalizers": ["a", "b"]}, managers={}, manager="alice"
    )
    assert first.managers is not None
    reordered = {"finalizers": ["b", "a"]}
    reference = smd_reference.apply(
        WORKLOAD_SCHEMA, ROOT, first.object, reordered, managers=first.managers, manager="alice"
    )
    assert reference.unchanged and reference.object == {"finalizers": ["a", "b"]}  # v4.1.2
    engine = engine_apply(
        WORKLOAD, first.object, reordered, managers=first.managers, manager="alice", force=False
    )
    assert not engine.unchanged and engine.object == reordered  # master
    assert _managers_text(engine.managers) == _managers_text(reference.managers)


def test_known_difference_partial_list_map_key(smd_reference: SmdReference) -> None:
    _known("partial_list_map_key")
    two_keys = _struct(
        (
            "items",
            Atom(
                list=ListType(
                    _struct(("a", _string()), ("b", _string()), ("v", _string())),
                    ASSOCIATIVE,
                    ("a", "b"),
                )
            ),
        )
    )
    schema = to_smd_yaml({ROOT: two_keys})
    obj = {"items": [{"a": "x", "v": "1"}]}
    reference = smd_reference.field_set(schema, ROOT, obj)
    assert reference.error is not None and "omits key field" in reference.error  # v4.1.2
    engine = fields_v1_from_set(typed.to_field_set(obj, two_keys)).decode()  # master
    assert engine == '{"f:items":{"k:{\\"a\\":\\"x\\"}":{".":{},"f:a":{},"f:v":{}}}}'


def test_known_difference_duplicate_elements(smd_reference: SmdReference) -> None:
    _known("duplicate_elements")
    live = {"containers": [{"name": "c", "image": "i"}, {"name": "c"}, {"name": "d"}]}
    reference = smd_reference.update(
        WORKLOAD_SCHEMA, ROOT, None, live, managers={}, manager="editor"
    )
    assert reference.error is not None and "duplicate entries" in reference.error  # v4.1.2
    # master: the repeated element is owned as a whole, nothing below it.
    created = engine_update(WORKLOAD, None, live, managers={}, manager="editor")
    assert created.managers is not None
    assert created.managers["editor"]["fieldsV1JSON"] == (
        '{"f:containers":{".":{},"k:{\\"name\\":\\"c\\"}":{},'
        '"k:{\\"name\\":\\"d\\"}":{".":{},"f:name":{}}}}'
    )
    # ... and an apply of that element replaces the repeats by the applied one.
    applied = engine_apply(
        WORKLOAD,
        live,
        {"containers": [{"name": "c", "image": "k"}]},
        managers=created.managers,
        manager="alice",
        force=True,
    )
    assert applied.object == {"containers": [{"name": "c", "image": "k"}, {"name": "d"}]}


# --- generated sequences ----------------------------------------------------------------


def _draw_object(data: st.DataObject, atom: Atom, state: State, own: Any) -> Any:
    """An apply configuration or an updated object: fresh, a part of what the manager
    applied before (dropping fields it owned), a part of the live object (sharing fields
    with their owners), or a mix of these."""
    fresh = data.draw(values(atom))
    live = state.live if state.live is not None else {}
    source = data.draw(st.sampled_from(["mix", "fresh", "own", "live", "mix", "fresh"]))
    if source == "fresh":
        return fresh
    if source == "own":
        return data.draw(pruned(atom, own if own is not None else fresh))
    if source == "live":
        return data.draw(pruned(atom, live))
    return data.draw(combined(atom, data.draw(pruned(atom, live)), fresh))


def _kind_of_outcome(op: str, force: bool, outcome: Outcome) -> str:
    """What a step did, for hypothesis' statistics (--hypothesis-show-statistics)."""
    if outcome.conflicts is not None:
        return f"{op}: conflicts"
    owners = len(outcome.managers or {})
    what = "unchanged" if outcome.unchanged else "changed"
    return f"{op}{' forced' if force else ''}: {what}, {owners} owner(s) after"


@settings(
    max_examples=SEQUENCE_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_generated_sequences_match_the_reference(
    smd_reference: SmdReference, data: st.DataObject
) -> None:
    root = data.draw(root_atoms(), label="schema")
    assert root.map is not None
    # Every configuration and object names its kind, as Kubernetes' always carry apiVersion
    # and kind: the object never becomes empty (see test_an_apply_that_empties_the_object).
    root.map.fields[IDENTITY] = StructField(IDENTITY, Atom(scalar="string"))
    kind = Kind.of(root)
    atom = kind.atom
    managers = MANAGERS[: data.draw(st.integers(2, 3), label="managers")]
    state = State()
    applied: dict[str, Any] = {}
    for _ in range(data.draw(st.integers(2, 8), label="steps")):
        manager = data.draw(st.sampled_from(managers))
        op = data.draw(st.sampled_from(["apply", "apply", "apply", "update"]))
        if op == "update":
            base = state.live if state.live is not None else {}
            obj = data.draw(combined(atom, base, _draw_object(data, atom, state, None)))
        else:
            obj = _draw_object(data, atom, state, applied.get(manager))
        obj = {**obj, IDENTITY: "K"}
        force = op == "apply" and data.draw(st.sampled_from([False, False, False, True]))
        step = Step(op, manager, obj, force)
        outcome = check_step(smd_reference, kind, state, step, tolerate_defects=True)
        event(_kind_of_outcome(op, force, outcome))
        if outcome.conflicts is None:
            state = State(outcome.object, outcome.managers)
            if op == "apply":
                applied[manager] = obj


@settings(
    max_examples=FIELD_SET_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_generated_field_sets_and_merges_match_the_reference(
    smd_reference: SmdReference, data: st.DataObject
) -> None:
    atom = data.draw(root_atoms(), label="schema")
    schema = to_smd_yaml({ROOT: atom})
    live = data.draw(values(atom), label="live")
    obj = data.draw(combined(atom, data.draw(pruned(atom, live)), data.draw(values(atom))))
    expected = smd_reference.field_set(schema, ROOT, obj)
    assert expected.fields_v1_json is not None, expected.error
    actual = fields_v1_from_set(typed.to_field_set(obj, atom)).decode()
    assert actual == expected.fields_v1_json
    assert fields_v1_from_set(set_from_fields_v1(expected.fields_v1_json)).decode() == actual
    merged = smd_reference.merge(schema, ROOT, live, obj)
    assert merged.error is None, merged.error
    ours = typed.merge(live, obj, atom)
    assert _text(_sorted_lists(atom, ours)) == _text(_sorted_lists(atom, merged.object))
    assert not list(_order_mismatches(atom, merged.object, live, obj, order=v4_merge_order))
    assert not list(_order_mismatches(atom, ours, live, obj, order=master_merge_order))


def test_known_difference_conflict_path_aliasing(smd_reference: SmdReference) -> None:
    _known("conflict_path_aliasing")
    element = _struct(("name", _string()), ("a", _string()), ("b", _string()))
    listed_kind = _struct(("k", Atom(list=ListType(element, ASSOCIATIVE, ("name",)))))
    kind = _struct(("a", listed_kind))
    schema = to_smd_yaml({ROOT: kind})
    first = {"a": {"k": [{"name": "n", "a": "1", "b": "1"}]}}
    owned = smd_reference.apply(schema, ROOT, None, first, managers={}, manager="bob")
    assert owned.managers is not None
    changed = {"a": {"k": [{"name": "n", "a": "2", "b": "2"}]}}
    reference = smd_reference.apply(
        schema, ROOT, owned.object, changed, managers=owned.managers, manager="alice"
    )
    engine = engine_apply(
        kind, owned.object, changed, managers=owned.managers, manager="alice", force=False
    )
    both = [("bob", '.a.k[name="n"].a'), ("bob", '.a.k[name="n"].b')]
    assert _conflicts(engine) == both  # master
    listed = _conflicts(reference)  # v4.1.2: two conflicts, one path shown twice
    assert listed is not None and len(listed) == 2 and len(set(listed)) == 1
    assert set(listed) < set(both)
    assert _master_conflicts(reference, engine) == both
