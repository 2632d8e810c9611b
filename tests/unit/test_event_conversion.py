"""events.k8s.io/v1 Events without a server: the conversion to and from the stored core
form, the fields the caches extract for selectors, and the strategy's rules where they are
hard to reach over HTTP (sub-microsecond eventTime changes, times and references in
"is immutable" causes)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from watchcache.registry.event_conversion import EVENT_CONVERSION
from watchcache.registry.event_strategy import EventStrategy
from watchcache.registry.resources import EVENTS, EVENTS_V1, ResourceSpec
from watchcache.wire.errors import InvalidError

CORE: dict[str, Any] = {
    "kind": "Event",
    "apiVersion": "v1",
    "metadata": {"name": "e", "namespace": "default"},
    "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
    "reason": "Pulled",
    "message": "pulled",
    "source": {"component": "kubelet", "host": "n1"},
    "firstTimestamp": "2026-01-01T00:00:00Z",
    "lastTimestamp": "2026-01-01T00:01:00Z",
    "count": 2,
    "type": "Normal",
    "eventTime": "2026-01-01T00:00:00.000001Z",
    "series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"},
    "action": "Pull",
    "related": {"kind": "Node", "name": "n1"},
    "reportingComponent": "kubelet",
    "reportingInstance": "n1",
}


def test_the_conversion_renames_both_ways_in_each_structs_order() -> None:
    served = copy.deepcopy(CORE)
    EVENT_CONVERSION.to_served(served)
    assert list(served) == [
        "kind", "apiVersion", "metadata", "eventTime", "series", "reportingController",
        "reportingInstance", "action", "reason", "regarding", "related", "note", "type",
        "deprecatedSource", "deprecatedFirstTimestamp", "deprecatedLastTimestamp",
        "deprecatedCount",
    ]  # fmt: skip
    assert served["apiVersion"] == "events.k8s.io/v1"
    assert served["regarding"] is not None and served["note"] == "pulled"
    assert served["deprecatedSource"] == {"component": "kubelet", "host": "n1"}
    back = dict(served)
    EVENT_CONVERSION.to_storage(back)
    assert back == CORE and list(back) == list(CORE)
    # Members neither version has are dropped, as Go's decoding drops them.
    stray = {**CORE, "note": "not a core member"}
    EVENT_CONVERSION.to_served(stray)
    assert stray["note"] == "pulled"


def test_a_shallow_copy_isolates_a_conversion() -> None:
    served = copy.deepcopy(CORE)
    EVENT_CONVERSION.to_served(served)
    snapshot = copy.deepcopy(served)
    stored = dict(served)
    EVENT_CONVERSION.to_storage(stored)
    assert served == snapshot


@pytest.mark.parametrize(
    ("spec", "obj", "source"),
    [
        (EVENTS, CORE, "kubelet"),
        (EVENTS, {**CORE, "source": {}}, "kubelet"),
        (EVENTS, {**CORE, "source": {}, "reportingComponent": ""}, ""),
        (EVENTS_V1, CORE, "kubelet"),
        (EVENTS_V1, {**CORE, "source": {"component": "x"}, "reportingComponent": "y"}, "x"),
    ],
)
def test_source_is_the_component_else_the_reporting_controller(
    spec: ResourceSpec, obj: dict[str, Any], source: str
) -> None:
    item = spec.codec().item("/registry/events/default/e", copy.deepcopy(obj), 5)
    assert item.fields["source"] == source
    if spec is EVENTS_V1:
        assert item.fields["regarding.kind"] == "Pod"
        assert item.fields["reportingController"] == obj["reportingComponent"]
        assert json.loads(item.value)["apiVersion"] == "events.k8s.io/v1"


def served(**changes: Any) -> dict[str, Any]:
    obj = copy.deepcopy(CORE)
    EVENT_CONVERSION.to_served(obj)
    obj.update(changes)
    return obj


def causes(error: pytest.ExceptionInfo[InvalidError]) -> list[tuple[str, str]]:
    details = error.value.details
    assert details is not None
    return [(c.field, c.message) for c in details.causes]


def test_strict_updates_show_values_as_kubernetes_prints_internal_ones() -> None:
    strategy = EventStrategy(EVENTS_V1)
    old = served()
    # Below a microsecond is not a change; the series may change.
    strategy.validate_update(served(eventTime="2026-01-01T00:00:00.0000019Z"), old)
    strategy.validate_update(
        served(series={"count": 3, "lastObservedTime": "2026-01-01T00:02:00.000000Z"}), old
    )
    changed = served(
        eventTime="2026-01-01T00:00:00.000002Z",
        deprecatedFirstTimestamp=None,
        deprecatedSource={"component": "kubelet"},
        related=None,
        reason="Other",
        type="Warning",
    )
    with pytest.raises(InvalidError) as error:
        strategy.validate_update(changed, old)
    assert causes(error) == [
        ("reason", 'Invalid value: "Other": field is immutable'),
        ("source", 'Invalid value: {"Component":"kubelet","Host":""}: field is immutable'),
        ("firstTimestamp", "Invalid value: null: field is immutable"),
        ("reason", 'Invalid value: "Other": field is immutable'),
        ("type", 'Invalid value: "Warning": field is immutable'),
        ("eventTime", 'Invalid value: "2026-01-01T00:00:00.000002Z": field is immutable'),
        ("related", "Invalid value: null: field is immutable"),
    ]
    assert str(error.value.message).startswith('Event "e" is invalid: [')


def test_core_writes_are_not_strict() -> None:
    strategy = EventStrategy(EVENTS)
    strategy.validate(copy.deepcopy(CORE))
    strategy.validate_update({**CORE, "reason": "Other", "count": 9}, CORE)
    with pytest.raises(InvalidError) as error:
        strategy.validate({**CORE, "reportingComponent": "not/a/name", "action": "a" * 129})
    assert causes(error) == [
        (
            "reportingComponent",
            'Invalid value: "not/a/name": a valid label key must consist of alphanumeric '
            "characters, '-', '_' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
            "subdomain prefix and '/' (e.g. 'example.com/MyName')",
        ),
        ("action", 'Invalid value: "": can have at most 128 characters'),
    ]
    # Without eventTime, a cluster-scoped object's events live in "default" (or nowhere).
    node = {**CORE, "involvedObject": {"kind": "Node", "name": "n1"}}
    del node["eventTime"]
    strategy.validate(node)
    elsewhere = {**node, "metadata": {"name": "e", "namespace": "other"}}
    with pytest.raises(InvalidError) as error:
        strategy.validate(elsewhere)
    assert causes(error) == [
        ("involvedObject.namespace", 'Invalid value: "": does not match event.namespace')
    ]
