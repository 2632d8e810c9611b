"""Change events: what the reflector feeds the cache and the history keeps.

An :class:`Event` is one change of one key at one resourceVersion. Objects are native
:class:`~watchcache._core.Item` values: the object's JSON with ``metadata.resourceVersion``
already set, its mod revision, and the labels and fields selectors need, so nothing is
parsed twice. Conventions, as etcd and Kubernetes deliver them:

* ``ADDED`` / ``MODIFIED``: ``object`` is the new state (``object.mod_revision`` == the
  event's rv); ``prev_object`` the state before (``None`` for ADDED, or when etcd did not
  send ``prev_kv``).
* ``DELETED``: ``object`` is the last state *as of the deletion*: its JSON and mod revision
  carry the deletion's rv, which is what a Kubernetes watcher receives; ``prev_object`` may
  hold the same state at its own, older rv.

Events are immutable and cheap (a slotted object holding references); the history, the
snapshots and every watcher share them. :func:`with_resource_version` re-stamps an object
(one JSON round trip), needed only when a watcher must see a *previous* object as a
DELETED at a newer rv (a label change that takes it out of the watcher's selector).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Final

from watchcache._core import Item
from watchcache.wire import gojson


class EventType(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    ERROR = "ERROR"


_CHANGE_TYPES: Final = frozenset((EventType.ADDED, EventType.MODIFIED, EventType.DELETED))

#: Annotation on the bookmark that ends a watch's initial events (watch-list).
INITIAL_EVENTS_END_ANNOTATION: Final = "k8s.io/initial-events-end"


@dataclass(frozen=True, slots=True)
class Event:
    """One change applied to the cache (see the module note for the object conventions)."""

    type: EventType
    object: Item
    prev_object: Item | None
    resource_version: int
    #: When the event was received from etcd (``time.monotonic()``); sizes the history.
    record_time: float = 0.0

    @property
    def key(self) -> str:
        return self.object.key

    def __post_init__(self) -> None:
        if self.type not in _CHANGE_TYPES:
            raise ValueError(f"a cache event is ADDED, MODIFIED or DELETED, not {self.type!r}")
        if type(self.type) is not EventType:
            object.__setattr__(self, "type", EventType(self.type))
        if self.resource_version <= 0:
            raise ValueError(f"event resourceVersion must be > 0, got {self.resource_version}")
        if self.prev_object is not None and self.prev_object.key != self.object.key:
            raise ValueError(
                f"prev_object key {self.prev_object.key!r} != object key {self.object.key!r}"
            )


def with_resource_version(item: Item, resource_version: int) -> Item:
    """A copy of ``item`` whose JSON says ``metadata.resourceVersion: "<rv>"`` and whose mod
    revision is ``rv``. Raises ValueError when the value is not a JSON object.
    Cost: one parse and one serialization of the value."""
    try:
        obj = json.loads(item.value)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"object {item.key!r} is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"object {item.key!r} is not a JSON object")
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
        obj["metadata"] = metadata
    metadata["resourceVersion"] = str(resource_version)
    return Item(
        item.key,
        gojson.dumpb(obj),
        resource_version,
        labels=item.labels,
        fields=item.fields,
    )


def bookmark_object(
    kind: str, api_version: str, resource_version: int, *, initial_end: bool
) -> bytes:
    """The object of a BOOKMARK event: an empty object of the resource's kind whose only
    content is ``metadata.resourceVersion`` (plus the initial-events-end annotation)."""
    metadata: dict[str, object] = {"resourceVersion": str(resource_version)}
    if initial_end:
        metadata["annotations"] = {INITIAL_EVENTS_END_ANNOTATION: "true"}
    return gojson.dumpb({"kind": kind, "apiVersion": api_version, "metadata": metadata})
