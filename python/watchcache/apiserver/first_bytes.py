"""Requests waiting for their first byte go ahead of the bulk of LIST bodies.

A LIST streamed from the cache (streaming.py) renders and writes a piece of about 256 KiB
per turn of the event loop. Eight of them in flight make every turn of the loop several
milliseconds long, and a request that needs a few turns before it can answer — a
consistent read calls etcd for its current revision, and may wait for the cache's watch to
catch up — waits that many long turns: in bench/list_memory.py's burst (8 full LISTs of
150,000 pods), a consistent LIST took 2.6 ms to its first byte alone and ~9 ms in the
burst, a LIST at ``resourceVersion=0`` (no etcd call) ~5 ms.

So the streams give way: while a stream is in flight, a request is *waiting* from the
moment its head is complete (the HTTP protocol, http.py) until it sends its first response
message, and a stream about to render its next piece first waits while any request is, for
at most :data:`MAX_PAUSE_SECONDS` per piece, so that a request that takes long to answer
(etcd slow, a large read from etcd) slows the streams down instead of stopping them.
kube-apiserver reaches for the same end with API Priority and Fairness; this is much less:
only the bulk of LIST bodies yields, only to requests that have not started answering.
With no stream in flight nothing is counted: counting every request cost a GET at
``resourceVersion=0`` 0.201 M instructions against 0.186 M (``python bench/read_path.py
--callgrind --base <rev>``), so requests pay it only when streams are there to give way.

One gate per event loop (a server runs on one; tests run several, each on its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Iterator
from typing import Final

#: The longest a stream waits before each piece while requests wait for their first byte.
MAX_PAUSE_SECONDS: Final = 0.005


class FirstBytesGate:
    """The streams of one event loop in flight (:meth:`streaming`), how many of its requests
    wait for their first byte (the HTTP protocol counts them while ``streams`` is not 0:
    :meth:`arrived`, :meth:`answered`, once each per request), and the streams' way to give
    way to them (:meth:`give_way`)."""

    __slots__ = ("_paused", "streams", "waiting")

    def __init__(self) -> None:
        self.streams = 0
        self.waiting = 0
        self._paused: list[asyncio.Future[None]] = []

    @contextlib.contextmanager
    def streaming(self) -> Iterator[None]:
        """Around a stream's pieces."""
        self.streams += 1
        try:
            yield
        finally:
            self.streams -= 1

    def arrived(self) -> None:
        self.waiting += 1

    def answered(self) -> None:
        self.waiting -= 1
        if not self.waiting and self._paused:
            paused, self._paused = self._paused, []
            for stream in paused:
                if not stream.done():
                    stream.set_result(None)

    async def give_way(self) -> None:
        """A stream's step between two pieces: lets every other task run once, and while
        requests wait for their first byte, waits until none does (at most
        :data:`MAX_PAUSE_SECONDS`)."""
        if not self.waiting:
            await asyncio.sleep(0)
            return
        resumed = asyncio.get_running_loop().create_future()
        self._paused.append(resumed)
        try:
            async with asyncio.timeout(MAX_PAUSE_SECONDS):
                await resumed
        except TimeoutError:
            pass


_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FirstBytesGate] = (
    weakref.WeakKeyDictionary()
)


def first_bytes_gate(loop: asyncio.AbstractEventLoop | None = None) -> FirstBytesGate:
    """The gate of ``loop`` (the running loop by default)."""
    loop = loop or asyncio.get_running_loop()
    gate = _GATES.get(loop)
    if gate is None:
        gate = _GATES[loop] = FirstBytesGate()
    return gate
