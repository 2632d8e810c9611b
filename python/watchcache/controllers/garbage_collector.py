"""The garbage collector: dependents go with their owners (``metadata.ownerReferences``),
or are orphaned, as the owner's deletion asked, as kube-controller-manager's garbage
collector does it.

Design note
-----------
The collector follows every served resource (:class:`~watchcache.controllers.informer.
Follower`) and indexes the objects that have owners: dependent key -> its owner
references, and owner key -> the keys of its dependents (an owner reference names the
owner's kind and name, which with the dependent's namespace gives the owner's key; its uid
says whether the object at that key is that owner). Three queues do the work:

* **attempt** (a dependent): read it and each of its owners from etcd (never trust the
  cache for "absent"). An owner that no longer exists, or whose uid differs, is dangling;
  one being deleted with ``foregroundDeletion`` and a ``blockOwnerDeletion`` reference
  waits for its dependents; others are solid. With a solid owner, references to dangling
  and waiting owners are removed; with only waiting owners, the dependent is deleted in
  the foreground; with only dangling owners it is deleted with the propagation its own
  finalizers ask for (background by default). An owner whose kind is not served, or a
  namespaced owner of a cluster-scoped dependent, cannot be verified and counts as solid:
  nothing is deleted on a guess.
* **foreground** (an owner with ``foregroundDeletion``): its dependents are attempted
  (so they go, in the foreground themselves); once none with ``blockOwnerDeletion``
  remains, the finalizer is removed and the owner goes.
* **orphan** (an owner with ``orphan``): its dependents lose their references to it; then
  the finalizer is removed.

The collector acts only after every follower has listed once, so that an owner not listed
yet is never taken for absent. Deletes carry a uid precondition, so a dependent recreated
under the same name is never deleted for its predecessor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from watchcache.cache.event import EventType
from watchcache.cache.watch_cache import WatchCache
from watchcache.controllers.informer import Follower, FollowerSet, ObjectEvent, WorkQueue
from watchcache.registry.object_store import (
    FOREGROUND_FINALIZER,
    ORPHAN_FINALIZER,
    ObjectStore,
)
from watchcache.registry.resources import ResourceSpec
from watchcache.wire.errors import ConflictError, NotFoundError
from watchcache.wire.write_options import DeleteOptions, PropagationPolicy

log = logging.getLogger(__name__)

#: Workers of the attempt queue (kube-controller-manager's --concurrent-gc-syncs is 20).
ATTEMPT_WORKERS: Final = 4


#: Who this controller's writes belong to in managedFields: the garbage collector runs in
#: kube-controller-manager in Kubernetes.
FIELD_MANAGER: Final = "kube-controller-manager"


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """The parts of an owner reference the collector uses; ``key`` is the owner's etcd
    key when its kind is served (None: it cannot be verified)."""

    uid: str
    key: str | None
    block: bool


@dataclass(frozen=True, slots=True)
class _Location:
    spec: ResourceSpec
    namespace: str
    name: str


class GarbageCollector:
    """Deletes or orphans dependents of deleted owners across the served resources."""

    def __init__(
        self,
        specs: Mapping[str, ResourceSpec],
        caches: Mapping[str, WatchCache],
        stores: Mapping[str, ObjectStore],
    ) -> None:
        self.specs = specs
        self.caches = caches
        self.stores = stores
        self._followers = FollowerSet()
        self._owners: dict[str, tuple[OwnerRef, ...]] = {}
        self._dependents: dict[str, set[str]] = {}
        self.attempt: WorkQueue[str] = WorkQueue("garbage collector")
        self.foreground: WorkQueue[str] = WorkQueue("garbage collector (foreground)")
        self.orphan: WorkQueue[str] = WorkQueue("garbage collector (orphan)")

    async def run(self) -> None:
        """Until cancelled."""
        try:
            for spec in list(self.specs.values()):
                self.resource_added(spec)
            for follower in self._followers.followers():
                await follower.synced.wait()
            async with asyncio.TaskGroup() as group:
                group.create_task(self.attempt.run(self._attempt, ATTEMPT_WORKERS))
                group.create_task(self.foreground.run(self._process_foreground))
                group.create_task(self.orphan.run(self._process_orphan))
        finally:
            for queue in (self.attempt, self.foreground, self.orphan):
                queue.close()
            await self._followers.close()

    def resource_added(self, spec: ResourceSpec) -> None:
        """A resource is served now (``specs``, ``caches`` and ``stores`` have it): its
        objects join the graph. Owners of its kind resolve from now on."""
        name = spec.group_resource
        self._followers.start(name, Follower(self.caches[name], self._changed))

    def resource_removed(self, spec: ResourceSpec) -> None:
        self._followers.stop(spec.group_resource)

    @property
    def _by_kind(self) -> dict[tuple[str, str], ResourceSpec]:
        return {(s.api_version, s.kind): s for s in self.specs.values()}

    # -- the graph --------------------------------------------------------------------------

    def _changed(self, event: ObjectEvent) -> None:
        key = event.key
        if event.type is EventType.DELETED:
            refs = self._owners.get(key, ())
            self._forget(key)
            for dependent in self._dependents.get(key, set()).copy():
                self.attempt.add(dependent)
            for ref in refs:
                # An owner in the foreground may have been waiting for this one.
                if ref.key is not None:
                    self.foreground.add(ref.key)
            return
        value = event.value
        if b'"ownerReferences"' in value:
            refs = self._refs(key, event.object)
            self._index(key, refs)
            if refs and any(self._maybe_absent(ref) for ref in refs):
                self.attempt.add(key)
        elif key in self._owners:
            self._forget(key)
        if b'"deletionTimestamp"' in value:
            finalizers = event.object.get("metadata", {}).get("finalizers") or []
            if FOREGROUND_FINALIZER in finalizers:
                self.foreground.add(key)
            if ORPHAN_FINALIZER in finalizers:
                self.orphan.add(key)

    def _refs(self, key: str, obj: dict[str, Any]) -> tuple[OwnerRef, ...]:
        location = self._locate(key)
        refs = []
        for ref in obj.get("metadata", {}).get("ownerReferences") or []:
            if not isinstance(ref, dict) or not isinstance(ref.get("uid"), str):
                continue
            owner = self._by_kind.get((str(ref.get("apiVersion")), str(ref.get("kind"))))
            owner_key: str | None = None
            name = ref.get("name")
            if owner is not None and location is not None and isinstance(name, str):
                if owner.namespaced and not location.spec.namespaced:
                    owner_key = None  # a cluster-scoped object cannot be owned by a namespaced one
                else:
                    owner_key = owner.key(location.namespace if owner.namespaced else "", name)
            refs.append(OwnerRef(ref["uid"], owner_key, ref.get("blockOwnerDeletion") is True))
        return tuple(refs)

    def _index(self, key: str, refs: tuple[OwnerRef, ...]) -> None:
        self._forget(key)
        if not refs:
            return
        self._owners[key] = refs
        for ref in refs:
            if ref.key is not None:
                self._dependents.setdefault(ref.key, set()).add(key)

    def _forget(self, key: str) -> None:
        for ref in self._owners.pop(key, ()):
            if ref.key is None:
                continue
            dependents = self._dependents.get(ref.key)
            if dependents is not None:
                dependents.discard(key)
                if not dependents:
                    del self._dependents[ref.key]

    def _maybe_absent(self, ref: OwnerRef) -> bool:
        """Cheap check in the owner's cache: whether the owner may be gone (the attempt
        then verifies against etcd)."""
        if ref.key is None:
            return False
        location = self._locate(ref.key)
        if location is None:
            return False
        _, snapshot = self.caches[location.spec.group_resource].snapshot()
        item = snapshot.get_item(ref.key)
        if item is None:
            return True
        return _uid(item.value) != ref.uid

    def _locate(self, key: str) -> _Location | None:
        for spec in self.specs.values():
            if key.startswith(spec.prefix):
                rest = key[len(spec.prefix) :]
                if spec.namespaced:
                    namespace, _, name = rest.partition("/")
                    return _Location(spec, namespace, name)
                return _Location(spec, "", rest)
        return None

    # -- the work ---------------------------------------------------------------------------

    async def _read(self, key: str) -> dict[str, Any] | None:
        location = self._locate(key)
        if location is None:
            return None
        try:
            obj, _ = await self.stores[location.spec.group_resource].read(
                location.namespace, location.name
            )
        except NotFoundError:
            return None
        return obj

    async def _attempt(self, key: str) -> None:
        dependent = await self._read(key)
        if dependent is None:
            return
        metadata = dependent["metadata"]
        finalizers = metadata.get("finalizers") or []
        if metadata.get("deletionTimestamp") and FOREGROUND_FINALIZER not in finalizers:
            return  # already going
        refs = self._refs(key, dependent)
        solid, dangling, waiting = [], [], []
        for ref in refs:
            if ref.key is None:
                solid.append(ref)
                continue
            owner = await self._read(ref.key)
            if owner is None or owner["metadata"].get("uid") != ref.uid:
                dangling.append(ref)
            elif (
                ref.block
                and owner["metadata"].get("deletionTimestamp")
                and FOREGROUND_FINALIZER in (owner["metadata"].get("finalizers") or [])
            ):
                waiting.append(ref)
            else:
                solid.append(ref)
        location = self._locate(key)
        assert location is not None
        store = self.stores[location.spec.group_resource]
        if solid:
            gone = {ref.uid for ref in (*dangling, *waiting)}
            if gone:
                with contextlib.suppress(NotFoundError):
                    await store.mutate(
                        location.namespace,
                        location.name,
                        lambda obj: _drop_refs(obj, gone),
                        manager=FIELD_MANAGER,
                    )
            return
        if not refs:
            return
        if waiting and self._dependents.get(key):
            policy = PropagationPolicy.FOREGROUND
        elif ORPHAN_FINALIZER in finalizers:
            policy = PropagationPolicy.ORPHAN
        elif FOREGROUND_FINALIZER in finalizers:
            policy = PropagationPolicy.FOREGROUND
        else:
            policy = PropagationPolicy.BACKGROUND
        log.info("garbage collector: deleting %s (%s)", key, policy)
        with contextlib.suppress(NotFoundError, ConflictError):
            await store.delete(
                location.namespace,
                location.name,
                DeleteOptions(propagation_policy=policy, precondition_uid=metadata.get("uid")),
            )

    async def _process_foreground(self, key: str) -> bool:
        owner = await self._read(key)
        if owner is None:
            return True
        metadata = owner["metadata"]
        if not metadata.get("deletionTimestamp") or FOREGROUND_FINALIZER not in (
            metadata.get("finalizers") or []
        ):
            return True
        uid = metadata.get("uid")
        blocking = False
        for dependent in sorted(self._dependents.get(key, set())):
            refs = [r for r in self._owners.get(dependent, ()) if r.uid == uid]
            if not refs:
                continue
            self.attempt.add(dependent)
            blocking = blocking or any(r.block for r in refs)
        if blocking:
            return True  # woken again when a dependent goes
        await self._remove_finalizer(key, FOREGROUND_FINALIZER)
        return True

    async def _process_orphan(self, key: str) -> bool:
        owner = await self._read(key)
        if owner is None:
            return True
        metadata = owner["metadata"]
        if ORPHAN_FINALIZER not in (metadata.get("finalizers") or []):
            return True
        uid = metadata.get("uid", "")
        for dependent in sorted(self._dependents.get(key, set())):
            location = self._locate(dependent)
            if location is None:
                continue
            with contextlib.suppress(NotFoundError):
                await self.stores[location.spec.group_resource].mutate(
                    location.namespace,
                    location.name,
                    lambda obj: _drop_refs(obj, {uid}),
                    manager=FIELD_MANAGER,
                )
        await self._remove_finalizer(key, ORPHAN_FINALIZER)
        return True

    async def _remove_finalizer(self, key: str, finalizer: str) -> None:
        location = self._locate(key)
        assert location is not None

        def remove(obj: dict[str, Any]) -> None:
            metadata = obj["metadata"]
            left = [f for f in metadata.get("finalizers") or [] if f != finalizer]
            if left:
                metadata["finalizers"] = left
            else:
                metadata.pop("finalizers", None)

        with contextlib.suppress(NotFoundError):
            await self.stores[location.spec.group_resource].mutate(
                location.namespace, location.name, remove, manager=FIELD_MANAGER
            )


def _drop_refs(obj: dict[str, Any], uids: set[str]) -> None:
    metadata = obj["metadata"]
    kept = [r for r in metadata.get("ownerReferences") or [] if r.get("uid") not in uids]
    if kept:
        metadata["ownerReferences"] = kept
    else:
        metadata.pop("ownerReferences", None)


def _uid(value: bytes) -> str:
    with contextlib.suppress(ValueError):
        obj = json.loads(value)
        if isinstance(obj, dict):
            return str((obj.get("metadata") or {}).get("uid", ""))
    return ""
