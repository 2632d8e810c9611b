"""The namespace controller: a terminating namespace is emptied, then finalized, then
deleted, as kube-controller-manager's namespace controller does it.

Design note
-----------
A DELETE of a namespace only marks it (``deletionTimestamp``, ``status.phase:
Terminating``; the object store's ``_delete_namespace``) because ``spec.finalizers`` holds
``kubernetes``. For each such namespace this controller, again until done:

1. deletes every object of every namespaced resource served in it (background
   propagation, as Kubernetes' namespaced resources deleter), skipping those already being
   deleted: an object with finalizers stays until whoever owns the finalizer removes it;
2. records what remains in the namespace's status conditions
   (``NamespaceContentRemaining``, ``NamespaceFinalizersRemaining``, with Kubernetes'
   reasons and messages), so ``kubectl describe ns`` says what it waits for;
3. once nothing remains, removes ``kubernetes`` from ``spec.finalizers`` (``/finalize``)
   and deletes the namespace, which then goes like any object (at once, or when its own
   ``metadata.finalizers`` are gone).

It is woken by changes to namespaces and to any object in a terminating namespace, and
checks again every :data:`RECHECK_SECONDS` while a namespace waits. Creates into a
terminating namespace are refused by the object store (403), so the namespace empties.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from watchcache.cache.watch_cache import WatchCache
from watchcache.controllers.informer import Follower, FollowerSet, ObjectEvent, WorkQueue
from watchcache.registry.object_store import NamespacePhase, ObjectStore, Subresource
from watchcache.registry.resources import ResourceSpec
from watchcache.registry.strategy import NAMESPACE_FINALIZER
from watchcache.wire.errors import ConflictError, NotFoundError
from watchcache.wire.options import ListOptions
from watchcache.wire.write_options import DeleteOptions, PropagationPolicy

log = logging.getLogger(__name__)

#: How often a terminating namespace that still has content is checked again, besides
#: being woken by every change in it.
RECHECK_SECONDS: Final = 5.0
_CONDITION_TYPES: Final = (
    "NamespaceDeletionDiscoveryFailure",
    "NamespaceDeletionGroupVersionParsingFailure",
    "NamespaceDeletionContentFailure",
    "NamespaceContentRemaining",
    "NamespaceFinalizersRemaining",
)


#: Who this controller's writes belong to in managedFields: the namespace controller runs in
#: kube-controller-manager in Kubernetes.
FIELD_MANAGER: Final = "kube-controller-manager"


class NamespaceController:
    """Finishes namespace deletions over the server's caches and stores (by resource
    name; ``namespaces`` must be among them)."""

    def __init__(
        self,
        specs: Mapping[str, ResourceSpec],
        caches: Mapping[str, WatchCache],
        stores: Mapping[str, ObjectStore],
    ) -> None:
        self.specs = specs
        self.caches = caches
        self.stores = stores
        self.namespaces = stores["namespaces"]
        self.queue: WorkQueue[str] = WorkQueue("namespace controller")
        self._terminating: set[str] = set()
        self._followers = FollowerSet()

    @property
    def _namespaced(self) -> list[ResourceSpec]:
        return [spec for spec in self.specs.values() if spec.namespaced]

    async def run(self) -> None:
        """Until cancelled."""
        try:
            self._followers.start(
                "namespaces", Follower(self.caches["namespaces"], self._namespace_changed)
            )
            for spec in self._namespaced:
                self.resource_added(spec)
            await self.queue.run(self._sync)
        finally:
            self.queue.close()
            await self._followers.close()

    def resource_added(self, spec: ResourceSpec) -> None:
        """A resource is served now (``specs``, ``caches`` and ``stores`` have it)."""
        if spec.namespaced:
            follower = Follower(
                self.caches[spec.group_resource], self._content_changed, replay=False
            )
            self._followers.start(spec.group_resource, follower)

    def resource_removed(self, spec: ResourceSpec) -> None:
        self._followers.stop(spec.group_resource)

    def _namespace_changed(self, event: ObjectEvent) -> None:
        name = event.key.rsplit("/", 1)[-1]
        if event.type == "DELETED" or not event.object.get("metadata", {}).get("deletionTimestamp"):
            self._terminating.discard(name)
            return
        self._terminating.add(name)
        self.queue.add(name)

    def _content_changed(self, event: ObjectEvent) -> None:
        # Keys are /registry/<resource>/<namespace>/<name>.
        namespace = event.key.rsplit("/", 2)[-2]
        if namespace in self._terminating:
            self.queue.add(namespace)

    async def _sync(self, name: str) -> bool:
        try:
            namespace, _ = await self.namespaces.read("", name)
        except NotFoundError:
            return True
        if not namespace["metadata"].get("deletionTimestamp"):
            return True
        remaining, finalizers = await self._delete_content(name)
        await self._record(name, namespace, remaining, finalizers)
        if remaining:
            self.queue.add_after(name, RECHECK_SECONDS)
            return True
        if NAMESPACE_FINALIZER in ((namespace.get("spec") or {}).get("finalizers") or []):
            await self.namespaces.mutate(
                "",
                name,
                _without_kubernetes,
                subresource=Subresource.FINALIZE,
                manager=FIELD_MANAGER,
            )
        with contextlib.suppress(NotFoundError, ConflictError):
            await self.namespaces.delete("", name)
        return True

    async def _delete_content(self, namespace: str) -> tuple[Counter[str], Counter[str]]:
        """Delete what is in the namespace; count what remains per resource and per
        finalizer."""
        remaining: Counter[str] = Counter()
        finalizers: Counter[str] = Counter()
        options = DeleteOptions(propagation_policy=PropagationPolicy.BACKGROUND)
        for spec in self._namespaced:
            cache = self.caches[spec.group_resource]
            listed = await cache.list(ListOptions(), prefix=spec.collection_prefix(namespace))
            for item in listed.items:
                obj = json.loads(item.value)
                metadata = obj.get("metadata") or {}
                remaining[spec.group_resource] += 1
                for finalizer in metadata.get("finalizers") or []:
                    finalizers[finalizer] += 1
                if metadata.get("deletionTimestamp"):
                    continue
                with contextlib.suppress(NotFoundError, ConflictError):
                    await self.stores[spec.group_resource].delete(
                        namespace,
                        metadata.get("name", ""),
                        DeleteOptions(
                            propagation_policy=options.propagation_policy,
                            precondition_uid=metadata.get("uid"),
                        ),
                    )
        return remaining, finalizers

    async def _record(
        self,
        name: str,
        namespace: dict[str, Any],
        remaining: Counter[str],
        finalizers: Counter[str],
    ) -> None:
        wanted = _conditions(remaining, finalizers)
        current = {
            c.get("type"): c
            for c in (namespace.get("status") or {}).get("conditions") or []
            if isinstance(c, dict)
        }
        if all(
            current.get(c["type"], {}).get(k) == c[k]
            for c in wanted
            for k in ("status", "reason", "message")
        ):
            return
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        def set_conditions(obj: dict[str, Any]) -> None:
            status = obj.setdefault("status", {})
            status["phase"] = NamespacePhase.TERMINATING.value
            conditions = []
            for condition in wanted:
                old = current.get(condition["type"])
                same = old is not None and old.get("status") == condition["status"]
                since = old.get("lastTransitionTime", now) if same and old else now
                conditions.append({**condition, "lastTransitionTime": since})
            status["conditions"] = conditions

        with contextlib.suppress(NotFoundError):
            await self.namespaces.mutate(
                "", name, set_conditions, subresource=Subresource.STATUS, manager=FIELD_MANAGER
            )


def _without_kubernetes(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != NAMESPACE_FINALIZER]


def _conditions(remaining: Counter[str], finalizers: Counter[str]) -> list[dict[str, str]]:
    """The namespace's deletion conditions, in Kubernetes' words."""
    content: dict[str, str]
    if remaining:
        listed = ", ".join(f"{r} has {n} resource instances" for r, n in sorted(remaining.items()))
        content = {
            "status": "True",
            "reason": "SomeResourcesRemain",
            "message": f"Some resources are remaining: {listed}",
        }
    else:
        content = {
            "status": "False",
            "reason": "ContentRemoved",
            "message": "All content successfully removed",
        }
    pending: dict[str, str]
    if finalizers:
        listed = ", ".join(f"{f} in {n} resource instances" for f, n in sorted(finalizers.items()))
        pending = {
            "status": "True",
            "reason": "SomeFinalizersRemain",
            "message": f"Some content in the namespace has finalizers remaining: {listed}",
        }
    else:
        pending = {
            "status": "False",
            "reason": "ContentHasNoFinalizers",
            "message": "All content-preserving finalizers finished",
        }
    fixed = [
        ("ResourcesDiscovered", "All resources successfully discovered"),
        ("ParsedGroupVersions", "All legacy kube types successfully parsed"),
        ("ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
    ]
    conditions = [
        {"type": kind, "status": "False", "reason": reason, "message": message}
        for kind, (reason, message) in zip(_CONDITION_TYPES[:3], fixed, strict=True)
    ]
    conditions.append({"type": _CONDITION_TYPES[3], **content})
    conditions.append({"type": _CONDITION_TYPES[4], **pending})
    return conditions
