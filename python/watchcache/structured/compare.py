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
is a :class:`TypedValueError` (SMD's compare fails on them too).

**Quick walk.** :func:`quick_comparison` is the comparison of two values that are both
valid for the type (as validation with duplicates allowed sees them) and plain (see
:mod:`~watchcache.structured.typedwalk`; no duplicate list elements, each value of the
kind its type allows); it checks that as it goes, inside atomic values too, and answers
None for anything else. So one walk both validates a write's old and new object and
compares them, where Kubernetes validates each and then compares. It builds the three
sets bottom-up, frozen (a changed child's subtree is attached under its element; nothing
is built for what did not change) instead of inserting paths from the root. Two things
make the unchanged majority of an update cheap: a container found to be the same JSON on
both sides (Python's equality in C, then the texts, which tell ``true`` from ``1`` where
that equality does not) is not walked, only validated on the new side (an unchanged
value is valid or not alike on both); and with ``trusted`` (values the quick merge built
from validated ones) not even that. A place only one side has is walked once, every place
under it a member of that side's set.

Costs: one walk of both values, O(size), each list element named once; for what did not
change, a C comparison and one walk of the new side. Callers:
:mod:`watchcache.structured.typed`, :mod:`watchcache.structured.updater`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from watchcache.structured.fieldpath import Set, set_node
from watchcache.structured.pathelement import Path, PathElement, field_element
from watchcache.structured.schema import ASSOCIATIVE, ATOMIC, Atom, ListType, MapType, ScalarKind
from watchcache.structured.typedwalk import (
    LIST,
    MAP,
    MISSING,
    NULL,
    SCALAR_TYPES,
    Effective,
    ElementError,
    Irregular,
    ValidationError,
    deduce,
    errors_at,
    invalid_atom,
    list_element,
    pair_part,
    part_of,
    quick_element,
    same_effective,
    scalar_error,
    whole_part,
)
from watchcache.structured.validate import is_valid, is_valid_map
from watchcache.structured.value import JSON, values_equal

__all__ = ["Comparison", "comparison_of", "quick_comparison"]


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


# --- the quick walk -------------------------------------------------------------------

#: What a place contributes to its parent: (which set its own element joins: 0 none, or
#: _REMOVED/_MODIFIED/_ADDED; then the removed, modified and added subtrees below it).
_Outcome = tuple[int, Set | None, Set | None, Set | None]
_REMOVED, _MODIFIED, _ADDED = 1, 2, 3
_SAME: Final[_Outcome] = (0, None, None, None)
_REMOVED_LEAF: Final[_Outcome] = (_REMOVED, None, None, None)
_MODIFIED_LEAF: Final[_Outcome] = (_MODIFIED, None, None, None)
_ADDED_LEAF: Final[_Outcome] = (_ADDED, None, None, None)
_NUMBERS: Final = frozenset({int, float})


def quick_comparison(
    lhs: JSON, rhs: JSON, atom: Atom, *, trusted: bool = False
) -> Comparison | None:
    """:func:`comparison_of` for values both valid for ``atom`` (duplicates allowed) and
    plain; None when they are not (run validation and :func:`comparison_of` then).
    ``trusted``: the caller knows both are valid and plain (values a quick walk built
    from such values), so parts that did not change are not walked at all."""
    try:
        _, removed, modified, added = _place(lhs, rhs, atom, trusted)
    except (Irregular, RecursionError):
        return None
    # The walk built frozen nodes; the results get tops of their own, as any operation's.
    return Comparison(_top(removed), _top(modified), _top(added))


def _top(found: Set | None) -> Set:
    return Set() if found is None else found.copy()


def _place(lhs: Any, rhs: Any, atom: Atom, trusted: bool) -> _Outcome:
    # SMD's compare of one place (either side may be MISSING, not both).
    if rhs is MISSING:
        below = _one_side(lhs, atom)
        return _REMOVED_LEAF if below is None else (_REMOVED, below, None, None)
    if lhs is MISSING:
        below = _one_side(rhs, atom)
        return _ADDED_LEAF if below is None else (_ADDED, None, None, below)
    kind = type(lhs)
    if (kind is dict or kind is list) and type(rhs) is kind and _unchanged(lhs, rhs, atom, trusted):
        return _SAME
    part = pair_part(atom, lhs, rhs)
    if part == MAP:
        return _map_place(lhs, rhs, atom.map, trusted)  # type: ignore[arg-type]
    if part == LIST:
        return _list_place(lhs, rhs, atom.list, trusted)  # type: ignore[arg-type]
    return _leaf(lhs, rhs)


def _unchanged(lhs: Any, rhs: Any, atom: Atom, trusted: bool) -> bool:
    """Whether two containers are the same JSON (then nothing below changed), checked in C:
    Python's equality, then the texts (which tell ``true`` from ``1``, where Python's
    equality does not). The new side is still validated, unless ``trusted`` (the old
    side is then the same JSON, so valid alike)."""
    if lhs is not rhs:
        try:
            if lhs != rhs or json.dumps(lhs) != json.dumps(rhs):
                return False
        except (TypeError, ValueError):
            return False  # not JSON: the walk finds what is wrong
    if not trusted and not is_valid(rhs, atom, allow_duplicates=True):
        raise Irregular
    return True


def _one_side(value: Any, atom: Atom) -> Set | None:
    """What is below a place only one side has (the other is MISSING): every place under
    it appears or disappears with it, so each is a member, in the set of that side."""
    part = part_of(atom, value)
    if part == NULL:
        part = whole_part(atom)
    if part == MAP:
        map_type: MapType = atom.map  # type: ignore[assignment]
        if map_type.relationship == ATOMIC:
            if value and not is_valid_map(value, map_type, allow_duplicates=True):
                raise Irregular
            return None
        return _one_side_entries(value, map_type) if value else None
    if part == LIST:
        list_type: ListType = atom.list  # type: ignore[assignment]
        element = list_type.element
        if list_type.relationship == ATOMIC:
            if value and not all(is_valid(i, element, allow_duplicates=True) for i in value):
                raise Irregular
            return None
        if list_type.relationship != ASSOCIATIVE:
            raise Irregular
        if not value:
            return None
        members: set[PathElement] = set()
        children: dict[PathElement, Set] = {}
        for item in value:
            pe = quick_element(list_type, item)
            if pe in members:
                raise Irregular
            members.add(pe)
            below = _one_side(item, element)
            if below is not None:
                children[pe] = below
        return set_node(members, children, frozen=True)
    return None


def _one_side_entries(value: dict[str, Any], map_type: MapType) -> Set:
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
        members.add(pe)
        if atom.map is None and atom.list is None:
            allowed = SCALAR_TYPES.get(atom.scalar or "")
            if allowed is None or (item is not None and type(item) not in allowed):
                raise Irregular
            continue
        below = _one_side(item, atom)
        if below is not None:
            children[pe] = below
    return set_node(members, children, frozen=True)


def _leaf(lhs: Any, rhs: Any) -> _Outcome:
    if lhs is MISSING:
        return _ADDED_LEAF
    if rhs is MISSING:
        return _REMOVED_LEAF
    return _SAME if values_equal(rhs, lhs) else _MODIFIED_LEAF


def _container(lhs: Any, rhs: Any, below: tuple[Set | None, Set | None, Set | None]) -> _Outcome:
    # A container walked entry by entry: its own element joins added or removed when it
    # appears or disappears, besides what changed inside.
    flag = _ADDED if lhs is MISSING else _REMOVED if rhs is MISSING else 0
    removed, modified, added = below
    if not flag and removed is None and modified is None and added is None:
        return _SAME
    for built in below:
        if built is not None:
            built._frozen = True  # complete: from now on only another node's subtree
    return (flag, removed, modified, added)


def _map_place(lhs: Any, rhs: Any, map_type: MapType, trusted: bool) -> _Outcome:
    left = lhs if type(lhs) is dict else None
    right = rhs if type(rhs) is dict else None
    if map_type.relationship == ATOMIC:
        for side in (left, right):
            if side and not is_valid_map(side, map_type, allow_duplicates=True):
                raise Irregular
        return _leaf(lhs, rhs)
    if not left and not right:
        return _leaf(lhs, rhs)
    return _container(lhs, rhs, _entries(left or {}, right or {}, map_type, trusted))


def _entries(
    left: dict[str, Any], right: dict[str, Any], map_type: MapType, trusted: bool
) -> tuple[Set | None, Set | None, Set | None]:
    fields, element = map_type.fields, map_type.element
    below: list[Set | None] = [None, None, None]
    for key in (*left, *(k for k in right if k not in left)) if right else left:
        declared = fields.get(key)
        if declared is not None:
            atom = declared.type
        elif element is None:
            raise Irregular
        else:
            atom = element
        old = left.get(key, MISSING)
        new = right.get(key, MISSING)
        if atom.map is not None or atom.list is not None:
            outcome = _place(old, new, atom, trusted)
            if outcome is not _SAME:
                _attach(below, field_element(key), outcome)
            continue
        # A scalar (most fields): checked and compared here rather than by calls.
        allowed = SCALAR_TYPES.get(atom.scalar or "")
        if allowed is None:
            raise Irregular
        if old is not MISSING and old is not None and type(old) not in allowed:
            raise Irregular
        if new is MISSING:
            flag = _REMOVED
        elif new is not None and type(new) not in allowed:
            raise Irregular
        elif old is MISSING:
            flag = _ADDED
        elif old is new or (
            (type(old) is type(new) or (type(old) in _NUMBERS and type(new) in _NUMBERS))
            and old == new
        ):
            continue
        else:
            flag = _MODIFIED
        node = below[flag - 1]
        if node is None:
            node = below[flag - 1] = set_node(set(), {})
        node._members.add(field_element(key))
    return below[0], below[1], below[2]


def _attach(below: list[Set | None], pe: PathElement, outcome: _Outcome) -> None:
    flag, *subtrees = outcome
    if flag:
        node = below[flag - 1]
        if node is None:
            node = below[flag - 1] = set_node(set(), {})
        node._members.add(pe)
    for which, subtree in enumerate(subtrees):
        if subtree is not None:
            node = below[which]
            if node is None:
                node = below[which] = set_node(set(), {})
            node._children[pe] = subtree


def _list_place(lhs: Any, rhs: Any, list_type: ListType, trusted: bool) -> _Outcome:
    left = lhs if type(lhs) is list else None
    right = rhs if type(rhs) is list else None
    relationship = list_type.relationship
    if relationship == ATOMIC:
        element = list_type.element
        for side in (left, right):
            if side and not all(is_valid(item, element, allow_duplicates=True) for item in side):
                raise Irregular
        return _leaf(lhs, rhs)
    if relationship != ASSOCIATIVE:
        raise Irregular  # SMD names no element of it: an error the general walk reports
    if not left and not right:
        return _leaf(lhs, rhs)
    old_items = _quick_index(list_type, left or [])
    new_items = _quick_index(list_type, right or [])
    element = list_type.element
    below: list[Set | None] = [None, None, None]
    for pe, old in old_items.items():
        outcome = _place(old, new_items.get(pe, MISSING), element, trusted)
        if outcome is not _SAME:
            _attach(below, pe, outcome)
    for pe, new in new_items.items():
        if pe not in old_items:
            outcome = _place(MISSING, new, element, trusted)
            if outcome is not _SAME:
                _attach(below, pe, outcome)
    return _container(lhs, rhs, (below[0], below[1], below[2]))


def _quick_index(list_type: ListType, items: list[Any]) -> dict[PathElement, Any]:
    # Name -> element; a repeated name is irregular (the general walk compares runs).
    out: dict[PathElement, Any] = {}
    for item in items:
        pe = quick_element(list_type, item)
        if pe in out:
            raise Irregular
        out[pe] = item
    return out
