"""A partial object applied over another: structured-merge-diff's ``TypedValue.Merge``, how
an apply configuration lands on the live object.

Design note
-----------
:func:`merged` returns ``rhs`` laid over ``lhs`` with SMD's rules: nothing is removed;
where both set a leaf (a scalar, an atomic list or map, or an empty or null container
against an empty or null one) ``rhs`` wins, explicit null included; maps merge entry by
entry; associative lists merge element by element, matched by key or by value.

**Order of a merged associative list** (SMD's ``visitListItems``): elements only ``lhs``
has keep their places; elements both have are placed in ``rhs``'s order; elements only
``rhs`` has come where ``rhs`` puts them relative to the shared ones. Concretely the walk
advances through both lists together: a shared element is emitted when both cursors are
on it, a shared element that is not the next one ``rhs`` wants is passed over in ``lhs``
(``rhs`` emits it later), ``lhs``-only elements are emitted where they stand, and
``rhs``'s elements are emitted in turn. An element repeated in ``lhs`` (allowed in stored
objects) stays repeated unless ``rhs`` has an element of that name: then the repeats become
that one element, merged over null, as in SMD.

**Errors**: a scalar wrong on both sides, a list whose elements cannot be named, and
duplicates in ``rhs`` are SMD errors. SMD drops the errors met inside an element of an
associative list (its walker shadows them) and leaves such an element out of the result;
this port does the same, so results agree with Kubernetes on every input, including ones
validation would have refused. A value whose merge produced nothing (every entry
failing) is null.

**Quick walk.** :func:`quick_merge` is the merge of an object valid for the type with
duplicates allowed (the live object) and a configuration valid without them, both plain
(see :mod:`~watchcache.structured.typedwalk`; no duplicate elements on either side); it
checks that as it goes, atomic values' insides included, and answers :data:`NOT_PLAIN`
otherwise. An apply therefore validates its two inputs and merges them in one walk. Its
result is the general walk's, containers rebuilt and leaves shared alike.

Costs: one walk of both values, O(size); each list is indexed by name once (dicts, so no
quadratic matching). The inputs are not modified; the result shares unchanged subtrees
with them (copy before mutating). Callers: :mod:`watchcache.structured.typed`,
:mod:`watchcache.structured.updater`.
"""

from __future__ import annotations

from typing import Any, Final

from watchcache.structured.pathelement import Path, PathElement
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
from watchcache.structured.value import JSON

__all__ = ["NOT_PLAIN", "merge_of", "quick_merge"]


def merge_of(lhs: JSON, rhs: JSON, atom: Atom) -> tuple[JSON, list[ValidationError]]:
    """``rhs`` merged over ``lhs`` as ``atom``, and the problems met on the way."""
    errors: list[ValidationError] = []
    out = _node(lhs, rhs, atom, (), errors)
    return (None if out is MISSING else out), errors


class _Node:
    # One place being merged (SMD's mergingWalker state for it).
    __slots__ = ("in_leaf", "lhs", "out", "path", "rhs")

    def __init__(self, lhs: JSON, rhs: JSON, path: Path) -> None:
        self.lhs = lhs
        self.rhs = rhs
        self.path = path
        self.in_leaf = False
        self.out: Any = MISSING


def _node(
    lhs: JSON, rhs: JSON, atom: Atom | None, path: Path, errors: list[ValidationError]
) -> Any:
    on_lhs, on_rhs = deduce(atom, lhs), deduce(atom, rhs)
    node = _Node(lhs, rhs, path)
    if rhs is MISSING:
        _handle(on_lhs, atom, node, errors)
    elif lhs is MISSING or same_effective(on_lhs, on_rhs):
        _handle(on_rhs, atom, node, errors)
    else:
        # SMD merges the old kind into a copy whose result it drops, then the new kind.
        _handle(on_lhs, atom, _Node(lhs, rhs, path), errors)
        _handle(on_rhs, atom, node, errors)
    return node.out


def _handle(
    effective: Effective, atom: Atom | None, node: _Node, errors: list[ValidationError]
) -> None:
    scalar, list_type, map_type = effective
    if map_type is not None:
        _map(map_type, node, errors)
    elif scalar is not None:
        _scalar(scalar, node, errors)
    elif list_type is not None:
        _list(list_type, node, errors)
    else:
        errors.append(errors_at(node.path, invalid_atom(atom)))


def _leaf(node: _Node) -> None:
    if node.in_leaf:
        return
    node.in_leaf = True
    if node.rhs is not MISSING:
        node.out = node.rhs
    elif node.lhs is not MISSING:
        node.out = node.lhs


def _scalar(kind: ScalarKind, node: _Node, errors: list[ValidationError]) -> None:
    on_lhs = scalar_error(kind, node.lhs, "lhs: ")
    on_rhs = scalar_error(kind, node.rhs, "rhs: ")
    if on_lhs is not None and on_rhs is not None:
        errors.append(errors_at(node.path, on_lhs))
        errors.append(errors_at(node.path, on_rhs))
        return
    _leaf(node)


def _map(map_type: MapType, node: _Node, errors: list[ValidationError]) -> None:
    lhs = node.lhs if isinstance(node.lhs, dict) else None
    rhs = node.rhs if isinstance(node.rhs, dict) else None
    if map_type.relationship == ATOMIC or (not lhs and not rhs):
        _leaf(node)
        return
    fields, element = map_type.fields, map_type.element
    left: dict[str, JSON] = lhs or {}
    right: dict[str, JSON] = rhs or {}
    out: dict[str, JSON] = {}
    for key in (*left, *(k for k in right if k not in left)):
        declared = fields.get(key)
        merged = _node(
            left.get(key, MISSING),
            right.get(key, MISSING),
            declared.type if declared is not None else element,
            (*node.path, PathElement.of_field(key)),
            errors,
        )
        if merged is not MISSING:
            out[key] = merged
    if out:
        node.out = out


def _index(
    list_type: ListType,
    items: list[JSON],
    allow_duplicates: bool,
    path: Path,
    errors: list[ValidationError],
) -> tuple[list[PathElement], dict[PathElement, JSON]]:
    # SMD's indexListPathElements: the names in order, and name -> element (None, a null
    # element, for a name repeated in lhs).
    names: list[PathElement] = []
    observed: dict[PathElement, JSON] = {}
    for position, item in enumerate(items):
        try:
            pe = list_element(list_type, item)
        except ElementError as error:
            errors.append(errors_at(path, f"element {position}: {error}"))
            continue
        if pe in observed:
            if not allow_duplicates:
                errors.append(errors_at(path, f"duplicate entries for key {pe}"))
                continue
            observed[pe] = None
        else:
            observed[pe] = item
        names.append(pe)
    return names, observed


def _list(list_type: ListType, node: _Node, errors: list[ValidationError]) -> None:
    lhs = node.lhs if isinstance(node.lhs, list) else None
    rhs = node.rhs if isinstance(node.rhs, list) else None
    if list_type.relationship == ATOMIC or (not lhs and not rhs):
        _leaf(node)
        return
    path = node.path
    problems: list[ValidationError] = []
    rhs_names, on_rhs = _index(list_type, rhs or [], False, path, problems)
    lhs_names, on_lhs = _index(list_type, lhs or [], True, path, problems)
    if problems:
        errors.extend(problems)
        return
    element = list_type.element
    out: list[JSON] = []

    def emit(pe: PathElement, lhs_item: JSON, rhs_item: JSON) -> None:
        # Errors inside an element are dropped, as SMD's walker drops them.
        merged = _node(lhs_item, rhs_item, element, (*path, pe), [])
        if merged is not MISSING:
            out.append(merged)

    shared = iter([pe for pe in rhs_names if pe in on_lhs])
    next_shared = next(shared, None)
    done_rhs: set[PathElement] = set()
    left_items = lhs or []
    lhs_count, rhs_count = len(lhs_names), len(rhs_names)
    li = ri = 0
    while li < lhs_count or ri < rhs_count:
        if li < lhs_count and ri < rhs_count:
            pe = lhs_names[li]
            if pe == rhs_names[ri]:
                done_rhs.add(pe)
                emit(pe, on_lhs.get(pe, MISSING), on_rhs.get(pe, MISSING))
                li += 1
                ri += 1
                next_shared = next(shared, None)
                continue
            if pe in on_rhs and next_shared is not None and next_shared != pe:
                # Shared, but rhs wants another shared element first: rhs emits this later.
                li += 1
                continue
        if li < lhs_count:
            pe = lhs_names[li]
            if pe not in on_rhs:
                emit(pe, left_items[li], MISSING)
                li += 1
                continue
            if pe in done_rhs:
                li += 1
        if ri < rhs_count:
            pe = rhs_names[ri]
            done_rhs.add(pe)
            emit(pe, on_lhs.get(pe, MISSING), on_rhs[pe])
            ri += 1
            if next_shared is not None and next_shared == pe:
                next_shared = next(shared, None)
    if out:
        node.out = out


# --- the quick walk -------------------------------------------------------------------


class _NotPlain:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_PLAIN"


#: What :func:`quick_merge` answers for inputs it leaves to :func:`merge_of`.
NOT_PLAIN: Final = _NotPlain()


def quick_merge(lhs: JSON, rhs: JSON, atom: Atom) -> JSON:
    """:func:`merge_of`'s value for ``lhs`` valid for ``atom`` with duplicates allowed and
    ``rhs`` valid without, both plain; :data:`NOT_PLAIN` for anything else (validate and
    run :func:`merge_of` then)."""
    try:
        out = _place(lhs, rhs, atom)
    except (Irregular, RecursionError):
        return NOT_PLAIN
    return None if out is MISSING else out


def _part(lhs: Any, rhs: Any, atom: Atom) -> int:
    # The one part both sides take (see compare's quick walk).
    if rhs is MISSING:
        part = part_of(atom, lhs)
    elif lhs is MISSING:
        part = part_of(atom, rhs)
    else:
        return pair_part(atom, lhs, rhs)
    return whole_part(atom) if part == NULL else part


def _place(lhs: Any, rhs: Any, atom: Atom) -> Any:
    part = _part(lhs, rhs, atom)
    if part == MAP:
        return _map_place(lhs, rhs, atom.map)  # type: ignore[arg-type]
    if part == LIST:
        return _list_place(lhs, rhs, atom.list)  # type: ignore[arg-type]
    return lhs if rhs is MISSING else rhs


def _map_place(lhs: Any, rhs: Any, map_type: MapType) -> Any:
    left = lhs if type(lhs) is dict else None
    right = rhs if type(rhs) is dict else None
    if map_type.relationship == ATOMIC:
        if left and not is_valid_map(left, map_type, allow_duplicates=True):
            raise Irregular
        if right and not is_valid_map(right, map_type, allow_duplicates=False):
            raise Irregular
        return lhs if rhs is MISSING else rhs
    if not left and not right:
        return lhs if rhs is MISSING else rhs
    left = left or {}
    right = right or {}
    fields, element = map_type.fields, map_type.element
    out: dict[str, Any] = {}
    for key in (*left, *(k for k in right if k not in left)) if right and left else (left or right):
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
            out[key] = _place(old, new, atom)
            continue
        # A scalar (most fields): checked and taken here rather than by calls.
        allowed = SCALAR_TYPES.get(atom.scalar or "")
        if allowed is None:
            raise Irregular
        if old is not MISSING and old is not None and type(old) not in allowed:
            raise Irregular
        if new is MISSING:
            out[key] = old
            continue
        if new is not None and type(new) not in allowed:
            raise Irregular
        out[key] = new
    return out


def _list_place(lhs: Any, rhs: Any, list_type: ListType) -> Any:
    left = lhs if type(lhs) is list else None
    right = rhs if type(rhs) is list else None
    relationship = list_type.relationship
    element = list_type.element
    if relationship == ATOMIC:
        if left and not all(is_valid(i, element, allow_duplicates=True) for i in left):
            raise Irregular
        if right and not all(is_valid(i, element, allow_duplicates=False) for i in right):
            raise Irregular
        return lhs if rhs is MISSING else rhs
    if relationship != ASSOCIATIVE:
        raise Irregular
    if not left and not right:
        return lhs if rhs is MISSING else rhs
    rhs_names, on_rhs = _quick_index(list_type, right or [])
    lhs_names, on_lhs = _quick_index(list_type, left or [])
    out: list[Any] = []
    if not rhs_names:
        for pe in lhs_names:
            out.append(_place(on_lhs[pe], MISSING, element))
        return out
    if not lhs_names:
        for pe in rhs_names:
            out.append(_place(MISSING, on_rhs[pe], element))
        return out
    # The general walk's order (see the module note), with no name repeated.
    shared = iter([pe for pe in rhs_names if pe in on_lhs])
    next_shared = next(shared, None)
    done_rhs: set[PathElement] = set()
    lhs_count, rhs_count = len(lhs_names), len(rhs_names)
    li = ri = 0
    while li < lhs_count or ri < rhs_count:
        if li < lhs_count and ri < rhs_count:
            pe = lhs_names[li]
            if pe == rhs_names[ri]:
                done_rhs.add(pe)
                out.append(_place(on_lhs[pe], on_rhs[pe], element))
                li += 1
                ri += 1
                next_shared = next(shared, None)
                continue
            if pe in on_rhs and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < lhs_count:
            pe = lhs_names[li]
            if pe not in on_rhs:
                out.append(_place(on_lhs[pe], MISSING, element))
                li += 1
                continue
            if pe in done_rhs:
                li += 1
        if ri < rhs_count:
            pe = rhs_names[ri]
            done_rhs.add(pe)
            out.append(_place(on_lhs.get(pe, MISSING), on_rhs[pe], element))
            ri += 1
            if next_shared is not None and next_shared == pe:
                next_shared = next(shared, None)
    return out


def _quick_index(
    list_type: ListType, items: list[Any]
) -> tuple[list[PathElement], dict[PathElement, Any]]:
    # The names in order and name -> element; a repeated name is irregular.
    names: list[PathElement] = []
    named: dict[PathElement, Any] = {}
    for item in items:
        pe = quick_element(list_type, item)
        if pe in named:
            raise Irregular
        named[pe] = item
        names.append(pe)
    return names, named
