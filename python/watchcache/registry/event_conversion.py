"""``events.k8s.io/v1`` Events over the objects stored as core/v1 Events.

Design note
-----------
kube-apiserver serves one set of Event objects through two APIs: core/v1 (``Event`` with
``involvedObject``, ``message``, ``source``...) and ``events.k8s.io/v1`` (``regarding``,
``note``, ``deprecatedSource``...). Both convert to the same internal Event, which etcd
holds as core/v1 JSON at ``/registry/events/<namespace>/<name>``. Here the internal form
*is* the stored core/v1 form, so ``events.k8s.io/v1`` is one more version of the core
objects with a :class:`~watchcache.registry.resources.VersionConversion` that renames
members (``pkg/apis/events/v1/conversion.go``):

=========================  ====================
events.k8s.io/v1           core/v1
=========================  ====================
regarding                  involvedObject
note                       message
reportingController        reportingComponent
deprecatedSource           source
deprecatedFirstTimestamp   firstTimestamp
deprecatedLastTimestamp    lastTimestamp
deprecatedCount            count
=========================  ====================

Every other member (``metadata``, ``eventTime``, ``series``, ``reportingInstance``,
``action``, ``reason``, ``related``, ``type``) has the same name and shape in both.

A converted object has exactly the members of the target version, in its Go struct's
order (``kind`` and ``apiVersion`` first): what Go's decode-convert-encode keeps. Values are
moved, not re-encoded, so a zero value stays as stored (Go would drop an empty
``reportingController`` and write ``"eventTime": null``); the mapping is a bijection on
what it keeps, so a read through one API and a write back through the other loses nothing.

Conversions replace members and never change a nested value in place (the contract of
``VersionConversion``). Pure; safe from any thread.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["CORE_API_VERSION", "EVENTS_API_VERSION", "EVENT_CONVERSION", "EventConversion"]

EVENTS_API_VERSION: Final = "events.k8s.io/v1"
CORE_API_VERSION: Final = "v1"
KIND: Final = "Event"

#: ``events.k8s.io/v1`` members in ``k8s.io/api/events/v1.Event``'s order, each with the
#: core/v1 member it is.
_EVENTS_V1: Final = (
    ("metadata", "metadata"),
    ("eventTime", "eventTime"),
    ("series", "series"),
    ("reportingController", "reportingComponent"),
    ("reportingInstance", "reportingInstance"),
    ("action", "action"),
    ("reason", "reason"),
    ("regarding", "involvedObject"),
    ("related", "related"),
    ("note", "message"),
    ("type", "type"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
)
#: core/v1 members in ``k8s.io/api/core/v1.Event``'s order, each with the
#: ``events.k8s.io/v1`` member it is.
_CORE_V1: Final = (
    ("metadata", "metadata"),
    ("involvedObject", "regarding"),
    ("reason", "reason"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("type", "type"),
    ("eventTime", "eventTime"),
    ("series", "series"),
    ("action", "action"),
    ("related", "related"),
    ("reportingComponent", "reportingController"),
    ("reportingInstance", "reportingInstance"),
)


def _rebuild(obj: dict[str, Any], api_version: str, members: tuple[tuple[str, str], ...]) -> None:
    converted: dict[str, Any] = {"kind": KIND, "apiVersion": api_version}
    for target, source in members:
        if source in obj:
            converted[target] = obj[source]
    obj.clear()
    obj.update(converted)


class EventConversion:
    """core/v1 Event (stored) ↔ ``events.k8s.io/v1`` Event (served); see the module note."""

    __slots__ = ()

    def to_served(self, obj: dict[str, Any]) -> None:
        _rebuild(obj, EVENTS_API_VERSION, _EVENTS_V1)

    def to_storage(self, obj: dict[str, Any]) -> None:
        _rebuild(obj, CORE_API_VERSION, _CORE_V1)


#: The one conversion ``events.k8s.io/v1`` uses.
EVENT_CONVERSION: Final = EventConversion()
