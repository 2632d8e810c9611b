"""The LIST client of bench/list_memory.py: GETs over fresh HTTP/1.1 connections, bodies
read with 1 MiB buffers and discarded, timed to the first byte and to the last.

Standard library only, so that a client process starts in milliseconds:
``python bench/list_client.py PORT PATH LISTS plain|gzip`` prints ``ready``, waits for a
line on stdin (the go of a burst: every client starts at once), sends LISTS GETs of PATH
one after the other and prints their samples as one JSON list.
"""

from __future__ import annotations

import io
import json
import socket
import sys
import time
from dataclasses import asdict, dataclass
from typing import cast

READ_BYTES = 1 << 20


@dataclass
class Sample:
    ttfb_ms: float
    total_ms: float
    wire_bytes: int  # the body as sent (compressed when gzipped)
    chunked: bool
    gzipped: bool
    status: int


def get(port: int, path: str, *, gzip: bool, keep: list[bytes] | None = None) -> Sample:
    """One GET; the body is read and dropped (or kept in ``keep``, for the checks). Time to
    first byte: from the request's send to the first byte of the answer."""
    headers = "Accept-Encoding: gzip\r\n" if gzip else ""
    request = f"GET {path} HTTP/1.1\r\nHost: bench\r\n{headers}Connection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stream = cast(io.BufferedReader, sock.makefile("rb", buffering=READ_BYTES))
        begin = time.perf_counter()
        sock.sendall(request.encode())
        stream.peek(1)
        first = time.perf_counter()
        status = int(stream.readline().split()[1])
        fields = {}
        while (line := stream.readline()) not in (b"\r\n", b""):
            name, value = line.decode("latin-1").split(":", 1)
            fields[name.strip().lower()] = value.strip()
        scratch = memoryview(bytearray(READ_BYTES))
        chunked = fields.get("transfer-encoding") == "chunked"
        wire = 0
        if chunked:
            while size := int(stream.readline().split(b";")[0], 16):
                wire += _read(stream, size, scratch, keep)
                stream.readline()
            stream.readline()
        else:
            wire = _read(stream, int(fields.get("content-length", "0")), scratch, keep)
        end = time.perf_counter()
    gzipped = fields.get("content-encoding") == "gzip"
    return Sample((first - begin) * 1e3, (end - begin) * 1e3, wire, chunked, gzipped, status)


def _read(
    stream: io.BufferedReader, size: int, scratch: memoryview, keep: list[bytes] | None
) -> int:
    left = size
    while left:
        n = stream.readinto(scratch[: min(left, len(scratch))])
        if not n:
            raise ConnectionError("the body was cut short")
        if keep is not None:
            keep.append(bytes(scratch[:n]))
        left -= n
    return size


def main(argv: list[str]) -> int:
    port, path, lists, mode = argv
    print("ready", flush=True)
    sys.stdin.readline()
    samples = [get(int(port), path, gzip=mode == "gzip") for _ in range(int(lists))]
    print(json.dumps([asdict(x) for x in samples]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
