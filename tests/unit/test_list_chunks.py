"""A list body in pieces (``ScanResult.chunks``, ``ListResult.chunks``): the pieces
concatenate to exactly the body rendered at once, each is cut where the renderer says
(items while under the target, at least one), ``done`` tells the end without a
StopIteration, the engine's and the Python pieces of the same page are the same bytes, and
the pieces keep their scan result alive exactly until the last one is out."""

from __future__ import annotations

import gc
import json

import pytest

from watchcache import _core
from watchcache.cache.backing_store import BodyChunks, ListResult

META = b'{"resourceVersion":"42"}'


def tree_of(values: list[bytes]) -> _core.Tree:
    return _core.Tree.from_sorted((f"/registry/x/k{i:05d}", v) for i, v in enumerate(values))


def pieces_of(chunks: BodyChunks) -> list[bytes]:
    """Every piece, ended by ``done`` (as the apiserver reads them)."""
    out: list[bytes] = []
    while not chunks.done:
        out.append(next(chunks))
    return out


VALUES = [
    [],
    [b'{"a":1}'],
    [b'{"i":%d,"pad":"%s"}' % (i, b"x" * (i * 37 % 300)) for i in range(200)],
    [b"", b'{"b":2}', b""],  # empty values render as null
]


@pytest.mark.parametrize("values", VALUES, ids=["empty", "one", "many", "nulls"])
@pytest.mark.parametrize("chunk_bytes", [1, 2, 60, 100, 1000, 4096, 1 << 30])
def test_the_pieces_concatenate_to_the_body(values: list[bytes], chunk_bytes: int) -> None:
    scan = tree_of(values).snapshot().scan()
    whole = scan.render("PodList", "v1", META)
    pieces = pieces_of(scan.chunks("PodList", "v1", META, chunk_bytes))
    assert b"".join(pieces) == whole
    assert len(pieces) >= 1
    # Each piece holds at least one item (one piece for an empty list), and is under the
    # target before its last item: it passes the target by at most that item.
    assert len(pieces) <= max(len(values), 1)
    items = list(scan)
    head = whole[: whole.index(b'"items":[') + len(b'"items":[')]
    taken = 0
    for number, piece in enumerate(pieces):
        rest = piece
        size = 0  # what the renderer counts: the head, the items and their commas
        if number == 0:
            assert rest.startswith(head)
            rest = rest[len(head) :]
            size = len(head)
        if number == len(pieces) - 1:
            assert rest.endswith(b"]}")
            rest = rest[:-2]
        sizes = []
        while rest:
            value = items[taken].value or b"null"
            comma = 1 if taken > 0 else 0
            assert rest[:comma] == b"," * comma and rest[comma:].startswith(value)
            rest = rest[comma + len(value) :]
            sizes.append(comma + len(value))
            taken += 1
        assert sizes or not values, "a piece holds at least one item"
        assert size + sum(sizes[:-1]) < chunk_bytes or len(sizes) <= 1, "cut once past the target"
    assert taken == len(values)
    assert json.loads(whole)["metadata"] == {"resourceVersion": "42"}


def test_done_ends_the_pieces_and_next_then_stops() -> None:
    scan = tree_of([b'{"a":%d}' % i for i in range(10)]).snapshot().scan()
    assert not scan.chunks("L", "v1", b"{}", 30).done
    chunks = scan.chunks("L", "v1", b"{}", 30)
    assert iter(chunks) is chunks
    pieces = pieces_of(chunks)
    assert chunks.done
    with pytest.raises(StopIteration):
        next(chunks)
    assert b"".join(pieces) == scan.render("L", "v1")
    assert list(scan.chunks("L", "v1", b"{}", 30)) == pieces, "the iterator protocol agrees"


def test_the_engine_and_python_cut_the_same_pieces() -> None:
    values = [b'{"i":%d,"pad":"%s"}' % (i, b"y" * (i * 53 % 700)) for i in range(300)]
    scan = tree_of(values).snapshot().scan()
    native = ListResult(scan, 42, continue_token="abc", remaining_item_count=7)
    joined = ListResult(list(scan), 42, continue_token="abc", remaining_item_count=7)
    for chunk_bytes in (1, 500, 2000, 1 << 20):
        engine_pieces = pieces_of(native.chunks("ConfigMapList", "v1", chunk_bytes))
        python_pieces = pieces_of(joined.chunks("ConfigMapList", "v1", chunk_bytes))
        assert engine_pieces == python_pieces, chunk_bytes
        assert b"".join(python_pieces) == joined.render("ConfigMapList", "v1")
        assert b"".join(engine_pieces) == native.render("ConfigMapList", "v1")
    empty = ListResult([], 3)
    assert pieces_of(empty.chunks("L", "v1", 10)) == [empty.render("L", "v1")]


def test_the_pieces_hold_the_scan_result_until_the_last_one() -> None:
    gc.collect()
    before = _core.live_counters()
    tree = tree_of([b'{"v":"%s"}' % (b"z" * 1000) for _ in range(500)])
    chunks = tree.snapshot().scan().chunks("L", "v1", b"{}", 64 * 1024)
    first = next(chunks)
    tree.clear()  # every item now lives on only through the scan's snapshot
    del tree
    gc.collect()
    held = _core.live_counters()
    assert held["items"] - before["items"] == 500, "the unsent pieces keep the page alive"
    rest = pieces_of(chunks)
    assert first.startswith(b'{"kind":"L"') and rest[-1].endswith(b"]}")
    gc.collect()
    assert _core.live_counters() == before, "the last piece let the page go"
    del chunks
    gc.collect()
    assert _core.live_counters() == before


def test_dropping_the_pieces_unsent_lets_the_page_go() -> None:
    gc.collect()
    before = _core.live_counters()
    tree = tree_of([b'{"v":1}'] * 100)
    chunks = tree.snapshot().scan().chunks("L", "v1", b"{}", 10)
    next(chunks)
    del tree
    gc.collect()
    assert _core.live_counters()["items"] > before["items"]
    del chunks
    gc.collect()
    assert _core.live_counters() == before


def test_bad_arguments_are_refused() -> None:
    scan = tree_of([b"{}"]).snapshot().scan()
    with pytest.raises(ValueError, match="chunk_bytes must be positive"):
        scan.chunks("L", "v1", b"{}", 0)
    with pytest.raises(ValueError, match="must not be negative"):
        scan.chunks("L", "v1", b"{}", -1)
    with pytest.raises(TypeError, match="metadata must be bytes"):
        scan.chunks("L", "v1", "{}")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="kind must be str"):
        scan.chunks(b"L", "v1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="chunk_bytes must be int"):
        scan.chunks("L", "v1", b"{}", 1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chunk_bytes must be positive"):
        ListResult([], 1).chunks("L", "v1", 0)
