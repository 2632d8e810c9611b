"""Custom objects are pruned and defaulted as kube-apiserver's decoder and defaulter do:
unknown fields removed (and reported with Kubernetes' paths, sorted), preserved below
x-kubernetes-preserve-unknown-fields, kept in embedded resources' type and object meta;
non-nullable nulls dropped or defaulted; defaults filled into objects, arrays and maps.
Cases follow apiextensions-apiserver's pruning and defaulting tests."""

from __future__ import annotations

import copy
import json
from typing import Any

from watchcache.registry.crd_defaulting import apply_defaults
from watchcache.registry.crd_pruning import drop_nulls, prune, prune_value, unknown_field_message
from watchcache.registry.crd_validation import validate
from watchcache.registry.structural import StructuralSchema


def compile_schema(schema: dict[str, Any]) -> StructuralSchema:
    return StructuralSchema.from_openapi(schema)


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


STRING: dict[str, Any] = {"type": "string"}
INTEGER: dict[str, Any] = {"type": "integer"}

# ---------------------------------------------------------------------------------------
# Pruning


def test_unknown_fields_in_objects_and_arrays() -> None:
    schema = compile_schema(
        obj(
            array={"type": "array", "items": obj(a=INTEGER, c=INTEGER)},
            specified=obj(a=INTEGER, c=INTEGER),
        )
    )
    value = {
        "array": [{"a": 1}, {"b": 1}, {"a": 1, "b": 2, "c": 3}],
        "unspecified": {"a": 1},
        "specified": {"a": 1, "b": 2, "c": 3},
    }
    assert prune_value(value, schema, is_resource_root=False) == [
        "array[1].b",
        "array[2].b",
        "specified.b",
        "unspecified",
    ]
    assert value == {"array": [{"a": 1}, {}, {"a": 1, "c": 3}], "specified": {"a": 1, "c": 3}}


def test_preserve_unknown_fields_until_a_node_names_properties_again() -> None:
    schema = compile_schema(
        {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {
                "alpha": STRING,
                "beta": {"type": "number"},
                "pruning": obj(
                    preserving={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    pruning={"type": "object"},
                ),
                "preserving": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {
                        "preserving": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        },
                        "preservingUnknownType": {"x-kubernetes-preserve-unknown-fields": True},
                        "pruning": {"type": "object"},
                    },
                },
                "notInherited": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "additionalProperties": obj(specified={"type": "object"}),
                },
                "keyPruneValues": {
                    "type": "object",
                    "additionalProperties": obj(specified={"type": "object"}),
                },
            },
        }
    )
    value = {
        "unspecified": "bar",
        "alpha": "abc",
        "beta": 42.0,
        "unspecifiedObject": {"unspecified": "bar"},
        "pruning": {
            "unspecified": "bar",
            "unspecifiedObject": {"unspecified": "bar"},
            "pruning": {"unspecified": "bar"},
            "apiVersion": "unknown",
            "preserving": {"unspecified": "bar"},
        },
        "preserving": {
            "unspecified": "bar",
            "unspecifiedObject": {"unspecified": "bar"},
            "pruning": {"unspecified": "bar"},
            "preserving": {"unspecified": "bar"},
            "preservingUnknownType": [{"foo": True}, {"bar": True}],
        },
        "notInherited": {"foo": {"specified": {"unspecified": "bar"}, "unspecified": "bar"}},
        "keyPruneValues": {"foo": {"specified": {"unspecified": "bar"}, "unspecified": "bar"}},
    }
    assert prune_value(value, schema, is_resource_root=False) == [
        "keyPruneValues.foo.specified.unspecified",
        "keyPruneValues.foo.unspecified",
        "notInherited.foo.specified.unspecified",
        "notInherited.foo.unspecified",
        "preserving.pruning.unspecified",
        "pruning.apiVersion",
        "pruning.pruning.unspecified",
        "pruning.unspecified",
        "pruning.unspecifiedObject",
    ]
    assert value == {
        "unspecified": "bar",
        "alpha": "abc",
        "beta": 42.0,
        "unspecifiedObject": {"unspecified": "bar"},
        "pruning": {"pruning": {}, "preserving": {"unspecified": "bar"}},
        "preserving": {
            "unspecified": "bar",
            "unspecifiedObject": {"unspecified": "bar"},
            "pruning": {},
            "preserving": {"unspecified": "bar"},
            "preservingUnknownType": [{"foo": True}, {"bar": True}],
        },
        "notInherited": {"foo": {"specified": {}}},
        "keyPruneValues": {"foo": {"specified": {}}},
    }


def test_additional_properties_keep_every_key() -> None:
    schema = compile_schema(
        obj(
            a=INTEGER,
            c={"type": "object", "additionalProperties": INTEGER},
            d={"type": "object", "additionalProperties": False},
        )
    )
    value = {"a": 1, "b": 1, "c": {"a": 1, "b": 2, "c": {"a": 1}},
             "d": {"x": {"a": 1, "apiVersion": "unknown"}, "y": 2}}  # fmt: skip
    assert prune_value(value, schema, is_resource_root=False) == [
        "b",
        "c.c.a",
        "d.x.a",
        "d.x.apiVersion",
    ]
    assert value == {"a": 1, "c": {"a": 1, "b": 2, "c": {}}, "d": {"x": {}, "y": 2}}


def test_a_resource_keeps_its_type_and_object_meta_for_their_own_decoding() -> None:
    schema = compile_schema(obj(spec=obj(size=INTEGER)))
    value = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "unknownMeta": 1},
        "spec": {"size": 1, "colour": "red"},
        "status": {"ready": True},
    }
    removed = prune(value, schema)
    assert removed == ["spec.colour", "status"]
    assert [unknown_field_message(path) for path in removed] == [
        'unknown field "spec.colour"',
        'unknown field "status"',
    ]
    # The root's metadata is the caller's (decoded as ObjectMeta, like any kind's).
    assert value == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "unknownMeta": 1},
        "spec": {"size": 1},
    }


def test_meta_fields_are_dropped_silently_at_a_root_that_is_not_a_resource() -> None:
    schema = compile_schema(obj(spec={"type": "object"}))
    value = {"apiVersion": "v1", "kind": "X", "metadata": {}, "spec": {}, "other": 1}
    assert prune_value(value, schema, is_resource_root=False) == ["other"]
    assert value == {"spec": {}}


EMBEDDED_DOCUMENT: dict[str, Any] = {
    "apiVersion": "foo/v1",
    "kind": "Foo",
    "metadata": {"name": "instance", "unspecified": "bar"},
    "unspecified": "bar",
    "pruned": {
        "apiVersion": "foo/v1",
        "kind": "Foo",
        "unspecified": "bar",
        "metadata": {"name": "instance", "unspecified": "bar"},
        "spec": {"unspecified": "bar"},
    },
    "preserving": {
        "apiVersion": "foo/v1",
        "kind": "Foo",
        "unspecified": "bar",
        "metadata": {"name": "instance", "unspecified": "bar"},
        "spec": {"unspecified": "bar"},
    },
    "nested": {
        "apiVersion": "foo/v1",
        "kind": "Foo",
        "unspecified": "bar",
        "metadata": {"name": "instance", "unspecified": "bar"},
        "spec": {
            "unspecified": "bar",
            "embedded": {
                "apiVersion": "foo/v1",
                "kind": "Foo",
                "unspecified": "bar",
                "metadata": {"name": "instance", "unspecified": "bar"},
                "spec": {"unspecified": "bar"},
            },
        },
    },
}


def _embedded(**extra: Any) -> dict[str, Any]:
    return {"type": "object", "x-kubernetes-embedded-resource": True, **extra}


EMBEDDED_SCHEMA = obj(
    pruned=_embedded(properties={"spec": {"type": "object"}}),
    preserving=_embedded(**{"x-kubernetes-preserve-unknown-fields": True}),
    nested=_embedded(
        properties={"spec": obj(embedded=_embedded(properties={"spec": {"type": "object"}}))}
    ),
)


def test_embedded_resources_keep_type_and_object_meta() -> None:
    schema = compile_schema(EMBEDDED_SCHEMA)
    value = copy.deepcopy(EMBEDDED_DOCUMENT)
    assert prune_value(value, schema, is_resource_root=False) == [
        "nested.spec.embedded.spec.unspecified",
        "nested.spec.embedded.unspecified",
        "nested.spec.unspecified",
        "nested.unspecified",
        "pruned.spec.unspecified",
        "pruned.unspecified",
        "unspecified",
    ]
    assert value["pruned"] == {
        "apiVersion": "foo/v1",
        "kind": "Foo",
        "metadata": {"name": "instance", "unspecified": "bar"},
        "spec": {},
    }
    assert value["preserving"] == EMBEDDED_DOCUMENT["preserving"]
    assert "apiVersion" not in value


def test_embedded_metadata_loses_what_object_meta_does_not_have() -> None:
    schema = compile_schema(EMBEDDED_SCHEMA)
    value = copy.deepcopy(EMBEDDED_DOCUMENT)
    value["preserving"]["metadata"].update({"labels": {}, "generation": 0, "namespace": ""})
    assert prune(value, schema) == [
        "nested.spec.embedded.spec.unspecified",
        "nested.spec.embedded.unspecified",
        "nested.spec.unspecified",
        "nested.unspecified",
        "pruned.spec.unspecified",
        "pruned.unspecified",
        "unspecified",
        # then the embedded metadata's, as objectmeta.Coerce reports them
        "nested.metadata.unspecified",
        "nested.spec.embedded.metadata.unspecified",
        "preserving.metadata.unspecified",
        "pruned.metadata.unspecified",
    ]
    for embedded in (value["pruned"], value["preserving"], value["nested"]["spec"]["embedded"]):
        assert embedded["metadata"] == {"name": "instance"}
    # The resource's own metadata is untouched.
    assert value["metadata"] == {"name": "instance", "unspecified": "bar"}


def test_embedded_metadata_in_maps_is_reported_with_keys() -> None:
    schema = compile_schema(
        obj(templates={"type": "object", "additionalProperties": _embedded(
            **{"x-kubernetes-preserve-unknown-fields": True})})
    )  # fmt: skip
    value = {"templates": {"a": {"apiVersion": "v1", "kind": "X", "metadata": {"bogus": 1}}}}
    assert prune(value, schema) == ["templates[a].metadata.bogus"]
    assert value["templates"]["a"]["metadata"] == {}


def test_pruning_twice_removes_nothing_more() -> None:
    schema = compile_schema(EMBEDDED_SCHEMA)
    value = copy.deepcopy(EMBEDDED_DOCUMENT)
    prune(value, schema)
    again = copy.deepcopy(value)
    assert prune(again, schema) == []
    assert again == value


# ---------------------------------------------------------------------------------------
# Nulls


def test_nulls_without_default_or_nullable_are_dropped() -> None:
    schema = compile_schema(
        obj(
            plain=STRING,
            nullable={"type": "string", "nullable": True},
            defaulted={"type": "string", "default": "d"},
            map={"type": "object", "additionalProperties": STRING},
            list={"type": "array", "items": STRING},
            free={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        )
    )
    value: dict[str, Any] = {"plain": None, "nullable": None, "defaulted": None,
                             "map": {"k": None}, "list": [None], "free": {"x": None}}  # fmt: skip
    drop_nulls(value, schema)
    assert value == {"nullable": None, "defaulted": None, "map": {}, "list": [None],
                     "free": {"x": None}}  # fmt: skip
    apply_defaults(value, schema)
    assert value["defaulted"] == "d"


def test_null_items_stay_and_are_reported_by_validation() -> None:
    schema = compile_schema(obj(list={"type": "array", "items": STRING}))
    value: dict[str, Any] = {"list": ["a", None]}
    assert prune(value, schema) == []
    apply_defaults(value, schema)
    assert [c.message for c in validate(value, schema)] == [
        'Invalid value: "null": list[1] in body must be of type string: "null"'
    ]


# ---------------------------------------------------------------------------------------
# Defaults


def test_defaults_fill_missing_and_non_nullable_null_members_only() -> None:
    schema = compile_schema(
        obj(items={"type": "array", "items": obj(a={"x-kubernetes-preserve-unknown-fields": True,
                                                   "default": "A"})})
    )  # fmt: skip
    value = {"items": [{}, {"a": 1}, {"a": 0}, {"a": 0.0}, {"a": ""}, {"a": None}, {"a": []},
                       {"a": {}}]}  # fmt: skip
    apply_defaults(value, schema)
    assert value["items"] == [{"a": "A"}, {"a": 1}, {"a": 0}, {"a": 0.0}, {"a": ""}, {"a": "A"},
                              {"a": []}, {"a": {}}]  # fmt: skip


def test_defaults_reach_arrays_maps_and_nested_objects() -> None:
    schema = compile_schema(
        obj(
            array={"type": "array", "items": obj(a={"type": "string", "default": "A"},
                                                 b={"type": "string", "default": "B"})},
            object=obj(a={"type": "string", "default": "N"}, b={"type": "string", "default": "O"}),
            additional={"type": "object", "additionalProperties": obj(
                a={"type": "string", "default": "alpha"}, b={"type": "string", "default": "beta"})},
            foo={"type": "string", "default": "bar"},
        )
    )  # fmt: skip
    value = {"array": [{"a": "1"}, {"b": "2"}], "object": {"a": "1"},
             "additional": {"x": {"a": "1"}, "y": {"b": "2"}}}  # fmt: skip
    apply_defaults(value, schema)
    assert value == {
        "array": [{"a": "1", "b": "B"}, {"a": "A", "b": "2"}],
        "object": {"a": "1", "b": "O"},
        "additional": {"x": {"a": "1", "b": "beta"}, "y": {"a": "alpha", "b": "2"}},
        "foo": "bar",
    }


def test_defaults_inside_a_default_are_applied() -> None:
    schema = compile_schema(
        obj(spec={"type": "object", "default": {},
                  "properties": {"replicas": {"type": "integer", "default": 1},
                                 "strategy": obj(kind={"type": "string", "default": "Rolling"})}})
    )  # fmt: skip
    value: dict[str, Any] = {}
    apply_defaults(value, schema)
    assert value == {"spec": {"replicas": 1}}
    value = {"spec": {"strategy": {}}}
    apply_defaults(value, schema)
    assert value == {"spec": {"replicas": 1, "strategy": {"kind": "Rolling"}}}


def test_null_items_and_map_values_take_their_nodes_default() -> None:
    schema = compile_schema(
        obj(
            list={"type": "array", "items": {"type": "string", "default": "A"}},
            nullable_list={
                "type": "array",
                "items": {"type": "string", "nullable": True, "default": "A"},
            },
            map={"type": "object", "additionalProperties": {"type": "string", "default": "A"}},
            nullable={"type": "string", "nullable": True, "default": "A"},
        )
    )
    value = {"list": [None, "b"], "nullable_list": [None], "map": {"k": None}, "nullable": None}
    assert prune(value, schema) == []
    apply_defaults(value, schema)
    assert value == {
        "list": ["A", "b"],
        "nullable_list": [None],
        "map": {"k": "A"},
        "nullable": None,
    }


def test_defaults_are_copies() -> None:
    schema = compile_schema(
        obj(
            spec={
                "type": "object",
                "default": {"tags": ["a"]},
                "properties": {"tags": {"type": "array", "items": STRING}},
            }
        )
    )
    first: dict[str, Any] = {}
    apply_defaults(first, schema)
    first["spec"]["tags"].append("b")
    second: dict[str, Any] = {}
    apply_defaults(second, schema)
    assert second == {"spec": {"tags": ["a"]}}


def test_preserved_unknown_members_get_no_defaults() -> None:
    schema = compile_schema(
        obj(free={"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                  "properties": {"known": obj(a={"type": "string", "default": "A"})}})
    )  # fmt: skip
    value: dict[str, Any] = {"free": {"known": {}, "other": {}}}
    apply_defaults(value, schema)
    assert value == {"free": {"known": {"a": "A"}, "other": {}}}


def test_the_write_path_order_decode_prune_default_validate() -> None:
    schema = compile_schema(
        obj(spec={"type": "object", "required": ["size"],
                  "properties": {"size": {"type": "integer", "default": 3, "maximum": 5},
                                 "mode": {"type": "string", "enum": ["a", "b"], "default": "a"}}})
    )  # fmt: skip
    body = json.loads('{"apiVersion":"x/v1","kind":"W","metadata":{"name":"w"},'
                      '"spec":{"size":null,"extra":1}}')  # fmt: skip
    assert prune(body, schema) == ["spec.extra"]
    apply_defaults(body, schema)
    assert body["spec"] == {"size": 3, "mode": "a"}
    assert validate(body, schema) == []
