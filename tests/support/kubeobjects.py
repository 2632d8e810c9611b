"""Kubernetes-shaped objects and events for tests: pods as native Items, the way the
reflector will build them (JSON with metadata.resourceVersion set, labels and the
metadata.name / metadata.namespace fields extracted)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from watchcache import Item
from watchcache.cache.event import Event, EventType

PREFIX = "/registry/pods/"


def pod_key(namespace: str, name: str) -> str:
    return f"{PREFIX}{namespace}/{name}"


def pod(
    namespace: str,
    name: str,
    rv: int,
    labels: Mapping[str, str] | None = None,
    node: str = "",
) -> Item:
    labels = dict(labels or {})
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "resourceVersion": str(rv)}
    if labels:
        metadata["labels"] = labels
    body = {"kind": "Pod", "apiVersion": "v1", "metadata": metadata, "spec": {"nodeName": node}}
    fields = {"metadata.name": name, "metadata.namespace": namespace, "spec.nodeName": node}
    return Item(
        pod_key(namespace, name),
        json.dumps(body, separators=(",", ":")).encode(),
        rv,
        labels=labels,
        fields=fields,
    )


def added(item: Item) -> Event:
    return Event(EventType.ADDED, item, None, item.mod_revision)


def modified(item: Item, previous: Item) -> Event:
    return Event(EventType.MODIFIED, item, previous, item.mod_revision)


def deleted(previous: Item, rv: int) -> Event:
    """A delete at ``rv``: the object is the last state stamped with the delete's rv."""
    meta = json.loads(previous.value)
    meta["metadata"]["resourceVersion"] = str(rv)
    gone = Item(
        previous.key,
        json.dumps(meta, separators=(",", ":")).encode(),
        rv,
        labels=previous.labels,
        fields=previous.fields,
    )
    return Event(EventType.DELETED, gone, previous, rv)


def names(items: Any) -> list[str]:
    """``ns/name`` of each item (keys without the prefix)."""
    return [item.key[len(PREFIX) :] for item in items]


def rv_of(value: bytes) -> int:
    return int(json.loads(value)["metadata"]["resourceVersion"])


def pod_value(
    namespace: str, name: str, labels: Mapping[str, str] | None = None, node: str = ""
) -> bytes:
    """A pod's JSON as a client stores it in etcd (no resourceVersion: etcd's revision is)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    body = {"kind": "Pod", "apiVersion": "v1", "metadata": metadata, "spec": {"nodeName": node}}
    return json.dumps(body, separators=(",", ":")).encode()
