"""The watch validator catches each violation it claims to: hand-made streams that break one
guarantee each, against a hand-made history; the oracle read from a real etcd is the
history etcd really has, and the one recorded as a run goes still is after etcd compacted
it away; checks made while a run goes on find what the same checks at the end would."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest
from watch_validator import (
    ADDED,
    BOOKMARK,
    DELETED,
    MODIFIED,
    Chain,
    Change,
    End,
    Guarantee,
    HistoryTooShortError,
    LabelSelector,
    Oracle,
    OracleRecorder,
    RunningChecks,
    SessionCheck,
    StateCheck,
    WatchFilter,
    WatchSession,
    WatchValidator,
    read_oracle,
    read_state,
)

from watchcache.etcd.client import EtcdClient
from watchcache.etcd.proto import rpc_pb2
from watchcache.wire.errors import CompactedError

A, B = {"app": "a"}, {"app": "b"}
X, Y, Z, W = "/p/a/x", "/p/a/y", "/p/b/z", "/p/a/w"

ALL = WatchFilter("/p/")
APP_A = WatchFilter("/p/", "app=a")
NS_A = WatchFilter("/p/a/")

# x exists (rv 5, app=a) before the history starts at 6. Revision 10 is one transaction
# changing two keys; 11 changed a key outside the prefix.
HISTORY = [
    Change(6, Y, A, None),
    Change(7, X, B, A),
    Change(8, Z, A, None),
    Change(9, Y, None, A),
    Change(10, X, A, B),
    Change(10, W, B, None),
]
EVERYTHING = [(ADDED, Y, 6), (MODIFIED, X, 7), (ADDED, Z, 8), (DELETED, Y, 9),
              (MODIFIED, X, 10), (ADDED, W, 10)]  # fmt: skip
# app=a: x leaves the selector at 7 (DELETED) and comes back at 10 (ADDED); w never matches.
SELECTED = [(ADDED, Y, 6), (DELETED, X, 7), (ADDED, Z, 8), (DELETED, Y, 9), (ADDED, X, 10)]


def oracle() -> Oracle:
    return Oracle({X: (5, A)}, 6, HISTORY, 11)


def session(
    flt: WatchFilter,
    events: Sequence[tuple[str, str, int]],
    start: int = 5,
    *,
    end: End = End.CLOSED,
    synced_to: int = 0,
    name: str = "w",
) -> WatchSession:
    s = WatchSession(flt, start, name=name, synced_to=synced_to)
    for kind, key, rv in events:
        s.record(kind, key, rv)
    s.finish(end)
    return s


def guarantees(validator: WatchValidator, s: WatchSession) -> list[Guarantee]:
    return [v.guarantee for v in validator.check(s)]


def test_a_faithful_stream_passes_and_is_counted() -> None:
    v = WatchValidator(oracle())
    assert v.check(session(ALL, EVERYTHING, synced_to=11)) == []
    assert v.check(session(APP_A, SELECTED, synced_to=11)) == []
    assert v.check(session(NS_A, [e for e in EVERYTHING if e[1] != Z], synced_to=11)) == []
    assert v.check(session(ALL, EVERYTHING[3:], start=8, synced_to=11)) == []
    assert v.events_checked == len(EVERYTHING) * 2 + len(SELECTED) - 1 + 3
    assert v.violations == []


def test_out_of_order_events_break_ordered() -> None:
    swapped = [EVERYTHING[1], EVERYTHING[0], *EVERYTHING[2:]]
    assert guarantees(WatchValidator(oracle()), session(ALL, swapped)) == [Guarantee.ORDERED]


def test_an_event_at_the_start_rv_breaks_ordered() -> None:
    # A watch from 7 must not deliver the change at 7 (watch from N is exclusive).
    found = WatchValidator(oracle()).check(session(ALL, EVERYTHING[1:], start=7))
    assert [v.guarantee for v in found] == [Guarantee.ORDERED, Guarantee.RELIABLE]
    assert "not above the start" in found[0].message
    assert "no such change" in found[1].message


def test_a_repeated_event_breaks_unique() -> None:
    repeated = [*EVERYTHING[:3], EVERYTHING[2], *EVERYTHING[3:]]
    assert guarantees(WatchValidator(oracle()), session(ALL, repeated)) == [Guarantee.UNIQUE]


def test_a_missing_event_breaks_reliable() -> None:
    found = WatchValidator(oracle()).check(session(ALL, EVERYTHING[:2] + EVERYTHING[3:]))
    assert [str(v) for v in found] == [f"reliable: w: lost ADDED {Z} at 8"]


def test_half_a_transaction_is_a_gap() -> None:
    # Both keys of revision 10 or neither: the watcher vouched for 10 by delivering x.
    found = WatchValidator(oracle()).check(session(ALL, EVERYTHING[:-1]))
    assert [str(v) for v in found] == [f"reliable: w: lost ADDED {W} at 10"]


def test_a_client_that_cut_its_stream_vouches_only_below_its_last_event() -> None:
    # A client timer can stop reading between the two keys of revision 10; the server
    # never ends a stream there, so only a cut stream may stop at half a transaction.
    cut = session(ALL, EVERYTHING[:-1])
    cut.cut = True
    assert cut.covered == 9
    assert WatchValidator(oracle()).check(cut) == []
    # A cut stream whose last record is a bookmark still vouches for the bookmark's rv.
    bookmarked = session(ALL, [*EVERYTHING[:-1], (BOOKMARK, "", 10)])
    bookmarked.cut = True
    assert bookmarked.covered == 10
    found = WatchValidator(oracle()).check(bookmarked)
    assert [str(v) for v in found] == [f"reliable: w: lost ADDED {W} at 10"]


def test_a_trailing_gap_needs_to_know_how_far_the_stream_got() -> None:
    v = WatchValidator(oracle())
    # Without a sync point a stream that stopped early is indistinguishable from a slow one.
    assert v.check(session(ALL, EVERYTHING[:3])) == []
    found = v.check(session(ALL, EVERYTHING[:3], synced_to=11))
    assert [v.guarantee for v in found] == [Guarantee.RELIABLE] * 3


def test_an_event_etcd_never_made_breaks_reliable() -> None:
    invented = [*EVERYTHING[:2], (MODIFIED, X, 8), *EVERYTHING[2:]]
    found = WatchValidator(oracle()).check(session(ALL, invented))
    assert [str(v) for v in found] == [
        f"reliable: w: MODIFIED {X} at 8: no such change for this watcher in etcd"
    ]


def test_a_selector_transition_of_the_wrong_type_breaks_reliable() -> None:
    # x left app=a at 7: the watcher must see DELETED, not MODIFIED.
    wrong = [SELECTED[0], (MODIFIED, X, 7), *SELECTED[2:]]
    found = WatchValidator(oracle()).check(session(APP_A, wrong))
    assert [v.guarantee for v in found] == [Guarantee.RELIABLE]
    assert "arrived as MODIFIED" in found[0].message and "makes it DELETED" in found[0].message


def test_an_event_outside_the_filter_breaks_reliable() -> None:
    found = WatchValidator(oracle()).check(session(NS_A, EVERYTHING))
    assert [str(v) for v in found] == [
        f"reliable: w: ADDED {Z} at 8: no such change for this watcher in etcd"
    ]


def test_bookmarks_that_go_back_break_bookmarkable() -> None:
    events = [*EVERYTHING[:2], (BOOKMARK, "", 8), (BOOKMARK, "", 7)]
    found = WatchValidator(oracle()).check(session(ALL, events))
    # The bookmark at 8 also vouches for z at 8, which never came.
    assert sorted(str(v.guarantee) for v in found) == ["bookmarkable", "reliable"]
    assert any("bookmark 7 after bookmark 8" in v.message for v in found)


def test_a_bookmark_below_a_delivered_event_breaks_bookmarkable() -> None:
    events = [*EVERYTHING[:3], (BOOKMARK, "", 7)]
    found = WatchValidator(oracle()).check(session(ALL, events))
    assert [v.message for v in found] == ["bookmark 7 below delivered rv 8"]


def test_an_event_at_or_below_an_earlier_bookmark_breaks_bookmarkable() -> None:
    events = [*EVERYTHING[:2], (BOOKMARK, "", 8), EVERYTHING[2]]
    found = WatchValidator(oracle()).check(session(ALL, events))
    assert [v.guarantee for v in found] == [Guarantee.BOOKMARKABLE]
    assert "after a bookmark at 8" in found[0].message


def test_a_bookmark_beyond_etcd_breaks_bookmarkable() -> None:
    found = WatchValidator(oracle()).check(session(ALL, [*EVERYTHING, (BOOKMARK, "", 12)]))
    assert [v.message for v in found] == ["bookmark 12 above etcd's 11"]


def test_a_bookmark_beyond_the_ceiling_breaks_bookmarkable_even_if_the_oracle_got_there() -> None:
    # A recorder's oracle runs on after the session ended: etcd's revision read then is
    # the limit, not what the oracle reached since.
    v = WatchValidator(oracle())
    late = session(ALL, [*EVERYTHING[:2], (BOOKMARK, "", 7)], start=5)
    assert guarantees(v, late) == []
    assert [x.guarantee for x in v.check(late, ceiling=6)] == [Guarantee.BOOKMARKABLE]


def test_a_bookmark_vouches_for_everything_below_it() -> None:
    # Nothing selected changed after 10: a bookmark at 11 after all events is fine ...
    assert WatchValidator(oracle()).check(session(APP_A, [*SELECTED, (BOOKMARK, "", 11)])) == []
    # ... but a bookmark at 9 with z (8) missing is a gap.
    events = [*SELECTED[:2], (BOOKMARK, "", 9)]
    found = WatchValidator(oracle()).check(session(APP_A, events))
    assert sorted(v.message for v in found) == [f"lost ADDED {Z} at 8", f"lost DELETED {Y} at 9"]


def test_an_error_end_is_a_violation_and_a_410_end_is_not() -> None:
    v = WatchValidator(oracle())
    assert v.check(session(ALL, EVERYTHING[:2], end=End.EXPIRED)) == []
    errored = session(ALL, EVERYTHING[:2])
    errored.finish(End.ERROR, "500 InternalError")
    assert [x.message for x in v.check(errored)] == [
        "the stream ended with an error: 500 InternalError"
    ]


def test_a_resumed_watch_must_get_exactly_the_suffix() -> None:
    v = WatchValidator(oracle())
    original = session(ALL, EVERYTHING, synced_to=11, name="original")
    assert v.check_resumed(original, session(ALL, EVERYTHING[2:], start=7, synced_to=11)) == []
    # Resumed from 7 but it repeats the change at 7: ordered (and an extra event).
    repeats = session(ALL, EVERYTHING[1:], start=7, synced_to=11, name="resumed")
    assert Guarantee.RESUMABLE in [x.guarantee for x in v.check_resumed(original, repeats)]
    # A resumed stream that skips an event is caught even where etcd's history would say so
    # too: both the gap and the mismatch with the original are reported.
    skips = session(ALL, [*EVERYTHING[2:4], EVERYTHING[5]], start=7, synced_to=11)
    found = [x.guarantee for x in v.check_resumed(original, skips)]
    assert found == [Guarantee.RELIABLE, Guarantee.RESUMABLE]


def test_a_resumed_watch_is_compared_only_as_far_as_both_got() -> None:
    v = WatchValidator(oracle())
    original = session(ALL, EVERYTHING[:3], name="original")  # got through 8 only
    assert v.check_resumed(original, session(ALL, EVERYTHING[2:], start=7, synced_to=11)) == []


def test_sessions_must_chain_where_the_last_one_stopped() -> None:
    v = WatchValidator(oracle())
    first = session(ALL, EVERYTHING[:2], end=End.TERMINATED)
    assert v.check_chain([first, session(ALL, EVERYTHING[2:], start=7)]) == []
    found = v.check_chain([first, session(ALL, EVERYTHING[3:], start=8)])
    assert [x.message for x in found] == ["resumed at 8, the previous session ended at 7"]


def test_after_a_410_the_new_list_may_not_be_older_than_what_was_seen() -> None:
    v = WatchValidator(oracle())
    expired = session(ALL, EVERYTHING[:3], end=End.EXPIRED)
    assert v.check_chain([expired, session(ALL, EVERYTHING[4:], start=9)]) == []
    found = v.check_chain([expired, session(ALL, EVERYTHING[2:], start=7)])
    assert [x.guarantee for x in found] == [Guarantee.RESUMABLE]
    assert "below the 8 already seen" in found[0].message


def test_a_chain_checked_link_by_link_remembers_what_was_seen_before() -> None:
    v = WatchValidator(oracle())
    expired = session(ALL, [], start=7, end=End.EXPIRED)
    relisted = session(ALL, EVERYTHING[2:], start=7)
    # Alone the link is fine: nothing above 7 was seen in it ...
    assert v.check_chain([expired, relisted]) == []
    # ... but the watcher had seen 9 in an earlier session.
    found = v.check_chain([expired, relisted], seen=9)
    assert [x.guarantee for x in found] == [Guarantee.RESUMABLE]


def watch_list(flt: WatchFilter, initial: Sequence[tuple[str, int]], at: int) -> WatchSession:
    s = WatchSession(flt, 0, name="list", initial=True)
    for key, rv in initial:
        s.record(ADDED, key, rv)
    s.record(BOOKMARK, "", at, initial_end=True)
    return s


def test_initial_events_must_be_the_selected_state() -> None:
    v = WatchValidator(oracle())
    good = watch_list(APP_A, [(Y, 6), (Z, 8)], 8)  # x has app=b at 8
    good.record(*DELETED_Y_AT_9)
    assert v.check(good) == []
    assert good.start_rv == 8 and good.initial_rv == 8
    cases = {
        "missing": ([(Y, 6)], f"{Z} (rv 8) missing from the state at 8"),
        "extra": ([(X, 7), (Y, 6), (Z, 8)], f"{X} sent initially, not selected at 8"),
        "stale": ([(Y, 6), (Z, 7)], f"{Z} sent at rv 7, etcd had 8 at 8"),
        "twice": ([(Y, 6), (Z, 8), (Y, 6)], f"{Y} sent twice initially"),
    }
    for initial, message in cases.values():
        assert [x.message for x in v.check(watch_list(APP_A, initial, 8))] == [message]


DELETED_Y_AT_9 = (DELETED, Y, 9)


def test_events_before_the_initial_state_ends_are_a_violation() -> None:
    s = WatchSession(ALL, 0, name="list", initial=True)
    s.record(ADDED, X, 5)
    s.record(MODIFIED, X, 7)
    assert [v.guarantee for v in WatchValidator(oracle()).check(s)] == [Guarantee.INITIAL]


def test_a_client_state_must_equal_etcds() -> None:
    v = WatchValidator(oracle())
    assert v.check_state("c", APP_A, 10, {X: 10, Z: 8}) == []
    found = v.check_state("c", APP_A, 10, {X: 7, Y: 6})
    assert len(found) == 1
    assert f"missing ['{Z}']" in found[0].message and f"extra ['{Y}']" in found[0].message


def test_sessions_outside_the_history_are_a_harness_error() -> None:
    v = WatchValidator(oracle())
    with pytest.raises(HistoryTooShortError):
        v.check(session(ALL, [], start=3))
    with pytest.raises(HistoryTooShortError):
        v.check(session(ALL, [], synced_to=12))


def test_state_at_any_revision_in_any_order() -> None:
    o = oracle()
    assert o.state_at(5) == {X: (5, A)}
    assert o.state_at(10) == {X: (10, A), Z: (8, A), W: (10, B)}
    assert o.state_at(6) == {X: (5, A), Y: (6, A)}
    assert o.state_at(9) == {X: (7, B), Z: (8, A)}
    assert o.selected(APP_A, 9) == {Z: 8}
    with pytest.raises(HistoryTooShortError):
        o.state_at(12)


def test_forgetting_folds_the_old_history_into_the_base() -> None:
    o = oracle()
    o.forget(8)
    assert (o.first, o.base) == (9, {X: (7, B), Z: (8, A), Y: (6, A)})
    assert o.expected(ALL, 8, 11) == [(kind, key, rv) for kind, key, rv in EVERYTHING[3:]]
    assert o.state_at(10) == oracle().state_at(10)
    with pytest.raises(HistoryTooShortError):
        o.between(7, 10)
    with pytest.raises(HistoryTooShortError):
        o.state_at(7)
    o.forget(5)  # older than what is left: nothing to do
    assert o.first == 9
    o.forget(99)  # as far as the history goes
    assert (o.first, o.changes, o.state_at(11)) == (12, [], oracle().state_at(11))


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("", {}, True),
        ("app=a", {"app": "a"}, True),
        ("app==a", {"app": "b"}, False),
        ("app!=a", {}, True),
        ("app!=a", {"app": "a"}, False),
        ("app in (a, b),tier", {"app": "b", "tier": "x"}, True),
        ("app in (a,b),tier", {"app": "b"}, False),
        ("app notin (a,b)", {"app": "c"}, True),
        ("app notin (a,b)", {}, True),
        ("!tier", {"tier": "x"}, False),
        ("!tier, app=a", {"app": "a"}, True),
    ],
)
def test_the_label_selector_oracle(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert LabelSelector.parse(selector).matches(labels) is expected


def test_the_label_selector_oracle_rejects_what_it_cannot_read() -> None:
    with pytest.raises(ValueError, match="cannot parse"):
        LabelSelector.parse("app in a")


def pod(labels: dict[str, str]) -> bytes:
    return json.dumps({"kind": "Pod", "metadata": {"labels": labels}}).encode()


async def test_the_oracle_read_from_etcd_is_etcds_history(etcd_client: EtcdClient) -> None:
    c = etcd_client
    before = await c.put(b"/p/a/x", pod(A))
    await c.put(b"/other", b"{}")
    first = await c.put(b"/p/a/y", pod(A))
    second = await c.put(b"/p/a/x", pod(B))
    txn = await c.txn(
        rpc_pb2.TxnRequest(
            success=[
                rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=b"/p/b/z", value=pod(A))),
                rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(key=b"/p/a/y")),
            ]
        )
    )
    third = int(txn.header.revision)
    last = await c.put(b"/other", b"{}")

    o = await read_oracle(c, "/p/", first, last)
    assert o.base == {X: (before, A)}
    assert o.changes == [
        Change(first, Y, A, None),
        Change(second, X, B, A),
        Change(third, Z, A, None),
        Change(third, Y, None, A),
    ]
    assert o.state_at(last) == await read_state(c, "/p/", last)
    assert o.expected(APP_A, first - 1, last) == [
        (ADDED, Y, first),
        (DELETED, X, second),
        (ADDED, Z, third),
        (DELETED, Y, third),
    ]


async def test_the_recorded_oracle_outlives_a_compaction(etcd_client: EtcdClient) -> None:
    c = etcd_client
    before = await c.put(b"/p/a/x", pod(A))
    first = await c.current_revision(b"/p/") + 1
    async with OracleRecorder(c, "/p/") as recorder:
        o = await recorder.start(first)
        added = await c.put(b"/p/a/y", pod(A))
        modified = await c.put(b"/p/a/x", pod(B))
        await c.compact(modified)
        deleted = int((await c.delete_range(b"/p/a/y")).header.revision)
        await c.put(b"/other", b"{}")
        last = await recorder.catch_up()

        # etcd itself no longer has the history ...
        with pytest.raises(CompactedError):
            await read_oracle(c, "/p/", first, last)
        # ... the recorder has all of it.
        assert o.base == {X: (before, A)}
        assert o.changes == [
            Change(added, Y, A, None),
            Change(modified, X, B, A),
            Change(deleted, Y, None, A),
        ]
        assert o.last >= last
        assert o.state_at(last) == await read_state(c, "/p/", last)
        assert (recorder.puts, recorder.error) == (2, None)


async def test_checks_made_as_the_run_goes_find_what_they_would_at_the_end(
    etcd_client: EtcdClient,
) -> None:
    c = etcd_client
    first = await c.current_revision(b"/p/") + 1
    async with OracleRecorder(c, "/p/") as recorder:
        await recorder.start(first)
        checks = RunningChecks(recorder, retention=0.0)
        runner = asyncio.create_task(checks.run())
        added = await c.put(b"/p/a/y", pod(A))
        modified = await c.put(b"/p/a/x", pod(B))
        chain = Chain()
        start = first - 1
        faithful = session(ALL, [(ADDED, Y, added), (ADDED, X, modified)], start=start)
        # Submitted before the oracle has recorded it: checked once it has.
        checks.submit(SessionCheck(faithful, modified, checks.hold(start), chain))
        resumed = session(ALL, [], start=start + 1, name="resumed")  # not where #1 stopped
        checks.submit(SessionCheck(resumed, modified, checks.hold(start), chain))
        lossy = session(ALL, [(ADDED, X, modified)], start=start, name="probe")
        checks.submit(SessionCheck(lossy, modified, checks.hold(start)))
        state = {Y: added, X: modified}
        checks.submit(StateCheck("state", ALL, modified, state, checks.hold(modified)))
        await checks.queue.join()
        runner.cancel()

        found = sorted((v.session, v.guarantee) for v in checks.validator.violations)
        assert found == [("probe", Guarantee.RELIABLE), ("resumed", Guarantee.RESUMABLE)]
        assert (checks.sessions, chain.last, chain.with_events) == (2, resumed, faithful)
        assert checks.failures == [] and not checks.holds

        # A hold keeps the history it needs; without one, everything recorded is forgotten.
        checks.hold(added)
        assert checks.trim() == added
        assert checks.oracle.expected(ALL, added, modified) == [(ADDED, X, modified)]
        checks.release(added)
        assert checks.trim() == checks.oracle.last
        assert checks.oracle.selected(ALL, checks.oracle.last) == state
