"""How the apiserver meets HTTP: uvicorn, hardened against clients that hold connections.

uvicorn's HTTP protocol has no deadline for a request's head and no cap on its size, so a
client could hold a connection forever by sending headers one byte at a time (slowloris)
or make the server buffer an endless header. :func:`uvicorn_config` serves with
:class:`GuardedHttpProtocol`, which adds the limits Kubernetes' Go server has (see there).
The protocol also puts each request on the record of the event loop's first-bytes gate
(first_bytes.py) until its response ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from watchcache.apiserver.first_bytes import first_bytes_gate

#: Go's net/http as Kubernetes configures it: ``ReadHeaderTimeout`` 32 s, ``MaxHeaderBytes``
#: 1 MiB (Go's default); the body deadline is the apiserver's default ``--request-timeout``.
HEAD_TIMEOUT_SECONDS = 32.0
MAX_HEAD_BYTES = 1 << 20
BODY_TIMEOUT_SECONDS = 60.0
#: ``IdleTimeout``: a kept-alive connection stays open this long between requests, as long
#: as Go's client keeps idle connections (``http.DefaultTransport``); uvicorn's default of
#: 5 s closes connections clients still count on, and a request sent as the server closes
#: one fails with a reset (kopf's peering keepalives did, every 30 s).
IDLE_TIMEOUT_SECONDS = 90
#: How long a response sent before its request body arrived (an early 413, 400, 404) keeps
#: discarding what the client still sends before the connection closes. Closing at once
#: would reset a client still writing, and it could lose the response; reading on forever
#: would let it stream a body without end (Go waits 500 ms for the same reason).
LINGER_SECONDS = 1.0

_HEADERS_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\n\r\n"
    b"431 Request Header Fields Too Large"
)


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with deadlines and a size cap on what a client sends.

    * the head of a request (request line and headers) must arrive within ``head_timeout``
      of the connection opening, or of its first byte on a kept-alive connection; else the
      connection is closed without an answer, as Go does (idle kept-alive connections are
      uvicorn's ``timeout_keep_alive``);
    * a head past ``max_head_bytes`` gets Go's plain-text 431 and the connection ends as
      below (the count is per read, so it may pass the cap by one read);
    * a request body must arrive within ``body_timeout`` of its head; else the connection
      closes and the handler sees a client disconnect;
    * a response completed before its request body was read (an early 413) ends the
      connection: half-closed at once, input discarded for ``LINGER_SECONDS``, then closed.

    Memory per connection is thereby bounded by the head cap plus the body limit the
    handlers enforce (``admission.MAX_BODY_BYTES``), and time by the deadlines. The hooks
    overridden are uvicorn's parser callbacks; everything else is uvicorn's.

    A request whose handler starts at once (not one pipelined behind a response still going)
    is on the first-bytes gate's record from its complete head to the end of its response or
    connection; the gate reads from the request whether its response has started.
    """

    head_timeout: float = HEAD_TIMEOUT_SECONDS
    max_head_bytes: int = MAX_HEAD_BYTES
    body_timeout: float = BODY_TIMEOUT_SECONDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._in_head = True
        self._head_bytes = 0
        self._lingering = False
        self._first_bytes = first_bytes_gate(self.loop)
        self._on_record: RequestResponseCycle | None = None

    def _arm(self, seconds: float, expired: Callable[[], None]) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _close(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm(self.head_timeout, self._close)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._off_record()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        if self._in_head:
            self._head_bytes += len(data)
            if self._head_bytes > self.max_head_bytes:
                self.transport.write(_HEADERS_TOO_LARGE)
                self._linger()
                return
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        if self._deadline is None:
            self._arm(self.head_timeout, self._close)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._arm(self.body_timeout, self._close)
        previous = self.cycle
        super().on_headers_complete()
        cycle = self.cycle
        started = cycle is not None and cycle is not previous
        at_once = previous is None or previous.response_complete
        if started and at_once:
            self._off_record()
            self._first_bytes.arrived(cycle)
            self._on_record = cycle

    def _off_record(self) -> None:
        if self._on_record is not None:
            self._first_bytes.left(self._on_record)
            self._on_record = None

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        self._off_record()
        cycle = self.cycle
        unread_body = cycle is not None and cycle.response_complete and cycle.more_body
        super().on_response_complete()
        if self.cycle is None or self.cycle.response_complete:
            # No pipelined request is in flight: the next byte starts a head, and counts.
            self._in_head = True
        if unread_body and not self.transport.is_closing():
            self._unset_keepalive_if_required()
            self._linger()

    def _linger(self) -> None:
        """End the connection after what was written, ignoring what still comes in."""
        self._lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._arm(LINGER_SECONDS, self._close)


def guarded_protocol(
    *,
    head_timeout: float = HEAD_TIMEOUT_SECONDS,
    max_head_bytes: int = MAX_HEAD_BYTES,
    body_timeout: float = BODY_TIMEOUT_SECONDS,
) -> type[GuardedHttpProtocol]:
    """:class:`GuardedHttpProtocol` with other limits (uvicorn takes a class, not an
    instance, so the limits are class attributes of a subclass)."""
    limits = {
        "head_timeout": head_timeout,
        "max_head_bytes": max_head_bytes,
        "body_timeout": body_timeout,
    }
    return type("GuardedHttpProtocol", (GuardedHttpProtocol,), limits)


def uvicorn_config(
    app: Any,
    *,
    host: str,
    port: int,
    log_level: str = "info",
    timeout_graceful_shutdown: int = 3,
    protocol: type[GuardedHttpProtocol] = GuardedHttpProtocol,
) -> uvicorn.Config:
    """How ``watchcache serve`` runs ``app`` under uvicorn: its lifespan on, and
    ``protocol`` (the guarded HTTP protocol, see :func:`guarded_protocol`) for HTTP/1.1."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=timeout_graceful_shutdown,
        lifespan="on",
        http=protocol,
        timeout_keep_alive=IDLE_TIMEOUT_SECONDS,
    )
