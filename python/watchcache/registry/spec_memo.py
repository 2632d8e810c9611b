"""What is derived from a :class:`ResourceSpec` once and asked for again, kept per spec.

A custom kind's compiled schema is asked for by the CRD controller (to refuse a version
whose schema is not structural before serving it), by the custom-resource strategy that
then serves it, and by server-side apply through the kind's apply type; each derivation is
linear in the schema (a large CRD's takes milliseconds). :class:`SpecMemo` derives it on
the first ask and hands the same result to the later ones.

Keyed by the spec object, not by its value: a spec holds its schema as nested dicts (not
hashable, and costly to compare), and a CRD's change makes new spec objects anyway. The
memo keeps each spec alive beside its result, so an id it remembers is never reused by
another object. Bounded to the ``size`` specs asked for last; a derivation that raises
is not remembered. Thread-safe: server-side apply runs in worker threads; two threads that
miss together both derive, and the last result is kept (the derivations are pure).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from watchcache.registry.resources import ResourceSpec

T = TypeVar("T")


class SpecMemo(Generic[T]):
    """``derive(spec)``, computed once per spec object (see the module note)."""

    def __init__(self, derive: Callable[[ResourceSpec], T], size: int) -> None:
        if size < 1:
            raise ValueError(f"a SpecMemo keeps at least one spec, not {size}")
        self._derive = derive
        self._size = size
        # id(spec) -> (the spec, its result). Newest last.
        self._known: OrderedDict[int, tuple[ResourceSpec, T]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._known)

    def __call__(self, spec: ResourceSpec) -> T:
        key = id(spec)
        with self._lock:
            known = self._known.get(key)
            if known is not None and known[0] is spec:
                self._known.move_to_end(key)
                return known[1]
        result = self._derive(spec)
        with self._lock:
            self._known[key] = (spec, result)
            self._known.move_to_end(key)
            while len(self._known) > self._size:
                self._known.popitem(last=False)
        return result
