"""The write rules of ``customresourcedefinitions``: the generic write path's strategy
hooks, each delegating to the CRD registry's rules in ``registry.crd_definition``.

Defaulting runs on every write before the strategy (Kubernetes defaults a CRD as it
decodes it). A DELETE of a CRD not yet being deleted only marks it: the cleanup
finalizer and the ``Terminating`` condition are added, and the CRD controller deletes the
custom objects, then removes the finalizer, which deletes the CRD.
"""

from __future__ import annotations

from typing import Any

from watchcache.registry import crd_definition
from watchcache.registry.strategy import Strategy

__all__ = ["CustomResourceDefinitionStrategy"]


class CustomResourceDefinitionStrategy(Strategy):
    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        crd_definition.default_crd(obj)
        crd_definition.prepare_for_create(obj)

    def prepare_for_update(self, obj: dict[str, Any], old: dict[str, Any]) -> None:
        crd_definition.default_crd(obj)
        crd_definition.prepare_for_update(obj, old)

    def prepare_for_status_update(self, obj: dict[str, Any], old: dict[str, Any]) -> None:
        crd_definition.default_crd(obj)
        crd_definition.prepare_for_status_update(obj, old)

    def prepare_for_delete(self, obj: dict[str, Any], now: str) -> None:
        crd_definition.mark_for_deletion(obj, now=now)

    def validate(self, obj: dict[str, Any]) -> None:
        causes = crd_definition.validate_crd(obj)
        if causes:
            raise crd_definition.invalid_error(obj, causes)

    def validate_update(self, obj: dict[str, Any], old: dict[str, Any]) -> None:
        causes = crd_definition.validate_crd_update(obj, old)
        if causes:
            raise crd_definition.invalid_error(obj, causes)

    def validate_status_update(self, obj: dict[str, Any], old: dict[str, Any]) -> None:
        causes = crd_definition.validate_crd_status_update(obj, old)
        if causes:
            raise crd_definition.invalid_error(obj, causes)
