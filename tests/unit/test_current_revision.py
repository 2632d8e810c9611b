"""SharedRevision: concurrent consistent reads share etcd current-revision calls, and none
adopts a call issued before it started (python/watchcache/etcd/current_revision.py).

The fetch here is a model of etcd's linearizable Range: the request travels for a while,
etcd reads its revision at some moment (the serve point), the answer travels back. Writes
commit at a moment and are acknowledged later. The property: a read gets a revision at
least as high as every write acknowledged before it started, under any interleaving —
checked by hypothesis over schedules, and shown to catch the tempting wrong design (reads
joining the call in flight) on a schedule where that design is wrong.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchcache.etcd.client import EtcdClient, EtcdError
from watchcache.etcd.current_revision import SharedRevision, shared_revision, storage_root


async def yields(n: int) -> None:
    """Let the other tasks run ``n`` times: the model's unit of time."""
    for _ in range(n):
        await asyncio.sleep(0)


class Gate:
    """A fetch that waits for the test to answer it: observes calls and their overlap."""

    def __init__(self) -> None:
        self.pending: list[asyncio.Future[int]] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def fetch(self) -> int:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return await future
        finally:
            self.in_flight -= 1

    def answer(self, revision: int) -> None:
        self.pending.pop(0).set_result(revision)

    def fail(self, error: Exception) -> None:
        self.pending.pop(0).set_exception(error)


async def test_a_lone_read_makes_one_call() -> None:
    gate = Gate()
    shared = SharedRevision(gate.fetch)
    read = asyncio.ensure_future(shared.current())
    await yields(2)
    assert len(gate.pending) == 1 and shared.in_flight
    gate.answer(42)
    assert await read == 42
    assert (shared.calls, shared.reads) == (1, 1)
    await yields(2)
    assert not shared.in_flight


async def test_reads_arriving_before_the_call_is_issued_share_it() -> None:
    gate = Gate()
    shared = SharedRevision(gate.fetch)
    reads = [asyncio.ensure_future(shared.current()) for _ in range(10)]
    await yields(2)
    assert len(gate.pending) == 1
    gate.answer(7)
    assert await asyncio.gather(*reads) == [7] * 10
    assert (shared.calls, shared.reads) == (1, 10)


async def test_reads_arriving_while_a_call_is_in_flight_wait_for_the_next() -> None:
    gate = Gate()
    shared = SharedRevision(gate.fetch)
    first = asyncio.ensure_future(shared.current())
    await yields(2)  # the call is issued
    later = [asyncio.ensure_future(shared.current()) for _ in range(5)]
    await yields(2)
    assert len(gate.pending) == 1, "no second call while one is in flight"
    gate.answer(5)
    assert await first == 5
    await yields(2)
    assert not any(r.done() for r in later), "a later read adopted the older call"
    assert len(gate.pending) == 1, "the queued reads share one next call"
    gate.answer(9)
    assert await asyncio.gather(*later) == [9] * 5
    assert shared.calls == 2
    assert gate.most_in_flight == 1


async def test_the_next_call_goes_out_before_the_answered_reads_resume() -> None:
    gate = Gate()
    shared = SharedRevision(gate.fetch)
    calls_out_at_resume: list[int] = []

    async def first_read() -> int:
        revision = await shared.current()
        calls_out_at_resume.append(len(gate.pending))
        return revision

    first = asyncio.ensure_future(first_read())
    await yields(2)  # its call is issued
    queued = asyncio.ensure_future(shared.current())
    await yields(1)
    gate.answer(1)
    assert await first == 1
    assert calls_out_at_resume == [1], "the queued read's call waited for the woken reads"
    gate.answer(2)
    assert await queued == 2


async def test_an_error_is_every_sharer_s_and_the_queue_goes_on() -> None:
    gate = Gate()
    shared = SharedRevision(gate.fetch)
    first = [asyncio.ensure_future(shared.current()) for _ in range(3)]
    await yields(2)
    queued = asyncio.ensure_future(shared.current())
    await yields(1)
    gate.fail(EtcdError("etcd unavailable"))
    for read in first:
        with pytest.raises(EtcdError, match="unavailable"):
            await read
    await yields(2)
    gate.answer(11)
    assert await queued == 11


async def test_a_cancelled_read_leaves_the_call_to_the_others() -> None:
    gate = Gate()
    shared = SharedRevision(gate.fetch)
    leaving, staying = (asyncio.ensure_future(shared.current()) for _ in range(2))
    await yields(2)
    leaving.cancel()
    await yields(1)
    gate.answer(3)
    assert await staying == 3
    assert leaving.cancelled()


async def test_an_error_nobody_awaits_is_not_reported_as_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = Gate()
    shared = SharedRevision(gate.fetch)
    read = asyncio.ensure_future(shared.current())
    await yields(2)
    read.cancel()
    await yields(1)
    gate.fail(EtcdError("gone"))
    await yields(3)
    import gc

    gc.collect()
    assert "never retrieved" not in caplog.text


async def test_a_call_cancelled_before_it_ran_does_not_strand_its_reads() -> None:
    gate = Gate()
    shared = SharedRevision(gate.fetch)
    read = asyncio.ensure_future(shared.current())
    await asyncio.sleep(0)  # current() ran and created the task, which has not run yet
    assert shared._in_flight is not None
    shared._in_flight.cancel()
    with pytest.raises(asyncio.CancelledError):
        await read
    assert not shared.in_flight
    again = asyncio.ensure_future(shared.current())
    await yields(2)
    gate.answer(8)
    assert await again == 8


# ---------------------------------------------------------------------------------------
# Linearizability under any interleaving


class ModelEtcd:
    """Writes commit, then are acknowledged; a current-revision call reads the revision at
    its serve point, between being issued and answering. Each phase lasts the next number
    of yields from ``call_delays`` (a call's) or ``write_delays`` (a write's)."""

    def __init__(self, call_delays: Iterator[int], write_delays: Iterator[int]) -> None:
        self.call_delays = call_delays
        self.write_delays = write_delays
        self.revision = 1
        self.acknowledged = 1

    async def write(self) -> None:
        await yields(next(self.write_delays))
        self.revision += 1
        committed = self.revision
        await yields(next(self.write_delays))
        self.acknowledged = max(self.acknowledged, committed)

    async def current_revision(self) -> int:
        await yields(next(self.call_delays))
        served = self.revision
        await yields(next(self.call_delays))
        return served


async def run_schedule(
    reader: Callable[[ModelEtcd], Callable[[], Awaitable[int]]],
    call_delays: list[int],
    write_delays: list[int],
    operations: list[tuple[str, int]],
) -> list[tuple[int, int]]:
    """Run writes and reads, each starting after its own number of yields; return every
    read's (revision needed at its start, revision it got)."""
    etcd = ModelEtcd(itertools.cycle(call_delays), itertools.cycle(write_delays))
    read = reader(etcd)
    results: list[tuple[int, int]] = []

    async def one(kind: str, start: int) -> None:
        await yields(start)
        if kind == "write":
            await etcd.write()
            return
        needed = etcd.acknowledged
        results.append((needed, await read()))

    await asyncio.gather(*(one(kind, start) for kind, start in operations))
    return results


def shared_reader(etcd: ModelEtcd) -> Callable[[], Awaitable[int]]:
    return SharedRevision(etcd.current_revision).current


def joining_the_call_in_flight(etcd: ModelEtcd) -> Callable[[], Awaitable[int]]:
    """The wrong design: every read joins whatever call is in flight."""
    in_flight: list[asyncio.Future[int]] = []

    async def read() -> int:
        if not in_flight or in_flight[0].done():
            in_flight[:] = [asyncio.ensure_future(etcd.current_revision())]
        return await asyncio.shield(in_flight[0])

    return read


SCHEDULES = {
    "call_delays": st.lists(st.integers(0, 8), min_size=1, max_size=8),
    "write_delays": st.lists(st.integers(0, 3), min_size=1, max_size=8),
    "operations": st.lists(
        st.tuples(st.sampled_from(["read", "write"]), st.integers(0, 12)),
        min_size=1,
        max_size=40,
    ),
}


@given(**SCHEDULES)
def test_every_read_sees_every_write_acknowledged_before_it_started(
    call_delays: list[int], write_delays: list[int], operations: list[tuple[str, int]]
) -> None:
    results = asyncio.run(run_schedule(shared_reader, call_delays, write_delays, operations))
    for needed, got in results:
        assert got >= needed


def test_the_property_catches_reads_that_join_the_call_in_flight() -> None:
    # A read issues a call that is served at once; a write commits and is acknowledged
    # while the answer travels back; a second read starts then. Joining the call in flight
    # hands it the revision from before the write.
    call_delays = [0, 6]  # served at once, answered 6 yields later
    write_delays = [0]
    operations = [("read", 0), ("write", 1), ("read", 3)]
    wrong = asyncio.run(
        run_schedule(joining_the_call_in_flight, call_delays, write_delays, operations)
    )
    assert any(got < needed for needed, got in wrong)
    right = asyncio.run(run_schedule(shared_reader, call_delays, write_delays, operations))
    assert all(got >= needed for needed, got in right)


@pytest.mark.parametrize(
    ("key", "root"),
    [
        (b"/registry/pods", b"/registry"),
        (b"/registry/apps/deployments", b"/registry"),
        (b"/registry", b"/registry"),
        (b"plain", b"plain"),
    ],
)
def test_storage_root(key: bytes, root: bytes) -> None:
    assert storage_root(key) == root


def test_resources_on_one_client_and_root_share_a_reader() -> None:
    client, other = EtcdClient(["127.0.0.1:1"]), EtcdClient(["127.0.0.1:1"])
    pods = shared_revision(client, b"/registry/pods")
    assert shared_revision(client, b"/registry/configmaps") is pods
    assert shared_revision(client, b"/elsewhere/pods") is not pods
    assert shared_revision(other, b"/registry/pods") is not pods


def test_a_reader_does_not_keep_its_client_alive() -> None:
    import gc
    import weakref

    client = EtcdClient(["127.0.0.1:1"])
    shared_revision(client, b"/registry/pods")
    gone = weakref.ref(client)
    del client
    gc.collect()
    assert gone() is None
