"""The list/store contract: what a LIST returns, and what the store behind a cache answers.

Both the cache and its backing store answer a LIST with a :class:`ListResult`: one page of
native Items, the list's resourceVersion, the continue token and remainingItemCount, and
where the page came from (:class:`Source`). The planner decides the store's revision
before asking; a store receives that decision as a :class:`StoreListRequest` and must
honour it exactly: read at ``revision`` (or the latest, at least ``minimum``), fail with
410 when the revision is compacted (for a continuation, the inconsistent-continue 410 of
:func:`expired_continuation`) and with 504 when it is in the future.

Values only; :class:`ListResult` keeps the snapshot its items came from alive, and so do the
pieces of its body (:meth:`ListResult.chunks`) until the last one is rendered.
"""

from __future__ import annotations

import enum
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from watchcache.wire import gojson
from watchcache.wire.errors import ExpiredError
from watchcache.wire.options import ListOptions
from watchcache.wire.tokens import encode_continue

if TYPE_CHECKING:
    from watchcache._core import Item, ScanResult, Selector
    from watchcache.cache.deferred_scan import DeferredScan


class BodyChunks(Protocol):
    """A response body in pieces, rendered one per ``next()``: ``done`` turns true once
    the last piece has been returned (so a sender needs no StopIteration to find the end;
    ``next()`` after that raises it). The first ``next()`` always returns a piece."""

    @property
    def done(self) -> bool: ...

    def __next__(self) -> bytes: ...


# The base64url alphabet: a token made only of these needs no JSON escaping.
_BASE64URL = string.ascii_letters + string.digits + "-_"


class Source(enum.StrEnum):
    """Where a read is (or was) served from."""

    CACHE = "cache"  #: the newest state of the cache
    SNAPSHOT = "snapshot"  #: a stored snapshot at or below a resourceVersion
    STORE = "etcd"  #: the backing store
    EXPIRED = "expired"  #: nowhere: no snapshot and no store — fails with 410


def expired_continuation(start_key: str, token_prefix: str) -> ExpiredError:
    """The 410 for a continuation whose data is gone everywhere: its ``metadata.continue``
    is a token with ``rv: -1`` that resumes at the same key on the latest state
    (an inconsistent list, as the message says)."""
    try:
        token = encode_continue(start_key, token_prefix, -1)
    except ValueError:
        token = ""
    return ExpiredError.inconsistent_continue(token)


@dataclass(slots=True)
class ListResult:
    """One page of a LIST.

    ``items`` are native Items in key order (a ScanResult from the cache keeps its snapshot
    alive). ``resource_version`` is the list's ``metadata.resourceVersion``;
    ``continue_token`` is "" on the last page; ``remaining_item_count`` is set only for an
    unfiltered page that has a continuation. ``source``/``waited_seconds``/``row`` record
    where the read was served from and why, and how long it waited for freshness.
    """

    items: Sequence[Item] | ScanResult | DeferredScan
    resource_version: int
    continue_token: str = ""
    remaining_item_count: int | None = None
    source: Source = Source.CACHE
    waited_seconds: float = 0.0
    row: str = ""
    fallback: str = ""

    def metadata(self) -> dict[str, object]:
        """``metav1.ListMeta`` in Go's member order."""
        meta: dict[str, object] = {"resourceVersion": str(self.resource_version)}
        if self.continue_token:
            meta["continue"] = self.continue_token
        if self.remaining_item_count is not None:
            meta["remainingItemCount"] = self.remaining_item_count
        return meta

    def metadata_json(self) -> bytes:
        """:meth:`metadata` as Go writes it. Tokens minted here are base64url, which JSON
        never escapes, so the usual page skips the general encoder (3 µs of a page)."""
        token = self.continue_token
        # str.strip with the alphabet leaves nothing of a base64url token: one C call,
        # where a regex match would run the (cold) regex engine on every page.
        if token and token.strip(_BASE64URL):
            return gojson.dumpb(self.metadata())
        text = f'{{"resourceVersion":"{self.resource_version}"'
        if token:
            text += f',"continue":"{token}"'
        if self.remaining_item_count is not None:
            text += f',"remainingItemCount":{self.remaining_item_count}'
        return (text + "}").encode()

    def body_floor(self) -> int:
        """Bytes :meth:`render`'s body has at least, known without rendering it or reading
        an item: each item is a JSON object, ``{}`` at the least, and all but the last are
        followed by a comma."""
        return 3 * len(self.items)

    def render(self, kind: str, api_version: str) -> bytes:
        """The list body ``{"kind","apiVersion","metadata","items":[...]}`` as one bytes.
        From a ScanResult the engine copies each value once; otherwise values are joined."""
        metadata = self.metadata_json()
        render = getattr(self.items, "render", None)
        if render is not None:
            body: bytes = render(kind, api_version, metadata)
            return body
        return b"".join(
            (
                _list_head(kind, api_version, metadata),
                b",".join(item.value for item in self.items),
                b"]}",
            )
        )

    def chunks(self, kind: str, api_version: str, chunk_bytes: int) -> BodyChunks:
        """:meth:`render`'s body in pieces of about ``chunk_bytes`` (a piece holds at least
        one item, so it passes that by at most one item; their concatenation is exactly
        :meth:`render`'s bytes), each rendered when it is asked for: a body sent this way
        never exists whole, and the items stay alive until the last piece is out. From a
        ScanResult the engine renders each piece (``ScanResult.chunks``)."""
        metadata = self.metadata_json()
        items = self.items
        chunks = getattr(items, "chunks", None)
        if chunks is not None:
            pieces: BodyChunks = chunks(kind, api_version, metadata, chunk_bytes)
            return pieces
        assert isinstance(items, Sequence)
        return _JoinedChunks(_list_head(kind, api_version, metadata), items, chunk_bytes)


def _list_head(kind: str, api_version: str, metadata: bytes) -> bytes:
    """A list body up to its first item: ``{"kind":…,"apiVersion":…,"metadata":…,"items":[``."""
    head = gojson.dumpb({"kind": kind, "apiVersion": api_version})[:-1]
    return b"".join((head, b',"metadata":', metadata, b',"items":['))


class _JoinedChunks:
    """:meth:`ListResult.chunks` of items held in Python (a page read from etcd): the
    pieces the engine's renderer would cut, joined here."""

    __slots__ = ("_chunk_bytes", "_head", "_items", "_next", "done")

    def __init__(self, head: bytes, items: Sequence[Item], chunk_bytes: int) -> None:
        if chunk_bytes <= 0:
            raise ValueError("chunk_bytes must be positive")
        self._head = head
        self._items: Sequence[Item] | None = items
        self._chunk_bytes = chunk_bytes
        self._next = 0
        self.done = False

    def __iter__(self) -> _JoinedChunks:
        return self

    def __next__(self) -> bytes:
        items = self._items
        if items is None:
            raise StopIteration
        begin = end = self._next
        parts = [self._head] if begin == 0 else [b""]  # b"": the comma before a later piece
        size = len(parts[0])
        while end < len(items):
            value = items[end].value
            parts.append(value)
            size += len(value) + (end > 0)  # the comma before every item but the first
            end += 1
            if size >= self._chunk_bytes:
                break
        self._next = end
        piece = parts[0] + b",".join(parts[1:]) if begin == 0 else b",".join(parts)
        if end == len(items):
            self._items = None  # the last piece lets the items go
            self.done = True
            piece += b"]}"
        return piece


@dataclass(frozen=True, slots=True)
class StoreListRequest:
    """A LIST the store must answer, with the revision already decided.

    ``revision``: read at exactly this revision (0 = latest). ``minimum``: with a latest
    read, the answer must be at least this new (504 otherwise). ``key_prefix`` ends with
    "/"; ``start_key`` is where to start (a decoded continue, absolute). ``continued``:
    the client sent a continue token (so a compaction answers with the inconsistent
    410 of :func:`expired_continuation`).
    """

    key_prefix: str
    token_prefix: str
    start_key: str | None
    revision: int
    minimum: int
    limit: int
    selector: Selector | None
    continued: bool
    options: ListOptions


class BackingStore(Protocol):
    """The source of truth behind the cache: :class:`~watchcache.etcd.store.EtcdStore`."""

    @property
    def consistent_reads_supported(self) -> bool:
        """True once every endpoint is known to answer progress requests correctly."""
        ...

    async def current_resource_version(self) -> int:
        """The store's current revision (a cheap linearizable read)."""
        ...

    async def get(self, key: str, minimum: int, *, resource: str, group: str = "") -> Item:
        """The object at ``key`` from a quorum read; 504 when ``minimum`` is above the
        store's revision, 404 when there is none."""
        ...

    async def list(self, request: StoreListRequest) -> ListResult:
        """Serve the LIST; raise ExpiredError (compaction), TooLargeResourceVersionError
        (revision in the future) or another StatusError."""
        ...
