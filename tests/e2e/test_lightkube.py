"""lightkube (PyPI), a client written without client-go, against the apiserver: server
dry runs, deletecollection, the status subresource and Secrets, checked against etcd."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator

import httpx
import pytest
from apiserver_fixture import RunningApiServer
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.models.core_v1 import Container, PodSpec, PodStatus
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace, Pod, Secret
from lightkube.types import PatchType

NAMESPACE = "e2e-lightkube"


@pytest.fixture
async def client(api: RunningApiServer, http: httpx.AsyncClient) -> AsyncIterator[AsyncClient]:
    made = await http.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
    assert made.status_code in (201, 409), made.text
    # KubeConfig.from_server gives a config without a user, which lightkube 1.0 refuses.
    config = KubeConfig.from_dict(
        {
            "clusters": [{"name": "e2e", "cluster": {"server": api.url}}],
            "users": [{"name": "e2e", "user": {}}],
            "contexts": [
                {
                    "name": "e2e",
                    "context": {"cluster": "e2e", "user": "e2e", "namespace": NAMESPACE},
                }
            ],
            "current-context": "e2e",
        }
    )
    lightkube = AsyncClient(config=config)
    try:
        yield lightkube
    finally:
        await lightkube.close()


async def revision(api: RunningApiServer) -> int:
    return await asyncio.wait_for(api.client.current_revision(b"/registry"), 10)


async def test_dry_run_create_and_delete_reach_no_etcd_write(
    api: RunningApiServer, client: AsyncClient
) -> None:
    before = await revision(api)
    shown = await client.create(
        ConfigMap(metadata=ObjectMeta(name="lk-dry"), data={"k": "v"}), dry_run=True
    )
    assert shown.metadata is not None and shown.metadata.uid
    assert await revision(api) == before
    with pytest.raises(ApiError) as missing:
        await client.get(ConfigMap, "lk-dry")
    assert missing.value.status.code == 404

    await client.create(ConfigMap(metadata=ObjectMeta(name="lk-kept"), data={"k": "v"}))
    before = await revision(api)
    await client.delete(ConfigMap, "lk-kept", dry_run=True)
    assert await revision(api) == before
    assert (await client.get(ConfigMap, "lk-kept")).data == {"k": "v"}


async def test_deletecollection_empties_the_namespace_of_that_kind(
    api: RunningApiServer, client: AsyncClient
) -> None:
    for i in range(4):
        await client.create(ConfigMap(metadata=ObjectMeta(name=f"lk-c{i}")))
    before = await revision(api)
    await client.deletecollection(ConfigMap, dry_run=True)
    assert await revision(api) == before
    assert len([cm async for cm in client.list(ConfigMap)]) >= 4

    await client.deletecollection(ConfigMap)
    assert [cm async for cm in client.list(ConfigMap)] == []


async def test_the_status_subresource_changes_status_only(client: AsyncClient) -> None:
    pod = await client.create(
        Pod(
            metadata=ObjectMeta(name="lk-pod", labels={"app": "x"}),
            spec=PodSpec(containers=[Container(name="c", image="nginx")]),
        )
    )
    assert pod.status is not None and pod.status.phase == "Pending"
    pod.status = PodStatus(phase="Running", message="started by the test")
    assert pod.metadata is not None
    pod.metadata.labels = {"app": "changed"}
    status_write = Pod.Status(metadata=pod.metadata, spec=pod.spec, status=pod.status)
    running = await client.replace(status_write, "lk-pod")
    assert running.status is not None and running.status.phase == "Running"
    assert running.metadata is not None and running.metadata.labels == {"app": "x"}

    patched = await client.patch(
        Pod.Status, "lk-pod", {"status": {"phase": "Succeeded"}}, patch_type=PatchType.MERGE
    )
    assert patched.status is not None and patched.status.phase == "Succeeded"
    # The main resource leaves status alone.
    main = await client.patch(
        Pod, "lk-pod", {"status": {"phase": "Failed"}, "metadata": {"labels": {"b": "c"}}}
    )
    assert main.status is not None and main.status.phase == "Succeeded"
    await client.delete(Pod, "lk-pod")


async def test_secret_string_data_becomes_data_and_type_defaults(client: AsyncClient) -> None:
    made = await client.create(
        Secret(metadata=ObjectMeta(name="lk-secret"), stringData={"password": "hunter2"})
    )
    assert made.type == "Opaque"
    assert made.stringData is None
    assert made.data == {"password": base64.b64encode(b"hunter2").decode()}


async def test_namespace_delete_goes_through_terminating(client: AsyncClient) -> None:
    await client.create(Namespace(metadata=ObjectMeta(name="lk-gone")))
    await client.create(ConfigMap(metadata=ObjectMeta(name="inside", namespace="lk-gone")))
    await client.delete(Namespace, "lk-gone")
    terminating = await client.get(Namespace, "lk-gone")
    assert terminating.status is not None
    assert terminating.status.phase == "Terminating"
    async with asyncio.timeout(15):
        while True:
            try:
                await client.get(Namespace, "lk-gone")
            except ApiError as error:
                assert error.status.code == 404
                break
            await asyncio.sleep(0.1)


async def test_apply_creates_merges_and_reports_conflicts(client: AsyncClient) -> None:
    def config(**data: str) -> ConfigMap:
        return ConfigMap(metadata=ObjectMeta(name="applied"), data=data)

    made = await client.apply(config(a="1"), field_manager="lightkube-e2e")
    assert made.data == {"a": "1"}
    assert made.metadata is not None and made.metadata.managedFields is not None
    [entry] = made.metadata.managedFields
    assert (entry.manager, entry.operation) == ("lightkube-e2e", "Apply")
    merged = await client.apply(config(b="2"), field_manager="other")
    assert merged.data == {"a": "1", "b": "2"}
    with pytest.raises(ApiError) as refused:
        await client.apply(config(a="9"), field_manager="other")
    assert refused.value.status.code == 409
    forced = await client.apply(config(a="9"), field_manager="other", force=True)
    assert forced.data == {"a": "9"}
