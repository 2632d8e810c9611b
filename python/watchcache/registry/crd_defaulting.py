"""Defaults from a CRD schema filled into custom objects, as kube-apiserver fills them.

Design note
-----------
:func:`apply_defaults` is apiextensions' ``structuraldefaulting.Default``, run after
pruning (``registry.crd_pruning``) and before validation: for every object node, each
property whose schema has a ``default`` and that is missing, or null while not
``nullable``, gets a deep copy of the default; array items and ``additionalProperties``
values that are null and not nullable get their node's default (null again when it has
none); then every member is defaulted by its own node, so defaults inside a default are
applied too, and defaults reach into arrays and maps. A ``nullable`` node keeps an
explicit null. Only what the schema names is visited: members kept by
``x-kubernetes-preserve-unknown-fields`` get no defaults.

Kubernetes checks every default against its node when the CRD is written
(``registry.structural``), so filling never makes an object invalid by itself. Linear in
the object plus the size of what is copied in. Changes the object in place; safe from any
thread on distinct objects. Callers: the custom-resource write path.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watchcache.registry.structural import StructuralSchema

__all__ = ["apply_defaults"]


def apply_defaults(obj: Any, schema: StructuralSchema | None) -> None:
    """Fill the defaults of ``schema`` into ``obj`` (parsed JSON), in place."""
    if schema is None or not schema.defaults_below:
        return
    if isinstance(obj, dict):
        for name, prop in schema.property_items:
            if prop.has_default and (name not in obj or (obj[name] is None and not prop.nullable)):
                obj[name] = copy.deepcopy(prop.default)
        properties = schema.properties
        additional = schema.additional if schema.additional_given else None
        for name in obj:
            known = properties.get(name)
            if known is not None:
                apply_defaults(obj[name], known)
            elif schema.additional_given:
                if obj[name] is None and additional is not None and not additional.nullable:
                    obj[name] = copy.deepcopy(additional.default)
                apply_defaults(obj[name], additional)
    elif isinstance(obj, list):
        items = schema.items
        for i, item in enumerate(obj):
            if item is None and items is not None and not items.nullable:
                obj[i] = copy.deepcopy(items.default)
            apply_defaults(obj[i], items)
