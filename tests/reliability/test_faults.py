"""Faults against a real 3-member etcd while a SyncedCache serves watchers.

Every scenario runs the same harness around one fault:

1. seed objects, note etcd's revision (the oracle's history starts right after it), start a
   :class:`SyncedCache` and six informer-like clients of it: list, watch from the list's rv,
   resume from the last rv seen when the cache ends the watch, list again after a 410. They
   differ in filter (everything, ``app=a``, ``app in (a,b)``, one namespace with ``app!=c``),
   bookmarks (every 0.25 s when idle) and start (one is a watch-list: initial state, then
   changes);
2. two writers put, delete and run two- and three-key transactions (several events at one
   revision) through their own client, retrying what fails, before, during and after the
   fault;
3. the fault;
4. a last write every filter selects; once each client has seen it, etcd's history is read
   back (state before the start, every change since, from a fresh watch) and every watch
   session is validated (tests/support/watch_validator.py: ordered, unique, reliable,
   bookmarkable, resumable, initial state), every list and each client's final state are
   compared with etcd at their rv, three watches per client are restarted from rvs it was
   delivered and must get exactly the rest, and the cache must equal etcd at its rv (the
   inconsistency detector's digest, and an exact LIST against an etcd Range).

The faults: ``kill -9`` of the leader and of the follower the cache's watch is on (each
restarted afterwards), SIGSTOP/SIGCONT of the leader and of that follower, ``kill -9``
of all three members and their restart on the same data dirs, and a compaction while the
cache's only member is down (the cache relists; its watchers end, get 410 when they resume
and list again). Last, a regression test: a watcher falling behind in the middle of a
multi-key transaction. The counts go to the ``reliability:`` line at the end of the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field

from freezing import frozen as frozen_process
from watch_validator import (
    BOOKMARK,
    DELETED,
    Change,
    End,
    Oracle,
    Tally,
    WatchFilter,
    WatchSession,
    WatchValidator,
    read_history,
    read_oracle,
    read_state,
)

from watchcache.cache.watcher import Watcher
from watchcache.etcd.client import EtcdClient, EtcdError
from watchcache.etcd.process import EtcdCluster, EtcdMember
from watchcache.etcd.proto import rpc_pb2
from watchcache.sync.synced import SyncedCache
from watchcache.wire.errors import (
    ExpiredError,
    ServerTimeoutError,
    StatusError,
    TooManyRequestsError,
    WatchTerminatedError,
)
from watchcache.wire.options import ListOptions, ResourceVersionMatch, WatchOptions

PREFIX = "/registry/pods/"
NAMESPACES = ("ns-0", "ns-1", "ns-2")
NAMES_PER_NAMESPACE = 12
APPS = ("a", "b", "c")
#: Every client's filter selects it: seeing it means a client has seen everything before.
SENTINEL = f"{PREFIX}ns-0/zz-sentinel"
#: Writes before the fault and after recovery (both writers together).
WRITES_AROUND_FAULT = 120
#: Restarted watches per client, from rvs it was delivered.
RESUMES_PER_CLIENT = 3


def pod(namespace: str, name: str, app: str, step: int) -> bytes:
    return json.dumps(
        {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
            "spec": {"nodeName": f"node-{step % 3}"},
        },
        separators=(",", ":"),
    ).encode()


async def eventually(condition: Callable[[], bool], timeout: float, what: str) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)
    assert condition(), what


# -- the writers --------------------------------------------------------------------------------


class Writers:
    """Random puts, deletes and multi-key transactions under PREFIX. A write that fails is
    retried after a pause; one that fails after committing shows up in etcd's history,
    which is what everything is checked against, not this class's counts."""

    def __init__(self, client: EtcdClient, rng: random.Random, workers: int = 2) -> None:
        self.client = client
        self.rng = rng
        self.workers = workers
        self.ops: Counter[str] = Counter()
        self.failures = 0
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def done(self) -> int:
        return sum(self.ops.values())

    def start(self) -> None:
        for i in range(self.workers):
            rng = random.Random(self.rng.random())
            self._tasks.append(asyncio.create_task(self._work(rng), name=f"writer {i}"))

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)

    async def wait_for(self, writes: int, timeout: float = 60.0) -> None:
        await eventually(lambda: self.done >= writes, timeout, f"{writes} writes")

    def _key(self, rng: random.Random) -> tuple[str, str, bytes]:
        namespace = rng.choice(NAMESPACES)
        name = f"p{rng.randrange(NAMES_PER_NAMESPACE):02d}"
        return namespace, name, f"{PREFIX}{namespace}/{name}".encode()

    async def _work(self, rng: random.Random) -> None:
        step = 0
        while not self._stop.is_set():
            step += 1
            roll = rng.random()
            try:
                if roll < 0.15:
                    _, _, key = self._key(rng)
                    await self.client.delete_range(key, timeout=2.0)
                    self.ops["delete"] += 1
                elif roll < 0.25:
                    await self._transaction(rng, step)
                    self.ops["txn"] += 1
                else:
                    namespace, name, key = self._key(rng)
                    value = pod(namespace, name, rng.choice(APPS), step)
                    await self.client.put(key, value, timeout=2.0)
                    self.ops["put"] += 1
            except EtcdError:
                self.failures += 1
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.002)

    async def _transaction(self, rng: random.Random, step: int) -> None:
        ops: dict[bytes, rpc_pb2.RequestOp] = {}
        for _ in range(rng.choice((2, 3))):
            namespace, name, key = self._key(rng)
            value = pod(namespace, name, rng.choice(APPS), step)
            ops[key] = rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value))
        await self.client.txn(rpc_pb2.TxnRequest(success=list(ops.values())), timeout=2.0)


# -- the clients of the cache ---------------------------------------------------------------


@dataclass
class Informer:
    """A client of the cache as Kubernetes' reflector is one: list, watch from the list's
    rv, resume from the last rv seen when the watch ends, list again after a 410 (or, as a
    watch-list client, watch with initial events again). Keeps the state it sees."""

    synced: SyncedCache
    name: str
    flt: WatchFilter
    bookmarks: bool = False
    watch_list: bool = False
    sessions: list[WatchSession] = field(default_factory=list)
    #: (rv, key -> rv) of every list it made.
    lists: list[tuple[int, dict[str, int]]] = field(default_factory=list)
    state: dict[str, int] = field(default_factory=dict)
    last_rv: int = 0
    retries: int = 0
    _stopping: bool = False
    _watcher: Watcher | None = None
    _task: asyncio.Task[None] | None = None

    @property
    def request_prefix(self) -> str | None:
        return None if self.flt.prefix == PREFIX else self.flt.prefix

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"informer {self.name}")

    async def stop(self) -> None:
        self._stopping = True
        if self._watcher is not None:
            self._watcher.close()
        assert self._task is not None
        await self._task

    async def _list(self) -> int:
        cache = self.synced.cache
        while True:
            try:
                result = await cache.list(
                    ListOptions(label_selector=self.flt.selector), prefix=self.request_prefix
                )
            except (TooManyRequestsError, ServerTimeoutError, EtcdError):
                # Not ready (relisting), not fresh in time, etcd unreachable: retry, as a
                # reflector does.
                self.retries += 1
                await asyncio.sleep(0.1)
                continue
            items = {item.key: item.mod_revision for item in result.items}
            self.lists.append((result.resource_version, items))
            self.state = dict(items)
            self.last_rv = max(self.last_rv, result.resource_version)
            return result.resource_version

    def _options(self, rv: int) -> WatchOptions:
        if rv == 0:
            return WatchOptions(
                resource_version="",
                resource_version_match=ResourceVersionMatch.NOT_OLDER_THAN,
                send_initial_events=True,
                allow_watch_bookmarks=True,
                label_selector=self.flt.selector,
            )
        return WatchOptions(
            resource_version=str(rv),
            label_selector=self.flt.selector,
            allow_watch_bookmarks=self.bookmarks,
        )

    async def _run(self) -> None:
        rv = 0 if self.watch_list else await self._list()
        while not self._stopping:
            session = WatchSession(
                self.flt, rv, name=f"{self.name}#{len(self.sessions)}", initial=rv == 0
            )
            watcher = self.synced.cache.watch(self._options(rv), prefix=self.request_prefix)
            try:
                await watcher.start()
            except ExpiredError as error:
                session.finish(End.EXPIRED, str(error))
                self.sessions.append(session)
                rv = 0 if self.watch_list else await self._list()
                continue
            except (TooManyRequestsError, ServerTimeoutError, EtcdError):
                self.retries += 1
                await asyncio.sleep(0.1)
                continue
            except StatusError as error:
                session.finish(End.ERROR, str(error))
                self.sessions.append(session)
                return
            self.sessions.append(session)
            self._watcher = watcher
            initial: dict[str, int] = {}
            try:
                async for event in watcher:
                    key = event.item.key if event.item is not None else ""
                    kind = str(event.type)
                    if session.initial and session.initial_rv is None:
                        if event.initial_events_end:
                            self.state = initial
                        else:
                            initial[key] = event.resource_version
                    elif kind == DELETED:
                        self.state.pop(key, None)
                    elif kind != BOOKMARK:
                        self.state[key] = event.resource_version
                    session.record(
                        kind, key, event.resource_version, initial_end=event.initial_events_end
                    )
                    if session.initial_rv is not None or not session.initial:
                        self.last_rv = max(self.last_rv, event.resource_version)
            except WatchTerminatedError as ended:
                session.finish(End.TERMINATED, str(ended))
            else:
                session.finish(End.CLOSED)
            finally:
                watcher.close()
                self._watcher = None
            # A watch-list that ended before its initial state was complete starts over.
            rv = 0 if session.initial and session.initial_rv is None else session.last_rv


def informers(synced: SyncedCache) -> list[Informer]:
    ns0 = f"{PREFIX}ns-0/"
    return [
        Informer(synced, "all", WatchFilter(PREFIX)),
        Informer(synced, "all+bm", WatchFilter(PREFIX), bookmarks=True),
        Informer(synced, "app=a", WatchFilter(PREFIX, "app=a")),
        Informer(synced, "app in (a,b)+bm", WatchFilter(PREFIX, "app in (a,b)"), bookmarks=True),
        Informer(synced, "ns-0,app!=c+bm", WatchFilter(ns0, "app!=c"), bookmarks=True),
        Informer(synced, "watch-list app=a", WatchFilter(PREFIX, "app=a"), watch_list=True),
    ]


# -- one scenario -------------------------------------------------------------------------------


@dataclass
class Run:
    """What a fault gets: the cluster, the clients, the cache, the writers."""

    cluster: EtcdCluster
    tally: Tally
    cache_client: EtcdClient
    writer_client: EtcdClient
    oracle_client: EtcdClient
    synced: SyncedCache
    writers: Writers
    informers: list[Informer]
    #: The oracle's history starts at this revision.
    first: int
    #: History read before a compaction destroyed it, and up to which revision.
    saved: list[Change] = field(default_factory=list)
    saved_through: int = 0
    #: Times the cache's etcd watch reconnected (read before the cache stops).
    watch_reconnects: int = 0

    async def save_history(self) -> int:
        """Read etcd's history so far (a compaction is coming); returns its last revision."""
        through = await self.oracle_client.current_revision(PREFIX.encode())
        start = max(self.first, self.saved_through + 1)
        self.saved += await read_history(self.oracle_client, PREFIX, start, through)
        self.saved_through = through
        return through


Fault = Callable[[Run], Awaitable[None]]
Prepare = Callable[[Run], Awaitable[None]]


async def leader(client: EtcdClient, cluster: EtcdCluster) -> EtcdMember:
    """The member that says it leads (asked of each running member, until one does)."""
    async with asyncio.timeout(30):
        while True:
            for member in cluster.members:
                if not member.running:
                    continue
                with contextlib.suppress(EtcdError):
                    status = await client.status(member.endpoint, timeout=1.0)
                    if status.leader and status.header.member_id == status.leader:
                        return member
            await asyncio.sleep(0.1)


async def restart(cluster: EtcdCluster, *members: EtcdMember) -> None:
    """Start ``members`` again on their ports and data dirs and wait until they are healthy.

    The members start on this (the main) thread, so they die with the test run like the
    fixture's own; only the wait, which blocks, runs on a worker thread."""
    for member in members:
        member.start()
    # With every member down, none is healthy before a quorum is back: start all first.
    await asyncio.to_thread(cluster.wait_healthy, members)


def cache_on_follower(cluster: EtcdCluster) -> Callable[[Run], Awaitable[None]]:
    """A ``prepare``: the cache's watch on a follower, the writers on the leader."""

    async def prepare(run: Run) -> None:
        chief = await leader(run.oracle_client, cluster)
        follower = next(m for m in cluster.members if m is not chief)
        run.cache_client.prefer(follower.endpoint)
        run.writer_client.prefer(chief.endpoint)

    return prepare


def watched_member(run: Run, cluster: EtcdCluster) -> EtcdMember:
    """The member the cache's etcd watch is on now."""
    watch = run.synced.reflector.watch
    assert watch is not None
    return next(m for m in cluster.members if m.endpoint == watch.endpoint)


@contextlib.contextmanager
def frozen(member: EtcdMember) -> Iterator[None]:
    """SIGSTOP ``member`` for the block; SIGCONT whatever happens in it."""
    assert member.pid is not None
    with frozen_process(member.pid):
        yield


async def write_sentinel(client: EtcdClient) -> int:
    async with asyncio.timeout(60):
        while True:
            try:
                return await client.put(SENTINEL.encode(), pod("ns-0", "zz-sentinel", "a", 0))
            except EtcdError:
                await asyncio.sleep(0.1)


async def resume(synced: SyncedCache, informer: Informer, rv: int, through: int) -> WatchSession:
    """A watch with ``informer``'s filter restarted at ``rv``, read until ``through``."""
    session = WatchSession(informer.flt, rv, name=f"{informer.name} resumed at {rv}")
    watcher = synced.cache.watch(
        WatchOptions(
            resource_version=str(rv),
            label_selector=informer.flt.selector,
            allow_watch_bookmarks=informer.bookmarks,
        ),
        prefix=informer.request_prefix,
    )
    try:
        async with asyncio.timeout(20):
            await watcher.start()
            async for event in watcher:
                key = event.item.key if event.item is not None else ""
                session.record(str(event.type), key, event.resource_version)
                if event.resource_version >= through:
                    session.synced_to = through
                    break
    except StatusError as error:
        session.finish(End.ERROR, f"restarting at {rv}: {error}")
        return session
    finally:
        watcher.close()
    session.finish(End.CLOSED)
    return session


async def check_cache_equals_etcd(synced: SyncedCache, client: EtcdClient, oracle: Oracle) -> int:
    """The detector's digest and an exact LIST, both at the cache's rv, against etcd."""
    result = await synced.checker.check()
    assert result.status == "success", result
    rv = synced.cache.resource_version
    listed = await synced.cache.list(
        ListOptions(resource_version=str(rv), resource_version_match=ResourceVersionMatch.EXACT)
    )
    assert listed.resource_version == rv
    cache_state = {item.key: (item.mod_revision, item.labels) for item in listed.items}
    etcd_state = await read_state(client, PREFIX, rv)
    assert cache_state == etcd_state
    # The oracle agrees with etcd too, so what it judged the watchers by is etcd's history.
    assert oracle.state_at(rv) == etcd_state
    return rv


async def exercise(
    cluster: EtcdCluster,
    tally: Tally,
    rng: random.Random,
    fault: Fault,
    *,
    prepare: Prepare | None = None,
    cache_endpoints: Sequence[str] | None = None,
    writer_endpoints: Sequence[str] | None = None,
) -> Run:
    """Run the harness of the module note around ``fault``; fails on any violation."""
    everywhere = cluster.endpoints
    async with (
        EtcdClient(cache_endpoints or everywhere, timeout=10.0) as cache_client,
        EtcdClient(writer_endpoints or everywhere, timeout=10.0) as writer_client,
        EtcdClient(writer_endpoints or everywhere, timeout=10.0) as oracle_client,
    ):
        for i in range(20):
            namespace = NAMESPACES[i % len(NAMESPACES)]
            name = f"p{i % NAMES_PER_NAMESPACE:02d}"
            key = f"{PREFIX}{namespace}/{name}".encode()
            await writer_client.put(key, pod(namespace, name, APPS[i % len(APPS)], 0))
        first = await oracle_client.current_revision(PREFIX.encode()) + 1
        base = await read_state(oracle_client, PREFIX, first - 1)
        synced = SyncedCache(cache_client, PREFIX, kind="Pod", bookmark_interval=0.25)
        writers = Writers(writer_client, rng)
        run = Run(cluster, tally, cache_client, writer_client, oracle_client, synced, writers,
                  informers(synced), first)  # fmt: skip
        try:
            if prepare is not None:
                await prepare(run)
            await synced.start()
            for informer in run.informers:
                informer.start()
            await eventually(
                lambda: all(i.sessions for i in run.informers), 30, "every client watches"
            )
            writers.start()
            await writers.wait_for(WRITES_AROUND_FAULT)
            await fault(run)
            await writers.wait_for(writers.done + WRITES_AROUND_FAULT)
            await writers.stop()
            sentinel = await write_sentinel(writer_client)
            await eventually(
                lambda: synced.cache.resource_version >= sentinel, 60, "the cache catches up"
            )
            await eventually(
                lambda: all(i.last_rv >= sentinel for i in run.informers),
                30,
                "every client sees the last write",
            )
            for informer in run.informers:
                informer.sessions[-1].synced_to = sentinel
            watch = synced.reflector.watch
            run.watch_reconnects = watch.reconnects if watch is not None else 0
            last = await oracle_client.current_revision(PREFIX.encode())
            start = max(first, run.saved_through + 1)
            history = [*run.saved, *await read_history(oracle_client, PREFIX, start, last)]
            oracle = Oracle(base, first, history, last)
            validator = WatchValidator(oracle)
            for informer in run.informers:
                # Restart watches before the clients stop, at rvs of their latest session.
                latest = informer.sessions[-1]
                rvs = sorted({e.rv for e in latest.changes if e.rv < sentinel})
                for rv in rng.sample(rvs, min(RESUMES_PER_CLIENT, len(rvs))):
                    validator.check_resumed(latest, await resume(synced, informer, rv, sentinel))
            for informer in run.informers:
                await informer.stop()
                for session in informer.sessions:
                    validator.check(session)
                validator.check_chain(informer.sessions)
                for rv, items in informer.lists:
                    validator.check_state(f"{informer.name} list at {rv}", informer.flt, rv, items)
                validator.check_state(
                    f"{informer.name} client state", informer.flt, informer.last_rv, informer.state
                )
            await check_cache_equals_etcd(synced, oracle_client, oracle)
            tally.add(validator)
            print(
                f"writes {dict(writers.ops)} (failed attempts {writers.failures}); "
                f"etcd history {len(history)} changes; {validator.events_checked} events in "
                f"{validator.sessions_checked} sessions checked; cache watch reconnects "
                f"{run.watch_reconnects}, "
                f"relists {synced.reflector.stats.lists}; client retries "
                f"{sum(i.retries for i in run.informers)}"
            )
            assert not validator.violations, "\n".join(map(str, validator.violations[:40]))
            return run
        finally:
            await writers.stop()
            for informer in run.informers:
                if informer._task is not None and not informer._task.done():
                    await informer.stop()
            await synced.stop()


# -- the faults ---------------------------------------------------------------------------------


async def test_kill_9_of_the_leader(
    etcd_cluster: EtcdCluster, reliability_tally: Tally, rng: random.Random
) -> None:
    async def prepare(run: Run) -> None:
        # The cache's watch and the writers on the member about to die.
        victim = await leader(run.oracle_client, etcd_cluster)
        run.cache_client.prefer(victim.endpoint)
        run.writer_client.prefer(victim.endpoint)

    async def fault(run: Run) -> None:
        victim = await leader(run.oracle_client, etcd_cluster)
        victim.stop(kill=True)
        run.tally.fault("kill -9 leader")
        await run.writers.wait_for(run.writers.done + 40)
        await restart(etcd_cluster, victim)

    run = await exercise(etcd_cluster, reliability_tally, rng, fault, prepare=prepare)
    assert run.watch_reconnects >= 1, "the cache's watch was not on the killed leader"


async def test_kill_9_of_the_follower_the_cache_watches_on(
    etcd_cluster: EtcdCluster, reliability_tally: Tally, rng: random.Random
) -> None:
    async def fault(run: Run) -> None:
        victim = watched_member(run, etcd_cluster)
        victim.stop(kill=True)
        run.tally.fault("kill -9 follower")
        await run.writers.wait_for(run.writers.done + 40)
        await restart(etcd_cluster, victim)

    prepare = cache_on_follower(etcd_cluster)
    run = await exercise(etcd_cluster, reliability_tally, rng, fault, prepare=prepare)
    assert run.watch_reconnects >= 1


async def test_sigstop_and_sigcont_of_the_leader(
    etcd_cluster: EtcdCluster, reliability_tally: Tally, rng: random.Random
) -> None:
    async def prepare(run: Run) -> None:
        chief = await leader(run.oracle_client, etcd_cluster)
        follower = next(m for m in etcd_cluster.members if m is not chief)
        run.cache_client.prefer(chief.endpoint)
        run.writer_client.prefer(follower.endpoint)

    async def fault(run: Run) -> None:
        victim = await leader(run.oracle_client, etcd_cluster)
        with frozen(victim):
            run.tally.fault("SIGSTOP/SIGCONT leader")
            # The others elect a new leader (~1 s here) and take writes again.
            await run.writers.wait_for(run.writers.done + 40)
            assert await leader(run.oracle_client, etcd_cluster) is not victim
            await asyncio.sleep(1.0)

    await exercise(etcd_cluster, reliability_tally, rng, fault, prepare=prepare)


async def test_sigstop_and_sigcont_of_the_follower_the_cache_watches_on(
    etcd_cluster: EtcdCluster, reliability_tally: Tally, rng: random.Random
) -> None:
    async def fault(run: Run) -> None:
        victim = watched_member(run, etcd_cluster)
        with frozen(victim):
            run.tally.fault("SIGSTOP/SIGCONT follower")
            # The cache's stream stalls while the writes go on, once it has applied what
            # the member sent before it froze (already on the socket).
            await asyncio.sleep(1.0)
            stalled_at = run.synced.cache.resource_version
            await run.writers.wait_for(run.writers.done + 60)
            await asyncio.sleep(1.0)
            assert run.synced.cache.resource_version == stalled_at

    await exercise(
        etcd_cluster, reliability_tally, rng, fault, prepare=cache_on_follower(etcd_cluster)
    )


async def test_restart_of_the_whole_cluster(
    etcd_cluster: EtcdCluster, reliability_tally: Tally, rng: random.Random
) -> None:
    async def fault(run: Run) -> None:
        for member in etcd_cluster.members:
            member.stop(kill=True)
        run.tally.fault("whole cluster kill -9 and restart")
        await asyncio.sleep(0.5)
        await restart(etcd_cluster, *etcd_cluster.members)

    run = await exercise(etcd_cluster, reliability_tally, rng, fault)
    assert run.watch_reconnects >= 1, "the cache's watch never broke"


async def test_compaction_while_the_cache_watch_is_disconnected(
    etcd_cluster: EtcdCluster, reliability_tally: Tally, rng: random.Random
) -> None:
    # The cache talks to member 0 only; while it is down the others take writes and
    # compact, so the cache's watch comes back below the compacted revision.
    only, others = etcd_cluster.members[0], etcd_cluster.endpoints[1:]

    async def fault(run: Run) -> None:
        only.stop(kill=True)
        run.tally.fault("kill -9 of the cache's only member")
        await run.writers.wait_for(run.writers.done + 60)
        await run.oracle_client.compact(await run.save_history())
        run.tally.fault("compaction while disconnected")
        await run.writers.wait_for(run.writers.done + 20)
        await restart(etcd_cluster, only)
        stats = run.synced.reflector.stats
        await eventually(lambda: stats.relists_after_compaction >= 1, 30, "a relist")

    run = await exercise(
        etcd_cluster,
        reliability_tally,
        rng,
        fault,
        cache_endpoints=[only.endpoint],
        writer_endpoints=others,
    )
    # Every client that had resumed past the outage was told 410 and listed again.
    expired = [i.name for i in run.informers if any(s.end is End.EXPIRED for s in i.sessions)]
    assert len(expired) == len(run.informers), expired


async def test_a_watcher_that_falls_behind_mid_transaction_resumes_without_a_gap(
    etcd_client: EtcdClient, reliability_tally: Tally
) -> None:
    # Regression: a transaction changed three keys at one revision; a watcher's buffer of
    # two filled at the third. It was sent the first two, told to resume from their rv, and
    # the third key's event at that rv could never reach it.
    async with SyncedCache(etcd_client, PREFIX, kind="Pod", watch_buffer=2) as synced:
        first = synced.cache.resource_version + 1
        flt = WatchFilter(PREFIX)
        sessions = [WatchSession(flt, first - 1, name="slow#0")]
        watcher = await synced.cache.watch(WatchOptions(resource_version=str(first - 1)))
        puts = [
            rpc_pb2.RequestOp(
                request_put=rpc_pb2.PutRequest(
                    key=f"{PREFIX}t/p{i}".encode(), value=pod("t", f"p{i}", "a", 0)
                )
            )
            for i in range(3)
        ]
        response = await etcd_client.txn(rpc_pb2.TxnRequest(success=puts))
        revision = int(response.header.revision)
        await eventually(lambda: synced.cache.resource_version >= revision, 10, "applied")
        reliability_tally.fault("slow watcher overflow")
        with contextlib.suppress(WatchTerminatedError):
            async for event in watcher:
                assert event.item is not None
                sessions[0].record(str(event.type), event.item.key, event.resource_version)
        sessions[0].finish(End.TERMINATED)
        # The client resumes from the last rv it was sent and reads what the cache has.
        resumed = WatchSession(flt, sessions[0].last_rv, name="slow#1", synced_to=revision)
        sessions.append(resumed)
        again_options = WatchOptions(resource_version=str(resumed.start_rv))
        async with synced.cache.watch(again_options) as again:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    async for event in again:
                        assert event.item is not None
                        resumed.record(str(event.type), event.item.key, event.resource_version)
        resumed.finish(End.CLOSED)
        last = await etcd_client.current_revision(PREFIX.encode())
        validator = WatchValidator(await read_oracle(etcd_client, PREFIX, first, last))
        for session in sessions:
            validator.check(session)
        validator.check_chain(sessions)
        reliability_tally.add(validator)
        assert not validator.violations, "\n".join(map(str, validator.violations))
        assert [e.rv for e in resumed.changes] == [revision] * 3
