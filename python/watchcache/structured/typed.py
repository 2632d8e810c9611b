"""Values with their types: the operations server-side apply performs on objects, as
structured-merge-diff's ``typed`` package performs them.

Design note
-----------
This module is the public face of the typed walks; each lives in a module of its own:

* :func:`validate` (:mod:`~watchcache.structured.validate`): whether a value fits its type;
* :func:`to_field_set` (:mod:`~watchcache.structured.tofieldset`): the fields a value sets;
* :func:`compare` (:mod:`~watchcache.structured.compare`): added, modified and removed
  fields between two values;
* :func:`merge` (:mod:`~watchcache.structured.merge`): one value applied over another;
* :func:`remove_items` and :func:`extract_items` (:mod:`~watchcache.structured.remove`);
* :func:`reconcile_field_set` (:mod:`~watchcache.structured.reconcile`): a recorded field
  set fitted to a changed schema.

A "typed value" is a decoded JSON value (dict, list, str, int, float, bool, None) plus the
:class:`~watchcache.structured.schema.Atom` of its root; there is no wrapper object, and the
values are never modified (results may share subtrees with the inputs).

**Errors.** Everything SMD reports as a ``ValidationErrors`` is a :class:`TypedValueError`
carrying SMD's texts and paths. Which exist, and what Kubernetes makes of them:

* validation (:func:`validate`, run by Kubernetes on every object before a merge):
  ``expected numeric (int or float), got <T>``, ``expected string, got <%#v>``,
  ``expected boolean, got <%v>``, ``expected any scalar, got <%v>``, ``expected map, got
  ...``, ``expected list, got ...``, ``field not declared in schema``, ``element N: <why
  it cannot be named>`` (``associative list with keys may not have a null element``,
  ``... non-map elements``, ``associative list with keys has an element that omits all key
  fields ["name"] (and doesn't have default values for any key fields)``, ``associative
  list without keys has an element that's a map type``, ``not supported: associative list
  with lists as elements``, ``associative list without keys has an element that's an
  explicit null``), ``duplicate entries for key [name="a"]`` (not for objects read with
  duplicates allowed), and the schema errors ``schema error: invalid atom: ...``. In an
  apply, Kubernetes wraps them as ``failed to create typed patch object (<ns>/<name>;
  <gvk>): <errors>`` (or ``typed live object``), an error without a status, so the client
  gets a 500; in an update they are logged and the managed fields are left as they were;
* compare and merge report ``lhs: ``/``rhs: ``-prefixed scalar errors when both sides are
  wrong, and the element and duplicate errors above: Kubernetes reaches them only for
  values that failed validation first.

Deep nesting beyond Python's recursion limit is a :class:`TypedValueError` too (callers
bound nesting long before: ``wire.body.MAX_DEPTH``). Costs: each operation is one walk,
linear in the values it reads. Pure; thread-safe. Callers: :mod:`watchcache.structured.updater`
and ``registry.managed_fields``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from watchcache.structured.compare import Comparison, comparison_of, quick_comparison
from watchcache.structured.fieldpath import Set
from watchcache.structured.merge import NOT_PLAIN, merge_of, quick_merge
from watchcache.structured.pathelement import PathElement
from watchcache.structured.reconcile import reconciled_field_set
from watchcache.structured.remove import extracted_items, removed_items
from watchcache.structured.schema import Atom
from watchcache.structured.tofieldset import field_set, quick_field_set
from watchcache.structured.typedwalk import TypedValueError, ValidationError
from watchcache.structured.validate import is_valid, validation_errors
from watchcache.structured.value import JSON

__all__ = [
    "Comparison",
    "TypedValueError",
    "ValidationError",
    "compare",
    "extract_items",
    "merge",
    "reconcile_field_set",
    "remove_items",
    "to_field_set",
    "validate",
]

_T = TypeVar("_T")


def _bounded(work: Callable[[], _T]) -> _T:
    try:
        return work()
    except RecursionError:
        raise TypedValueError([ValidationError("", "value is nested too deeply")]) from None


def validate(value: JSON, atom: Atom, *, allow_duplicates: bool = False) -> None:
    """Raise :class:`TypedValueError` listing every way ``value`` does not fit ``atom``
    (SMD's ``AsTyped``; ``allow_duplicates`` is its ``AllowDuplicates`` option)."""
    if is_valid(value, atom, allow_duplicates=allow_duplicates):
        return
    errors = _bounded(lambda: validation_errors(value, atom, allow_duplicates=allow_duplicates))
    if errors:
        raise TypedValueError(errors)


def to_field_set(value: JSON, atom: Atom) -> Set:
    """The fields ``value`` sets (SMD's ``ToFieldSet``)."""
    quick = quick_field_set(value, atom)
    if quick is not None:
        return quick
    return _bounded(lambda: field_set(value, atom))


def compare(lhs: JSON, rhs: JSON, atom: Atom) -> Comparison:
    """What ``rhs`` added, modified and removed relative to ``lhs`` (SMD's ``Compare``)."""
    quick = quick_comparison(lhs, rhs, atom)
    if quick is not None:
        return quick
    result, errors = _bounded(lambda: comparison_of(lhs, rhs, atom))
    if errors:
        raise TypedValueError(errors)
    return result


def merge(lhs: JSON, rhs: JSON, atom: Atom) -> JSON:
    """``rhs`` applied over ``lhs`` (SMD's ``Merge``)."""
    quick = quick_merge(lhs, rhs, atom)
    if quick is not NOT_PLAIN:
        return quick
    result, errors = _bounded(lambda: merge_of(lhs, rhs, atom))
    if errors:
        raise TypedValueError(errors)
    return result


def remove_items(value: JSON, atom: Atom, items: Set) -> JSON:
    """``value`` without the entries and list elements ``items`` names (SMD's
    ``RemoveItems``)."""
    return _bounded(lambda: removed_items(value, atom, items))


def extract_items(value: JSON, atom: Atom, items: Set, *, append_key_fields: bool = False) -> JSON:
    """Only the parts of ``value`` that ``items`` names (SMD's ``ExtractItems``); with
    ``append_key_fields`` the key fields of every list-map element on the way are kept too
    (``WithAppendKeyFields``)."""
    if append_key_fields:
        items = _with_key_fields(value, atom, items)
    return _bounded(lambda: extracted_items(value, atom, items))


def _with_key_fields(value: JSON, atom: Atom, items: Set) -> Set:
    try:
        present = to_field_set(value, atom)
    except TypedValueError:
        # SMD extracts without the key fields when the value has no field set.
        return items
    keys = Set()
    for path in items:
        if not present.has(path):
            continue
        for position, pe in enumerate(path):
            fields = pe.key
            if fields is None:
                continue
            for name, _ in fields:
                keys.insert((*path[: position + 1], PathElement.of_field(name)))
    return items.union(keys)


def reconcile_field_set(fields: Set, atom: Atom) -> Set | None:
    """``fields`` fitted to ``atom`` after a schema change (granular lists and maps that
    became atomic), or None when it already fits (SMD's ``ReconcileFieldSetWithSchema``)."""
    return _bounded(lambda: reconciled_field_set(fields, atom))
