"""Discovery documents: byte-exact with kube-apiserver's shapes (apimachinery ``metav1``
member order and omitempty rules), and what kubectl needs from them (docs/clients.md §1.1)."""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import pytest

from watchcache import __version__
from watchcache.apiserver import discovery
from watchcache.registry.resources import (
    CLUSTER_VERBS,
    DEFAULT_RESOURCES,
    NAMESPACED_VERBS,
    ResourceSpec,
)

_NS_VERBS = '["create","delete","deletecollection","get","list","patch","update","watch"]'

# The configmaps entry is byte-identical to one recorded from a real kube-apiserver
# (`kubectl -v=8` log of GET /api/v1); the others follow the same rules. Subresources are
# entries of their own, in path order, as Kubernetes lists them.
API_V1 = (
    '{"kind":"APIResourceList","groupVersion":"v1","resources":['
    '{"name":"configmaps","singularName":"configmap","namespaced":true,"kind":"ConfigMap",'
    f'"verbs":{_NS_VERBS},"shortNames":["cm"],"storageVersionHash":"qFsyl6wFWjQ="}},'
    '{"name":"events","singularName":"event","namespaced":true,"kind":"Event",'
    f'"verbs":{_NS_VERBS},"shortNames":["ev"],"storageVersionHash":"r2yiGXH7wu8="}},'
    '{"name":"namespaces","singularName":"namespace","namespaced":false,"kind":"Namespace",'
    '"verbs":["create","delete","get","list","patch","update","watch"],"shortNames":["ns"],'
    '"storageVersionHash":"Q3oi5N2YM8M="},'
    '{"name":"namespaces/finalize","singularName":"","namespaced":false,"kind":"Namespace",'
    '"verbs":["update"]},'
    '{"name":"namespaces/status","singularName":"","namespaced":false,"kind":"Namespace",'
    '"verbs":["get","patch","update"]},'
    '{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod",'
    f'"verbs":{_NS_VERBS},"shortNames":["po"],"categories":["all"],'
    '"storageVersionHash":"xPOwRZ+Yhw8="},'
    '{"name":"pods/status","singularName":"","namespaced":true,"kind":"Pod",'
    '"verbs":["get","patch","update"]},'
    '{"name":"secrets","singularName":"secret","namespaced":true,"kind":"Secret",'
    f'"verbs":{_NS_VERBS},"storageVersionHash":"S6u1pOWzb84="}}]}}'
)

# semver.org's regular expression for a SemVer 2.0.0 version, with Kubernetes' leading "v".
SEMVER = re.compile(
    r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)

# apimachinery pkg/version.Info, in declaration order.
VERSION_MEMBERS = [
    "major",
    "minor",
    "emulationMajor",
    "emulationMinor",
    "minCompatibilityMajor",
    "minCompatibilityMinor",
    "gitVersion",
    "gitCommit",
    "gitTreeState",
    "buildDate",
    "goVersion",
    "compiler",
    "platform",
]


def _resources() -> dict[str, dict[str, Any]]:
    body = json.loads(discovery.api_resource_list_json(DEFAULT_RESOURCES))
    return {r["name"]: r for r in body["resources"]}


def test_api_v1_is_byte_exact_for_the_default_resources() -> None:
    assert discovery.api_resource_list_json(DEFAULT_RESOURCES).decode() == API_V1


def test_api_v1_does_not_depend_on_the_configured_order() -> None:
    reordered = tuple(reversed(DEFAULT_RESOURCES))
    assert discovery.api_resource_list_json(reordered).decode() == API_V1


@pytest.mark.parametrize(
    ("resource", "short_names"),
    [("configmaps", ["cm"]), ("pods", ["po"]), ("namespaces", ["ns"]), ("secrets", None)],
)
def test_short_names_are_listed_only_where_kubernetes_has_them(
    resource: str, short_names: list[str] | None
) -> None:
    # kubectl resolves `cm`, `po` and `ns` only through these; secrets have none, and an
    # empty list is omitted (omitempty), not written as [].
    assert _resources()[resource].get("shortNames") == short_names


@pytest.mark.parametrize(
    ("resource", "namespaced", "verbs", "categories"),
    [
        ("configmaps", True, NAMESPACED_VERBS, None),
        ("secrets", True, NAMESPACED_VERBS, None),
        ("pods", True, NAMESPACED_VERBS, ["all"]),
        ("namespaces", False, CLUSTER_VERBS, None),
    ],
)
def test_scope_verbs_and_categories(
    resource: str, namespaced: bool, verbs: tuple[str, ...], categories: list[str] | None
) -> None:
    entry = _resources()[resource]
    assert entry["namespaced"] is namespaced
    assert entry["verbs"] == list(verbs)
    assert entry.get("categories") == categories


def test_namespaces_have_no_deletecollection() -> None:
    assert "deletecollection" not in _resources()["namespaces"]["verbs"]


def test_api_resource_members_are_in_go_order() -> None:
    entry = _resources()["pods"]
    assert list(entry) == [
        "name",
        "singularName",
        "namespaced",
        "kind",
        "verbs",
        "shortNames",
        "categories",
        "storageVersionHash",
    ]


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        # Values recorded from real clusters (they identify the storage version).
        ("ConfigMap", "qFsyl6wFWjQ="),
        ("Secret", "S6u1pOWzb84="),
        ("Pod", "xPOwRZ+Yhw8="),
        ("Namespace", "Q3oi5N2YM8M="),
        ("Endpoints", "fWeeMqaN/OA="),
        ("Event", "r2yiGXH7wu8="),
    ],
)
def test_storage_version_hash_matches_kubernetes(kind: str, expected: str) -> None:
    assert discovery.storage_version_hash("", "v1", kind) == expected


def test_api_resource_list_leaves_out_other_group_versions() -> None:
    widget = ResourceSpec("widgets", "widget", "Widget", group="example.com")
    body = discovery.api_resource_list([*DEFAULT_RESOURCES, widget])
    assert "widgets" not in [r["name"] for r in body["resources"]]


def test_a_named_group_list_carries_api_version() -> None:
    widget = ResourceSpec("widgets", "widget", "Widget", group="example.com")
    body = discovery.api_resource_list_json([widget], "example.com/v1").decode()
    assert body.startswith(
        '{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"example.com/v1",'
        '"resources":[{"name":"widgets","singularName":"widget","namespaced":true,'
    )


def test_api_versions_is_byte_exact() -> None:
    assert discovery.api_versions_json("127.0.0.1:18080") == (
        b'{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":'
        b'[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1:18080"}]}'
    )


def test_api_group_list_is_empty_but_present() -> None:
    assert (
        discovery.api_group_list_json() == b'{"kind":"APIGroupList","apiVersion":"v1","groups":[]}'
    )


def test_version_info_is_a_semver_kubernetes_version_naming_watchcache() -> None:
    info = discovery.version_info()
    assert list(info) == VERSION_MEMBERS
    assert info["gitVersion"] == f"v1.34.0-watchcache.{__version__}"
    assert SEMVER.match(info["gitVersion"]), info["gitVersion"]
    assert (info["major"], info["minor"]) == ("1", "34+")
    assert (info["emulationMajor"], info["emulationMinor"]) == ("1", "34")
    assert (info["minCompatibilityMajor"], info["minCompatibilityMinor"]) == ("1", "33")
    assert all(isinstance(value, str) for value in info.values())


@pytest.mark.parametrize(
    ("git_version", "major", "minor"),
    [
        ("v1.34.0-watchcache.0.1.0", "1", "34+"),
        ("v1.34.2", "1", "34"),
        ("v1.36.1+build.5", "1", "36"),
        ("v1.27.3-eks-a5565ad", "1", "27+"),
    ],
)
def test_version_info_major_and_minor_follow_kubernetes_stamping(
    git_version: str, major: str, minor: str
) -> None:
    info = discovery.version_info(git_version)
    assert (info["major"], info["minor"], info["gitVersion"]) == (major, minor, git_version)


@pytest.mark.parametrize("git_version", ["1.34.0", "v1", "vX.Y.Z", "v01.34.0", ""])
def test_version_info_rejects_what_is_not_a_kubernetes_version(git_version: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes git version"):
        discovery.version_info(git_version)


def test_version_info_json_is_the_dict_as_go_json() -> None:
    assert json.loads(discovery.version_info_json()) == discovery.version_info()


def test_the_python_client_deserializes_every_document() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the client's own import-time deprecations
        client: Any = pytest.importorskip("kubernetes.client")
    resources = client.V1APIResourceList.from_json(
        discovery.api_resource_list_json(DEFAULT_RESOURCES).decode()
    )
    short_names = [r.short_names for r in resources.resources]
    assert short_names == [["cm"], ["ev"], ["ns"], None, None, ["po"], None, None]
    versions = client.V1APIVersions.from_json(discovery.api_versions_json("").decode())
    assert versions.versions == ["v1"]
    groups = client.V1APIGroupList.from_json(discovery.api_group_list_json().decode())
    assert groups.groups == []
    served = client.V1APIGroupList.from_json(
        discovery.api_group_list_json(DEFAULT_RESOURCES).decode()
    )
    assert [g.name for g in served.groups] == [
        "apiextensions.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
    ]
    assert served.groups[1].preferred_version.group_version == "coordination.k8s.io/v1"
    info = client.VersionInfo.from_json(discovery.version_info_json().decode())
    assert info.git_version == discovery.GIT_VERSION
