"""The official ``kubernetes`` Python client (37.x), unchanged, against the apiserver:
paging under concurrent writes, watch with bookmarks and resume, the 410 of an expired
continue token, and the errors the client turns into ``ApiException`` (docs/clients.md §3).

The client is synchronous: every call runs in a thread (``asyncio.to_thread``) while the
server keeps serving in the test's event loop, and every call is bounded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from apiserver_fixture import RunningApiServer, running_apiserver
from http_recorder import RecordingProxy
from k8s_client import REQUEST_TIMEOUT, call, namespaced_name
from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from watchcache.cli.load import load_objects
from watchcache.etcd.process import EtcdCluster
from watchcache.registry.resources import CONFIGMAPS

RegistryState = Callable[[], Awaitable[dict[bytes, int]]]

COUNT = 300
NAMESPACES = 4


def configmap(name: str, **data: str) -> k8s.V1ConfigMap:
    # As users build them: no kind/apiVersion (the server defaults them).
    return k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=name, labels={"app": "e2e"}), data=data)


async def create_namespace(core_v1: k8s.CoreV1Api, name: str) -> None:
    body = k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name))
    await call(core_v1.create_namespace, body, _request_timeout=REQUEST_TIMEOUT)


async def create(core_v1: k8s.CoreV1Api, namespace: str, name: str, **data: str) -> k8s.V1ConfigMap:
    return await call(
        core_v1.create_namespaced_config_map,
        namespace,
        configmap(name, **data),
        _request_timeout=REQUEST_TIMEOUT,
    )


def status_body(error: ApiException) -> dict[str, Any]:
    assert error.body, error
    body: dict[str, Any] = json.loads(error.body)
    assert body["kind"] == "Status" and body["code"] == error.status
    return body


# -- paging ---------------------------------------------------------------------------------


async def test_paging_collects_everything_while_writes_go_on(
    api: RunningApiServer, core_v1: k8s.CoreV1Api, http: httpx.AsyncClient
) -> None:
    await asyncio.wait_for(
        load_objects(api.client, CONFIGMAPS, count=COUNT, size=256, namespaces=NAMESPACES), 60
    )
    await create_namespace(core_v1, "e2e-churn")
    start = await asyncio.wait_for(api.client.range_prefix(CONFIGMAPS.prefix.encode()), 10)
    initial = sorted(
        (obj["metadata"]["namespace"], obj["metadata"]["name"])
        for obj in (json.loads(kv.value) for kv in start.kvs)
    )
    assert len(initial) >= COUNT
    victims = iter(initial[::5])
    background_victims = iter(initial[2::5])
    deleted: set[tuple[str, str]] = set()
    created: set[tuple[str, str]] = set()
    stop = asyncio.Event()

    async def write_all_the_time() -> None:
        # Another client (HTTP) writes concurrently with the pages being served.
        while not stop.is_set():
            name = f"bg-{len(created)}"
            response = await http.post(
                "/api/v1/namespaces/e2e-churn/configmaps", json={"metadata": {"name": name}}
            )
            assert response.status_code == 201, response.text
            created.add(("e2e-churn", name))
            victim = next(background_victims, None)
            if victim is not None:
                response = await http.delete(
                    f"/api/v1/namespaces/{victim[0]}/configmaps/{victim[1]}"
                )
                assert response.status_code == 200, response.text
                deleted.add(victim)

    pages: list[list[tuple[str, str]]] = []
    first_rv = ""
    token: str | None = None
    background: asyncio.Task[None] | None = None
    try:
        while True:
            page = await call(
                core_v1.list_config_map_for_all_namespaces,
                limit=40,
                _continue=token,
                _request_timeout=REQUEST_TIMEOUT,
            )
            assert page.metadata is not None
            names = [namespaced_name(item) for item in page.items]
            assert len(names) == len(set(names))
            first_rv = first_rv or str(page.metadata.resource_version)
            assert page.metadata.resource_version == first_rv
            pages.append(names)
            token = page.metadata.var_continue
            if not token:
                break
            if background is None:
                background = asyncio.create_task(write_all_the_time())
            # And between pages, for certain, the Python client creates, deletes and
            # changes objects.
            name = f"churn-{len(pages)}"
            await create(core_v1, "e2e-churn", name, k="v")
            created.add(("e2e-churn", name))
            victim = next(victims)
            await call(
                core_v1.delete_namespaced_config_map,
                victim[1],
                victim[0],
                _request_timeout=REQUEST_TIMEOUT,
            )
            deleted.add(victim)
            changed = next(victims)
            await call(
                core_v1.patch_namespaced_config_map,
                changed[1],
                changed[0],
                {"data": {"payload": "changed"}},
                _request_timeout=REQUEST_TIMEOUT,
            )
    finally:
        stop.set()
        if background is not None:
            await asyncio.wait_for(background, 10)

    assert len(pages) > 5
    assert any(name.startswith("bg-") for _, name in created)
    seen = [name for page in pages for name in page]
    assert len(seen) == len(set(seen)), "an object was served twice"
    # Everything that existed at the start: those never deleted and those deleted after
    # the first page (the pages are one snapshot), and nothing created after it.
    assert set(initial) - deleted <= set(seen)
    assert deleted <= set(seen)
    assert not created & set(seen)
    # Exactly the state etcd had at the list's resourceVersion.
    at_rv = await asyncio.wait_for(
        api.client.range_prefix(CONFIGMAPS.prefix.encode(), revision=int(first_rv), keys_only=True),
        10,
    )
    assert sorted(seen) == sorted(
        tuple(kv.key.decode().removeprefix(CONFIGMAPS.prefix).split("/")) for kv in at_rv.kvs
    )


async def test_a_large_list_arrives_whole_whatever_its_framing(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    """A LIST above 128 KiB is streamed in HTTP chunks (apiserver/streaming.py), gzipped if
    the client asks for it: the client reads every object whole either way, by default and
    with ``Accept-Encoding: gzip`` set on its ApiClient. A recording proxy between the two
    shows what crossed the wire."""
    namespace, size = "e2e-large", 60_000
    response = await http.post("/api/v1/namespaces", json={"metadata": {"name": namespace}})
    assert response.status_code == 201, response.text
    for i in range(6):
        body = {"metadata": {"name": f"big-{i}"}, "data": {"blob": f"{i}" * size}}
        response = await http.post(f"/api/v1/namespaces/{namespace}/configmaps", json=body)
        assert response.status_code == 201, response.text
    host, port = api.url.removeprefix("http://").split(":")
    async with RecordingProxy(host, int(port)) as proxy:
        configuration = k8s.Configuration()
        configuration.host = proxy.url
        for extra in ({}, {"Accept-Encoding": "gzip"}):
            with k8s.ApiClient(configuration) as api_client:
                for name, value in extra.items():
                    api_client.set_default_header(name, value)
                listed = await call(
                    k8s.CoreV1Api(api_client).list_namespaced_config_map,
                    namespace,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            names = [namespaced_name(item)[1] for item in listed.items]
            assert names == [f"big-{i}" for i in range(6)]
            assert [(item.data or {}).get("blob") for item in listed.items] == [
                name[-1] * size for name in names
            ]
    plain, packed = proxy.answers_to(f"/api/v1/namespaces/{namespace}/configmaps")
    # The client sends no Accept-Encoding of its own (urllib3's default): a plain stream.
    assert "gzip" not in plain.request_headers.get("accept-encoding", "")
    assert plain.response_headers.get("transfer-encoding") == "chunked"
    assert "content-encoding" not in plain.response_headers
    assert plain.body_bytes > 6 * size
    assert packed.response_headers.get("content-encoding") == "gzip"
    assert packed.response_headers.get("transfer-encoding") == "chunked"
    assert 0 < packed.body_bytes < 6 * size / 4


async def test_an_expired_continue_token_is_a_410(
    etcd: EtcdCluster, api: RunningApiServer, core_v1: k8s.CoreV1Api
) -> None:
    await create_namespace(core_v1, "e2e-expire")
    for i in range(5):
        await create(core_v1, "e2e-expire", f"cm-{i}", k=str(i))
    page = await call(
        core_v1.list_namespaced_config_map,
        "e2e-expire",
        limit=2,
        _request_timeout=REQUEST_TIMEOUT,
    )
    assert page.metadata is not None and page.metadata.var_continue
    token = page.metadata.var_continue
    await create(core_v1, "e2e-expire", "cm-late", k="late")
    # etcd forgets the token's revision; a second apiserver (fresh caches, no snapshot that
    # old) must ask etcd for it and gets "compacted".
    revision = await asyncio.wait_for(api.client.current_revision(b"/registry/"), 10)
    await asyncio.wait_for(api.client.compact(revision), 10)
    async with running_apiserver(etcd.endpoints) as other:
        configuration = k8s.Configuration()
        configuration.host = other.url
        with k8s.ApiClient(configuration) as api_client:
            other_v1 = k8s.CoreV1Api(api_client)
            with pytest.raises(ApiException) as raised:
                await call(
                    other_v1.list_namespaced_config_map,
                    "e2e-expire",
                    limit=2,
                    _continue=token,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            # Relisting without the token works, as the client must do after a 410.
            relisted = await call(
                other_v1.list_namespaced_config_map,
                "e2e-expire",
                _request_timeout=REQUEST_TIMEOUT,
            )
    assert raised.value.status == 410
    body = status_body(raised.value)
    assert body["reason"] == "Expired"
    assert [i.metadata.name for i in relisted.items if i.metadata] == [
        "cm-0",
        "cm-1",
        "cm-2",
        "cm-3",
        "cm-4",
        "cm-late",
    ]


# -- watch ----------------------------------------------------------------------------------


async def watch_configmaps(
    core_v1: k8s.CoreV1Api,
    namespace: str,
    resource_version: str,
    timeout_seconds: int,
    *,
    sink: asyncio.Queue[dict[str, Any]] | None = None,
    until: Callable[[dict[str, Any]], bool] | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """``watch.Watch().stream`` in a thread: its events and ``resource_version`` at the end.
    Events also go to ``sink`` as they come; the watch stops after one that is ``until``."""
    loop = asyncio.get_running_loop()

    def consume() -> tuple[list[dict[str, Any]], str | None]:
        w = watch.Watch()  # type: ignore[no-untyped-call]
        events: list[dict[str, Any]] = []
        for event in w.stream(  # type: ignore[no-untyped-call]
            core_v1.list_namespaced_config_map,
            namespace=namespace,
            allow_watch_bookmarks=True,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            _request_timeout=(5.0, timeout_seconds + 10.0),
        ):
            events.append(event)
            if sink is not None:
                loop.call_soon_threadsafe(sink.put_nowait, event)
            if until is not None and until(event):
                w.stop()  # type: ignore[no-untyped-call]
        rv: str | None = w.resource_version
        return events, rv

    return await asyncio.wait_for(asyncio.to_thread(consume), timeout_seconds + 15)


def name_of(event: dict[str, Any]) -> str:
    name: str = event["raw_object"]["metadata"].get("name", "")
    return name


def rv_of(event: dict[str, Any]) -> int:
    return int(event["raw_object"]["metadata"]["resourceVersion"])


async def test_watch_events_bookmarks_and_resume(core_v1: k8s.CoreV1Api) -> None:
    namespace, elsewhere = "e2e-pywatch", "e2e-pywatch-other"
    await create_namespace(core_v1, namespace)
    await create_namespace(core_v1, elsewhere)
    listed = await call(
        core_v1.list_namespaced_config_map, namespace, _request_timeout=REQUEST_TIMEOUT
    )
    assert listed.metadata is not None and listed.metadata.resource_version
    sink: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    # The server ends the stream after timeoutSeconds; 2 s before, it sends a bookmark.
    stream = asyncio.create_task(
        watch_configmaps(core_v1, namespace, listed.metadata.resource_version, 4, sink=sink)
    )
    try:
        await create(core_v1, namespace, "w1", k="v")
        await call(
            core_v1.patch_namespaced_config_map,
            "w1",
            namespace,
            {"data": {"k": "v2"}},
            _request_timeout=REQUEST_TIMEOUT,
        )
        await call(
            core_v1.delete_namespaced_config_map, "w1", namespace, _request_timeout=REQUEST_TIMEOUT
        )

        async def until_deleted() -> None:
            while (await sink.get())["type"] != "DELETED":
                pass

        await asyncio.wait_for(until_deleted(), 10)
        # Writes this watch does not see move the cache on: that is what a bookmark reports.
        writes = 0

        async def write_until_bookmark() -> None:
            nonlocal writes
            while True:
                await create(core_v1, elsewhere, f"other-{writes}", k="v")
                writes += 1
                try:
                    event = await asyncio.wait_for(sink.get(), 0.2)
                except TimeoutError:
                    continue
                if event["type"] == "BOOKMARK":
                    return

        await asyncio.wait_for(write_until_bookmark(), 10)
        events, last_rv = await stream
    finally:
        if not stream.done():
            stream.cancel()

    changes = [e for e in events if e["type"] != "BOOKMARK"]
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert [(e["type"], name_of(e)) for e in changes] == [
        ("ADDED", "w1"),
        ("MODIFIED", "w1"),
        ("DELETED", "w1"),
    ]
    assert all(isinstance(e["object"], k8s.V1ConfigMap) for e in changes)
    assert changes[1]["object"].data == {"k": "v2"}
    rvs = [rv_of(e) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs)
    assert bookmarks and rv_of(bookmarks[0]) > rv_of(changes[-1])
    # Client 37 takes the last bookmark's resourceVersion as the resume point.
    assert last_rv == str(rv_of(events[-1]))

    # Resume from there: only what happened since, nothing seen before.
    await create(core_v1, namespace, "w2", k="v")
    await call(
        core_v1.delete_namespaced_config_map, "w2", namespace, _request_timeout=REQUEST_TIMEOUT
    )
    assert last_rv is not None
    resumed, _ = await watch_configmaps(
        core_v1, namespace, last_rv, 10, until=lambda e: e["type"] == "DELETED"
    )
    assert [(e["type"], name_of(e)) for e in resumed if e["type"] != "BOOKMARK"] == [
        ("ADDED", "w2"),
        ("DELETED", "w2"),
    ]
    assert all(rv_of(e) > int(last_rv) for e in resumed)


# -- writes and their errors ----------------------------------------------------------------


async def test_writes_and_conflicts(api: RunningApiServer, core_v1: k8s.CoreV1Api) -> None:
    namespace = "e2e-pywrite"
    await create_namespace(core_v1, namespace)
    created = await create(core_v1, namespace, "py1", a="1")
    assert created.kind == "ConfigMap" and created.metadata is not None
    assert created.metadata.namespace == namespace and created.metadata.uid
    key = f"/registry/configmaps/{namespace}/py1".encode()

    with pytest.raises(ApiException) as duplicate:
        await create(core_v1, namespace, "py1", a="again")
    assert duplicate.value.status == 409
    assert status_body(duplicate.value)["reason"] == "AlreadyExists"

    # Replace with the current resourceVersion works (and echoes creationTimestamp with
    # "+00:00", which the server must accept); with a stale one it is a 409 Conflict.
    created.data = {"a": "2"}
    replaced = await call(
        core_v1.replace_namespaced_config_map,
        "py1",
        namespace,
        created,
        _request_timeout=REQUEST_TIMEOUT,
    )
    assert replaced.data == {"a": "2"} and replaced.metadata is not None
    assert int(str(replaced.metadata.resource_version)) > int(
        str(created.metadata.resource_version)
    )
    assert replaced.metadata.uid == created.metadata.uid
    before = await asyncio.wait_for(api.client.get(key), 10)
    created.data = {"a": "stale"}
    with pytest.raises(ApiException) as stale:
        await call(
            core_v1.replace_namespaced_config_map,
            "py1",
            namespace,
            created,
            _request_timeout=REQUEST_TIMEOUT,
        )
    assert stale.value.status == 409
    assert status_body(stale.value)["reason"] == "Conflict"
    assert await asyncio.wait_for(api.client.get(key), 10) == before

    # A dict body is a strategic merge patch, a list body a JSON patch.
    merged = await call(
        core_v1.patch_namespaced_config_map,
        "py1",
        namespace,
        {"data": {"b": "3"}},
        _request_timeout=REQUEST_TIMEOUT,
    )
    assert merged.data == {"a": "2", "b": "3"}
    patched = await call(
        core_v1.patch_namespaced_config_map,
        "py1",
        namespace,
        [{"op": "add", "path": "/data/c", "value": "4"}, {"op": "remove", "path": "/data/a"}],
        _request_timeout=REQUEST_TIMEOUT,
    )
    assert patched.data == {"b": "3", "c": "4"}
    stored = await asyncio.wait_for(api.client.get(key), 10)
    assert stored is not None and json.loads(stored.value)["data"] == {"b": "3", "c": "4"}

    status = await call(
        core_v1.delete_namespaced_config_map, "py1", namespace, _request_timeout=REQUEST_TIMEOUT
    )
    assert isinstance(status, dict) and status["status"] == "Success"  # 37: a plain dict
    assert status["details"]["uid"] == created.metadata.uid
    assert await asyncio.wait_for(api.client.get(key), 10) is None
    with pytest.raises(ApiException) as missing:
        await call(
            core_v1.delete_namespaced_config_map,
            "py1",
            namespace,
            _request_timeout=REQUEST_TIMEOUT,
        )
    assert missing.value.status == 404
    assert status_body(missing.value)["message"] == 'configmaps "py1" not found'


# -- bad requests ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_kind", "status", "reason"),
    [
        ("garbage-continue", 400, "BadRequest"),
        ("bad-label-selector", 400, "BadRequest"),
        ("bad-field-selector", 400, "BadRequest"),
        ("invalid-name", 422, "Invalid"),
        ("name-mismatch", 400, "BadRequest"),
        ("missing-namespace", 404, "NotFound"),
        ("too-large", 413, "RequestEntityTooLarge"),
    ],
)
async def test_bad_requests_are_statuses_and_write_nothing(
    core_v1: k8s.CoreV1Api,
    registry_state: RegistryState,
    request_kind: str,
    status: int,
    reason: str,
) -> None:
    before = await registry_state()
    calls: dict[str, Callable[[], object]] = {
        "garbage-continue": lambda: core_v1.list_config_map_for_all_namespaces(
            limit=1, _continue="garbage", _request_timeout=REQUEST_TIMEOUT
        ),
        "bad-label-selector": lambda: core_v1.list_config_map_for_all_namespaces(
            label_selector="app in (a", _request_timeout=REQUEST_TIMEOUT
        ),
        "bad-field-selector": lambda: core_v1.list_namespaced_config_map(
            "default", field_selector="data.k=v", _request_timeout=REQUEST_TIMEOUT
        ),
        "invalid-name": lambda: core_v1.create_namespaced_config_map(
            "default", configmap("Not_A_Name"), _request_timeout=REQUEST_TIMEOUT
        ),
        "name-mismatch": lambda: core_v1.replace_namespaced_config_map(
            "one", "default", configmap("other"), _request_timeout=REQUEST_TIMEOUT
        ),
        "missing-namespace": lambda: core_v1.create_namespaced_config_map(
            "no-such-namespace", configmap("x"), _request_timeout=REQUEST_TIMEOUT
        ),
        "too-large": lambda: core_v1.create_namespaced_config_map(
            "default", configmap("big", k="x" * (4 << 20)), _request_timeout=REQUEST_TIMEOUT
        ),
    }
    with pytest.raises(ApiException) as raised:
        await call(calls[request_kind])
    assert raised.value.status == status
    assert status_body(raised.value)["reason"] == reason
    assert await registry_state() == before
