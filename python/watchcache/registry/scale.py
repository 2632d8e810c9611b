"""The ``/scale`` subresource: an object seen as an ``autoscaling/v1`` ``Scale``.

Design note
-----------
What ``kubectl scale`` and autoscalers read and write is not the object but a ``Scale``
built from it at the paths the kind declares (``ResourceSpec.scale``, a CRD's
``subresources.scale``), as apiextensions' scale REST builds it:

* reading: ``metadata`` carries the object's name, namespace, uid, resourceVersion and
  creationTimestamp; ``spec.replicas`` is the value at ``specReplicasPath`` (omitted when
  0, as Go's ``omitempty`` does), ``status.replicas`` the value at ``statusReplicasPath``
  (always written) and ``status.selector`` the string at ``labelSelectorPath``;
* writing: only ``spec.replicas`` is taken from the Scale, written at ``specReplicasPath``
  (created if absent); the Scale's ``resourceVersion``, when given, is the precondition of
  the write. Everything else in the body is ignored. The object's own strategy then runs
  as for an update of the object (generation bump, schema validation).

Pure functions over parsed JSON; safe from any thread.
"""

from __future__ import annotations

from typing import Any, Final

from watchcache.registry.resources import ScaleSubresource
from watchcache.wire.errors import InvalidError, StatusCause

__all__ = ["SCALE_API_VERSION", "SCALE_KIND", "from_scale", "to_scale"]

SCALE_API_VERSION: Final = "autoscaling/v1"
SCALE_KIND: Final = "Scale"


def _steps(path: str) -> list[str]:
    return path.lstrip(".").split(".")


def _value(obj: Any, path: str) -> Any:
    for step in _steps(path):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(step)
    return obj


def _int32(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def to_scale(obj: dict[str, Any], scale: ScaleSubresource) -> dict[str, Any]:
    """The Scale of ``obj`` (whose metadata carries its resourceVersion)."""
    meta = obj.get("metadata") or {}
    metadata = {
        key: meta[key]
        for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        if meta.get(key)
    }
    spec: dict[str, Any] = {}
    replicas = _int32(_value(obj, scale.spec_replicas_path))
    if replicas:
        spec["replicas"] = replicas
    status: dict[str, Any] = {"replicas": _int32(_value(obj, scale.status_replicas_path))}
    if scale.label_selector_path:
        selector = _value(obj, scale.label_selector_path)
        if isinstance(selector, str) and selector:
            status["selector"] = selector
    return {
        "kind": SCALE_KIND,
        "apiVersion": SCALE_API_VERSION,
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }


def from_scale(obj: dict[str, Any], scale_obj: dict[str, Any], scale: ScaleSubresource) -> None:
    """Write what a Scale body may change into ``obj`` (in place): ``spec.replicas``,
    which must be a non-negative int32. Raises 422 naming the Scale's field."""
    name = str((scale_obj.get("metadata") or {}).get("name") or "")
    spec = scale_obj.get("spec")
    replicas = spec.get("replicas", 0) if isinstance(spec, dict) else 0
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        shown = replicas if isinstance(replicas, int) else f'"{replicas}"'
        raise InvalidError.for_fields(
            SCALE_KIND,
            "autoscaling",
            name,
            [
                StatusCause(
                    "FieldValueInvalid",
                    f"Invalid value: {shown}: must be greater than or equal to 0",
                    "spec.replicas",
                )
            ],
        )
    target: Any = obj
    steps = _steps(scale.spec_replicas_path)
    for step in steps[:-1]:
        child = target.get(step)
        if not isinstance(child, dict):
            child = target[step] = {}
        target = child
    target[steps[-1]] = replicas
