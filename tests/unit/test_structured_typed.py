"""The typed walks as structured-merge-diff defines them: validation texts, field sets, the
comparison's granularity, merging (list order included), removal and extraction, and the
reconciliation of field sets with a changed schema."""

from __future__ import annotations

from typing import Any

import pytest
from structured_builders import (
    BOOLEAN,
    NUMERIC,
    STRING,
    UNTYPED,
    atomic_list,
    list_map,
    map_of,
    set_of,
    struct,
)

from watchcache.structured import typed
from watchcache.structured.fieldpath import Path, PathElement, Set, path_string
from watchcache.structured.schema import ATOMIC, DEDUCED, UNTYPED_ATOMIC, Atom, with_relationship
from watchcache.structured.typed import TypedValueError

F = PathElement.of_field
K = PathElement.of_key
V = PathElement.of_value

PORT = struct(containerPort=NUMERIC, protocol=STRING, name=STRING, _defaults={"protocol": "TCP"})
CONTAINER = struct(name=STRING, image=STRING, ports=list_map(PORT, "containerPort", "protocol"))
POD = struct(
    metadata=struct(
        name=STRING,
        labels=map_of(STRING),
        finalizers=set_of(STRING),
    ),
    spec=struct(
        containers=list_map(CONTAINER, "name"),
        replicas=NUMERIC,
        paused=BOOLEAN,
        args=atomic_list(STRING),
        selector=struct(app=STRING, tier=STRING, _relationship=ATOMIC),
        extra=DEDUCED,
        blob=UNTYPED_ATOMIC,
        anything=UNTYPED,
    ),
)


def paths(s: Set) -> list[str]:
    return [path_string(path) for path in s]


def p(*parts: str | PathElement) -> Path:
    return tuple(part if isinstance(part, PathElement) else F(part) for part in parts)


# --- validate -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"spec": {"replicas": "3"}},
            ".spec.replicas: expected numeric (int or float), got string",
        ),
        ({"spec": {"replicas": True}}, ".spec.replicas: expected numeric (int or float), got bool"),
        (
            {"metadata": {"name": 1}},
            ".metadata.name: expected string, got &value.valueUnstructured{Value:1}",
        ),
        (
            {"metadata": {"name": ["a", None]}},
            ".metadata.name: expected string, got &value.valueUnstructured{Value:"
            '[]interface {}{"a", interface {}(nil)}}',
        ),
        ({"spec": {"paused": "yes"}}, ".spec.paused: expected boolean, got &{yes}"),
        ({"spec": {"anything": {"a": 1}}}, ".spec.anything: expected any scalar, got &{map[a:1]}"),
        ({"spec": "x"}, ".spec: expected map, got &{x}"),
        ({"spec": {"args": 1.5}}, ".spec.args: expected list, got &{1.5}"),
        ({"spec": {"nope": 1}}, ".spec.nope: field not declared in schema"),
        (
            {"spec": {"containers": [{"name": "a"}, None]}},
            ".spec.containers: element 1: associative list with keys may not have a null element",
        ),
        (
            {"spec": {"containers": ["a"]}},
            ".spec.containers: element 0: associative list with keys may not have non-map elements",
        ),
        (
            {"spec": {"containers": [{"image": "x"}]}},
            ".spec.containers: element 0: associative list with keys has an element that omits "
            'all key fields ["name"] (and doesn\'t have default values for any key fields)',
        ),
        (
            {"metadata": {"finalizers": [{"a": 1}]}},
            ".metadata.finalizers: element 0: associative list without keys has an element "
            "that's a map type",
        ),
        (
            {"metadata": {"finalizers": [["a"]]}},
            ".metadata.finalizers: element 0: not supported: associative list with lists as "
            "elements",
        ),
        (
            {"metadata": {"finalizers": [None]}},
            ".metadata.finalizers: element 0: associative list without keys has an element "
            "that's an explicit null",
        ),
        (
            {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}},
            '.spec.containers: duplicate entries for key [name="a"]',
        ),
        (
            {
                "spec": {
                    "containers": [
                        {
                            "name": "a",
                            "ports": [
                                {"containerPort": 80},
                                {"containerPort": 80.0, "protocol": "TCP"},
                            ],
                        }
                    ]
                }
            },
            '.spec.containers[name="a"].ports: duplicate entries for key '
            '[containerPort=80,protocol="TCP"]',
        ),
    ],
)
def test_validation_errors_are_smds_texts(value: Any, message: str) -> None:
    with pytest.raises(TypedValueError) as caught:
        typed.validate(value, POD)
    assert str(caught.value) == message


def test_several_errors_are_listed_together() -> None:
    with pytest.raises(TypedValueError) as caught:
        typed.validate({"spec": {"replicas": "x", "paused": 1}}, POD)
    assert str(caught.value) == (
        "errors:\n"
        "  .spec.replicas: expected numeric (int or float), got string\n"
        "  .spec.paused: expected boolean, got &{1}"
    )
    assert caught.value.path == ".spec.replicas" and len(caught.value.errors) == 2


def test_null_is_valid_everywhere_and_duplicates_can_be_allowed() -> None:
    typed.validate(None, POD)
    typed.validate({"spec": {"replicas": None, "containers": None, "selector": None}}, POD)
    duplicated = {"metadata": {"finalizers": ["a", "a"]}}
    with pytest.raises(TypedValueError, match="duplicate entries"):
        typed.validate(duplicated, POD)
    typed.validate(duplicated, POD, allow_duplicates=True)


def test_untyped_and_deduced_values_accept_any_json() -> None:
    typed.validate({"spec": {"extra": {"a": [1, {"b": None}], "c": "d"}, "blob": [1, "x"]}}, POD)


def test_deep_values_are_an_error_not_a_crash() -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = {"a": deep}
    with pytest.raises(TypedValueError, match="nested too deeply"):
        typed.to_field_set({"spec": {"extra": deep}}, POD)


# --- to_field_set ---------------------------------------------------------------------------


def test_field_set_of_an_object() -> None:
    obj = {
        "metadata": {"name": "n", "labels": {"app": "a"}, "finalizers": ["f"]},
        "spec": {
            "containers": [{"name": "web", "image": "i", "ports": [{"containerPort": 80}]}],
            "args": ["x", "y"],
            "selector": {"app": "a"},
        },
    }
    assert paths(typed.to_field_set(obj, POD)) == [
        ".metadata.name",
        '.metadata.finalizers[="f"]',
        ".metadata.labels.app",
        ".spec.args",
        ".spec.selector",
        '.spec.containers[name="web"]',
        '.spec.containers[name="web"].image',
        '.spec.containers[name="web"].name',
        '.spec.containers[name="web"].ports[containerPort=80,protocol="TCP"]',
        '.spec.containers[name="web"].ports[containerPort=80,protocol="TCP"].containerPort',
    ]


def test_empty_and_null_containers() -> None:
    fields = typed.to_field_set(
        {"metadata": {"labels": {}, "finalizers": []}, "spec": {"replicas": None, "args": []}},
        POD,
    )
    # An empty map and a null are owned; an empty associative list owns nothing.
    assert paths(fields) == [".metadata.labels", ".spec.args", ".spec.replicas"]


def test_deduced_maps_own_their_entries_and_lists_whole() -> None:
    fields = typed.to_field_set({"spec": {"extra": {"a": {"b": 1}, "l": [1, {"x": 2}]}}}, POD)
    assert paths(fields) == [".spec.extra.a", ".spec.extra.l", ".spec.extra.a.b"]


def test_repeated_elements_are_owned_once_and_not_below() -> None:
    fields = typed.to_field_set(
        {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "a"}, {"name": "b"}]}},
        POD,
    )
    assert paths(fields) == [
        '.spec.containers[name="a"]',
        '.spec.containers[name="b"]',
        '.spec.containers[name="b"].name',
    ]


def test_key_defaults_and_partial_keys() -> None:
    two_keys = struct(items=list_map(struct(a=STRING, b=STRING, v=STRING), "a", "b"))
    fields = typed.to_field_set({"items": [{"a": "x", "v": "1"}]}, two_keys)
    assert paths(fields) == ['.items[a="x"]', '.items[a="x"].a', '.items[a="x"].v']
    ports = typed.to_field_set(
        {
            "spec": {
                "containers": [{"name": "c", "ports": [{"containerPort": 53, "protocol": "UDP"}]}]
            }
        },
        POD,
    )
    assert ports.has(
        p(
            "spec",
            "containers",
            K({"name": "c"}),
            "ports",
            K({"containerPort": 53, "protocol": "UDP"}),
        )
    )


# --- compare ----------------------------------------------------------------------------------


def test_compare_sorts_changes_into_added_modified_removed() -> None:
    old = {"spec": {"replicas": 1, "paused": True, "containers": [{"name": "a", "image": "1"}]}}
    new = {
        "spec": {
            "replicas": 2,
            "args": ["x"],
            "containers": [{"name": "a", "image": "1"}, {"name": "b"}],
        }
    }
    result = typed.compare(old, new, POD)
    assert paths(result.modified) == [".spec.replicas"]
    assert paths(result.added) == [
        ".spec.args",
        '.spec.containers[name="b"]',
        '.spec.containers[name="b"].name',
    ]
    assert paths(result.removed) == [".spec.paused"]
    assert not result.is_same()
    assert typed.compare(new, new, POD).is_same()
    assert "- Modified Fields:\n.spec.replicas\n" in str(result)


def test_compare_containers_appear_with_their_paths() -> None:
    result = typed.compare({}, {"metadata": {"labels": {"a": "b"}}}, POD)
    assert paths(result.added) == [".metadata", ".metadata.labels", ".metadata.labels.a"]


def test_compare_atomic_values_and_empty_against_null() -> None:
    result = typed.compare(
        {"spec": {"args": ["a"], "selector": {"app": "x"}, "containers": []}},
        {"spec": {"args": ["b"], "selector": {"app": "x", "tier": "y"}, "containers": None}},
        POD,
    )
    assert paths(result.modified) == [".spec.args", ".spec.containers", ".spec.selector"]
    assert typed.compare({"spec": {"replicas": 1}}, {"spec": {"replicas": 1.0}}, POD).is_same()


def test_compare_an_untyped_field_changing_kind_walks_both_kinds() -> None:
    result = typed.compare({"spec": {"extra": {"a": 1}}}, {"spec": {"extra": "s"}}, POD)
    assert paths(result.removed) == [".spec.extra.a"]
    assert paths(result.modified) == [".spec.extra"]


def test_compare_duplicates() -> None:
    def finalizers(*names: str) -> dict[str, Any]:
        return {"metadata": {"finalizers": list(names)}}

    assert paths(typed.compare(finalizers("a", "a"), finalizers("a"), POD).removed) == [
        '.metadata.finalizers[="a"]'
    ]
    result = typed.compare(finalizers("a"), finalizers("a", "a"), POD)
    assert paths(result.added) == ['.metadata.finalizers[="a"]']
    assert paths(result.removed) == ['.metadata.finalizers[="a"]']
    assert typed.compare(finalizers("a", "a"), finalizers("a", "a"), POD).is_same()


def test_compare_excluding_fields_drops_their_subtrees() -> None:
    result = typed.compare({}, {"spec": {"replicas": 1}, "metadata": {"name": "n"}}, POD)
    assert paths(result.excluding(Set([p("spec")])).added) == [".metadata", ".metadata.name"]


def test_compare_refuses_values_wrong_on_both_sides() -> None:
    with pytest.raises(TypedValueError) as caught:
        typed.compare({"spec": {"replicas": "a"}}, {"spec": {"replicas": "b"}}, POD)
    assert str(caught.value) == (
        "errors:\n"
        "  .spec.replicas: lhs: expected numeric (int or float), got string\n"
        "  .spec.replicas: rhs: expected numeric (int or float), got string"
    )


# --- merge --------------------------------------------------------------------------------


def test_merge_keeps_lhs_and_lets_rhs_win_leaves() -> None:
    live = {
        "metadata": {"labels": {"a": "1", "b": "2"}},
        "spec": {"replicas": 1, "args": ["x", "y"]},
    }
    config = {"metadata": {"labels": {"b": "3"}}, "spec": {"replicas": None, "args": ["z"]}}
    assert typed.merge(live, config, POD) == {
        "metadata": {"labels": {"a": "1", "b": "3"}},
        "spec": {"replicas": None, "args": ["z"]},
    }


def test_merge_list_maps_by_key() -> None:
    live = {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}}
    config = {"spec": {"containers": [{"name": "b", "image": "3"}, {"name": "c"}]}}
    assert typed.merge(live, config, POD)["spec"]["containers"] == [
        {"name": "a", "image": "1"},
        {"name": "b", "image": "3"},
        {"name": "c"},
    ]


@pytest.mark.parametrize(
    ("live", "config", "merged"),
    [
        (["a", "b", "c"], ["d", "c", "a"], ["b", "d", "c", "a"]),
        (["a", "b"], ["b", "a"], ["b", "a"]),
        (["a", "b", "c"], ["c"], ["a", "b", "c"]),
        (["a", "b", "c"], ["x", "b"], ["a", "x", "b", "c"]),
        (["a", "b"], ["c", "d"], ["a", "b", "c", "d"]),
        ([], ["c"], ["c"]),
        (["a", "a", "b"], ["c"], ["a", "a", "b", "c"]),
    ],
)
def test_merged_set_order_is_smd_masters(
    live: list[str], config: list[str], merged: list[str]
) -> None:
    out = typed.merge({"metadata": {"finalizers": live}}, {"metadata": {"finalizers": config}}, POD)
    assert out["metadata"]["finalizers"] == merged


def test_merge_an_element_repeated_in_lhs_becomes_rhss_element() -> None:
    live = {
        "spec": {
            "containers": [{"name": "a", "image": "1"}, {"name": "a", "image": "2"}, {"name": "b"}]
        }
    }
    out = typed.merge(live, {"spec": {"containers": [{"name": "a"}]}}, POD)
    assert out["spec"]["containers"] == [{"name": "a"}, {"name": "b"}]


def test_merge_empty_and_null_containers_are_leaves() -> None:
    assert typed.merge({"metadata": {"labels": {}}}, {"metadata": {"labels": None}}, POD) == {
        "metadata": {"labels": None}
    }
    assert typed.merge(None, {}, POD) == {}
    assert typed.merge(
        {"spec": {"selector": {"app": "a"}}}, {"spec": {"selector": {"tier": "t"}}}, POD
    ) == {"spec": {"selector": {"tier": "t"}}}


def test_merge_does_not_modify_its_inputs() -> None:
    live = {"metadata": {"labels": {"a": "1"}}}
    config = {"metadata": {"labels": {"b": "2"}}}
    typed.merge(live, config, POD)
    assert live == {"metadata": {"labels": {"a": "1"}}} and config == {
        "metadata": {"labels": {"b": "2"}}
    }


def test_merge_refuses_duplicates_in_rhs() -> None:
    with pytest.raises(
        TypedValueError, match=r'\.metadata\.finalizers: duplicate entries for key \[="a"\]'
    ):
        typed.merge({}, {"metadata": {"finalizers": ["a", "a"]}}, POD)


# --- remove and extract -------------------------------------------------------------------


def test_remove_items() -> None:
    obj = {
        "metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
        "spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]},
    }
    items = Set(
        [
            p("metadata", "labels", "a"),
            p("metadata", "finalizers", V("x")),
            p("spec", "containers", K({"name": "b"})),
            p("spec", "containers", K({"name": "a"}), "image"),
        ]
    )
    assert typed.remove_items(obj, POD, items) == {
        "metadata": {"labels": {"b": "2"}, "finalizers": ["y"]},
        "spec": {"containers": [{"name": "a"}]},
    }


def test_removing_everything_below_an_entry_leaves_null() -> None:
    obj = {"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 1}}
    assert typed.remove_items(obj, POD, Set([p("metadata", "labels", "a")])) == {
        "metadata": {"labels": None},
        "spec": {"replicas": 1},
    }
    assert typed.remove_items(obj, POD, Set([p("metadata")])) == {"spec": {"replicas": 1}}


def test_extract_items() -> None:
    obj = {
        "metadata": {"labels": {"a": "1", "b": "2"}},
        "spec": {
            "containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}],
            "args": ["q"],
        },
    }
    items = Set(
        [
            p("metadata", "labels", "a"),
            p("spec", "containers", K({"name": "b"}), "image"),
            p("spec", "args"),
        ]
    )
    assert typed.extract_items(obj, POD, items) == {
        "metadata": {"labels": {"a": "1"}},
        "spec": {"containers": [{"image": "2"}], "args": ["q"]},
    }
    assert typed.extract_items(obj, POD, items, append_key_fields=True)["spec"]["containers"] == [
        {"name": "b", "image": "2"}
    ]


# --- reconcile ------------------------------------------------------------------------------


def test_reconcile_granular_fields_under_a_now_atomic_list() -> None:
    granular = struct(items=list_map(struct(name=STRING, v=STRING), "name"))
    atomic = struct(items=with_relationship(granular.map.fields["items"].type, ATOMIC))  # type: ignore[union-attr]
    fields = Set([p("items", K({"name": "a"})), p("items", K({"name": "a"}), "v")])
    assert typed.reconcile_field_set(fields, granular) is None
    assert typed.reconcile_field_set(fields, atomic) == Set([p("items")])
    # Already atomic: nothing to do; a member stays a member.
    assert typed.reconcile_field_set(Set([p("items")]), atomic) is None


def test_reconcile_granular_fields_under_a_now_atomic_map() -> None:
    atomic_selector = struct(selector=struct(app=STRING, _relationship=ATOMIC))
    fields = Set([p("selector", "app")])
    assert typed.reconcile_field_set(fields, atomic_selector) == Set([p("selector")])
    deduced = struct(extra=DEDUCED)
    assert typed.reconcile_field_set(Set([p("extra", "a", "b")]), deduced) is None


def test_invalid_atoms_are_schema_errors() -> None:
    broken = struct(x=Atom(name="nothing"))
    with pytest.raises(
        TypedValueError, match=r"\.x: schema error: invalid atom: named type: nothing"
    ):
        typed.validate({"x": 1}, broken)
    with pytest.raises(
        TypedValueError, match=r"\.x: schema error: invalid atom: named type: nothing"
    ):
        typed.to_field_set({"x": 1}, broken)
