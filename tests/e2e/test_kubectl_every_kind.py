"""``kubectl describe`` and ``kubectl events`` for every kind the server serves, a
CRD-defined one included: each object gets an Event, and both commands must show it
(describe where kubectl's describer for the kind shows events).
The test fails when a served resource has no object here, so a new kind is not
forgotten."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from apiserver_fixture import RunningApiServer

Kubectl = Callable[..., Awaitable[subprocess.CompletedProcess[str]]]

pytestmark = pytest.mark.parametrize("kubectl_binary", ["1.20", "1.37"], indirect=True)

NAMESPACE = "every-kind"
GADGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "kind": "Gadget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}

GADGET_CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"
#: Kinds whose kubectl describer lists no events at all (kubectl's describe.go:
#: NamespaceDescriber, SecretDescriber), whatever the server.
WITHOUT_EVENTS = {"namespaces", "secrets"}

#: One object per served resource (by served_key): its body, without metadata.
OBJECTS: dict[str, dict[str, Any]] = {
    "configmaps": {"data": {"k": "v"}},
    "secrets": {"stringData": {"k": "v"}},
    "pods": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    "namespaces": {},
    "events": {
        "involvedObject": {"kind": "ConfigMap", "name": "other", "namespace": NAMESPACE},
        "reason": "Seen",
        "message": "an event about something else",
    },
    "events.v1.events.k8s.io": {
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "example.com/e2e",
        "reportingInstance": "e2e-1",
        "action": "Looked",
        "reason": "Seen",
        "type": "Normal",
        "regarding": {"kind": "ConfigMap", "name": "other", "namespace": NAMESPACE},
        "note": "an events.k8s.io event about something else",
    },
    "leases.coordination.k8s.io": {"spec": {"holderIdentity": "e2e"}},
    "customresourcedefinitions.apiextensions.k8s.io": GADGET_CRD,
    "gadgets.example.com": {"spec": {"size": 3}},
}


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl {result.args} failed:\n{result.stderr}"
    return result.stdout


async def test_describe_and_events_for_every_served_kind(
    api: RunningApiServer, http: httpx.AsyncClient, kubectl: Kubectl, kubectl_version: str
) -> None:
    made = await http.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
    assert made.status_code in (201, 409), made.text
    answer = await http.post(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=GADGET_CRD
    )
    assert answer.status_code in (201, 409), answer.text
    for _ in range(100):
        if "gadgets.example.com" in api.server.resources:
            break
        await asyncio.sleep(0.05)
    served = dict(api.server.resources)
    assert set(served) <= set(OBJECTS), f"no object for {sorted(set(served) - set(OBJECTS))}"
    for key, spec in sorted(served.items()):
        name = f"described-{spec.name}" if key != GADGET_CRD_KEY else "gadgets.example.com"
        base = f"{spec.api_root}/namespaces/{NAMESPACE}/{spec.name}"
        if not spec.namespaced:
            base = f"{spec.api_root}/{spec.name}"
        body = {"apiVersion": spec.api_version, "kind": spec.kind, **OBJECTS[key]}
        body["metadata"] = {"name": name}
        if key != GADGET_CRD_KEY:
            created = await http.post(base, json=body)
            assert created.status_code in (201, 409), created.text
        obj = (await http.get(f"{base}/{name}")).json()
        event = {
            "metadata": {"name": f"{key}.{obj['metadata']['uid']}"},
            "involvedObject": {
                "apiVersion": spec.api_version,
                "kind": spec.kind,
                "name": name,
                "namespace": NAMESPACE if spec.namespaced else "",
                "uid": obj["metadata"]["uid"],
            },
            "reason": "Described",
            "message": f"the e2e test describes {key}",
            "type": "Normal",
            "count": 1,
            "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:00:00Z",
        }
        # kubectl looks for a cluster-scoped object's events in the default namespace.
        events_namespace = NAMESPACE if spec.namespaced else "default"
        posted = await http.post(f"/api/v1/namespaces/{events_namespace}/events", json=event)
        assert posted.status_code in (201, 409), posted.text  # the module shares one etcd
        resource = f"{spec.name}.{spec.version}.{spec.group}" if spec.group else spec.name
        scope = ["-n", NAMESPACE] if spec.namespaced else []
        described = ok(await kubectl("describe", resource, name, *scope))
        assert name in described
        if key not in WITHOUT_EVENTS:
            assert f"the e2e test describes {key}" in described, described
        if kubectl_version != "1.20":  # kubectl events came in 1.26
            kind = f"{spec.kind}.{spec.version}.{spec.group}" if spec.group else spec.kind
            events = ok(
                await kubectl("events", "-n", events_namespace, "--for", f"{kind.lower()}/{name}")
            )
            assert f"the e2e test describes {key}" in events, events
