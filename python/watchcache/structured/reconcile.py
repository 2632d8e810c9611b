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

Returns None when nothing changes, so callers keep the original set. Costs: O(size of the
set); the object is not read. A schema whose atom allows nothing raises
:class:`TypedValueError`. Callers: :mod:`watchcache.structured.updater`.
"""

from __future__ import annotations

from collections.abc import Callable
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
#: Stands for "the map's type has no type for this entry": such entries are left alone.
_UNKNOWN: Final = Atom(name="__unknown_field_")
_TypeOf: TypeAlias = Callable[[PathElement], Atom | None]


def reconciled_field_set(fields: Set, atom: Atom) -> Set | None:
    """``fields`` adjusted to ``atom`` (the type of the object's root), or None if it
    already fits."""
    walk = _Reconcile()
    walk.node(fields, atom, (), False)
    if walk.errors:
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


class _Reconcile:
    __slots__ = ("errors", "to_add", "to_remove")

    def __init__(self) -> None:
        self.to_remove = Set()
        self.to_add = Set()
        self.errors: list[ValidationError] = []

    def replace(self, path: Path) -> None:
        self.to_remove.insert(path)
        self.to_add.insert(path)

    def node(self, fields: Set | None, atom: Atom | None, path: Path, is_atomic: bool) -> None:
        # SMD's handleAtom on the whole atom: map first, then scalar, then list.
        if atom is None or (atom.map is None and atom.scalar is None and atom.list is None):
            self.errors.append(errors_at(path, invalid_atom(atom)))
            return
        if atom.map is not None:
            map_type = atom.map
            if _is_untyped_deduced_map(map_type):
                return
            if not is_atomic and map_type.relationship == ATOMIC:
                if fields is not None and not fields.is_empty():
                    self.replace(path)
                return
            if fields is not None:
                self.children(fields, path, lambda pe: _field_type(map_type, pe))
            return
        if atom.scalar is not None:
            return
        list_type = atom.list
        assert list_type is not None
        if not is_atomic and list_type.relationship == ATOMIC:
            self.replace(path)
            return
        if fields is not None:
            self.children(fields, path, lambda pe: list_type.element)

    def children(self, fields: Set, path: Path, type_of: _TypeOf) -> None:
        members = fields._members
        below = fields._children
        for pe in sorted(below):
            if pe not in members:
                self.child(pe, below[pe], type_of, path, False)
        for pe in sorted(members):
            self.child(pe, below.get(pe), type_of, path, True)

    def child(
        self, pe: PathElement, fields: Set | None, type_of: _TypeOf, path: Path, member: bool
    ) -> None:
        atom = type_of(pe)
        if atom is _UNKNOWN:
            return
        self.node(fields, atom, (*path, pe), member and fields is None)


def _field_type(map_type: MapType, pe: PathElement) -> Atom | None:
    name = pe.field
    if name is not None:
        declared = map_type.fields.get(name)
        if declared is not None:
            return declared.type
    return map_type.element if map_type.element is not None else _UNKNOWN
