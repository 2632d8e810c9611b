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
Costs: one walk of the value, O(size); list elements are named once each. Callers:
:mod:`watchcache.structured.typed`.
"""

from __future__ import annotations

from watchcache.structured.pathelement import Path, PathElement
from watchcache.structured.schema import ASSOCIATIVE, Atom, ListType, MapType
from watchcache.structured.typedwalk import (
    ElementError,
    ValidationError,
    deduce,
    errors_at,
    invalid_atom,
    list_element,
    scalar_error,
)
from watchcache.structured.value import JSON, go_v

__all__ = ["validation_errors"]


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
