"""Discovery documents: ``/version``, ``/api``, ``/apis`` and ``/api/v1``, as kube-apiserver
writes them.

Every kubectl verb that names a resource type reads ``/api``, ``/apis`` and ``/api/v1``
first (docs/clients.md §1.1), and maps ``cm``/``po``/``ns`` to resources only through the
``shortNames`` listed here. The shapes follow apimachinery's ``metav1`` types, members in Go's
declaration order with the same ``omitempty`` rules:

* ``APIVersions`` (``/api``): ``kind``, ``versions``, ``serverAddressByClientCIDRs``. The
  legacy core group's documents carry no ``apiVersion``, as kube-apiserver's do.
* ``APIGroupList`` (``/apis``): no groups are served, but the list must exist: kubectl 1.33
  fails when ``/apis`` is a 404.
* ``APIResourceList`` (``/api/v1``): per resource ``name``, ``singularName``, ``namespaced``,
  ``kind``, ``verbs``, then ``shortNames`` and ``categories`` only when non-empty, then
  ``storageVersionHash``. Resources are sorted by name, as the Go installer sorts its paths.
  Subresources (``pods/status``...) are not listed because they are not served.
* ``version.Info`` (``/version``): the Kubernetes release whose semantics we follow, with a
  semver pre-release naming watchcache (``v1.34.0-watchcache.0.1.0``). As in Kubernetes'
  own build stamping, a pre-release adds ``+`` to ``minor`` (GKE and EKS report ``"27+"``);
  the emulation and minimum-compatibility versions that 1.33+ servers report follow.

``/api`` and ``/apis`` are also served in the aggregated form (``APIGroupDiscoveryList``)
when the Accept header asks for it: :mod:`watchcache.apiserver.aggregated_discovery`, which
the handlers ask first; these documents are what every other client gets.

Discovery is cached by kubectl for 10 minutes (``~/.kube/cache/discovery``), so a change
here is invisible to a user until that cache expires.

Pure functions; the ``*_json`` forms return the bytes a handler writes (Go-identical JSON via
:mod:`watchcache.wire.gojson`), the others the dicts tests inspect. Cost: one small dict and one
``json.dumps``; callers may cache the bytes since nothing here depends on the request except
the server address.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import platform
import re
import sys
from collections.abc import Iterable
from typing import Any, Final

from watchcache import __version__
from watchcache.apiserver.aggregated_discovery import (
    SUBRESOURCE_KINDS,
    compare_kube_aware_versions,
)
from watchcache.registry.resources import ResourceSpec
from watchcache.wire import gojson

#: The Kubernetes release whose API semantics we implement (docs/semantics.md: 1.34 to 1.36
#: behave alike; 1.34 keeps kubectl 1.33 within the supported one-minor skew).
KUBERNETES_VERSION: Final = "v1.34.0"
#: What ``/version`` reports: the Kubernetes version, with watchcache's as a pre-release.
GIT_VERSION: Final = f"{KUBERNETES_VERSION}-watchcache.{__version__}"

# Kubernetes' hack/lib/version.sh reads major and minor out of the git version this way.
_GIT_VERSION_RE: Final = re.compile(
    r"^v(?P<major>0|[1-9][0-9]*)\.(?P<minor>0|[1-9][0-9]*)(?:\.[0-9]+)?"
    r"(?P<pre>-[^+]*)?(?:\+.*)?$"
)
_PREFERENCE: Final = functools.cmp_to_key(compare_kube_aware_versions)
_GO_ARCH: Final = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
_PLATFORM: Final = f"{sys.platform}/{_GO_ARCH.get(platform.machine().lower(), platform.machine())}"


def version_info(git_version: str = GIT_VERSION) -> dict[str, str]:
    """``version.Info`` for ``/version``. ``git_version`` must look like ``vMAJOR.MINOR[.PATCH]
    [-PRE][+BUILD]`` (ValueError otherwise): ``kubectl version`` (1.28+) parses it as semver to
    check the client/server skew."""
    match = _GIT_VERSION_RE.match(git_version)
    if match is None:
        raise ValueError(f"not a Kubernetes git version: {git_version!r}")
    major, minor = match["major"], match["minor"]
    return {
        "major": major,
        "minor": minor + ("+" if match["pre"] else ""),
        "emulationMajor": major,
        "emulationMinor": minor,
        "minCompatibilityMajor": major,
        "minCompatibilityMinor": str(max(int(minor) - 1, 0)),
        "gitVersion": git_version,
        "gitCommit": "",
        "gitTreeState": "",
        "buildDate": "",
        # Not Go: the runtime and compiler that actually serve the API.
        "goVersion": f"{platform.python_implementation().lower()}{platform.python_version()}",
        "compiler": platform.python_implementation().lower(),
        "platform": _PLATFORM,
    }


def api_versions(server_address: str) -> dict[str, Any]:
    """``APIVersions`` for ``/api``. ``server_address`` is ``host:port`` as clients reach us
    (clients ignore it over plain HTTP, but the Python client requires the member)."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def api_groups(resources: Iterable[ResourceSpec]) -> list[dict[str, Any]]:
    """One ``APIGroup`` (without kind and apiVersion, as inside a list) per named group
    served, sorted by name; each group's versions most preferred first (GA over beta over
    alpha, higher numbers first, as kube-apiserver orders a CRD's), the first being the
    preferred one, as in the aggregated documents."""
    versions: dict[str, list[str]] = {}
    for spec in resources:
        if spec.group:
            listed = versions.setdefault(spec.group, [])
            if spec.version not in listed:
                listed.append(spec.version)
    groups = []
    for name in sorted(versions):
        ordered = sorted(versions[name], key=_PREFERENCE, reverse=True)
        entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in ordered]
        groups.append({"name": name, "versions": entries, "preferredVersion": entries[0]})
    return groups


def api_group_list(resources: Iterable[ResourceSpec] = ()) -> dict[str, Any]:
    """``APIGroupList`` for ``/apis``: the named groups served (the core group is ``/api``)."""
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": api_groups(resources)}


def api_group(resources: Iterable[ResourceSpec], name: str) -> dict[str, Any] | None:
    """``APIGroup`` for ``/apis/<name>``, or None when the group is not served."""
    for group in api_groups(resources):
        if group["name"] == name:
            return {"kind": "APIGroup", "apiVersion": "v1", **group}
    return None


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """Kubernetes' opaque ``storageVersionHash``: base64 of the first 8 bytes of
    SHA-256(``group/version/kind``). Clients compare it only for equality."""
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def api_resource(spec: ResourceSpec) -> dict[str, Any]:
    """One ``APIResource`` entry (Go member order and omitempty rules)."""
    resource: dict[str, Any] = {
        "name": spec.name,
        "singularName": spec.singular,
        "namespaced": spec.namespaced,
        "kind": spec.kind,
        "verbs": list(spec.verbs),
    }
    if spec.short_names:
        resource["shortNames"] = list(spec.short_names)
    if spec.categories:
        resource["categories"] = list(spec.categories)
    # Every version of the same objects names the version they are stored in.
    group, version = spec.storage_group_version
    resource["storageVersionHash"] = storage_version_hash(group, version, spec.kind)
    return resource


def api_resource_list(
    resources: Iterable[ResourceSpec], group_version: str = "v1"
) -> dict[str, Any]:
    """``APIResourceList`` for ``/api/v1`` (resources of other group-versions are left out)."""
    served = sorted((r for r in resources if r.api_version == group_version), key=lambda r: r.name)
    body: dict[str, Any] = {"kind": "APIResourceList"}
    if group_version != "v1":
        # Named groups' lists carry apiVersion; the legacy core group's does not.
        body["apiVersion"] = "v1"
    body["groupVersion"] = group_version
    body["resources"] = [entry for spec in served for entry in _entries(spec)]
    return body


def _entries(spec: ResourceSpec) -> list[dict[str, Any]]:
    """The resource's entry, then one per subresource (``pods/status``)."""
    entries = [api_resource(spec)]
    for subresource in sorted(spec.subresources):
        entry: dict[str, Any] = {
            "name": f"{spec.name}/{subresource}",
            "singularName": "",
            "namespaced": spec.namespaced,
        }
        # A subresource answering another kind names its group and version (every
        # /scale answers autoscaling/v1 Scale), as kube-apiserver lists it.
        group, version, kind = SUBRESOURCE_KINDS.get(subresource, ("", "", spec.kind))
        if group:
            entry["group"] = group
        if version:
            entry["version"] = version
        entry["kind"] = kind
        entry["verbs"] = list(spec.subresource_verbs(subresource))
        entries.append(entry)
    return entries


def version_info_json(git_version: str = GIT_VERSION) -> bytes:
    """:func:`version_info` as the response body."""
    return gojson.dumpb(version_info(git_version))


def api_versions_json(server_address: str) -> bytes:
    """:func:`api_versions` as the response body."""
    return gojson.dumpb(api_versions(server_address))


def api_group_list_json(resources: Iterable[ResourceSpec] = ()) -> bytes:
    """:func:`api_group_list` as the response body."""
    return gojson.dumpb(api_group_list(resources))


def api_resource_list_json(resources: Iterable[ResourceSpec], group_version: str = "v1") -> bytes:
    """:func:`api_resource_list` as the response body."""
    return gojson.dumpb(api_resource_list(resources, group_version))
