"""Which strategy a served resource's writes follow: a built-in resource's own
(``registry.strategy``, ``registry.crd_strategy``), the schema's for a kind declared with
an OpenAPI schema (``registry.custom_resource``), else the generic one."""

from __future__ import annotations

from typing import Final

from watchcache.registry.crd_strategy import CustomResourceDefinitionStrategy
from watchcache.registry.custom_resource import CustomResourceStrategy
from watchcache.registry.event_strategy import EventStrategy
from watchcache.registry.resources import ResourceSpec
from watchcache.registry.strategy import (
    ConfigMapStrategy,
    NamespaceStrategy,
    PodStrategy,
    SecretStrategy,
    Strategy,
)

__all__ = ["strategy_class", "strategy_for"]

#: Built-in resources with rules of their own, by ``group_resource``.
_BUILT_IN: Final[dict[str, type[Strategy]]] = {
    "configmaps": ConfigMapStrategy,
    "secrets": SecretStrategy,
    "pods": PodStrategy,
    "namespaces": NamespaceStrategy,
    "events": EventStrategy,
    "events.events.k8s.io": EventStrategy,
    "customresourcedefinitions.apiextensions.k8s.io": CustomResourceDefinitionStrategy,
}


def strategy_class(spec: ResourceSpec) -> type[Strategy]:
    """The class :func:`strategy_for` instantiates (its class-level facts, such as
    ``returns_deleted_object``, without compiling a schema)."""
    if spec.openapi_schema is not None:
        return CustomResourceStrategy
    return _BUILT_IN.get(spec.group_resource, Strategy)


def strategy_for(spec: ResourceSpec) -> Strategy:
    """The strategy of ``spec``. Raises ``InvalidSchemaError`` when its schema is not
    structural."""
    return strategy_class(spec)(spec)
