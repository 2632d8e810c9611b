"""Validators for what one watcher received, one check per watch guarantee.

A watcher's life is a chain of :class:`WatchSession` s: one per watch request, from the rv it
started at (exclusive) to the way it ended — closed by the client or a timeout, terminated
by the server (the client resumes from the last rv it saw), or 410 Expired (the client lists
again and watches from the list's rv). Each session records what arrived, in order: events
(type, key, the object's resourceVersion) and bookmarks (their rv), plus, for a watch that
sends initial events, the initial ADDED objects and the rv of that state.

The oracle is what etcd did: the state under the watched prefix just before the first
revision of interest (a Range at that revision) and every change after it (a watch from
that revision with ``prev_kv``, so each change carries the labels before and after). It is
read back at the end (:func:`read_oracle`) or, when etcd is compacted while the run goes
on and that history is erased, recorded as it happens (:class:`OracleRecorder`).
:class:`Oracle` answers "what must a watcher with this prefix and label selector see in
(start, end]" (docs/semantics.md §5.5: an object entering the selector is ADDED, leaving it is
DELETED at the change's rv) and "what was the state at rv R".

Checks, each violation naming the guarantee it breaks (as etcd's robustness validators do):

* ``ordered``: rvs never go back, nothing at or below the start rv (several events may share
  one rv: one etcd transaction can change several keys);
* ``unique``: no (key, rv) twice;
* ``reliable``: every change etcd made in (start, covered] that the watcher's filter selects
  arrived with the type the filter implies, and nothing else did (``covered``: the highest
  rv an event or bookmark vouched for, or the rv the caller knows was delivered);
* ``bookmarkable``: bookmarks never go back, never below an event already delivered, never
  above etcd's revision, and no event after a bookmark is at or below it;
* ``resumable``: a watch restarted from any delivered rv gets exactly the suffix after that
  rv; consecutive sessions of one watcher start where the previous one stopped (after a
  410, at a list rv no older than what was already seen);
* ``initial state``: the initial events are exactly the selected objects of the state at
  the initial rv, each with its own mod revision, each once.

A 410 end is a legitimate end (the client relists); any other error end is a violation.
``events_checked`` counts every event, bookmark and initial object examined.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import enum
import itertools
import json
import re
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from watchcache.etcd.client import EtcdClient, prefix_range_end
from watchcache.etcd.proto import kv_pb2
from watchcache.etcd.watch import EtcdWatch
from watchcache.wire.errors import CompactedError

Labels = Mapping[str, str]
#: key -> (mod revision, labels): the objects under a prefix at one revision.
State = dict[str, tuple[int, Labels]]

ADDED, MODIFIED, DELETED, BOOKMARK = "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
_CHANGE_TYPES = frozenset((ADDED, MODIFIED, DELETED))


class Guarantee(enum.StrEnum):
    ORDERED = "ordered"
    UNIQUE = "unique"
    RELIABLE = "reliable"
    BOOKMARKABLE = "bookmarkable"
    RESUMABLE = "resumable"
    INITIAL = "initial state"


class End(enum.StrEnum):
    OPEN = "open"  # still running when checked (treated like closed)
    CLOSED = "closed"  # by the client, or the watch's timeout
    TERMINATED = "terminated"  # the server ended the stream; resume from the last rv
    EXPIRED = "expired"  # 410: the client lists again
    ERROR = "error"  # any other error: a violation


class HistoryTooShortError(ValueError):
    """A session reaches outside the revisions the oracle holds: a harness bug."""


class RecordingLostError(RuntimeError):
    """The recorder's watch ended (fell behind a compaction, or failed): from then on the
    oracle is incomplete, and waiting for it raises this."""


@dataclass(frozen=True, slots=True)
class Violation:
    guarantee: Guarantee
    session: str
    message: str

    def __str__(self) -> str:
        return f"{self.guarantee}: {self.session}: {self.message}"


# -- label selectors, as an oracle --------------------------------------------------------------

_REQUIREMENT = re.compile(
    r"\s*(?:(?P<not>!)\s*(?P<absent>[\w./-]+)"
    r"|(?P<key>[\w./-]+)\s*(?:(?P<op>==|!=|=)\s*(?P<value>[\w.-]*)"
    r"|\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?)\s*(?:,|$)"
)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """The equality- and set-based label selector grammar (``a=b``, ``a!=b``, ``a in (x,y)``,
    ``a notin (x)``, ``a``, ``!a``), written apart from the product's parser so it can judge
    it. An empty selector selects everything."""

    text: str
    requirements: tuple[tuple[str, str, frozenset[str]], ...]

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        requirements: list[tuple[str, str, frozenset[str]]] = []
        position = 0
        while position < len(text):
            match = _REQUIREMENT.match(text, position)
            if match is None or match.end() == position:
                raise ValueError(f"label selector {text!r}: cannot parse at {position}")
            position = match.end()
            if match["absent"]:
                requirements.append((match["absent"], "!", frozenset()))
            elif match["op"]:
                op = "!=" if match["op"] == "!=" else "="
                requirements.append((match["key"], op, frozenset((match["value"],))))
            elif match["setop"]:
                values = frozenset(v.strip() for v in match["values"].split(",") if v.strip())
                requirements.append((match["key"], match["setop"], values))
            else:
                requirements.append((match["key"], "exists", frozenset()))
        return cls(text, tuple(requirements))

    def matches(self, labels: Labels) -> bool:
        for key, op, values in self.requirements:
            value = labels.get(key)
            if op in {"=", "in"}:
                ok = value is not None and value in values
            elif op in {"!=", "notin"}:
                ok = value is None or value not in values
            elif op == "exists":
                ok = value is not None
            else:
                ok = value is None
            if not ok:
                return False
        return True


@dataclass(frozen=True, slots=True)
class WatchFilter:
    """What a watcher selects: keys under ``prefix`` whose labels match ``selector``."""

    prefix: str
    selector: str = ""
    _compiled: LabelSelector = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_compiled", LabelSelector.parse(self.selector))

    def selects(self, key: str, labels: Labels | None) -> bool:
        return labels is not None and key.startswith(self.prefix) and self._compiled.matches(labels)


# -- what etcd did --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    """One key changed at ``revision``: ``labels`` after (None: deleted) and ``previous``
    before (None: it did not exist)."""

    revision: int
    key: str
    labels: Labels | None
    previous: Labels | None

    def as_seen_by(self, flt: WatchFilter) -> str | None:
        """The event type a watcher with ``flt`` gets for this change, or None."""
        if not self.key.startswith(flt.prefix):
            return None
        now = flt.selects(self.key, self.labels)
        before = flt.selects(self.key, self.previous)
        if now:
            return MODIFIED if before else ADDED
        return DELETED if before else None


class Oracle:
    """etcd's history of one prefix: the state just before ``first`` and every change in
    ``[first, last]``. Built from :func:`read_state` and :func:`read_history`, possibly in
    parts (:meth:`extend`: history read before a compaction, the rest after, or batch by
    batch from a live watch), and trimmed at the old end by :meth:`forget`."""

    def __init__(self, base: State, first: int, changes: Iterable[Change], last: int) -> None:
        self.base = dict(base)
        self.first = first
        self.changes: list[Change] = []
        self._revisions: list[int] = []
        self.last = first - 1
        self._memo: tuple[int, int, State] | None = None
        self.extend(changes, last)

    def extend(self, changes: Iterable[Change], last: int) -> None:
        if last < self.last:
            raise ValueError(f"the history cannot shrink: {last} < {self.last}")
        floor = self.last + 1
        for change in changes:
            if change.revision < floor:
                raise ValueError(f"change at {change.revision} is out of order (>= {floor})")
            floor = change.revision
            if change.revision > last:
                raise ValueError(f"change at {change.revision} is after the last revision {last}")
            self.changes.append(change)
            self._revisions.append(change.revision)
        self.last = last

    def forget(self, through: int) -> None:
        """Fold the changes up to ``through`` into the base state, so a long run's oracle
        holds only the history still to be checked: afterwards sessions starting at
        ``through`` or later, and states at ``through`` or later, can be checked; older
        ones raise :class:`HistoryTooShortError`. Nothing happens for a revision the
        history does not reach past yet."""
        through = min(through, self.last)
        if through < self.first:
            return
        base = self.state_at(through)
        cut = bisect.bisect_right(self._revisions, through)
        del self.changes[:cut]
        del self._revisions[:cut]
        self.base = base
        self.first = through + 1
        self._memo = None

    def between(self, after: int, through: int) -> list[Change]:
        """Changes with ``after < revision <= through``."""
        if after + 1 < self.first or through > self.last:
            raise HistoryTooShortError(
                f"({after}, {through}] is not inside the history [{self.first}, {self.last}]"
            )
        lo = bisect.bisect_right(self._revisions, after)
        hi = bisect.bisect_right(self._revisions, through)
        return self.changes[lo:hi]

    def expected(self, flt: WatchFilter, after: int, through: int) -> list[tuple[str, str, int]]:
        """(type, key, rv) of every event a watcher with ``flt`` must get in (after, through]."""
        out: list[tuple[str, str, int]] = []
        for change in self.between(after, through):
            kind = change.as_seen_by(flt)
            if kind is not None:
                out.append((kind, change.key, change.revision))
        return out

    def state_at(self, revision: int) -> State:
        """The objects at ``revision`` (a copy). Successive calls at increasing revisions
        only apply the changes in between."""
        if revision < self.first - 1 or revision > self.last:
            raise HistoryTooShortError(
                f"revision {revision} is not inside [{self.first - 1}, {self.last}]"
            )
        if self._memo is not None and self._memo[0] <= revision:
            index, state = self._memo[1], dict(self._memo[2])
        else:
            index, state = 0, dict(self.base)
        while index < len(self.changes) and self.changes[index].revision <= revision:
            change = self.changes[index]
            if change.labels is None:
                state.pop(change.key, None)
            else:
                state[change.key] = (change.revision, change.labels)
            index += 1
        self._memo = (revision, index, state)
        return dict(state)

    def selected(self, flt: WatchFilter, revision: int) -> dict[str, int]:
        """key -> mod revision of what ``flt`` selects at ``revision``."""
        return {
            key: rv
            for key, (rv, labels) in self.state_at(revision).items()
            if flt.selects(key, labels)
        }


def labels_of(value: bytes) -> Labels:
    """The ``metadata.labels`` of a Kubernetes object's JSON ({} when absent or not JSON)."""
    try:
        obj = json.loads(value)
    except ValueError:
        return {}
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


async def read_state(client: EtcdClient, prefix: str, revision: int) -> State:
    """The objects under ``prefix`` at ``revision`` (0: now), read in pages."""
    start, end = prefix.encode(), prefix_range_end(prefix.encode())
    state: State = {}
    if revision < 0:
        return state
    while True:
        response = await client.range(start, end, revision=revision, limit=1000)
        revision = revision or int(response.header.revision)
        for kv in response.kvs:
            state[kv.key.decode()] = (int(kv.mod_revision), labels_of(kv.value))
        if not response.more or not response.kvs:
            return state
        start = response.kvs[-1].key + b"\0"


async def read_history(
    client: EtcdClient, prefix: str, first: int, last: int, *, timeout: float = 60.0
) -> list[Change]:
    """Every change under ``prefix`` with ``first <= revision <= last``, read by a watch
    from ``first`` (with ``prev_kv``) until etcd vouches for ``last`` (an event at or after
    it, or a progress notification: requested every 100 ms, as etcd 3.5 drops a request that
    arrives while the watch catches up)."""
    changes: list[Change] = []
    if last < first:
        return changes
    async with EtcdWatch(client, prefix.encode(), start_revision=first) as watch:

        async def tick() -> None:
            while True:
                watch.request_progress()
                await asyncio.sleep(0.1)

        ticker = asyncio.create_task(tick())
        try:
            async with asyncio.timeout(timeout):
                async for batch in watch:
                    for event in batch.events:
                        if event.kv.mod_revision <= last:
                            changes.append(_change(event))
                    if watch.progress_revision >= last:
                        break
        finally:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
    return changes


def _change(event: kv_pb2.Event) -> Change:
    previous = labels_of(event.prev_kv.value) if event.HasField("prev_kv") else None
    labels = labels_of(event.kv.value) if event.type == kv_pb2.Event.PUT else None
    return Change(int(event.kv.mod_revision), event.kv.key.decode(), labels, previous)


async def read_oracle(client: EtcdClient, prefix: str, first: int, last: int) -> Oracle:
    """The state before ``first`` and the changes in ``[first, last]``, read from etcd."""
    base = await read_state(client, prefix, first - 1) if first > 1 else {}
    return Oracle(base, first, await read_history(client, prefix, first, last), last)


class OracleRecorder:
    """The oracle recorded while a run goes on, for runs in which etcd is compacted.

    :func:`read_oracle` reads the history back at the end, and compaction erases it. Here
    the state at ``first - 1`` is read at :meth:`start` (before the writes of interest, so
    before any compaction can reach it) and a watch on the prefix with ``prev_kv`` folds
    every change into :attr:`oracle` as it arrives. etcd cancels only a watch whose next
    revision was compacted away, so a watch that keeps up is never cut by compaction; one
    that fell a whole compaction interval behind is, and from then on every wait raises
    :class:`RecordingLostError` (as does any other failure of the watch: a recorder that
    stopped must not let checks run against a history with a hole). Progress is requested
    every ``progress_every`` seconds, so :attr:`oracle`'s ``last`` follows etcd's revision
    when nothing under the prefix changes.

    Labels and keys are interned: a run of millions of changes over a few hundred keys and
    a dozen label sets keeps one copy of each. Use as an async context manager (the watch
    stops on exit)."""

    def __init__(self, client: EtcdClient, prefix: str, *, progress_every: float = 0.1) -> None:
        self.client = client
        self.prefix = prefix
        self.progress_every = progress_every
        self.error: BaseException | None = None
        #: Changes recorded, and the bytes of the values they put (for the mean object size).
        self.recorded = 0
        self.value_bytes = 0
        self.puts = 0
        self._oracle: Oracle | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._advanced = asyncio.Event()
        self._created = False
        self._labels: dict[tuple[tuple[str, str], ...], Labels] = {}
        self._keys: dict[str, str] = {}

    @property
    def oracle(self) -> Oracle:
        if self._oracle is None:
            raise RuntimeError("the recorder is not started")
        return self._oracle

    async def __aenter__(self) -> OracleRecorder:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self, first: int, *, timeout: float = 30.0) -> Oracle:
        """Read the state at ``first - 1`` and record every change from ``first``; returns
        once etcd has created the watch, so a compaction from then on cannot cut it."""
        base = await read_state(self.client, self.prefix, first - 1) if first > 1 else {}
        interned = {self._key(k): (rv, self._intern(labels)) for k, (rv, labels) in base.items()}
        self._oracle = Oracle(interned, first, [], first - 1)
        # From one revision earlier: etcd's first progress notification (at first - 1 or
        # later) is then news to the watch, and delivered, which says the watch exists.
        # A change at first - 1 is the base's, and left out.
        watch = EtcdWatch(self.client, self.prefix.encode(), start_revision=max(1, first - 1))
        self._tasks = [
            asyncio.create_task(self._record(watch), name="oracle recorder"),
            asyncio.create_task(self._tick(watch), name="oracle progress"),
        ]
        async with asyncio.timeout(timeout):
            while not self._created:
                if self.error is not None:
                    raise RecordingLostError(f"the oracle's watch ended: {self.error}")
                await self._advanced.wait()
        return self._oracle

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def wait_for(self, revision: int, *, timeout: float = 60.0) -> None:
        """Until everything up to ``revision`` is recorded. Raises RecordingLostError when
        the recording stopped, TimeoutError when it did not get there in ``timeout``."""
        async with asyncio.timeout(timeout):
            while True:
                advanced = self._advanced
                if self.error is not None:
                    raise RecordingLostError(f"the oracle's watch ended: {self.error}")
                if self.oracle.last >= revision:
                    return
                await advanced.wait()

    async def catch_up(self, *, timeout: float = 60.0) -> int:
        """etcd's current revision, once everything up to it is recorded."""
        revision = await self.client.current_revision(self.prefix.encode())
        await self.wait_for(revision, timeout=timeout)
        return revision

    async def _record(self, watch: EtcdWatch) -> None:
        oracle = self.oracle
        try:
            async with watch:
                async for batch in watch:
                    changes = [
                        self._change(event)
                        for event in batch.events
                        if event.kv.mod_revision >= oracle.first
                    ]
                    oracle.extend(changes, max(oracle.last, watch.progress_revision))
                    self.recorded += len(changes)
                    self._created = True
                    self._wake()
            self.error = RecordingLostError("the watch ended")
        except CompactedError as error:
            self.error = RecordingLostError(
                f"it fell behind a compaction to {error.compact_revision} at {oracle.last}"
            )
        except Exception as error:  # recorded: every waiter raises it (class note)
            self.error = error
        finally:
            self._wake()

    def _wake(self) -> None:
        # A fresh event per advance: a waiter holds the one it checked against, so no
        # advance between its check and its wait is missed.
        advanced, self._advanced = self._advanced, asyncio.Event()
        advanced.set()

    async def _tick(self, watch: EtcdWatch) -> None:
        while True:
            watch.request_progress()
            await asyncio.sleep(self.progress_every)

    def _change(self, event: kv_pb2.Event) -> Change:
        previous = (
            self._intern(labels_of(event.prev_kv.value)) if event.HasField("prev_kv") else None
        )
        labels = None
        if event.type == kv_pb2.Event.PUT:
            labels = self._intern(labels_of(event.kv.value))
            self.puts += 1
            self.value_bytes += len(event.kv.value)
        return Change(
            int(event.kv.mod_revision), self._key(event.kv.key.decode()), labels, previous
        )

    def _intern(self, labels: Labels) -> Labels:
        return self._labels.setdefault(tuple(sorted(labels.items())), labels)

    def _key(self, key: str) -> str:
        return self._keys.setdefault(key, key)


# -- what a watcher received ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Delivered:
    type: str
    key: str  # "" for a bookmark
    rv: int


@dataclass
class WatchSession:
    """One watch request's stream, as the client received it.

    ``start_rv``: the rv the watch started from (events must be above it). A watch that
    sends initial events starts with ``initial=True``: ADDED events go to ``initial`` until
    the initial-events-end bookmark, whose rv becomes ``initial_rv`` and ``start_rv``.
    ``synced_to``: set by the caller when it knows everything up to that rv was delivered
    (e.g. it saw an event it wrote last); otherwise coverage ends at the last delivered rv.
    ``cut``: the client stopped reading on its own (its timer, its own error), not the
    server: one etcd transaction can change several keys at one rv, and the server sends
    them one after the other, so the last event's rv may be partly unread and is not
    vouched for. A server ends a stream only between revisions.
    """

    flt: WatchFilter
    start_rv: int
    name: str = "watch"
    initial: bool = False
    initial_rv: int | None = None
    initial_events: list[Delivered] = field(default_factory=list)
    events: list[Delivered] = field(default_factory=list)
    end: End = End.OPEN
    error: str = ""
    synced_to: int = 0
    cut: bool = False

    def record(self, kind: str, key: str, rv: int, *, initial_end: bool = False) -> None:
        if self.initial and self.initial_rv is None:
            if kind == BOOKMARK and initial_end:
                self.initial_rv = self.start_rv = rv
                return
            if kind == ADDED:
                self.initial_events.append(Delivered(kind, key, rv))
                return
        self.events.append(Delivered(kind, "" if kind == BOOKMARK else key, rv))

    def finish(self, end: End, error: str = "") -> None:
        self.end, self.error = end, error

    @property
    def changes(self) -> list[Delivered]:
        return [e for e in self.events if e.type != BOOKMARK]

    @property
    def last_rv(self) -> int:
        """Where a client resumes: the highest rv it has seen on this session."""
        return max([self.start_rv, *(e.rv for e in self.events)])

    @property
    def covered(self) -> int:
        """Up to which rv this session vouches for having delivered everything."""
        last = self.last_rv
        if self.cut and self.events and self.events[-1].type != BOOKMARK:
            last = min(last, self.events[-1].rv - 1)
        return max(last, self.synced_to)

    @property
    def size(self) -> int:
        return len(self.events) + len(self.initial_events)


class WatchValidator:
    """Checks sessions against an :class:`Oracle`; collects ``violations`` and counts
    ``events_checked``. Every ``check*`` returns the violations it found."""

    def __init__(self, oracle: Oracle) -> None:
        self.oracle = oracle
        self.violations: list[Violation] = []
        self.events_checked = 0
        self.sessions_checked = 0

    def _report(self, found: list[Violation]) -> list[Violation]:
        self.violations.extend(found)
        return found

    def check(self, session: WatchSession, *, ceiling: int | None = None) -> list[Violation]:
        """ordered, unique, bookmarkable, reliable and (if any) initial state. ``ceiling``:
        etcd's revision read after the session ended, for an oracle that may have recorded
        past it since (:class:`OracleRecorder`): no bookmark may be above it (default: the
        oracle's last revision)."""
        found: list[Violation] = []
        top = self.oracle.last if ceiling is None else ceiling

        def bad(guarantee: Guarantee, message: str) -> None:
            found.append(Violation(guarantee, session.name, message))

        self.sessions_checked += 1
        self.events_checked += session.size
        if session.end is End.ERROR:
            bad(Guarantee.RELIABLE, f"the stream ended with an error: {session.error}")
        if session.initial and session.initial_rv is None:
            if session.events:
                bad(Guarantee.INITIAL, "events arrived before the initial-events-end bookmark")
            return self._report(found)
        if session.initial:
            found += self._initial(session)

        last_event = session.start_rv
        last_bookmark = 0
        seen: set[tuple[str, int]] = set()
        for e in session.events:
            if e.type == BOOKMARK:
                if e.rv < last_bookmark:
                    bad(Guarantee.BOOKMARKABLE, f"bookmark {e.rv} after bookmark {last_bookmark}")
                if e.rv < last_event:
                    bad(Guarantee.BOOKMARKABLE, f"bookmark {e.rv} below delivered rv {last_event}")
                if e.rv > top:
                    bad(Guarantee.BOOKMARKABLE, f"bookmark {e.rv} above etcd's {top}")
                last_bookmark = max(last_bookmark, e.rv)
                continue
            if e.type not in _CHANGE_TYPES:
                bad(Guarantee.RELIABLE, f"unknown event type {e.type} at {e.rv}")
            if e.rv <= session.start_rv:
                bad(Guarantee.ORDERED, f"{e.type} {e.key} at {e.rv}, not above the start")
            elif e.rv < last_event:
                bad(Guarantee.ORDERED, f"{e.type} {e.key} at {e.rv} after an event at {last_event}")
            if e.rv <= last_bookmark:
                bad(
                    Guarantee.BOOKMARKABLE,
                    f"{e.type} {e.key} at {e.rv} after a bookmark at {last_bookmark}",
                )
            if (e.key, e.rv) in seen:
                bad(Guarantee.UNIQUE, f"{e.type} {e.key} at {e.rv} delivered twice")
            seen.add((e.key, e.rv))
            last_event = max(last_event, e.rv)

        found += self._reliable(session)
        return self._report(found)

    def _reliable(self, session: WatchSession) -> list[Violation]:
        through = session.covered
        if through > self.oracle.last:
            # A bookmark from beyond etcd's revision is reported as such; anything else
            # past the history means the harness read too little of it.
            changes = [e.rv for e in session.changes]
            if max([session.synced_to, *changes]) <= self.oracle.last:
                through = self.oracle.last
        # What a cut stream delivered past what it vouches for must still be etcd's.
        reach = max([through, *(e.rv for e in session.changes)])
        expected = self.oracle.expected(session.flt, session.start_rv, reach)
        want = {(key, rv): kind for kind, key, rv in expected}
        got: dict[tuple[str, int], str] = {}
        for e in session.changes:
            got.setdefault((e.key, e.rv), e.type)
        found: list[Violation] = []
        for (key, rv), kind in want.items():
            if rv > through and (key, rv) not in got:
                continue
            if (key, rv) not in got:
                found.append(
                    Violation(Guarantee.RELIABLE, session.name, f"lost {kind} {key} at {rv}")
                )
            elif got[key, rv] != kind:
                found.append(
                    Violation(
                        Guarantee.RELIABLE,
                        session.name,
                        f"{key} at {rv} arrived as {got[key, rv]}, etcd's change makes it {kind}",
                    )
                )
        for (key, rv), kind in got.items():
            if (key, rv) not in want:
                found.append(
                    Violation(
                        Guarantee.RELIABLE,
                        session.name,
                        f"{kind} {key} at {rv}: no such change for this watcher in etcd",
                    )
                )
        return found

    def _initial(self, session: WatchSession) -> list[Violation]:
        assert session.initial_rv is not None
        want = self.oracle.selected(session.flt, session.initial_rv)
        found: list[Violation] = []
        got: dict[str, int] = {}
        for e in session.initial_events:
            if e.key in got:
                found.append(
                    Violation(Guarantee.INITIAL, session.name, f"{e.key} sent twice initially")
                )
            got[e.key] = e.rv
        for key, rv in want.items():
            if key not in got:
                found.append(
                    Violation(
                        Guarantee.INITIAL,
                        session.name,
                        f"{key} (rv {rv}) missing from the state at {session.initial_rv}",
                    )
                )
            elif got[key] != rv:
                found.append(
                    Violation(
                        Guarantee.INITIAL,
                        session.name,
                        f"{key} sent at rv {got[key]}, etcd had {rv} at {session.initial_rv}",
                    )
                )
        for key in got.keys() - want.keys():
            found.append(
                Violation(
                    Guarantee.INITIAL,
                    session.name,
                    f"{key} sent initially, not selected at {session.initial_rv}",
                )
            )
        return found

    def check_resumed(self, original: WatchSession, resumed: WatchSession) -> list[Violation]:
        """``resumed`` restarted from an rv ``original`` delivered: up to what both cover,
        it got exactly ``original``'s events after that rv (and is itself checked)."""
        found = self.check(resumed)
        start = resumed.start_rv
        through = min(original.covered, resumed.covered)
        suffix = [(e.type, e.key, e.rv) for e in original.changes if start < e.rv <= through]
        again = [(e.type, e.key, e.rv) for e in resumed.changes if e.rv <= through]
        if again != suffix:
            found.append(
                Violation(
                    Guarantee.RESUMABLE,
                    resumed.name,
                    f"re-watch from {start} through {through} got {_brief(again)}, "
                    f"the original stream had {_brief(suffix)}",
                )
            )
            self.violations.append(found[-1])
        return found

    def check_chain(self, sessions: Sequence[WatchSession], *, seen: int = 0) -> list[Violation]:
        """One watcher's consecutive sessions: each starts where the last one stopped, or
        after a 410 at a list rv no older than what was already seen. ``seen``: the highest
        rv the watcher saw before the first of ``sessions`` (a chain checked link by link,
        as a long run does, passes the previous session and what came before it)."""
        found: list[Violation] = []
        for before, after in itertools.pairwise(sessions):
            seen = max(seen, before.last_rv)
            if before.end is End.EXPIRED:
                if after.start_rv < seen and not after.initial:
                    found.append(
                        Violation(
                            Guarantee.RESUMABLE,
                            after.name,
                            f"after 410 it restarted at {after.start_rv}, below the {seen} "
                            "already seen",
                        )
                    )
                if after.initial and after.initial_rv is not None and after.initial_rv < seen:
                    found.append(
                        Violation(
                            Guarantee.RESUMABLE,
                            after.name,
                            f"after 410 its initial state is at {after.initial_rv}, below the "
                            f"{seen} already seen",
                        )
                    )
            elif after.start_rv != before.last_rv:
                found.append(
                    Violation(
                        Guarantee.RESUMABLE,
                        after.name,
                        f"resumed at {after.start_rv}, the previous session ended at "
                        f"{before.last_rv}",
                    )
                )
        return self._report(found)

    def check_state(
        self, name: str, flt: WatchFilter, revision: int, have: Mapping[str, int]
    ) -> list[Violation]:
        """A client's view (key -> rv, from a list and the events after it) at ``revision``
        is what ``flt`` selected in etcd then."""
        want = self.oracle.selected(flt, revision)
        if dict(have) == want:
            return []
        missing = sorted(want.keys() - have.keys())
        extra = sorted(have.keys() - want.keys())
        stale = sorted(k for k in want.keys() & have.keys() if want[k] != have[k])
        return self._report(
            [
                Violation(
                    Guarantee.RELIABLE,
                    name,
                    f"state at {revision} differs from etcd: missing {missing[:5]}, "
                    f"extra {extra[:5]}, other rv {stale[:5]}",
                )
            ]
        )


def _brief(events: list[tuple[str, str, int]]) -> str:
    if len(events) <= 4:
        return str(events)
    return f"{len(events)} events {events[:2]} ... {events[-2:]}"


def summarize(violations: Iterable[Violation]) -> dict[str, int]:
    """Violations counted by guarantee."""
    return dict(Counter(str(v.guarantee) for v in violations))


@dataclass
class Tally:
    """What a run of fault scenarios did: faults injected by kind, and what the validators
    examined (added with :meth:`add`)."""

    faults: Counter[str] = field(default_factory=Counter)
    events_checked: int = 0
    sessions_checked: int = 0
    violations: int = 0

    def fault(self, kind: str) -> None:
        self.faults[kind] += 1

    def add(self, validator: WatchValidator) -> None:
        self.events_checked += validator.events_checked
        self.sessions_checked += validator.sessions_checked
        self.violations += len(validator.violations)

    def line(self) -> str:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(self.faults.items()))
        return (
            f"{sum(self.faults.values())} faults injected ({kinds or 'none'}); "
            f"{self.events_checked} watch events checked in {self.sessions_checked} sessions; "
            f"{self.violations} violations"
        )


# -- checking as a run goes -----------------------------------------------------------------


@dataclass
class Chain:
    """One watcher's sessions as :class:`RunningChecks` sees them: the last session checked,
    the highest rv the watcher saw before it, and the last checked session that had events
    (what a run re-watches from at its end)."""

    last: WatchSession | None = None
    seen_before: int = 0
    with_events: WatchSession | None = None


@dataclass(frozen=True)
class SessionCheck:
    """A session that ended. ``ceiling``: etcd's revision read after it ended; ``hold``: the
    revision held for it (:meth:`RunningChecks.hold`), released once checked; ``chain``: its
    watcher's, None for a one-off watch (a probe)."""

    session: WatchSession
    ceiling: int
    hold: int
    chain: Chain | None = None


@dataclass(frozen=True)
class StateCheck:
    """A client's view ``items`` (key -> rv) of what ``flt`` selects at ``rv``."""

    name: str
    flt: WatchFilter
    rv: int
    items: dict[str, int]
    hold: int


class RunningChecks:
    """Checks sessions and states while a run goes on, against a recorder's oracle, for runs
    too long to keep every session to the end.

    Callers :meth:`submit` what ended; :meth:`run` checks each once the oracle has recorded
    up to it (sessions: ``check`` with the ceiling, and ``check_chain`` link by link through
    the watcher's :class:`Chain`). Every revision something still needs is held (a
    watcher's open session, a queued check, a probe: :meth:`hold` before the revision can
    be passed, :meth:`release` after), and :meth:`forget` trims the oracle to the older of
    the oldest hold and the revision ``retention`` seconds ago (so a probe still finds old
    rvs to start from). A check that cannot run (the recording stopped, a history too
    short) is a harness failure, in ``failures``."""

    def __init__(self, recorder: OracleRecorder, retention: float) -> None:
        self.recorder = recorder
        self.oracle = recorder.oracle
        self.validator = WatchValidator(self.oracle)
        self.retention = retention
        self.queue: asyncio.Queue[SessionCheck | StateCheck] = asyncio.Queue()
        self.holds: Counter[int] = Counter()
        self.failures: list[str] = []
        #: Sessions of chains checked, and how many of them ended by 410.
        self.sessions = 0
        self.expired_sessions = 0
        self.forgotten_through = 0
        self._marks: deque[tuple[float, int]] = deque()

    def hold(self, revision: int) -> int:
        self.holds[revision] += 1
        return revision

    def release(self, revision: int) -> None:
        self.holds[revision] -= 1
        if self.holds[revision] <= 0:
            del self.holds[revision]

    def submit(self, check: SessionCheck | StateCheck) -> None:
        self.queue.put_nowait(check)

    async def run(self) -> None:
        """Check what is submitted, until cancelled (``queue.join()`` waits for the rest)."""
        while True:
            check = await self.queue.get()
            try:
                await self._check(check)
            except (RecordingLostError, HistoryTooShortError, TimeoutError) as error:
                self.failures.append(f"{type(error).__name__}: {error}")
            finally:
                self.release(check.hold)
                self.queue.task_done()

    async def _check(self, check: SessionCheck | StateCheck) -> None:
        if isinstance(check, StateCheck):
            await self.recorder.wait_for(check.rv)
            self.validator.check_state(check.name, check.flt, check.rv, check.items)
            return
        session, chain = check.session, check.chain
        # A cut session's last events lie past what it vouches for; they are checked too.
        await self.recorder.wait_for(min(max(session.covered, session.last_rv), check.ceiling))
        self.validator.check(session, ceiling=check.ceiling)
        if chain is None:
            return
        self.sessions += 1
        self.expired_sessions += session.end is End.EXPIRED
        if chain.last is not None:
            self.validator.check_chain([chain.last, session], seen=chain.seen_before)
            chain.seen_before = max(chain.seen_before, chain.last.last_rv)
        chain.last = session
        if session.changes:
            chain.with_events = session

    def trim(self) -> int:
        """Forget what nothing needs (class note) now; returns the revision forgotten
        through, 0 when nothing was."""
        now = time.monotonic()
        self._marks.append((now, self.oracle.last))
        horizon = self.oracle.first - 1
        while self._marks and self._marks[0][0] <= now - self.retention:
            horizon = self._marks.popleft()[1]
        through = min(min(self.holds, default=self.oracle.last), horizon)
        if through < self.oracle.first:
            return 0
        self.oracle.forget(through)
        self.forgotten_through = through
        return through

    async def forget(self, every: float = 10.0) -> None:
        """:meth:`trim` every ``every`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(every)
            self.trim()
