"""EtcdWatch against a real etcd 3.5.16: order, prev_kv, replay, fragments, progress
notifications, compaction, close, and resuming without loss after the stream's member dies.

Every wait for the watch is bounded (``asyncio.wait_for`` / ``asyncio.timeout``), so a bug
fails a test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import grpc
import grpc.aio
import pytest

from watchcache.etcd.client import EtcdClient, EtcdUnavailableError, prefix_range_end
from watchcache.etcd.process import EtcdCluster, EtcdMember, free_ports
from watchcache.etcd.proto import kv_pb2, rpc_pb2
from watchcache.etcd.watch import EtcdWatch, WatchBatch
from watchcache.wire.errors import CompactedError, ExpiredError

PUT = kv_pb2.Event.PUT
DELETE = kv_pb2.Event.DELETE


@dataclass(frozen=True, slots=True)
class Seen:
    """One event, flattened for comparisons."""

    type: int
    key: bytes
    mod_revision: int
    value: bytes


def seen(event: kv_pb2.Event) -> Seen:
    return Seen(int(event.type), event.kv.key, int(event.kv.mod_revision), event.kv.value)


async def next_batch(batches: AsyncIterator[WatchBatch], timeout: float = 5.0) -> WatchBatch:
    return await asyncio.wait_for(anext(batches), timeout)


async def events_until(
    batches: AsyncIterator[WatchBatch], revision: int, timeout: float = 5.0
) -> list[kv_pb2.Event]:
    """Every event delivered until one at ``revision`` or later (progress skipped)."""
    events: list[kv_pb2.Event] = []
    async with asyncio.timeout(timeout):
        while not events or events[-1].kv.mod_revision < revision:
            events.extend((await anext(batches)).events)
    return events


@contextlib.asynccontextmanager
async def progress_ticker(watch: EtcdWatch, period: float = 0.1) -> AsyncIterator[None]:
    """Re-send a progress request every ``period`` (3.5 drops one that arrives while the
    watcher catches up), as the freshness requester does."""

    async def tick() -> None:
        while True:
            watch.request_progress()
            await asyncio.sleep(period)

    task = asyncio.create_task(tick())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def next_progress(
    watch: EtcdWatch, batches: AsyncIterator[WatchBatch], timeout: float = 5.0
) -> tuple[WatchBatch, list[kv_pb2.Event]]:
    """Request progress until a progress batch comes; returns it and the events before."""
    events: list[kv_pb2.Event] = []
    async with progress_ticker(watch), asyncio.timeout(timeout):
        while True:
            batch = await anext(batches)
            if batch.progress:
                return batch, events
            events.extend(batch.events)


async def history(client: EtcdClient, prefix: bytes, start: int, end: int) -> list[Seen]:
    """Every event under ``prefix`` in [start, end], read by a fresh watch."""
    async with EtcdWatch(client, prefix, start_revision=start) as watch:
        return [seen(e) for e in await events_until(aiter(watch), end, timeout=10.0)]


async def wait_synced(
    watch: EtcdWatch, batches: AsyncIterator[WatchBatch], client: EtcdClient
) -> None:
    """Wait until the watch's stream exists and is synced: move etcd's revision past the
    watch's start-1 with a write outside the prefix, then wait for a progress batch."""
    await client.put(b"/sync-marker", b"")
    batch, events = await next_progress(watch, batches)
    assert events == []
    assert batch.revision >= watch.start_revision


# -- order, prev_kv, start revision -----------------------------------------------------------


async def test_events_in_order_with_prev_kv(client: EtcdClient) -> None:
    start = await client.current_revision(b"/w") + 1
    async with EtcdWatch(client, b"/w/", start_revision=start) as watch:
        batches = aiter(watch)
        # Synced before any write: the events below arrive live, not as a replay.
        await wait_synced(watch, batches, client)
        r1 = await client.put(b"/w/a", b"a1")
        r2 = await client.put(b"/w/a", b"a2")
        r3 = await client.put(b"/w/b", b"b1")
        await client.put(b"/x/outside", b"not watched")
        r4 = (await client.delete_range(b"/w/a")).header.revision
        r5 = (await client.delete(b"/w/b")).revision
        events = await events_until(batches, r5)

    assert [seen(e) for e in events] == [
        Seen(PUT, b"/w/a", r1, b"a1"),
        Seen(PUT, b"/w/a", r2, b"a2"),
        Seen(PUT, b"/w/b", r3, b"b1"),
        Seen(DELETE, b"/w/a", r4, b""),
        Seen(DELETE, b"/w/b", r5, b""),
    ]
    assert r1 == start + 1  # start is the sync marker's revision
    # prev_kv: absent for a create, the previous state for an update or a delete.
    assert not events[0].HasField("prev_kv")
    assert events[1].prev_kv.value == b"a1"
    assert events[1].prev_kv.mod_revision == r1
    assert events[1].kv.create_revision == r1
    assert events[1].kv.version == 2
    assert not events[2].HasField("prev_kv")
    assert events[3].prev_kv.value == b"a2"
    assert events[3].prev_kv.mod_revision == r2
    assert events[4].prev_kv.value == b"b1"
    assert watch.next_revision == r5 + 1
    assert watch.reconnects == 0


async def test_start_revision_in_the_past_replays_history(client: EtcdClient) -> None:
    revisions = [await client.put(f"/h/{i}".encode(), str(i).encode()) for i in range(10)]
    await client.put(b"/h/3", b"three again")
    await client.delete(b"/h/5")
    last = await client.current_revision(b"/h")

    # From the 4th write on: nothing below it, everything from it, in order.
    async with EtcdWatch(client, b"/h/", start_revision=revisions[3]) as watch:
        events = await events_until(aiter(watch), last)
    assert [e.kv.mod_revision for e in events] == list(range(revisions[3], last + 1))
    assert [e.kv.key for e in events][:7] == [f"/h/{i}".encode() for i in range(3, 10)]
    assert events[-2].kv.value == b"three again"
    assert events[-2].prev_kv.value == b"3"
    assert events[-1].type == DELETE
    assert events[-1].prev_kv.value == b"5"

    # The whole history from revision 1.
    everything = await history(client, b"/h/", 1, last)
    assert [e.mod_revision for e in everything] == list(range(revisions[0], last + 1))


async def test_future_start_revision_delivers_nothing_below_it(
    client: EtcdClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every progress answer etcd sends, before the watch filters it.
    answers: list[int] = []
    original = EtcdWatch._progress

    def spy(self: EtcdWatch, revision: int) -> WatchBatch | None:
        answers.append(revision)
        return original(self, revision)

    monkeypatch.setattr(EtcdWatch, "_progress", spy)

    current = await client.current_revision(b"/fut")
    start = current + 5
    async with EtcdWatch(client, b"/fut/", start_revision=start) as watch:
        batches = aiter(watch)
        delivered: list[WatchBatch] = []

        async def consume() -> None:
            async for batch in batches:
                delivered.append(batch)
                if batch.events and batch.events[-1].kv.mod_revision >= start + 4:
                    return

        # Progress requests all along: etcd 3.5.16 answers them for a watch on a future
        # revision with its current revision, below start - 1 (etcd#20221).
        async with progress_ticker(watch, period=0.02):
            consumer = asyncio.create_task(consume())
            async with asyncio.timeout(5):
                while not answers:
                    await asyncio.sleep(0.01)
            assert answers[0] == current < start - 1  # the quirk is there...
            for i in range(10):
                await client.put(f"/fut/{i}".encode(), b"v")
                await asyncio.sleep(0.01)
            await asyncio.wait_for(consumer, 5)

    # ... and never shows: no progress batch below start - 1 or going backwards.
    events = [e for b in delivered for e in b.events]
    assert [e.kv.mod_revision for e in events] == list(range(start, start + len(events)))
    assert [e.kv.key for e in events[:5]] == [f"/fut/{i}".encode() for i in range(4, 9)]
    floor = start - 1
    for batch in delivered:
        if batch.progress:
            assert batch.revision > floor
            floor = batch.revision
        else:
            floor = max(floor, batch.events[-1].kv.mod_revision)
    assert watch.progress_requests_sent > 0


# -- fragments --------------------------------------------------------------------------------


async def first_events_response(endpoint: str, start: int) -> rpc_pb2.WatchResponse:
    """The first response with events of a raw fragmenting watch on /frag/."""
    async with grpc.aio.insecure_channel(
        endpoint, options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)]
    ) as channel:
        method = channel.stream_stream(
            "/etcdserverpb.Watch/Watch",
            request_serializer=rpc_pb2.WatchRequest.SerializeToString,
            response_deserializer=rpc_pb2.WatchResponse.FromString,
        )
        call = method()
        create = rpc_pb2.WatchCreateRequest(
            key=b"/frag/",
            range_end=prefix_range_end(b"/frag/"),
            start_revision=start,
            fragment=True,
        )
        await call.write(rpc_pb2.WatchRequest(create_request=create))
        async with asyncio.timeout(5):
            while True:
                response = await call.read()
                assert isinstance(response, rpc_pb2.WatchResponse)
                if response.events:
                    call.cancel()
                    return response


async def test_fragmented_replay_is_reassembled(client: EtcdClient, etcd: EtcdCluster) -> None:
    value_size = 1_400_000  # under --max-request-bytes (1.5 MiB); three are not
    revisions = [
        await client.put(f"/frag/{i}".encode(), bytes([65 + i]) * value_size) for i in range(3)
    ]
    # The premise: etcd splits this replay into fragments.
    raw = await first_events_response(etcd.endpoints[0], revisions[0])
    assert raw.fragment
    assert len(raw.events) < 3

    async with EtcdWatch(client, b"/frag/", start_revision=revisions[0]) as watch:
        batches = aiter(watch)
        batch = await next_batch(batches)
        # One etcd response, however many messages it took: one batch, all three events.
        assert not batch.progress
        assert [e.kv.mod_revision for e in batch.events] == revisions
        assert [len(e.kv.value) for e in batch.events] == [value_size] * 3
        assert [e.kv.value[:1] for e in batch.events] == [b"A", b"B", b"C"]
        # Later events still come, once.
        tail = await client.put(b"/frag/small", b"s")
        rest = await events_until(batches, tail)
        assert [e.kv.mod_revision for e in rest] == [tail]
        # Fragments of a live (synced) big update too: one event per response, in order.
        updated = await client.put(b"/frag/0", b"D" * value_size)
        batch = await next_batch(batches)
        assert [e.kv.mod_revision for e in batch.events] == [updated]
        assert len(batch.events[0].prev_kv.value) == value_size
    assert watch.reconnects == 0


# -- progress ---------------------------------------------------------------------------------


async def test_request_progress_on_an_idle_watch(client: EtcdClient) -> None:
    for i in range(5):
        await client.put(f"/p/{i}".encode(), b"v")
    last_event = await client.current_revision(b"/p")
    async with EtcdWatch(client, b"/p/", start_revision=1) as watch:
        batches = aiter(watch)
        assert not watch.request_progress()  # no stream yet
        events = await events_until(batches, last_event)
        assert events[-1].kv.mod_revision == last_event
        # etcd moves on with writes the watch does not see.
        for i in range(3):
            await client.put(f"/other/{i}".encode(), b"v")
        current = await client.current_revision(b"/p")
        assert current == last_event + 3

        batch, before = await next_progress(watch, batches)
        assert before == []
        assert batch.progress
        assert batch.events == []
        assert batch.revision == current
        assert watch.progress_revision == current
        assert watch.next_revision == current + 1

        # Many requests at once are one write at a time (grpc.aio allows one in flight:
        # concurrent writes used to fail the whole stream with INTERNAL).
        sent = watch.progress_requests_sent
        for _ in range(20):
            assert watch.request_progress()
        # Coalesced while one is not yet written (maybe one the ticker left).
        assert watch.progress_requests_sent <= sent + 1
        await client.put(b"/other/x", b"v")
        batch, before = await next_progress(watch, batches)
        assert batch.revision == current + 1
        assert watch.reconnects == 0

        # The next event after progress: exactly once, nothing repeated.
        revision = await client.put(b"/p/new", b"v")
        events = await events_until(batches, revision)
        assert [e.kv.mod_revision for e in events] == [revision]


# -- compaction -------------------------------------------------------------------------------


async def test_compacted_start_revision_raises_compacted_error(client: EtcdClient) -> None:
    first = await client.put(b"/cw/a", b"1")
    await client.put(b"/cw/a", b"2")
    compacted = await client.put(b"/cw/a", b"3")
    await client.compact(compacted)

    watch = EtcdWatch(client, b"/cw/", start_revision=first)
    with pytest.raises(CompactedError) as raised:
        await next_batch(aiter(watch))
    assert raised.value.compact_revision == compacted
    assert isinstance(raised.value, ExpiredError)
    assert raised.value.code == 410
    assert "too old" in str(raised.value)
    await watch.close()

    # At the compacted revision itself the watch works.
    async with EtcdWatch(client, b"/cw/", start_revision=compacted) as ok:
        events = await events_until(aiter(ok), compacted)
    assert [e.kv.value for e in events] == [b"3"]


# -- close ------------------------------------------------------------------------------------


async def test_close_from_another_task_ends_iteration(client: EtcdClient) -> None:
    start = await client.put(b"/cl/a", b"v")
    watch = EtcdWatch(client, b"/cl/", start_revision=start)
    received: list[WatchBatch] = []

    async def consume() -> None:
        async for batch in watch:  # ends normally: no CancelledError, no error
            received.append(batch)

    consumer = asyncio.create_task(consume())
    async with asyncio.timeout(5):
        while not received:
            await asyncio.sleep(0.01)
    await watch.close()
    await asyncio.wait_for(consumer, 1)
    assert not consumer.cancelled()
    assert watch.closed
    assert not watch.request_progress()


async def test_close_inside_the_loop_ends_iteration(client: EtcdClient) -> None:
    start = await client.put(b"/cl/a", b"v")
    await client.put(b"/cl/b", b"v")
    count = 0
    async with asyncio.timeout(5):
        async with EtcdWatch(client, b"/cl/", start_revision=start) as watch:
            async for _ in watch:
                count += 1
                await watch.close()
    assert count == 1


async def test_close_during_reconnect_backoff_is_prompt() -> None:
    (port,) = free_ports(1)
    async with EtcdClient([f"127.0.0.1:{port}"], timeout=1.0) as dead:
        watch = EtcdWatch(dead, b"/x/", start_revision=1, max_backoff=30.0)

        async def first() -> WatchBatch | None:
            async for batch in watch:
                return batch
            return None

        consumer = asyncio.create_task(first())
        async with asyncio.timeout(10):
            while watch.reconnects < 5:  # this backoff is 0.4-1.2 s
                await asyncio.sleep(0.01)
        await watch.close()
        assert await asyncio.wait_for(consumer, 0.3) is None


# -- losing the stream ------------------------------------------------------------------------


async def test_watch_moves_on_from_a_hung_endpoint(client: EtcdClient, etcd: EtcdCluster) -> None:
    revision = await client.put(b"/hw/a", b"v")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        # Accepts TCP connections, never speaks HTTP/2: a frozen member.
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        hung = f"127.0.0.1:{listener.getsockname()[1]}"
        async with (
            EtcdClient([hung, *etcd.endpoints], timeout=5.0) as two,
            EtcdWatch(two, b"/hw/", start_revision=revision) as watch,
        ):
            events = await events_until(aiter(watch), revision, timeout=5.0)
            assert [e.kv.mod_revision for e in events] == [revision]
            assert watch.endpoint == etcd.endpoints[0]
            assert watch.reconnects == 1


class Writer:
    """Puts ``/fo/NNNN`` keys one after the other through a client on every endpoint,
    retrying what fails (a failed put may still have committed: that is why the test
    compares against etcd's history, not against this list)."""

    def __init__(self, client: EtcdClient, count: int) -> None:
        self.client = client
        self.count = count
        self.done = 0
        self.failures = 0
        self.milestones: dict[int, asyncio.Event] = {}

    def reached(self, n: int) -> asyncio.Event:
        return self.milestones.setdefault(n, asyncio.Event())

    async def run(self) -> None:
        for i in range(self.count):
            key, value = f"/fo/{i:04}".encode(), f"value-{i}".encode()
            async with asyncio.timeout(30):
                while True:
                    try:
                        await self.client.put(key, value, timeout=1.0)
                        break
                    except EtcdUnavailableError:
                        self.failures += 1
                        await asyncio.sleep(0.02)
            self.done = i + 1
            if self.done in self.milestones:
                self.milestones[self.done].set()


class Collector:
    """Consumes a watch into a list, checking order as it goes."""

    def __init__(self, watch: EtcdWatch) -> None:
        self.watch = watch
        self.events: list[Seen] = []
        self.batches = 0

    async def run(self) -> None:
        async for batch in self.watch:
            self.batches += 1
            self.events.extend(seen(e) for e in batch.events)

    async def wait_for(self, condition: Callable[[], bool], timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while not condition():
                await asyncio.sleep(0.01)


def member_at(cluster: EtcdCluster, endpoint: str | None) -> EtcdMember:
    return next(m for m in cluster.members if m.endpoint == endpoint)


async def leader_endpoint(client: EtcdClient, cluster: EtcdCluster) -> str:
    for endpoint in cluster.endpoints:
        status = await client.status(endpoint)
        if status.header.member_id == status.leader:
            return endpoint
    raise AssertionError("no leader")


@pytest.mark.parametrize("role", ["leader", "follower"])
async def test_watch_survives_kill_of_its_member(etcd_cluster: EtcdCluster, role: str) -> None:
    async with (
        EtcdClient(etcd_cluster.endpoints, timeout=10.0) as writer_client,
        EtcdClient(etcd_cluster.endpoints, timeout=10.0) as watch_client,
    ):
        # The watch connects to the client's preferred endpoint: make it the leader (its
        # kill also makes the writer wait for an election) or a follower.
        leader = await leader_endpoint(watch_client, etcd_cluster)
        followers = [e for e in etcd_cluster.endpoints if e != leader]
        watch_client.prefer(leader if role == "leader" else followers[0])
        start = await writer_client.current_revision(b"/fo") + 1
        watch = EtcdWatch(watch_client, b"/fo/", start_revision=start)
        collector = Collector(watch)
        writer = Writer(writer_client, 300)
        consuming = asyncio.create_task(collector.run())
        writing = asyncio.create_task(writer.run())
        try:
            await asyncio.wait_for(writer.reached(100).wait(), 10)
            await collector.wait_for(lambda: len(collector.events) > 0, 5)
            victim = member_at(etcd_cluster, watch.endpoint)
            assert (victim.endpoint == leader) == (role == "leader")
            delivered_before_kill = len(collector.events)
            written_before_kill = writer.done
            victim.stop(kill=True)

            await asyncio.wait_for(writing, 30)
            final = await writer_client.current_revision(b"/fo")
            await collector.wait_for(lambda: watch.next_revision > final, 15)
        finally:
            await watch.close()
            writing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writing
        await asyncio.wait_for(consuming, 2)

        # The stream really moved to another member, mid-stream.
        assert watch.reconnects >= 1
        assert watch.endpoint != victim.endpoint
        assert 0 < delivered_before_kill < 300
        assert written_before_kill < 300
        print(f"writer retries: {writer.failures}, watch reconnects: {watch.reconnects}")

        # Every revision exactly once, in order: only the writer wrote, one revision a put.
        revisions = [e.mod_revision for e in collector.events]
        assert revisions == list(range(start, final + 1))
        # ... and they are etcd's history, read afterwards by a fresh watch.
        assert collector.events == await history(watch_client, b"/fo/", start, final)
        # Every key the writer finished is there with its last value.
        listed = await writer_client.range_prefix(b"/fo/")
        assert listed.count == 300
        last_put = {e.key: e for e in collector.events}
        assert {kv.key: (kv.mod_revision, kv.value) for kv in listed.kvs} == {
            key: (e.mod_revision, e.value) for key, e in last_put.items()
        }

        # The killed member comes back and catches up.
        await asyncio.to_thread(etcd_cluster.restart, victim)
        async with EtcdClient([victim.endpoint], timeout=5.0) as direct, asyncio.timeout(10):
            while (await direct.range_prefix(b"/fo/", serializable=True)).count < 300:
                await asyncio.sleep(0.05)


async def test_watch_resumes_when_the_only_member_restarts(
    client: EtcdClient, etcd: EtcdCluster
) -> None:
    member = etcd.members[0]
    start = await client.current_revision(b"/rs") + 1
    first = [await client.put(f"/rs/{i:02}".encode(), b"before") for i in range(20)]
    async with EtcdWatch(client, b"/rs/", start_revision=start) as watch:
        batches = aiter(watch)
        before = await events_until(batches, first[-1])

        member.stop()  # SIGTERM: the stream ends while nothing reads it
        await asyncio.to_thread(etcd.restart, member)
        second = [await client.put(f"/rs/{i:02}".encode(), b"after") for i in range(20)]
        after = await events_until(batches, second[-1], timeout=15.0)

    assert [e.kv.mod_revision for e in before + after] == first + second
    assert watch.reconnects >= 1
    assert [e.prev_kv.value for e in after] == [b"before"] * 20


async def test_close_while_the_create_request_is_written_ends_the_iteration(
    client: EtcdClient,
) -> None:
    """grpc.aio's write never returns once its call is cancelled: a close() racing the
    create (or a progress) request must still end the consumer's iteration."""
    for attempt in range(60):
        watch = EtcdWatch(client, b"/close-race/", start_revision=1)

        async def consume(watch: EtcdWatch = watch) -> None:
            async for _ in watch:
                pass

        consumer = asyncio.create_task(consume())
        for _ in range(attempt % 7):
            await asyncio.sleep(0)
        if attempt % 3 == 0:
            watch.request_progress()
        await watch.close()
        try:
            await asyncio.wait_for(consumer, 5)
        finally:
            consumer.cancel()
