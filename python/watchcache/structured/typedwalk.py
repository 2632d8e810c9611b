"""What every walk of a value along its type shares: the errors, an absent value, which part
of an atom a value takes, how a list element is named, and the scalar checks.

Design note
-----------
structured-merge-diff's ``typed`` package walks a value and its schema together in five
ways (validate, to-field-set, compare, merge, remove). They agree on a few rules, kept here
so the walkers (:mod:`~watchcache.structured.validate`, ``tofieldset``, ``compare``,
``merge``, ``remove``, ``reconcile``) cannot drift apart:

* **Absent is not null.** A walker may see no value on one side (a field only one object
  has): :data:`MISSING`. JSON ``null`` (None) is a value: a null map or list is an empty
  one, and a field set to null is owned like any other.
* **Which part of an atom applies** (:func:`deduce`, SMD ``deduceAtom``): an atom may allow
  several kinds (an untyped value: scalar, list and map); a value of an allowed kind narrows
  it to that kind; null, an absent value or a kind the atom does not allow keep the whole
  atom, and validation then reports the mismatch. Handlers run map first, then scalar, then
  list (SMD ``handleAtom``); an atom allowing nothing is a schema error.
* **List elements are named** (:func:`list_element`, SMD ``listItemToPathElement``): by
  their key fields in a list-map (a missing key field takes its schema default, or is left
  out; all missing is an error), by value in a set; only associative lists are indexed this
  way.
* **Errors** are SMD's ``ValidationError`` texts (``.spec.replicas: expected numeric (int
  or float), got string``); a walk collects them and the public functions raise them
  together as one :class:`TypedValueError` whose text is SMD's ``ValidationErrors.Error()``.

**Quick walks.** Every write walks whole objects several times, and almost every object is
valid and plain: exact JSON types, no duplicate list elements, each value of the one kind
its type allows. Each walker therefore has a quick walk for such values, written for
speed (no paths, no per-node objects, the common cases inline), which raises
:class:`Irregular` at the first thing it does not handle; the caller then runs the general
walk, which is the definition and gives SMD's results and texts for everything. The quick
walks share :data:`SCALAR_TYPES`, :func:`part_of`, :func:`pair_part` and
:func:`quick_element` from here. They read the types as they are on every walk (nothing
about a type is kept between walks, so a type changed in place is walked as it now is).
A quick walk only ever answers what the general walk would; tests run both on generated
values and compare (tests/unit/test_structured_quick_walks.py).

Costs: O(1) per call except :func:`list_element` (O(keys) plus the key's sort key). Pure;
thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from watchcache.structured.pathelement import (
    Path,
    PathElement,
    key_element,
    key_element_of,
    path_string,
)
from watchcache.structured.schema import (
    ASSOCIATIVE,
    Atom,
    ListType,
    MapType,
    ScalarKind,
)
from watchcache.structured.value import JSON, go_sharp_v, go_type, go_v
from watchcache.wire.gostrconv import go_quote

__all__ = [
    "LIST",
    "MAP",
    "MISSING",
    "NULL",
    "SCALAR",
    "SCALAR_TYPES",
    "Effective",
    "ElementError",
    "Irregular",
    "TypedValueError",
    "ValidationError",
    "deduce",
    "errors_at",
    "invalid_atom",
    "list_element",
    "pair_part",
    "part_of",
    "quick_element",
    "same_effective",
    "scalar_error",
    "whole_part",
]


class _Missing:
    """The absence of a value (Go's nil ``value.Value``), as opposed to JSON null."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


#: No value on this side of a walk.
MISSING: Final = _Missing()


@dataclass(frozen=True, slots=True)
class ValidationError:
    """One problem at one place (SMD's ``ValidationError``)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


Operand: TypeAlias = Literal["", "config", "live", "new"]


class TypedValueError(ValueError):
    """A value that does not fit its type (or a walk the schema cannot do), with SMD's
    texts. ``errors`` lists every problem; ``operand`` says which input of an update or an
    apply it was found in (``"config"``, ``"live"``, ``"new"``; ``""`` elsewhere), as
    Kubernetes words each differently ("failed to create typed patch object ...")."""

    def __init__(self, errors: list[ValidationError], operand: Operand = "") -> None:
        self.errors = tuple(errors)
        self.operand: Operand = operand
        super().__init__(_errors_text(self.errors))

    @property
    def path(self) -> str:
        """The path of the first problem ("" at the root)."""
        return self.errors[0].path if self.errors else ""

    def for_operand(self, operand: Operand) -> TypedValueError:
        """The same errors, attributed to ``operand``."""
        return TypedValueError(list(self.errors), operand)


def _errors_text(errors: tuple[ValidationError, ...]) -> str:
    # SMD's ValidationErrors.Error().
    if len(errors) == 1:
        return str(errors[0])
    return "\n".join(["errors:", *(f"  {e}" for e in errors)])


def errors_at(path: Path, message: str) -> ValidationError:
    """A problem at ``path``."""
    return ValidationError(path_string(path), message)


#: The part of an atom a walk uses: (scalar, list, map), unused parts None.
Effective: TypeAlias = tuple[ScalarKind | None, ListType | None, MapType | None]

_NOTHING: Final[Effective] = (None, None, None)


def deduce(atom: Atom | None, value: object) -> Effective:
    """The parts of ``atom`` that apply to ``value`` (SMD's ``deduceAtom``)."""
    if atom is None:
        return _NOTHING
    if value is not MISSING and value is not None:
        if isinstance(value, str | int | float):
            if atom.scalar is not None:
                return (atom.scalar, None, None)
        elif isinstance(value, list):
            if atom.list is not None:
                return (None, atom.list, None)
        elif isinstance(value, dict) and atom.map is not None:
            return (None, None, atom.map)
    return (atom.scalar, atom.list, atom.map)


def same_effective(a: Effective, b: Effective) -> bool:
    """Whether two deductions from one atom chose the same parts."""
    return a[0] == b[0] and a[1] is b[1] and a[2] is b[2]


def invalid_atom(atom: Atom | None) -> str:
    """SMD's message for an atom that allows no kind of value."""
    name = f"named type: {atom.name}" if atom is not None and atom.name else "inlined"
    return f"schema error: invalid atom: {name}"


def scalar_error(kind: ScalarKind, value: object, prefix: str = "") -> str | None:
    """SMD's ``validateScalar``: None when ``value`` (absent and null included) fits."""
    if value is MISSING or value is None:
        return None
    # A str, not the Literal: a schema built at run time may hold any text.
    kind_name: str = kind
    if kind_name == "numeric":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{prefix}expected numeric (int or float), got {go_type(value)}"
    elif kind_name == "string":
        if not isinstance(value, str):
            return f"{prefix}expected string, got {go_sharp_v(value)}"
    elif kind_name == "boolean":
        if not isinstance(value, bool):
            return f"{prefix}expected boolean, got {go_v(value)}"
    elif kind_name == "untyped":
        if not isinstance(value, str | int | float):
            return f"{prefix}expected any scalar, got {go_v(value)}"
    else:
        return f"{prefix}unexpected scalar type in schema: {kind}"
    return None


class ElementError(Exception):
    """A list element that cannot be named (message without the ``element N:`` prefix)."""


def _go_string_list(names: tuple[str, ...]) -> str:
    # fmt's %q of a []string.
    return "[" + " ".join(go_quote(n) for n in names) + "]"


def list_element(list_type: ListType, item: JSON) -> PathElement:
    """The path element naming ``item`` in an associative list; raises
    :class:`ElementError` with SMD's text when there is none."""
    if list_type.relationship != ASSOCIATIVE:
        raise ElementError("invalid indexing of non-associative list")
    keys = list_type.keys
    if not keys:
        if isinstance(item, dict):
            raise ElementError("associative list without keys has an element that's a map type")
        if isinstance(item, list):
            raise ElementError("not supported: associative list with lists as elements")
        if item is None:
            raise ElementError(
                "associative list without keys has an element that's an explicit null"
            )
        return PathElement.of_value(item)
    if item is None:
        raise ElementError("associative list with keys may not have a null element")
    if not isinstance(item, dict):
        raise ElementError("associative list with keys may not have non-map elements")
    if len(keys) == 1 and keys[0] in item:
        return PathElement.of_key(((keys[0], item[keys[0]]),))
    fields: list[tuple[str, JSON]] = []
    for name in keys:
        if name in item:
            fields.append((name, item[name]))
            continue
        element_map = list_type.element.map
        if element_map is None:
            raise ElementError(
                f"couldn't find default value for {name}: associative list may not have "
                "non-map types"
            )
        declared = element_map.fields.get(name)
        if declared is not None and declared.default is not None:
            fields.append((name, declared.default))
    if not fields:
        raise ElementError(
            f"associative list with keys has an element that omits all key fields "
            f"{_go_string_list(keys)} (and doesn't have default values for any key fields)"
        )
    return PathElement.of_key(fields)


# --- what the quick walks share -------------------------------------------------------


class Irregular(Exception):
    """A value a quick walk leaves to the general walk (see the module note)."""


#: The exact types each scalar kind accepts, as :func:`scalar_error` accepts them from
#: ``json.loads`` (``untyped`` takes booleans too: they are ints to ``isinstance``). A
#: value of any other type, subclasses included, is irregular.
SCALAR_TYPES: Final[dict[str, frozenset[type]]] = {
    "numeric": frozenset({int, float}),
    "string": frozenset({str}),
    "boolean": frozenset({bool}),
    "untyped": frozenset({str, int, float, bool}),
}

#: Entries the table of sorted key names holds before it is emptied.
_SORTED_NAMES_BOUND: Final = 4096

#: The part of an atom a value takes (:func:`part_of`); NULL: a null, which takes the
#: whole atom.
NULL, MAP, SCALAR, LIST = range(4)


def part_of(atom: Atom, value: object) -> int:
    """Which part of ``atom`` the present value ``value`` takes, for a value valid for it
    (validation would find nothing wrong here): MAP, SCALAR, LIST, or NULL for null.
    Raises :class:`Irregular` for anything else."""
    kind = type(value)
    if kind is dict:
        if atom.map is None:
            raise Irregular
        return MAP
    if kind is list:
        if atom.list is None:
            raise Irregular
        return LIST
    if value is None:
        if atom.map is None and atom.scalar is None and atom.list is None:
            raise Irregular
        return NULL
    scalar = atom.scalar
    if scalar is None:
        raise Irregular
    allowed = SCALAR_TYPES.get(scalar)
    if allowed is None or kind not in allowed:
        raise Irregular
    return SCALAR


def whole_part(atom: Atom) -> int:
    """The part a null or absent value takes: SMD's handlers run map, scalar, list."""
    if atom.map is not None:
        return MAP
    return SCALAR if atom.scalar is not None else LIST


def pair_part(atom: Atom, lhs: object, rhs: object) -> int:
    """The part of ``atom`` two present values take together (MAP, SCALAR or LIST), where
    SMD walks both with one handler. A null takes the whole atom, which is one handler
    with a value's only when the atom has one part; other mixes (an untyped field that
    was a map and is now a string) SMD walks twice: :class:`Irregular`."""
    part = part_of(atom, lhs)
    other = part_of(atom, rhs)
    if part != other:
        single = (atom.map is not None) + (atom.scalar is not None) + (atom.list is not None) == 1
        if not single or NULL not in (part, other):
            raise Irregular
        part = other if part == NULL else part
    return whole_part(atom) if part == NULL else part


_SORTED_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {}


def _sorted_names(keys: tuple[str, ...]) -> tuple[str, ...]:
    found = _SORTED_NAMES.get(keys)
    if found is None:
        if len(_SORTED_NAMES) >= _SORTED_NAMES_BOUND:
            _SORTED_NAMES.clear()
        found = _SORTED_NAMES[keys] = tuple(sorted(keys))
    return found


def quick_element(list_type: ListType, item: object) -> PathElement:
    """:func:`list_element` for an associative list; raises :class:`Irregular` where
    that raises (and for values that are not JSON)."""
    if list_type.relationship != ASSOCIATIVE:
        raise Irregular
    keys = list_type.keys
    if keys:
        if type(item) is not dict:
            raise Irregular
        if len(keys) == 1:
            name = keys[0]
            if name in item:
                try:
                    return key_element(name, item[name])
                except TypeError:
                    raise Irregular from None
        elif all(name in item for name in keys):
            # Every key field present (a port by number and protocol): no defaults.
            try:
                return key_element_of(_sorted_names(keys), item)
            except TypeError:
                raise Irregular from None
    elif type(item) in SCALAR_TYPES["untyped"]:
        return PathElement.of_value(item)
    try:
        return list_element(list_type, item)
    except (ElementError, TypeError):
        raise Irregular from None
