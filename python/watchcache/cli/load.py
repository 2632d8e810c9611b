"""``watchcache load``: many objects written straight to etcd, as the apiserver stores them.

Objects carry what a create through the API would give them (uid, creationTimestamp,
namespace, labels) and are written with create-if-absent transactions of up to 128 puts,
8 in flight (docs/etcd.md: about 4.6 s for 300k x 1 KB). Labels cycle through ``app=a|b|c`` so
selectors have something to select. Writing through etcd rather than the HTTP API keeps a
300k load to seconds; caches pick the objects up through their watch like any write.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from watchcache.cli.progress import Progress
from watchcache.etcd.client import MAX_TXN_OPS, EtcdClient
from watchcache.etcd.process import EtcdCluster, default_data_dir, embedded_etcd
from watchcache.etcd.proto import rpc_pb2
from watchcache.registry.admission import now_rfc3339
from watchcache.registry.resources import ResourceSpec
from watchcache.registry.system_namespaces import namespace_object

APPS = ("a", "b", "c")


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


@dataclass
class LoadOptions:
    resource: ResourceSpec
    count: int
    size: int = 1024
    namespaces: int = 1
    etcd: Sequence[str] = ()
    data_dir: Path = field(default_factory=default_data_dir)


def run_load(options: LoadOptions) -> int:
    """``watchcache load``: on ``--etcd``, or on the embedded etcd (started for the load
    when no ``serve`` is running on it)."""
    return asyncio.run(_load(options))


async def _load(options: LoadOptions) -> int:
    etcd: EtcdCluster | None = None
    endpoints = list(options.etcd)
    if not endpoints:
        running = embedded_etcd(options.data_dir, reuse_running=True)
        if running.members[0].healthy():
            endpoints = running.endpoints  # a running serve's etcd: leave it running
        else:
            etcd = embedded_etcd(options.data_dir)
            await asyncio.to_thread(etcd.start)
            endpoints = etcd.endpoints
    try:
        async with EtcdClient(endpoints, timeout=60) as client:
            progress = Progress("load", options.count, sys.stderr)
            done = 0

            def step(n: int) -> None:
                nonlocal done
                done += n
                progress.update(done)

            created = await load_objects(
                client,
                options.resource,
                count=options.count,
                size=options.size,
                namespaces=options.namespaces,
                progress=step,
            )
            progress.finish()
            print(
                f"created {created:,} {options.resource.name} ({options.count - created:,} existed)"
            )
    finally:
        if etcd is not None:
            etcd.stop()
    return 0
