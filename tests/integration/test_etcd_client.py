"""EtcdClient against a real etcd 3.5.16: ranges, compare-and-swap writes, typed errors,
big responses and failover between members.

Every call carries the client's own deadline; the few waits that are not etcd calls are
bounded by ``asyncio.wait_for``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterator

import grpc
import grpc.aio
import pytest
from freezing import frozen

from watchcache.etcd.client import (
    MAX_TXN_OPS,
    EtcdClient,
    EtcdError,
    EtcdUnavailableError,
    FutureRevisionError,
    prefix_range_end,
)
from watchcache.etcd.process import EtcdCluster, free_ports
from watchcache.etcd.proto import rpc_pb2
from watchcache.wire.errors import CompactedError, ExpiredError

MiB = 1024 * 1024


def put_op(key: bytes, value: bytes) -> rpc_pb2.RequestOp:
    return rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value))


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A port that accepts TCP connections but never speaks HTTP/2 (a hung member)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"127.0.0.1:{listener.getsockname()[1]}"


# -- prefix_range_end (no etcd) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "end"),
    [
        (b"/registry/pods/", b"/registry/pods0"),
        (b"a", b"b"),
        (b"a\xff", b"b"),
        (b"a\xff\xff", b"b"),
        (b"\x00", b"\x01"),
        (b"\xfe", b"\xff"),
        (b"\xff\xff", b"\0"),
        (b"\xff", b"\0"),
        # The empty prefix means every key: b"\0" as range_end is "to the end".
        (b"", b"\0"),
    ],
)
def test_prefix_range_end(prefix: bytes, end: bytes) -> None:
    assert prefix_range_end(prefix) == end


def test_endpoints_are_validated_and_http_prefixes_stripped() -> None:
    with pytest.raises(ValueError, match="at least one endpoint"):
        EtcdClient([])
    with pytest.raises(TypeError):
        EtcdClient("127.0.0.1:2379")
    client = EtcdClient(["http://127.0.0.1:2379/", "127.0.0.1:2380", "https://h:1"])
    assert client.endpoints == ["127.0.0.1:2379", "127.0.0.1:2380", "h:1"]
    assert client.endpoint_order() == client.endpoints
    client.prefer("127.0.0.1:2380")
    assert client.endpoint_order() == ["127.0.0.1:2380", "h:1", "127.0.0.1:2379"]


# -- ranges ---------------------------------------------------------------------------------


async def test_range_revision_limit_keys_only_count_only_serializable(
    client: EtcdClient,
) -> None:
    revisions = {}
    for name in "abcde":
        key = f"/r/{name}".encode()
        revisions[name] = await client.put(key, b"v1-" + key)
    assert list(revisions.values()) == list(range(revisions["a"], revisions["a"] + 5))
    await client.put(b"/r/b", b"v2")
    await client.put(b"/other", b"outside the prefix")
    end = prefix_range_end(b"/r/")

    full = await client.range(b"/r/", end)
    assert [kv.key for kv in full.kvs] == [b"/r/a", b"/r/b", b"/r/c", b"/r/d", b"/r/e"]
    assert full.count == 5
    assert not full.more
    assert full.kvs[1].value == b"v2"
    assert full.kvs[1].version == 2
    assert full.kvs[1].create_revision == revisions["b"]
    assert full.header.revision == revisions["e"] + 2

    # At an old revision: the state then (3 keys, b's first value).
    old = await client.range(b"/r/", end, revision=revisions["c"])
    assert [kv.key for kv in old.kvs] == [b"/r/a", b"/r/b", b"/r/c"]
    assert old.kvs[1].value == b"v1-/r/b"
    assert old.count == 3
    # The header is the current revision, not the one read at.
    assert old.header.revision == full.header.revision

    # limit: `more` says there is more, `count` is the whole range's size.
    page = await client.range(b"/r/", end, limit=2)
    assert [kv.key for kv in page.kvs] == [b"/r/a", b"/r/b"]
    assert page.more
    assert page.count == 5
    rest = await client.range(page.kvs[-1].key + b"\0", end, limit=10)
    assert [kv.key for kv in rest.kvs] == [b"/r/c", b"/r/d", b"/r/e"]
    assert not rest.more
    assert rest.count == 3
    exact = await client.range(b"/r/", end, limit=5)
    assert len(exact.kvs) == 5
    assert not exact.more

    keys_only = await client.range(b"/r/", end, keys_only=True)
    assert [kv.key for kv in keys_only.kvs] == [kv.key for kv in full.kvs]
    assert all(kv.value == b"" for kv in keys_only.kvs)
    assert [kv.mod_revision for kv in keys_only.kvs] == [kv.mod_revision for kv in full.kvs]

    count_only = await client.range(b"/r/", end, count_only=True)
    assert list(count_only.kvs) == []
    assert count_only.count == 5

    serializable = await client.range(b"/r/", end, serializable=True)
    assert list(serializable.kvs) == list(full.kvs)

    # range_prefix: the same, from a start key when given; the empty prefix is everything.
    assert list((await client.range_prefix(b"/r/")).kvs) == list(full.kvs)
    started = await client.range_prefix(b"/r/", start=b"/r/c", limit=2)
    assert [kv.key for kv in started.kvs] == [b"/r/c", b"/r/d"]
    assert started.more
    everything = await client.range_prefix(b"")
    assert [kv.key for kv in everything.kvs] == [b"/other", *(kv.key for kv in full.kvs)]

    # get: one key, at a revision when asked; None when absent.
    got = await client.get(b"/r/b")
    assert got is not None
    assert got.value == b"v2"
    old_b = await client.get(b"/r/b", revision=revisions["b"])
    assert old_b is not None
    assert old_b.value == b"v1-/r/b"
    assert await client.get(b"/r/zzz") is None
    assert await client.get(b"/r/e", revision=revisions["d"]) is None


async def test_current_revision(client: EtcdClient) -> None:
    first = await client.current_revision(b"/registry/nothing")
    assert first >= 1
    revision = await client.put(b"/k", b"v")
    assert revision == first + 1
    assert await client.current_revision(b"/registry/nothing") == revision
    # The key need not exist, and reading it does not change the revision.
    assert await client.current_revision(b"/k") == revision


async def test_response_bigger_than_grpc_default_receive_limit(
    client: EtcdClient, etcd: EtcdCluster
) -> None:
    # etcd refuses a request over 1.5 MiB, so the 6 MiB are written one MiB per put.
    for i in range(6):
        await client.put(f"/big/{i}".encode(), bytes([65 + i]) * MiB)
    response = await client.range_prefix(b"/big/")
    assert response.count == 6
    assert [len(kv.value) for kv in response.kvs] == [MiB] * 6
    assert [kv.value[:1] for kv in response.kvs] == [b"A", b"B", b"C", b"D", b"E", b"F"]

    # The premise: with grpc's default 4 MiB limit the same read fails.
    async with grpc.aio.insecure_channel(etcd.endpoints[0]) as channel:
        stub = channel.unary_unary(
            "/etcdserverpb.KV/Range",
            request_serializer=rpc_pb2.RangeRequest.SerializeToString,
            response_deserializer=rpc_pb2.RangeResponse.FromString,
        )
        request = rpc_pb2.RangeRequest(key=b"/big/", range_end=prefix_range_end(b"/big/"))
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await stub(request, timeout=10)
        assert failed.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_request_over_etcd_limit_is_an_etcd_error(client: EtcdClient) -> None:
    # Over --max-request-bytes (1.5 MiB): etcd's own check.
    with pytest.raises(EtcdError) as failed:
        await client.put(b"/too-big", b"x" * 1_600_000)
    assert failed.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "request is too large" in failed.value.details
    # Over that plus gRPC's overhead allowance (2 MiB): the gRPC server's receive limit.
    with pytest.raises(EtcdError) as failed:
        await client.put(b"/too-big", b"x" * (2 * MiB))
    assert failed.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert await client.get(b"/too-big") is None


# -- compare-and-swap -----------------------------------------------------------------------


async def test_create_if_absent(client: EtcdClient) -> None:
    created = await client.create(b"/cas/a", b"one")
    assert created.succeeded
    assert created.current is None
    kv = await client.get(b"/cas/a")
    assert kv is not None
    assert kv.mod_revision == created.revision
    assert kv.create_revision == created.revision

    again = await client.create(b"/cas/a", b"two")
    assert not again.succeeded
    assert again.revision == created.revision  # nothing was written
    assert again.current is not None
    assert again.current.value == b"one"
    assert again.current.mod_revision == created.revision
    kv = await client.get(b"/cas/a")
    assert kv is not None
    assert kv.value == b"one"


async def test_update_if_mod_revision(client: EtcdClient) -> None:
    created = await client.create(b"/cas/u", b"one")
    updated = await client.update(b"/cas/u", b"two", created.revision)
    assert updated.succeeded
    assert updated.revision == created.revision + 1

    stale = await client.update(b"/cas/u", b"three", created.revision)
    assert not stale.succeeded
    assert stale.revision == updated.revision
    assert stale.current is not None
    assert stale.current.value == b"two"
    assert stale.current.mod_revision == updated.revision
    assert stale.current.version == 2

    missing = await client.update(b"/cas/missing", b"x", created.revision)
    assert not missing.succeeded
    assert missing.current is None
    assert await client.get(b"/cas/missing") is None


async def test_delete_if_mod_revision_and_delete_of_missing_key(client: EtcdClient) -> None:
    created = await client.create(b"/cas/d", b"one")
    updated = await client.update(b"/cas/d", b"two", created.revision)

    stale = await client.delete(b"/cas/d", created.revision)
    assert not stale.succeeded
    assert stale.current is not None
    assert stale.current.mod_revision == updated.revision
    assert await client.get(b"/cas/d") is not None

    deleted = await client.delete(b"/cas/d", updated.revision)
    assert deleted.succeeded
    assert deleted.revision == updated.revision + 1
    assert await client.get(b"/cas/d") is None

    missing = await client.delete(b"/cas/d")
    assert not missing.succeeded
    assert missing.current is None
    assert missing.revision == deleted.revision
    missing_at = await client.delete(b"/cas/d", updated.revision)
    assert not missing_at.succeeded
    assert missing_at.current is None

    # Without a mod revision: any existing key.
    await client.create(b"/cas/e", b"x")
    unconditional = await client.delete(b"/cas/e")
    assert unconditional.succeeded
    assert await client.get(b"/cas/e") is None


async def test_txn_operation_limit(client: EtcdClient) -> None:
    ops = [put_op(f"/txn/{i:03}".encode(), b"v") for i in range(MAX_TXN_OPS + 1)]
    compares = [
        rpc_pb2.Compare(
            key=f"/txn/{i:03}".encode(),
            target=rpc_pb2.Compare.VERSION,
            result=rpc_pb2.Compare.EQUAL,
            version=0,
        )
        for i in range(MAX_TXN_OPS + 1)
    ]
    for too_big in (
        rpc_pb2.TxnRequest(success=ops),
        rpc_pb2.TxnRequest(failure=ops),
        rpc_pb2.TxnRequest(compare=compares),
    ):
        with pytest.raises(ValueError, match="at most 128"):
            await client.txn(too_big)
    assert await client.get(b"/txn/000") is None

    # 128 in each list is allowed.
    response = await client.txn(
        rpc_pb2.TxnRequest(
            compare=compares[:MAX_TXN_OPS], success=ops[:MAX_TXN_OPS], failure=ops[:MAX_TXN_OPS]
        )
    )
    assert response.succeeded
    assert (await client.range_prefix(b"/txn/", count_only=True)).count == MAX_TXN_OPS
    # All 128 puts are one revision.
    kvs = (await client.range_prefix(b"/txn/")).kvs
    assert {kv.mod_revision for kv in kvs} == {response.header.revision}


# -- typed errors ---------------------------------------------------------------------------


async def test_compacted_and_future_revisions(client: EtcdClient) -> None:
    first = await client.put(b"/c/a", b"1")
    await client.put(b"/c/a", b"2")
    third = await client.put(b"/c/a", b"3")
    await client.compact(third)

    with pytest.raises(CompactedError) as compacted:
        await client.range(b"/c/a", revision=first)
    assert isinstance(compacted.value, ExpiredError)
    assert compacted.value.code == 410
    assert compacted.value.reason == "Expired"
    with pytest.raises(CompactedError):
        await client.get(b"/c/a", revision=third - 1)
    # The compacted revision itself is still readable.
    kv = await client.get(b"/c/a", revision=third)
    assert kv is not None
    assert kv.value == b"3"
    # Compacting again at (or below) the compacted revision is the same error.
    with pytest.raises(CompactedError):
        await client.compact(third)

    with pytest.raises(FutureRevisionError) as future:
        await client.range(b"/c/a", revision=third + 100)
    assert future.value.code is grpc.StatusCode.OUT_OF_RANGE
    with pytest.raises(FutureRevisionError):
        await client.compact(third + 100)


# -- cluster calls --------------------------------------------------------------------------


async def test_status_and_member_list(client: EtcdClient, etcd: EtcdCluster) -> None:
    member = etcd.members[0]
    status = await client.status(member.endpoint)
    assert status.version == "3.5.16"
    assert status.header.member_id == status.leader  # one member: its own leader
    assert status.header.revision >= 1
    # http:// accepted for the pinned endpoint too.
    assert (await client.status(member.url)).version == "3.5.16"

    members = (await client.member_list()).members
    assert [m.name for m in members] == [member.name]
    assert list(members[0].clientURLs) == [member.url]
    assert list(members[0].peerURLs) == [member.peer_url]


async def test_http_prefixed_endpoints_work(etcd: EtcdCluster) -> None:
    async with EtcdClient([m.url + "/" for m in etcd.members], timeout=5.0) as client:
        revision = await client.put(b"/http", b"ok")
        kv = await client.get(b"/http")
        assert kv is not None
        assert kv.mod_revision == revision


async def test_closed_client_refuses_calls(etcd: EtcdCluster) -> None:
    client = EtcdClient(etcd.endpoints, timeout=5.0)
    await client.put(b"/x", b"y")
    await client.close()
    with pytest.raises(EtcdError, match="closed"):
        await client.get(b"/x")


async def test_close_during_a_call_fails_the_call_without_cancelling_it(
    silent_endpoint: str,
) -> None:
    client = EtcdClient([silent_endpoint], timeout=5.0)
    call = asyncio.create_task(client.get(b"/k"))
    await asyncio.sleep(0.1)  # the call is waiting for the (hung) connection
    await client.close()
    with pytest.raises(EtcdError, match="closed"):
        await asyncio.wait_for(call, 1)
    assert not call.cancelled()


# -- failover and unreachable endpoints -----------------------------------------------------


async def test_unreachable_only_endpoint_fails_within_timeout() -> None:
    (port,) = free_ports(1)  # nothing listens there: every attempt is refused at once
    async with EtcdClient([f"127.0.0.1:{port}"], timeout=0.5) as client:
        started = time.monotonic()
        with pytest.raises(EtcdUnavailableError) as failed:
            await asyncio.wait_for(client.get(b"/k"), 5)
        elapsed = time.monotonic() - started
        assert 0.4 <= elapsed < 1.5, elapsed
        assert failed.value.code is grpc.StatusCode.UNAVAILABLE
        assert str(port) in str(failed.value)
        # A per-call timeout overrides the client's.
        started = time.monotonic()
        with pytest.raises(EtcdUnavailableError):
            await asyncio.wait_for(client.put(b"/k", b"v", timeout=0.2), 5)
        assert time.monotonic() - started < 1.0


async def test_hung_only_endpoint_fails_at_the_deadline(silent_endpoint: str) -> None:
    async with EtcdClient([silent_endpoint], timeout=0.5) as client:
        started = time.monotonic()
        with pytest.raises(EtcdUnavailableError):
            await asyncio.wait_for(client.get(b"/k"), 5)
        assert 0.4 <= time.monotonic() - started < 1.5


async def test_refused_endpoint_fails_over_to_a_live_one(etcd: EtcdCluster) -> None:
    (port,) = free_ports(1)
    dead = f"127.0.0.1:{port}"
    async with EtcdClient([dead, *etcd.endpoints], timeout=5.0) as client:
        revision = await client.put(b"/f", b"v")
        assert client.endpoint_order()[0] == etcd.endpoints[0]
        kv = await client.get(b"/f")
        assert kv is not None
        assert kv.mod_revision == revision


async def test_hung_endpoint_is_given_up_after_the_connect_timeout(
    etcd: EtcdCluster, silent_endpoint: str
) -> None:
    async with EtcdClient([silent_endpoint, *etcd.endpoints], timeout=5.0) as client:
        started = time.monotonic()
        revision = await client.put(b"/h", b"v")
        # grpc.min_reconnect_backoff_ms bounds the connection attempt (1 s), then the
        # call moves on; without it the whole deadline went to the hung endpoint.
        assert time.monotonic() - started < 3.0
        assert client.endpoint_order()[0] == etcd.endpoints[0]
        started = time.monotonic()
        kv = await client.get(b"/h")
        assert kv is not None
        assert kv.mod_revision == revision
        assert time.monotonic() - started < 0.5


async def leader_endpoint(client: EtcdClient, cluster: EtcdCluster) -> str:
    for endpoint in cluster.endpoints:
        status = await client.status(endpoint)
        if status.header.member_id == status.leader:
            return endpoint
    raise AssertionError("no leader")


async def test_failover_when_the_preferred_member_is_killed(etcd_cluster: EtcdCluster) -> None:
    async with EtcdClient(etcd_cluster.endpoints, timeout=10.0) as client:
        members = (await client.member_list()).members
        assert sorted(m.name for m in members) == ["m0", "m1", "m2"]
        # Make the client prefer the leader: killing it also forces an election, which
        # the next (linearizable) read has to wait out on another member.
        client.prefer(await leader_endpoint(client, etcd_cluster))
        revision = await client.put(b"/failover", b"before")
        preferred = client.endpoint_order()[0]
        victim = next(m for m in etcd_cluster.members if m.endpoint == preferred)

        victim.stop(kill=True)
        kv = await client.get(b"/failover")  # linearizable: waits for a leader if needed
        assert kv is not None
        assert kv.mod_revision == revision
        assert client.endpoint_order()[0] != victim.endpoint
        assert (await client.range(b"/failover", serializable=True)).count == 1
        after = await client.put(b"/failover", b"after")
        assert after > revision

        # The member comes back with its data and catches up.
        await asyncio.to_thread(etcd_cluster.restart, victim)
        status = await client.status(victim.endpoint)
        assert status.version == "3.5.16"
        with pytest.raises(EtcdUnavailableError):
            await client.status(f"127.0.0.1:{free_ports(1)[0]}", timeout=0.3)


async def test_a_frozen_preferred_member_costs_one_deadline_then_calls_go_elsewhere(
    etcd_cluster: EtcdCluster,
) -> None:
    async with EtcdClient(etcd_cluster.endpoints, timeout=10.0) as client:
        await client.put(b"/frozen", b"v")
        leader = await leader_endpoint(client, etcd_cluster)
        follower = next(e for e in etcd_cluster.endpoints if e != leader)
        client.prefer(follower)
        await client.range(b"/frozen", serializable=True)  # the channel is open and ready
        victim = next(m for m in etcd_cluster.members if m.endpoint == follower)
        assert victim.pid is not None
        with frozen(victim.pid):
            # The frozen member accepts the call and never answers: this one call waits out
            # its deadline there, as it would against any silent server. It usually fails;
            # if the attempt on the frozen member ends a hair before the call's deadline, the
            # retry loop may spend the sliver left on a healthy member: failover working, not
            # a wait saved. Either way the call must have waited about one deadline.
            loop = asyncio.get_running_loop()
            started = loop.time()
            with contextlib.suppress(EtcdUnavailableError):
                await client.range(b"/frozen", serializable=True, timeout=1.0)
            assert loop.time() - started >= 0.9
            # ...and the next ones start on another member instead of waiting again.
            assert client.endpoint_order()[0] != follower
            for _ in range(3):
                kv = await client.get(b"/frozen", timeout=5.0)
                assert kv is not None and kv.value == b"v"
