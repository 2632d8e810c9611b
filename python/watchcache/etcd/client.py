"""An asyncio etcd v3 client over ``grpc.aio`` with several endpoints and failover.

One channel per endpoint, created lazily. A call goes to the endpoint that answered
last; when it is unreachable (``UNAVAILABLE``) the call moves on to the next endpoint,
and after a full round it backs off and tries again until the call's deadline. Reads
are always retried that way. Writes are compare-and-swap transactions, so a retried
write whose first attempt did commit fails its compare instead of writing twice; the
caller reads the key again to tell "conflict" from "already done".

etcd's errors become typed exceptions: a compacted revision is :class:`CompactedError`
(a 410 :class:`~watchcache.wire.errors.ExpiredError`), a future revision
:class:`FutureRevisionError`, an unreachable cluster :class:`EtcdUnavailableError`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import grpc.aio
from google.protobuf.message import Message

from watchcache.etcd.proto import kv_pb2, rpc_pb2
from watchcache.wire.errors import CompactedError

ResponseT = TypeVar("ResponseT", bound=Message)

#: Python's default 4 MiB receive limit is far too small for a page of 10,000 objects.
MAX_MESSAGE_BYTES = 512 * 1024 * 1024
#: etcd's own limit on operations in one transaction (``--max-txn-ops``).
MAX_TXN_OPS = 128

#: The message etcd's ``ErrCompacted`` carries (``OUT_OF_RANGE``).
_COMPACTED = "required revision has been compacted"
_FUTURE = "required revision is a future revision"
#: Failures that mean "this endpoint cannot answer now; another might".
_RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE})

CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    # No pings on idle channels: etcd's server policy counts them as abuse and closes the
    # connection (GOAWAY too_many_pings); a watch stream is a call, so it stays covered.
    ("grpc.keepalive_permit_without_calls", 0),
    # Fail fast on a dead member so failover moves on instead of waiting out the deadline.
    ("grpc.initial_reconnect_backoff_ms", 100),
    # Despite its name, gRPC core's connection-attempt timeout (default 20 s): a member that
    # accepts TCP but never answers (stopped, frozen) fails the call with UNAVAILABLE after
    # 1 s, so failover moves on; otherwise a call waited out its whole deadline on it.
    ("grpc.min_reconnect_backoff_ms", 1_000),
    ("grpc.max_reconnect_backoff_ms", 2_000),
    ("grpc.enable_retries", 0),
)


class EtcdError(Exception):
    """An etcd call failed; ``code`` is the gRPC status code, ``details`` etcd's text."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None, details: str = ""):
        super().__init__(message)
        self.code = code
        self.details = details


class EtcdUnavailableError(EtcdError):
    """No endpoint answered before the deadline."""


class FutureRevisionError(EtcdError):
    """A read asked for a revision etcd has not reached yet."""


def prefix_range_end(prefix: bytes) -> bytes:
    """The ``range_end`` that makes a range cover every key starting with ``prefix``: the
    prefix with its last byte below 0xFF incremented and the rest dropped; ``b"\\0"`` (to
    the end of the keyspace) when every byte is 0xFF, and for the empty prefix (every
    key; a Range also needs a non-empty start key then: :meth:`EtcdClient.range_prefix`
    uses ``b"\\0"``, as etcd's own client does)."""
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\0"


def translate_error(error: grpc.aio.AioRpcError) -> Exception:
    """The typed exception for an etcd gRPC failure."""
    code = error.code()
    details = error.details() or ""
    if code is grpc.StatusCode.OUT_OF_RANGE and _COMPACTED in details:
        return CompactedError()
    if code is grpc.StatusCode.OUT_OF_RANGE and _FUTURE in details:
        return FutureRevisionError(f"etcd: {details}", code, details)
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return EtcdUnavailableError(f"etcd unavailable: {details}", code, details)
    return EtcdError(f"etcd: {code.name}: {details}", code, details)


@dataclass(frozen=True, slots=True)
class TxnResult:
    """Outcome of a compare-and-swap: ``succeeded`` says whether the compare held;
    ``revision`` is the store revision after the transaction; ``current`` is the key's
    value when the compare failed (None when the key does not exist)."""

    succeeded: bool
    revision: int
    current: kv_pb2.KeyValue | None = None


class EtcdClient:
    """Asyncio etcd client for a list of ``host:port`` endpoints (``http://`` accepted).

    ``timeout`` bounds every call (all retries included) unless the call passes its own.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        timeout: float = 10.0,
        retry_backoff: float = 0.05,
    ) -> None:
        if isinstance(endpoints, str):
            # A str is a Sequence[str] too: it would become one endpoint per character.
            raise TypeError("endpoints must be a list of 'host:port' strings, not one string")
        if not endpoints:
            raise ValueError("an etcd client needs at least one endpoint")
        self.endpoints = [_strip_scheme(e) for e in endpoints]
        self.timeout = timeout
        self.retry_backoff = retry_backoff
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._preferred = 0
        self._closed = False

    # -- channels ---------------------------------------------------------------------------

    def channel(self, endpoint: str) -> grpc.aio.Channel:
        if self._closed:
            raise EtcdError("the etcd client is closed")
        channel = self._channels.get(endpoint)
        if channel is None:
            channel = grpc.aio.insecure_channel(endpoint, options=CHANNEL_OPTIONS)
            self._channels[endpoint] = channel
        return channel

    def endpoint_order(self) -> list[str]:
        """Endpoints starting with the one that answered last."""
        n = len(self.endpoints)
        return [self.endpoints[(self._preferred + i) % n] for i in range(n)]

    def prefer(self, endpoint: str) -> None:
        self._preferred = self.endpoints.index(endpoint)

    def prefer_after(self, endpoint: str) -> None:
        """Make the endpoint after ``endpoint`` the first to try."""
        self._preferred = (self.endpoints.index(endpoint) + 1) % len(self.endpoints)

    async def close(self) -> None:
        self._closed = True
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()

    async def __aenter__(self) -> EtcdClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the call loop ----------------------------------------------------------------------

    async def call(
        self,
        method: str,
        request: Message,
        response_type: type[ResponseT],
        *,
        timeout: float | None = None,
        endpoint: str | None = None,
    ) -> ResponseT:
        """One unary RPC with failover. ``endpoint`` pins the call to one member (no
        failover: Maintenance.Status asks each member about itself)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.timeout if timeout is None else timeout)
        backoff = self.retry_backoff
        last: grpc.aio.AioRpcError | None = None
        while True:
            for target in [endpoint] if endpoint else self.endpoint_order():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                stub = self.channel(target).unary_unary(
                    method,
                    request_serializer=_serialize,
                    response_deserializer=response_type.FromString,
                )
                try:
                    response: ResponseT = await stub(request, timeout=remaining)
                except asyncio.CancelledError:
                    # close() cancels the calls in flight; grpc.aio reports that as a
                    # CancelledError, which must not pass for a cancellation of the caller.
                    if self._closed and not _cancelling():
                        raise EtcdError("the etcd client is closed") from None
                    raise
                except grpc.aio.AioRpcError as error:
                    if error.code() is grpc.StatusCode.DEADLINE_EXCEEDED and endpoint is None:
                        # A member frozen on an open connection takes the call and never
                        # answers; its channel still looks healthy until keepalive gives up
                        # (~40 s). Start the next calls elsewhere instead of waiting on it.
                        self.prefer_after(target)
                    if error.code() not in _RETRYABLE:
                        raise translate_error(error) from error
                    last = error
                    continue
                if endpoint is None:
                    self.prefer(target)
                return response
            remaining = deadline - loop.time()
            if remaining <= 0:
                where = endpoint or ", ".join(self.endpoints)
                detail = last.details() if last is not None else "deadline exceeded"
                raise EtcdUnavailableError(
                    f"etcd unavailable at {where}: {detail}",
                    last.code() if last is not None else grpc.StatusCode.DEADLINE_EXCEEDED,
                    detail or "",
                )
            await asyncio.sleep(min(remaining, backoff * (1 + random.random())))
            backoff = min(backoff * 2, 1.0)

    # -- KV ---------------------------------------------------------------------------------

    async def range(
        self,
        key: bytes,
        range_end: bytes = b"",
        *,
        revision: int = 0,
        limit: int = 0,
        keys_only: bool = False,
        count_only: bool = False,
        serializable: bool = False,
        timeout: float | None = None,
    ) -> rpc_pb2.RangeResponse:
        request = rpc_pb2.RangeRequest(
            key=key,
            range_end=range_end,
            revision=revision,
            limit=limit,
            keys_only=keys_only,
            count_only=count_only,
            serializable=serializable,
        )
        return await self.call(
            "/etcdserverpb.KV/Range", request, rpc_pb2.RangeResponse, timeout=timeout
        )

    async def range_prefix(
        self, prefix: bytes, *, start: bytes | None = None, **options: Any
    ) -> rpc_pb2.RangeResponse:
        """Range over every key under ``prefix`` (from ``start`` when given). The empty
        prefix is the whole keyspace: etcd refuses an empty key, so it starts at ``\\0``."""
        return await self.range(start or prefix or b"\0", prefix_range_end(prefix), **options)

    async def get(
        self, key: bytes, *, revision: int = 0, timeout: float | None = None
    ) -> kv_pb2.KeyValue | None:
        response = await self.range(key, revision=revision, timeout=timeout)
        return response.kvs[0] if response.kvs else None

    async def current_revision(self, key: bytes, *, timeout: float | None = None) -> int:
        """etcd's current revision from a linearizable one-key range (Kubernetes'
        ``GetCurrentResourceVersion``: the key normally does not exist)."""
        response = await self.range(key, limit=1, keys_only=True, timeout=timeout)
        revision = int(response.header.revision)
        if revision <= 0:
            raise EtcdError("the current resource version must be greater than 0")
        return revision

    async def put(self, key: bytes, value: bytes, *, timeout: float | None = None) -> int:
        """Unconditional put; returns the new revision. Not a compare-and-swap: retried
        after an UNAVAILABLE that came after the commit (etcd's "request timed out" or
        "leader changed" during an election), it is applied twice (two revisions)."""
        response = await self.call(
            "/etcdserverpb.KV/Put",
            rpc_pb2.PutRequest(key=key, value=value),
            rpc_pb2.PutResponse,
            timeout=timeout,
        )
        return int(response.header.revision)

    async def delete_range(
        self, key: bytes, range_end: bytes = b"", *, timeout: float | None = None
    ) -> rpc_pb2.DeleteRangeResponse:
        return await self.call(
            "/etcdserverpb.KV/DeleteRange",
            rpc_pb2.DeleteRangeRequest(key=key, range_end=range_end),
            rpc_pb2.DeleteRangeResponse,
            timeout=timeout,
        )

    async def txn(
        self, request: rpc_pb2.TxnRequest, *, timeout: float | None = None
    ) -> rpc_pb2.TxnResponse:
        # etcd checks each list on its own (compares included): ``too many operations``.
        largest = max(len(request.compare), len(request.success), len(request.failure))
        if largest > MAX_TXN_OPS:
            raise ValueError(
                f"a transaction holds at most {MAX_TXN_OPS} compares and {MAX_TXN_OPS} "
                f"operations per branch, got {len(request.compare)} compares, "
                f"{len(request.success)} success and {len(request.failure)} failure operations"
            )
        return await self.call(
            "/etcdserverpb.KV/Txn", request, rpc_pb2.TxnResponse, timeout=timeout
        )

    async def compact(self, revision: int, *, physical: bool = True) -> None:
        await self.call(
            "/etcdserverpb.KV/Compact",
            rpc_pb2.CompactionRequest(revision=revision, physical=physical),
            rpc_pb2.CompactionResponse,
        )

    # -- compare-and-swap helpers -----------------------------------------------------------

    async def grant_lease(self, ttl_seconds: int, *, timeout: float | None = None) -> int:
        """A new etcd lease of ``ttl_seconds``; keys put with it are deleted when it
        expires. Its ID."""
        response = await self.call(
            "/etcdserverpb.Lease/LeaseGrant",
            rpc_pb2.LeaseGrantRequest(TTL=ttl_seconds),
            rpc_pb2.LeaseGrantResponse,
            timeout=timeout,
        )
        if response.error:
            raise EtcdError(f"etcd refused a lease: {response.error}")
        return int(response.ID)

    async def create(self, key: bytes, value: bytes, *, lease: int = 0) -> TxnResult:
        """Put ``key`` only if it does not exist (``create_revision == 0``); ``lease``
        attaches the key to an etcd lease (0: none)."""
        compare = rpc_pb2.Compare(
            key=key,
            target=rpc_pb2.Compare.CREATE,
            result=rpc_pb2.Compare.EQUAL,
            create_revision=0,
        )
        return await self._swap(key, compare, _put_op(key, value, lease))

    async def update(
        self, key: bytes, value: bytes, mod_revision: int, *, lease: int = 0
    ) -> TxnResult:
        """Put ``key`` only if its last change is at ``mod_revision`` (with ``lease``: the
        key's lease becomes that one)."""
        return await self._swap(
            key, _mod_revision_is(key, mod_revision), _put_op(key, value, lease)
        )

    async def delete(self, key: bytes, mod_revision: int = 0) -> TxnResult:
        """Delete ``key`` (only if its last change is at ``mod_revision`` when given);
        fails when the key does not exist."""
        if mod_revision:
            compare = _mod_revision_is(key, mod_revision)
        else:
            compare = rpc_pb2.Compare(
                key=key,
                target=rpc_pb2.Compare.CREATE,
                result=rpc_pb2.Compare.GREATER,
                create_revision=0,
            )
        op = rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(key=key))
        return await self._swap(key, compare, op)

    async def _swap(self, key: bytes, compare: rpc_pb2.Compare, op: rpc_pb2.RequestOp) -> TxnResult:
        request = rpc_pb2.TxnRequest(
            compare=[compare],
            success=[op],
            failure=[rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=key))],
        )
        response = await self.txn(request)
        revision = int(response.header.revision)
        if response.succeeded:
            return TxnResult(True, revision)
        kvs = response.responses[0].response_range.kvs if response.responses else []
        return TxnResult(False, revision, kvs[0] if kvs else None)

    # -- cluster ----------------------------------------------------------------------------

    async def status(
        self, endpoint: str, *, timeout: float | None = None
    ) -> rpc_pb2.StatusResponse:
        """Maintenance.Status of one member (no failover: the answer is about it)."""
        return await self.call(
            "/etcdserverpb.Maintenance/Status",
            rpc_pb2.StatusRequest(),
            rpc_pb2.StatusResponse,
            timeout=timeout,
            endpoint=_strip_scheme(endpoint),
        )

    async def defragment(
        self, endpoint: str, *, timeout: float | None = None
    ) -> rpc_pb2.DefragmentResponse:
        """Maintenance.Defragment of one member: gives its backend's free pages back to the
        file system. The member answers nothing else while it runs."""
        return await self.call(
            "/etcdserverpb.Maintenance/Defragment",
            rpc_pb2.DefragmentRequest(),
            rpc_pb2.DefragmentResponse,
            timeout=timeout,
            endpoint=_strip_scheme(endpoint),
        )

    async def alarms(self) -> list[rpc_pb2.AlarmMember]:
        """Maintenance.Alarm GET: the alarms raised on the cluster's members (NOSPACE: the
        backend quota is full and writes are refused)."""
        response = await self.call(
            "/etcdserverpb.Maintenance/Alarm",
            rpc_pb2.AlarmRequest(action=rpc_pb2.AlarmRequest.GET),
            rpc_pb2.AlarmResponse,
        )
        return list(response.alarms)

    async def disarm(self, raised: rpc_pb2.AlarmMember) -> None:
        """Maintenance.Alarm DEACTIVATE of one raised alarm (as ``etcdctl alarm disarm``
        does for each): etcd accepts writes again once none is left."""
        await self.call(
            "/etcdserverpb.Maintenance/Alarm",
            rpc_pb2.AlarmRequest(
                action=rpc_pb2.AlarmRequest.DEACTIVATE, memberID=raised.memberID, alarm=raised.alarm
            ),
            rpc_pb2.AlarmResponse,
        )

    async def member_list(self) -> rpc_pb2.MemberListResponse:
        return await self.call(
            "/etcdserverpb.Cluster/MemberList",
            rpc_pb2.MemberListRequest(linearizable=True),
            rpc_pb2.MemberListResponse,
        )


def _cancelling() -> bool:
    """Whether the running task has been asked to cancel."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _strip_scheme(endpoint: str) -> str:
    for scheme in ("http://", "https://"):
        if endpoint.startswith(scheme):
            return endpoint[len(scheme) :].rstrip("/")
    return endpoint.rstrip("/")


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


def _put_op(key: bytes, value: bytes, lease: int = 0) -> rpc_pb2.RequestOp:
    return rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value, lease=lease))


def _mod_revision_is(key: bytes, mod_revision: int) -> rpc_pb2.Compare:
    return rpc_pb2.Compare(
        key=key,
        target=rpc_pb2.Compare.MOD,
        result=rpc_pb2.Compare.EQUAL,
        mod_revision=mod_revision,
    )
