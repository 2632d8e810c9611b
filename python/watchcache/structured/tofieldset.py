"""The fields a value sets: structured-merge-diff's ``TypedValue.ToFieldSet``, what an
applier comes to own.

Design note
-----------
Every leaf the value mentions becomes a path, with SMD's rules for what counts as a leaf:

* a scalar, an atomic list and an atomic map are leaves (nothing below them is tracked);
* a map entry is a member when its value is null or an empty map, or when the entry is not
  a declared field of its struct (a label, an annotation: owned as an entry), besides its
  own leaves;
* every element of an associative list is a member (``[name="web"]``), besides its leaves;
  an element that occurs more than once is a member once and nothing below it is tracked;
* an empty associative list, or a declared field holding one, adds nothing (``finalizers:
  []`` owns no field), as in SMD.

:func:`quick_field_set` is the quick walk (see :mod:`~watchcache.structured.typedwalk`):
the same set for a value valid for its type and plain (no repeated list element), built
bottom-up without paths; None for anything else, which :func:`field_set` then answers.

Costs: one walk, O(size), each list element named once (SMD names them twice). Values are
expected to be valid for their type (callers validate first, as Kubernetes does); an element
that cannot be named, or a field the schema cannot type, raises :class:`TypedValueError`
instead of recording a meaningless path. Callers: :mod:`watchcache.structured.typed`.
"""

from __future__ import annotations

from typing import Any

from watchcache.structured.fieldpath import Set, set_node
from watchcache.structured.pathelement import Path, PathElement, field_element
from watchcache.structured.schema import ASSOCIATIVE, ATOMIC, Atom, ListType, MapType
from watchcache.structured.typedwalk import (
    LIST,
    MAP,
    NULL,
    SCALAR_TYPES,
    ElementError,
    Irregular,
    TypedValueError,
    deduce,
    errors_at,
    invalid_atom,
    list_element,
    part_of,
    quick_element,
    whole_part,
)
from watchcache.structured.value import JSON

__all__ = ["field_set", "quick_field_set"]


def field_set(value: JSON, atom: Atom) -> Set:
    """The set of fields ``value`` sets, as an ``atom``."""
    out = Set()
    _walk(value, atom, (), out)
    return out


def _walk(value: JSON, atom: Atom | None, path: Path, out: Set) -> None:
    scalar, list_type, map_type = deduce(atom, value)
    if map_type is not None:
        _map(value, map_type, path, out)
    elif scalar is not None:
        out.insert(path)
    elif list_type is not None:
        _list(value, list_type, path, out)
    else:
        raise TypedValueError([errors_at(path, invalid_atom(atom))])


def _map(value: JSON, map_type: MapType, path: Path, out: Set) -> None:
    if map_type.relationship == ATOMIC:
        out.insert(path)
        return
    if not isinstance(value, dict):
        return
    fields, element = map_type.fields, map_type.element
    for key, item in value.items():
        child = (*path, PathElement.of_field(key))
        declared = fields.get(key)
        _walk(item, declared.type if declared is not None else element, child, out)
        if item is None or declared is None or (isinstance(item, dict) and not item):
            out.insert(child)


def _list(value: JSON, list_type: ListType, path: Path, out: Set) -> None:
    if list_type.relationship == ATOMIC:
        out.insert(path)
        return
    if not isinstance(value, list) or not value:
        return
    names: list[PathElement] = []
    for index, item in enumerate(value):
        try:
            names.append(list_element(list_type, item))
        except ElementError as error:
            raise TypedValueError([errors_at(path, f"element {index}: {error}")]) from None
    counts: dict[PathElement, int] = {}
    for pe in names:
        counts[pe] = counts.get(pe, 0) + 1
    element = list_type.element
    for pe, item in zip(names, value, strict=True):
        child = (*path, pe)
        if counts[pe] == 1:
            _walk(item, element, child, out)
        out.insert(child)


# --- the quick walk -------------------------------------------------------------------


def quick_field_set(value: JSON, atom: Atom) -> Set | None:
    """:func:`field_set` of a valid, plain value; None for anything else."""
    try:
        _, inside = _place(value, atom)
    except (Irregular, RecursionError):
        return None
    # The walk built frozen nodes; the result gets a top of its own.
    return Set() if inside is None else inside.copy()


def _place(value: Any, atom: Atom) -> tuple[bool, Set | None]:
    # (whether the place itself is a member, the set below it).
    part = part_of(atom, value)
    if part == NULL:
        part = whole_part(atom)
    if part == MAP:
        map_type: MapType = atom.map  # type: ignore[assignment]
        if map_type.relationship == ATOMIC:
            return True, None
        if type(value) is not dict:
            return False, None
        return False, _entries(value, map_type)
    if part == LIST:
        list_type: ListType = atom.list  # type: ignore[assignment]
        if list_type.relationship == ATOMIC:
            return True, None
        if list_type.relationship != ASSOCIATIVE:
            raise Irregular
        if type(value) is not list or not value:
            return False, None
        return False, _elements(value, list_type)
    return True, None


def _entries(value: dict[str, Any], map_type: MapType) -> Set | None:
    fields, element = map_type.fields, map_type.element
    members: set[PathElement] = set()
    children: dict[PathElement, Set] = {}
    for key, item in value.items():
        declared = fields.get(key)
        if declared is not None:
            atom = declared.type
        elif element is None:
            raise Irregular
        else:
            atom = element
        pe = field_element(key)
        if atom.map is None and atom.list is None:
            # A scalar: a member (when its type allows it).
            allowed = SCALAR_TYPES.get(atom.scalar or "")
            if allowed is None or (item is not None and type(item) not in allowed):
                raise Irregular
            members.add(pe)
            continue
        member, inside = _place(item, atom)
        if member or item is None or declared is None or (type(item) is dict and not item):
            members.add(pe)
        if inside is not None:
            children[pe] = inside
    return set_node(members, children, frozen=True) if members or children else None


def _elements(value: list[Any], list_type: ListType) -> Set | None:
    element = list_type.element
    members: set[PathElement] = set()
    children: dict[PathElement, Set] = {}
    for item in value:
        pe = quick_element(list_type, item)
        if pe in members:
            raise Irregular  # a repeated element: the general walk counts them
        members.add(pe)
        _, inside = _place(item, element)
        if inside is not None:
            children[pe] = inside
    return set_node(members, children, frozen=True)
