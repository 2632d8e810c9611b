"""Field paths, field sets and FieldsV1 as structured-merge-diff defines them: element order,
``Path.String()`` texts, the set algebra's asymmetries, and FieldsV1 bytes (the goldens are
SMD's own, and texts checked against json-iterator v1.1.12 and Go's fmt)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from structured_builders import NUMERIC, STRING, list_map, map_of, struct

from watchcache.structured.fieldpath import (
    FieldsV1Error,
    Path,
    PathElement,
    Set,
    fields_v1_from_set,
    path_string,
    set_from_fields_v1,
)
from watchcache.structured.pathelement import deserialize_path_element, serialize_path_element

F = PathElement.of_field
K = PathElement.of_key
V = PathElement.of_value
I = PathElement.of_index  # noqa: E741


def p(*parts: str | int | PathElement) -> Path:
    """A path from field names, indexes and elements."""
    out: list[PathElement] = []
    for part in parts:
        if isinstance(part, PathElement):
            out.append(part)
        elif isinstance(part, int):
            out.append(I(part))
        else:
            out.append(F(part))
    return tuple(out)


# --- path elements ----------------------------------------------------------------------


def test_elements_order_by_kind_then_within_kind() -> None:
    ordered = [
        F("a"),
        F("b"),
        K({"name": "a"}),
        K({"name": "a", "port": 1}),
        K({"name": "b"}),
        V(-1),
        V(1.5),
        V(2),
        V("a"),
        V(False),
        V(True),
        V([1]),
        V([1, 2]),
        V({"a": 1}),
        V(None),
        I(0),
        I(3),
    ]
    shuffled = ordered[1::2] + ordered[::2]
    assert sorted(shuffled) == ordered
    for lower, higher in itertools.pairwise(ordered):
        assert lower < higher and not higher < lower and lower != higher


def test_numbers_are_one_element_whatever_their_type_but_booleans_are_not() -> None:
    assert V(1) == V(1.0) and hash(V(1)) == hash(V(1.0))
    assert V(True) != V(1) and V(False) != V(0)
    assert K({"port": 80}) == K({"port": 80.0})
    assert K({"a": 1, "b": 2}) == K([("b", 2), ("a", 1)])


def test_elements_expose_exactly_one_kind() -> None:
    key = K({"protocol": "TCP", "containerPort": 80})
    assert key.kind == "key" and key.key == (("containerPort", 80), ("protocol", "TCP"))
    assert key.field is None and key.value is None and key.index is None
    assert F("spec").field == "spec" and F("spec").kind == "field"
    assert V(None).kind == "value" and V(None).value is None
    assert V({"b": [1, {"c": None}]}).value == {"b": [1, {"c": None}]}
    assert I(4).index == 4 and I(4).kind == "index"


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (
            p("spec", "containers", K({"name": "web"}), "image"),
            '.spec.containers[name="web"].image',
        ),
        (p("metadata", "finalizers", V("a")), '.metadata.finalizers[="a"]'),
        (p(0), "[0]"),
        ((), ""),
        (p(K({"protocol": "TCP", "containerPort": 80})), '[containerPort=80,protocol="TCP"]'),
        (p(V(1.5)), "[=1.5]"),
        (p(V(1.0)), "[=1]"),
        (p(V(1e21)), "[=1e+21]"),
        (p(V(1234567.0)), "[=1.234567e+06]"),
        (p(V(123456.0)), "[=123456]"),
        (p(V(0.00001)), "[=1e-05]"),
        (p(V(True)), "[=true]"),
        (p(V(None)), "[=null]"),
        (p(V([1, "a"])), '[=[1,"a"]]'),
        (p(V('a"b\n\x01\u00ad')), '[="a\\"b\\n\\x01\\u00ad"]'),
        (p(V("é日本🚀")), '[="é日本🚀"]'),
        (p(K({"m": {"z": 1, "a": True}})), "[m=a=truez=1]"),
        (p("a.b", "c d"), ".a.b.c d"),
    ],
)
def test_path_strings_are_smd_texts(path: Path, text: str) -> None:
    assert path_string(path) == text


# --- sets -------------------------------------------------------------------------------


def test_insert_tracks_the_path_not_its_parents() -> None:
    s = Set([p("spec", "replicas")])
    assert s.has(p("spec", "replicas"))
    assert not s.has(p("spec")) and not s.has(())
    s.insert(())
    assert len(s) == 1
    assert p("spec", "replicas") in s and p("spec") not in s


def test_iteration_is_smds_preorder() -> None:
    s = Set([p("b"), p("a", "x"), p("a"), p("c", "y", "z"), p(K({"k": 1})), p(0)])
    assert [path_string(path) for path in s] == [
        ".a",
        ".b",
        "[k=1]",
        "[0]",
        ".a.x",
        ".c.y.z",
    ]
    assert str(s).splitlines()[0] == ".a"


def test_difference_keeps_children_of_a_removed_parent_recursive_difference_does_not() -> None:
    child = Set([p("a", "b")])
    parent = Set([p("a")])
    assert child.difference(parent) == child
    assert parent.difference(child) == parent
    assert child.recursive_difference(parent).is_empty()
    both = Set([p("a"), p("a", "b"), p("c")])
    assert both.recursive_difference(parent) == Set([p("c")])
    assert both.difference(parent) == Set([p("a", "b"), p("c")])


def test_union_and_intersection() -> None:
    left = Set([p("a", "x"), p("b"), p("c", "d")])
    right = Set([p("a", "y"), p("b"), p("c")])
    assert left.union(right) == Set([p("a", "x"), p("a", "y"), p("b"), p("c"), p("c", "d")])
    assert left.intersection(right) == Set([p("b")])
    # An intersection that empties a subtree leaves no empty node behind.
    assert left.intersection(Set([p("a", "z")])).is_empty()


def test_results_share_nothing_with_operands() -> None:
    left = Set([p("a", "x")])
    merged = left.union(Set([p("b")]))
    merged.insert(p("a", "new"))
    assert left == Set([p("a", "x")])
    below = left.with_prefix(F("a"))
    below.insert(p("other"))
    assert left == Set([p("a", "x")])
    assert left.with_prefix(F("missing")).is_empty()


def test_leaves_drop_members_with_children() -> None:
    s = Set([p("a"), p("a", "b"), p("a", "b", "c"), p("d")])
    assert s.leaves() == Set([p("a", "b", "c"), p("d")])


def test_ensure_named_fields_are_members_adds_struct_fields_only() -> None:
    container = struct(name=STRING, image=STRING)
    atom = struct(
        spec=struct(containers=list_map(container, "name"), replicas=NUMERIC),
        labels=map_of(struct(x=STRING)),
    )
    s = Set(
        [
            p("spec", "containers", K({"name": "a"}), "image"),
            p("labels", "app", "x"),
            p("unknown", "x"),
        ]
    )
    out = s.ensure_named_fields_are_members(atom)
    assert out == s.union(
        Set(
            [
                p("spec"),
                p("spec", "containers"),
                p("labels"),
                # Below a map entry the element type's fields count again.
                p("labels", "app", "x"),
            ]
        )
    )
    assert not out.has(p("labels", "app"))
    assert not out.has(p("spec", "containers", K({"name": "a"})))


def test_equality_and_emptiness() -> None:
    assert Set() == Set() and Set().is_empty() and not Set()
    assert Set([p("a", "b")]) != Set([p("a")])
    assert Set([p("a", "b")]).difference(Set([p("a", "b")])) == Set()


# --- FieldsV1 -----------------------------------------------------------------------------

# SMD's serialize_test.go goldens: read and written back byte for byte.
GOLDENS = [
    '{"f:aaa":{},"f:aab":{},"f:aac":{},"f:aad":{},"f:aae":{},"f:aaf":{},'
    '"k:{\\"name\\":\\"first\\"}":{},"k:{\\"name\\":\\"second\\"}":{},'
    '"k:{\\"port\\":443,\\"protocol\\":\\"tcp\\"}":{},"k:{\\"port\\":443,\\"protocol\\":\\"udp\\"}":{},'
    '"v:1":{},"v:2":{},"v:3":{},"v:\\"aa\\"":{},"v:\\"ab\\"":{},"v:true":{},'
    '"i:1":{},"i:2":{},"i:3":{},"i:4":{}}',
    '{"f:spec":{".":{},"f:apps":{".":{},"k:{\\"name\\":\\" app-💻\\"}":{".":{},"f:container":'
    '{".":{},"f:image":{},"f:name":{},"f:ports":{".":{},"k:{\\"name\\":\\"port 🔑\\"}":{".":{},'
    '"f:containerPort":{},"f:name":{}}}},"f:name":{}},"k:{\\"name\\":\\" app-🚀\\"}":{".":{},'
    '"f:container":{".":{},"f:image":{},"f:name":{},"f:ports":{".":{},'
    '"k:{\\"name\\":\\"port-✅ \\"}":{".":{},"f:containerPort":{},"f:name":{}}}},'
    '"f:name":{}}}}}',
    '{"f:aaa":{"k:{\\"name\\":\\"second\\"}":{"v:3":{"f:aab":{}}},"v:3":{},"v:true":{}},'
    '"i:1":{"i:3":{"f:aaf":{}}},"i:2":{"f:aae":{},"k:{\\"port\\":443,\\"protocol\\":\\"tcp\\"}"'
    ':{"v:1":{}}}}',
]


@pytest.mark.parametrize("golden", GOLDENS)
def test_fields_v1_goldens_round_trip_byte_for_byte(golden: str) -> None:
    s = set_from_fields_v1(golden.encode())
    assert fields_v1_from_set(s).decode() == golden
    assert set_from_fields_v1(golden) == s


def test_fields_v1_is_normalized_whatever_the_input_order_and_spacing() -> None:
    messy = (
        '{ "i:2": {}, "f:b": {"f:c": {}, ".": {}},\n'
        ' "k:{ \\"protocol\\":\\"udp\\",\\"port\\":443}": {},'
        ' "v: 3": null, "f:a": {} }'
    )
    out = fields_v1_from_set(set_from_fields_v1(messy.encode()))
    assert out == (
        b'{"f:a":{},"f:b":{".":{},"f:c":{}},"k:{\\"port\\":443,\\"protocol\\":\\"udp\\"}":{},'
        b'"v:3":{},"i:2":{}}'
    )


def test_member_with_children_is_written_with_a_dot() -> None:
    s = Set([p("metadata", "labels"), p("metadata", "labels", "app")])
    assert fields_v1_from_set(s) == b'{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}'
    assert fields_v1_from_set(Set()) == b"{}"


# Checked against json-iterator v1.1.12 (SMD's writer) and Go's fmt.
@pytest.mark.parametrize(
    ("pe", "key"),
    [
        (V("a<b>&c"), 'v:"a\\u003cb\\u003e\\u0026c"'),
        (V("tab\there\nnl\x01\x7f\b\f"), 'v:"tab\\there\\nnl\\u0001\x7f\\u0008\\u000c"'),
        (V("\u2028x\u2029"), 'v:"\\u2028x\\u2029"'),
        (V("é日本🚀"), 'v:"é日本🚀"'),
        (V(1e21), "v:1e+21"),
        (V(1e20), "v:100000000000000000000"),
        (V(1e-7), "v:1e-07"),
        (V(0.00001), "v:0.00001"),
        (V(-0.0), "v:-0"),
        (V(1234567.0), "v:1234567"),
        (V({"b": 1, "a": "x", "<": 2}), 'v:{"\\u003c":2,"a":"x","b":1}'),
        (V([1, "a", None, [2]]), 'v:[1,"a",null,[2]]'),
        (
            K({"name": "a<b", 'x"y': "q", "n\x01": 1.25}),
            'k:{"n\\u0001":1.25,"name":"a\\u003cb","x\\"y":"q"}',
        ),
        (F('a"b\\c<d>\u2028\x01é'), 'f:a"b\\c<d>\u2028\x01é'),
        (I(12), "i:12"),
    ],
)
def test_element_keys_are_json_iterators_bytes(pe: PathElement, key: str) -> None:
    assert serialize_path_element(pe) == key
    back = deserialize_path_element(key)
    assert back == pe


def test_field_names_are_escaped_only_as_json_strings_require() -> None:
    s = Set([p('a"b\\c<d>\u2028\x01é')])
    assert fields_v1_from_set(s) == '{"f:a\\"b\\\\c<d>\u2028\\u0001é":{}}'.encode()
    s = Set([p("a", V("a<b>&c"))])
    assert fields_v1_from_set(s) == b'{"f:a":{"v:\\"a\\\\u003cb\\\\u003e\\\\u0026c\\"":{}}}'


def test_numbers_read_from_fields_v1_are_floats_equal_to_ints() -> None:
    s = set_from_fields_v1(b'{"f:ports":{"k:{\\"port\\":80}":{"f:x":{}}}}')
    (path,) = list(s)
    assert path[1].key == (("port", 80.0),)
    assert s.has(p("ports", K({"port": 80}), "x"))
    assert fields_v1_from_set(s) == b'{"f:ports":{"k:{\\"port\\":80}":{"f:x":{}}}}'


def test_null_nodes_unknown_kinds_and_dict_input() -> None:
    assert set_from_fields_v1(b"null").is_empty()
    assert set_from_fields_v1(None).is_empty()
    assert set_from_fields_v1(b' {"f:a": null} ') == Set([p("a")])
    assert set_from_fields_v1(b'{"f:aaa":{},"r:aab":{}}') == Set([p("aaa")])
    # A node whose only content is of an unknown kind is a member.
    assert set_from_fields_v1(b'{"f:a":{"x:y":{}}}') == Set([p("a")])
    decoded: dict[str, Any] = {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}
    assert set_from_fields_v1(decoded) == Set(
        [p("metadata", "labels"), p("metadata", "labels", "app")]
    )


def test_a_repeated_key_replaces_the_subtree_read_before() -> None:
    s = set_from_fields_v1(b'{"f:a":{"f:b":{}},"f:a":{"f:c":{}}}')
    assert s == Set([p("a", "c")])


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        "42",
        '"hi"',
        "",
        "   ",
        "{1:{}}",
        '{"f:a":{},}',
        '{"f:a":1}',
        '{"f:a":[]}',
        '{"f:a":{]}',
        '{"":{}}',
        '{"x":{}}',
        '{":":{}}',
        '{"fx":{}}',
        '{"é:":{}}',
        '{"f:a":{}',
        '{"f:a":{}}}',
        '{"f:a":{}}{}',
        '{"f:a":{}}  "x"',
        '{"i:index is not a number":{}}',
        '{"i:1.23":{}}',
        '{"i:":{}}',
        '{"i: 0":{}}',
        '{"i:0 ":{}}',
        '{"v:invalid json":{}}',
        '{"v:":{}}',
        '{"k:{\\"name\\":invalid}":{}}',
        '{"k:\\"not an object\\"":{}}',
        '{"v:{\\"some\\":\\"json\\"} {\\"other\\":\\"json\\"}":{}}',
        '{"k:{\\"name\\":\\"c\\"} garbage":{}}',
        '{"v:NaN":{}}',
        '{"f:a":{"f:b":5}}',
    ],
)
def test_invalid_fields_v1_is_refused(text: str) -> None:
    with pytest.raises(FieldsV1Error):
        set_from_fields_v1(text.encode())


def test_invalid_fields_v1_messages_say_what_is_wrong() -> None:
    with pytest.raises(FieldsV1Error, match=r'strconv\.Atoi: parsing "x": invalid syntax'):
        set_from_fields_v1(b'{"i:x":{}}')
    with pytest.raises(FieldsV1Error, match=r"at \.a\.b: expected an object, got a number"):
        set_from_fields_v1(b'{"f:a":{"f:b":5}}')
    with pytest.raises(FieldsV1Error, match="must be a JSON object"):
        set_from_fields_v1(b"[]")
    with pytest.raises(FieldsV1Error, match="invalid managed fields JSON"):
        set_from_fields_v1(b"\xff")


def test_deeply_nested_fields_v1_is_an_error_not_a_crash() -> None:
    deep = '{"f:a":' * 5000 + "{}" + "}" * 5000
    with pytest.raises(FieldsV1Error):
        set_from_fields_v1(deep.encode())


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("f:", F("")),
        ("f: spaced  ", F(" spaced  ")),
        ("f:spec-\\n", F("spec-\\n")),
        ('k:{"optionalField":null}', K({"optionalField": None})),
        ('k:{"listField":["1","2"]}', K({"listField": ["1", "2"]})),
        ('k: {"name":"my-container"} ', K({"name": "my-container"})),
        ('k:{"name\\u002dcontainer":"x"}', K({"name-container": "x"})),
        ('v:"\\ud83d\\ude80"', V("🚀")),
        ('v:"\\ud800"', V("\ufffd")),
        ("v:null", V(None)),
        ("i:-3", I(-3)),
        ("i:+7", I(7)),
    ],
)
def test_path_elements_read_as_smd_reads_them(key: str, expected: PathElement) -> None:
    assert deserialize_path_element(key) == expected


def test_unknown_element_kinds_read_as_none() -> None:
    assert deserialize_path_element("r:Hello") is None
