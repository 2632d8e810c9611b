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
FieldsV1 output.

**Shared subtrees.** Every write combines each manager's set with a few changed paths, so
the operations share what they do not change: a subtree only one operand has, or that an
operation leaves as it was, goes into the result as it is, *frozen* (it never changes
again; a frozen node's subtrees are frozen). Results are new top nodes, and
:meth:`Set.insert` copies a frozen node on its way down before changing it, so a result
still changes independently of its operands (and they of it), and an operation costs what
it changes rather than the size of its operands. A frozen set itself refuses ``insert``
(TypeError); only :func:`shared_set_from_fields_v1` hands one out. Frozen nodes carry
memos that stay true because they never change: their FieldsV1 once written, and the type
``reconcile`` last found them to fit.

**FieldsV1** (:func:`fields_v1_from_set`, :func:`set_from_fields_v1`) is SMD's
``Set.ToJSON``/``FromJSON`` byte for byte: members and children merged in element order, a
node that is both member and parent written ``{".":{},...}``, keys written by
json-iterator's plain string writer around :func:`serialize_path_element`'s text. Reading
accepts what SMD accepts (whitespace, ``null`` for an empty set or an empty node, unknown
element kinds dropped, elements in any order, a repeated key replacing the earlier subtree
as SMD's reader does) and refuses the rest with :class:`FieldsV1Error`.
:func:`fields_v1_object` is the same as the decoded JSON object a managedFields entry
holds, built directly.

**The decoded-set cache.** Every write decodes every manager's entry and encodes it back,
though most entries are what the previous write of the object encoded. Sets read are
therefore kept (frozen, least recently used out, bounded by :data:`DECODED_CACHE_ENTRIES`
and :data:`DECODED_CACHE_CHARACTERS`) under the exact text read, or, for an entry already
decoded from JSON, under the object's ``marshal`` form (version 0: a function of the value
alone that tells every type apart, ``true`` from ``1`` from ``1.0``; computed in C). A key
determines the set read from it, so a hit is what reading gives, and a changed entry is a
different key. A set written is kept too, under the text and the object it was written
as, so that the next write of the object finds it, but only if reading those back gives an
element with the same texts everywhere (``pathelement.element_key_text``: not for numbers
that FieldsV1 reads back as floats writing differently, nor for lone surrogates); written
again, its object is rebuilt from the marshal form. :func:`clear_fields_v1_cache` forgets
them all.

Costs: insert and has are O(depth); union, intersection and the differences are linear in
what they change (plus the top node's width at each level they enter); iteration and
FieldsV1 sort each node once (O(n log n)); decoding or encoding a set seen before costs one
marshal pass of its object. A Set is not thread-safe while it is being built; treat it as a
value once shared (frozen sets may be read from any thread; their memos are set once,
to the same value by whichever thread gets there). Callers: the typed walkers,
:mod:`watchcache.structured.updater`, ``registry.managed_fields``.
"""

from __future__ import annotations

import json
import marshal
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from watchcache.structured.pathelement import (
    ELEMENT_KEY_TEXTS,
    ELEMENT_KEYS,
    FieldsV1Error,
    Path,
    PathElement,
    deserialize_path_element,
    element_key,
    element_key_text,
    path_string,
    serialize_path_element,
)
from watchcache.structured.schema import Atom
from watchcache.structured.value import json_string

__all__ = [
    "DECODED_CACHE_CHARACTERS",
    "DECODED_CACHE_ENTRIES",
    "FieldsV1Error",
    "ManagedFields",
    "Path",
    "PathElement",
    "Set",
    "VersionedSet",
    "clear_fields_v1_cache",
    "fields_v1_from_set",
    "fields_v1_object",
    "path_string",
    "set_from_fields_v1",
    "set_node",
    "shared_set_from_fields_v1",
]


class Set:
    """A set of field paths (SMD's ``fieldpath.Set``). ``Set(paths)`` inserts each path."""

    __slots__ = ("_children", "_encoded", "_fitted", "_frozen", "_members")

    def __init__(self, paths: Iterable[Path] = ()) -> None:
        self._members: set[PathElement] = set()
        self._children: dict[PathElement, Set] = {}
        self._frozen = False
        # For frozen sets only: their FieldsV1 once written, and the type this subtree
        # was last found to fit (reconcile's memo); see the module note.
        self._encoded: _Encoding | None = None
        self._fitted: Atom | None = None
        for path in paths:
            self.insert(path)

    # --- building and reading ---------------------------------------------------------

    def insert(self, path: Path) -> None:
        """Add ``path`` (not its parents). The empty path (the whole object) is never
        tracked, as in SMD. Raises TypeError on a shared set (see the module note)."""
        if not path:
            return
        if self._frozen:
            raise TypeError("this field set is shared and cannot change: insert into a copy()")
        node = self
        for pe in path[:-1]:
            child = node._children.get(pe)
            if child is None:
                child = node._children[pe] = Set()
            elif child._frozen:
                # Shared with another set: this set gets its own copy of the node.
                child = node._children[pe] = child.copy()
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
        """A copy that changes independently of this set (its subtrees are shared
        frozen, so copying costs the top node only)."""
        children = {pe: child._freeze() for pe, child in self._children.items()}
        return set_node(set(self._members), children)

    def _freeze(self) -> Set:
        """Make this subtree shareable: it never changes again (see the module note)."""
        if not self._frozen:
            for child in self._children.values():
                child._freeze()
            self._frozen = True
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Set):
            return NotImplemented
        if self is other:
            return True
        return self._members == other._members and self._children == other._children

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return "\n".join(path_string(p) for p in self)

    def __repr__(self) -> str:
        return "Set([" + ", ".join(repr(path_string(p)) for p in self) + "])"

    # --- algebra ----------------------------------------------------------------------
    #
    # Each operation returns a new top node; subtrees that come out unchanged are the
    # operands' own, frozen (shared), so an operation costs what it changes, not the size
    # of its operands.

    def union(self, other: Set) -> Set:
        """Paths in either set."""
        return set_node(self._members | other._members, _union_children(self, other))

    def intersection(self, other: Set) -> Set:
        """Paths in both sets."""
        out = set_node(self._members & other._members, {})
        theirs_all = other._children
        if theirs_all:
            for pe, child in self._children.items():
                theirs = theirs_all.get(pe)
                if theirs is not None:
                    common = child if child is theirs else child.intersection(theirs)
                    if common:
                        out._children[pe] = common._freeze() if common is child else common
        return out

    def difference(self, other: Set) -> Set:
        """Paths of this set that are not members of ``other``. A member of ``other``
        does not remove this set's paths below it (SMD's ``Difference``)."""
        return set_node(self._members - other._members, _difference_children(self, other, False))

    def recursive_difference(self, other: Set) -> Set:
        """:meth:`difference`, where a member of ``other`` also removes every path below
        it (SMD's ``RecursiveDifference``)."""
        return set_node(self._members - other._members, _difference_children(self, other, True))

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


def set_node(
    members: set[PathElement], children: dict[PathElement, Set], frozen: bool = False
) -> Set:
    """A new set over these members and subtrees, taken as they are (the walkers build
    sets bottom-up with it). No subtree may be empty; ``frozen`` only if every subtree
    is (a node that only ever becomes another set's subtree)."""
    out = Set.__new__(Set)
    out._members = members
    out._children = children
    out._frozen = frozen
    out._encoded = None
    out._fitted = None
    return out


def _union_children(left: Set, right: Set) -> dict[PathElement, Set]:
    # Subtrees only one side has are shared; common ones are united (or shared when they
    # are the same object).
    mine, theirs_all = left._children, right._children
    if not theirs_all:
        return {pe: child._freeze() for pe, child in mine.items()}
    out: dict[PathElement, Set] = {}
    for pe, child in mine.items():
        theirs = theirs_all.get(pe)
        if theirs is None or theirs is child:
            out[pe] = child._freeze()
        else:
            out[pe] = child.union(theirs)
    for pe, theirs in theirs_all.items():
        if pe not in out:
            out[pe] = theirs._freeze()
    return out


def _difference_children(left: Set, right: Set, recursive: bool) -> dict[PathElement, Set]:
    mine, theirs_all = left._children, right._children
    if not theirs_all and not (recursive and right._members):
        return {pe: child._freeze() for pe, child in mine.items()}
    removed_whole = right._members if recursive else ()
    out: dict[PathElement, Set] = {}
    for pe, child in mine.items():
        if pe in removed_whole:
            continue
        theirs = theirs_all.get(pe)
        if theirs is None:
            out[pe] = child._freeze()
            continue
        members = child._members - theirs._members
        below = _difference_children(child, theirs, recursive)
        if _same_node(child, members, below):
            out[pe] = child._freeze()
        elif members or below:
            out[pe] = set_node(members, below)
    return out


def _same_node(node: Set, members: set[PathElement], children: dict[PathElement, Set]) -> bool:
    # Whether an operation left ``node`` as it was (fewer members or other subtrees
    # otherwise), so that the result can share it and its memos.
    if len(members) != len(node._members) or len(children) != len(node._children):
        return False
    return all(children[pe] is child for pe, child in node._children.items())


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
    return _text(s).encode("utf-8")


def fields_v1_object(s: Set) -> dict[str, Any]:
    """:func:`fields_v1_from_set` decoded: the JSON object a managedFields entry holds (a
    new one each call)."""
    memo = s._encoded
    if memo is not None and memo.marshalled is not None:
        rebuilt: dict[str, Any] = marshal.loads(memo.marshalled)
        return rebuilt
    try:
        built = _faithful_object(s, False)
    except _Unfaithful:
        decoded: dict[str, Any] = json.loads(_text(s))
        return decoded
    # The next write of this object reads this object back: it finds this set by the
    # object's marshal form, and the set's next encoding rebuilds the object from it
    # (marshal's reader is quicker than building it again).
    marshalled = _marshalled(built)
    if marshalled is not None:
        shared = s if s._frozen else s.copy()._freeze()
        if shared._encoded is None:
            shared._encoded = _Encoding(None, True)
        shared._encoded.marshalled = marshalled
        _DECODED.remember(marshalled, shared)
    return built


def _faithful_object(node: Set, include_self: bool) -> dict[str, Any]:
    # The decoded form of _faithful_emit's text, built directly.
    members, children = node._members, node._children
    known = ELEMENT_KEYS
    out: dict[str, Any] = {".": {}} if include_self and (members or children) else {}
    if not children:
        for pe in sorted(members):
            key = known.get(pe)
            if key is None:
                key, faithful = element_key(pe)
                if not faithful:
                    raise _Unfaithful
            out[key] = {}
        return out
    for pe in sorted(members | children.keys()):
        key = known.get(pe)
        if key is None:
            key, faithful = element_key(pe)
            if not faithful:
                raise _Unfaithful
        child = children.get(pe)
        out[key] = {} if child is None else _faithful_object(child, pe in members)
    return out


class _Encoding:
    """What a frozen set's FieldsV1 was found to be: its text (None until asked for);
    whether every element is faithful (then the set is cached under the text); and the
    decoded object in marshal's form (None until asked for; the set is cached under it
    too)."""

    __slots__ = ("faithful", "marshalled", "text")

    def __init__(self, text: str | None, faithful: bool) -> None:
        self.text = text
        self.faithful = faithful
        self.marshalled: bytes | None = None


def _text(s: Set) -> str:
    """The FieldsV1 text of ``s`` (memoized on a frozen set)."""
    memo = s._encoded
    if memo is not None and memo.text is not None:
        return memo.text
    try:
        encoding = _Encoding("{" + _faithful_emit(s) + "}", True)
    except _Unfaithful:
        keys: dict[PathElement, str] = {}
        encoding = _Encoding("{" + _emit(s, False, keys) + "}", False)
    text = "" if encoding.text is None else encoding.text
    if memo is not None:
        encoding.marshalled = memo.marshalled
    if s._frozen:
        s._encoded = encoding
    if encoding.faithful:
        # The next write of this object reads this text back: it finds this set.
        shared = s if s._frozen else s.copy()._freeze()
        shared._encoded = encoding
        _DECODED.remember(text, shared)
    return text


def _marshalled(decoded: dict[str, Any]) -> bytes | None:
    """The cache key of a decoded FieldsV1 object: marshal's version 0 bytes, which are a
    function of the value alone (no references to objects met before) and tell every
    type apart. None for what marshal cannot write."""
    try:
        return marshal.dumps(decoded, 0)
    except ValueError:
        return None


class _Unfaithful(Exception):
    """An element whose FieldsV1 text does not read back as an element with its texts."""


def _faithful_emit(node: Set) -> str:
    # _emit when every element is faithful (element_key_text): equal elements then write
    # the same text, so no table of the texts met so far is needed.
    members, children = node._members, node._children
    known = ELEMENT_KEY_TEXTS
    parts = []
    if not children:
        for pe in sorted(members):
            key = known.get(pe)
            if key is None:
                key = _faithful_key_text(pe)
            parts.append(key + ":{}")
        return ",".join(parts)
    for pe in sorted(members | children.keys()):
        key = known.get(pe)
        if key is None:
            key = _faithful_key_text(pe)
        child = children.get(pe)
        if child is None:
            parts.append(key + ":{}")
            continue
        inner = _faithful_emit(child)
        if pe in members and inner:
            parts.append(key + ':{".":{},' + inner + "}")
        else:
            parts.append(key + ":{" + inner + "}")
    return ",".join(parts)


def _faithful_key_text(pe: PathElement) -> str:
    key, faithful = element_key_text(pe)
    if not faithful:
        raise _Unfaithful
    return key


def _emit(node: Set, include_self: bool, keys: dict[PathElement, str]) -> str:
    # The general writer: an element equal to one written before takes that one's text,
    # as SMD's writer does (an int and an equal float beyond 1e21 write differently).
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


# --- the cache of decoded sets ----------------------------------------------------------

#: Bounds of the cache of decoded sets: entries, and characters of their texts (a set
#: holds roughly 20 bytes of Python objects per character of its text).
DECODED_CACHE_ENTRIES: Final = 1024
DECODED_CACHE_CHARACTERS: Final = 2_000_000


class _DecodedSets:
    """Frozen sets by the text they were read from or written as, or by the marshal form
    of the decoded object they were read from or written as (bytes: never equal to a
    text); least recently used first out."""

    def __init__(self, entries: int, characters: int) -> None:
        self.entries = entries
        self.characters = characters
        self._sets: OrderedDict[str | bytes, Set] = OrderedDict()
        self._held = 0  # characters (bytes) of the keys held
        self._lock = threading.Lock()

    def recall(self, text: str | bytes) -> Set | None:
        with self._lock:
            found = self._sets.get(text)
            if found is not None:
                self._sets.move_to_end(text)
            return found

    def remember(self, text: str | bytes, shared: Set) -> None:
        if len(text) > self.characters // 8:
            return  # one huge set would evict everything else
        with self._lock:
            if text in self._sets:
                self._sets.move_to_end(text)
                return
            self._sets[text] = shared
            self._held += len(text)
            while len(self._sets) > self.entries or self._held > self.characters:
                gone, _ = self._sets.popitem(last=False)
                self._held -= len(gone)

    def clear(self) -> None:
        with self._lock:
            self._sets.clear()
            self._held = 0


_DECODED: Final = _DecodedSets(DECODED_CACHE_ENTRIES, DECODED_CACHE_CHARACTERS)


def clear_fields_v1_cache() -> None:
    """Forget every decoded set (benchmarks measure the cost of a first sight with it)."""
    _DECODED.clear()


# --- reading ----------------------------------------------------------------------------


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its members in order, repeated keys kept (SMD reads them all)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON number {name}")


def set_from_fields_v1(raw: bytes | str | Mapping[str, Any] | None) -> Set:
    """The set a FieldsV1 value describes: its JSON text, or the JSON already decoded
    (a dict, or None for ``null``). Raises :class:`FieldsV1Error` for anything SMD's
    ``Set.FromJSON`` refuses."""
    return shared_set_from_fields_v1(raw).copy()


def shared_set_from_fields_v1(raw: bytes | str | Mapping[str, Any] | None) -> Set:
    """:func:`set_from_fields_v1`, but the set may be shared with other callers (it is
    frozen: it cannot change, and ``insert`` on it raises). Reading a text already read
    or written costs a lookup."""
    key: str | bytes | None = None
    if isinstance(raw, bytes):
        try:
            key = raw.decode("utf-8")
        except UnicodeDecodeError:
            key = None  # refused below, with the decoder's message
    elif isinstance(raw, str):
        key = raw
    elif type(raw) is dict:
        key = _marshalled(raw)
    if key is not None:
        found = _DECODED.recall(key)
        if found is not None:
            return found
    decoded = _read(raw)._freeze()
    if key is not None:
        _DECODED.remember(key, decoded)
    return decoded


def _read(raw: bytes | str | Mapping[str, Any] | None) -> Set:
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
    if type(decoded) is not dict and not isinstance(decoded, Mapping | _Pairs):
        raise FieldsV1Error(f"managed fields must be a JSON object, not {_kind(decoded)}")
    try:
        found, _ = _read_node(decoded, None)
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


#: Where a reader is: None at the root, else (where its parent is, the element).
_Where: TypeAlias = "tuple[_Where, PathElement] | None"


def _path_of(where: _Where) -> Path:
    out: list[PathElement] = []
    while where is not None:
        where, pe = where
        out.append(pe)
    return tuple(reversed(out))


def _read_node(node: Mapping[str, Any] | _Pairs, where: _Where) -> tuple[Set | None, bool]:
    """(the subtree below ``where``, frozen, or None if it has no members; whether
    ``where`` is itself a member): SMD's ``readIterV1``."""
    items = node if isinstance(node, _Pairs) else node.items()
    members: set[PathElement] | None = None
    children: dict[PathElement, Set] = {}
    is_member = False
    for key, value in items:
        if key == ".":
            is_member = True
            continue
        pe = deserialize_path_element(key)
        if pe is None:
            continue
        if members is None:
            members = set()
        if value is None:
            members.add(pe)
            continue
        kind = type(value)
        if kind is dict or kind is _Pairs or isinstance(value, Mapping):
            below, child_is_member = _read_node(value, (where, pe))
        else:
            raise FieldsV1Error(
                f"managed fields at {path_string(_path_of((where, pe))) or '<root>'}: "
                f"expected an object, got {_kind(value)}"
            )
        if child_is_member:
            members.add(pe)
        if below is not None:
            # A repeated key replaces the subtree read before, as SMD's reader does.
            children[pe] = below
    if members is None:
        return None, True
    return set_node(members, children, frozen=True), is_member
