"""CRD schemas are checked as kube-apiserver checks them when a CRD is written (the rules,
field paths and words of apiextensions-apiserver), and compiled schemas prune, default and
validate any object without raising anything but the causes Kubernetes would report.

Expected texts are Kubernetes' own, from its integration and unit tests where they state
them (``test/integration/validation_test.go``, ``pkg/apis/apiextensions/validation``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchcache.registry.crd_defaulting import apply_defaults
from watchcache.registry.crd_pruning import prune
from watchcache.registry.crd_validation import validate
from watchcache.registry.structural import (
    SchemaDecodeError,
    StructuralSchema,
    StructuralSchemaError,
)
from watchcache.wire.errors import InvalidError, StatusCause

ROOT = "spec.validation.openAPIV3Schema"


def violations(schema: dict[str, Any], **options: Any) -> list[str]:
    with pytest.raises(StructuralSchemaError) as caught:
        StructuralSchema.from_openapi(schema, **options)
    return [f"{c.field}: {c.message}" for c in caught.value.causes]


def obj_schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


# ---------------------------------------------------------------------------------------
# Structural rules


def test_a_well_formed_schema_compiles_into_a_tree() -> None:
    schema = obj_schema(
        spec=obj_schema(
            replicas={"type": "integer"}, tags={"type": "array", "items": {"type": "string"}}
        ),
        metadata={
            "type": "object",
            "properties": {"name": {"type": "string", "pattern": "^[a-z]+$"}},
        },
    )
    root = StructuralSchema.from_openapi(schema)
    assert root.type == "object"
    assert sorted(root.properties) == ["metadata", "spec"]
    assert root.properties["spec"].properties["tags"].items is not None
    assert root.properties["spec"].property_items[0][0] == "replicas"


def test_missing_types_name_every_node_with_kubernetes_words() -> None:
    schema = {
        "properties": {
            "foo": {"properties": {"a": {}}},
            "bar": {"items": {"additionalProperties": {"properties": {"a": {}}, "items": {}}}},
            "abc": {
                "additionalProperties": {
                    "properties": {"a": {"items": {"additionalProperties": {"items": None}}}}
                }
            },
            "json": {"x-kubernetes-preserve-unknown-fields": True, "properties": {"a": {}}},
            "int-or-string": {"x-kubernetes-int-or-string": True, "properties": {"a": {}}},
        }
    }
    assert violations(schema) == [
        f"{ROOT}.properties[abc].additionalProperties.properties[a].items."
        "additionalProperties.type: "
        "Required value: must not be empty for specified object fields",
        f"{ROOT}.properties[abc].additionalProperties.properties[a].items.type: "
        "Required value: must not be empty for specified array items",
        f"{ROOT}.properties[abc].additionalProperties.properties[a].type: "
        "Required value: must not be empty for specified object fields",
        f"{ROOT}.properties[abc].additionalProperties.type: "
        "Required value: must not be empty for specified object fields",
        f"{ROOT}.properties[abc].type: Required value: must not be empty for specified object "
        "fields",
        f"{ROOT}.properties[bar].items.additionalProperties.items.type: "
        "Required value: must not be empty for specified array items",
        f"{ROOT}.properties[bar].items.additionalProperties.properties[a].type: "
        "Required value: must not be empty for specified object fields",
        f"{ROOT}.properties[bar].items.additionalProperties.type: "
        "Required value: must not be empty for specified object fields",
        f"{ROOT}.properties[bar].items.type: Required value: must not be empty for specified "
        "array items",
        f"{ROOT}.properties[bar].type: Required value: must not be empty for specified object "
        "fields",
        f"{ROOT}.properties[foo].properties[a].type: "
        "Required value: must not be empty for specified object fields",
        f"{ROOT}.properties[foo].type: Required value: must not be empty for specified object "
        "fields",
        f"{ROOT}.properties[int-or-string].properties[a].type: "
        "Required value: must not be empty for specified object fields",
        f"{ROOT}.properties[json].properties[a].type: "
        "Required value: must not be empty for specified object fields",
        f"{ROOT}.type: Required value: must not be empty at the root",
    ]


def test_the_field_path_follows_the_version_when_schemas_differ_per_version() -> None:
    path = "spec.versions[1].schema.openAPIV3Schema"
    assert violations(obj_schema(a={}), field_path=path) == [
        f"{path}.properties[a].type: Required value: must not be empty for specified object fields"
    ]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {"x-kubernetes-preserve-unknown-fields": True, "x-kubernetes-int-or-string": True},
            f"{ROOT}.x-kubernetes-preserve-unknown-fields: Invalid value: true: "
            "must be false if x-kubernetes-int-or-string is true",
        ),
        (
            {
                "type": "object",
                "x-kubernetes-embedded-resource": True,
                "x-kubernetes-int-or-string": True,
            },
            f"{ROOT}.x-kubernetes-embedded-resource: Invalid value: true: "
            "must be false if x-kubernetes-int-or-string is true",
        ),
        (
            {"type": "object", "x-kubernetes-embedded-resource": True},
            f"{ROOT}.properties: Required value: must not be empty if "
            "x-kubernetes-embedded-resource "
            "is true without x-kubernetes-preserve-unknown-fields",
        ),
        (
            {
                "type": "array",
                "x-kubernetes-embedded-resource": True,
                "x-kubernetes-preserve-unknown-fields": True,
                "items": {"type": "string"},
            },
            f'{ROOT}.type: Invalid value: "array": must be object if '
            "x-kubernetes-embedded-resource is true",
        ),
        (
            {
                "type": "",
                "x-kubernetes-embedded-resource": True,
                "x-kubernetes-preserve-unknown-fields": True,
            },
            f"{ROOT}.type: Required value: must be object if x-kubernetes-embedded-resource is "
            "true",
        ),
        (
            {"type": "integer"},
            f'{ROOT}.type: Invalid value: "integer": must be object at the root',
        ),
        (
            {"type": "object", "additionalProperties": {"type": "string"}},
            f"{ROOT}.additionalProperties: Forbidden: must not be used at the root",
        ),
        (
            obj_schema(list={"type": "array"}),
            f"{ROOT}.properties[list].items: Required value: must be specified",
        ),
        (
            obj_schema(kind={"type": "integer"}),
            f'{ROOT}.properties[kind].type: Invalid value: "integer": must be string',
        ),
        (
            obj_schema(metadata={"type": "string"}),
            f'{ROOT}.properties[metadata].type: Invalid value: "string": must be object',
        ),
        (
            obj_schema(foo={"type": "string", "pattern": "+"}),
            f'{ROOT}.properties[foo].pattern: Invalid value: "+": must be a valid regular '
            "expression, "
            "but isn't: error parsing regexp: missing argument to repetition operator: `+`",
        ),
    ],
)
def test_structural_invariants(schema: dict[str, Any], expected: str) -> None:
    # As Kubernetes' own table, by inclusion: some schemas break more than one rule.
    assert expected in violations(schema)


def test_a_valid_go_pattern_this_server_cannot_run_is_refused_with_its_reason() -> None:
    assert violations(obj_schema(a={"type": "string", "pattern": "\\p{Greek}"})) == [
        f'{ROOT}.properties[a].pattern: Invalid value: "\\\\p{{Greek}}": must be a regular '
        "expression this server can run: unicode class \\p{Greek} is not supported by this server"
    ]


def test_embedded_resources_are_fine_with_properties_or_preserved_fields() -> None:
    embedded = {"type": "object", "x-kubernetes-embedded-resource": True}
    StructuralSchema.from_openapi(
        dict(embedded, properties={"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                   "metadata": {"type": "object"}})
    )  # fmt: skip
    StructuralSchema.from_openapi(dict(embedded, **{"x-kubernetes-preserve-unknown-fields": True}))


def test_embedded_resource_without_additional_properties() -> None:
    schema = obj_schema(
        template={"type": "object", "x-kubernetes-embedded-resource": True,
                  "x-kubernetes-preserve-unknown-fields": True,
                  "additionalProperties": {"type": "string"}}
    )  # fmt: skip
    assert violations(schema) == [
        f"{ROOT}.properties[template].additionalProperties: Forbidden: "
        "must not be used if x-kubernetes-embedded-resource is set"
    ]


def test_value_validations_may_not_carry_structure_or_extensions() -> None:
    branch = {
        "properties": {
            "int-or-string": {"x-kubernetes-int-or-string": True},
            "embedded-resource": {
                "x-kubernetes-embedded-resource": True,
                "x-kubernetes-preserve-unknown-fields": True,
            },
        }
    }
    schema = {
        "type": "object",
        "properties": {
            "int-or-string": {"x-kubernetes-int-or-string": True},
            "embedded-resource": {
                "type": "object",
                "x-kubernetes-embedded-resource": True,
                "x-kubernetes-preserve-unknown-fields": True,
            },
        },
        "not": branch,
        "allOf": [branch],
        "anyOf": [branch],
        "oneOf": [branch],
    }
    expected = []
    for junctor in ("allOf[0]", "anyOf[0]", "not", "oneOf[0]"):
        expected += [
            f"{ROOT}.{junctor}.properties[embedded-resource].x-kubernetes-embedded-resource: "
            "Forbidden: must be false to be structural",
            f"{ROOT}.{junctor}.properties[embedded-resource].x-kubernetes-preserve-unknown-fields: "
            "Forbidden: must be false to be structural",
            f"{ROOT}.{junctor}.properties[int-or-string].x-kubernetes-int-or-string: "
            "Forbidden: must be false to be structural",
        ]
    assert violations(schema) == expected


def test_value_validations_may_not_set_generic_members() -> None:
    schema = obj_schema(
        a={
            "type": "string",
            "allOf": [
                {
                    "type": "string",
                    "description": "d",
                    "title": "t",
                    "nullable": True,
                    "default": "x",
                    "x-kubernetes-list-type": "atomic",
                    "x-kubernetes-map-type": "atomic",
                    "x-kubernetes-list-map-keys": ["k"],
                    "x-kubernetes-validations": [{"rule": "true"}],
                    "additionalProperties": True,
                    "properties": {"metadata": {}},
                }
            ],
        }
    )
    path = f"{ROOT}.properties[a].allOf[0]"
    assert violations(schema) == [
        f"{path}.additionalProperties: Forbidden: must be undefined to be structural",
        f"{path}.default: Forbidden: must be undefined to be structural",
        f"{path}.description: Forbidden: must be empty to be structural",
        f"{path}.nullable: Forbidden: must be false to be structural",
        f"{path}.properties[metadata]: Forbidden: must not be specified in a nested context",
        f"{path}.title: Forbidden: must be empty to be structural",
        f"{path}.type: Forbidden: must be empty to be structural",
        f"{path}.x-kubernetes-list-map-keys: Forbidden: must be empty to be structural",
        f"{path}.x-kubernetes-list-type: Forbidden: must be undefined to be structural",
        f"{path}.x-kubernetes-map-type: Forbidden: must be undefined to be structural",
        f"{path}.x-kubernetes-validations: Forbidden: must be empty to be structural",
        # The OpenAPI rules then see the nested list and map types on a string node.
        f'{path}.type: Invalid value: "string": must be object if x-kubernetes-map-type is '
        "specified",
        f'{path}.type: Invalid value: "string": must be array if x-kubernetes-list-type is '
        "specified",
        f'{path}.x-kubernetes-list-type: Invalid value: "atomic": '
        "must be map if x-kubernetes-list-map-keys is non-empty",
    ]


def test_int_or_string_may_spell_its_two_types_only_in_the_exact_patterns() -> None:
    int_or_string = [{"type": "integer"}, {"type": "string"}]
    schema = obj_schema(
        a={"x-kubernetes-int-or-string": True},
        b={"x-kubernetes-int-or-string": True, "anyOf": int_or_string,
           "allOf": [{"pattern": "abc"}]},
        c={"x-kubernetes-int-or-string": True,
           "allOf": [{"anyOf": int_or_string}, {"pattern": "abc"}, {"pattern": "abc"}]},
        d={"x-kubernetes-int-or-string": True,
           "anyOf": [{"type": "integer"}, {"type": "string", "pattern": "abc"}]},
        e={"x-kubernetes-int-or-string": True,
           "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "abc"}]},
                     {"pattern": "abc"}]},
        f={"x-kubernetes-int-or-string": True, "anyOf": [*int_or_string, {"pattern": "abc"}]},
        g={"x-kubernetes-int-or-string": True, "anyOf": list(reversed(int_or_string))},
    )  # fmt: skip
    assert violations(schema) == [
        f"{ROOT}.properties[d].anyOf[0].type: Forbidden: must be empty to be structural",
        f"{ROOT}.properties[d].anyOf[1].type: Forbidden: must be empty to be structural",
        f"{ROOT}.properties[e].allOf[0].anyOf[0].type: Forbidden: must be empty to be structural",
        f"{ROOT}.properties[e].allOf[0].anyOf[1].type: Forbidden: must be empty to be structural",
        f"{ROOT}.properties[f].anyOf[0].type: Forbidden: must be empty to be structural",
        f"{ROOT}.properties[f].anyOf[1].type: Forbidden: must be empty to be structural",
        f"{ROOT}.properties[g].anyOf[0].type: Forbidden: must be empty to be structural",
        f"{ROOT}.properties[g].anyOf[1].type: Forbidden: must be empty to be structural",
    ]


def test_what_junctors_under_the_root_name_must_exist_in_the_structure() -> None:
    schema = obj_schema(
        b=obj_schema(a={"type": "string"}),
        c={"type": "array", "items": {"type": "array", "items": obj_schema(a={"type": "string"})}},
    )
    schema["not"] = {
        "properties": {
            "a": {},
            "b": {"not": {"properties": {"a": {}, "b": {"items": {}}}}},
            "c": {"items": {"not": {"items": {"properties": {"a": {}}}}}},
            "d": {"items": {}},
        }
    }
    schema["allOf"] = [{"properties": {"e": {}}}]
    schema["anyOf"] = [{"properties": {"f": {}}}]
    schema["oneOf"] = [{"properties": {"g": {}}}]
    assert violations(schema) == [
        f"{ROOT}.properties[a]: Required value: because it is defined in {ROOT}.not.properties[a]",
        f"{ROOT}.properties[b].properties[b]: Required value: because it is defined in "
        f"{ROOT}.not.properties[b].not.properties[b]",
        f"{ROOT}.properties[d]: Required value: because it is defined in {ROOT}.not.properties[d]",
        f"{ROOT}.properties[e]: Required value: because it is defined in "
        f"{ROOT}.allOf[0].properties[e]",
        f"{ROOT}.properties[f]: Required value: because it is defined in "
        f"{ROOT}.anyOf[0].properties[f]",
        f"{ROOT}.properties[g]: Required value: because it is defined in "
        f"{ROOT}.oneOf[0].properties[g]",
    ]


def test_root_metadata_may_restrict_only_name_and_generate_name() -> None:
    for names in ({"name": {"type": "string"}}, {"generateName": {"type": "string"}},
                  {"name": {"type": "string", "pattern": "^[a-z]+$"},
                   "generateName": {"type": "string", "maxLength": 10}}):  # fmt: skip
        StructuralSchema.from_openapi(obj_schema(metadata={"type": "object", "properties": names}))
    forbidden = (
        f"{ROOT}.properties[metadata]: Forbidden: must not specify anything other than name and "
        "generateName, but metadata is implicitly specified"
    )
    for metadata in (
        {"type": "object", "properties": {"labels": {"type": "object"}}},
        {"type": "object", "description": "the metadata"},
        {"type": "object", "required": ["name"]},
        {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    ):
        assert violations(obj_schema(metadata=metadata)) == [forbidden]


def test_item_arrays_are_refused_where_they_appear() -> None:
    assert violations(obj_schema(slice={"type": "array", "items": [{"type": "string"}]})) == [
        f"{ROOT}.properties[slice].items: Forbidden: items must be a schema object and not an array"
    ]
    schema = obj_schema(
        slice={"type": "array", "items": {"type": "string"}, "not": {"items": [{"type": "string"}]}}
    )
    assert violations(schema) == [
        f"{ROOT}.properties[slice].not.items: Forbidden: items must be a schema object and not an "
        "array"
    ]


def test_what_structural_schemas_cannot_hold_is_reported_when_nothing_else_is() -> None:
    assert violations({"type": "object", "$schema": "http://json-schema.org/schema#"}) == [
        f"{ROOT}: Invalid value: \"\": OpenAPIV3Schema 'schema' is not supported"
    ]
    # With another violation, Kubernetes shows only the OpenAPI rule's words.
    assert violations({"type": "object", "id": "x"}) == [
        f"{ROOT}.id: Forbidden: id is not supported"
    ]


# ---------------------------------------------------------------------------------------
# OpenAPI rules


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (
            {"type": "foo"},
            ['Unsupported value: "foo": supported values: "array", "boolean", "integer", "number", '
             '"object", "string"'],
        ),
        (
            {"type": "string", "uniqueItems": True},
            ["Forbidden: uniqueItems cannot be set to true since the runtime complexity "
             "becomes quadratic"],
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}},
             "additionalProperties": {"type": "string"}},
            ["Forbidden: additionalProperties and properties are mutual exclusive"],
        ),
        (
            {"type": "string", "x-kubernetes-preserve-unknown-fields": False},
            ["Invalid value: false: must be true or undefined"],
        ),
        (
            {"type": "object", "x-kubernetes-map-type": "weird"},
            ['Unsupported value: "weird": supported values: "atomic", "granular"'],
        ),
        (
            {"type": "string", "x-kubernetes-map-type": "atomic"},
            ['Invalid value: "string": must be object if x-kubernetes-map-type is specified'],
        ),
        (
            {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"},
            ['Unsupported value: "bag": supported values: "atomic", "set", "map"'],
        ),
        (
            {"type": "object", "x-kubernetes-list-type": "set"},
            ['Invalid value: "object": must be array if x-kubernetes-list-type is specified'],
        ),
    ],
)  # fmt: skip
def test_openapi_rules_on_one_node(node: dict[str, Any], expected: list[str]) -> None:
    found = violations(obj_schema(a=node))
    assert [text.split(": ", 1)[1] for text in found] == expected


def test_type_null_is_refused_twice_as_kubernetes_does() -> None:
    assert violations(obj_schema(a={"type": "null"})) == [
        f'{ROOT}.properties[a].type: Unsupported value: "null": supported values: "array", '
        '"boolean", "integer", "number", "object", "string"',
        f"{ROOT}.properties[a].type: Forbidden: type cannot be set to null, use nullable as an "
        "alternative",
    ]


def test_unsupported_json_schema_members() -> None:
    schema = obj_schema(
        a={"type": "object", "$ref": "#/x", "definitions": {"d": {"type": "string"}},
           "patternProperties": {"^x": {"type": "string"}}, "dependencies": {"x": ["y"]},
           "additionalItems": False}
    )  # fmt: skip
    path = f"{ROOT}.properties[a]"
    assert violations(schema) == [
        f"{path}.additionalItems: Forbidden: additionalItems is not supported",
        f"{path}.patternProperties: Forbidden: patternProperties is not supported",
        f"{path}.definitions: Forbidden: definitions is not supported",
        f"{path}.dependencies: Forbidden: dependencies is not supported",
        f"{path}.$ref: Forbidden: $ref is not supported",
    ]


def test_defaults_are_forbidden_in_top_level_metadata_and_under_metadata_maps() -> None:
    schema = obj_schema(
        metadata={"type": "object", "default": {"name": "x"}},
        embedded={
            "type": "object",
            "x-kubernetes-embedded-resource": True,
            "properties": {
                "metadata": {
                    "type": "object",
                    "properties": {
                        "annotations": {
                            "type": "object",
                            "additionalProperties": {"type": "string", "default": "x"},
                        }
                    },
                }
            },
        },
    )
    assert violations(schema) == [
        f"{ROOT}.properties[embedded].properties[metadata].properties[annotations]."
        "additionalProperties.default: Forbidden: must not be set inside additionalProperties "
        "applying to object metadata",
        f"{ROOT}.properties[metadata].default: Forbidden: must not be set in top-level metadata",
    ]


def test_embedded_resources_may_not_nest_inside_resource_metadata() -> None:
    schema = obj_schema(
        metadata={"type": "object"},
        spec=obj_schema(),
    )
    schema["properties"]["metadata"] = {
        "type": "object",
        "x-kubernetes-embedded-resource": True,
        "x-kubernetes-preserve-unknown-fields": True,
    }
    found = violations(schema)
    assert (
        f"{ROOT}.properties[metadata].x-kubernetes-embedded-resource: Forbidden: must not be used "
        "inside of resource meta"
    ) in found


def test_list_type_set_items_must_be_atomic() -> None:
    schema = obj_schema(
        objects={"type": "array", "x-kubernetes-list-type": "set",
                 "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
        lists={"type": "array", "x-kubernetes-list-type": "set",
               "items": {"type": "array", "x-kubernetes-list-type": "set",
                         "items": {"type": "string"}}},
        fine={"type": "array", "x-kubernetes-list-type": "set",
              "items": {"type": "object", "x-kubernetes-map-type": "atomic"}},
    )  # fmt: skip
    assert violations(schema) == [
        # Kubernetes shows the items' list type (here none) for the object case.
        f'{ROOT}.properties[lists].items.x-kubernetes-list-type: Invalid value: "set": must be '
        "atomic as item of a list with x-kubernetes-list-type=set",
        f"{ROOT}.properties[objects].items.x-kubernetes-map-type: Invalid value: null: must be "
        "atomic as item of a list with x-kubernetes-list-type=set",
    ]


def test_list_type_map_needs_scalar_required_or_defaulted_keys() -> None:
    item = {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "port": {"type": "integer", "nullable": True},
            "nested": {"type": "object"},
        },
    }
    schema = obj_schema(
        a={"type": "array", "x-kubernetes-list-type": "map",
           "x-kubernetes-list-map-keys": ["name", "port", "nested", "missing", "name"],
           "items": item},
        b={"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "string"}},
        c={"type": "array", "x-kubernetes-list-map-keys": ["k"], "items": {"type": "string"}},
    )  # fmt: skip
    keys = '["name","port","nested","missing","name"]'
    assert violations(schema) == [
        f'{ROOT}.properties[a].items.properties[nested].type: Invalid value: "object": must be a '
        "scalar type if parent array's x-kubernetes-list-type is map",
        f"{ROOT}.properties[a].x-kubernetes-list-map-keys: Invalid value: {keys}: entries must all "
        "be names of item properties",
        f"{ROOT}.properties[a].x-kubernetes-list-map-keys: Invalid value: {keys}: must not contain "
        "duplicate entries",
        f"{ROOT}.properties[a].items.properties[port].default: Required value: this property is in "
        "x-kubernetes-list-map-keys, so it must have a default or be a required property",
        f"{ROOT}.properties[a].items.properties[port].nullable: Forbidden: this property is in "
        "x-kubernetes-list-map-keys, so it cannot be nullable",
        f"{ROOT}.properties[a].items.properties[nested].default: Required value: this property is "
        "in x-kubernetes-list-map-keys, so it must have a default or be a required property",
        f"{ROOT}.properties[b].x-kubernetes-list-map-keys: Required value: must not be empty if "
        "x-kubernetes-list-type is map",
        f'{ROOT}.properties[b].items.type: Invalid value: "string": must be object if parent '
        "array's x-kubernetes-list-type is map",
        f"{ROOT}.properties[c].x-kubernetes-list-type: Required value: must be map if "
        "x-kubernetes-list-map-keys is non-empty",
    ]


def test_cel_rules_are_kept_and_checked_statically_but_never_run() -> None:
    rules = [
        {"rule": "self.a > 0", "message": "a must be positive"},
        {"rule": "  "},
        {"rule": "x", "message": " "},
        {"rule": "x\ny"},
        {"rule": "x", "messageExpression": " ", "reason": "Nope", "fieldPath": ".nothere"},
        {"rule": "x", "fieldPath": ".a"},
    ]
    schema = obj_schema(spec={"type": "object", "properties": {"a": {"type": "integer"}},
                              "x-kubernetes-validations": rules})  # fmt: skip
    path = f"{ROOT}.properties[spec].x-kubernetes-validations"
    assert violations(schema) == [
        f"{path}[1].rule: Required value: rule is not specified",
        f'{path}[2].message: Invalid value: " ": must be non-empty if specified',
        f"{path}[3].message: Required value: message must be specified if rule contains line "
        "breaks",
        f"{path}[4].messageExpression: Required value: messageExpression must be non-empty if "
        "specified",
        f'{path}[4].reason: Unsupported value: "Nope": supported values: "FieldValueDuplicate", '
        '"FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"',
        f'{path}[4].fieldPath: Invalid value: ".nothere": must be a valid path',
    ]
    rules = rules[:1] + rules[5:]
    root = StructuralSchema.from_openapi(
        obj_schema(
            spec={
                "type": "object",
                "properties": {"a": {"type": "integer"}},
                "x-kubernetes-validations": rules,
            }
        )
    )
    spec = root.properties["spec"]
    assert spec.x_validations is not None and spec.x_validations[0]["rule"] == "self.a > 0"
    # Not evaluated: an object breaking the rule is valid.
    assert validate({"spec": {"a": -1}}, root) == []


def test_the_status_subresource_restricts_the_root() -> None:
    message = (
        "only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum "
        "MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items "
        "Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed "
        "at the root of the schema if the status subresource is enabled"
    )
    schema = {
        "type": "object",
        "anyOf": [{"required": ["spec"]}],
        "properties": {"spec": {"type": "object"}},
    }
    found = violations(schema, status_subresource=True)
    assert found[0].startswith(f"{ROOT}: Invalid value: {{")
    assert found[0].endswith(message)
    StructuralSchema.from_openapi(schema)  # fine without the subresource


def test_nullable_is_refused_at_the_root() -> None:
    assert violations({"type": "object", "nullable": True}) == [
        f"{ROOT}.nullable: Forbidden: nullable cannot be true at the root"
    ]


# ---------------------------------------------------------------------------------------
# Defaults


def test_defaults_must_be_pruned_and_valid_against_their_node() -> None:
    string_foo = {"foo": {"type": "string"}}
    schema = obj_schema(
        a={"type": "object", "properties": string_foo, "default": {"foo": "abc", "bar": 42}},
        b={"type": "object", "properties": string_foo, "default": {"foo": "abc"}},
        c={"type": "object", "properties": string_foo, "default": {"foo": 42}},
        d={"type": "object",
           "properties": {"good": {"type": "string", "pattern": "a"},
                          "bad": {"type": "string", "pattern": "b"}},
           "default": {"good": "a", "bad": "a"}},
        e={"type": "integer", "minimum": 3, "default": 1},
        f={"type": "string", "default": 5},
    )  # fmt: skip
    assert violations(schema) == [
        f'{ROOT}.properties[a].default: Invalid value: {{"bar":42,"foo":"abc"}}: must not have '
        "unknown fields",
        f'{ROOT}.properties[c].default.foo: Invalid value: "integer": foo in body must be of type '
        'string: "integer"',
        f"{ROOT}.properties[d].default.bad: Invalid value: \"a\": bad in body should match 'b'",
        f"{ROOT}.properties[e].default: Invalid value: 1:  in body should be greater than or "
        "equal to 3",
        f'{ROOT}.properties[f].default: Invalid value: "integer":  in body must be of type string: '
        '"integer"',
    ]


def test_defaults_inside_embedded_metadata_must_make_valid_metadata() -> None:
    schema = obj_schema(
        embedded={
            "type": "object",
            "x-kubernetes-embedded-resource": True,
            "properties": {
                "kind": {"type": "string", "default": "not a kind"},
                "metadata": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "default": "a/b"}},
                },
            },
        }
    )
    path = f"{ROOT}.properties[embedded].properties"
    assert violations(schema) == [
        f'{path}[kind].default: Invalid value: "not a kind": must result in valid metadata: kind: '
        'Invalid value: "not a kind": may have mixed case, but should otherwise match: a DNS-1035 '
        "label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
        "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex "
        "used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        f'{path}[metadata].properties[name].default: Invalid value: "a/b": must result in valid '
        "metadata: metadata.name: Invalid value: \"a/b\": may not contain '/'",
    ]


def _embedded(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "x-kubernetes-embedded-resource": True, "properties": properties}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            obj_schema(
                metadata={"type": "object", "default": {"name": "foo"}},
                # unknown fields in an embedded metadata default are pruned later, not refused
                embedded=_embedded({"metadata": {"type": "object",
                                                 "default": {"name": "foo", "unknown": 42}}}),
            ),
            [("properties[metadata].default", "FieldValueForbidden")],
        ),
        (
            obj_schema(
                metadata={"type": "object",
                          "properties": {"name": {"type": "string", "default": "foo"}}},
                embedded=_embedded({
                    "apiVersion": {"type": "string", "default": "v1"},
                    "kind": {"type": "string", "default": "Pod"},
                    "metadata": {"type": "object",
                                 "properties": {"name": {"type": "string", "default": "foo"}}},
                }),
            ),
            [("properties[metadata].properties[name].default", "FieldValueForbidden")],
        ),
        (
            obj_schema(
                embedded=_embedded({
                    "apiVersion": {"type": "string", "default": "v1"},
                    "kind": {"type": "string", "default": "%"},
                    "metadata": {"type": "object", "default": {"labels": {"bar": "x y"}}},
                })
            ),
            [("properties[embedded].properties[kind].default", "FieldValueInvalid"),
             ("properties[embedded].properties[metadata].default", "FieldValueInvalid")],
        ),
        (
            obj_schema(
                embedded=_embedded({"metadata": {"type": "object", "properties": {
                    "name": {"type": "string", "default": 42},
                    "labels": {"type": "object",
                               "properties": {"bar": {"type": "string", "default": 42}}},
                }}})
            ),
            [("properties[embedded].properties[metadata].properties[labels].properties[bar]."
              "default", "FieldValueInvalid"),
             ("properties[embedded].properties[metadata].properties[name].default",
              "FieldValueInvalid")],
        ),
    ],
)  # fmt: skip
def test_metadata_defaults_as_kubernetes_table(
    schema: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    with pytest.raises(StructuralSchemaError) as caught:
        StructuralSchema.from_openapi(schema)
    found = [(c.field.removeprefix(ROOT + "."), c.reason) for c in caught.value.causes]
    assert found == expected


def test_metadata_default_messages() -> None:
    schema = obj_schema(
        embedded=_embedded({"metadata": {"type": "object", "properties": {
            "name": {"type": "string", "default": 42}}}})
    )  # fmt: skip
    assert violations(schema) == [
        f"{ROOT}.properties[embedded].properties[metadata].properties[name].default: Invalid "
        'value: 42: must result in valid metadata: metadata: Invalid value: {"name":42}: json: '
        "cannot unmarshal number into Go struct field ObjectMeta.name of type string"
    ]


def test_defaults_of_int_or_string_are_not_type_checked_as_kubernetes_does_not() -> None:
    StructuralSchema.from_openapi(
        obj_schema(port={"x-kubernetes-int-or-string": True, "default": True})
    )


# ---------------------------------------------------------------------------------------
# Decoding


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": 5}, "json: cannot unmarshal number into Go struct field JSONSchemaProps."
         "spec.validation.openAPIV3Schema.type of type string"),
        ({"type": "object", "properties": {"a": {"maxLength": 1.5}}},
         "json: cannot unmarshal number 1.5 into Go struct field JSONSchemaProps."
         "spec.validation.openAPIV3Schema.properties.a.maxLength of type int64"),
        ({"type": "object", "required": "a"}, "json: cannot unmarshal string into Go struct field "
         "JSONSchemaProps.spec.validation.openAPIV3Schema.required of type []string"),
        ({"type": "object", "additionalProperties": "yes"}, "boolean or JSON schema expected"),
        ([], "json: cannot unmarshal array into Go value of type v1.JSONSchemaProps"),
    ],
)  # fmt: skip
def test_members_of_the_wrong_json_type_do_not_decode(schema: Any, message: str) -> None:
    with pytest.raises(SchemaDecodeError) as caught:
        StructuralSchema.from_openapi(schema)
    assert str(caught.value) == message


def test_the_error_becomes_kubernetes_422() -> None:
    with pytest.raises(StructuralSchemaError) as caught:
        StructuralSchema.from_openapi({"properties": {"a": {}}})
    error = caught.value.status_error("foos.example.com")
    assert isinstance(error, InvalidError)
    status = json.loads(error.to_json())
    assert status["code"] == 422
    assert status["message"] == (
        'CustomResourceDefinition.apiextensions.k8s.io "foos.example.com" is invalid: ['
        f"{ROOT}.properties[a].type: Required value: must not be empty for specified object "
        f"fields, {ROOT}.type: Required value: must not be empty at the root]"
    )
    assert status["details"]["causes"][0] == {
        "reason": "FieldValueRequired",
        "message": "Required value: must not be empty for specified object fields",
        "field": f"{ROOT}.properties[a].type",
    }


def test_the_schema_is_copied_so_the_caller_may_change_it() -> None:
    schema = obj_schema(
        a={"type": "object", "default": {"x": 1}, "properties": {"x": {"type": "integer"}}}
    )
    root = StructuralSchema.from_openapi(schema)
    schema["properties"]["a"]["default"]["x"] = 2
    obj: dict[str, Any] = {}
    apply_defaults(obj, root)
    assert obj == {"a": {"x": 1}}


# ---------------------------------------------------------------------------------------
# Property: any object validates or yields causes; pruning is idempotent

_SCHEMA = StructuralSchema.from_openapi(
    {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 100,
                             "multipleOf": 2},
                    "ratio": {"type": "number", "format": "float", "exclusiveMaximum": True,
                              "maximum": 1.5},
                    "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8,
                             "minLength": 1},
                    "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                    "port": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"},
                                                                          {"type": "string"}]},
                    "when": {"type": "string", "format": "date-time", "nullable": True},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3,
                             "x-kubernetes-list-type": "set"},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map",
                              "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "required": ["name"], "properties": {
                                  "name": {"type": "string"},
                                  "number": {"type": "integer", "default": 80}}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"},
                               "maxProperties": 2},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                             "properties": {"known": {"type": "object",
                                                      "properties": {"x": {"type": "integer"}}}}},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                                 "x-kubernetes-preserve-unknown-fields": True},
                    "choice": {"type": "object",
                               "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                               "not": {"required": ["c"]},
                               "properties": {"a": {"type": "string"}, "b": {"type": "string"},
                                              "c": {"type": "string"}}},
                },
            },
        },
    }
)  # fmt: skip

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(
                ["a", "b", "c", "x", "name", "known", "metadata", "kind", "apiVersion"]
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)
_SPEC_KEYS = st.sampled_from(
    ["size", "ratio", "name", "mode", "port", "when", "tags", "ports", "labels", "free",
     "template", "choice", "unknown"]
)  # fmt: skip
_OBJECTS = st.fixed_dictionaries(
    {"spec": st.dictionaries(_SPEC_KEYS, _JSON, max_size=8)},
    optional={"status": _JSON, "metadata": st.just({"name": "x"}), "kind": _SCALARS},
)


@given(obj=st.one_of(_OBJECTS, st.dictionaries(st.text(max_size=5), _JSON, max_size=4)))
def test_any_object_prunes_defaults_and_validates_without_raising(obj: dict[str, Any]) -> None:
    pruned = copy.deepcopy(obj)
    removed = prune(pruned, _SCHEMA)
    assert all(isinstance(path, str) for path in removed)
    once = copy.deepcopy(pruned)
    assert prune(pruned, _SCHEMA) == []
    assert pruned == once
    apply_defaults(pruned, _SCHEMA)
    causes = validate(pruned, _SCHEMA)
    assert all(isinstance(c, StatusCause) and c.reason and c.message and c.field for c in causes)
    if causes:
        InvalidError.for_fields("Thing", "example.com", "x", causes).to_json()
