"""The type model that structured merge works over: scalars, lists and maps, and how their
elements relate.

Design note
-----------
Server-side apply needs to know, for every place in an object, what a "field" is: whether a
list is replaced whole (``atomic``) or merged element by element (``associative``: a set of
scalars, or a list of maps identified by key fields, e.g. containers by ``name``), and whether
a map's entries are owned one by one (``separable``) or only together (``atomic``). This is
the model Kubernetes' structured-merge-diff library uses (its ``schema`` package); ours has
the same atoms and the same element relationships so that a schema can be written in that
library's YAML form (:func:`to_smd_yaml`) and fed to it as a reference.

An :class:`Atom` is one type: a scalar, a list, a map, or several at once (an "untyped"
value may be any of them). References between types are plain object references, so
recursive types (JSONSchemaProps, a CRD's recursive schema) are cycles of objects; an atom
with a ``name`` is a named type of its schema and is written by name when exported.
:data:`DEDUCED` is the type of values without a schema (``x-kubernetes-preserve-unknown-
fields``, ``RawExtension``): maps are separable, lists atomic, as the reference library
deduces them. Where the reference library overrides a referenced type's relationship at the
reference (``x-kubernetes-map-type: atomic`` on one field of a shared struct type),
:func:`with_relationship` returns the overridden copy (cached, so identity holds).

Built by ``registry.apply_types`` for built-in kinds (from ``wire/k8s_schema.json`` and the
``+listType``-style markers) and custom resources (from their structural schema). Immutable
once built; safe to share between threads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

__all__ = [
    "ASSOCIATIVE",
    "ATOMIC",
    "DEDUCED",
    "SEPARABLE",
    "UNTYPED_ATOMIC",
    "Atom",
    "ListType",
    "MapType",
    "Relationship",
    "ScalarKind",
    "StructField",
    "to_smd_yaml",
    "with_relationship",
]

ScalarKind: TypeAlias = Literal["numeric", "string", "boolean", "untyped"]
Relationship: TypeAlias = Literal["atomic", "associative", "separable"]

ATOMIC: Final = "atomic"
ASSOCIATIVE: Final = "associative"
SEPARABLE: Final = "separable"


@dataclass(eq=False, slots=True)
class StructField:
    """A named field of a map type. ``default`` is the value a list-map key field takes
    when an element omits it (e.g. a port's ``protocol`` is ``TCP``), as Kubernetes'
    schemas declare it; None when there is none."""

    name: str
    type: Atom
    default: Any = None


@dataclass(eq=False, slots=True)
class ListType:
    """A list: ``atomic`` (replaced whole, owned as one field) or ``associative`` (elements
    owned one by one: by their ``keys`` fields when the elements are maps, by value when
    they are scalars — a set)."""

    element: Atom
    relationship: Relationship = ATOMIC
    keys: tuple[str, ...] = ()


@dataclass(eq=False, slots=True)
class MapType:
    """A map: named ``fields`` (a struct) and/or an ``element`` type for any other key.
    ``separable`` maps own their entries one by one, ``atomic`` maps only as a whole."""

    fields: dict[str, StructField] = field(default_factory=dict)
    element: Atom | None = None
    relationship: Relationship = SEPARABLE


@dataclass(eq=False, slots=True)
class Atom:
    """One type: any of scalar, list and map may be set (an untyped value may be all three).
    ``name`` makes it a named type of its schema (required for recursion when exported)."""

    scalar: ScalarKind | None = None
    list: ListType | None = None
    map: MapType | None = None
    name: str = ""
    #: An explicit null is a valid value (OpenAPI ``nullable: true``).
    nullable: bool = False

    def __repr__(self) -> str:
        kinds = [k for k in ("scalar", "list", "map") if getattr(self, k) is not None]
        return f"Atom({self.name or 'inline'}: {'|'.join(kinds) or 'nothing'})"


def _untyped() -> tuple[Atom, Atom]:
    atomic = Atom(scalar="untyped", name="__untyped_atomic_")
    atomic.list = ListType(atomic, ATOMIC)
    atomic.map = MapType(element=atomic, relationship=ATOMIC)
    deduced = Atom(scalar="untyped", name="__untyped_deduced_")
    deduced.list = ListType(atomic, ATOMIC)
    deduced.map = MapType(element=deduced, relationship=SEPARABLE)
    return atomic, deduced


#: Any value, owned whole; and any value, its maps owned entry by entry (the reference
#: library's ``__untyped_atomic_`` and ``__untyped_deduced_``).
UNTYPED_ATOMIC, DEDUCED = _untyped()

# (id of the original, relationship) -> (the original, kept alive so its id stays unique;
# the overridden copy).
_OVERRIDDEN: dict[tuple[int, str], tuple[Atom, Atom]] = {}


def with_relationship(atom: Atom, relationship: Relationship) -> Atom:
    """``atom`` with its list's or map's element relationship replaced (the reference
    library's ``TypeRef.elementRelationship`` override). The same copy is returned for the
    same arguments; ``atom`` itself when nothing changes."""
    current = atom.map.relationship if atom.map is not None else None
    if atom.list is not None:
        current = atom.list.relationship
    if current is None or current == relationship:
        return atom
    key = (id(atom), relationship)
    known = _OVERRIDDEN.get(key)
    if known is not None:
        return known[1]
    # Inline, as the reference library resolves an override.
    copy = Atom(scalar=atom.scalar, nullable=atom.nullable)
    if atom.map is not None:
        copy.map = MapType(atom.map.fields, atom.map.element, relationship)
    if atom.list is not None:
        copy.list = ListType(atom.list.element, relationship, atom.list.keys)
    _OVERRIDDEN[key] = (atom, copy)
    return copy


def to_smd_yaml(roots: Mapping[str, Atom] | Iterable[Atom]) -> str:
    """The schema reachable from ``roots`` in structured-merge-diff's YAML form (``types:``
    with one entry per named atom; inline atoms written in place). Every cycle must pass
    through a named atom. ``roots`` given as a mapping are named by its keys."""
    named: dict[str, Atom] = {}
    if isinstance(roots, Mapping):
        for name, atom in roots.items():
            if atom.name and atom.name != name:
                raise ValueError(f"root {name!r} is the named type {atom.name!r}")
            atom.name = atom.name or name
            named[name] = atom
    else:
        for atom in roots:
            if not atom.name:
                raise ValueError("roots given as a list must be named atoms")
            named[atom.name] = atom
    lines = ["types:"]
    done: set[str] = set()
    queue = list(named.values())
    while queue:
        atom = queue.pop(0)
        if atom.name in done:
            continue
        done.add(atom.name)
        lines.append(f"- name: {_quote(atom.name)}")
        lines.extend(_atom_lines(atom, "  ", queue))
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _ref_lines(atom: Atom, indent: str, queue: list[Atom]) -> list[str]:
    out = []
    if atom.name:
        queue.append(atom)
        out.append(f"{indent}namedType: {_quote(atom.name)}")
    else:
        out.extend(_atom_lines(atom, indent, queue))
    if atom.nullable:
        out.append(f"{indent}nullable: true")
    return out or [f"{indent}{{}}"]


def _atom_lines(atom: Atom, indent: str, queue: list[Atom]) -> list[str]:
    out: list[str] = []
    if atom.scalar is not None:
        out.append(f"{indent}scalar: {atom.scalar}")
    if atom.list is not None:
        out.append(f"{indent}list:")
        out.append(f"{indent}  elementType:")
        out.extend(_ref_lines(atom.list.element, indent + "    ", queue))
        out.append(f"{indent}  elementRelationship: {atom.list.relationship}")
        if atom.list.keys:
            out.append(f"{indent}  keys:")
            out.extend(f"{indent}  - {_quote(k)}" for k in atom.list.keys)
    if atom.map is not None:
        out.append(f"{indent}map:")
        if atom.map.fields:
            out.append(f"{indent}  fields:")
            for fld in atom.map.fields.values():
                out.append(f"{indent}  - name: {_quote(fld.name)}")
                out.append(f"{indent}    type:")
                out.extend(_ref_lines(fld.type, indent + "      ", queue))
                if fld.default is not None:
                    out.append(f"{indent}    default: {json.dumps(fld.default)}")
        if atom.map.element is not None:
            out.append(f"{indent}  elementType:")
            out.extend(_ref_lines(atom.map.element, indent + "    ", queue))
        out.append(f"{indent}  elementRelationship: {atom.map.relationship}")
    return out
