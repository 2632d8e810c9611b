"""Server-side apply skips pruning when the applier keeps every field it applied last time
(``updater._keeps_every_field``): then the prune, run anyway, changes nothing. Checked on
generated schemas and sequences (a manager applies, another updates, the manager applies
again with its last configuration mixed into a new one, or the same fields with new
values): the apply with the skip and the apply forced through ``_prune`` give the same
object and the same managers."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from structured_builders import STRING, map_of, struct
from structured_strategies import combined, pruned, root_atoms, values

from watchcache.structured import updater
from watchcache.structured.fieldpath import ManagedFields, VersionedSet
from watchcache.structured.schema import Atom
from watchcache.structured.tofieldset import field_set
from watchcache.structured.typed import TypedValueError
from watchcache.structured.value import values_equal

VERSION = "v1"


def _both_ways(
    live: Any, config: Any, managers: ManagedFields, atom: Atom
) -> tuple[tuple[Any, ManagedFields], tuple[Any, ManagedFields]]:
    """``config`` applied by alice over ``live``, as the engine does it and with the prune
    forced."""
    skipping = updater.apply(live, config, VERSION, dict(managers), "alice", atom, force=True)
    with mock.patch.object(updater, "_keeps_every_field", return_value=False):
        pruning = updater.apply(live, config, VERSION, dict(managers), "alice", atom, force=True)
    return skipping, pruning


def _same(a: tuple[Any, ManagedFields], b: tuple[Any, ManagedFields], live: Any) -> None:
    objects = [live if o is updater.UNCHANGED else o for o in (a[0], b[0])]
    assert values_equal(objects[0], objects[1]), objects
    assert a[1].keys() == b[1].keys()
    for name, versioned in a[1].items():
        assert versioned.set == b[1][name].set, name
        assert (versioned.api_version, versioned.applied) == (
            b[1][name].api_version,
            b[1][name].applied,
        )


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_skipping_the_prune_changes_nothing(data: st.DataObject) -> None:
    atom = data.draw(root_atoms(), label="schema")
    first = data.draw(values(atom), label="first apply")
    try:
        live, managers = updater.apply(None, first, VERSION, {}, "alice", atom, force=True)
        if live is updater.UNCHANGED:
            live = first
        other = data.draw(combined(atom, live, data.draw(values(atom))), label="update")
        live, managers = updater.update(live, other, VERSION, managers, "bob", atom)
        how = data.draw(st.sampled_from(["superset", "same fields", "subset"]))
        if how == "superset":
            again = data.draw(combined(atom, first, data.draw(values(atom))), label="again")
            again = data.draw(combined(atom, again, first), label="again, with the first")
        elif how == "same fields":
            again = data.draw(values(atom), label="again")
        else:
            again = data.draw(pruned(atom, first), label="again")
        keeps = field_set(first, atom).difference(field_set(again, atom)).is_empty()
        skipping, pruning = _both_ways(live, again, managers, atom)
    except (TypedValueError, updater.ConflictsError):
        event("refused")
        return
    event(f"{how}: {'keeps every field' if keeps else 'leaves some out'}")
    _same(skipping, pruning, live)


def test_a_reapply_with_new_values_keeps_the_other_managers_fields() -> None:
    atom = struct(kind=STRING, data=map_of(STRING))
    live, managers = updater.update(
        None, {"kind": "K", "data": {"k": "0", "pad": "x"}}, VERSION, {}, "creator", atom
    )
    config = {"kind": "K", "data": {"applied": "1"}}
    live, managers = updater.apply(live, config, VERSION, managers, "alice", atom, force=True)
    config = {"kind": "K", "data": {"applied": "2"}}
    with mock.patch.object(updater, "_prune", wraps=updater._prune) as prune:
        skipping, pruning = _both_ways(live, config, managers, atom)
    assert prune.call_count == 1  # only the forced apply pruned
    _same(skipping, pruning, live)
    assert skipping[0] == {"kind": "K", "data": {"k": "0", "pad": "x", "applied": "2"}}


@pytest.mark.parametrize(
    ("last", "now", "keeps"),
    [
        ({"kind": "K", "data": {"a": "1"}}, {"kind": "K", "data": {"a": "2", "b": "1"}}, True),
        ({"kind": "K", "data": {"a": "1", "b": "1"}}, {"kind": "K", "data": {"a": "2"}}, False),
    ],
)
def test_keeping_every_field_is_judged_by_path(last: Any, now: Any, keeps: bool) -> None:
    atom = struct(kind=STRING, data=map_of(STRING))
    previous = VersionedSet(field_set(last, atom), VERSION, True)
    assert updater._keeps_every_field(previous, field_set(now, atom), VERSION) is keeps
    assert not updater._keeps_every_field(previous, field_set(now, atom), "v2")
