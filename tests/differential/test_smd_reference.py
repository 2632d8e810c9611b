"""The reference harness itself: the ``smd-reference`` program answers as server-side apply
is specified (structured-merge-diff's behaviour, as Kubernetes documents it), keeps serving
after bad requests, and its client fails clearly when the binary is missing. The
differential tests (test_structured_merge.py) trust these answers, so they are pinned here
on cases whose outcome is known independently of either implementation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from smd_reference import Conflict, ManagerEntry, SmdReference, SmdReferenceMissing

from watchcache.structured.schema import (
    ASSOCIATIVE,
    ATOMIC,
    DEDUCED,
    UNTYPED_ATOMIC,
    Atom,
    ListType,
    MapType,
    StructField,
    to_smd_yaml,
)


def _string() -> Atom:
    return Atom(scalar="string")


def _struct(*fields: tuple[str, Atom], default: dict[str, Any] | None = None) -> Atom:
    defaults = default or {}
    return Atom(map=MapType(fields={n: StructField(n, t, defaults.get(n)) for n, t in fields}))


def _workload_schema() -> str:
    port = _struct(
        ("containerPort", Atom(scalar="numeric")),
        ("protocol", _string()),
        ("name", _string()),
        default={"protocol": "TCP"},
    )
    container = _struct(
        ("name", _string()),
        ("image", _string()),
        ("ports", Atom(list=ListType(port, ASSOCIATIVE, ("containerPort", "protocol")))),
    )
    root = _struct(
        ("replicas", Atom(scalar="numeric")),
        ("labels", Atom(map=MapType(element=_string()))),
        ("selector", Atom(map=MapType(element=_string(), relationship=ATOMIC))),
        ("containers", Atom(list=ListType(container, ASSOCIATIVE, ("name",)))),
        ("finalizers", Atom(list=ListType(_string(), ASSOCIATIVE))),
        ("args", Atom(list=ListType(_string(), ATOMIC))),
        ("extra", DEDUCED),
        ("raw", UNTYPED_ATOMIC),
    )
    return to_smd_yaml({"workload": root})


SCHEMA = _workload_schema()
TYPE = "workload"


def _fields(entry: ManagerEntry) -> Any:
    return json.loads(entry["fieldsV1JSON"])


def test_apply_creates_the_object_and_owns_every_applied_field(
    smd_reference: SmdReference,
) -> None:
    config = {
        "replicas": 2,
        "labels": {"app": "web"},
        "containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}],
    }
    out = smd_reference.apply(SCHEMA, TYPE, None, config, managers={}, manager="alice")
    assert out.error is None and out.conflicts is None
    assert out.object == config
    assert out.managers is not None and set(out.managers) == {"alice"}
    alice = out.managers["alice"]
    assert alice["applied"] is True and alice["apiVersion"] == "v1"
    # The port's key includes the defaulted protocol, as a Service's or Pod's ports do.
    assert alice["fieldsV1JSON"] == (
        '{"f:containers":{"k:{\\"name\\":\\"c\\"}":{".":{},"f:image":{},"f:name":{},'
        '"f:ports":{"k:{\\"containerPort\\":80,\\"protocol\\":\\"TCP\\"}":{".":{},'
        '"f:containerPort":{}}}}},"f:labels":{"f:app":{}},"f:replicas":{}}'
    )
    assert alice["fieldsV1"] == _fields(alice)


def test_a_second_applier_conflicts_then_forces(smd_reference: SmdReference) -> None:
    first = smd_reference.apply(
        SCHEMA, TYPE, None, {"replicas": 2, "args": ["a"]}, managers={}, manager="alice"
    )
    assert first.managers is not None
    clash = {"replicas": 3, "args": ["b"]}
    refused = smd_reference.apply(
        SCHEMA, TYPE, first.object, clash, managers=first.managers, manager="bob"
    )
    assert refused.conflicts is not None
    assert sorted(refused.conflicts, key=lambda c: c.path) == [
        Conflict("alice", ".args"),
        Conflict("alice", ".replicas"),
    ]
    forced = smd_reference.apply(
        SCHEMA, TYPE, first.object, clash, managers=first.managers, manager="bob", force=True
    )
    assert forced.object == clash
    assert forced.managers is not None and set(forced.managers) == {"bob"}
    assert _fields(forced.managers["bob"]) == {"f:args": {}, "f:replicas": {}}


def test_same_values_are_shared_and_survive_one_owner_leaving(
    smd_reference: SmdReference,
) -> None:
    live = smd_reference.apply(
        SCHEMA,
        TYPE,
        None,
        {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
        managers={},
        manager="alice",
    )
    assert live.managers is not None
    shared = smd_reference.apply(
        SCHEMA, TYPE, live.object, {"labels": {"a": "1"}}, managers=live.managers, manager="bob"
    )
    assert shared.conflicts is None and shared.managers is not None
    assert _fields(shared.managers["bob"]) == {"f:labels": {"f:a": {}}}
    # alice stops applying both labels: b is hers alone and goes, a stays for bob.
    left = smd_reference.apply(
        SCHEMA,
        TYPE,
        shared.object,
        {"finalizers": ["x"]},
        managers=shared.managers,
        manager="alice",
    )
    assert left.object == {"labels": {"a": "1"}, "finalizers": ["x"]}
    assert left.managers is not None
    assert _fields(left.managers["alice"]) == {"f:finalizers": {'v:"x"': {}}}


def test_an_update_takes_changed_fields_from_appliers(smd_reference: SmdReference) -> None:
    applied = smd_reference.apply(
        SCHEMA, TYPE, None, {"replicas": 1, "selector": {"a": "b"}}, managers={}, manager="alice"
    )
    assert applied.managers is not None
    updated = smd_reference.update(
        SCHEMA,
        TYPE,
        applied.object,
        {"replicas": 5, "selector": {"a": "b"}},
        managers=applied.managers,
        manager="kubectl-edit",
    )
    assert updated.object == {"replicas": 5, "selector": {"a": "b"}}
    assert updated.managers is not None
    assert _fields(updated.managers["alice"]) == {"f:selector": {}}
    editor = updated.managers["kubectl-edit"]
    assert editor["applied"] is False and _fields(editor) == {"f:replicas": {}}


def test_field_set_and_merge(smd_reference: SmdReference) -> None:
    obj = {"finalizers": ["b", "a"], "extra": {"k": [1, 2]}, "raw": {"any": {"thing": 1}}}
    out = smd_reference.field_set(SCHEMA, TYPE, obj)
    # Sets are ordered by value, deduced maps are walked, untyped atomic values are leaves.
    assert out.fields_v1_json == (
        '{"f:extra":{"f:k":{}},"f:finalizers":{"v:\\"a\\"":{},"v:\\"b\\"":{}},"f:raw":{}}'
    )
    merged = smd_reference.merge(
        SCHEMA, TYPE, {"labels": {"a": "1"}, "args": ["x"]}, {"labels": {"b": "2"}, "args": []}
    )
    assert merged.object == {"labels": {"a": "1", "b": "2"}, "args": []}


def test_bad_requests_are_answered_and_the_process_goes_on(
    smd_reference: SmdReference,
) -> None:
    invalid = smd_reference.apply(
        SCHEMA, TYPE, None, {"replicas": "two"}, managers={}, manager="alice"
    )
    assert invalid.error is not None and "replicas" in invalid.error
    unknown_type = smd_reference.field_set(SCHEMA, "nosuchtype", {})
    assert unknown_type.error is not None and "nosuchtype" in unknown_type.error
    assert "error" in smd_reference.request({"op": "dance", "schema": SCHEMA, "type": TYPE})
    broken = smd_reference.field_set("types: [", TYPE, {})
    assert broken.error is not None and broken.error.startswith("schema")
    still = smd_reference.field_set(SCHEMA, TYPE, {"replicas": 1})
    assert still.fields_v1 == {"f:replicas": {}}


def test_a_missing_binary_names_the_make_target(tmp_path: Path) -> None:
    reference = SmdReference(tmp_path / "smd-reference")
    with pytest.raises(SmdReferenceMissing, match="make smd-reference"):
        reference.start()
    reference.close()
