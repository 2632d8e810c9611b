"""A value without (or with only) the items of a field set: structured-merge-diff's
``TypedValue.RemoveItems`` and ``ExtractItems``, with which apply prunes what an applier
stopped applying.

Design note
-----------
:func:`removed_items` drops every map entry and associative list element whose path is a
member of the set, and walks into those with paths below them; :func:`extracted_items`
keeps only those. SMD's exact behaviour is kept, quirks included, because pruning results
(what a second apply leaves in an object) depend on them:

* removing below an entry keeps the entry, even when nothing is left in it: it becomes
  null (removing ``.a.b`` from ``{"a": {"b": 1}}`` gives ``{"a": null}``); a list element
  emptied that way becomes a null element. Pruning avoids this by also removing the named
  parents (``ensure_named_fields_are_members``);
* atomic lists and maps and scalars are never entered: removing keeps them whole unless
  their own path is a member; extracting keeps them whole;
* extracting an entry whose own path is a member re-walks its value with the *whole* set
  (not the part below the entry), as SMD does;
* a container that ends up empty is null; an empty or null container is kept as it is when
  extracting, and dropped (null) when removing.

Values are expected to be valid for their type; an associative list element that cannot be
named raises :class:`TypedValueError` (SMD would carry on with a meaningless name). Costs:
one walk of the parts of the value the set reaches, plus O(size of what is copied). The
input is not modified; the result shares the subtrees it keeps whole. Callers:
:mod:`watchcache.structured.typed`, :mod:`watchcache.structured.updater`.
"""

from __future__ import annotations

from watchcache.structured.fieldpath import Set
from watchcache.structured.pathelement import PathElement
from watchcache.structured.schema import ATOMIC, Atom, ListType, MapType
from watchcache.structured.typedwalk import (
    ElementError,
    TypedValueError,
    ValidationError,
    deduce,
    list_element,
)
from watchcache.structured.value import JSON

__all__ = ["extracted_items", "removed_items"]


def removed_items(value: JSON, atom: Atom, items: Set) -> JSON:
    """``value`` without the entries and elements ``items`` names."""
    return _walk(value, atom, items, False)


def extracted_items(value: JSON, atom: Atom, items: Set) -> JSON:
    """Only the entries and elements of ``value`` that ``items`` names (and what leads to
    them)."""
    return _walk(value, atom, items, True)


def _walk(value: JSON, atom: Atom | None, items: Set, extract: bool) -> JSON:
    scalar, list_type, map_type = deduce(atom, value)
    if map_type is not None:
        return _map(value, map_type, items, extract)
    if scalar is not None:
        return value
    if list_type is not None:
        return _list(value, list_type, items, extract)
    return None


def _map(value: JSON, map_type: MapType, items: Set, extract: bool) -> JSON:
    if not isinstance(value, dict):
        return None
    if not value or map_type.relationship == ATOMIC:
        return value if extract else None
    fields, element = map_type.fields, map_type.element
    out: dict[str, JSON] = {}
    for key, item in value.items():
        declared = fields.get(key)
        item_atom = declared.type if declared is not None else element
        pe = PathElement.of_field(key)
        if items.has((pe,)):
            if extract:
                out[key] = _walk(item, item_atom, items, extract)
            continue
        below = items._subtree(pe)
        if below is not None:
            out[key] = _walk(item, item_atom, below, extract)
        elif not extract:
            out[key] = item
    return out or None


def _list(value: JSON, list_type: ListType, items: Set, extract: bool) -> JSON:
    if not isinstance(value, list):
        return None
    if not value or list_type.relationship == ATOMIC:
        return value if extract else None
    element = list_type.element
    out: list[JSON] = []
    for position, item in enumerate(value):
        try:
            pe = list_element(list_type, item)
        except ElementError as error:
            raise TypedValueError([ValidationError("", f"element {position}: {error}")]) from None
        exact = items.has((pe,))
        below = items._subtree(pe)
        if exact and not extract:
            continue
        if extract and not exact and below is None:
            continue
        out.append(item if below is None else _walk(item, element, below, extract))
    return out or None
