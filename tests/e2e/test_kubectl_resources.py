"""kubectl against the kinds beyond the first four: Events (``describe``, ``events``,
``get events``) and Leases in coordination.k8s.io, with kubectl 1.20 and 1.37."""

from __future__ import annotations

import subprocess
from collections.abc import Awaitable, Callable

import httpx
import pytest

Kubectl = Callable[..., Awaitable[subprocess.CompletedProcess[str]]]

pytestmark = pytest.mark.parametrize("kubectl_binary", ["1.20", "1.37"], indirect=True)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl {result.args} failed:\n{result.stderr}"
    return result.stdout


async def test_describe_shows_the_events_of_the_object(
    http: httpx.AsyncClient, kubectl: Kubectl
) -> None:
    made = await http.post(
        "/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "described"}}
    )
    assert made.status_code in (201, 409), made.text
    uid = (await http.get("/api/v1/namespaces/default/configmaps/described")).json()["metadata"][
        "uid"
    ]
    event = {
        "metadata": {"name": "described.1"},
        "involvedObject": {
            "kind": "ConfigMap",
            "name": "described",
            "namespace": "default",
            "uid": uid,
            "apiVersion": "v1",
        },
        "reason": "Checked",
        "message": "the e2e test looked at it",
        "type": "Normal",
        "source": {"component": "e2e"},
        "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }
    posted = await http.post("/api/v1/namespaces/default/events", json=event)
    assert posted.status_code in (201, 409), posted.text
    out = ok(await kubectl("describe", "cm", "described", "-n", "default"))
    assert "Events:" in out
    assert "Checked" in out and "the e2e test looked at it" in out
    listed = ok(await kubectl("get", "events", "-n", "default"))
    assert "configmap/described" in listed and "Checked" in listed


async def test_kubectl_events_lists_events(
    http: httpx.AsyncClient, kubectl: Kubectl, kubectl_version: str
) -> None:
    if kubectl_version == "1.20":
        pytest.skip("kubectl events came in kubectl 1.26")
    event = {
        "metadata": {"name": "listed.1"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
        "reason": "Pulled",
        "message": "image pulled",
        "type": "Normal",
        "count": 1,
    }
    posted = await http.post("/api/v1/namespaces/default/events", json=event)
    assert posted.status_code in (201, 409), posted.text
    out = ok(await kubectl("events", "-n", "default"))
    # kubectl events formats rows itself (kind/name as the event names them).
    assert "Pulled" in out and "Pod/web" in out and "image pulled" in out


async def test_leases_through_their_named_group(http: httpx.AsyncClient, kubectl: Kubectl) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kubectl-lease"},
        "spec": {"holderIdentity": "me"},
    }
    made = await http.post("/apis/coordination.k8s.io/v1/namespaces/default/leases", json=lease)
    assert made.status_code in (201, 409), made.text
    out = ok(await kubectl("get", "leases", "-n", "default"))
    header, *rows = out.splitlines()
    assert header.split() == ["NAME", "HOLDER", "AGE"]
    assert any(row.split()[:2] == ["kubectl-lease", "me"] for row in rows)
    shown = ok(await kubectl("get", "lease.coordination.k8s.io", "kubectl-lease", "-o", "name"))
    assert shown.strip() == "lease.coordination.k8s.io/kubectl-lease"
