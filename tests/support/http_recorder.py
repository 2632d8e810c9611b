"""A recording HTTP/1.1 proxy for end-to-end tests: a client (kubectl, the official Python
client) talks to the apiserver through it, and the test reads what crossed the wire —
each request's head and each response's head and body framing — rather than what the
client's library made of it (Go's transport takes ``Content-Encoding: gzip`` away once
it has decompressed a body; urllib3 decodes it too).

Each connection is relayed as HTTP messages, not bytes: requests and responses are read
by their framing (Content-Length, chunked, or none) and forwarded as they arrive, piece
by piece, so streamed answers (watches, large LISTs) flow through unchanged. Only GET and
bodies of the kinds the apiserver sends are handled: a test double, not a general proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field


@dataclass
class Exchange:
    """One request and its response, as sent."""

    method: str
    target: str
    request_headers: dict[str, str]
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    #: The response body's bytes as sent (the chunks' payloads joined; still compressed).
    body_bytes: int = 0
    chunks: int = 0


async def _read_head(reader: asyncio.StreamReader) -> tuple[bytes, str, dict[str, str]] | None:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = raw.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return raw, lines[0], headers


async def _relay_body(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: dict[str, str]
) -> tuple[int, int]:
    """Forward one message body by its framing; returns (payload bytes, chunks)."""
    if headers.get("transfer-encoding") == "chunked":
        size_total = chunks = 0
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip(), 16)
            data = await reader.readexactly(size + 2)
            writer.write(size_line + data)
            await writer.drain()
            if size == 0:
                return size_total, chunks
            size_total += size
            chunks += 1
    length = int(headers.get("content-length", "0"))
    remaining = length
    while remaining:
        data = await reader.read(min(remaining, 1 << 16))
        if not data:
            raise ConnectionError("body cut short")
        writer.write(data)
        await writer.drain()
        remaining -= len(data)
    return length, 0


class RecordingProxy:
    """``async with RecordingProxy(target_port) as proxy``: clients use ``proxy.url``;
    ``proxy.exchanges`` lists what went through, in order of requests."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.exchanges: list[Exchange] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.url = ""

    async def __aenter__(self) -> RecordingProxy:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._server.wait_closed()

    def answers_to(self, path_prefix: str) -> list[Exchange]:
        """The exchanges whose request target starts with ``path_prefix``."""
        return [e for e in self.exchanges if e.target.startswith(path_prefix)]

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        try:
            while True:
                head = await _read_head(reader)
                if head is None:
                    return
                raw, request_line, headers = head
                method, target, _ = request_line.split(" ", 2)
                exchange = Exchange(method, target, headers)
                self.exchanges.append(exchange)
                upstream_writer.write(raw)
                await _relay_body(reader, upstream_writer, headers)
                answer = await _read_head(upstream_reader)
                if answer is None:
                    return
                raw_answer, status_line, response_headers = answer
                exchange.status = int(status_line.split(" ", 2)[1])
                exchange.response_headers = response_headers
                writer.write(raw_answer)
                if method != "HEAD" and exchange.status not in (204, 304):
                    exchange.body_bytes, exchange.chunks = await _relay_body(
                        upstream_reader, writer, response_headers
                    )
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._tasks.discard(task)
            upstream_writer.close()
            writer.close()
