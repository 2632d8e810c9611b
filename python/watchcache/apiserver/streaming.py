"""Response bodies as kube-apiserver sends them: LISTs streamed in pieces, and gzip for
large answers a client accepts compressed.

Streaming (KEP-5116, Kubernetes 1.33+). A LIST body is rendered piece by piece from the
page's snapshot (``ListResult.chunks``: about :data:`CHUNK_BYTES` each, natively from a
cache page) and each piece is handed to the server before the next is rendered, so an
in-flight LIST holds its snapshot and a piece or two, never its whole body: 8 concurrent
LISTs of 150,000 pods grew the server by 1.7 GB with whole 176 MB bodies, and grow it by a
few MB now (bench/README.md, scenario 7).
The bytes are exactly those of the body rendered at once. uvicorn's flow control makes
``send`` wait while the connection's write buffer is full, so a slow reader is read at
its own pace with the snapshot, not a copy of the body, waiting; a client that goes away
is noticed (its ``http.disconnect``) before the next piece, and the pieces and the
snapshot they hold are let go at once.

Framing. A body that is complete once the pieces rendered pass :data:`GZIP_THRESHOLD_BYTES`
(every body up to 128 KiB, and one that its first piece holds whole) is sent whole with a
``Content-Length``, as before, unless it is to be compressed; any other in HTTP/1.1 chunks
(no ``Content-Length``), as Go's server sends a body it does not know the length of. A
body whose floor (``ListResult.body_floor``: three bytes an item) already passes the
threshold is known to be streamed before a byte is rendered: its head goes at once, and its
first piece waits its turn like the others. With a large unfiltered LIST, whose items are
scanned only when its first piece is rendered (cache/deferred_scan.py), that sends the head
before the scan: in bench/list_memory.py's 8-LIST burst at full size, the first byte's p50
went from 5.5-6.7 ms to 3.4-5.1 ms over ten runs the same day (median 4.0 ms; the
README's run of four rounds 3.74 ms), one LIST alone from 2.4 to 1.9-2.0 ms.

gzip (kube's APIResponseCompression, on by default there and here; ``watchcache serve
--no-response-compression`` turns it off). kube-apiserver's deferredResponseWriter
(staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/writers.go) buffers a
streamed body until it passes ``defaultGzipThresholdBytes`` (128 KiB) and compresses it,
with ``Content-Encoding: gzip`` and ``Vary: Accept-Encoding``, when it does and the
request's ``Accept-Encoding`` (its first value) holds the token ``gzip``
(compression.go, ContentEncodingSupported: comma-separated, spaces trimmed, no q-values
read), at level 1 (``gzipContentEncodingLevel``: the cheapest, within 1.1-1.5x of the best
ratio). The same here: a body of at most 128 KiB is never compressed. Compression runs in
a worker thread (zlib lets go of the GIL), piece by piece, so the event loop keeps serving
meanwhile. Watches are never compressed (the official Python client reads them raw).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Sequence

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from watchcache.apiserver.first_bytes import FirstBytesGate, first_bytes_gate
from watchcache.cache.backing_store import BodyChunks

#: kube's defaultGzipThresholdBytes: a body larger than this is compressed when the client
#: accepts gzip; it is also where a body stops being sent whole with a Content-Length.
GZIP_THRESHOLD_BYTES = 128 * 1024
#: kube's gzipContentEncodingLevel.
GZIP_LEVEL = 1
#: The size of the pieces a LIST body is rendered in; 8 LISTs in flight hold a few MiB of
#: them. bench/list_memory.py's burst at full size, pieces of 64 KiB to 1 MiB in one run
#: (resourceVersion=0): 128 and 256 KiB alike (7.5-7.7 LIST/s, first byte p50 ~8 ms);
#: 64 KiB 4.1 LIST/s (a piece costs a render call and a send whatever its size, and under
#: 64 KiB the copy keeps the GIL); 1 MiB a first byte p50 of 27 ms (each stream holds the
#: event loop longer per piece).
CHUNK_BYTES = 256 * 1024

_GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around the deflate stream
_GZIP_HEADERS = ((b"content-encoding", b"gzip"), (b"vary", b"Accept-Encoding"))


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether a request's ``Accept-Encoding`` (its first value) lets the answer be gzipped,
    as kube's ContentEncodingSupported decides: one of its comma-separated tokens, spaces
    trimmed, is exactly ``gzip`` (so ``gzip;q=0`` and ``GZIP`` do not count)."""
    return "gzip" in accept_encoding and any(
        token.strip() == "gzip" for token in accept_encoding.split(",")
    )


class WholeBody:
    """A body that exists already (a Table, one object), as :class:`BodyChunks`: one piece."""

    __slots__ = ("_body", "done")

    def __init__(self, body: bytes) -> None:
        self._body = body
        self.done = False

    def __iter__(self) -> WholeBody:
        return self

    def __next__(self) -> bytes:
        if self.done:
            raise StopIteration
        self.done = True
        body, self._body = self._body, b""
        return body


async def send_body(
    send: Send,
    receive: Receive,
    chunks: BodyChunks,
    *,
    content_type: bytes,
    gzip: bool,
    headers: Sequence[tuple[bytes, bytes]] = (),
    status: int = 200,
    size_floor: int = 0,
) -> None:
    """Send ``chunks`` as the answer (see the module note): pieces are rendered until they
    pass :data:`GZIP_THRESHOLD_BYTES`; a body complete by then goes whole with a
    Content-Length, any other is streamed. It is gzipped when ``gzip`` (the client accepts
    it and compression is on) and it is larger than the threshold. ``headers`` are sent as
    well (Warning headers). ``size_floor``: bytes the body is known to have at least
    (``ListResult.body_floor``); a body known to pass the threshold is streamed without
    rendering first: its head is sent at once and its first piece waits its turn like the
    others (:meth:`FirstBytesGate.give_way`), so a LIST whose items are scanned when first
    rendered (cache/deferred_scan.py) answers its head before it scans."""
    if size_floor > GZIP_THRESHOLD_BYTES:
        buffered: list[bytes] = []
        compress = gzip
    else:
        first = next(chunks)
        buffered, size = [first], len(first)
        del first
        while size <= GZIP_THRESHOLD_BYTES and not chunks.done:
            piece = next(chunks)
            buffered.append(piece)
            size += len(piece)
        compress = gzip and size > GZIP_THRESHOLD_BYTES
        if chunks.done and not compress:
            body = buffered[0] if len(buffered) == 1 else b"".join(buffered)
            start = [(b"content-length", b"%d" % len(body)), (b"content-type", content_type)]
            await send(
                {"type": "http.response.start", "status": status, "headers": [*start, *headers]}
            )
            await send({"type": "http.response.body", "body": body})
            return
    start = [(b"content-type", content_type), *(_GZIP_HEADERS if compress else ()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    gone = asyncio.ensure_future(_disconnected(receive))
    gate = first_bytes_gate()
    try:
        if compress:
            await _send_compressed(send, buffered, chunks, gone, gate)
        else:
            await _send_plain(send, buffered, chunks, gone, gate)
    finally:
        gone.cancel()


async def _send_plain(
    send: Send,
    buffered: list[bytes],
    chunks: BodyChunks,
    gone: asyncio.Future[None],
    gate: FirstBytesGate,
) -> None:
    while buffered:
        await send({"type": "http.response.body", "body": buffered.pop(0), "more_body": True})
    while not chunks.done:
        # send() returns at once when the client is gone (uvicorn drops what it is given):
        # yielding lets the disconnect be seen; it also lets other requests in between.
        # Pieces are rendered here, on the loop. In worker threads (run_in_executor) the
        # 8-LIST burst's first byte came sooner (p50 9.8 against 16.1 ms) but each LIST cost
        # twice the CPU (225 against 106 ms: the hand-offs and the GIL going back and forth)
        # and the burst ran at 3.7 LISTs/s against 6.8 (bench/list_memory.py --full, one run
        # each, the same day). What the burst's first bytes waited for was the loop's turns,
        # each several ms long with 8 streams: a consistent LIST needs a few (etcd's current
        # revision, the cache catching up), and the clients' share of the cores was not it
        # (at nice 10 they saw 8.8 ms). Streams giving way to requests that wait for their
        # first byte (first_bytes.py) took the burst's first byte p50 from 7.0-10.7 ms (six
        # runs) to 5.2-6.2 ms and a GET meanwhile from 9.5-11.4 to 2.5-3.9 ms, at 11.5-13.8
        # LISTs/s against 10.2-12.8 (bench/list_memory.py --full, 2026-11-27).
        await gate.give_way()
        if gone.done():
            return
        await send({"type": "http.response.body", "body": next(chunks), "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _send_compressed(
    send: Send,
    buffered: list[bytes],
    chunks: BodyChunks,
    gone: asyncio.Future[None],
    gate: FirstBytesGate,
) -> None:
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, _GZIP_WBITS)
    loop = asyncio.get_running_loop()
    if buffered:
        head = b"".join(buffered)
        buffered.clear()
    else:
        # Sent head first (send_body): the first piece is rendered here, on the loop, as the
        # plain path renders it. A deferred scan runs with it (cache/deferred_scan.py); run
        # in a worker thread, its item pointers were allocated in that thread's malloc arena,
        # and the gzipped burst grew the server by +23 MB against +4 MB (one run each,
        # bench/list_memory.py --full).
        await gate.give_way()
        if gone.done():
            return
        head = next(chunks)

    def compress_next() -> bytes:
        # In a worker thread: the engine renders the piece and zlib compresses it, both
        # without the GIL for their bulk.
        return compressor.compress(next(chunks))

    data = await loop.run_in_executor(None, compressor.compress, head)
    del head
    while True:
        if data:
            await send({"type": "http.response.body", "body": data, "more_body": True})
        if gone.done():
            return
        if chunks.done:
            break
        await gate.give_way()
        data = await loop.run_in_executor(None, compress_next)
    await send({"type": "http.response.body", "body": compressor.flush(), "more_body": False})


async def _disconnected(receive: Receive) -> None:
    """Returns when the client has gone away (the request's body, if any, is skipped)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class BodyResponse(Response):
    """A Starlette response sent by :func:`send_body`: the routes answer with it what the
    lean path (``LeanReads``) sends itself, so both send the same bytes and headers.
    Headers added to it (``response.headers.append``) are sent too."""

    def __init__(
        self,
        chunks: BodyChunks,
        *,
        gzip: bool,
        media_type: str,
        status_code: int = 200,
        size_floor: int = 0,
    ) -> None:
        # Not Response.__init__: it wants the body whole, to set its Content-Length.
        self.status_code = status_code
        self.media_type = media_type
        self.background = None
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self._chunks = chunks
        self._gzip = gzip
        self._size_floor = size_floor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_body(
            send,
            receive,
            self._chunks,
            content_type=(self.media_type or "").encode("latin-1"),
            gzip=self._gzip,
            headers=self.raw_headers,
            status=self.status_code,
            size_floor=self._size_floor,
        )
