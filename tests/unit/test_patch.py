"""PATCH semantics: RFC 7386 and RFC 6902 appendix examples, strategic merge patch for the
kinds we serve, error statuses as Kubernetes sends them, and inputs never mutated."""

from __future__ import annotations

import contextlib
import copy
import json
import pickle
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchcache.registry.patch import (
    MAX_JSON_PATCH_OPERATIONS,
    MERGE_KEYS,
    PATCH_CONTENT_TYPES,
    apply_json_patch,
    apply_merge_patch,
    apply_patch,
    apply_strategic_merge_patch,
)
from watchcache.wire import gojson
from watchcache.wire.errors import (
    UNPROCESSABLE_PATCH_MESSAGE,
    BadRequestError,
    InvalidError,
    RequestEntityTooLargeError,
    StatusError,
    UnprocessablePatchError,
    UnsupportedMediaTypeError,
)

JSON = Any


def same(a: JSON, b: JSON) -> bool:
    """Equal as JSON text, so ``True`` is not ``1`` and ``1.0`` is not ``1``."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


# --- RFC 7386 appendix A ---------------------------------------------------------------------

RFC7386: list[tuple[JSON, JSON, JSON]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "expected"), RFC7386)
def test_merge_patch_matches_rfc7386_appendix(target: JSON, patch: JSON, expected: JSON) -> None:
    before = copy.deepcopy((target, patch))
    assert same(apply_merge_patch(target, patch), expected)
    assert same((target, patch), before)


# --- RFC 6902 appendix A ---------------------------------------------------------------------

RFC6902_OK: dict[str, tuple[JSON, list[JSON], JSON]] = {
    "A.1 add object member": (
        {"foo": "bar"},
        [{"op": "add", "path": "/baz", "value": "qux"}],
        {"baz": "qux", "foo": "bar"},
    ),
    "A.2 add array element": (
        {"foo": ["bar", "baz"]},
        [{"op": "add", "path": "/foo/1", "value": "qux"}],
        {"foo": ["bar", "qux", "baz"]},
    ),
    "A.3 remove object member": (
        {"baz": "qux", "foo": "bar"},
        [{"op": "remove", "path": "/baz"}],
        {"foo": "bar"},
    ),
    "A.4 remove array element": (
        {"foo": ["bar", "qux", "baz"]},
        [{"op": "remove", "path": "/foo/1"}],
        {"foo": ["bar", "baz"]},
    ),
    "A.5 replace a value": (
        {"baz": "qux", "foo": "bar"},
        [{"op": "replace", "path": "/baz", "value": "boo"}],
        {"baz": "boo", "foo": "bar"},
    ),
    "A.6 move a value": (
        {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
        [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
        {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
    ),
    "A.7 move an array element": (
        {"foo": ["all", "grass", "cows", "eat"]},
        [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
        {"foo": ["all", "cows", "eat", "grass"]},
    ),
    "A.8 test success": (
        {"baz": "qux", "foo": ["a", 2, "c"]},
        [
            {"op": "test", "path": "/baz", "value": "qux"},
            {"op": "test", "path": "/foo/1", "value": 2},
        ],
        {"baz": "qux", "foo": ["a", 2, "c"]},
    ),
    "A.10 add nested member object": (
        {"foo": "bar"},
        [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
        {"foo": "bar", "child": {"grandchild": {}}},
    ),
    "A.11 ignore unrecognized elements": (
        {"foo": "bar"},
        [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}],
        {"foo": "bar", "baz": "qux"},
    ),
    "A.14 escape ordering": (
        {"/": 9, "~1": 10},
        [{"op": "test", "path": "/~01", "value": 10}],
        {"/": 9, "~1": 10},
    ),
    "A.16 add an array value": (
        {"foo": ["bar"]},
        [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
        {"foo": ["bar", ["abc", "def"]]},
    ),
    # Beyond the appendix: the root, copy, and the array-end and escape rules.
    "replace the root": ({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}], {"b": 2}),
    "add at the root replaces": ({"a": 1}, [{"op": "add", "path": "", "value": [1]}], [1]),
    "copy deep-copies": (
        {"a": {"b": [1]}},
        [
            {"op": "copy", "from": "/a", "path": "/c"},
            {"op": "add", "path": "/c/b/-", "value": 2},
        ],
        {"a": {"b": [1]}, "c": {"b": [1, 2]}},
    ),
    "add at the array end by index": (
        {"a": [1]},
        [{"op": "add", "path": "/a/1", "value": 2}],
        {"a": [1, 2]},
    ),
    "move to itself is a no-op": (
        {"a": 1},
        [{"op": "move", "from": "/a", "path": "/a"}],
        {"a": 1},
    ),
    "tilde and slash in keys": (
        {"a/b": {"c~d": 1}},
        [{"op": "replace", "path": "/a~1b/c~0d", "value": 2}],
        {"a/b": {"c~d": 2}},
    ),
    "test compares numbers by value": (
        {"a": 1},
        [{"op": "test", "path": "/a", "value": 1.0}],
        {"a": 1},
    ),
    "null value is a value": (
        {"a": 1},
        [{"op": "add", "path": "/b", "value": None}, {"op": "test", "path": "/b", "value": None}],
        {"a": 1, "b": None},
    ),
}


@pytest.mark.parametrize(
    ("target", "operations", "expected"), RFC6902_OK.values(), ids=RFC6902_OK.keys()
)
def test_json_patch_applies_rfc6902_examples(
    target: JSON, operations: list[JSON], expected: JSON
) -> None:
    before = copy.deepcopy((target, operations))
    assert same(apply_json_patch(target, operations), expected)
    assert same((target, operations), before)


RFC6902_FAIL: dict[str, tuple[JSON, list[JSON]]] = {
    "A.9 test failure": ({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}]),
    "A.12 add to a nonexistent target": (
        {"foo": "bar"},
        [{"op": "add", "path": "/baz/bat", "value": "qux"}],
    ),
    "A.15 strings are not numbers": (
        {"/": 9, "~1": 10},
        [{"op": "test", "path": "/~01", "value": "10"}],
    ),
    "remove a missing member": ({"a": 1}, [{"op": "remove", "path": "/b"}]),
    "replace a missing member": ({"a": 1}, [{"op": "replace", "path": "/b", "value": 1}]),
    "remove the root": ({"a": 1}, [{"op": "remove", "path": ""}]),
    "index past the end": ({"a": [1]}, [{"op": "add", "path": "/a/2", "value": 0}]),
    "leading zero index": ({"a": [1, 2]}, [{"op": "replace", "path": "/a/01", "value": 0}]),
    "negative index": ({"a": [1, 2]}, [{"op": "remove", "path": "/a/-1"}]),
    "dash is only for add": ({"a": [1]}, [{"op": "remove", "path": "/a/-"}]),
    "step into a scalar": ({"a": 1}, [{"op": "add", "path": "/a/b", "value": 0}]),
    "pointer without a slash": ({"a": 1}, [{"op": "add", "path": "a", "value": 0}]),
    "bad escape": ({"a": 1}, [{"op": "add", "path": "/a~2", "value": 0}]),
    "unknown op": ({"a": 1}, [{"op": "frobnicate", "path": "/a"}]),
    "missing op": ({"a": 1}, [{"path": "/a"}]),
    "missing path": ({"a": 1}, [{"op": "remove"}]),
    "path not a string": ({"a": 1}, [{"op": "remove", "path": 1}]),
    "missing value": ({"a": 1}, [{"op": "add", "path": "/b"}]),
    "missing from": ({"a": 1}, [{"op": "copy", "path": "/b"}]),
    "move into own child": ({"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}]),
    "test true is not 1": ({"a": 1}, [{"op": "test", "path": "/a", "value": True}]),
    "later failure undoes earlier ops": (
        {"a": 1},
        [{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/zzz"}],
    ),
}


@pytest.mark.parametrize(("target", "operations"), RFC6902_FAIL.values(), ids=RFC6902_FAIL.keys())
def test_json_patch_failures_are_422_with_kubernetes_message(
    target: JSON, operations: list[JSON]
) -> None:
    before = copy.deepcopy((target, operations))
    with pytest.raises(UnprocessablePatchError) as info:
        apply_json_patch(target, operations)
    err = info.value
    assert (err.code, err.reason, err.message) == (422, "Invalid", UNPROCESSABLE_PATCH_MESSAGE)
    assert err.detail.startswith("operation ")
    assert same((target, operations), before)


def test_json_patch_rfc6902_a13_duplicate_op_member_is_rejected() -> None:
    # A.13: {"op":"add", ..., "op":"remove"} must not be read as either operation.
    body = b'[{"op": "add", "path": "/baz", "value": "qux", "op": "remove"}]'
    with pytest.raises(BadRequestError, match='duplicate field "op"'):
        apply_patch("application/json-patch+json", {"baz": "x"}, body, "ConfigMap")


def test_json_patch_failure_status_keeps_kubernetes_message_and_says_why() -> None:
    # Kubernetes' message, which clients match on; the reason (which its handler drops) is
    # the one cause, on the field "patch".
    with pytest.raises(UnprocessablePatchError) as info:
        apply_json_patch({}, [{"op": "remove", "path": "/x"}])
    detail = info.value.detail
    assert '"/x" does not exist' in detail
    assert info.value.to_json() == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"the server rejected our request due to an error in our request",'
        b'"reason":"Invalid","details":{"causes":[{"reason":"FieldValueInvalid","message":'
        + gojson.dumpb(detail)
        + b',"field":"patch"}]},"code":422}'
    )


def test_patch_errors_survive_pickling_with_their_detail() -> None:
    unprocessable = UnprocessablePatchError("operation 0: boom")
    unsupported = UnsupportedMediaTypeError.accepting(PATCH_CONTENT_TYPES)
    for err in (unprocessable, unsupported):
        copied = pickle.loads(pickle.dumps(err))
        assert type(copied) is type(err)
        assert copied.to_json() == err.to_json()
    assert pickle.loads(pickle.dumps(unprocessable)).detail == "operation 0: boom"
    assert str(unprocessable) == f"{UNPROCESSABLE_PATCH_MESSAGE} (operation 0: boom)"


@pytest.mark.parametrize(
    "operations", [{"op": "add"}, ["add"], [[]], "x"], ids=["object", "string-op", "list-op", "str"]
)
def test_json_patch_that_is_not_an_array_of_objects_is_400(operations: JSON) -> None:
    with pytest.raises(BadRequestError, match="array of operation objects"):
        apply_json_patch({}, operations)


def test_json_patch_with_too_many_operations_is_413() -> None:
    operations = [{"op": "test", "path": "", "value": {}}] * (MAX_JSON_PATCH_OPERATIONS + 1)
    with pytest.raises(RequestEntityTooLargeError) as info:
        apply_json_patch({}, operations)
    assert info.value.code == 413
    assert info.value.message == (
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, "
        "got 10001"
    )


# --- strategic merge patch -------------------------------------------------------------------

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
STRATEGIC = "application/strategic-merge-patch+json"


def test_strategic_merge_patch_of_kubectl_apply_configmap_removes_key2() -> None:
    """docs/clients.md §1.9: the PATCH kubectl 1.20 sends for a changed ConfigMap."""
    live = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "x",
            "namespace": "ns1",
            "resourceVersion": "7",
            "labels": {"app": "a"},
            "annotations": {LAST_APPLIED: '{"old":true}\n'},
        },
        "data": {"key1": "value1", "key2": "value2"},
    }
    patch = {
        "data": {"key1": "value1-changed", "key2": None, "key3": "value3"},
        "metadata": {"annotations": {LAST_APPLIED: '{"new":true}\n'}},
    }
    body = json.dumps(patch).encode()
    before = copy.deepcopy(live)
    result = apply_patch(STRATEGIC, live, body, "ConfigMap")
    assert result == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "x",
            "namespace": "ns1",
            "resourceVersion": "7",
            "labels": {"app": "a"},
            "annotations": {LAST_APPLIED: '{"new":true}\n'},
        },
        "data": {"key1": "value1-changed", "key3": "value3"},
    }
    assert live == before
    # For a ConfigMap the strategic patch is the merge patch.
    assert result == apply_patch("application/merge-patch+json", live, body, "ConfigMap")


VOLUMES = [{"name": "v", "emptyDir": {}}]
TOLERATIONS = [{"key": "a", "operator": "Exists"}]


def pod(
    *containers: dict[str, JSON], volumes: JSON = VOLUMES, tolerations: JSON = TOLERATIONS
) -> dict[str, JSON]:
    spec = {"containers": list(containers), "volumes": volumes, "tolerations": tolerations}
    return {"metadata": {"name": "p"}, "spec": spec}


APP = {
    "name": "app",
    "image": "nginx:1",
    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
    "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 81}],
    "volumeMounts": [{"name": "v", "mountPath": "/data", "readOnly": True}],
}
SIDE = {"name": "side", "image": "envoy:1"}
LIVE_POD = pod(APP, SIDE)


def containers(*items: JSON) -> JSON:
    """A patch of ``spec.containers``."""
    return {"spec": {"containers": list(items)}}


def app(**changes: JSON) -> JSON:
    """APP with members changed (a None value removes the member)."""
    return {k: v for k, v in {**APP, **changes}.items() if v is not None}


SMP_POD: dict[str, tuple[JSON, JSON]] = {
    "change the image of one container": (
        containers({"name": "side", "image": "envoy:2"}),
        pod(APP, {**SIDE, "image": "envoy:2"}),
    ),
    "add a container": (
        containers({"name": "new", "image": "busybox"}),
        pod(APP, SIDE, {"name": "new", "image": "busybox"}),
    ),
    "delete a container": (containers({"name": "side", "$patch": "delete"}), pod(APP)),
    "delete a missing container is a no-op": (
        containers({"name": "ghost", "$patch": "delete"}),
        pod(APP, SIDE),
    ),
    "env merges by name": (
        containers({"name": "app", "env": [{"name": "B", "value": "3"}, {"name": "C"}]}),
        pod(
            app(env=[{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C"}]),
            SIDE,
        ),
    ),
    "env delete by name and null removes a member": (
        containers({"name": "app", "image": None, "env": [{"name": "A", "$patch": "delete"}]}),
        pod(app(image=None, env=[{"name": "B", "value": "2"}]), SIDE),
    ),
    "ports merge by containerPort": (
        containers(
            {
                "name": "app",
                "ports": [{"containerPort": 81, "name": "admin"}, {"containerPort": 443}],
            }
        ),
        pod(
            app(
                ports=[
                    {"containerPort": 80, "protocol": "TCP"},
                    {"containerPort": 81, "name": "admin"},
                    {"containerPort": 443},
                ]
            ),
            SIDE,
        ),
    ),
    "volumeMounts merge by mountPath": (
        containers({"name": "app", "volumeMounts": [{"mountPath": "/data", "readOnly": None}]}),
        pod(app(volumeMounts=[{"name": "v", "mountPath": "/data"}]), SIDE),
    ),
    "tolerations have no merge key and are replaced": (
        {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}},
        pod(APP, SIDE, tolerations=[{"key": "b", "operator": "Exists"}]),
    ),
    "volumes merge by name": (
        {"spec": {"volumes": [{"name": "w", "configMap": {"name": "cm"}}]}},
        pod(APP, SIDE, volumes=[*VOLUMES, {"name": "w", "configMap": {"name": "cm"}}]),
    ),
    "list replace directive": (
        containers({"$patch": "replace"}, {"name": "only", "image": "x"}),
        pod({"name": "only", "image": "x"}),
    ),
    "map replace directive": (
        {"spec": {"$patch": "replace", "containers": [{"name": "solo", "image": "y"}]}},
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "solo", "image": "y"}]}},
    ),
    "map delete directive": (
        {"spec": {"$patch": "delete"}},
        {"metadata": {"name": "p"}, "spec": {}},
    ),
    "setElementOrder reorders and is stripped": (
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "side"}, {"name": "app"}],
                "containers": [{"name": "app", "image": "nginx:2"}],
            }
        },
        pod(SIDE, app(image="nginx:2")),
    ),
    "setElementOrder keeps positions of unnamed elements": (
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "new"}, {"name": "app"}],
                "containers": [{"name": "new", "image": "n"}],
            }
        },
        pod({"name": "new", "image": "n"}, SIDE, APP),
    ),
    "setElementOrder on env inside a container": (
        containers({"name": "app", "$setElementOrder/env": [{"name": "B"}, {"name": "A"}]}),
        pod(app(env=[{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]), SIDE),
    ),
    "setElementOrder on a list that does not merge is dropped": (
        {"spec": {"$setElementOrder/tolerations": [{"key": "a"}]}},
        LIVE_POD,
    ),
    "retainKeys clears unnamed members and is stripped": (
        {"spec": {"volumes": [{"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {}}]}},
        pod(APP, SIDE, volumes=[{"name": "v", "hostPath": {}}]),
    ),
    "new elements lose nested nulls and directives": (
        containers({"name": "n", "args": None, "env": [{"name": "E", "$patch": "delete"}]}),
        pod(APP, SIDE, {"name": "n", "env": []}),
    ),
    "kubectl 1.20 apply of a changed image": (
        {
            "metadata": {"annotations": {LAST_APPLIED: "{}"}},
            "spec": {
                "$setElementOrder/containers": [{"name": "app"}, {"name": "side"}],
                "containers": [{"image": "nginx:2", "name": "app"}],
            },
        },
        {
            **pod(app(image="nginx:2"), SIDE),
            "metadata": {"name": "p", "annotations": {LAST_APPLIED: "{}"}},
        },
    ),
}


@pytest.mark.parametrize(("patch", "expected"), SMP_POD.values(), ids=SMP_POD.keys())
def test_strategic_merge_patch_of_pod(patch: JSON, expected: JSON) -> None:
    live = copy.deepcopy(LIVE_POD)
    before = copy.deepcopy((live, patch))
    result = apply_strategic_merge_patch(live, patch, "Pod")
    assert same(result, expected), json.dumps(result, indent=1)
    assert same((live, patch), before)


def at_path(path: str, leaf: JSON, lists: Mapping[str, str | None]) -> JSON:
    """An object with ``leaf`` at a MERGE_KEYS path; list elements on the way are keyed "k"."""
    segments = path.split("[].")
    value = leaf
    for depth in range(len(segments) - 1, -1, -1):
        for name in reversed(segments[depth].split(".")):
            value = {name: value}
        if depth:
            value = [{lists["[].".join(segments[:depth])]: "k", **value}]
    return value


MERGE_ROWS = [
    pytest.param(kind, path, key, id=f"{kind}:{path}")
    for kind, lists in MERGE_KEYS.items()
    for path, key in lists.items()
]


@pytest.mark.parametrize(("kind", "path", "merge_key"), MERGE_ROWS)
def test_strategic_merge_patch_merges_each_listed_list(
    kind: str, path: str, merge_key: str | None
) -> None:
    lists = MERGE_KEYS[kind]
    live: JSON
    patch: JSON
    expected: JSON
    if merge_key is None:
        live, patch, expected = ["x", "y"], ["y", "z"], ["x", "y", "z"]
    else:
        live = [{merge_key: 1, "a": 1}, {merge_key: 2}]
        patch = [{merge_key: 1, "b": 2}]
        expected = [{merge_key: 1, "a": 1, "b": 2}, {merge_key: 2}]
    result = apply_strategic_merge_patch(
        at_path(path, live, lists), at_path(path, patch, lists), kind
    )
    assert result == at_path(path, expected, lists)


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("Pod", "spec.tolerations"),
        ("Pod", "spec.containers[].args"),
        ("Pod", "spec.containers[].envFrom"),
        ("Pod", "status.containerStatuses"),
        ("Namespace", "spec.finalizers"),
        ("ConfigMap", "status.conditions"),
    ],
)
def test_strategic_merge_patch_replaces_lists_not_listed(kind: str, path: str) -> None:
    lists = MERGE_KEYS["Pod"]
    live = at_path(path, [{"name": 1, "a": 1}], lists)
    patch = at_path(path, [{"name": 1, "b": 2}], lists)
    assert apply_strategic_merge_patch(live, patch, kind) == patch


def test_strategic_merge_patch_of_finalizers_merges_as_a_set() -> None:
    live = {"metadata": {"name": "x", "finalizers": ["a", "b"]}}
    patch = {
        "metadata": {
            "finalizers": ["b", "c"],
            "$deleteFromPrimitiveList/finalizers": ["a"],
            "$setElementOrder/finalizers": ["c", "b"],
        }
    }
    result = apply_strategic_merge_patch(live, patch, "Secret")
    assert result == {"metadata": {"name": "x", "finalizers": ["c", "b"]}}


def test_strategic_merge_patch_without_merge_keys_replaces_lists_like_merge_patch() -> None:
    live = {"spec": {"containers": [{"name": "a"}]}}
    patch = {"spec": {"containers": [{"name": "b"}]}}
    assert apply_strategic_merge_patch(live, patch, "ConfigMap") == patch


SMP_ERRORS: dict[str, tuple[JSON, type[StatusError], str]] = {
    "unknown $patch value": (
        {"spec": {"$patch": "frobnicate"}},
        BadRequestError,
        'unknown patch type: "frobnicate" in map',
    ),
    "$patch merge on a map": ({"spec": {"$patch": "merge"}}, BadRequestError, "unknown patch type"),
    "$patch merge in a list": (
        {"spec": {"containers": [{"name": "app", "$patch": "merge"}]}},
        BadRequestError,
        "merging lists cannot yet be specified in the patch",
    ),
    "unknown directive member": (
        {"spec": {"$frobnicate": 1}},
        BadRequestError,
        'unknown strategic merge patch directive "$frobnicate"',
    ),
    "setElementOrder without a list name": (
        {"spec": {"$setElementOrder": []}},
        BadRequestError,
        "invalid patch format of setElementOrder list",
    ),
    "setElementOrder not a list": (
        {"spec": {"$setElementOrder/containers": {}}},
        BadRequestError,
        "invalid patch format of setElementOrder list",
    ),
    "setElementOrder entry without merge key": (
        {"spec": {"$setElementOrder/containers": [{"image": "x"}]}},
        BadRequestError,
        "invalid patch format of setElementOrder list",
    ),
    "retainKeys not a list": (
        {"spec": {"$retainKeys": "name"}},
        BadRequestError,
        "invalid patch format of retainKeys",
    ),
    "patch content outside retainKeys": (
        {"spec": {"$retainKeys": ["volumes"], "hostname": "h"}},
        UnprocessablePatchError,
        UNPROCESSABLE_PATCH_MESSAGE,
    ),
    "deleteFromPrimitiveList on a keyed list": (
        {"spec": {"$deleteFromPrimitiveList/containers": ["app"]}},
        BadRequestError,
        "invalid patch format of primitive list",
    ),
    "deleteFromPrimitiveList not a list": (
        {"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}},
        BadRequestError,
        "invalid patch format of primitive list",
    ),
    "keyed element without merge key": (
        {"spec": {"containers": [{"image": "x"}]}},
        BadRequestError,
        "does not contain declared merge key: name",
    ),
    "delete element without merge key": (
        {"spec": {"containers": [{"$patch": "delete"}]}},
        BadRequestError,
        "does not contain declared merge key: name",
    ),
    "keyed element not an object": (
        {"spec": {"containers": ["app"]}},
        BadRequestError,
        "expected objects with merge key name",
    ),
    "list of lists where scalars merge": (
        {"metadata": {"finalizers": [["a"]]}},
        UnprocessablePatchError,
        UNPROCESSABLE_PATCH_MESSAGE,
    ),
    "patch not an object": (["x"], BadRequestError, "must be a JSON object"),
}


@pytest.mark.parametrize(("patch", "error", "message"), SMP_ERRORS.values(), ids=SMP_ERRORS.keys())
def test_strategic_merge_patch_rejects_bad_directives(
    patch: JSON, error: type[StatusError], message: str
) -> None:
    live = copy.deepcopy(LIVE_POD)
    with pytest.raises(error) as info:
        apply_strategic_merge_patch(live, patch, "Pod")
    assert message in info.value.message
    assert live == LIVE_POD


# --- apply_patch: content types and bodies ---------------------------------------------------

CM = {"metadata": {"name": "x"}, "data": {"a": "1"}}


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("application/merge-patch+json", b'{"data":{"a":null,"b":"2"}}', {"b": "2"}),
        (
            "application/merge-patch+json; charset=utf-8",
            b'{"data":{"c":"3"}}',
            {"a": "1", "c": "3"},
        ),
        ("application/strategic-merge-patch+json", b'{"data":{"a":"9"}}', {"a": "9"}),
        ("application/strategic-merge-patch+json", b"null", {"a": "1"}),
        (
            "application/json-patch+json",
            b'[{"op":"add","path":"/data/c","value":"4"}]',
            {"a": "1", "c": "4"},
        ),
        ("Application/JSON-Patch+JSON", b"[]", {"a": "1"}),
    ],
    ids=["merge", "merge-charset", "strategic", "strategic-null", "json-patch", "json-patch-case"],
)
def test_apply_patch_dispatches_on_content_type(
    content_type: str, body: bytes, expected: dict[str, str]
) -> None:
    result = apply_patch(content_type, CM, body, "ConfigMap")
    assert result == {"metadata": {"name": "x"}, "data": expected}
    assert CM == {"metadata": {"name": "x"}, "data": {"a": "1"}}


def test_patch_content_types_are_kubernetes_three_in_order() -> None:
    assert list(PATCH_CONTENT_TYPES) == [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    ]


@pytest.mark.parametrize(
    "content_type",
    ["application/apply-patch+yaml", "application/json", "", "text/plain"],
    ids=["server-side-apply", "json", "missing", "text"],
)
def test_apply_patch_with_unsupported_content_type_is_415(content_type: str) -> None:
    # Server-side apply is not a patch of the document (registry.managed_fields serves
    # it); the 415 names it with the others, as Kubernetes' does.
    with pytest.raises(UnsupportedMediaTypeError) as info:
        apply_patch(content_type, CM, b"{}", "ConfigMap")
    assert info.value.to_json() == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"the body of the request was in an unknown format - accepted media types '
        b"include: application/json-patch+json, application/merge-patch+json, "
        b"application/strategic-merge-patch+json, application/apply-patch+yaml"
        b'","reason":"UnsupportedMediaType","code":415}'
    )


@pytest.mark.parametrize("content_type", list(PATCH_CONTENT_TYPES))
@pytest.mark.parametrize(
    "body",
    [b"", b"{", b"garbage", b'{"a": NaN}', b"\xff\xfe\xfa", b'{"a":1,"a":2}'],
    ids=["empty", "truncated", "garbage", "nan", "not-utf8", "duplicate"],
)
def test_apply_patch_with_garbage_body_is_400(content_type: str, body: bytes) -> None:
    with pytest.raises(BadRequestError) as info:
        apply_patch(content_type, CM, body, "ConfigMap")
    assert info.value.code == 400
    assert info.value.message.startswith("error decoding patch: ")


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/merge-patch+json", b"null"),
        ("application/merge-patch+json", b'"x"'),
        ("application/strategic-merge-patch+json", b"[1]"),
        ("application/strategic-merge-patch+json", b"3"),
    ],
)
def test_apply_patch_with_a_body_of_the_wrong_shape_is_400(content_type: str, body: bytes) -> None:
    with pytest.raises(BadRequestError, match="must be a JSON object"):
        apply_patch(content_type, CM, body, "ConfigMap")


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/merge-patch+json", b"[1]"),
        ("application/json-patch+json", b'[{"op":"replace","path":"","value":"s"}]'),
    ],
)
def test_apply_patch_result_that_is_not_an_object_is_422(content_type: str, body: bytes) -> None:
    with pytest.raises(InvalidError) as info:
        apply_patch(content_type, CM, body, "ConfigMap")
    assert info.value.code == 422
    assert info.value.message.startswith(' "" is invalid: patch: Invalid value: ')
    assert [c.field for c in info.value.details.causes] == ["patch"]


def test_apply_patch_json_patch_failure_is_422() -> None:
    body = b'[{"op":"test","path":"/data/a","value":"2"}]'
    with pytest.raises(UnprocessablePatchError) as info:
        apply_patch("application/json-patch+json", CM, body, "ConfigMap")
    assert info.value.code == 422


# --- properties ------------------------------------------------------------------------------


def create_merge_patch(a: JSON, b: JSON) -> JSON:
    """An RFC 7386 patch turning ``a`` into ``b`` (``b`` must have no null object members)."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return copy.deepcopy(b)
    patch: dict[str, JSON] = {key: None for key in a if key not in b}
    for key, value in b.items():
        if key not in a:
            patch[key] = copy.deepcopy(value)
        elif not same(a[key], value):
            patch[key] = create_merge_patch(a[key], value)
    return patch


KEYS = st.text(alphabet="abcxyz/~-", min_size=1, max_size=3)
SCALARS = (
    st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
)
# Null object members cannot be written by a merge patch (null means delete), so documents
# have nulls only inside arrays and at the top.
DOCUMENTS = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children | st.none(), max_size=4) | st.dictionaries(KEYS, children, max_size=4)
    ),
    max_leaves=20,
)
TOP = DOCUMENTS | st.none()


@given(TOP, TOP)
def test_merge_patch_of_created_patch_yields_the_target(a: JSON, b: JSON) -> None:
    patch = create_merge_patch(a, b)
    before = copy.deepcopy((a, patch))
    assert same(apply_merge_patch(a, patch), b)
    assert same((a, patch), before)


@given(st.dictionaries(KEYS, DOCUMENTS, max_size=4), st.dictionaries(KEYS, DOCUMENTS, max_size=4))
def test_strategic_merge_patch_of_configmap_equals_merge_patch(
    a: dict[str, JSON], b: dict[str, JSON]
) -> None:
    """Without directives and merging lists, a strategic patch is a merge patch (docs/clients.md
    §1.9); list elements are compared after the merge patch's own null pruning."""
    patch = create_merge_patch(a, b)
    expected = apply_merge_patch(a, patch)
    assert same(apply_strategic_merge_patch(a, patch, "ConfigMap"), expected)


def scrub(value: JSON) -> None:
    """Empty every container of ``value``, innermost first."""
    if isinstance(value, dict):
        for item in value.values():
            scrub(item)
        value.clear()
    elif isinstance(value, list):
        for item in value:
            scrub(item)
        value.clear()


OPERATIONS = st.lists(
    st.fixed_dictionaries(
        {
            "op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]),
            "path": st.sampled_from(["", "/a", "/a/0", "/a/-", "/b", "/a/b"]),
            "from": st.sampled_from(["", "/a", "/b", "/a/0"]),
            "value": DOCUMENTS,
        }
    ),
    max_size=4,
)


@given(DOCUMENTS, OPERATIONS)
def test_json_patch_result_shares_nothing_with_inputs(target: JSON, operations: JSON) -> None:
    before = copy.deepcopy((target, operations))
    with contextlib.suppress(UnprocessablePatchError):
        scrub(apply_json_patch(target, operations))
    assert same((target, operations), before)


def test_patch_results_share_nothing_with_inputs() -> None:
    live = copy.deepcopy(LIVE_POD)
    patch = {"spec": {"containers": [{"name": "new", "env": [{"name": "E", "value": "v"}]}]}}
    before = copy.deepcopy((live, patch))
    scrub(apply_strategic_merge_patch(live, patch, "Pod"))
    scrub(apply_merge_patch(live, patch))
    scrub(apply_json_patch(live, [{"op": "add", "path": "/x", "value": patch}]))
    scrub(apply_patch(STRATEGIC, live, json.dumps(patch).encode(), "Pod"))
    assert same((live, patch), before)
