"""EtcdStore against a real etcd 3.5: Kubernetes' etcd3 LIST (docs/semantics.md §6), and the
store rows of WatchCache.list end to end through SyncedCache (§2.3-2.7).

- revision selection (§6.2): pinned reads (Exact, legacy exact) see the keyspace as of
  their revision after later writes; latest reads answer the header revision; too new a
  revision is 504 with Kubernetes' message, ``current`` filled in, no Retry-After;
- paging (§6.3, §6.4, §1.4): an unfiltered page is one Range, its token is relative to
  the prefix *with* its "/", ``remainingItemCount`` counts the keys after the page; a
  selector that filters makes the store over-fetch with doubling pages (capped at
  10,000), every internal page at the first page's revision; continuations stay at
  the pinned revision whatever was written since;
- compaction (§1.7, §6.5): 410 with the inconsistent-continue token (rv -1, same start,
  or the failing internal page's start) or the plain "too old" 410;
- undecodable values (§6.3 step 3): the store's LIST aborts with 500, the reflector
  skips and counts them;
- the cache's store rows: a cache token continued on etcd when the snapshot is gone,
  consistent reads on etcd when they are off, the timeout fallback and its 429 variant,
  and cache and store answering the same request at the same rv identically.

Every test starts its own etcd (the ``etcd``/``client`` fixtures); awaits that wait on
the cache or etcd are bounded with ``asyncio.wait_for``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from kubeobjects import PREFIX, names, pod_key, pod_value, rv_of

from watchcache import Item
from watchcache.cache.backing_store import ListResult, Source, StoreListRequest
from watchcache.cache.objects import ObjectCodec
from watchcache.cache.planner import store_revision
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.proto import rpc_pb2
from watchcache.etcd.store import LIST_TIMEOUT_SECONDS, MAX_PAGE, EtcdStore
from watchcache.etcd.version import ConsistentReadsMode
from watchcache.sync.synced import SyncedCache
from watchcache.wire.errors import (
    EXPIRED_LIST_MESSAGE,
    INCONSISTENT_CONTINUE_MESSAGE,
    ExpiredError,
    InternalError,
    TooLargeResourceVersionError,
    TooManyRequestsError,
)
from watchcache.wire.options import ListOptions, ResourceVersionMatch
from watchcache.wire.tokens import decode_continue, parse_continue

T = TypeVar("T")

EXACT = ResourceVersionMatch.EXACT
NOT_OLDER_THAN = ResourceVersionMatch.NOT_OLDER_THAN
POD_FIELDS = ObjectCodec(("metadata.name", "metadata.namespace", "spec.nodeName"))
#: The key Kubernetes reads the current revision from (the prefix without its "/").
REVISION_KEY = PREFIX[:-1].encode()
#: Upper bound for any single await on etcd or the cache: a hang fails, it does not stall.
STEP = 5.0


async def bounded(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, STEP)


# ---------------------------------------------------------------------------------------------
# Helpers


async def put_pod(
    client: EtcdClient,
    name: str,
    labels: Mapping[str, str] | None = None,
    namespace: str = "a",
) -> int:
    value = pod_value(namespace, name, labels=labels)
    return await bounded(client.put(pod_key(namespace, name).encode(), value))


async def delete_pod(client: EtcdClient, name: str, namespace: str = "a") -> int:
    response = await bounded(client.delete_range(pod_key(namespace, name).encode()))
    return int(response.header.revision)


async def seed(
    client: EtcdClient,
    count: int,
    labels: Callable[[int], Mapping[str, str]] = lambda _i: {},
) -> list[int]:
    """Pods a/p00, a/p01, ... one put each (one revision each); returns the revisions."""
    return [await put_pod(client, f"p{i:02d}", labels(i)) for i in range(count)]


async def bulk_seed(client: EtcdClient, count: int, matching: int) -> int:
    """``count`` pods a/p00000... in 128-put transactions; only index ``matching`` has
    app=x. Returns the revision after the last transaction."""

    def op(i: int) -> rpc_pb2.RequestOp:
        name = f"p{i:05d}"
        value = pod_value("a", name, labels={"app": "x" if i == matching else "y"})
        return rpc_pb2.RequestOp(
            request_put=rpc_pb2.PutRequest(key=pod_key("a", name).encode(), value=value)
        )

    revision = 0
    for lo in range(0, count, 128):
        ops = [op(i) for i in range(lo, min(lo + 128, count))]
        response = await bounded(client.txn(rpc_pb2.TxnRequest(success=ops)))
        revision = int(response.header.revision)
    return revision


async def current(client: EtcdClient) -> int:
    return await bounded(client.current_revision(REVISION_KEY))


async def compact_everything(client: EtcdClient) -> int:
    """Write a key outside the prefix, compact up to it: every earlier revision is gone."""
    revision = await bounded(client.put(b"/registry/configmaps/a/tick", b"{}"))
    await bounded(client.compact(revision))
    return revision


def store_request(opts: ListOptions, prefix: str = PREFIX) -> StoreListRequest:
    """The request WatchCache hands the store for ``opts`` (as ``_list_store`` builds it)."""
    start, continue_rv = (
        decode_continue(opts.continue_token, prefix) if opts.continue_token else (None, None)
    )
    revision, minimum = store_revision(opts, continue_rv)
    return StoreListRequest(
        key_prefix=prefix,
        token_prefix=prefix[:-1],
        start_key=start,
        revision=revision,
        minimum=minimum,
        limit=opts.page_size,
        selector=opts.selector(),
        continued=bool(opts.continue_token),
        options=opts,
    )


async def store_list(store: EtcdStore, opts: ListOptions) -> ListResult:
    return await bounded(store.list(store_request(opts)))


def then(opts: ListOptions, token: str) -> ListOptions:
    """The next page's request: same limit and selectors, the token, no rv."""
    return ListOptions(
        limit=opts.limit,
        continue_token=token,
        label_selector=opts.label_selector,
        field_selector=opts.field_selector,
    )


def contents(items: Iterable[Item]) -> list[tuple[str, bytes, int]]:
    return [(item.key, item.value, item.mod_revision) for item in items]


@dataclass(frozen=True, slots=True)
class RangeCall:
    start: bytes
    limit: int
    revision: int


def record_ranges(
    monkeypatch: pytest.MonkeyPatch,
    client: EtcdClient,
    before: Callable[[int], Awaitable[None]] | None = None,
) -> list[RangeCall]:
    """Log every Range the client sends from now on; ``before(n)`` runs before the n-th
    (from 0), e.g. to compact between two internal pages of one LIST."""
    calls: list[RangeCall] = []
    original = client.range

    async def range_(key: bytes, range_end: bytes = b"", **options: Any) -> Any:
        if before is not None:
            await before(len(calls))
        calls.append(RangeCall(key, options.get("limit", 0), options.get("revision", 0)))
        return await original(key, range_end, **options)

    monkeypatch.setattr(client, "range", range_)
    return calls


@pytest.fixture
def store(client: EtcdClient) -> EtcdStore:
    return EtcdStore(client, PREFIX, codec=POD_FIELDS)


@pytest.fixture
async def synced_caches(client: EtcdClient) -> AsyncIterator[Callable[..., SyncedCache]]:
    """``make(**options)`` → a started-later SyncedCache on the test's etcd; all are
    stopped at the end."""
    made: list[SyncedCache] = []

    def make(**options: Any) -> SyncedCache:
        synced = SyncedCache(
            client, PREFIX, resource="pods", kind="Pod", codec=POD_FIELDS, **options
        )
        made.append(synced)
        return synced

    yield make
    for synced in made:
        await bounded(synced.stop())


async def started(synced: SyncedCache) -> SyncedCache:
    await synced.start(timeout=STEP)
    return synced


# ---------------------------------------------------------------------------------------------
# 1. Revision selection (§6.2)


@dataclass(frozen=True, slots=True)
class History:
    """p00..p03 written one by one (``revisions``), then p01 modified, p00 deleted and p04
    added: ``pinned`` is the revision before those writes, ``latest`` after them."""

    revisions: list[int]
    pinned: int
    latest: int


async def make_history(client: EtcdClient) -> History:
    revisions = await seed(client, 4)
    await put_pod(client, "p01", {"v": "2"})
    await delete_pod(client, "p00")
    await put_pod(client, "p04")
    return History(revisions, revisions[-1], await current(client))


PINNED_NAMES = ["a/p00", "a/p01", "a/p02", "a/p03"]
LATEST_NAMES = ["a/p01", "a/p02", "a/p03", "a/p04"]


@pytest.mark.parametrize(
    ("make_opts", "pinned"),
    [
        (lambda h: ListOptions(resource_version=str(h.pinned), resource_version_match=EXACT), True),
        (lambda h: ListOptions(resource_version=str(h.pinned), limit=100), True),
        (lambda h: ListOptions(), False),
        (lambda h: ListOptions(resource_version="0"), False),
        (lambda h: ListOptions(resource_version="0", limit=100), False),
        (
            lambda h: ListOptions(
                resource_version=str(h.revisions[1]), resource_version_match=NOT_OLDER_THAN
            ),
            False,
        ),
        (lambda h: ListOptions(resource_version="0", resource_version_match=NOT_OLDER_THAN), False),
        (lambda h: ListOptions(resource_version=str(h.revisions[1])), False),
    ],
    ids=[
        "exact-N-pinned",
        "legacy-exact-N-with-limit-pinned",
        "unset-latest",
        "rv0-latest",
        "rv0-with-limit-latest",
        "not-older-than-N-latest",
        "not-older-than-0-latest",
        "N-without-limit-latest",
    ],
)
async def test_revision_selection(
    client: EtcdClient, store: EtcdStore, make_opts: Callable[[History], ListOptions], pinned: bool
) -> None:
    history = await make_history(client)
    result = await store_list(store, make_opts(history))
    assert result.source is Source.STORE
    assert store.ranges == 1
    assert (result.continue_token, result.remaining_item_count) == ("", None)
    if pinned:
        # Contents as of N although p00 was deleted, p01 changed and p04 added since.
        assert result.resource_version == history.pinned
        assert names(result.items) == PINNED_NAMES
        assert [item.mod_revision for item in result.items] == history.revisions
        assert [rv_of(item.value) for item in result.items] == history.revisions
        assert "labels" not in result.items[1].value.decode()
    else:
        assert result.resource_version == history.latest
        assert names(result.items) == LATEST_NAMES
        assert result.items[0].labels == {"v": "2"}


@pytest.mark.parametrize(
    ("make_opts", "ranges"),
    [
        (
            lambda n: ListOptions(resource_version=str(n), resource_version_match=NOT_OLDER_THAN),
            1,
        ),
        (lambda n: ListOptions(resource_version=str(n)), 1),
        # Pinned reads: etcd refuses the future revision (ErrFutureRev); the current
        # revision in the message comes from a fresh one-key read.
        (lambda n: ListOptions(resource_version=str(n), resource_version_match=EXACT), 0),
        (lambda n: ListOptions(resource_version=str(n), limit=1), 0),
    ],
    ids=["not-older-than-N", "N-without-limit", "exact-N", "legacy-exact-N"],
)
async def test_future_revision_is_504_too_large(
    client: EtcdClient, store: EtcdStore, make_opts: Callable[[int], ListOptions], ranges: int
) -> None:
    history = await make_history(client)
    future = history.latest + 5
    with pytest.raises(TooLargeResourceVersionError) as info:
        await store_list(store, make_opts(future))
    error = info.value
    assert (error.code, error.reason) == (504, "Timeout")
    assert (
        error.message == f"Timeout: Too large resource version: {future}, current: {history.latest}"
    )
    assert (error.minimum, error.current) == (future, history.latest)
    # etcd's 504s carry retry 0: no Retry-After header (§3.3).
    assert error.retry_after_seconds == 0
    assert error.headers() == {}
    assert [cause.reason for cause in error.details.causes] == ["ResourceVersionTooLarge"]
    assert store.ranges == ranges


# ---------------------------------------------------------------------------------------------
# 2. Paging (§6.3, §6.4)


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 7, 0])
async def test_unfiltered_pages_are_one_range_each_with_remaining_item_count(
    client: EtcdClient, store: EtcdStore, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    await seed(client, 5)
    revision = await current(client)
    calls = record_ranges(monkeypatch, client)
    opts = ListOptions(limit=limit)
    seen: list[str] = []
    start = PREFIX.encode()  # where the next page must start
    while True:
        result = await store_list(store, opts)
        seen += names(result.items)
        assert result.resource_version == revision
        # One Range per page (nothing is filtered out): the first at the latest revision,
        # the others at the token's pinned one, each from the token's start key.
        assert calls[-1] == RangeCall(start, limit, revision if len(calls) > 1 else 0)
        if len(seen) == 5:
            assert (result.continue_token, result.remaining_item_count) == ("", None)
            break
        assert len(result.items) == limit
        last_key = result.items[-1].key
        token = parse_continue(result.continue_token)
        # Relative to "/registry/pods/": no leading slash; the next key after the last one.
        assert (token.resource_version, token.start) == (revision, f"{seen[-1]}\x00")
        assert decode_continue(result.continue_token, PREFIX) == (last_key + "\x00", revision)
        assert result.remaining_item_count == 5 - len(seen)  # keys after this page
        opts = then(opts, result.continue_token)
        start = last_key.encode() + b"\0"
    assert seen == [f"a/p{i:02d}" for i in range(5)]
    assert len(calls) == (-(-5 // limit) if limit else 1)


async def test_a_continuation_reads_its_pinned_revision_after_writes_and_deletes(
    client: EtcdClient, store: EtcdStore
) -> None:
    await seed(client, 5)
    at_first_page = await store_list(store, ListOptions())
    first = await store_list(store, ListOptions(limit=2))
    revision = first.resource_version
    await delete_pod(client, "p02")
    await put_pod(client, "p03", {"changed": "yes"})
    await put_pod(client, "p02a")
    await put_pod(client, "p09")
    ranges = store.ranges
    rest = await store_list(store, then(ListOptions(limit=10), first.continue_token))
    assert store.ranges == ranges + 1
    assert rest.resource_version == revision
    assert contents(rest.items) == contents(at_first_page.items)[2:]
    assert (rest.continue_token, rest.remaining_item_count) == ("", None)
    # The latest state is different indeed.
    latest = await store_list(store, ListOptions())
    assert names(latest.items) == ["a/p00", "a/p01", "a/p02a", "a/p03", "a/p04", "a/p09"]


@dataclass(frozen=True, slots=True)
class FilteredRow:
    matching: frozenset[int]  # indexes of a/p00..a/p08 labelled app=x
    limit: int
    range_limits: list[int]  # the page size of each internal Range
    selected: list[int]
    next_start: int | None  # index of the last examined key the token points after


FILTERED_ROWS = {
    # Only the last of 9 keys matches: 1 + 2 + 4 + 8 keys read.
    "only-last-matches": FilteredRow(frozenset({8}), 1, [1, 2, 4, 8], [8], None),
    # The third internal page fills the request in its middle: more keys follow.
    "fills-mid-page": FilteredRow(frozenset({3, 8}), 1, [1, 2, 4], [3], 3),
    # Filled by the last key of an internal page while etcd has more: still a token.
    "fills-on-page-end": FilteredRow(frozenset({2, 8}), 1, [1, 2], [2], 2),
    "limit-2": FilteredRow(frozenset({1, 6}), 2, [2, 4, 8], [1, 6], 6),
    "nothing-matches": FilteredRow(frozenset(), 3, [3, 6], [], None),
    # A selector that filters nothing is still a selector: no remainingItemCount.
    "all-match": FilteredRow(frozenset(range(9)), 3, [3], [0, 1, 2], 2),
}


@pytest.mark.parametrize("row", FILTERED_ROWS.values(), ids=FILTERED_ROWS.keys())
async def test_a_filtering_selector_over_fetches_with_doubling_pages(
    client: EtcdClient, store: EtcdStore, monkeypatch: pytest.MonkeyPatch, row: FilteredRow
) -> None:
    await seed(client, 9, lambda i: {"app": "x" if i in row.matching else "y"})
    revision = await current(client)
    calls = record_ranges(monkeypatch, client)
    opts = ListOptions(limit=row.limit, label_selector="app=x")
    result = await store_list(store, opts)
    assert [call.limit for call in calls] == row.range_limits
    # One revision for the whole request: the first Range's header pins the others.
    assert [call.revision for call in calls] == [0] + [revision] * (len(calls) - 1)
    assert result.resource_version == revision
    assert names(result.items) == [f"a/p{i:02d}" for i in row.selected]
    assert result.remaining_item_count is None
    if row.next_start is None:
        assert result.continue_token == ""
        return
    token = parse_continue(result.continue_token)
    assert (token.resource_version, token.start) == (revision, f"a/p{row.next_start:02d}\x00")
    # The rest, page by page at the same revision, ends with exactly the matching keys.
    selected = names(result.items)
    while result.continue_token:
        result = await store_list(store, then(opts, result.continue_token))
        assert result.resource_version == revision
        assert result.remaining_item_count is None
        selected += names(result.items)
    assert selected == [f"a/p{i:02d}" for i in sorted(row.matching)]
    assert {call.revision for call in calls[len(row.range_limits) :]} == {revision}


async def test_doubling_stops_at_10000_and_a_larger_limit_is_never_changed(
    client: EtcdClient, store: EtcdStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = MAX_PAGE + 2
    await bulk_seed(client, count, matching=count - 1)
    calls = record_ranges(monkeypatch, client)
    for limit, range_limits in ((6000, [6000, MAX_PAGE]), (MAX_PAGE + 1, [MAX_PAGE + 1] * 2)):
        calls.clear()
        result = await store_list(store, ListOptions(limit=limit, label_selector="app=x"))
        assert [call.limit for call in calls] == range_limits
        assert names(result.items) == [f"a/p{count - 1:05d}"]
        assert (result.continue_token, result.remaining_item_count) == ("", None)


async def test_a_list_reads_under_the_request_deadline_not_the_per_call_default(
    client: EtcdClient, store: EtcdStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await seed(client, 9, lambda i: {"app": "x" if i == 8 else "y"})
    timeouts: list[float] = []
    original = client.range

    async def range_(key: bytes, range_end: bytes = b"", **options: Any) -> Any:
        timeouts.append(options["timeout"])
        return await original(key, range_end, **options)

    monkeypatch.setattr(client, "range", range_)
    # A per-call default no Range can meet: the LIST's Ranges must not use it.
    client.timeout = 1e-6
    result = await store_list(store, ListOptions(limit=2, label_selector="app=x"))
    assert names(result.items) == ["a/p08"]
    assert len(timeouts) > 1
    # One deadline for the whole request: each internal page gets what is left of it.
    assert LIST_TIMEOUT_SECONDS - 5 < timeouts[-1] <= timeouts[0] <= LIST_TIMEOUT_SECONDS


# ---------------------------------------------------------------------------------------------
# 3. Compaction (§1.7, §6.5)


async def test_a_compacted_continuation_is_410_with_a_token_to_continue_at_latest(
    client: EtcdClient, store: EtcdStore
) -> None:
    await seed(client, 5)
    first = await store_list(store, ListOptions(limit=2))
    await put_pod(client, "p02", {"changed": "yes"})
    await delete_pod(client, "p03")
    await put_pod(client, "p05")
    await compact_everything(client)
    with pytest.raises(ExpiredError) as info:
        await store_list(store, then(ListOptions(limit=2), first.continue_token))
    error = info.value
    assert (error.code, error.reason) == (410, "Expired")
    assert error.message == INCONSISTENT_CONTINUE_MESSAGE
    token = parse_continue(error.continue_token)
    assert (token.resource_version, token.start) == (-1, "a/p01\x00")
    assert decode_continue(error.continue_token, PREFIX) == (pod_key("a", "p01") + "\x00", -1)
    assert error.status()["metadata"] == {"continue": error.continue_token}
    # rv -1 reads the latest revision (inconsistent with the first page, as announced),
    # and the list carries on at that new revision.
    latest = await current(client)
    opts = then(ListOptions(limit=2), error.continue_token)
    assert store_request(opts).revision == 0
    second = await store_list(store, opts)
    assert second.resource_version == latest > first.resource_version
    assert names(second.items) == ["a/p02", "a/p04"]
    assert second.items[0].labels == {"changed": "yes"}
    assert second.remaining_item_count == 1
    assert parse_continue(second.continue_token).resource_version == latest
    third = await store_list(store, then(opts, second.continue_token))
    assert (names(third.items), third.resource_version, third.continue_token) == (
        ["a/p05"],
        latest,
        "",
    )


@pytest.mark.parametrize(
    "make_opts",
    [
        lambda n: ListOptions(resource_version=str(n), resource_version_match=EXACT),
        lambda n: ListOptions(resource_version=str(n), limit=2),
    ],
    ids=["exact-N", "legacy-exact-N"],
)
async def test_a_pinned_read_at_a_compacted_revision_is_410_too_old(
    client: EtcdClient, store: EtcdStore, make_opts: Callable[[int], ListOptions]
) -> None:
    revisions = await seed(client, 3)
    await compact_everything(client)
    with pytest.raises(ExpiredError) as info:
        await store_list(store, make_opts(revisions[1]))
    assert (info.value.code, info.value.reason) == (410, "Expired")
    assert info.value.message == EXPIRED_LIST_MESSAGE
    assert info.value.continue_token == ""


@pytest.mark.parametrize("continued", [False, True], ids=["first-page", "continuation"])
async def test_compaction_between_internal_pages_of_one_request(
    client: EtcdClient, store: EtcdStore, monkeypatch: pytest.MonkeyPatch, continued: bool
) -> None:
    """§10 item 7: the revision is pinned after the first internal page; compacted before
    the second, the request fails — with a client token, the rv -1 token resumes at the
    failing internal page, so earlier matches of this request would be skipped."""
    await seed(client, 9, lambda i: {"app": "x" if i in (2, 8) else "y"})
    opts = ListOptions(limit=1, label_selector="app=x")
    if continued:
        first = await store_list(store, opts)
        assert names(first.items) == ["a/p02"]
        opts = then(opts, first.continue_token)

    async def compact_before_second_range(n: int) -> None:
        if n == 1:
            await compact_everything(client)

    calls = record_ranges(monkeypatch, client, compact_before_second_range)
    with pytest.raises(ExpiredError) as info:
        await store_list(store, opts)
    assert len(calls) == 2
    error = info.value
    assert error.code == 410
    if not continued:
        assert (error.message, error.continue_token) == (EXPIRED_LIST_MESSAGE, "")
        return
    # Continued after a/p02: the first internal page read a/p03 (no match), the failing
    # second one started after it — and so does the token, not at the client's start.
    assert calls[1].start == pod_key("a", "p03").encode() + b"\0"
    assert error.message == INCONSISTENT_CONTINUE_MESSAGE
    token = parse_continue(error.continue_token)
    assert (token.resource_version, token.start) == (-1, "a/p03\x00")


# ---------------------------------------------------------------------------------------------
# 4. Undecodable values (§6.3 step 3)


async def test_an_undecodable_value_aborts_a_store_list_while_the_reflector_skips_it(
    client: EtcdClient, store: EtcdStore, synced_caches: Callable[..., SyncedCache]
) -> None:
    await put_pod(client, "p00")
    await bounded(client.put(pod_key("a", "p01").encode(), b"not json"))
    await put_pod(client, "p02")
    bad = f"cannot decode the object at {pod_key('a', 'p01')!r}"

    with pytest.raises(InternalError) as info:
        await store_list(store, ListOptions())
    assert (info.value.code, info.value.reason) == (500, "InternalError")
    assert info.value.message.startswith(f"Internal error occurred: {bad}: not JSON")
    # Only examined keys are decoded: a page that ends before it is served...
    first = await store_list(store, ListOptions(limit=1))
    assert names(first.items) == ["a/p00"]
    # ...and the page that reaches it fails.
    with pytest.raises(InternalError):
        await store_list(store, then(ListOptions(limit=1), first.continue_token))

    synced = await started(synced_caches(mode=ConsistentReadsMode.OFF))
    assert synced.reflector.stats.decode_errors == 1
    cached = await bounded(synced.cache.list(ListOptions(resource_version="0")))
    assert (cached.source, names(cached.items)) == (Source.CACHE, ["a/p00", "a/p02"])
    # The same cache's store route (consistent reads off) aborts as Kubernetes does.
    with pytest.raises(InternalError, match="cannot decode the object"):
        await bounded(synced.cache.list(ListOptions()))


# ---------------------------------------------------------------------------------------------
# 5. The store rows of WatchCache.list, end to end


async def test_a_cache_token_continues_on_etcd_once_no_snapshot_holds_its_rv(
    client: EtcdClient, synced_caches: Callable[..., SyncedCache]
) -> None:
    await seed(client, 6)
    one = await started(synced_caches())
    first = await bounded(one.cache.list(ListOptions(limit=2)))
    assert first.source is Source.CACHE
    revision = first.resource_version
    # The cacher's token is relative to the prefix without "/": start has a leading "/".
    assert parse_continue(first.continue_token).start == "/a/p01\x00"
    await put_pod(client, "p02", {"changed": "yes"})
    await delete_pod(client, "p03")
    await put_pod(client, "p02a")
    two = await started(synced_caches())
    assert two.cache.registry.floor(revision) is None  # listed after the writes
    assert not two.cache.can_serve_exact(revision)

    opts = then(ListOptions(limit=2), first.continue_token)
    via_etcd = await bounded(two.cache.list(opts))
    via_snapshot = await bounded(one.cache.list(opts))
    assert (via_etcd.source, via_etcd.row) == (Source.STORE, "C1a")
    assert (via_snapshot.source, via_snapshot.row) == (Source.SNAPSHOT, "C1a")
    assert two.store.lists == 1
    assert_same_page(via_snapshot, via_etcd)
    assert names(via_etcd.items) == ["a/p02", "a/p03"]  # as of the first page
    assert "changed" not in via_etcd.items[0].value.decode()
    assert via_etcd.remaining_item_count == 2

    # The etcd token continues in either cache; both end the list the same way.
    last_etcd = await bounded(two.cache.list(then(opts, via_etcd.continue_token)))
    last_snapshot = await bounded(one.cache.list(then(opts, via_etcd.continue_token)))
    assert (last_etcd.source, last_snapshot.source) == (Source.STORE, Source.SNAPSHOT)
    assert_same_page(last_snapshot, last_etcd)
    assert names(last_etcd.items) == ["a/p04", "a/p05"]
    assert (last_etcd.continue_token, last_etcd.resource_version) == ("", revision)


async def test_consistent_reads_off_are_served_by_etcd(
    client: EtcdClient, synced_caches: Callable[..., SyncedCache]
) -> None:
    await seed(client, 3)
    synced = await started(synced_caches(mode=ConsistentReadsMode.OFF))
    assert not synced.store.consistent_reads_supported
    written = await put_pod(client, "p03")
    result = await bounded(synced.cache.list(ListOptions(limit=2)))
    assert (result.source, result.row, result.fallback) == (Source.STORE, "C3", "")
    assert result.resource_version == written == await current(client)
    assert names(result.items) == ["a/p00", "a/p01"]
    assert result.remaining_item_count == 2
    token = parse_continue(result.continue_token)
    assert (token.resource_version, token.start) == (written, "a/p01\x00")  # etcd's form
    assert synced.store.lists == 1
    assert synced.requester.requests_sent == 0
    assert synced.cache.stats.consistent_reads == {}
    # The etcd token continues from the cache's snapshot once the cache has that rv.
    await bounded(synced.cache.wait_for_rv(written))
    rest = await bounded(synced.cache.list(then(ListOptions(limit=2), result.continue_token)))
    assert (rest.source, names(rest.items), rest.resource_version) == (
        Source.SNAPSHOT,
        ["a/p02", "a/p03"],
        written,
    )
    assert synced.store.lists == 1


@pytest.mark.parametrize("skip_fallback", [False, True], ids=["fallback", "skip-fallback"])
async def test_a_consistent_read_that_times_out(
    client: EtcdClient, synced_caches: Callable[..., SyncedCache], skip_fallback: bool
) -> None:
    await seed(client, 2)
    synced = await started(synced_caches(wait_timeout=0.05, skip_consistent_fallback=skip_fallback))
    assert synced.store.consistent_reads_supported  # etcd 3.5.16 passes the safeguard
    await bounded(synced.reflector.stop())  # the cache can no longer catch up
    cache_rv = synced.cache.resource_version
    written = await put_pod(client, "p02")
    if skip_fallback:
        with pytest.raises(TooManyRequestsError) as info:
            await bounded(synced.cache.list(ListOptions()))
        error = info.value
        assert (error.code, error.retry_after_seconds) == (429, 1)
        assert (
            error.message == f"Timeout: Too large resource version: {written}, current: {cache_rv}"
        )
        assert error.headers() == {"Retry-After": "1"}
        assert synced.store.lists == 0
        assert synced.cache.stats.consistent_reads == {(False, "skipped"): 1}
        return
    result = await bounded(synced.cache.list(ListOptions()))
    assert (result.source, result.row, result.fallback) == (Source.STORE, "C3", "true")
    assert result.resource_version == written
    assert names(result.items) == ["a/p00", "a/p01", "a/p02"]
    assert synced.store.lists == 1
    assert synced.cache.stats.consistent_reads == {(True, "true"): 1}
    assert synced.cache.resource_version == cache_rv


# ---------------------------------------------------------------------------------------------
# 6. Cache and store agree on the same request at the same rv


def assert_same_page(cached: ListResult, stored: ListResult) -> None:
    assert contents(cached.items) == contents(stored.items)
    assert cached.resource_version == stored.resource_version
    assert cached.remaining_item_count == stored.remaining_item_count
    assert bool(cached.continue_token) == bool(stored.continue_token)
    if cached.continue_token:
        # Textually different (§1.4), the same position and rv once decoded.
        assert decode_continue(cached.continue_token, PREFIX) == decode_continue(
            stored.continue_token, PREFIX
        )
        assert parse_continue(cached.continue_token).start.startswith("/")
        assert not parse_continue(stored.continue_token).start.startswith("/")


@dataclass(frozen=True, slots=True)
class AgreementRow:
    mode: str  # "exact": Exact at the cache's rv, then writes; "consistent": RV unset
    limit: int
    expected: tuple[int, ...]  # the pods a/p00..a/p09 the whole list returns
    labels: str = ""
    fields: str = ""


ALL = tuple(range(10))
APP_X = (1, 2, 5, 8, 9)
NODE_N1 = (0, 3, 4, 9)


AGREEMENT_ROWS = {
    "exact-limit-3": AgreementRow("exact", 3, ALL),
    "exact-limit-2-labels": AgreementRow("exact", 2, APP_X, "app=x"),
    "exact-limit-1-labels": AgreementRow("exact", 1, APP_X, "app=x"),
    "exact-no-limit-labels": AgreementRow("exact", 0, APP_X, "app=x"),
    "exact-limit-2-fields": AgreementRow("exact", 2, NODE_N1, fields="spec.nodeName=n1"),
    "consistent-limit-4": AgreementRow("consistent", 4, ALL),
    "consistent-limit-2-labels": AgreementRow(
        "consistent", 2, tuple(i for i in ALL if i not in APP_X), "app!=x"
    ),
}


@pytest.mark.parametrize("row", AGREEMENT_ROWS.values(), ids=AGREEMENT_ROWS.keys())
async def test_cache_and_store_answer_the_same_request_at_the_same_rv_alike(
    client: EtcdClient, synced_caches: Callable[..., SyncedCache], row: AgreementRow
) -> None:
    mode, limit, labels, fields = row.mode, row.limit, row.labels, row.fields
    for i in range(10):
        node = "n1" if i in NODE_N1 else ""
        value = pod_value("a", f"p{i:02d}", labels={"app": "x" if i in APP_X else "y"}, node=node)
        await bounded(client.put(pod_key("a", f"p{i:02d}").encode(), value))
    synced = await started(synced_caches())
    revision = synced.cache.resource_version
    opts = ListOptions(limit=limit, label_selector=labels, field_selector=fields)
    if mode == "exact":
        opts = ListOptions(
            resource_version=str(revision),
            resource_version_match=EXACT,
            limit=limit,
            label_selector=labels,
            field_selector=fields,
        )
        # Later writes: both must still answer as of the revision.
        await put_pod(client, "p03", {"app": "x"})
        await delete_pod(client, "p05")
        await put_pod(client, "p04a", {"app": "x"})
    cache_opts = store_opts = opts
    pages = 0
    listed: list[str] = []
    while True:
        cached = await bounded(synced.cache.list(cache_opts))
        stored = await store_list(synced.store, store_opts)
        pages += 1
        assert cached.source is (
            Source.CACHE if pages == 1 and mode == "consistent" else Source.SNAPSHOT
        )
        assert stored.source is Source.STORE
        assert cached.resource_version == revision
        assert_same_page(cached, stored)
        listed += names(cached.items)
        if not cached.continue_token:
            break
        cache_opts = then(opts, cached.continue_token)
        store_opts = then(opts, stored.continue_token)
    assert listed == [f"a/p{i:02d}" for i in row.expected]
    assert pages >= (2 if limit else 1)
    assert synced.store.lists == pages  # only the direct store calls
