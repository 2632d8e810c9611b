"""WatchEvent: what a watcher receives reads the same whether its JSON was given or is read
from the item on first use, and a DELETED re-stamped at a newer rv carries that rv."""

from __future__ import annotations

import json

from watchcache import Item
from watchcache.cache.event import Event, EventType
from watchcache.cache.watcher import EventConversions, WatchEvent

KEY = "/registry/pods/ns/p"


def pod(rv: int, node: str) -> Item:
    body = {"kind": "Pod", "metadata": {"name": "p", "resourceVersion": str(rv)}}
    return Item(KEY, json.dumps(body).encode(), rv, {"app": "a"}, {"spec.nodeName": node})


def test_an_event_of_an_item_reads_as_one_given_its_json() -> None:
    item = pod(5, "n1")
    lazy = WatchEvent.of_item(EventType.ADDED, 5, item)
    given = WatchEvent(EventType.ADDED, 5, item.value, item)
    assert lazy == given
    assert lazy.object == item.value
    assert lazy.to_json() == b'{"type":"ADDED","object":' + item.value + b"}"
    assert lazy.object is lazy.object  # read once, then kept
    assert hash(lazy) == hash(given)
    assert "ADDED" in repr(lazy)


def test_a_restamped_delete_carries_the_events_rv_in_its_object_and_item() -> None:
    before = pod(5, "n1")
    event = WatchEvent.restamped(EventType.DELETED, 9, before)
    item = event.item
    assert item is not None and item is event.item
    assert item.mod_revision == 9
    assert json.loads(event.object)["metadata"]["resourceVersion"] == "9"
    assert item.fields == before.fields and item.labels == before.labels
    assert json.loads(before.value)["metadata"]["resourceVersion"] == "5"


def test_a_restamped_delete_of_an_object_that_is_not_json_is_delivered_as_stored() -> None:
    stored = Item(KEY, b"\x00not json", 5)
    event = WatchEvent.restamped(EventType.DELETED, 9, stored)
    assert event.item is stored
    assert event.object == b"\x00not json"


def test_conversions_share_one_event_per_type_and_restamp_the_previous_object() -> None:
    moved = Event(EventType.MODIFIED, pod(9, "n2"), None, 9)
    conversions = EventConversions(moved, pod(5, "n1"))
    assert conversions.as_type(EventType.MODIFIED) is conversions.native()
    gone = conversions.as_type(EventType.DELETED)
    assert gone.type is EventType.DELETED and gone.resource_version == 9
    assert gone.item is not None and gone.item.fields["spec.nodeName"] == "n1"
    assert json.loads(gone.object)["metadata"]["resourceVersion"] == "9"
    added = conversions.as_type(EventType.ADDED)
    assert added.item is moved.object and added.object == moved.object.value
