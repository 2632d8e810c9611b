"""The pieces CRD validation is built on: Go regular expressions run by Python with Go's
answers and Go's parse errors, kube-openapi's string formats, and apimachinery's
rendering of bad values in field errors."""

from __future__ import annotations

import pytest

from watchcache.registry import crd_formats
from watchcache.registry.field_errors import (
    go_float_json,
    go_float_v,
    go_json,
    go_value,
    invalid,
    not_supported,
    too_long,
    too_many,
)
from watchcache.registry.goregexp import GoRegexpError, UnsupportedRegexpError, compile_go

# ---------------------------------------------------------------------------------------
# Regular expressions


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", ["abc", "a-b"], ["abc\n", "-a", "A"]),
        ("^\\d+$", ["123"], ["\u0663\u0664", "12a"]),
        ("\\s", [" ", "\t"], ["\x0b", "\u00a0"]),
        ("\\w+", ["a_1"], ["\u00e9"]),
        ("a{,3}", ["a{,3}"], ["aaa"]),
        ("(?i)abc", ["ABC", "aBc"], ["abd"]),
        ("x(?i)y", ["xY"], ["XY"]),
        ("(?i:x)y", ["Xy"], ["XY"]),
        ("^a(?i)*b$", ["aaab", "aB"], ["Ab"]),
        ("[[:alpha:]]+$", ["abc"], ["12"]),
        ("[^\\d]", ["a"], ["1"]),
        ("\\pL", ["\u00e9"], ["1"]),
        ("\\PL", ["1"], ["\u00e9"]),
        ("\\Qa.b\\E", ["a.b"], ["axb"]),
        ("(?s)^.$", ["\n"], []),
        ("^.$", ["x"], ["\n"]),
        ("(?m)^b$", ["a\nb\nc"], ["abc"]),
        ("\\bfoo\\b", ["a foo b"], ["afoo"]),
        ("^\\x{263a}\\x41\\101$", ["\u263aAA"], []),
        ("(?P<name>x)(?<other>y)", ["xy"], ["yx"]),
        ("^[\\-a]+$", ["-a"], ["b"]),
        ("^[]a]+$", ["]a"], ["b"]),
        ("(?U)a+", ["aaa"], ["b"]),
    ],
)
def test_go_patterns_match_as_go_matches(
    pattern: str, matches: list[str], misses: list[str]
) -> None:
    regexp = compile_go(pattern)
    for text in matches:
        assert regexp.search(text), (pattern, text)
    for text in misses:
        assert not regexp.search(text), (pattern, text)


@pytest.mark.parametrize(
    ("pattern", "error"),
    [
        ("+", "missing argument to repetition operator: `+`"),
        ("(", "missing closing ): `(`"),
        ("a)", "unexpected ): `a)`"),
        ("a**", "invalid nested repetition operator: `**`"),
        ("a*??", "invalid nested repetition operator: `*??`"),
        ("a++", "invalid nested repetition operator: `++`"),
        ("a|*", "missing argument to repetition operator: `*`"),
        ("(?=a)", "invalid or unsupported Perl syntax: `(?=`"),
        ("(?!a)", "invalid or unsupported Perl syntax: `(?!`"),
        ("(?<=a)b", "invalid named capture: `(?<=a)b`"),
        ("(?i", "invalid or unsupported Perl syntax: `(?i`"),
        ("(?P<a-b>x)", "invalid named capture: `(?P<a-b>`"),
        ("a{1001}", "invalid repeat count: `{1001}`"),
        ("(a{100}){20}", "invalid repeat count: `{20}`"),
        ("a{2,1}", "invalid repeat count: `{2,1}`"),
        ("[z-a]", "invalid character class range: `z-a`"),
        ("[a", "missing closing ]: `[a`"),
        ("[[:word:][:nope:]]", "invalid character class range: `[:nope:]`"),
        ("\\1", "invalid escape sequence: `\\1`"),
        ("\\q", "invalid escape sequence: `\\q`"),
        ("[\\b]", "invalid escape sequence: `\\b`"),
        ("\\C", "invalid escape sequence: `\\C`"),
        ("\\p{Nope}", "invalid character class range: `\\p{Nope}`"),
        ("x\\", "trailing backslash at end of expression: ``"),
    ],
)
def test_invalid_patterns_fail_with_gos_words(pattern: str, error: str) -> None:
    with pytest.raises(GoRegexpError) as caught:
        compile_go(pattern)
    assert str(caught.value) == f"error parsing regexp: {error}"


def test_scripts_are_valid_go_but_not_supported_here() -> None:
    with pytest.raises(UnsupportedRegexpError):
        compile_go("\\p{Greek}")


# ---------------------------------------------------------------------------------------
# Formats


def test_formats_are_stripped_by_type_as_apiextensions_does() -> None:
    assert crd_formats.effective_format("string", "date-time") == "date-time"
    assert crd_formats.effective_format("", "datetime") == "datetime"
    assert crd_formats.effective_format("string", "color") == ""
    assert crd_formats.effective_format("integer", "int32") == "int32"
    assert crd_formats.effective_format("integer", "byte") == ""
    assert crd_formats.effective_format("number", "double") == "double"
    assert crd_formats.effective_format("boolean", "date") == ""


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date-time", ["2020-01-01T10:00:00Z", "2020-01-01t10:00:00.5+01:00"],
         ["2020-13-01T00:00:00Z", "2020-01-01T24:00:00Z", "2020-01-01"]),
        ("date", ["2020-02-29"], ["2021-02-29", "20-01-01"]),
        ("uri", ["http://a.b/c?d", "/abs", "mailto:x", "http://[::1]:80/"],
         ["rel", "http://a b", ""]),
        ("email", ["a@b.c", "Joe <j@x.org>"], ["nope", "a@@b"]),
        ("hostname", ["example.com", "a", "a-"], ["a--b", "ex_ample.com"]),
        ("ipv4", ["1.2.3.4", "01.2.3.4", "::ffff:1.2.3.4"], ["1.2.3", "1.2.3.256"]),
        ("ipv6", ["::1", "1::", "1:2:3:4:5:6:7:8"],
         ["::ffff:01.2.3.4", "1::2::3", "00001::", "1.2.3.4"]),
        ("cidr", ["10.0.0.0/8", "::/0", "010.0.0.0/08"], ["10.0.0.0/33", "10.0.0.0"]),
        ("mac", ["01:23:45:67:89:ab", "0123.4567.89ab"], ["01:23:45:67:89"]),
        ("duration", ["1h", "3 days", "1hr"], ["5 fortnights"]),
        ("byte", ["aGVsbG8=", "YQ=="], ["abc"]),
        ("isbn", ["0-306-40615-2", "978-0-306-40615-7"], ["123"]),
        ("creditcard", ["4111 1111 1111 1111"], ["4111111111111112"]),
        ("ssn", ["123-45-6789"], ["123456789"]),
        ("hexcolor", ["#fff", "ABCDEF"], ["#ffff"]),
        ("rgbcolor", ["rgb(1, 2,255)"], ["rgb(256,0,0)"]),
        ("uuid4", ["123e4567-e89b-42d3-a456-426614174000"],
         ["123e4567-e89b-12d3-a456-426614174000"]),
        ("bsonobjectid", ["507f1f77bcf86cd799439011"], ["507f1f77bcf86cd79943901"]),
        ("k8s-short-name", ["abc"], ["Abc", "a" * 64]),
        ("k8s-long-name", ["a.b-c"], ["a.-", "a" * 254]),
        ("password", ["anything"], []),
    ],
)  # fmt: skip
def test_format_checks(fmt: str, good: list[str], bad: list[str]) -> None:
    check = crd_formats.checker(fmt)
    assert check is not None
    for text in good:
        assert check(text), (fmt, text)
    for text in bad:
        assert not check(text), (fmt, text)


# ---------------------------------------------------------------------------------------
# Values in field errors


@pytest.mark.parametrize(
    ("value", "v", "json_text"),
    [
        (1.5, "1.5", "1.5"),
        (100000.0, "100000", "100000"),
        (1e6, "1e+06", "1000000"),
        (1e-5, "1e-05", "0.00001"),
        (2.5e-7, "2.5e-07", "2.5e-7"),
        (1e21, "1e+21", "1e+21"),
        (1e20, "1e+20", "100000000000000000000"),
        (-3.0, "-3", "-3"),
        (123456789.0, "1.23456789e+08", "123456789"),
    ],
)
def test_floats_print_as_go_prints_them(value: float, v: str, json_text: str) -> None:
    assert go_float_v(value) == v
    assert go_float_json(value) == json_text


def test_bad_values_print_by_their_go_type() -> None:
    assert go_value('a"b') == '"a\\"b"'
    assert go_value(True) == "true"
    assert go_value(7) == "7"
    assert go_value(2**70) == "1.1805916207174113e+21"
    assert go_value(None) == "null"
    assert go_value({"b": [1, 2.5], "a": "<x>"}) == '{"a":"\\u003cx\\u003e","b":[1,2.5]}'
    assert go_json([None, False, {"k": 1e21}]) == '[null,false,{"k":1e+21}]'


def test_field_error_constructors() -> None:
    assert invalid(None, "", "whole object").field == "<nil>"
    assert invalid("a", 3, "bad").message == "Invalid value: 3: bad"
    assert not_supported("a", "x", ["p", "q"]).message == (
        'Unsupported value: "x": supported values: "p", "q"'
    )
    assert too_long("a", 1).message == "Too long: may not be more than 1 byte"
    assert too_many("a", 3, 2).message == "Too many: 3: must have at most 2 items"
    assert too_many("a", -1, 1).message == "Too many: must have at most 1 item"
