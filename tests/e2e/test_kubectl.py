"""kubectl 1.20.2 and 1.37, unchanged, against the apiserver: what docs/clients.md §1 and §7
say they send, and what their users see (stdout, stderr, exit code), checked against what
etcd holds."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from apiserver_fixture import RunningApiServer
from http_recorder import RecordingProxy

from watchcache.apiserver.discovery import GIT_VERSION
from watchcache.cli.load import load_objects
from watchcache.etcd.process import EtcdCluster
from watchcache.registry.resources import CONFIGMAPS

Kubectl = Callable[..., Awaitable[subprocess.CompletedProcess[str]]]

#: Every test here runs with both kubectl releases the suite drives.
pytestmark = pytest.mark.parametrize("kubectl_binary", ["1.20", "1.37"], indirect=True)


@pytest.fixture(scope="module")
def etcd(kubectl_binary: Path) -> Iterator[EtcdCluster]:
    """One etcd per kubectl release (this depends on the parametrized binary, so pytest
    makes one per release): the tests create fixed names, and each release's run must find
    the cluster as the other found it."""
    del kubectl_binary
    with EtcdCluster(1) as cluster:
        yield cluster


Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]
RegistryState = Callable[[], Awaitable[dict[bytes, int]]]

#: Objects loaded by the loader (``configmap-<i>`` in ``demo-<i % 4>``, ``app=a|b|c``).
COUNT = 300
NAMESPACES = 4
CHUNK = 50


async def load(api: RunningApiServer) -> None:
    """The loader's objects (idempotent: tests of this module share one etcd)."""
    await asyncio.wait_for(
        load_objects(api.client, CONFIGMAPS, count=COUNT, size=256, namespaces=NAMESPACES), 60
    )


async def stored(api: RunningApiServer, prefix: str) -> dict[str, dict[str, Any]]:
    """The objects under ``prefix`` in etcd, by key."""
    response = await asyncio.wait_for(api.client.range_prefix(prefix.encode()), 10)
    return {kv.key.decode(): json.loads(kv.value) for kv in response.kvs}


def table(stdout: str) -> tuple[list[str], list[list[str]]]:
    """kubectl's table output: the header's columns and each row's cells."""
    header, *rows = stdout.splitlines()
    return header.split(), [row.split() for row in rows]


async def create_namespace(http: httpx.AsyncClient, name: str) -> None:
    response = await http.post("/api/v1/namespaces", json={"metadata": {"name": name}})
    assert response.status_code == 201, response.text


async def create_configmap(
    http: httpx.AsyncClient, namespace: str, name: str, **data: str
) -> dict[str, Any]:
    response = await http.post(
        f"/api/v1/namespaces/{namespace}/configmaps",
        json={"metadata": {"name": name}, "data": data},
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl {result.args} failed:\n{result.stderr}"
    return result.stdout


# -- get ------------------------------------------------------------------------------------


async def test_get_all_namespaces_in_chunks_lists_exactly_what_etcd_holds(
    api: RunningApiServer, kubectl: Kubectl
) -> None:
    await load(api)
    in_etcd = {
        (obj["metadata"]["namespace"], obj["metadata"]["name"])
        for obj in (await stored(api, CONFIGMAPS.prefix)).values()
    }
    assert len(in_etcd) >= COUNT
    # -v=6 logs each request: kubectl must have followed the continue tokens.
    result = await kubectl("get", "configmaps", "-A", f"--chunk-size={CHUNK}", "-v=6")
    columns, rows = table(ok(result))
    assert columns == ["NAMESPACE", "NAME", "DATA", "AGE"]
    listed = [(row[0], row[1]) for row in rows]
    assert len(listed) == len(in_etcd)
    assert set(listed) == in_etcd
    assert all(row[2] == "1" for row in rows if row[1].startswith("configmap-"))
    pages = [line for line in result.stderr.splitlines() if "/api/v1/configmaps?" in line]
    assert len(pages) == -(-len(in_etcd) // CHUNK), "\n".join(pages)
    assert all(f"limit={CHUNK}" in line for line in pages)
    assert sum("continue=" in line for line in pages) == len(pages) - 1


async def test_a_large_list_arrives_streamed_and_gzipped(
    api: RunningApiServer, kubectl: Kubectl, http: httpx.AsyncClient
) -> None:
    """A LIST above 128 KiB is streamed in chunks and gzipped (kubectl's Go transport asks
    for gzip itself, and decompresses): kubectl prints every object whole. A recording
    proxy between the two shows what crossed the wire."""
    namespace, size = "e2e-large", 60_000
    response = await http.post("/api/v1/namespaces", json={"metadata": {"name": namespace}})
    assert response.status_code in (201, 409), response.text  # both releases share etcd
    for i in range(6):
        body = {"metadata": {"name": f"big-{i}"}, "data": {"blob": f"{i}" * size}}
        response = await http.post(f"/api/v1/namespaces/{namespace}/configmaps", json=body)
        assert response.status_code in (201, 409), response.text
    host, port = api.url.removeprefix("http://").split(":")
    async with RecordingProxy(host, int(port)) as proxy:
        # The last --server wins: kubectl goes through the proxy.
        result = await kubectl(
            "--server", proxy.url, "get", "configmaps", "-n", namespace, "-o", "json",
            "--chunk-size=0",
        )  # fmt: skip
    listed = json.loads(ok(result))
    assert [item["metadata"]["name"] for item in listed["items"]] == [f"big-{i}" for i in range(6)]
    assert all(
        item["data"]["blob"] == item["metadata"]["name"][-1] * size for item in listed["items"]
    )
    lists = proxy.answers_to(f"/api/v1/namespaces/{namespace}/configmaps")
    assert lists, [e.target for e in proxy.exchanges]
    wire = lists[-1]
    assert "gzip" in wire.request_headers.get("accept-encoding", "")
    assert wire.status == 200
    assert wire.response_headers.get("content-encoding") == "gzip"
    assert wire.response_headers.get("transfer-encoding") == "chunked"
    assert 0 < wire.body_bytes < 6 * size / 4


async def test_get_with_a_label_selector(api: RunningApiServer, kubectl: Kubectl) -> None:
    await load(api)
    expected = {
        obj["metadata"]["name"]
        for obj in (await stored(api, CONFIGMAPS.collection_prefix("demo-1"))).values()
        if obj["metadata"].get("labels", {}).get("app") == "a"
    }
    assert expected  # demo-1 holds every app: i % 4 == 1 meets every i % 3
    columns, rows = table(ok(await kubectl("get", "cm", "-n", "demo-1", "-l", "app=a")))
    assert columns == ["NAME", "DATA", "AGE"]
    assert [row[0] for row in rows] == sorted(expected)


async def test_get_namespaces(api: RunningApiServer, kubectl: Kubectl) -> None:
    await load(api)
    in_etcd = {
        obj["metadata"]["name"] for obj in (await stored(api, "/registry/namespaces/")).values()
    }
    assert {"default", "kube-system", "kube-public", "demo-0"} <= in_etcd
    columns, rows = table(ok(await kubectl("get", "ns")))
    assert columns == ["NAME", "STATUS", "AGE"]
    assert {row[0] for row in rows} == in_etcd
    assert {row[1] for row in rows} == {"Active"}


async def test_get_one_as_yaml(
    api: RunningApiServer, http: httpx.AsyncClient, kubectl: Kubectl
) -> None:
    created = await create_configmap(http, "default", "yaml-one", greeting="hello", n="1")
    obj = yaml.safe_load(ok(await kubectl("get", "cm", "yaml-one", "-n", "default", "-o", "yaml")))
    assert obj["kind"] == "ConfigMap" and obj["apiVersion"] == "v1"
    assert obj["data"] == {"greeting": "hello", "n": "1"}
    meta = obj["metadata"]
    assert meta["name"] == "yaml-one" and meta["namespace"] == "default"
    assert meta["uid"] == created["metadata"]["uid"]
    kv = await asyncio.wait_for(api.client.get(b"/registry/configmaps/default/yaml-one"), 10)
    assert kv is not None
    assert meta["resourceVersion"] == str(kv.mod_revision)


async def test_get_missing_object_is_not_found(kubectl: Kubectl) -> None:
    result = await kubectl("get", "cm", "nope", "-n", "default")
    assert result.returncode == 1
    assert 'Error from server (NotFound): configmaps "nope" not found' in result.stderr


async def test_version_shows_the_server_version(kubectl: Kubectl, kubectl_version: str) -> None:
    out = ok(await kubectl("version"))
    server = [line for line in out.splitlines() if line.startswith("Server Version")]
    assert len(server) == 1, out
    if kubectl_version == "1.20":
        assert f'GitVersion:"{GIT_VERSION}"' in server[0]
    else:
        assert server[0] == f"Server Version: {GIT_VERSION}"


# -- writes ---------------------------------------------------------------------------------


async def test_create_from_a_file(api: RunningApiServer, kubectl: Kubectl, tmp_path: Path) -> None:
    assert ok(await kubectl("create", "namespace", "e2e-create")).strip() == (
        "namespace/e2e-create created"
    )
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(
        "apiVersion: v1\n"
        "kind: ConfigMap\n"
        "metadata:\n"
        "  name: from-file\n"
        "  namespace: e2e-create\n"
        "  labels:\n"
        "    app: a\n"
        "data:\n"
        "  key1: value1\n"
        "  key2: |\n"
        "    two\n"
        "    lines\n"
    )
    # The default --validate=true fetches /openapi/v2 first (docs/clients.md §1.8).
    out = ok(await kubectl("create", "-f", str(manifest)))
    assert out.strip() == "configmap/from-file created"
    objs = await stored(api, CONFIGMAPS.collection_prefix("e2e-create"))
    obj = objs["/registry/configmaps/e2e-create/from-file"]
    assert obj["data"] == {"key1": "value1", "key2": "two\nlines\n"}
    assert obj["metadata"]["labels"] == {"app": "a"}
    assert obj["metadata"]["uid"] and obj["metadata"]["creationTimestamp"].endswith("Z")

    again = await kubectl("create", "-f", str(manifest))
    assert again.returncode == 1
    assert (
        'Error from server (AlreadyExists): error when creating "'
        + str(manifest)
        + '": configmaps "from-file" already exists'
    ) in again.stderr
    assert await stored(api, CONFIGMAPS.collection_prefix("e2e-create")) == objs


def configmap_yaml(data: dict[str, str]) -> str:
    lines = [
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        "  name: applied",
        "  namespace: e2e-apply",
        "data:",
        *(f"  {key}: {value}" for key, value in data.items()),
    ]
    return "\n".join(lines) + "\n"


async def test_apply_creates_leaves_unchanged_and_configures(
    api: RunningApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    namespace = tmp_path / "ns.yaml"
    namespace.write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: e2e-apply\n")
    assert ok(await kubectl("apply", "-f", str(namespace))).strip() == (
        "namespace/e2e-apply created"
    )
    key = "/registry/configmaps/e2e-apply/applied"
    manifest = tmp_path / "cm.yaml"

    manifest.write_text(configmap_yaml({"key1": "value1", "key2": "value2"}))
    assert ok(await kubectl("apply", "-f", str(manifest))).strip() == "configmap/applied created"
    first = await asyncio.wait_for(api.client.get(key.encode()), 10)
    assert first is not None
    created = json.loads(first.value)
    assert created["data"] == {"key1": "value1", "key2": "value2"}
    last_applied = "kubectl.kubernetes.io/last-applied-configuration"
    assert json.loads(created["metadata"]["annotations"][last_applied])["data"] == created["data"]

    assert ok(await kubectl("apply", "-f", str(manifest))).strip() == "configmap/applied unchanged"
    same = await asyncio.wait_for(api.client.get(key.encode()), 10)
    assert same is not None and same.mod_revision == first.mod_revision

    # key1 changed, key2 removed (a null in the strategic merge patch), key3 added.
    changed = {"key1": "value1-changed", "key3": "value3"}
    manifest.write_text(configmap_yaml(changed))
    assert ok(await kubectl("apply", "-f", str(manifest))).strip() == (
        "configmap/applied configured"
    )
    after = await asyncio.wait_for(api.client.get(key.encode()), 10)
    assert after is not None and after.mod_revision > first.mod_revision
    patched = json.loads(after.value)
    assert patched["data"] == changed
    assert patched["metadata"]["uid"] == created["metadata"]["uid"]
    assert json.loads(patched["metadata"]["annotations"][last_applied])["data"] == changed


async def test_delete(
    api: RunningApiServer, http: httpx.AsyncClient, kubectl: Kubectl, kubectl_version: str
) -> None:
    await create_namespace(http, "e2e-delete")
    await create_configmap(http, "e2e-delete", "doomed", k="v")
    await create_configmap(http, "e2e-delete", "kept", k="v")
    # kubectl 1.20 waits for the object to go with a metadata.name field selector.
    out = ok(await kubectl("delete", "cm", "doomed", "-n", "e2e-delete"))
    if kubectl_version == "1.20":
        assert out.strip() == 'configmap "doomed" deleted'
    else:
        assert out.strip() == 'configmap "doomed" deleted from e2e-delete namespace'
    keys = set(await stored(api, CONFIGMAPS.collection_prefix("e2e-delete")))
    assert keys == {"/registry/configmaps/e2e-delete/kept"}

    again = await kubectl("delete", "cm", "doomed", "-n", "e2e-delete")
    assert again.returncode == 1
    assert 'Error from server (NotFound): configmaps "doomed" not found' in again.stderr


# -- watch ----------------------------------------------------------------------------------


async def read_until(
    stream: asyncio.StreamReader, wanted: Callable[[str], bool], timeout: float = 15
) -> list[str]:
    """Lines of ``stream`` up to and including the first that is ``wanted``."""

    async def read() -> list[str]:
        lines: list[str] = []
        while True:
            raw = await stream.readline()
            if not raw:
                raise AssertionError(f"the stream ended before the line; got {lines}")
            line = raw.decode().rstrip("\n")
            lines.append(line)
            if wanted(line):
                return lines

    return await asyncio.wait_for(read(), timeout)


async def test_watch_sees_a_change_made_by_another_client(
    http: httpx.AsyncClient, kubectl_spawn: Spawn
) -> None:
    await create_namespace(http, "e2e-watch")
    await create_configmap(http, "e2e-watch", "before", k="v")
    process = await kubectl_spawn("get", "cm", "-n", "e2e-watch", "-w")
    assert process.stdout is not None
    # The initial list: the header, then the existing object.
    lines = await read_until(process.stdout, lambda line: line.startswith("before "))
    assert lines[0].split() == ["NAME", "DATA", "AGE"]

    await create_configmap(http, "e2e-watch", "after", a="1", b="2")
    line = (await read_until(process.stdout, lambda line: line.startswith("after ")))[-1]
    assert line.split()[1] == "2"  # DATA

    patch = await http.patch(
        "/api/v1/namespaces/e2e-watch/configmaps/before",
        json={"data": {"k2": "v2", "k3": "v3"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patch.status_code == 200, patch.text
    line = (await read_until(process.stdout, lambda line: line.startswith("before ")))[-1]
    assert line.split()[1] == "3"
    assert process.returncode is None, "kubectl get -w must still be watching"


# -- bad requests ---------------------------------------------------------------------------


BAD_NAME = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_A_Name\n  namespace: default\n"
TOO_LARGE = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\n  namespace: default\n"
    f"data:\n  k: {'x' * (4 << 20)}\n"
)


@pytest.mark.parametrize(
    ("args", "manifest", "message"),
    [
        (
            ("get", "--raw", "/api/v1/configmaps?continue=garbage&limit=1"),
            None,
            "Error from server (BadRequest)",
        ),
        (("get", "cm", "-A", "-l", "app in (a"), None, "Error from server (BadRequest)"),
        (
            ("get", "cm", "-A", "--field-selector", "data.k=v"),
            None,
            "Error from server (BadRequest)",
        ),
        (("get", "widgets"), None, 'error: the server doesn\'t have a resource type "widgets"'),
        (
            ("create", "-f", "-"),
            BAD_NAME,
            'The ConfigMap "Not_A_Name" is invalid: metadata.name: Invalid value: "Not_A_Name": '
            "a lowercase RFC 1123 subdomain must consist of",
        ),
        (("create", "-f", "-"), TOO_LARGE, "Error from server (RequestEntityTooLarge)"),
    ],
    ids=[
        "garbage-continue",
        "bad-label-selector",
        "bad-field-selector",
        "unknown-resource",
        "invalid-name",
        "too-large",
    ],
)
async def test_bad_requests_fail_and_write_nothing(
    kubectl: Kubectl,
    registry_state: RegistryState,
    args: tuple[str, ...],
    manifest: str | None,
    message: str,
) -> None:
    before = await registry_state()
    result = await kubectl(*args, stdin=manifest)
    assert result.returncode == 1, result
    assert message in result.stderr, result.stderr[:2000]
    assert result.stdout == ""
    assert await registry_state() == before
