"""Requests waiting for their first byte go ahead of the bulk of LIST bodies.

A LIST streamed from the cache (streaming.py) renders and writes a piece of about 256 KiB
per turn of the event loop. Eight of them in flight make every turn of the loop several
milliseconds long, and a request that needs a few turns before it can answer — a
consistent read calls etcd for its current revision, and may wait for the cache's watch to
catch up — waits that many long turns: in bench/list_memory.py's burst (8 full LISTs of
150,000 pods), a consistent LIST took 2.6 ms to its first byte alone and ~9 ms in the
burst, a LIST at ``resourceVersion=0`` (no etcd call) ~5 ms.

So the streams give way: a request is *waiting* from the moment its head is complete (the
HTTP protocol, http.py, records it) until its response starts, and a stream about to render
its next piece first waits while any request is, for at most :data:`MAX_PAUSE_SECONDS` per
piece, so that a request that takes long to answer (etcd slow, a large read from etcd)
slows the streams down instead of stopping them. kube-apiserver reaches for the same end
with API Priority and Fairness; this is much less: only the bulk of LIST bodies yields, only
to requests that have not started answering. A request costs the protocol a dict insert and
a removal (a GET at ``resourceVersion=0`` 0.190 M instructions against 0.188 M, ``python
bench/read_path.py --callgrind --base <rev>``); the streams read the records (uvicorn's
request cycles: whether the response has started) and look again every
:data:`LOOK_AGAIN_SECONDS` while they wait, since nothing tells when a response starts.
Wrapping each request's send to be told instead cost that GET 0.201 M against 0.186 M.

One gate per event loop (a server runs on one; tests run several, each on its own).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Final, Protocol

#: The longest a stream waits before each piece while requests wait for their first byte.
MAX_PAUSE_SECONDS: Final = 0.005
#: How often a waiting stream looks whether the requests it waits for have answered.
LOOK_AGAIN_SECONDS: Final = 0.0005


class Answering(Protocol):
    """What the gate reads of a request: uvicorn's RequestResponseCycle."""

    @property
    def response_started(self) -> bool: ...
    @property
    def response_complete(self) -> bool: ...
    @property
    def disconnected(self) -> bool: ...


def _waits(request: Answering) -> bool:
    return not (request.response_started or request.response_complete or request.disconnected)


class FirstBytesGate:
    """The requests of one event loop from their complete head to the end of their response
    (the HTTP protocol records them: :meth:`arrived`, :meth:`left`), and the streams' way to
    give way to those that wait for their first byte (:meth:`give_way`)."""

    __slots__ = ("_requests", "_unanswered")

    def __init__(self) -> None:
        self._requests: dict[int, Answering] = {}
        # The recorded requests not yet seen answering, which a stream looks through: the
        # ones seen answering leave it for good (a response that started stays started), so
        # open watches, however many, are looked at once, not at every piece of every stream.
        self._unanswered: dict[int, Answering] = {}

    def arrived(self, request: Answering) -> None:
        self._requests[id(request)] = request
        self._unanswered[id(request)] = request

    def left(self, request: Answering) -> None:
        self._requests.pop(id(request), None)
        self._unanswered.pop(id(request), None)

    @property
    def recorded(self) -> int:
        return len(self._requests)

    @property
    def waiting(self) -> int:
        """Requests whose response has not started."""
        unanswered = self._unanswered
        if unanswered:
            for key in [key for key, request in unanswered.items() if not _waits(request)]:
                del unanswered[key]
        return len(unanswered)

    async def give_way(self) -> None:
        """A stream's step between two pieces: lets every other task run once, and while
        requests wait for their first byte, waits until none does (at most
        :data:`MAX_PAUSE_SECONDS`)."""
        await asyncio.sleep(0)
        if not self.waiting:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + MAX_PAUSE_SECONDS
        while self.waiting and loop.time() < deadline:
            await asyncio.sleep(LOOK_AGAIN_SECONDS)


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
