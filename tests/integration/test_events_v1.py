"""``events.k8s.io/v1`` Events over HTTP against real etcd: the same objects as core/v1
Events (stored once, in the core form, with the Event TTL lease), converted both ways,
listed and watched through either API, selectable by kube-apiserver's field names, and
validated as kube-apiserver validates writes through each API."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from apiserver_fixture import RunningApiServer

from watchcache.apiserver.app import _StoredVersions

CORE = "/api/v1/namespaces/default/events"
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
MERGE = {"Content-Type": "application/merge-patch+json"}
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
EVENT_TIME = "2026-03-04T05:06:07.123456Z"


def new_event(name: str, **extra: Any) -> dict[str, Any]:
    """An events.k8s.io/v1 Event that passes the strict rules."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name},
        "eventTime": EVENT_TIME,
        "reportingController": "example.com/tester",
        "reportingInstance": "tester-1",
        "action": "Testing",
        "reason": "Tested",
        "regarding": {"kind": "Pod", "name": "web", "namespace": "default", "apiVersion": "v1"},
        "note": "the test looked",
        "type": "Normal",
        **extra,
    }


def core_event(name: str, **extra: Any) -> dict[str, Any]:
    """A core/v1 Event as an old client writes it (no eventTime)."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name},
        "involvedObject": {"kind": "ConfigMap", "name": "cfg", "namespace": "default"},
        "reason": "Changed",
        "message": "the map changed",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-03-04T05:06:07Z",
        "lastTimestamp": "2026-03-04T05:16:07Z",
        "count": 3,
        "type": "Warning",
        **extra,
    }


async def stored(api: RunningApiServer, name: str) -> tuple[dict[str, Any], int]:
    kv = await api.client.get(f"/registry/events/default/{name}".encode())
    assert kv is not None
    return json.loads(kv.value), int(kv.lease)


async def eventually(http: httpx.AsyncClient, url: str, **params: str) -> httpx.Response:
    """GET ``url`` until it answers 200 (the cache follows etcd's watch)."""
    for _ in range(100):
        got = await http.get(url, params=params)
        if got.status_code == 200:
            return got
        await asyncio.sleep(0.05)
    return got


async def names(http: httpx.AsyncClient, url: str, count: int, **params: str) -> list[str]:
    """The names a LIST answers, once it answers ``count`` of them."""
    for _ in range(100):
        listed = (await http.get(url, params=params)).json()
        found = sorted(i["metadata"]["name"] for i in listed["items"])
        if len(found) == count:
            return found
        await asyncio.sleep(0.05)
    return found


async def test_an_event_written_through_events_k8s_io_is_a_core_event(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    made = await http.post(EVENTS, json=new_event("e1", deprecatedSource={}))
    assert made.status_code == 201, made.text
    answer = made.json()
    assert answer["apiVersion"] == "events.k8s.io/v1"
    assert answer["note"] == "the test looked" and answer["regarding"]["name"] == "web"
    assert answer["metadata"]["resourceVersion"]
    # etcd holds the core/v1 form, attached to the Event TTL lease.
    value, lease = await stored(api, "e1")
    assert lease != 0
    assert value["apiVersion"] == "v1" and value["kind"] == "Event"
    assert value["involvedObject"] == answer["regarding"]
    assert value["message"] == "the test looked"
    assert value["reportingComponent"] == "example.com/tester"
    assert value["source"] == {}
    assert not {"note", "regarding", "reportingController", "deprecatedSource"} & set(value)

    core = (await eventually(http, f"{CORE}/e1")).json()
    assert core["apiVersion"] == "v1"
    assert list(core) == [
        "kind", "apiVersion", "metadata", "involvedObject", "reason", "message", "source",
        "type", "eventTime", "action", "reportingComponent", "reportingInstance",
    ]  # fmt: skip
    assert core["metadata"] == answer["metadata"]
    assert core["eventTime"] == EVENT_TIME
    again = (await eventually(http, f"{EVENTS}/e1")).json()
    assert again == answer


async def test_a_core_event_reads_through_events_k8s_io(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    made = await http.post(CORE, json=core_event("c1", related={"kind": "Node", "name": "n"}))
    assert made.status_code == 201, made.text
    got = (await eventually(http, f"{EVENTS}/c1")).json()
    assert got == {
        "kind": "Event",
        "apiVersion": "events.k8s.io/v1",
        "metadata": made.json()["metadata"],
        "reason": "Changed",
        "regarding": {"kind": "ConfigMap", "name": "cfg", "namespace": "default"},
        "related": {"kind": "Node", "name": "n"},
        "note": "the map changed",
        "type": "Warning",
        "deprecatedSource": {"component": "kubelet", "host": "node-1"},
        "deprecatedFirstTimestamp": "2026-03-04T05:06:07Z",
        "deprecatedLastTimestamp": "2026-03-04T05:16:07Z",
        "deprecatedCount": 3,
    }
    # A merge patch through events.k8s.io that changes nothing strict keeps the object whole.
    patched = await http.patch(
        f"{EVENTS}/c1", content=b'{"metadata":{"labels":{"seen":"yes"}}}', headers=MERGE
    )
    assert patched.status_code == 200, patched.text
    value, _ = await stored(api, "c1")
    assert value["metadata"]["labels"] == {"seen": "yes"}
    assert value["source"] == {"component": "kubelet", "host": "node-1"}
    assert value["count"] == 3 and value["related"] == {"kind": "Node", "name": "n"}


async def test_lists_watches_tables_and_field_selectors_on_both_apis(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    async with http.stream(
        "GET", EVENTS, params={"watch": "true", "timeoutSeconds": "5"}
    ) as watch_v1:
        assert (await http.post(CORE, json=core_event("c1"))).status_code == 201
        lines = watch_v1.aiter_lines()
        first = json.loads(await anext(lines))
        assert first["type"] == "ADDED"
        assert first["object"]["apiVersion"] == "events.k8s.io/v1"
        assert first["object"]["note"] == "the map changed"
    assert (await http.post(EVENTS, json=new_event("e1"))).status_code == 201

    assert await names(http, EVENTS, 2) == ["c1", "e1"]
    assert await names(http, CORE, 2) == ["c1", "e1"]
    listed = (await http.get(EVENTS)).json()
    assert listed["kind"] == "EventList" and listed["apiVersion"] == "events.k8s.io/v1"
    assert {i["apiVersion"] for i in listed["items"]} == {"events.k8s.io/v1"}

    # kube-apiserver's field names on each API; `source` falls back to the controller.
    for url, selector, expected in (
        (EVENTS, "regarding.kind=Pod", ["e1"]),
        (EVENTS, "regarding.name=cfg,type=Warning", ["c1"]),
        (EVENTS, "reportingController=example.com/tester", ["e1"]),
        (EVENTS, "source=example.com/tester", ["e1"]),
        (EVENTS, "source=kubelet", ["c1"]),
        (CORE, "involvedObject.kind=Pod", ["e1"]),
        (CORE, "reportingComponent=example.com/tester", ["e1"]),
        (CORE, "source=example.com/tester", ["e1"]),
    ):
        found = (await http.get(url, params={"fieldSelector": selector})).json()
        assert [i["metadata"]["name"] for i in found["items"]] == expected, (url, selector)
    refused = await http.get(EVENTS, params={"fieldSelector": "involvedObject.kind=Pod"})
    assert refused.status_code == 400
    assert refused.json()["message"] == "field label not supported: involvedObject.kind"

    for url in (EVENTS, CORE):
        table = (await http.get(url, headers=TABLE)).json()
        assert [c["name"] for c in table["columnDefinitions"]][:4] == [
            "Last Seen", "Type", "Reason", "Object",
        ]  # fmt: skip
        rows = {row["cells"][9]: row["cells"] for row in table["rows"]}
        assert rows["e1"][1:7] == [
            "Normal", "Tested", "pod/web", "", "example.com/tester, tester-1", "the test looked",
        ]  # fmt: skip
        assert rows["c1"][1:7] == [
            "Warning", "Changed", "configmap/cfg", "", "kubelet, node-1", "the map changed",
        ]  # fmt: skip
        assert rows["c1"][8] == 3


async def test_writes_through_events_k8s_io_are_validated_strictly(
    http: httpx.AsyncClient,
) -> None:
    bare = await http.post(
        EVENTS, json={"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "b"}}
    )
    assert bare.status_code == 422
    assert bare.json()["message"] == (
        'Event "b" is invalid: [eventTime: Required value, type: Invalid value: "": has '
        "invalid value: ]"
    )
    assert bare.json()["details"] == {
        "name": "b",
        "kind": "Event",
        "causes": [
            {"reason": "FieldValueRequired", "message": "Required value", "field": "eventTime"},
            {
                "reason": "FieldValueInvalid",
                "message": 'Invalid value: "": has invalid value: ',
                "field": "type",
            },
        ],
    }
    body = new_event(
        "bad",
        regarding={"kind": "Pod", "name": "web", "namespace": "other"},
        note="x" * 1025,
        series={"count": 1},
        deprecatedSource={"host": "node-1"},
        deprecatedCount=2,
        deprecatedFirstTimestamp="2026-03-04T05:06:07Z",
        type="Fine",
    )
    for member in ("reportingController", "reportingInstance", "action", "reason"):
        del body[member]
    refused = await http.post(EVENTS, json=body)
    assert refused.status_code == 422
    regex = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
    assert [(c["field"], c["message"]) for c in refused.json()["details"]["causes"]] == [
        ("reportingController", "Required value"),
        ("reportingController", 'Invalid value: "": name part must be non-empty'),
        (
            "reportingController",
            "Invalid value: \"\": name part must consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character (e.g. "
            f"'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{regex}')",
        ),
        ("reportingInstance", "Required value"),
        ("action", "Required value"),
        ("reason", "Required value"),
        ("message", 'Invalid value: "": can have at most 1024 characters'),
        ("series.count", 'Invalid value: "": should be at least 2'),
        ("series.lastObservedTime", "Required value"),
        ("type", 'Invalid value: "": has invalid value: Fine'),
        ("firstTimestamp", 'Invalid value: "": needs to be unset'),
        ("count", 'Invalid value: "": needs to be unset'),
        ("source", 'Invalid value: "": needs to be unset'),
    ]
    assert (await http.get(f"{CORE}/bad")).status_code == 404


async def test_updates_through_events_k8s_io_may_change_only_the_series(
    http: httpx.AsyncClient,
) -> None:
    made = await http.post(EVENTS, json=new_event("s1"))
    assert made.status_code == 201, made.text
    series = {"series": {"count": 2, "lastObservedTime": "2026-03-04T05:07:00.000000Z"}}
    grown = await http.patch(f"{EVENTS}/s1", content=json.dumps(series), headers=MERGE)
    assert grown.status_code == 200, grown.text
    assert grown.json()["series"]["count"] == 2

    changed = {
        "note": "rewritten",
        "regarding": {"kind": "Pod", "name": "db", "namespace": "default"},
        "deprecatedCount": 4,
        "reportingController": "example.com/other",
        "series": {"count": 1, "lastObservedTime": "2026-03-04T05:08:00.000000Z"},
    }
    refused = await http.patch(f"{EVENTS}/s1", content=json.dumps(changed), headers=MERGE)
    assert refused.status_code == 422
    assert refused.json()["message"].startswith('Event "s1" is invalid: [')
    assert [(c["field"], c["message"]) for c in refused.json()["details"]["causes"]] == [
        ("series.count", 'Invalid value: "": should be at least 2'),
        (
            "involvedObject",
            'Invalid value: {"Kind":"Pod","Namespace":"default","Name":"db","UID":"",'
            '"APIVersion":"v1","ResourceVersion":"","FieldPath":""}: field is immutable',
        ),
        ("message", 'Invalid value: "rewritten": field is immutable'),
        ("count", "Invalid value: 4: field is immutable"),
        ("reportingController", 'Invalid value: "example.com/other": field is immutable'),
    ]
    # The same object through core/v1 follows only the legacy rules.
    relabelled = await http.patch(
        f"{CORE}/s1", content=b'{"message":"rewritten through core"}', headers=MERGE
    )
    assert relabelled.status_code == 200, relabelled.text
    for _ in range(100):
        if (await http.get(f"{EVENTS}/s1")).json()["note"] == "rewritten through core":
            break
        await asyncio.sleep(0.05)
    assert (await http.get(f"{EVENTS}/s1")).json()["note"] == "rewritten through core"


async def test_core_writes_follow_the_legacy_rules(http: httpx.AsyncClient) -> None:
    elsewhere = core_event("l1", involvedObject={"kind": "Pod", "name": "p", "namespace": "x"})
    refused = await http.post(CORE, json=elsewhere)
    assert refused.status_code == 422
    assert refused.json()["message"] == (
        'Event "l1" is invalid: involvedObject.namespace: Invalid value: "x": does not match '
        "event.namespace"
    )
    timed = core_event("l2", eventTime=EVENT_TIME, reportingInstance="i", action="A")
    refused = await http.post(CORE, json=timed)
    assert refused.status_code == 422
    assert [c["field"] for c in refused.json()["details"]["causes"]] == [
        "reportingComponent",
        "reportingComponent",
        "reportingComponent",
    ]
    timed["reportingComponent"] = "kubelet"
    assert (await http.post(CORE, json=timed)).status_code == 201


async def test_served_once_to_controllers_and_discovered_in_its_group(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    server = api.server
    assert "events.v1.events.k8s.io" in server.resources
    stored_versions = _StoredVersions(server.resources)
    assert "events" in stored_versions and "events.v1.events.k8s.io" not in stored_versions

    group = (await http.get("/apis/events.k8s.io")).json()
    assert group["preferredVersion"] == {"groupVersion": "events.k8s.io/v1", "version": "v1"}
    resources = (await http.get("/apis/events.k8s.io/v1")).json()
    assert resources["resources"] == [
        {
            "name": "events",
            "singularName": "event",
            "namespaced": True,
            "kind": "Event",
            "verbs": [
                "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch",
            ],
            "shortNames": ["ev"],
            # The hash of the version the objects are stored in: core/v1's.
            "storageVersionHash": "r2yiGXH7wu8=",
        }
    ]  # fmt: skip
    index = (await http.get("/openapi/v3")).json()["paths"]
    assert "apis/events.k8s.io/v1" in index and "api/v1" in index
    document = (await http.get("/openapi/v3/apis/events.k8s.io/v1")).json()
    assert "io.k8s.api.events.v1.Event" in document["components"]["schemas"]
    core_document = (await http.get("/openapi/v3/api/v1")).json()
    assert "io.k8s.api.core.v1.Event" in core_document["components"]["schemas"]

    # The namespace controller empties a namespace of Events written through either API.
    assert (await http.post("/api/v1/namespaces", json={"metadata": {"name": "gone"}})).is_success
    in_gone = new_event("g1", regarding={"kind": "Pod", "name": "p", "namespace": "gone"})
    made = await http.post("/apis/events.k8s.io/v1/namespaces/gone/events", json=in_gone)
    assert made.status_code == 201, made.text
    assert (await http.delete("/api/v1/namespaces/gone")).status_code == 200
    for _ in range(200):
        if await api.client.get(b"/registry/events/gone/g1") is None:
            break
        await asyncio.sleep(0.05)
    assert await api.client.get(b"/registry/events/gone/g1") is None
