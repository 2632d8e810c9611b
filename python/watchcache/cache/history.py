"""The watch cache's event history: the recent events a watch may resume from.

Design note
-----------
:class:`EventHistory` keeps the newest events in resourceVersion order, as Kubernetes'
``watchCacheHistory`` does (docs/semantics.md §5.3, §5.4), and answers two questions: "may a watch
start at rv N?" and "which events follow rv N?". A watch older than what is kept gets
``410 Expired: too old resource version: N (M)``.

Invariants (checked by :meth:`EventHistory.check_invariants`):

* ``lower_bound <= capacity <= upper_bound`` and ``0 <= len(history) <= capacity``;
* buffered resourceVersions never decrease, and all exceed the last relist's rv (several
  events share an rv when one etcd transaction changed several keys);
* ``evicted since relist`` implies the buffer is not empty (an eviction is always followed
  by the insertion that caused it, and only a relist empties the buffer);
* storage: evicted slots hold no event (so evicted objects are freed at once), and the dead
  prefix is never longer than the live part (memory is at most twice the live references).

Sizing, per appended event, before inserting it (Kubernetes' rule, applied verbatim):
the buffer is *full* when it holds ``capacity`` events; if full and the oldest event is
younger than the window, capacity doubles (up to ``upper_bound``); else if full and the
oldest of the newest quarter is older than the window, capacity halves (down to
``lower_bound``), dropping the oldest events; then, if still full, the oldest event is
evicted. "Age" is the new event's record time minus the stored event's record time
(``Event.record_time``, or the history's clock when an event carries 0); record times are
not required to increase, only resourceVersions must not go back. So a busy resource
keeps at least a window's worth of events (bounded by ``upper_bound``) and a quiet one
gives memory back, without flapping: growth looks at the whole buffer, shrinking only at the
newest quarter. Capacity is logical; nothing is reallocated when it changes.

Which rv a watch may start from: after a relist at L, watches from L on are served until the
first eviction (Kubernetes issue #68065: a fresh cache with nothing buffered must still
accept the list's rv); after that, or when there was never a relist, from the first
buffered rv minus one — or the first buffered rv itself when an eviction split the events of
that rv (a watch from just below it would miss the evicted ones).

Structure: four parallel Python lists (resourceVersions, record times, events, and what each
event's key held before it) plus a head offset; the live part is ``[head:]``. ``append`` is
four ``list.append`` calls; eviction clears the slot and advances ``head``; when the dead
prefix reaches the live length it is deleted in one go (O(live), once per ``live``
evictions: amortized O(1)). Why not a ring of ``capacity`` slots as in Go: the list keeps
the resourceVersions contiguous and sorted, so ``bisect`` with ``lo=head`` finds a watch's
start in O(log n) with no wrap-around, and capacity changes move nothing. A
``collections.deque`` has no O(1) indexing to search in.

Costs: ``append`` O(1) amortized, a few hundred nanoseconds whether the buffer is full and
evicting or not, and alike at capacity 100 or 102,400 (reproduce, full at 100::

    python -m timeit -n 1000000 -s "from watchcache.cache.history import EventHistory; \
      from watchcache.cache.event import Event, EventType; from watchcache import Item; \
      it = Item('/registry/pods/a', b'{}', 1); h = EventHistory(1e9, lower_bound=100, \
      upper_bound=100); evs = iter([Event(EventType.MODIFIED, it, None, r) \
      for r in range(2, 6_000_002)])" "h.append(next(evs))"

); a shrink drops many events at once, O(dropped). ``events_after`` O(log n + k); the
properties O(1); ``check_invariants`` O(n).

Callers and ownership: the WatchCache owns one EventHistory per resource and calls every
method under its own lock: this class is not thread-safe. Results (lists of shared,
immutable :class:`~watchcache.cache.event.Event` objects) are copies the caller may keep.
"""

from __future__ import annotations

import bisect
import itertools
import math
import time
from collections.abc import Callable, Iterator
from typing import Final, cast

from watchcache._core import Item
from watchcache.cache.event import Event
from watchcache.wire.errors import ExpiredError, InternalError

#: Kubernetes' ``DefaultEventFreshDuration``: how long events are meant to stay watchable.
DEFAULT_WINDOW_SECONDS: Final = 75.0
#: Kubernetes' ``DefaultLowerBoundCapacity``: the starting and smallest capacity.
LOWER_BOUND_CAPACITY: Final = 100
#: Kubernetes' ``DefaultUpperBoundCapacity`` for the default window (100 · 1024).
DEFAULT_UPPER_BOUND_CAPACITY: Final = 102_400
#: Largest doubling of the upper bound: keeps it within an int32 (102 400 << 14 < 2**31).
MAX_UPPER_BOUND_EXPONENT: Final = 14
#: Bounds of the suggested per-watcher buffer (Kubernetes, resource without a trigger index).
MIN_WATCH_BUFFER_SIZE: Final = 10
MAX_WATCH_BUFFER_SIZE: Final = 100

UNINITIALIZED_MESSAGE: Final = "watch cache isn't correctly initialized"


def capacity_upper_bound(window_seconds: float) -> int:
    """The largest capacity for a history window: 102 400 for a window of at most 75 s,
    else ``102 400 << ceil(log2(window / 75))`` with the exponent capped at 14 (so an infinite
    window gives 1 677 721 600). Computed by doubling, exactly, with no floating-point log.
    Cost O(1). Raises ValueError unless ``window_seconds > 0`` (NaN included)."""
    if not window_seconds > 0:
        raise ValueError(f"history window must be > 0 seconds, got {window_seconds}")
    exponent = 0
    span = DEFAULT_WINDOW_SECONDS
    while span < window_seconds and exponent < MAX_UPPER_BOUND_EXPONENT:
        span *= 2
        exponent += 1
    return DEFAULT_UPPER_BOUND_CAPACITY << exponent


def watch_buffer_size(capacity: int, window_seconds: float) -> int:
    """Kubernetes' suggested per-watcher channel size: about one second of history,
    ``ceil(capacity / window_seconds)``, clamped to [10, 100]. Cost O(1).
    Raises ValueError unless ``window_seconds > 0`` and ``capacity >= 0``."""
    if not window_seconds > 0:
        raise ValueError(f"history window must be > 0 seconds, got {window_seconds}")
    if capacity < 0:
        raise ValueError(f"capacity must be >= 0, got {capacity}")
    size = math.ceil(capacity / window_seconds)
    return min(max(size, MIN_WATCH_BUFFER_SIZE), MAX_WATCH_BUFFER_SIZE)


class EventHistory:
    """The recent events of one resource, oldest first (see the module note).

    Not thread-safe: the owner serializes every call. All errors leave the history unchanged.
    """

    __slots__ = (
        "_capacity",
        "_clock",
        "_decreases",
        "_events",
        "_evicted_rv",
        "_evicted_since_relist",
        "_head",
        "_increases",
        "_last_rv",
        "_list_rv",
        "_lower",
        "_previous",
        "_rvs",
        "_times",
        "_upper",
        "_window",
    )

    def __init__(
        self,
        window_seconds: float = DEFAULT_WINDOW_SECONDS,
        *,
        lower_bound: int = LOWER_BOUND_CAPACITY,
        upper_bound: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """An empty, never-listed history with ``capacity == lower_bound``.

        ``window_seconds``: how long events should stay watchable (Kubernetes refuses windows
        under 75 s; smaller ones are accepted here for tests). ``upper_bound`` defaults to
        :func:`capacity_upper_bound` of the window. ``clock`` stamps events whose
        ``record_time`` is 0. Raises ValueError for a window that is not > 0, a lower bound
        < 1 or an upper bound < lower bound."""
        if not window_seconds > 0:
            raise ValueError(f"history window must be > 0 seconds, got {window_seconds}")
        if lower_bound < 1:
            raise ValueError(f"history lower bound must be >= 1, got {lower_bound}")
        upper = capacity_upper_bound(window_seconds) if upper_bound is None else upper_bound
        if upper < lower_bound:
            raise ValueError(f"history upper bound {upper} is below the lower bound {lower_bound}")
        self._window = float(window_seconds)
        self._lower = lower_bound
        self._upper = upper
        self._capacity = lower_bound
        self._clock = clock
        # Parallel lists; the live part is [_head:]. Evicted slots of _events hold None.
        # _previous[i] is what the key held before _events[i] (None for a creation).
        self._rvs: list[int] = []
        self._times: list[float] = []
        self._events: list[Event | None] = []
        self._previous: list[Item | None] = []
        self._head = 0
        self._list_rv = 0
        # The newest rv seen: the last event's, or the relist's when nothing followed it.
        self._last_rv = 0
        self._evicted_since_relist = False
        # rv of the newest evicted event (0 when none since the relist).
        self._evicted_rv = 0
        self._increases = 0
        self._decreases = 0

    # ---- writes ------------------------------------------------------------------------------

    def append(self, event: Event, previous: Item | None = None) -> int:
        """Add the newest event, first resizing and evicting as the module note says. An
        event whose ``record_time`` is 0 is aged by the clock's reading now (kept beside it;
        the event itself is not changed). ``previous`` is what the key held before the
        event, as the cache found it (None for a creation), kept beside the event for
        watches that replay it: a new Event naming it would cost more than the rest of
        this call.

        Returns how many events this call evicted (0 usually, 1 when full, more on a
        shrink). Cost: O(1) amortized; a shrink is O(events dropped). Raises ValueError
        (history unchanged) unless ``event.resource_version`` exceeds the last relist's rv and
        is not below any buffered rv."""
        rv = event.resource_version
        if rv <= self._last_rv and not (rv == self._last_rv and rv > self._list_rv):
            raise ValueError(
                f"event resourceVersion {rv} is not newer than the history's {self._last_rv}"
            )
        now = event.record_time or self._clock()
        evicted = 0
        if len(self._rvs) - self._head >= self._capacity:
            evicted = self._make_room(now)
        self._rvs.append(rv)
        self._times.append(now)
        self._events.append(event)
        self._previous.append(previous)
        self._last_rv = rv
        return evicted

    def _make_room(self, now: float) -> int:
        """The full-buffer branch of :meth:`append`: grow, or shrink, then evict if still
        full. Returns the number of events evicted."""
        capacity = self._capacity
        times = self._times
        head = self._head
        window = self._window
        if now - times[head] < window:
            # Everything buffered is fresh: keep it all, if the upper bound allows. At the
            # bound a fresh buffer is never shrunk, whatever its newest quarter says: it just
            # evicts its oldest event (Kubernetes returns from this branch too).
            if capacity < self._upper:
                self._capacity = min(2 * capacity, self._upper)
                self._increases += 1
                return 0
        elif capacity > self._lower:
            # The oldest of the newest quarter. With capacity < 4 the quarter is empty and Go's
            # ring index (end - 0) % capacity lands on the oldest event: offset 0, as here.
            # (Testing the lower bound first only skips work: at the bound halving is a no-op.)
            quarter_start = head + (capacity - capacity // 4) % capacity
            if now - times[quarter_start] > window:
                smaller = max(capacity // 2, self._lower)
                self._capacity = smaller
                self._decreases += 1
                # Keep the newest `smaller` events, then drop one more: the buffer is still
                # full, and the event being inserted takes that slot.
                dropped = capacity - smaller + 1
                self._evict(dropped)
                return dropped
        self._evict(1)
        return 1

    def _evict(self, count: int) -> None:
        """Drop the ``count`` oldest events (``count`` <= len); compact the dead prefix once it
        is as long as the live part."""
        head = self._head
        end = head + count
        events = self._events
        previous = self._previous
        if count == 1:
            events[head] = None
            previous[head] = None
        else:
            events[head:end] = [None] * count
            previous[head:end] = [None] * count
        self._evicted_since_relist = True
        self._evicted_rv = self._rvs[end - 1]
        if 2 * end >= len(events):
            del events[:end]
            del previous[:end]
            del self._rvs[:end]
            del self._times[:end]
            self._head = 0
        else:
            self._head = end

    def reset(self, list_resource_version: int) -> None:
        """A relist at ``list_resource_version``: drop every event, remember the list rv
        (watches from it on are served until the next eviction), clear "evicted since
        relist". Capacity and the resize counters are kept. The next event must be newer
        than the list rv. Cost O(n) to release the events. Raises ValueError unless
        ``list_resource_version > 0``."""
        if list_resource_version <= 0:
            raise ValueError(f"list resourceVersion must be > 0, got {list_resource_version}")
        self._rvs.clear()
        self._times.clear()
        self._events.clear()
        self._previous.clear()
        self._head = 0
        self._list_rv = list_resource_version
        self._last_rv = list_resource_version
        self._evicted_since_relist = False
        self._evicted_rv = 0

    # ---- reads -------------------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        """Current logical capacity (starts at the lower bound). O(1)."""
        return self._capacity

    @property
    def window_seconds(self) -> float:
        """The history window: how long events should stay watchable. O(1)."""
        return self._window

    @property
    def lower_bound(self) -> int:
        """Capacity never shrinks below this (and starts here). O(1)."""
        return self._lower

    @property
    def upper_bound(self) -> int:
        """Capacity never grows above this. O(1)."""
        return self._upper

    @property
    def increases(self) -> int:
        """How many times capacity grew (for metrics). O(1)."""
        return self._increases

    @property
    def decreases(self) -> int:
        """How many times capacity shrank (for metrics). O(1)."""
        return self._decreases

    def __len__(self) -> int:
        """Number of buffered events. O(1)."""
        return len(self._rvs) - self._head

    def __iter__(self) -> Iterator[Event]:
        """The buffered events, oldest first, as of the call (a copy is taken: O(n))."""
        return iter(cast("list[Event]", self._events[self._head :]))

    @property
    def list_resource_version(self) -> int:
        """The rv of the last relist; 0 before the first :meth:`reset`. O(1)."""
        return self._list_rv

    @property
    def oldest_event_resource_version(self) -> int | None:
        """rv of the oldest buffered event, None when empty. O(1)."""
        return self._rvs[self._head] if len(self._rvs) > self._head else None

    @property
    def newest_resource_version(self) -> int | None:
        """rv of the newest buffered event, None when empty (even after a relist). O(1)."""
        return self._rvs[-1] if len(self._rvs) > self._head else None

    @property
    def oldest_watchable(self) -> int:
        """The smallest rv a watch may start from (Kubernetes' ``oldest - 1``, the second
        number of the 410 message): the list rv after a relist with no eviction since, else
        the first buffered rv minus one (itself when evicted events shared it). O(1). Raises
        InternalError
        (``watch cache isn't correctly initialized``) when never listed and empty."""
        if self._list_rv > 0 and not self._evicted_since_relist:
            return self._list_rv
        if len(self._rvs) > self._head:
            first = self._rvs[self._head]
            return first - 1 if self._evicted_rv < first else first
        raise InternalError(UNINITIALIZED_MESSAGE)

    def can_serve(self, resource_version: int) -> bool:
        """Whether :meth:`events_after` would accept ``resource_version`` (False when never
        listed and empty). O(1). No errors."""
        if self._list_rv > 0 and not self._evicted_since_relist:
            return resource_version >= self._list_rv
        if len(self._rvs) > self._head:
            return resource_version >= self.oldest_watchable
        return False

    def events_after(self, resource_version: int) -> list[Event]:
        """Buffered events with rv > ``resource_version``, oldest first (a new list). An rv
        newer than every event gives ``[]``. O(log n + k). Raises
        ``ExpiredError.too_old_resource_version(rv, oldest_watchable)`` (410) when
        ``resource_version < oldest_watchable``, InternalError when never listed and empty."""
        return cast("list[Event]", self._events[self._start_after(resource_version) :])

    def changes_after(self, resource_version: int) -> list[tuple[Event, Item | None]]:
        """:meth:`events_after` with each event's ``previous`` (see :meth:`append`), which a
        replaying watch needs to judge selector changes. Same cost and errors."""
        start = self._start_after(resource_version)
        events = cast("list[Event]", self._events[start:])
        return list(zip(events, self._previous[start:], strict=True))

    def _start_after(self, resource_version: int) -> int:
        oldest = self.oldest_watchable
        if resource_version < oldest:
            raise ExpiredError.too_old_resource_version(resource_version, oldest)
        return bisect.bisect_right(self._rvs, resource_version, self._head)

    # ---- checking ----------------------------------------------------------------------------

    def check_invariants(self) -> None:
        """Verify every invariant of the module note; O(n). Raises AssertionError naming the
        first broken one."""

        def require(condition: bool, invariant: str) -> None:
            if not condition:
                raise AssertionError(f"EventHistory invariant broken: {invariant}")

        size = len(self._rvs) - self._head
        require(
            self._lower <= self._capacity <= self._upper,
            f"lower_bound <= capacity <= upper_bound ({self._lower}, {self._capacity}, "
            f"{self._upper})",
        )
        require(0 <= size <= self._capacity, f"0 <= len <= capacity ({size}, {self._capacity})")
        require(
            len(self._rvs) == len(self._times) == len(self._events) == len(self._previous),
            "parallel lists have one entry per slot",
        )
        require(
            self._head == 0 or 2 * self._head < len(self._rvs),
            f"dead prefix shorter than the live part (head {self._head}, slots {len(self._rvs)})",
        )
        require(
            all(e is None for e in self._events[: self._head])
            and all(p is None for p in self._previous[: self._head]),
            "evicted slots hold no event",
        )
        live_rvs = self._rvs[self._head :]
        live_events = self._events[self._head :]
        require(
            all(
                e is not None and e.resource_version == rv
                for e, rv in zip(live_events, live_rvs, strict=True)
            ),
            "each live slot holds its event and that event's rv",
        )
        require(
            all(a <= b for a, b in itertools.pairwise(live_rvs)),
            "buffered resourceVersions never decrease",
        )
        if live_rvs:
            require(live_rvs[0] > self._list_rv, "buffered events are newer than the relist")
            require(self._last_rv == live_rvs[-1], "last rv is the newest buffered rv")
        else:
            require(self._last_rv == self._list_rv, "with nothing buffered, last rv is the list rv")
            require(
                not self._evicted_since_relist, "an eviction since relist leaves events buffered"
            )
        require(self._list_rv >= 0, "list rv is >= 0")
        require(self._increases >= 0 and self._decreases >= 0, "resize counters are >= 0")

    def __repr__(self) -> str:
        return (
            f"EventHistory(len={len(self)}, capacity={self._capacity}, "
            f"oldest={self.oldest_event_resource_version}, "
            f"newest={self.newest_resource_version}, list_rv={self._list_rv})"
        )
