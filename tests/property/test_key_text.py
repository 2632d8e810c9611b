"""Property test: a key comes back from the engine as the str it went in as, whichever way
the binding hands keys back (an Item, a page's keys or items, iteration, ranges), for any
Unicode text of any length: the ASCII fast path (new_text_str) and the UTF-8 decoder must agree."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from watchcache import _core

# Lengths around 8 cross the word-at-a-time ASCII check; one non-ASCII code point anywhere
# must send the key to the decoder. Keys are text UTF-8 can carry: a lone surrogate is not
# (the binding refuses it with UnicodeEncodeError, which test_tree checks).
KEYS = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=40),
    st.text(alphabet=st.characters(max_codepoint=127), min_size=1, max_size=40),
    st.tuples(
        st.text(alphabet=st.characters(max_codepoint=127), max_size=20),
        st.characters(min_codepoint=128, codec="utf-8"),
        st.text(alphabet=st.characters(max_codepoint=127), max_size=20),
    ).map("".join),
)


@given(keys=st.lists(KEYS, min_size=1, max_size=8, unique=True))
def test_keys_come_back_as_the_same_str(keys: list[str]) -> None:
    tree = _core.Tree()
    for key in keys:
        tree[key] = b"v"
    expected = sorted(keys, key=lambda k: k.encode())
    snap = tree.snapshot()
    assert [item.key for item in snap.scan()] == expected
    assert snap.scan().keys() == expected
    assert [k for k, _ in snap.scan().items()] == expected
    assert list(snap) == expected
    assert [k for k, _ in snap.irange_items()] == expected
    assert [_core.Item(key, b"v").key for key in keys] == keys
