"""Whether a value fits its type: structured-merge-diff's ``TypedValue.Validate``.

Design note
-----------
Kubernetes validates every object it hands to the merge engine (``AsTyped``): the applied
configuration strictly, the live and updated objects allowing duplicate list elements
(``AllowDuplicates``: stored objects may predate the schema's list types). This walk reports
what SMD reports, with its texts and paths:

* a scalar of the wrong kind (``expected numeric (int or float), got string``,
  ``expected string, got &value.valueUnstructured{Value:1}``, ``expected boolean, got
  &{1}``, ``expected any scalar, got &{[a]}``);
* a container of the wrong kind (``expected map, got &{x}``, ``expected list, got ...``);
* a map field the type does not declare and whose map has no element type (``field not
  declared in schema``; the rest of that map is not checked, as in SMD);
* an associative list element that cannot be named (``element 2: associative list with
  keys may not have a null element``; the rest of that list is not checked), and, unless
  duplicates are allowed, two elements with one name (``duplicate entries for key
  [name="a"]``);
* an atom that allows nothing (a schema error).

Null is valid for every type. Errors are listed in walk order (maps in their key order).

:func:`is_valid` is the quick walk (see :mod:`~watchcache.structured.typedwalk`): whether
there is any error at all, for the values every write validates twice. It says False for
anything it does not handle, so callers run :func:`validation_errors` then, which is the
definition; True only where that finds nothing.

Costs: one walk of the value, O(size); list elements are named once each. Callers:
:mod:`watchcache.structured.typed`, the quick walks of ``compare`` and ``merge`` (for the
insides of atomic values, which they do not walk).
"""

from __future__ import annotations

from watchcache.structured.pathelement import Path, PathElement
from watchcache.structured.schema import ASSOCIATIVE, Atom, ListType, MapType
from watchcache.structured.typedwalk import (
    SCALAR_TYPES,
    ElementError,
    Irregular,
    ValidationError,
    deduce,
    errors_at,
    invalid_atom,
    list_element,
    quick_element,
    scalar_error,
)
from watchcache.structured.value import JSON, go_v

__all__ = ["is_valid", "is_valid_map", "validation_errors"]


def is_valid(value: JSON, atom: Atom, *, allow_duplicates: bool = False) -> bool:
    """True only if :func:`validation_errors` finds nothing (False: run it to know)."""
    try:
        return _valid(value, atom, allow_duplicates)
    except (Irregular, RecursionError):
        return False


def is_valid_map(
    value: dict[str, JSON], map_type: MapType, *, allow_duplicates: bool = False
) -> bool:
    """:func:`is_valid` of a map's entries along ``map_type`` (an atomic map's insides)."""
    try:
        return _valid_map(value, map_type, allow_duplicates)
    except (Irregular, RecursionError):
        return False


def _valid(value: JSON, atom: Atom, allow_duplicates: bool) -> bool:
    kind = type(value)
    if kind is dict:
        map_type = atom.map
        return map_type is not None and _valid_map(value, map_type, allow_duplicates)
    if kind is list:
        list_type = atom.list
        return list_type is not None and _valid_list(value, list_type, allow_duplicates)
    if value is None:
        return atom.map is not None or atom.scalar is not None or atom.list is not None
    scalar = atom.scalar
    if scalar is None:
        return False
    allowed = SCALAR_TYPES.get(scalar)
    return allowed is not None and kind in allowed


def _valid_map(value: dict[str, JSON], map_type: MapType, allow_duplicates: bool) -> bool:
    fields, element = map_type.fields, map_type.element
    for key, item in value.items():
        declared = fields.get(key)
        if declared is not None:
            atom = declared.type
        elif element is None:
            return False
        else:
            atom = element
        if atom.map is not None or atom.list is not None:
            if not _valid(item, atom, allow_duplicates):
                return False
        elif item is not None:
            # A scalar field (most of them) is checked here rather than by a call.
            allowed = SCALAR_TYPES.get(atom.scalar or "")
            if allowed is None or type(item) not in allowed:
                return False
        elif atom.scalar is None:
            return False  # an atom that allows nothing
    return True


def _valid_list(value: list[JSON], list_type: ListType, allow_duplicates: bool) -> bool:
    element = list_type.element
    if list_type.relationship != ASSOCIATIVE:
        return all(_valid(item, element, allow_duplicates) for item in value)
    seen: set[PathElement] = set()
    for item in value:
        pe = quick_element(list_type, item)
        if not allow_duplicates:
            if pe in seen:
                return False
            seen.add(pe)
        if not _valid(item, element, allow_duplicates):
            return False
    return True


def validation_errors(
    value: JSON, atom: Atom, *, allow_duplicates: bool = False
) -> list[ValidationError]:
    """Every problem SMD's ``Validate`` finds in ``value`` as an ``atom``."""
    errors: list[ValidationError] = []
    _Validator(errors, allow_duplicates).walk(value, atom, ())
    return errors


class _Validator:
    __slots__ = ("allow_duplicates", "errors")

    def __init__(self, errors: list[ValidationError], allow_duplicates: bool) -> None:
        self.errors = errors
        self.allow_duplicates = allow_duplicates

    def walk(self, value: JSON, atom: Atom | None, path: Path) -> None:
        scalar, list_type, map_type = deduce(atom, value)
        if map_type is not None:
            self.map(value, map_type, path)
        elif scalar is not None:
            problem = scalar_error(scalar, value)
            if problem is not None:
                self.errors.append(errors_at(path, problem))
        elif list_type is not None:
            self.list(value, list_type, path)
        else:
            self.errors.append(errors_at(path, invalid_atom(atom)))

    def map(self, value: JSON, map_type: MapType, path: Path) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            self.errors.append(errors_at(path, f"expected map, got {go_v(value)}"))
            return
        fields, element = map_type.fields, map_type.element
        for key, item in value.items():
            declared = fields.get(key)
            child = (*path, PathElement.of_field(key))
            if declared is not None:
                self.walk(item, declared.type, child)
            elif element is None:
                self.errors.append(errors_at(child, "field not declared in schema"))
                return
            else:
                self.walk(item, element, child)

    def list(self, value: JSON, list_type: ListType, path: Path) -> None:
        if value is None:
            return
        if not isinstance(value, list):
            self.errors.append(errors_at(path, f"expected list, got {go_v(value)}"))
            return
        element = list_type.element
        if list_type.relationship != ASSOCIATIVE:
            for index, item in enumerate(value):
                self.walk(item, element, (*path, PathElement.of_index(index)))
            return
        seen: set[PathElement] = set()
        for index, item in enumerate(value):
            try:
                pe = list_element(list_type, item)
            except ElementError as error:
                # SMD stops at an element it cannot name: nothing after it can be placed.
                self.errors.append(errors_at(path, f"element {index}: {error}"))
                return
            if pe in seen and not self.allow_duplicates:
                self.errors.append(errors_at(path, f"duplicate entries for key {pe}"))
            seen.add(pe)
            self.walk(item, element, (*path, pe))
