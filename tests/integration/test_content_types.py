"""Request and response media types over HTTP against real etcd: bodies in JSON, YAML and
protobuf, 415 for others, 406 for a client that accepts no JSON, and fieldValidation's
warnings and refusals."""

from __future__ import annotations

from pathlib import Path

import httpx
from apiserver_fixture import RunningApiServer

CM = "/api/v1/namespaces/default/configmaps"
CAPTURED = Path(__file__).parents[1] / "data" / "kubectl-1.37"
PROTOBUF = "application/vnd.kubernetes.protobuf"


async def test_a_yaml_body_creates_the_same_object_as_json(http: httpx.AsyncClient) -> None:
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  k: v\n"
    made = await http.post(CM, content=body, headers={"Content-Type": "application/yaml"})
    assert made.status_code == 201, made.text
    assert made.json()["data"] == {"k": "v"}
    assert made.headers["content-type"] == "application/json"


async def test_a_protobuf_body_kubectl_sent_creates_the_object(http: httpx.AsyncClient) -> None:
    body = (CAPTURED / "create-configmap.pb").read_bytes()
    made = await http.post(CM, content=body, headers={"Content-Type": PROTOBUF})
    assert made.status_code == 201, made.text
    assert made.json()["kind"] == "ConfigMap"


async def test_other_media_types_are_415(api: RunningApiServer, http: httpx.AsyncClient) -> None:
    before = await api.client.current_revision(b"/registry")
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "image/png"):
        refused = await http.post(
            CM, content=b'{"metadata":{"name":"x"}}', headers={"Content-Type": content_type}
        )
        assert refused.status_code == 415, (content_type, refused.text)
        status = refused.json()
        assert status["reason"] == "UnsupportedMediaType"
        assert status["message"] == (
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json, application/yaml, application/vnd.kubernetes.protobuf"
        )
    assert await api.client.current_revision(b"/registry") == before


async def test_a_client_that_accepts_only_protobuf_gets_406(http: httpx.AsyncClient) -> None:
    refused = await http.get(CM, headers={"Accept": PROTOBUF})
    assert refused.status_code == 406
    assert refused.json()["reason"] == "NotAcceptable"
    assert refused.json()["message"] == (
        "only the following media types are accepted: application/json"
    )
    for accept in (f"{PROTOBUF}, */*", f"{PROTOBUF},application/json", "application/*", ""):
        fine = await http.get(CM, headers={"Accept": accept})
        assert fine.status_code == 200, accept


async def test_field_validation_warns_refuses_or_ignores_and_never_stores(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    def body(name: str) -> dict[str, object]:
        return {"metadata": {"name": name, "colour": "red"}, "data": {}, "datta": {}}

    warned = await http.post(CM, json=body("warned"))
    assert warned.status_code == 201
    # In the order the decoder meets them, as Kubernetes reports them.
    assert warned.headers.get_list("warning") == [
        '299 - "unknown field \\"metadata.colour\\""',
        '299 - "unknown field \\"datta\\""',
    ]
    assert "datta" not in warned.json()

    strict = await http.post(CM, json=body("strict"), params={"fieldValidation": "Strict"})
    assert strict.status_code == 400
    assert strict.json()["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
        'unknown field "metadata.colour", unknown field "datta"'
    )
    assert await api.client.get(b"/registry/configmaps/default/strict") is None

    ignored = await http.post(CM, json=body("ignored"), params={"fieldValidation": "Ignore"})
    assert ignored.status_code == 201
    assert "warning" not in ignored.headers

    # A merge patch that adds a field the kind does not have stores nothing of it.
    patched = await http.patch(
        f"{CM}/warned",
        content=b'{"status":{"phase":"x"}}',
        headers={"Content-Type": "application/merge-patch+json"},
        params={"fieldValidation": "Strict"},
    )
    assert patched.status_code == 422, patched.text
    assert patched.json()["details"]["causes"][0]["field"] == "patch"
    lenient = await http.patch(
        f"{CM}/warned",
        content=b'{"status":{"phase":"x"}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert lenient.status_code == 200
    assert "status" not in lenient.json()
    assert lenient.headers.get_list("warning") == ['299 - "unknown field \\"status\\""']


async def test_warnings_about_non_ascii_field_names_go_out_as_utf8(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    """Regression (found by tests/reliability/test_fuzz_inputs.py): a Warning header whose
    text had a character past U+00FF (an unknown field named "☃") made the write a 500,
    and one in U+0080-U+00FF went out in Latin-1: Starlette encodes header values as
    Latin-1. Kubernetes' NewWarningHeader sends the text's UTF-8 bytes, and the object is
    created."""
    made = await http.post(CM, json={"metadata": {"name": "utf8-warnings"}, "☃": 1, "é": 2})
    assert made.status_code == 201, made.text
    warnings = [v for k, v in made.headers.raw if k.lower() == b"warning"]
    assert warnings == [
        '299 - "unknown field \\"☃\\""'.encode(),
        '299 - "unknown field \\"é\\""'.encode(),
    ]
    assert await api.client.get(b"/registry/configmaps/default/utf8-warnings") is not None
