"""Kubernetes' protobuf bodies: real kubectl bodies, Go's encoding rules, round trips, fuzzing.

* kubectl 1.37's own bodies (tests/data/kubectl-1.37, captured by
  tests/support/kubectl_capture.py) decode to exactly the JSON the same command prints with
  ``--dry-run=client -o json``, member order included, and re-encode to the same bytes;
  when that kubectl is installed, a fresh capture still matches the committed files;
* every ``json.Marshal`` rule the decoder applies, on hand-made messages;
* a property: any canonical object generated from the schema survives encode → decode
  unchanged, in protobuf and in JSON; another: random or mutated bytes give an object or a
  4xx Status, never another exception;
* the generated schema agrees with the official Python client's models.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from k8s_strategies import objects
from kubectl_capture import COMMANDS, DATA_DIR, KUBECTL, body_file, capture

from watchcache.wire import gojson, schema
from watchcache.wire import protobuf as pb
from watchcache.wire.body import PROTOBUF, decode_body
from watchcache.wire.errors import BadRequestError, StatusError
from watchcache.wire.write_options import FieldValidation

SCHEMA = schema.load()


def kind_message(api_version: str, kind: str) -> schema.Message:
    message = SCHEMA.kind(api_version, kind)
    assert message is not None, (api_version, kind)
    return message


CONFIG_MAP = kind_message("v1", "ConfigMap")
META = "k8s.io.apimachinery.pkg.apis.meta.v1"
APIEXTENSIONS = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1"
PROTOBUF_CAPTURES = sorted(p.stem for p in DATA_DIR.glob("*.pb"))
JSON_CAPTURES = sorted(p.stem for p in DATA_DIR.glob("*.body"))


def request_meta(name: str) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads((DATA_DIR / f"{name}.request.json").read_text())
    return meta


def kind_of_path(path: str) -> tuple[str | None, str | None]:
    resource = path.rstrip("/").rsplit("/", 1)[-1]
    kinds = {
        "configmaps": "ConfigMap",
        "secrets": "Secret",
        "namespaces": "Namespace",
        "pods": "Pod",
        "services": "Service",
        "serviceaccounts": "ServiceAccount",
        "resourcequotas": "ResourceQuota",
    }
    return kinds[resource], "v1"


def ordered(value: Any) -> str:
    """JSON text that keeps member order, so equal texts mean equal objects *and* order."""
    return gojson.dumps(value)


def envelope(obj: dict[str, Any], message: schema.Message, api_version: str, kind: str) -> bytes:
    return pb.encode_envelope(pb.encode_object(obj, message), api_version=api_version, kind=kind)


# ---------------------------------------------------------------------------------------
# kubectl's bodies


def test_the_captures_cover_protobuf_and_json() -> None:
    assert len(PROTOBUF_CAPTURES) >= 7 and "create-configmap" in PROTOBUF_CAPTURES
    assert "run-nginx" in JSON_CAPTURES and "delete-configmap" in JSON_CAPTURES


@pytest.mark.parametrize("name", PROTOBUF_CAPTURES)
def test_kubectl_protobuf_body_decodes_to_what_kubectl_prints(name: str) -> None:
    meta = request_meta(name)
    assert meta["contentType"] == PROTOBUF
    kind, api_version = kind_of_path(meta["path"])
    body = (DATA_DIR / f"{name}.pb").read_bytes()
    obj, warnings = decode_body(
        body, meta["contentType"], kind=kind, api_version=api_version,
        field_validation=FieldValidation(dict(meta["query"]).get("fieldValidation", "Strict")),
    )  # fmt: skip
    printed = json.loads((DATA_DIR / f"{name}.json").read_text())
    assert ordered(obj) == ordered(printed)
    assert warnings == []


@pytest.mark.parametrize("name", PROTOBUF_CAPTURES)
def test_kubectl_protobuf_body_reencodes_to_the_same_bytes(name: str) -> None:
    body = (DATA_DIR / f"{name}.pb").read_bytes()
    env = pb.decode_envelope(body)
    message = SCHEMA.kind(env.api_version, env.kind)
    assert message is not None and env.raw is not None
    obj, unknown = pb.decode_object(env.raw, message)
    assert unknown == []
    assert envelope(obj, message, env.api_version, env.kind) == body


def test_kubectl_run_sends_json_that_decodes_unchanged() -> None:
    body = (DATA_DIR / "run-nginx.body").read_bytes()
    obj, warnings = decode_body(
        body, "application/json", kind="Pod", api_version="v1",
        field_validation=FieldValidation.STRICT,
    )  # fmt: skip
    assert warnings == []
    assert ordered(obj) == ordered(json.loads(body))
    # What it prints with --dry-run=client also names the namespace, which the real
    # request leaves to the URL.
    printed = json.loads((DATA_DIR / "run-nginx.json").read_text())
    assert printed["metadata"].pop("namespace") == "default"
    assert ordered(obj) == ordered(printed)


def test_kubectl_delete_options_body() -> None:
    body = (DATA_DIR / "delete-configmap.body").read_bytes()
    obj, warnings = decode_body(
        body, "application/json", kind=None, api_version=None,
        field_validation=FieldValidation.STRICT,
    )  # fmt: skip
    assert obj == {"propagationPolicy": "Background"} and warnings == []


def _kubectl_version(kubectl: Path) -> str:
    result = subprocess.run(
        [str(kubectl), "version", "--client", "-o", "json"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        return ""
    return str(json.loads(result.stdout)["clientVersion"]["gitVersion"])


@pytest.mark.skipif(
    not KUBECTL.exists() and shutil.which("kubectl") is None, reason="kubectl 1.37 not installed"
)
def test_kubectl_still_sends_the_committed_bodies() -> None:
    """A fresh capture (a real kubectl against tests/support/kubectl_capture.py's fake
    server) gives the committed bytes: the test data is what kubectl sends."""
    if not _kubectl_version(KUBECTL).startswith("v1.37."):
        pytest.skip("the committed bodies are kubectl 1.37's")
    for name in COMMANDS:
        request, printed = capture(KUBECTL, name)
        path = body_file(name, request)
        assert path.exists(), f"{name}: kubectl now sends {request.content_type}"
        assert request.body == path.read_bytes(), name
        if printed is not None:
            assert json.loads(printed) == json.loads((DATA_DIR / f"{name}.json").read_text())


# ---------------------------------------------------------------------------------------
# Go's rules, on hand-made messages


def _field(number: int, wire_type: int) -> bytes:
    out = bytearray()
    pb._put_varint(out, number << 3 | wire_type)
    return bytes(out)


def _ld(number: int, payload: bytes) -> bytes:
    out = bytearray()
    pb._put_bytes(out, number << 3 | 2, payload)
    return bytes(out)


def _varint_field(number: int, value: int) -> bytes:
    out = bytearray(_field(number, 0))
    pb._put_varint(out, value)
    return bytes(out)


def decode(raw: bytes, message: schema.Message | None = None) -> dict[str, Any]:
    obj, unknown = pb.decode_object(raw, message or CONFIG_MAP)
    assert unknown == []
    return obj


def test_empty_configmap_is_an_empty_metadata() -> None:
    # ObjectMeta is a non-pointer struct: always written, even empty; data is a nil map.
    assert ordered(decode(b"")) == '{"metadata":{}}'


def test_omitempty_drops_zero_scalars_that_go_always_marshals() -> None:
    meta = _ld(1, b"") + _ld(2, b"") + _varint_field(7, 0) + _ld(8, b"")
    assert decode(_ld(1, meta)) == {"metadata": {}}


def test_a_pointer_that_is_set_stays_even_when_zero() -> None:
    raw = _ld(1, _ld(1, b"x")) + _varint_field(4, 0)  # immutable: *bool = false
    assert ordered(decode(raw)) == '{"metadata":{"name":"x"},"immutable":false}'


def test_times() -> None:
    meta = _ld(1, b"x") + _ld(8, _varint_field(1, 1700000000) + _varint_field(2, 999)) + _ld(9, b"")
    obj = decode(_ld(1, meta))
    # Time keeps whole seconds; a deletionTimestamp that is set but zero is null.
    assert obj["metadata"] == {
        "name": "x",
        "creationTimestamp": "2023-11-14T22:13:20Z",
        "deletionTimestamp": None,
    }
    lease = kind_message("coordination.k8s.io/v1", "Lease")
    spec = _ld(3, _varint_field(1, 1700000000) + _varint_field(2, 123456789))
    assert decode(_ld(2, spec), lease)["spec"] == {"acquireTime": "2023-11-14T22:13:20.123456Z"}
    # An empty Timestamp is the zero time; a present one without seconds is 1970.
    assert decode(_ld(1, _ld(8, b"")))["metadata"] == {}
    assert decode(_ld(1, _ld(8, _varint_field(2, 5))))["metadata"] == {
        "creationTimestamp": "1970-01-01T00:00:00Z"
    }


def test_secret_bytes_are_base64_and_empty_is_empty() -> None:
    secret = kind_message("v1", "Secret")
    entry = _ld(1, b"k") + _ld(2, b"\x00\xff")
    empty = _ld(1, b"e") + _ld(2, b"")
    no_value = _ld(1, b"n")
    obj = decode(_ld(2, entry) + _ld(2, empty) + _ld(2, no_value), secret)
    assert obj["data"] == {"e": "", "k": "AP8=", "n": ""}


def test_maps_are_sorted_and_the_last_entry_wins() -> None:
    entries = [_ld(2, _ld(1, k) + _ld(2, v)) for k, v in ((b"b", b"1"), (b"a", b"2"), (b"b", b"3"))]
    assert ordered(decode(b"".join(entries))) == '{"metadata":{},"data":{"a":"2","b":"3"}}'


def test_repeated_messages_merge_and_scalars_take_the_last_value() -> None:
    raw = _ld(1, _ld(1, b"first") + _ld(11, _ld(1, b"a") + _ld(2, b"1"))) + _ld(
        1, _ld(1, b"second") + _ld(11, _ld(1, b"b") + _ld(2, b"2"))
    )
    assert decode(raw)["metadata"] == {"name": "second", "labels": {"a": "1", "b": "2"}}


def test_packed_and_unpacked_repeated_integers() -> None:
    pod = kind_message("v1", "Pod")
    packed = bytearray()
    for value in (1, 2):
        pb._put_varint(packed, value)
    security = _varint_field(4, 7) + _ld(4, bytes(packed)) + _varint_field(4, -1)
    obj = decode(_ld(2, _ld(14, security)), pod)
    assert obj["spec"]["securityContext"] == {"supplementalGroups": [7, 1, 2, -1]}


def test_int_or_string_and_quantity() -> None:
    service = kind_message("v1", "Service")
    port_int = _ld(4, _varint_field(1, 0) + _varint_field(2, 8080))
    port_str = _ld(4, _varint_field(1, 1) + _ld(3, b"http"))
    ports = _ld(1, _varint_field(3, 80) + port_int) + _ld(1, _varint_field(3, 81) + port_str)
    spec = decode(_ld(2, ports), service)["spec"]
    assert [p["targetPort"] for p in spec["ports"]] == [8080, "http"]
    quota = kind_message("v1", "ResourceQuota")
    hard = _ld(1, _ld(1, b"cpu") + _ld(2, _ld(1, b"1500m"))) + _ld(1, _ld(1, b"pods"))
    assert decode(_ld(2, hard), quota)["spec"] == {"hard": {"cpu": "1500m", "pods": "0"}}
    with pytest.raises(pb.ProtobufError, match="quantities must match"):
        decode(_ld(2, _ld(1, _ld(1, b"cpu") + _ld(2, _ld(1, b"lots")))), quota)
    with pytest.raises(pb.ProtobufError, match=r"impossible IntOrString\.Type"):
        decode(_ld(2, _ld(1, _ld(4, _varint_field(1, 7)))), service)


def test_managed_fields_carry_their_json() -> None:
    fields = b'{"f:data":{".":{},"f:a":{}}}'
    entry = _ld(1, b"kubectl") + _ld(7, _ld(1, fields))
    obj = decode(_ld(1, _ld(17, entry)))
    assert obj["metadata"]["managedFields"] == [
        {"manager": "kubectl", "fieldsV1": {"f:data": {".": {}, "f:a": {}}}}
    ]
    with pytest.raises(pb.ProtobufError, match=r"MarshalJSON for type v1\.FieldsV1"):
        decode(_ld(1, _ld(17, _ld(7, _ld(1, b"not json")))))


def test_strings_that_are_not_utf8_become_replacement_characters() -> None:
    assert decode(_ld(1, _ld(1, b"a\xffb\xe2\x82")))["metadata"]["name"] == "a\ufffdb\ufffd\ufffd"


def test_unknown_fields_are_reported_with_their_path_and_dropped() -> None:
    raw = _ld(1, _ld(1, b"x") + _varint_field(99, 1)) + _ld(50, b"junk")
    obj, unknown = pb.decode_object(raw, CONFIG_MAP)
    assert obj == {"metadata": {"name": "x"}}
    assert unknown == ["metadata.#99", "#50"]
    pod = kind_message("v1", "Pod")
    containers = _ld(2, _ld(1, b"a")) + _ld(2, _ld(1, b"b") + _varint_field(77, 0))
    _, unknown = pb.decode_object(_ld(2, containers), pod)
    assert unknown == ["spec.containers[1].#77"]


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (_varint_field(1, 5), "proto: wrong wireType = 0 for field ObjectMeta"),
        (_ld(4, b""), "proto: wrong wireType = 2 for field Immutable"),
        (b"\x0a\x05ab", "unexpected EOF"),
        (b"\x0a", "unexpected EOF"),
        (b"\x0a" + b"\xff" * 9 + b"\x01", "proto: negative length found during unmarshaling"),
        (b"\x0a" + b"\xff" * 10 + b"\x01", "proto: integer overflow"),
        (b"\x0c", "proto: ConfigMap: wiretype end group for non-group"),
        (b"\x00", "proto: ConfigMap: illegal tag 0 (wire type 0)"),
        (b"\xfb\x01", "unexpected EOF"),  # an unknown group that never ends
        (b"\x4c", "proto: ConfigMap: wiretype end group for non-group"),
        (b"\x4f", "proto: illegal wireType 7"),
        (b"\x51\x00", "unexpected EOF"),
    ],
)
def test_malformed_messages_fail_with_gogos_words(raw: bytes, error: str) -> None:
    with pytest.raises(pb.ProtobufError) as caught:
        pb.decode_object(raw, CONFIG_MAP)
    assert str(caught.value) == error


def test_envelope_errors_and_defaults() -> None:
    def decode_as_configmap(body: bytes) -> dict[str, Any]:
        obj, _ = decode_body(
            body, PROTOBUF, kind="ConfigMap", api_version="v1",
            field_validation=FieldValidation.STRICT,
        )  # fmt: skip
        return obj

    for body, detail in (
        (b"", "empty data"),
        (b"{}", "provided data does not appear to be a protobuf message, expected prefix "
                "[107 56 115 0]"),
        (b"k8s\x00", "empty body"),
        (b"k8s\x00\x0a\x09", "unexpected EOF"),
    ):  # fmt: skip
        with pytest.raises(BadRequestError) as caught:
            decode_as_configmap(body)
        assert caught.value.message.startswith(
            f"the object provided is unrecognized (must be of type ConfigMap): {detail} ("
        )
    # No typeMeta: the URL's kind and version; a raw that fails: the kind's message.
    assert decode_as_configmap(pb.MAGIC + _ld(2, _ld(1, _ld(1, b"x")))) == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": "x"},
    }
    with pytest.raises(BadRequestError) as caught:
        decode_as_configmap(pb.MAGIC + _ld(2, b"\x08\x01"))
    assert caught.value.message == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
        "proto: wrong wireType = 0 for field ObjectMeta"
    )
    with pytest.raises(BadRequestError, match=r"the kind in the data \(Secret\)"):
        decode_as_configmap(envelope({}, CONFIG_MAP, "v1", "Secret"))


# ---------------------------------------------------------------------------------------
# Properties

KINDS = [
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Namespace"),
    ("v1", "Pod"),
    ("v1", "Service"),
    ("v1", "Event"),
    ("v1", "List"),
    ("coordination.k8s.io/v1", "Lease"),
    ("events.k8s.io/v1", "Event"),
    ("autoscaling/v1", "Scale"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinitionList"),
    ("meta.k8s.io/v1", "DeleteOptions"),
    ("meta.k8s.io/v1", "Status"),
    ("meta.k8s.io/v1", "APIResourceList"),
]


@st.composite
def kind_objects(draw: st.DrawFn) -> tuple[str, str, schema.Message, dict[str, Any]]:
    api_version, kind = draw(st.sampled_from(KINDS))
    message = SCHEMA.kind(api_version, kind)
    assert message is not None
    return api_version, kind, message, draw(objects(message))


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=kind_objects())
def test_encode_then_decode_gives_the_same_json(
    case: tuple[str, str, schema.Message, dict[str, Any]],
) -> None:
    api_version, kind, message, obj = case
    raw = pb.encode_object(obj, message)
    decoded, unknown = pb.decode_object(raw, message)
    assert unknown == []
    assert ordered(decoded) == ordered(obj)
    assert pb.encode_object(decoded, message) == raw
    if kind in ("DeleteOptions", "Status", "APIResourceList"):
        return
    # The same object through decode_body, as protobuf and as JSON.
    expected = ordered({"kind": kind, "apiVersion": api_version, **obj})
    for body, media in (
        (pb.encode_envelope(raw, api_version=api_version, kind=kind), PROTOBUF),
        (gojson.dumpb({"kind": kind, "apiVersion": api_version, **obj}), "application/json"),
    ):
        got, warnings = decode_body(
            body, media, kind=kind, api_version=api_version,
            field_validation=FieldValidation.STRICT,
        )  # fmt: skip
        assert (ordered(got), warnings) == (expected, [])


def _decode_or_status(body: bytes, message_kind: tuple[str, str]) -> None:
    api_version, kind = message_kind
    try:
        obj, warnings = decode_body(
            body, PROTOBUF, kind=kind, api_version=api_version,
            field_validation=FieldValidation.WARN,
        )  # fmt: skip
    except StatusError as error:
        assert 400 <= error.code < 500, error
        return
    gojson.dumpb(obj)  # whatever comes back can be stored and served
    assert all(isinstance(w, str) for w in warnings)


_SEEDS = [(DATA_DIR / f"{name}.pb").read_bytes() for name in PROTOBUF_CAPTURES]


@given(
    seed=st.sampled_from(_SEEDS),
    edits=st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 255), st.sampled_from("rid")),
        min_size=1,
        max_size=6,
    ),
    kind=st.sampled_from([("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Pod"), ("v1", "Service")]),
)
def test_mutated_bodies_decode_or_give_a_4xx(
    seed: bytes, edits: list[tuple[int, int, str]], kind: tuple[str, str]
) -> None:
    body = bytearray(seed)
    for position, byte, how in edits:
        at = position % (len(body) + 1)
        if how == "r" and at < len(body):
            body[at] = byte
        elif how == "i":
            body.insert(at, byte)
        elif at < len(body):
            del body[at]
    _decode_or_status(bytes(body), kind)


@given(tail=st.binary(max_size=200), prefix=st.booleans())
def test_random_bytes_decode_or_give_a_4xx(tail: bytes, prefix: bool) -> None:
    _decode_or_status((pb.MAGIC if prefix else b"") + tail, ("v1", "Pod"))


def test_a_long_body_of_garbage_does_not_hang() -> None:
    # Many tiny unknown groups and varints: linear work, then an answer.
    body = pb.MAGIC + _ld(2, b"\xfb\x01" * 1000 + b"\xfc\x01" * 1000 + b"\xf8\x01\x01" * 50_000)
    obj, warnings = decode_body(
        body, PROTOBUF, kind="ConfigMap", api_version="v1", field_validation=FieldValidation.WARN
    )
    assert obj["kind"] == "ConfigMap" and warnings == ['unknown field "#31"']


# ---------------------------------------------------------------------------------------
# The schema against the official Python client


def _client_model(message: schema.Message) -> Any:
    package = message.name.rsplit(".", 2)
    short = package[-1]
    group = message.name.split(".")[-3]
    names = [f"V1{short}"]
    if group == "core":
        names.insert(0, f"CoreV1{short}")
    if group == "events":
        names.insert(0, f"EventsV1{short}")
    if group == "apiextensions":
        names.insert(0, f"ApiextensionsV1{short}")
    for name in names:
        model = getattr(kubernetes.client, name, None)
        if model is not None:
            return model
    return None


def _client_shape(text: str) -> tuple[str, str]:
    """(shape, element) of a type in the client's notation: ``List[V1Pod]``,
    ``Dict[str, bytes]``, ``datetime``; any model class is ``model``."""
    shape = "single"
    if text.startswith("List["):
        shape, text = "list", text[5:-1]
    elif text.startswith("Dict[str, "):
        shape, text = "map", text[10:-1]
    if text.startswith(("V1", "CoreV1", "EventsV1", "ApiextensionsV1")):
        text = "model"
    return shape, text


_SPECIAL_ELEMENTS = {
    "time": "datetime",
    "microtime": "datetime",
    "quantity": "str",
    "intorstring": "object",
    "rawextension": "object",
    "fieldsv1": "object",
    "json": "object",
    "orbool": "object",
    "orarray": "object",
    "orstringarray": "object",
}
_SCALAR_ELEMENTS = {schema.STRING: "str", schema.BOOL: "bool", schema.INT32: "int",
                    schema.INT64: "int", schema.BYTES: "bytes",
                    schema.DOUBLE: "float"}  # fmt: skip


def _our_shape(fld: schema.Field) -> tuple[str, str]:
    shape = {schema.SINGLE: "single", schema.LIST: "list", schema.MAP: "map"}[fld.shape]
    if fld.kind != schema.MESSAGE:
        element = _SCALAR_ELEMENTS[fld.kind]
        # The client takes a lone []byte field as base64 text.
        return shape, "str" if element == "bytes" and shape == "single" else element
    assert fld.message is not None
    special = fld.message.special
    if special == "verbs":
        return "list", "str"
    if not fld.message.fields:  # an empty struct (CustomResourceSubresourceStatus): no model
        return shape, "object"
    return shape, _SPECIAL_ELEMENTS.get(special, "model")


#: The client's model for core/v1 Preconditions is meta/v1's (same name, one more field).
_NOT_THE_CLIENTS = {"k8s.io.api.core.v1.Preconditions"}
#: Fields the client 37 models have and kubernetes/api (the schema's source) does not.
_CLIENT_ONLY = {("k8s.io.api.core.v1.NodeSystemInfo", "runningInUserNamespace")}
#: Lone []byte fields the client types as bytes, not as base64 text (its OpenAPI differs).
_CLIENT_BYTES = {(f"{APIEXTENSIONS}.WebhookClientConfig", "caBundle")}


def test_schema_agrees_with_the_python_clients_models() -> None:
    compared = 0
    for name, message in SCHEMA.messages.items():
        if message.special or not name.startswith(("k8s.io.api.", META, APIEXTENSIONS)):
            continue
        model = _client_model(message)
        if model is None or name in _NOT_THE_CLIENTS:
            continue
        ours = {fld.json_name: fld for fld in message.by_json.values()}
        theirs = {
            json_name: client_type
            for json_name, client_type in zip(
                model.attribute_map.values(), model.openapi_types.values(), strict=True
            )
            if (name, json_name) not in _CLIENT_ONLY
        }
        assert set(ours) == set(theirs), name
        for json_name, fld in ours.items():
            expected = _our_shape(fld)
            if (name, json_name) in _CLIENT_BYTES:
                expected = ("single", "bytes")
            assert expected == _client_shape(theirs[json_name]), (name, json_name)
        compared += 1
    assert compared >= 230


def test_the_schema_says_where_it_comes_from() -> None:
    assert set(SCHEMA.sources) == {
        "kubernetes/api",
        "kubernetes/apimachinery",
        "kubernetes/apiextensions-apiserver",
    }
    assert all(len(commit) == 40 for commit in SCHEMA.sources.values())
    for api_version, kind in KINDS:
        assert SCHEMA.kind(api_version, kind) is not None
    assert base64.b64decode("AP8=") == b"\x00\xff"


# Checkouts of kubernetes/api, kubernetes/apimachinery and kubernetes/apiextensions-apiserver,
# when the environment names them.
_API_REPO = Path(os.environ.get("K8S_API_REPO", "/nonexistent"))
_APIMACHINERY_REPO = Path(os.environ.get("K8S_APIMACHINERY_REPO", "/nonexistent"))
_APIEXTENSIONS_REPO = Path(os.environ.get("K8S_APIEXTENSIONS_REPO", "/nonexistent"))


@pytest.mark.skipif(
    not (_API_REPO.exists() and _APIMACHINERY_REPO.exists() and _APIEXTENSIONS_REPO.exists()),
    reason="no kubernetes/api, kubernetes/apimachinery and kubernetes/apiextensions-apiserver "
    "checkouts (K8S_API_REPO, K8S_APIMACHINERY_REPO, K8S_APIEXTENSIONS_REPO)",
)
def test_the_committed_schema_is_what_the_generator_makes(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "k8s_schema.json"
    subprocess.run(
        [sys.executable, str(root / "scripts" / "gen-schema.py"), "--api", str(_API_REPO),
         "--apimachinery", str(_APIMACHINERY_REPO), "--apiextensions", str(_APIEXTENSIONS_REPO),
         "--out", str(out)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    generated = json.loads(out.read_text())
    if generated["sources"] != SCHEMA.sources:
        pytest.skip(f"the checkouts are at {generated['sources']}, not the schema's commits")
    assert out.read_bytes() == schema.SCHEMA_FILE.read_bytes()
