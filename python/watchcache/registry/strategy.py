"""What differs between kinds on the write path: Kubernetes' per-resource REST strategies.

Design note
-----------
The generic write path (:mod:`watchcache.registry.object_store`) is the same for every
kind; where Kubernetes' registry asks the resource's strategy, it asks a
:class:`Strategy`: what a new object gets (``prepare_for_create``), what an update may not
change (``prepare_for_update``), what a ``/status`` write may change
(``prepare_for_status_update``), the kind's own validation, whether a delete is graceful
(pods), and whether DELETE answers with the object (pods, namespaces) or a Status.

Each method works on parsed JSON objects in place and raises a StatusError (422 with one
cause per problem) for what the kind forbids. The rules, from the strategies in
Kubernetes' ``pkg/registry/core/{configmap,secret,pod,namespace}/strategy.go``:

=========  ==========================================================================
ConfigMap  data/binaryData keys are config keys, one key not in both; no status
Secret     ``stringData`` is merged into ``data`` (base64) and dropped; ``type``
           defaults to ``Opaque`` and is immutable; data keys are config keys
Pod        status ``phase: Pending`` on create, ``generation`` 1 and bumped when the spec
           changes; an update keeps the stored status, a status write keeps the rest;
           deletion is graceful (``terminationGracePeriodSeconds``, default 30) once the
           pod is bound to a node and still running, immediate otherwise
Namespace  ``spec.finalizers: [kubernetes]`` and ``status.phase: Active`` on create; an
           update keeps status and ``spec.finalizers`` (``/finalize`` changes those);
           deletion is the namespace lifecycle (the object store's ``delete_namespace``)
=========  ==========================================================================

Pure functions of their arguments; safe from any thread.
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
from collections.abc import Callable
from typing import Any, ClassVar, Final

from watchcache.registry.resources import ResourceSpec
from watchcache.wire.errors import InvalidError, StatusCause

#: Kubernetes' default for ``pod.spec.terminationGracePeriodSeconds``.
DEFAULT_POD_GRACE_SECONDS: Final = 30
#: The finalizer the namespace controller removes once a namespace is empty.
NAMESPACE_FINALIZER: Final = "kubernetes"
#: ``IsConfigMapKey``: what a ConfigMap or Secret data key may be.
_CONFIG_KEY: Final = re.compile(r"^[-._a-zA-Z0-9]+$")
_CONFIG_KEY_MAX: Final = 253


def _invalid(field: str, value: object, detail: str) -> StatusCause:
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    return StatusCause("FieldValueInvalid", f"Invalid value: {shown}: {detail}", field)


def _raise(spec: ResourceSpec, obj: dict[str, Any], causes: list[StatusCause]) -> None:
    if causes:
        name = str((obj.get("metadata") or {}).get("name") or "")
        raise InvalidError.for_fields(spec.kind, spec.group, name, causes)


class Strategy:
    """The defaults: no status, no graceful deletion, DELETE answers a Status."""

    #: DELETE answers with the deleted object rather than a Status.
    returns_deleted_object: ClassVar[bool] = False
    #: ``metadata.generation`` is kept: 1 on create, bumped when the spec changes.
    tracks_generation: ClassVar[bool] = False

    def __init__(self, spec: ResourceSpec) -> None:
        self.spec = spec

    @property
    def has_status(self) -> bool:
        """The object has a ``status`` that only the ``/status`` subresource writes."""
        return "status" in self.spec.subresources

    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        """Server-set fields of a new object (status reset to its initial state)."""
        if self.has_status:
            obj["status"] = self.initial_status()
        if self.tracks_generation:
            obj["metadata"]["generation"] = 1

    def initial_status(self) -> dict[str, Any]:
        return {}

    def prepare_for_update(self, obj: dict[str, Any], old: dict[str, Any]) -> None:
        """Make ``obj`` what an update of the main resource may store over ``old``."""
        if self.has_status:
            _keep(obj, old, "status")
        if self.tracks_generation:
            generation = int(old["metadata"].get("generation") or 0)
            if _without(obj, "metadata", "status") != _without(old, "metadata", "status"):
                generation += 1
            obj["metadata"]["generation"] = generation

    def prepare_for_status_update(self, obj: dict[str, Any], old: dict[str, Any]) -> None:
        """A ``/status`` write changes status only: everything else is the stored object's
        (the body's resourceVersion still decides conflicts, and the managedFields an apply
        computed for this write are kept)."""
        status = obj.get("status")
        resource_version = obj.get("metadata", {}).get("resourceVersion")
        managed_fields = obj.get("metadata", {}).get("managedFields")
        obj.clear()
        obj.update(copy.deepcopy(old))
        if status is None:
            obj.pop("status", None)
        else:
            obj["status"] = status
        if resource_version is not None:
            obj["metadata"]["resourceVersion"] = resource_version
        if managed_fields is not None:
            obj["metadata"]["managedFields"] = managed_fields

    def validate(self, obj: dict[str, Any]) -> None:
        """The kind's own rules for an object about to be stored. Raises 422."""

    def validate_update(self, obj: dict[str, Any], old: dict[str, Any]) -> None:
        """Rules about what an update may change. Raises 422."""
        self.validate(obj)

    def validate_status_update(self, obj: dict[str, Any], old: dict[str, Any]) -> None:
        """Rules of a ``/status`` write (the status strategy's). Raises 422."""
        self.validate_update(obj, old)

    def prepare_for_delete(self, obj: dict[str, Any], now: str) -> None:
        """What the first DELETE of an object does to it besides the generic marking
        (``now``: RFC 3339); a finalizer added here keeps the object until it is removed."""

    def grace_period(self, obj: dict[str, Any], requested: int | None) -> int | None:
        """None when deletion is not graceful; else the grace period in seconds (0: now)."""
        return None

    def prune(self, obj: dict[str, Any]) -> list[str]:
        """What decoding a body of a kind without a built-in schema removes (and adds):
        the removed paths, reported as unknown fields. Kinds without a schema keep all."""
        return []

    def on_read(self) -> Callable[[dict[str, Any]], None] | None:
        """What happens to each stored object as it is read (None: nothing)."""
        return None


class ConfigMapStrategy(Strategy):
    def validate(self, obj: dict[str, Any]) -> None:
        causes = _data_key_causes(obj, "data") + _data_key_causes(obj, "binaryData")
        data, binary = obj.get("data"), obj.get("binaryData")
        if isinstance(data, dict) and isinstance(binary, dict):
            for key in sorted(set(data) & set(binary)):
                causes.append(_invalid("data", key, "duplicate of key present in binaryData"))
        _raise(self.spec, obj, causes)


class SecretStrategy(Strategy):
    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        super().prepare_for_create(obj)
        self._merge_string_data(obj)
        if not obj.get("type"):
            obj["type"] = "Opaque"

    def prepare_for_update(self, obj: dict[str, Any], old: dict[str, Any]) -> None:
        super().prepare_for_update(obj, old)
        self._merge_string_data(obj)
        if not obj.get("type"):
            obj["type"] = old.get("type") or "Opaque"

    def _merge_string_data(self, obj: dict[str, Any]) -> None:
        # The API's write-only convenience: stringData values win over data's and are
        # stored base64-encoded in data, as the Secret conversion does.
        string_data = obj.pop("stringData", None)
        if string_data is None:
            return
        if not isinstance(string_data, dict) or not all(
            isinstance(v, str) for v in string_data.values()
        ):
            _raise(self.spec, obj, [_invalid("stringData", "", "must be a map of strings")])
            return
        data = obj.get("data")
        if not isinstance(data, dict):
            data = obj["data"] = {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(value.encode()).decode()

    def validate(self, obj: dict[str, Any]) -> None:
        causes = _data_key_causes(obj, "data")
        data = obj.get("data")
        if isinstance(data, dict):
            for key, value in data.items():
                if not isinstance(value, str) or not _is_base64(value):
                    causes.append(_invalid(f"data[{key}]", "", "must be base64-encoded bytes"))
        if not isinstance(obj.get("type", ""), str):
            causes.append(_invalid("type", "", "must be a string"))
        _raise(self.spec, obj, causes)

    def validate_update(self, obj: dict[str, Any], old: dict[str, Any]) -> None:
        self.validate(obj)
        if obj.get("type") != old.get("type"):
            _raise(self.spec, obj, [_invalid("type", obj.get("type"), "field is immutable")])
        if old.get("immutable") is True and (
            obj.get("data") != old.get("data") or obj.get("immutable") is not True
        ):
            _raise(
                self.spec,
                obj,
                [
                    StatusCause(
                        "FieldValueForbidden",
                        "Forbidden: field is immutable when `immutable` is set",
                        "data",
                    )
                ],
            )


class PodStrategy(Strategy):
    returns_deleted_object = True
    tracks_generation = True

    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        super().prepare_for_create(obj)
        obj["status"]["qosClass"] = _qos_class(obj.get("spec") or {})

    def initial_status(self) -> dict[str, Any]:
        return {"phase": "Pending"}

    def validate(self, obj: dict[str, Any]) -> None:
        causes: list[StatusCause] = []
        containers = (obj.get("spec") or {}).get("containers")
        if not isinstance(containers, list) or not containers:
            causes.append(StatusCause("FieldValueRequired", "Required value", "spec.containers"))
        else:
            for i, container in enumerate(containers):
                if not isinstance(container, dict) or not container.get("name"):
                    causes.append(
                        StatusCause(
                            "FieldValueRequired", "Required value", f"spec.containers[{i}].name"
                        )
                    )
        _raise(self.spec, obj, causes)

    def grace_period(self, obj: dict[str, Any], requested: int | None) -> int | None:
        # podStrategy.CheckGracefulDelete: the request's period, else the pod's own; a pod
        # no kubelet runs (not bound to a node, or already finished) goes at once.
        spec = obj.get("spec") or {}
        period = requested
        if period is None:
            configured = spec.get("terminationGracePeriodSeconds")
            period = configured if isinstance(configured, int) else DEFAULT_POD_GRACE_SECONDS
        phase = (obj.get("status") or {}).get("phase")
        if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            period = 0
        return max(period, 0)


class NamespaceStrategy(Strategy):
    returns_deleted_object = True

    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        super().prepare_for_create(obj)
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            spec = obj["spec"] = {}
        finalizers = spec.get("finalizers")
        if not isinstance(finalizers, list):
            finalizers = spec["finalizers"] = []
        if NAMESPACE_FINALIZER not in finalizers:
            finalizers.append(NAMESPACE_FINALIZER)

    def initial_status(self) -> dict[str, Any]:
        return {"phase": "Active"}

    def prepare_for_update(self, obj: dict[str, Any], old: dict[str, Any]) -> None:
        super().prepare_for_update(obj, old)
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            spec = obj["spec"] = {}
        old_finalizers = (old.get("spec") or {}).get("finalizers")
        if old_finalizers is None:
            spec.pop("finalizers", None)
        else:
            spec["finalizers"] = copy.deepcopy(old_finalizers)
        if not spec:
            obj.pop("spec")

    def prepare_for_finalize(self, obj: dict[str, Any], old: dict[str, Any]) -> None:
        """``/finalize`` changes ``spec.finalizers`` only."""
        finalizers = (obj.get("spec") or {}).get("finalizers")
        resource_version = obj.get("metadata", {}).get("resourceVersion")
        obj.clear()
        obj.update(copy.deepcopy(old))
        spec = obj.setdefault("spec", {})
        if finalizers is None:
            spec.pop("finalizers", None)
        else:
            spec["finalizers"] = finalizers
        if resource_version is not None:
            obj["metadata"]["resourceVersion"] = resource_version

    def validate(self, obj: dict[str, Any]) -> None:
        finalizers = (obj.get("spec") or {}).get("finalizers", [])
        causes: list[StatusCause] = []
        if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
            causes.append(_invalid("spec.finalizers", "", "must be a list of strings"))
        _raise(self.spec, obj, causes)


def _qos_class(spec: dict[str, Any]) -> str:
    """The pod's QoS class, as ``qos.GetPodQOS`` reads the containers' resources:
    Guaranteed when every container limits CPU and memory with requests equal to the
    limits, BestEffort when none asks for anything, Burstable otherwise."""
    containers = [
        c
        for field in ("containers", "initContainers")
        for c in spec.get(field) or []
        if isinstance(c, dict)
    ]
    if not containers:
        return "BestEffort"
    guaranteed = True
    anything = False
    for container in containers:
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        requests = resources.get("requests") or {}
        if not isinstance(limits, dict) or not isinstance(requests, dict):
            return "Burstable"
        if limits or requests:
            anything = True
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                guaranteed = False
    if not anything:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _keep(obj: dict[str, Any], old: dict[str, Any], field: str) -> None:
    if field in old:
        obj[field] = copy.deepcopy(old[field])
    else:
        obj.pop(field, None)


def _without(obj: dict[str, Any], *fields: str) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in fields}


def _data_key_causes(obj: dict[str, Any], field: str) -> list[StatusCause]:
    data = obj.get(field)
    if data is None:
        return []
    if not isinstance(data, dict):
        return [_invalid(field, "", "must be a map")]
    causes = []
    for key in data:
        if len(key) > _CONFIG_KEY_MAX or not _CONFIG_KEY.match(key):
            causes.append(
                _invalid(
                    field,
                    key,
                    "a valid config key must consist of alphanumeric characters, '-', '_' "
                    "or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
                    "validation is '[-._a-zA-Z0-9]+')",
                )
            )
    return causes


def _is_base64(value: str) -> bool:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True
