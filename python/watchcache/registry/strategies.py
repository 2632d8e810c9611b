"""Which strategy a served resource's writes follow: a built-in kind's own
(``registry.strategy``), the schema's for a kind declared with an OpenAPI schema
(``registry.custom_resource``), else the generic one."""

from __future__ import annotations

from watchcache.registry.custom_resource import CustomResourceStrategy
from watchcache.registry.resources import ResourceSpec
from watchcache.registry.strategy import Strategy, builtin_strategy_class

__all__ = ["strategy_class", "strategy_for"]


def strategy_class(spec: ResourceSpec) -> type[Strategy]:
    """The class :func:`strategy_for` instantiates (its class-level facts, such as
    ``returns_deleted_object``, without compiling a schema)."""
    if spec.openapi_schema is not None:
        return CustomResourceStrategy
    return builtin_strategy_class(spec)


def strategy_for(spec: ResourceSpec) -> Strategy:
    """The strategy of ``spec``. Raises ``InvalidSchemaError`` when its schema is not
    structural."""
    return strategy_class(spec)(spec)
