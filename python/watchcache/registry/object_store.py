"""Writes go to etcd as compare-and-swap transactions; reads of the result come back
through the watch into the cache.

- create: put only if the key does not exist (409 AlreadyExists otherwise);
- update (PUT): put only if the key's mod revision is the one the body names in
  ``metadata.resourceVersion`` (409 Conflict otherwise), or — with no resourceVersion —
  the one just read (an unconditional update, retried if someone wrote in between);
- patch: read, apply, write back at the read revision; retried on a concurrent write
  unless the patch itself names a resourceVersion (then a conflict is the client's);
- delete: delete only at the revision read (and matching ``preconditions``), retried.

The answer to a write is the object as stored, stamped with the revision of the write, so a
client sees the same JSON the cache will serve.

Dry run (``dryRun=All``), as Kubernetes' ``DryRunnableStorage`` does it: every read, check
and defaulting step runs, the transaction is not sent. A create answers the object without
a resourceVersion (nothing was stored), after checking that the name is free; an update or
patch answers the result at the revision it was read at; a delete checks the preconditions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from watchcache.etcd.client import EtcdClient, prefix_range_end
from watchcache.registry import admission
from watchcache.registry.patch import apply_patch
from watchcache.registry.resources import KNOWN_RESOURCES, ResourceSpec
from watchcache.wire import gojson
from watchcache.wire.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    InternalError,
    NotFoundError,
    StatusDetails,
)
from watchcache.wire.gostrconv import parse_uint64
from watchcache.wire.write_options import DeleteOptions

#: Kubernetes' GuaranteedUpdate retries a patch on conflict; so does this.
MAX_ATTEMPTS = 5


class ObjectStore:
    """Writes of one resource. ``namespace_exists`` (when namespaces are served) makes a
    create in a missing namespace a 404, as Kubernetes' admission does."""

    def __init__(
        self,
        client: EtcdClient,
        spec: ResourceSpec,
        *,
        namespace_exists: Callable[[str], Awaitable[bool]] | None = None,
    ) -> None:
        self.client = client
        self.spec = spec
        self.codec = spec.codec()
        self._namespace_exists = namespace_exists

    # -- reads of the source of truth -------------------------------------------------------

    async def read(self, namespace: str, name: str) -> tuple[dict[str, Any], int]:
        """The stored object and its mod revision, from etcd. Raises 404."""
        kv = await self.client.get(self.spec.key(namespace, name).encode())
        if kv is None:
            raise NotFoundError.for_object(self.spec.name, name, self.spec.group)
        try:
            obj = gojson.loads(kv.value)
        except ValueError as error:
            raise InternalError(f"stored object {kv.key!r} is not JSON: {error}") from None
        return obj, int(kv.mod_revision)

    def _answer(self, namespace: str, name: str, obj: dict[str, Any], revision: int) -> bytes:
        return self.codec.item(self.spec.key(namespace, name), obj, revision).value

    # -- writes -----------------------------------------------------------------------------

    async def create(self, namespace: str, body: bytes, *, dry_run: bool = False) -> bytes:
        """The created object (201). ``dry_run``: every check runs, including whether the
        name is taken, but nothing is written and the answer has no resourceVersion."""
        spec = self.spec
        obj = admission.parse_body(body)
        metadata = admission.check_object(spec, obj, namespace=namespace, name=None)
        name = metadata["name"]
        exists = self._namespace_exists
        if spec.namespaced and exists is not None and not await exists(namespace):
            raise NotFoundError.for_object("namespaces", namespace)
        admission.prepare_create(metadata, obj, spec)
        key = spec.key(namespace, name).encode()
        if dry_run:
            if await self.client.get(key) is not None:
                raise AlreadyExistsError.for_object(spec.name, name, spec.group)
            return admission.encode(obj)
        result = await self.client.create(key, admission.encode(obj))
        if not result.succeeded:
            raise AlreadyExistsError.for_object(spec.name, name, spec.group)
        return self._answer(namespace, name, obj, result.revision)

    async def update(
        self, namespace: str, name: str, body: bytes, *, dry_run: bool = False
    ) -> bytes:
        spec = self.spec
        obj = admission.parse_body(body)
        metadata = admission.check_object(spec, obj, namespace=namespace, name=name)
        precondition = _resource_version(metadata)
        for _ in range(MAX_ATTEMPTS):
            stored, revision = await self.read(namespace, name)
            if precondition and precondition != revision:
                raise self._conflict(name)
            answer = await self._replace(namespace, name, obj, stored, revision, dry_run=dry_run)
            if answer is not None:
                return answer
        raise self._conflict(name)

    async def patch(
        self, namespace: str, name: str, content_type: str, body: bytes, *, dry_run: bool = False
    ) -> bytes:
        spec = self.spec
        if len(body) > admission.MAX_BODY_BYTES:
            admission.parse_body(body)  # raises the 413
        for _ in range(MAX_ATTEMPTS):
            stored, revision = await self.read(namespace, name)
            # Patches see the resourceVersion a client would (apply_patch copies, never
            # mutates, so a shallow copy with fresh metadata is enough).
            meta = {**(stored.get("metadata") or {}), "resourceVersion": str(revision)}
            patched = apply_patch(content_type, {**stored, "metadata": meta}, body, spec.kind)
            if not isinstance(patched, dict):
                raise BadRequestError("the patched object is not a JSON object")
            admission.check_depth(patched)
            metadata = admission.check_object(spec, patched, namespace=namespace, name=name)
            precondition = _resource_version(metadata)
            if precondition and precondition != revision:
                raise self._conflict(name)
            answer = await self._replace(
                namespace, name, patched, stored, revision, dry_run=dry_run
            )
            if answer is not None:
                return answer
        raise self._conflict(name)

    async def _replace(
        self,
        namespace: str,
        name: str,
        obj: dict[str, Any],
        stored: dict[str, Any],
        revision: int,
        *,
        dry_run: bool,
    ) -> bytes | None:
        """Write ``obj`` over ``stored`` if the key is still at ``revision`` (server-owned
        fields carried over; an unchanged object is not written). The answer, or None when
        someone wrote in between (the caller re-reads or reports the conflict). A dry run
        answers the object as it would be stored, at the revision it was read at."""
        admission.prepare_update(obj["metadata"], stored)
        if obj == _without_volatile(stored):
            return self._answer(namespace, name, stored, revision)
        if dry_run:
            return self._answer(namespace, name, obj, revision)
        key = self.spec.key(namespace, name).encode()
        result = await self.client.update(key, admission.encode(obj), revision)
        if result.succeeded:
            return self._answer(namespace, name, obj, result.revision)
        if result.current is None:
            raise NotFoundError.for_object(self.spec.name, name, self.spec.group)
        return None

    async def delete(self, namespace: str, name: str, options: DeleteOptions) -> bytes:
        """Delete at the revision read, if ``options``' preconditions hold (409 otherwise);
        retried when someone wrote in between. A dry run checks the same and writes
        nothing: neither the object nor, for a namespace, its contents."""
        spec = self.spec
        for _ in range(MAX_ATTEMPTS):
            stored, revision = await self.read(namespace, name)
            uid = (stored.get("metadata") or {}).get("uid", "")
            want_uid = options.precondition_uid
            if want_uid and want_uid != uid:
                raise ConflictError(
                    f'Operation cannot be fulfilled on {spec.name} "{name}": Precondition '
                    f"failed: UID in precondition: {want_uid}, UID in object meta: {uid}",
                    details=StatusDetails(name=name, group=spec.group, kind=spec.name),
                )
            want_rv = options.precondition_resource_version
            if want_rv and want_rv != str(revision):
                raise ConflictError(
                    f'Operation cannot be fulfilled on {spec.name} "{name}": Precondition '
                    f"failed: ResourceVersion in precondition: {want_rv}, ResourceVersion in "
                    f"object meta: {revision}",
                    details=StatusDetails(name=name, group=spec.group, kind=spec.name),
                )
            if options.dry_run:
                return _success(spec, name, uid)
            result = await self.client.delete(spec.key(namespace, name).encode(), revision)
            if result.succeeded:
                if spec.name == "namespaces":
                    await self._delete_namespace_contents(name)
                return _success(spec, name, uid)
            if result.current is None:
                raise NotFoundError.for_object(spec.name, name, spec.group)
        raise self._conflict(name)

    async def _delete_namespace_contents(self, namespace: str) -> None:
        """What Kubernetes' namespace controller does eventually: the namespace's objects
        go with it (every namespaced resource under /registry/)."""
        for spec in KNOWN_RESOURCES.values():
            if spec.namespaced:
                prefix = spec.collection_prefix(namespace).encode()
                await self.client.delete_range(prefix, prefix_range_end(prefix))

    def _conflict(self, name: str) -> ConflictError:
        spec = self.spec
        return ConflictError(
            f'Operation cannot be fulfilled on {spec.name} "{name}": the object has been '
            "modified; please apply your changes to the latest version and try again",
            details=StatusDetails(name=name, group=spec.group, kind=spec.name),
        )


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
    copy = dict(stored)
    copy["metadata"] = {k: v for k, v in meta.items() if k != "resourceVersion"}
    return copy


def _success(spec: ResourceSpec, name: str, uid: str) -> bytes:
    details: dict[str, str] = {"name": name, "kind": spec.name}
    if spec.group:
        details["group"] = spec.group
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
