"""The namespaces every cluster has (``default``, ``kube-system``, ``kube-public``,
``kube-node-lease``), created at start as kube-apiserver's system-namespaces controller
does: clients (the official client's examples, kubectl without ``-n``) count on
``default``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable

from watchcache.etcd.client import EtcdClient
from watchcache.registry.admission import now_rfc3339
from watchcache.registry.resources import ResourceSpec

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


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


async def ensure_namespaces(client: EtcdClient, resources: Iterable[ResourceSpec]) -> None:
    """Create those of the system namespaces that do not exist (when namespaces are
    served)."""
    if not any(r.name == "namespaces" for r in resources):
        return
    for name in SYSTEM_NAMESPACES:
        await client.create(f"/registry/namespaces/{name}".encode(), namespace_object(name))
