"""The CRD controller: a CustomResourceDefinition becomes served resources, and its
deletion takes its objects with it, as apiextensions-apiserver's naming, establishing and
finalizer controllers and its CRD handler do it together.

Design note
-----------
For each CRD, whenever it changes (and once for every CRD at start), :meth:`_sync`:

1. **names** (naming controller): the names it asks for are checked against those the
   other CRDs of its group accepted; the result goes to ``status.acceptedNames`` and the
   ``NamesAccepted`` condition through ``/status``. Writing wakes the other CRDs of the
   group, since a name may have been freed;
2. **serving** (CRD handler): once names are accepted, each served version becomes a
   resource of the host (``served_specs``) under the accepted names: its watch cache is
   started and synced before discovery and the routes show it; a changed CRD (a version
   added, a schema changed, the storage version moved) replaces the resources that
   changed, all in one ``change_resources``, so no URL of the CRD stops answering;
3. **establishing**: once served, ``Established: True`` is written;
4. **deletion** (finalizer controller): a CRD being deleted carries the cleanup
   finalizer its DELETE added. Creates of its objects are refused (405, as kube-apiserver
   refuses them), every object is deleted as a DELETE of it would be, and the
   ``Terminating`` condition says how that goes. When none is left the finalizer is
   removed, which deletes the CRD; its resources are then no longer served.

Every apiserver over the same etcd runs this controller: each serves every CRD, and
their status writes agree (the same inputs give the same status; a conflict is retried).
On start, :meth:`serve_existing` serves the CRDs already stored before the server
reports ready, so a restart does not make their resources disappear for a moment.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from watchcache.cache.watch_cache import WatchCache
from watchcache.controllers.informer import Follower, FollowerSet, ObjectEvent, WorkQueue
from watchcache.registry import crd_definition
from watchcache.registry.crd_resources import served_specs
from watchcache.registry.custom_resource import InvalidSchemaError, compile_schema
from watchcache.registry.object_store import ObjectStore, Subresource
from watchcache.registry.resources import CUSTOM_RESOURCE_DEFINITIONS, ResourceSpec
from watchcache.wire.errors import ConflictError, NotFoundError, StatusError
from watchcache.wire.options import ListOptions
from watchcache.wire.write_options import DeleteOptions, PropagationPolicy

__all__ = ["CustomResourceDefinitionController", "ResourceHost"]

log = logging.getLogger(__name__)

#: How often a CRD whose objects are being deleted is checked again, besides being woken
#: by every change to it.
RECHECK_SECONDS: Final = 1.0
#: kube-apiserver's message for a create of an object of a terminating CRD.
TERMINATING_CREATE: Final = "create not allowed while custom resource definition is terminating"
_CRDS: Final = CUSTOM_RESOURCE_DEFINITIONS.group_resource


#: Who this controller's writes belong to in managedFields: the apiextensions controllers run in
#: kube-apiserver in Kubernetes.
FIELD_MANAGER: Final = "kube-apiserver"


class ResourceHost(Protocol):
    """What the controller needs of the server: its served resources and their stores,
    and serving one more or one less (``ApiServer`` is one)."""

    @property
    def resources(self) -> Mapping[str, ResourceSpec]: ...

    @property
    def stores(self) -> Mapping[str, ObjectStore]: ...

    async def change_resources(
        self,
        *,
        add: Sequence[ResourceSpec] = ...,
        remove: Collection[str] = ...,
        timeout: float | None = ...,
    ) -> None: ...


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class CustomResourceDefinitionController:
    """Serves the CRDs stored in ``cache`` on ``host`` (see the module note)."""

    def __init__(self, host: ResourceHost, cache: WatchCache) -> None:
        self.host = host
        self.cache = cache
        self.queue: WorkQueue[str] = WorkQueue("CRD controller")
        self._followers = FollowerSet()
        #: What each CRD (by name) has served: served_key -> (spec, schema JSON).
        self._serving: dict[str, dict[str, tuple[ResourceSpec, str]]] = {}

    @property
    def store(self) -> ObjectStore:
        return self.host.stores[_CRDS]

    async def serve_existing(self) -> None:
        """Serve the established CRDs stored now (before the server reports ready)."""
        listed = await self.cache.list(ListOptions(resource_version="0"))
        for item in listed.items:
            crd = json.loads(item.value)
            if crd_definition.is_condition_true(crd, "NamesAccepted"):
                try:
                    await self._serve(crd)
                except Exception:
                    log.exception("cannot serve CRD %s", crd.get("metadata", {}).get("name"))

    async def run(self) -> None:
        """Until cancelled."""
        try:
            self._followers.start(_CRDS, Follower(self.cache, self._changed))
            await self.queue.run(self._sync)
        finally:
            self.queue.close()
            await self._followers.close()
            # Served resources stay served: the host stops them with itself.

    def _changed(self, event: ObjectEvent) -> None:
        self.queue.add(event.key.rsplit("/", 1)[-1])

    async def _sync(self, name: str) -> bool:
        try:
            crd, _ = await self.store.read("", name)
        except NotFoundError:
            await self._stop_serving(name)
            return True
        if await self._write_names(crd):
            return True  # the write wakes this CRD again
        if not crd_definition.is_condition_true(crd, "NamesAccepted"):
            await self._stop_serving(name)
            if crd["metadata"].get("deletionTimestamp"):
                await self._finalize_never_established(crd)
            return True
        await self._serve(crd)
        established = crd_definition.established_status(crd, now=_now())
        if established is not None:
            await self._write_status(name, established)
            return True
        if crd["metadata"].get("deletionTimestamp"):
            return await self._clean_up(crd)
        return True

    # -- names ------------------------------------------------------------------------------

    async def _write_names(self, crd: dict[str, Any]) -> bool:
        group = (crd.get("spec") or {}).get("group") or ""
        name = crd["metadata"]["name"]
        group_crds = await self._crds_of_group(group)
        # Its own accepted names count too, as the naming controller counts them: a rename
        # that reuses one of them (plural and singular swapped) is a conflict.
        taken = crd_definition.NamesInUse.of_group(group_crds, group)
        status = crd_definition.names_status(crd, taken, now=_now())
        if status is None:
            return False
        await self._write_status(name, status)
        for other in group_crds:
            if other["metadata"]["name"] != name:
                self.queue.add(other["metadata"]["name"])
        return True

    async def _crds_of_group(self, group: str) -> list[dict[str, Any]]:
        listed = await self.cache.list(ListOptions(resource_version="0"))
        crds = (json.loads(item.value) for item in listed.items)
        return [crd for crd in crds if (crd.get("spec") or {}).get("group") == group]

    async def _write_status(self, name: str, status: dict[str, Any]) -> None:
        def set_status(obj: dict[str, Any]) -> None:
            obj["status"] = status

        with contextlib.suppress(NotFoundError):
            await self.store.mutate(
                "", name, set_status, subresource=Subresource.STATUS, manager=FIELD_MANAGER
            )

    # -- serving ----------------------------------------------------------------------------

    async def _serve(self, crd: dict[str, Any]) -> None:
        """Serve what ``crd`` defines now; replace what changed, drop what went, as one
        change of the host's resources (see ``ResourceHost.change_resources``)."""
        name = crd["metadata"]["name"]
        wanted = {
            spec.served_key: (spec, json.dumps(spec.openapi_schema, sort_keys=True))
            for spec in served_specs(crd)
        }
        serving = self._serving.setdefault(name, {})
        added: dict[str, tuple[ResourceSpec, str]] = {}
        refused: set[tuple[str, str]] = set()
        for key, entry in wanted.items():
            spec = entry[0]
            if serving.get(key) == entry:
                continue
            if key not in serving and key in self.host.resources:
                log.warning("CRD %s: %s is served already", name, key)
                continue
            try:
                if spec.openapi_schema is not None:
                    compile_schema(spec)
            except InvalidSchemaError as error:
                # What served this version before goes on serving it.
                log.warning("CRD %s: %s", name, error)
                refused.add((spec.group, spec.version))
                continue
            added[key] = entry
        retired = [
            key
            for key, (spec, _) in serving.items()
            if wanted.get(key) != serving[key] and (spec.group, spec.version) not in refused
        ]
        if added or retired:
            try:
                await self.host.change_resources(
                    add=[spec for spec, _ in added.values()], remove=retired
                )
            except ValueError as error:
                log.warning("CRD %s: %s", name, error)
                return
            for key in retired:
                del serving[key]
            serving.update(added)
        reason = TERMINATING_CREATE if crd["metadata"].get("deletionTimestamp") else ""
        for key in serving:
            self.host.stores[key].refuse_creates = reason

    async def _stop_serving(self, name: str) -> None:
        serving = self._serving.pop(name, {})
        await self.host.change_resources(
            remove=[key for key in serving if key in self.host.resources]
        )

    # -- deletion ---------------------------------------------------------------------------

    async def _clean_up(self, crd: dict[str, Any]) -> bool:
        name = crd["metadata"]["name"]
        if crd_definition.CLEANUP_FINALIZER not in (crd["metadata"].get("finalizers") or []):
            return True
        await self._set_terminating(
            crd, "InstanceDeletionInProgress", "CustomResource deletion is in progress"
        )
        remaining, failure = await self._delete_objects(name)
        if failure:
            await self._set_terminating(crd, "InstanceDeletionFailed", failure)
            self.queue.add_after(name, RECHECK_SECONDS)
            return True
        if remaining:
            await self._set_terminating(
                crd,
                "InstanceDeletionCheck",
                f"could not confirm zero CustomResources remaining: {remaining} remaining",
            )
            self.queue.add_after(name, RECHECK_SECONDS)
            return True
        await self._set_terminating(crd, "InstanceDeletionCompleted", "removed all instances")
        await self._remove_cleanup_finalizer(name)
        return True

    async def _finalize_never_established(self, crd: dict[str, Any]) -> None:
        """A CRD whose names were never accepted has no objects served: its cleanup
        finalizer goes at once, as the finalizer controller does for one never
        established."""
        if crd_definition.CLEANUP_FINALIZER not in (crd["metadata"].get("finalizers") or []):
            return
        await self._set_condition(
            crd,
            {
                "type": "Terminating",
                "status": "False",
                "reason": "NeverEstablished",
                "message": "resource was never established",
            },
        )
        await self._remove_cleanup_finalizer(crd["metadata"]["name"])

    async def _remove_cleanup_finalizer(self, name: str) -> None:
        def without_finalizer(obj: dict[str, Any]) -> None:
            finalizers = obj["metadata"].get("finalizers") or []
            obj["metadata"]["finalizers"] = [
                f for f in finalizers if f != crd_definition.CLEANUP_FINALIZER
            ]

        with contextlib.suppress(NotFoundError):
            await self.store.mutate("", name, without_finalizer, manager=FIELD_MANAGER)

    async def _delete_objects(self, name: str) -> tuple[int, str]:
        """Delete every object of the CRD's storage version; how many are left (being
        deleted, held by finalizers), and the failure text if a delete failed."""
        stored = [spec for spec, _ in self._serving.get(name, {}).values() if spec.stored_as_served]
        remaining = 0
        for spec in stored:
            store = self.host.stores.get(spec.served_key)
            if store is None or store.cache is None:
                continue
            listed = await store.cache.list(ListOptions())
            for item in listed.items:
                remaining += 1
                metadata = json.loads(item.value).get("metadata") or {}
                if metadata.get("deletionTimestamp"):
                    continue
                try:
                    await store.delete(
                        metadata.get("namespace", ""),
                        metadata.get("name", ""),
                        DeleteOptions(
                            propagation_policy=PropagationPolicy.BACKGROUND,
                            precondition_uid=metadata.get("uid"),
                        ),
                    )
                except (NotFoundError, ConflictError):
                    continue
                except StatusError as error:
                    return remaining, f"could not issue all deletes: {error.message}"
        return remaining, ""

    async def _set_terminating(self, crd: dict[str, Any], reason: str, message: str) -> None:
        await self._set_condition(
            crd, {"type": "Terminating", "status": "True", "reason": reason, "message": message}
        )

    async def _set_condition(self, crd: dict[str, Any], condition: dict[str, str]) -> None:
        """Write ``condition`` to the CRD's status (unless it says this already), and keep
        ``crd`` current with it."""
        status = crd.setdefault("status", {})
        for existing in status.get("conditions") or []:
            if isinstance(existing, dict) and all(
                existing.get(k) == v for k, v in condition.items()
            ):
                return
        now = _now()

        def set_it(obj: dict[str, Any]) -> None:
            crd_definition.set_condition(obj.setdefault("status", {}), condition, now)

        with contextlib.suppress(NotFoundError):
            await self.store.mutate(
                "",
                crd["metadata"]["name"],
                set_it,
                subresource=Subresource.STATUS,
                manager=FIELD_MANAGER,
            )
        crd_definition.set_condition(status, condition, now)
