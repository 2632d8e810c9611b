"""Field ownership on writes: structured-merge-diff's ``merge.Updater``, the engine of
server-side apply.

Design note
-----------
Two operations, as kube-apiserver runs them on every write of a resource:

* :func:`update` (create, update, patch): whatever the write changed now belongs to its
  manager, and to nobody else. Other managers lose the fields it modified, added or
  removed; its own set gains the modified and added ones and loses the removed ones.
* :func:`apply`: the configuration is merged over the live object; the applier comes to own
  exactly the fields its configuration sets (``to_field_set``); fields it applied last
  time and no longer applies are pruned from the object unless another manager owns them;
  then the change is attributed as by an update, except that taking a field another
  manager owns is a conflict (:class:`ConflictsError`) unless ``force`` is set, in which
  case that manager loses it.

Both first fit every manager's recorded set to the current schema
(``reconcile_field_set``), drop managers left owning nothing, and validate their inputs as
Kubernetes does (the configuration strictly; the live and new objects allowing duplicate
list elements), raising :class:`TypedValueError` with ``operand`` saying which input was
wrong.

**Versions.** Kubernetes gives SMD a converter between API versions; we have none, so a
set recorded at another version is read as if recorded at this one (SMD with an identity
converter: nothing is ever "missing"). ``ignored`` is the set Kubernetes passes as the
reset fields of the endpoint (``status`` for the main resource, everything else for
``/status``), applied alike to every version: changes there are attributed to nobody, and
an applier never owns them.

**No-op apply.** When the merged and pruned object equals the live one, :func:`apply`
returns :data:`UNCHANGED` for the object (SMD's nil; not None, which a prune can leave)
together with the managers, which may still have changed (a new applier, a new version, a
forced takeover of nothing).

**Conflicts** are ordered by manager name, then by path in set order. (SMD lists them in
Go map order, which is random; Kubernetes' message groups them by sorted manager.)

Costs per write: an update validates both objects and compares them in one quick walk
(``compare.quick_comparison``; the parts that did not change cost a C comparison and a
walk of the new side); an apply validates and merges in one (``merge.quick_merge``) and
compares the result without walking what the configuration left alone. Objects the quick
walks do not take (invalid ones, duplicate list elements) are validated and compared by
the general walks, as before. Reconciliation costs a walk of each manager's set the first
time it meets the type (``reconcile``'s memo on shared sets); the set algebra costs what
it changes. When the applier owned something before, the prune adds a few walks and field
sets of the object. The inputs are not modified; the returned managers are a new dict.
Callers: ``registry.managed_fields``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from watchcache.structured.compare import Comparison, quick_comparison
from watchcache.structured.fieldpath import ManagedFields, Path, Set, VersionedSet
from watchcache.structured.merge import NOT_PLAIN, quick_merge
from watchcache.structured.pathelement import path_string
from watchcache.structured.schema import Atom
from watchcache.structured.typed import (
    TypedValueError,
    compare,
    merge,
    reconcile_field_set,
    remove_items,
    to_field_set,
    validate,
)
from watchcache.structured.typedwalk import Operand
from watchcache.structured.value import JSON, values_equal
from watchcache.wire.gostrconv import go_quote

__all__ = ["UNCHANGED", "Conflict", "ConflictsError", "Unchanged", "apply", "update"]


class Unchanged:
    """The object :func:`apply` answers when the merged object equals the live one (SMD's
    nil object). Not None: an apply may also leave the whole object null."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = Unchanged()


@dataclass(frozen=True, slots=True)
class Conflict:
    """``manager`` owns ``path``, which the applier wants to change."""

    manager: str
    path: Path

    def __str__(self) -> str:
        return f"conflict with {go_quote(self.manager)}: {path_string(self.path)}"


class ConflictsError(Exception):
    """An apply would take fields other managers own (SMD's ``merge.Conflicts``)."""

    def __init__(self, conflicts: Iterable[Conflict]) -> None:
        self.conflicts = tuple(conflicts)
        super().__init__(_conflicts_text(self.conflicts))


def _conflicts_text(conflicts: tuple[Conflict, ...]) -> str:
    # SMD's Conflicts.Error(): one conflict alone, or grouped by sorted manager.
    if len(conflicts) == 1:
        return str(conflicts[0])
    by_manager: dict[str, list[str]] = {}
    for conflict in conflicts:
        by_manager.setdefault(conflict.manager, []).append(path_string(conflict.path))
    lines = []
    for manager in sorted(by_manager):
        lines.append(f"conflicts with {go_quote(manager)}:")
        lines.extend(f"- {path}" for path in by_manager[manager])
    return "\n".join(lines)


def _checked(value: JSON, atom: Atom, operand: Operand, allow_duplicates: bool) -> None:
    try:
        validate(value, atom, allow_duplicates=allow_duplicates)
    except TypedValueError as error:
        raise error.for_operand(operand) from None


def _reconciled(managers: Mapping[str, VersionedSet], atom: Atom) -> ManagedFields:
    out: ManagedFields = {}
    for manager, versioned in managers.items():
        fitted = reconcile_field_set(versioned.set, atom)
        out[manager] = (
            versioned
            if fitted is None
            else VersionedSet(fitted, versioned.api_version, versioned.applied)
        )
    return out


def _attribute(
    *,
    live: JSON,
    new: JSON,
    managers: ManagedFields,
    manager: str,
    atom: Atom,
    ignored: Set | None,
    force: bool,
    comparison: Comparison | None = None,
) -> Comparison:
    """SMD's ``Updater.update``: other managers lose what changed (a conflict for
    ``manager`` unless ``force``), empty managers go; ``managers`` is changed in place.
    ``comparison``: ``compare(live, new)`` when the caller has it already."""
    if comparison is None:
        comparison = compare(live, new, atom)
    changes = comparison.excluding(ignored)
    changed = changes.modified.union(changes.added)
    taken: dict[str, Set] = {}
    for other, versioned in managers.items():
        if other == manager:
            continue
        conflicting = versioned.set.intersection(changed)
        if conflicting:
            taken[other] = conflicting
    if taken and not force:
        raise ConflictsError(
            Conflict(other, path) for other in sorted(taken) for path in taken[other]
        )
    removed = changes.removed
    for other, versioned in list(managers.items()):
        if other == manager:
            continue
        kept = versioned.set
        if other in taken:
            kept = kept.difference(taken[other])
        if removed:
            kept = kept.difference(removed)
        if kept is not versioned.set:
            managers[other] = VersionedSet(kept, versioned.api_version, versioned.applied)
    for name in [name for name, versioned in managers.items() if versioned.set.is_empty()]:
        del managers[name]
    return changes


def update(  # noqa: PLR0917 (SMD's argument order, which callers use)
    live: JSON,
    new: JSON,
    version: str,
    managers: Mapping[str, VersionedSet],
    manager: str,
    atom: Atom,
    *,
    ignored: Set | None = None,
) -> tuple[JSON, ManagedFields]:
    """Record a create, update or patch by ``manager`` that turned ``live`` (None for a
    create) into ``new``; returns ``new`` and the managers after it (SMD's
    ``Updater.Update``)."""
    # One walk validates both objects and compares them; only objects it leaves to the
    # general walks are validated apart (raising SMD's errors) and compared after.
    comparison = quick_comparison(live, new, atom)
    if comparison is None:
        _checked(new, atom, "new", True)
        _checked(live, atom, "live", True)
    fields = _reconciled(managers, atom)
    changes = _attribute(
        live=live,
        new=new,
        managers=fields,
        manager=manager,
        atom=atom,
        ignored=ignored,
        force=True,
        comparison=comparison,
    )
    previous = fields.get(manager)
    owned = Set() if previous is None else previous.set
    owned = owned.difference(changes.removed).union(changes.modified).union(changes.added)
    if ignored is not None:
        owned = owned.recursive_difference(ignored)
    if owned.is_empty():
        fields.pop(manager, None)
    else:
        fields[manager] = VersionedSet(owned, version, False)
    return new, fields


def apply(  # noqa: PLR0917 (SMD's argument order, which callers use)
    live: JSON,
    config: JSON,
    version: str,
    managers: Mapping[str, VersionedSet],
    manager: str,
    atom: Atom,
    *,
    force: bool,
    ignored: Set | None = None,
) -> tuple[JSON, ManagedFields]:
    """Apply ``config`` for ``manager`` to ``live`` (None for a create): returns the new
    object (:data:`UNCHANGED` when it equals ``live``) and the managers after it (SMD's
    ``Updater.Apply``). Raises :class:`ConflictsError` when ``config`` changes fields
    other managers own and ``force`` is false."""
    # One walk validates both inputs and merges them; inputs it leaves to the general
    # walks are validated apart (raising SMD's errors) and merged after.
    merged = quick_merge(live, config, atom)
    # Values the quick walk merged are valid and plain, so comparing them may skip what
    # did not change; a pruned value may hold nulls where elements were, so not that.
    plain = merged is not NOT_PLAIN
    if not plain:
        _checked(config, atom, "config", False)
        _checked(live, atom, "live", True)
    fields = _reconciled(managers, atom)
    if not plain:
        merged = merge(live, config, atom)
    previous = fields.get(manager)
    applied = to_field_set(config, atom)
    if ignored is not None:
        applied = applied.recursive_difference(ignored)
    fields[manager] = VersionedSet(applied, version, True)
    if previous is not None and not _keeps_every_field(previous, applied, version):
        merged = _prune(merged, fields, previous, atom)
        plain = False
    _attribute(
        live=live,
        new=merged,
        managers=fields,
        manager=manager,
        atom=atom,
        ignored=ignored,
        force=force,
        comparison=quick_comparison(live, merged, atom, trusted=plain),
    )
    if _unchanged(live, merged, plain):
        return UNCHANGED, fields
    return merged, fields


def _unchanged(live: JSON, merged: JSON, plain: bool) -> bool:
    """``values_equal(live, merged)``, answered in C where it can be: Python's equality
    tells different values apart (it only takes ``true`` for ``1``); for values the quick
    walks took (exact JSON types, so their text is a function of their value), equal
    texts tell equal ones."""
    try:
        if live != merged:
            return False
        if plain and json.dumps(live, allow_nan=False) == json.dumps(merged, allow_nan=False):
            return True
    except (ValueError, RecursionError):
        pass  # NaN, which equals nothing, not even itself; or nesting C will not follow
    return values_equal(live, merged)


def _keeps_every_field(last: VersionedSet, applied: Set, version: str) -> bool:
    """Whether an apply of ``applied`` at ``version`` leaves out none of the fields its
    manager applied ``last`` time. Pruning removes only fields the manager applied last
    time and leaves out now, so then it removes nothing: the usual re-apply skips
    :func:`_prune`'s six walks of the object (tests/unit/test_structured_prune.py checks
    that they would change nothing)."""
    if last.set.is_empty():
        return True
    return last.api_version == version and last.set.difference(applied).is_empty()


def _prune(merged: JSON, managers: ManagedFields, last: VersionedSet, atom: Atom) -> JSON:
    """SMD's ``prune``: remove what the applier applied last time and not now, unless
    someone (the applier's new configuration included) owns it; then put back what the
    removal took with it that the applier never owned."""
    last_applied = last.set
    pruned = remove_items(merged, atom, last_applied.ensure_named_fields_are_members(atom))
    # addBackOwnedItems: one pass per version of the managers' sets (their union), the
    # last applied version first as in SMD, then the others (sorted: SMD's order is Go's
    # map order). With no conversion every pass reads the same object.
    owned_by_version: dict[str, Set] = {}
    for versioned in managers.values():
        known = owned_by_version.get(versioned.api_version)
        owned_by_version[versioned.api_version] = (
            versioned.set if known is None else known.union(versioned.set)
        )
    versions = sorted(owned_by_version, key=lambda v: (v != last.api_version, v))
    for version in versions:
        owned = owned_by_version[version].ensure_named_fields_are_members(atom)
        merged_fields = to_field_set(merged, atom).ensure_named_fields_are_members(atom)
        pruned_fields = to_field_set(pruned, atom).ensure_named_fields_are_members(atom)
        pruned = remove_items(merged, atom, merged_fields.difference(pruned_fields.union(owned)))
    # addBackDanglingItems: only what the applier had owned may stay removed.
    merged_fields = to_field_set(merged, atom).ensure_named_fields_are_members(atom)
    pruned_fields = to_field_set(pruned, atom).ensure_named_fields_are_members(atom)
    dangling = merged_fields.difference(pruned_fields)
    return remove_items(
        merged, atom, dangling.intersection(last_applied.ensure_named_fields_are_members(atom))
    )
