"""Sets of field paths (what a manager owns), the managers' versioned sets, and their
FieldsV1 form in ``metadata.managedFields``.

Design note
-----------
A :class:`Set` is structured-merge-diff's ``fieldpath.Set``: a tree whose nodes hold
*members* (paths that end here) and *children* (subtrees under a path element). A path is
a member only if inserted: ``.spec.replicas`` does not make ``.spec`` a member. The set
algebra is SMD's, including its asymmetries, which ownership depends on:

* :meth:`Set.difference` removes members only: ``{a.b} - {a} = {a.b}`` (a parent does not
  take its children with it); :meth:`Set.recursive_difference` removes a member's whole
  subtree (how ignored fields and schema reconciliation cut).
* :meth:`Set.leaves` drops members that also have children.
* :meth:`Set.ensure_named_fields_are_members` adds, for the given type, the struct fields
  that only appear as parents (pruning must see ``.spec`` as owned when ``.spec.x`` is).

Invariant: no child subtree is empty (SMD never keeps one either), so structural equality is
equality of path sets. Nodes are Python sets and dicts; order is applied when it shows:
iteration (SMD's preorder: a node's members in order, then each child subtree in order) and
FieldsV1 output. Operations return new sets sharing nothing with their operands, so
:meth:`Set.insert` on a result cannot change an operand.

**FieldsV1** (:func:`fields_v1_from_set`, :func:`set_from_fields_v1`) is SMD's
``Set.ToJSON``/``FromJSON`` byte for byte: members and children merged in element order, a
node that is both member and parent written ``{".":{},...}``, keys written by
json-iterator's plain string writer around :func:`serialize_path_element`'s text. Reading
accepts what SMD accepts (whitespace, ``null`` for an empty set or an empty node, unknown
element kinds dropped, elements in any order, a repeated key replacing the earlier subtree
as SMD's reader does) and refuses the rest with :class:`FieldsV1Error`.

Costs: insert and has are O(depth); union, intersection and the differences are linear in
the sets' sizes; iteration and FieldsV1 sort each node once (O(n log n)). A Set is not
thread-safe while it is being built; treat it as a value once shared. Callers: the typed
walkers, :mod:`watchcache.structured.updater`, ``registry.managed_fields``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from watchcache.structured.pathelement import (
    FieldsV1Error,
    Path,
    PathElement,
    deserialize_path_element,
    path_string,
    serialize_path_element,
)
from watchcache.structured.schema import Atom
from watchcache.structured.value import json_string

__all__ = [
    "FieldsV1Error",
    "ManagedFields",
    "Path",
    "PathElement",
    "Set",
    "VersionedSet",
    "fields_v1_from_set",
    "path_string",
    "set_from_fields_v1",
]


class Set:
    """A set of field paths (SMD's ``fieldpath.Set``). ``Set(paths)`` inserts each path."""

    __slots__ = ("_children", "_members")

    def __init__(self, paths: Iterable[Path] = ()) -> None:
        self._members: set[PathElement] = set()
        self._children: dict[PathElement, Set] = {}
        for path in paths:
            self.insert(path)

    # --- building and reading ---------------------------------------------------------

    def insert(self, path: Path) -> None:
        """Add ``path`` (not its parents). The empty path (the whole object) is never
        tracked, as in SMD."""
        if not path:
            return
        node = self
        for pe in path[:-1]:
            child = node._children.get(pe)
            if child is None:
                child = node._children[pe] = Set()
            node = child
        node._members.add(path[-1])

    def has(self, path: Path) -> bool:
        """Whether ``path`` is a member (the empty path never is)."""
        if not path:
            return False
        node: Set | None = self
        for pe in path[:-1]:
            node = node._children.get(pe)  # type: ignore[union-attr]
            if node is None:
                return False
        return path[-1] in node._members  # type: ignore[union-attr]

    def __contains__(self, path: object) -> bool:
        return isinstance(path, tuple) and self.has(path)

    def is_empty(self) -> bool:
        """No member anywhere."""
        return not self._members and not self._children

    def __bool__(self) -> bool:
        return not self.is_empty()

    def __len__(self) -> int:
        return len(self._members) + sum(len(child) for child in self._children.values())

    def __iter__(self) -> Iterator[Path]:
        """The member paths in SMD's order (preorder: a node's members, then each child
        subtree, each in element order)."""
        return self._iterate(())

    def _iterate(self, prefix: Path) -> Iterator[Path]:
        for pe in sorted(self._members):
            yield (*prefix, pe)
        for pe in sorted(self._children):
            yield from self._children[pe]._iterate((*prefix, pe))

    def members(self) -> frozenset[PathElement]:
        """The elements that are members at this node."""
        return frozenset(self._members)

    def children(self) -> dict[PathElement, Set]:
        """The child subtrees of this node (copies)."""
        return {pe: child.copy() for pe, child in self._children.items()}

    def with_prefix(self, pe: PathElement) -> Set:
        """The paths under ``pe``, without it (a copy; empty when there are none)."""
        child = self._children.get(pe)
        return Set() if child is None else child.copy()

    def _subtree(self, pe: PathElement) -> Set | None:
        # with_prefix without the copy, for the walkers that only read.
        return self._children.get(pe)

    def copy(self) -> Set:
        """A deep copy (path elements are immutable and shared)."""
        out = Set()
        out._members = set(self._members)
        out._children = {pe: child.copy() for pe, child in self._children.items()}
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Set):
            return NotImplemented
        return self._members == other._members and self._children == other._children

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return "\n".join(path_string(p) for p in self)

    def __repr__(self) -> str:
        return "Set([" + ", ".join(repr(path_string(p)) for p in self) + "])"

    # --- algebra ----------------------------------------------------------------------

    def union(self, other: Set) -> Set:
        """Paths in either set."""
        out = Set()
        out._members = self._members | other._members
        children = out._children
        for pe, child in self._children.items():
            theirs = other._children.get(pe)
            children[pe] = child.copy() if theirs is None else child.union(theirs)
        for pe, theirs in other._children.items():
            if pe not in children:
                children[pe] = theirs.copy()
        return out

    def intersection(self, other: Set) -> Set:
        """Paths in both sets."""
        out = Set()
        out._members = self._members & other._members
        for pe, child in self._children.items():
            theirs = other._children.get(pe)
            if theirs is not None:
                common = child.intersection(theirs)
                if common:
                    out._children[pe] = common
        return out

    def difference(self, other: Set) -> Set:
        """Paths of this set that are not members of ``other``. A member of ``other``
        does not remove this set's paths below it (SMD's ``Difference``)."""
        out = Set()
        out._members = self._members - other._members
        for pe, child in self._children.items():
            theirs = other._children.get(pe)
            if theirs is None:
                out._children[pe] = child.copy()
            else:
                rest = child.difference(theirs)
                if rest:
                    out._children[pe] = rest
        return out

    def recursive_difference(self, other: Set) -> Set:
        """:meth:`difference`, where a member of ``other`` also removes every path below
        it (SMD's ``RecursiveDifference``)."""
        out = Set()
        out._members = self._members - other._members
        for pe, child in self._children.items():
            if pe in other._members:
                continue
            theirs = other._children.get(pe)
            if theirs is None:
                out._children[pe] = child.copy()
            else:
                rest = child.recursive_difference(theirs)
                if rest:
                    out._children[pe] = rest
        return out

    def leaves(self) -> Set:
        """The members that have no members below them."""
        out = Set()
        out._members = {pe for pe in self._members if pe not in self._children}
        out._children = {pe: child.leaves() for pe, child in self._children.items()}
        return out

    def ensure_named_fields_are_members(self, atom: Atom | None) -> Set:
        """This set plus every struct field of ``atom`` (the type of the set's root) that
        has paths below it: SMD's ``EnsureNamedFieldsAreMembers``. Map entries that are
        not declared fields and list elements are not added."""
        out = Set()
        out._members = set(self._members)
        map_type = atom.map if atom is not None else None
        list_type = atom.list if atom is not None else None
        for pe, child in self._children.items():
            child_atom: Atom | None = None
            name = pe.field
            if name is not None and map_type is not None:
                declared = map_type.fields.get(name)
                if declared is not None:
                    out._members.add(pe)
                    child_atom = declared.type
                else:
                    child_atom = map_type.element
            elif pe.kind == "key" and list_type is not None:
                child_atom = list_type.element
            out._children[pe] = child.ensure_named_fields_are_members(child_atom)
        return out


@dataclass(frozen=True, slots=True)
class VersionedSet:
    """What one manager owns, at which API version, and whether by apply."""

    set: Set
    api_version: str
    applied: bool


#: Manager id (opaque) -> what it owns. SMD's ``fieldpath.ManagedFields``.
ManagedFields: TypeAlias = dict[str, VersionedSet]


# --- FieldsV1 -------------------------------------------------------------------------


def fields_v1_from_set(s: Set) -> bytes:
    """``s`` as FieldsV1 JSON, byte-identical to SMD's ``Set.ToJSON()``."""
    keys: dict[PathElement, str] = {}
    return ("{" + _emit(s, False, keys) + "}").encode("utf-8")


def _emit(node: Set, include_self: bool, keys: dict[PathElement, str]) -> str:
    parts = ['".":{}'] if include_self and node else []
    members, children = node._members, node._children
    for pe in sorted(members | children.keys()):
        key = keys.get(pe)
        if key is None:
            key = keys[pe] = json_string(serialize_path_element(pe), html=False)
        child = children.get(pe)
        if child is None:
            parts.append(key + ":{}")
        else:
            parts.append(key + ":{" + _emit(child, pe in members, keys) + "}")
    return ",".join(parts)


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its members in order, repeated keys kept (SMD reads them all)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON number {name}")


def set_from_fields_v1(raw: bytes | str | Mapping[str, Any] | None) -> Set:
    """The set a FieldsV1 value describes: its JSON text, or the JSON already decoded
    (a dict, or None for ``null``). Raises :class:`FieldsV1Error` for anything SMD's
    ``Set.FromJSON`` refuses."""
    if isinstance(raw, bytes | str):
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
            decoded = json.loads(text, object_pairs_hook=_Pairs, parse_constant=_reject_constant)
        except RecursionError:
            raise FieldsV1Error("managed fields are nested too deeply") from None
        except ValueError as error:
            raise FieldsV1Error(f"invalid managed fields JSON: {error}") from None
    else:
        decoded = raw
    if decoded is None:
        return Set()
    if not isinstance(decoded, Mapping | _Pairs):
        raise FieldsV1Error(f"managed fields must be a JSON object, not {_kind(decoded)}")
    try:
        found, _ = _read_node(decoded, ())
    except RecursionError:
        raise FieldsV1Error("managed fields are nested too deeply") from None
    return Set() if found is None else found


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _read_node(node: Mapping[str, Any] | _Pairs, where: Path) -> tuple[Set | None, bool]:
    """(the subtree below ``where``, or None if it has no members; whether ``where`` is
    itself a member): SMD's ``readIterV1``."""
    items = node if isinstance(node, _Pairs) else node.items()
    found: Set | None = None
    is_member = False
    for key, value in items:
        if key == ".":
            is_member = True
            continue
        pe = deserialize_path_element(key)
        if pe is None:
            continue
        if value is None:
            below, child_is_member = None, True
        elif isinstance(value, Mapping | _Pairs):
            below, child_is_member = _read_node(value, (*where, pe))
        else:
            raise FieldsV1Error(
                f"managed fields at {path_string((*where, pe)) or '<root>'}: expected an "
                f"object, got {_kind(value)}"
            )
        if found is None:
            found = Set()
        if child_is_member:
            found._members.add(pe)
        if below is not None:
            # A repeated key replaces the subtree read before, as SMD's reader does.
            found._children[pe] = below
    if found is None:
        is_member = True
    return found, is_member
