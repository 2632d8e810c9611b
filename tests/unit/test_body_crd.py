"""CustomResourceDefinition and Scale bodies: JSON, YAML and protobuf, as kube-apiserver takes them.

* Real CRDs decode strictly in all three media types to the object sent (protobuf: to what
  Go's ``json.Marshal`` writes for it): kopf's peering CRDs, one built with the official
  Python client's models, and a multi-version CRD with printer columns, subresources,
  ``x-kubernetes-*`` extensions, int-or-string, and ``additionalProperties`` both a bool
  and a schema.
* Unknown fields are strict errors in kube-apiserver's words, except inside ``items``,
  ``additionalProperties``, ``additionalItems`` and ``dependencies``: apiextensions'
  hand-written UnmarshalJSON decodes those with a plain ``json.Unmarshal``, so Kubernetes
  drops unknown fields there without a word (kubernetes/kubernetes issue 128033).
* The wrappers take exactly the JSON forms ``marshal.go`` takes; a wrong type fails with
  the Go decoder's text, named after the field holding the outermost wrapper.
* A ``Scale`` (autoscaling/v1, the body of ``/scale``) decodes like any other kind.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import kubernetes.client
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from watchcache.wire import gojson, schema
from watchcache.wire import protobuf as pb
from watchcache.wire.body import PROTOBUF, YAML, decode_body
from watchcache.wire.errors import BadRequestError, StatusError
from watchcache.wire.write_options import FieldValidation

STRICT, WARN, IGNORE = FieldValidation.STRICT, FieldValidation.WARN, FieldValidation.IGNORE
JSON = "application/json"
CRD_VERSION = "apiextensions.k8s.io/v1"
CRD = "CustomResourceDefinition"
CANNOT = f'{CRD} in version "v1" cannot be handled as a {CRD}: '
SCHEMA = schema.load()
PROPS = SCHEMA.message("k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps")
#: What Go writes for a CRD without status (a struct, so never left out).
ZERO_STATUS = {"conditions": None, "acceptedNames": {"plural": "", "kind": ""},
               "storedVersions": None}  # fmt: skip

# The two CRDs kopf's peering needs (kopf.dev/v1 KopfPeering and ClusterKopfPeering, with the
# free-form status kopf writes), as kopf documents them: its wheel does not ship the YAML.
KOPF_PEERING_YAML = """\
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusterkopfpeerings.kopf.dev
spec:
  scope: Cluster
  group: kopf.dev
  names:
    kind: ClusterKopfPeering
    plural: clusterkopfpeerings
    singular: clusterkopfpeering
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: kopfpeerings.kopf.dev
spec:
  scope: Namespaced
  group: kopf.dev
  names:
    kind: KopfPeering
    plural: kopfpeerings
    singular: kopfpeering
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
"""
KOPF_PEERINGS = [doc for doc in yaml.safe_load_all(KOPF_PEERING_YAML) if doc]

# Two versions; every kind of member a CRD author writes. Members whose Go zero value
# json.Marshal leaves out (priority 0, exclusiveMaximum false) are not used, so the protobuf
# form decodes to this very object (plus the zero status).
CRONTAB_YAML = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
  labels: {app: crontab}
  annotations: {api-approved.kubernetes.io: unapproved}
spec:
  group: stable.example.com
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    listKind: CronTabList
    shortNames: [ct]
    categories: [all]
  conversion: {strategy: None}
  versions:
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    deprecationWarning: stable.example.com/v1beta1 CronTab is deprecated; use v1
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
    additionalPrinterColumns:
    - {name: Spec, type: string, jsonPath: .spec.cronSpec, description: The cron spec}
    - {name: Replicas, type: integer, format: int32, jsonPath: .spec.replicas, priority: 1}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    selectableFields:
    - {jsonPath: .spec.image}
    schema:
      openAPIV3Schema:
        type: object
        description: A cron job.
        required: [spec]
        properties:
          spec:
            type: object
            required: [cronSpec]
            x-kubernetes-validations:
            - rule: self.replicas <= self.maxReplicas
              message: replicas must not exceed maxReplicas
              fieldPath: .replicas
              reason: FieldValueInvalid
            - rule: "!has(oldSelf.image) || has(self.image)"
              messageExpression: "'image cannot be removed'"
              optionalOldSelf: true
            properties:
              cronSpec: {type: string, pattern: '^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$'}
              image: {type: string, minLength: 1, maxLength: 253}
              replicas: {type: integer, format: int32, minimum: 1, maximum: 10, default: 1}
              maxReplicas: {type: integer, default: 10, nullable: true}
              ratio: {type: number, multipleOf: 0.25, minimum: -1.5, maximum: 1.5,
                      exclusiveMinimum: true}
              port:
                x-kubernetes-int-or-string: true
                anyOf: [{type: integer}, {type: string}]
              policy: {type: string, enum: [Allow, Forbid, Replace], default: Allow}
              labels:
                type: object
                additionalProperties: {type: string, maxLength: 63}
                x-kubernetes-map-type: granular
              closed:
                type: object
                additionalProperties: false
                properties:
                  a: {type: string}
              ports:
                type: array
                maxItems: 16
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer, format: int32}
              args:
                type: array
                x-kubernetes-list-type: atomic
                items: {type: string}
              tags:
                type: array
                x-kubernetes-list-type: set
                uniqueItems: true
                items: {type: string}
              config:
                type: object
                x-kubernetes-preserve-unknown-fields: true
              template:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
              extra:
                type: object
                properties:
                  a: {type: string}
                  b: {type: string}
                dependencies:
                  a: [b]
                example: {a: x, b: y}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
              lastScheduleTime: {type: string, format: date-time}
"""
CRONTAB: dict[str, Any] = yaml.safe_load(CRONTAB_YAML)


def decode(
    body: bytes | dict[str, Any],
    content_type: str = JSON,
    validation: FieldValidation = STRICT,
    kind: str = CRD,
    api_version: str = CRD_VERSION,
) -> tuple[dict[str, Any], list[str]]:
    if isinstance(body, dict):
        body = gojson.dumpb(body)
    return decode_body(
        body, content_type, kind=kind, api_version=api_version, field_validation=validation
    )


def bad_request(*args: Any, **options: Any) -> str:
    with pytest.raises(BadRequestError) as caught:
        decode(*args, **options)
    assert caught.value.code == 400
    return caught.value.message


def message(api_version: str, kind: str) -> schema.Message:
    found = SCHEMA.kind(api_version, kind)
    assert found is not None
    return found


def protobuf_body(obj: dict[str, Any], api_version: str = CRD_VERSION, kind: str = CRD) -> bytes:
    """The body a Go client sends for ``obj`` (the encoder writes what gogo's Marshal does)."""
    members = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    raw = pb.encode_object(members, message(api_version, kind))
    return pb.encode_envelope(raw, api_version=api_version, kind=kind)


def bodies(obj: dict[str, Any]) -> list[tuple[bytes, str]]:
    return [
        (gojson.dumpb(obj), JSON),
        (yaml.safe_dump(obj, sort_keys=False).encode(), YAML),
        (protobuf_body(obj), PROTOBUF),
    ]


def with_schema(schema_value: Any) -> dict[str, Any]:
    """A one-version CRD whose openAPIV3Schema is ``schema_value``."""
    return {
        "apiVersion": CRD_VERSION,
        "kind": CRD,
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "things", "kind": "Thing"},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1", "served": True, "storage": True,
                 "schema": {"openAPIV3Schema": schema_value}}
            ],
        },
    }  # fmt: skip


def stored_schema(obj: dict[str, Any]) -> Any:
    return obj["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


# ---------------------------------------------------------------------------------------
# Real CRDs


def test_the_schema_knows_crds_and_scale() -> None:
    for kind in (CRD, "CustomResourceDefinitionList"):
        assert SCHEMA.kind(CRD_VERSION, kind) is not None
    assert SCHEMA.kind("autoscaling/v1", "Scale") is not None
    props = PROPS
    names = ("items", "additionalProperties", "additionalItems", "dependencies", "default")
    specials = {name: props.by_json[name].message for name in names}
    assert {name: m.special for name, m in specials.items() if m is not None} == {
        "items": "orarray",
        "additionalProperties": "orbool",
        "additionalItems": "orbool",
        "dependencies": "orstringarray",
        "default": "json",
    }
    assert props.by_json["maximum"].kind == schema.DOUBLE


@pytest.mark.parametrize("index", range(len(KOPF_PEERINGS)))
def test_kopf_peering_crds_decode_strictly_in_every_media_type(index: int) -> None:
    crd = KOPF_PEERINGS[index]
    for body, media in bodies(crd):
        obj, warnings = decode(body, media)
        expected = {**crd, "status": ZERO_STATUS} if media == PROTOBUF else crd
        assert (obj, warnings) == (expected, []), media


def test_the_kopf_peering_yaml_stream_decodes_document_by_document() -> None:
    # kubectl sends each document of a file as its own request.
    for text in KOPF_PEERING_YAML.split("---\n"):
        if text.strip():
            obj, warnings = decode(text.encode(), YAML)
            assert warnings == [] and obj["spec"]["group"] == "kopf.dev"


def test_a_multi_version_crd_decodes_strictly_in_every_media_type() -> None:
    for body, media in bodies(CRONTAB):
        obj, warnings = decode(body, media)
        expected = {**CRONTAB, "status": ZERO_STATUS} if media == PROTOBUF else CRONTAB
        assert (obj, warnings) == (expected, []), media
    v1 = stored_schema({"spec": {"versions": [CRONTAB["spec"]["versions"][1]]}})
    spec = v1["properties"]["spec"]["properties"]
    assert spec["labels"]["additionalProperties"] == {"type": "string", "maxLength": 63}
    assert spec["closed"]["additionalProperties"] is False
    assert spec["ratio"]["multipleOf"] == 0.25


def test_protobuf_crd_decodes_to_go_order_and_reencodes_to_the_same_bytes() -> None:
    body = protobuf_body(CRONTAB)
    obj, _ = decode(body, PROTOBUF)
    assert list(obj) == ["kind", "apiVersion", "metadata", "spec", "status"]
    assert list(obj["spec"]) == ["group", "names", "scope", "versions", "conversion"]
    columns = obj["spec"]["versions"][1]["additionalPrinterColumns"]
    assert list(columns[1]) == ["name", "type", "format", "priority", "jsonPath"]
    env = pb.decode_envelope(body)
    assert env.raw is not None
    decoded, unknown = pb.decode_object(env.raw, message(CRD_VERSION, CRD))
    assert unknown == []
    assert pb.encode_object(decoded, message(CRD_VERSION, CRD)) == env.raw


def test_a_crd_list_in_protobuf() -> None:
    list_message = message(CRD_VERSION, "CustomResourceDefinitionList")
    members = {"metadata": {"resourceVersion": "7"},
               "items": [{k: v for k, v in crd.items() if k not in ("kind", "apiVersion")}
                         for crd in (*KOPF_PEERINGS, CRONTAB)]}  # fmt: skip
    raw = pb.encode_object(members, list_message)
    body = pb.encode_envelope(raw, api_version=CRD_VERSION, kind="CustomResourceDefinitionList")
    obj, warnings = decode(body, PROTOBUF, kind="CustomResourceDefinitionList")
    assert warnings == [] and len(obj["items"]) == 3
    assert obj["items"][2]["spec"] == CRONTAB["spec"]


def test_a_crd_built_with_the_python_clients_models_decodes_strictly() -> None:
    models = kubernetes.client
    crd = models.V1CustomResourceDefinition(
        api_version=CRD_VERSION, kind=CRD,
        metadata=models.V1ObjectMeta(name="widgets.example.com"),
        spec=models.V1CustomResourceDefinitionSpec(
            group="example.com", scope="Cluster",
            names=models.V1CustomResourceDefinitionNames(plural="widgets", kind="Widget"),
            versions=[models.V1CustomResourceDefinitionVersion(
                name="v1", served=True, storage=True,
                additional_printer_columns=[models.V1CustomResourceColumnDefinition(
                    name="Size", type="integer", json_path=".spec.size")],
                schema=models.V1CustomResourceValidation(open_apiv3_schema=models.V1JSONSchemaProps(
                    type="object",
                    properties={"spec": models.V1JSONSchemaProps(
                        type="object",
                        additional_properties={"type": "string"},
                        x_kubernetes_preserve_unknown_fields=False,
                        properties={"size": models.V1JSONSchemaProps(
                            type="integer", maximum=9.5, x_kubernetes_int_or_string=True)})})))],
        ),
    )  # fmt: skip
    # What the client sends: its models' JSON (the client's own code has no annotations).
    sanitize: Any = kubernetes.client.ApiClient().sanitize_for_serialization
    sent: dict[str, Any] = sanitize(crd)
    for body, media in bodies(sent):
        obj, warnings = decode(body, media)
        expected = {**sent, "status": ZERO_STATUS} if media == PROTOBUF else sent
        assert (obj, warnings) == (expected, []), media


# ---------------------------------------------------------------------------------------
# Unknown fields


def _with_unknown_fields() -> dict[str, Any]:
    crd = copy.deepcopy(CRONTAB)
    v1 = crd["spec"]["versions"][1]
    v1["additionalPrinterColumns"][0]["jsonpath"] = ".spec.cronSpec"  # wrong case
    spec = v1["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["replicas"]["defualt"] = 3
    spec["x-kubernetes-validations"][0]["severity"] = "error"
    # Inside the wrappers' own decoders: dropped without a word, as Kubernetes drops them.
    spec["properties"]["labels"]["additionalProperties"]["maxLenght"] = 1
    spec["properties"]["ports"]["items"]["properties"]["port"]["minimun"] = 1
    spec["properties"]["extra"]["dependencies"]["c"] = {"type": "object", "foo": 1}
    crd["spec"]["foo"] = "bar"
    return crd


# In document order, as sigs.k8s.io/json finds them.
UNKNOWN = [
    'unknown field "spec.versions[1].additionalPrinterColumns[0].jsonpath"',
    'unknown field "spec.versions[1].schema.openAPIV3Schema.properties.spec.'
    'x-kubernetes-validations[0].severity"',
    'unknown field "spec.versions[1].schema.openAPIV3Schema.properties.spec.properties.'
    'replicas.defualt"',
    'unknown field "spec.foo"',
]


@pytest.mark.parametrize("media", [JSON, YAML])
def test_unknown_fields_are_strict_errors_in_kube_apiservers_words(media: str) -> None:
    crd = _with_unknown_fields()
    body = gojson.dumpb(crd) if media == JSON else yaml.safe_dump(crd, sort_keys=False).encode()
    assert bad_request(body, media) == CANNOT + "strict decoding error: " + ", ".join(UNKNOWN)
    cleaned = copy.deepcopy(CRONTAB)
    cleaned["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["extra"]["dependencies"]["c"] = {"type": "object"}  # fmt: skip
    for validation, warnings in ((WARN, UNKNOWN), (IGNORE, [])):
        assert decode(body, media, validation) == (cleaned, warnings)


def test_one_unknown_field_in_a_spec() -> None:
    crd = copy.deepcopy(KOPF_PEERINGS[1])
    crd["spec"]["foo"] = 1
    assert bad_request(crd) == CANNOT + 'strict decoding error: unknown field "spec.foo"'


def test_unknown_and_duplicate_fields_inside_a_wrapper_pass_silently() -> None:
    body = (
        b'{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",'
        b'"spec":{"versions":[{"name":"v1","schema":{"openAPIV3Schema":{'
        b'"items":{"type":"string","type":"integer","bogus":1},'
        b'"additionalProperties":{"properties":{"a":{"x":1}},"nullable":true,"nullable":false},'
        b'"type":"array","type":"object"}}}]}}'
    )
    # Only the duplicate outside the wrappers is reported; inside, the later value wins.
    assert bad_request(body) == CANNOT + (
        'strict decoding error: duplicate field "spec.versions[0].schema.openAPIV3Schema.type"'
    )
    obj, _ = decode(body, validation=WARN)
    assert stored_schema(obj) == {
        "items": {"type": "integer"},
        "additionalProperties": {"properties": {"a": {}}, "nullable": False},
        "type": "object",
    }


def _ld(number: int, payload: bytes) -> bytes:
    out = bytearray()
    pb._put_bytes(out, number << 3 | 2, payload)
    return bytes(out)


def test_protobuf_unknown_fields_are_named_by_their_json_path() -> None:
    props = PROPS
    unknown = bytes([0xF8, 0x06, 0x01])  # field 111, a varint
    items = _ld(2, b"") + _ld(2, pb.encode_object({"type": "string"}, props) + unknown)
    openapi = _ld(24, items) + unknown  # items: [{}, {type: string, #111}]
    # The decoder takes fields in any order: a one-version CRD, then its schema appended.
    crd = with_schema({})
    spec = dict(crd["spec"])
    version = spec.pop("versions")[0]
    del version["schema"]
    spec_message = message(CRD_VERSION, CRD).by_json["spec"].message
    version_message = spec_message.by_json["versions"].message if spec_message else None
    assert spec_message is not None and version_message is not None
    version_raw = pb.encode_object(version, version_message) + _ld(4, _ld(1, openapi))
    spec_raw = pb.encode_object(spec, spec_message) + _ld(7, version_raw)
    body = pb.encode_envelope(_ld(2, spec_raw), api_version=CRD_VERSION, kind=CRD)
    where = "spec.versions[0].schema.openAPIV3Schema"
    assert bad_request(body, PROTOBUF) == CANNOT + (
        f'strict decoding error: unknown field "{where}.items[1].#111", '
        f'unknown field "{where}.#111"'
    )
    obj, _ = decode(body, PROTOBUF, IGNORE)
    assert stored_schema(obj) == {"items": [{}, {"type": "string"}]}


# ---------------------------------------------------------------------------------------
# The wrappers' JSON forms (apiextensions' marshal.go)

WHERE = "JSONSchemaProps.spec.versions.schema.openAPIV3Schema"


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ({"additionalProperties": True}, {"additionalProperties": True}),
        ({"additionalProperties": False}, {"additionalProperties": False}),
        ({"additionalProperties": {"type": "string"}},
         {"additionalProperties": {"type": "string"}}),
        ({"additionalProperties": {}}, {"additionalProperties": {}}),
        ({"additionalProperties": None}, {"additionalProperties": None}),
        ({"additionalItems": False}, {"additionalItems": False}),
        ({"items": {"type": "string"}}, {"items": {"type": "string"}}),
        ({"items": [{"type": "string"}, {}]}, {"items": [{"type": "string"}, {}]}),
        ({"items": [None]}, {"items": [None]}),
        # Anything else, and an empty list, leaves the zero wrapper, which Go writes as null.
        ({"items": []}, {"items": None}),
        ({"items": "string"}, {"items": None}),
        ({"items": 5}, {"items": None}),
        ({"items": True}, {"items": None}),
        ({"dependencies": {"a": ["b", "c"], "b": {"required": ["a"]}}},
         {"dependencies": {"a": ["b", "c"], "b": {"required": ["a"]}}}),
        ({"dependencies": {"a": [], "b": "c", "d": 1, "e": None}},
         {"dependencies": {"a": None, "b": None, "d": None, "e": None}}),
        # JSON: any value, kept as it was sent.
        ({"default": {"a": [1, 2.5, "x", None, True]}},
         {"default": {"a": [1, 2.5, "x", None, True]}}),
        ({"default": "x", "example": 1.5, "enum": [1, "a", None, {"b": []}]},
         {"default": "x", "example": 1.5, "enum": [1, "a", None, {"b": []}]}),
        ({"maximum": 10, "minimum": -0.5, "multipleOf": 1e-3},
         {"maximum": 10, "minimum": -0.5, "multipleOf": 1e-3}),
    ],
)  # fmt: skip
def test_wrapper_forms_that_decode(sent: dict[str, Any], stored: dict[str, Any]) -> None:
    obj, warnings = decode(with_schema(sent))
    assert (stored_schema(obj), warnings) == (stored, [])


@pytest.mark.parametrize(
    ("sent", "error"),
    [
        ('{"additionalProperties":"true"}', "boolean or JSON schema expected"),
        ('{"additionalProperties":1}', "boolean or JSON schema expected"),
        ('{"additionalItems":[]}', "boolean or JSON schema expected"),
        # An error inside a wrapper names the field holding the wrapper: the outer decoder's
        # context replaces the inner one (which said JSONSchemaProps.properties.maxLength).
        ('{"items":{"properties":{"a":{"maxLength":"1"}}}}',
         f"json: cannot unmarshal string into Go struct field {WHERE}.items of type int64"),
        ('{"items":[{"type":"string"},5]}',
         f"json: cannot unmarshal number into Go struct field {WHERE}.items of type "
         "v1.JSONSchemaProps"),
        ('{"properties":{"a":{"additionalProperties":{"items":{"maxItems":1.5}}}}}',
         f"json: cannot unmarshal number 1.5 into Go struct field {WHERE}.properties."
         "additionalProperties of type int64"),
        ('{"properties":{"a":{"additionalProperties":{"items":{"type":"x",'
         '"additionalProperties":"x"}}}}}', "boolean or JSON schema expected"),
        ('{"dependencies":{"a":["b",1]}}',
         f"json: cannot unmarshal number into Go struct field {WHERE}.dependencies "
         "of type string"),
        ('{"dependencies":{"a":{"minimum":"0"}}}',
         f"json: cannot unmarshal string into Go struct field {WHERE}.dependencies "
         "of type float64"),
        # Outside the wrappers, the usual stack.
        ('{"properties":{"a":{"maxLength":"1"}}}',
         f"json: cannot unmarshal string into Go struct field {WHERE}.properties.maxLength "
         "of type int64"),
        ('{"maximum":"1"}',
         f"json: cannot unmarshal string into Go struct field {WHERE}.maximum of type float64"),
        ('{"maximum":1e400}',
         f"json: cannot unmarshal number 1e400 into Go struct field {WHERE}.maximum of type "
         "float64"),
        ('{"minimum":-1' + "0" * 400 + "}",
         f"json: cannot unmarshal number -1{'0' * 400} into Go struct field {WHERE}.minimum of "
         "type float64"),
        ('{"x-kubernetes-int-or-string":"yes"}',
         f"json: cannot unmarshal string into Go struct field {WHERE}.x-kubernetes-int-or-string "
         "of type bool"),
        ('{"properties":[]}',
         f"json: cannot unmarshal array into Go struct field {WHERE}.properties of type "
         "map[string]v1.JSONSchemaProps"),
    ],
)  # fmt: skip
def test_wrong_types_are_400_in_gos_words(sent: str, error: str) -> None:
    body = gojson.dumps(with_schema({})).replace(
        '"openAPIV3Schema":{}', '"openAPIV3Schema":' + sent
    )
    assert bad_request(body.encode()) == CANNOT + error
    # Whatever the validation mode, and before any strict error.
    unknown_first = body.replace('"spec":{', '"spec":{"zzz":1,').encode()
    assert bad_request(unknown_first, validation=IGNORE) == CANNOT + error


def test_a_wrappers_error_ends_decoding_and_wins_over_an_earlier_type_error() -> None:
    # encoding/json keeps the first plain type error and goes on; an UnmarshalJSON's error
    # ends decoding at once, so it is the one reported.
    text = gojson.dumps(with_schema({"additionalProperties": "x"}))
    text = text.replace('"spec":{', '"spec":{"scope":1,')
    assert bad_request(text.encode()) == CANNOT + "boolean or JSON schema expected"
    plain = gojson.dumps(with_schema({})).replace('"spec":{', '"spec":{"scope":1,')
    assert bad_request(plain.encode()) == CANNOT + (
        "json: cannot unmarshal number into Go struct field "
        "CustomResourceDefinitionSpec.spec.scope of type v1.ResourceScope"
    )


def test_wrapper_forms_in_protobuf() -> None:
    for sent in (
        {"additionalProperties": False, "additionalItems": True},
        {"additionalProperties": {"type": "integer"}},
        {"items": [{"type": "string"}, {"type": "integer"}], "dependencies": {"a": ["b"]}},
        {"items": {"type": "string"}, "dependencies": {"a": {"type": "object"}}},
        {"default": {"a": [1, "x", None]}, "enum": ["a", 2, None], "maximum": 2.5},
    ):
        obj, warnings = decode(protobuf_body(with_schema(sent)), PROTOBUF)
        assert (stored_schema(obj), warnings) == (sent, [])


def test_protobuf_values_json_cannot_carry_fail_as_json_marshal_does() -> None:
    nan = bytes([0x49]) + bytes.fromhex("000000000000f87f")  # maximum = NaN
    props = PROPS
    with pytest.raises(pb.ProtobufError, match="json: unsupported value: NaN"):
        pb.decode_object(nan, props)
    with pytest.raises(pb.ProtobufError, match="wrong wireType = 0 for field Maximum"):
        pb.decode_object(b"\x48\x01", props)
    five = bytes([0x49]) + bytes.fromhex("0000000000001440")
    assert pb.decode_object(five, props) == ({"maximum": 5}, [])


# ---------------------------------------------------------------------------------------
# Scale

SCALE = 'Scale in version "v1" cannot be handled as a Scale: '
SCALE_OBJ = {
    "kind": "Scale",
    "apiVersion": "autoscaling/v1",
    "metadata": {"name": "web", "namespace": "default", "resourceVersion": "12"},
    "spec": {"replicas": 3},
    "status": {"replicas": 2, "selector": "app=web"},
}


def decode_scale(
    body: bytes | dict[str, Any], media: str = JSON, validation: FieldValidation = STRICT
) -> tuple[dict[str, Any], list[str]]:
    return decode(body, media, validation, kind="Scale", api_version="autoscaling/v1")


def test_a_scale_body_decodes_in_every_media_type() -> None:
    for body, media in (
        (gojson.dumpb(SCALE_OBJ), JSON),
        (yaml.safe_dump(SCALE_OBJ).encode(), YAML),
        (protobuf_body(SCALE_OBJ, "autoscaling/v1", "Scale"), PROTOBUF),
    ):
        assert decode_scale(body, media) == (SCALE_OBJ, []), media


def test_scale_unknown_fields_and_wrong_types() -> None:
    bad = {**SCALE_OBJ, "spec": {"replicas": 3, "foo": 1}}
    with pytest.raises(BadRequestError) as caught:
        decode_scale(bad)
    assert caught.value.message == SCALE + 'strict decoding error: unknown field "spec.foo"'
    assert decode_scale(bad, validation=WARN) == (SCALE_OBJ, ['unknown field "spec.foo"'])
    with pytest.raises(BadRequestError) as caught:
        decode_scale({**SCALE_OBJ, "spec": {"replicas": "3"}})
    assert caught.value.message == SCALE + (
        "json: cannot unmarshal string into Go struct field ScaleSpec.spec.replicas of type int32"
    )


# ---------------------------------------------------------------------------------------
# Anything in, a value or a 4xx out

_NAMES = st.sampled_from(
    ["items", "additionalProperties", "additionalItems", "dependencies", "properties", "type",
     "maximum", "default", "enum", "maxLength", "required", "x-kubernetes-int-or-string", "a"]
)  # fmt: skip
_LEAVES = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4)
)  # fmt: skip
_SCHEMAS = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAMES, inner, max_size=4),
    max_leaves=25,
)


@given(value=st.dictionaries(_NAMES, _SCHEMAS, max_size=5))
def test_any_schema_decodes_or_gives_a_4xx(value: dict[str, Any]) -> None:
    body = json.dumps(with_schema(value)).encode()
    try:
        obj, _ = decode(body, validation=WARN)
    except StatusError as error:
        assert 400 <= error.code < 500
        return
    # What is kept can be stored, and Go's protobuf form of it is a valid strict body.
    gojson.dumpb(obj)
    again, _ = decode(protobuf_body(obj), PROTOBUF)
    assert decode(gojson.dumpb(again)) == (again, [])
