"""Behaviour of the event history (watchcache.cache.history): which watches it serves, the 410 it
answers for older ones, how its capacity follows the event rate, and its sizing helpers.

The fixed tests follow docs/semantics.md §5.3 / §5.4 (Kubernetes' TestEvents, TestMarker,
TestDynamicCache, TestCapacityUpperBound). A hypothesis state machine then runs random
appends (with random time steps, through record times or the clock), relists and queries
against a small list-based oracle, calling ``check_invariants()`` after every step.

Record times in these tests start well above 0: an event whose ``record_time`` is 0 is
stamped by the history's clock instead.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from watchcache._core import Item
from watchcache.cache.event import Event, EventType
from watchcache.cache.history import (
    DEFAULT_WINDOW_SECONDS,
    LOWER_BOUND_CAPACITY,
    EventHistory,
    capacity_upper_bound,
    watch_buffer_size,
)
from watchcache.wire.errors import ExpiredError, InternalError

BASE_TIME = 1_000.0


def pod_event(rv: int, record_time: float = 0.0) -> Event:
    item = Item(f"/registry/pods/ns/p{rv}", b"{}", rv)
    return Event(EventType.MODIFIED, item, None, rv, record_time)


class FakeClock:
    def __init__(self, now: float = BASE_TIME) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def rvs_of(history: EventHistory) -> list[int]:
    return [event.resource_version for event in history]


def append_all(history: EventHistory, events: Sequence[Event]) -> list[int]:
    """Append each event, check the invariants after each, return the eviction counts."""
    evicted = []
    for event in events:
        evicted.append(history.append(event))
        history.check_invariants()
    return evicted


# ---- which watches are served (§5.4) ------------------------------------------------------


def test_after_a_relist_a_watch_from_the_list_rv_is_served_and_an_older_one_is_too_old() -> None:
    history = EventHistory()
    history.reset(9)
    history.check_invariants()

    with pytest.raises(ExpiredError) as info:
        history.events_after(8)
    assert info.value.code == 410
    assert info.value.reason == "Expired"
    assert info.value.message == "too old resource version: 8 (9)"
    assert history.events_after(9) == []
    assert history.oldest_watchable == 9
    assert history.can_serve(9)
    assert not history.can_serve(8)


@pytest.mark.parametrize("relisted", [True, False], ids=["relisted", "never_listed"])
@pytest.mark.parametrize(
    ("resource_version", "expected"),
    [
        (0, "too old resource version: 0 (4)"),
        (3, "too old resource version: 3 (4)"),
        (4, [5, 6, 7, 8, 9]),
        (5, [6, 7, 8, 9]),
        (8, [9]),
        (9, []),
        (10, []),
    ],
)
def test_once_events_are_evicted_the_oldest_buffered_event_bounds_watches(
    relisted: bool, resource_version: int, expected: list[int] | str
) -> None:
    # A buffer of 5 holding 5..9; the relist's rv (if any) and events 2..4 were evicted.
    history = EventHistory(lower_bound=5, upper_bound=5, clock=FakeClock())
    if relisted:
        history.reset(1)
    append_all(history, [pod_event(rv) for rv in range(2, 10)])
    assert rvs_of(history) == [5, 6, 7, 8, 9]
    assert history.oldest_watchable == 4

    if isinstance(expected, str):
        assert not history.can_serve(resource_version)
        with pytest.raises(ExpiredError, match=rf"^{re.escape(expected)}$"):
            history.events_after(resource_version)
    else:
        assert history.can_serve(resource_version)
        assert [e.resource_version for e in history.events_after(resource_version)] == expected


def test_changes_after_pairs_each_event_with_the_previous_object_it_was_appended_with() -> None:
    # A buffer of 3 taking 6 events: evictions (and a compaction of the dead prefix) must
    # move the previous objects with their events.
    history = EventHistory(lower_bound=3, upper_bound=3, clock=FakeClock())
    history.reset(1)
    previous = {rv: Item(f"/registry/pods/ns/p{rv}", b"{}", rv - 1) for rv in range(3, 8)}
    for rv in range(2, 8):
        history.append(pod_event(rv), previous.get(rv))
        history.check_invariants()
    assert [(e.resource_version, p) for e, p in history.changes_after(4)] == [
        (5, previous[5]),
        (6, previous[6]),
        (7, previous[7]),
    ]
    assert [(e.resource_version, p) for e, p in history.changes_after(6)] == [(7, previous[7])]
    with pytest.raises(ExpiredError):
        history.changes_after(3)


def test_before_the_first_relist_an_empty_history_refuses_every_watch_as_uninitialized() -> None:
    history = EventHistory()
    history.check_invariants()
    assert history.list_resource_version == 0
    assert not history.can_serve(0)
    assert not history.can_serve(10**9)
    with pytest.raises(InternalError) as info:
        history.events_after(5)
    assert info.value.code == 500
    assert info.value.message == "watch cache isn't correctly initialized"
    with pytest.raises(InternalError):
        _ = history.oldest_watchable


def test_without_a_relist_events_are_served_from_the_first_buffered_rv_minus_one() -> None:
    history = EventHistory(clock=FakeClock())
    append_all(history, [pod_event(7), pod_event(8)])
    assert history.oldest_watchable == 6
    assert [e.resource_version for e in history.events_after(6)] == [7, 8]
    with pytest.raises(ExpiredError, match=r"^too old resource version: 5 \(6\)$"):
        history.events_after(5)


def test_relist_info_keeps_serving_from_the_list_rv_until_the_first_eviction() -> None:
    history = EventHistory(lower_bound=3, upper_bound=3, clock=FakeClock())
    history.reset(10)
    evicted = append_all(history, [pod_event(rv) for rv in (11, 12, 13)])
    assert evicted == [0, 0, 0]
    assert history.oldest_watchable == 10
    assert [e.resource_version for e in history.events_after(10)] == [11, 12, 13]

    assert history.append(pod_event(14)) == 1
    history.check_invariants()
    assert history.oldest_watchable == 11
    with pytest.raises(ExpiredError, match=r"^too old resource version: 10 \(11\)$"):
        history.events_after(10)


@pytest.mark.parametrize(
    ("resource_version", "expected"),
    [
        (5, [10, 20, 30]),
        (9, [10, 20, 30]),
        (10, [20, 30]),
        (15, [20, 30]),
        (29, [30]),
        (30, []),
        (31, []),
        (10**12, []),
    ],
)
def test_events_after_is_exclusive_and_an_rv_newer_than_everything_gives_no_events(
    resource_version: int, expected: list[int]
) -> None:
    history = EventHistory(clock=FakeClock())
    history.reset(5)
    append_all(history, [pod_event(rv) for rv in (10, 20, 30)])
    events = history.events_after(resource_version)
    assert [e.resource_version for e in events] == expected
    # The result is the caller's copy: later appends do not change it.
    history.append(pod_event(40))
    assert [e.resource_version for e in events] == expected


def test_events_after_returns_the_buffered_event_objects_in_order() -> None:
    history = EventHistory(clock=FakeClock())
    history.reset(1)
    events = [pod_event(rv) for rv in (2, 3, 4)]
    append_all(history, events)
    got = history.events_after(1)
    assert all(a is b for a, b in zip(got, events, strict=True))
    assert list(history) == events


# ---- eviction ------------------------------------------------------------------------------


def test_a_full_history_evicts_its_oldest_event_first() -> None:
    history = EventHistory(lower_bound=3, upper_bound=3, clock=FakeClock())
    evicted = append_all(history, [pod_event(rv) for rv in range(1, 8)])
    assert evicted == [0, 0, 0, 1, 1, 1, 1]
    assert rvs_of(history) == [5, 6, 7]
    assert len(history) == 3
    assert history.oldest_event_resource_version == 5
    assert history.newest_resource_version == 7
    assert history.increases == 0
    assert history.decreases == 0


def test_an_evicted_event_is_released_at_once() -> None:
    history = EventHistory(lower_bound=2, upper_bound=2, clock=FakeClock())
    item = Item("/registry/pods/ns/first", b'{"big":"payload"}', 1)
    base = sys.getrefcount(item)
    history.append(Event(EventType.ADDED, item, None, 1))
    assert sys.getrefcount(item) == base + 1
    history.append(pod_event(2))
    assert sys.getrefcount(item) == base + 1
    history.append(pod_event(3))
    assert sys.getrefcount(item) == base
    history.check_invariants()


def test_a_long_run_of_evictions_keeps_exactly_the_newest_capacity_events() -> None:
    history = EventHistory(lower_bound=7, upper_bound=7, clock=FakeClock())
    for rv in range(1, 1_000):
        history.append(pod_event(rv))
        if rv % 97 == 0:
            history.check_invariants()
    history.check_invariants()
    assert rvs_of(history) == list(range(993, 1_000))


# ---- resourceVersion order -----------------------------------------------------------------


@pytest.mark.parametrize("bad_rv", [4, 1], ids=["older", "much_older"])
def test_append_rejects_an_older_rv_and_leaves_the_history_unchanged(
    bad_rv: int,
) -> None:
    history = EventHistory(clock=FakeClock())
    history.append(pod_event(5))
    with pytest.raises(ValueError, match="not newer"):
        history.append(pod_event(bad_rv))
    history.check_invariants()
    assert rvs_of(history) == [5]


def shared_rv_event(rv: int, name: str) -> Event:
    item = Item(f"/registry/pods/ns/{name}", b"{}", rv)
    return Event(EventType.MODIFIED, item, None, rv)


def test_events_of_one_transaction_share_an_rv_and_are_served_together() -> None:
    history = EventHistory(clock=FakeClock())
    history.reset(4)
    append_all(history, [pod_event(5), shared_rv_event(6, "a"), shared_rv_event(6, "b")])
    history.check_invariants()
    assert rvs_of(history) == [5, 6, 6]
    assert [e.key for e in history.events_after(5)] == [
        "/registry/pods/ns/a",
        "/registry/pods/ns/b",
    ]
    assert history.events_after(6) == []
    with pytest.raises(ValueError, match="not newer"):
        history.append(pod_event(5))


def test_an_eviction_that_splits_a_transaction_makes_its_rv_the_oldest_watchable() -> None:
    # Watching from 5 would need both events at 6; one is gone, so 5 is too old now.
    history = EventHistory(lower_bound=2, upper_bound=2, clock=FakeClock())
    append_all(history, [shared_rv_event(6, "a"), shared_rv_event(6, "b"), pod_event(7)])
    history.check_invariants()
    assert rvs_of(history) == [6, 7]
    assert history.oldest_watchable == 6
    assert not history.can_serve(5)
    with pytest.raises(ExpiredError, match=r"too old resource version: 5 \(6\)"):
        history.events_after(5)
    assert [e.resource_version for e in history.events_after(6)] == [7]


def test_append_rejects_an_rv_not_newer_than_the_relist() -> None:
    history = EventHistory(clock=FakeClock())
    history.reset(9)
    for bad_rv in (9, 3):
        with pytest.raises(ValueError, match="not newer"):
            history.append(pod_event(bad_rv))
    assert history.append(pod_event(10)) == 0
    history.check_invariants()


# ---- relist --------------------------------------------------------------------------------


def test_reset_drops_every_event_and_keeps_capacity_and_counters() -> None:
    clock = FakeClock()
    history = EventHistory(lower_bound=2, upper_bound=4, clock=clock)
    append_all(history, [pod_event(rv) for rv in range(1, 7)])  # grows 2 -> 4, then evicts
    assert history.capacity == 4
    assert history.increases == 1
    assert history.oldest_watchable == 2

    history.reset(20)
    history.check_invariants()
    assert len(history) == 0
    assert list(history) == []
    assert history.list_resource_version == 20
    assert history.capacity == 4
    assert history.increases == 1
    assert history.oldest_event_resource_version is None
    assert history.newest_resource_version is None
    # "Evicted since relist" is cleared: the list rv is servable again.
    assert history.oldest_watchable == 20
    assert history.events_after(20) == []
    assert history.append(pod_event(21)) == 0
    assert [e.resource_version for e in history.events_after(20)] == [21]


@pytest.mark.parametrize("list_rv", [0, -1])
def test_reset_rejects_a_list_rv_that_is_not_positive(list_rv: int) -> None:
    history = EventHistory()
    with pytest.raises(ValueError, match="must be > 0"):
        history.reset(list_rv)
    assert history.list_resource_version == 0
    history.check_invariants()


# ---- capacity follows the event rate (§5.3) ------------------------------------------------


def test_capacity_doubles_while_events_come_fast_up_to_the_default_upper_bound() -> None:
    clock = FakeClock()
    history = EventHistory(clock=clock)
    assert history.capacity == LOWER_BOUND_CAPACITY
    assert history.upper_bound == 102_400
    capacities = [history.capacity]
    evicted_total = 0
    for rv in range(1, 102_400 + 51):
        clock.now += 0.0001  # 10 000 events per second: the whole buffer is always fresh
        evicted_total += history.append(pod_event(rv))
        if history.capacity != capacities[-1]:
            capacities.append(history.capacity)
    history.check_invariants()
    assert capacities == [100 * 2**k for k in range(11)]  # 100, 200, ..., 102 400
    assert history.increases == 10
    assert history.decreases == 0
    assert evicted_total == 50
    assert len(history) == 102_400


@pytest.mark.parametrize(
    ("lower", "upper", "expected"),
    [
        (100, 800, [100, 200, 400, 800]),
        (100, 150, [100, 150]),
        (100, 100, [100]),
        (3, 20, [3, 6, 12, 20]),
    ],
)
def test_growth_stops_at_the_upper_bound_and_then_evicts(
    lower: int, upper: int, expected: list[int]
) -> None:
    clock = FakeClock()
    history = EventHistory(10.0, lower_bound=lower, upper_bound=upper, clock=clock)
    capacities = [history.capacity]
    evictions = []
    for rv in range(1, 2 * upper + 1):
        clock.now += 0.001
        evictions.append(history.append(pod_event(rv)))
        history.check_invariants()
        if history.capacity != capacities[-1]:
            capacities.append(history.capacity)
    assert capacities == expected
    assert history.increases == len(expected) - 1
    assert sum(evictions) == upper  # nothing evicted until capacity reached the bound
    assert evictions[:upper] == [0] * upper
    assert rvs_of(history) == list(range(upper + 1, 2 * upper + 1))


@dataclass(frozen=True)
class ResizeCase:
    """A full history of ``capacity`` events ``interval`` seconds apart, then one more event
    ``interval`` after the last: what capacity and which events remain."""

    capacity: int
    lower: int
    upper: int
    interval: float
    expect_capacity: int
    expect_evicted: int


W = DEFAULT_WINDOW_SECONDS
RESIZE_CASES = {
    # Oldest event 8·W/9 old: fresh, so the buffer grows and nothing is evicted.
    "fresh_buffer_grows": ResizeCase(8, 4, 16, W / 9, 16, 0),
    "fresh_buffer_grows_to_the_upper_bound": ResizeCase(8, 4, 10, W / 9, 10, 0),
    "fresh_buffer_at_the_upper_bound_evicts_one": ResizeCase(8, 4, 8, W / 9, 8, 1),
    # Oldest exactly W old (not fresh); the newest quarter spans W/4: neither rule applies.
    "oldest_exactly_window_old_keeps_capacity": ResizeCase(8, 4, 16, W / 8, 8, 1),
    # Newest quarter (2 of 8 events) spans 2·(W/2 + 1) > W: halve, keep the newest 4.
    "stale_newest_quarter_halves": ResizeCase(8, 4, 16, W / 2 + 1, 4, 5),
    "stale_newest_quarter_halves_down_to_a_lower_bound": ResizeCase(8, 2, 16, W / 2 + 1, 4, 5),
    "halving_stops_at_the_lower_bound": ResizeCase(8, 5, 8, W / 2 + 1, 5, 4),
    # Newest quarter spans exactly W: not more than the window, no shrink.
    "newest_quarter_exactly_window_keeps_capacity": ResizeCase(8, 4, 16, W / 2, 8, 1),
    # Capacity 5: the newest quarter is the newest event alone (5 // 4 == 1), compared with
    # the event being inserted.
    "capacity_not_a_multiple_of_four_halves": ResizeCase(5, 2, 5, W + 1, 2, 4),
    "capacity_not_a_multiple_of_four_keeps_capacity": ResizeCase(5, 2, 5, W / 4, 5, 1),
    # Capacity 2: the quarter is empty and the oldest event stands in for it.
    "tiny_capacity_compares_with_the_oldest_event": ResizeCase(2, 1, 2, W / 2 + 1, 1, 2),
    "at_the_lower_bound_a_stale_buffer_just_evicts": ResizeCase(4, 4, 16, 2 * W, 4, 1),
}


def history_at_capacity(
    capacity: int, lower: int, upper: int, window: float = W
) -> tuple[EventHistory, int]:
    """A relisted, empty history whose capacity is ``capacity``: grown by fast events, then
    relisted, which keeps capacity. Returns it and the next free rv."""
    clock = FakeClock()
    history = EventHistory(window, lower_bound=lower, upper_bound=upper, clock=clock)
    rv = 1
    while history.capacity < capacity:
        clock.now += 1e-6
        history.append(pod_event(rv))
        rv += 1
    assert history.capacity == capacity, "capacity not reachable by doubling from these bounds"
    history.reset(rv)
    return history, rv + 1


@pytest.mark.parametrize("case", RESIZE_CASES.values(), ids=RESIZE_CASES.keys())
def test_a_full_history_resizes_by_the_age_of_its_oldest_event_and_newest_quarter(
    case: ResizeCase,
) -> None:
    history, rv = history_at_capacity(case.capacity, case.lower, case.upper)
    increases, decreases = history.increases, history.decreases
    loaded = [pod_event(rv + i, BASE_TIME + i * case.interval) for i in range(case.capacity)]
    assert append_all(history, loaded) == [0] * case.capacity
    assert history.capacity == case.capacity

    newest = pod_event(rv + case.capacity, BASE_TIME + case.capacity * case.interval)
    assert history.append(newest) == case.expect_evicted
    history.check_invariants()
    assert history.capacity == case.expect_capacity
    all_rvs = [e.resource_version for e in [*loaded, newest]]
    assert rvs_of(history) == all_rvs[case.expect_evicted :]
    grew = case.expect_capacity > case.capacity
    shrank = case.expect_capacity < case.capacity
    assert history.increases == increases + grew
    assert history.decreases == decreases + shrank


def test_a_quiet_resource_halves_capacity_step_by_step_never_below_the_lower_bound() -> None:
    history = EventHistory(10.0, lower_bound=4, upper_bound=64, clock=FakeClock())
    fast = [pod_event(rv, BASE_TIME + rv * 0.01) for rv in range(1, 65)]
    append_all(history, fast)
    assert history.capacity == 64
    assert history.increases == 4  # 4 -> 8 -> 16 -> 32 -> 64

    capacities, evictions = [], []
    for step in range(1, 7):
        evictions.append(history.append(pod_event(100 + step, BASE_TIME + 100.0 * step)))
        history.check_invariants()
        capacities.append(history.capacity)
    assert capacities == [32, 16, 8, 4, 4, 4]
    assert evictions == [33, 17, 9, 5, 1, 1]
    assert history.decreases == 4
    assert rvs_of(history) == [103, 104, 105, 106]


def test_an_event_without_a_record_time_is_stamped_by_the_clock() -> None:
    clock = FakeClock()
    history = EventHistory(10.0, lower_bound=2, upper_bound=8, clock=clock)
    # Clock-stamped events 1 s apart: the buffer of 2 is fresh, so it grows.
    for rv in (1, 2, 3):
        clock.now += 1.0
        history.append(pod_event(rv))
    assert history.capacity == 4
    # Record times win over the (now frozen) clock: 100 s apart, so the full buffer's newest
    # quarter is stale and it halves instead of growing.
    history.reset(10)
    for i, rv in enumerate((11, 12, 13, 14, 15)):
        history.append(pod_event(rv, BASE_TIME + 100.0 * i))
    history.check_invariants()
    assert history.capacity == 2
    assert history.decreases == 1
    assert rvs_of(history) == [14, 15]


# ---- construction and sizing helpers -------------------------------------------------------


def test_defaults_follow_kubernetes() -> None:
    history = EventHistory()
    assert history.window_seconds == 75.0
    assert history.capacity == 100
    assert history.lower_bound == 100
    assert history.upper_bound == 102_400
    assert EventHistory(300.0).upper_bound == 409_600
    assert EventHistory(5.0).upper_bound == 102_400


@pytest.mark.parametrize(
    ("window", "lower", "upper", "message"),
    [
        (0.0, 100, None, "window"),
        (-1.0, 100, None, "window"),
        (math.nan, 100, None, "window"),
        (75.0, 0, None, "lower bound"),
        (75.0, 10, 9, "upper bound"),
        (75.0, 200_000, None, "upper bound"),
    ],
)
def test_constructor_rejects_bad_windows_and_bounds(
    window: float, lower: int, upper: int | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        EventHistory(window, lower_bound=lower, upper_bound=upper)


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        (75.0, 102_400),
        (45.0, 102_400),
        (1e-9, 102_400),
        (75.000001, 204_800),
        (1.5 * 75, 204_800),
        (2 * 75, 204_800),
        (2 * 75 + 1e-9, 409_600),
        (3 * 75, 409_600),
        (4 * 75, 409_600),
        (8 * 75, 819_200),
        (75 * 2**14, 102_400 << 14),
        (75 * 2**20, 102_400 << 14),
        (math.inf, 1_677_721_600),
    ],
)
def test_capacity_upper_bound_scales_with_the_window_by_powers_of_two(
    window: float, expected: int
) -> None:
    assert capacity_upper_bound(window) == expected


@pytest.mark.parametrize("window", [0.0, -75.0, math.nan])
def test_capacity_upper_bound_rejects_a_window_that_is_not_positive(window: float) -> None:
    with pytest.raises(ValueError, match="window"):
        capacity_upper_bound(window)


@pytest.mark.parametrize(
    ("capacity", "window", "expected"),
    [
        (0, 75.0, 10),
        (100, 75.0, 10),
        (750, 75.0, 10),
        (751, 75.0, 11),
        (1_000, 75.0, 14),
        (7_425, 75.0, 99),
        (7_426, 75.0, 100),
        (102_400, 75.0, 100),
        (100, 1.0, 100),
        (50, 2.0, 25),
    ],
)
def test_watch_buffer_size_is_one_second_of_history_between_10_and_100(
    capacity: int, window: float, expected: int
) -> None:
    assert watch_buffer_size(capacity, window) == expected


def test_watch_buffer_size_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="window"):
        watch_buffer_size(100, 0.0)
    with pytest.raises(ValueError, match="capacity"):
        watch_buffer_size(-1, 75.0)


def test_iteration_is_a_snapshot_of_the_buffer() -> None:
    history = EventHistory(lower_bound=2, upper_bound=2, clock=FakeClock())
    append_all(history, [pod_event(1), pod_event(2)])
    seen = []
    for event in history:
        seen.append(event.resource_version)
        history.append(pod_event(event.resource_version + 10))
    assert seen == [1, 2]
    assert rvs_of(history) == [11, 12]


def test_check_invariants_names_the_broken_invariant() -> None:
    history = EventHistory(clock=FakeClock())
    append_all(history, [pod_event(1), pod_event(2)])
    history._rvs[-1] = 1  # corrupt on purpose
    with pytest.raises(AssertionError, match="each live slot holds its event"):
        history.check_invariants()


# ---- random operations against a list-based oracle ------------------------------------------


class Oracle:
    """The history's rules, written as plainly as possible over one Python list."""

    def __init__(self, window: float, lower: int, upper: int) -> None:
        self.window, self.lower, self.upper = window, lower, upper
        self.capacity = lower
        self.buffer: list[tuple[int, float]] = []  # (rv, record time), oldest first
        self.list_rv = 0
        self.last_rv = 0
        self.evicted_since_relist = False
        self.evicted_rvs: list[int] = []
        self.increases = self.decreases = 0

    def append(self, rv: int, now: float) -> int:
        # Equal rvs: several keys of one transaction (never the relist's own rv).
        if rv < self.last_rv or (rv == self.last_rv and rv == self.list_rv):
            raise ValueError("not newer")
        before = len(self.buffer)
        if len(self.buffer) == self.capacity:
            quarter = self.capacity // 4
            quarter_oldest = self.buffer[-quarter] if quarter else self.buffer[0]
            if now - self.buffer[0][1] < self.window:
                if self.capacity < self.upper:
                    self.capacity = min(2 * self.capacity, self.upper)
                    self.increases += 1
            elif now - quarter_oldest[1] > self.window and self.capacity > self.lower:
                self.capacity = max(self.capacity // 2, self.lower)
                self.decreases += 1
                self.evicted_rvs += [r for r, _ in self.buffer[: len(self.buffer) - self.capacity]]
                self.buffer = self.buffer[len(self.buffer) - self.capacity :]
            if len(self.buffer) == self.capacity:
                self.evicted_rvs.append(self.buffer[0][0])
                self.buffer = self.buffer[1:]
        evicted = before - len(self.buffer)
        if evicted:
            self.evicted_since_relist = True
        self.buffer.append((rv, now))
        self.last_rv = rv
        return evicted

    def reset(self, list_rv: int) -> None:
        self.buffer = []
        self.list_rv = self.last_rv = list_rv
        self.evicted_since_relist = False
        self.evicted_rvs = []

    def oldest_watchable(self) -> int | None:
        if self.list_rv > 0 and not self.evicted_since_relist:
            return self.list_rv
        if not self.buffer:
            return None
        first = self.buffer[0][0]
        # A watch from below ``first`` would miss the evicted events that shared ``first``.
        return first if first in self.evicted_rvs else first - 1

    def events_after(self, rv: int) -> list[int] | str:
        oldest = self.oldest_watchable()
        if oldest is None:
            return "watch cache isn't correctly initialized"
        if rv < oldest:
            return f"too old resource version: {rv} ({oldest})"
        return [r for r, _ in self.buffer if r > rv]


WINDOW = 10.0
TIME_STEPS = st.sampled_from([0.0, 0.001, 1.0, 2.5, 3.0, 9.999, 10.0, 10.001, 25.0, 100.0])


class EventHistoryMachine(RuleBasedStateMachine):
    history: EventHistory
    oracle: Oracle
    clock: FakeClock

    @initialize(lower=st.integers(1, 6), growth=st.integers(0, 4), extra=st.integers(0, 3))
    def create(self, lower: int, growth: int, extra: int) -> None:
        upper = (lower << growth) + extra
        note(f"EventHistory({WINDOW}, lower_bound={lower}, upper_bound={upper})")
        self.clock = FakeClock()
        self.history = EventHistory(WINDOW, lower_bound=lower, upper_bound=upper, clock=self.clock)
        self.oracle = Oracle(WINDOW, lower, upper)

    def _append(self, rv: int, step: float, use_clock: bool) -> None:
        self.clock.now += step
        event = pod_event(rv, 0.0 if use_clock else self.clock.now)
        expected: int | str
        try:
            expected = self.oracle.append(rv, self.clock.now)
        except ValueError:
            expected = "ValueError"
        got: int | str
        try:
            got = self.history.append(event)
        except ValueError:
            got = "ValueError"
        assert got == expected

    @rule(step=TIME_STEPS, rv_step=st.integers(1, 3), use_clock=st.booleans())
    def append(self, step: float, rv_step: int, use_clock: bool) -> None:
        self._append(self.oracle.last_rv + rv_step, step, use_clock)

    @rule(burst=st.integers(1, 40), step=st.sampled_from([0.0, 0.01, 0.5]))
    def append_burst(self, burst: int, step: float) -> None:
        for _ in range(burst):
            self._append(self.oracle.last_rv + 1, step, use_clock=False)

    @rule(back=st.integers(0, 3))
    def append_stale(self, back: int) -> None:
        self._append(max(self.oracle.last_rv - back, 1), 0.0, use_clock=False)

    @rule(delta=st.integers(-5, 5))
    def relist(self, delta: int) -> None:
        list_rv = max(self.oracle.last_rv + delta, 1)
        self.history.reset(list_rv)
        self.oracle.reset(list_rv)

    @precondition(lambda self: self.oracle.last_rv > 0)
    @rule(data=st.data())
    def events_after(self, data: st.DataObject) -> None:
        rv = data.draw(st.integers(0, self.oracle.last_rv + 2), label="rv")
        expected = self.oracle.events_after(rv)
        got: list[int] | str
        try:
            got = [e.resource_version for e in self.history.events_after(rv)]
        except (ExpiredError, InternalError) as exc:
            got = exc.message
        assert got == expected
        assert self.history.can_serve(rv) == isinstance(expected, list)

    @invariant()
    def matches_the_oracle(self) -> None:
        history, oracle = self.history, self.oracle
        history.check_invariants()
        assert rvs_of(history) == [rv for rv, _ in oracle.buffer]
        assert len(history) == len(oracle.buffer)
        assert history.capacity == oracle.capacity
        assert (history.increases, history.decreases) == (oracle.increases, oracle.decreases)
        assert history.list_resource_version == oracle.list_rv
        oldest = oracle.oldest_watchable()
        if oldest is None:
            with pytest.raises(InternalError):
                _ = history.oldest_watchable
        else:
            assert history.oldest_watchable == oldest
        first = oracle.buffer[0][0] if oracle.buffer else None
        last = oracle.buffer[-1][0] if oracle.buffer else None
        assert history.oldest_event_resource_version == first
        assert history.newest_resource_version == last


TestEventHistoryMatchesOracle = EventHistoryMachine.TestCase
