"""A whole prefix's items, scanned when the list body is first rendered.

A LIST of a whole prefix without a selector, a limit or a continue token knows all it
answers but its items from the snapshot alone: how many there are (``count_prefix``, O(log n)), no
continue token, no remainingItemCount. Its scan copies the prefix's item pointers a leaf at
a time, 1-2 ns an item (0.13-0.3 ms at 150,000 pods), and was the larger part of what such
a LIST did before its response could start. Taken later, when the first piece of the body
is rendered, it lets the HTTP layer send the response's head first (streaming.py). That
matters when several consistent LISTs wake together on one etcd current-revision call:
each sends its head before any of them scans, instead of each waiting for the scans of
those woken before it.

The snapshot held is the one the read chose, so the items are those of the read's
resourceVersion whenever the scan runs; the scan runs once, on first use, and the result
is what :meth:`Snapshot.scan` of the prefix returns (this class answers for it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from watchcache._core import Item, ListChunks, ScanResult, Snapshot


class DeferredScan:
    """``snapshot.scan(prefix)``, run on first use; ``count`` is its length, known before.

    What is known without the scan (its length, that it has no continuation) is answered
    without it; anything that reads the items runs it."""

    __slots__ = ("_count", "_prefix", "_scan", "_snapshot")

    def __init__(self, snapshot: Snapshot, prefix: str, count: int) -> None:
        self._snapshot: Snapshot | None = snapshot
        self._prefix = prefix
        self._count = count
        self._scan: ScanResult | None = None

    def result(self) -> ScanResult:
        """The scan, run now if it has not run yet."""
        scan = self._scan
        if scan is None:
            assert self._snapshot is not None
            # The result keeps the snapshot alive from here on.
            scan = self._scan = self._snapshot.scan(self._prefix)
            self._snapshot = None
        return scan

    @property
    def prefix(self) -> str:
        """The key prefix scanned."""
        return self._prefix

    @property
    def ran(self) -> bool:
        """Whether the scan has run."""
        return self._scan is not None

    # ScanResult's reads. An unlimited scan without a selector examines every item and is
    # never cut, so it has no continuation.
    @property
    def scanned(self) -> int:
        return self._count

    @property
    def next_key(self) -> str | None:
        return None

    @property
    def remaining(self) -> int:
        return 0

    @property
    def last_key(self) -> str | None:
        return self.result().last_key

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: int) -> Item:
        return self.result()[index]

    def __iter__(self) -> Iterator[Item]:
        return iter(self.result())

    def keys(self) -> list[str]:
        return self.result().keys()

    def values(self) -> list[bytes]:
        return self.result().values()

    def items(self) -> list[tuple[str, bytes]]:
        return self.result().items()

    def render(self, kind: str, api_version: str, metadata: bytes = b"{}") -> bytes:
        return self.result().render(kind, api_version, metadata)

    def chunks(
        self, kind: str, api_version: str, metadata: bytes, chunk_bytes: int
    ) -> DeferredChunks:
        """:meth:`ScanResult.chunks`, with the scan run when the first piece is asked for."""
        return DeferredChunks(self, kind, api_version, metadata, chunk_bytes)


class DeferredChunks:
    """The pieces of a :class:`DeferredScan`'s list body (``BodyChunks``): the first
    ``next()`` runs the scan, then the engine renders every piece (``ListChunks``)."""

    __slots__ = ("_api_version", "_chunk_bytes", "_deferred", "_kind", "_metadata", "_pieces")

    def __init__(
        self, deferred: DeferredScan, kind: str, api_version: str, metadata: bytes, chunk_bytes: int
    ) -> None:
        if chunk_bytes < 1:
            raise ValueError("chunk_bytes must be at least 1")
        self._deferred: DeferredScan | None = deferred
        self._kind = kind
        self._api_version = api_version
        self._metadata = metadata
        self._chunk_bytes = chunk_bytes
        self._pieces: ListChunks | None = None

    @property
    def done(self) -> bool:
        pieces = self._pieces
        return pieces is not None and pieces.done

    def __iter__(self) -> DeferredChunks:
        return self

    def __next__(self) -> bytes:
        pieces = self._pieces
        if pieces is None:
            deferred = self._deferred
            assert deferred is not None
            pieces = self._pieces = deferred.result().chunks(
                self._kind, self._api_version, self._metadata, self._chunk_bytes
            )
            # The pieces hold the scan (and its snapshot) until the last is out.
            self._deferred = None
        return next(pieces)
