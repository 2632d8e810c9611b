"""A manager's field set brought in line with a schema that changed since it was recorded:
structured-merge-diff's ``ReconcileFieldSetWithSchema``.

Design note
-----------
When a list or map that used to be granular becomes atomic (a CRD's schema gains
``x-kubernetes-list-type: atomic``), a manager's recorded paths below it no longer name
fields: the manager owns the whole value instead. The walk follows the recorded set along
the type (not the value): wherever the type is now atomic but the set has paths below that
place (the place is not simply a member), those paths are replaced by the place itself.
The opposite change (atomic to granular) needs nothing: the member stays, and owns the
whole value until the next write refines it. Maps without declared fields whose entries
are deduced (``x-kubernetes-preserve-unknown-fields`` without properties) are not
reconciled, as in SMD; fields the schema does not know are left alone.

Returns None when nothing changes, so callers keep the original set. A frozen (shared)
subtree that fits a type is marked so (``Set._fitted``): it never changes and fitting does
not depend on where it is, so the next walk of it along that type stops there; every write
reconciles every manager's set, and most of each is a subtree the previous write met.

Costs: O(size of the set) the first time, then O(what changed); the object is not read. A
schema whose atom allows nothing raises :class:`TypedValueError`. Callers:
:mod:`watchcache.structured.updater`.
"""

from __future__ import annotations

from typing import Final, TypeAlias

from watchcache.structured.fieldpath import Set
from watchcache.structured.pathelement import Path, PathElement
from watchcache.structured.schema import ATOMIC, Atom, MapType
from watchcache.structured.typedwalk import (
    TypedValueError,
    ValidationError,
    errors_at,
    invalid_atom,
)

__all__ = ["reconciled_field_set"]

_DEDUCED_NAME: Final = "__untyped_deduced_"
#: The kind of a field element (``PathElement`` is the tuple (kind, payload)).
_FIELD: Final = 0


def reconciled_field_set(fields: Set, atom: Atom) -> Set | None:
    """``fields`` adjusted to ``atom`` (the type of the object's root), or None if it
    already fits."""
    walk = _Reconcile(ordered=False)
    walk.node(fields, atom, None, False)
    if walk.errors:
        # The errors are listed in SMD's walk order (each node's elements sorted): walk
        # again in that order, which only a schema with an impossible type gets to.
        walk = _Reconcile(ordered=True)
        walk.node(fields, atom, None, False)
        raise TypedValueError(walk.errors)
    if walk.to_remove.is_empty() and walk.to_add.is_empty():
        return None
    return fields.recursive_difference(walk.to_remove).union(walk.to_add)


def _is_untyped_deduced_map(map_type: MapType) -> bool:
    element = map_type.element
    if map_type.fields or element is None:
        return False
    if element.name:
        return element.name == _DEDUCED_NAME
    return element.scalar == "untyped"


#: Where the walk is: None at the root, else (where its parent is, the element); a path
#: is made of it only for what is reported.
_Where: TypeAlias = "tuple[_Where, PathElement] | None"


def _path_of(where: _Where) -> Path:
    out: list[PathElement] = []
    while where is not None:
        where, pe = where
        out.append(pe)
    return tuple(reversed(out))


class _Reconcile:
    __slots__ = ("errors", "ordered", "replaced", "to_add", "to_remove")

    def __init__(self, ordered: bool) -> None:
        self.to_remove = Set()
        self.to_add = Set()
        self.errors: list[ValidationError] = []
        self.replaced = 0
        # Whether to visit each node's elements in order (only errors show the order).
        self.ordered = ordered

    def replace(self, where: _Where) -> None:
        path = _path_of(where)
        self.to_remove.insert(path)
        self.to_add.insert(path)
        self.replaced += 1

    def node(self, fields: Set | None, atom: Atom | None, where: _Where, is_atomic: bool) -> None:
        if fields is None:
            self.fit(fields, atom, where, is_atomic)
            return
        if atom is not None and fields._fitted is atom:
            return  # this frozen subtree was walked along this type before: it fits
        replaced, errors = self.replaced, len(self.errors)
        self.fit(fields, atom, where, is_atomic)
        if fields._frozen and self.replaced == replaced and len(self.errors) == errors:
            # A frozen subtree never changes, and whether it fits a type does not depend
            # on where it is: the next write's walk stops here.
            fields._fitted = atom

    def fit(self, fields: Set | None, atom: Atom | None, where: _Where, is_atomic: bool) -> None:
        # SMD's handleAtom on the whole atom: map first, then scalar, then list.
        if atom is None or (atom.map is None and atom.scalar is None and atom.list is None):
            self.errors.append(errors_at(_path_of(where), invalid_atom(atom)))
            return
        if atom.map is not None:
            map_type = atom.map
            if _is_untyped_deduced_map(map_type):
                return
            if not is_atomic and map_type.relationship == ATOMIC:
                if fields is not None and not fields.is_empty():
                    self.replace(where)
                return
            if fields is not None:
                self.map_children(fields, map_type, where)
            return
        if atom.scalar is not None:
            return
        list_type = atom.list
        assert list_type is not None
        if not is_atomic and list_type.relationship == ATOMIC:
            self.replace(where)
            return
        if fields is not None:
            self.list_children(fields, list_type.element, where)

    def map_children(self, fields: Set, map_type: MapType, where: _Where) -> None:
        members, below = fields._members, fields._children
        declared, element = map_type.fields, map_type.element
        for member in (False, True):
            elements = members if member else [pe for pe in below if pe not in members]
            for pe in sorted(elements) if self.ordered else elements:
                # The entry's type; an entry the map has no type for is left alone.
                found = declared.get(pe[1]) if pe[0] == _FIELD else None
                if found is not None:
                    atom = found.type
                elif element is not None:
                    atom = element
                else:
                    continue
                child = below.get(pe) if member else below[pe]
                self.node(child, atom, (where, pe), member and child is None)

    def list_children(self, fields: Set, element: Atom, where: _Where) -> None:
        members, below = fields._members, fields._children
        for member in (False, True):
            elements = members if member else [pe for pe in below if pe not in members]
            for pe in sorted(elements) if self.ordered else elements:
                child = below.get(pe) if member else below[pe]
                self.node(child, element, (where, pe), member and child is None)
