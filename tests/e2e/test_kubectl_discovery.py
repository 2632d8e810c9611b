"""Discovery as real clients do it: kubectl 1.37 reads the aggregated documents
(``apidiscovery.k8s.io/v2``, two requests in all), kubectl 1.20 and the official Python
client the legacy ones (one request per group-version), and all of them find the same
resources. Which documents a kubectl used is read from its own request log (``-v``)."""

from __future__ import annotations

import re
import subprocess
import urllib.parse
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from apiserver_fixture import RunningApiServer
from k8s_client import REQUEST_TIMEOUT, call
from kubernetes import client as k8s
from kubernetes.dynamic import DynamicClient

from watchcache.apiserver.app import ApiServer

Kubectl = Callable[..., Awaitable[subprocess.CompletedProcess[str]]]

AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def api_resources_table(server: ApiServer) -> list[list[str]]:
    """What ``kubectl api-resources`` prints for what ``server`` serves (one version per
    group here), whichever discovery form it read: the core group first, then the groups
    in discovery order, resources by name."""
    specs = sorted(server.resources.values(), key=lambda s: (s.group != "", s.group, s.name))
    rows = [["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]]
    for spec in specs:
        short_names = [",".join(spec.short_names)] if spec.short_names else []
        rows.append(
            [spec.name, *short_names, spec.api_version, str(spec.namespaced).lower(), spec.kind]
        )
    return rows


# A request kubectl logs: 1.37 as `"Response" verb="GET" url="…"`, 1.20 as `GET http://…`.
_LOGGED_GET = re.compile(r'(?:verb="GET" url="|\bGET )(https?://[^\s"]+)')


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl {result.args} failed:\n{result.stderr}"
    return result.stdout


def requested_paths(log: str) -> list[str]:
    return [urllib.parse.urlsplit(url).path for url in _LOGGED_GET.findall(log)]


def logged_header(log: str, name: str) -> list[str]:
    return re.findall(rf"^\s+{re.escape(name)}: (.*)$", log, flags=re.MULTILINE)


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()]


@pytest.mark.parametrize("kubectl_binary", ["1.37"], indirect=True)
async def test_kubectl_1_37_reads_the_aggregated_documents(
    api: RunningApiServer, kubectl: Kubectl
) -> None:
    result = await kubectl("api-resources", "-v=8")
    assert table(ok(result)) == api_resources_table(api.server)
    log = result.stderr
    # Two discovery requests, no per-group-version ones: the answers held every resource.
    assert requested_paths(log) == ["/api", "/apis"]
    # -v=8 logs each request's and response's headers, one per line.
    assert logged_header(log, "Accept") == [f"{AGGREGATED_V2},application/json"] * 2
    assert logged_header(log, "Content-Type") == [AGGREGATED_V2] * 2
    assert logged_header(log, "Vary") == ["Accept"] * 2


@pytest.mark.parametrize("kubectl_binary", ["1.37"], indirect=True)
async def test_kubectl_1_37_gets_leases_from_the_aggregated_documents(
    http: httpx.AsyncClient, kubectl: Kubectl
) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "discovered"},
        "spec": {"holderIdentity": "aggregated"},
    }
    made = await http.post("/apis/coordination.k8s.io/v1/namespaces/default/leases", json=lease)
    assert made.status_code in (201, 409), made.text
    result = await kubectl("get", "leases", "-n", "default", "-v=6")
    header, *rows = table(ok(result))
    assert header == ["NAME", "HOLDER", "AGE"]
    assert ["discovered", "aggregated"] in [row[:2] for row in rows]
    assert requested_paths(result.stderr) == [
        "/api",
        "/apis",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
    ]
    shown = await kubectl("get", "lease.coordination.k8s.io", "discovered", "-o", "name")
    assert ok(shown).strip() == "lease.coordination.k8s.io/discovered"


async def test_kubectl_1_20_reads_the_legacy_documents(
    api: RunningApiServer, kubectl: Kubectl
) -> None:
    result = await kubectl("api-resources", "-v=6")
    assert table(ok(result)) == api_resources_table(api.server)
    # One request per group-version after /api and /apis (in parallel: any order).
    group_versions = {s.api_root for s in api.server.resources.values()}
    paths = requested_paths(result.stderr)
    assert paths[:2] == ["/api", "/apis"]
    assert sorted(paths[2:]) == sorted(group_versions)


def python_client_discovery(url: str, cache_file: Path) -> dict[str, object]:
    """What the Python client finds, synchronously (run it in a thread: its requests go to
    the server in the test's event loop)."""
    configuration = k8s.Configuration()
    configuration.host = url
    with k8s.ApiClient(configuration) as api_client:
        versions = k8s.CoreApi(api_client).get_api_versions(_request_timeout=REQUEST_TIMEOUT)
        groups = k8s.ApisApi(api_client).get_api_versions(_request_timeout=REQUEST_TIMEOUT)
        # The dynamic client builds its resource map from the same documents.
        dynamic = DynamicClient(api_client, cache_file=str(cache_file))  # type: ignore[no-untyped-call]
        leases = dynamic.resources.get(api_version="coordination.k8s.io/v1", kind="Lease")
        configmaps = dynamic.resources.get(api_version="v1", kind="ConfigMap")
        return {
            "versions": versions,
            "groups": groups,
            "leases": (leases.name, leases.namespaced),
            "configmaps": configmaps.short_names,
        }


async def test_the_python_client_reads_the_legacy_documents(
    api: RunningApiServer, tmp_path: Path
) -> None:
    found = await call(python_client_discovery, api.url, tmp_path / "discovery.json")
    versions, groups = found["versions"], found["groups"]
    # Typed as the legacy kinds: an aggregated answer would not deserialize into them.
    assert isinstance(versions, k8s.V1APIVersions) and versions.versions == ["v1"]
    assert isinstance(groups, k8s.V1APIGroupList)
    served = {s.group for s in api.server.resources.values() if s.group}
    assert sorted(g.name for g in groups.groups) == sorted(served)
    assert found["leases"] == ("leases", True)
    assert found["configmaps"] == ["cm"]
