"""Request bodies: media types, field validation in its three modes, YAML, Go's type errors.

Expected texts are Kubernetes': the 415 of ``NegotiateInputSerializer``, the 400s of
``transformDecodeError`` (``<Kind> in version "v1" cannot be handled as a <Kind>: ...``),
the strict errors of sigs.k8s.io/json and goyaml v2, and encoding/json's type errors.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchcache.wire import gojson, schema
from watchcache.wire import protobuf as pb
from watchcache.wire.body import (
    MAX_DEPTH,
    MEDIA_TYPES,
    PROTOBUF,
    decode_body,
    warning_header_value,
)
from watchcache.wire.errors import BadRequestError, UnsupportedMediaTypeError
from watchcache.wire.write_options import FieldValidation

STRICT, WARN, IGNORE = FieldValidation.STRICT, FieldValidation.WARN, FieldValidation.IGNORE
CM = 'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
POD = 'Pod in version "v1" cannot be handled as a Pod: '


def decode(
    body: bytes | str | dict[str, Any],
    content_type: str = "application/json",
    validation: FieldValidation = STRICT,
    kind: str | None = "ConfigMap",
    api_version: str | None = "v1",
) -> tuple[dict[str, Any], list[str]]:
    if isinstance(body, dict):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    return decode_body(
        body, content_type, kind=kind, api_version=api_version, field_validation=validation
    )


def bad_request(*args: Any, **options: Any) -> str:
    with pytest.raises(BadRequestError) as caught:
        decode(*args, **options)
    assert caught.value.code == 400
    return caught.value.message


# ---------------------------------------------------------------------------------------
# Media types


@pytest.mark.parametrize(
    "content_type",
    ["", "application/json", "application/json; charset=utf-8", "Application/JSON",
     "application/yaml", "application/yaml;charset=UTF-8", " application/json "],
)  # fmt: skip
def test_accepted_media_types(content_type: str) -> None:
    obj, warnings = decode('{"metadata":{"name":"a"}}', content_type)
    assert obj == {"metadata": {"name": "a"}} and warnings == []


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/xml", "application/cbor", "application/json-patch+json",
     "application/apply-patch+yaml", "application/x-www-form-urlencoded", "json"],
)  # fmt: skip
def test_other_media_types_are_415(content_type: str) -> None:
    with pytest.raises(UnsupportedMediaTypeError) as caught:
        decode("{}", content_type)
    assert caught.value.code == 415
    assert caught.value.message == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )
    assert MEDIA_TYPES == ("application/json", "application/yaml", PROTOBUF)


# ---------------------------------------------------------------------------------------
# Field validation

UNKNOWN_AND_DUPLICATE = (
    '{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","nmae":"b","name":"c"},'
    '"data":{"k":"1","k":"2"},"extra":{"deep":[1,2]}}'
)
EXPECTED_ERRORS = [
    'unknown field "metadata.nmae"',
    'duplicate field "metadata.name"',
    'duplicate field "data.k"',
    'unknown field "extra"',
]
CLEANED = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"}, "data": {"k": "2"}}


def test_strict_refuses_with_every_problem_in_one_message() -> None:
    message = bad_request(UNKNOWN_AND_DUPLICATE)
    assert message == CM + "strict decoding error: " + ", ".join(EXPECTED_ERRORS)


def test_warn_returns_one_warning_per_problem_and_drops_unknown_fields() -> None:
    obj, warnings = decode(UNKNOWN_AND_DUPLICATE, validation=WARN)
    assert warnings == EXPECTED_ERRORS
    assert obj == CLEANED


def test_ignore_says_nothing_and_still_drops_unknown_fields() -> None:
    obj, warnings = decode(UNKNOWN_AND_DUPLICATE, validation=IGNORE)
    assert warnings == [] and obj == CLEANED


def test_paths_name_list_items_and_nested_fields() -> None:
    pod = {
        "spec": {
            "containers": [
                {"name": "a", "image": "x"},
                {"name": "b", "bogus": 1, "ports": [{"containerPort": 1, "nope": True}]},
            ],
            "volumes": [{"name": "v", "configMap": {"name": "c", "what": 1}}],
        },
        "status": {"phase": "Running", "podIP": "1.2.3.4", "hm": None},
    }
    obj, warnings = decode(pod, kind="Pod", validation=WARN)
    assert warnings == [
        'unknown field "spec.containers[1].bogus"',
        'unknown field "spec.containers[1].ports[0].nope"',
        'unknown field "spec.volumes[0].configMap.what"',
        'unknown field "status.hm"',
    ]
    assert obj["spec"]["containers"][1] == {"name": "b", "ports": [{"containerPort": 1}]}
    assert obj["spec"]["volumes"] == [{"name": "v", "configMap": {"name": "c"}}]


def test_field_names_are_case_sensitive() -> None:
    obj, warnings = decode('{"metadata":{"Name":"a"}}', validation=WARN)
    assert warnings == ['unknown field "metadata.Name"'] and obj == {"metadata": {}}


def test_an_error_is_reported_once_and_at_most_a_hundred() -> None:
    many = "{" + ",".join(f'"x{i}":1' for i in range(150)) + ',"x0":2}'
    _, warnings = decode(many, validation=WARN)
    assert len(warnings) == 100 and warnings[0] == 'unknown field "x0"'
    _, warnings = decode('{"metadata":{"a":1,"a":2,"a":3}}', validation=WARN)
    assert warnings == ['unknown field "metadata.a"']


def test_duplicates_decode_as_go_decodes_them() -> None:
    # Objects merge, maps gain keys, lists merge element by element, scalars: last wins.
    body = (
        '{"metadata":{"name":"a","labels":{"x":"1"}},"metadata":{"labels":{"y":"2"}},'
        '"spec":{"containers":[{"name":"c","image":"i"}]},'
        '"spec":{"containers":[{"image":"j"},{"name":"d"}],"restartPolicy":"Never"},'
        '"spec":{"restartPolicy":"Always"}}'
    )
    obj, warnings = decode(body, kind="Pod", validation=WARN)
    assert warnings == ['duplicate field "metadata"', 'duplicate field "spec"']
    assert obj == {
        "metadata": {"name": "a", "labels": {"x": "1", "y": "2"}},
        "spec": {"containers": [{"name": "c", "image": "j"}, {"name": "d"}],
                 "restartPolicy": "Always"},
    }  # fmt: skip
    obj, _ = decode('{"metadata":{"name":"a","labels":{"x":"1"}},"metadata":null}', validation=WARN)
    assert obj == {"metadata": {"name": "a", "labels": {"x": "1"}}}  # null into a struct: no-op
    obj, _ = decode('{"data":{"a":"1"},"data":null}', validation=WARN)
    assert obj == {"data": None}  # null into a map: nil


def test_protobuf_unknown_fields_follow_the_same_modes() -> None:
    config_map = schema.load().kind("v1", "ConfigMap")
    assert config_map is not None
    raw = pb.encode_object({"metadata": {"name": "a"}}, config_map) + b"\xa8\x06\x01"  # #101
    body = pb.encode_envelope(raw, api_version="v1", kind="ConfigMap")
    assert bad_request(body, PROTOBUF) == CM + 'strict decoding error: unknown field "#101"'
    obj, warnings = decode(body, PROTOBUF, WARN)
    assert warnings == ['unknown field "#101"']
    assert obj == {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a"}}
    assert decode(body, PROTOBUF, IGNORE) == (obj, [])


def test_warning_header_value() -> None:
    assert warning_header_value('unknown field "spec.foo"') == (
        '299 - "unknown field \\"spec.foo\\""'
    )
    assert warning_header_value("a\\b") == '299 - "a\\\\b"'


# ---------------------------------------------------------------------------------------
# Go's type errors


@pytest.mark.parametrize(
    ("body", "kind", "error"),
    [
        ('{"metadata":{"name":5}}', "ConfigMap",
         "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.name "
         "of type string"),
        ('{"metadata":{"generation":"1"}}', "ConfigMap",
         "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.generation "
         "of type int64"),
        ('{"metadata":{"generation":1.5}}', "ConfigMap",
         "json: cannot unmarshal number 1.5 into Go struct field ObjectMeta.metadata.generation "
         "of type int64"),
        ('{"metadata":{"generation":1e3}}', "ConfigMap",
         "json: cannot unmarshal number 1e3 into Go struct field ObjectMeta.metadata.generation "
         "of type int64"),
        ('{"metadata":[]}', "ConfigMap",
         "json: cannot unmarshal array into Go struct field ConfigMap.metadata "
         "of type v1.ObjectMeta"),
        ('{"data":{"a":true}}', "ConfigMap",
         "json: cannot unmarshal bool into Go struct field ConfigMap.data of type string"),
        ('{"data":"x"}', "ConfigMap",
         "json: cannot unmarshal string into Go struct field ConfigMap.data of type "
         "map[string]string"),
        ('{"immutable":"yes"}', "ConfigMap",
         "json: cannot unmarshal string into Go struct field ConfigMap.immutable of type bool"),
        ('{"binaryData":{"b":"!!"}}', "ConfigMap", "illegal base64 data at input byte 0"),
        ('{"binaryData":{"b":"YWJj\\nZA="}}', "ConfigMap", "illegal base64 data at input byte 8"),
        ('{"spec":{"containers":[{"name":"a","ports":[{"containerPort":70000000000}]}]}}', "Pod",
         "json: cannot unmarshal number 70000000000 into Go struct field "
         "ContainerPort.spec.containers.ports.containerPort of type int32"),
        ('{"spec":{"containers":{}}}', "Pod",
         "json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type "
         "[]v1.Container"),
        ('{"spec":{"containers":["a"]}}', "Pod",
         "json: cannot unmarshal string into Go struct field PodSpec.spec.containers of type "
         "v1.Container"),
        ('{"spec":{"restartPolicy":1}}', "Pod",
         "json: cannot unmarshal number into Go struct field PodSpec.spec.restartPolicy of type "
         "v1.RestartPolicy"),
        ('{"spec":{"volumes":[{"name":"v","hostPath":{"path":1}}]}}', "Pod",
         "json: cannot unmarshal number into Go struct field HostPathVolumeSource."
         "spec.volumes.hostPath.path of type string"),
        ('{"metadata":{"creationTimestamp":"2024-01-01"}}', "ConfigMap",
         'parsing time "2024-01-01" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "T"'),
        ('{"metadata":{"creationTimestamp":1}}', "ConfigMap",
         "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.creationTimestamp "
         "of type string"),
        ('{"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":"1 core"}}}]}}', "Pod",
         "quantities must match the regular expression "
         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
        ('{"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":"1ki"}}}]}}', "Pod",
         "unable to parse quantity's suffix"),
        ('{"spec":{"containers":[{"name":"a","readinessProbe":{"tcpSocket":{"port":true}}}]}}',
         "Pod",
         "json: cannot unmarshal bool into Go struct field TCPSocketAction."
         "spec.containers.readinessProbe.tcpSocket.port of type int32"),
    ],
)  # fmt: skip
def test_wrong_types_are_400_in_gos_words(body: str, kind: str, error: str) -> None:
    prefix = f'{kind} in version "v1" cannot be handled as a {kind}: '
    assert bad_request(body, kind=kind) == prefix + error
    # Whatever the validation mode, and before any strict error.
    assert bad_request(body[:-1] + ',"zzz":1}', kind=kind, validation=IGNORE) == prefix + error


def test_a_custom_unmarshalers_error_wins_over_an_earlier_type_error() -> None:
    body = '{"metadata":{"generation":"x","creationTimestamp":"now"}}'
    assert bad_request(body) == CM + (
        'parsing time "now" as "2006-01-02T15:04:05Z07:00": cannot parse "now" as "2006"'
    )


def test_values_that_decode() -> None:
    pod = {
        "metadata": {"creationTimestamp": "2024-01-01T10:00:00.5+02:00", "labels": None},
        "spec": {
            "containers": [
                {"name": "a", "resources": {"limits": {"cpu": 0.5, "memory": 1024}},
                 "livenessProbe": {"httpGet": {"port": "http"}}, "args": None},
                None,
            ]
        },
    }  # fmt: skip
    obj, warnings = decode(pod, kind="Pod")
    assert warnings == []
    # A number for a Quantity becomes its text, as Go stores it; the rest is kept as sent.
    assert obj["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "0.5", "memory": "1024"}}
    assert obj["metadata"]["creationTimestamp"] == "2024-01-01T10:00:00.5+02:00"
    lease = {"spec": {"renewTime": "2024-01-01T00:00:00.123456Z", "leaseDurationSeconds": 15}}
    assert decode(lease, kind="Lease", api_version="coordination.k8s.io/v1")[0] == lease
    event = {"eventTime": "2024-01-01T00:00:00.000001Z", "regarding": {"kind": "Pod"}}
    assert decode(event, kind="Event", api_version="events.k8s.io/v1")[0] == event


def test_json_read_as_go_reads_it() -> None:
    # Invalid UTF-8 inside a string is U+FFFD; so is a lone surrogate escape.
    obj, _ = decode(b'{"metadata":{"name":"a\xffb","namespace":"\\ud800x"}}')
    assert obj["metadata"] == {"name": "a\ufffdb", "namespace": "\ufffdx"}
    unrecognized = "the object provided is unrecognized (must be of type ConfigMap): "
    assert bad_request('{"a":') == (
        unrecognized + "couldn't get version/kind; json parse error: unexpected end of JSON input "
        '({"a":)'
    )
    assert bad_request('{"a" 1}') == (
        unrecognized + "couldn't get version/kind; json parse error: invalid character '1' after "
        'object key ({"a" 1})'
    )
    assert bad_request('{"a":NaN}').startswith(
        unrecognized + "couldn't get version/kind; json parse error: invalid character 'N' "
        "looking for beginning of value"
    )
    assert bad_request("[1]") == (
        unrecognized + "couldn't get version/kind; json parse error: json: cannot unmarshal array "
        'into Go value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
        'Kind string "json:\\"kind,omitempty\\"" } (5b315d)'
    )
    assert bad_request('{"kind":1}') == (
        unrecognized + "couldn't get version/kind; json parse error: json: cannot unmarshal "
        'number into Go struct field .kind of type string ({"kind":1})'
    )


def test_kind_and_api_version_must_be_the_urls() -> None:
    assert bad_request('{"kind":"Secret"}') == (
        "the kind in the data (Secret) does not match the expected kind (ConfigMap)"
    )
    assert bad_request('{"apiVersion":"v2","kind":"ConfigMap"}') == (
        "the API version in the data (v2) does not match the expected API version (v1)"
    )
    body = '{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","spec":{"x":1}}'
    assert bad_request(body, kind="Lease", api_version="coordination.k8s.io/v1") == (
        'Lease in version "v1" cannot be handled as a Lease: strict decoding error: '
        'unknown field "spec.x"'
    )
    with pytest.raises(LookupError):
        decode("{}", kind="Deployment", api_version="apps/v1")


def test_delete_options_are_decoded_leniently_with_plain_errors() -> None:
    def delete_options(body: str, content_type: str = "application/json") -> Any:
        return decode(body, content_type, STRICT, kind=None, api_version=None)

    assert delete_options('{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0,'
                          '"x":1}') == (
        {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}, []
    )  # fmt: skip
    with pytest.raises(BadRequestError) as caught:
        delete_options('{"gracePeriodSeconds":"5"}')
    assert caught.value.message == (
        "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds "
        "of type int64"
    )
    with pytest.raises(
        BadRequestError, match="decoded object cannot be converted to DeleteOptions"
    ):
        delete_options('{"kind":"Pod"}')
    assert delete_options("propagationPolicy: Foreground\n", "application/yaml") == (
        {"propagationPolicy": "Foreground"}, []
    )  # fmt: skip
    message = schema.load().message("k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions")
    body = pb.encode_envelope(
        pb.encode_object({"dryRun": ["All"]}, message), api_version="meta.k8s.io/v1",
        kind="DeleteOptions",
    )  # fmt: skip
    assert decode_body(body, PROTOBUF, kind=None, api_version=None, field_validation=STRICT) == (
        {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"]},
        [],
    )


# ---------------------------------------------------------------------------------------
# YAML

YAML_BODY = """\
kind: ConfigMap
apiVersion: v1
metadata:
  name: a
  labels:
    app: x
    app: y
  name: b
data:
  when: 2021-01-01
  count: "3"
  1: one
  true: "yes"
spec: {}
"""


def test_yaml_duplicates_are_goyamls_and_come_first() -> None:
    assert bad_request(YAML_BODY, "application/yaml") == CM + (
        "strict decoding error: yaml: unmarshal errors:\n"
        '  line 7: key "app" already set in map\n'
        '  line 8: key "name" already set in map, unknown field "spec"'
    )
    obj, warnings = decode(YAML_BODY, "application/yaml", WARN)
    assert warnings == [
        'line 7: key "app" already set in map',
        'line 8: key "name" already set in map',
        'unknown field "spec"',
    ]
    # The last value wins; timestamps stay text; integer and boolean keys become strings.
    assert obj == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": "b", "labels": {"app": "y"}},
        "data": {"when": "2021-01-01", "count": "3", "1": "one", "true": "yes"},
    }


def test_yaml_values_are_checked_like_json() -> None:
    assert bad_request("data:\n  a: yes\n", "application/yaml") == CM + (
        "json: cannot unmarshal bool into Go struct field ConfigMap.data of type string"
    )
    pod = "spec:\n  containers:\n  - name: a\n    ports:\n    - containerPort: 80.0\n"
    obj, _ = decode(pod, "application/yaml", kind="Pod")
    assert obj["spec"]["containers"][0]["ports"] == [{"containerPort": 80}]
    anchors = "metadata:\n  labels: &l {a: b}\n  annotations: *l\n"
    obj, _ = decode(anchors, "application/yaml")
    assert obj == {"metadata": {"labels": {"a": "b"}, "annotations": {"a": "b"}}}
    assert obj["metadata"]["labels"] is not obj["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("- a\n- b\n", "json: cannot unmarshal array into Go value of type"),
        ("just text\n", "json: cannot unmarshal string into Go value of type"),
        ("data: !!binary aGVsbG8=\n", "cannot be represented in JSON"),
        ("data: !!set {a, b}\n", "cannot be represented in JSON"),
        ("metadata:\n  generation: .nan\n", "json: unsupported value: NaN"),
        ("? [a, b]\n: c\n", "error converting YAML to JSON: yaml: line 1:"),
        ("a: b\n---\nc: d\n", "error converting YAML to JSON: yaml: line 2:"),
        ("a: [b\n", "error converting YAML to JSON: yaml: line 2:"),
        ("3.5: x\n", "unsupported map key of type: float"),
    ],
)
def test_yaml_that_json_cannot_carry_is_refused(body: str, error: str) -> None:
    message = bad_request(body, "application/yaml")
    assert message.startswith("the object provided is unrecognized (must be of type ConfigMap): ")
    assert error in message


def test_a_yaml_alias_bomb_is_refused_quickly() -> None:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    started = time.monotonic()
    message = bad_request("\n".join(lines) + "\n", "application/yaml")
    assert "document contains excessive aliasing" in message
    assert time.monotonic() - started < 5


# ---------------------------------------------------------------------------------------
# Nesting


def _nested(levels: int) -> Any:
    value: Any = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def test_objects_nest_at_most_max_depth_levels() -> None:
    # core/v1 List carries its items as raw JSON: the one place a body can nest freely.
    too_deep = f"the body of the request is nested too deeply (more than {MAX_DEPTH} levels)"
    # The body is level 1, items level 2, an item level 3.
    fits = {"items": [_nested(MAX_DEPTH - 2)]}
    assert decode(fits, kind="List")[0] == fits
    deeper = {"items": [_nested(MAX_DEPTH - 1)]}
    assert bad_request(deeper, kind="List") == too_deep
    yaml_text = json.dumps(deeper)  # JSON is YAML
    assert bad_request(yaml_text, "application/yaml", kind="List") == too_deep
    message = schema.load().kind("v1", "List")
    assert message is not None
    for value, ok in ((fits, True), (deeper, False)):
        body = pb.encode_envelope(pb.encode_object(value, message), api_version="v1", kind="List")
        if ok:
            assert decode(body, PROTOBUF, kind="List")[0]["items"] == value["items"]
        else:
            assert bad_request(body, PROTOBUF, kind="List") == too_deep
    # Very deep text fails in the parser, with the same answer.
    assert bad_request("[" * 100_000 + "]" * 100_000, kind="List") == too_deep
    # Unknown fields are dropped, never walked, but the bound holds for them too: a later
    # step (a patch of what is stored, a table) must never meet more nesting than it.
    assert bad_request({"x": _nested(500)}) == too_deep


def test_a_kubectl_sized_body_decodes_quickly() -> None:
    body = gojson.dumpb(
        {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a"},
         "data": {f"key{i}": "v" * 30 for i in range(20)}}
    )  # fmt: skip
    started = time.perf_counter()
    for _ in range(100):
        decode(body)
    assert (time.perf_counter() - started) / 100 < 0.002  # milliseconds would be a regression


# ---------------------------------------------------------------------------------------
# Anything in, a value or a 4xx out

_NAMES = st.sampled_from(
    ["metadata", "name", "labels", "spec", "containers", "ports", "containerPort", "image",
     "resources", "limits", "cpu", "data", "binaryData", "creationTimestamp", "httpGet", "port",
     "livenessProbe", "volumes", "configMap", "items", "x", "kind", "apiVersion"]
)  # fmt: skip
_LEAVES = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=8) | st.sampled_from(["1Gi", "2024-01-01T00:00:00Z", "YQ==", "http"])
)  # fmt: skip
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAMES | st.text(max_size=4),
                                                                inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


def _decodes_or_4xx(body: bytes, content_type: str, kind: str | None) -> None:
    try:
        obj, warnings = decode_body(
            body, content_type, kind=kind, api_version=None if kind is None else "v1",
            field_validation=WARN,
        )  # fmt: skip
    except (BadRequestError, UnsupportedMediaTypeError) as error:
        assert 400 <= error.code < 500
        return
    gojson.dumpb(obj)
    assert all(isinstance(warning, str) for warning in warnings)


@given(
    value=st.dictionaries(_NAMES, _VALUES, max_size=5),
    kind=st.sampled_from(["Pod", "ConfigMap", "Secret", None]),
    duplicate=st.booleans(),
)
def test_any_json_object_decodes_or_gives_a_4xx(
    value: dict[str, Any], kind: str | None, duplicate: bool
) -> None:
    text = json.dumps(value)
    if duplicate and len(text) > 2:
        text = text[:-1] + "," + text[1:]  # every member twice
    _decodes_or_4xx(text.encode(), "application/json", kind)
    _decodes_or_4xx(text.encode(), "application/yaml", kind)


@given(text=st.binary(max_size=60), media=st.sampled_from(["application/json", "application/yaml"]))
def test_any_bytes_decode_or_give_a_4xx(text: bytes, media: str) -> None:
    _decodes_or_4xx(text, media, "Pod")
