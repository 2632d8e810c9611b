"""LIST bodies streamed and gzipped over real HTTP (apiserver/streaming.py), against the
apiserver as ``watchcache serve`` runs it (uvicorn, the guarded protocol) over a real etcd.

* a large LIST arrives in HTTP/1.1 chunks, with the very bytes the cache renders at once;
  a small one whole, with its Content-Length, as before;
* gzip only when asked (``Accept-Encoding: gzip``) and only above 128 KiB, exactly at
  kube's threshold; the compressed body decompresses to the same bytes; Tables and single
  objects alike; never with ``response_compression=False``;
* a client that stops reading holds the page's snapshot (its nodes outlive every object
  being deleted), and one that disconnects mid-body lets it go.

The HTTP client here is a raw one (asyncio streams), so the framing itself — chunks or a
Content-Length, which headers — is what the test sees, not what a client library makes of
it; httpx checks that an ordinary client decodes the gzip.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from apiserver_fixture import RunningApiServer, running_apiserver

from watchcache import _core
from watchcache.apiserver.streaming import GZIP_THRESHOLD_BYTES
from watchcache.cli.load import load_objects
from watchcache.etcd.process import EtcdCluster
from watchcache.registry.resources import CONFIGMAPS
from watchcache.wire.options import ListOptions

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
COUNT = 400  # configmaps of ~1 KB: a LIST of all of them is ~420 KB


@dataclass
class Raw:
    status: int
    headers: dict[str, str]
    #: The body as sent: the chunks' payloads (one element for a Content-Length body).
    pieces: list[bytes]

    @property
    def body(self) -> bytes:
        return b"".join(self.pieces)

    @property
    def chunked(self) -> bool:
        return self.headers.get("transfer-encoding") == "chunked"


async def raw_get(url: str, path: str, headers: dict[str, str] | None = None) -> Raw:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port), limit=1 << 20)
    try:
        await send_request(writer, path, headers or {})
        return await read_answer(reader)
    finally:
        writer.close()


async def send_request(writer: asyncio.StreamWriter, path: str, headers: dict[str, str]) -> None:
    lines = [f"GET {path} HTTP/1.1", "Host: test", *(f"{k}: {v}" for k, v in headers.items())]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    await writer.drain()


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    fields: dict[str, str] = {}
    for line in head[1:]:
        if line:
            name, value = line.split(":", 1)
            assert name.lower() not in fields, f"header {name} sent twice"
            fields[name.lower()] = value.strip()
    return int(head[0].split()[1]), fields


async def read_answer(reader: asyncio.StreamReader) -> Raw:
    status, fields = await read_head(reader)
    if "content-length" in fields:
        assert "transfer-encoding" not in fields
        return Raw(status, fields, [await reader.readexactly(int(fields["content-length"]))])
    assert fields.get("transfer-encoding") == "chunked", fields
    return Raw(status, fields, await read_chunks(reader))


async def read_chunks(reader: asyncio.StreamReader) -> list[bytes]:
    """A chunked body's payloads, to its last (empty) chunk."""
    pieces: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        piece = await reader.readexactly(size + 2)
        assert piece.endswith(b"\r\n")
        if size == 0:
            return pieces
        pieces.append(piece[:-2])


async def slow_connection(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection with a small receive buffer (so the server stalls once the socket
    buffers are full) and a small read buffer here."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    host, port = url.removeprefix("http://").split(":")
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    return await asyncio.open_connection(sock=sock, limit=1 << 16)


async def rendered(api: RunningApiServer, query: str = "") -> tuple[int, bytes]:
    """The body the cache renders at once for a LIST at RV=0 (its rv, its bytes): what
    every answer was before streaming."""
    reader = api.server.readers["configmaps"]
    opts = dict(item.split("=", 1) for item in query.split("&") if item)
    result = await reader.list(ListOptions(resource_version="0", limit=int(opts.get("limit", 0))))
    return result.resource_version, reader.render(result)


async def until(condition: object, what: str, timeout: float = 30.0) -> None:
    """Wait for ``condition()`` (an async or plain callable) to hold, polling."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = condition()  # type: ignore[operator]
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"still not: {what}")
        await asyncio.sleep(0.05)


async def cached_count(http: httpx.AsyncClient) -> int:
    body = (await http.get("/api/v1/configmaps", params={"limit": 1})).json()
    return int(len(body["items"]) + body["metadata"].get("remainingItemCount", 0))


@pytest.fixture
async def api(etcd: EtcdCluster) -> AsyncIterator[RunningApiServer]:
    async with running_apiserver(etcd.endpoints, [CONFIGMAPS]) as running:
        await load_objects(running.client, CONFIGMAPS, count=COUNT, size=1024, namespaces=4)
        async with httpx.AsyncClient(base_url=running.url, timeout=30) as http:
            await until(lambda: _counted(http, COUNT), f"{COUNT} configmaps in the cache")
        yield running


async def _counted(http: httpx.AsyncClient, count: int) -> bool:
    return await cached_count(http) == count


# -- framing ---------------------------------------------------------------------------------


async def test_a_large_list_is_streamed_in_chunks_with_the_same_bytes(
    api: RunningApiServer,
) -> None:
    answer = await raw_get(api.url, "/api/v1/configmaps?resourceVersion=0")
    rv, whole = await rendered(api)
    assert answer.status == 200
    assert answer.chunked and "content-length" not in answer.headers
    assert answer.headers["content-type"] == "application/json"
    assert "content-encoding" not in answer.headers and "vary" not in answer.headers
    assert len(whole) > 2 * GZIP_THRESHOLD_BYTES
    assert answer.body == whole
    assert json.loads(answer.body)["metadata"]["resourceVersion"] == str(rv)
    assert len(answer.pieces) >= 2, "sent as it was rendered, in pieces"


async def test_a_small_list_is_sent_whole_as_before(api: RunningApiServer) -> None:
    answer = await raw_get(api.url, "/api/v1/configmaps?resourceVersion=0&limit=3")
    _, whole = await rendered(api, "limit=3")
    assert answer.headers["content-length"] == str(len(whole))
    assert not answer.chunked
    assert answer.body == whole


async def test_a_consistent_list_streams_too(api: RunningApiServer) -> None:
    answer = await raw_get(api.url, "/api/v1/configmaps")
    listed = json.loads(answer.body)
    assert answer.chunked
    assert len(listed["items"]) == COUNT
    _, whole = await rendered(api)
    assert answer.body == whole, "nothing was written: the same list at the same rv"


# -- gzip ------------------------------------------------------------------------------------


async def test_gzip_only_when_asked_and_only_above_128_kib(api: RunningApiServer) -> None:
    # The largest page whose body is at most 128 KiB, and the next one, by their plain size.
    sizes = {}
    for limit in range(100, 160):
        plain = await raw_get(api.url, f"/api/v1/configmaps?resourceVersion=0&limit={limit}")
        sizes[limit] = len(plain.body)
    under = max(k for k, size in sizes.items() if size <= GZIP_THRESHOLD_BYTES)
    over = under + 1
    assert sizes[over] > GZIP_THRESHOLD_BYTES
    asked = {"Accept-Encoding": "gzip"}

    at = await raw_get(api.url, f"/api/v1/configmaps?resourceVersion=0&limit={under}", asked)
    assert "content-encoding" not in at.headers, "128 KiB or less: never compressed"
    assert at.headers["content-length"] == str(sizes[under])
    _, whole_under = await rendered(api, f"limit={under}")
    assert at.body == whole_under

    past = await raw_get(api.url, f"/api/v1/configmaps?resourceVersion=0&limit={over}", asked)
    assert past.headers["content-encoding"] == "gzip"
    assert past.headers["vary"] == "Accept-Encoding"
    assert "content-length" not in past.headers and past.chunked
    _, whole_over = await rendered(api, f"limit={over}")
    assert gzip.decompress(past.body) == whole_over
    assert len(past.body) < len(whole_over) / 4

    for accept_encoding in ("identity", "deflate, br", "gzip;q=1.0", "x-gzip"):
        # kube matches the bare token "gzip" only (no q-values are read).
        other = await raw_get(
            api.url, "/api/v1/configmaps?resourceVersion=0", {"Accept-Encoding": accept_encoding}
        )
        assert "content-encoding" not in other.headers, accept_encoding


async def test_a_whole_list_gzipped_decompresses_to_the_same_bytes(
    api: RunningApiServer,
) -> None:
    answer = await raw_get(
        api.url, "/api/v1/configmaps?resourceVersion=0", {"Accept-Encoding": "deflate, gzip"}
    )
    _, whole = await rendered(api)
    assert answer.headers["content-encoding"] == "gzip"
    assert gzip.decompress(answer.body) == whole
    # An ordinary client (httpx asks for gzip itself) gets the list, decoded.
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        response = await http.get("/api/v1/configmaps", params={"resourceVersion": "0"})
    assert response.headers["content-encoding"] == "gzip"
    assert response.content == whole


async def test_tables_and_large_objects_are_gzipped_too(api: RunningApiServer) -> None:
    asked = {"Accept-Encoding": "gzip"}
    table = await raw_get(
        api.url, "/api/v1/configmaps?includeObject=Object", {"Accept": TABLE, **asked}
    )
    plain = await raw_get(api.url, "/api/v1/configmaps?includeObject=Object", {"Accept": TABLE})
    assert table.headers["content-encoding"] == "gzip"
    rows = json.loads(gzip.decompress(table.body))["rows"]
    assert len(rows) == COUNT == len(json.loads(plain.body)["rows"])
    assert "content-encoding" not in plain.headers

    big = {"metadata": {"name": "big"}, "data": {"k": "v" * (200 * 1024)}}
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        created = await http.post("/api/v1/namespaces/demo-0/configmaps", json=big)
        assert created.status_code == 201, created.text
    path = "/api/v1/namespaces/demo-0/configmaps/big"
    got = await raw_get(api.url, path, asked)
    unasked = await raw_get(api.url, path)
    assert got.headers["content-encoding"] == "gzip"
    assert gzip.decompress(got.body) == unasked.body
    assert json.loads(unasked.body)["data"]["k"] == big["data"]["k"]
    assert unasked.headers["content-length"] == str(len(unasked.body))


async def test_compression_off_answers_plain(etcd: EtcdCluster) -> None:
    async with running_apiserver(
        etcd.endpoints, [CONFIGMAPS], response_compression=False
    ) as running:
        await load_objects(running.client, CONFIGMAPS, count=COUNT, size=1024, namespaces=4)
        async with httpx.AsyncClient(base_url=running.url, timeout=30) as http:
            await until(lambda: _counted(http, COUNT), "the configmaps in the cache")
        answer = await raw_get(
            running.url, "/api/v1/configmaps?resourceVersion=0", {"Accept-Encoding": "gzip"}
        )
        assert "content-encoding" not in answer.headers
        assert answer.chunked
        assert len(json.loads(answer.body)["items"]) == COUNT


# -- memory: the snapshot is held while the body is read, and let go on a disconnect --------


async def test_a_stalled_reader_holds_the_snapshot_and_a_disconnect_frees_it(
    etcd: EtcdCluster,
) -> None:
    # No stored snapshots: the engine's nodes outside the live tree are then exactly what
    # in-flight reads hold. The objects' items outlive their deletion in the watch history,
    # the replaced tree's nodes only in a snapshot: nodes are what to count.
    count, size = 1500, 8 * 1024  # a ~12 MB body: more than the socket buffers hold
    async with running_apiserver(etcd.endpoints, [CONFIGMAPS], snapshots=False) as running:
        await load_objects(running.client, CONFIGMAPS, count=count, size=size, namespaces=3)
        async with httpx.AsyncClient(base_url=running.url, timeout=30) as http:
            await until(lambda: _counted(http, count), "the configmaps in the cache")
            reader, writer = await slow_connection(running.url)
            try:
                await send_request(writer, "/api/v1/configmaps?resourceVersion=0", {})
                status, fields = await read_head(reader)
                assert status == 200 and fields["transfer-encoding"] == "chunked"
                assert b'"kind":"ConfigMapList"' in await reader.read(4096)
                # The reader stops here. Every object is deleted meanwhile: the live tree
                # empties, and the old tree's nodes live on only in the stalled LIST's page.
                await running.client.delete_range(
                    CONFIGMAPS.prefix.encode(), CONFIGMAPS.prefix[:-1].encode() + b"0"
                )
                await until(lambda: _counted(http, 0), "every configmap gone from the cache")
                held = _core.live_counters()["nodes"]
                assert held > count // _core.FANOUT, "the stalled LIST holds the old tree"
            finally:
                writer.transport.abort()
            # The server sees the disconnect before its next piece and drops the page.
            await until(
                lambda: _core.live_counters()["nodes"] < held - count // (2 * _core.FANOUT),
                "the snapshot of a disconnected LIST let go",
            )


async def test_a_slow_reader_gets_the_list_as_it_was_read(etcd: EtcdCluster) -> None:
    count, size = 1500, 8 * 1024
    async with running_apiserver(etcd.endpoints, [CONFIGMAPS], snapshots=False) as running:
        await load_objects(running.client, CONFIGMAPS, count=count, size=size, namespaces=3)
        async with httpx.AsyncClient(base_url=running.url, timeout=30) as http:
            await until(lambda: _counted(http, count), "the configmaps in the cache")
            reader, writer = await slow_connection(running.url)
            with contextlib.closing(writer):
                await send_request(writer, "/api/v1/configmaps?resourceVersion=0", {})
                status, _ = await read_head(reader)
                # Nothing read yet, the server stalled mid-body: every object is deleted.
                await running.client.delete_range(
                    CONFIGMAPS.prefix.encode(), CONFIGMAPS.prefix[:-1].encode() + b"0"
                )
                await until(lambda: _counted(http, 0), "every configmap gone from the cache")
                body = b"".join(await read_chunks(reader))
        assert status == 200
        listed = json.loads(body)
        assert len(listed["items"]) == count, "the LIST answers the state it was read at"
        newest = max(int(item["metadata"]["resourceVersion"]) for item in listed["items"])
        assert int(listed["metadata"]["resourceVersion"]) >= newest
