"""The write rules of kinds defined by a schema: CRD-defined kinds and an embedder's own,
as apiextensions-apiserver's custom-resource strategy applies them.

Design note
-----------
A kind declared with an OpenAPI v3 schema (``ResourceSpec.openapi_schema``: a CRD
version's ``openAPIV3Schema``, or what an embedder passes) has no Go type behind it, so
everything Kubernetes' type system would do comes from the schema, compiled once into a
:class:`~watchcache.registry.structural.StructuralSchema` when the resource is installed:

* **decoding** (:meth:`CustomResourceStrategy.prune`, handed to
  ``wire.body.decode_unstructured``): members the schema does not specify are removed and
  reported as unknown fields (warnings, or a 400 under ``fieldValidation=Strict``); then
  the schema's defaults are filled in. A patched object is decoded the same way, so a
  patch cannot smuggle in what a body could not;
* **reading**: objects are defaulted as they enter the cache (:meth:`on_read`), so a
  default added to a CRD later shows on objects stored before, as kube-apiserver's
  storage decoder does;
* **create and update** (the custom-resource strategy): with a ``status`` subresource a
  create drops ``status`` and an update keeps the stored one; ``metadata.generation`` is 1
  on create and goes up when anything outside ``metadata`` changes (``status`` included
  when it is not a subresource);
* **validation**: the schema's checks with kube-openapi's causes
  (``registry.crd_validation``), and, with a ``scale`` subresource, that the replicas
  fields are int32s and the selector a string.

A kind declared without a schema keeps whatever it is sent (as a CRD with
``x-kubernetes-preserve-unknown-fields`` at the root would) and gets the generic strategy.
CEL rules are kept in the schema but not evaluated (``registry.structural``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from watchcache.registry import crd_validation
from watchcache.registry.crd_defaulting import apply_defaults
from watchcache.registry.crd_pruning import prune as prune_object
from watchcache.registry.resources import ResourceSpec
from watchcache.registry.spec_memo import SpecMemo
from watchcache.registry.strategy import Strategy
from watchcache.registry.structural import (
    SchemaDecodeError,
    StructuralSchema,
    StructuralSchemaError,
)
from watchcache.structured.value import go_type
from watchcache.wire.errors import InvalidError, StatusCause

__all__ = ["CustomResourceStrategy", "InvalidSchemaError", "compile_schema"]

_INT32_MAX: Final = 2**31 - 1


class InvalidSchemaError(ValueError):
    """A declared kind's OpenAPI schema breaks Kubernetes' rules for CRD schemas; the
    message lists every violation."""


#: How many specs' compiled schemas are kept (one per ResourceSpec object).
SCHEMA_CACHE_SIZE: Final = 256


def compile_schema(spec: ResourceSpec) -> StructuralSchema:
    """The compiled schema of ``spec`` (which must have one), compiled once per spec object
    (the CRD controller's check, the strategy and server-side apply's type all ask).
    Raises InvalidSchemaError."""
    return _COMPILED(spec)


def _compile(spec: ResourceSpec) -> StructuralSchema:
    assert spec.openapi_schema is not None
    try:
        return StructuralSchema.from_openapi(
            spec.openapi_schema,
            field_path="openAPIV3Schema",
            status_subresource="status" in spec.subresources,
        )
    except (SchemaDecodeError, StructuralSchemaError) as error:
        raise InvalidSchemaError(
            f"the schema of {spec.group_resource} {spec.version} is not structural: {error}"
        ) from None


_COMPILED: Final = SpecMemo(_compile, SCHEMA_CACHE_SIZE)


class CustomResourceStrategy(Strategy):
    """The strategy of a kind defined by its schema (see the module note)."""

    tracks_generation = True

    def __init__(self, spec: ResourceSpec) -> None:
        super().__init__(spec)
        self.schema = compile_schema(spec)

    # -- decoding and reading ---------------------------------------------------------------

    def prune(self, obj: dict[str, Any]) -> list[str]:
        """Remove what the schema does not specify, then fill its defaults; returns the
        removed paths (the decoder's unknown fields)."""
        removed = prune_object(obj, self.schema)
        apply_defaults(obj, self.schema)
        return removed

    def on_read(self) -> Callable[[dict[str, Any]], None] | None:
        if not self.schema.defaults_below:
            return None
        schema = self.schema

        def default(obj: dict[str, Any]) -> None:
            apply_defaults(obj, schema)

        return default

    # -- create and update ------------------------------------------------------------------

    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        if self.has_status:
            obj.pop("status", None)  # a create cannot set status
        obj["metadata"]["generation"] = 1

    def prepare_for_update(self, obj: dict[str, Any], old: dict[str, Any]) -> None:
        if self.has_status:
            if "status" in old:
                obj["status"] = old["status"]
            else:
                obj.pop("status", None)
        generation = int(old["metadata"].get("generation") or 0)
        if _without_metadata(obj) != _without_metadata(old):
            generation += 1
        obj["metadata"]["generation"] = generation

    def validate(self, obj: dict[str, Any]) -> None:
        causes = crd_validation.validate(obj, self.schema)
        scale = self.spec.scale
        if scale is not None:
            causes.extend(_replicas_causes(obj, scale.spec_replicas_path))
            if "status" in obj:
                causes.extend(_replicas_causes(obj, scale.status_replicas_path))
                if scale.label_selector_path:
                    causes.extend(_selector_causes(obj, scale.label_selector_path))
        if causes:
            name = str((obj.get("metadata") or {}).get("name") or "")
            raise InvalidError.for_fields(self.spec.kind, self.spec.group, name, causes)


def _without_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != "metadata"}


def nested(obj: Any, path: str) -> tuple[Any, bool]:
    """The value at a ``.a.b`` path, and whether every step was there."""
    for step in path.lstrip(".").split("."):
        if not isinstance(obj, dict) or step not in obj:
            return None, False
        obj = obj[step]
    return obj, True


def _replicas_causes(obj: dict[str, Any], path: str) -> list[StatusCause]:
    # The custom-resource validator's ValidateScaleSpec/Status: an absent field is fine,
    # anything else must be an int32 that is not negative.
    value, found = nested(obj, path)
    field = path  # field.NewPath of the declared path: its leading dot stays
    if not found:
        return []
    if isinstance(value, bool) or not isinstance(value, int):
        shown = "0"
        why = (
            f".{path.lstrip('.')} accessor error: {_go_type_text(value)} is of the type "
            f"{go_type(value)}, expected int64"
        )
        return [StatusCause("FieldValueInvalid", f"Invalid value: {shown}: {why}", field)]
    if value < 0:
        why = "should be a non-negative integer"
        return [StatusCause("FieldValueInvalid", f"Invalid value: {value}: {why}", field)]
    if value > _INT32_MAX:
        why = f"should be less than or equal to {_INT32_MAX}"
        return [StatusCause("FieldValueInvalid", f"Invalid value: {value}: {why}", field)]
    return []


def _selector_causes(obj: dict[str, Any], path: str) -> list[StatusCause]:
    value, found = nested(obj, path)
    if not found or isinstance(value, str):
        return []
    accessor = f".{path.lstrip('.')} accessor error"
    why = f"{accessor}: {_go_type_text(value)} is of the type {go_type(value)}, expected string"
    return [StatusCause("FieldValueInvalid", f'Invalid value: "": {why}', path)]


def _go_type_text(value: Any) -> str:
    """``%v`` of an unstructured value, for the scalars the messages show."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value).removesuffix(".0") if value.is_integer() else repr(value)
    if isinstance(value, list | dict):
        return "[...]" if isinstance(value, list) else "map[...]"
    return str(value)
