"""``kubectl ... --dry-run=server`` (kubectl 1.20 and 1.37): kubectl prints what a real
cluster's dry run prints, and etcd's revision does not move. (kubectl 1.20 first looks the
kind up in the server's OpenAPI v2 document for a ``dryRun`` parameter.)"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
import yaml
from apiserver_fixture import RunningApiServer

Kubectl = Callable[..., Awaitable[subprocess.CompletedProcess[str]]]

pytestmark = pytest.mark.parametrize("kubectl_binary", ["1.20", "1.37"], indirect=True)


async def revision(api: RunningApiServer) -> int:
    return await asyncio.wait_for(api.client.current_revision(b"/registry"), 10)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl {result.args} failed:\n{result.stderr}"
    return result.stdout


async def test_create_from_a_file_with_server_dry_run_stores_nothing(
    api: RunningApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "dry-from-file", "namespace": "default"},
                "data": {"k": "v"},
            }
        )
    )
    before = await revision(api)
    out = ok(await kubectl("create", "-f", str(manifest), "--dry-run=server"))
    assert out.strip() == "configmap/dry-from-file created (server dry run)"
    as_yaml = ok(await kubectl("create", "-f", str(manifest), "--dry-run=server", "-o", "yaml"))
    shown = yaml.safe_load(as_yaml)
    assert shown["metadata"]["uid"] and shown["data"] == {"k": "v"}
    assert await revision(api) == before
    assert await api.client.get(b"/registry/configmaps/default/dry-from-file") is None


async def test_delete_with_server_dry_run_keeps_the_object(
    api: RunningApiServer, http: httpx.AsyncClient, kubectl: Kubectl, kubectl_version: str
) -> None:
    created = await http.post(
        "/api/v1/namespaces/default/configmaps",
        json={"metadata": {"name": "dry-delete"}, "data": {"k": "v"}},
    )
    assert created.status_code in (201, 409), created.text
    before = await revision(api)
    out = ok(await kubectl("delete", "cm", "dry-delete", "-n", "default", "--dry-run=server"))
    if kubectl_version == "1.20":
        assert out.strip() == 'configmap "dry-delete" deleted (server dry run)'
    else:
        assert (
            out.strip() == 'configmap "dry-delete" deleted from default namespace (server dry run)'
        )
    assert await revision(api) == before
    assert await api.client.get(b"/registry/configmaps/default/dry-delete") is not None
    listed = ok(await kubectl("get", "cm", "dry-delete", "-n", "default", "-o", "name"))
    assert listed.strip() == "configmap/dry-delete"
