"""State-machine test: a Tree's secondary indexes against a brute-force scan of a dict model, at
every version a live snapshot still holds.

The machine declares an index on the field ``spec.nodeName`` and one on the label ``app``
(and, at some point of some runs, one more on the label ``tier``), then writes through every
write path (put with maps, put_item, swap_item, put_many, erase, pop_item, ``del``,
erase_many, clear, bulk loads with indexes) with objects whose indexed values are kept,
changed, added or dropped, plus bursts of hundreds of sequential keys inserted and erased at
once (so index nodes split, borrow and merge and the index trees grow and shrink by levels).
It keeps every snapshot it takes next to a frozen copy of the model, so every write runs
against shared index nodes.

Oracle, per the stub of ``scan_index``: the items of the scanned range (prefix, start) whose
value is one of the asked values (a field index reads an absent field as ``""``; a label
index holds only items with the label) and which the selector accepts, in key order, the
first ``limit``; a page that filled its limit has ``next_key = last + "\\0"`` and
``remaining`` = the range's items after it (selector and index ignored) when any follows, as
``scan``; ``count_index`` counts the range's candidates. After every step the live tree's
``check_invariants()`` (index <-> tree agreement) holds and every retained version answers one
query per index like the brute force; the read rule checks random queries on any version.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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

NODE = ("field", "spec.nodeName")
APP = ("label", "app")
TIER = ("label", "tier")


@dataclass(frozen=True)
class Obj:
    """What the indexes see of an object: None is an absent field or label."""

    node: str | None
    app: str | None
    tier: str | None
    rev: int


Model = dict[str, Obj]

# "é" is two bytes in UTF-8: keys sort by bytes, and so must every index run.
KEYS = st.text(alphabet="ab/é", min_size=1, max_size=4)
SEQ_LIMIT = 3_000
NODES = st.one_of(st.none(), st.sampled_from(["", "n0", "n1", "n2", "ip-10-0-0-1", "ip-10-0-0-2"]))
APPS = st.one_of(st.none(), st.sampled_from(["", "a0", "a1", "a2"]))
TIERS = st.one_of(st.none(), st.sampled_from(["web", "db"]))
REVISIONS = st.integers(min_value=0, max_value=2**40)
PREFIXES = st.one_of(
    st.text(alphabet="ab/é", max_size=2), st.sampled_from(["s/0", "s/00", "s/001", "s/01"])
)
BURST_MAX = min(2 * _core.FANOUT**2, 800)


def seq_key(i: int) -> str:
    return f"s/{i:05d}"


ANY_KEY = st.one_of(KEYS, st.integers(0, SEQ_LIMIT).map(seq_key))


def make_item(key: str, obj: Obj) -> _core.Item:
    labels = {k: v for k, v in (("app", obj.app), ("tier", obj.tier)) if v is not None}
    fields = {"metadata.name": key}
    if obj.node is not None:
        fields["spec.nodeName"] = obj.node
    return _core.Item(key, obj.rev.to_bytes(6, "big"), obj.rev, labels, fields)


def value_of(obj: Obj, index: tuple[str, str]) -> str | None:
    """The object's value in an index; None when the index does not hold it."""
    if index == NODE:
        return obj.node if obj.node is not None else ""
    return obj.app if index == APP else obj.tier


def in_range(key: str, prefix: str, start_at: str | None, start_after: str | None) -> bool:
    if not key.startswith(prefix):
        return False
    if start_at is not None and start_at >= prefix and key < start_at:
        return False
    return not (start_after is not None and start_after >= prefix and key <= start_after)


@dataclass
class Query:
    index: tuple[str, str]
    values: list[str]
    prefix: str = ""
    start_at: str | None = None
    start_after: str | None = None
    limit: int = 0
    app_not: str | None = None  # a selector `app!=<it>` on the candidates


def in_key_order(model: Model) -> list[str]:
    return sorted(model, key=lambda k: k.encode())


def expected_page(
    model: Model, ordered: list[str], q: Query
) -> tuple[list[str], str | None, int, int]:
    """(keys, next_key, remaining, candidates) by brute force over the model, whose keys in
    byte order are ``ordered``."""
    ranged = q.prefix or q.start_at is not None or q.start_after is not None
    keys = (
        [k for k in ordered if in_range(k, q.prefix, q.start_at, q.start_after)]
        if ranged
        else ordered
    )
    candidates = [k for k in keys if value_of(model[k], q.index) in q.values]
    selected = [k for k in candidates if q.app_not is None or model[k].app != q.app_not]
    if q.limit and len(selected) >= q.limit:
        page = selected[: q.limit]
        after = len(keys) - keys.index(page[-1]) - 1
        next_key = page[-1] + "\0" if after else None
        return page, next_key, after, len(candidates)
    return selected, None, 0, len(candidates)


Page = tuple[list[str], str | None, int, int]


def check_query(
    reader: _core.Tree | _core.Snapshot,
    model: Model,
    ordered: list[str],
    q: Query,
    *,
    where: str,
    expected: Page | None = None,
) -> None:
    """``reader``'s answer to ``q`` against the brute force (or ``expected``, when the
    caller already has it for this frozen model)."""
    selector = None if q.app_not is None else _core.Selector([("app", "!=", [q.app_not])])
    got = reader.scan_index(
        q.index[0],
        q.index[1],
        q.values,
        prefix=q.prefix,
        start_at=q.start_at,
        start_after=q.start_after,
        limit=q.limit,
        selector=selector,
    )
    keys, next_key, remaining, candidates = expected or expected_page(model, ordered, q)
    note(f"{where}: {q} expects {keys}")
    assert got.keys() == keys, f"{where}: {q}"
    assert [item.mod_revision for item in got] == [model[k].rev for k in keys]
    assert got.next_key == next_key
    assert got.remaining == remaining
    assert len(keys) <= got.scanned <= candidates
    count = reader.count_index(
        q.index[0],
        q.index[1],
        q.values,
        prefix=q.prefix,
        start_at=q.start_at,
        start_after=q.start_after,
    )
    assert count == candidates, f"{where}: count_index {q}"


@dataclass
class Frozen:
    snapshot: _core.Snapshot
    model: Model
    indexes: list[tuple[str, str]]
    ordered: list[str]
    # The pages of the invariant's fixed queries, computed once: the model never changes.
    pages: dict[tuple[str, str], Page] = field(default_factory=dict)


class IndexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tree = _core.Tree(indexes=[NODE, APP])
        self.declared: list[tuple[str, str]] = [NODE, APP]
        self.model: Model = {}
        self.frozen: list[Frozen] = []
        self.steps = 0

    # ---- helpers -------------------------------------------------------------------------

    def key_strategy(self) -> st.SearchStrategy[str]:
        if not self.model:
            return ANY_KEY
        return st.one_of(ANY_KEY, st.sampled_from(sorted(self.model)))

    def obj_strategy(self, key: str | None = None) -> st.SearchStrategy[Obj]:
        """A new object, or one that keeps some of the current object's indexed values."""
        fresh = st.builds(Obj, NODES, APPS, TIERS, REVISIONS)
        if key is None or key not in self.model:
            return fresh
        old = self.model[key]
        kept = st.builds(
            Obj,
            st.one_of(st.just(old.node), NODES),
            st.one_of(st.just(old.app), APPS),
            st.one_of(st.just(old.tier), TIERS),
            REVISIONS,
        )
        return st.one_of(fresh, kept)

    def values_strategy(self, index: tuple[str, str]) -> st.SearchStrategy[list[str]]:
        pool = {NODE: ["", "n0", "n1", "n2", "ip-10-0-0-1", "ip-10-0-0-2", "none"]}.get(
            index, ["", "a0", "a1", "a2", "web", "db", "none"]
        )
        return st.lists(st.sampled_from(pool), min_size=1, max_size=3)

    def write(self, key: str, obj: Obj, how: str) -> None:
        item = make_item(key, obj)
        if how == "swap_item":
            previous = self.tree.swap_item(item)
            expected = self.model.get(key)
            assert (previous is None) == (expected is None)
            if previous is not None and expected is not None:
                assert previous.mod_revision == expected.rev
        elif how == "put":
            self.tree.put(key, item.value, obj.rev, item.labels, item.fields)
        else:
            self.tree.put_item(item)
        self.model[key] = obj

    # ---- writes --------------------------------------------------------------------------

    @initialize(size=st.sampled_from([0, 1, 40, 300, 1_000]), how=st.sampled_from(["put", "bulk"]))
    def start(self, size: int, how: str) -> None:
        objs = {
            seq_key(i): Obj(f"n{i % 3}", f"a{i % 2}" if i % 5 else None, None, i)
            for i in range(size)
        }
        if how == "bulk":
            items = [make_item(k, o) for k, o in sorted(objs.items())]
            self.tree = _core.Tree.from_sorted(items, indexes=[NODE, APP])
        else:
            self.tree.put_many([make_item(k, o) for k, o in objs.items()])
        self.model = dict(objs)

    @rule(data=st.data(), how=st.sampled_from(["put", "put_item", "swap_item"]))
    def put(self, data: st.DataObject, how: str) -> None:
        key = data.draw(self.key_strategy(), label="key")
        self.write(key, data.draw(self.obj_strategy(key), label="object"), how)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def move_between_values(self, data: st.DataObject) -> None:
        """Existing objects change their node or app: each moves between index runs."""
        keys = data.draw(
            st.lists(st.sampled_from(sorted(self.model)), min_size=1, max_size=20), label="keys"
        )
        node = data.draw(NODES, label="node")
        app = data.draw(APPS, label="app")
        for key in keys:
            old = self.model[key]
            self.write(key, Obj(node, app, old.tier, old.rev + 1), "put_item")

    @rule(data=st.data())
    def put_many(self, data: st.DataObject) -> None:
        keys = data.draw(st.lists(self.key_strategy(), max_size=30), label="keys")
        entries = [(k, data.draw(self.obj_strategy(k), label="object")) for k in keys]
        self.tree.put_many([make_item(k, o) for k, o in entries])
        for k, o in entries:  # the last of equal keys wins
            self.model[k] = o

    @rule(data=st.data(), how=st.sampled_from(["erase", "pop_item", "delitem"]))
    def erase(self, data: st.DataObject, how: str) -> None:
        key = data.draw(self.key_strategy(), label="key")
        present = key in self.model
        if how == "erase":
            assert self.tree.erase(key) is present
        elif how == "pop_item":
            gone = self.tree.pop_item(key)
            assert (gone is not None) is present
        elif present:
            del self.tree[key]
        self.model.pop(key, None)

    @rule(
        start=st.integers(0, SEQ_LIMIT - BURST_MAX),
        count=st.integers(2 * _core.FANOUT, BURST_MAX),
        node=NODES,
        apps=st.booleans(),
    )
    def insert_sequential_burst(self, start: int, count: int, node: str | None, apps: bool) -> None:
        """Hundreds of adjacent keys, most under one node: one run grows over many leaves."""
        batch = {
            seq_key(i): Obj(node if i % 4 else "n1", f"a{i % 3}" if apps else None, "web", i)
            for i in range(start, start + count)
        }
        self.tree.put_many([make_item(k, o) for k, o in batch.items()])
        self.model.update(batch)

    @precondition(lambda self: len(self.model) > 0)
    @rule(data=st.data(), stride=st.sampled_from([1, 1, 2, 3]))
    def erase_key_run(self, data: st.DataObject, stride: int) -> None:
        keys = in_key_order(self.model)
        lo = data.draw(st.integers(0, len(keys) - 1), label="run start")
        hi = data.draw(st.integers(lo + 1, len(keys)), label="run end")
        doomed = keys[lo:hi:stride]
        assert self.tree.erase_many(doomed) == len(doomed)
        for k in doomed:
            del self.model[k]

    @rule()
    def clear(self) -> None:
        self.tree.clear()
        self.model.clear()

    @rule()
    def rebuild(self) -> None:
        """A bulk-loaded copy with the same indexes; snapshots of the old tree live on."""
        items = [make_item(k, self.model[k]) for k in in_key_order(self.model)]
        self.tree = _core.Tree.from_sorted(items, indexes=self.declared)

    @precondition(lambda self: TIER not in self.declared)
    @rule()
    def declare_tier_index(self) -> None:
        """An index added to a populated tree: later snapshots carry it, earlier ones not."""
        self.tree.add_index(*TIER)
        self.declared.append(TIER)

    # ---- snapshots -----------------------------------------------------------------------

    @rule()
    def snapshot(self) -> None:
        snap = self.tree.snapshot()
        assert snap.indexes == self.declared
        model = dict(self.model)
        self.frozen.append(Frozen(snap, model, list(self.declared), in_key_order(model)))

    @precondition(lambda self: len(self.frozen) > 0)
    @rule(data=st.data(), collect=st.booleans())
    def drop_snapshot(self, data: st.DataObject, collect: bool) -> None:
        index = data.draw(st.integers(0, len(self.frozen) - 1), label="drop")
        del self.frozen[index]
        if collect:
            assert self.tree.collect() >= 0

    # ---- reads ---------------------------------------------------------------------------

    @rule(
        data=st.data(),
        prefix=PREFIXES,
        start=st.one_of(st.none(), st.tuples(st.sampled_from(["at", "after"]), ANY_KEY)),
        limit=st.integers(0, 2 * _core.FANOUT),
        app_not=st.one_of(st.none(), st.sampled_from(["a0", "a1"])),
    )
    def read(
        self,
        data: st.DataObject,
        prefix: str,
        start: tuple[str, str] | None,
        limit: int,
        app_not: str | None,
    ) -> None:
        which = data.draw(st.integers(0, len(self.frozen)), label="version (0 = live tree)")
        if which == 0:
            reader: _core.Tree | _core.Snapshot = self.tree
            model, indexes, where = self.model, self.declared, "tree"
            ordered = in_key_order(model)
        else:
            f = self.frozen[which - 1]
            reader, model, indexes, ordered = f.snapshot, f.model, f.indexes, f.ordered
            where = f"snapshot v{f.snapshot.version}"
        index = data.draw(st.sampled_from(indexes), label="index")
        q = Query(
            index,
            data.draw(self.values_strategy(index), label="values"),
            prefix,
            start[1] if start is not None and start[0] == "at" else None,
            start[1] if start is not None and start[0] == "after" else None,
            limit,
            app_not,
        )
        check_query(reader, model, ordered, q, where=where)

    @rule(data=st.data(), limit=st.integers(1, _core.FANOUT))
    def paginate(self, data: st.DataObject, limit: int) -> None:
        """Following next_key through an indexed read visits every matching key once."""
        which = data.draw(st.integers(0, len(self.frozen)), label="version (0 = live tree)")
        snap = self.tree.snapshot() if which == 0 else self.frozen[which - 1].snapshot
        model = self.model if which == 0 else self.frozen[which - 1].model
        values = data.draw(self.values_strategy(NODE), label="values")
        seen: list[str] = []
        start: str | None = None
        for _ in range(len(model) + 2):
            page = snap.scan_index(*NODE, values, start_at=start, limit=limit)
            seen.extend(page.keys())
            if page.next_key is None:
                break
            start = page.next_key
        want = [k for k in in_key_order(model) if value_of(model[k], NODE) in values]
        assert seen == want

    # ---- invariants ----------------------------------------------------------------------

    @invariant()
    def tree_agrees_with_its_indexes(self) -> None:
        self.steps += 1
        assert len(self.tree) == len(self.model)
        assert self.tree.indexes == self.declared
        self.tree.check_invariants()

    @staticmethod
    def fixed_query(index: tuple[str, str]) -> Query:
        values = ["n1", ""] if index == NODE else ["a1"] if index == APP else ["web"]
        return Query(index, values, limit=7)

    @invariant()
    def every_retained_version_answers_like_a_scan(self) -> None:
        """One query per index, on every version still alive, against its frozen model."""
        ordered = in_key_order(self.model)
        for index in self.declared:
            check_query(self.tree, self.model, ordered, self.fixed_query(index), where="tree")
        for f in self.frozen:
            for index in f.indexes:
                q = self.fixed_query(index)
                if index not in f.pages:
                    f.pages[index] = expected_page(f.model, f.ordered, q)
                where = f"snapshot v{f.snapshot.version}"
                check_query(f.snapshot, f.model, f.ordered, q, where=where, expected=f.pages[index])

    @invariant()
    def one_retained_snapshot_is_intact(self) -> None:
        if self.frozen:
            self.frozen[self.steps % len(self.frozen)].snapshot.check_invariants()

    def teardown(self) -> None:
        for f in self.frozen:
            f.snapshot.check_invariants()


TestIndexesAgainstBruteForce = IndexMachine.TestCase
