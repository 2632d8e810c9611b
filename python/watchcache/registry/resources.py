"""The resources an apiserver serves: names, scope, verbs and what selectors and tables need.

One :class:`ResourceSpec` per resource drives everything resource-specific: discovery
(``/api/v1``), the etcd prefix (``/registry/<resource>/``), the fields extracted for field
selectors, and the Table columns kubectl prints. The defaults are core/v1 ``configmaps``,
``secrets``, ``pods`` and ``namespaces`` (cluster-scoped).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from watchcache.cache.objects import ObjectCodec

NAMESPACED_VERBS = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)
CLUSTER_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """A core/v1 resource. ``fields``: the field selectors it supports beyond
    ``metadata.name``/``metadata.namespace`` (Kubernetes' per-resource field sets)."""

    name: str
    singular: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    group: str = ""
    version: str = "v1"
    #: Subresources served besides the object itself (``status``, a namespace's
    #: ``finalize``); discovery lists them and the handlers route them.
    subresources: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def prefix(self) -> str:
        """The etcd key prefix, as Kubernetes lays keys out."""
        return f"/registry/{self.name}/"

    @property
    def verbs(self) -> tuple[str, ...]:
        return NAMESPACED_VERBS if self.namespaced else CLUSTER_VERBS

    def subresource_verbs(self, subresource: str) -> tuple[str, ...]:
        """The verbs of a subresource, as Kubernetes serves them."""
        return ("update",) if subresource == "finalize" else ("get", "patch", "update")

    @property
    def selectable_fields(self) -> tuple[str, ...]:
        scope = ("metadata.name", "metadata.namespace") if self.namespaced else ("metadata.name",)
        return scope + self.fields

    def codec(self) -> ObjectCodec:
        # Cluster-scoped objects still answer metadata.namespace="" like Kubernetes does.
        return ObjectCodec(("metadata.name", "metadata.namespace", *self.fields))

    def key(self, namespace: str, name: str) -> str:
        """The etcd key of one object (``/registry/<resource>/[<namespace>/]<name>``)."""
        if self.namespaced:
            return f"{self.prefix}{namespace}/{name}"
        return f"{self.prefix}{name}"

    def collection_prefix(self, namespace: str) -> str:
        """The key prefix of a LIST: one namespace, or everything."""
        if self.namespaced and namespace:
            return f"{self.prefix}{namespace}/"
        return self.prefix


CONFIGMAPS = ResourceSpec("configmaps", "configmap", "ConfigMap", short_names=("cm",))
SECRETS = ResourceSpec("secrets", "secret", "Secret", fields=("type",))
PODS = ResourceSpec(
    "pods",
    "pod",
    "Pod",
    short_names=("po",),
    categories=("all",),
    fields=("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
            "status.phase", "status.podIP", "status.nominatedNodeName"),
    subresources=("status",),
)  # fmt: skip
NAMESPACES = ResourceSpec(
    "namespaces", "namespace", "Namespace", namespaced=False, short_names=("ns",),
    fields=("status.phase",), subresources=("finalize", "status"),
)  # fmt: skip

DEFAULT_RESOURCES: tuple[ResourceSpec, ...] = (CONFIGMAPS, SECRETS, PODS, NAMESPACES)
KNOWN_RESOURCES: Mapping[str, ResourceSpec] = {r.name: r for r in DEFAULT_RESOURCES}


def select_resources(names: Iterable[str]) -> tuple[ResourceSpec, ...]:
    """Specs by plural name (``--resources configmaps,pods``). Raises ValueError naming
    the unknown ones and what is available."""
    wanted = [n.strip() for n in names if n.strip()]
    unknown = [n for n in wanted if n not in KNOWN_RESOURCES]
    if unknown:
        raise ValueError(
            f"unknown resources {', '.join(unknown)}; available: {', '.join(KNOWN_RESOURCES)}"
        )
    return tuple(KNOWN_RESOURCES[n] for n in dict.fromkeys(wanted))
