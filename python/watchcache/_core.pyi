"""Stubs for the native engine ``watchcache._core`` (kept in sync by tests/unit/test_stubs.py).

Keys are ``str`` and ordered by their UTF-8 bytes (the order etcd and Go use). Values are
``bytes``. Every method states its cost; n is the number of items, k the number returned.
"""

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from typing_extensions import Buffer

__version__: str
#: Node fan-out the extension was compiled with (leaf and internal capacity).
FANOUT: int

class Item(Buffer):
    """An immutable entry. Supports the buffer protocol: ``memoryview(item)`` is the value,
    zero-copy, and keeps the item alive."""

    def __init__(
        self,
        key: str,
        value: bytes | bytearray | memoryview,
        mod_revision: int = 0,
        labels: Mapping[str, str] | None = None,
        fields: Mapping[str, str] | None = None,
    ) -> None: ...
    @property
    def key(self) -> str: ...
    @property
    def value(self) -> bytes: ...
    @property
    def mod_revision(self) -> int: ...
    @property
    def labels(self) -> dict[str, str]: ...
    @property
    def fields(self) -> dict[str, str]: ...
    @property
    def nbytes(self) -> int:
        """Bytes of memory this item occupies in the engine (header, key, value, maps)."""
    def label(self, name: str, /) -> str | None:
        """The value of label ``name``, None when absent."""
    def field(self, name: str, /) -> str | None:
        """The value of field ``name``, None when absent."""
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __release_buffer__(self, buffer: memoryview, /) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

class Selector:
    """A compiled label + field selector, evaluated natively (GIL released) during scans.

    ``labels``: ``(key, op, values)`` with op one of ``"="`` (values has one entry),
    ``"!="``, ``"in"``, ``"notin"``, ``"exists"``, ``"!"`` (does not exist; values empty),
    ``"gt"``, ``"lt"`` (one integer value). ``!=`` and ``notin`` match items that lack the key.
    ``fields``: ``(key, op, value)`` with op ``"="`` or ``"!="``; an absent field reads as ``""``
    (so does the empty field name, which Kubernetes' field grammar allows).
    All requirements must hold (AND). An empty selector matches everything.
    Raises ValueError for an unknown op, a wrong number of values or an empty label key.
    """

    def __init__(
        self,
        labels: Sequence[tuple[str, str, Sequence[str]]] = (),
        fields: Sequence[tuple[str, str, str]] = (),
    ) -> None: ...
    @property
    def empty(self) -> bool: ...
    def matches(
        self, labels: Mapping[str, str], fields: Mapping[str, str] | None = None
    ) -> bool: ...
    def matches_item(self, item: Item, /) -> bool: ...

class ScanResult:
    """Items of one scan, kept alive by the snapshot the result holds.

    A scan is *cut* when it stops because ``limit`` selected items were found. Only a cut scan
    continues (as a Kubernetes page with a continue token does): then ``next_key`` is
    ``last_key + "\\0"`` if at least one item of the scanned range (selected or not) follows
    the last returned item, and ``remaining`` counts those following items, ignoring the
    selector (O(log n)). Otherwise ``next_key`` is None and ``remaining`` is 0.
    """

    @property
    def next_key(self) -> str | None: ...
    @property
    def last_key(self) -> str | None: ...
    @property
    def remaining(self) -> int: ...
    @property
    def scanned(self) -> int:
        """How many items were examined (selected or not)."""
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> Item: ...
    def __iter__(self) -> Iterator[Item]: ...
    def keys(self) -> list[str]: ...
    def values(self) -> list[bytes]: ...
    def items(self) -> list[tuple[str, bytes]]: ...
    def render(self, kind: str, api_version: str, metadata: bytes = b"{}") -> bytes:
        """``{"kind":K,"apiVersion":V,"metadata":<metadata>,"items":[v1,v2,...]}`` as one bytes
        object, values copied once, no per-item Python objects. ``metadata`` must be a JSON
        object; kind and api_version are JSON-escaped."""
    def chunks(
        self, kind: str, api_version: str, metadata: bytes = b"{}", chunk_bytes: int = 262144
    ) -> ListChunks:
        """:meth:`render`'s body in pieces, each rendered when asked for: a piece takes items
        while it is smaller than ``chunk_bytes`` and at least one (the head with the first
        items, the tail with the last), and the pieces concatenate to exactly :meth:`render`'s
        bytes. The iterator keeps this result (and its snapshot) alive until its last piece.
        O(items in the piece) per piece; the copy runs without the GIL for pieces of 64 KiB
        and more. Raises like :meth:`render`, and ValueError for a ``chunk_bytes`` below 1."""

class ListChunks(Iterator[bytes]):
    """The pieces of a list body (:meth:`ScanResult.chunks`)."""

    @property
    def done(self) -> bool:
        """True once the last piece was returned (and the scan result let go); ``next()``
        then raises StopIteration. Cheaper to test than catching that."""
    def __iter__(self) -> ListChunks: ...
    def __next__(self) -> bytes: ...

class Cursor:
    """A position in a snapshot; keeps the snapshot alive. Starts unpositioned (not valid)."""

    @property
    def valid(self) -> bool: ...
    @property
    def key(self) -> str:
        """Raises KeyError when the cursor is not valid (same for value and item)."""
    @property
    def value(self) -> bytes: ...
    @property
    def item(self) -> Item: ...
    def seek(self, key: str) -> bool:
        """Position at the first key >= key. O(log n). Returns ``valid``."""
    def seek_after(self, key: str) -> bool:
        """Position at the first key > key."""
    def seek_first(self) -> bool: ...
    def seek_last(self) -> bool: ...
    def next(self) -> bool:
        """Advance; amortized O(1). Returns ``valid``; past the end the cursor is invalid."""
    def prev(self) -> bool: ...

class _ReadView:
    """Read operations shared by Tree (on its current state) and Snapshot."""

    def __len__(self) -> int: ...
    def __contains__(self, key: object) -> bool: ...
    def __getitem__(self, key: str) -> bytes: ...
    def __iter__(self) -> Iterator[str]: ...
    def __reversed__(self) -> Iterator[str]: ...
    def get(self, key: str, default: bytes | None = None) -> bytes | None: ...
    def get_item(self, key: str) -> Item | None: ...
    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """One binding crossing for all keys."""
    def keys(self) -> list[str]: ...
    def values(self) -> list[bytes]: ...
    def items(self) -> list[tuple[str, bytes]]: ...
    def count(self, lo: str | None = None, hi: str | None = None) -> int:
        """Number of keys in [lo, hi) (None = unbounded). O(log n) via subtree counts."""
    def count_prefix(self, prefix: str) -> int: ...
    def irange(
        self,
        lo: str | None = None,
        hi: str | None = None,
        inclusive: tuple[bool, bool] = (True, False),
        reverse: bool = False,
    ) -> Iterator[str]:
        """Keys between lo and hi in order (reverse=True: descending)."""
    def irange_items(
        self,
        lo: str | None = None,
        hi: str | None = None,
        inclusive: tuple[bool, bool] = (True, False),
        reverse: bool = False,
    ) -> Iterator[tuple[str, bytes]]: ...
    def scan(
        self,
        prefix: str = "",
        *,
        start_at: str | None = None,
        start_after: str | None = None,
        limit: int = 0,
        selector: Selector | None = None,
    ) -> ScanResult:
        """Items whose key starts with prefix, from start_at (inclusive) or start_after
        (exclusive), at most limit (0 = all) of those the selector accepts. GIL released."""
    def scan_index(
        self,
        source: str,
        name: str,
        values: Sequence[str],
        *,
        prefix: str = "",
        start_at: str | None = None,
        start_after: str | None = None,
        limit: int = 0,
        selector: Selector | None = None,
    ) -> ScanResult:
        """Through the secondary index on ``(source, name)``: the items whose value is one of
        ``values`` and which ``selector`` accepts, in key order, under ``prefix``, from
        ``start_at`` / ``start_after``, at most ``limit`` (0 = all). The same page as
        :meth:`scan` with that requirement added to the selector: the same items, ``next_key``
        and ``remaining`` (which count the range's items, not the candidates); ``scanned``
        counts the candidates examined. A field index reads an absent field as ``""``; a
        label index holds only items with the label. O(v log n + candidates examined · log v)
        for v values. GIL released. Raises KeyError when there is no such index (a snapshot
        carries the indexes its tree had when it was taken), ValueError for a source other
        than "field" or "label", TypeError when ``values`` is a str."""
    def count_index(
        self,
        source: str,
        name: str,
        values: Sequence[str],
        *,
        prefix: str = "",
        start_at: str | None = None,
        start_after: str | None = None,
    ) -> int:
        """How many items of the range :meth:`scan_index` reads have one of ``values`` in the
        index: its candidates without a limit, so the exact count of matching items when the
        selector is this requirement alone. O(v log n) from the index's subtree counts.
        Raises like :meth:`scan_index`."""
    @property
    def indexes(self) -> list[tuple[str, str]]:
        """The secondary indexes as ``(source, name)`` pairs: a Tree's declared ones, a
        Snapshot's those its tree had when it was taken."""
    def cursor(self) -> Cursor: ...
    def check_invariants(self) -> None:
        """Walk the whole structure (and every secondary index against it: each item with an
        indexed value has exactly its entry, none is stale); raise RuntimeError on a broken
        invariant. O(n log n). For tests."""

class Snapshot(_ReadView):
    """An immutable view of a Tree at one moment: O(1) to take, safe to read from any thread,
    unaffected by later writes. Keeps what it sees alive until dropped. Picklable (the
    unpickled snapshot is a fresh, independent one with the same contents)."""

    @property
    def version(self) -> int:
        """The tree version this snapshot froze (strictly increasing per tree)."""
    @property
    def nbytes(self) -> int:
        """Bytes reachable from this snapshot (nodes + items)."""
    def __reduce__(self) -> tuple[Any, ...]: ...

class Tree(_ReadView):
    """The live, mutable tree: one writer (not thread-safe for concurrent writes); readers
    take snapshots. Mapping-style: ``t[k] = v``, ``del t[k]``, ``k in t``, ordered iteration.
    Writes cost O(log n); after a snapshot the first write to a node copies it (path copy)."""

    def __init__(
        self,
        items: Iterable[tuple[str, bytes] | tuple[str, bytes, int] | Item]
        | Mapping[str, bytes]
        | None = None,
        *,
        indexes: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Builds from entries in any order, the last of equal keys winning, like a dict.
        Sorts, then bulk loads: O(n log n), and consecutive keys' items sit together in
        memory whatever the input order. ``indexes``: secondary indexes to declare (see
        :meth:`add_index`)."""
    @classmethod
    def from_sorted(
        cls,
        entries: Iterable[tuple[str, bytes] | Item],
        *,
        indexes: Iterable[tuple[str, str]] = (),
    ) -> Tree:
        """Bulk load from strictly ascending keys, packing nodes full. O(n) (O(n log n) per
        index in ``indexes``). Raises ValueError when keys are not strictly ascending."""
    def add_index(self, source: str, name: str) -> None:
        """Declare a secondary index on a selectable field or a label key and fill it from
        the current items, O(n log n). Every later write keeps it, in the same write, and
        every later snapshot carries it at its own version (:meth:`scan_index`,
        :meth:`count_index`). About 13-19 B per indexed item; a write with one index copies
        one more root-to-leaf path. Raises ValueError for an empty name, an index already
        declared, more than 8 indexes or a source other than "field" or "label"."""
    def __setitem__(self, key: str, value: bytes) -> None: ...
    def __delitem__(self, key: str) -> None: ...
    def put(
        self,
        key: str,
        value: bytes | bytearray | memoryview,
        mod_revision: int = 0,
        labels: Mapping[str, str] | None = None,
        fields: Mapping[str, str] | None = None,
    ) -> None: ...
    def put_item(self, item: Item) -> None: ...
    def swap_item(self, item: Item) -> Item | None:
        """Put ``item``; return the item it replaced (None if its key was new). O(log n)."""
    def pop_item(self, key: str) -> Item | None:
        """Remove ``key``; return the removed item (None if absent, nothing changes)."""
    @overload
    def put_many(self, entries: Iterable[Item]) -> None: ...
    @overload
    def put_many(self, entries: Iterable[tuple[str, bytes]]) -> None: ...
    @overload
    def put_many(self, entries: Iterable[tuple[str, bytes, int]]) -> None: ...
    def erase(self, key: str) -> bool:
        """Remove key; returns whether it was present."""
    def erase_many(self, keys: Iterable[str]) -> int: ...
    def pop(self, key: str, default: bytes | None = None) -> bytes | None: ...
    def clear(self) -> None: ...
    def snapshot(self) -> Snapshot:
        """O(1), independent of size."""
    @property
    def version(self) -> int: ...
    @property
    def nbytes(self) -> int:
        """Bytes reachable from the live tree (nodes + items)."""
    def collect(self) -> int:
        """Free what no live snapshot can reach any more; returns bytes freed. Runs by itself
        as snapshots are dropped and writes go on; exposed for tests and memory reports."""

class SnapshotUsage:
    @property
    def resource_version(self) -> int: ...
    @property
    def exclusive_bytes(self) -> int:
        """Bytes that only this snapshot keeps alive (freed if it alone were dropped)."""
    @property
    def shared_bytes(self) -> int:
        """Bytes this snapshot reaches that others (or the live tree) also keep alive."""

class SnapshotRegistry:
    """resourceVersion -> Snapshot, thread-safe. With ``budget_bytes`` > 0, adding a snapshot
    evicts the oldest ones until the pinned bytes fit the budget (the newest is never evicted)."""

    def __init__(self, budget_bytes: int = 0) -> None: ...
    def add(self, resource_version: int, snapshot: Snapshot) -> None:
        """Raises ValueError unless resource_version is > 0 and not below any stored rv; an rv
        equal to the newest replaces its snapshot (several keys changed at one revision)."""
    def add_tree_snapshot(self, resource_version: int, tree: Tree, prune_below: int = 0) -> None:
        """``add(resource_version, tree.snapshot())`` then, when ``prune_below`` > 0,
        ``prune_below(prune_below)``: in one call, without making a Python Snapshot. Raises
        like :meth:`add` (before taking the snapshot for a resource_version not above 0)."""
    def get(self, resource_version: int) -> Snapshot | None:
        """Exact match only. O(log s)."""
    def floor(self, resource_version: int) -> tuple[int, Snapshot] | None:
        """The newest snapshot with rv <= resource_version."""
    def floor_resource_version(self, resource_version: int) -> int | None:
        """The rv :meth:`floor` would return, without taking a Snapshot (cheaper: use it to
        ask whether a snapshot at or below an rv exists)."""
    def latest(self) -> tuple[int, Snapshot] | None: ...
    def oldest(self) -> tuple[int, Snapshot] | None: ...
    def prune_below(self, resource_version: int) -> int:
        """Drop snapshots with rv < resource_version; returns how many were dropped."""
    def clear(self) -> None: ...
    def __len__(self) -> int: ...
    def size(self) -> int: ...
    def __contains__(self, resource_version: object) -> bool: ...
    def resource_versions(self) -> list[int]: ...
    @property
    def budget_bytes(self) -> int: ...
    @budget_bytes.setter
    def budget_bytes(self, value: int) -> None: ...
    @property
    def evicted(self) -> int:
        """Snapshots evicted by the budget so far."""
    def pinned_bytes(self) -> int:
        """Bytes kept alive only because snapshots exist: nodes and items no longer in the
        live tree that a live snapshot can still reach (from the engine's live accounting)."""
    def usage(self) -> list[SnapshotUsage]:
        """Per stored snapshot, bytes it alone keeps alive vs shares. O(retired objects)."""

def live_counters() -> dict[str, int]:
    """Engine-wide live object counters: ``nodes``, ``items``, ``bytes``. For leak tests."""

def memory_stats() -> dict[str, int]:
    """Process-wide engine memory: ``node_chunks`` and ``item_chunks`` (chunks held for
    tree nodes and for items), ``item_spans`` (spans of the item heap holding an item),
    ``chunk_bytes``. Sanitizer builds take no chunks: all zero but ``chunk_bytes``."""

def set_prefault(enabled: bool) -> bool:
    """Whether a helper thread faults the engine's node and item memory in ahead of writes
    (off until enabled; the WatchCache enables it). Returns the previous setting.
    Process-wide; False always in sanitizer builds, which take no memory of their own."""

def encode_continue_token(start: object, resource_version: object) -> str | None:
    """The canonical continue token for ``start`` at ``resource_version``; None when the
    fast path does not apply (tokens.encode_continue then takes the general path)."""

def decode_continue_token(token: object) -> tuple[int, str] | None:
    """``(rv, start)`` of a token in the canonical shape; None for any other token."""
