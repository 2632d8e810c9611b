"""Which secondary index a LIST reads its candidates through, if any.

Design note
-----------
The engine keeps secondary indexes inside the persistent tree (``Tree(indexes=...)``,
``cpp/include/watchcache/secondary_index.hpp``): every snapshot carries them as of its own
version, and ``scan_index`` returns exactly the page ``scan`` would — the same items in key
order, the same ``next_key`` and ``remaining`` — while examining only the items whose
indexed value is one of the requested ones. So, unlike Kubernetes' cacher (docs/semantics.md
§9.2), an index serves every cache route: the latest state, Exact and legacy-exact reads,
and continued pages, and the continue tokens are the ones a scan would give (the token is
the last returned key, whatever read it), so tokens pass between indexed and unindexed
servers unchanged.

A requirement can use an index when it confines every matching object to a known set of
values of an indexed name:

* a field ``=`` (``==``) requirement on an indexed field — the index holds every item,
  an absent field under ``""`` as the selector reads it, so ``spec.nodeName=`` (the
  scheduler's unscheduled pods) is indexed too; ``!=`` is not (it matches almost all);
* a label ``=`` or ``in`` requirement on an indexed label key — a label index holds only
  the items that have the label, and those requirements match only such items.

The whole selector still goes to the scan: the index narrows which items are examined, the
selector decides, so a selector with several requirements is exact whichever is chosen.
Among several usable requirements the one with the fewest candidates in the request's key
range is taken (``count_index``, O(v log n) each from the index's subtree counts);
Kubernetes takes the first index it finds.

Exact counts (``remainingItemCount`` for a filtered page, which Kubernetes never sends):
when the selector is the chosen requirement alone, the count of matching items after the
page is ``count_index`` from the page's last key, O(v log n); otherwise it takes another
pass over the rest of the candidates (or of the prefix, without an index).
:func:`remaining_matches` is that rule.

Callers: :class:`~watchcache.cache.watch_cache.WatchCache` (``_read``). Pure functions over
a snapshot; no state.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from watchcache.wire.selectors import FieldRequirement, LabelRequirement

if TYPE_CHECKING:
    from watchcache._core import ScanResult, Selector, Snapshot

#: An index as the engine names it: ``("field", "spec.nodeName")``, ``("label", "app")``.
IndexName = tuple[str, str]

FIELD: Final = "field"
LABEL: Final = "label"


@dataclass(frozen=True, slots=True)
class IndexChoice:
    """Read the candidates through index ``(source, name)``: the items whose value there is
    one of ``values``. ``alone``: the selector is this requirement and nothing else, so
    every candidate matches (exact counts come from the index)."""

    source: str  #: "field" or "label"
    name: str
    values: tuple[str, ...]
    alone: bool


def usable_requirements(
    labels: Sequence[LabelRequirement],
    fields: Sequence[FieldRequirement],
    declared: Collection[IndexName],
) -> list[IndexChoice]:
    """Every requirement of the selector that confines matches to values of a declared
    index (see the module note), in selector order: fields first, then labels. O(r)."""
    alone = len(labels) + len(fields) == 1
    found: list[IndexChoice] = []
    for field in fields:
        if field.op == "=" and (FIELD, field.key) in declared:
            found.append(IndexChoice(FIELD, field.key, (field.value,), alone))
    for label in labels:
        if label.op in ("=", "in") and (LABEL, label.key) in declared:
            found.append(IndexChoice(LABEL, label.key, label.values, alone))
    return found


def choose_index(
    snapshot: Snapshot,
    key_prefix: str,
    labels: Sequence[LabelRequirement],
    fields: Sequence[FieldRequirement],
    declared: Collection[IndexName],
) -> tuple[IndexChoice, int] | None:
    """The index a LIST of ``key_prefix`` in ``snapshot`` with this selector reads through,
    with its number of candidates in the prefix, or None for a plain scan. O(r + u·v log n)
    for u usable requirements of v values (nothing is counted when none is usable)."""
    usable = usable_requirements(labels, fields, declared)
    best: tuple[IndexChoice, int] | None = None
    for choice in usable:
        candidates = snapshot.count_index(
            choice.source, choice.name, choice.values, prefix=key_prefix
        )
        if best is None or candidates < best[1]:
            best = (choice, candidates)
    return best


def scan_page(
    snapshot: Snapshot,
    key_prefix: str,
    choice: IndexChoice | None,
    *,
    start_key: str | None = None,
    after_key: str | None = None,
    limit: int = 0,
    selector: Selector | None,
) -> ScanResult:
    """One page from ``start_key`` (or after ``after_key``), through ``choice``'s index or
    by a scan of the prefix: the same result either way (``scan_index``'s contract)."""
    if choice is None:
        return snapshot.scan(
            key_prefix, start_at=start_key, start_after=after_key, limit=limit, selector=selector
        )
    return snapshot.scan_index(
        choice.source,
        choice.name,
        choice.values,
        prefix=key_prefix,
        start_at=start_key,
        start_after=after_key,
        limit=limit,
        selector=selector,
    )


def remaining_matches(
    snapshot: Snapshot,
    key_prefix: str,
    choice: IndexChoice | None,
    last_key: str,
    selector: Selector,
) -> int:
    """How many items after ``last_key`` in the prefix the selector accepts: O(v log n)
    when the selector is the indexed requirement alone, else one more pass over the
    candidates after the page (the prefix's rest without an index)."""
    if choice is not None and choice.alone:
        return snapshot.count_index(
            choice.source, choice.name, choice.values, prefix=key_prefix, start_after=last_key
        )
    return len(scan_page(snapshot, key_prefix, choice, after_key=last_key, selector=selector))
