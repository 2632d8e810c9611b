"""Properties of the structured-merge engine over generated objects of a workload-like type:
FieldsV1 round-trips, apply is idempotent, un-applying restores the other appliers' fields,
appliers never own a field set to a value other than theirs without a conflict, and a field
set is what a comparison from nothing adds, but for the containers.

The exceptions are SMD's own behaviour around empty containers, asserted as such (and
checked against the reference library): an empty associative list sets no field, so nobody
owns it and un-applying may keep or drop one; a map holding only such lists looks absent to
the prune, which may remove it although another applier owns it; a prune that empties a map
leaves it null (RemoveItems' rule). No field holding a value is ever lost."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from structured_builders import (
    BOOLEAN,
    NUMERIC,
    STRING,
    atomic_list,
    list_map,
    map_of,
    set_of,
    struct,
)

from watchcache.structured import typed, updater
from watchcache.structured.fieldpath import (
    ManagedFields,
    Path,
    PathElement,
    Set,
    fields_v1_from_set,
    set_from_fields_v1,
)
from watchcache.structured.schema import ATOMIC, DEDUCED, Atom
from watchcache.structured.typedwalk import ElementError, list_element

# Small pools, so independent draws often coincide (shared ownership needs equal values);
# strings that JSON writers escape differently are among them.
NAMES = ("a", "b", "<c>", 'q"t', "é", "x.y")
TEXTS = ("v", "w", "<&>", "\u2028", "é🚀", 'a"b\\')
NUMBERS = (0, 1, 2, 2.5, -1, 1e21)

PORT = struct(port=NUMERIC, protocol=STRING, name=STRING, _defaults={"protocol": "TCP"})
ITEM = struct(name=STRING, value=STRING, on=BOOLEAN, ports=list_map(PORT, "port", "protocol"))
ROOT = struct(
    kind=STRING,
    labels=map_of(STRING),
    finalizers=set_of(STRING),
    spec=struct(
        replicas=NUMERIC,
        items=list_map(ITEM, "name"),
        args=atomic_list(STRING),
        selector=struct(app=STRING, tier=STRING, _relationship=ATOMIC),
        nested=struct(deep=struct(x=NUMERIC, y=STRING)),
        extra=DEDUCED,
    ),
)

scalars_for = {
    "string": st.sampled_from(TEXTS),
    "numeric": st.sampled_from(NUMBERS),
    "boolean": st.booleans(),
}

json_leaves = st.one_of(st.sampled_from(TEXTS), st.sampled_from(NUMBERS), st.booleans())
deduced_values = st.recursive(
    json_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(NAMES), inner, max_size=3),
    ),
    max_leaves=6,
)


@st.composite
def values(draw: st.DrawFn, atom: Atom, depth: int = 0) -> Any:
    """A value valid for ``atom`` (no nulls: Kubernetes drops them from applied
    configurations)."""
    if atom is DEDUCED:
        return draw(st.dictionaries(st.sampled_from(NAMES), deduced_values, max_size=3))
    if atom.scalar is not None:
        return draw(scalars_for[atom.scalar])
    if atom.list is not None:
        element = atom.list.element
        if atom.list.relationship == ATOMIC:
            return draw(st.lists(values(element, depth + 1), max_size=3))
        if not atom.list.keys:
            return draw(st.lists(values(element, depth + 1), max_size=3, unique_by=_scalar_id))
        items = draw(st.lists(values(element, depth + 1), max_size=3))
        named: dict[PathElement, Any] = {}
        for item in items:
            try:
                named.setdefault(list_element(atom.list, item), item)
            except ElementError:
                continue
        return list(named.values())
    assert atom.map is not None
    if not atom.map.fields:
        assert atom.map.element is not None
        return draw(
            st.dictionaries(st.sampled_from(NAMES), values(atom.map.element, depth + 1), max_size=3)
        )
    out: dict[str, Any] = {}
    for name, declared in atom.map.fields.items():
        if draw(st.booleans()):
            out[name] = draw(values(declared.type, depth + 1))
    return out


def _scalar_id(value: Any) -> tuple[str, Any]:
    return (type(value).__name__ if isinstance(value, str | bool) else "number", value)


@st.composite
def item_values(draw: st.DrawFn) -> dict[str, Any]:
    item: dict[str, Any] = draw(values(ITEM))
    item["name"] = draw(st.sampled_from(NAMES))
    ports = []
    for port in item.get("ports", []):
        port["port"] = draw(st.sampled_from((80, 443, 53)))
        ports.append(port)
    if "ports" in item:
        unique: dict[tuple[Any, Any], Any] = {}
        for port in ports:
            unique.setdefault((port["port"], port.get("protocol", "TCP")), port)
        item["ports"] = list(unique.values())
    return item


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    """An apply configuration (or object) for ROOT."""
    obj: dict[str, Any] = draw(values(ROOT))
    spec = obj.get("spec")
    if isinstance(spec, dict) and "items" in spec:
        items = draw(st.lists(item_values(), max_size=3))
        unique: dict[str, Any] = {}
        for item in items:
            unique.setdefault(item["name"], item)
        spec["items"] = list(unique.values())
    obj["kind"] = "K"
    return obj


def _value_at(value: Any, path: Path) -> Any:
    for pe in path:
        if pe.field is not None:
            value = value[pe.field]
            continue
        fields = pe.key
        if fields is not None:
            wanted = dict(fields)
            value = next(
                item
                for item in value
                if all(
                    item.get(k, "TCP" if k == "protocol" else None) == v for k, v in wanted.items()
                )
            )
        else:
            value = next(item for item in value if PathElement.of_value(item) == pe)
    return value


def _holds_nothing(value: Any) -> bool:
    """Empty containers, however nested: nothing anyone can own."""
    if isinstance(value, dict):
        return all(_holds_nothing(item) for item in value.values())
    return isinstance(value, list) and not value


# --- FieldsV1 -------------------------------------------------------------------------------

elements = st.one_of(
    st.builds(PathElement.of_field, st.sampled_from(NAMES) | st.text(max_size=4)),
    st.builds(
        PathElement.of_key,
        st.dictionaries(st.sampled_from(NAMES), json_leaves, min_size=1, max_size=2),
    ),
    st.builds(PathElement.of_value, json_leaves | st.lists(json_leaves, max_size=2)),
    st.builds(PathElement.of_index, st.integers(0, 20)),
)
paths = st.lists(elements, min_size=1, max_size=4).map(tuple)


@given(st.lists(paths, max_size=12))
def test_fields_v1_round_trips(members: list[Path]) -> None:
    s = Set(members)
    raw = fields_v1_from_set(s)
    back = set_from_fields_v1(raw)
    assert back == s
    assert fields_v1_from_set(back) == raw
    assert set(back) == set(members)


# --- apply ----------------------------------------------------------------------------------


def _apply(live: Any, config: Any, managers: ManagedFields, who: str) -> tuple[Any, ManagedFields]:
    obj, after = updater.apply(live, config, "v1", managers, who, ROOT, force=False)
    return (live if obj is updater.UNCHANGED else obj), after


@settings(max_examples=150, deadline=None)
@given(configs(), configs())
def test_apply_is_idempotent(first: dict[str, Any], config: dict[str, Any]) -> None:
    live, managers = _apply(None, first, {}, "other")
    try:
        live, managers = _apply(live, config, managers, "me")
    except updater.ConflictsError:
        assume(False)
    again, after = updater.apply(live, config, "v1", managers, "me", ROOT, force=False)
    assert again is updater.UNCHANGED
    assert after == managers


@settings(max_examples=150, deadline=None)
@given(configs(), configs())
def test_unapplying_restores_the_other_appliers_fields(mine: Any, theirs: Any) -> None:
    before, managers = _apply(None, theirs, {}, "them")
    try:
        during, managers_during = _apply(before, mine, managers, "me")
    except updater.ConflictsError:
        assume(False)
    after, managers_after = _apply(during, {"kind": "K"}, managers_during, "me")
    change = typed.compare(before, after, ROOT)
    # SMD: empty containers are owned oddly. An empty associative list sets no field, so
    # nobody owns it: one "me" applied stays, one "them" applied may go with its parent;
    # a map holding only such lists looks absent to the prune, which then removes it even
    # if "them" owns it; and a prune that empties a map leaves it null. What "them" set
    # that holds a value is never touched.
    for path in change.added:
        assert _holds_nothing(_value_at(after, path)), path
    for path in change.removed:
        assert _holds_nothing(_value_at(before, path)), path
    for path in change.modified:
        assert _value_at(before, path) == {} and _value_at(after, path) is None, path
    kept = managers_after["them"].set
    assert kept.difference(managers["them"].set).is_empty()
    for path in managers["them"].set.difference(kept):
        assert _holds_nothing(_value_at(before, path)), path


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), configs()), min_size=1, max_size=5))
def test_appliers_own_only_their_own_values(steps: list[tuple[str, Any]]) -> None:
    live: Any = None
    managers: ManagedFields = {}
    applied: dict[str, Any] = {}
    for who, config in steps:
        try:
            live, managers = _apply(live, config, managers, who)
        except updater.ConflictsError:
            continue
        applied[who] = config
        for name, versioned in managers.items():
            differing = typed.compare(applied[name], live, ROOT).modified
            for path in differing.intersection(versioned.set):
                # SMD: an applier that empties a map it had filled owns the map, which its
                # prune leaves null (RemoveItems nulls what it empties).
                assert _value_at(applied[name], path) in ({}, []), (name, path)
                assert _value_at(live, path) is None, (name, path)


# --- field sets -----------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(configs())
def test_field_set_is_what_a_comparison_from_nothing_adds_but_containers(obj: Any) -> None:
    fields = typed.to_field_set(obj, ROOT)
    added = typed.compare(None, obj, ROOT).added
    assert fields.difference(added).is_empty()
    for path in added.difference(fields):
        # The rest are struct fields and lists holding what is owned, or empty lists.
        assert isinstance(_value_at(obj, path), dict | list), path
