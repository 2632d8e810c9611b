"""apiserver/streaming.py at the ASGI boundary: which requests accept gzip (kube's
ContentEncodingSupported), how a body is framed (whole with a Content-Length up to the
threshold, else in pieces), what is compressed, that a client gone mid-body stops the
rendering of further pieces, and that a stream gives way to requests waiting for their
first byte. Over real HTTP: tests/integration/test_streamed_lists.py."""

from __future__ import annotations

import asyncio
import gzip
import os
from dataclasses import dataclass
from typing import Any

import pytest

from watchcache.apiserver import first_bytes
from watchcache.apiserver.streaming import (
    GZIP_THRESHOLD_BYTES,
    WholeBody,
    accepts_gzip,
    send_body,
)
from watchcache.cache.backing_store import BodyChunks


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        ("gzip", True),
        ("gzip, deflate", True),
        ("deflate,gzip", True),
        (" deflate ,  gzip  ", True),
        ("", False),
        ("identity", False),
        ("x-gzip", False),
        ("GZIP", False),  # kube compares the token exactly
        ("gzip;q=0", False),  # and reads no q-values: this token is not "gzip"
        ("gzip;q=1.0", False),
        ("gzipped", False),
        ("*", False),
    ],
)
def test_gzip_is_accepted_as_kube_decides(header: str, accepted: bool) -> None:
    assert accepts_gzip(header) is accepted


class Pieces:
    """A body in pieces that counts how many were rendered (asked for)."""

    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces
        self.rendered = 0

    @property
    def done(self) -> bool:
        return self.rendered == len(self._pieces)

    def __next__(self) -> bytes:
        if self.done:
            raise StopIteration
        self.rendered += 1
        return self._pieces[self.rendered - 1]


class Client:
    """ASGI receive/send of a GET; ``leave_after`` body messages, the client goes away."""

    def __init__(self, leave_after: int | None = None) -> None:
        self.start: dict[str, Any] = {}
        self.bodies: list[bytes] = []
        self.more: list[bool] = []
        self.leave_after = leave_after
        self.gone = asyncio.Event()
        self.requested = False

    async def receive(self) -> dict[str, Any]:
        if not self.requested:
            self.requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.start = message
            return
        if self.gone.is_set():
            return  # as uvicorn: what is sent to a closed connection is dropped
        self.bodies.append(message.get("body", b""))
        self.more.append(message.get("more_body", False))
        if self.leave_after is not None and len(self.bodies) >= self.leave_after:
            self.gone.set()

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.start["headers"])


async def answer(pieces: BodyChunks, client: Client, *, gzip: bool, size_floor: int = 0) -> None:
    await send_body(
        client.send,  # type: ignore[arg-type]
        client.receive,
        pieces,
        content_type=b"application/json",
        gzip=gzip,
        headers=[(b"warning", b'299 - "x"')],
        size_floor=size_floor,
    )


async def test_a_body_up_to_the_threshold_is_sent_whole() -> None:
    body = [b"a" * 1000] * (GZIP_THRESHOLD_BYTES // 1000) + [b"b" * (GZIP_THRESHOLD_BYTES % 1000)]
    client = Client()
    await answer(Pieces(body), client, gzip=True)
    assert client.headers == {
        b"content-length": str(GZIP_THRESHOLD_BYTES).encode(),
        b"content-type": b"application/json",
        b"warning": b'299 - "x"',
    }
    assert client.bodies == [b"".join(body)] and client.more == [False]


async def test_a_larger_body_is_streamed_and_gzipped_when_asked() -> None:
    body = [b'{"x":"%d"}' % i * 2000 for i in range(40)]
    plain, packed = Client(), Client()
    await answer(Pieces(body), plain, gzip=False)
    await answer(Pieces(body), packed, gzip=True)
    assert plain.headers == {b"content-type": b"application/json", b"warning": b'299 - "x"'}
    assert b"".join(plain.bodies) == b"".join(body)
    assert plain.more == [True] * (len(plain.more) - 1) + [False]
    assert len(plain.bodies) > 2, "sent in pieces"
    assert packed.headers[b"content-encoding"] == b"gzip"
    assert packed.headers[b"vary"] == b"Accept-Encoding"
    assert b"content-length" not in packed.headers
    assert gzip.decompress(b"".join(packed.bodies)) == b"".join(body)


async def test_a_whole_body_over_the_threshold_is_gzipped_too() -> None:
    body = b"z" * (GZIP_THRESHOLD_BYTES + 1)
    client = Client()
    await answer(WholeBody(body), client, gzip=True)
    assert client.headers[b"content-encoding"] == b"gzip"
    assert gzip.decompress(b"".join(client.bodies)) == body


@pytest.mark.parametrize("compress", [False, True])
async def test_a_client_gone_mid_body_stops_the_rendering(compress: bool) -> None:
    # Incompressible pieces, so that each one sent compressed is a message to the client.
    pieces = Pieces([os.urandom(100_000) for _ in range(100)])
    client = Client(leave_after=3)
    await asyncio.wait_for(answer(pieces, client, gzip=compress), 30)
    assert pieces.rendered < 10, "no piece rendered long after the client left"
    assert client.more == [True] * len(client.more), "the body was never ended"


@pytest.mark.parametrize("compress", [False, True])
async def test_a_stream_renders_no_piece_while_a_request_waits_for_its_first_byte(
    compress: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(first_bytes, "MAX_PAUSE_SECONDS", 60.0)  # no pause runs out here
    gate = first_bytes.first_bytes_gate()
    pieces = Pieces([os.urandom(100_000) for _ in range(20)])
    client = Client()
    streaming = asyncio.ensure_future(answer(pieces, client, gzip=compress))
    while not client.bodies:
        await asyncio.sleep(0)
    request = Waiting()
    gate.arrived(request)
    await asyncio.sleep(0.05)
    paused_at = pieces.rendered
    await asyncio.sleep(0.05)
    assert pieces.rendered == paused_at, "a piece was rendered while a request waited"
    assert not streaming.done()
    request.response_started = True
    await asyncio.wait_for(streaming, 30)
    gate.left(request)
    assert pieces.rendered == 20


class Watched(Client):
    """A client that notes how many pieces were rendered when the head reached it."""

    def __init__(self, pieces: Pieces) -> None:
        super().__init__()
        self.pieces = pieces
        self.rendered_at_head: int | None = None

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.rendered_at_head = self.pieces.rendered
        await super().send(message)


@pytest.mark.parametrize("compress", [False, True])
async def test_a_body_known_to_pass_the_threshold_sends_its_head_before_rendering(
    compress: bool,
) -> None:
    body = [b'{"x":"%d"}' % i * 2000 for i in range(40)]
    eager, known = Watched(Pieces(body)), Watched(Pieces(body))
    await answer(eager.pieces, eager, gzip=compress)
    await answer(known.pieces, known, gzip=compress, size_floor=GZIP_THRESHOLD_BYTES + 1)
    past = next(k for k in range(len(body) + 1) if sum(map(len, body[:k])) > GZIP_THRESHOLD_BYTES)
    assert eager.rendered_at_head == past, "unknown: rendered until past the threshold"
    assert known.rendered_at_head == 0
    assert known.headers == eager.headers
    assert b"".join(known.bodies) == b"".join(eager.bodies)
    assert known.more[-1] is False


async def test_a_floor_at_the_threshold_changes_nothing() -> None:
    body = [b"a" * 1000] * 3
    client = Watched(Pieces(body))
    await answer(client.pieces, client, gzip=True, size_floor=GZIP_THRESHOLD_BYTES)
    assert client.rendered_at_head == 3
    assert client.headers[b"content-length"] == b"3000"


@pytest.mark.parametrize("compress", [False, True])
async def test_a_stream_started_early_renders_its_first_piece_after_waiting_requests(
    compress: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(first_bytes, "MAX_PAUSE_SECONDS", 60.0)
    gate = first_bytes.first_bytes_gate()
    request = Waiting()
    gate.arrived(request)
    client = Watched(Pieces([os.urandom(100_000) for _ in range(3)]))
    streaming = asyncio.ensure_future(
        answer(client.pieces, client, gzip=compress, size_floor=GZIP_THRESHOLD_BYTES + 1)
    )
    await asyncio.sleep(0.05)
    assert client.rendered_at_head == 0, "the head went out"
    assert client.pieces.rendered == 0, "no piece while a request waits for its first byte"
    request.response_started = True
    await asyncio.wait_for(streaming, 30)
    gate.left(request)
    assert client.pieces.rendered == 3


@dataclass
class Waiting:
    """A request as the gate reads it (uvicorn's cycle), before its response starts."""

    response_started: bool = False
    response_complete: bool = False
    disconnected: bool = False
