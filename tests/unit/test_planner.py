"""The LIST decision table (planner.plan_list): one case per row of docs/semantics.md §2.3/§2.4.

The state mirrors Kubernetes' whitebox table (``TestShouldDelegateList``): cacheRV 100,
snapshots stored at 80 and 100 unless a case says otherwise, the store at 120.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchcache.cache.backing_store import ListResult, Source
from watchcache.cache.planner import (
    CacheState,
    Failure,
    Fallback,
    FallbackPlan,
    ListPlan,
    plan_fallback,
    plan_list,
    store_revision,
)
from watchcache.wire import gojson
from watchcache.wire.options import ListOptions, ResourceVersionMatch

START = "/registry/pods/ns/b\x00"


def snapshots_at(*rvs: int) -> CacheState:
    return CacheState(
        resource_version=100,
        ready=True,
        has_store=True,
        consistent_reads_supported=True,
        snapshots_enabled=True,
        has_snapshot_at_or_below=lambda n: any(rv <= n for rv in rvs),
    )


BASE = snapshots_at(80, 100)
ONLY_100 = snapshots_at(100)
NO_CRS = replace(BASE, consistent_reads_supported=False)
NO_LFCS = replace(BASE, snapshots_enabled=False)
NO_STORE = replace(BASE, has_store=False, consistent_reads_supported=False)
INCONSISTENT = replace(BASE, serve_from_store=True)
NO_STORE_ONLY_100 = replace(ONLY_100, has_store=False, consistent_reads_supported=False)


class Row(NamedTuple):
    opts: ListOptions
    token_rv: int | None  # a continue token with this rv
    state: CacheState
    source: Source
    row: str
    exact: int | None = None
    wait_for: int = 0
    consistent: bool = False
    limit: int = 0


def opts(rv: str = "", match: str = "", limit: int = 0, cont: str = "") -> ListOptions:
    return ListOptions(
        resource_version=rv,
        resource_version_match=ResourceVersionMatch(match),
        limit=limit,
        continue_token=cont,
    )


CONT = "x"  # content irrelevant to the planner: the decoded token is passed separately

TABLE: dict[str, Row] = {
    # A: Exact N, recursive
    "exact-with-snapshot": Row(opts("100", "Exact"), None, BASE, Source.SNAPSHOT, "A", exact=100),
    "exact-older-snapshot-serves": Row(opts("90", "Exact"), None, BASE, Source.SNAPSHOT, "A", 90),
    "exact-no-snapshot-below-delegates": Row(
        opts("80", "Exact"), None, ONLY_100, Source.STORE, "A"
    ),
    "exact-future-waits-when-consistent-reads": Row(
        opts("120", "Exact"), None, BASE, Source.SNAPSHOT, "A", exact=120, wait_for=120
    ),
    "exact-future-delegates-without-consistent-reads": Row(
        opts("120", "Exact"), None, NO_CRS, Source.STORE, "A"
    ),
    "exact-snapshots-off-delegates": Row(opts("100", "Exact"), None, NO_LFCS, Source.STORE, "A"),
    "exact-no-store-no-snapshot-expires": Row(
        opts("80", "Exact"), None, NO_STORE_ONLY_100, Source.EXPIRED, "A"
    ),
    "exact-no-store-future-waits": Row(
        opts("120", "Exact"), None, NO_STORE, Source.SNAPSHOT, "A", exact=120, wait_for=120
    ),
    # B: NotOlderThan
    "not-older-than-n-waits-in-cache": Row(
        opts("90", "NotOlderThan"), None, NO_CRS, Source.CACHE, "B", wait_for=90
    ),
    "not-older-than-zero-no-wait": Row(opts("0", "NotOlderThan"), None, NO_LFCS, Source.CACHE, "B"),
    "not-older-than-honours-limit": Row(
        opts("0", "NotOlderThan", 5), None, BASE, Source.CACHE, "B", limit=5
    ),
    # C1a: continue with rv > 0
    "continue-served-from-snapshot": Row(
        opts(limit=2, cont=CONT), 100, BASE, Source.SNAPSHOT, "C1a", exact=100, limit=2
    ),
    "continue-rv0-param-ignored": Row(
        opts("0", limit=2, cont=CONT), 90, BASE, Source.SNAPSHOT, "C1a", exact=90, limit=2
    ),
    "continue-snapshot-gone-delegates": Row(
        opts(limit=2, cont=CONT), 80, ONLY_100, Source.STORE, "C1a", limit=2
    ),
    "continue-from-ahead-waits": Row(
        opts(limit=2, cont=CONT), 120, BASE, Source.SNAPSHOT, "C1a", 120, 120, limit=2
    ),
    "continue-snapshots-off-delegates": Row(
        opts(limit=2, cont=CONT), 100, NO_LFCS, Source.STORE, "C1a", limit=2
    ),
    "continue-no-store-snapshot-gone-expires": Row(
        opts(limit=2, cont=CONT), 80, NO_STORE_ONLY_100, Source.EXPIRED, "C1a", limit=2
    ),
    # C1b: continue with rv < 0 (inconsistent continuation)
    "continue-latest-is-consistent": Row(
        opts(limit=2, cont=CONT), -1, BASE, Source.CACHE, "C1b", consistent=True, limit=2
    ),
    "continue-latest-without-consistent-reads-delegates": Row(
        opts(limit=2, cont=CONT), -1, NO_CRS, Source.STORE, "C1b", limit=2
    ),
    "continue-latest-no-store-serves-latest": Row(
        opts(limit=2, cont=CONT), -1, NO_STORE, Source.CACHE, "C1b", limit=2
    ),
    # C2: legacy exact (RV N with limit)
    "legacy-exact-from-snapshot": Row(
        opts("100", limit=5), None, BASE, Source.SNAPSHOT, "C2", exact=100, limit=5
    ),
    "legacy-exact-snapshots-off-delegates": Row(
        opts("100", limit=5), None, NO_LFCS, Source.STORE, "C2", limit=5
    ),
    # C3: RV unset: consistent
    "unset-is-consistent": Row(
        opts(limit=5), None, BASE, Source.CACHE, "C3", consistent=True, limit=5
    ),
    "unset-without-consistent-reads-delegates": Row(opts(), None, NO_CRS, Source.STORE, "C3"),
    "unset-no-store-serves-latest": Row(opts(), None, NO_STORE, Source.CACHE, "C3"),
    # C4: RV "0"
    "rv0-from-cache-honours-limit": Row(
        opts("0", limit=1), None, NO_CRS, Source.CACHE, "C4", limit=1
    ),
    # C5: RV N without limit
    "rv-n-no-limit-waits-in-cache": Row(opts("90"), None, NO_LFCS, Source.CACHE, "C5", wait_for=90),
    # I: the cache was found inconsistent with its store
    "inconsistent-rv0": Row(opts("0", limit=2), None, INCONSISTENT, Source.STORE, "I", limit=2),
    "inconsistent-exact": Row(opts("100", "Exact"), None, INCONSISTENT, Source.STORE, "I"),
    "inconsistent-continue": Row(opts(limit=2), 100, INCONSISTENT, Source.STORE, "I", limit=2),
}


@pytest.mark.parametrize("case", TABLE.values(), ids=TABLE.keys())
def test_plan_list_follows_the_kubernetes_table(case: Row) -> None:
    start = None if case.token_rv is None else START
    plan = plan_list(case.opts, case.token_rv, start, recursive=True, state=case.state)
    assert plan == ListPlan(
        source=case.source,
        row=case.row,
        limit=case.limit,
        start_key=start,
        wait_for=case.wait_for,
        exact=case.exact,
        consistent=case.consistent,
    )


def test_plan_list_non_recursive_exact_goes_to_the_store() -> None:
    plan = plan_list(opts("100", "Exact"), None, None, recursive=False, state=BASE)
    assert (plan.source, plan.row) == (Source.STORE, "A'")


def test_plan_list_kubernetes_compat_ignores_limit_for_rv0() -> None:
    state = replace(BASE, ignore_limit_for_rv0=True)
    assert plan_list(opts("0", limit=1), None, None, recursive=True, state=state).limit == 0
    # ... on continuations too (issue #108003's second face)
    plan = plan_list(opts("0", limit=1, cont=CONT), 100, START, recursive=True, state=state)
    assert plan.limit == 0
    # ... and only for "0"
    assert plan_list(opts("", limit=1), None, None, recursive=True, state=state).limit == 1


@pytest.mark.parametrize(
    ("options", "goes_to_store"),
    [
        (opts(limit=500), True),
        (opts("0"), False),
        (opts(), False),
        (ListOptions(limit=500, label_selector="app=x"), False),
        (ListOptions(limit=500, field_selector="metadata.name=x"), False),
    ],
    ids=["unfiltered-page", "rv0-no-limit", "unset-no-limit", "label-selector", "field-selector"],
)
def test_not_ready_cache_sends_unfiltered_pages_to_the_store(
    options: ListOptions, goes_to_store: bool
) -> None:
    state = replace(BASE, ready=False)
    plan = plan_list(options, None, None, recursive=True, state=state)
    assert plan.not_ready
    fallback = plan_fallback(plan, Failure.NOT_READY, options, state)
    assert (fallback.action is Fallback.STORE) is goes_to_store
    no_store = replace(state, has_store=False)
    assert plan_fallback(plan, Failure.NOT_READY, options, no_store).action is not Fallback.STORE


CONSISTENT = ListPlan(Source.CACHE, "C3", 0, consistent=True)
WAITING = ListPlan(Source.CACHE, "C5", 0, wait_for=150)
FROM_SNAPSHOT = ListPlan(Source.SNAPSHOT, "C2", 5, exact=90)


@pytest.mark.parametrize(
    ("plan", "failure", "options", "state", "expected"),
    [
        (WAITING, Failure.NOT_READY, opts(limit=500), BASE, FallbackPlan(Fallback.STORE, "F1")),
        (
            WAITING,
            Failure.NOT_READY,
            ListOptions(limit=500, label_selector="app=x"),
            BASE,
            FallbackPlan(Fallback.TOO_MANY_REQUESTS, "F2"),
        ),
        (
            WAITING,
            Failure.NOT_READY,
            opts(limit=500),
            NO_STORE,
            FallbackPlan(Fallback.TOO_MANY_REQUESTS, "F2"),
        ),
        (
            FROM_SNAPSHOT,
            Failure.EXPIRED,
            opts("90", limit=5),
            BASE,
            FallbackPlan(Fallback.STORE, "F3"),
        ),
        (
            FROM_SNAPSHOT,
            Failure.EXPIRED,
            opts("90", limit=5),
            NO_STORE,
            FallbackPlan(Fallback.EXPIRED, "F4"),
        ),
        (WAITING, Failure.TIMEOUT, opts("150"), BASE, FallbackPlan(Fallback.FAIL, "F5")),
        (
            CONSISTENT,
            Failure.TIMEOUT,
            opts(),
            replace(BASE, skip_consistent_fallback=True),
            FallbackPlan(Fallback.TOO_MANY_REQUESTS, "F6"),
        ),
        (CONSISTENT, Failure.TIMEOUT, opts(), BASE, FallbackPlan(Fallback.STORE, "F7")),
    ],
    ids=[
        "F1-not-ready-unfiltered-page",
        "F2-not-ready-selector",
        "F2-not-ready-no-store",
        "F3-snapshot-pruned",
        "F4-snapshot-pruned-no-store",
        "F5-rv-not-reached",
        "F6-consistent-timeout-skip",
        "F7-consistent-timeout",
    ],
)
def test_plan_fallback_one_case_per_row(
    plan: ListPlan,
    failure: Failure,
    options: ListOptions,
    state: CacheState,
    expected: FallbackPlan,
) -> None:
    assert plan_fallback(plan, failure, options, state) == expected


@pytest.mark.parametrize(
    ("options", "token_rv", "expected"),
    [
        (opts(limit=2, cont=CONT), 100, (100, 0)),
        (opts(limit=2, cont=CONT), -1, (0, 0)),
        (opts("90", "Exact"), None, (90, 0)),
        (opts("90", limit=5), None, (90, 0)),
        (opts("90"), None, (0, 90)),
        (opts("90", "NotOlderThan", 5), None, (0, 90)),
        (opts("0", limit=5), None, (0, 0)),
        (opts(), None, (0, 0)),
    ],
    ids=[
        "continue-pinned",
        "continue-latest",
        "exact",
        "legacy-exact",
        "rv-n-no-limit",
        "not-older-than",
        "rv0",
        "unset",
    ],
)
def test_store_revision_follows_the_etcd_table(
    options: ListOptions, token_rv: int | None, expected: tuple[int, int]
) -> None:
    assert store_revision(options, token_rv) == expected


@given(
    resource_version=st.integers(0, 2**63 - 1),
    token=st.just("") | st.text(alphabet="AZaz09-_", min_size=1) | st.text(),
    remaining=st.none() | st.integers(0, 2**63 - 1),
)
def test_list_metadata_json_is_what_go_writes(
    resource_version: int, token: str, remaining: int | None
) -> None:
    result = ListResult([], resource_version, token, remaining)
    assert result.metadata_json() == gojson.dumpb(result.metadata())
