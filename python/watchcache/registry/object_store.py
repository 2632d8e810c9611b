"""Writes of one resource, with Kubernetes' object lifecycle, as compare-and-swap
transactions in etcd; the results come back to readers through the watch into the cache.

Design note
-----------
The shape is Kubernetes' generic registry store (``registry/generic/registry/store.go``):

* **create**: admission checks, the kind's defaults (:mod:`~watchcache.registry.strategy`),
  then a put only if the key does not exist (409 AlreadyExists). Refused in a namespace
  that does not exist (404) or is terminating (403, as the NamespaceLifecycle admission).
* **update, patch, status, finalize** all go through :meth:`ObjectStore._guaranteed_update`:
  take the object and its mod revision (from the cache, below), compute the new object
  from it, write it only if the key is still at that revision. A body that names a
  resourceVersion other than the stored one is a 409; without one (an unconditional
  update, or a patch without a resourceVersion) someone else's write in between means
  compute again from the object etcd returned with the failed compare, and retry. An update
  keeps the server-owned metadata (uid, creationTimestamp, deletionTimestamp, generation)
  and refuses to change them; once deletion has started no new finalizer may be added; and
  an update that leaves an object being deleted with no finalizers deletes it.
* **delete** (:meth:`ObjectStore.delete`): preconditions (uid, resourceVersion); then, as
  ``Store.Delete``: the garbage-collection finalizers the propagation policy asks for
  (``orphan``, ``foregroundDeletion``) are set; an object with finalizers, or a pod
  deleted gracefully, is *marked* (``deletionTimestamp``, ``deletionGracePeriodSeconds``,
  generation bumped) and stays until the last finalizer goes; anything else is deleted at
  the revision it was decided on. DELETE answers with the object (marked, or — for pods
  and namespaces — the deleted object) or with a Success Status (configmaps, secrets); 202
  when the client asked ``orphanDependents: false`` and the object was not deleted yet.
* **namespaces** (:meth:`ObjectStore.delete` on the namespaces resource): the first DELETE
  sets ``deletionTimestamp`` and ``status.phase: Terminating`` and keeps the namespace
  while ``spec.finalizers`` holds ``kubernetes``; the namespace controller empties it,
  removes that finalizer through ``/finalize``, and deletes it again.

Writes start from the cached object, as kube-apiserver's ``CacheDelegator`` hands the
cached object to ``GuaranteedUpdate`` and ``Delete`` (docs/semantics.md §12): its mod
revision is the compare-and-swap's, so a write computed from a stale copy fails its compare
and is computed again from etcd's object, which the failed transaction returns. What a
compare-and-swap does not check is checked against etcd before it is answered: an error
(a precondition, a resourceVersion, admission, a patch, an apply conflict) found on the
cached copy is the answer only if etcd is still at that revision, else the write starts
over from etcd's object (``origStateIsCurrent``); and "nothing to write" by the cached copy
is confirmed by a read. A write the cache cannot start (no cache, not ready, the key not in
it) reads etcd, as before; so do dry runs and a namespace's DELETE. With the cache caught
up, an update, patch, apply or delete is one etcd round trip instead of two.

Dry run (``dryRun=All``), as Kubernetes' ``DryRunnableStorage`` does it: every read, check
and defaulting step runs, no transaction is sent. A create answers the object without a
resourceVersion (nothing was stored); an update, patch or marking delete answers the result
at the revision it was read at; an immediate delete answers as the real one would.

The answer to a write is the object as stored, stamped with the revision of the write, so a
client sees the same JSON the cache will serve. Each method is a coroutine on the event
loop; a store is shared by all requests of its resource.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from watchcache._core import Item
from watchcache.cache.backing_store import ListResult
from watchcache.cache.watch_cache import WatchCache
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.proto import kv_pb2
from watchcache.registry import admission
from watchcache.registry.apply_types import atom_for
from watchcache.registry.managed_fields import FieldManager, reset_fields
from watchcache.registry.patch import SERVED_PATCH_TYPES, STRATEGIC_MERGE_PATCH, apply_patch
from watchcache.registry.resources import ResourceSpec, ScaleSubresource
from watchcache.registry.scale import SCALE_API_VERSION, SCALE_KIND, from_scale, to_scale
from watchcache.registry.strategies import strategy_for
from watchcache.registry.strategy import NAMESPACE_FINALIZER, NamespaceStrategy
from watchcache.wire import gojson
from watchcache.wire.body import JSON as JSON_MEDIA_TYPE
from watchcache.wire.body import (
    check_depth,
    decode_apply_configuration,
    decode_body,
    decode_unstructured,
    has_schema,
)
from watchcache.wire.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    ForbiddenError,
    InternalError,
    InvalidError,
    MethodNotAllowedError,
    NotFoundError,
    StatusCause,
    StatusDetails,
    StatusError,
    UnsupportedMediaTypeError,
)
from watchcache.wire.gostrconv import go_quote, parse_uint64
from watchcache.wire.options import ListOptions, ResourceVersionMatch
from watchcache.wire.write_options import DeleteOptions, FieldValidation, PropagationPolicy

#: Kubernetes' GuaranteedUpdate retries on conflict; so does this, this many times.
MAX_ATTEMPTS: Final = 5
#: The garbage collector's finalizers (``metav1.FinalizerOrphanDependents`` and
#: ``FinalizerDeleteDependents``).
ORPHAN_FINALIZER: Final = "orphan"
FOREGROUND_FINALIZER: Final = "foregroundDeletion"
#: deletecollection reads this many objects a page (Kubernetes' deleteCollectionPageSize)
#: and deletes this many at a time.
_COLLECTION_PAGE: Final = 10_000
_COLLECTION_WORKERS: Final = 8
#: How long one etcd lease is reused for objects with a TTL (kube-apiserver's
#: leaseReuseDurationSeconds).
LEASE_REUSE_SECONDS: Final = 60
#: Kubernetes' ``OptimisticLockErrorMsg``.
OPTIMISTIC_LOCK_MESSAGE: Final = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


class Subresource(enum.StrEnum):
    """Which part of an object a write may change."""

    MAIN = ""  #: everything but status (for kinds that have one)
    STATUS = "status"  #: status only
    FINALIZE = "finalize"  #: a namespace's ``spec.finalizers`` only
    SCALE = "scale"  #: the replicas, through an ``autoscaling/v1`` Scale


class NamespacePhase(enum.StrEnum):
    ACTIVE = "Active"
    TERMINATING = "Terminating"


#: The phase of a namespace by name (None: no such namespace).
NamespaceLookup = Callable[[str], Awaitable[NamespacePhase | None]]


@dataclass(frozen=True, slots=True)
class WriteAnswer:
    """An HTTP answer to a write: the body, its status code and the warnings to send."""

    body: bytes
    code: int = 200
    warnings: tuple[str, ...] = ()


class _Missing(Exception):
    """The object of an apply does not exist: the apply creates it."""


class _Delete:
    """What a try-update returns to delete the object instead (an update that removed
    the last finalizer of an object being deleted)."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj


@dataclass(frozen=True, slots=True)
class _State:
    """The object a write computes from, and the mod revision its compare-and-swap names.
    ``current``: read from etcd (or returned by a failed compare), so an error found on it
    is the answer; False: the watch cache's copy, which may be behind etcd."""

    obj: dict[str, Any]
    revision: int
    current: bool

    @property
    def attempts(self) -> int:
        """How many compare-and-swaps a write starting here may try: MAX_ATTEMPTS from
        etcd's state, one more from the cache's (a stale copy costs one failed compare)."""
        return MAX_ATTEMPTS if self.current else MAX_ATTEMPTS + 1


class ObjectStore:
    """Writes of one resource over ``client``.

    ``namespace_phase`` (when namespaces are served) refuses creates in a missing (404) or
    terminating (403) namespace. ``garbage_collection``: DELETE sets the garbage
    collector's finalizers as the propagation policy asks (off: they are left alone, as
    a kube-apiserver whose garbage collector is disabled does). ``cache``: the resource's
    watch cache, which deletecollection lists from.
    """

    def __init__(
        self,
        client: EtcdClient,
        spec: ResourceSpec,
        *,
        cache: WatchCache | None = None,
        namespace_phase: NamespaceLookup | None = None,
        garbage_collection: bool = True,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.client = client
        self.cache = cache
        self.spec = spec
        self.strategy = strategy_for(spec)
        #: How objects cross between this version and the stored one (None: stored as
        #: served).
        self.conversion = spec.version_conversion()
        on_read = self.strategy.on_read()
        #: What a stored object goes through on its way to a client (this version, the
        #: schema's defaults); None: nothing. The cache's codec applies it too.
        self.to_served = _compose(
            None if self.conversion is None else self.conversion.to_served, on_read
        )
        self.codec = replace(spec.codec(), convert=self.to_served)
        #: Who owns which field (metadata.managedFields) and server-side apply.
        self.field_manager = FieldManager(
            spec.api_version,
            spec.kind,
            lambda: atom_for(spec),
            ignored=reset_fields(spec.kind, self.strategy.has_status),
        )
        # A write's answer is in this version already: only the read step applies.
        self._answer_codec = replace(self.codec, convert=on_read)
        #: When set, creates are refused with this message (405), as for the resource of
        #: a CRD being deleted.
        self.refuse_creates = ""
        self.garbage_collection = garbage_collection
        self._namespace_phase = namespace_phase
        self._clock = clock
        #: The etcd lease objects of a resource with a TTL are written with, and when it
        #: was granted (see _lease).
        self._lease_id = 0
        self._lease_granted = 0.0

    # -- reads of the source of truth -------------------------------------------------------

    async def read(self, namespace: str, name: str) -> tuple[dict[str, Any], int]:
        """The stored object and its mod revision, from etcd. Raises 404."""
        state = await self._read_state(namespace, name)
        return state.obj, state.revision

    async def _read_state(self, namespace: str, name: str) -> _State:
        """The object as etcd has it now. Raises 404."""
        kv = await self.client.get(self.spec.key(namespace, name).encode())
        if kv is None:
            raise NotFoundError.for_object(self.spec.name, name, self.spec.group)
        return self._state_of(kv)

    def _state_of(self, kv: kv_pb2.KeyValue) -> _State:
        """An etcd key-value (a read's, or a failed compare's) as the current state."""
        try:
            obj = gojson.loads(kv.value)
        except ValueError as error:
            raise InternalError(f"stored object {kv.key!r} is not JSON: {error}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            raise InternalError(f"stored object {kv.key!r} is not a Kubernetes object")
        if self.to_served is not None:
            self.to_served(obj)
        return _State(obj, int(kv.mod_revision), current=True)

    def _cached_state(self, namespace: str, name: str) -> _State | None:
        """The object as the watch cache has it now, without waiting for the cache to
        catch up (None: no cache, not ready, found inconsistent with etcd, or not in it).
        Possibly stale: see :meth:`_recheck` and the module note. Its value went through
        the same :attr:`to_served` as :meth:`_state_of` applies, and carries the
        resourceVersion the cache stamped, which etcd's value does not: removed, so both
        look alike."""
        cache = self.cache
        # A cache the consistency check found wrong serves no reads until rebuilt; its
        # copies would only cost failed compares, so writes read etcd meanwhile too.
        if cache is None or not cache.ready or not cache.consistent:
            return None
        item = cache.snapshot()[1].get_item(self.spec.key(namespace, name))
        if item is None:
            return None
        obj = gojson.loads(item.value)
        obj["metadata"].pop("resourceVersion", None)
        return _State(obj, item.mod_revision, current=False)

    async def _start_state(self, namespace: str, name: str, *, dry_run: bool) -> _State:
        """Where a write starts: the cached object, else etcd's. A dry run reads etcd,
        as Kubernetes' DryRunnableStorage does (its answer is never checked by a
        compare-and-swap). Raises 404."""
        state = None if dry_run else self._cached_state(namespace, name)
        if state is None:
            state = await self._read_state(namespace, name)
        return state

    async def _recheck(
        self, namespace: str, name: str, state: _State, error: StatusError
    ) -> _State:
        """``error`` came from checking ``state``: raise it if ``state`` is etcd's current
        object, else return etcd's current object to check again — unless etcd is still at
        the cached revision, then the error stands (Kubernetes' ``origStateIsCurrent`` rule
        in ``GuaranteedUpdate`` and ``conditionalDelete``). So a stale cache never answers
        an error etcd's state would not. Raises 404 when the object is gone."""
        if state.current:
            raise error
        fresh = await self._read_state(namespace, name)
        if fresh.revision == state.revision:
            raise error
        return fresh

    def _stored_value(self, obj: dict[str, Any]) -> bytes:
        """The etcd value of ``obj``: in the storage version (``obj`` is left as it is)."""
        if self.conversion is None:
            return admission.encode(obj)
        stored = dict(obj)
        self.conversion.to_storage(stored)
        return admission.encode(stored)

    # -- decoding ---------------------------------------------------------------------------

    def decode(
        self, body: bytes, content_type: str, field_validation: FieldValidation
    ) -> tuple[dict[str, Any], list[str]]:
        """A write's body as an object of this resource (JSON, YAML or protobuf by
        ``content_type``; kinds without a built-in schema: JSON or YAML, pruned by their
        own), with the warnings ``field_validation`` asks for. Raises 400, 413, 415."""
        admission.check_size(body)
        spec = self.spec
        if has_schema(spec.api_version, spec.kind):
            return decode_body(
                body,
                content_type,
                kind=spec.kind,
                api_version=spec.api_version,
                field_validation=field_validation,
            )
        return decode_unstructured(
            body,
            content_type,
            kind=spec.kind,
            api_version=spec.api_version,
            field_validation=field_validation,
            prune=self.strategy.prune,
        )

    async def _lease(self) -> int:
        """The etcd lease a write of this resource attaches its object to (0: none), as
        kube-apiserver's lease manager does it: objects of a resource with a TTL (Events,
        one hour) share a lease granted for TTL + 60 s and reused for 60 s, so a burst of
        events costs one grant a minute and every object still lives at least its TTL."""
        ttl = self.spec.ttl_seconds
        if not ttl:
            return 0
        now = time.monotonic()
        if not self._lease_id or now - self._lease_granted >= LEASE_REUSE_SECONDS:
            self._lease_id = await self.client.grant_lease(ttl + LEASE_REUSE_SECONDS)
            self._lease_granted = now
        return self._lease_id

    def _answer(self, namespace: str, name: str, obj: dict[str, Any], revision: int) -> bytes:
        return self._answer_codec.item(self.spec.key(namespace, name), obj, revision).value

    # -- create -----------------------------------------------------------------------------

    async def create(
        self,
        namespace: str,
        obj: dict[str, Any],
        *,
        dry_run: bool = False,
        manager: str = "",
        owned: bool = False,
    ) -> bytes:
        """Store a new object (answered with 201). ``dry_run``: every check runs, including
        whether the name is taken, nothing is written and the answer has no
        resourceVersion. ``manager`` owns the object's fields (``owned``: the caller, an
        apply, has set managedFields already)."""
        spec = self.spec
        if self.refuse_creates:
            raise MethodNotAllowedError(
                self.refuse_creates, details=StatusDetails(group=spec.group, kind=spec.name)
            )
        metadata = admission.check_object(spec, obj, namespace=namespace, name=None)
        name = metadata["name"]
        if spec.namespaced:
            await self._check_namespace_accepts(namespace, name)
        admission.prepare_create(metadata)
        self.strategy.prepare_for_create(obj)
        if not owned:
            self.field_manager.update(None, obj, manager)
        self.strategy.validate(obj)
        key = spec.key(namespace, name).encode()
        if dry_run:
            if await self.client.get(key) is not None:
                raise AlreadyExistsError.for_object(spec.name, name, spec.group)
            return admission.encode(obj)
        lease = await self._lease()
        result = await self.client.create(key, self._stored_value(obj), lease=lease)
        if not result.succeeded:
            error = AlreadyExistsError.for_object(spec.name, name, spec.group)
            current = result.current
            if current is not None and _being_deleted(current.value):
                error.message = f"object is being deleted: {error.message}"
            raise error
        return self._answer(namespace, name, obj, result.revision)

    async def _check_namespace_accepts(self, namespace: str, name: str) -> None:
        lookup = self._namespace_phase
        if lookup is None:
            return
        phase = await lookup(namespace)
        if phase is None:
            raise NotFoundError.for_object("namespaces", namespace)
        if phase is NamespacePhase.TERMINATING:
            raise ForbiddenError.for_object(
                self.spec.name,
                name,
                self.spec.group,
                f"unable to create new content in namespace {namespace} because it is being "
                "terminated",
                causes=(
                    StatusCause(
                        "NamespaceTerminating",
                        f"namespace {namespace} is being terminated",
                        "metadata.namespace",
                    ),
                ),
            )

    # -- update, patch, status, finalize ----------------------------------------------------

    async def update(
        self,
        namespace: str,
        name: str,
        obj: dict[str, Any],
        *,
        dry_run: bool = False,
        subresource: Subresource = Subresource.MAIN,
        manager: str = "",
    ) -> bytes:
        """Replace the object (PUT) or its ``subresource``, ``manager`` owning what it
        changes. Raises 404, 409, 422."""
        self._check_subresource(subresource)
        metadata = admission.check_object(self.spec, obj, namespace=namespace, name=name)
        precondition = _resource_version(metadata)

        def replace(stored: dict[str, Any], _revision: int) -> dict[str, Any] | _Delete:
            return self._prepare_update(gojson.deep_copy(obj), stored, subresource, manager)

        return await self._guaranteed_update(
            namespace, name, replace, dry_run=dry_run, precondition=precondition
        )

    async def patch(
        self,
        namespace: str,
        name: str,
        content_type: str,
        body: bytes,
        *,
        dry_run: bool = False,
        subresource: Subresource = Subresource.MAIN,
        field_validation: FieldValidation = FieldValidation.WARN,
        manager: str = "",
    ) -> WriteAnswer:
        """Apply a PATCH body to the stored object (or its ``subresource``). The patched
        object is decoded as a body would be: unknown and duplicate fields are dropped, and
        reported as ``field_validation`` asks (warnings, or 422 under Strict, as
        Kubernetes' patch handler does); a field of the wrong type is a 422."""
        self._check_subresource(subresource)
        if len(body) > admission.MAX_BODY_BYTES:
            admission.check_size(body)
        spec = self.spec
        self._check_patch_type(content_type)
        warnings: list[str] = []

        def patched(stored: dict[str, Any], revision: int) -> dict[str, Any] | _Delete:
            # Patches see the resourceVersion a client would.
            meta = {**stored["metadata"], "resourceVersion": str(revision)}
            result = apply_patch(content_type, {**stored, "metadata": meta}, body, spec.kind)
            if not isinstance(result, dict):
                raise BadRequestError("the patched object is not a JSON object")
            check_depth(result)
            result, found = self._decode_patched(result, field_validation)
            warnings[:] = found
            metadata = admission.check_object(spec, result, namespace=namespace, name=name)
            wanted = _resource_version(metadata)
            if wanted and wanted != revision:
                raise self._conflict(name)
            return self._prepare_update(result, stored, subresource, manager)

        answer = await self._guaranteed_update(namespace, name, patched, dry_run=dry_run)
        return WriteAnswer(answer, warnings=tuple(warnings))

    async def apply(
        self,
        namespace: str,
        name: str,
        body: bytes,
        *,
        manager: str,
        force: bool,
        dry_run: bool = False,
        subresource: Subresource = Subresource.MAIN,
        field_validation: FieldValidation = FieldValidation.WARN,
    ) -> WriteAnswer:
        """Server-side apply of the configuration ``body`` by ``manager``: merged into the
        stored object by the kind's schema (:mod:`~watchcache.registry.managed_fields`), or
        a new object (201) when there is none. Then everything a patch goes through. Raises
        400, 404 (a subresource of a missing object), 409 (conflicts, stale
        resourceVersion), 422."""
        self._check_subresource(subresource)
        if len(body) > admission.MAX_BODY_BYTES:
            admission.check_size(body)
        config, duplicates = decode_apply_configuration(body)
        warnings: list[str] = []
        if duplicates:
            if field_validation is FieldValidation.STRICT:
                raise BadRequestError(
                    "error strict decoding patch: yaml: unmarshal errors:\n  "
                    + "\n  ".join(duplicates)
                )
            if field_validation is FieldValidation.WARN:
                warnings.extend(duplicates)
        spec = self.spec
        found: list[str] = []

        def checked(result: dict[str, Any]) -> dict[str, Any]:
            check_depth(result)
            result, strict = self._decode_patched(result, field_validation)
            found[:] = strict
            return result

        def applied(stored: dict[str, Any], revision: int) -> dict[str, Any] | _Delete:
            meta = {**stored["metadata"], "resourceVersion": str(revision)}
            result = checked(
                self.field_manager.apply(
                    {**stored, "metadata": meta},
                    config,
                    manager,
                    force=force,
                    subresource=subresource.value,
                )
            )
            metadata = admission.check_object(spec, result, namespace=namespace, name=name)
            wanted = _resource_version(metadata)
            if wanted and wanted != revision:
                raise self._conflict(name)
            return self._prepare_update(result, stored, subresource, None)

        async def create_missing() -> WriteAnswer:
            if subresource is not Subresource.MAIN:
                raise NotFoundError.for_object(spec.name, name, spec.group)
            result = checked(self.field_manager.apply({}, config, manager, force=force))
            admission.check_object(spec, result, namespace=namespace, name=name)
            created = await self.create(namespace, result, dry_run=dry_run, owned=True)
            return WriteAnswer(created, code=201)

        try:
            answer = await self._guaranteed_update(
                namespace, name, applied, dry_run=dry_run, create_missing=True
            )
        except _Missing:
            made = await create_missing()
            return replace(made, warnings=(*warnings, *found))
        return WriteAnswer(answer, warnings=(*warnings, *found))

    def _check_patch_type(self, content_type: str) -> None:
        """A strategic merge patch needs the kind's Go struct tags; kinds without a
        built-in schema (CRDs') refuse it with 415, as kube-apiserver does."""
        media_type = content_type.split(";", 1)[0].strip().lower()
        spec = self.spec
        if media_type == STRATEGIC_MERGE_PATCH and not has_schema(spec.api_version, spec.kind):
            raise UnsupportedMediaTypeError.accepting(
                t for t in SERVED_PATCH_TYPES if t != STRATEGIC_MERGE_PATCH
            )

    def _decode_patched(
        self, result: dict[str, Any], field_validation: FieldValidation
    ) -> tuple[dict[str, Any], list[str]]:
        """The patched object through the body decoder, as Kubernetes decodes the patched
        JSON into the kind: what does not decode is a 422 on the field ``patch``."""
        spec = self.spec
        text = gojson.dumps(result)
        try:
            return self.decode(text.encode(), JSON_MEDIA_TYPE, field_validation)
        except BadRequestError as error:
            why = error.message
            prefix = f"{spec.kind} in version "
            if why.startswith(prefix) and ": " in why:
                why = why.split(": ", 1)[1]
            raise InvalidError.for_fields(
                "",
                "",
                "",
                [
                    StatusCause(
                        "FieldValueInvalid", f"Invalid value: {go_quote(text)}: {why}", "patch"
                    )
                ],
            ) from None

    async def mutate(
        self,
        namespace: str,
        name: str,
        change: Callable[[dict[str, Any]], None],
        *,
        subresource: Subresource = Subresource.MAIN,
        manager: str = "",
    ) -> bytes:
        """Read-modify-write for the server's own controllers: ``change`` edits a copy of
        the stored object in place, and the result goes through the same rules as a
        client's update (so removing the last finalizer of an object being deleted deletes
        it). Retried when someone wrote in between; raises 404 when the object is gone."""
        self._check_subresource(subresource)

        def changed(stored: dict[str, Any], revision: int) -> dict[str, Any] | _Delete:
            obj = gojson.deep_copy(stored)
            change(obj)
            obj["metadata"]["resourceVersion"] = str(revision)
            return self._prepare_update(obj, stored, subresource, manager)

        return await self._guaranteed_update(namespace, name, changed, dry_run=False)

    # -- scale --------------------------------------------------------------------------------

    async def get_scale(self, namespace: str, name: str) -> bytes:
        """The object's Scale (``GET .../scale``), read from etcd. Raises 404."""
        scale = self._scale_paths()
        stored, revision = await self.read(namespace, name)
        stored["metadata"]["resourceVersion"] = str(revision)
        return admission.encode(to_scale(stored, scale))

    async def update_scale(
        self,
        namespace: str,
        name: str,
        content_type: str,
        body: bytes,
        *,
        patch: bool,
        dry_run: bool = False,
        field_validation: FieldValidation = FieldValidation.WARN,
        manager: str = "",
    ) -> WriteAnswer:
        """``PUT`` (a Scale body) or ``PATCH`` (a patch of the Scale) of ``.../scale``:
        the new ``spec.replicas`` goes to the object, which is updated as by a client.
        Answers the resulting Scale. Raises 400, 404, 409, 422."""
        scale = self._scale_paths()
        warnings: list[str] = []
        given: dict[str, Any] | None = None
        if not patch:
            given, warnings = _decode_scale(body, content_type, field_validation)
            admission.check_object(_SCALE_SPEC, given, namespace=namespace, name=name)
        elif len(body) > admission.MAX_BODY_BYTES:
            admission.check_size(body)
        precondition = 0 if given is None else _resource_version(given["metadata"])

        def scaled(stored: dict[str, Any], revision: int) -> dict[str, Any] | _Delete:
            meta = {**stored["metadata"], "resourceVersion": str(revision)}
            current = {**stored, "metadata": meta}
            new_scale = given
            if new_scale is None:
                result = apply_patch(content_type, to_scale(current, scale), body, SCALE_KIND)
                if not isinstance(result, dict):
                    raise BadRequestError("the patched object is not a JSON object")
                check_depth(result)
                new_scale, found = _decode_scale(
                    gojson.dumpb(result), JSON_MEDIA_TYPE, field_validation
                )
                warnings[:] = found
                wanted = _resource_version(new_scale.get("metadata") or {})
                if wanted and wanted != revision:
                    raise self._conflict(name)
            obj = gojson.deep_copy(current)
            from_scale(obj, new_scale, scale)
            return self._prepare_update(obj, stored, Subresource.MAIN, manager, owner="scale")

        answer = await self._guaranteed_update(
            namespace, name, scaled, dry_run=dry_run, precondition=precondition
        )
        updated = gojson.loads(answer)
        return WriteAnswer(admission.encode(to_scale(updated, scale)), warnings=tuple(warnings))

    def _scale_paths(self) -> ScaleSubresource:
        if self.spec.scale is None:
            raise NotFoundError("the server could not find the requested resource")
        return self.spec.scale

    def _check_subresource(self, subresource: Subresource) -> None:
        if subresource is Subresource.STATUS and not self.strategy.has_status:
            raise NotFoundError("the server could not find the requested resource")
        if subresource is Subresource.FINALIZE and not isinstance(self.strategy, NamespaceStrategy):
            raise NotFoundError("the server could not find the requested resource")

    def _prepare_update(
        self,
        obj: dict[str, Any],
        stored: dict[str, Any],
        subresource: Subresource,
        manager: str | None,
        *,
        owner: str | None = None,
    ) -> dict[str, Any] | _Delete:
        """``obj`` as it may be stored over ``stored`` (rest.BeforeUpdate and the
        strategy), or a _Delete when the update finishes a deletion; ``manager`` owns
        what changed, through ``owner`` (the subresource by default); ``manager`` None: an
        apply, which has set managedFields itself. Raises 422."""
        strategy = self.strategy
        if subresource is Subresource.STATUS:
            strategy.prepare_for_status_update(obj, stored)
        elif subresource is Subresource.FINALIZE:
            assert isinstance(strategy, NamespaceStrategy)
            strategy.prepare_for_finalize(obj, stored)
        metadata = obj["metadata"]
        old = stored["metadata"]
        causes = _server_owned_field_causes(metadata, old)
        if causes:
            raise InvalidError.for_fields(
                self.spec.kind, self.spec.group, str(metadata.get("name", "")), causes
            )
        admission.prepare_update(metadata, stored)
        if subresource is Subresource.MAIN:
            strategy.prepare_for_update(obj, stored)
        elif strategy.tracks_generation:
            metadata["generation"] = old.get("generation", 1)
        if manager is not None:
            part = subresource.value if owner is None else owner
            self.field_manager.update(stored, obj, manager, part)
        if subresource is Subresource.STATUS:
            strategy.validate_status_update(obj, stored)
        else:
            strategy.validate_update(obj, stored)
        if self._update_finishes_deletion(obj, stored):
            return _Delete(obj)
        return obj

    def _update_finishes_deletion(self, obj: dict[str, Any], stored: dict[str, Any]) -> bool:
        """ShouldDeleteDuringUpdate: no finalizer left on an object whose deletion started
        with no grace period left (and, for a namespace, nothing in spec.finalizers)."""
        old = stored["metadata"]
        if obj["metadata"].get("finalizers") or not old.get("deletionTimestamp"):
            return False
        if old.get("deletionGracePeriodSeconds") not in (None, 0):
            return False
        return not (
            isinstance(self.strategy, NamespaceStrategy)
            and (obj.get("spec") or {}).get("finalizers")
        )

    async def _guaranteed_update(
        self,
        namespace: str,
        name: str,
        try_update: Callable[[dict[str, Any], int], dict[str, Any] | _Delete],
        *,
        dry_run: bool,
        precondition: int = 0,
        create_missing: bool = False,
        start: _State | None = None,
    ) -> bytes:
        """Compute with ``try_update`` (on a copy) from ``start`` or the cached object,
        compare-and-swap at its revision; when the compare fails, again from the object
        etcd returned with the failure, unless ``precondition`` (the revision the client
        named) no longer holds: then 409. An error, or an unchanged object, computed from
        the cached object is checked against etcd's before it is answered (the module
        note). ``create_missing``: a missing object raises _Missing (the caller creates
        it) instead of 404."""
        key = self.spec.key(namespace, name).encode()

        async def read() -> _State:
            try:
                return await self._read_state(namespace, name)
            except NotFoundError:
                if not create_missing:
                    raise
                raise _Missing() from None

        def retry_from(current: kv_pb2.KeyValue | None) -> _State:
            if current is None and create_missing:
                raise _Missing()
            return self._after_failed_compare(name, current)

        state = start
        if state is None:
            state = None if dry_run else self._cached_state(namespace, name)
            if state is None:
                state = await read()
        for _ in range(state.attempts):
            stored, revision = state.obj, state.revision
            try:
                if precondition and precondition != revision:
                    raise self._conflict(name)
                result = try_update(gojson.deep_copy(stored), revision)
            except StatusError:
                # The _recheck rule: an error from the cache's copy stands only if etcd
                # is still at that revision.
                if state.current:
                    raise
                fresh = await read()
                if fresh.revision == revision:
                    raise
                state = fresh
                continue
            if isinstance(result, _Delete):
                if dry_run:
                    return self._answer(namespace, name, result.obj, revision)
                deleted = await self.client.delete(key, revision)
                if deleted.succeeded or (deleted.current is None and state.current):
                    # Clients expect the updated object from a PUT, even when it was the
                    # update that deleted it.
                    return self._answer(namespace, name, result.obj, revision)
                state = retry_from(deleted.current)
                continue
            if result == _without_volatile(stored):
                if state.current:
                    return self._answer(namespace, name, stored, revision)
                # Nothing to write by the cache's copy: etcd's decides (Kubernetes reads it
                # before it skips a write).
                state = await read()
                continue
            if dry_run:
                return self._answer(namespace, name, result, revision)
            written = await self.client.update(
                key, self._stored_value(result), revision, lease=await self._lease()
            )
            if written.succeeded:
                return self._answer(namespace, name, result, written.revision)
            state = retry_from(written.current)
        raise self._conflict(name)

    def _after_failed_compare(self, name: str, current: kv_pb2.KeyValue | None) -> _State:
        """The state a write retries from: what etcd returned with a failed compare
        (``GetOnFailure``, one round trip fewer than reading again). Raises 404 when the
        key is gone."""
        if current is None:
            raise NotFoundError.for_object(self.spec.name, name, self.spec.group)
        return self._state_of(current)

    # -- delete -----------------------------------------------------------------------------

    async def delete(
        self, namespace: str, name: str, options: DeleteOptions | None = None
    ) -> WriteAnswer:
        """DELETE with Kubernetes' lifecycle (module note). Raises 404, 409, 422."""
        options = options or DeleteOptions()
        if isinstance(self.strategy, NamespaceStrategy):
            return await self._delete_namespace(name, options)
        state = await self._start_state(namespace, name, dry_run=options.dry_run)
        for _ in range(state.attempts):
            try:
                self._check_delete_preconditions(state.obj, state.revision, options)
                marked = self._mark_for_deletion(state.obj, options)
            except StatusError as error:
                state = await self._recheck(namespace, name, state, error)
                continue
            if marked is None:
                outcome = await self._delete_now(namespace, name, state, options)
            else:
                outcome = await self._write_marked(namespace, name, marked, state, options)
            if isinstance(outcome, WriteAnswer):
                return outcome
            state = outcome
        raise self._conflict(name)

    async def delete_collection(
        self, namespace: str, selection: ListOptions, options: DeleteOptions
    ) -> bytes:
        """DELETE of a collection: every object the LIST ``selection`` (selectors; one page
        when it has a limit, else all pages) finds in ``namespace`` is deleted as a DELETE
        of it would be, those already gone skipped; the answer is the list of what was
        found, as Kubernetes' DeleteCollection answers. Not atomic, as in Kubernetes."""
        cache = self.cache
        if cache is None:
            raise MethodNotAllowedError()
        prefix = self.spec.collection_prefix(namespace)
        paged = selection if selection.limit else replace(selection, limit=_COLLECTION_PAGE)
        first = await cache.list(paged, prefix=prefix)
        items = list(first.items)
        page = first
        while page.continue_token and not selection.limit:
            paged = replace(
                paged,
                continue_token=page.continue_token,
                resource_version="",
                resource_version_match=ResourceVersionMatch.UNSET,
            )
            page = await cache.list(paged, prefix=prefix)
            items.extend(page.items)
        gate = asyncio.Semaphore(_COLLECTION_WORKERS)

        async def delete_one(item: Item) -> None:
            name = item.key.rsplit("/", 1)[-1]
            async with gate:
                with contextlib.suppress(NotFoundError):
                    await self.delete(namespace, name, options)

        await asyncio.gather(*(delete_one(item) for item in items))
        # The first page's list metadata, with every page's items (Kubernetes' originalList).
        found = ListResult(
            items, first.resource_version, first.continue_token, first.remaining_item_count
        )
        return found.render(self.spec.list_kind, self.spec.api_version)

    def _check_delete_preconditions(
        self, stored: dict[str, Any], revision: int, options: DeleteOptions
    ) -> None:
        metadata = stored["metadata"]
        uid = metadata.get("uid", "")
        want_uid = options.precondition_uid
        if want_uid is not None and want_uid != uid:
            raise self._precondition_failed(
                stored,
                f"the UID in the precondition ({want_uid}) does not match the UID in record "
                f"({uid}). The object might have been deleted and then recreated",
            )
        want_rv = options.precondition_resource_version
        if want_rv is not None and want_rv != str(revision):
            raise self._precondition_failed(
                stored,
                f"the ResourceVersion in the precondition ({want_rv}) does not match the "
                f"ResourceVersion in record ({revision}). The object might have been modified",
            )

    def _precondition_failed(self, stored: dict[str, Any], why: str) -> ConflictError:
        # rest.BeforeDelete names the kind where other conflicts name the resource.
        name = stored["metadata"].get("name", "")
        return ConflictError(
            f'Operation cannot be fulfilled on {self.spec.kind} "{name}": {why}',
            details=StatusDetails(name=name, group=self.spec.group, kind=self.spec.kind),
        )

    def _mark_for_deletion(
        self, stored: dict[str, Any], options: DeleteOptions
    ) -> dict[str, Any] | None:
        """The object as a DELETE leaves it when it must stay for now (finalizers pending,
        or a graceful deletion), else None (delete it now). Raises 422 for a grace period
        the object cannot take."""
        obj = gojson.deep_copy(stored)
        metadata = obj["metadata"]
        now = self._clock()
        deleting = bool(metadata.get("deletionTimestamp"))
        if not deleting:
            self.strategy.prepare_for_delete(obj, _rfc3339(now))
        grace = self.strategy.grace_period(obj, options.grace_period_seconds)
        if deleting:
            remaining = metadata.get("deletionGracePeriodSeconds")
            if grace is not None and remaining not in (None, 0):
                # A graceful deletion is under way: it may only be shortened.
                if grace >= remaining:
                    return obj
                metadata["deletionTimestamp"] = _rfc3339(max(now, now + timedelta(seconds=grace)))
                metadata["deletionGracePeriodSeconds"] = grace
                if grace > 0:
                    return obj
            grace = None
        finalizers = self._finalizers_after_delete(metadata, options)
        if finalizers:
            metadata["finalizers"] = finalizers
        else:
            metadata.pop("finalizers", None)
        if grace:
            metadata["deletionTimestamp"] = _rfc3339(now + timedelta(seconds=grace))
            metadata["deletionGracePeriodSeconds"] = grace
            if not deleting and int(metadata.get("generation") or 0) > 0:
                metadata["generation"] = int(metadata["generation"]) + 1
            return obj
        if not finalizers:
            return None
        # markAsDeleting: the object stays until its finalizers are gone.
        if not deleting and int(metadata.get("generation") or 0) > 0:
            metadata["generation"] = int(metadata["generation"]) + 1
        existing = metadata.get("deletionTimestamp")
        if not existing or existing > _rfc3339(now):
            metadata["deletionTimestamp"] = _rfc3339(now)
        metadata["deletionGracePeriodSeconds"] = 0
        return obj

    def _finalizers_after_delete(
        self, metadata: dict[str, Any], options: DeleteOptions
    ) -> list[str]:
        """The object's finalizers with the garbage collector's set as the propagation
        policy, the existing GC finalizers and the default (background) decide."""
        finalizers = [f for f in metadata.get("finalizers") or [] if isinstance(f, str)]
        if not self.garbage_collection or metadata.get("deletionTimestamp"):
            # Once deletion has started, DeleteOptions no longer change the finalizers.
            return finalizers
        orphan = _orphans_dependents(finalizers, options)
        foreground = _deletes_dependents_first(finalizers, options)
        kept = [f for f in finalizers if f not in (ORPHAN_FINALIZER, FOREGROUND_FINALIZER)]
        if orphan:
            kept.append(ORPHAN_FINALIZER)
        if foreground:
            kept.append(FOREGROUND_FINALIZER)
        return kept

    async def _write_marked(
        self,
        namespace: str,
        name: str,
        marked: dict[str, Any],
        state: _State,
        options: DeleteOptions,
    ) -> WriteAnswer | _State:
        """Store ``marked`` over ``state`` and answer, or the state to try again from
        (the compare failed; or nothing changed by the cache's copy, which etcd's must
        confirm before the answer goes without a write). Raises 404."""
        code = 202 if options.orphan_dependents is False else 200
        revision = state.revision
        if marked == state.obj or options.dry_run:
            if not state.current:
                return await self._read_state(namespace, name)
            return WriteAnswer(self._answer(namespace, name, marked, revision), code)
        key = self.spec.key(namespace, name).encode()
        written = await self.client.update(
            key, self._stored_value(marked), revision, lease=await self._lease()
        )
        if written.succeeded:
            return WriteAnswer(self._answer(namespace, name, marked, written.revision), code)
        return self._after_failed_compare(name, written.current)

    async def _delete_now(
        self, namespace: str, name: str, state: _State, options: DeleteOptions
    ) -> WriteAnswer | _State:
        """Delete the object at ``state``'s revision and answer, or the state to try again
        from (the compare failed). Raises 404."""
        if not options.dry_run:
            key = self.spec.key(namespace, name).encode()
            result = await self.client.delete(key, state.revision)
            if not result.succeeded:
                return self._after_failed_compare(name, result.current)
        return WriteAnswer(self._deleted_answer(namespace, name, state.obj, state.revision))

    def _deleted_answer(
        self, namespace: str, name: str, stored: dict[str, Any], revision: int
    ) -> bytes:
        """finalizeDelete: the deleted object for kinds that return it, else a Success
        Status naming it."""
        if self.strategy.returns_deleted_object:
            return self._answer(namespace, name, stored, revision)
        return _success(self.spec, name, stored["metadata"].get("uid", ""))

    async def _delete_namespace(self, name: str, options: DeleteOptions) -> WriteAnswer:
        """The namespace REST's Delete: the first DELETE starts termination (phase
        Terminating, the GC finalizers the policy asks for); once ``spec.finalizers`` is
        empty, a DELETE deletes it like any object. It reads etcd first, as that REST's
        ``r.Get`` does: what it decides from the namespace is not all checked by a
        compare-and-swap (a namespace terminating already is answered as it is)."""
        state = await self._read_state("", name)
        stored, revision = state.obj, state.revision
        metadata = stored["metadata"]
        uid = metadata.get("uid", "")
        if options.precondition_uid is not None and options.precondition_uid != uid:
            raise self._namespace_conflict(
                name, f"UID in precondition: {options.precondition_uid}, UID in object meta: {uid}"
            )
        want_rv = options.precondition_resource_version
        if want_rv is not None and want_rv != str(revision):
            raise self._namespace_conflict(
                name,
                f"ResourceVersion in precondition: {want_rv}, ResourceVersion in object meta: "
                f"{revision}",
            )
        if not metadata.get("deletionTimestamp"):
            precondition = revision if want_rv is not None else 0

            def terminate(obj: dict[str, Any], _revision: int) -> dict[str, Any]:
                if obj["metadata"].get("uid", "") != uid:
                    raise self._namespace_conflict(
                        name,
                        f"UID in precondition: {uid}, UID in object meta: "
                        f"{obj['metadata'].get('uid', '')}",
                    )
                meta = obj["metadata"]
                meta.pop("resourceVersion", None)
                meta["deletionTimestamp"] = meta.get("deletionTimestamp") or _rfc3339(self._clock())
                status = obj.setdefault("status", {})
                status["phase"] = NamespacePhase.TERMINATING.value
                finalizers = self._finalizers_after_delete(meta, options)
                if finalizers:
                    meta["finalizers"] = finalizers
                else:
                    meta.pop("finalizers", None)
                return obj

            body = await self._guaranteed_update(
                "",
                name,
                terminate,
                dry_run=options.dry_run,
                precondition=precondition,
                start=state,
            )
            return WriteAnswer(body)
        if (stored.get("spec") or {}).get("finalizers"):
            return WriteAnswer(self._answer("", name, stored, revision))
        # Emptied and finalized: an ordinary delete, honouring metadata.finalizers.
        for _ in range(MAX_ATTEMPTS):
            marked = self._mark_for_deletion(state.obj, options)
            if marked is None:
                outcome = await self._delete_now("", name, state, options)
            else:
                outcome = await self._write_marked("", name, marked, state, options)
            if isinstance(outcome, WriteAnswer):
                return outcome
            state = outcome
        raise self._conflict(name)

    def _namespace_conflict(self, name: str, why: str) -> ConflictError:
        return ConflictError(
            f'Operation cannot be fulfilled on namespaces "{name}": Precondition failed: {why}',
            details=StatusDetails(name=name, kind="namespaces"),
        )

    def _conflict(self, name: str) -> ConflictError:
        spec = self.spec
        qualified = f"{spec.name}.{spec.group}" if spec.group else spec.name
        return ConflictError(
            f'Operation cannot be fulfilled on {qualified} "{name}": {OPTIMISTIC_LOCK_MESSAGE}',
            details=StatusDetails(name=name, group=spec.group, kind=spec.name),
        )


def _orphans_dependents(finalizers: list[str], options: DeleteOptions) -> bool:
    """shouldOrphanDependents, for kinds whose default policy deletes dependents."""
    if options.orphan_dependents is not None:
        return options.orphan_dependents
    if options.propagation_policy is not None:
        return options.propagation_policy is PropagationPolicy.ORPHAN
    for finalizer in finalizers:
        if finalizer == ORPHAN_FINALIZER:
            return True
        if finalizer == FOREGROUND_FINALIZER:
            return False
    return False


def _deletes_dependents_first(finalizers: list[str], options: DeleteOptions) -> bool:
    """shouldDeleteDependentsInForeground."""
    if options.orphan_dependents is not None:
        return False
    if options.propagation_policy is not None:
        return options.propagation_policy is PropagationPolicy.FOREGROUND
    for finalizer in finalizers:
        if finalizer == FOREGROUND_FINALIZER:
            return True
        if finalizer == ORPHAN_FINALIZER:
            return False
    return False


def _server_owned_field_causes(metadata: dict[str, Any], old: dict[str, Any]) -> list[StatusCause]:
    """What an update may not change in metadata (ValidateObjectMetaAccessorUpdate, after
    rest.BeforeUpdate has carried over what the client may omit)."""
    causes: list[StatusCause] = []
    uid = metadata.get("uid")
    if uid and uid != old.get("uid"):
        causes.append(_immutable("metadata.uid", uid))
    if old.get("deletionTimestamp"):
        added = sorted(set(metadata.get("finalizers") or []) - set(old.get("finalizers") or []))
        if added:
            shown = "[]string{" + ", ".join(gojson.dumps(f) for f in added) + "}"
            causes.append(
                StatusCause(
                    "FieldValueForbidden",
                    "Forbidden: no new finalizers can be added if the object is being "
                    f"deleted, found new finalizers {shown}",
                    "metadata.finalizers",
                )
            )
    elif metadata.get("deletionTimestamp"):
        causes.append(_immutable("metadata.deletionTimestamp", metadata["deletionTimestamp"]))
    old_grace = old.get("deletionGracePeriodSeconds")
    grace = metadata.get("deletionGracePeriodSeconds", old_grace)
    if grace != old_grace:
        causes.append(_immutable("metadata.deletionGracePeriodSeconds", grace))
    generation = metadata.get("generation")
    if generation is not None and (not isinstance(generation, int) or generation < 0):
        causes.append(
            StatusCause(
                "FieldValueInvalid",
                f"Invalid value: {gojson.dumps(generation)}: must be greater than or equal to 0",
                "metadata.generation",
            )
        )
    return causes


def _immutable(field: str, value: Any) -> StatusCause:
    return StatusCause(
        "FieldValueInvalid", f"Invalid value: {gojson.dumps(value)}: field is immutable", field
    )


#: How a Scale body is checked against the URL (kind, apiVersion, name, namespace).
_SCALE_SPEC: Final = ResourceSpec("scale", "scale", SCALE_KIND, group="autoscaling")


def _decode_scale(
    body: bytes, content_type: str, field_validation: FieldValidation
) -> tuple[dict[str, Any], list[str]]:
    if has_schema(SCALE_API_VERSION, SCALE_KIND):
        return decode_body(
            body,
            content_type,
            kind=SCALE_KIND,
            api_version=SCALE_API_VERSION,
            field_validation=field_validation,
        )
    return decode_unstructured(
        body,
        content_type,
        kind=SCALE_KIND,
        api_version=SCALE_API_VERSION,
        field_validation=field_validation,
    )


def _compose(
    *steps: Callable[[dict[str, Any]], None] | None,
) -> Callable[[dict[str, Any]], None] | None:
    present = [step for step in steps if step is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]

    def composed(obj: dict[str, Any]) -> None:
        for step in present:
            step(obj)

    return composed


def _being_deleted(value: bytes) -> bool:
    try:
        obj = gojson.loads(value)
    except ValueError:
        return False
    return isinstance(obj, dict) and bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _resource_version(metadata: dict[str, Any]) -> int:
    value = metadata.get("resourceVersion") or ""
    if not value:
        return 0
    text = str(value)
    number, problem = parse_uint64(text)
    if problem is not None:
        raise BadRequestError(
            f'metadata.resourceVersion: Invalid value: "{value}": must be a number'
        )
    return number


def _without_volatile(stored: dict[str, Any]) -> dict[str, Any]:
    meta = stored.get("metadata") or {}
    if "resourceVersion" not in meta:
        return stored
    copied = dict(stored)
    copied["metadata"] = {k: v for k, v in meta.items() if k != "resourceVersion"}
    return copied


def _success(spec: ResourceSpec, name: str, uid: str) -> bytes:
    details: dict[str, str] = {"name": name}
    if spec.group:
        details["group"] = spec.group
    details["kind"] = spec.name
    if uid:
        details["uid"] = uid
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }
    return admission.encode(status)


__all__ = [
    "FOREGROUND_FINALIZER",
    "NAMESPACE_FINALIZER",
    "ORPHAN_FINALIZER",
    "NamespaceLookup",
    "NamespacePhase",
    "ObjectStore",
    "Subresource",
    "WriteAnswer",
]
