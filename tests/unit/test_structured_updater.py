"""Ownership on writes, as structured-merge-diff's merge tests define it: several appliers,
shared ownership, conflicts and force, pruning of what an applier stopped applying, sets
and list maps, atomic values, updates before and after applies, versions, ignored fields and
schema changes. Each case is a sequence of operations on one object, like SMD's fixtures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from structured_builders import (
    BOOLEAN,
    NUMERIC,
    STRING,
    atomic_list,
    list_map,
    map_of,
    set_of,
    struct,
)

from watchcache.structured import updater
from watchcache.structured.fieldpath import (
    ManagedFields,
    Path,
    PathElement,
    Set,
    VersionedSet,
    path_string,
)
from watchcache.structured.schema import ATOMIC, DEDUCED, Atom, with_relationship
from watchcache.structured.typed import TypedValueError
from watchcache.structured.updater import Conflict, ConflictsError

F = PathElement.of_field
K = PathElement.of_key
V = PathElement.of_value

LEAVES = struct(numeric=NUMERIC, string=STRING, bool=BOOLEAN)
PORT = struct(containerPort=NUMERIC, protocol=STRING, name=STRING, _defaults={"protocol": "TCP"})
CONTAINER = struct(name=STRING, image=STRING, ports=list_map(PORT, "containerPort", "protocol"))
WORKLOAD = struct(
    metadata=struct(name=STRING, labels=map_of(STRING), finalizers=set_of(STRING)),
    spec=struct(
        replicas=NUMERIC,
        containers=list_map(CONTAINER, "name"),
        args=atomic_list(STRING),
        selector=struct(app=STRING, tier=STRING, _relationship=ATOMIC),
        extra=DEDUCED,
    ),
    status=struct(ready=BOOLEAN, phase=STRING),
)


def p(*parts: str | PathElement) -> Path:
    return tuple(part if isinstance(part, PathElement) else F(part) for part in parts)


@dataclass
class State:
    """An object and its managers, changed by applies and updates (SMD's fixture State)."""

    atom: Atom
    live: Any = None
    managers: ManagedFields = field(default_factory=dict)

    def apply(
        self, manager: str, config: Any, *, force: bool = False, version: str = "v1", **kw: Any
    ) -> None:
        before = dict(self.managers)
        obj, self.managers = updater.apply(
            self.live, config, version, self.managers, manager, self.atom, force=force, **kw
        )
        assert self.managers is not before
        if obj is not updater.UNCHANGED:
            self.live = obj

    def update(self, manager: str, new: Any, *, version: str = "v1", **kw: Any) -> None:
        self.live, self.managers = updater.update(
            self.live, new, version, self.managers, manager, self.atom, **kw
        )

    def owned(self) -> dict[str, list[str]]:
        return {name: [path_string(q) for q in vs.set] for name, vs in self.managers.items()}


# --- appliers and updaters on leaves ---------------------------------------------------------


def test_apply_twice_owns_the_second_configuration() -> None:
    state = State(LEAVES)
    state.apply("default", {"numeric": 1, "string": "string"})
    state.apply("default", {"numeric": 2, "string": "string", "bool": False})
    assert state.live == {"numeric": 2, "string": "string", "bool": False}
    assert state.owned() == {"default": [".bool", ".numeric", ".string"]}
    assert state.managers["default"] == VersionedSet(
        Set([p("numeric"), p("string"), p("bool")]), "v1", True
    )


def test_apply_at_another_version_relabels_the_set() -> None:
    state = State(LEAVES)
    state.apply("default", {"numeric": 1, "string": "string"})
    state.apply("default", {"numeric": 2, "string": "string", "bool": False}, version="v2")
    assert state.managers["default"].api_version == "v2"
    assert state.owned() == {"default": [".bool", ".numeric", ".string"]}


@pytest.mark.parametrize("controller_version", ["v1", "v2"])
def test_apply_update_apply_without_conflict(controller_version: str) -> None:
    state = State(LEAVES)
    state.apply("default", {"numeric": 1, "string": "string"})
    state.update(
        "controller", {"numeric": 1, "string": "string", "bool": True}, version=controller_version
    )
    state.apply("default", {"numeric": 2, "string": "string"})
    assert state.live == {"numeric": 2, "string": "string", "bool": True}
    assert state.owned() == {"default": [".numeric", ".string"], "controller": [".bool"]}
    assert state.managers["controller"] == VersionedSet(Set([p("bool")]), controller_version, False)


def test_apply_update_apply_with_conflict_then_force() -> None:
    state = State(LEAVES)
    state.apply("default", {"numeric": 1, "string": "string"})
    state.update("controller", {"numeric": 1, "string": "controller string", "bool": True})
    assert state.owned() == {"default": [".numeric"], "controller": [".bool", ".string"]}
    with pytest.raises(ConflictsError) as caught:
        state.apply("default", {"numeric": 2, "string": "user string"})
    assert caught.value.conflicts == (Conflict("controller", p("string")),)
    assert str(caught.value) == 'conflict with "controller": .string'
    state.apply("default", {"numeric": 2, "string": "user string"}, force=True)
    assert state.live == {"numeric": 2, "string": "user string", "bool": True}
    assert state.owned() == {"default": [".numeric", ".string"], "controller": [".bool"]}


def test_appliers_share_fields_set_to_the_same_value() -> None:
    state = State(LEAVES)
    state.apply("a", {"numeric": 1, "string": "s"})
    state.apply("b", {"numeric": 1, "bool": True})
    assert state.owned() == {"a": [".numeric", ".string"], "b": [".bool", ".numeric"]}
    # A shared field stays when one applier lets go of it...
    state.apply("a", {"string": "s"})
    assert state.live == {"numeric": 1, "string": "s", "bool": True}
    assert state.owned() == {"a": [".string"], "b": [".bool", ".numeric"]}
    # ...and goes when the last one does.
    state.apply("b", {"bool": True})
    assert state.live == {"string": "s", "bool": True}


def test_conflicts_are_ordered_by_manager_and_path_and_printed_grouped() -> None:
    state = State(LEAVES)
    state.update("zeta", {"numeric": 1, "string": "z"})
    state.update("alpha", {"numeric": 1, "string": "z", "bool": True})
    assert state.owned() == {"zeta": [".numeric", ".string"], "alpha": [".bool"]}
    with pytest.raises(ConflictsError) as caught:
        state.apply("me", {"numeric": 2, "string": "me", "bool": False})
    assert [(c.manager, path_string(c.path)) for c in caught.value.conflicts] == [
        ("alpha", ".bool"),
        ("zeta", ".numeric"),
        ("zeta", ".string"),
    ]
    assert str(caught.value) == (
        'conflicts with "alpha":\n- .bool\nconflicts with "zeta":\n- .numeric\n- .string'
    )


def test_an_unchanged_apply_returns_no_object_but_the_managers() -> None:
    state = State(LEAVES)
    state.apply("a", {"numeric": 1})
    obj, managers = updater.apply(
        state.live, {"numeric": 1}, "v1", state.managers, "b", LEAVES, force=False
    )
    assert obj is updater.UNCHANGED
    assert {name: [path_string(q) for q in vs.set] for name, vs in managers.items()} == {
        "a": [".numeric"],
        "b": [".numeric"],
    }


def test_applying_nothing_prunes_and_forgets_the_applier() -> None:
    state = State(LEAVES)
    state.apply("a", {"numeric": 1, "string": "s"})
    state.update("u", {"numeric": 1, "string": "s", "bool": True})
    state.apply("a", {})
    assert state.live == {"bool": True}
    assert state.owned() == {"u": [".bool"]}


def test_updates_take_fields_from_everyone_and_removals_are_owned_by_nobody() -> None:
    state = State(LEAVES)
    state.apply("a", {"numeric": 1, "string": "s"})
    state.update("u", {"numeric": 2, "string": "s"})
    assert state.owned() == {"a": [".string"], "u": [".numeric"]}
    state.update("v", {"numeric": 2})
    assert state.owned() == {"u": [".numeric"]}
    state.update("v", {})
    assert state.owned() == {}


def test_the_input_managers_are_not_modified() -> None:
    state = State(LEAVES)
    state.apply("a", {"numeric": 1})
    managers = dict(state.managers)
    updater.update(state.live, {"numeric": 2}, "v1", managers, "u", LEAVES)
    updater.apply(state.live, {"numeric": 3}, "v1", managers, "b", LEAVES, force=True)
    assert managers == state.managers


# --- list maps, sets, atomic values --------------------------------------------------------


def test_appliers_own_list_map_elements_and_prune_their_own() -> None:
    state = State(WORKLOAD)
    state.apply(
        "a", {"spec": {"containers": [{"name": "x", "image": "1"}, {"name": "y", "image": "2"}]}}
    )
    state.apply("b", {"spec": {"containers": [{"name": "z", "image": "3"}]}})
    assert state.live["spec"]["containers"] == [
        {"name": "x", "image": "1"},
        {"name": "y", "image": "2"},
        {"name": "z", "image": "3"},
    ]
    state.apply("a", {"spec": {"containers": [{"name": "y", "image": "2"}]}})
    assert state.live["spec"]["containers"] == [
        {"name": "y", "image": "2"},
        {"name": "z", "image": "3"},
    ]
    assert state.owned() == {
        "a": [
            '.spec.containers[name="y"]',
            '.spec.containers[name="y"].image',
            '.spec.containers[name="y"].name',
        ],
        "b": [
            '.spec.containers[name="z"]',
            '.spec.containers[name="z"].image',
            '.spec.containers[name="z"].name',
        ],
    }


def test_a_field_inside_a_shared_element_stays_with_its_other_owner() -> None:
    state = State(WORKLOAD)
    state.apply("a", {"spec": {"containers": [{"name": "x", "image": "1"}]}})
    state.apply("b", {"spec": {"containers": [{"name": "x", "ports": [{"containerPort": 80}]}]}})
    state.apply("a", {"spec": {"containers": [{"name": "x"}]}})
    assert state.live["spec"]["containers"] == [{"name": "x", "ports": [{"containerPort": 80}]}]
    state.apply("b", {})
    # "a" still owns the element (and its name), so it stays.
    assert state.live["spec"]["containers"] == [{"name": "x"}]


def test_multiple_key_lists_and_key_defaults() -> None:
    state = State(WORKLOAD)
    ports = [{"containerPort": 80}, {"containerPort": 80, "protocol": "UDP"}]
    state.apply("a", {"spec": {"containers": [{"name": "x", "ports": ports}]}})
    owned = state.owned()["a"]
    assert '.spec.containers[name="x"].ports[containerPort=80,protocol="TCP"]' in owned
    assert '.spec.containers[name="x"].ports[containerPort=80,protocol="UDP"].protocol' in owned
    # Setting a new field of an element someone else owns is no conflict: both own the key.
    port = {"containerPort": 80, "protocol": "TCP", "name": "web"}
    state.apply("b", {"spec": {"containers": [{"name": "x", "ports": [port]}]}})
    tcp = '.spec.containers[name="x"].ports[containerPort=80,protocol="TCP"]'
    assert state.owned()["b"][-3:] == [f"{tcp}.containerPort", f"{tcp}.name", f"{tcp}.protocol"]
    assert f"{tcp}.containerPort" in state.owned()["a"]


def test_sets_merge_by_value() -> None:
    state = State(WORKLOAD)
    state.apply("a", {"metadata": {"finalizers": ["a", "b"]}})
    state.apply("b", {"metadata": {"finalizers": ["b", "c"]}})
    assert state.live["metadata"]["finalizers"] == ["a", "b", "c"]
    state.apply("a", {"metadata": {"finalizers": ["a"]}})
    # b is still applied by "b".
    assert state.live["metadata"]["finalizers"] == ["a", "b", "c"]
    state.apply("b", {"metadata": {"finalizers": []}})
    assert state.live["metadata"]["finalizers"] == ["a"]
    assert state.owned() == {"a": ['.metadata.finalizers[="a"]']}


def test_atomic_values_conflict_and_are_replaced_whole() -> None:
    state = State(WORKLOAD)
    state.apply("a", {"spec": {"args": ["x", "y"], "selector": {"app": "a"}}})
    with pytest.raises(ConflictsError) as caught:
        state.apply("b", {"spec": {"args": ["x"], "selector": {"app": "a", "tier": "t"}}})
    assert [path_string(c.path) for c in caught.value.conflicts] == [".spec.args", ".spec.selector"]
    state.apply("b", {"spec": {"args": ["x"]}}, force=True)
    assert state.live["spec"] == {"args": ["x"], "selector": {"app": "a"}}
    assert state.owned() == {"a": [".spec.selector"], "b": [".spec.args"]}


def test_update_then_apply_on_nested_maps() -> None:
    state = State(WORKLOAD)
    state.update("kubectl", {"metadata": {"labels": {"app": "a", "team": "t"}}})
    # An update owns the containers it created too (Kubernetes' {".":{}} entries).
    labels = [".metadata", ".metadata.labels"]
    assert state.owned() == {"kubectl": [*labels, ".metadata.labels.app", ".metadata.labels.team"]}
    state.apply("a", {"metadata": {"labels": {"app": "a"}}})
    assert state.owned()["a"] == [".metadata.labels.app"]
    with pytest.raises(ConflictsError):
        state.apply("a", {"metadata": {"labels": {"app": "b"}}})
    state.apply("a", {"metadata": {"labels": {"app": "b"}}}, force=True)
    assert state.owned() == {
        "kubectl": [*labels, ".metadata.labels.team"],
        "a": [".metadata.labels.app"],
    }
    # Pruning removes what only the applier owned; the updater's label stays.
    state.apply("a", {"metadata": {"name": "n"}})
    assert state.live["metadata"] == {"labels": {"team": "t"}, "name": "n"}


def test_deduced_values_merge_maps_and_replace_lists() -> None:
    state = State(WORKLOAD)
    state.apply("a", {"spec": {"extra": {"x": {"y": 1}, "l": [1, 2]}}})
    state.apply("b", {"spec": {"extra": {"x": {"z": 2}}}})
    assert state.live["spec"]["extra"] == {"x": {"y": 1, "z": 2}, "l": [1, 2]}
    with pytest.raises(ConflictsError):
        state.apply("b", {"spec": {"extra": {"l": [3]}}})


# --- ignored fields, validation, schema changes ------------------------------------------------

STATUS = Set([p("status")])
NOT_STATUS = Set([p("metadata"), p("spec")])


def test_ignored_fields_are_owned_by_nobody() -> None:
    state = State(WORKLOAD)
    state.apply("a", {"spec": {"replicas": 1}, "status": {"ready": True}}, ignored=STATUS)
    assert state.live == {"spec": {"replicas": 1}, "status": {"ready": True}}
    assert state.owned() == {"a": [".spec.replicas"]}
    state.update(
        "kubelet",
        {"spec": {"replicas": 1}, "status": {"ready": False, "phase": "Running"}},
        ignored=NOT_STATUS,
    )
    assert state.owned() == {"a": [".spec.replicas"], "kubelet": [".status.phase", ".status.ready"]}
    # A change to ignored fields is no conflict, and takes nothing from their owners.
    state.apply("a", {"spec": {"replicas": 1}, "status": {"ready": True}}, ignored=STATUS)
    assert state.owned()["kubelet"] == [".status.phase", ".status.ready"]


def test_invalid_inputs_say_which_input() -> None:
    state = State(WORKLOAD)
    with pytest.raises(TypedValueError) as caught:
        state.apply("a", {"spec": {"replicas": "x"}})
    assert caught.value.operand == "config"
    assert str(caught.value) == ".spec.replicas: expected numeric (int or float), got string"
    with pytest.raises(TypedValueError, match="duplicate entries") as caught:
        state.apply("a", {"metadata": {"finalizers": ["a", "a"]}})
    with pytest.raises(TypedValueError) as caught:
        updater.apply({"spec": {"replicas": "x"}}, {}, "v1", {}, "a", WORKLOAD, force=False)
    assert caught.value.operand == "live"
    with pytest.raises(TypedValueError) as caught:
        updater.update(None, {"spec": {"nope": 1}}, "v1", {}, "a", WORKLOAD)
    assert caught.value.operand == "new"
    # Stored objects may hold duplicates.
    state.update("u", {"metadata": {"finalizers": ["a", "a"]}})
    assert state.owned() == {
        "u": [".metadata", ".metadata.finalizers", '.metadata.finalizers[="a"]']
    }


def test_a_list_that_became_atomic_is_owned_whole() -> None:
    granular = struct(items=list_map(struct(name=STRING, v=STRING), "name"))
    atomic = struct(items=with_relationship(granular.map.fields["items"].type, ATOMIC))  # type: ignore[union-attr]
    state = State(granular)
    state.apply("a", {"items": [{"name": "x", "v": "1"}]})
    state.atom = atomic
    state.update("u", {"items": [{"name": "x", "v": "1"}]})
    assert state.owned() == {"a": [".items"]}
    with pytest.raises(ConflictsError) as caught:
        state.apply("b", {"items": [{"name": "y"}]})
    assert [path_string(c.path) for c in caught.value.conflicts] == [".items"]
