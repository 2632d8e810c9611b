"""Custom objects are validated against their CRD schema with the causes kube-apiserver
reports: one test per schema keyword, the junctors' choice of failing branch, formats,
list types and embedded resources. Expected texts are Kubernetes' (most from
apiextensions-apiserver's ``pkg/apiserver/validation`` tests, which state them)."""

from __future__ import annotations

from typing import Any

import pytest

from watchcache.registry.crd_validation import _check, schema_errors, validate
from watchcache.registry.structural import StructuralSchema
from watchcache.wire.errors import InvalidError


def compile_props(**properties: Any) -> StructuralSchema:
    return StructuralSchema.from_openapi({"type": "object", "properties": properties})


def errors(schema: StructuralSchema, obj: Any) -> list[str]:
    return [f"{c.field}: {c.message}" for c in validate(obj, schema)]


def field_errors(node: dict[str, Any], value: Any) -> list[str]:
    """The causes for ``{"field": value}`` with ``field`` described by ``node``."""
    return errors(compile_props(field=node), {"field": value})


# ---------------------------------------------------------------------------------------
# Types and nullable


@pytest.mark.parametrize(
    ("value", "shown"),
    [("foo", "string"), (42, "integer"), (True, "boolean"), (1.2, "number"), ([], "array"),
     (None, "null")],
)  # fmt: skip
def test_a_value_of_the_wrong_type(value: Any, shown: str) -> None:
    assert field_errors({"type": "object"}, value) == [
        f'field: Invalid value: "{shown}": field in body must be of type object: "{shown}"'
    ]


def test_type_errors_are_their_own_reason() -> None:
    (cause,) = validate({"spec": {"replicas": "3"}}, compile_props(spec={
        "type": "object", "properties": {"replicas": {"type": "integer"}}}))  # fmt: skip
    assert cause.reason == "FieldValueTypeInvalid"
    assert cause.field == "spec.replicas"
    assert cause.message == (
        'Invalid value: "string": spec.replicas in body must be of type integer: "string"'
    )


def test_nullable_accepts_null_only() -> None:
    assert field_errors({"type": "object", "nullable": True}, None) == []
    assert field_errors({"type": "object", "nullable": True}, "foo") == [
        'field: Invalid value: "string": field in body must be of type object: "string"'
    ]
    assert (
        field_errors({"nullable": True, "x-kubernetes-preserve-unknown-fields": True}, None) == []
    )


def test_integers_are_numbers_and_whole_floats_are_integers() -> None:
    assert field_errors({"type": "number"}, 3) == []
    assert field_errors({"type": "integer"}, 3.0) == []
    assert field_errors({"type": "integer"}, 3.5) == [
        'field: Invalid value: "number": field in body must be of type integer: "number"',
        '<nil>: Invalid value: "": Checked value must be of type integer (default format) in field',
    ]


@pytest.mark.parametrize(
    ("value", "shown"),
    [(None, "null"), (True, "boolean"), (1.2, "number"), ({}, "object"), ([], "array")],
)
def test_int_or_string(value: Any, shown: str) -> None:
    node = {"x-kubernetes-int-or-string": True}
    assert field_errors(node, 42) == []
    assert field_errors(node, "foo") == []
    assert field_errors(node, value) == [
        f'field: Invalid value: "{shown}": field in body must be of type integer,string: "{shown}"'
    ]


def test_int_or_string_with_its_any_of_reports_the_best_branch() -> None:
    node = {
        "nullable": True,
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
    }
    assert field_errors(node, None) == []
    assert field_errors(node, True) == [
        'field: Invalid value: "boolean": field in body must be of type integer,string: "boolean"',
        '<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)',
        'field: Invalid value: "boolean": field in body must be of type integer: "boolean"',
    ]
    assert field_errors(node, 1.2) == [
        'field: Invalid value: "number": field in body must be of type integer,string: "number"',
        '<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)',
        'field: Invalid value: "number": field in body must be of type integer: "number"',
        '<nil>: Invalid value: "": Checked value must be of type integer (default format) in field',
    ]


def test_int_or_string_with_all_of() -> None:
    node = {
        "nullable": True,
        "x-kubernetes-int-or-string": True,
        "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}],
    }
    assert field_errors(node, {}) == [
        'field: Invalid value: "object": field in body must be of type integer,string: "object"',
        '<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)',
        'field: Invalid value: "object": field in body must be of type integer: "object"',
        '<nil>: Invalid value: "": "field" must validate all the schemas (allOf). None validated',
    ]


# ---------------------------------------------------------------------------------------
# Numbers


def test_int32_int64_float_double_ranges() -> None:
    schema = compile_props(
        int32={"type": "integer", "format": "int32"},
        int64={"type": "integer", "format": "int64"},
        float32={"type": "number", "format": "float"},
        float64={"type": "number", "format": "double"},
    )
    fine = {"int32": -(2**31), "int64": 2**63 - 1, "float32": 3.4028234663852886e38,
            "float64": -1.7976931348623157e308}  # fmt: skip
    assert errors(schema, fine) == []
    assert errors(schema, {"int32": 2**31}) == [
        '<nil>: Invalid value: "": Checked value must be of type integer with format int32 in int32'
    ]
    assert errors(schema, {"int64": 9223372036854775807 * 1.1}) == [
        'int64: Invalid value: "float64": int64 in body must be of type int64: "float64"',
        '<nil>: Invalid value: "": Checked value must be of type integer with format int64 in '
        "int64",
    ]
    assert errors(schema, {"float32": 3.4028234663852886e38 * 1.1}) == [
        '<nil>: Invalid value: "": Checked value must be of type number with format float in '
        "float32"
    ]


def test_an_integer_beyond_int64_is_the_float_go_reads() -> None:
    assert field_errors({"type": "integer"}, 2**64) == [
        'field: Invalid value: "number": field in body must be of type integer: "number"',
        '<nil>: Invalid value: "": Checked value must be of type integer (default format) in field',
    ]


@pytest.mark.parametrize(
    ("node", "value", "expected"),
    [
        ({"type": "integer", "minimum": 10}, 9,
         "field: Invalid value: 9: field in body should be greater than or equal to 10"),
        ({"type": "integer", "minimum": 10, "exclusiveMinimum": True}, 10,
         "field: Invalid value: 10: field in body should be greater than 10"),
        ({"type": "integer", "maximum": 10}, 11,
         "field: Invalid value: 11: field in body should be less than or equal to 10"),
        ({"type": "number", "maximum": 10, "exclusiveMaximum": True}, 10.0,
         "field: Invalid value: 10: field in body should be less than 10"),
        ({"type": "number", "maximum": 1e6}, 1.5e6,
         "field: Invalid value: 1.5e+06: field in body should be less than or equal to 1e+06"),
        ({"type": "integer", "multipleOf": 3}, 10,
         "field: Invalid value: 10: field in body should be a multiple of 3"),
        ({"type": "number", "multipleOf": 0.5}, 1.25,
         "field: Invalid value: 1.25: field in body should be a multiple of 0.5"),
    ],
)  # fmt: skip
def test_bounds_and_multiples(node: dict[str, Any], value: Any, expected: str) -> None:
    assert field_errors(node, value) == [expected]


def test_a_bound_the_type_cannot_hold_is_reported_with_every_value() -> None:
    node = {"type": "integer", "minimum": 0.5}
    assert field_errors(node, 1) == [
        '<nil>: Invalid value: "": Minimum boundary value must be of type integer (default '
        "format) in field"
    ]
    assert field_errors(node, 0) == [
        '<nil>: Invalid value: "": Minimum boundary value must be of type integer (default '
        "format) in field",
        "field: Invalid value: 0: field in body should be greater than or equal to 0.5",
    ]


# ---------------------------------------------------------------------------------------
# Strings


def test_string_lengths_count_characters_and_stop_at_the_first_failure() -> None:
    node = {"type": "string", "maxLength": 2, "minLength": 1, "pattern": "^[a-z]+$"}
    assert field_errors(node, "ab") == []
    assert field_errors(node, "\u00e9\u00e9") == [
        "field: Invalid value: \"\u00e9\u00e9\": field in body should match '^[a-z]+$'"
    ]
    assert field_errors(node, "abc") == ["field: Too long: may not be more than 2 bytes"]
    assert field_errors(node, "") == [
        'field: Invalid value: "": field in body should be at least 1 chars long'
    ]
    assert field_errors({"type": "string", "maxLength": 1}, "ab") == [
        "field: Too long: may not be more than 1 byte"
    ]


def test_patterns_are_go_regular_expressions() -> None:
    node = {"type": "string", "pattern": "^[a-z]+$"}
    # Go's $ is the end of the text; Python's would accept a final newline.
    assert field_errors(node, "abc\n") == [
        "field: Invalid value: \"abc\\n\": field in body should match '^[a-z]+$'"
    ]
    assert field_errors({"type": "string", "pattern": "\\d"}, "\u0663") != []


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date-time", "2024-01-02T03:04:05Z", "2024-01-02 03:04"),
        ("date", "2024-02-29", "2023-02-29"),
        ("byte", "aGVsbG8=", "hello"),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123"),
        ("ipv4", "10.0.0.1", "10.0.0"),
        ("ipv6", "fe80::1", "fe80::g"),
        ("cidr", "10.0.0.0/8", "10.0.0.0/40"),
        ("hostname", "example.com", "-bad-"),
        ("uri", "https://example.com/x", "not a uri"),
        ("email", "someone@example.com", "someone"),
        ("mac", "01:23:45:67:89:ab", "01:23"),
        ("duration", "1h30m", "soon"),
        ("k8s-short-name", "abc", "a-"),
        ("k8s-long-name", "a.b", "a.-"),
    ],
)
def test_string_formats(fmt: str, good: str, bad: str) -> None:
    node = {"type": "string", "format": fmt}
    assert field_errors(node, good) == []
    assert field_errors(node, bad) == [
        f'field: Invalid value: "{bad}": field in body must be of type {fmt}: "{bad}"'
    ]


def test_unknown_and_unsupported_formats_are_not_checked() -> None:
    assert field_errors({"type": "string", "format": "color"}, "red") == []
    assert field_errors({"type": "integer", "format": "byte"}, 5) == []
    assert field_errors({"type": "number", "format": "int32"}, 1e20) == []


# ---------------------------------------------------------------------------------------
# Enums


def test_enum_lists_the_supported_values() -> None:
    schema = compile_props(
        field={
            "type": "object",
            "required": ["nestedint", "nestedstring"],
            "properties": {
                "nestedint": {"type": "integer", "enum": [1, 2]},
                "nestedstring": {"type": "string", "enum": ["a", "b"]},
            },
        }
    )
    assert errors(schema, {"field": {}}) == [
        "field.nestedint: Required value",
        "field.nestedstring: Required value",
    ]
    assert errors(schema, {"field": {"nestedint": "x", "nestedstring": True}}) == [
        'field.nestedint: Invalid value: "string": field.nestedint in body must be of type '
        'integer: "string"',
        'field.nestedint: Unsupported value: "x": supported values: "1", "2"',
        'field.nestedstring: Invalid value: "boolean": field.nestedstring in body must be of type '
        'string: "boolean"',
        'field.nestedstring: Unsupported value: true: supported values: "a", "b"',
    ]
    (cause, *_) = validate({"field": {"nestedint": 3, "nestedstring": "a"}}, schema)
    assert cause.reason == "FieldValueNotSupported"


def test_enum_compares_as_go_converts() -> None:
    node = {"type": "number", "enum": [1, {"a": [1]}, None]}
    assert field_errors(node, 1.0) == []
    assert field_errors({"enum": [{"a": [1]}], "x-kubernetes-preserve-unknown-fields": True},
                        {"a": [1]}) == []  # fmt: skip
    assert field_errors({"type": "number", "enum": [1.5]}, 2) == [
        'field: Unsupported value: 2: supported values: "1.5"'
    ]


# ---------------------------------------------------------------------------------------
# Arrays and objects


def test_array_sizes_and_unique_items() -> None:
    node = {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 3}
    assert field_errors(node, ["a", "b"]) == []
    assert field_errors(node, ["a", "b", "c", "d"]) == [
        "field: Too many: 4: must have at most 3 items"
    ]
    assert field_errors(node, ["a"]) == [
        "field: Invalid value: 1: field in body should have at least 2 items"
    ]
    assert field_errors(
        {"type": "array", "items": {"type": "string"}, "maxItems": 1}, ["a", "b"]
    ) == ["field: Too many: 2: must have at most 1 item"]


def test_items_are_validated_with_their_index() -> None:
    node = {
        "type": "array",
        "items": {"type": "object", "properties": {"port": {"type": "integer"}}},
    }
    assert field_errors(node, [{"port": 1}, {"port": "x"}]) == [
        'field[1].port: Invalid value: "string": field[1].port in body must be of type integer: '
        '"string"'
    ]


def test_object_sizes() -> None:
    node = {"type": "object", "maxProperties": 2, "minProperties": 1,
            "additionalProperties": {"type": "boolean"}}  # fmt: skip
    assert field_errors(node, {"a": True, "b": True, "c": True}) == [
        "field: Too many: 3: must have at most 2 items"
    ]
    assert field_errors(node, {}) == [
        "field: Invalid value: 0: field in body should have at least 1 properties"
    ]


def test_additional_properties_schema_and_false() -> None:
    node: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
    assert field_errors(node, {"a": "x", "b": 1}) == [
        'field.b: Invalid value: "integer": field.b in body must be of type string: "integer"'
    ]
    node = {"type": "object", "additionalProperties": False}
    assert field_errors(node, {"b": 1}) == [
        'field: Invalid value: "b": field.b in body is a forbidden property'
    ]


def test_required_at_the_root() -> None:
    schema = StructuralSchema.from_openapi(
        {"type": "object", "required": ["spec"], "properties": {"spec": {"type": "object"}}}
    )
    (cause,) = validate({}, schema)
    assert (cause.reason, cause.field, cause.message) == (
        "FieldValueRequired",
        "spec",
        "Required value",
    )


# ---------------------------------------------------------------------------------------
# Junctors


def test_one_of_reports_none_or_several_valid() -> None:
    node = {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}  # fmt: skip
    assert field_errors(node, {"a": "x"}) == []
    assert field_errors(node, {"a": "x", "b": "y"}) == [
        '<nil>: Invalid value: "": "field" must validate one and only one schema (oneOf). Found 2 '
        "valid alternatives"
    ]
    assert field_errors(node, {}) == [
        '<nil>: Invalid value: "": "field" must validate one and only one schema (oneOf). Found '
        "none valid",
        "field.a: Required value",
    ]


def test_all_of_and_not() -> None:
    node = {"type": "integer", "allOf": [{"minimum": 1}, {"maximum": 5}], "not": {"enum": [3]}}
    assert field_errors(node, 2) == []
    assert field_errors(node, 3) == [
        '<nil>: Invalid value: "": "field" must not validate the schema (not)'
    ]
    assert field_errors(node, 9) == [
        "field: Invalid value: 9: field in body should be less than or equal to 5",
        '<nil>: Invalid value: "": "field" must validate all the schemas (allOf)',
    ]


def test_any_of_keeps_the_failing_branch_with_the_most_passed_checks() -> None:
    node = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "anyOf": [
            {"required": ["x"]},
            {"properties": {"a": {"maxLength": 1}, "b": {"maxLength": 1}}},
        ],
    }
    # The second branch passes more checks (its properties) and fails on "a" only.
    assert field_errors(node, {"a": "long", "b": "y"}) == [
        '<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)',
        "field.a: Too long: may not be more than 1 byte",
    ]


# ---------------------------------------------------------------------------------------
# List types


def test_list_type_set_reports_each_repeated_value_once() -> None:
    node = {
        "type": "array",
        "x-kubernetes-list-type": "set",
        "items": {"x-kubernetes-int-or-string": True},
    }
    assert field_errors(node, [1, "1", 2]) == []
    assert field_errors(node, [1, 2, 1, 1, 2]) == [
        "field[2]: Duplicate value: 1",
        "field[4]: Duplicate value: 2",
    ]
    (cause, _) = validate({"field": [1, 2, 1, 1, 2]}, compile_props(field=node))
    assert cause.reason == "FieldValueDuplicate"


def test_list_type_map_keys_must_be_unique() -> None:
    item = {"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"},
                           "protocol": {"type": "string", "default": "TCP"},
                           "port": {"type": "integer"}}}  # fmt: skip
    one_key = {"type": "array", "x-kubernetes-list-type": "map",
               "x-kubernetes-list-map-keys": ["name"], "items": item}  # fmt: skip
    assert field_errors(one_key, [{"name": "a"}, {"name": "b"}, {"name": "a", "port": 1}]) == [
        'field[2]: Duplicate value: {"name":"a"}'
    ]
    two_keys = dict(one_key, **{"x-kubernetes-list-map-keys": ["name", "protocol"]})
    assert field_errors(two_keys, [{"name": "a", "protocol": "TCP"},
                                   {"name": "a", "protocol": "UDP"},
                                   {"name": "a", "protocol": "TCP"}]) == [
        'field[2]: Duplicate value: {"name":"a","protocol":"TCP"}'
    ]  # fmt: skip


def test_list_type_map_items_must_be_objects() -> None:
    node = {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}},
        },
    }
    assert field_errors(node, [{"name": "a"}, "x"])[-1] == (
        'field[1]: Invalid value: "x": must be an object for an array of list-type map'
    )


# ---------------------------------------------------------------------------------------
# Embedded resources


def test_embedded_resources_need_type_meta_and_valid_metadata() -> None:
    schema = compile_props(
        template={"type": "object", "x-kubernetes-embedded-resource": True,
                  "x-kubernetes-preserve-unknown-fields": True}
    )  # fmt: skip
    assert errors(schema, {"template": {"apiVersion": "v1", "kind": "Pod"}}) == []
    assert errors(schema, {"template": {}}) == [
        "template.apiVersion: Required value",
        "template.kind: Required value",
    ]
    assert errors(schema, {"template": {"apiVersion": "a/b/c", "kind": "No Kind",
                                        "metadata": {"name": "..", "namespace": "Bad",
                                                     "labels": {"a": "-x"}}}}) == [
        'template.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c',
        'template.kind: Invalid value: "No Kind": may have mixed case, but should otherwise match: '
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
        "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
        "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        "template.metadata.name: Invalid value: \"..\": may not be '..'",
        'template.metadata.namespace: Invalid value: "Bad": a lowercase RFC 1123 label must '
        'consist '
        "of lower case alphanumeric characters or '-', and must start and end with an alphanumeric "
        "character (e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        'template.metadata.labels: Invalid value: "-x": a valid label must be an empty string or '
        "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
        "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    ]  # fmt: skip


def test_embedded_metadata_that_does_not_decode() -> None:
    schema = compile_props(
        template={"type": "object", "x-kubernetes-embedded-resource": True,
                  "x-kubernetes-preserve-unknown-fields": True}
    )  # fmt: skip
    assert errors(
        schema, {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 5}}}
    ) == [
        'template.metadata: Invalid value: {"name":5}: json: cannot unmarshal number into Go '
        "struct "
        "field ObjectMeta.name of type string"
    ]


def test_embedded_resources_in_arrays_and_maps() -> None:
    embedded = {"type": "object", "x-kubernetes-embedded-resource": True,
                "x-kubernetes-preserve-unknown-fields": True}  # fmt: skip
    schema = compile_props(
        list={"type": "array", "items": embedded},
        map={"type": "object", "additionalProperties": embedded},
    )
    assert errors(schema, {"list": [{"kind": "A"}], "map": {"k": {"apiVersion": "v1"}}}) == [
        "list[0].apiVersion: Required value",
        "map[k].kind: Required value",
    ]


# ---------------------------------------------------------------------------------------
# The whole


def test_causes_make_kubernetes_invalid_error() -> None:
    schema = compile_props(spec={"type": "object", "required": ["size"],
                                 "properties": {"size": {"type": "integer",
                                                         "maximum": 3}}})  # fmt: skip
    causes = validate({"spec": {"size": 4}}, schema)
    error = InvalidError.for_fields("Widget", "example.com", "w1", causes)
    assert error.message == (
        'Widget.example.com "w1" is invalid: spec.size: Invalid value: 4: spec.size in body should '
        "be less than or equal to 3"
    )


def test_the_same_text_is_reported_once() -> None:
    node = {"type": "integer", "maximum": 5, "allOf": [{"maximum": 5}]}
    assert field_errors(node, 6) == [
        "field: Invalid value: 6: field in body should be less than or equal to 5",
        '<nil>: Invalid value: "": "field" must validate all the schemas (allOf). None validated',
    ]


def test_schema_errors_can_root_the_paths_elsewhere() -> None:
    node = StructuralSchema.from_openapi(
        {"type": "object", "properties": {"a": {"type": "string"}}}
    )
    causes = schema_errors(node, {"a": 1}, "status")
    assert [(c.field, c.message) for c in causes] == [
        ("status.a", 'Invalid value: "integer": a in body must be of type string: "integer"')
    ]


def test_match_counts_are_kube_openapis() -> None:
    """The count that picks anyOf/oneOf's reported branch: one per applicable validator,
    one more for a passed type check, items' and properties' own counts, one at the end."""
    string = StructuralSchema.from_openapi(
        {"type": "object", "properties": {"s": {"type": "string"}}}
    )
    node = string.properties["s"]
    assert _check(node, "x", "s", False, []) == 7  # type 2, junctors 2, string, common, end
    assert _check(node, 5, "s", False, []) == 7  # type 1, junctors 2, number 2, common, end
    assert _check(node, None, "s", False, []) == 0  # a failed type check on null counts 0
    assert _check(string, {"s": "x"}, "", False, []) == 14  # 2 + 2 + common + (7 + 1) + end
    array = StructuralSchema.from_openapi(
        {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}}
    ).properties["a"]
    assert _check(array, ["x", "y"], "a", False, []) == 2 + 2 + (14 + 2) + 1 + 1


# ---------------------------------------------------------------------------------------
# Cost: a typical 2 KB object against a 50-node schema (also the timing command's input:
#   .venv/bin/python -m timeit -s "from tests.unit.test_crd_validation import PERF_SCHEMA,
#   perf_object; from watchcache.registry.crd_validation import validate;
#   o = perf_object()" "validate(o, PERF_SCHEMA)")

_CONTAINER: dict[str, Any] = {
    "type": "object",
    "required": ["name", "image"],
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
        "image": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}},
        "ports": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["containerPort"],
            "items": {
                "type": "object",
                "required": ["containerPort"],
                "properties": {
                    "containerPort": {"type": "integer", "format": "int32", "minimum": 1,
                                      "maximum": 65535},
                    "protocol": {"type": "string", "enum": ["TCP", "UDP", "SCTP"],
                                 "default": "TCP"},
                    "name": {"type": "string"},
                },
            },
        },
        "env": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "value": {"type": "string"}}}},
        "resources": {"type": "object", "properties": {
            "limits": {"type": "object", "additionalProperties": {
                "x-kubernetes-int-or-string": True, "pattern": "^[0-9]+[a-zA-Z]*$"}},
            "requests": {"type": "object", "additionalProperties": {
                "x-kubernetes-int-or-string": True}}}},
    },
}  # fmt: skip
_CONDITION: dict[str, Any] = {"type": "object", "properties": {
    "type": {"type": "string"}, "status": {"type": "string"}, "reason": {"type": "string"},
    "message": {"type": "string"},
    "lastTransitionTime": {"type": "string", "format": "date-time"}}}  # fmt: skip
PERF_SCHEMA = StructuralSchema.from_openapi(
    {"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {"type": "object", "required": ["replicas"], "properties": {
            "replicas": {"type": "integer", "format": "int32", "minimum": 0, "default": 1},
            "paused": {"type": "boolean"},
            "strategy": {"type": "string", "enum": ["Recreate", "RollingUpdate"]},
            "selector": {"type": "object", "properties": {"matchLabels": {
                "type": "object", "additionalProperties": {"type": "string"}}}},
            "containers": {"type": "array", "items": _CONTAINER, "maxItems": 20},
            "schedule": {"type": "string", "format": "date-time"},
            "tolerations": {"type": "array", "items": {"type": "object", "properties": {
                "key": {"type": "string"}, "operator": {"type": "string"},
                "value": {"type": "string"}, "effect": {"type": "string"},
                "tolerationSeconds": {"type": "integer", "format": "int64"}}}},
            "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
        "status": {"type": "object", "properties": {
            "phase": {"type": "string"}, "readyReplicas": {"type": "integer"},
            "conditions": {"type": "array", "items": _CONDITION}}},
    }}
)  # fmt: skip


def perf_object() -> dict[str, Any]:
    def container(i: int) -> dict[str, Any]:
        return {
            "name": f"c{i}",
            "image": f"registry.example.com/team/app:{i}.0.1",
            "args": ["--listen=:8080", "--verbose"],
            "ports": [{"containerPort": 8080 + i, "name": "http", "protocol": "TCP"},
                      {"containerPort": 9090 + i, "protocol": "UDP"}],
            "env": [{"name": "MODE", "value": "production"}, {"name": "LEVEL", "value": "2"}],
            "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": 1}},
        }  # fmt: skip

    return {
        "apiVersion": "example.com/v1",
        "kind": "App",
        "metadata": {"name": "demo", "namespace": "default", "labels": {"app": "demo"}},
        "spec": {
            "replicas": 3,
            "strategy": "RollingUpdate",
            "selector": {"matchLabels": {"app": "demo"}},
            "containers": [container(i) for i in range(4)],
            "schedule": "2024-01-01T00:00:00Z",
            "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            "config": {"feature": {"enabled": True, "levels": [1, 2, 3]}},
        },
        "status": {
            "phase": "Running",
            "readyReplicas": 3,
            "conditions": [{"type": "Ready", "status": "True", "reason": "AllReady",
                            "message": "all replicas are ready",
                            "lastTransitionTime": "2024-01-01T00:00:00Z"}],
        },
    }  # fmt: skip


def _count_nodes(node: StructuralSchema) -> int:
    children = [prop for _, prop in node.property_items]
    children += [c for c in (node.items, node.additional) if c is not None]
    return 1 + sum(_count_nodes(child) for child in children)


def test_a_2_kb_object_against_a_50_node_schema_validates_well_under_a_millisecond() -> None:
    import json
    import time

    obj = perf_object()
    assert _count_nodes(PERF_SCHEMA) == 50
    assert 1900 <= len(json.dumps(obj, separators=(",", ":"))) <= 2200
    assert validate(obj, PERF_SCHEMA) == []
    runs = 50
    start = time.perf_counter()
    for _ in range(runs):
        validate(obj, PERF_SCHEMA)
    # About 0.15 ms on a quiet machine; the bound only catches an accidental blow-up.
    assert (time.perf_counter() - start) / runs < 0.005


def test_unique_items_at_runtime() -> None:
    # A CRD may not set uniqueItems (its schema check refuses it), but the validator
    # implements it as kube-openapi does: one cause, no value, for any repetition.
    schema = compile_props(field={"type": "array", "items": {"x-kubernetes-int-or-string": True}})
    schema.properties["field"].unique_items = True
    assert errors(schema, {"field": [1, "1", 2]}) == []
    assert errors(schema, {"field": [1, 2, 1]}) == [
        'field: Invalid value: "": field in body shouldn\'t contain duplicates'
    ]
