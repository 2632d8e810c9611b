"""kopf operators on a CRD-defined kind, with peering, across two apiservers over one etcd:
the peering CRDs and the kind's CRD are created on one server and served by both; two
operators (priorities 100 and 0, one per server) find each other through their
``KopfPeering`` object, the lower one stays paused, and the higher one handles each widget once,
stores its result in the widget's status, posts an Event about it, and holds its
deletion with a finalizer until its delete handler has run."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from apiserver_fixture import RunningApiServer, running_apiserver
from kopf_process import PEERING_CRDS, PRESERVED_STATUS, crd, kopf_operator
from waiting import until

from watchcache.etcd.process import EtcdCluster

OPERATOR = Path(__file__).parent / "operators" / "widget_operator.py"
NAMESPACE = "e2e-kopf-crd"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = f"/apis/example.com/v1/namespaces/{NAMESPACE}/widgets"
PEERINGS = f"/apis/kopf.dev/v1/namespaces/{NAMESPACE}/kopfpeerings"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"

WIDGET_SCHEMA = copy.deepcopy(PRESERVED_STATUS)
WIDGET_SCHEMA["properties"]["spec"] = {
    "type": "object",
    "properties": {"color": {"type": "string"}},
}
WIDGET_CRD = crd(
    "widgets", "Widget", "example.com", "Namespaced", WIDGET_SCHEMA, status_subresource=True
)


async def established(http: httpx.AsyncClient, name: str) -> bool:
    got = await http.get(f"{CRDS}/{name}")
    conditions = (got.json().get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


@pytest.fixture
async def second(etcd: EtcdCluster) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        running_apiserver(etcd.endpoints, min_request_timeout=5) as other,
        httpx.AsyncClient(base_url=other.url, timeout=30) as http,
    ):
        yield http


def recorded(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines() if line]


async def test_peered_operators_on_two_servers_handle_a_custom_kind_once(
    api: RunningApiServer, http: httpx.AsyncClient, second: httpx.AsyncClient, tmp_path: Path
) -> None:
    made = await http.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
    assert made.status_code in (201, 409), made.text
    for definition in (*PEERING_CRDS, WIDGET_CRD):
        answer = await http.post(CRDS, json=definition)
        assert answer.status_code in (201, 409), answer.text
        name = definition["metadata"]["name"]
        for server in (http, second):
            await until(functools.partial(established, server, name), f"{name} established")
    peering = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": "e2e"}}
    answer = await http.post(PEERINGS, json=peering)
    assert answer.status_code in (201, 409), answer.text
    record = tmp_path / "record.jsonl"
    record.touch()
    run = ["--namespace", NAMESPACE, "--peering", "e2e"]
    async with contextlib.AsyncExitStack() as stack:
        high_log = await stack.enter_async_context(
            kopf_operator(
                api.url,
                OPERATOR,
                tmp_path / "high",
                [*run, "--priority", "100"],
                env={"RECORD_FILE": str(record), "OPERATOR_ID": "high"},
            )
        )
        low_log = await stack.enter_async_context(
            kopf_operator(
                str(second.base_url),
                OPERATOR,
                tmp_path / "low",
                [*run, "--priority", "0"],
                env={"RECORD_FILE": str(record), "OPERATOR_ID": "low"},
            )
        )

        def logs() -> str:
            return (
                f"high:\n{high_log.read_text(errors='replace')[-4000:]}\n"
                f"low:\n{low_log.read_text(errors='replace')[-4000:]}"
            )

        async def both_peered() -> bool:
            status = (await http.get(f"{PEERINGS}/e2e")).json().get("status") or {}
            return len(status) == 2

        def low_paused() -> bool:
            # kopf starts paused and logs only changes: paused unless it resumed last.
            text = low_log.read_text(errors="replace")
            resumed = text.rfind("Resuming operations")
            return resumed == -1 or text.rfind("Pausing operations in favour of") > resumed

        async def low_paused_with_high_peered() -> bool:
            return await both_peered() and low_paused()

        try:
            await until(low_paused_with_high_peered, "the lower-priority operator to pause")
            widget = {
                "apiVersion": "example.com/v1",
                "kind": "Widget",
                "metadata": {"name": "w1"},
                "spec": {"color": "red"},
            }
            created = await second.post(WIDGETS, json=widget)
            assert created.status_code == 201, created.text

            async def handled() -> bool:
                obj = (await http.get(f"{WIDGETS}/w1")).json()
                return (obj.get("status") or {}).get("created") == {"configured": True}

            await until(handled, "the create handler's result in the status")
            obj = (await second.get(f"{WIDGETS}/w1")).json()
            assert FINALIZER in obj["metadata"]["finalizers"]

            async def event_posted() -> bool:
                listed = await http.get(
                    f"/api/v1/namespaces/{NAMESPACE}/events",
                    params={"fieldSelector": "involvedObject.name=w1,reason=Configured"},
                )
                return any(
                    e["message"] == "widget w1 configured"
                    and e["involvedObject"]["kind"] == "Widget"
                    for e in listed.json()["items"]
                )

            await until(event_posted, "the operator's Event")
            deleted = await http.delete(f"{WIDGETS}/w1")
            assert deleted.status_code == 200, deleted.text
            assert deleted.json()["metadata"]["deletionTimestamp"]

            async def gone() -> bool:
                return (await second.get(f"{WIDGETS}/w1")).status_code == 404

            await until(gone, "kopf to release the widget after its delete handler")
        except BaseException:
            print(logs())
            raise
    calls = [(e["event"], e["name"], e["operator"]) for e in recorded(record)]
    assert calls == [("create", "w1", "high"), ("delete", "w1", "high")]
    assert low_paused()
