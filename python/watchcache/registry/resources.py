"""The resources an apiserver serves: one declared value per resource, core or named group,
built in or an embedder's own.

One :class:`ResourceSpec` drives everything resource-specific: its API path
(``/api/v1/...`` for the core group, ``/apis/<group>/<version>/...`` otherwise), discovery,
the etcd prefix (Kubernetes' layout: ``/registry/<resource>/`` for built-in kinds,
``/registry/<group>/<resource>/`` for others, as for custom resources), the fields
extracted for field selectors, the Table columns kubectl prints, the subresources, the
OpenAPI schema and how long objects live (Events). Served resources are told apart by
:attr:`ResourceSpec.group_resource` (``configmaps``, ``leases.coordination.k8s.io``), the
name caches and stores are kept under.

The built-in kinds are core/v1 ``configmaps``, ``secrets``, ``pods``, ``namespaces``
(cluster-scoped) and ``events``, ``events.k8s.io/v1`` ``events`` (the core Events in
another version), ``coordination.k8s.io/v1`` ``leases`` and ``apiextensions.k8s.io/v1``
``customresourcedefinitions``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from watchcache.cache.objects import FieldPath, ObjectCodec
from watchcache.registry.event_conversion import EVENT_CONVERSION

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
class PrinterColumn:
    """One Table column, as a CRD's ``additionalPrinterColumns`` declares it: the cell is
    the value at ``json_path`` (``.spec.replicas``) in the object."""

    name: str
    type: str
    json_path: str
    description: str = ""
    format: str = ""
    priority: int = 0


@dataclass(frozen=True, slots=True)
class ScaleSubresource:
    """Where a kind keeps what the ``/scale`` subresource reads and writes, as a CRD's
    ``subresources.scale`` declares it: dotted JSON paths (``.spec.replicas``)."""

    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str = ""


class VersionConversion(Protocol):
    """How the objects of a served version and those of the stored version map onto each
    other, at the etcd boundary only: everything between (admission, the strategy, patches,
    Tables) sees the served version, and etcd holds one form that every served version's
    cache converts from as it ingests.

    Both work in place on a parsed object and set ``apiVersion``. They may replace the
    object's members but must never change a nested value in place, so a shallow copy is
    enough to convert an object that is still in use (the answer to a write)."""

    def to_served(self, obj: dict[str, Any]) -> None:
        """Turn a stored object into the served version."""
        ...

    def to_storage(self, obj: dict[str, Any]) -> None:
        """Turn an object of the served version into the stored one."""
        ...


@dataclass(frozen=True, slots=True)
class ApiVersionConversion:
    """A CRD's ``None`` conversion: every version has the same fields, so only
    ``apiVersion`` changes."""

    served: str
    stored: str

    def to_served(self, obj: dict[str, Any]) -> None:
        obj["apiVersion"] = self.served

    def to_storage(self, obj: dict[str, Any]) -> None:
        obj["apiVersion"] = self.stored


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """A served resource.

    ``fields``: field-selector names it supports beyond ``metadata.name`` and
    ``metadata.namespace``; each is the object's field at the same dotted path, unless
    ``field_paths`` maps it elsewhere (core Events' ``source`` is ``source.component``, or
    ``reportingComponent`` when that is empty).
    ``printer_columns``: the Table columns (none: Kubernetes' printer for the built-in
    kinds, else Name and Created At). ``openapi_schema``: the object's OpenAPI v3 schema
    (a CRD version's ``openAPIV3Schema``; None for built-in kinds, whose schema is the
    wire's). ``storage_prefix``: the etcd prefix when not the default layout.
    ``ttl_seconds``: objects expire this long after their last write (Events), 0 never.
    ``storage_version``, ``storage_group``: the version (and group, None: this one) objects
    are stored as, when not this version (a CRD's other served versions, ``events.k8s.io``
    Events stored as core ones); reads and writes convert at the etcd boundary, with
    ``conversion`` (None: only ``apiVersion`` differs, see :meth:`version_conversion`).
    ``scale``: the ``/scale`` subresource's paths (listed in ``subresources`` too).
    ``deprecation_warning``: sent as a Warning header with every request to this version.
    ``cached``: clients' LIST, GET and WATCH are served from a watch cache; False serves
    them from etcd, as kube-apiserver serves a resource whose watch cache is disabled
    (docs/etcd.md §6).
    """

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
    field_paths: tuple[tuple[str, FieldPath], ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    openapi_schema: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    storage_prefix: str = ""
    ttl_seconds: int = 0
    storage_version: str = ""
    scale: ScaleSubresource | None = None
    deprecation_warning: str = ""
    storage_group: str | None = None
    conversion: VersionConversion | None = field(default=None, compare=False, hash=False)
    cached: bool = True
    # Computed once: every request looks its resource's store and cache up by it.
    _served_key: str = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        key = (
            self.group_resource
            if self.stored_as_served
            else f"{self.name}.{self.version}.{self.group}"
        )
        object.__setattr__(self, "_served_key", key)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """``<resource>[.<group>]``: what tells served resources apart."""
        return f"{self.name}.{self.group}" if self.group else self.name

    @property
    def storage_group_version(self) -> tuple[str, str]:
        """The group and version objects are stored as."""
        group = self.group if self.storage_group is None else self.storage_group
        return group, self.storage_version or self.version

    @property
    def storage_group_resource(self) -> str:
        """``<resource>[.<group>]`` of the objects as stored: what places them (kube keys
        ``--etcd-servers-overrides`` and ``--watch-cache-sizes`` by the storage resource,
        so ``events.k8s.io`` Events go where the core ``events`` go)."""
        group, _ = self.storage_group_version
        return f"{self.name}.{group}" if group else self.name

    @property
    def stored_as_served(self) -> bool:
        """Objects are stored in this version (no conversion between etcd and clients)."""
        return self.storage_group_version == (self.group, self.version)

    @property
    def storage_api_version(self) -> str:
        group, version = self.storage_group_version
        return f"{group}/{version}" if group else version

    @property
    def served_key(self) -> str:
        """What tells served resources apart: ``group_resource`` for the version objects
        are stored in, ``<resource>.<version>.<group>`` for other versions of the same
        objects (a CRD's, ``events.v1.events.k8s.io``): controllers follow only the
        storage version, so they see each object once."""
        return self._served_key

    @property
    def api_root(self) -> str:
        """The path the resource's URLs start with (``/api/v1``, ``/apis/<g>/<v>``)."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def prefix(self) -> str:
        """The etcd key prefix, as Kubernetes lays keys out."""
        if self.storage_prefix:
            return self.storage_prefix
        if self.group:
            return f"/registry/{self.group}/{self.name}/"
        return f"/registry/{self.name}/"

    @property
    def verbs(self) -> tuple[str, ...]:
        return NAMESPACED_VERBS if self.namespaced else CLUSTER_VERBS

    def subresource_verbs(self, subresource: str) -> tuple[str, ...]:
        """The verbs of a subresource, as Kubernetes serves them."""
        return ("update",) if subresource == "finalize" else ("get", "patch", "update")

    def version_conversion(self) -> VersionConversion | None:
        """How objects cross between this version and the stored one (None: stored as
        served): the declared ``conversion``, else a CRD's ``None`` conversion, as a CRD
        without a webhook has it."""
        if self.stored_as_served:
            return None
        if self.conversion is not None:
            return self.conversion
        return ApiVersionConversion(self.api_version, self.storage_api_version)

    @property
    def selectable_fields(self) -> tuple[str, ...]:
        scope = ("metadata.name", "metadata.namespace") if self.namespaced else ("metadata.name",)
        return scope + self.fields

    def codec(self) -> ObjectCodec:
        # Cluster-scoped objects still answer metadata.namespace="" like Kubernetes does.
        paths = dict(self.field_paths)
        selectable = ("metadata.name", "metadata.namespace", *self.fields)
        conversion = self.version_conversion()
        return ObjectCodec(
            tuple((name, paths.get(name, name)) for name in selectable),
            convert=None if conversion is None else conversion.to_served,
        )

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

#: core/v1 Events: kept an hour after their last write (kube-apiserver's --event-ttl), and
#: selectable by the fields ``kubectl describe`` and ``kubectl events`` ask for.
EVENTS = ResourceSpec(
    "events", "event", "Event", short_names=("ev",),
    fields=("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
            "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
            "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"),
    field_paths=(("source", ("source.component", "reportingComponent")),),
    ttl_seconds=3600,
)  # fmt: skip
#: ``events.k8s.io/v1`` Events: the core Events again (same keys, same TTL), converted at
#: the etcd boundary (``registry.event_conversion``). Selectable by the same fields as
#: core Events under this version's names, as kube-apiserver's field label conversion
#: maps them (``regarding.kind`` is ``involvedObject.kind``).
EVENTS_V1 = ResourceSpec(
    "events", "event", "Event", short_names=("ev",), group="events.k8s.io",
    fields=("regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
            "regarding.apiVersion", "regarding.resourceVersion", "regarding.fieldPath",
            "reason", "reportingController", "source", "type"),
    field_paths=(("source", ("deprecatedSource.component", "reportingController")),),
    storage_prefix=EVENTS.prefix, storage_group="", storage_version=EVENTS.version,
    conversion=EVENT_CONVERSION, ttl_seconds=EVENTS.ttl_seconds,
)  # fmt: skip
LEASES = ResourceSpec(
    "leases", "lease", "Lease", group="coordination.k8s.io", storage_prefix="/registry/leases/",
)  # fmt: skip

#: ``apiextensions.k8s.io/v1`` CustomResourceDefinitions: creating one serves the
#: resources it defines (the CRD controller, ``controllers.crd``).
CUSTOM_RESOURCE_DEFINITIONS = ResourceSpec(
    "customresourcedefinitions", "customresourcedefinition", "CustomResourceDefinition",
    namespaced=False, short_names=("crd", "crds"), categories=("api-extensions",),
    group="apiextensions.k8s.io", subresources=("status",),
)  # fmt: skip

DEFAULT_RESOURCES: tuple[ResourceSpec, ...] = (
    CONFIGMAPS, SECRETS, PODS, NAMESPACES, EVENTS, EVENTS_V1, LEASES, CUSTOM_RESOURCE_DEFINITIONS,
)  # fmt: skip
KNOWN_RESOURCES: Mapping[str, ResourceSpec] = {r.group_resource: r for r in DEFAULT_RESOURCES}


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
