"""Resources in named API groups and the built-in kinds controllers need, over HTTP against
real etcd: Leases (coordination.k8s.io/v1) through /apis/..., core/v1 Events with their
field selectors and their TTL, and discovery of the groups."""

from __future__ import annotations

from typing import Any

import httpx
from apiserver_fixture import RunningApiServer

LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
EVENTS = "/api/v1/namespaces/default/events"


async def test_discovery_lists_the_named_groups(http: httpx.AsyncClient) -> None:
    groups = (await http.get("/apis")).json()
    assert groups["kind"] == "APIGroupList"
    assert groups["groups"] == [
        {
            "name": "apiextensions.k8s.io",
            "versions": [{"groupVersion": "apiextensions.k8s.io/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "apiextensions.k8s.io/v1", "version": "v1"},
        },
        {
            "name": "coordination.k8s.io",
            "versions": [{"groupVersion": "coordination.k8s.io/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "coordination.k8s.io/v1", "version": "v1"},
        },
        {
            "name": "events.k8s.io",
            "versions": [{"groupVersion": "events.k8s.io/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "events.k8s.io/v1", "version": "v1"},
        },
    ]
    group = (await http.get("/apis/coordination.k8s.io")).json()
    assert group["kind"] == "APIGroup" and group["name"] == "coordination.k8s.io"
    resources = (await http.get("/apis/coordination.k8s.io/v1")).json()
    assert resources["groupVersion"] == "coordination.k8s.io/v1"
    assert [r["name"] for r in resources["resources"]] == ["leases"]
    assert (await http.get("/apis/nope.example.com")).status_code == 404
    assert (await http.get("/apis/coordination.k8s.io/v2")).status_code == 404
    assert (await http.get("/apis/coordination.k8s.io/v1/widgets")).status_code == 404


async def test_leases_are_served_like_core_kinds(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    made = await http.post(LEASES, json=lease)
    assert made.status_code == 201, made.text
    assert made.json()["apiVersion"] == "coordination.k8s.io/v1"
    kv = await api.client.get(b"/registry/leases/default/leader")
    assert kv is not None
    listed = (await http.get(LEASES)).json()
    assert listed["kind"] == "LeaseList" and listed["apiVersion"] == "coordination.k8s.io/v1"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["leader"]
    changed = made.json()
    changed["spec"]["holderIdentity"] = "b"
    assert (await http.put(f"{LEASES}/leader", json=changed)).status_code == 200
    stale = await http.put(f"{LEASES}/leader", json=changed)
    assert stale.status_code == 409
    assert stale.json()["details"]["group"] == "coordination.k8s.io"
    table = await http.get(
        LEASES, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    )
    assert [c["name"] for c in table.json()["columnDefinitions"]] == ["Name", "Holder", "Age"]
    assert table.json()["rows"][0]["cells"][:2] == ["leader", "b"]
    everywhere = (await http.get("/apis/coordination.k8s.io/v1/leases")).json()
    assert [i["metadata"]["name"] for i in everywhere["items"]] == ["leader"]
    assert (await http.delete(f"{LEASES}/leader")).status_code == 200


def event(name: str, kind: str, involved: str, reason: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name},
        "involvedObject": {"kind": kind, "name": involved, "namespace": "default"},
        "reason": reason,
        "message": f"{reason} happened",
        "type": "Normal",
        "source": {"component": "tester"},
        "count": 1,
    }


async def test_events_are_selectable_by_involved_object_and_expire(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    for name, kind, involved in (
        ("e1", "Pod", "web"),
        ("e2", "ConfigMap", "web"),
        ("e3", "Pod", "db"),
    ):
        made = await http.post(EVENTS, json=event(name, kind, involved, "Started"))
        assert made.status_code == 201, made.text
    selected = await http.get(
        EVENTS,
        params={"fieldSelector": "involvedObject.kind=Pod,involvedObject.name=web,source=tester"},
    )
    assert [i["metadata"]["name"] for i in selected.json()["items"]] == ["e1"]
    table = await http.get(
        EVENTS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    )
    rows = {row["cells"][9]: row["cells"] for row in table.json()["rows"]}
    assert rows["e1"][1:4] == ["Normal", "Started", "pod/web"]
    assert rows["e1"][5] == "tester"

    # Stored with an etcd lease (kube-apiserver's --event-ttl), shared by the events
    # written within a minute: etcd deletes them when it expires.
    leases = set()
    for name in ("e1", "e2", "e3"):
        response = await api.client.range_prefix(f"/registry/events/default/{name}".encode())
        leases.add(response.kvs[0].lease)
    assert len(leases) == 1 and 0 not in leases
