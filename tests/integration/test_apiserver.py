"""The apiserver over HTTP against real etcd: routes, status codes and bodies, and that a
rejected write leaves etcd unchanged."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from apiserver_fixture import RunningApiServer

JSON_HEADERS = {"Content-Type": "application/json"}
TABLE_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)


def configmap(name: str, namespace: str | None = "default", **data: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {"app": "a"}}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


async def create(
    http: httpx.AsyncClient, obj: dict[str, Any], ns: str = "default"
) -> httpx.Response:
    return await http.post(f"/api/v1/namespaces/{ns}/configmaps", json=obj)


async def etcd_keys(api: RunningApiServer) -> list[bytes]:
    response = await api.client.range_prefix(b"/registry/", keys_only=True)
    return [kv.key for kv in response.kvs]


def status_of(response: httpx.Response) -> tuple[int, str]:
    body = response.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1", body
    assert body["code"] == response.status_code
    return body["code"], body["reason"]


async def test_discovery_and_health(http: httpx.AsyncClient) -> None:
    api = (await http.get("/api")).json()
    assert api["kind"] == "APIVersions" and api["versions"] == ["v1"]
    assert (await http.get("/apis")).json()["kind"] == "APIGroupList"
    resources = {r["name"]: r for r in (await http.get("/api/v1")).json()["resources"]}
    assert resources["configmaps"]["shortNames"] == ["cm"]
    assert resources["namespaces"]["namespaced"] is False
    assert "gitVersion" in (await http.get("/version")).json()
    assert (await http.get("/healthz")).text == "ok"
    assert (await http.get("/readyz")).status_code == 200
    metrics = (await http.get("/metrics")).text
    assert 'watchcache_ready{group="",resource="configmaps"} 1' in metrics
    openapi = await http.get("/openapi/v2")
    assert openapi.headers["content-type"] == "application/json"
    assert "io.k8s.api.core.v1.ConfigMap" in openapi.json()["definitions"]
    protobuf = await http.get(
        "/openapi/v2",
        headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"},
    )
    assert protobuf.headers["content-type"] == (
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    )
    cached = await http.get("/openapi/v2", headers={"If-None-Match": openapi.headers["etag"]})
    assert cached.status_code == 304
    index = (await http.get("/openapi/v3")).json()
    assert set(index["paths"]) == {
        "api/v1",
        "apis/apiextensions.k8s.io/v1",
        "apis/coordination.k8s.io/v1",
        "apis/events.k8s.io/v1",
    }
    core = await http.get(index["paths"]["api/v1"]["serverRelativeURL"])
    assert core.headers["cache-control"] == "public, immutable"
    assert "io.k8s.api.core.v1.Pod" in core.json()["components"]["schemas"]


async def test_create_get_list_update_delete(http: httpx.AsyncClient) -> None:
    created = await create(http, configmap("one", k="v"))
    assert created.status_code == 201, created.text
    obj = created.json()
    meta = obj["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    rv = int(meta["resourceVersion"])

    got = (await http.get("/api/v1/namespaces/default/configmaps/one")).json()
    assert got == obj
    listed = (await http.get("/api/v1/namespaces/default/configmaps")).json()
    assert listed["kind"] == "ConfigMapList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["one"]
    assert int(listed["metadata"]["resourceVersion"]) >= rv

    obj["data"]["k"] = "v2"
    updated = await http.put("/api/v1/namespaces/default/configmaps/one", json=obj)
    assert updated.status_code == 200, updated.text
    assert int(updated.json()["metadata"]["resourceVersion"]) > rv
    assert updated.json()["metadata"]["uid"] == meta["uid"]

    stale = await http.put("/api/v1/namespaces/default/configmaps/one", json=obj)
    assert status_of(stale) == (409, "Conflict")

    deleted = await http.delete("/api/v1/namespaces/default/configmaps/one")
    assert deleted.status_code == 200
    assert deleted.json()["status"] == "Success"
    assert deleted.json()["details"]["uid"] == meta["uid"]
    gone = await http.get("/api/v1/namespaces/default/configmaps/one")
    assert status_of(gone) == (404, "NotFound")
    assert gone.json()["message"] == 'configmaps "one" not found'


async def test_paging_selectors_and_tables(http: httpx.AsyncClient) -> None:
    for i in range(7):
        obj = configmap(f"cm-{i}", k=str(i))
        obj["metadata"]["labels"] = {"app": "a" if i % 2 else "b"}
        assert (await create(http, obj)).status_code == 201
    names: list[str] = []
    token = ""
    while True:
        params = {"limit": "3", **({"continue": token} if token else {})}
        page = (await http.get("/api/v1/configmaps", params=params)).json()
        names += [i["metadata"]["name"] for i in page["items"]]
        token = page["metadata"].get("continue", "")
        if not token:
            break
    assert names == [f"cm-{i}" for i in range(7)]
    selected = (await http.get("/api/v1/configmaps", params={"labelSelector": "app=a"})).json()
    assert [i["metadata"]["name"] for i in selected["items"]] == ["cm-1", "cm-3", "cm-5"]
    by_name = await http.get(
        "/api/v1/namespaces/default/configmaps", params={"fieldSelector": "metadata.name=cm-2"}
    )
    assert [i["metadata"]["name"] for i in by_name.json()["items"]] == ["cm-2"]
    bad_field = await http.get("/api/v1/configmaps", params={"fieldSelector": "spec.nodeName=x"})
    assert status_of(bad_field) == (400, "BadRequest")
    table = (await http.get("/api/v1/configmaps", headers={"Accept": TABLE_ACCEPT})).json()
    assert table["kind"] == "Table"
    assert len(table["rows"]) == 7
    assert table["rows"][0]["object"]["metadata"]["namespace"] == "default"
    empty = (await http.get("/api/v1/namespaces/nowhere/configmaps")).json()
    assert empty["items"] == []


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"{not json", (400, "BadRequest")),
        (b"[1, 2]", (400, "BadRequest")),
        (json.dumps(configmap("x") | {"kind": "Secret"}).encode(), (400, "BadRequest")),
        (json.dumps(configmap("x") | {"apiVersion": "v2"}).encode(), (400, "BadRequest")),
        (json.dumps(configmap("x", namespace="other")).encode(), (400, "BadRequest")),
        (json.dumps(configmap("Not_A_Name")).encode(), (422, "Invalid")),
        (json.dumps({"metadata": {}}).encode(), (422, "Invalid")),
        (
            b'{"metadata":{"name":"big"},"data":{"k":"' + b"x" * (4 << 20) + b'"}}',
            (413, "RequestEntityTooLarge"),
        ),
    ],
    ids=["garbage", "array", "kind", "apiVersion", "namespace", "name", "no-name", "oversized"],
)
async def test_bad_bodies_are_rejected_and_nothing_is_written(
    api: RunningApiServer, http: httpx.AsyncClient, body: bytes, expected: tuple[int, str]
) -> None:
    before = await etcd_keys(api)
    response = await http.post(
        "/api/v1/namespaces/default/configmaps", content=body, headers=JSON_HEADERS
    )
    assert status_of(response) == expected
    assert await etcd_keys(api) == before


async def test_conflicts_and_missing_things(http: httpx.AsyncClient) -> None:
    assert (await create(http, configmap("dup"))).status_code == 201
    again = await create(http, configmap("dup"))
    assert status_of(again) == (409, "AlreadyExists")
    assert again.json()["message"] == 'configmaps "dup" already exists'
    missing_ns = await create(http, configmap("x", namespace=None), ns="nope")
    assert status_of(missing_ns) == (404, "NotFound")
    assert missing_ns.json()["message"] == 'namespaces "nope" not found'
    unknown = await http.get("/api/v1/widgets")
    assert status_of(unknown) == (404, "NotFound")
    bad_token = await http.get("/api/v1/configmaps", params={"continue": "garbage!", "limit": "1"})
    assert status_of(bad_token) == (400, "BadRequest")
    bad_selector = await http.get("/api/v1/configmaps", params={"labelSelector": "a in (b"})
    assert status_of(bad_selector) == (400, "BadRequest")
    not_allowed = await http.post("/api/v1/configmaps", json=configmap("x"))
    assert status_of(not_allowed) == (405, "MethodNotAllowed")


async def test_python_client_style_body_without_kind_or_content_type(
    http: httpx.AsyncClient,
) -> None:
    body = json.dumps({"metadata": {"name": "py1"}, "data": {"a": "1"}}).encode()
    response = await http.post("/api/v1/namespaces/default/configmaps", content=body)
    assert response.status_code == 201, response.text
    assert response.json()["kind"] == "ConfigMap"
    assert response.json()["metadata"]["namespace"] == "default"


async def read_events(lines: AsyncIterator[str], count: int) -> list[dict[str, Any]]:
    """Up to ``count`` events, fewer if the server ends the stream first."""
    events: list[dict[str, Any]] = []
    async for line in lines:
        if line:
            events.append(json.loads(line))
        if len(events) >= count:
            break
    return events


async def test_watch_streams_events_bookmarks_and_ends_at_timeout(http: httpx.AsyncClient) -> None:
    listed = (await http.get("/api/v1/namespaces/default/configmaps")).json()
    rv = listed["metadata"]["resourceVersion"]
    params = {
        "watch": "True",
        "resourceVersion": rv,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "3",
    }
    async with http.stream("GET", "/api/v1/namespaces/default/configmaps", params=params) as resp:
        assert resp.status_code == 200
        lines = resp.aiter_lines()
        assert (await create(http, configmap("w1"))).status_code == 201
        assert (await http.delete("/api/v1/namespaces/default/configmaps/w1")).status_code == 200
        events = await asyncio.wait_for(read_events(lines, 2), 10)
        assert [e["type"] for e in events] == ["ADDED", "DELETED"]
        assert events[0]["object"]["metadata"]["name"] == "w1"
        # A write this watch does not see moves the cache on: before the timeout closes
        # the stream, a bookmark tells the client how far it is.
        other = await create(
            http, configmap("elsewhere", namespace="kube-system"), ns="kube-system"
        )
        other_rv = int(other.json()["metadata"]["resourceVersion"])
        rest = await asyncio.wait_for(read_events(lines, 100), 10)  # until the server closes
    assert [e["type"] for e in rest] == ["BOOKMARK"]
    assert int(rest[0]["object"]["metadata"]["resourceVersion"]) >= other_rv


async def test_watch_from_a_too_old_rv_is_an_error_event_in_a_200_stream(
    http: httpx.AsyncClient,
) -> None:
    # The caches listed after the system namespaces were written: rv 1 is older than any
    # of them can serve.
    params = {"watch": "1", "resourceVersion": "1", "timeoutSeconds": "2"}
    async with http.stream("GET", "/api/v1/configmaps", params=params) as resp:
        assert resp.status_code == 200
        (event,) = await asyncio.wait_for(read_events(resp.aiter_lines(), 1), 10)
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"


@pytest.mark.parametrize(
    ("content_type", "patch", "expected"),
    [
        ("application/merge-patch+json", {"data": {"k": None, "n": "1"}}, {"n": "1"}),
        ("application/strategic-merge-patch+json", {"data": {"n": "2"}}, {"k": "v", "n": "2"}),
        (
            "application/json-patch+json",
            [{"op": "add", "path": "/data/j", "value": "3"}],
            {"k": "v", "j": "3"},
        ),
    ],
    ids=["merge", "strategic", "json-patch"],
)
async def test_patch_kinds(
    http: httpx.AsyncClient, content_type: str, patch: object, expected: dict[str, str]
) -> None:
    created = (await create(http, configmap("p", k="v"))).json()
    response = await http.patch(
        "/api/v1/namespaces/default/configmaps/p",
        content=json.dumps(patch).encode(),
        headers={"Content-Type": content_type},
    )
    assert response.status_code == 200, response.text
    patched = response.json()
    assert patched["data"] == expected
    assert patched["metadata"]["uid"] == created["metadata"]["uid"]
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


async def test_patch_errors(api: RunningApiServer, http: httpx.AsyncClient) -> None:
    await create(http, configmap("pe", k="v"))
    url = "/api/v1/namespaces/default/configmaps/pe"
    before = await api.client.get(b"/registry/configmaps/default/pe")
    # An apply without its required fieldManager changes nothing either.
    yaml_apply = await http.patch(
        url, content=b"{}", headers={"Content-Type": "application/apply-patch+yaml"}
    )
    assert status_of(yaml_apply) == (422, "Invalid")
    text = await http.patch(url, content=b"{}", headers={"Content-Type": "text/plain"})
    assert status_of(text) == (415, "UnsupportedMediaType")
    garbage = await http.patch(
        url, content=b"{nope", headers={"Content-Type": "application/merge-patch+json"}
    )
    assert status_of(garbage)[0] == 400
    rename = await http.patch(
        url,
        json={"metadata": {"name": "other"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status_of(rename) == (400, "BadRequest")
    stale = await http.patch(
        url,
        json={"metadata": {"resourceVersion": "1"}, "data": {"x": "y"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status_of(stale) == (409, "Conflict")
    missing = await http.patch(
        url + "-missing", json={}, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert status_of(missing) == (404, "NotFound")
    after = await api.client.get(b"/registry/configmaps/default/pe")
    assert before is not None and after is not None
    assert after.mod_revision == before.mod_revision


async def test_watch_list_sends_initial_events_then_the_end_bookmark(
    http: httpx.AsyncClient,
) -> None:
    for i in range(3):
        assert (await create(http, configmap(f"init-{i}"))).status_code == 201
    params = {
        "watch": "true",
        "sendInitialEvents": "true",
        "allowWatchBookmarks": "true",
        "resourceVersionMatch": "NotOlderThan",
        "timeoutSeconds": "2",
    }
    async with http.stream("GET", "/api/v1/namespaces/default/configmaps", params=params) as resp:
        assert resp.status_code == 200
        events = await asyncio.wait_for(read_events(resp.aiter_lines(), 4), 10)
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "ADDED", "BOOKMARK"]
    assert [e["object"]["metadata"]["name"] for e in events[:3]] == ["init-0", "init-1", "init-2"]
    annotations = events[3]["object"]["metadata"]["annotations"]
    assert annotations == {"k8s.io/initial-events-end": "true"}


@pytest.mark.parametrize(
    ("method", "body", "content_type"),
    [
        (
            "POST",
            b'{"metadata":{"name":"deep"},"data":' + b"[" * 5000 + b"]" * 5000 + b"}",
            JSON_HEADERS["Content-Type"],
        ),
        (
            "POST",
            b'{"metadata":{"name":"deep"},"x":' + b"[" * 200 + b"]" * 200 + b"}",
            JSON_HEADERS["Content-Type"],
        ),
        ("PATCH", b'{"x":' + b"[" * 5000 + b"]" * 5000 + b"}", "application/merge-patch+json"),
        ("PATCH", b'{"x":' + b"[" * 200 + b"]" * 200 + b"}", "application/merge-patch+json"),
    ],
    ids=["deep-post", "too-deep-post", "deep-patch", "too-deep-patch"],
)
async def test_hostile_bodies_get_400_and_change_nothing(
    api: RunningApiServer, http: httpx.AsyncClient, method: str, body: bytes, content_type: str
) -> None:
    await create(http, configmap("target", k="v"))
    before = await etcd_keys(api)
    target = await api.client.get(b"/registry/configmaps/default/target")
    url = "/api/v1/namespaces/default/configmaps" + ("/target" if method == "PATCH" else "")
    response = await http.request(method, url, content=body, headers={"Content-Type": content_type})
    assert status_of(response) == (400, "BadRequest")
    assert await etcd_keys(api) == before
    after = await api.client.get(b"/registry/configmaps/default/target")
    assert target is not None and after is not None and after.mod_revision == target.mod_revision


async def test_invalid_utf8_in_a_string_reads_as_go_reads_it(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    """Go's JSON decoder turns invalid UTF-8 inside a string into U+FFFD instead of
    refusing the body; the name that results is then not a valid name (422)."""
    before = await etcd_keys(api)
    response = await http.post(
        "/api/v1/namespaces/default/configmaps",
        content=b'{"metadata":{"name":"\xff\xfe"}}',
        headers=JSON_HEADERS,
    )
    assert status_of(response) == (422, "Invalid")
    assert '"\ufffd\ufffd"' in response.json()["message"]
    data = await http.post(
        "/api/v1/namespaces/default/configmaps",
        content=b'{"metadata":{"name":"utf8"},"data":{"k":"a\xffb"}}',
        headers=JSON_HEADERS,
    )
    assert data.status_code == 201, data.text
    assert data.json()["data"] == {"k": "a\ufffdb"}
    assert len(await etcd_keys(api)) == len(before) + 1


async def test_huge_limits_are_capped_and_bad_ones_refused(http: httpx.AsyncClient) -> None:
    huge = await http.get("/api/v1/configmaps", params={"limit": str(2**62)})
    assert huge.status_code == 200
    beyond = await http.get("/api/v1/configmaps", params={"limit": str(2**70)})
    assert status_of(beyond) == (400, "BadRequest")
    bad_utf8 = await http.get("/api/v1/configmaps?labelSelector=%ff%fe")
    assert status_of(bad_utf8) == (400, "BadRequest")
