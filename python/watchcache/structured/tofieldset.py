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

Costs: one walk, O(size), each list element named once (SMD names them twice). Values are
expected to be valid for their type (callers validate first, as Kubernetes does); an element
that cannot be named, or a field the schema cannot type, raises :class:`TypedValueError`
instead of recording a meaningless path. Callers: :mod:`watchcache.structured.typed`.
"""

from __future__ import annotations

from watchcache.structured.fieldpath import Set
from watchcache.structured.pathelement import Path, PathElement
from watchcache.structured.schema import ATOMIC, Atom, ListType, MapType
from watchcache.structured.typedwalk import (
    ElementError,
    TypedValueError,
    deduce,
    errors_at,
    invalid_atom,
    list_element,
)
from watchcache.structured.value import JSON

__all__ = ["field_set"]


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
