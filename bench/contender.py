"""The implementations the engine benchmarks compare, each behind one small interface.

STYLE asks for one suite over several implementations: every benchmark in
``test_bench_engine.py`` is written once against ``Contender`` and parametrized over
``CONTENDERS``. Each contender does an operation the way a careful Python programmer would
with that structure (its honest cost, not a strawman):

=================  =====================  ===================  ==========================
contender          snapshot               ordered scan          prefix count
=================  =====================  ===================  ==========================
watchcache         ``Tree.snapshot()``    ``Snapshot.scan``     ``count_prefix`` (O(log n))
SortedDict         ``.copy()`` (O(n))     ``irange`` + islice   two ``bisect_left``
OOBTree            a copy (O(n))          ``items(min=)`` +     ``len(keys(min, max))``
                                          islice
dict               ``.copy()`` (O(n))     sort all keys         startswith over all keys
immutables.Map     the map itself (free)  sort all keys         startswith over all keys
=================  =====================  ===================  ==========================

``BTrees.OOBTree`` (ZODB's B-tree) has no O(1) snapshot: outside a ZODB database the only
way to keep an old state while writing is to copy the tree, so its snapshot is
``OOBTree(tree)``.

Cheap operations (snapshot, get, put, count_prefix) are exposed as attributes holding the
thinnest callable the structure allows (a bound method where possible), so a timed loop
measures the call a user would write plus nothing of ours. Reads go to ``reader``: for
watchcache a Snapshot taken at load time (so every later write runs with an older snapshot
alive), for immutables.Map the map as loaded, for dict and SortedDict the live structure
(a copy would read the same).

Imports of the structures are lazy so one missing package (or an unbuilt native module)
skips that contender instead of breaking the run: see ``Contender.unavailable``.
"""

from __future__ import annotations

import abc
import importlib
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sized
from itertools import islice, repeat
from typing import Any, ClassVar

RENDER_HEAD = b'{"kind":"PodList","apiVersion":"v1","metadata":{},"items":['
RENDER_TAIL = b"]}"

Items = list[tuple[str, bytes]]


def prefix_end(prefix: str) -> str:
    """The smallest string above every string starting with ``prefix`` (non-empty, last
    character below U+10FFFF), so ``[prefix, prefix_end(prefix))`` is the prefix range."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class Contender(abc.ABC):
    """One implementation loaded with one workload. Single-threaded; not for production."""

    #: Shown in tables and test ids.
    name: ClassVar[str]
    #: Module whose absence makes this contender unavailable.
    module: ClassVar[str]

    #: Take a snapshot (whatever the structure offers as one) and return it.
    snapshot: Callable[[], Sized]
    #: Set an existing key to a new value.
    put: Callable[[str, bytes], object]
    #: Value of an existing key, read from ``reader``.
    get: Callable[[str], bytes | None]
    #: Number of keys with this prefix, read from ``reader``.
    count_prefix: Callable[[str], int]

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this contender cannot run here, or None when it can."""
        try:
            importlib.import_module(cls.module)
        except ImportError as exc:
            return f"{cls.name}: {exc}"
        return None

    @classmethod
    def version(cls) -> str:
        mod = importlib.import_module(cls.module)
        return str(getattr(mod, "__version__", "?"))

    @staticmethod
    @abc.abstractmethod
    def construct(items: Items) -> Sized:
        """Build the bare structure from pairs in any order (the "build" benchmark)."""

    @classmethod
    def construct_sorted(cls, items: Items) -> Sized:
        """Build from pairs in ascending key order; defaults to ``construct``."""
        return cls.construct(items)

    @classmethod
    @abc.abstractmethod
    def load(cls, items: Items) -> Contender:
        """Build from ascending pairs and wrap the result for the read/write benchmarks."""

    @abc.abstractmethod
    def scan_items(self, start: str, limit: int) -> Items:
        """Up to ``limit`` (key, value) pairs from ``start`` (inclusive), ascending."""

    @abc.abstractmethod
    def scan_rendered(self, start: str, limit: int) -> bytes:
        """The same pairs as a Kubernetes list body: RENDER_HEAD, values joined by commas,
        RENDER_TAIL (values are JSON objects already)."""

    @abc.abstractmethod
    def iter_items(self) -> Iterator[tuple[str, bytes]]:
        """Every (key, value) pair in ascending key order."""


class WatchcacheContender(Contender):
    name = "watchcache"
    module = "watchcache._core"

    def __init__(self, tree: Any) -> None:
        from watchcache import _core

        assert isinstance(tree, _core.Tree)
        self.tree = tree
        self.reader = tree.snapshot()
        self.snapshot = tree.snapshot
        self.put = tree.__setitem__
        self.get = self.reader.get
        self.count_prefix = self.reader.count_prefix

    @staticmethod
    def construct(items: Items) -> Sized:
        from watchcache import _core

        return _core.Tree(items)

    @classmethod
    def construct_sorted(cls, items: Items) -> Sized:
        from watchcache import _core

        return _core.Tree.from_sorted(items)

    @classmethod
    def load(cls, items: Items) -> Contender:
        return cls(cls.construct_sorted(items))

    def scan_items(self, start: str, limit: int) -> Items:
        return self.reader.scan(start_at=start, limit=limit).items()

    def scan_rendered(self, start: str, limit: int) -> bytes:
        return self.reader.scan(start_at=start, limit=limit).render("PodList", "v1")

    def iter_items(self) -> Iterator[tuple[str, bytes]]:
        return self.reader.irange_items()


class SortedDictContender(Contender):
    name = "SortedDict"
    module = "sortedcontainers"

    def __init__(self, sd: Any) -> None:
        self.sd = sd
        self.snapshot = sd.copy
        self.put = sd.__setitem__
        self.get = sd.get
        self.count_prefix = self._count_prefix

    @staticmethod
    def construct(items: Items) -> Sized:
        from sortedcontainers import SortedDict

        sd: Sized = SortedDict(items)
        return sd

    @classmethod
    def load(cls, items: Items) -> Contender:
        return cls(cls.construct_sorted(items))

    def _count_prefix(self, prefix: str) -> int:
        bisect = self.sd.bisect_left
        return int(bisect(prefix_end(prefix)) - bisect(prefix))

    def scan_items(self, start: str, limit: int) -> Items:
        sd = self.sd
        return [(k, sd[k]) for k in islice(sd.irange(minimum=start), limit)]

    def scan_rendered(self, start: str, limit: int) -> bytes:
        sd = self.sd
        values = [sd[k] for k in islice(sd.irange(minimum=start), limit)]
        return b"".join((RENDER_HEAD, b",".join(values), RENDER_TAIL))

    def iter_items(self) -> Iterator[tuple[str, bytes]]:
        return iter(self.sd.items())


class OOBTreeContender(Contender):
    name = "OOBTree"
    module = "BTrees.OOBTree"

    def __init__(self, tree: Any) -> None:
        self.tree = tree
        self.snapshot = self._copy
        self.put = tree.__setitem__
        self.get = tree.get
        self.count_prefix = self._count_prefix

    @classmethod
    def version(cls) -> str:
        from importlib.metadata import version

        return version("BTrees")

    @staticmethod
    def construct(items: Items) -> Sized:
        from BTrees.OOBTree import OOBTree

        tree = OOBTree()
        tree.update(items)
        built: Sized = tree
        return built

    @classmethod
    def load(cls, items: Items) -> Contender:
        return cls(cls.construct_sorted(items))

    def _copy(self) -> Sized:
        copy: Sized = type(self.tree)(self.tree)
        return copy

    def _count_prefix(self, prefix: str) -> int:
        return len(self.tree.keys(min=prefix, max=prefix_end(prefix), excludemax=True))

    def scan_items(self, start: str, limit: int) -> Items:
        return list(islice(self.tree.items(min=start), limit))

    def scan_rendered(self, start: str, limit: int) -> bytes:
        values = islice(self.tree.values(min=start), limit)
        return b"".join((RENDER_HEAD, b",".join(values), RENDER_TAIL))

    def iter_items(self) -> Iterator[tuple[str, bytes]]:
        return iter(self.tree.items())


class UnorderedContender(Contender):
    """A hash map: ordered reads sort every key first (O(n log n) per scan), prefix counts
    test every key. Subclasses say what ``reader`` is."""

    def __init__(self, reader: Mapping[str, bytes]) -> None:
        self.reader = reader
        self.count_prefix = self._count_prefix

    def _count_prefix(self, prefix: str) -> int:
        return sum(map(str.startswith, self.reader, repeat(prefix)))

    def _page(self, start: str, limit: int) -> list[str]:
        keys = sorted(self.reader)
        i = bisect_left(keys, start)
        return keys[i : i + limit]

    def scan_items(self, start: str, limit: int) -> Items:
        m = self.reader
        return [(k, m[k]) for k in self._page(start, limit)]

    def scan_rendered(self, start: str, limit: int) -> bytes:
        m = self.reader
        values = [m[k] for k in self._page(start, limit)]
        return b"".join((RENDER_HEAD, b",".join(values), RENDER_TAIL))

    def iter_items(self) -> Iterator[tuple[str, bytes]]:
        keys = sorted(self.reader)
        return zip(keys, map(self.reader.__getitem__, keys), strict=True)


class DictContender(UnorderedContender):
    name = "dict"
    module = "builtins"

    def __init__(self, d: dict[str, bytes]) -> None:
        super().__init__(d)
        self.snapshot = d.copy
        self.put = d.__setitem__
        self.get = d.get

    @classmethod
    def version(cls) -> str:
        import platform

        return platform.python_version()

    @staticmethod
    def construct(items: Items) -> Sized:
        return dict(items)

    @classmethod
    def load(cls, items: Items) -> Contender:
        return cls(dict(items))


class ImmutablesContender(UnorderedContender):
    """A persistent HAMT: a snapshot is the map itself, a put returns a new map."""

    name = "immutables.Map"
    module = "immutables"

    def __init__(self, m: Any) -> None:
        import immutables

        assert isinstance(m, immutables.Map)
        super().__init__(m)
        self.live: immutables.Map[str, bytes] = m
        self.snapshot = self._current
        self.put = self._set
        self.get = m.get

    def _current(self) -> Sized:
        return self.live

    def _set(self, key: str, value: bytes) -> None:
        self.live = self.live.set(key, value)

    @staticmethod
    def construct(items: Items) -> Sized:
        import immutables

        m: immutables.Map[str, bytes] = immutables.Map(items)
        return m

    @classmethod
    def load(cls, items: Items) -> Contender:
        return cls(cls.construct(items))


#: In table order: the engine first, then peers from most to least alike.
CONTENDERS: dict[str, type[Contender]] = {
    c.name: c
    for c in (
        WatchcacheContender,
        SortedDictContender,
        OOBTreeContender,
        DictContender,
        ImmutablesContender,
    )
}
PEERS = [name for name in CONTENDERS if name != WatchcacheContender.name]


def check_scan(contender: Contender, keys: list[str], start: str, limit: int) -> None:
    """Raise AssertionError unless a scan from ``start`` returns exactly the next ``limit``
    keys of ``keys`` (ascending) with the values ``get`` reports. Run once per benchmark,
    outside the timed loop, so every contender is shown to do the same work."""
    i = bisect_left(keys, start)
    want = keys[i : i + limit]
    got = contender.scan_items(start, limit)
    assert [k for k, _ in got] == want, f"{contender.name}: scan keys differ"
    assert all(v == contender.get(k) for k, v in got), f"{contender.name}: scan values differ"
