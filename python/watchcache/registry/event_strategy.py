"""Events' write rules, as kube-apiserver's event strategy applies them
(``pkg/registry/core/event/strategy.go``, ``pkg/apis/core/validation/events.go``).

Design note
-----------
Kubernetes validates every Event in its internal form, whichever API the write came
through, and lets the request's API decide how strict to be:

* every write passes the *legacy* rules: an Event without ``eventTime`` must be in its
  involved object's namespace (``default`` standing for a cluster-scoped object); one with
  ``eventTime`` needs a reporting controller (a qualified name), a reporting instance (at
  most 128 characters), an action and a reason (at most 128), a message of at most 1024
  characters, and an involved object namespace unless the Event is in ``default`` or
  ``kube-system``; and the Event's namespace must be a DNS subdomain;
* writes through ``events.k8s.io/v1`` are also *strict*: a create needs ``eventTime``, a
  ``type`` of ``Normal`` or ``Warning``, a valid ``series`` (count at least 2, a last
  observed time), and none of the deprecated members (``firstTimestamp``,
  ``lastTimestamp``, ``count``, ``source``); an update may change only the series (and
  ``eventTime`` below a microsecond, which clients that truncate differently disagree on).

The rules read the core/v1 form (an ``events.k8s.io/v1`` object is converted first), so
field paths name core members (``involvedObject.namespace``, ``message``), as Kubernetes'
do, except the reporting controller: ``reportingComponent`` through core/v1,
``reportingController`` through ``events.k8s.io``. The 422 names the kind ``Event`` with
no group either way: kube-apiserver takes the kind from its scheme, where the internal
Event is registered in the core group first.

A value shown in an "is immutable" cause is printed as Kubernetes prints the internal
value: strings quoted, numbers as they are, structs as Go's ``json.Marshal`` writes an
internal struct (Go field names, no tags: ``{"Kind":"Pod",...}``), times as
``metav1.Time`` marshals them.

What is not modelled: ``ValidateObjectMeta`` is the generic admission's (its causes come
in a 422 of their own, before these), and PUT does not create a missing Event
(``AllowCreateOnUpdate``). Pure; safe from any thread.
"""

from __future__ import annotations

from typing import Any, Final

from watchcache.registry.crd_embedded import is_dns1123_subdomain, is_qualified_name
from watchcache.registry.field_errors import INVALID, invalid, required
from watchcache.registry.resources import ResourceSpec
from watchcache.registry.strategy import Strategy
from watchcache.wire import gojson
from watchcache.wire.errors import InvalidError, StatusCause
from watchcache.wire.gotime import (
    ZERO_TIME_SECONDS,
    TimeParseError,
    format_micro_time,
    format_time,
    parse_time,
)

__all__ = ["STRICT_GROUP", "EventStrategy"]

#: Writes through this group get the strict rules (``events.k8s.io/v1`` and newer).
STRICT_GROUP: Final = "events.k8s.io"
REPORTING_INSTANCE_LIMIT: Final = 128
ACTION_LIMIT: Final = 128
REASON_LIMIT: Final = 128
NOTE_LIMIT: Final = 1024
EVENT_TYPES: Final = ("Normal", "Warning")
#: ``core.ObjectReference`` and ``core.EventSource``: JSON member → Go field name.
_REFERENCE_FIELDS: Final = (
    ("kind", "Kind"),
    ("namespace", "Namespace"),
    ("name", "Name"),
    ("uid", "UID"),
    ("apiVersion", "APIVersion"),
    ("resourceVersion", "ResourceVersion"),
    ("fieldPath", "FieldPath"),
)
_SOURCE_FIELDS: Final = (("component", "Component"), ("host", "Host"))
#: A time member's value: (seconds, nanoseconds), None when unset or Go's zero time, or
#: the text itself when it does not parse (stored before it was checked).
_Instant = tuple[int, int] | str | None


class EventStrategy(Strategy):
    """The Event strategy of one served version: strict through ``events.k8s.io``."""

    def __init__(self, spec: ResourceSpec) -> None:
        super().__init__(spec)
        self._conversion = spec.version_conversion()
        self._strict = spec.group == STRICT_GROUP
        self._controller_path = "reportingController" if self._strict else "reportingComponent"

    def validate(self, obj: dict[str, Any]) -> None:
        event = self._core(obj)
        causes = self._legacy_causes(event)
        if self._strict:
            causes += _series_causes(event)
            if _instant(event.get("eventTime")) is None:
                causes.append(required("eventTime"))
            event_type = event.get("type") or ""
            if event_type not in EVENT_TYPES:
                causes.append(invalid("type", "", f"has invalid value: {event_type}"))
            for member in ("firstTimestamp", "lastTimestamp"):
                if _instant(event.get(member)) is not None:
                    causes.append(invalid(member, "", "needs to be unset"))
            if _integer(event.get("count")):
                causes.append(invalid("count", "", "needs to be unset"))
            if any(_string(_dict(event.get("source")).get(key)) for key, _ in _SOURCE_FIELDS):
                causes.append(invalid("source", "", "needs to be unset"))
        _raise(event, causes)

    def validate_update(self, obj: dict[str, Any], old: dict[str, Any]) -> None:
        event, before = self._core(obj), self._core(old)
        causes = self._legacy_causes(event)
        if self._strict:
            if _series(event) != _series(before):
                causes += _series_causes(event)
            causes += self._immutable_causes(event, before)
        _raise(event, causes)

    def _core(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` in the core/v1 form the rules read (a shallow copy when converted)."""
        if self._conversion is None:
            return obj
        core = dict(obj)
        self._conversion.to_storage(core)
        return core

    def _legacy_causes(self, event: dict[str, Any]) -> list[StatusCause]:
        """legacyValidateEvent."""
        causes: list[StatusCause] = []
        namespace = _string(_dict(event.get("metadata")).get("namespace"))
        involved = _string(_dict(event.get("involvedObject")).get("namespace"))
        mismatch = invalid("involvedObject.namespace", involved, "does not match event.namespace")
        if _instant(event.get("eventTime")) is None:
            # An Event of the old API: it lives in its object's namespace.
            if (not involved and namespace not in ("", "default")) or (
                involved and namespace != involved
            ):
                causes.append(mismatch)
        else:
            if not involved and namespace not in ("default", "kube-system"):
                causes.append(mismatch)
            controller = _string(event.get("reportingComponent"))
            if not controller:
                causes.append(required(self._controller_path))
            causes += (
                invalid(self._controller_path, controller, message)
                for message in is_qualified_name(controller)
            )
            instance = _string(event.get("reportingInstance"))
            if not instance:
                causes.append(required("reportingInstance"))
            causes += _too_long("reportingInstance", instance, REPORTING_INSTANCE_LIMIT)
            action = _string(event.get("action"))
            if not action:
                causes.append(required("action"))
            causes += _too_long("action", action, ACTION_LIMIT)
            reason = _string(event.get("reason"))
            if not reason:
                causes.append(required("reason"))
            causes += _too_long("reason", reason, REASON_LIMIT)
            causes += _too_long("message", _string(event.get("message")), NOTE_LIMIT)
        causes += (
            invalid("namespace", namespace, message) for message in is_dns1123_subdomain(namespace)
        )
        return causes

    def _immutable_causes(self, event: dict[str, Any], before: dict[str, Any]) -> list[StatusCause]:
        """ValidateEventUpdate's immutable members, in its order."""
        causes: list[StatusCause] = []

        def check(path: str, new: Any, old: Any, shown: str) -> None:
            if new != old:
                message = f"Invalid value: {shown}: field is immutable"
                causes.append(StatusCause(INVALID, message, path))

        def text(member: str, path: str | None = None) -> None:
            new = _string(event.get(member))
            check(path or member, new, _string(before.get(member)), gojson.dumps(new))

        reference = _reference(event.get("involvedObject"))
        check("involvedObject", reference, _reference(before.get("involvedObject")),
              _go_struct(_REFERENCE_FIELDS, reference))  # fmt: skip
        text("reason")
        text("message")
        source = _source(event.get("source"))
        check("source", source, _source(before.get("source")), _go_struct(_SOURCE_FIELDS, source))
        for member in ("firstTimestamp", "lastTimestamp"):
            new_time = _instant(event.get(member))
            check(member, new_time, _instant(before.get(member)), _time_json(new_time, micro=False))
        count = _integer(event.get("count"))
        check("count", count, _integer(before.get("count")), str(count))
        text("reason")  # checked twice, as Kubernetes does
        text("type")
        # Changes below a microsecond are allowed: clients truncate differently.
        event_time = _instant(event.get("eventTime"))
        old_time = _instant(before.get("eventTime"))
        check("eventTime", _microseconds(event_time), _microseconds(old_time),
              _time_json(event_time, micro=True))  # fmt: skip
        text("action")
        related = event.get("related")
        new_related = None if related is None else _reference(related)
        old_related = None if before.get("related") is None else _reference(before["related"])
        shown = "null" if new_related is None else _go_struct(_REFERENCE_FIELDS, new_related)
        check("related", new_related, old_related, shown)
        text("reportingComponent", self._controller_path)
        text("reportingInstance")
        return causes


def _raise(event: dict[str, Any], causes: list[StatusCause]) -> None:
    if causes:
        name = _string(_dict(event.get("metadata")).get("name"))
        raise InvalidError.for_fields("Event", "", name, causes)


def _series_causes(event: dict[str, Any]) -> list[StatusCause]:
    """validateV1EventSeries."""
    series = event.get("series")
    if series is None:
        return []
    causes: list[StatusCause] = []
    count, last_observed = _series(event) or (0, None)
    if count < 2:
        causes.append(invalid("series.count", "", "should be at least 2"))
    if last_observed is None:
        causes.append(required("series.lastObservedTime"))
    return causes


def _series(event: dict[str, Any]) -> tuple[int, _Instant] | None:
    series = event.get("series")
    if series is None:
        return None
    fields = _dict(series)
    return _integer(fields.get("count")), _instant(fields.get("lastObservedTime"))


def _too_long(path: str, value: str, limit: int) -> list[StatusCause]:
    # Go's len() counts bytes.
    if len(value.encode()) > limit:
        return [invalid(path, "", f"can have at most {limit} characters")]
    return []


def _instant(value: Any) -> _Instant:
    if not isinstance(value, str) or not value:
        return None
    try:
        seconds, nanos = parse_time(value)
    except TimeParseError:
        return value
    if seconds == ZERO_TIME_SECONDS and nanos == 0:
        return None
    return seconds, nanos


def _microseconds(instant: _Instant) -> _Instant:
    if isinstance(instant, tuple):
        return instant[0], instant[1] // 1000 * 1000
    return instant


def _time_json(instant: _Instant, *, micro: bool) -> str:
    """``json.Marshal`` of a ``metav1.Time`` (or ``MicroTime``)."""
    if instant is None:
        return "null"
    if isinstance(instant, str):
        return gojson.dumps(instant)
    seconds, nanos = instant
    return gojson.dumps(format_micro_time(seconds, nanos) if micro else format_time(seconds))


def _reference(value: Any) -> tuple[str, ...]:
    fields = _dict(value)
    return tuple(_string(fields.get(member)) for member, _ in _REFERENCE_FIELDS)


def _source(value: Any) -> tuple[str, ...]:
    fields = _dict(value)
    return tuple(_string(fields.get(member)) for member, _ in _SOURCE_FIELDS)


def _go_struct(names: tuple[tuple[str, str], ...], values: tuple[str, ...]) -> str:
    """``json.Marshal`` of an internal struct of strings (Go field names, no tags)."""
    return gojson.dumps({go: value for (_, go), value in zip(names, values, strict=True)})


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _integer(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
