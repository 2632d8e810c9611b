"""The kubelet's LIST over HTTP: pods by ``spec.nodeName`` read through the cache's index
answer exactly as a server without indexes does, over one real etcd — every page of a
paginated LIST, consistent, at ``resourceVersion=0`` and Exact, and a continue token from
one server continues on the other. The metrics show which server read the index."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from apiserver_fixture import running_apiserver

from watchcache.etcd.process import EtcdCluster

NODES = ("node-a", "node-b", "node-c")


def pod(name: str, node: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def pages(http: httpx.AsyncClient, path: str, **params: str) -> list[dict[str, Any]]:
    """Every page of a LIST, following continue tokens."""
    out: list[dict[str, Any]] = []
    query = dict(params)
    while True:
        response = await http.get(path, params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        out.append(body)
        token = body["metadata"].get("continue")
        if not token:
            return out
        query = {"limit": params.get("limit", "0"), "continue": token}
        if "fieldSelector" in params:
            query["fieldSelector"] = params["fieldSelector"]


async def test_lists_by_node_equal_unindexed_lists(etcd: EtcdCluster) -> None:
    async with (
        running_apiserver(etcd.endpoints) as indexed,
        running_apiserver(etcd.endpoints, list_indexes=()) as plain,
        httpx.AsyncClient(base_url=indexed.url, timeout=10) as to_indexed,
        httpx.AsyncClient(base_url=plain.url, timeout=10) as to_plain,
    ):
        for ns in ("ns1", "ns2"):
            created = await to_indexed.post("/api/v1/namespaces", json={"metadata": {"name": ns}})
            assert created.status_code == 201, created.text
            await to_indexed.get(f"/api/v1/namespaces/{ns}")  # the cache has it
            for i in range(12):
                node = "" if i % 4 == 3 else NODES[i % 4]
                made = await to_indexed.post(
                    f"/api/v1/namespaces/{ns}/pods", json=pod(f"p{i}", node)
                )
                assert made.status_code == 201, made.text
        # Both caches reach etcd's revision before the comparisons (consistent reads).
        await asyncio.gather(to_indexed.get("/api/v1/pods"), to_plain.get("/api/v1/pods"))

        cases: list[tuple[str, dict[str, str]]] = []
        for node in (*NODES, ""):
            selector = f"spec.nodeName={node}"
            for path in ("/api/v1/pods", "/api/v1/namespaces/ns2/pods"):
                cases += [
                    (path, {"fieldSelector": selector}),
                    (path, {"fieldSelector": selector, "resourceVersion": "0"}),
                    (path, {"fieldSelector": selector, "limit": "2"}),
                    (path, {"fieldSelector": selector + ",metadata.name!=p4", "limit": "1"}),
                ]
        for path, params in cases:
            mine = await pages(to_indexed, path, **params)
            theirs = await pages(to_plain, path, **params)
            assert mine == theirs, (path, params)
            names = [item["metadata"]["name"] for page in mine for item in page["items"]]
            node = params["fieldSelector"].split(",")[0].split("=", 1)[1]
            expected = sorted(
                {f"p{i}" for i in range(12) if ("" if i % 4 == 3 else NODES[i % 4]) == node}
                - ({"p4"} if "p4" in params["fieldSelector"] else set()),
            )
            per_namespace = 1 if "ns2" in path else 2
            assert sorted(names) == sorted(expected * per_namespace), (path, params)

        # An Exact read of the revision of the first page, and a token crossing servers.
        first = (
            await to_indexed.get(
                "/api/v1/pods", params={"fieldSelector": "spec.nodeName=node-a", "limit": "1"}
            )
        ).json()
        token = first["metadata"]["continue"]
        rv = first["metadata"]["resourceVersion"]
        rest = {"fieldSelector": "spec.nodeName=node-a", "limit": "1", "continue": token}
        assert (await to_plain.get("/api/v1/pods", params=rest)).json() == (
            await to_indexed.get("/api/v1/pods", params=rest)
        ).json()
        exact = {"fieldSelector": "spec.nodeName=node-b", "resourceVersion": rv,
                 "resourceVersionMatch": "Exact"}  # fmt: skip
        assert (await to_plain.get("/api/v1/pods", params=exact)).json() == (
            await to_indexed.get("/api/v1/pods", params=exact)
        ).json()

        metrics = (await to_indexed.get("/metrics")).text
        plain_metrics = (await to_plain.get("/metrics")).text
        label = 'apiserver_cache_list_total{group="",resource="pods",index="f:spec.nodeName"}'
        assert label in metrics
        assert label not in plain_metrics
        assert json.dumps(first["items"][0]["spec"]["nodeName"]) == '"node-a"'
