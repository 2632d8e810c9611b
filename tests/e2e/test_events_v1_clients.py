"""events.k8s.io/v1 Events through clients nobody here wrote: the official Python client's
``EventsV1Api`` (create, list, read back through ``CoreV1Api``) and kubectl 1.37 (``kubectl
events``, which reads core/v1, and ``kubectl get events.v1.events.k8s.io``) showing Events
written through either API."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime

import httpx
import pytest
from apiserver_fixture import RunningApiServer
from k8s_client import REQUEST_TIMEOUT, call
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

Kubectl = Callable[..., Awaitable[subprocess.CompletedProcess[str]]]

NAMESPACE = "events-v1-e2e"
#: The Python client writes a datetime with isoformat(), which drops a zero microsecond
#: part that MicroTime needs: use a time that has one.
WHEN = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)


@pytest.fixture
def events_v1(api: RunningApiServer) -> Iterator[k8s.EventsV1Api]:
    configuration = k8s.Configuration()
    configuration.host = api.url
    with k8s.ApiClient(configuration) as api_client:
        yield k8s.EventsV1Api(api_client)


async def ensure_namespace(http: httpx.AsyncClient) -> None:
    made = await http.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
    assert made.status_code in (201, 409), made.text


def named(event: k8s.EventsV1Event) -> str | None:
    assert event.metadata is not None
    return event.metadata.name


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


async def test_the_python_client_writes_and_lists_events_k8s_io_events(
    http: httpx.AsyncClient, events_v1: k8s.EventsV1Api, core_v1: k8s.CoreV1Api
) -> None:
    await ensure_namespace(http)
    body = k8s.EventsV1Event(
        metadata=k8s.V1ObjectMeta(name="from-v1"),
        event_time=WHEN,
        reporting_controller="example.com/e2e",
        reporting_instance="e2e-1",
        action="Checking",
        reason="Checked",
        regarding=k8s.V1ObjectReference(kind="Pod", name="web", namespace=NAMESPACE),
        note="written through events.k8s.io",
        type="Normal",
    )
    made = await call(
        events_v1.create_namespaced_event, NAMESPACE, body, _request_timeout=REQUEST_TIMEOUT
    )
    assert made.api_version == "events.k8s.io/v1" and made.event_time == WHEN
    core = k8s.CoreV1Event(
        metadata=k8s.V1ObjectMeta(name="from-core"),
        involved_object=k8s.V1ObjectReference(kind="Pod", name="web", namespace=NAMESPACE),
        event_time=WHEN,
        reporting_component="example.com/e2e",
        reporting_instance="e2e-2",
        action="Checking",
        reason="Seen",
        message="written through core/v1",
        type="Warning",
    )
    await call(core_v1.create_namespaced_event, NAMESPACE, core, _request_timeout=REQUEST_TIMEOUT)

    listed = await call(
        events_v1.list_namespaced_event, NAMESPACE, _request_timeout=REQUEST_TIMEOUT
    )
    by_name = {named(e): e for e in listed.items}
    assert set(by_name) >= {"from-v1", "from-core"}
    assert by_name["from-core"].note == "written through core/v1"
    regarding = by_name["from-core"].regarding
    assert regarding is not None and regarding.name == "web"
    assert by_name["from-core"].reporting_controller == "example.com/e2e"
    selected = await call(
        events_v1.list_namespaced_event,
        NAMESPACE,
        field_selector="reportingController=example.com/e2e,type=Warning",
        _request_timeout=REQUEST_TIMEOUT,
    )
    assert [named(e) for e in selected.items] == ["from-core"]

    read = await call(
        core_v1.read_namespaced_event, "from-v1", NAMESPACE, _request_timeout=REQUEST_TIMEOUT
    )
    assert read.message == "written through events.k8s.io"
    assert read.involved_object.kind == "Pod"
    assert read.reporting_component == "example.com/e2e"

    with pytest.raises(ApiException) as refused:
        await call(
            events_v1.create_namespaced_event,
            NAMESPACE,
            k8s.EventsV1Event(metadata=k8s.V1ObjectMeta(name="late"), event_time=WHEN),
            _request_timeout=REQUEST_TIMEOUT,
        )
    assert refused.value.status == 422


@pytest.mark.parametrize("kubectl_binary", ["1.37"], indirect=True)
async def test_kubectl_shows_events_written_through_either_api(
    http: httpx.AsyncClient, kubectl: Kubectl
) -> None:
    await ensure_namespace(http)
    made = await http.post(
        f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events",
        json={
            "metadata": {"name": "kubectl-v1"},
            "eventTime": "2026-03-04T05:06:07.000000Z",
            "reportingController": "example.com/e2e",
            "reportingInstance": "e2e-1",
            "action": "Pulling",
            "reason": "PulledV1",
            "regarding": {"kind": "Pod", "name": "api-pod", "namespace": NAMESPACE},
            "note": "through the new API",
            "type": "Normal",
        },
    )
    assert made.status_code in (201, 409), made.text
    made = await http.post(
        f"/api/v1/namespaces/{NAMESPACE}/events",
        json={
            "metadata": {"name": "kubectl-core"},
            "involvedObject": {"kind": "Pod", "name": "core-pod", "namespace": NAMESPACE},
            "reason": "PulledCore",
            "message": "through the old API",
            "source": {"component": "kubelet"},
            "firstTimestamp": "2026-03-04T05:06:07Z",
            "lastTimestamp": "2026-03-04T05:06:07Z",
            "count": 1,
            "type": "Normal",
        },
    )
    assert made.status_code in (201, 409), made.text

    # kubectl 1.37's `events` lists core/v1 Events (it does not switch to events.k8s.io
    # when served); an Event written through either API is one of them.
    shown = await kubectl("events", "-n", NAMESPACE, "-v=8")
    out = ok(shown)
    requested = re.findall(r'verb="GET" url="(http://[^"]+/events[^"]*)"', shown.stderr)
    assert requested and all(f"/api/v1/namespaces/{NAMESPACE}/events" in u for u in requested)
    for needle in ("PulledV1", "Pod/api-pod", "through the new API"):
        assert needle in out, out
    for needle in ("PulledCore", "Pod/core-pod", "through the old API"):
        assert needle in out, out

    got = await kubectl("get", "events.v1.events.k8s.io", "-n", NAMESPACE, "-v=6")
    assert f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events" in got.stderr
    listed = ok(got)
    assert "pod/api-pod" in listed and "pod/core-pod" in listed, listed
    as_yaml = ok(
        await kubectl("get", "events.events.k8s.io", "kubectl-core", "-n", NAMESPACE, "-o", "json")
    )
    assert '"apiVersion": "events.k8s.io/v1"' in as_yaml
    assert '"note": "through the old API"' in as_yaml
