"""LIST, GET and WATCH of one resource served straight from etcd, as kube-apiserver serves
a resource whose watch cache is disabled (``--watch-cache-sizes <resource>#0``): through
its etcd3 store, not a cacher (docs/semantics.md §6).

* **LIST**: the revision is chosen as kube's ``GetList`` chooses it
  (:func:`~watchcache.cache.planner.store_revision`, §6.2) and the pages are read by
  :class:`~watchcache.etcd.store.EtcdStore` (§6.3-6.5): the same store the watch cache
  delegates to, so a continue token, ``remainingItemCount`` or error is the one the cache
  would delegate for. Every LIST is one or more etcd Ranges.
* **GET**: one linearizable Range of the key. A ``resourceVersion`` N above etcd's revision
  is a 504 ``Too large resource version`` (retry 0), checked before "not found", as
  ``store.Get`` → ``validateMinimumResourceVersion`` does.
* **WATCH** (§6.6, ``etcd3/watcher.go``): RV N > 0 watches etcd from N + 1; RV 0 without
  ``sendInitialEvents`` first sends the current state as ADDED (a consistent list in pages
  of 10,000 pinned to the first page's revision) and then watches from that revision + 1;
  ``sendInitialEvents=true`` does the same (refused with a 504 when N is above etcd's
  revision) and, with ``allowWatchBookmarks``, ends the initial state with the annotated
  bookmark; ``sendInitialEvents=false`` without an RV starts at etcd's current revision.
  Every etcd event is turned into what ``watchChan.transform`` makes of it: a create is
  ADDED, a delete is DELETED with the previous object stamped at the deletion's revision,
  and with a selector a change that enters or leaves it is ADDED or DELETED. No other
  bookmarks are sent: kube-apiserver does not ask etcd for progress notifications for a
  client's watch. A failure after the start (compaction: 410 ``The resourceVersion for
  the provided watch is too old.``; an undecodable value; a delete without its previous
  value) is one ERROR event, and the stream ends. A lost etcd stream reconnects from the
  last delivered revision (:class:`~watchcache.etcd.watch.EtcdWatch`), so nothing is lost.

Nothing is kept in memory beyond one page of the initial state and the events of one etcd
response: a slow client slows the etcd stream it reads, as kube's buffered channels do.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Final

from watchcache._core import Item, Selector
from watchcache.cache.backing_store import BodyChunks, ListResult, StoreListRequest
from watchcache.cache.event import Event, EventType, bookmark_object
from watchcache.cache.objects import ObjectCodec, ObjectDecodeError
from watchcache.cache.planner import store_revision
from watchcache.cache.watch_cache import request_key_prefix
from watchcache.cache.watcher import EventConversions, WatchEvent
from watchcache.etcd.client import EtcdClient, EtcdError, EtcdUnavailableError, prefix_range_end
from watchcache.etcd.proto import kv_pb2
from watchcache.etcd.store import MAX_PAGE, EtcdStore
from watchcache.etcd.watch import EtcdWatch
from watchcache.wire.errors import (
    BadRequestError,
    InternalError,
    ServerTimeoutError,
    StatusError,
    TooLargeResourceVersionError,
    WatchTerminatedError,
)
from watchcache.wire.gostrconv import go_quote
from watchcache.wire.options import ListOptions, WatchOptions, parse_resource_version
from watchcache.wire.tokens import decode_continue

_DELETE: Final = kv_pb2.Event.DELETE
#: Retry-After of the 504 for a watch-list above etcd's revision: kube's
#: ``wait.Jitter(1 s, 3)`` truncated to whole seconds.
_TOO_LARGE_RETRY_SECONDS: Final = (1, 3)


class EtcdReader:
    """The reads of the resource stored under ``prefix``, served from etcd (see the module
    note). ``resource``/``group`` name it in 404s, ``kind``/``api_version`` in list bodies
    and bookmarks; ``codec`` decodes stored objects as the resource's store writes them
    (conversion to the served version, selectable fields)."""

    def __init__(
        self,
        client: EtcdClient,
        prefix: str,
        *,
        resource: str,
        kind: str,
        group: str = "",
        api_version: str = "v1",
        codec: ObjectCodec | None = None,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.resource = resource
        self.group = group
        self.kind = kind
        self.api_version = api_version
        self.codec = codec or ObjectCodec()
        self.store = EtcdStore(client, prefix, codec=self.codec)
        # kube reads the current revision at the prefix without its "/": a key that
        # normally does not exist, so the answer is only the header.
        self.revision_key = prefix[:-1].encode()

    async def list(self, opts: ListOptions, *, prefix: str | None = None) -> ListResult:
        """A LIST as kube's etcd3 ``GetList`` serves it. Raises StatusError: 400 (bad
        continue token or prefix), 410 (compacted), 504 (a revision etcd has not reached,
        or etcd unreachable)."""
        key_prefix = request_key_prefix(self.prefix, prefix)
        start_key: str | None = None
        continue_rv: int | None = None
        if opts.continue_token:
            start_key, continue_rv = decode_continue(opts.continue_token, key_prefix)
        revision, minimum = store_revision(opts, continue_rv)
        request = StoreListRequest(
            key_prefix=key_prefix,
            token_prefix=key_prefix[:-1],
            start_key=start_key,
            revision=revision,
            minimum=minimum,
            limit=opts.page_size,
            selector=opts.selector(),
            continued=bool(opts.continue_token),
            options=opts,
        )
        return await self.store.list(request)

    async def get(self, key: str, resource_version: str = "") -> Item:
        """The object at ``key``, read from etcd. Raises BadRequestError (a bad key or
        resourceVersion), TooLargeResourceVersionError (``resource_version`` above etcd's
        revision), NotFoundError, ServerTimeoutError (etcd unreachable)."""
        if not key.startswith(self.prefix) or key.endswith("/"):
            raise BadRequestError(f'invalid key: "{key}" lacks resource prefix: "{self.prefix}"')
        minimum = parse_resource_version(resource_version)
        return await self.store.get(key, minimum, resource=self.resource, group=self.group)

    def watch(self, opts: WatchOptions, *, prefix: str | None = None) -> EtcdWatcher:
        """A watch below ``prefix`` (default: every object), not started yet; see
        :class:`EtcdWatcher`. Raises BadRequestError for a bad prefix."""
        return EtcdWatcher(self, opts, request_key_prefix(self.prefix, prefix))

    def render(self, result: ListResult) -> bytes:
        return result.render(self.kind + "List", self.api_version)

    def chunks(self, result: ListResult, chunk_bytes: int) -> BodyChunks:
        return result.chunks(self.kind + "List", self.api_version, chunk_bytes)

    def decode(self, key: bytes, value: bytes, revision: int) -> Item:
        """A stored value as the Item clients receive, at ``revision``. Raises
        ObjectDecodeError."""
        try:
            text = key.decode()
        except UnicodeDecodeError:
            raise ObjectDecodeError(key.decode(errors="replace"), "the key is not UTF-8") from None
        return self.codec.decode(text, value, revision)


class EtcdWatcher:
    """One client's watch served by an etcd watch (see the module note): an async iterator
    of :class:`~watchcache.cache.watcher.WatchEvent`, like the cache's Watcher.

    :meth:`start` decides where the watch starts and raises what kube-apiserver refuses
    before streaming (TooLargeResourceVersionError for a watch-list above etcd's revision;
    EtcdUnavailableError when the current revision cannot be read). The iteration ends at
    ``timeoutSeconds``, after :meth:`aclose`, or after an ERROR event.
    """

    def __init__(self, reader: EtcdReader, opts: WatchOptions, key_prefix: str) -> None:
        self._reader = reader
        self.options = opts
        self.key_prefix = key_prefix
        self._selector: Selector | None = opts.selector()
        self._events: AsyncGenerator[WatchEvent, None] | None = None
        self._deadline: float | None = None
        self._closed = False

    async def start(self) -> None:
        """Decide the start revision (idempotent)."""
        if self._events is not None:
            return
        if self._closed:
            raise WatchTerminatedError("the watcher was closed", 0)
        opts = self.options
        reader = self._reader
        rv = opts.parsed_resource_version
        initial_events = opts.send_initial_events or (opts.send_initial_events is None and rv == 0)
        start_revision = rv
        if rv == 0 and not initial_events:
            start_revision = await reader.client.current_revision(reader.revision_key)
        elif rv > 0 and initial_events:
            current = await reader.client.current_revision(reader.revision_key)
            if rv > current:
                raise TooLargeResourceVersionError(
                    minimum=rv,
                    current=current,
                    retry_after_seconds=random.randint(*_TOO_LARGE_RETRY_SECONDS),
                )
        loop = asyncio.get_running_loop()
        if opts.timeout_seconds:
            self._deadline = loop.time() + opts.timeout_seconds
        end_bookmark = bool(opts.send_initial_events) and opts.allow_watch_bookmarks
        self._events = self._stream(start_revision, initial_events, end_bookmark)

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self

    async def __anext__(self) -> WatchEvent:
        if self._events is None and not self._closed:
            await self.start()
        events = self._events
        if self._closed or events is None:
            raise StopAsyncIteration
        timeout = asyncio.timeout_at(self._deadline)
        try:
            async with timeout:
                return await anext(events)
        except TimeoutError:
            if not timeout.expired():
                raise
            await self.aclose()
            raise StopAsyncIteration from None
        except StopAsyncIteration:
            self._closed = True
            raise

    async def aclose(self) -> None:
        """Stop watching (the etcd watch is cancelled); idempotent."""
        self._closed = True
        events, self._events = self._events, None
        if events is not None:
            await events.aclose()

    async def __aenter__(self) -> EtcdWatcher:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the stream -------------------------------------------------------------------------

    async def _stream(
        self, start_revision: int, initial_events: bool, end_bookmark: bool
    ) -> AsyncGenerator[WatchEvent, None]:
        reader = self._reader
        revision = start_revision
        try:
            if initial_events:
                revision = 0
                start = self.key_prefix.encode()
                end = prefix_range_end(start)
                while True:
                    response = await reader.client.range(
                        start, end, revision=revision, limit=MAX_PAGE
                    )
                    if revision == 0:
                        revision = int(response.header.revision)
                    if not response.kvs and response.more:
                        raise EtcdError(
                            "no results were found, but etcd indicated there were more "
                            "values remaining"
                        )
                    for kv in response.kvs:
                        item = reader.decode(kv.key, kv.value, int(kv.mod_revision))
                        if self._selector is None or self._selector.matches_item(item):
                            yield WatchEvent.of_item(EventType.ADDED, item.mod_revision, item)
                    if not response.more:
                        break
                    start = response.kvs[-1].key + b"\0"
            if end_bookmark:
                body = bookmark_object(reader.kind, reader.api_version, revision, initial_end=True)
                yield WatchEvent(EventType.BOOKMARK, revision, body, None, initial_events_end=True)
            # No progress notifications: kube-apiserver does not ask for them for a client.
            watch = EtcdWatch(
                reader.client,
                self.key_prefix.encode(),
                start_revision=revision + 1,
                progress_notify=False,
            )
            try:
                async for batch in watch:
                    for event in batch.events:
                        converted = self._convert(event)
                        if converted is not None:
                            yield converted
            finally:
                await watch.close()
        except StatusError as error:  # a compacted start revision is a 410 here
            yield _error_event(error)
        except EtcdUnavailableError as error:
            yield _error_event(ServerTimeoutError.timeout(str(error)))
        except (EtcdError, ObjectDecodeError) as error:
            yield _error_event(InternalError.wrap(error))

    def _convert(self, event: kv_pb2.Event) -> WatchEvent | None:
        """What ``watchChan.transform`` makes of one etcd event for this watch (None: the
        selector leaves it out). Raises EtcdError, ObjectDecodeError."""
        reader = self._reader
        kv = event.kv
        revision = int(kv.mod_revision)
        selector = self._selector
        has_previous = event.HasField("prev_kv")
        if event.type == _DELETE:
            if not has_previous:
                key = go_quote(kv.key.decode(errors="replace"))
                raise EtcdError(
                    f"etcd event received with PrevKv=nil (key={key}, modRevision={revision}, "
                    "type=DELETE)"
                )
            # The last state, stamped with the deletion's revision.
            gone = reader.decode(kv.key, event.prev_kv.value, revision)
            conversions = EventConversions(Event(EventType.DELETED, gone, None, revision), gone)
        else:
            item = reader.decode(kv.key, kv.value, revision)
            previous: Item | None = None
            if has_previous and selector is not None:
                # Only a selector needs the previous state: to tell entering from leaving.
                previous = reader.decode(
                    kv.key, event.prev_kv.value, int(event.prev_kv.mod_revision)
                )
            created = kv.create_revision == kv.mod_revision
            kind = EventType.ADDED if created else EventType.MODIFIED
            conversions = EventConversions(Event(kind, item, previous, revision), previous)
        if selector is None:
            return conversions.native()
        new, old = conversions.new, conversions.old
        new_passes = new is not None and selector.matches_item(new)
        old_passes = old is not None and selector.matches_item(old)
        if new_passes:
            return conversions.as_type(EventType.MODIFIED if old_passes else EventType.ADDED)
        if old_passes:
            return conversions.as_type(EventType.DELETED)
        return None


def _error_event(error: StatusError) -> WatchEvent:
    return WatchEvent(EventType.ERROR, 0, error.to_json())
