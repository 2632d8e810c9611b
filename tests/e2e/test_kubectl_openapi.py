"""kubectl 1.20 and 1.37 against the server's OpenAPI documents (``/openapi/v2``,
``/openapi/v3``): ``explain``, client-side validation of ``create -f``/``apply -f``, and
kubectl 1.20's ``--dry-run=server`` (whose DryRunVerifier needs a ``dryRun`` parameter on
the kind's PATCH operation in v2)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from apiserver_fixture import RunningApiServer

Kubectl = Callable[..., Awaitable[subprocess.CompletedProcess[str]]]

BOTH = pytest.mark.parametrize("kubectl_binary", ["1.20", "1.37"], indirect=True)


# -- helpers ----------------------------------------------------------------------------------


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl {result.args} failed:\n{result.stderr}"
    return result.stdout


def manifest(tmp_path: Path, name: str, *objects: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


async def make_namespace(http: httpx.AsyncClient, name: str) -> None:
    response = await http.post(
        "/api/v1/namespaces",
        json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    assert response.status_code in (201, 409), response.text


def explained_fields(out: str) -> dict[str, str]:
    """The FIELDS of ``kubectl explain`` output: name → type (``-required-`` appended)."""
    return {
        m["name"]: m["type"] + (" -required-" if m["required"] else "")
        for m in re.finditer(
            r"^ +(?P<name>\w+)\t<(?P<type>[^>]+)>(?P<required> -required-)?$", out, re.MULTILINE
        )
    }


def valid_objects(namespace: str) -> list[dict[str, Any]]:
    meta = {"namespace": namespace, "labels": {"app": "openapi"}}
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", **meta},
            "data": {"k": "v"},
            "binaryData": {"b": "aGk="},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "secret", **meta},
            "type": "Opaque",
            "data": {"password": "aHVudGVyMg=="},
            "stringData": {"user": "admin"},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "pod", **meta},
            "spec": {
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 5,
                "volumes": [{"name": "config", "configMap": {"name": "cm"}}],
                "containers": [
                    {
                        "name": "app",
                        "image": "busybox:1.36",
                        "args": ["sleep", "3600"],
                        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                        "env": [{"name": "MODE", "value": "test"}],
                        "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}},
                        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}},
                        "livenessProbe": {"tcpSocket": {"port": "http"}},
                        "volumeMounts": [{"name": "config", "mountPath": "/etc/config"}],
                    }
                ],
            },
        },
    ]


# -- the documents as served ------------------------------------------------------------------


async def test_v2_protobuf_is_answered_with_a_content_type_go_can_parse(
    http: httpx.AsyncClient,
) -> None:
    asked = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    response = await http.get("/openapi/v2", headers={"Accept": asked})
    assert response.status_code == 200
    assert response.headers["content-type"] == (
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    )
    assert response.content[:5] == b"\x0a\x032.0"
    again = await http.get(
        "/openapi/v2", headers={"Accept": asked, "If-None-Match": response.headers["etag"]}
    )
    assert again.status_code == 304
    as_json = await http.get("/openapi/v2", headers={"Accept": "application/json"})
    assert as_json.json()["swagger"] == "2.0"


async def test_v3_index_points_at_hashed_documents(http: httpx.AsyncClient) -> None:
    index = (await http.get("/openapi/v3")).json()
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    response = await http.get(url)
    assert response.status_code == 200
    assert response.headers["cache-control"] == "public, immutable"
    assert "io.k8s.api.core.v1.Pod" in response.json()["components"]["schemas"]
    stale = await http.get("/openapi/v3/api/v1?hash=0", follow_redirects=False)
    assert stale.status_code == 301 and stale.headers["location"] == url


# -- explain ----------------------------------------------------------------------------------


@BOTH
async def test_explain_configmap(kubectl: Kubectl) -> None:
    out = ok(await kubectl("explain", "configmap"))
    assert "KIND:" in out and "ConfigMap" in out
    assert "VERSION:" in out and "v1" in out
    fields = explained_fields(out)
    assert fields["data"] == "map[string]string"
    assert fields["binaryData"] == "map[string]string"
    assert fields["immutable"] == "boolean"
    # 1.20 (v2) says Object; 1.37 (v3) names the referenced schema.
    assert fields["metadata"] in ("Object", "ObjectMeta")
    assert fields["apiVersion"] == "string" and fields["kind"] == "string"


@BOTH
async def test_explain_pod_spec_containers(kubectl: Kubectl, kubectl_version: str) -> None:
    out = ok(await kubectl("explain", "pod.spec.containers"))
    assert "KIND:" in out and "Pod" in out
    fields = explained_fields(out)
    assert fields["name"] == "string -required-"
    assert fields["image"] == "string"
    assert fields["args"] == "[]string"
    assert fields["ports"] == ("[]Object" if kubectl_version == "1.20" else "[]ContainerPort")
    assert fields["resources"] == (
        "Object" if kubectl_version == "1.20" else "ResourceRequirements"
    )
    port = ok(await kubectl("explain", "pod.spec.containers.ports.containerPort"))
    assert re.search(r"^FIELD: +containerPort <integer>$", port, re.MULTILINE), port


@BOTH
async def test_explain_a_cluster_scoped_kind(kubectl: Kubectl) -> None:
    out = ok(await kubectl("explain", "namespace.status"))
    assert "KIND:" in out and "Namespace" in out
    fields = explained_fields(out)
    assert fields["phase"] == "string"
    assert fields["conditions"] in ("[]Object", "[]NamespaceCondition")


@pytest.mark.parametrize("kubectl_binary", ["1.37"], indirect=True)
async def test_kubectl_137_explains_from_v2_too(kubectl: Kubectl) -> None:
    out = ok(await kubectl("explain", "secret", "--output=plaintext-openapiv2"))
    assert "KIND:" in out and "Secret" in out
    fields = explained_fields(out)
    assert fields["stringData"] == "map[string]string"
    assert fields["type"] == "string"


# -- client-side validation -------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize("verb", ["create", "apply"])
async def test_valid_manifests_pass_validation(
    kubectl: Kubectl,
    http: httpx.AsyncClient,
    tmp_path: Path,
    verb: str,
    kubectl_version: str,
) -> None:
    namespace = f"oapi-{verb}-{kubectl_version.replace('.', '-')}"
    objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}]
    objects += valid_objects(namespace)
    path = manifest(tmp_path, "all.yaml", *objects)
    out = ok(await kubectl(verb, "-f", path, "--validate=true"))
    action = "created"
    for kind, name in (("namespace", namespace), ("configmap", "cm"), ("secret", "secret"),
                       ("pod", "pod")):  # fmt: skip
        assert f"{kind}/{name} {action}" in out
    pod = await http.get(f"/api/v1/namespaces/{namespace}/pods/pod")
    assert pod.json()["spec"]["containers"][0]["ports"][0]["containerPort"] == 8080
    if verb == "apply":
        # A second apply of changed objects: the patch kubectl computes from the published
        # strategic-merge metadata (merge keys) must do what the server's patch does.
        pod_manifest = valid_objects(namespace)[2]
        container = pod_manifest["spec"]["containers"][0]
        container["env"].append({"name": "EXTRA", "value": "1"})
        container["image"] = "busybox:1.37"
        out = ok(await kubectl("apply", "-f", manifest(tmp_path, "pod.yaml", pod_manifest)))
        assert "pod/pod configured" in out
        spec = (await http.get(f"/api/v1/namespaces/{namespace}/pods/pod")).json()["spec"]
        assert spec["containers"][0]["env"] == [
            {"name": "MODE", "value": "test"},
            {"name": "EXTRA", "value": "1"},
        ]
        assert spec["containers"][0]["image"] == "busybox:1.37"


@pytest.mark.parametrize("kubectl_binary", ["1.20"], indirect=True)
async def test_kubectl_120_reports_an_unknown_field(
    kubectl: Kubectl, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    await make_namespace(http, "oapi-invalid")
    bad = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "bad", "namespace": "oapi-invalid"},
        "dta": {"k": "v"},
    }
    result = await kubectl("create", "-f", manifest(tmp_path, "bad.yaml", bad))
    assert result.returncode != 0
    assert 'unknown field "dta"' in result.stderr
    assert "io.k8s.api.core.v1.ConfigMap" in result.stderr
    missing = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "nameless", "namespace": "oapi-invalid"},
        "spec": {"containers": [{"image": "busybox"}]},
    }
    result = await kubectl("create", "-f", manifest(tmp_path, "pod.yaml", missing))
    assert result.returncode != 0
    assert 'missing required field "name"' in result.stderr
    assert (await http.get("/api/v1/namespaces/oapi-invalid/configmaps/bad")).status_code == 404


@pytest.mark.parametrize("kubectl_binary", ["1.37"], indirect=True)
async def test_kubectl_137_validates_on_the_server(
    kubectl: Kubectl, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    # 1.37 finds fieldValidation on the v3 PATCH operation and sends Strict instead of
    # validating itself: the server refuses the unknown field.
    await make_namespace(http, "oapi-strict")
    bad = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "bad", "namespace": "oapi-strict"},
        "dta": {"k": "v"},
    }
    result = await kubectl("create", "-f", manifest(tmp_path, "bad.yaml", bad))
    assert result.returncode != 0
    assert 'unknown field "dta"' in result.stderr


# -- kubectl 1.20's server dry run ------------------------------------------------------------


@pytest.mark.parametrize("kubectl_binary", ["1.20"], indirect=True)
async def test_kubectl_120_server_dry_run(
    api: RunningApiServer, kubectl: Kubectl, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    await make_namespace(http, "oapi-dry")
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "oapi-dry"},
        "data": {"k": "v"},
    }
    path = manifest(tmp_path, "x.yaml", cm)
    out = ok(await kubectl("create", "-f", path, "--dry-run=server"))
    assert out.strip() == "configmap/x created (server dry run)"
    assert (await http.get("/api/v1/namespaces/oapi-dry/configmaps/x")).status_code == 404

    ok(await kubectl("create", "-f", path))
    stored = await api.client.get(b"/registry/configmaps/oapi-dry/x")
    assert stored is not None
    out = ok(await kubectl("delete", "cm", "x", "-n", "oapi-dry", "--dry-run=server"))
    assert out.strip() == 'configmap "x" deleted (server dry run)'
    after = await api.client.get(b"/registry/configmaps/oapi-dry/x")
    assert after is not None and after.mod_revision == stored.mod_revision
