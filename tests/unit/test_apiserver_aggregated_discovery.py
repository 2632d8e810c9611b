"""Aggregated discovery: the documents' shapes (byte-exact for the built-in kinds, Go
member order and omitempty), version ordering, the ETag, and the Accept negotiation as
kube-apiserver runs it, malformed headers included."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchcache.apiserver import aggregated_discovery as agg
from watchcache.apiserver import discovery
from watchcache.apiserver.aggregated_discovery import Endpoint
from watchcache.registry.resources import (
    CONFIGMAPS,
    CUSTOM_RESOURCE_DEFINITIONS,
    DEFAULT_RESOURCES,
    EVENTS,
    LEASES,
    NAMESPACES,
    PODS,
    SECRETS,
    ResourceSpec,
)
from watchcache.wire.errors import NotAcceptableError

V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
V2_PROTOBUF = (
    "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
)
#: What each client generation sends to /api and /apis (client-go's discovery_client.go;
#: kubectl 1.37's was recorded from the binary in the virtualenv).
KUBECTL_1_37 = f"{V2},application/json"
CLIENT_GO_1_30 = f"{V2},{V2BETA1},application/json"
CLIENT_GO_1_26 = f"{V2BETA1},application/json"
KUBECTL_1_20 = "application/json, */*"

_NS_VERBS = '["create","delete","deletecollection","get","list","patch","update","watch"]'
_CLUSTER_VERBS = '["create","delete","get","list","patch","update","watch"]'


def _kind(kind: str) -> str:
    return f'{{"group":"","version":"","kind":"{kind}"}}'


# Written from the Go types (apidiscovery/v2 types.go) and kube-apiserver's conversion
# (ConvertGroupVersionIntoToDiscovery): resources by name, subresources folded in.
CORE_V2 = (
    '{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},'
    '"items":[{"metadata":{},"versions":[{"version":"v1","resources":['
    f'{{"resource":"configmaps","responseKind":{_kind("ConfigMap")},"scope":"Namespaced",'
    f'"singularResource":"configmap","verbs":{_NS_VERBS},"shortNames":["cm"]}},'
    f'{{"resource":"events","responseKind":{_kind("Event")},"scope":"Namespaced",'
    f'"singularResource":"event","verbs":{_NS_VERBS},"shortNames":["ev"]}},'
    f'{{"resource":"namespaces","responseKind":{_kind("Namespace")},"scope":"Cluster",'
    f'"singularResource":"namespace","verbs":{_CLUSTER_VERBS},"shortNames":["ns"],'
    '"subresources":['
    f'{{"subresource":"finalize","responseKind":{_kind("Namespace")},"verbs":["update"]}},'
    f'{{"subresource":"status","responseKind":{_kind("Namespace")},'
    '"verbs":["get","patch","update"]}]},'
    f'{{"resource":"pods","responseKind":{_kind("Pod")},"scope":"Namespaced",'
    f'"singularResource":"pod","verbs":{_NS_VERBS},"shortNames":["po"],"categories":["all"],'
    f'"subresources":[{{"subresource":"status","responseKind":{_kind("Pod")},'
    '"verbs":["get","patch","update"]}]},'
    f'{{"resource":"secrets","responseKind":{_kind("Secret")},"scope":"Namespaced",'
    f'"singularResource":"secret","verbs":{_NS_VERBS}}}'
    '],"freshness":"Current"}]}]}'
)
NAMED_V2 = (
    '{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},'
    '"items":[{"metadata":{"name":"apiextensions.k8s.io"},"versions":[{"version":"v1",'
    '"resources":[{"resource":"customresourcedefinitions",'
    f'"responseKind":{_kind("CustomResourceDefinition")},"scope":"Cluster",'
    f'"singularResource":"customresourcedefinition","verbs":{_CLUSTER_VERBS},'
    '"shortNames":["crd","crds"],"categories":["api-extensions"],"subresources":['
    f'{{"subresource":"status","responseKind":{_kind("CustomResourceDefinition")},'
    '"verbs":["get","patch","update"]}]}],"freshness":"Current"}]},'
    '{"metadata":{"name":"coordination.k8s.io"},"versions":[{"version":"v1",'
    f'"resources":[{{"resource":"leases","responseKind":{_kind("Lease")},'
    f'"scope":"Namespaced","singularResource":"lease","verbs":{_NS_VERBS}}}],'
    '"freshness":"Current"}]}]}'
)


#: The built-in kinds the byte-exact documents above were written for.
BUILT_IN = (CONFIGMAPS, SECRETS, PODS, NAMESPACES, EVENTS, LEASES, CUSTOM_RESOURCE_DEFINITIONS)


def widget(version: str, **changes: Any) -> ResourceSpec:
    return ResourceSpec(
        "widgets", "widget", "Widget", group="example.com", version=version, **changes
    )


def document(resources: Any, endpoint: Endpoint, version: str = "v2") -> dict[str, Any]:
    body: dict[str, Any] = json.loads(agg.aggregated_document(resources, endpoint).bodies[version])
    return body


# -- the documents ------------------------------------------------------------------------------


def test_the_core_document_is_byte_exact() -> None:
    assert agg.aggregated_document(BUILT_IN, Endpoint.CORE).bodies["v2"].decode() == CORE_V2


def test_the_named_groups_document_is_byte_exact() -> None:
    body = agg.aggregated_document(BUILT_IN, Endpoint.NAMED_GROUPS).bodies["v2"]
    assert body.decode() == NAMED_V2


def test_v2beta1_differs_only_in_api_version() -> None:
    bodies = agg.aggregated_document(BUILT_IN, Endpoint.CORE).bodies
    assert bodies["v2beta1"].decode() == CORE_V2.replace(
        '"apiVersion":"apidiscovery.k8s.io/v2"', '"apiVersion":"apidiscovery.k8s.io/v2beta1"'
    )


def test_the_documents_do_not_depend_on_the_configured_order() -> None:
    for endpoint in Endpoint:
        backwards = tuple(reversed(BUILT_IN))
        assert agg.discovery_items(BUILT_IN, endpoint) == agg.discovery_items(backwards, endpoint)
        # ...and the cache sees one set, not two.
        assert agg.aggregated_document(BUILT_IN, endpoint) is agg.aggregated_document(
            backwards, endpoint
        )


def test_without_resources_the_lists_are_empty_not_null() -> None:
    assert document([], Endpoint.NAMED_GROUPS)["items"] == []
    only_named = [r for r in DEFAULT_RESOURCES if r.group]
    assert document(only_named, Endpoint.CORE)["items"] == []


def test_a_groups_versions_come_most_preferred_first() -> None:
    # Kubernetes' order for versions of equal priority: GA, beta, alpha, higher numbers
    # first; versions that are not Kubernetes-like last, in name order.
    served = ["v1alpha1", "v1", "foo", "v1beta2", "v10", "v2beta1", "bar", "v1beta10"]
    body = document([widget(v) for v in served], Endpoint.NAMED_GROUPS)
    (group,) = body["items"]
    assert group["metadata"] == {"name": "example.com"}
    assert [v["version"] for v in group["versions"]] == [
        "v10", "v1", "v2beta1", "v1beta10", "v1beta2", "v1alpha1", "bar", "foo",
    ]  # fmt: skip
    assert all(v["freshness"] == "Current" for v in group["versions"])


def test_groups_come_by_name_and_resources_by_name() -> None:
    specs = [
        ResourceSpec("zebras", "zebra", "Zebra", group="b.example.com"),
        ResourceSpec("apples", "apple", "Apple", group="b.example.com"),
        ResourceSpec("things", "thing", "Thing", group="a.example.com"),
        LEASES,
    ]
    items = document(specs, Endpoint.NAMED_GROUPS)["items"]
    assert [i["metadata"]["name"] for i in items] == [
        "a.example.com", "b.example.com", "coordination.k8s.io",
    ]  # fmt: skip
    assert [r["resource"] for r in items[1]["versions"][0]["resources"]] == ["apples", "zebras"]


def test_resource_members_follow_go_order_and_omitempty() -> None:
    spec = widget("v1", namespaced=False, short_names=("wd",), categories=("all",))
    entry = agg.resource_discovery(spec)
    assert list(entry) == [
        "resource", "responseKind", "scope", "singularResource", "verbs",
        "shortNames", "categories",
    ]  # fmt: skip
    assert entry["scope"] == "Cluster"
    bare = agg.resource_discovery(widget("v1"))
    assert "shortNames" not in bare and "categories" not in bare and "subresources" not in bare


def test_subresources_answer_their_parents_kind_except_scale() -> None:
    spec = widget("v1", subresources=("status", "scale"))
    subresources = agg.resource_discovery(spec)["subresources"]
    assert subresources == [
        {
            "subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"],
        },
        {
            "subresource": "status",
            "responseKind": {"group": "", "version": "", "kind": "Widget"},
            "verbs": ["get", "patch", "update"],
        },
    ]


def test_client_go_reads_the_same_resources_from_either_form() -> None:
    # client-go turns each aggregated resource and subresource into an APIResource
    # (SplitGroupsAndResources); they must say what the legacy /api/v1 says.
    legacy = discovery.api_resource_list(DEFAULT_RESOURCES)["resources"]
    expected = {
        r["name"]: (r["kind"], r["namespaced"], r["verbs"], r.get("shortNames")) for r in legacy
    }
    seen = {}
    (core,) = document(DEFAULT_RESOURCES, Endpoint.CORE)["items"]
    for resource in core["versions"][0]["resources"]:
        namespaced = resource["scope"] == "Namespaced"
        seen[resource["resource"]] = (
            resource["responseKind"]["kind"],
            namespaced,
            resource["verbs"],
            resource.get("shortNames"),
        )
        for sub in resource.get("subresources", []):
            seen[f"{resource['resource']}/{sub['subresource']}"] = (
                sub["responseKind"]["kind"],
                namespaced,
                sub["verbs"],
                None,
            )
    assert seen == expected


@pytest.mark.parametrize(
    ("a", "b", "sign"),
    [
        ("v1", "v1", 0),
        ("v2", "v1", 1),
        ("v1", "v1beta1", 1),
        ("v1beta1", "v1alpha1", 1),
        ("v2beta1", "v1beta2", 1),
        ("v1beta10", "v1beta2", 1),
        ("v1alpha2", "v1alpha1", 1),
        ("v10", "v9", 1),
        ("v1alpha1", "foo", 1),
        ("bar", "foo", 1),  # neither Kubernetes-like: the first by name is preferred
        ("v1.0", "v1", -1),
        ("v1", "V1", 1),
        ("v\N{FULLWIDTH DIGIT ONE}", "v1", -1),  # Go's \d is ASCII
        ("v99999999999999999999", "v1", -1),  # overflows Go's int: not Kubernetes-like
        ("v0000000000000000000000002", "v1", 1),  # leading zeros do not overflow
        ("v1\n", "v1", -1),
    ],
)
def test_compare_kube_aware_versions(a: str, b: str, sign: int) -> None:
    def sign_of(value: int) -> int:
        return (value > 0) - (value < 0)

    assert sign_of(agg.compare_kube_aware_versions(a, b)) == sign
    assert sign_of(agg.compare_kube_aware_versions(b, a)) == -sign


# -- ETag and caching -------------------------------------------------------------------------


def test_the_etag_is_kube_apiservers_hash_of_the_untyped_list() -> None:
    doc = agg.aggregated_document(DEFAULT_RESOURCES, Endpoint.NAMED_GROUPS)
    items = json.loads(doc.bodies["v2"])["items"]
    untyped = json.dumps({"metadata": {}, "items": items}, separators=(",", ":")).encode()
    assert doc.etag == '"' + hashlib.sha512(untyped).hexdigest().upper() + '"'
    assert re.fullmatch(r'"[0-9A-F]{128}"', doc.etag)


def test_documents_follow_the_resources_served() -> None:
    before = agg.aggregated_document(DEFAULT_RESOURCES, Endpoint.NAMED_GROUPS)
    added = agg.aggregated_document((*DEFAULT_RESOURCES, widget("v1")), Endpoint.NAMED_GROUPS)
    assert added.etag != before.etag
    assert b'"name":"example.com"' in added.bodies["v2"]
    # An equal set is served from the cache: the same object, nothing rebuilt; so is a set
    # that differs only where discovery does not look (columns, schemas).
    assert agg.aggregated_document(list(DEFAULT_RESOURCES), Endpoint.NAMED_GROUPS) is before
    leases_with_a_schema = dataclasses.replace(
        LEASES, printer_columns=(), openapi_schema={"type": "object"}
    )
    others = [r for r in DEFAULT_RESOURCES if r is not LEASES]
    assert agg.aggregated_document([*others, leases_with_a_schema], Endpoint.NAMED_GROUPS) is before
    # The core document does not change when only a named group does.
    assert (
        agg.aggregated_document((*DEFAULT_RESOURCES, widget("v1")), Endpoint.CORE).etag
        == agg.aggregated_document(DEFAULT_RESOURCES, Endpoint.CORE).etag
    )


# -- negotiation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (KUBECTL_1_37, "v2"),
        (CLIENT_GO_1_30, "v2"),
        (CLIENT_GO_1_26, "v2beta1"),
        (V2, "v2"),
        (f"{V2_PROTOBUF},{V2},{V2BETA1},application/json", "v2"),
        ("application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io", "v2"),
        ("*/*;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "v2"),
        ("application/*;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList", "v2beta1"),
        (f" {V2} ;profile=nopeer , application/json", "v2"),  # unknown parameters are kept
        (f"{V2};stream=watch", "v2"),
        (f"{V2};q=0", "v2"),  # q orders clauses; it never removes one (goautoneg)
        (f"{V2};q=abc", "v2"),  # an unreadable weight is 0
        # Higher q first: v2 (q=1) before v2beta1 (q=0.5).
        (f"{V2BETA1};q=0.5,{V2}", "v2"),
        # goautoneg's comparison puts a concrete type before */* whatever their q.
        (f"*/*;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,{V2};q=0.5", "v2"),
        # Legacy: no conversion asked for, or none that is served.
        (KUBECTL_1_20, None),
        ("application/json", None),
        ("*/*", None),
        ("*", None),
        ("application/yaml", None),
        ("application/vnd.kubernetes.protobuf", None),
        ("", None),
        ("   ", None),
        (None, None),
        (f"{V2_PROTOBUF},application/json", None),
        (f"{V2};stream=other,application/json", None),
        (f"{V2};sv=v1,application/json", None),
        ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,*/*", None),
        ('application/json;g="apidiscovery.k8s.io";v=v2;as=APIGroupDiscoveryList,*/*', None),
        ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", None),
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", None),
    ],
)
def test_negotiation(accept: str | None, expected: str | None) -> None:
    assert agg.negotiate(accept) == expected


@pytest.mark.parametrize(
    "accept",
    [
        V2_PROTOBUF,  # kube-apiserver would answer in protobuf; JSON was not accepted
        "application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        "application/json;v=",  # any of g/v/as asks for a conversion, even empty
        "text/html",
        "APPLICATION/JSON",  # media types compare case-sensitively, as in Go
        "application",
        ",,,",
        ";;;",
        "application/json/extra",
        "application/json;stream=other",
        "application/yaml;stream=watch",  # YAML has no stream form
    ],
)
def test_what_kube_apiserver_refuses_is_406(accept: str) -> None:
    with pytest.raises(NotAcceptableError) as refused:
        agg.negotiate(accept)
    assert refused.value.code == 406
    assert str(refused.value.message) == (
        "only the following media types are accepted: "
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )


def test_kube_apiserver_1_34_defaults_serve_v2_only() -> None:
    # AggregatedDiscoveryRemoveBetaType (on by default from 1.33): v2beta1 clients get
    # the legacy documents.
    assert agg.negotiate(CLIENT_GO_1_26, served_versions=("v2",)) is None
    assert agg.negotiate(CLIENT_GO_1_30, served_versions=("v2",)) == "v2"
    with pytest.raises(ValueError, match="served_versions"):
        agg.negotiate(KUBECTL_1_37, served_versions=("v3",))


def test_clauses_sort_as_go_sorts_them() -> None:
    clauses = agg.parse_accept("a/b;q=0.5, */*, c/*;q=0.9, d/e;x = y ;q=1, f")
    # "f" (no subtype) is dropped; values keep inner text, names are trimmed.
    # Go's insertion sort with goautoneg's comparison (traced by hand): c/* (q=0.9) ends
    # before */* (q=1) because a concrete type sorts first whatever the weights.
    assert [(c.type, c.subtype, c.q) for c in clauses] == [
        ("d", "e", 1.0),
        ("c", "*", pytest.approx(0.9)),
        ("*", "*", 1.0),
        ("a", "b", 0.5),
    ]
    assert clauses[0].params == {"x": "y"}
    # The weight is a float32, as ParseFloat(s, 32) reads it; its text is not trimmed.
    assert agg.parse_accept("a/b;q=0.1")[0].q == pytest.approx(0.1, abs=1e-8)
    assert agg.parse_accept("a/b;q=0.1")[0].q != 0.1
    assert agg.parse_accept("a/b;q= 1")[0].q == 0.0
    assert agg.parse_accept("a/b;q=1e39")[0].q == float("inf")


def test_long_headers_sort_by_weight_and_keep_header_order() -> None:
    header = ",".join([f"a/t{i};q=0.{i % 3 + 1}" for i in range(40)])
    clauses = agg.parse_accept(header)
    assert len(clauses) == 40
    weights = [c.q for c in clauses]
    assert weights == sorted(weights, reverse=True)
    tied = [c.subtype for c in clauses if c.q == clauses[0].q]
    assert tied == sorted(tied, key=lambda s: int(s[1:]))


@given(st.text(max_size=200))
def test_any_accept_header_is_a_version_the_legacy_document_or_406(accept: str) -> None:
    try:
        chosen = agg.negotiate(accept)
    except NotAcceptableError:
        return
    assert chosen in (None, *agg.SERVED_VERSIONS)


@given(
    st.lists(
        st.sampled_from([V2, V2BETA1, V2_PROTOBUF, "application/json", "*/*", "text/html"]).flatmap(
            lambda clause: st.sampled_from([clause, f"{clause};q=0.5", f"{clause};q=0"])
        ),
        max_size=6,
    )
)
def test_json_aggregated_clauses_always_win_over_plain_ones(clauses: list[str]) -> None:
    # The discovery wrapper looks for an aggregated clause before the legacy handler
    # looks at anything else, so its presence decides, whatever the weights.
    header = ",".join(clauses)
    wants = [c for c in clauses if c.startswith("application/json;g=")]
    try:
        chosen = agg.negotiate(header)
    except NotAcceptableError:
        assert not wants
        return
    assert (chosen is not None) == bool(wants)


# -- answers ----------------------------------------------------------------------------------


def test_an_aggregated_answer_carries_its_kind_etag_and_vary() -> None:
    answer = agg.answer(KUBECTL_1_37, None, DEFAULT_RESOURCES, Endpoint.NAMED_GROUPS)
    assert answer is not None and answer.status == 200
    doc = agg.aggregated_document(DEFAULT_RESOURCES, Endpoint.NAMED_GROUPS)
    assert answer.body == doc.bodies["v2"]
    assert dict(answer.headers) == {
        "ETag": doc.etag,
        "Vary": "Accept",
        "Cache-Control": "public",
        "Content-Type": V2,
    }
    beta = agg.answer(CLIENT_GO_1_26, None, DEFAULT_RESOURCES, Endpoint.NAMED_GROUPS)
    assert beta is not None and beta.headers["Content-Type"] == V2BETA1
    assert beta.headers["ETag"] == doc.etag


def test_if_none_match_with_the_etag_is_304_without_a_body() -> None:
    etag = agg.aggregated_document(DEFAULT_RESOURCES, Endpoint.CORE).etag
    cached = agg.answer(KUBECTL_1_37, etag, DEFAULT_RESOURCES, Endpoint.CORE)
    assert cached is not None and (cached.status, cached.body) == (304, b"")
    assert dict(cached.headers) == {"ETag": etag, "Vary": "Accept", "Cache-Control": "public"}
    # kube-apiserver compares the whole header value: a list or a weak tag is a miss.
    for other in (f'{etag}, "x"', f"W/{etag}", '"stale"', ""):
        fresh = agg.answer(KUBECTL_1_37, other, DEFAULT_RESOURCES, Endpoint.CORE)
        assert fresh is not None and fresh.status == 200


def test_the_legacy_document_is_left_to_the_caller() -> None:
    for accept in (KUBECTL_1_20, "application/json", None):
        assert agg.answer(accept, None, DEFAULT_RESOURCES, Endpoint.CORE) is None


def test_a_refusal_is_a_status_406() -> None:
    refused = agg.answer(V2_PROTOBUF, None, DEFAULT_RESOURCES, Endpoint.CORE)
    assert refused is not None and refused.status == 406
    assert refused.headers == {"Content-Type": "application/json"}
    status = json.loads(refused.body)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "NotAcceptable", 406)
