"""CustomResourceDefinitions are defaulted, prepared and validated as kube-apiserver does
it, with its field paths and words, and the naming controller's status comes out as
Kubernetes writes it.

Expected texts are Kubernetes' own (``apiextensions-apiserver``'s validation.go, naming
and establishing controllers, ``apimachinery``'s field errors), worked out from its code:
nothing here was produced by running the module under test. Real-world CRDs (kopf's,
a cert-manager-like one, one with the scale subresource, the field-selector one from
Kubernetes' integration tests) must pass clean."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watchcache.registry.crd_definition import (
    API_APPROVED_ANNOTATION,
    CLEANUP_FINALIZER,
    NamesInUse,
    default_crd,
    established_status,
    invalid_error,
    is_condition_true,
    mark_for_deletion,
    names_status,
    prepare_for_create,
    prepare_for_status_update,
    prepare_for_update,
    storage_version,
    validate_crd,
    validate_crd_status_update,
    validate_crd_update,
)
from watchcache.wire.errors import StatusCause

DNS1035 = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
    "[a-z0-9])?)*')"
)
NOW = "2026-01-02T03:04:05Z"
LATER = "2026-01-02T03:05:00Z"

# ---------------------------------------------------------------------------------------
# Real-world CRDs


def _preserved_status_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    }


def kopf_peering(cluster: bool) -> dict[str, Any]:
    """kopf's peering CRDs, as its ``peering.yaml`` declares them (kopf.dev group)."""
    kind, plural = ("ClusterKopfPeering", "clusterkopfpeerings")
    if not cluster:
        kind, plural = ("KopfPeering", "kopfpeerings")
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.kopf.dev"},
        "spec": {
            "scope": "Cluster" if cluster else "Namespaced",
            "group": "kopf.dev",
            "names": {"kind": kind, "plural": plural, "singular": plural[:-1]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": _preserved_status_schema()},
                }
            ],
        },
    }


def kopf_example() -> dict[str, Any]:
    """kopf's example CRD: short names, the status subresource, printer columns."""
    preserved = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "kopfexamples.kopf.dev"},
        "spec": {
            "scope": "Namespaced",
            "group": "kopf.dev",
            "names": {
                "kind": "KopfExample",
                "plural": "kopfexamples",
                "singular": "kopfexample",
                "shortNames": ["kopfexes", "kopfex", "kexes", "kex"],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": preserved, "status": preserved},
                        }
                    },
                    "additionalPrinterColumns": [
                        {
                            "name": "Duration",
                            "type": "string",
                            "priority": 0,
                            "jsonPath": ".spec.duration",
                            "description": "For how long the pod should sleep.",
                        },
                        {
                            "name": "Children",
                            "type": "string",
                            "priority": 0,
                            "jsonPath": ".status.create_fn.children",
                        },
                    ],
                }
            ],
        },
    }


def _certificate_schema(v1: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "type": "object",
        "required": ["secretName", "issuerRef"],
        "properties": {
            "secretName": {"type": "string"},
            "dnsNames": {"type": "array", "items": {"type": "string"}},
            "duration": {"type": "string"},
            "issuerRef": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "kind": {"type": "string"},
                    "group": {"type": "string"},
                },
            },
        },
    }
    if v1:
        spec["properties"]["privateKey"] = {
            "type": "object",
            "properties": {
                "algorithm": {"type": "string", "enum": ["RSA", "ECDSA", "Ed25519"]},
                "size": {"type": "integer"},
                "rotationPolicy": {"type": "string", "default": "Always"},
            },
        }
    else:
        spec["properties"]["keyAlgorithm"] = {"type": "string", "enum": ["rsa", "ecdsa"]}
    status = {
        "type": "object",
        "properties": {
            "conditions": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
                "items": {
                    "type": "object",
                    "required": ["status", "type"],
                    "properties": {
                        "type": {"type": "string"},
                        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                        "message": {"type": "string"},
                        "lastTransitionTime": {"type": "string", "format": "date-time"},
                    },
                },
            },
            "notAfter": {"type": "string", "format": "date-time"},
            "revision": {"type": "integer"},
        },
    }
    return {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }


def certificate() -> dict[str, Any]:
    """A cert-manager-like Certificate CRD: two versions with different schemas, the same
    printer columns and status subresource, a deprecated version, categories."""
    columns = [
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        },
        {"name": "Secret", "type": "string", "jsonPath": ".spec.secretName"},
        {"name": "Issuer", "type": "string", "jsonPath": ".spec.issuerRef.name", "priority": 1},
        {"name": "Expires", "type": "date", "format": "date-time", "jsonPath": ".status.notAfter"},
        {"name": "Revision", "type": "integer", "format": "int64", "jsonPath": ".status.revision"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "certificates.cert-manager.io",
            "labels": {"app.kubernetes.io/name": "cert-manager"},
        },
        "spec": {
            "group": "cert-manager.io",
            "scope": "Namespaced",
            "names": {
                "kind": "Certificate",
                "listKind": "CertificateList",
                "plural": "certificates",
                "singular": "certificate",
                "shortNames": ["cert", "certs"],
                "categories": ["cert-manager"],
            },
            "versions": [
                {
                    "name": "v1alpha2",
                    "served": True,
                    "storage": False,
                    "deprecated": True,
                    "deprecationWarning": "cert-manager.io/v1alpha2 Certificate is deprecated",
                    "schema": {"openAPIV3Schema": _certificate_schema(False)},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": copy.deepcopy(columns),
                },
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": _certificate_schema(True)},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": copy.deepcopy(columns),
                },
            ],
        },
    }


def webapp() -> dict[str, Any]:
    """A CRD with the scale subresource (replicas in spec and status, a label selector)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "webapps.apps.example.com"},
        "spec": {
            "group": "apps.example.com",
            "scope": "Namespaced",
            "names": {"kind": "WebApp", "plural": "webapps"},
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
                                        "replicas": {"type": "integer", "minimum": 0},
                                        "image": {"type": "string"},
                                    },
                                },
                                "status": {
                                    "type": "object",
                                    "properties": {
                                        "replicas": {"type": "integer"},
                                        "selector": {"type": "string"},
                                    },
                                },
                            },
                        }
                    },
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                }
            ],
        },
    }


def _shirt_schema(color: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    color: {"type": "string"},
                    "quantity": {"type": "integer"},
                    "size": {"type": "string", "enum": ["S", "M", "L", "XL"]},
                    "branded": {"type": "boolean"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "fit": {"type": "object", "properties": {"cut": {"type": "string"}}},
                },
            }
        },
    }


def shirts() -> dict[str, Any]:
    """The field-selector CRD of Kubernetes' integration tests (two versions, a field
    renamed between them, four selectable fields each)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "shirts.tests.example.com"},
        "spec": {
            "group": "tests.example.com",
            "scope": "Cluster",
            "names": {"plural": "shirts", "singular": "shirt", "kind": "Shirt"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": _shirt_schema("color")},
                    "selectableFields": [
                        {"jsonPath": ".spec.color"},
                        {"jsonPath": ".spec.quantity"},
                        {"jsonPath": ".spec.size"},
                        {"jsonPath": ".spec.branded"},
                    ],
                },
                {
                    "name": "v1beta1",
                    "served": True,
                    "storage": False,
                    "schema": {"openAPIV3Schema": _shirt_schema("hue")},
                    "selectableFields": [
                        {"jsonPath": ".spec.hue"},
                        {"jsonPath": ".spec.quantity"},
                        {"jsonPath": ".spec.size"},
                        {"jsonPath": ".spec.branded"},
                    ],
                },
            ],
        },
    }


REAL_WORLD = {
    "clusterkopfpeerings": lambda: kopf_peering(True),
    "kopfpeerings": lambda: kopf_peering(False),
    "kopfexamples": kopf_example,
    "certificates": certificate,
    "webapps": webapp,
    "shirts": shirts,
}


def created(crd: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(crd)
    default_crd(obj)
    prepare_for_create(obj)
    return obj


def texts(causes: list[StatusCause]) -> list[str]:
    return [f"{c.field}: {c.message}" for c in causes]


def create_errors(crd: dict[str, Any]) -> list[str]:
    return texts(validate_crd(created(crd)))


def established(crd: dict[str, Any]) -> dict[str, Any]:
    """A CRD as stored once the controllers have accepted its names."""
    obj = created(crd)
    status = names_status(obj, NamesInUse(), now=NOW)
    assert status is not None
    obj["status"] = status
    status = established_status(obj, now=NOW)
    assert status is not None
    obj["status"] = status
    return obj


def updated(new: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(new)
    default_crd(obj)
    prepare_for_update(obj, stored)
    return obj


def update_errors(new: dict[str, Any], stored: dict[str, Any]) -> list[str]:
    return texts(validate_crd_update(updated(new, stored), stored))


@pytest.mark.parametrize("name", sorted(REAL_WORLD))
def test_real_world_crds_validate_clean(name: str) -> None:
    crd = REAL_WORLD[name]()
    assert create_errors(crd) == []
    # An unchanged re-apply of the established CRD is a valid update too.
    stored = established(crd)
    assert update_errors(crd, stored) == []


# ---------------------------------------------------------------------------------------
# Defaults


def test_defaults_fill_singular_list_kind_conversion_and_stored_versions() -> None:
    obj = copy.deepcopy(webapp())
    default_crd(obj)
    assert obj["spec"]["names"] == {
        "kind": "WebApp",
        "plural": "webapps",
        "singular": "webapp",
        "listKind": "WebAppList",
    }
    assert obj["spec"]["conversion"] == {"strategy": "None"}
    assert obj["status"] == {"storedVersions": ["v1"]}
    assert "scope" in obj["spec"]  # given; never defaulted


def test_defaults_keep_what_is_given_and_scope_has_none() -> None:
    obj = certificate()
    obj["spec"]["names"]["singular"] = "cert"
    obj["spec"]["names"]["listKind"] = "Certs"
    obj["spec"]["conversion"] = {"strategy": "None"}
    del obj["spec"]["scope"]
    obj["status"] = {"storedVersions": ["v1alpha2"]}
    before = copy.deepcopy(obj)
    default_crd(obj)
    assert obj == before


def test_defaults_give_a_webhook_service_port_443() -> None:
    obj = kopf_example()
    service = {"namespace": "ops", "name": "converter"}
    obj["spec"]["conversion"] = {
        "strategy": "Webhook",
        "webhook": {"clientConfig": {"service": service}},
    }
    default_crd(obj)
    assert obj["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"] == 443


def test_defaults_leave_bad_shapes_alone() -> None:
    obj: dict[str, Any] = {"spec": {"names": "Widget", "versions": "v1"}, "status": 3}
    default_crd(obj)
    assert obj == {
        "spec": {"names": "Widget", "versions": "v1", "conversion": {"strategy": "None"}},
        "status": 3,
    }


# ---------------------------------------------------------------------------------------
# The strategy


def test_create_empties_the_status_and_sets_generation_one() -> None:
    obj = kopf_peering(True)
    obj["metadata"]["generation"] = 7
    obj["status"] = {"acceptedNames": {"plural": "x", "kind": "X"}, "storedVersions": ["v0"]}
    obj = created(obj)
    assert obj["metadata"]["generation"] == 1
    # Go's zero status as json.Marshal writes it, plus the storage version.
    assert obj["status"] == {
        "conditions": None,
        "acceptedNames": {"plural": "", "kind": ""},
        "storedVersions": ["v1"],
    }


def test_update_keeps_the_status_and_bumps_generation_on_spec_changes_only() -> None:
    stored = established(certificate())
    stored["metadata"]["generation"] = 3
    same = certificate()
    same["metadata"]["labels"] = {"changed": "yes"}
    same["status"] = {"storedVersions": ["junk"]}
    obj = updated(same, stored)
    assert obj["metadata"]["generation"] == 3
    assert obj["status"] == stored["status"]

    changed = certificate()
    changed["spec"]["names"]["shortNames"] = ["cert"]
    assert updated(changed, stored)["metadata"]["generation"] == 4


def test_generation_follows_semantic_equality_not_json_text() -> None:
    stored = established(kopf_peering(False))
    stored["metadata"]["generation"] = 5
    same = kopf_peering(False)
    same["spec"]["names"]["shortNames"] = []  # nil and empty are equal to Go
    same["spec"]["versions"][0]["deprecated"] = False  # the zero value
    assert updated(same, stored)["metadata"]["generation"] == 5
    changed = kopf_peering(False)
    schema = changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["status"]["description"] = "now documented"
    assert updated(changed, stored)["metadata"]["generation"] == 6


def test_update_adds_a_new_storage_version_to_stored_versions() -> None:
    stored = established(certificate())
    assert stored["status"]["storedVersions"] == ["v1"]
    flipped = certificate()
    flipped["spec"]["versions"][0]["storage"] = True
    flipped["spec"]["versions"][1]["storage"] = False
    obj = updated(flipped, stored)
    assert obj["status"]["storedVersions"] == ["v1", "v1alpha2"]
    assert validate_crd_update(obj, stored) == []


def test_status_update_keeps_the_stored_spec() -> None:
    stored = established(kopf_example())
    body = copy.deepcopy(stored)
    body["spec"]["scope"] = "Cluster"
    body["metadata"]["labels"] = {"team": "a"}
    body["status"]["storedVersions"] = ["v1", "v0"]
    prepare_for_status_update(body, stored)
    assert body["spec"] == stored["spec"]
    assert body["metadata"]["labels"] == {"team": "a"}  # Kubernetes keeps the body's metadata
    assert body["status"]["storedVersions"] == ["v1", "v0"]
    # storedVersions is free through /status (storage migration trims it there).
    assert validate_crd_status_update(body, stored) == []


def test_status_update_validates_accepted_names() -> None:
    stored = established(kopf_example())
    body = copy.deepcopy(stored)
    body["status"]["acceptedNames"]["plural"] = "Kopf_Examples"
    body["status"]["acceptedNames"]["kind"] = "Kopf Example"
    assert texts(validate_crd_status_update(body, stored)) == [
        f'status.acceptedNames.plural: Invalid value: "Kopf_Examples": {DNS1035}',
        'status.acceptedNames.kind: Invalid value: "Kopf Example": may have mixed case, but '
        f"should otherwise match: {DNS1035}",
    ]


def test_storage_version() -> None:
    assert storage_version(certificate()) == "v1"
    assert storage_version({"spec": {"versions": [{"name": "v1"}]}}) is None
    assert storage_version({"spec": []}) is None


# ---------------------------------------------------------------------------------------
# Names and groups


def test_the_name_must_be_plural_dot_group() -> None:
    crd = kopf_peering(False)
    crd["metadata"]["name"] = "peerings.kopf.dev"
    assert create_errors(crd) == [
        'metadata.name: Invalid value: "peerings.kopf.dev": must be '
        'spec.names.plural+"."+spec.group'
    ]


def test_generate_name_cannot_give_the_required_name() -> None:
    crd = kopf_peering(False)
    crd["metadata"]["generateName"] = "Kopf-"
    assert create_errors(crd) == [
        f'metadata.generateName: Invalid value: "Kopf-": {SUBDOMAIN}',
        'metadata.generateName: Invalid value: "Kopf-": must be spec.names.plural+"."+spec.group',
    ]


def test_a_missing_name_is_required() -> None:
    crd = kopf_peering(False)
    del crd["metadata"]["name"]
    assert create_errors(crd) == ["metadata.name: Required value: name or generateName is required"]


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ("", "spec.group: Required value"),
        ("kopf", 'spec.group: Invalid value: "kopf": should be a domain with at least one dot'),
        ("Kopf.dev", f'spec.group: Invalid value: "Kopf.dev": {SUBDOMAIN}'),
    ],
)
def test_group_must_be_a_dns_subdomain_with_a_dot(group: str, message: str) -> None:
    crd = kopf_peering(True)
    crd["spec"]["group"] = group
    crd["metadata"]["name"] = f"clusterkopfpeerings.{group}"
    errors = create_errors(crd)
    if group == "kopf":
        assert errors == [message]
    else:  # the name, plural + "." + group, is not a DNS subdomain either
        assert errors == [
            f'metadata.name: Invalid value: "{crd["metadata"]["name"]}": {SUBDOMAIN}',
            message,
        ]


@pytest.mark.parametrize(
    ("scope", "message"),
    [
        (None, "spec.scope: Required value"),
        (
            "Global",
            'spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"',
        ),
    ],
)
def test_scope_is_cluster_or_namespaced(scope: str | None, message: str) -> None:
    crd = kopf_peering(True)
    crd["spec"]["scope"] = scope
    assert create_errors(crd) == [message]


def test_names_are_dns_labels_and_kind_may_be_mixed_case() -> None:
    crd = kopf_example()
    crd["spec"]["names"].update(
        plural="kopf.examples",
        singular="Kopfexample",
        kind="Kopf_Example",
        listKind="Kopf_Example",
        shortNames=["ok", "k-"],
        categories=["all", "Mine"],
    )
    crd["metadata"]["name"] = "kopf.examples.kopf.dev"
    mixed = "may have mixed case, but should otherwise match: "
    assert create_errors(crd) == [
        f'spec.names.plural: Invalid value: "kopf.examples": {DNS1035}',
        f'spec.names.singular: Invalid value: "Kopfexample": {DNS1035}',
        f'spec.names.kind: Invalid value: "Kopf_Example": {mixed}{DNS1035}',
        f'spec.names.listKind: Invalid value: "Kopf_Example": {mixed}{DNS1035}',
        f'spec.names.shortNames[1]: Invalid value: "k-": {DNS1035}',
        'spec.names.listKind: Invalid value: "Kopf_Example": kind and listKind may not be the same',
        f'spec.names.categories[1]: Invalid value: "Mine": {DNS1035}',
    ]


def test_a_long_name_gets_both_label_messages_joined_with_a_comma() -> None:
    crd = kopf_peering(True)
    crd["spec"]["names"]["singular"] = "x" * 64
    assert create_errors(crd) == [
        f'spec.names.singular: Invalid value: "{"x" * 64}": must be no more than 63 characters'
    ]
    crd["spec"]["names"]["singular"] = "-" * 64
    assert create_errors(crd) == [
        f'spec.names.singular: Invalid value: "{"-" * 64}": must be no more than 63 '
        f"characters,{DNS1035}"
    ]


def test_names_required_when_kind_is_missing() -> None:
    crd = kopf_peering(True)
    del crd["spec"]["names"]["kind"]
    del crd["spec"]["names"]["singular"]
    assert create_errors(crd) == [
        "spec.names.singular: Required value",
        "spec.names.kind: Required value",
        "spec.names.listKind: Required value",
    ]


# ---------------------------------------------------------------------------------------
# Versions


def test_exactly_one_storage_version_and_the_versions_printed_as_go_marshals_them() -> None:
    crd = kopf_peering(True)
    crd["spec"]["versions"][0]["storage"] = False
    versions = (
        '[{"Name":"v1","Served":true,"Storage":false,"Deprecated":false,'
        '"DeprecationWarning":null,"Schema":null,"Subresources":null,'
        '"AdditionalPrinterColumns":null,"SelectableFields":null}]'
    )
    assert create_errors(crd) == [
        f"spec.versions: Invalid value: {versions}: must have exactly one version marked as "
        "storage version",
        "status.storedVersions: Invalid value: null: must have at least one stored version",
    ]


def test_versions_with_their_own_schemas_print_the_internal_schema_type() -> None:
    crd = kopf_peering(True)
    second = copy.deepcopy(crd["spec"]["versions"][0])
    second["name"] = "v2"
    second["schema"]["openAPIV3Schema"] = {"type": "object", "maximum": 10, "example": {"a": 1}}
    crd["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": {"type": "object"}}
    crd["spec"]["versions"].append(second)

    def schema(extra: dict[str, str]) -> str:
        members = {
            "ID": '""', "Schema": '""', "Ref": "null", "Description": '""', "Type": '"object"',
            "Nullable": "false", "Format": '""', "Title": '""', "Default": "null",
            "Maximum": "null", "ExclusiveMaximum": "false", "Minimum": "null",
            "ExclusiveMinimum": "false", "MaxLength": "null", "MinLength": "null",
            "Pattern": '""', "MaxItems": "null", "MinItems": "null", "UniqueItems": "false",
            "MultipleOf": "null", "Enum": "null", "MaxProperties": "null",
            "MinProperties": "null", "Required": "null", "Items": "null", "AllOf": "null",
            "OneOf": "null", "AnyOf": "null", "Not": "null", "Properties": "null",
            "AdditionalProperties": "null", "PatternProperties": "null",
            "Dependencies": "null", "AdditionalItems": "null", "Definitions": "null",
            "ExternalDocs": "null", "Example": "null", "XPreserveUnknownFields": "null",
            "XEmbeddedResource": "false", "XIntOrString": "false", "XListMapKeys": "null",
            "XListType": "null", "XMapType": "null", "XValidations": "null",
        }  # fmt: skip
        members.update(extra)
        return "{" + ",".join(f'"{k}":{v}' for k, v in members.items()) + "}"

    def version(name: str, storage: str, extra: dict[str, str]) -> str:
        return (
            f'{{"Name":"{name}","Served":true,"Storage":{storage},"Deprecated":false,'
            f'"DeprecationWarning":null,"Schema":{{"OpenAPIV3Schema":{schema(extra)}}},'
            '"Subresources":null,"AdditionalPrinterColumns":null,"SelectableFields":null}'
        )

    second_extra = {"Example": '{"a":1}', "Maximum": "10"}
    listed = f"[{version('v1', 'true', {})},{version('v2', 'true', second_extra)}]"
    assert create_errors(crd) == [
        f"spec.versions: Invalid value: {listed}: must have exactly one version marked as "
        "storage version",
        # Only the first storage version was added to storedVersions on create.
        'status.storedVersions: Invalid value: ["v1"]: must have the storage version v2',
    ]


def test_version_names_are_unique_dns_labels_and_the_first_is_spec_version() -> None:
    crd = certificate()
    crd["spec"]["versions"][0]["name"] = "V1alpha2"
    errors = create_errors(crd)
    assert errors[0] == f'spec.versions[0].name: Invalid value: "V1alpha2": {DNS1035}'
    assert errors[1] == f'spec.version: Invalid value: "V1alpha2": {DNS1035}'
    assert len(errors) == 2

    crd = certificate()
    crd["spec"]["versions"][0]["name"] = "v1"
    errors = create_errors(crd)
    assert len(errors) == 2
    assert errors[0].startswith('spec.versions: Invalid value: [{"Name":"v1","Served":true,')
    assert errors[0].endswith("}]: must contain unique version names")
    # The first "v1" (not storage) takes the stored version's place, as in Kubernetes.
    assert (
        errors[1]
        == 'status.storedVersions: Invalid value: ["v1"]: must have the storage version v1'
    )


def test_every_version_needs_a_schema() -> None:
    crd = certificate()
    for version in crd["spec"]["versions"]:
        del version["schema"]
    assert create_errors(crd) == [
        "spec.versions[0].schema.openAPIV3Schema: Required value",
        "spec.versions[1].schema.openAPIV3Schema: Required value",
    ]
    crd = certificate()
    crd["spec"]["versions"][1]["schema"] = {}
    assert create_errors(crd) == ["spec.versions[1].schema.openAPIV3Schema: Required value"]


def test_a_schema_every_version_shares_is_reported_at_the_top_level() -> None:
    crd = kopf_example()
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {}
    assert create_errors(crd) == [
        "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be "
        "empty for specified object fields"
    ]


def test_a_versions_own_schema_is_reported_at_the_version() -> None:
    crd = certificate()
    schema = crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"]["properties"]["duration"] = {"format": "duration"}
    assert create_errors(crd) == [
        "spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[duration].type: "
        "Required value: must not be empty for specified object fields"
    ]


def test_the_status_subresource_of_a_version_restricts_its_schema_root() -> None:
    crd = certificate()
    crd["spec"]["versions"][0]["subresources"] = {}
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["type"] = "array"
    errors = create_errors(crd)
    # v1alpha2 has no status subresource now: its root type is refused for other reasons.
    assert not any('only "object" is allowed' in e for e in errors)
    crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["type"] = "array"
    errors = create_errors(crd)
    assert (
        'spec.versions[1].schema.openAPIV3Schema.type: Invalid value: "array": only "object" is '
        "allowed as the type at the root of the schema if the status subresource is enabled"
    ) in errors


def test_a_schema_that_does_not_decode_is_a_type_cause() -> None:
    crd = webapp()
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["type"] = 5
    causes = validate_crd(created(crd))
    assert [(c.reason, c.field, c.message) for c in causes] == [
        (
            "FieldValueTypeInvalid",
            "spec.validation.openAPIV3Schema",
            'Invalid value: "": json: cannot unmarshal number into Go struct field '
            "JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties.spec.type of type "
            "string",
        )
    ]


def test_deprecation_warnings() -> None:
    crd = certificate()
    crd["spec"]["versions"][1]["deprecationWarning"] = "v1 <is> fine"
    crd["spec"]["versions"][0]["deprecationWarning"] = "x" * 255 + "\u00e9"
    assert create_errors(crd) == [
        'spec.versions[0].deprecationWarning: Invalid value: "' + "x" * 255 + '\u00e9": '
        "must be <= 256 characters long",
        'spec.versions[1].deprecationWarning: Invalid value: "v1 \\u003cis\\u003e fine": '
        "can only be set for deprecated versions",
    ]
    crd = certificate()
    crd["spec"]["versions"][0]["deprecationWarning"] = "caf\u00e9\tbar"
    assert create_errors(crd) == [
        'spec.versions[0].deprecationWarning: Invalid value: "caf\u00e9\\tbar": must only '
        "contain printable UTF-8 characters; non-printable character found at index 5"
    ]
    crd["spec"]["versions"][0]["deprecationWarning"] = ""
    assert create_errors(crd) == [
        'spec.versions[0].deprecationWarning: Invalid value: "": must not be an empty string'
    ]


# ---------------------------------------------------------------------------------------
# Subresources, printer columns, selectable fields


@pytest.mark.parametrize(
    ("scale", "errors"),
    [
        ({"statusReplicasPath": ".status.replicas"},
         ["spec.subresources.scale.specReplicasPath: Required value"]),
        ({"specReplicasPath": ".status.replicas", "statusReplicasPath": ".status.replicas"},
         ['spec.subresources.scale.specReplicasPath: Invalid value: ".status.replicas": should '
          "be a json path under .spec"]),
        ({"specReplicasPath": ".spec.replicas", "statusReplicasPath": "status.replicas"},
         ['spec.subresources.scale.statusReplicasPath: Invalid value: "status.replicas": must '
          "be a simple json path starting with ."]),
        ({"specReplicasPath": ".spec", "statusReplicasPath": ".status.replicas"},
         ['spec.subresources.scale.specReplicasPath: Invalid value: ".spec": should be a json '
          "path under .spec"]),
        ({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
          "labelSelectorPath": ".metadata.labels"},
         ['spec.subresources.scale.labelSelectorPath: Invalid value: ".metadata.labels": should '
          "be a json path under either .spec or .status"]),
        ({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
          "labelSelectorPath": "status.selector"},
         ['spec.subresources.scale.labelSelectorPath: Invalid value: "status.selector": must be '
          "a simple json path starting with ."]),
        ({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
          "labelSelectorPath": ""}, []),
    ],
)  # fmt: skip
def test_scale_paths(scale: dict[str, str], errors: list[str]) -> None:
    crd = webapp()
    crd["spec"]["versions"][0]["subresources"]["scale"] = scale
    assert create_errors(crd) == errors


def test_a_label_selector_path_is_printed_as_json() -> None:
    crd = webapp()
    crd["spec"]["versions"][0]["subresources"]["scale"]["labelSelectorPath"] = ".a<b>"
    assert create_errors(crd) == [
        'spec.subresources.scale.labelSelectorPath: Invalid value: ".a\\u003cb\\u003e": should '
        "be a json path under either .spec or .status"
    ]


def test_per_version_subresources_are_reported_at_the_version() -> None:
    crd = certificate()
    crd["spec"]["versions"][1]["subresources"]["scale"] = {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".replicas",
    }
    assert create_errors(crd) == [
        'spec.versions[1].subresources.scale.statusReplicasPath: Invalid value: ".replicas": '
        "should be a json path under .status"
    ]


def test_printer_columns() -> None:
    crd = kopf_example()
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "Replicas", "type": "int", "format": "uuid", "jsonPath": "spec.replicas"},
        {"jsonPath": ""},
    ]
    assert create_errors(crd) == [
        'spec.additionalPrinterColumns[0].type: Invalid value: "int": must be one of '
        "boolean,date,integer,number,string",
        'spec.additionalPrinterColumns[0].format: Invalid value: "uuid": must be one of '
        "byte,date,date-time,double,float,int32,int64,password",
        'spec.additionalPrinterColumns[0].JSONPath: Invalid value: "spec.replicas": must be a '
        "simple json path starting with .",
        "spec.additionalPrinterColumns[1].name: Required value",
        "spec.additionalPrinterColumns[1].type: Required value: must be one of "
        "boolean,date,integer,number,string",
        "spec.additionalPrinterColumns[1].JSONPath: Required value",
    ]


def test_columns_that_differ_between_versions_are_reported_at_the_version() -> None:
    crd = certificate()
    crd["spec"]["versions"][1]["additionalPrinterColumns"][0]["type"] = "bool"
    assert create_errors(crd) == [
        'spec.versions[1].additionalPrinterColumns[0].type: Invalid value: "bool": must be one '
        "of boolean,date,integer,number,string"
    ]


def _with_selectable(paths: list[str], version: int = 0) -> dict[str, Any]:
    crd = shirts()
    crd["spec"]["versions"][version]["selectableFields"] = [{"jsonPath": p} for p in paths]
    return crd


def test_selectable_fields_resolve_to_scalar_fields_outside_metadata() -> None:
    crd = _with_selectable(
        [
            ".spec.fit",
            ".metadata.name",
            ".spec.nosuch",
            ".spec.tags[0]",
            "spec.color",
            ".spec.",
            ".spec.labels.team",
            ".spec.size",
            ".spec['size']",
            "",
        ]
    )
    must_point = (
        "must point to a field of type string, boolean or integer. Enum string fields and "
        "strings with formats are allowed."
    )
    at = "spec.versions[0].selectableFields"
    assert create_errors(crd) == [
        f'{at}[0].jsonPath: Invalid value: ".spec.fit": {must_point}',
        f'{at}[1].jsonPath: Invalid value: ".metadata.name": is an invalid path: does not '
        "refer to a valid field",
        f'{at}[2].jsonPath: Invalid value: ".spec.nosuch": is an invalid path: does not refer '
        "to a valid field",
        f'{at}[3].jsonPath: Invalid value: ".spec.tags[0]": is an invalid path: array notation '
        "is not allowed",
        f'{at}[4].jsonPath: Invalid value: "spec.color": is an invalid path: expected [ or . '
        "but got: spec",
        f'{at}[5].jsonPath: Invalid value: ".spec.": is an invalid path: unexpected end of '
        "JSON path",
        f"{at}[8].jsonPath: Invalid value: \".spec['size']\": is an invalid path: array "
        "notation is not allowed",
        f"{at}[9].jsonPath: Required value",
    ]


def test_selectable_fields_in_metadata_and_duplicates() -> None:
    crd = _with_selectable([".metadata", ".spec.size", ".spec.size"])
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"] = {
        "type": "object"
    }
    at = "spec.versions[0].selectableFields"
    assert create_errors(crd) == [
        f'{at}[0].jsonPath: Invalid value: ".metadata": must not point to fields in metadata',
        f'{at}[0].jsonPath: Invalid value: ".metadata": must point to a field of type string, '
        "boolean or integer. Enum string fields and strings with formats are allowed.",
        f'{at}[2].jsonPath: Duplicate value: ".spec.size"',
    ]


def test_at_most_eight_selectable_fields() -> None:
    crd = shirts()
    properties = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for i in range(9):
        properties["properties"][f"f{i}"] = {"type": "string"}
    crd = _with_selectable([f".spec.f{i}" for i in range(9)])
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = properties
    assert create_errors(crd) == [
        "spec.versions[0].selectableFields: Too many: 9: must have at most 8 items"
    ]


def test_selectable_fields_shared_by_all_versions_need_a_shared_schema() -> None:
    # Kubernetes moves identical selectableFields to the top level, where they may only be
    # used with a top-level (shared) schema, and the other way round.
    crd = shirts()
    crd["spec"]["versions"][1]["selectableFields"] = copy.deepcopy(
        crd["spec"]["versions"][0]["selectableFields"]
    )
    assert create_errors(crd) == [
        'spec.selectableFields: Invalid value: "": may only be set when validations.schema is '
        "included"
    ]
    crd = shirts()
    crd["spec"]["versions"][1]["schema"] = copy.deepcopy(crd["spec"]["versions"][0]["schema"])
    crd["spec"]["versions"][1]["selectableFields"][0]["jsonPath"] = ".spec.color"
    crd["spec"]["versions"][1]["selectableFields"].pop()
    assert create_errors(crd) == [
        f'spec.versions[{i}].selectableFields: Invalid value: "": may only be set when '
        "`version.schema.openAPIV3Schema` is not included"
        for i in (0, 1)
    ]


def test_selectable_fields_of_one_version_with_its_schema_at_the_top_level() -> None:
    crd = kopf_example()
    crd["spec"]["versions"][0]["selectableFields"] = [{"jsonPath": ".spec.owner"}]
    # spec preserves unknown fields but declares no properties: nothing to refer to.
    assert create_errors(crd) == [
        'spec.selectableFields[0].jsonPath: Invalid value: ".spec.owner": is an invalid path: '
        "does not refer to a valid field"
    ]


# ---------------------------------------------------------------------------------------
# Conversion, preserveUnknownFields, API approval


def test_webhook_conversion_is_refused_by_this_server() -> None:
    crd = certificate()
    crd["spec"]["conversion"] = {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "cert-manager", "name": "webhook"}},
        },
    }
    causes = validate_crd(created(crd))
    assert [(c.reason, c.field, c.message) for c in causes] == [
        (
            "FieldValueInvalid",
            "spec.conversion.strategy",
            'Invalid value: "Webhook": webhook conversion is not supported by this server; the '
            'strategy must be "None"',
        )
    ]


def test_conversion_strategy_none_takes_no_webhook() -> None:
    crd = certificate()
    crd["spec"]["conversion"] = {
        "strategy": "None",
        "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://x"}},
    }
    assert create_errors(crd) == [
        "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not "
        "set to Webhook",
        "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy "
        "is not set to Webhook",
    ]
    crd["spec"]["conversion"] = {"strategy": "Custom"}
    assert create_errors(crd) == [
        'spec.conversion.strategy: Unsupported value: "Custom": supported values: "None", "Webhook"'
    ]
    crd["spec"]["conversion"] = {"strategy": ""}
    assert create_errors(crd) == ["spec.conversion.strategy: Required value"]


def test_preserve_unknown_fields_cannot_be_set() -> None:
    crd = certificate()
    crd["spec"]["preserveUnknownFields"] = True
    crd["spec"]["conversion"] = {"strategy": "Webhook"}
    assert create_errors(crd) == [
        "spec.preserveUnknownFields: Invalid value: true: must be false in order to use "
        "defaults in the schema",  # v1's privateKey.rotationPolicy has a default
        'spec.conversion.strategy: Invalid value: "Webhook": must be None if '
        "spec.preserveUnknownFields is true",
        'spec.conversion.strategy: Invalid value: "Webhook": webhook conversion is not '
        'supported by this server; the strategy must be "None"',
        "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set "
        "x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
    ]


@pytest.mark.parametrize(
    ("annotation", "errors"),
    [
        (None, [f'metadata.annotations[{API_APPROVED_ANNOTATION}]: Required value: protected '
                f'groups must have approval annotation "{API_APPROVED_ANNOTATION}", see '
                "https://github.com/kubernetes/enhancements/pull/1111"]),
        ("yes please", [f'metadata.annotations[{API_APPROVED_ANNOTATION}]: Invalid value: "yes '
                        'please": protected groups must have approval annotation '
                        f'"{API_APPROVED_ANNOTATION}" with either a URL or a reason starting '
                        'with "unapproved", see https://github.com/kubernetes/enhancements/pull/1111']),
        ("https:///no-host", [f'metadata.annotations[{API_APPROVED_ANNOTATION}]: Invalid value: '
                              '"https:///no-host": protected groups must have approval annotation '
                              f'"{API_APPROVED_ANNOTATION}" with either a URL or a reason '
                              'starting with "unapproved", see '
                              "https://github.com/kubernetes/enhancements/pull/1111"]),
        ("unapproved, experimental", []),
        ("https://github.com/kubernetes/enhancements/pull/1111", []),
    ],
)  # fmt: skip
def test_protected_groups_need_api_approval(annotation: str | None, errors: list[str]) -> None:
    crd = kopf_peering(True)
    crd["spec"]["group"] = "kopf.x-k8s.io"
    crd["metadata"]["name"] = "clusterkopfpeerings.kopf.x-k8s.io"
    assert create_errors(crd) == []  # x-k8s.io is not protected
    crd["spec"]["group"] = "kopf.k8s.io"
    crd["metadata"]["name"] = "clusterkopfpeerings.kopf.k8s.io"
    if annotation is not None:
        crd["metadata"]["annotations"] = {API_APPROVED_ANNOTATION: annotation}
    assert create_errors(crd) == errors


def test_an_unchanged_approval_state_is_not_rechecked_on_update() -> None:
    crd = kopf_peering(True)
    crd["spec"]["group"] = "kopf.k8s.io"
    crd["metadata"]["name"] = "clusterkopfpeerings.kopf.k8s.io"
    stored = established(crd)  # stored without the annotation (e.g. before the rule)
    assert update_errors(crd, stored) == []
    crd["metadata"]["annotations"] = {API_APPROVED_ANNOTATION: "maybe"}
    assert update_errors(crd, stored)[0].startswith(
        f'metadata.annotations[{API_APPROVED_ANNOTATION}]: Invalid value: "maybe"'
    )


# ---------------------------------------------------------------------------------------
# Stored versions and updates


def test_a_stored_version_must_stay_in_spec_versions() -> None:
    stored = established(certificate())
    stored["status"]["storedVersions"] = ["v1alpha2", "v1"]
    crd = certificate()
    del crd["spec"]["versions"][0]
    assert update_errors(crd, stored) == [
        'status.storedVersions[0]: Invalid value: "v1alpha2": missing from spec.versions; '
        "v1alpha2 was previously a storage version, and must remain in spec.versions until a "
        "storage migration ensures no data remains persisted in v1alpha2 and removes v1alpha2 "
        "from status.storedVersions"
    ]


def test_stored_versions_must_hold_the_storage_version() -> None:
    stored = established(certificate())
    body = copy.deepcopy(stored)
    body["status"]["storedVersions"] = ["v1alpha2"]
    # A status write may do that; a later spec update then finds it and re-adds v1.
    prepare_for_status_update(body, stored)
    obj = updated(certificate(), body)
    assert obj["status"]["storedVersions"] == ["v1alpha2", "v1"]
    # Checked directly: what validation says of a status lacking it.
    obj["status"]["storedVersions"] = ["v1alpha2"]
    assert texts(validate_crd_update(obj, body)) == [
        'status.storedVersions: Invalid value: ["v1alpha2"]: must have the storage version v1'
    ]


def test_group_and_plural_never_change() -> None:
    stored = established(kopf_peering(False))
    crd = kopf_peering(False)
    crd["spec"]["group"] = "kopf.io"
    crd["spec"]["names"]["plural"] = "peerings"
    assert update_errors(crd, stored) == [
        'spec.group: Invalid value: "kopf.io": field is immutable',
        'spec.names.plural: Invalid value: "peerings": field is immutable',
    ]


def test_scope_and_kind_change_only_until_established() -> None:
    crd = kopf_peering(False)
    crd["spec"]["scope"] = "Cluster"
    crd["spec"]["names"]["kind"] = "Peering"
    crd["spec"]["names"]["singular"] = "kopfpeering"
    not_yet = created(kopf_peering(False))
    assert update_errors(crd, not_yet) == []
    stored = established(kopf_peering(False))
    assert update_errors(crd, stored) == [
        'spec.scope: Invalid value: "Cluster": field is immutable',
        'spec.names.kind: Invalid value: "Peering": field is immutable',
    ]


def test_an_update_may_keep_a_version_without_a_schema_if_one_lacked_it_before() -> None:
    crd = certificate()
    del crd["spec"]["versions"][0]["schema"]
    stored = established(certificate())
    del stored["spec"]["versions"][0]["schema"]  # stored before schemas were required
    assert update_errors(crd, stored) == [
        "spec.versions[0].schema.openAPIV3Schema: Required value: because otherwise all fields "
        "are pruned"
    ]
    crd["spec"]["versions"][0]["served"] = False
    assert update_errors(crd, stored) == []
    assert create_errors(crd) == ["spec.versions[0].schema.openAPIV3Schema: Required value"]


def test_more_than_eight_selectable_fields_may_stay_unchanged() -> None:
    crd = shirts()
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for i in range(9):
        spec["properties"][f"f{i}"] = {"type": "string"}
    crd["spec"]["versions"][0]["selectableFields"] = [{"jsonPath": f".spec.f{i}"} for i in range(9)]
    stored = established(shirts())
    stored["spec"] = copy.deepcopy(crd["spec"])
    default_crd(stored)
    assert update_errors(crd, stored) == []
    crd["spec"]["versions"][0]["selectableFields"].reverse()
    assert update_errors(crd, stored) == [
        "spec.versions[0].selectableFields: Too many: 9: must have at most 8 items"
    ]


# ---------------------------------------------------------------------------------------
# Shapes: causes, never exceptions


@pytest.mark.parametrize(
    ("path", "value", "error"),
    [
        (("spec", "versions", 0, "served"), "yes",
         'spec.versions[0].served: Invalid value: "yes": must be of type boolean'),
        (("spec", "names"), "Widget",
         'spec.names: Invalid value: "Widget": must be of type object'),
        (("spec", "versions", 0, "schema", "openAPIV3Schema"), "object",
         'spec.versions[0].schema.openAPIV3Schema: Invalid value: "object": must be of type '
         "object"),
        (("spec", "names", "shortNames"), "kex",
         'spec.names.shortNames: Invalid value: "kex": must be of type array'),
        (("spec", "versions", 0, "additionalPrinterColumns", 0, "priority"), 1.5,
         "spec.versions[0].additionalPrinterColumns[0].priority: Invalid value: 1.5: must be of "
         "type integer"),
        (("spec", "versions", 0, "additionalPrinterColumns", 0, "priority"), 2**31,
         "spec.versions[0].additionalPrinterColumns[0].priority: Invalid value: 2147483648: must "
         "be a 32-bit integer"),
        (("status", "conditions"), {"type": "Established"},
         'status.conditions: Invalid value: {"type":"Established"}: must be of type array'),
    ],
)  # fmt: skip
def test_members_of_the_wrong_type_are_type_causes(
    path: tuple[str | int, ...], value: Any, error: str
) -> None:
    crd = created(kopf_example())
    target: Any = crd
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    causes = validate_crd(crd)
    assert causes[0].reason == "FieldValueTypeInvalid"
    assert texts(causes)[0] == error


def test_a_condition_time_must_parse() -> None:
    crd = created(kopf_example())
    crd["status"]["conditions"] = [
        {"type": "Established", "status": "True", "lastTransitionTime": "yesterday"}
    ]
    assert texts(validate_crd(crd)) == [
        'status.conditions[0].lastTransitionTime: Invalid value: "yesterday": parsing time '
        '"yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"'
    ]


def test_not_an_object_at_all() -> None:
    assert texts(validate_crd([]))[0] == "<nil>: Invalid value: []: must be of type object"  # type: ignore[arg-type]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_PLACES = [
    ("spec",), ("spec", "group"), ("spec", "names"), ("spec", "names", "kind"),
    ("spec", "versions"), ("spec", "versions", 0), ("spec", "versions", 0, "name"),
    ("spec", "versions", 0, "schema"), ("spec", "versions", 0, "schema", "openAPIV3Schema"),
    ("spec", "versions", 0, "subresources"), ("spec", "versions", 0, "subresources", "scale"),
    ("spec", "versions", 0, "additionalPrinterColumns"),
    ("spec", "versions", 0, "selectableFields"),
    ("spec", "versions", 0, "deprecationWarning"), ("spec", "conversion"),
    ("spec", "conversion", "webhook"), ("spec", "preserveUnknownFields"), ("status",),
    ("status", "acceptedNames"), ("status", "storedVersions"), ("status", "conditions"),
    ("metadata", "annotations"), ("metadata", "name"),
]  # fmt: skip


_STORED = established(certificate())
_CREATED = created(kopf_example())


@settings(max_examples=200, deadline=None)
@given(place=st.sampled_from(_PLACES), value=_JSON, other=_JSON)
def test_any_json_anywhere_gives_causes_not_exceptions(
    place: tuple[str | int, ...], value: Any, other: Any
) -> None:
    crd = copy.deepcopy(_CREATED)
    target: Any = crd
    for step in place[:-1]:
        target = target[step]
    target[place[-1]] = value
    stored = _STORED
    for obj in (crd, copy.deepcopy(crd)):
        default_crd(obj)
        validate_crd(obj)
        validate_crd_update(obj, stored)
        validate_crd_update(stored, obj)
        validate_crd_status_update(obj, stored)
        prepare_for_update(copy.deepcopy(obj), obj)
        names_status(obj, NamesInUse.of_group([obj, stored, other], "kopf.dev"), now=NOW)
        established_status(obj, now=NOW)
        mark_for_deletion(copy.deepcopy(obj), now=NOW)
        invalid_error(obj, validate_crd(obj))


def test_invalid_error_is_kubernetes_422() -> None:
    crd = kopf_peering(True)
    crd["spec"]["scope"] = ""
    obj = created(crd)
    error = invalid_error(obj, validate_crd(obj))
    assert error.code == 422
    status = error.status()
    assert status["message"] == (
        'CustomResourceDefinition.apiextensions.k8s.io "clusterkopfpeerings.kopf.dev" is '
        "invalid: spec.scope: Required value"
    )
    assert status["details"] == {
        "name": "clusterkopfpeerings.kopf.dev",
        "group": "apiextensions.k8s.io",
        "kind": "CustomResourceDefinition",
        "causes": [
            {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.scope"}
        ],
    }


# ---------------------------------------------------------------------------------------
# The naming and establishing controllers


def test_fresh_names_are_accepted_then_established() -> None:
    crd = created(kopf_example())
    status = names_status(crd, NamesInUse.of_group([crd], "kopf.dev"), now=NOW)
    assert status == {
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": NOW,
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "False",
                "lastTransitionTime": NOW,
                "reason": "Installing",
                "message": "the initial names have been accepted",
            },
        ],
        "acceptedNames": {
            "plural": "kopfexamples",
            "singular": "kopfexample",
            "shortNames": ["kopfexes", "kopfex", "kexes", "kex"],
            "kind": "KopfExample",
            "listKind": "KopfExampleList",
        },
        "storedVersions": ["v1"],
    }
    assert established_status(crd, now=LATER) is None  # names not accepted yet
    crd["status"] = status
    assert names_status(crd, NamesInUse.of_group([crd], "kopf.dev"), now=LATER) is None
    established_now = established_status(crd, now=LATER)
    assert established_now is not None
    assert established_now["conditions"][1] == {
        "type": "Established",
        "status": "True",
        "lastTransitionTime": LATER,
        "reason": "InitialNamesAccepted",
        "message": "the initial names have been accepted",
    }
    assert established_now["conditions"][0]["lastTransitionTime"] == NOW
    crd["status"] = established_now
    assert is_condition_true(crd, "Established")
    assert established_status(crd, now=LATER) is None


def test_a_plural_taken_by_another_crd_is_a_conflict() -> None:
    other = established(kopf_peering(False))
    crd = created(kopf_peering(True))
    crd["spec"]["names"]["plural"] = "kopfpeerings"
    taken = NamesInUse.of_group([other, crd], "kopf.dev")
    status = names_status(crd, taken, now=NOW)
    assert status is not None
    assert status["conditions"] == [
        {
            "type": "NamesAccepted",
            "status": "False",
            "lastTransitionTime": NOW,
            "reason": "PluralConflict",
            "message": '"kopfpeerings" is already in use',
        },
        {
            "type": "Established",
            "status": "False",
            "lastTransitionTime": NOW,
            "reason": "NotAccepted",
            "message": "not all names are accepted",
        },
    ]
    # The other names are accepted; the plural stays unaccepted.
    assert status["acceptedNames"] == {
        "plural": "",
        "singular": "clusterkopfpeering",
        "kind": "ClusterKopfPeering",
        "listKind": "ClusterKopfPeeringList",
    }
    # Another group's names do not count.
    assert NamesInUse.of_group([other], "zalando.org") == NamesInUse()


def test_conflicts_report_the_last_one_and_short_names_aggregate() -> None:
    other = established(kopf_example())
    crd = created(kopf_peering(False))
    crd["spec"]["names"]["shortNames"] = ["kex", "kp", "kexes", "kex"]
    crd["spec"]["names"]["listKind"] = "KopfExample"
    status = names_status(crd, NamesInUse.of_group([other], "kopf.dev"), now=NOW)
    assert status is not None
    names_accepted = status["conditions"][0]
    assert names_accepted["reason"] == "ListKindConflict"
    assert names_accepted["message"] == '"KopfExample" is already in use'
    assert "shortNames" not in status["acceptedNames"]
    assert "listKind" not in status["acceptedNames"]

    crd["spec"]["names"]["listKind"] = "KopfPeeringList"
    status = names_status(crd, NamesInUse.of_group([other], "kopf.dev"), now=NOW)
    assert status is not None
    assert status["conditions"][0]["reason"] == "ShortNamesConflict"
    assert status["conditions"][0]["message"] == (
        '["kex" is already in use, "kexes" is already in use]'
    )


def test_names_already_accepted_are_kept_and_built_ins_can_be_added() -> None:
    crd = established(webapp())
    # The CRD's own accepted names never conflict with themselves.
    assert names_status(crd, NamesInUse.of_group([crd], "apps.example.com"), now=LATER) is None
    crd["spec"]["names"]["shortNames"] = ["deploy"]
    built_in = NamesInUse(resources=frozenset({"deployments", "deploy"}))
    taken = NamesInUse.of_group([crd], "apps.example.com") | built_in
    status = names_status(crd, taken, now=LATER)
    assert status is not None
    accepted, est = status["conditions"]
    assert accepted["status"] == "False"
    assert accepted["lastTransitionTime"] == LATER  # True -> False is a transition
    assert accepted["message"] == '"deploy" is already in use'
    assert est == crd["status"]["conditions"][1]  # Established stays True, time unchanged
    assert est["status"] == "True"


def test_mark_for_deletion_adds_the_finalizer_and_terminating() -> None:
    crd = established(kopf_example())
    mark_for_deletion(crd, now=LATER)
    assert crd["metadata"]["deletionTimestamp"] == LATER
    assert crd["metadata"]["finalizers"] == [CLEANUP_FINALIZER]
    assert crd["status"]["conditions"][-1] == {
        "type": "Terminating",
        "status": "True",
        "lastTransitionTime": LATER,
        "reason": "InstanceDeletionPending",
        "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will "
        "begin soon",
    }
    mark_for_deletion(crd, now="2030-01-01T00:00:00Z")
    assert crd["metadata"]["deletionTimestamp"] == LATER
    assert crd["metadata"]["finalizers"] == [CLEANUP_FINALIZER]
    assert crd["status"]["conditions"][-1]["lastTransitionTime"] == LATER
