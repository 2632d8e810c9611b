"""State-machine tests: Tree and its Snapshots against a dict model; SnapshotRegistry against a
dict model.

The tree machine writes through every write path (put, ``t[k] = v``, put_item, put_many with
pairs / triples / Items / generators, erase, ``del``, pop, erase_many, clear, bulk loads) with
keys from a tiny alphabet (so keys collide, share prefixes and sort across multi-byte UTF-8)
plus bursts of hundreds of sequential keys inserted and erased at once (so leaves split, borrow
and merge and the tree grows and shrinks by whole levels). It keeps every snapshot it takes
next to a frozen copy of the model, as immer's fuzzer keeps many versions alive, so every write
runs against shared nodes; any copy-on-write slip shows up as an old snapshot that changed.
After every step the tree equals the model and ``check_invariants()`` holds on the tree and on
one live snapshot; at teardown every snapshot still equals its frozen copy.

The read rules check scan / count / irange / cursor / get on the tree or any live snapshot
against sorted slices of the corresponding model.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import pytest
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from watchcache import _core

ReadView = _core.Tree | _core.Snapshot
Model = dict[str, tuple[bytes, int]]

# "é" is two bytes in UTF-8 (0xC3 0xA9): a comparator on signed chars sorts it before "a".
ALPHABET = "ab/é"
KEYS = st.text(alphabet=ALPHABET, min_size=1, max_size=4)
SEQ_LIMIT = 3_000


def seq_key(i: int) -> str:
    """Sequential keys live under "a/", between the alphabet's "a/" and "a/a" keys."""
    return f"a/{i:05d}"


VALUES = st.binary(max_size=12)
REVISIONS = st.integers(min_value=0, max_value=2**40)
ANY_KEY = st.one_of(KEYS, st.integers(0, SEQ_LIMIT).map(seq_key))
BOUNDS = st.one_of(st.none(), ANY_KEY)
PREFIXES = st.one_of(
    st.text(alphabet=ALPHABET, max_size=3), st.sampled_from(["a/0", "a/00", "a/001", "a/0001"])
)
# Largest burst: enough keys for three levels of nodes at the compiled fan-out.
BURST_MAX = min(_core.FANOUT**2 + _core.FANOUT + 1, 1_200)
# Starting sizes around node-capacity boundaries: one leaf, one level full, a third level.
START_SIZES = sorted(
    {
        min(n, SEQ_LIMIT)
        for n in (
            0,
            1,
            _core.FANOUT - 1,
            _core.FANOUT,
            _core.FANOUT + 1,
            _core.FANOUT**2,
            _core.FANOUT**2 + 1,
            2 * _core.FANOUT**2 + _core.FANOUT,
        )
    }
)


@dataclass
class Frozen:
    """A snapshot and the model as it was when the snapshot was taken."""

    snapshot: _core.Snapshot
    model: Model
    keys: list[str]

    @property
    def items(self) -> list[tuple[str, bytes]]:
        return [(k, self.model[k][0]) for k in self.keys]


@dataclass
class View:
    reader: ReadView
    model: Model
    keys: list[str]
    name: str


def prefix_range(
    keys: list[str], prefix: str, start_at: str | None, start_after: str | None
) -> list[str]:
    """Keys that start with prefix and lie at/after the start key, in order."""
    lo = bisect.bisect_left(keys, prefix)
    if start_at is not None:
        lo = max(lo, bisect.bisect_left(keys, start_at))
    if start_after is not None:
        lo = max(lo, bisect.bisect_right(keys, start_after))
    out: list[str] = []
    for k in keys[lo:]:  # all >= prefix, so the prefixed keys come first and together
        if not k.startswith(prefix):
            break
        out.append(k)
    return out


def in_bounds(k: str, lo: str | None, hi: str | None, inclusive: tuple[bool, bool]) -> bool:
    if lo is not None and not (k > lo or (inclusive[0] and k == lo)):
        return False
    return hi is None or k < hi or (inclusive[1] and k == hi)


class TreeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tree = _core.Tree()
        self.model: Model = {}
        self.frozen: list[Frozen] = []
        self.last_snapshot: Frozen | None = None
        self.steps = 0

    # ---- helpers -------------------------------------------------------------------------

    def sorted_keys(self) -> list[str]:
        return sorted(self.model)

    def key_strategy(self) -> st.SearchStrategy[str]:
        """Keys that are present about half of the time (when any is)."""
        if not self.model:
            return ANY_KEY
        return st.one_of(ANY_KEY, st.sampled_from(self.sorted_keys()))

    def draw_view(self, data: st.DataObject) -> View:
        index = data.draw(st.integers(0, len(self.frozen)), label="view (0 = live tree)")
        if index == 0:
            return View(self.tree, self.model, self.sorted_keys(), "tree")
        f = self.frozen[index - 1]
        return View(f.snapshot, f.model, f.keys, f"snapshot #{index - 1} v{f.snapshot.version}")

    def replace_tree(self, tree: _core.Tree, model: Model) -> None:
        self.tree = tree
        self.model = model
        self.last_snapshot = None  # versions are per tree

    # ---- writes --------------------------------------------------------------------------

    @initialize(
        size=st.sampled_from(START_SIZES),
        how=st.sampled_from(["from_sorted", "put_many", "tree_init"]),
    )
    def start(self, size: int, how: str) -> None:
        """Start empty or with a tree of sequential keys at a node-capacity boundary."""
        entries = [(seq_key(i), seq_key(i).encode()) for i in range(size)]
        if how == "from_sorted":
            self.tree = _core.Tree.from_sorted(entries)
        elif how == "put_many":
            self.tree.put_many(entries)
        else:
            self.tree = _core.Tree(entries)
        self.model = {k: (v, 0) for k, v in entries}

    @rule(
        key=KEYS,
        value=VALUES,
        revision=REVISIONS,
        how=st.sampled_from(["put", "setitem", "put_item", "put_bytearray", "put_memoryview"]),
    )
    def put(self, key: str, value: bytes, revision: int, how: str) -> None:
        if how == "setitem":
            self.tree[key] = value
            revision = 0
        elif how == "put_item":
            self.tree.put_item(_core.Item(key, value, revision))
        elif how == "put_bytearray":
            buf = bytearray(value)
            self.tree.put(key, buf, revision)
            buf[:] = b"\xff" * (len(buf) + 1)  # the tree must have copied the bytes
        elif how == "put_memoryview":
            self.tree.put(key, memoryview(b"<" + value + b">")[1:-1], revision)
        else:
            self.tree.put(key, value, revision)
        self.model[key] = (value, revision)

    @rule(
        entries=st.lists(st.tuples(KEYS, VALUES, REVISIONS), max_size=40),
        kind=st.sampled_from(["pairs", "triples", "items", "generator"]),
    )
    def put_many(self, entries: list[tuple[str, bytes, int]], kind: str) -> None:
        # Repeated keys: the last entry wins, as with dict.update.
        if kind == "pairs":
            self.tree.put_many([(k, v) for k, v, _ in entries])
        elif kind == "triples":
            self.tree.put_many(entries)
        elif kind == "items":
            self.tree.put_many([_core.Item(k, v, r) for k, v, r in entries])
        else:
            self.tree.put_many((k, v) for k, v, _ in entries)
        for k, v, r in entries:
            self.model[k] = (v, r if kind in ("triples", "items") else 0)

    @rule(data=st.data(), how=st.sampled_from(["erase", "delitem", "pop"]))
    def erase(self, data: st.DataObject, how: str) -> None:
        key = data.draw(self.key_strategy(), label="key")
        present = key in self.model
        if how == "erase":
            assert self.tree.erase(key) is present
        elif how == "pop":
            expected = self.model[key][0] if present else b"<default>"
            assert self.tree.pop(key, b"<default>") == expected
        elif present:
            del self.tree[key]
        else:
            with pytest.raises(KeyError):
                del self.tree[key]
        self.model.pop(key, None)

    @rule(data=st.data())
    def erase_many(self, data: st.DataObject) -> None:
        keys = data.draw(st.lists(self.key_strategy(), max_size=30), label="keys")
        expected = len({k for k in keys if k in self.model})
        assert self.tree.erase_many(keys) == expected
        for k in keys:
            self.model.pop(k, None)

    @rule()
    def clear(self) -> None:
        self.tree.clear()
        self.model.clear()

    @rule(
        start=st.integers(0, SEQ_LIMIT - BURST_MAX),
        count=st.integers(2 * _core.FANOUT, BURST_MAX),
        step=st.sampled_from([1, 1, 2, 3]),
        descending=st.booleans(),
        batched=st.booleans(),
    )
    def insert_sequential_burst(
        self, start: int, count: int, step: int, descending: bool, batched: bool
    ) -> None:
        """Hundreds of adjacent keys at once: repeated splits up to a new root level."""
        numbers = range(start, start + count * step, step)
        keys = [seq_key(i) for i in (reversed(numbers) if descending else numbers)]
        entries = [(k, k.encode()) for k in keys]
        if batched:
            self.tree.put_many(entries)
        else:
            for k, v in entries:
                self.tree[k] = v
        for k, v in entries:
            self.model[k] = (v, 0)

    @precondition(lambda self: len(self.model) > 0)
    @rule(data=st.data(), stride=st.sampled_from([1, 1, 2, 3]))
    def erase_key_run(self, data: st.DataObject, stride: int) -> None:
        """Erase a run of adjacent keys (stride 1: whole leaves merge away; stride 2 or 3:
        every leaf thins out and borrows from or merges with its siblings)."""
        keys = self.sorted_keys()
        lo = data.draw(st.integers(0, len(keys) - 1), label="run start")
        hi = data.draw(st.integers(lo + 1, len(keys)), label="run end")
        doomed = keys[lo:hi:stride]
        assert self.tree.erase_many(doomed) == len(doomed)
        for k in doomed:
            del self.model[k]

    # ---- snapshots and rebuilds --------------------------------------------------------------

    @rule()
    def snapshot(self) -> None:
        snap = self.tree.snapshot()
        if self.last_snapshot is not None:
            previous = self.last_snapshot.snapshot.version
            if self.model != self.last_snapshot.model:
                assert snap.version > previous, "a write must advance the tree version"
            else:
                assert snap.version >= previous
        frozen = Frozen(snap, dict(self.model), self.sorted_keys())
        self.frozen.append(frozen)
        self.last_snapshot = frozen
        note(f"snapshot #{len(self.frozen) - 1} at version {snap.version}, {len(self.model)} keys")

    @precondition(lambda self: len(self.frozen) > 0)
    @rule(data=st.data(), collect=st.booleans())
    def drop_snapshot(self, data: st.DataObject, collect: bool) -> None:
        index = data.draw(st.integers(0, len(self.frozen) - 1), label="drop")
        dropped = self.frozen.pop(index)
        if self.last_snapshot is dropped:
            self.last_snapshot = None
        del dropped
        if collect:
            assert self.tree.collect() >= 0

    @rule(
        how=st.sampled_from(
            ["from_sorted_pairs", "from_sorted_items", "init_pairs", "init_mapping"]
        ),
        data=st.data(),
    )
    def rebuild(self, how: str, data: st.DataObject) -> None:
        """Replace the tree by a bulk-built copy; snapshots of the old tree must live on."""
        keys = self.sorted_keys()
        if how == "from_sorted_pairs":
            tree = _core.Tree.from_sorted([(k, self.model[k][0]) for k in keys])
            model = {k: (v, 0) for k, (v, _) in self.model.items()}
        elif how == "from_sorted_items":
            tree = _core.Tree.from_sorted(iter(self.tree.snapshot().scan()))
            model = dict(self.model)
        elif how == "init_pairs":
            pairs = [(k, self.model[k][0]) for k in keys]
            data.draw(st.randoms(use_true_random=False), label="shuffle").shuffle(pairs)
            tree = _core.Tree(pairs)
            model = {k: (v, 0) for k, (v, _) in self.model.items()}
        else:
            tree = _core.Tree({k: v for k, (v, _) in self.model.items()})
            model = {k: (v, 0) for k, (v, _) in self.model.items()}
        self.replace_tree(tree, model)

    @precondition(lambda self: len(self.frozen) > 0)
    @rule(data=st.data())
    def restore_from_snapshot(self, data: st.DataObject) -> None:
        """Continue writing from an old version, whose items are still shared with others."""
        f = self.frozen[data.draw(st.integers(0, len(self.frozen) - 1), label="restore")]
        self.replace_tree(_core.Tree.from_sorted(f.snapshot.scan()), dict(f.model))

    # ---- reads on the tree or any live snapshot ----------------------------------------------

    @rule(
        data=st.data(),
        prefix=PREFIXES,
        start=st.one_of(
            st.none(), st.tuples(st.sampled_from(["start_at", "start_after"]), ANY_KEY)
        ),
        limit=st.integers(0, 3 * _core.FANOUT),
    )
    def scan(
        self, data: st.DataObject, prefix: str, start: tuple[str, str] | None, limit: int
    ) -> None:
        view = self.draw_view(data)
        start_at = start[1] if start is not None and start[0] == "start_at" else None
        start_after = start[1] if start is not None and start[0] == "start_after" else None
        result = view.reader.scan(prefix, start_at=start_at, start_after=start_after, limit=limit)
        in_range = prefix_range(view.keys, prefix, start_at, start_after)
        returned = in_range[:limit] if limit else in_range
        after = in_range[len(returned) :]
        note(f"{view.name}: scan({prefix!r}, {start}, limit={limit}) expects {returned}")

        assert result.keys() == returned
        assert len(result) == len(returned)
        assert result.values() == [view.model[k][0] for k in returned]
        assert result.items() == [(k, view.model[k][0]) for k in returned]
        assert [item.key for item in result] == returned
        if returned:
            last = result[len(returned) - 1]
            assert (last.key, last.value, last.mod_revision) == (
                returned[-1],
                *view.model[returned[-1]],
            )
        assert result.last_key == (returned[-1] if returned else None)
        assert result.next_key == (returned[-1] + "\0" if returned and after else None)
        assert result.remaining == len(after)
        assert len(returned) <= result.scanned <= len(in_range)

    @rule(data=st.data(), prefix=PREFIXES, limit=st.integers(1, 2 * _core.FANOUT))
    def paginate(self, data: st.DataObject, prefix: str, limit: int) -> None:
        """Following next_key page by page visits every key under the prefix exactly once."""
        view = self.draw_view(data)
        expected = prefix_range(view.keys, prefix, None, None)
        seen: list[str] = []
        start_at: str | None = None
        for _ in range(len(expected) + 1):
            page = view.reader.scan(prefix, start_at=start_at, limit=limit)
            seen.extend(page.keys())
            assert page.remaining == len(expected) - len(seen)
            if page.next_key is None:
                break
            start_at = page.next_key
        assert seen == expected

    @rule(data=st.data(), lo=BOUNDS, hi=BOUNDS, prefix=PREFIXES)
    def count(self, data: st.DataObject, lo: str | None, hi: str | None, prefix: str) -> None:
        view = self.draw_view(data)
        keys = view.keys
        expected = sum(1 for k in keys if (lo is None or k >= lo) and (hi is None or k < hi))
        assert view.reader.count(lo, hi) == expected, f"{view.name}: count({lo!r}, {hi!r})"
        assert view.reader.count() == len(keys)
        assert view.reader.count_prefix(prefix) == sum(1 for k in keys if k.startswith(prefix))

    @rule(
        data=st.data(),
        lo=BOUNDS,
        hi=BOUNDS,
        inclusive=st.tuples(st.booleans(), st.booleans()),
        reverse=st.booleans(),
    )
    def irange(
        self,
        data: st.DataObject,
        lo: str | None,
        hi: str | None,
        inclusive: tuple[bool, bool],
        reverse: bool,
    ) -> None:
        view = self.draw_view(data)
        expected = [k for k in view.keys if in_bounds(k, lo, hi, inclusive)]
        if reverse:
            expected.reverse()
        got = list(view.reader.irange(lo, hi, inclusive=inclusive, reverse=reverse))
        assert got == expected, f"{view.name}: irange({lo!r}, {hi!r}, {inclusive}, {reverse})"
        items = list(view.reader.irange_items(lo=lo, hi=hi, inclusive=inclusive, reverse=reverse))
        assert items == [(k, view.model[k][0]) for k in expected]

    @rule(
        data=st.data(),
        seek=st.sampled_from(["seek", "seek_after", "seek_first", "seek_last"]),
        seek_key=ANY_KEY,
        moves=st.lists(st.booleans(), max_size=3 * _core.FANOUT),
    )
    def cursor_walk(self, data: st.DataObject, seek: str, seek_key: str, moves: list[bool]) -> None:
        """Seek, then step forward (True) or back (False) and compare with the sorted keys."""
        view = self.draw_view(data)
        keys = view.keys
        cursor = view.reader.cursor()
        unpositioned = not cursor.valid
        assert unpositioned, "a new cursor starts invalid"
        if seek == "seek":
            pos, ok = bisect.bisect_left(keys, seek_key), cursor.seek(seek_key)
        elif seek == "seek_after":
            pos, ok = bisect.bisect_right(keys, seek_key), cursor.seek_after(seek_key)
        elif seek == "seek_first":
            pos, ok = 0, cursor.seek_first()
        else:
            pos, ok = len(keys) - 1, cursor.seek_last()
        for forward in [*moves, None]:
            valid = 0 <= pos < len(keys)
            assert ok == valid and cursor.valid == valid, (
                f"{view.name}: {seek}({seek_key!r}) at {pos}"
            )
            if not valid:
                with pytest.raises(KeyError):
                    _ = cursor.key
                break
            key = keys[pos]
            assert cursor.key == key
            assert cursor.value == view.model[key][0]
            item = cursor.item
            assert (item.key, item.value, item.mod_revision) == (key, *view.model[key])
            if forward is None:
                break
            pos, ok = (pos + 1, cursor.next()) if forward else (pos - 1, cursor.prev())

    @rule(data=st.data())
    def point_reads(self, data: st.DataObject) -> None:
        view = self.draw_view(data)
        keys = data.draw(st.lists(self.key_strategy(), max_size=20), label="keys")
        assert view.reader.get_many(keys) == [
            view.model[k][0] if k in view.model else None for k in keys
        ]
        for key in keys:
            assert (key in view.reader) is (key in view.model)
            assert view.reader.get(key) == (view.model[key][0] if key in view.model else None)
            assert view.reader.get(key, b"<d>") == (
                view.model[key][0] if key in view.model else b"<d>"
            )
            item = view.reader.get_item(key)
            if key in view.model:
                assert view.reader[key] == view.model[key][0]
                assert item is not None
                assert (item.key, item.value, item.mod_revision) == (key, *view.model[key])
            else:
                assert item is None
                with pytest.raises(KeyError):
                    view.reader[key]

    @rule(data=st.data())
    def whole_view_reads(self, data: st.DataObject) -> None:
        view = self.draw_view(data)
        assert list(reversed(view.reader)) == view.keys[::-1]
        assert view.reader.items() == [(k, view.model[k][0]) for k in view.keys]
        assert view.reader.scan().keys() == view.keys

    # ---- invariants ------------------------------------------------------------------------

    @invariant()
    def tree_equals_model(self) -> None:
        self.steps += 1
        keys = self.sorted_keys()
        assert len(self.tree) == len(keys)
        assert self.tree.keys() == keys
        assert self.tree.values() == [self.model[k][0] for k in keys]
        assert list(self.tree) == keys
        self.tree.check_invariants()

    @invariant()
    def one_live_snapshot_is_intact(self) -> None:
        if not self.frozen:
            return
        f = self.frozen[self.steps % len(self.frozen)]
        f.snapshot.check_invariants()
        assert len(f.snapshot) == len(f.keys)
        assert f.snapshot.items() == f.items

    def teardown(self) -> None:
        for i, f in enumerate(self.frozen):
            f.snapshot.check_invariants()
            assert f.snapshot.items() == f.items, f"snapshot #{i} (v{f.snapshot.version}) changed"


TestTreeAgainstDictModel = TreeMachine.TestCase


class RegistryMachine(RuleBasedStateMachine):
    """SnapshotRegistry (no budget) against a dict rv -> snapshot version.

    Every stored snapshot froze a tree whose "rv" key holds its own resource version, so a
    lookup that returns the wrong snapshot is caught by content, not only by version.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tree = _core.Tree()
        self.registry = _core.SnapshotRegistry()
        self.model: dict[int, int] = {}
        self.highest_ever = 0

    def expect(self, rv: int, snapshot: _core.Snapshot | None) -> None:
        assert snapshot is not None, f"rv {rv} should be stored"
        assert snapshot.version == self.model[rv]
        assert snapshot["rv"] == str(rv).encode()

    def expect_pair(self, pair: tuple[int, _core.Snapshot] | None, rv: int | None) -> None:
        if rv is None:
            assert pair is None
            return
        assert pair is not None, f"expected rv {rv}"
        assert pair[0] == rv
        self.expect(rv, pair[1])

    @rule(gap=st.integers(1, 5), drop_local=st.booleans())
    def add(self, gap: int, drop_local: bool) -> None:
        rv = self.highest_ever + gap
        self.tree["rv"] = str(rv).encode()
        self.tree[f"k{rv % 7}"] = b"x" * (rv % 5)
        snap = self.tree.snapshot()
        self.registry.add(rv, snap)
        self.model[rv] = snap.version
        self.highest_ever = rv
        if drop_local:
            del snap  # the registry alone keeps it alive

    @rule(data=st.data())
    def add_rejects_decreasing(self, data: st.DataObject) -> None:
        top = max(self.model, default=0)
        rv = data.draw(st.integers(-3, max(top - 1, 0)), label="rv")
        with pytest.raises(ValueError):
            self.registry.add(rv, self.tree.snapshot())

    @precondition(lambda self: bool(self.model))
    @rule()
    def add_at_newest_replaces(self) -> None:
        # Another key of the same etcd transaction: same rv, later state.
        rv = max(self.model)
        self.tree[f"same-txn-{rv}"] = b"y"
        snap = self.tree.snapshot()
        self.registry.add(rv, snap)
        self.model[rv] = snap.version

    @rule(data=st.data())
    def get(self, data: st.DataObject) -> None:
        rv = data.draw(st.integers(1, self.highest_ever + 2), label="rv")
        got = self.registry.get(rv)
        if rv in self.model:
            self.expect(rv, got)
        else:
            assert got is None
        assert (rv in self.registry) is (rv in self.model)

    @rule(data=st.data())
    def floor(self, data: st.DataObject) -> None:
        rv = data.draw(st.integers(0, self.highest_ever + 2), label="rv")
        wanted = max((r for r in self.model if r <= rv), default=None)
        self.expect_pair(self.registry.floor(rv), wanted)
        assert self.registry.floor_resource_version(rv) == wanted

    @rule()
    def latest_and_oldest(self) -> None:
        self.expect_pair(self.registry.latest(), max(self.model, default=None))
        self.expect_pair(self.registry.oldest(), min(self.model, default=None))

    @rule(data=st.data())
    def prune_below(self, data: st.DataObject) -> None:
        rv = data.draw(st.integers(0, self.highest_ever + 2), label="rv")
        doomed = [r for r in self.model if r < rv]
        assert self.registry.prune_below(rv) == len(doomed)
        for r in doomed:
            del self.model[r]

    @rule()
    def clear(self) -> None:
        self.registry.clear()
        self.model.clear()

    @rule(writes=st.integers(1, 20))
    def write_on(self, writes: int) -> None:
        for i in range(writes):
            self.tree[f"w{i}"] = bytes(i)

    @invariant()
    def registry_equals_model(self) -> None:
        rvs = sorted(self.model)
        assert len(self.registry) == len(rvs)
        assert self.registry.size() == len(rvs)
        assert self.registry.resource_versions() == rvs
        assert self.registry.evicted == 0
        assert self.registry.pinned_bytes() >= 0
        usage = self.registry.usage()
        assert sorted(u.resource_version for u in usage) == rvs
        for u in usage:
            assert u.exclusive_bytes >= 0
            assert u.shared_bytes >= 0


TestSnapshotRegistryAgainstDictModel = RegistryMachine.TestCase
