"""Kubernetes objects as stored in etcd, turned into cache Items once.

An etcd value is the object's JSON. :class:`ObjectCodec` parses it once per change, stamps
``metadata.resourceVersion`` with the etcd revision the change happened at (etcd does not
store it: the revision *is* the version, as in Kubernetes' ``APIObjectVersioner``), and
extracts what selectors need — the labels and a fixed set of field paths — so that LISTs
and watches never parse JSON again.

Objects are re-encoded with the standard library's compact JSON (C-accelerated), not
:mod:`watchcache.wire.gojson`: bodies only need to be valid JSON that clients decode, and this
runs for every object of an initial sync.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from watchcache._core import Item
from watchcache.wire import gojson

#: Fields every object supports in field selectors (Kubernetes' ``DefaultClusterScopedAttr``
#: / ``DefaultNamespaceScopedAttrs``).
DEFAULT_FIELDS: tuple[str, ...] = ("metadata.name", "metadata.namespace")

#: Where a selectable field's value is: a dotted path, or several, the first that is not
#: empty winning (an Event's ``source`` is ``source.component``, else its reporting
#: controller).
FieldPath = str | tuple[str, ...]

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class ObjectDecodeError(ValueError):
    """An etcd value that is not a Kubernetes object in JSON (the key says which)."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"cannot decode the object at {key!r}: {problem}")
        self.key = key


@dataclass(frozen=True, slots=True)
class ObjectCodec:
    """Decodes etcd values of one resource into Items.

    ``fields``: the field-selector names extracted (``spec.nodeName`` for pods...), each
    read at the same dotted path, or a ``(name, path)`` pair when the selector name is not
    the path (core Events' ``source`` is ``source.component``, else
    ``reportingComponent``); a missing path or a non-string value is extracted as its
    string form or "", which is what Kubernetes' field sets give for unset fields.
    ``convert``: changes each parsed object in place before it is cached (a version other
    than the stored one), so serving it costs nothing more than serving what is stored.
    """

    fields: Sequence[str | tuple[str, FieldPath]] = DEFAULT_FIELDS
    convert: Callable[[dict[str, Any]], None] | None = field(default=None, compare=False)
    _paths: tuple[tuple[str, FieldPath], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pairs = tuple((f, f) if isinstance(f, str) else (f[0], f[1]) for f in self.fields)
        object.__setattr__(self, "_paths", pairs)

    def decode(self, key: str, value: bytes, revision: int) -> Item:
        """The Item for ``value`` at ``revision``. Raises ObjectDecodeError."""
        try:
            obj = gojson.loads(value)
        except (ValueError, UnicodeDecodeError) as error:
            raise ObjectDecodeError(key, f"not JSON ({error})") from None
        return self.item(key, obj, revision)

    def item(self, key: str, obj: Any, revision: int) -> Item:
        """The Item for an already parsed object (``obj`` is changed in place: its
        ``metadata.resourceVersion`` is set). Raises ObjectDecodeError."""
        if not isinstance(obj, dict):
            raise ObjectDecodeError(key, "not a JSON object")
        if self.convert is not None:
            self.convert(obj)
        metadata = obj.get("metadata")
        if metadata is None:
            metadata = obj["metadata"] = {}
        elif not isinstance(metadata, dict):
            raise ObjectDecodeError(key, "metadata is not an object")
        metadata["resourceVersion"] = str(revision)
        labels = metadata.get("labels") or {}
        if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise ObjectDecodeError(key, "metadata.labels is not a map of strings")
        return Item(
            key,
            _encode(obj).encode(),
            revision,
            labels=labels,
            fields={name: _first_value(obj, path) for name, path in self._paths},
        )

    def restamp(self, item: Item, revision: int) -> Item:
        """The same object at another revision (a DELETE is the last state stamped with
        the delete's revision)."""
        if item.mod_revision == revision:
            return item
        obj = json.loads(item.value)
        obj["metadata"]["resourceVersion"] = str(revision)
        return Item(item.key, _encode(obj).encode(), revision, item.labels, item.fields)


def _first_value(obj: Mapping[str, Any], path: FieldPath) -> str:
    if isinstance(path, str):
        return field_value(obj, path)
    for alternative in path:
        value = field_value(obj, alternative)
        if value:
            return value
    return ""


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The value at a dotted ``path`` as Kubernetes' field sets show it: strings as they
    are, booleans and numbers in their JSON form, anything missing as ""."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
        if current is None:
            return ""
    if isinstance(current, str):
        return current
    if isinstance(current, bool):
        return "true" if current else "false"
    if isinstance(current, int | float):
        return json.dumps(current)
    return ""
