"""``watchcache load``: many objects written straight to etcd, as the apiserver stores them.

Objects carry what a create through the API would give them (uid, creationTimestamp,
namespace, labels) and are written with create-if-absent transactions of up to 128 puts,
8 in flight (ETCD.md: about 4.6 s for 300k x 1 KB). Labels cycle through ``app=a|b|c`` so
selectors have something to select. Writing through etcd rather than the HTTP API keeps a
300k load to seconds; caches pick the objects up through their watch like any write.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable

from watchcache.apiserver.admission import now_rfc3339
from watchcache.apiserver.resources import ResourceSpec
from watchcache.etcd.client import MAX_TXN_OPS, EtcdClient
from watchcache.etcd.proto import rpc_pb2

APPS = ("a", "b", "c")


def namespace_object(name: str) -> bytes:
    """A namespace object as the apiserver would create it."""
    obj = {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": name, "uid": str(uuid.uuid4()), "creationTimestamp": now_rfc3339()},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
    return json.dumps(obj, separators=(",", ":")).encode()


def make_object(spec: ResourceSpec, index: int, size: int, namespace: str) -> tuple[str, bytes]:
    name = f"{spec.singular}-{index:07d}"
    metadata = {
        "name": name,
        "namespace": namespace,
        "uid": str(uuid.uuid4()),
        "creationTimestamp": now_rfc3339(),
        "labels": {"app": APPS[index % len(APPS)], "index": str(index)},
    }
    obj: dict[str, object] = {
        "kind": spec.kind,
        "apiVersion": spec.api_version,
        "metadata": metadata,
    }
    head = len(json.dumps(obj, separators=(",", ":"))) + len(',"data":{"payload":""}')
    obj["data"] = {"payload": "x" * max(0, size - head)}
    return spec.key(namespace, name), json.dumps(obj, separators=(",", ":")).encode()


async def load_objects(
    client: EtcdClient,
    spec: ResourceSpec,
    *,
    count: int,
    size: int,
    namespaces: int = 1,
    start: int = 0,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Create ``count`` objects of about ``size`` bytes spread over ``namespaces``
    namespaces (``demo-<i>``; created too when namespaces are a resource). Objects that
    already exist are left alone. Returns how many were created."""
    if spec.name not in ("configmaps", "secrets"):
        raise ValueError(f"load writes configmaps or secrets, not {spec.name}")
    names = [f"demo-{i}" for i in range(max(1, namespaces))]
    for ns in names:
        await client.create(f"/registry/namespaces/{ns}".encode(), namespace_object(ns))
    semaphore = asyncio.Semaphore(8)
    created = 0

    async def batch(first: int, last: int) -> None:
        nonlocal created
        ops, compares = [], []
        for i in range(first, last):
            key, value = make_object(spec, i, size, names[i % len(names)])
            compares.append(
                rpc_pb2.Compare(
                    key=key.encode(),
                    target=rpc_pb2.Compare.CREATE,
                    result=rpc_pb2.Compare.EQUAL,
                    create_revision=0,
                )
            )
            ops.append(
                rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key.encode(), value=value))
            )
        async with semaphore:
            response = await client.txn(rpc_pb2.TxnRequest(compare=compares, success=ops))
        if response.succeeded:
            created += len(ops)
        else:
            # Some already exist: create the others one by one.
            for op in ops:
                result = await client.create(op.request_put.key, op.request_put.value)
                created += result.succeeded
        if progress is not None:
            progress(last - first)

    await asyncio.gather(
        *(
            batch(i, min(i + MAX_TXN_OPS, start + count))
            for i in range(start, start + count, MAX_TXN_OPS)
        )
    )
    return created
