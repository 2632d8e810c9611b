"""Hypothesis strategies for structured merge: schemas (``watchcache.structured.schema``
atoms), objects valid for them, and the derived objects that apply and update sequences use.

Design note
-----------
The differential tests (tests/differential) feed what these draw to structured-merge-diff and
to watchcache's engine and compare the answers, so every object drawn here must be valid for
its schema by structured-merge-diff's rules, or the comparison is about error handling
instead of merging:

* a list-map element is a map holding every key field, except a key field with a default,
  which it may omit; no two elements share a key once defaults are filled in (numbers
  compared by value, as the library compares them: ``2`` and ``2.0`` are one key);
* a set holds distinct scalars of its element type;
* atomic lists may repeat elements; deduced and untyped values are any JSON without null.

Values come from small pools (a few strings, small numbers) so that independent draws often
coincide: equal values are what makes ownership shared rather than conflicting. The string
pool holds the characters whose escaping differs between JSON writers (``<``, ``&``, quotes,
backslashes, non-ASCII, U+2028) so that FieldsV1 is compared where it is easiest to get
wrong; field names include some too. Nulls are not drawn (the differential test's fixed
cases hold some; a pruned live object may come to hold them).

:func:`pruned` draws a smaller object from a valid one (fields and associative elements
dropped, list-map keys kept), which stays valid: an applier that drops fields it applied
before, or one that applies values already live. Used only by tests; no production module
imports it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from watchcache.structured.schema import (
    ASSOCIATIVE,
    ATOMIC,
    DEDUCED,
    SEPARABLE,
    UNTYPED_ATOMIC,
    Atom,
    ListType,
    MapType,
    Relationship,
    StructField,
)

__all__ = [
    "STRINGS",
    "atoms",
    "combined",
    "element_key",
    "json_values",
    "pruned",
    "root_atoms",
    "values",
]

#: Names of struct fields; a few need escaping in YAML, JSON or HTML-safe JSON.
FIELD_NAMES = ("a", "b", "c", "spec", "x.y", "<t>", 'q"t', "é")
#: Keys of maps with an element type (never one of FIELD_NAMES, so they do not collide).
MAP_KEYS = ("k", "l", "m&n", "p q")
#: Strings for scalar values.
STRINGS = ("", "a", "b", "<&>", '"q"', "\\", "é", "\u2028")
KEY_FIELD_NAMES = ("name", "port", "proto")
_NUMBERS = (-2, -1, 0, 1, 2, 3, 0.5, -1.25, 2.0)
_SCALAR_KINDS = ("numeric", "string", "boolean")

# Every draw goes through these few strategies, built once: building strategies per draw
# (a composite per atom) costs hypothesis more than the whole comparison does.
_BOOLEANS = st.booleans()
_CHOICES = {n: st.integers(0, n - 1) for n in range(1, 16)}


def _choice(draw: st.DrawFn, options: tuple[Any, ...] | list[Any]) -> Any:
    return options[draw(_CHOICES[len(options)])]


def _one_in(draw: st.DrawFn, n: int) -> bool:
    return draw(_CHOICES[n]) == 0


def _scalar(draw: st.DrawFn, kind: str) -> Any:
    if kind == "numeric":
        return _choice(draw, _NUMBERS)
    if kind == "string":
        return _choice(draw, STRINGS)
    return draw(_BOOLEANS)


def _distinct(draw: st.DrawFn, options: tuple[str, ...], low: int, high: int) -> list[str]:
    """Between ``low`` and ``high`` distinct members of ``options``, in drawn order."""
    pool = list(options)
    out = []
    for _ in range(low + draw(_CHOICES[high - low + 1])):
        out.append(pool.pop(draw(_CHOICES[len(pool)])))
    return out


def _atom(draw: st.DrawFn, depth: int) -> Atom:
    leaves = 4
    kind = draw(_CHOICES[leaves + 7 if depth > 0 else leaves])
    if kind <= 1:
        return Atom(scalar=_choice(draw, _SCALAR_KINDS))
    if kind == 2:
        return DEDUCED
    if kind == 3:
        return UNTYPED_ATOMIC
    if kind <= 5:
        return _struct_atom(draw, depth)
    if kind == 6:
        relationship: Relationship = ATOMIC if draw(_BOOLEANS) else SEPARABLE
        return Atom(map=MapType(element=_atom(draw, depth - 1), relationship=relationship))
    if kind == 7:
        return Atom(list=ListType(_atom(draw, depth - 1), ATOMIC))
    if kind == 8:
        return Atom(list=ListType(Atom(scalar=_choice(draw, _SCALAR_KINDS)), ASSOCIATIVE))
    return _list_map_atom(draw, depth)


def _struct_atom(draw: st.DrawFn, depth: int) -> Atom:
    names = _distinct(draw, FIELD_NAMES, 1, 4)
    fields = {name: StructField(name, _atom(draw, depth - 1)) for name in names}
    element = _atom(draw, depth - 1) if _one_in(draw, 5) else None
    relationship: Relationship = ATOMIC if _one_in(draw, 7) else SEPARABLE
    return Atom(map=MapType(fields, element, relationship))


def _list_map_atom(draw: st.DrawFn, depth: int) -> Atom:
    keys = KEY_FIELD_NAMES[: 1 + draw(_CHOICES[2])]
    fields: dict[str, StructField] = {}
    for key in keys:
        kind = _choice(draw, ("string", "numeric"))
        default = None
        if _one_in(draw, 4):
            default = _choice(draw, STRINGS) if kind == "string" else draw(_CHOICES[4])
        fields[key] = StructField(key, Atom(scalar=kind), default)
    for name in _distinct(draw, FIELD_NAMES, 0, 2):
        fields[name] = StructField(name, _atom(draw, depth - 1))
    return Atom(list=ListType(Atom(map=MapType(fields)), ASSOCIATIVE, keys))


@st.composite
def atoms(draw: st.DrawFn, depth: int = 2) -> Atom:
    """Any type, nested at most ``depth`` levels below this one."""
    return _atom(draw, depth)


@st.composite
def root_atoms(draw: st.DrawFn, depth: int = 2) -> Atom:
    """A root type: a separable struct, as every Kubernetes kind is."""
    atom = _struct_atom(draw, depth + 1)
    assert atom.map is not None
    atom.map.relationship = SEPARABLE
    return atom


def _json(draw: st.DrawFn, depth: int) -> Any:
    kind = draw(_CHOICES[5 if depth > 0 else 3])
    if kind < 3:
        return _scalar(draw, _SCALAR_KINDS[kind])
    if kind == 3:
        return [_json(draw, depth - 1) for _ in range(draw(_CHOICES[4]))]
    keys = _distinct(draw, MAP_KEYS + FIELD_NAMES[:3], 0, 3)
    return {key: _json(draw, depth - 1) for key in keys}


@st.composite
def json_values(draw: st.DrawFn, depth: int = 2) -> Any:
    """Any JSON value but null (a deduced or untyped one)."""
    return _json(draw, depth)


def _number_key(value: Any) -> Any:
    """The identity of a scalar as the library compares scalars: numbers by value."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return (type(value).__name__, value)
    return ("number", float(value))


def element_key(list_type: ListType, element: Any) -> Any:
    """What identifies ``element`` in an associative list: its key fields (defaults filled
    in) or, in a set, its value."""
    if not list_type.keys:
        return _number_key(element)
    element_map = list_type.element.map
    assert element_map is not None
    key = []
    for name in list_type.keys:
        if name in element:
            key.append((name, _number_key(element[name])))
        else:
            key.append((name, _number_key(element_map.fields[name].default)))
    return tuple(key)


def _value(draw: st.DrawFn, atom: Atom) -> Any:
    if atom is DEDUCED or atom is UNTYPED_ATOMIC:
        return _json(draw, 2)
    if atom.map is not None:
        return _map_value(draw, atom.map, ())
    if atom.list is not None:
        return _list_value(draw, atom.list)
    assert atom.scalar is not None
    return _scalar(draw, atom.scalar)


@st.composite
def values(draw: st.DrawFn, atom: Atom) -> Any:
    """A value valid for ``atom``."""
    return _value(draw, atom)


def _map_value(draw: st.DrawFn, map_type: MapType, required: tuple[str, ...]) -> Any:
    out: dict[str, Any] = {}
    for name, fld in map_type.fields.items():
        if name in required or draw(_BOOLEANS):
            out[name] = _value(draw, fld.type)
    if map_type.element is not None:
        for key in _distinct(draw, MAP_KEYS, 0, 2):
            out[key] = _value(draw, map_type.element)
    return out


def _list_value(draw: st.DrawFn, list_type: ListType) -> list[Any]:
    count = draw(_CHOICES[4])
    if list_type.relationship == ATOMIC:
        return [_value(draw, list_type.element) for _ in range(count)]
    out: list[Any] = []
    seen = set()
    for _ in range(count):
        element = (
            _list_map_element(draw, list_type)
            if list_type.keys
            else _value(draw, list_type.element)
        )
        key = element_key(list_type, element)
        if key not in seen:
            seen.add(key)
            out.append(element)
    return out


def _list_map_element(draw: st.DrawFn, list_type: ListType) -> dict[str, Any]:
    element_map = list_type.element.map
    assert element_map is not None
    out: dict[str, Any] = {}
    for name, fld in element_map.fields.items():
        # A key field must be there unless it has a default; the others may be.
        if (name in list_type.keys and fld.default is None) or draw(_BOOLEANS):
            out[name] = _value(draw, fld.type)
    return out


def _pruned(draw: st.DrawFn, atom: Atom | None, value: Any) -> Any:
    if atom is None or atom is UNTYPED_ATOMIC or not isinstance(value, dict | list):
        return value
    if atom is DEDUCED:
        if isinstance(value, dict):
            return {k: _pruned(draw, DEDUCED, v) for k, v in value.items() if draw(_BOOLEANS)}
        return value
    if atom.map is not None and isinstance(value, dict):
        if atom.map.relationship == ATOMIC:
            return value
        return _pruned_map(draw, atom.map, value, ())
    if atom.list is not None and isinstance(value, list):
        list_type = atom.list
        if list_type.relationship == ATOMIC:
            return value
        kept = [v for v in value if draw(_BOOLEANS)]
        if not list_type.keys:
            return kept
        element_map = list_type.element.map
        assert element_map is not None
        return [_pruned_map(draw, element_map, e, list_type.keys) for e in kept]
    return value


def _pruned_map(
    draw: st.DrawFn, map_type: MapType, value: dict[str, Any], keep: tuple[str, ...]
) -> dict[str, Any]:
    out = {}
    for name, item in value.items():
        if name in keep:
            out[name] = item
        elif draw(_BOOLEANS):
            fld = map_type.fields.get(name)
            out[name] = _pruned(draw, fld.type if fld is not None else map_type.element, item)
    return out


@st.composite
def pruned(draw: st.DrawFn, atom: Atom, value: Any) -> Any:
    """``value`` with some of its separately owned parts dropped: fields of separable maps
    and elements of associative lists (list-map key fields stay). Atomic values and scalars
    are kept whole: they are owned whole."""
    return _pruned(draw, atom, value)


def _combined(draw: st.DrawFn, atom: Atom | None, first: Any, second: Any) -> Any:
    if atom is None or atom is UNTYPED_ATOMIC or not isinstance(first, dict | list):
        return first if draw(_BOOLEANS) else second
    if isinstance(first, dict) and isinstance(second, dict):
        if atom is DEDUCED:
            return _combined_map(draw, MapType(element=DEDUCED), first, second, ())
        if atom.map is not None and atom.map.relationship != ATOMIC:
            return _combined_map(draw, atom.map, first, second, ())
    if isinstance(first, list) and isinstance(second, list) and atom.list is not None:
        list_type = atom.list
        if list_type.relationship != ATOMIC:
            return _combined_list(draw, list_type, first, second)
    return first if draw(_BOOLEANS) else second


def _combined_map(
    draw: st.DrawFn,
    map_type: MapType,
    first: dict[str, Any],
    second: dict[str, Any],
    keys: tuple[str, ...],
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in list(first) + [n for n in second if n not in first]:
        if name in keys:
            # Equal keys: a defaulted key field given on one side only is its default.
            if name in first:
                out[name] = first[name]
            continue
        choice = draw(_CHOICES[4])
        if name in first and name in second and choice == 0:
            fld = map_type.fields.get(name)
            item_type = fld.type if fld is not None else map_type.element
            out[name] = _combined(draw, item_type, first[name], second[name])
        elif choice == 3:
            continue
        else:
            out[name] = (
                first[name]
                if name in first and (choice == 1 or name not in second)
                else second[name]
            )
    return out


def _combined_list(
    draw: st.DrawFn, list_type: ListType, first: list[Any], second: list[Any]
) -> list[Any]:
    by_key = {element_key(list_type, e): e for e in second}
    out = []
    taken = set()
    for element in first:
        key = element_key(list_type, element)
        taken.add(key)
        other = by_key.get(key)
        choice = draw(_CHOICES[3])
        if choice == 2:
            continue
        if other is not None and choice == 0 and list_type.keys:
            element_map = list_type.element.map
            assert element_map is not None
            out.append(_combined_map(draw, element_map, element, other, list_type.keys))
        else:
            out.append(element)
    for element in second:
        if element_key(list_type, element) not in taken and draw(_BOOLEANS):
            out.append(element)
    return out


@st.composite
def combined(draw: st.DrawFn, atom: Atom, first: Any, second: Any) -> Any:
    """A value mixing two valid values of ``atom``, part by part: each field of a separable
    map and each element of an associative list comes from either (or both, mixed deeper),
    or is left out; atomic parts come whole from one. List-map elements keep their keys, and
    no key is repeated, so the mix is valid too."""
    return _combined(draw, atom, first, second)
