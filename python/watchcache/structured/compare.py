"""What changed between two values of one type: structured-merge-diff's
``TypedValue.Compare``, the basis of ownership on every write.

Design note
-----------
:func:`comparison` walks both values together and sorts each changed place into
``added`` (only the new value has it), ``removed`` (only the old one) or ``modified``
(both, different), with SMD's granularity:

* scalars, atomic lists and atomic maps compare whole (``value.Equals``: ``1`` equals
  ``1.0``) and are reported at their own path; a container is also reported, at its path,
  when it appears or disappears (besides what it holds);
* an empty or null container against an empty or null one compares as a leaf (so ``{}``
  → ``null`` is a modification);
* associative list elements are matched by their names, not positions; an element that
  occurs more than once on a side is compared as a whole (both sides duplicated:
  modified if the runs differ; duplicates appearing or disappearing: the element is added or
  removed, and the single element on the other side is walked as removed or added);
* where the two values take different parts of an atom (an untyped field that was a map
  and is now a string), both parts are walked, as SMD does: the old map's entries are
  removed and the field itself is modified.

A scalar that is wrong for its type on both sides, or a list element that cannot be named,
is a :class:`TypedValueError` (SMD's compare fails on them too). Costs: one walk of both
values, O(size), each list element named once. Callers: :mod:`watchcache.structured.typed`,
:mod:`watchcache.structured.updater`.
"""

from __future__ import annotations

from dataclasses import dataclass

from watchcache.structured.fieldpath import Set
from watchcache.structured.pathelement import Path, PathElement
from watchcache.structured.schema import ATOMIC, Atom, ListType, MapType, ScalarKind
from watchcache.structured.typedwalk import (
    MISSING,
    Effective,
    ElementError,
    ValidationError,
    deduce,
    errors_at,
    invalid_atom,
    list_element,
    same_effective,
    scalar_error,
)
from watchcache.structured.value import JSON, values_equal

__all__ = ["Comparison", "comparison_of"]


@dataclass(frozen=True, slots=True)
class Comparison:
    """The fields ``rhs`` removed, modified and added relative to ``lhs``."""

    removed: Set
    modified: Set
    added: Set

    def is_same(self) -> bool:
        """Nothing changed."""
        return self.removed.is_empty() and self.modified.is_empty() and self.added.is_empty()

    def excluding(self, fields: Set | None) -> Comparison:
        """This comparison without ``fields`` and everything below them (SMD's
        ``ExcludeFields``)."""
        if fields is None or fields.is_empty():
            return self
        return Comparison(
            self.removed.recursive_difference(fields),
            self.modified.recursive_difference(fields),
            self.added.recursive_difference(fields),
        )

    def __str__(self) -> str:
        out = []
        for title, fields in (
            ("Modified", self.modified),
            ("Added", self.added),
            ("Removed", self.removed),
        ):
            if fields:
                out.append(f"- {title} Fields:\n{fields}\n")
        return "".join(out)


def comparison_of(lhs: JSON, rhs: JSON, atom: Atom) -> tuple[Comparison, list[ValidationError]]:
    """The comparison of ``lhs`` and ``rhs`` as ``atom``, and the problems met on the way."""
    walk = _Compare()
    walk.node(lhs, rhs, atom, ())
    return Comparison(walk.removed, walk.modified, walk.added), walk.errors


class _Node:
    # One place being compared: SMD's compareWalker minus what every node shares.
    __slots__ = ("in_leaf", "lhs", "path", "rhs")

    def __init__(self, lhs: JSON, rhs: JSON, path: Path) -> None:
        self.lhs = lhs
        self.rhs = rhs
        self.path = path
        self.in_leaf = False


class _Compare:
    __slots__ = ("added", "errors", "modified", "removed")

    def __init__(self) -> None:
        self.removed = Set()
        self.modified = Set()
        self.added = Set()
        self.errors: list[ValidationError] = []

    def node(self, lhs: JSON, rhs: JSON, atom: Atom | None, path: Path) -> None:
        on_lhs, on_rhs = deduce(atom, lhs), deduce(atom, rhs)
        node = _Node(lhs, rhs, path)
        if rhs is MISSING:
            self.handle(on_lhs, atom, node)
        elif lhs is MISSING or same_effective(on_lhs, on_rhs):
            self.handle(on_rhs, atom, node)
        else:
            # SMD walks the old kind on a copy (its leaf state is thrown away) and the
            # new kind on the node itself; both write into the same comparison.
            self.handle(on_lhs, atom, _Node(lhs, rhs, path))
            self.handle(on_rhs, atom, node)
        if not node.in_leaf:
            if lhs is MISSING:
                self.added.insert(path)
            elif rhs is MISSING:
                self.removed.insert(path)

    def handle(self, effective: Effective, atom: Atom | None, node: _Node) -> None:
        scalar, list_type, map_type = effective
        if map_type is not None:
            self.map_node(map_type, node)
        elif scalar is not None:
            self.scalar_node(scalar, node)
        elif list_type is not None:
            self.list_node(list_type, node)
        else:
            self.errors.append(errors_at(node.path, invalid_atom(atom)))

    def leaf(self, node: _Node) -> None:
        if node.in_leaf:
            return
        node.in_leaf = True
        if node.lhs is MISSING:
            self.added.insert(node.path)
        elif node.rhs is MISSING:
            self.removed.insert(node.path)
        elif not values_equal(node.rhs, node.lhs):
            self.modified.insert(node.path)

    def scalar_node(self, kind: ScalarKind, node: _Node) -> None:
        on_lhs = scalar_error(kind, node.lhs, "lhs: ")
        on_rhs = scalar_error(kind, node.rhs, "rhs: ")
        if on_lhs is not None and on_rhs is not None:
            self.errors.append(errors_at(node.path, on_lhs))
            self.errors.append(errors_at(node.path, on_rhs))
            return
        self.leaf(node)

    def map_node(self, map_type: MapType, node: _Node) -> None:
        lhs = node.lhs if isinstance(node.lhs, dict) else None
        rhs = node.rhs if isinstance(node.rhs, dict) else None
        if map_type.relationship == ATOMIC or (not lhs and not rhs):
            self.leaf(node)
            return
        fields, element = map_type.fields, map_type.element
        left: dict[str, JSON] = lhs or {}
        right: dict[str, JSON] = rhs or {}
        for key in (*left, *(k for k in right if k not in left)):
            declared = fields.get(key)
            self.node(
                left.get(key, MISSING),
                right.get(key, MISSING),
                declared.type if declared is not None else element,
                (*node.path, PathElement.of_field(key)),
            )

    def list_node(self, list_type: ListType, node: _Node) -> None:
        lhs = node.lhs if isinstance(node.lhs, list) else None
        rhs = node.rhs if isinstance(node.rhs, list) else None
        if list_type.relationship == ATOMIC or (not lhs and not rhs):
            self.leaf(node)
            return
        path = node.path
        left = self.index(list_type, lhs or [], path)
        right = self.index(list_type, rhs or [], path)
        order = list(left)
        order.extend(pe for pe in right if pe not in left)
        element = list_type.element
        for pe in order:
            old, new = left.get(pe, []), right.get(pe, [])
            child = (*path, pe)
            if len(old) <= 1 and len(new) <= 1:
                self.node(old[0] if old else MISSING, new[0] if new else MISSING, element, child)
            elif len(old) >= 2 and len(new) >= 2:
                if len(old) != len(new) or not all(map(values_equal, old, new)):
                    self.modified.insert(child)
            elif len(old) >= 2:
                if new:
                    self.node(MISSING, new[0], element, child)
                self.removed.insert(child)
            else:
                if old:
                    self.node(old[0], MISSING, element, child)
                self.added.insert(child)

    def index(
        self, list_type: ListType, items: list[JSON], path: Path
    ) -> dict[PathElement, list[JSON]]:
        # Each name -> its elements in order (several when duplicated); dict order is the
        # order names first appear.
        out: dict[PathElement, list[JSON]] = {}
        for position, item in enumerate(items):
            try:
                pe = list_element(list_type, item)
            except ElementError as error:
                self.errors.append(errors_at(path, f"element {position}: {error}"))
                continue
            run = out.get(pe)
            if run is None:
                out[pe] = [item]
            else:
                run.append(item)
        return out
