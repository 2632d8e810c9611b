"""Short builders of structured-merge types for tests: ``struct(name=STRING, ...)``,
``list_map(element, "name")``, ``set_of(STRING)``, ``atomic_list(...)``, ``map_of(...)``.

Design note
-----------
The engine's tests (tests/unit/test_structured_*.py, tests/property/test_structured_
properties.py) state schemas the way structured-merge-diff's own tests state them in YAML,
but as Python atoms (``watchcache.structured.schema``), so a test reads as its SMD original
does. Each builder returns a new inline atom; named atoms (for recursion) are built by hand.
Used only by tests.
"""

from __future__ import annotations

from typing import Any

from watchcache.structured.schema import (
    ASSOCIATIVE,
    ATOMIC,
    SEPARABLE,
    Atom,
    ListType,
    MapType,
    Relationship,
    StructField,
)

__all__ = [
    "BOOLEAN",
    "NUMERIC",
    "STRING",
    "UNTYPED",
    "atomic_list",
    "list_map",
    "map_of",
    "set_of",
    "struct",
]

STRING = Atom(scalar="string")
NUMERIC = Atom(scalar="numeric")
BOOLEAN = Atom(scalar="boolean")
UNTYPED = Atom(scalar="untyped")


def struct(
    *,
    _relationship: Relationship = SEPARABLE,
    _element: Atom | None = None,
    _defaults: dict[str, Any] | None = None,
    **fields: Atom,
) -> Atom:
    """A map type with these declared fields (``_element``: the type of other keys;
    ``_defaults``: key-field defaults; ``_relationship``: atomic or separable)."""
    defaults = _defaults or {}
    declared = {name: StructField(name, atom, defaults.get(name)) for name, atom in fields.items()}
    return Atom(map=MapType(declared, _element, _relationship))


def map_of(element: Atom, relationship: Relationship = SEPARABLE) -> Atom:
    """A map whose every key holds an ``element`` (labels, annotations)."""
    return Atom(map=MapType(element=element, relationship=relationship))


def list_map(element: Atom, *keys: str) -> Atom:
    """An associative list of ``element`` maps, identified by ``keys``."""
    return Atom(list=ListType(element, ASSOCIATIVE, keys))


def set_of(element: Atom) -> Atom:
    """An associative list of scalars (a set)."""
    return Atom(list=ListType(element, ASSOCIATIVE))


def atomic_list(element: Atom) -> Atom:
    """A list replaced whole."""
    return Atom(list=ListType(element, ATOMIC))
