"""The Python face of the engine's secondary indexes (``_core.pyi``: ``add_index``,
``scan_index``, ``count_index``, ``indexes``): declarations, what each read returns on a small
known tree, errors for bad input, and pickling. Random behaviour against a brute-force model
is tests/property/test_index_stateful.py's."""

from __future__ import annotations

import pickle

import pytest

from watchcache import _core

NODE = ("field", "spec.nodeName")
APP = ("label", "app")


def pod(i: int, node: str | None, app: str | None) -> _core.Item:
    labels = {} if app is None else {"app": app}
    fields = {"metadata.name": f"p{i}"} | ({} if node is None else {"spec.nodeName": node})
    return _core.Item(f"/registry/pods/ns-{i % 3}/p{i:03d}", b"{}", i, labels, fields)


@pytest.fixture
def tree() -> _core.Tree:
    pods = [
        pod(i, f"node-{i % 4}" if i % 10 else None, f"a{i % 2}" if i % 7 else None)
        for i in range(60)
    ]
    return _core.Tree(pods, indexes=[NODE, APP])


def test_reads_return_the_matching_items_in_key_order(tree: _core.Tree) -> None:
    snap = tree.snapshot()
    items = list(snap.scan())

    def keys_where(node: set[str | None] | None = None, has_app: bool = False) -> list[str]:
        return [
            it.key
            for it in items
            if (node is None or it.fields.get("spec.nodeName") in node)
            and (not has_app or "app" in it.labels)
        ]

    on_node_1 = keys_where({"node-1"})
    assert snap.scan_index(*NODE, ["node-1"]).keys() == on_node_1
    assert snap.count_index(*NODE, ["node-1"]) == len(on_node_1)
    both = keys_where({"node-1", "node-2"})
    assert snap.scan_index(*NODE, ["node-2", "node-1", "node-2"]).keys() == both
    # Items without the field are under "" (as a field selector reads them).
    assert snap.scan_index(*NODE, [""]).keys() == keys_where({None})
    # A label index holds only the items that carry the label.
    assert snap.count_index(*APP, ["a0", "a1"]) == len(keys_where(has_app=True))


def test_a_page_continues_like_a_scan_with_the_same_selector(tree: _core.Tree) -> None:
    snap = tree.snapshot()
    page = snap.scan_index(*APP, ["a1"], prefix="/registry/pods/ns-1/", limit=3)
    same = snap.scan(
        "/registry/pods/ns-1/", limit=3, selector=_core.Selector([("app", "=", ["a1"])])
    )
    assert page.keys() == same.keys()
    assert (page.next_key, page.remaining) == (same.next_key, same.remaining)
    assert page.next_key is not None
    rest = snap.scan_index(*APP, ["a1"], prefix="/registry/pods/ns-1/", start_at=page.next_key)
    assert (
        rest.keys()
        == snap.scan(
            "/registry/pods/ns-1/",
            start_at=page.next_key,
            selector=_core.Selector([("app", "=", ["a1"])]),
        ).keys()
    )
    assert snap.count_index(
        *APP, ["a1"], prefix="/registry/pods/ns-1/", start_after=page.last_key
    ) == len(rest)


def test_old_snapshots_keep_their_version_of_the_index(tree: _core.Tree) -> None:
    before = tree.snapshot()
    key = before.scan_index(*NODE, ["node-1"], limit=1).keys()[0]
    tree.put_item(pod(int(key[-3:]), "node-9", "a0"))
    after = tree.snapshot()
    assert key in set(before.scan_index(*NODE, ["node-1"]).keys())
    assert key not in set(after.scan_index(*NODE, ["node-1"]).keys())
    assert after.scan_index(*NODE, ["node-9"]).keys() == [key]
    assert before.count_index(*NODE, ["node-9"]) == 0
    before.check_invariants()
    after.check_invariants()
    tree.check_invariants()


def test_declarations() -> None:
    t = _core.Tree()
    assert t.indexes == []
    assert t.snapshot().indexes == []
    t.put_item(pod(1, "n", "a"))
    t.add_index(*APP)
    early = t.snapshot()
    t.add_index(*NODE)
    assert t.indexes == [APP, NODE]
    assert early.indexes == [APP]
    assert t.snapshot().indexes == [APP, NODE]
    with pytest.raises(KeyError, match=r"no index on field spec\.nodeName"):
        early.scan_index(*NODE, ["n"])
    with pytest.raises(ValueError, match="already exists"):
        t.add_index(*APP)
    with pytest.raises(ValueError, match="must not be empty"):
        t.add_index("label", "")
    for i in range(6):
        t.add_index("label", f"l{i}")
    with pytest.raises(ValueError, match="at most 8"):
        t.add_index("label", "ninth")
    assert _core.Tree.from_sorted([pod(1, "n", None)], indexes=[NODE]).indexes == [NODE]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s: s.scan_index("annotation", "x", ["v"]), ValueError),
        (lambda s: s.scan_index(*NODE, "node-1"), TypeError),
        (lambda s: s.scan_index(*NODE, [1]), TypeError),
        (lambda s: s.scan_index(*NODE, ["n"], limit=-1), ValueError),
        (lambda s: s.scan_index(*NODE, ["n"], start_at="a", start_after="b"), ValueError),
        (lambda s: s.scan_index(*NODE, ["n"], selector="app=x"), TypeError),
        (lambda s: s.count_index(*APP, None), TypeError),
        (lambda s: s.count_index("label", "missing", ["v"]), KeyError),
    ],
)
def test_bad_input_raises_a_typed_error(
    tree: _core.Tree, call: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        call(tree.snapshot())  # type: ignore[operator]


@pytest.mark.parametrize(
    "indexes", [["field"], [("field",)], "field", [("field", 1)], [("x", "y")]]
)
def test_bad_declarations_raise_before_anything_is_built(indexes: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        _core.Tree([("/a", b"")], indexes=indexes)  # type: ignore[arg-type]


def test_a_pickled_snapshot_keeps_its_indexes(tree: _core.Tree) -> None:
    snap = tree.snapshot()
    copy = pickle.loads(pickle.dumps(snap))
    assert copy.indexes == snap.indexes
    assert copy.scan_index(*NODE, ["node-3"]).keys() == snap.scan_index(*NODE, ["node-3"]).keys()
    copy.check_invariants()
