"""The lean read path (apiserver/app.py, LeanReads) answers exactly as the Starlette routes
do: every request is sent to both — the app ``ApiServer.app()`` returns, and the Starlette
app behind it — and status, headers and body must be equal. A counting wrapper around
the Starlette app shows which requests the lean path took (it must take the GETs and LISTs
it is meant for, else the comparison would compare Starlette with itself) and which it
passed on (subresources, Tables, watches, refusals before the read)."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import pytest

from watchcache._core import ScanResult
from watchcache.apiserver import streaming
from watchcache.apiserver.app import ApiServer, LeanReads
from watchcache.cache import watch_cache
from watchcache.cache.deferred_scan import DeferredScan
from watchcache.cli.load import load_objects
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster
from watchcache.registry.resources import CONFIGMAPS, DEFAULT_RESOURCES

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


@dataclass
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


class Counting:
    """An ASGI app that counts the requests it forwards."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.calls = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.calls += 1
        await self.app(scope, receive, send)


async def ask(
    app: Any,
    path: str,
    query: str | bytes = "",
    accept: str | None = "application/json",
    extra: tuple[tuple[bytes, bytes], ...] = (),
    *,
    log: list[str] | None = None,
) -> Answer:
    """One GET through ``app``; ``log`` gets "head" when the response starts."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query if isinstance(query, bytes) else query.encode(),
        "root_path": "",
        "headers": [(b"host", b"test")]
        + ([] if accept is None else [(b"accept", accept.encode("latin-1"))])
        + list(extra),
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 80),
    }
    start: dict[str, Any] = {}
    chunks: list[bytes] = []
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
            if log is not None:
                log.append("head")
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await asyncio.wait_for(app(scope, receive, send), 30)
    return Answer(start["status"], sorted(start.get("headers", [])), b"".join(chunks))


@dataclass
class Apps:
    server: ApiServer
    lean: LeanReads
    routed: Counting


@pytest.fixture
async def apps(etcd: EtcdCluster) -> AsyncIterator[Apps]:
    async with EtcdClient(etcd.endpoints) as client:
        server = ApiServer(client, DEFAULT_RESOURCES, wait_timeout=0.3)
        await server.start()
        try:
            app = server.app(manage_lifecycle=False)
            routed = Counting(app.routed)
            lean = LeanReads(server, routed)  # type: ignore[arg-type]
            for ns in ("a", "b"):
                await server.stores["namespaces"].create(
                    "", {"metadata": {"name": ns}}, dry_run=False, manager="test"
                )
                # Writes check the namespace in its cache: a consistent read waits for it.
                await ask(app, f"/api/v1/namespaces/{ns}")
                for i in range(3):
                    body = {
                        "metadata": {"name": f"c{i}", "labels": {"app": "x" if i else "y"}},
                        "data": {"k": str(i)},
                    }
                    created = await server.stores["configmaps"].create(
                        ns, body, dry_run=False, manager="test"
                    )
                    assert created
            # The caches have seen the writes once a consistent read answers with them.
            listed = await ask(lean, "/api/v1/namespaces/b/configmaps")
            assert json.loads(listed.body)["items"][-1]["metadata"]["name"] == "c2"
            yield Apps(server, lean, routed)
        finally:
            await server.stop()


async def same(
    apps: Apps,
    path: str,
    query: str | bytes = "",
    accept: str | None = "application/json",
    extra: tuple[tuple[bytes, bytes], ...] = (),
) -> tuple[Answer, bool]:
    """Ask both; return the answer and whether the lean path passed it on. A Table's Age
    cells are rendered from the clock, so a pair of asks that straddles a second can differ
    there (and in Content-Length): such a pair is asked again, up to twice; a real
    difference repeats."""
    for attempt in range(3):
        before = apps.routed.calls
        lean = await ask(apps.lean, path, query, accept, extra)
        passed_on = apps.routed.calls > before
        routed = await ask(apps.routed.app, path, query, accept, extra)
        got = (lean.status, lean.headers, lean.body)
        want = (routed.status, routed.headers, routed.body)
        if got == want or accept != TABLE or attempt == 2:
            break
    assert got == want, (path, query)
    return lean, passed_on


TAKEN: list[tuple[str, str | bytes]] = [
    ("/api/v1/namespaces/a/configmaps/c1", ""),
    ("/api/v1/namespaces/a/configmaps/c1", "resourceVersion=0"),
    ("/api/v1/namespaces/a/configmaps/c1", "resourceVersion=0&resourceVersion=junk"),
    ("/api/v1/namespaces/a/configmaps/c1", "resourceVersion=junk"),
    ("/api/v1/namespaces/a/configmaps/c1", "resourceVersion=99999999"),
    ("/api/v1/namespaces/a/configmaps/nope", ""),
    ("/api/v1/namespaces/nope/configmaps/c1", "resourceVersion=0"),
    ("/api/v1/namespaces/a", ""),
    ("/api/v1/namespaces", ""),
    ("/api/v1/namespaces/a/configmaps", ""),
    ("/api/v1/namespaces/a/configmaps", "resourceVersion=0"),
    ("/api/v1/configmaps", "labelSelector=app%3Dx&limit=1"),
    ("/api/v1/configmaps", "fieldSelector=metadata.namespace%3Db"),
    ("/api/v1/configmaps", "fieldSelector=spec.nodeName%3Dx"),
    ("/api/v1/configmaps", "limit=abc"),
    ("/api/v1/configmaps", "resourceVersionMatch=Exact"),
    ("/api/v1/configmaps", "continue=garbage"),
    ("/api/v1/configmaps", "labelSelector=%3D%3D%3D"),
    # Raw bytes in a query read as UTF-8 on both paths; an invalid one fails validation.
    ("/api/v1/configmaps", "labelSelector=app%3D\u00fc"),
    ("/api/v1/configmaps", b"labelSelector=app%3D\xff"),
    ("/api/v1/configmaps", b"fieldSelector=metadata.name%3D\xc3\xbc\xff"),
    ("/apis/coordination.k8s.io/v1/namespaces/a/leases", ""),
    ("/apis/coordination.k8s.io/v1/namespaces/a/leases/nope", ""),
]


@pytest.mark.parametrize(
    "accept", ["application/json", None, "*/*", "application/vnd.kubernetes.protobuf, */*"]
)
async def test_the_lean_path_answers_as_the_routes_do(apps: Apps, accept: str | None) -> None:
    for path, query in TAKEN:
        for _ in range(2):  # the second time from the lean path's memo of the query
            _, passed_on = await same(apps, path, query, accept)
            assert not passed_on, (path, query)


@pytest.mark.parametrize("accept", ["application/json", TABLE])
async def test_raw_bytes_in_a_query_are_read_as_utf8_and_fail_validation(
    apps: Apps, accept: str
) -> None:
    for query in (b"labelSelector=app%3D\xc3\xbc", b"labelSelector=app%3D\xff"):
        answer, _ = await same(apps, "/api/v1/configmaps", query, accept)
        assert answer.status == 400, (query, answer.body)
    answer, _ = await same(apps, "/api/v1/configmaps", b"labelSelector=app%3D\xc3\xbc", accept)
    assert "\u00fc" in json.loads(answer.body)["message"]


async def test_a_continue_token_from_the_lean_path_works_on_both(apps: Apps) -> None:
    first, _ = await same(apps, "/api/v1/configmaps", "limit=2")
    token = json.loads(first.body)["metadata"]["continue"]
    second, passed_on = await same(apps, "/api/v1/configmaps", f"limit=2&continue={token}")
    assert not passed_on
    assert [i["metadata"]["name"] for i in json.loads(second.body)["items"]] == ["c2", "c0"]


async def test_large_answers_are_streamed_and_gzipped_alike(apps: Apps) -> None:
    """LISTs above 128 KiB are sent in pieces, gzipped when asked (apiserver/streaming.py),
    and so are large objects: both routes send the same pieces, headers and bytes."""
    store = apps.server.stores["configmaps"]
    for i in range(150):
        body = {"metadata": {"name": f"big{i}"}, "data": {"k": "v" * 1500}}
        await store.create("a", body, dry_run=False, manager="test")
    huge = {"metadata": {"name": "huge"}, "data": {"k": "w" * 200_000}}
    await store.create("b", huge, dry_run=False, manager="test")
    listed = await ask(apps.lean, "/api/v1/namespaces/a/configmaps")  # consistent: waits
    assert len(json.loads(listed.body)["items"]) == 153
    gzip_ok = ((b"accept-encoding", b"gzip, deflate"),)
    for path, query in [
        ("/api/v1/namespaces/a/configmaps", ""),
        ("/api/v1/configmaps", "resourceVersion=0"),
        ("/api/v1/configmaps", "limit=100"),
        ("/api/v1/namespaces/b/configmaps/huge", ""),
    ]:
        for extra in ((), gzip_ok):
            answer, passed_on = await same(apps, path, query, extra=extra)
            assert not passed_on, (path, query)
            headers = dict(answer.headers)
            assert (headers.get(b"content-encoding") == b"gzip") is bool(extra), (path, extra)
        plain, _ = await same(apps, path, query)
        packed, _ = await same(apps, path, query, extra=gzip_ok)
        assert gzip.decompress(packed.body) == plain.body
    # Tables go through the routes only, and are gzipped there alike. The two Tables are
    # asked again, up to twice, when their Age cells straddle a second (see same()).
    for attempt in range(3):
        table, passed_on = await same(apps, "/api/v1/configmaps", "includeObject=Object", TABLE)
        assert passed_on
        packed, _ = await same(apps, "/api/v1/configmaps", "includeObject=Object", TABLE, gzip_ok)
        if gzip.decompress(packed.body) == table.body or attempt == 2:
            break
    assert gzip.decompress(packed.body) == table.body


async def test_a_list_large_by_its_count_alone_starts_before_its_scan(
    apps: Apps, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A LIST whose item count alone proves its body passes the gzip threshold (three bytes
    an item at least, ListResult.body_floor) sends its head before its items are scanned
    (cache/deferred_scan.py), from both routes, and the same items as a scan taken at once.
    The threshold and the deferral's are lowered (128 KiB and 16,384 items), so that the
    test needs 1,366 objects, not 43,691."""
    monkeypatch.setattr(streaming, "GZIP_THRESHOLD_BYTES", 4096)
    monkeypatch.setattr(watch_cache, "DEFERRED_SCAN_ITEMS", 1000)
    count = (streaming.GZIP_THRESHOLD_BYTES + 1) // 3 + 1
    await load_objects(apps.server.client, CONFIGMAPS, count=count, size=1)
    log: list[str] = []
    scan = DeferredScan.result

    def logged_scan(deferred: DeferredScan) -> ScanResult:
        # The server's controllers list configmaps too, in every namespace at once.
        if not deferred.ran and deferred.prefix.endswith("/demo-0/"):
            log.append("scan")
        return scan(deferred)

    monkeypatch.setattr(DeferredScan, "result", logged_scan)
    path = "/api/v1/namespaces/demo-0/configmaps"
    for _ in range(600):  # the cache receives the objects from its watch
        page = json.loads((await ask(apps.lean, path, "resourceVersion=0&limit=1")).body)
        if page["metadata"].get("remainingItemCount", 0) + 1 == count:
            break
        await asyncio.sleep(0.05)
    # What a scan taken at once answers (the rv may move on meanwhile: a progress
    # notification; the items may not).
    monkeypatch.setattr(watch_cache, "DEFERRED_SCAN_ITEMS", 1 << 30)
    at_once = await ask(apps.lean, path, "resourceVersion=0", log=log)
    assert log == ["head"], "a scan taken at once is not deferred"
    items = json.loads(at_once.body)["items"]
    assert len(items) == count
    monkeypatch.setattr(watch_cache, "DEFERRED_SCAN_ITEMS", 1000)
    gzip_ok = ((b"accept-encoding", b"gzip"),)
    for app in (apps.lean, apps.routed.app):
        for extra in ((), gzip_ok):
            log.clear()
            answer = await ask(app, path, "resourceVersion=0", extra=extra, log=log)
            assert log == ["head", "scan"], (app, extra)
            headers = dict(answer.headers)
            assert b"content-length" not in headers
            body = answer.body
            if extra:
                assert headers[b"content-encoding"] == b"gzip"
                body = gzip.decompress(body)
            assert json.loads(body)["items"] == items
    # Below the floor, the first pieces are rendered before the head, as before.
    log.clear()
    await ask(apps.lean, path, f"resourceVersion=0&limit={count - 1}", log=log)
    assert log == ["head"]


PASSED_ON = [
    ("/api/v1/namespaces/a/configmaps/c1", "", TABLE),
    ("/api/v1/namespaces/a/configmaps", "", TABLE),
    ("/api/v1/namespaces/a/configmaps", "includeObject=Object", TABLE),
    ("/api/v1/namespaces/a/configmaps/c1", "", "application/vnd.kubernetes.protobuf"),
    ("/api/v1/namespaces/a/status", "", "application/json"),
    ("/api/v1/namespaces/a/configmaps/", "", "application/json"),
    ("/api/v1/configmaps/c1", "", "application/json"),
    ("/api/v1/namespaces/a/namespaces", "", "application/json"),
    ("/api/v1/namespaces/a/nothing", "", "application/json"),
    ("/api/v1/namespaces/a/pods/p/status", "", "application/json"),
    ("/api/v1", "", "application/json"),
    ("/apis/coordination.k8s.io/v1", "", "application/json"),
    ("/healthz", "", "application/json"),
]


@pytest.mark.parametrize(("path", "query", "accept"), PASSED_ON)
async def test_what_the_lean_path_passes_on_is_answered_as_before(
    apps: Apps, path: str, query: str, accept: str
) -> None:
    _, passed_on = await same(apps, path, query, accept)
    assert passed_on


async def test_a_watch_is_passed_on(apps: Apps) -> None:
    before = apps.routed.calls
    task = asyncio.ensure_future(
        ask(apps.lean, "/api/v1/namespaces/a/configmaps", "watch=1&timeoutSeconds=1")
    )
    answer = await asyncio.wait_for(task, 30)
    assert answer.status == 200
    assert apps.routed.calls == before + 1


async def test_other_methods_and_mounted_apps_are_passed_on(apps: Apps) -> None:
    before = apps.routed.calls
    scope = {
        "type": "http",
        "method": "HEAD",
        "path": "/api/v1/namespaces/a/configmaps/c1",
        "root_path": "",
        "query_string": b"",
        "headers": [],
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    await apps.lean(scope, receive, send)
    await apps.lean(scope | {"method": "GET", "root_path": "/mounted"}, receive, send)
    assert apps.routed.calls == before + 2
