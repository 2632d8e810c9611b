"""Event.with_prev_object: the cache's unchecked copy must equal a checked construction."""

from __future__ import annotations

import dataclasses

import pytest

from watchcache import Item
from watchcache.event import Event, EventType


def test_with_prev_object_equals_the_checked_constructor_and_stays_frozen() -> None:
    new = Item("/registry/pods/ns/a", b'{"v":2}', 7, {"app": "x"})
    old = Item("/registry/pods/ns/a", b'{"v":1}', 3, {"app": "y"})
    event = Event(EventType.MODIFIED, new, None, 7, 12.5)

    copy = event.with_prev_object(old)

    assert copy == Event(EventType.MODIFIED, new, old, 7, 12.5)
    assert copy.prev_object is old and copy.object is new
    assert type(copy.type) is EventType
    assert event.prev_object is None, "the original is not changed"
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.prev_object = None  # type: ignore[misc]
