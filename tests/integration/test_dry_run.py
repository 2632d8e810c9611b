"""``dryRun=All`` over HTTP against real etcd: every write runs its checks and answers what
the real write would have answered, and etcd's revision does not move."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from apiserver_fixture import RunningApiServer

CM = "/api/v1/namespaces/default/configmaps"
DRY = {"dryRun": "All"}


async def revision(api: RunningApiServer) -> int:
    return await api.client.current_revision(b"/registry")


async def stored(api: RunningApiServer, key: str) -> dict[str, Any] | None:
    kv = await api.client.get(key.encode())
    return None if kv is None else dict(json.loads(kv.value))


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


async def test_dry_run_create_answers_the_object_and_writes_nothing(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    before = await revision(api)
    response = await http.post(CM, json=configmap("dry", k="v"), params=DRY)
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["metadata"]["name"] == "dry"
    assert body["metadata"]["namespace"] == "default"
    assert body["metadata"]["uid"] and body["metadata"]["creationTimestamp"]
    # Nothing was stored, so there is no version to report.
    assert "resourceVersion" not in body["metadata"]
    assert await revision(api) == before
    assert await stored(api, "/registry/configmaps/default/dry") is None

    generated = await http.post(
        CM, json={"metadata": {"generateName": "gen-"}, "data": {}}, params=DRY
    )
    assert generated.status_code == 201
    assert generated.json()["metadata"]["name"].startswith("gen-")
    assert await revision(api) == before


async def test_dry_run_create_still_runs_every_check(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    assert (await http.post(CM, json=configmap("taken"))).status_code == 201
    before = await revision(api)
    taken = await http.post(CM, json=configmap("taken"), params=DRY)
    assert (taken.status_code, taken.json()["reason"]) == (409, "AlreadyExists")
    invalid = await http.post(CM, json=configmap("Not_A_Name"), params=DRY)
    assert (invalid.status_code, invalid.json()["reason"]) == (422, "Invalid")
    missing_ns = await http.post(
        "/api/v1/namespaces/nowhere/configmaps", json=configmap("x"), params=DRY
    )
    assert missing_ns.status_code == 404
    assert await revision(api) == before


async def test_dry_run_update_and_patch_answer_the_result_at_the_current_version(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    created = (await http.post(CM, json=configmap("upd", k="v1"))).json()
    rv = created["metadata"]["resourceVersion"]
    before = await revision(api)

    changed = {**created, "data": {"k": "v2"}}
    updated = await http.put(f"{CM}/upd", json=changed, params=DRY)
    assert updated.status_code == 200, updated.text
    assert updated.json()["data"] == {"k": "v2"}
    assert updated.json()["metadata"]["resourceVersion"] == rv
    assert updated.json()["metadata"]["uid"] == created["metadata"]["uid"]

    stale = {**changed, "metadata": {**created["metadata"], "resourceVersion": "1"}}
    conflict = await http.put(f"{CM}/upd", json=stale, params=DRY)
    assert conflict.status_code == 409

    patched = await http.patch(
        f"{CM}/upd",
        content=b'{"data":{"other":"x"}}',
        headers={"Content-Type": "application/merge-patch+json"},
        params=DRY,
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["data"] == {"k": "v1", "other": "x"}
    assert patched.json()["metadata"]["resourceVersion"] == rv

    assert await revision(api) == before
    assert (await stored(api, "/registry/configmaps/default/upd") or {})["data"] == {"k": "v1"}


async def test_dry_run_delete_checks_preconditions_and_deletes_nothing(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    created = (await http.post(CM, json=configmap("del"))).json()
    before = await revision(api)

    by_query = await http.delete(f"{CM}/del", params=DRY)
    assert by_query.status_code == 200, by_query.text
    assert by_query.json()["status"] == "Success"
    by_body = await http.request(
        "DELETE",
        f"{CM}/del",
        json={"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]},
    )
    assert by_body.status_code == 200, by_body.text
    wrong_uid = await http.request(
        "DELETE", f"{CM}/del", json={"dryRun": ["All"], "preconditions": {"uid": "other"}}
    )
    assert wrong_uid.status_code == 409
    # The query's dryRun is kept even when the body says nothing about it.
    with_empty_body = await http.request("DELETE", f"{CM}/del", params=DRY, json={})
    assert with_empty_body.status_code == 200

    assert await revision(api) == before
    assert (await stored(api, "/registry/configmaps/default/del") or {})["metadata"][
        "uid"
    ] == created["metadata"]["uid"]
    missing = await http.delete(f"{CM}/never-was", params=DRY)
    assert missing.status_code == 404


async def test_dry_run_namespace_delete_keeps_the_namespace_and_its_contents(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    ns = await http.post("/api/v1/namespaces", json={"metadata": {"name": "dry-ns"}})
    assert ns.status_code == 201
    in_ns = await http.post("/api/v1/namespaces/dry-ns/configmaps", json=configmap("inside", k="v"))
    assert in_ns.status_code == 201
    before = await revision(api)
    response = await http.delete("/api/v1/namespaces/dry-ns", params=DRY)
    assert response.status_code == 200, response.text
    assert await revision(api) == before
    assert await stored(api, "/registry/namespaces/dry-ns") is not None
    assert await stored(api, "/registry/configmaps/dry-ns/inside") is not None


@pytest.mark.parametrize("value", ["true", "", "all", "None"])
async def test_unsupported_dry_run_values_are_refused_before_anything_is_written(
    api: RunningApiServer, http: httpx.AsyncClient, value: str
) -> None:
    assert (await http.post(CM, json=configmap(f"bad-{len(value)}"))).status_code == 201
    name = f"bad-{len(value)}"
    before = await revision(api)
    params = {"dryRun": value}
    answers = [
        await http.post(CM, json=configmap("never"), params=params),
        await http.put(f"{CM}/{name}", json=configmap(name, k="x"), params=params),
        await http.patch(
            f"{CM}/{name}",
            content=b"{}",
            headers={"Content-Type": "application/merge-patch+json"},
            params=params,
        ),
        await http.delete(f"{CM}/{name}", params=params),
    ]
    for answer, kind in zip(
        answers,
        ("CreateOptions", "UpdateOptions", "PatchOptions", "DeleteOptions"),
        strict=True,
    ):
        assert answer.status_code == 422, answer.text
        status = answer.json()
        assert status["reason"] == "Invalid"
        assert status["details"]["kind"] == kind
        assert status["details"]["causes"][0]["field"] == "dryRun"
    assert await revision(api) == before
    assert await stored(api, f"/registry/configmaps/default/{name}") is not None
