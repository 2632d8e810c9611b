"""Label and field selector parsing, formatting and native matching.

The accepted/rejected tables are facts taken from Kubernetes' own selector tests
(apimachinery ``labels/selector_test.go``, ``fields/selector_test.go``) plus edge cases read
off its parser; expected positions are 0-based character offsets. Tests that build a native
``_core.Selector`` have ``native`` in their name (``-k "not native"`` skips them). The
matching table runs against both the native engine and a small Python oracle that lives
only here, so the table itself is checked too.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import NamedTuple, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchcache.wire.selectors import (
    FieldRequirement,
    LabelOp,
    LabelRequirement,
    SelectorError,
    compile_selector,
    format_field_selector,
    format_label_selector,
    parse_field_selector,
    parse_label_selector,
)

L = LabelRequirement
F = FieldRequirement

NAME_63 = "n" * 63
PREFIX_253 = ".".join(["p" * 63, "q" * 63, "r" * 63, "s" * 61])
assert len(PREFIX_253) == 253


# ---------------------------------------------------------------------------------------------
# Label selectors: accepted


ACCEPTED_LABEL_SELECTORS: list[tuple[str, tuple[LabelRequirement, ...]]] = [
    ("", ()),
    ("x=a,y=b,z=c", (L("x", "=", ("a",)), L("y", "=", ("b",)), L("z", "=", ("c",)))),
    ("x!=a,y=b", (L("x", "!=", ("a",)), L("y", "=", ("b",)))),
    ("x=", (L("x", "=", ("",)),)),
    ("x= ", (L("x", "=", ("",)),)),
    ("x=,z= ", (L("x", "=", ("",)), L("z", "=", ("",)))),
    ("x= ,z= ", (L("x", "=", ("",)), L("z", "=", ("",)))),
    ("x!=", (L("x", "!=", ("",)),)),
    ("!x", (L("x", "!"),)),
    ("! x", (L("x", "!"),)),
    ("x>1", (L("x", "gt", ("1",)),)),
    ("x>1,z<5", (L("x", "gt", ("1",)), L("z", "lt", ("5",)))),
    ("x<7", (L("x", "lt", ("7",)),)),
    ("x>007", (L("x", "gt", ("007",)),)),
    ("x<9223372036854775807", (L("x", "lt", ("9223372036854775807",)),)),
    ("x==y", (L("x", "=", ("y",)),)),
    ("x = y", (L("x", "=", ("y",)),)),
    ("\rx", (L("x", "exists"),)),
    ("a ", (L("a", "exists"),)),
    (" \t\r\nx \t\r\n", (L("x", "exists"),)),
    ("x,y", (L("x", "exists"), L("y", "exists"))),
    ("x,y in (a)", (L("x", "exists"), L("y", "in", ("a",)))),
    (
        "this-is-a-dns.domain.com/key-with-dash",
        (L("this-is-a-dns.domain.com/key-with-dash", "exists"),),
    ),
    (
        "this-is-another-dns.domain.com/key-with-dash in (so,what)",
        (L("this-is-another-dns.domain.com/key-with-dash", "in", ("so", "what")),),
    ),
    (
        "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
        (L("0.1.2.domain/99", "notin", ("10.10.100.1", "tick.tack.clock")),),
    ),
    ("foo  in\t (abc)", (L("foo", "in", ("abc",)),)),
    ("x notin\n (abc)", (L("x", "notin", ("abc",)),)),
    ("x  notin\t\t(abc,def)", (L("x", "notin", ("abc", "def")),)),
    ("x in(abc)", (L("x", "in", ("abc",)),)),
    ("x in (abc,def)", (L("x", "in", ("abc", "def")),)),
    ("x in (def,abc,def)", (L("x", "in", ("abc", "def")),)),
    ("x in (abc,abc)", (L("x", "in", ("abc",)),)),
    # Empty slots in a value list are the value "".
    ("x in (abc,)", (L("x", "in", ("", "abc")),)),
    ("x in ()", (L("x", "in", ("",)),)),
    ("x in (,)", (L("x", "in", ("",)),)),
    ("x notin ( )", (L("x", "notin", ("",)),)),
    ("x notin (, a)", (L("x", "notin", ("", "a")),)),
    ("x in (a,,b)", (L("x", "in", ("", "a", "b")),)),
    ("x in (a,,,)", (L("x", "in", ("", "a")),)),
    ("x in (a,,a,,a,,a,,,)", (L("x", "in", ("", "a")),)),
    (
        "x notin (abc,,def),bar,z in (),w",
        (
            L("bar", "exists"),
            L("w", "exists"),
            L("x", "notin", ("", "abc", "def")),
            L("z", "in", ("",)),
        ),
    ),
    ("x=a,y!=b", (L("x", "=", ("a",)), L("y", "!=", ("b",)))),
    (
        "x=a,y!=b,z in (h,i,j)",
        (L("x", "=", ("a",)), L("y", "!=", ("b",)), L("z", "in", ("h", "i", "j"))),
    ),
    # in/notin are words except right after a key.
    ("a in (x,y,notin, z,in)", (L("a", "in", ("in", "notin", "x", "y", "z")),)),
    ("notin=in", (L("notin", "=", ("in",)),)),
    ("in", (L("in", "exists"),)),
    ("!in", (L("in", "!"),)),
    ("in in (in)", (L("in", "in", ("in",)),)),
    ("notin notin (notin)", (L("notin", "notin", ("notin",)),)),
    # Qualified names: uppercase, '_' and '.' inside the name, digits first.
    ("Upper_Case.name-1=Va_l.u-e9", (L("Upper_Case.name-1", "=", ("Va_l.u-e9",)),)),
    ("example.com/Name=v", (L("example.com/Name", "=", ("v",)),)),
    ("1234 in (bar)", (L("1234", "in", ("bar",)),)),
    (f"{NAME_63}={NAME_63}", (L(NAME_63, "=", (NAME_63,)),)),
    (f"{PREFIX_253}/{NAME_63}", (L(f"{PREFIX_253}/{NAME_63}", "exists"),)),
]


@pytest.mark.parametrize(("text", "expected"), ACCEPTED_LABEL_SELECTORS)
def test_label_selector_parses_kubernetes_examples(
    text: str, expected: tuple[LabelRequirement, ...]
) -> None:
    assert parse_label_selector(text) == expected


def test_label_requirements_are_sorted_by_key_whatever_the_input_order() -> None:
    assert parse_label_selector("x=a,a=x") == parse_label_selector("a=x,x=a")
    assert [r.key for r in parse_label_selector("c,b=1,a in (z),!d")] == ["a", "b", "c", "d"]


def test_label_requirements_with_equal_keys_keep_their_order() -> None:
    assert parse_label_selector("x!=b,x=a,x") == (
        L("x", "!=", ("b",)),
        L("x", "=", ("a",)),
        L("x", "exists"),
    )


# ---------------------------------------------------------------------------------------------
# Label selectors: rejected, with the position of the problem


REJECTED_LABEL_SELECTORS: list[tuple[str, int, str]] = [
    # From Kubernetes' tables.
    ("x=a||y=b", 2, "value 'a||y'"),
    ("x==a==b", 4, "expected ',' or end of selector"),
    ("!x=a", 2, "expected ',' or end of selector"),
    ("x<a", 2, "integer"),
    ("x,,y", 2, "expected a key or '!' after ','"),
    (",x,y", 0, "expected a key or '!'"),
    ("x nott in (y)", 2, "expected an operator"),
    ("a in (xyz),", 11, "found end of selector"),
    ("a in (xyz)b notin ()", 10, "expected ',' or end of selector"),
    ("a in (xyz abc)", 10, "expected ',' or ')'"),
    ("a notin(", 8, "expected a value, ',' or ')'"),
    ("a (", 2, "expected an operator"),
    ("(", 0, "expected a key or '!'"),
    # Value lists.
    ("a in (b", 7, "expected ',' or ')'"),
    ("x in (a,,)", 9, "expected a value or ','"),
    ("x in (,,)", 8, "expected a value or ','"),
    ("x in (a,=)", 8, "expected a value or ','"),
    ("x in (=)", 6, "expected a value, ',' or ')'"),
    ("x in (", 6, "expected a value, ',' or ')'"),
    ("x in a", 5, "expected '('"),
    ("x in", 4, "expected '('"),
    ("x in (a,b@)", 8, "value 'b@'"),
    # Syntax is checked before values, as in Kubernetes: the missing comma wins over the '@'.
    ("x in (b@ c)", 9, "expected ',' or ')'"),
    # Exact matches.
    ("x=(a)", 2, "expected a value after '='"),
    ("x===a", 3, "expected a value after '=='"),
    ("x=a=b", 3, "expected ',' or end of selector"),
    ("x=a b", 4, "expected ',' or end of selector"),
    ("x=a,", 4, "expected a key or '!' after ','"),
    ("x <= 5", 3, "expected a value after '<'"),
    # Keys and '!'.
    ("!", 1, "expected a key"),
    ("!!x", 1, "expected a key"),
    ("!=x", 0, "expected a key or '!'"),
    ("x!", 1, "expected an operator"),
    ("x!y", 1, "expected an operator"),
    ("a b", 2, "expected an operator"),
    ("A/b", 0, "prefix 'A'"),
    ("a_b/c", 0, "prefix 'a_b'"),
    ("a//b", 0, "more than one '/'"),
    ("/b", 0, "empty prefix"),
    ("a/", 0, "empty name"),
    ("-a", 0, "key name '-a'"),
    ("a-", 0, "key name 'a-'"),
    ("y,-a=1", 2, "key name '-a'"),
    ("\x0bx", 0, "key name"),  # vertical tab is not whitespace to Kubernetes
    ("é=1", 0, "key name"),
    ("x=é", 2, "value 'é'"),
    ("n" * 64, 0, "longer than 63"),
    (f"{'p' * 254}/a", 0, "prefix is longer than 253"),
    ("x=" + "v" * 64, 2, "longer than 63"),
    # Greater/less than: one decimal int64 that is also a valid label value.
    ("x>", 2, "integer"),
    ("x>,y", 2, "integer"),
    ("x>-1", 2, "value '-1'"),
    ("x>+1", 2, "value '+1'"),
    ("x>1.5", 2, "integer"),
    ("x>1_0", 2, "integer"),
    ("x>\u0661", 2, "integer"),  # ARABIC-INDIC DIGIT ONE: int() would take it
    ("x>9223372036854775808", 2, "integer"),
    # A NUL would end the input for Kubernetes' lexer; here it is an error.
    ("a=b\x00", 3, "NUL"),
    ("a=b \x00junk", 4, "NUL"),
]


@pytest.mark.parametrize(("text", "position", "detail"), REJECTED_LABEL_SELECTORS)
def test_label_selector_rejects_with_position(text: str, position: int, detail: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_label_selector(text)
    err = info.value
    assert (err.kind, err.text, err.position) == ("label", text, position)
    assert detail in err.detail
    assert f": position {position}: " in str(err)


def test_selector_error_message_names_selector_position_and_reason() -> None:
    with pytest.raises(SelectorError) as info:
        parse_label_selector("a in (b")
    assert str(info.value).startswith(
        "invalid label selector \"a in (b\": position 7: expected ',' or ')'"
    )


def test_selector_error_is_a_bad_request_value_error_that_pickles() -> None:
    with pytest.raises(ValueError, match="position 0") as info:
        parse_field_selector("x")
    err = info.value
    assert isinstance(err, SelectorError)
    assert err.code == 400
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.kind, copy.text, copy.position, copy.detail, str(copy)) == (
        err.kind,
        err.text,
        err.position,
        err.detail,
        str(err),
    )


def test_selector_error_message_cuts_long_input() -> None:
    text = "x=" + "v" * 10_000
    with pytest.raises(SelectorError) as info:
        parse_label_selector(text)
    assert info.value.text == text
    assert len(str(info.value)) < 500


@pytest.mark.parametrize("parse", [parse_label_selector, parse_field_selector])
@pytest.mark.parametrize("value", [None, b"a=b", 1, ["a=b"]])
def test_selector_parsers_raise_type_error_for_non_str(
    parse: Callable[[str], object], value: object
) -> None:
    with pytest.raises(TypeError):
        parse(value)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Label selectors: canonical string form


@pytest.mark.parametrize(
    ("requirements", "expected"),
    [
        (
            (L("x", "in", ("abc", "def")), L("y", "notin", ("jkl",)), L("z", "exists")),
            "x in (abc,def),y notin (jkl),z",
        ),
        (
            (L("x", "notin", ("abc", "def")), L("y", "!=", ("jkl",)), L("z", "!")),
            "x notin (abc,def),y!=jkl,!z",
        ),
        (
            (L("x", "notin", ("abc",)), L("y", "in", ("jkl", "mno")), L("z", "notin", ("",))),
            "x notin (abc),y in (jkl,mno),z notin ()",
        ),
        (
            (L("x", "=", ("abc",)), L("z", "!=", ("a",)), L("z", "exists")),
            "x=abc,z!=a,z",
        ),
        ((L("x", "gt", ("2",)), L("y", "lt", ("8",)), L("z", "exists")), "x>2,y<8,z"),
        ((L("x", "in", ("b", "", "a")),), "x in (,a,b)"),
        ((L("x", "notin", ("", "b", "", "b")),), "x notin (,b)"),
        ((L("x", "=", ("",)), L("y", "exists")), "x=,y"),
        ((), ""),
    ],
)
def test_label_selector_formats_like_kubernetes(
    requirements: tuple[LabelRequirement, ...], expected: str
) -> None:
    assert format_label_selector(requirements) == expected


@pytest.mark.parametrize(
    "text",
    ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"],
)
def test_label_selector_restring_drops_spaces(text: str) -> None:
    assert format_label_selector(parse_label_selector(text)) == text.replace(" ", "")


@pytest.mark.parametrize(("text", "_expected"), ACCEPTED_LABEL_SELECTORS)
def test_label_selector_round_trips_through_format(
    text: str, _expected: tuple[LabelRequirement, ...]
) -> None:
    parsed = parse_label_selector(text)
    assert parse_label_selector(format_label_selector(parsed)) == parsed


label_names = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?", fullmatch=True)
label_keys = st.one_of(
    label_names,
    st.builds(
        "{}/{}".format,
        st.from_regex(r"[a-z0-9]([-a-z0-9]{0,5}[a-z0-9])?(\.[a-z0-9]{1,4}){0,2}", fullmatch=True),
        label_names,
    ),
    st.sampled_from(["in", "notin"]),
)
label_values = st.one_of(st.just(""), label_names, st.sampled_from(["in", "notin"]))
integers = st.integers(min_value=0, max_value=2**63 - 1).map(str)


@st.composite
def label_requirements(draw: st.DrawFn) -> LabelRequirement:
    key = draw(label_keys)
    op: LabelOp = draw(st.sampled_from(get_args(LabelOp)))
    if op in ("exists", "!"):
        return L(key, op)
    if op in ("gt", "lt"):
        return L(key, op, (draw(integers),))
    if op in ("=", "!="):
        return L(key, op, (draw(label_values),))
    return L(key, op, tuple(draw(st.lists(label_values, min_size=1, max_size=4))))


@given(st.lists(label_requirements(), max_size=6))
def test_formatted_label_requirements_parse_back_sorted_by_key(
    requirements: list[LabelRequirement],
) -> None:
    expected = tuple(
        sorted(
            (
                L(r.key, r.op, tuple(sorted(set(r.values)))) if r.op in ("in", "notin") else r
                for r in requirements
            ),
            key=lambda r: r.key,
        )
    )
    assert parse_label_selector(format_label_selector(requirements)) == expected


def test_label_requirement_rejects_unknown_op_and_wrong_arity() -> None:
    with pytest.raises(ValueError, match="unknown"):
        L("x", "~")  # type: ignore[arg-type]
    for op, values in [("=", ()), ("=", ("a", "b")), ("in", ()), ("exists", ("a",)), ("gt", ())]:
        with pytest.raises(ValueError, match="takes"):
            L("x", op, values)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Field selectors


ACCEPTED_FIELD_SELECTORS: list[tuple[str, tuple[FieldRequirement, ...]]] = [
    ("", ()),
    (",", ()),
    (",,", ()),
    ("x=a,y=b,z=c", (F("x", "=", "a"), F("y", "=", "b"), F("z", "=", "c"))),
    ("x!=a,y=b", (F("x", "!=", "a"), F("y", "=", "b"))),
    ("a==b", (F("a", "=", "b"),)),
    ("a=b,,c==d,", (F("a", "=", "b"), F("c", "=", "d"))),
    (
        "metadata.name=foo,metadata.namespace!=bar",
        (F("metadata.name", "=", "foo"), F("metadata.namespace", "!=", "bar")),
    ),
    # Escapes: \\ \, \= in values.
    (r"x=a||y\=b", (F("x", "=", "a||y=b"),)),
    (r"x=a\=\=b", (F("x", "=", "a==b"),)),
    # ("k2=v2" sorts before "k=...": '2' < '=').
    (r"k=\,,k2=v2", (F("k2", "=", "v2"), F("k", "=", ","))),
    (r"k=\\,k2=v2", (F("k2", "=", "v2"), F("k", "=", "\\"))),
    (r"k=\\\,,k2=v2", (F("k2", "=", "v2"), F("k", "=", "\\,"))),
    (r"complex=\=value\\\,\\", (F("complex", "=", "=value\\,\\"),)),
    # Terms are ordered by their raw text; duplicates stay.
    ("b=1,a=2", (F("a", "=", "2"), F("b", "=", "1"))),
    ("x=a,x=a", (F("x", "=", "a"), F("x", "=", "a"))),
    ("a=b,a==z", (F("a", "=", "z"), F("a", "=", "b"))),
    ("함=수,목=록", (F("목", "=", "록"), F("함", "=", "수"))),
    # Keys are verbatim: spaces, empty, backslashes; values may be empty.
    (" a = b ", (F(" a ", "=", " b "),)),
    ("=b", (F("", "=", "b"),)),
    ("a=", (F("a", "=", ""),)),
    ("a==", (F("a", "=", ""),)),
    ("a!=", (F("a", "!=", ""),)),
    ("a!!=b", (F("a!", "!=", "b"),)),
    ("a!b=c", (F("a!b", "=", "c"),)),
    (r"a\,b=c", (F(r"a\,b", "=", "c"),)),
    ("a\\=c", (F("a\\", "=", "c"),)),
    ("a=b\x00", (F("a", "=", "b\x00"),)),
    ("x in (a)=b", (F("x in (a)", "=", "b"),)),
]


@pytest.mark.parametrize(("text", "expected"), ACCEPTED_FIELD_SELECTORS)
def test_field_selector_parses_kubernetes_examples(
    text: str, expected: tuple[FieldRequirement, ...]
) -> None:
    assert parse_field_selector(text) == expected


REJECTED_FIELD_SELECTORS: list[tuple[str, int, str]] = [
    # From Kubernetes' tables.
    ("x=a||y=b", 6, "unescaped '='"),
    ("x==a==b", 4, "unescaped '='"),
    ("x=a,b", 4, "no operator"),
    ("x in (a)", 0, "no operator"),
    ("x", 0, "no operator"),
    # Several bad terms: the first in sorted order is reported, as in Kubernetes.
    ("x in (a,b,c)", 8, "term 'b'"),
    ("z,a", 2, "term 'a'"),
    # Escapes.
    (r"a=b\x", 3, r"'\x'"),
    ("a=\\", 2, "lone backslash"),
    ("a=\\\\\\", 4, "lone backslash"),
    (r"k=\a\b", 2, r"'\a'"),
    ("a=b,=c=d", 6, "unescaped '='"),
    ("a!=b=c", 4, "unescaped '='"),
    ("a!b", 0, "no operator"),
    ("a=\ud800", 2, "surrogate"),
]


@pytest.mark.parametrize(("text", "position", "detail"), REJECTED_FIELD_SELECTORS)
def test_field_selector_rejects_with_position(text: str, position: int, detail: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_field_selector(text)
    err = info.value
    assert (err.kind, err.text, err.position) == ("field", text, position)
    assert detail in err.detail
    assert f": position {position}: " in str(err)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x=a,y=b,z=c", "x=a,y=b,z=c"),
        ("x!=a,y=b", "x!=a,y=b"),
        (r"x=a||y\=b", r"x=a||y\=b"),
        (r"x=a\=\=b", r"x=a\=\=b"),
        ("a==b", "a=b"),
        ("a!!=b,a\\=c", "a!!=b,a\\=c"),
    ],
)
def test_field_selector_formats_with_escaped_values(text: str, expected: str) -> None:
    assert format_field_selector(parse_field_selector(text)) == expected


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (F("k", "=", "\\"), r"k=\\"),
        (F("k", "=", ","), r"k=\,"),
        (F("k", "=", "="), r"k=\="),
        (F("k", "!=", "\\=\\,\\"), r"k!=\\\=\\\,\\"),
        (F("", "=", ""), "="),
    ],
)
def test_field_values_are_escaped_like_kubernetes(
    requirement: FieldRequirement, expected: str
) -> None:
    assert format_field_selector([requirement]) == expected
    assert parse_field_selector(expected) == (requirement,)


@pytest.mark.parametrize("key", ["a=b", "a,b", "a!"])
def test_field_selector_format_refuses_keys_the_grammar_cannot_carry(key: str) -> None:
    with pytest.raises(ValueError, match="cannot be written"):
        format_field_selector([F(key, "=", "v")])


field_text = st.text(alphabet="ab=!,\\ x", max_size=30)


@given(field_text)
def test_field_selector_round_trips_through_format_as_a_multiset(text: str) -> None:
    try:
        parsed = parse_field_selector(text)
    except SelectorError:
        return
    again = parse_field_selector(format_field_selector(parsed))
    by_content = attrgetter("key", "op", "value")
    assert sorted(again, key=by_content) == sorted(parsed, key=by_content)


def test_field_requirement_rejects_unknown_op() -> None:
    with pytest.raises(ValueError, match="unknown"):
        F("x", "==", "y")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Fuzz: any text yields requirements or SelectorError, never another exception or a hang.

LABEL_ALPHABET = "ab/.-_0123456789 \t\r\n=!(),<>\x00\x0béZ"
label_fuzz_text = st.one_of(
    st.text(alphabet=LABEL_ALPHABET, max_size=40),
    st.lists(
        st.sampled_from(
            ["x", "y", "in", "notin", "=", "==", "!=", "!", "(", ")", ",", ">", "<", " ", "1"]
        ),
        max_size=14,
    ).map("".join),
    st.text(max_size=40),
)


@given(label_fuzz_text)
def test_label_selector_fuzz_gives_requirements_or_selector_error(text: str) -> None:
    try:
        parsed = parse_label_selector(text)
    except SelectorError as err:
        assert 0 <= err.position <= len(text)
        return
    assert [r.key for r in parsed] == sorted(r.key for r in parsed)
    for r in parsed:
        if r.op in ("in", "notin"):
            assert list(r.values) == sorted(set(r.values))
    assert parse_label_selector(format_label_selector(parsed)) == parsed


@given(st.one_of(st.text(alphabet="ab=!,\\ \x00é", max_size=40), st.text(max_size=40)))
def test_field_selector_fuzz_gives_requirements_or_selector_error(text: str) -> None:
    try:
        parse_field_selector(text)
    except SelectorError as err:
        assert 0 <= err.position <= len(text)


# ---------------------------------------------------------------------------------------------
# Matching: the same table against the native Selector and a Python oracle.

Matcher = Callable[[str | None, str | None, Mapping[str, str], Mapping[str, str] | None], bool]


def _oracle_label(r: LabelRequirement, labels: Mapping[str, str]) -> bool:
    """Kubernetes' Requirement.Matches, restated; an oracle for tests only."""
    present = r.key in labels
    value = labels.get(r.key, "")
    if r.op in ("=", "in"):
        return present and value in r.values
    if r.op in ("!=", "notin"):
        return not present or value not in r.values
    if r.op == "exists":
        return present
    if r.op == "!":
        return not present
    # gt/lt: the label must be present and parse as a Go int64 (optional sign, digits).
    sign, digits = (value[0], value[1:]) if value[:1] in ("+", "-") else ("", value)
    if not present or not digits.isascii() or not digits.isdigit():
        return False
    number = int(sign + digits)
    if not -(2**63) <= number < 2**63:
        return False
    bound = int(r.values[0])
    return number > bound if r.op == "gt" else number < bound


def oracle_matches(
    label_selector: str | None,
    field_selector: str | None,
    labels: Mapping[str, str],
    fields: Mapping[str, str] | None,
) -> bool:
    field_map = fields or {}
    return all(
        _oracle_label(r, labels) for r in parse_label_selector(label_selector or "")
    ) and all(
        (field_map.get(r.key, "") == r.value) == (r.op == "=")
        for r in parse_field_selector(field_selector or "")
    )


def native_matches(
    label_selector: str | None,
    field_selector: str | None,
    labels: Mapping[str, str],
    fields: Mapping[str, str] | None,
) -> bool:
    return compile_selector(label_selector, field_selector).matches(labels, fields)


MATCHERS: list[Matcher] = [oracle_matches, native_matches]
MATCHER_IDS = ["oracle", "native"]

FOO_BAZ = {"foo": "bar", "baz": "blah"}
FIELDSET = {"foo": "bar", "baz": "blah", "complex": "=value\\,\\"}


class MatchCase(NamedTuple):
    label_selector: str | None
    field_selector: str | None
    labels: dict[str, str]
    fields: dict[str, str] | None
    expected: bool


MATCH_CASES: list[MatchCase] = [
    MatchCase(*case)
    for case in [
        # Kubernetes' label matching tables.
        ("", None, {"x": "y"}, None, True),
        ("x=y", None, {"x": "y"}, None, True),
        ("x=y,z=w", None, {"x": "y", "z": "w"}, None, True),
        ("x!=y,z!=w", None, {"x": "z", "z": "a"}, None, True),
        ("notin=in", None, {"notin": "in"}, None, True),
        ("x", None, {"x": "z"}, None, True),
        ("!x", None, {"y": "z"}, None, True),
        ("x>1", None, {"x": "2"}, None, True),
        ("x<1", None, {"x": "0"}, None, True),
        ("x=z", None, {}, None, False),
        ("x=y", None, {"x": "z"}, None, False),
        ("x=y,z=w", None, {"x": "w", "z": "w"}, None, False),
        ("x!=y,z!=w", None, {"x": "z", "z": "w"}, None, False),
        ("x", None, {"y": "z"}, None, False),
        ("!x", None, {"x": "z"}, None, False),
        ("x>1", None, {"x": "0"}, None, False),
        ("x<1", None, {"x": "2"}, None, False),
        ("foo=bar", None, FOO_BAZ, None, True),
        ("baz=blah", None, FOO_BAZ, None, True),
        ("foo=bar,baz=blah", None, FOO_BAZ, None, True),
        ("foo=blah", None, FOO_BAZ, None, False),
        ("baz=bar", None, FOO_BAZ, None, False),
        ("foo=bar,foobar=bar,baz=blah", None, FOO_BAZ, None, False),
        ("x in (foo),y notin (alpha)", None, {"x": "foo", "y": "baz"}, None, True),
        ("x in (foo),y in (alpha)", None, {"x": "foo", "y": "baz"}, None, False),
        ("x notin (),y", None, {"y": ""}, None, True),
        ("!x,y", None, {"y": ""}, None, True),
        ("x notin (),!y", None, {"y": ""}, None, False),
        ("x in ()", None, {"y": "baz"}, None, False),
        ("z>1", None, {"z": "2"}, None, True),
        ("z>1", None, {"z": "v2"}, None, False),
        # Absent labels: != and notin match, gt/lt and = do not.
        ("x!=a", None, {}, None, True),
        ("x notin (a)", None, {}, None, True),
        ("x>1", None, {}, None, False),
        ("x<1", None, {}, None, False),
        ("x=", None, {}, None, False),
        ("x=", None, {"x": ""}, None, True),
        ("x in (,a)", None, {"x": ""}, None, True),
        ("x<9223372036854775807", None, {"x": "9223372036854775806"}, None, True),
        ("x>0", None, {"x": "99999999999999999999"}, None, False),
        ("x<10", None, {"x": "010"}, None, False),
        ("x<11", None, {"x": "010"}, None, True),
        # Kubernetes' field matching table.
        (None, "", {}, {"x": "y"}, True),
        (None, "x=y", {}, {"x": "y"}, True),
        (None, "x=y,z=w", {}, {"x": "y", "z": "w"}, True),
        (None, "x!=y,z!=w", {}, {"x": "z", "z": "a"}, True),
        (None, "notin=in", {}, {"notin": "in"}, True),
        (None, "x=y", {}, {"x": "z"}, False),
        (None, "x=y,z=w", {}, {"x": "w", "z": "w"}, False),
        (None, "x!=y,z!=w", {}, {"x": "z", "z": "w"}, False),
        (None, "foo=bar,baz=blah", {}, FIELDSET, True),
        (None, r"foo=bar,baz=blah,complex=\=value\\\,\\", {}, FIELDSET, True),
        (None, "foo=blah", {}, FIELDSET, False),
        (None, "foo=bar,foobar=bar,baz=blah", {}, FIELDSET, False),
        # An absent field reads as "".
        (None, "a=", {}, {}, True),
        (None, "a=", {}, None, True),
        (None, "a!=", {}, {}, False),
        (None, "a!=b", {}, None, True),
        (None, "a=b", {}, None, False),
        # Both: all requirements must hold.
        ("app=web", "metadata.name=x", {"app": "web"}, {"metadata.name": "x"}, True),
        ("app=web", "metadata.name=x", {"app": "web"}, {"metadata.name": "y"}, False),
        ("app=db", "metadata.name=x", {"app": "web"}, {"metadata.name": "x"}, False),
        (None, None, {}, None, True),
    ]
]


@pytest.mark.parametrize("matches", MATCHERS, ids=MATCHER_IDS)
@pytest.mark.parametrize("case", MATCH_CASES, ids=repr)
def test_selector_matches_like_kubernetes(matches: Matcher, case: MatchCase) -> None:
    got = matches(case.label_selector, case.field_selector, case.labels, case.fields)
    assert got is case.expected


@pytest.mark.parametrize(("label_selector", "field_selector"), [(None, None), ("", ""), ("", ",,")])
def test_native_selector_without_requirements_is_empty(
    label_selector: str | None, field_selector: str | None
) -> None:
    selector = compile_selector(label_selector, field_selector)
    assert selector.empty
    assert selector.matches({}, None)


def test_native_selector_with_requirements_is_not_empty() -> None:
    assert not compile_selector("a").empty
    assert not compile_selector(None, "a=").empty


def test_native_compile_raises_selector_error_and_type_error() -> None:
    with pytest.raises(SelectorError) as info:
        compile_selector("a in (b")
    assert info.value.kind == "label"
    with pytest.raises(SelectorError) as info:
        compile_selector("a=b", "x")
    assert info.value.kind == "field"
    with pytest.raises(TypeError):
        compile_selector(b"a=b")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        compile_selector(None, 3)  # type: ignore[arg-type]


small_label_values = st.sampled_from(["", "0", "1", "2", "10", "010", "x", "in"])
small_labels = st.dictionaries(st.sampled_from(["a", "b", "in", "ex.io/c"]), small_label_values)
small_requirements = st.lists(
    st.builds(
        L,
        st.sampled_from(["a", "b", "in", "ex.io/c"]),
        st.sampled_from(["exists", "!"]),
    )
    | st.builds(
        lambda key, op, value: L(key, op, (value,)),
        st.sampled_from(["a", "b", "in", "ex.io/c"]),
        st.sampled_from(["=", "!="]),
        small_label_values,
    )
    | st.builds(
        lambda key, op, value: L(key, op, (value,)),
        st.sampled_from(["a", "b"]),
        st.sampled_from(["gt", "lt"]),
        st.sampled_from(["0", "1", "2", "10"]),
    )
    | st.builds(
        lambda key, op, values: L(key, op, tuple(values)),
        st.sampled_from(["a", "b", "in", "ex.io/c"]),
        st.sampled_from(["in", "notin"]),
        st.lists(small_label_values, min_size=1, max_size=3),
    ),
    max_size=4,
)
small_fields = st.dictionaries(st.sampled_from(["f", "g"]), st.sampled_from(["", "v", ",=\\"]))
small_field_requirements = st.lists(
    st.builds(
        F,
        st.sampled_from(["f", "g"]),
        st.sampled_from(["=", "!="]),
        st.sampled_from(["", "v", ",=\\"]),
    ),
    max_size=3,
)


@given(small_requirements, small_field_requirements, small_labels, st.none() | small_fields)
def test_native_selector_agrees_with_oracle(
    label_requirements: Sequence[LabelRequirement],
    field_requirements: Sequence[FieldRequirement],
    labels: dict[str, str],
    fields: dict[str, str] | None,
) -> None:
    label_selector = format_label_selector(label_requirements)
    field_selector = format_field_selector(field_requirements)
    assert native_matches(label_selector, field_selector, labels, fields) == oracle_matches(
        label_selector, field_selector, labels, fields
    )
