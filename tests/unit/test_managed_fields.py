"""The field manager around the merge engine: manager identities, the managedFields
encoding and its order, the cap on update entries, decoding errors, conflict messages,
migration from client-side apply and the manager taken from a User-Agent."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from watchcache.registry.managed_fields import (
    ANCIENT_CHANGES,
    LAST_APPLIED_ANNOTATION,
    FieldManager,
    manager_from_user_agent,
    reset_fields,
)
from watchcache.structured.schema import DEDUCED, Atom, MapType, StructField
from watchcache.wire.errors import BadRequestError, ConflictError, InternalError

STRING = Atom(scalar="string")
STRINGS = Atom(map=MapType(element=STRING))
META = Atom(
    map=MapType(
        fields={
            name: StructField(name, atom)
            for name, atom in (
                ("name", STRING),
                ("namespace", STRING),
                ("uid", STRING),
                ("resourceVersion", STRING),
                ("creationTimestamp", STRING),
                ("labels", STRINGS),
                ("annotations", STRINGS),
                ("managedFields", DEDUCED),
            )
        }
    )
)
CONFIGMAP = Atom(
    map=MapType(
        fields={
            "apiVersion": StructField("apiVersion", STRING),
            "kind": StructField("kind", STRING),
            "metadata": StructField("metadata", META),
            "data": StructField("data", STRINGS),
        }
    )
)


class Clock:
    def __init__(self) -> None:
        self.second = 0

    def __call__(self) -> str:
        self.second += 1
        return f"2026-11-27T00:00:{self.second:02d}Z"


def manager(clock: Clock | None = None) -> FieldManager:
    return FieldManager("v1", "ConfigMap", lambda: CONFIGMAP, clock=clock or Clock())


def cm(**data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": data}


def entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list(obj["metadata"].get("managedFields") or [])


def test_a_create_is_an_update_entry_with_the_added_fields() -> None:
    new = cm(a="1")
    manager().update(None, new, "maker")
    assert entries(new) == [
        {
            "manager": "maker",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-11-27T00:00:01Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {".": {}, "f:a": {}}},
        }
    ]


def test_entries_are_sorted_apply_first_then_by_time_and_manager() -> None:
    fm = manager()
    obj = fm.apply({}, cm(a="1"), "zeta", force=False)
    new = copy.deepcopy(obj)
    new["data"]["b"] = "2"
    fm.update(obj, new, "beta")
    newer = copy.deepcopy(new)
    newer["data"]["c"] = "3"
    fm.update(new, newer, "alpha")
    assert [(e["operation"], e["manager"]) for e in entries(newer)] == [
        ("Apply", "zeta"),
        ("Update", "beta"),
        ("Update", "alpha"),
    ]
    assert "apiVersion" in entries(newer)[0]


def test_more_than_ten_updaters_merge_the_oldest_into_ancient_changes() -> None:
    fm = manager()
    current: dict[str, Any] = cm(k0="v")
    fm.update(None, current, "m0")
    for i in range(1, 12):
        nxt = copy.deepcopy(current)
        nxt["data"][f"k{i}"] = "v"
        fm.update(current, nxt, f"m{i}")
        current = nxt
    names = [e["manager"] for e in entries(current)]
    assert len(names) == 10
    assert ANCIENT_CHANGES in names and "m0" not in names and "m1" not in names
    ancient = next(e for e in entries(current) if e["manager"] == ANCIENT_CHANGES)
    assert set(ancient["fieldsV1"]["f:data"]) >= {"f:k0", "f:k1", "f:k2"}


def test_an_update_with_bad_managed_fields_keeps_the_stored_ones() -> None:
    fm = manager()
    live = cm(a="1")
    fm.update(None, live, "maker")
    new = copy.deepcopy(live)
    new["data"]["b"] = "2"
    new["metadata"]["managedFields"] = [{"manager": "x", "operation": "Sideways"}]
    fm.update(live, new, "editor")
    assert {e["manager"] for e in entries(new)} == {"maker", "editor"}


def test_an_empty_list_resets_ownership() -> None:
    fm = manager()
    live = cm(a="1")
    fm.update(None, live, "maker")
    new = copy.deepcopy(live)
    new["metadata"]["managedFields"] = []
    new["metadata"]["uid"] = "u"
    fm.update(live, new, "editor")
    # Reset, and an object with a uid and nothing tracked is not tracked again.
    assert "managedFields" not in new["metadata"]


def test_apply_refuses_another_kind_and_given_managed_fields() -> None:
    fm = manager()
    with pytest.raises(BadRequestError, match=r"invalid object type: apps/v1, Kind=ConfigMap"):
        fm.apply({}, {**cm(), "apiVersion": "apps/v1"}, "m", force=False)
    given = cm()
    given["metadata"]["managedFields"] = []
    with pytest.raises(BadRequestError, match=r"metadata\.managedFields must be nil"):
        fm.apply({}, given, "m", force=False)


def test_a_live_object_with_undecodable_managed_fields_cannot_be_applied_to() -> None:
    live = cm(a="1")
    live["metadata"]["managedFields"] = [{"operation": "Apply", "apiVersion": "v1"}]
    with pytest.raises(InternalError, match="missing fieldsType"):
        manager().apply(live, cm(a="1"), "m", force=False)


def test_conflict_messages_name_each_manager_and_field() -> None:
    fm = manager()
    live = fm.apply({}, cm(a="1", b="1"), "first", force=False)
    updated = copy.deepcopy(live)
    updated["data"]["c"] = "1"
    fm.update(live, updated, "editor", "status")
    with pytest.raises(ConflictError) as raised:
        fm.apply(updated, cm(a="2", b="2", c="2"), "second", force=False)
    status = raised.value.status()
    assert status["code"] == 409 and status["reason"] == "Conflict"
    assert status["message"] == (
        "Apply failed with 3 conflicts: "
        'conflicts with "editor" with subresource "status" using v1:\n- .data.c\n'
        'conflicts with "first":\n- .data.a\n- .data.b'
    )
    # Kubernetes lists causes in its map order of managers: compare as a set.
    assert sorted(c["field"] for c in status["details"]["causes"]) == [
        ".data.a",
        ".data.b",
        ".data.c",
    ]


def test_kubectl_takes_over_what_its_client_side_apply_set() -> None:
    fm = manager()
    last = cm(a="1")
    live = cm(a="1")
    live["metadata"]["annotations"] = {LAST_APPLIED_ANNOTATION: json.dumps(last)}
    fm.update(None, live, "kubectl-client-side-apply")
    live["metadata"]["uid"] = "u"
    taken = fm.apply(live, cm(a="2"), "kubectl", force=False)
    assert taken["data"] == {"a": "2"}
    annotation = taken["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
    assert (
        annotation
        == '{"apiVersion":"v1","data":{"a":"2"},"kind":"ConfigMap","metadata":{"name":"x"}}\n'
    )
    # Anyone else conflicts as usual.
    with pytest.raises(ConflictError):
        fm.apply(live, cm(a="2"), "someone", force=False)


def test_an_unchanged_apply_keeps_the_entry_time() -> None:
    fm = manager()
    obj = fm.apply({}, cm(a="1"), "m", force=False)
    again = fm.apply(obj, cm(a="1"), "m", force=False)
    assert entries(again) == entries(obj)


def test_status_writes_do_not_own_the_spec() -> None:
    assert set(reset_fields("Pod", has_status=True)) == {"", "status"}
    assert reset_fields("ConfigMap", has_status=False) == {}


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        ("kubectl/v1.37.1 (linux/amd64) kubernetes/abc", "kubectl"),
        ("OpenAPI-Generator/37.0.0/python", "OpenAPI-Generator"),
        ("", ""),
        ("tab\there/1", "tabhere"),
        ("x" * 200, "x" * 128),
        ("é" * 100, "é" * 64),
    ],
)
def test_the_manager_of_a_write_without_field_manager(agent: str, expected: str) -> None:
    assert manager_from_user_agent(agent) == expected
