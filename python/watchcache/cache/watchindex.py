"""Which watchers an event can concern, found without asking every watcher.

Design note
-----------
What. Offering an event to a watcher costs about half a microsecond of Python (prefix
check and two native selector calls). A kubelet watches the pods of its node
(``fieldSelector=spec.nodeName=X``); with 5,000 nodes, a cache that asked every watcher
would spend ~2.5 ms on each pod event to find the one or two that care. Kubernetes'
cacher files its watchers by namespace and name and by one *trigger* field
(``indexedWatchers``: ``allWatchers`` by namespace/name, ``valueWatchers`` by the pod's
``spec.nodeName``; docs/semantics.md §9.3) for the same reason; this is that index.

Filing. When a watcher registers it is filed in at most one place, a :class:`Filing`
chosen from what its request fixes:

* its *scope*: the first key segment below the cache's prefix that the watch's key prefix
  fixes (the namespace of ``/registry/pods/ns/``), None for a watch of the whole resource;
* its most selective *value requirement*: a field ``=`` (``==``) requirement on
  ``metadata.name`` (a watch of one object), on a trigger field the cache indexes
  (pods: ``spec.nodeName``), on ``metadata.namespace`` (only when the key prefix does not
  fix the namespace already), or a label ``=`` / ``in`` requirement; fewer values first
  (an ``in`` of three is filed under each of the three), then in that order.

A watcher with neither is *unfiled*. A filed watcher sits in one bucket per value,
keyed by (its scope, the value); buckets are grouped by *dimension* (scoped or not, label
or field or scope only, which label or field), so the dimensions in use are few however
many watchers there are.

Lookup. An event is offered to the unfiled watchers and, for each dimension in use, to
the buckets of the values its new and its previous object carry there: the event key's
first segment below the prefix for the scope, ``Item.label(key)`` for a label (an absent
label matches no ``=``/``in``), ``Item.field(name)`` for a field (an absent field reads as
"", as the native selector reads it). Each watcher is offered an event once.

Invariant, and why nothing a watcher must see is skipped: an event concerns a watcher
only if the event's key starts with the watcher's key prefix and the new or the previous
object matches its selector. A key with that prefix has the prefix's first segment as its
own; an object that matches the selector carries the filed label's or field's value in
its labels or fields. So every concerned watcher is in a bucket the lookup reads. (Fields
are read from the objects themselves, not from the key, so this holds even for an object
whose ``metadata.namespace`` disagreed with its key.) The watcher's own selector still
decides; the index only narrows who is asked. :meth:`WatcherIndex.check_invariants`
verifies the filing agrees with the buckets; tests/property/test_watch_dispatch.py
compares what is delivered against asking every watcher.

Costs: add and remove O(1) (O(values) for an ``in``); :meth:`WatcherIndex.candidates`
O(dimensions in use + unfiled + result) per event, about 1-3 µs of lookups besides the
watchers returned. Callers: :class:`~watchcache.cache.watch_cache.WatchCache` (register,
unregister, dispatch). Not thread-safe: the cache's writer owns it.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Mapping, Sequence, ValuesView
from dataclasses import dataclass
from typing import Final, Generic, Literal, TypeVar

from watchcache._core import Item
from watchcache.wire.selectors import FieldRequirement, LabelRequirement

W = TypeVar("W")

FilingKind = Literal["scope", "label", "field"]

_SCOPE: Final = "scope"
_LABEL: Final = "label"
_FIELD: Final = "field"

NAME_FIELD: Final = "metadata.name"
NAMESPACE_FIELD: Final = "metadata.namespace"

#: The trigger fields of the resources Kubernetes gives one (group, resource): its pod
#: registry indexes watchers by ``spec.nodeName`` so that each kubelet is offered the
#: events of its own node only (``pod.NodeNameTriggerFunc``).
DEFAULT_TRIGGER_FIELDS: Final[Mapping[tuple[str, str], tuple[str, ...]]] = {
    ("", "pods"): ("spec.nodeName",),
}

# Preference among value requirements with as many values (lower first): one object by
# name, then a trigger field (one node), then a label, then a whole namespace.
_RANK_NAME: Final = 0
_RANK_TRIGGER: Final = 1
_RANK_LABEL: Final = 2
_RANK_NAMESPACE: Final = 3

#: (scoped, kind, label key or field name): one family of buckets.
Dimension = tuple[bool, FilingKind, str]
#: (the scope, or None; the value): one bucket of a dimension.
BucketKey = tuple[str | None, str]


def default_trigger_fields(group: str, resource: str) -> tuple[str, ...]:
    """The fields watchers of this resource are filed by unless the cache is told
    otherwise: Kubernetes' (``spec.nodeName`` for core pods), else none."""
    return DEFAULT_TRIGGER_FIELDS.get((group, resource), ())


def key_segment(resource_prefix: str, key: str) -> str | None:
    """The first segment of ``key`` below ``resource_prefix`` when another "/" follows it
    (a namespaced object's namespace, or a key prefix's first directory), else None (a
    cluster-scoped object's key, the whole resource, or a key outside the prefix)."""
    if not key.startswith(resource_prefix):
        return None
    start = len(resource_prefix)
    end = key.find("/", start)
    return None if end < 0 else key[start:end]


@dataclass(frozen=True, slots=True)
class Filing:
    """Where one watcher is filed: the ``scope`` its key prefix fixes (None: any), and
    either ``kind`` ``"scope"`` alone (``name`` "", ``values`` ``("",)``) or the ``label``
    key or ``field`` name a requirement fixes to one of ``values``."""

    scope: str | None
    kind: FilingKind
    name: str
    values: tuple[str, ...]

    @property
    def dimension(self) -> Dimension:
        return (self.scope is not None, self.kind, self.name)


def choose_filing(
    resource_prefix: str,
    key_prefix: str,
    labels: Sequence[LabelRequirement],
    fields: Sequence[FieldRequirement],
    trigger_fields: Iterable[str] = (),
) -> Filing | None:
    """The most selective filing a watch over ``key_prefix`` with these requirements
    allows (see the module note), or None when it must be offered every event."""
    scope = key_segment(resource_prefix, key_prefix)
    triggers = frozenset(trigger_fields)
    best: tuple[tuple[int, int], FilingKind, str, tuple[str, ...]] | None = None
    for field in fields:
        if field.op != "=":
            continue
        if field.key == NAME_FIELD:
            rank = _RANK_NAME
        elif field.key in triggers:
            rank = _RANK_TRIGGER
        elif field.key == NAMESPACE_FIELD and scope is None:
            rank = _RANK_NAMESPACE
        else:
            continue
        if best is None or (1, rank) < best[0]:
            best = ((1, rank), _FIELD, field.key, (field.value,))
    for label in labels:
        if label.op not in ("=", "in") or not label.values:
            continue
        order = (len(label.values), _RANK_LABEL)
        if best is None or order < best[0]:
            best = (order, _LABEL, label.key, tuple(label.values))
    if best is not None:
        return Filing(scope, best[1], best[2], best[3])
    if scope is not None:
        return Filing(scope, _SCOPE, "", ("",))
    return None


class WatcherIndex(Generic[W]):
    """Watchers by id, filed by scope and value when their request allows it (see the
    module note). ``resource_prefix``: the cache's key prefix; ``trigger_fields``: the
    fields besides ``metadata.name`` and ``metadata.namespace`` watchers are filed by.
    O(1) add and remove (O(values) for ``in``); :meth:`candidates` is O(dimensions in
    use + unfiled + result)."""

    __slots__ = ("_all", "_dimensions", "_filing", "_prefix", "_triggers", "_unfiled")

    def __init__(self, resource_prefix: str, trigger_fields: Iterable[str] = ()) -> None:
        self._prefix = resource_prefix
        self._triggers = frozenset(trigger_fields)
        self._all: dict[int, W] = {}
        self._unfiled: dict[int, W] = {}
        self._dimensions: dict[Dimension, dict[BucketKey, dict[int, W]]] = {}
        self._filing: dict[int, Filing] = {}

    def __len__(self) -> int:
        return len(self._all)

    @property
    def trigger_fields(self) -> frozenset[str]:
        return self._triggers

    def values(self) -> ValuesView[W]:
        """A live view of every watcher (it follows later adds, removes and clears)."""
        return self._all.values()

    def items(self) -> ItemsView[int, W]:
        """Every (id, watcher)."""
        return self._all.items()

    def filing(self, watcher_id: int) -> Filing | None:
        """Where a registered watcher is filed (None: unfiled or not registered)."""
        return self._filing.get(watcher_id)

    @property
    def filed(self) -> bool:
        """Whether any watcher is filed (else :meth:`candidates` is every watcher)."""
        return bool(self._dimensions)

    def check_invariants(self) -> None:
        """Every watcher is either unfiled or in exactly the buckets of its filing, no
        bucket or dimension is empty, nothing else is filed. O(watchers · values)."""
        expected: dict[tuple[Dimension, BucketKey], set[int]] = {}
        for watcher_id, filing in self._filing.items():
            for value in filing.values:
                key = (filing.dimension, (filing.scope, value))
                expected.setdefault(key, set()).add(watcher_id)
        actual = {
            (dimension, bucket_key): set(watchers)
            for dimension, buckets in self._dimensions.items()
            for bucket_key, watchers in buckets.items()
        }
        if actual != expected or set(self._filing) | set(self._unfiled) != set(self._all):
            raise AssertionError("WatcherIndex invariant broken: filing matches the watchers")
        if set(self._filing) & set(self._unfiled):
            raise AssertionError("WatcherIndex invariant broken: a watcher is filed once")
        if any(not buckets for buckets in self._dimensions.values()):
            raise AssertionError("WatcherIndex invariant broken: no dimension is empty")

    def add(
        self,
        watcher_id: int,
        watcher: W,
        key_prefix: str,
        labels: Sequence[LabelRequirement] = (),
        fields: Sequence[FieldRequirement] = (),
    ) -> Filing | None:
        """Register a watcher over ``key_prefix`` with these selector requirements, filed
        as :func:`choose_filing` says; its filing (None: unfiled). Adding an id that is
        registered replaces that watcher."""
        self.remove(watcher_id)
        self._all[watcher_id] = watcher
        filing = choose_filing(self._prefix, key_prefix, labels, fields, self._triggers)
        if filing is None:
            self._unfiled[watcher_id] = watcher
            return None
        self._filing[watcher_id] = filing
        buckets = self._dimensions.setdefault(filing.dimension, {})
        scope = filing.scope
        for value in filing.values:
            buckets.setdefault((scope, value), {})[watcher_id] = watcher
        return filing

    def remove(self, watcher_id: int) -> None:
        """Unregister (an unknown id is ignored: a watcher can end from both sides)."""
        if self._all.pop(watcher_id, None) is None:
            return
        filing = self._filing.pop(watcher_id, None)
        if filing is None:
            del self._unfiled[watcher_id]
            return
        dimension = filing.dimension
        buckets = self._dimensions[dimension]
        scope = filing.scope
        for value in filing.values:
            bucket_key = (scope, value)
            watchers = buckets[bucket_key]
            del watchers[watcher_id]
            if not watchers:
                del buckets[bucket_key]
        if not buckets:
            del self._dimensions[dimension]

    def clear(self) -> None:
        self._all.clear()
        self._unfiled.clear()
        self._dimensions.clear()
        self._filing.clear()

    def candidates(self, key: str, new: Item | None, old: Item | None) -> Iterable[W]:
        """Every watcher the change of ``key`` from ``old`` to ``new`` (None: no such
        object, as for an ADDED or a DELETED) may concern, each once."""
        dimensions = self._dimensions
        if not dimensions:
            return self._all.values()
        unfiled = self._unfiled
        found = dict(unfiled) if unfiled else {}
        # The segment is read once per event, and only when a dimension needs it; labels
        # and fields one value at a time (``Item.label``/``Item.field``), never as whole
        # dicts: at 100 events/s the process idles between events, and every allocation
        # and first touch of memory is slow.
        segment: str | None = None
        segment_read = False
        for (scoped, kind, name), buckets in dimensions.items():
            scope = None
            if scoped:
                if not segment_read:
                    segment = key_segment(self._prefix, key)
                    segment_read = True
                if segment is None:
                    continue
                scope = segment
            if kind == _SCOPE:
                hit = buckets.get((scope, ""))
                if hit:
                    found.update(hit)
                continue
            first: str | None
            second: str | None
            if kind == _LABEL:
                first = None if new is None else new.label(name)
                second = None if old is None else old.label(name)
            else:
                first = None if new is None else new.field(name) or ""
                second = None if old is None else old.field(name) or ""
            if first is not None:
                hit = buckets.get((scope, first))
                if hit:
                    found.update(hit)
            if second is not None and second != first:
                hit = buckets.get((scope, second))
                if hit:
                    found.update(hit)
        return found.values()
