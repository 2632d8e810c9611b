"""Server-side apply's type model (``registry.apply_types``) and the markers it is built from.

The markers ``scripts/gen-schema.py`` records are checked against facts Kubernetes
publishes in ``api/openapi-spec`` (the same ``x-kubernetes-*`` extensions on the same
fields); the atoms against what kube-openapi's ``schemaconv`` makes of those definitions
(Pod containers keyed by name, ports by containerPort and protocol with protocol
defaulting to TCP, finalizers a set, tolerations atomic, ...); every served kind's export in
structured-merge-diff's YAML form must parse and name only types it defines; CRD schemas
convert each ``x-kubernetes-*`` extension as apiextensions-apiserver's models for apply do.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from watchcache.registry import apply_types
from watchcache.registry.apply_types import (
    ApplyTypeError,
    atom_for,
    builtin_atom,
    builtin_name,
    custom_atom,
    custom_name,
)
from watchcache.registry.crd_resources import served_specs
from watchcache.registry.custom_resource import InvalidSchemaError
from watchcache.registry.resources import (
    CUSTOM_RESOURCE_DEFINITIONS,
    DEFAULT_RESOURCES,
    EVENTS_V1,
    LEASES,
    PODS,
    ResourceSpec,
)
from watchcache.registry.structural import StructuralSchema
from watchcache.structured.schema import (
    ASSOCIATIVE,
    ATOMIC,
    DEDUCED,
    SEPARABLE,
    UNTYPED_ATOMIC,
    Atom,
    to_smd_yaml,
)
from watchcache.wire import schema as wire_schema

CORE = "k8s.io.api.core.v1."
META = "k8s.io.apimachinery.pkg.apis.meta.v1."
APIEXT = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1."
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

ROOT = Path(__file__).resolve().parents[2]


# -- helpers ------------------------------------------------------------------------------------


def at(atom: Atom, *path: str) -> Atom:
    """The type at a path of field names; ``[]`` steps into a list's elements, ``{}`` into
    a map's values."""
    for step in path:
        if step == "[]":
            assert atom.list is not None, f"{atom} is not a list"
            atom = atom.list.element
        elif step == "{}":
            assert atom.map is not None and atom.map.element is not None, f"{atom}"
            atom = atom.map.element
        else:
            assert atom.map is not None, f"{atom} is not a map (at {step})"
            atom = atom.map.fields[step].type
    return atom


def default_at(atom: Atom, *path: str) -> Any:
    parent = at(atom, *path[:-1])
    assert parent.map is not None
    return parent.map.fields[path[-1]].default


def pod() -> Atom:
    atom = builtin_atom("v1", "Pod")
    assert atom is not None
    return atom


def extensions(message: str, json_name: str) -> dict[str, Any]:
    """A field's markers as the x-kubernetes-* extensions Kubernetes publishes."""
    fld = wire_schema.load().message(message).by_json[json_name]
    out: dict[str, Any] = {}
    if fld.list_type:
        out["x-kubernetes-list-type"] = fld.list_type
    if fld.list_map_keys:
        out["x-kubernetes-list-map-keys"] = list(fld.list_map_keys)
    if fld.openapi_map_type:
        out["x-kubernetes-map-type"] = fld.openapi_map_type
    if fld.patch_strategy:
        out["x-kubernetes-patch-strategy"] = fld.patch_strategy
    if fld.patch_merge_key:
        out["x-kubernetes-patch-merge-key"] = fld.patch_merge_key
    return out


def crd_schema(schema: Mapping[str, Any]) -> StructuralSchema:
    return StructuralSchema.from_openapi(schema, field_path="openAPIV3Schema")


def widget(properties: Mapping[str, Any]) -> Atom:
    """A Widget CRD's atom whose ``spec`` has ``properties``."""
    schema = {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": properties}},
    }
    return custom_atom(crd_schema(schema), name="com.example.v1.Widget")


def named_types(exported: str) -> tuple[set[str], set[str]]:
    """The names a ``to_smd_yaml`` document defines and the names it references."""
    document = yaml.safe_load(exported)
    defined = [entry["name"] for entry in document["types"]]
    assert len(defined) == len(set(defined)), "a type is defined twice"
    referenced: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "namedType" in node:
                referenced.add(node["namedType"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document["types"])
    return set(defined), referenced


# -- the markers the generator records ---------------------------------------------------------

# Extensions Kubernetes publishes on these fields (api/openapi-spec/v3), verbatim.
PUBLISHED: dict[tuple[str, str], dict[str, Any]] = {
    (CORE + "PodSpec", "containers"): {
        "x-kubernetes-list-map-keys": ["name"],
        "x-kubernetes-list-type": "map",
        "x-kubernetes-patch-merge-key": "name",
        "x-kubernetes-patch-strategy": "merge",
    },
    (CORE + "PodSpec", "volumes"): {
        "x-kubernetes-list-map-keys": ["name"],
        "x-kubernetes-list-type": "map",
        "x-kubernetes-patch-merge-key": "name",
        "x-kubernetes-patch-strategy": "merge,retainKeys",
    },
    (CORE + "PodSpec", "tolerations"): {"x-kubernetes-list-type": "atomic"},
    (CORE + "PodSpec", "nodeSelector"): {"x-kubernetes-map-type": "atomic"},
    (CORE + "PodSpec", "topologySpreadConstraints"): {
        "x-kubernetes-list-map-keys": ["topologyKey", "whenUnsatisfiable"],
        "x-kubernetes-list-type": "map",
        "x-kubernetes-patch-merge-key": "topologyKey",
        "x-kubernetes-patch-strategy": "merge",
    },
    (CORE + "Container", "ports"): {
        "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
        "x-kubernetes-list-type": "map",
        "x-kubernetes-patch-merge-key": "containerPort",
        "x-kubernetes-patch-strategy": "merge",
    },
    (CORE + "Container", "env"): {
        "x-kubernetes-list-map-keys": ["name"],
        "x-kubernetes-list-type": "map",
        "x-kubernetes-patch-merge-key": "name",
        "x-kubernetes-patch-strategy": "merge",
    },
    (CORE + "Container", "args"): {"x-kubernetes-list-type": "atomic"},
    (CORE + "ServiceSpec", "ports"): {
        "x-kubernetes-list-map-keys": ["port", "protocol"],
        "x-kubernetes-list-type": "map",
        "x-kubernetes-patch-merge-key": "port",
        "x-kubernetes-patch-strategy": "merge",
    },
    (CORE + "ServiceSpec", "selector"): {"x-kubernetes-map-type": "atomic"},
    (CORE + "PersistentVolumeSpec", "claimRef"): {"x-kubernetes-map-type": "granular"},
    (CORE + "NodeSpec", "podCIDRs"): {
        "x-kubernetes-list-type": "set",
        "x-kubernetes-patch-strategy": "merge",
    },
    (META + "ObjectMeta", "finalizers"): {
        "x-kubernetes-list-type": "set",
        "x-kubernetes-patch-strategy": "merge",
    },
    (META + "ObjectMeta", "ownerReferences"): {
        "x-kubernetes-list-map-keys": ["uid"],
        "x-kubernetes-list-type": "map",
        "x-kubernetes-patch-merge-key": "uid",
        "x-kubernetes-patch-strategy": "merge",
    },
    (META + "ObjectMeta", "managedFields"): {"x-kubernetes-list-type": "atomic"},
    (META + "ObjectMeta", "labels"): {},
    (APIEXT + "CustomResourceDefinitionStatus", "conditions"): {
        "x-kubernetes-list-map-keys": ["type"],
        "x-kubernetes-list-type": "map",
    },
    (APIEXT + "CustomResourceDefinitionSpec", "versions"): {"x-kubernetes-list-type": "atomic"},
    (APIEXT + "JSONSchemaProps", "x-kubernetes-validations"): {
        "x-kubernetes-list-map-keys": ["rule"],
        "x-kubernetes-list-type": "map",
        "x-kubernetes-patch-merge-key": "rule",
        "x-kubernetes-patch-strategy": "merge",
    },
}


@pytest.mark.parametrize(("message", "json_name"), sorted(PUBLISHED))
def test_field_markers_are_what_kubernetes_publishes(message: str, json_name: str) -> None:
    assert extensions(message, json_name) == PUBLISHED[(message, json_name)]


def test_type_markers_and_defaults_are_what_kubernetes_publishes() -> None:
    schema = wire_schema.load()
    atomic_types = (
        CORE + "LocalObjectReference",
        CORE + "ObjectReference",
        META + "OwnerReference",
        CORE + "NodeSelector",
        "k8s.io.api.autoscaling.v1.CrossVersionObjectReference",
    )
    for atomic in atomic_types:
        assert schema.message(atomic).openapi_map_type == "atomic", atomic
    assert schema.message(CORE + "PodSpec").openapi_map_type == ""
    assert schema.message(CORE + "ContainerPort").by_json["protocol"].default == "TCP"
    assert schema.message(CORE + "ServicePort").by_json["protocol"].default == "TCP"
    # +default=ref(AzureDataDiskCachingReadWrite): the constant's value.
    azure = schema.message(CORE + "AzureDiskVolumeSource").by_json
    assert azure["cachingMode"].default == "ReadWrite"
    assert azure["readOnly"].default is False
    assert schema.message(CORE + "Container").by_json["name"].default is None


def test_every_marker_is_well_formed() -> None:
    """Values openapi-gen accepts; map lists have keys that are fields of the element."""
    schema = wire_schema.load()
    marked = 0
    for message in schema.messages.values():
        assert message.openapi_map_type in ("", "atomic", "granular"), message
        for fld in message.fields:
            assert fld.list_type in ("", "atomic", "set", "map"), fld
            assert fld.openapi_map_type in ("", "atomic", "granular"), fld
            assert fld.patch_strategy in ("", "merge", "retainKeys", "merge,retainKeys"), fld
            assert bool(fld.list_map_keys) == (fld.list_type == "map"), fld
            if fld.list_map_keys:
                assert fld.message is not None
                for key in fld.list_map_keys:
                    assert key in fld.message.by_json, (fld, key)
            if fld.patch_merge_key:
                assert fld.message is not None and fld.patch_merge_key in fld.message.by_json
            marked += bool(fld.list_type or fld.patch_strategy or fld.openapi_map_type)
    assert marked >= 150


# The generator's marker reading, on Go source written here.
@pytest.fixture(scope="module")
def gen_schema() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_schema", ROOT / "scripts" / "gen-schema.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_schema"] = module
    spec.loader.exec_module(module)
    return module


GO_SOURCE = """package v1

const (
\tProtocolTCP Protocol = "TCP"
\tlimit = 3
)

type Protocol string

// Port is a port.
// +structType=atomic
type Port struct {
\t// The protocol.
\t// +default=ref(ProtocolTCP)
\t// +optional
\tProtocol Protocol `json:"protocol,omitempty" protobuf:"bytes,1,opt,name=protocol"`

\t// +listType=map
\t// +listMapKey=port
\t// +listMapKey=protocol
\t// +patchMergeKey=port
\t// +patchStrategy=merge
\tPorts []Port `json:"ports" patchStrategy:"merge" patchMergeKey:"port" PROTOBUF_PORTS`
\t// +listType=atomic

\tDetached []string `json:"detached" protobuf:"bytes,3,rep,name=detached"`
}
""".replace("PROTOBUF_PORTS", 'protobuf:"bytes,2,rep,name=ports"')


def test_the_generator_reads_markers_from_doc_comments(gen_schema: ModuleType) -> None:
    package = gen_schema.GoPackage("v1", "core/v1")
    gen_schema.parse_go_file(GO_SOURCE, package)
    assert package.consts == {"ProtocolTCP": '"TCP"', "limit": "3"}
    generator = gen_schema.Generator({})
    assert generator.type_markers(package, "Port", "Port") == {"structType": "atomic"}
    protocol, ports, detached = package.structs["Port"]
    assert generator.field_markers(package, "Port.Protocol", protocol) == {"default": "TCP"}
    assert generator.field_markers(package, "Port.Ports", ports) == {
        "listType": "map",
        "listMapKey": ["port", "protocol"],
        "patchStrategy": "merge",
        "patchMergeKey": "port",
    }
    # A blank line ends a doc comment: the tag above it is nobody's.
    assert generator.field_markers(package, "Port.Detached", detached) == {}


def test_the_generator_refuses_patch_tags_that_disagree(gen_schema: ModuleType) -> None:
    package = gen_schema.GoPackage("v1", "core/v1")
    source = GO_SOURCE.replace('patchMergeKey:"port"', 'patchMergeKey:"name"')
    gen_schema.parse_go_file(source, package)
    ports = package.structs["Port"][1]
    with pytest.raises(SystemExit, match="patchMergeKey"):
        gen_schema.Generator({}).field_markers(package, "Port.Ports", ports)


def test_the_loader_refuses_markers_of_unknown_fields(tmp_path: Path) -> None:
    raw = json.loads(wire_schema.SCHEMA_FILE.read_text())
    raw["markers"][CORE + "Container"]["fields"]["NoSuchField"] = {"listType": "atomic"}
    path = tmp_path / "k8s_schema.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="NoSuchField"):
        wire_schema.load(path)


# -- built-in kinds ------------------------------------------------------------------------------


def test_pod_containers_ports_and_env() -> None:
    containers = at(pod(), "spec", "containers")
    assert containers.list is not None
    assert (containers.list.relationship, containers.list.keys) == (ASSOCIATIVE, ("name",))
    assert containers.list.element is builtin_atom_of(CORE + "Container")
    ports = at(containers, "[]", "ports")
    assert ports.list is not None
    assert ports.list.keys == ("containerPort", "protocol")
    assert default_at(ports, "[]", "protocol") == "TCP"
    assert default_at(ports, "[]", "containerPort") == 0  # enforced: int32 without omitempty
    assert at(ports, "[]", "containerPort").scalar == "numeric"
    env = at(containers, "[]", "env")
    assert env.list is not None and env.list.keys == ("name",)
    volumes = at(pod(), "spec", "volumes")
    assert volumes.list is not None and volumes.list.keys == ("name",)
    # containerStatuses: +listType=atomic wins over nothing.
    statuses = at(pod(), "status", "containerStatuses")
    assert statuses.list is not None and statuses.list.relationship == ATOMIC


def builtin_atom_of(message: str) -> Atom:
    return apply_types._builtins().atoms[message]


def test_object_meta_lists_and_maps() -> None:
    meta = at(pod(), "metadata")
    assert meta is builtin_atom_of(META + "ObjectMeta") and meta.name == OBJECT_META
    finalizers = at(meta, "finalizers")
    assert finalizers.list is not None
    assert (finalizers.list.relationship, finalizers.list.keys) == (ASSOCIATIVE, ())
    assert finalizers.list.element.scalar == "string"
    owners = at(meta, "ownerReferences")
    assert owners.list is not None and owners.list.keys == ("uid",)
    owner = owners.list.element
    assert owner.name.endswith("OwnerReference") and owner.map is not None
    assert owner.map.relationship == ATOMIC
    labels = at(meta, "labels")
    assert labels.map is not None and labels.map.relationship == SEPARABLE
    assert labels.map.element is not None and labels.map.element.scalar == "string"
    managed = at(meta, "managedFields")
    assert managed.list is not None and managed.list.relationship == ATOMIC
    assert at(managed, "[]", "fieldsV1").map is not None  # FieldsV1: an object, deduced
    assert at(managed, "[]", "fieldsV1", "{}") is DEDUCED
    assert at(meta, "creationTimestamp").scalar == "untyped"  # date-time
    assert default_at(meta, "creationTimestamp") == {}  # a non-pointer struct
    assert default_at(meta, "deletionTimestamp") is None  # a pointer
    assert default_at(meta, "name") is None  # omitempty


def test_atomic_maps_structs_and_lists() -> None:
    spec = at(pod(), "spec")
    node_selector = at(spec, "nodeSelector")
    assert node_selector.map is not None and node_selector.map.relationship == ATOMIC
    tolerations = at(spec, "tolerations")
    assert tolerations.list is not None and tolerations.list.relationship == ATOMIC
    # A struct-typed field whose type is atomic: the named type itself.
    secret_ref = at(spec, "volumes", "[]", "secret", "items")
    assert secret_ref.list is not None and secret_ref.list.relationship == ATOMIC
    reference = at(spec, "imagePullSecrets", "[]")
    assert reference.name == "io.k8s.api.core.v1.LocalObjectReference"
    assert reference.map is not None and reference.map.relationship == ATOMIC
    # +structType=granular on a field overrides the atomic ObjectReference there.
    persistent_volume = builtin_atom("v1", "PersistentVolume")
    assert persistent_volume is not None
    claim_ref = at(persistent_volume, "spec", "claimRef")
    assert claim_ref.name == "" and claim_ref.map is not None
    assert claim_ref.map.relationship == SEPARABLE
    plain = builtin_atom_of(CORE + "ObjectReference")
    assert plain.map is not None and plain.map.relationship == ATOMIC
    assert claim_ref.map.fields is plain.map.fields


def test_service_ports_keyed_by_port_and_protocol() -> None:
    service = builtin_atom("v1", "Service")
    assert service is not None
    ports = at(service, "spec", "ports")
    assert ports.list is not None
    assert (ports.list.relationship, ports.list.keys) == (ASSOCIATIVE, ("port", "protocol"))
    assert default_at(ports, "[]", "protocol") == "TCP"
    assert default_at(ports, "[]", "port") == 0
    target = at(ports, "[]", "targetPort")
    assert target.name == "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
    # A oneOf without a type: any value, maps deduced (schemaconv's untyped conversion).
    assert target.scalar == "untyped" and target.list is not None and target.map is not None
    assert target.list.element is UNTYPED_ATOMIC and target.map.element is DEDUCED
    selector = at(service, "spec", "selector")
    assert selector.map is not None and selector.map.relationship == ATOMIC


def test_lease_and_event_kinds() -> None:
    lease = atom_for(LEASES)
    assert lease.name == "io.k8s.api.coordination.v1.Lease"
    assert at(lease, "spec", "holderIdentity").scalar == "string"
    assert at(lease, "spec", "leaseDurationSeconds").scalar == "numeric"
    assert at(lease, "spec", "renewTime").name.endswith("meta.v1.MicroTime")
    assert at(lease, "spec", "renewTime").scalar == "untyped"
    assert at(lease, "apiVersion").scalar == "string"
    event = atom_for(EVENTS_V1)
    assert event.name == "io.k8s.api.events.v1.Event"
    assert at(event, "regarding").map is not None


def test_special_forms() -> None:
    quantity = builtin_atom_of("k8s.io.apimachinery.pkg.api.resource.Quantity")
    assert (quantity.scalar, quantity.list, quantity.map) == ("untyped", None, None)
    raw = builtin_atom_of("k8s.io.apimachinery.pkg.runtime.RawExtension")
    assert raw.map is not None and raw.map.relationship == ATOMIC  # owned whole
    assert raw.list is not None and raw.list.element is UNTYPED_ATOMIC
    duration = builtin_atom_of(META + "Duration")
    assert duration.scalar == "string"
    requests = at(pod(), "spec", "containers", "[]", "resources", "requests")
    assert requests.map is not None and requests.map.element is quantity
    secret = builtin_atom("v1", "Secret")
    assert secret is not None and at(secret, "data", "{}").scalar == "string"  # []byte
    resource = builtin_atom_of(META + "APIResource")
    verbs = at(resource, "verbs")  # Verbs: a named slice written in place
    assert verbs.list is not None and verbs.list.element.scalar == "string"


def test_custom_resource_definition_kind() -> None:
    crd = atom_for(CUSTOM_RESOURCE_DEFINITIONS)
    versions = at(crd, "spec", "versions")
    assert versions.list is not None and versions.list.relationship == ATOMIC  # +listType
    conditions = at(crd, "status", "conditions")
    assert conditions.list is not None and conditions.list.keys == ("type",)
    props = at(crd, "spec", "versions", "[]", "schema", "openAPIV3Schema")
    assert props.name == "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"
    assert at(props, "properties", "{}") is props  # recursive, through the named type
    rules = at(props, "x-kubernetes-validations")
    assert rules.list is not None and rules.list.keys == ("rule",)
    # apiextensions' JSON and the Or* wrappers have no type: any value, maps deduced.
    for name in ("default", "items", "additionalProperties"):
        atom = at(props, name)
        assert atom.scalar == "untyped" and atom.map is not None, name
        assert atom.map.element is DEDUCED and atom.map.relationship == SEPARABLE


def test_without_a_list_type_the_patch_strategy_decides(tmp_path: Path) -> None:
    """schemaconv's fallback (every such field has a +listType today, so the markers are
    edited here): merge with a key is keyed by it, merge without one is a set, retainKeys
    alone and nothing at all are atomic."""
    raw = json.loads(wire_schema.SCHEMA_FILE.read_text())
    markers = raw["markers"]
    del markers[CORE + "Container"]["fields"]["Ports"]["listType"]
    del markers[CORE + "Container"]["fields"]["Ports"]["listMapKey"]
    del markers[META + "ObjectMeta"]["fields"]["Finalizers"]["listType"]
    markers[CORE + "PodSpec"]["fields"]["Volumes"] = {"patchStrategy": "retainKeys"}
    markers[CORE + "PodSpec"]["fields"]["Tolerations"] = {}
    path = tmp_path / "k8s_schema.json"
    path.write_text(json.dumps(raw))
    atoms = apply_types._Builtins(wire_schema.load(path)).atoms
    ports = at(atoms[CORE + "Container"], "ports")
    assert ports.list is not None
    assert (ports.list.relationship, ports.list.keys) == (ASSOCIATIVE, ("containerPort",))
    finalizers = at(atoms[META + "ObjectMeta"], "finalizers")
    assert finalizers.list is not None
    assert (finalizers.list.relationship, finalizers.list.keys) == (ASSOCIATIVE, ())
    for name in ("volumes", "tolerations"):
        found = at(atoms[CORE + "PodSpec"], name)
        assert found.list is not None and found.list.relationship == ATOMIC, name


def test_builtin_atoms_are_built_once_and_unknown_kinds_have_none() -> None:
    assert builtin_atom("v1", "Pod") is builtin_atom("v1", "Pod")
    assert atom_for(PODS) is builtin_atom("v1", "Pod")
    assert builtin_atom("v1", "NoSuchKind") is None
    assert (
        builtin_name(APIEXT + "JSON")
        == "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON"
    )


# -- every served kind exports -------------------------------------------------------------------


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "ports": {
                                        "type": "array",
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["port"],
                                        "items": {
                                            "type": "object",
                                            "required": ["port"],
                                            "properties": {"port": {"type": "integer"}},
                                        },
                                    },
                                    "template": {
                                        "type": "object",
                                        "x-kubernetes-embedded-resource": True,
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


def served_kinds() -> Iterator[tuple[str, ResourceSpec | tuple[str, str]]]:
    """Every served resource (the CRD's too), and every kind of the wire schema."""
    for spec in (*DEFAULT_RESOURCES, *served_specs(CRD)):
        yield spec.served_key, spec
    for api_version, kind in wire_schema.load().kinds:
        yield f"{api_version}/{kind}", (api_version, kind)


SERVED_KINDS = dict(served_kinds())


@pytest.mark.parametrize("name", sorted(SERVED_KINDS))
def test_every_served_kind_exports_a_closed_schema(name: str) -> None:
    served = SERVED_KINDS[name]
    if isinstance(served, ResourceSpec):
        atom = atom_for(served)
    else:
        found = builtin_atom(*served)
        assert found is not None
        atom = found
    exported = to_smd_yaml([atom])
    defined, referenced = named_types(exported)
    assert atom.name in defined
    assert referenced <= defined, referenced - defined
    if not name.endswith("List"):
        assert "__untyped_deduced_" in defined or atom.name.startswith("io.k8s.api")


def test_the_export_names_types_as_kubernetes_does() -> None:
    defined, _ = named_types(to_smd_yaml([pod()]))
    assert {"io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.Container", OBJECT_META,
            "io.k8s.apimachinery.pkg.api.resource.Quantity", "__untyped_atomic_",
            "__untyped_deduced_"} <= defined  # fmt: skip
    document = yaml.safe_load(to_smd_yaml([pod()]))
    container = next(t for t in document["types"] if t["name"] == "io.k8s.api.core.v1.Container")
    ports = next(f for f in container["map"]["fields"] if f["name"] == "ports")
    assert ports["type"]["list"]["elementRelationship"] == "associative"
    assert ports["type"]["list"]["keys"] == ["containerPort", "protocol"]


# -- custom resources ----------------------------------------------------------------------------


def test_list_and_map_types_of_a_crd_schema() -> None:
    atom = widget(
        {
            "ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["port", "protocol"],
                "items": {
                    "type": "object",
                    "required": ["port"],
                    "properties": {
                        "port": {"type": "integer"},
                        "protocol": {"type": "string", "default": "TCP"},
                    },
                },
            },
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "args": {
                "type": "array",
                "x-kubernetes-list-type": "atomic",
                "items": {"type": "string"},
            },
            "plain": {"type": "array", "items": {"type": "string"}},
            "selector": {
                "type": "object",
                "x-kubernetes-map-type": "atomic",
                "additionalProperties": {"type": "string"},
            },
            "labels": {
                "type": "object",
                "x-kubernetes-map-type": "granular",
                "additionalProperties": {"type": "string"},
            },
        }
    )
    ports = at(atom, "spec", "ports")
    assert ports.list is not None
    assert (ports.list.relationship, ports.list.keys) == (ASSOCIATIVE, ("port", "protocol"))
    assert default_at(ports, "[]", "protocol") == "TCP"
    assert default_at(ports, "[]", "port") is None
    tags = at(atom, "spec", "tags")
    assert tags.list is not None and (tags.list.relationship, tags.list.keys) == (ASSOCIATIVE, ())
    for atomic in ("args", "plain"):
        found = at(atom, "spec", atomic)
        assert found.list is not None and found.list.relationship == ATOMIC, atomic
    selector = at(atom, "spec", "selector")
    assert selector.map is not None and selector.map.relationship == ATOMIC
    labels = at(atom, "spec", "labels")
    assert labels.map is not None and labels.map.relationship == SEPARABLE
    assert at(labels, "{}").scalar == "string"
    # An object naming properties takes no others; one naming none takes anything.
    spec = at(atom, "spec")
    assert spec.map is not None and spec.map.element is None


def test_the_root_and_embedded_resources_get_the_standard_fields() -> None:
    schema = {
        "type": "object",
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": {
                "type": "object",
                "properties": {
                    "template": {
                        "type": "object",
                        "x-kubernetes-embedded-resource": True,
                        "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {"metadata": {"type": "object"}},
                    }
                },
            },
        },
    }
    atom = custom_atom(crd_schema(schema), name="com.example.v1.Widget")
    assert atom.name == "com.example.v1.Widget"
    object_meta = builtin_atom_of(META + "ObjectMeta")
    assert at(atom, "metadata") is object_meta  # the schema's own metadata is replaced
    assert at(atom, "apiVersion").scalar == at(atom, "kind").scalar == "string"
    assert atom.map is not None and atom.map.element is None
    template = at(atom, "spec", "template")
    assert at(template, "metadata") is object_meta
    assert at(template, "kind").scalar == "string"
    assert template.map is not None and template.map.element is DEDUCED  # preserved


def test_preserve_unknown_fields_reaches_everything_below() -> None:
    atom = widget(
        {
            "free": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {
                    "inner": {"type": "object", "properties": {"a": {"type": "string"}}},
                    "items": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"b": {"type": "string"}}},
                    },
                },
            },
            "closed": {"type": "object", "properties": {"c": {"type": "string"}}},
            "anything": {"x-kubernetes-preserve-unknown-fields": True},
        }
    )
    for path in (("free",), ("free", "inner"), ("free", "items", "[]")):
        found = at(atom, "spec", *path)
        assert found.map is not None and found.map.element is DEDUCED, path
    closed = at(atom, "spec", "closed")
    assert closed.map is not None and closed.map.element is None
    anything = at(atom, "spec", "anything")  # no type: any value
    assert anything.scalar == "untyped"
    assert anything.list is not None and anything.list.element is UNTYPED_ATOMIC
    assert anything.map is not None and anything.map.element is DEDUCED


def test_int_or_string_nullable_formats_and_additional_properties() -> None:
    atom = widget(
        {
            "port": {"x-kubernetes-int-or-string": True},
            "note": {"type": "string", "nullable": True},
            "when": {"type": "string", "format": "date-time"},
            "blob": {"type": "string", "format": "byte"},
            "ratio": {"type": "number"},
            "on": {"type": "boolean"},
            "free": {"type": "object", "additionalProperties": True},
            "typed": {"type": "object", "additionalProperties": {"type": "integer"}},
            "empty": {"type": "object"},
        }
    )
    port = at(atom, "spec", "port")
    assert port.scalar == "untyped" and port.list is not None and port.map is not None
    note = at(atom, "spec", "note")
    assert note.scalar == "string" and note.nullable
    assert at(atom, "spec", "when").scalar == "untyped"
    assert at(atom, "spec", "blob").scalar == "string"
    assert at(atom, "spec", "ratio").scalar == "numeric"
    assert at(atom, "spec", "on").scalar == "boolean"
    assert at(atom, "spec", "free", "{}") is DEDUCED
    assert at(atom, "spec", "typed", "{}").scalar == "numeric"
    assert at(atom, "spec", "empty", "{}") is DEDUCED
    # Shared scalar atoms are not marked nullable by one nullable field.
    assert not at(atom, "spec", "blob").nullable


def test_a_kind_without_a_schema_is_deduced() -> None:
    atom = custom_atom(None, name="com.example.v1.Thing")
    assert atom.map is not None and atom.map.fields == {} and atom.map.element is DEDUCED
    spec = ResourceSpec("things", "thing", "Thing", group="example.com")
    assert atom_for(spec).name == "com.example.v1.Thing"
    assert at(atom_for(spec), "{}") is DEDUCED


def test_bad_extensions_raise_a_typed_error() -> None:
    root = crd_schema({"type": "object", "properties": {"spec": {"type": "object"}}})
    root.properties["spec"].map_type = "sideways"
    with pytest.raises(ApplyTypeError, match=r"com.example.v1.Widget.spec: unknown map type"):
        custom_atom(root, name="com.example.v1.Widget")
    listed = crd_schema(
        {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string"}}}}
    )
    listed.properties["l"].list_type = "map"
    with pytest.raises(ApplyTypeError, match="list type map without map keys"):
        custom_atom(listed, name="x")


def test_atom_for_custom_resources_is_cached_per_spec() -> None:
    (spec,) = served_specs(CRD)
    first = atom_for(spec)
    assert first is atom_for(spec)
    assert first.name == custom_name("example.com", "v1", "Widget") == "com.example.v1.Widget"
    ports = at(first, "spec", "ports")
    assert ports.list is not None and ports.list.keys == ("port",)
    (again,) = served_specs(CRD)
    assert atom_for(again) is not first  # another spec object: built anew


def test_atom_for_refuses_a_schema_that_is_not_structural() -> None:
    spec = ResourceSpec(
        "gadgets", "gadget", "Gadget", group="example.com",
        openapi_schema={"type": "object", "properties": {"spec": {"properties": {}}}},
    )  # fmt: skip
    with pytest.raises(InvalidSchemaError):
        atom_for(spec)
