"""Continue tokens: Kubernetes' wire format, its checks and messages, and Go's decoding quirks.

Expected values are facts about Kubernetes and Go: the two known-good tokens were produced by
Go (docs/semantics.md §1.1), the messages are ``DecodeContinue``'s (§1.3, §11 behaviours 1-4),
and the base64 / JSON / ``path.Clean`` tables follow Go's ``encoding/base64``,
``encoding/json`` and ``path`` as documented and as their sources read. Tokens in the tables
are written as JSON text and base64-encoded here with the standard library, so the tables
do not depend on the encoder under test.
"""

from __future__ import annotations

import base64
import json
import pickle
import posixpath
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchcache import _core
from watchcache.wire import gojson
from watchcache.wire.errors import BadRequestError, ContinueTokenError
from watchcache.wire.tokens import (
    CONTINUE_TOKEN_VERSION,
    ContinueToken,
    _clean_path,
    _decode_base64,
    _is_clean_rooted,
    _unmarshal,
    decode_continue,
    encode_continue,
    next_page_token,
    parse_continue,
)

PREFIX = "/test/"
MESSAGE_START = "invalid continue token: continue key is not valid: "
V1 = '"v":"meta.k8s.io/v1"'

TOKEN_RV_12345 = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNDUsInN0YXJ0IjoiL25zL25hbWVcdTAwMDAifQ"
TOKEN_RV_MINUS_1 = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0IjoiL25zL25hbWVcdTAwMDAifQ"


def b64(payload: str | bytes) -> str:
    """base64url without padding, by the standard library (an independent encoder)."""
    raw = payload.encode() if isinstance(payload, str) else payload
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def token_json(token: str) -> str:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()


def decode_error(token: str, key_prefix: str = PREFIX) -> ContinueTokenError:
    with pytest.raises(ContinueTokenError) as info:
        decode_continue(token, key_prefix)
    return info.value


# ---------------------------------------------------------------------------------------------
# Encoding: byte-exact with Go


@pytest.mark.parametrize(
    ("key", "key_prefix", "resource_version", "expected"),
    [
        ("/registry/pods/ns/name\x00", "/registry/pods", 12345, TOKEN_RV_12345),
        ("/registry/pods/ns/name\x00", "/registry/pods", -1, TOKEN_RV_MINUS_1),
        # §11 behaviour 1.
        ("/pods/ns/a\x00", "/pods", 5, b64('{"v":"meta.k8s.io/v1","rv":5,"start":"/ns/a\\u0000"}')),
        (
            "/p/a",
            "/p/",
            2**63 - 1,
            b64('{"v":"meta.k8s.io/v1","rv":9223372036854775807,"start":"a"}'),
        ),
    ],
)
def test_encode_continue_writes_the_token_go_writes(
    key: str, key_prefix: str, resource_version: int, expected: str
) -> None:
    assert encode_continue(key, key_prefix, resource_version) == expected


def test_next_page_token_starts_just_after_the_last_key() -> None:
    assert next_page_token("/registry/pods/ns/name", "/registry/pods", 12345) == TOKEN_RV_12345
    assert next_page_token("/registry/pods/ns/name", "/registry/pods", -1) == TOKEN_RV_MINUS_1


@pytest.mark.parametrize(
    ("start", "expected_json_start"),
    [
        ("<a>&b", "\\u003ca\\u003e\\u0026b"),  # Go's HTML-safe escapes
        ("a\u2028b\u2029", "a\\u2028b\\u2029"),  # JavaScript line terminators
        ("tab\there\nnl", "tab\\there\\nnl"),
        ("ctl\x01\x1f\x7f", "ctl\\u0001\\u001f\x7f"),
        ('q"b\\', 'q\\"b\\\\'),
        ("é/日本/😀", "é/日本/😀"),  # other characters are written as UTF-8
    ],
)
def test_encode_continue_escapes_the_start_key_as_go_does(
    start: str, expected_json_start: str
) -> None:
    token = encode_continue("/p/" + start, "/p/", 7)
    assert token_json(token) == f'{{{V1},"rv":7,"start":"{expected_json_start}"}}'
    assert "=" not in token
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@pytest.mark.parametrize(
    ("key", "key_prefix"),
    [
        ("/pods/ns/a", "/nodes"),
        ("/pods", "/pods/"),
        ("/a", ""),  # Go detects a mismatch as "stripping changed nothing"
    ],
)
def test_encode_continue_rejects_a_key_outside_the_prefix(key: str, key_prefix: str) -> None:
    with pytest.raises(
        ValueError, match=r"^unable to encode next field: the key and key prefix do not match$"
    ):
        encode_continue(key, key_prefix, 1)


def test_encode_continue_rejects_a_resource_version_outside_int64() -> None:
    with pytest.raises(ValueError, match="int64"):
        encode_continue("/p/a", "/p/", 2**63)
    with pytest.raises(ValueError, match="int64"):
        encode_continue("/p/a", "/p/", -(2**63) - 1)


@pytest.mark.parametrize("resource_version", [True, 1.0, "1", None])
def test_encode_continue_rejects_a_non_int_resource_version(resource_version: Any) -> None:
    with pytest.raises(TypeError):
        encode_continue("/p/a", "/p/", resource_version)


def test_a_lone_surrogate_in_a_key_decodes_as_the_replacement_character() -> None:
    token = encode_continue("/p/a\udcffb", "/p/", 1)
    assert decode_continue(token, "/p/") == ("/p/a\ufffdb", 1)


# ---------------------------------------------------------------------------------------------
# Decoding: results and Kubernetes' checks (§1.3, §11 behaviours 2-4)


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (TOKEN_RV_12345, ContinueToken(12345, "/ns/name\x00")),
        (TOKEN_RV_MINUS_1, ContinueToken(-1, "/ns/name\x00")),
    ],
)
def test_parse_continue_reads_go_tokens(token: str, expected: ContinueToken) -> None:
    assert parse_continue(token) == expected


@pytest.mark.parametrize(
    ("start", "resource_version", "from_key"),
    [
        ("key", 1, "/test/key"),  # behaviour 2
        ("/", 1, "/test/"),  # the root: list from the prefix itself
        ("/key", 1, "/test/key"),  # cacher-style start (leading slash)
        ("a/b/c\x00", 9, "/test/a/b/c\x00"),
        ("key", -1, "/test/key"),  # "continue at latest"
        ("key", -(2**63), "/test/key"),
        ("a b/ c\x00", 3, "/test/a b/ c\x00"),  # NUL and spaces are fine
        ("...", 1, "/test/..."),  # only "." and ".." are special
        ("a/..\x00", 1, "/test/a/..\x00"),  # "..\x00" is not ".."
        ("..a/.b", 1, "/test/..a/.b"),
    ],
)
def test_decode_continue_returns_the_key_under_the_callers_prefix(
    start: str, resource_version: int, from_key: str
) -> None:
    token = b64(f'{{{V1},"rv":{resource_version},"start":"{start}"}}'.replace("\x00", "\\u0000"))
    assert decode_continue(token, PREFIX) == (from_key, resource_version)
    assert parse_continue(token) == ContinueToken(resource_version, start)


@pytest.mark.parametrize(
    "start",
    [
        "../key",
        "./key",
        "./../key",
        "key/../..",
        "a//b",
        "a/",  # trailing slash
        "/a/",
        "//a",
        "a/./b",
        "a/../b",
        "..",
        ".",
        "/..",
        "//",
        "a/.",
    ],
)
def test_continue_token_rejects_traversal(start: str) -> None:
    token = b64(f'{{{V1},"rv":1,"start":"{start}"}}')
    assert parse_continue(token) == ContinueToken(1, start)  # checks 1-5 pass
    err = decode_error(token)
    assert err.detail == start
    assert err.message == MESSAGE_START + start
    assert str(err) == err.message


RV_ZERO = "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
UNKNOWN_VERSION = "server does not recognize this encoded version "  # + the version
EMPTY_START = "encoded start key empty (version meta.k8s.io/v1)"


@pytest.mark.parametrize(
    ("json_text", "detail"),
    [
        (f'{{{V1},"rv":0,"start":"a"}}', RV_ZERO),
        (f'{{{V1},"start":"a"}}', RV_ZERO),
        (f'{{{V1},"rv":-0,"start":"a"}}', RV_ZERO),
        ('{"v":"v1","rv":1,"start":"a"}', UNKNOWN_VERSION + "v1"),
        ('{"v":"","rv":1,"start":"a"}', UNKNOWN_VERSION),
        ('{"rv":1,"start":"a"}', UNKNOWN_VERSION),
        ('{"v":"meta.k8s.io/V1","rv":1,"start":"a"}', UNKNOWN_VERSION + "meta.k8s.io/V1"),
        (f'{{{V1},"rv":1,"start":""}}', EMPTY_START),
        (f'{{{V1},"rv":1}}', EMPTY_START),
        # The order of the checks: version, then rv, then start, then traversal.
        ('{"v":"v2","rv":0,"start":""}', UNKNOWN_VERSION + "v2"),
        (f'{{{V1},"rv":0,"start":"../x"}}', RV_ZERO),
        (f'{{{V1},"rv":1,"start":""}}', EMPTY_START),
        ("{}", UNKNOWN_VERSION),
        ("null", UNKNOWN_VERSION),  # null leaves every member at its zero value
    ],
)
def test_continue_token_rejects_bad_members_in_kubernetes_order(
    json_text: str, detail: str
) -> None:
    err = decode_error(b64(json_text))
    assert err.detail == detail
    assert err.message == MESSAGE_START + detail


def test_continue_token_error_is_a_400_bad_request_status() -> None:
    err = decode_error(b64('{"v":"v1","rv":1,"start":"a"}'))
    assert isinstance(err, BadRequestError)
    assert (err.code, err.reason) == (400, "BadRequest")
    assert err.status()["message"] == (
        "invalid continue token: continue key is not valid: "
        "server does not recognize this encoded version v1"
    )
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is ContinueTokenError
    assert (copy.message, copy.detail, copy.code) == (err.message, err.detail, 400)


@pytest.mark.parametrize("token", [b"abc", None, 1, ["a"]])
def test_decoding_a_non_str_token_raises_type_error(token: Any) -> None:
    with pytest.raises(TypeError):
        parse_continue(token)
    with pytest.raises(TypeError):
        decode_continue(token, PREFIX)


# ---------------------------------------------------------------------------------------------
# Which prefix minted the token does not matter (§1.4)


def test_etcd_style_and_cacher_style_tokens_decode_to_the_same_key() -> None:
    key = "/registry/pods/ns/name"
    etcd_token = next_page_token(key, "/registry/pods/ns/", 5)
    cacher_token = next_page_token(key, "/registry/pods/ns", 5)
    assert parse_continue(etcd_token).start == "name\x00"
    assert parse_continue(cacher_token).start == "/name\x00"
    assert etcd_token != cacher_token
    expected = ("/registry/pods/ns/name\x00", 5)
    assert decode_continue(etcd_token, "/registry/pods/ns/") == expected
    assert decode_continue(cacher_token, "/registry/pods/ns/") == expected


def test_a_token_cannot_reach_outside_the_prefix_of_the_request_presenting_it() -> None:
    # Minted for namespace a, presented for namespace b: it lands under b.
    token = next_page_token("/registry/pods/a/x", "/registry/pods/a/", 5)
    assert decode_continue(token, "/registry/pods/b/") == ("/registry/pods/b/x\x00", 5)


# ---------------------------------------------------------------------------------------------
# Go's base64.RawURLEncoding: no padding, CR/LF skipped, error at the first bad byte

GOOD_JSON = f'{{{V1},"rv":1,"start":"a"}}'
GOOD = b64(GOOD_JSON)


@pytest.mark.parametrize(
    ("token", "byte"),
    [
        (GOOD + "=", len(GOOD)),  # padding is an error, not ignored
        (GOOD + "==", len(GOOD)),
        (GOOD[:8] + "=" + GOOD[8:], 8),
        ("AA=A", 2),
        ("ab+c", 2),  # the standard alphabet's '+' and '/' are foreign here
        ("ab/c", 2),
        (" " + GOOD, 0),
        (GOOD + " ", len(GOOD)),
        ("\t", 0),
        ("é", 0),
        ("eyJ2é", 4),  # the byte offset of the first non-ASCII character
        ("AB\r\nC%", 5),  # offsets count the skipped CR/LF
        ("A", 0),  # a lone final digit: Go names the input's last byte
        ("AAAAA", 4),
        ("AAAAA\n", 5),
        ("A\n\r", 2),
        ("AAAA\nA\r\n", 7),
    ],
)
def test_continue_token_rejects_bad_base64_at_gos_byte_offset(token: str, byte: int) -> None:
    err = decode_error(token)
    assert err.detail == f"illegal base64 data at input byte {byte}"
    assert err.message == MESSAGE_START + err.detail


@pytest.mark.parametrize(
    "token",
    [
        GOOD[:5] + "\n" + GOOD[5:],
        GOOD[:5] + "\r\n" + GOOD[5:9] + "\r" + GOOD[9:],
        "\n" + GOOD + "\n",
        "\r\n\r\n" + GOOD,
        "\n".join(GOOD),
    ],
)
def test_continue_token_skips_cr_and_lf_in_base64(token: str) -> None:
    assert decode_continue(token, PREFIX) == ("/test/a", 1)


def test_continue_token_ignores_the_unused_bits_of_the_last_base64_digit() -> None:
    # 78 characters: the last one carries 2 bits of the final byte and 4 unused ones. Go's
    # RawURLEncoding is not Strict, so "f" (0b011111) reads like "Q" (0b010000).
    assert TOKEN_RV_12345.endswith("Q")
    assert len(TOKEN_RV_12345) % 4 == 2
    variant = TOKEN_RV_12345[:-1] + "f"
    assert parse_continue(variant) == parse_continue(TOKEN_RV_12345)


@given(data=st.binary(), breaks=st.lists(st.tuples(st.integers(0, 200), st.sampled_from("\r\n"))))
def test_base64_decoding_returns_the_encoded_bytes_whatever_line_breaks(
    data: bytes, breaks: list[tuple[int, str]]
) -> None:
    text = b64(data)
    for at, char in breaks:
        text = text[:at] + char + text[at:]
    assert _decode_base64(text) == data


# ---------------------------------------------------------------------------------------------
# Go's json.Unmarshal into the token struct


@pytest.mark.parametrize(
    ("json_text", "expected"),
    [
        # Member names match case-insensitively, with Unicode simple folding.
        ('{"V":"meta.k8s.io/v1","RV":7,"START":"a"}', ("/test/a", 7)),
        ('{"v":"meta.k8s.io/v1","Rv":7,"sTaRt":"a"}', ("/test/a", 7)),
        (f'{{{V1},"rv":7,"\u017ftart":"a"}}', ("/test/a", 7)),  # LATIN SMALL LETTER LONG S
        (f'{{{V1},"rv":7,"\u017fTART":"a"}}', ("/test/a", 7)),
        ('{"\\u0076":"meta.k8s.io/v1","\\u0072v":7,"st\\u0061rt":"a"}', ("/test/a", 7)),
        # The last duplicate wins, across spellings too.
        (f'{{{V1},"rv":1,"rv":9,"start":"a","start":"b"}}', ("/test/b", 9)),
        (f'{{{V1},"rv":1,"RV":2,"start":"a"}}', ("/test/a", 2)),
        ('{"v":"v9","V":"meta.k8s.io/v1","rv":1,"start":"a"}', ("/test/a", 1)),
        # null changes nothing, not even a value set before it.
        (f'{{{V1},"rv":5,"rv":null,"start":"a"}}', ("/test/a", 5)),
        (f'{{{V1},"rv":5,"start":"a","start":null}}', ("/test/a", 5)),
        (f'{{{V1},"v":null,"rv":5,"start":"a"}}', ("/test/a", 5)),
        # Unknown members are ignored, whatever their value.
        (
            f'{{"x":[1,{{"y":null}},"z",-2.5e+3,true],{V1},"rv":3,"start":"a","vv":{{}}}}',
            ("/test/a", 3),
        ),
        (
            f'{{{V1},"rv":3,"start":"a","\u0131":1,"\u212a":2,"st":"x","starts":"y"}}',
            ("/test/a", 3),
        ),
        # Whitespace is space, tab, CR and LF, anywhere between tokens.
        (' \t\r\n{ "v" : "meta.k8s.io/v1" ,\n"rv"\t:\r3 , "start" : "a" } \n', ("/test/a", 3)),
        # Escapes in values, including "\/" and a pair of surrogate escapes.
        ('{"v":"meta.k8s.io\\/v1","rv":1,"start":"a\\u0000b"}', ("/test/a\x00b", 1)),
        (f'{{{V1},"rv":1,"start":"\\ud83d\\ude00"}}', ("/test/\U0001f600", 1)),
        # An unpaired surrogate escape becomes U+FFFD, one per escape.
        (f'{{{V1},"rv":1,"start":"a\\ud800b"}}', ("/test/a\ufffdb", 1)),
        (f'{{{V1},"rv":1,"start":"\\udc00\\ud800"}}', ("/test/\ufffd\ufffd", 1)),
        (f'{{{V1},"rv":1,"start":"\\ud800\\u0041"}}', ("/test/\ufffdA", 1)),
        # int64 bounds; DEL is not a control character.
        (f'{{{V1},"rv":9223372036854775807,"start":"a\x7f"}}', ("/test/a\x7f", 2**63 - 1)),
        (f'{{{V1},"rv":-9223372036854775808,"start":"a"}}', ("/test/a", -(2**63))),
        # Nesting up to Go's limit of 10 000 levels (the object is level 1).
        (f'{{{V1},"rv":1,"start":"a","x":{"[" * 9999}{"]" * 9999}}}', ("/test/a", 1)),
    ],
)
def test_continue_token_decodes_json_as_go_does(json_text: str, expected: tuple[str, int]) -> None:
    assert decode_continue(b64(json_text), PREFIX) == expected


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        # Each byte that does not start valid UTF-8 becomes one U+FFFD (Go's rule, where
        # Python's "replace" would give one U+FFFD for a truncated sequence).
        (b'{"v":"meta.k8s.io/v1","rv":1,"start":"a\xffb"}', "/test/a\ufffdb"),
        (b'{"v":"meta.k8s.io/v1","rv":1,"start":"\xe2\x82A"}', "/test/\ufffd\ufffdA"),
        (b'{"v":"meta.k8s.io/v1","rv":1,"start":"\xf0\x9f\x98"}', "/test/\ufffd\ufffd\ufffd"),
        (b'{"v":"meta.k8s.io/v1","rv":1,"start":"\xed\xa0\x80"}', "/test/\ufffd\ufffd\ufffd"),
        (b'{"v":"meta.k8s.io/v1","rv":1,"start":"\xc0\x80"}', "/test/\ufffd\ufffd"),
        (b'{"v":"meta.k8s.io/v1","rv":1,"start":"\xe6\x97\xa5"}', "/test/\u65e5"),
        # A member name with an invalid byte is just an unknown member.
        (b'{"v":"meta.k8s.io/v1","rv":1,"start":"a","start\xff":"b"}', "/test/a"),
    ],
)
def test_continue_token_replaces_invalid_utf8_byte_by_byte(payload: bytes, expected: str) -> None:
    assert decode_continue(b64(payload), PREFIX) == (expected, 1)


BAD_JSON: list[str | bytes] = [
    # rv must be a JSON integer literal within int64.
    '{"v":"meta.k8s.io/v1","rv":5.0,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":"5","start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":1e3,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":1E3,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":0.0,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":9223372036854775808,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":-9223372036854775809,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":' + "9" * 5000 + ',"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":true,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":[1],"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":{},"start":"a"}',
    # v and start must be strings.
    '{"v":1,"rv":1,"start":"a"}',
    '{"v":["meta.k8s.io/v1"],"rv":1,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":1,"start":false}',
    '{"v":"meta.k8s.io/v1","rv":1,"start":{"a":1}}',
    '{"v":"meta.k8s.io/v1","rv":1,"Start":2}',
    # A type error fails the token even when a later duplicate is fine.
    '{"v":"meta.k8s.io/v1","rv":"5","rv":5,"start":"a"}',
    # The top level must be an object (or null).
    '[{"v":"meta.k8s.io/v1","rv":1,"start":"a"}]',
    '"meta.k8s.io/v1"',
    "1",
    "true",
    # Syntax, checked over the whole text before any member is used.
    "",
    " ",
    "{",
    '{"v"',
    '{"v":}',
    "{'v':1}",
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a",}',
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a"} x',
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a"}{}',
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a"},',
    '{"v":"meta.k8s.io/v1","rv":01,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":1.,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":.5,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":+1,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":-,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":1e,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":1e+,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":0x1,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":\u0661,"start":"a"}',  # ARABIC-INDIC DIGIT ONE
    '{"v":"meta.k8s.io/v1","rv":NaN,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":Infinity,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":-Infinity,"start":"a"}',
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a","x":NaN}',
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a","x":tru}',
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a","x":nul}',
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a","x":[1,]}',
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a","x":[1 2]}',
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a\nb"}',  # raw control character
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a\x00b"}',
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a\\x41"}',  # unknown escape
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a\\u12g4"}',
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a\\',
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a',
    '{"v":"meta.k8s.io/v1","rv":1,"start":"a","x":' + "[" * 10000 + "]" * 10000 + "}",
    "\ufeff{}",  # a byte order mark is not whitespace
    b'\xff{"v":"meta.k8s.io/v1","rv":1,"start":"a"}',  # invalid UTF-8 outside strings
]


@pytest.mark.parametrize("json_text", BAD_JSON, ids=lambda t: repr(t)[:60])
def test_continue_token_rejects_what_go_json_rejects(json_text: str | bytes) -> None:
    err = decode_error(b64(json_text))
    assert err.message.startswith(MESSAGE_START)
    assert err.message == MESSAGE_START + err.detail
    assert err.detail


# A small oracle of the member rules above, run on generated member lists. Names are JSON
# string literals mapped to the field they set; values are JSON texts with what they mean.
MEMBER_NAMES: dict[str, str | None] = {
    '"v"': "v",
    '"V"': "v",
    '"rv"': "rv",
    '"RV"': "rv",
    '"rV"': "rv",
    '"\\u0072v"': "rv",
    '"start"': "start",
    '"START"': "start",
    '"\u017ftart"': "start",
    '"x"': None,
    '"vv"': None,
    '"star"': None,
}
MEMBER_VALUES: dict[str, tuple[str, object]] = {
    '"meta.k8s.io/v1"': ("string", "meta.k8s.io/v1"),
    '"v1"': ("string", "v1"),
    '"a"': ("string", "a"),
    '"/"': ("string", "/"),
    '"../a"': ("string", "../a"),
    '""': ("string", ""),
    '"5"': ("string", "5"),
    "null": ("null", None),
    "1": ("int", 1),
    "-1": ("int", -1),
    "0": ("int", 0),
    "5.0": ("number", None),
    "true": ("bool", None),
    "[]": ("array", None),
    '{"rv":1}': ("object", None),
}


def oracle(members: list[tuple[str, str]]) -> tuple[str, int] | str:
    """What DecodeContinue returns for these members under PREFIX, or the error detail
    (``"json"`` standing for any JSON type error)."""
    fields: dict[str, object] = {"v": "", "rv": 0, "start": ""}
    type_error = False
    for name, value in members:
        field = MEMBER_NAMES[name]
        kind, meaning = MEMBER_VALUES[value]
        if field is None or kind == "null":
            continue
        if kind != ("int" if field == "rv" else "string"):
            type_error = True  # Go records it and goes on with the next member
            continue
        fields[field] = meaning
    if type_error:
        return "json"
    version, rv, start = fields["v"], fields["rv"], fields["start"]
    assert isinstance(version, str) and isinstance(rv, int) and isinstance(start, str)
    if version != CONTINUE_TOKEN_VERSION:
        return f"server does not recognize this encoded version {version}"
    if rv == 0:
        return "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
    if not start:
        return "encoded start key empty (version meta.k8s.io/v1)"
    path = start if start.startswith("/") else "/" + start
    if posixpath.normpath(path) != path:
        return start
    return PREFIX + path[1:], rv


@given(
    st.lists(st.tuples(st.sampled_from(list(MEMBER_NAMES)), st.sampled_from(list(MEMBER_VALUES))))
)
def test_continue_token_members_follow_gos_rules(members: list[tuple[str, str]]) -> None:
    token = b64("{" + ",".join(f"{name}:{value}" for name, value in members) + "}")
    expected = oracle(members)
    if isinstance(expected, tuple):
        assert decode_continue(token, PREFIX) == expected
        return
    err = decode_error(token)
    if expected == "json":
        assert err.detail.startswith("json: cannot unmarshal")
    else:
        assert err.detail == expected


# ---------------------------------------------------------------------------------------------
# Go's path.Clean


@pytest.mark.parametrize(
    ("path", "cleaned"),
    [
        ("", "."),
        (".", "."),
        ("./", "."),
        ("..", ".."),
        ("../..", "../.."),
        ("../../abc", "../../abc"),
        ("/", "/"),
        ("//", "/"),
        ("/abc", "/abc"),
        ("/abc/", "/abc"),
        ("abc/def/", "abc/def"),
        ("abc//def//ghi", "abc/def/ghi"),
        ("//abc", "/abc"),  # posixpath.normpath keeps this leading "//"
        ("///abc", "/abc"),
        ("//abc//", "/abc"),
        ("abc/./def", "abc/def"),
        ("/./abc/def", "/abc/def"),
        ("abc/.", "abc"),
        ("abc/def/ghi/../jkl", "abc/def/jkl"),
        ("abc/def/../..", "."),
        ("/abc/def/../..", "/"),
        ("abc/def/../../..", ".."),
        ("/abc/def/../../..", "/"),
        ("abc/def/../../../ghi/jkl/../../../mno", "../../mno"),
        ("abc/../../././../def", "../../def"),
        ("/../a", "/a"),
    ],
)
def test_clean_path_matches_go(path: str, cleaned: str) -> None:
    assert _clean_path(path) == cleaned


@given(st.text(alphabet="/.a\x00", max_size=12).map("/".__add__))
def test_is_clean_rooted_says_whether_clean_path_changes_the_path(path: str) -> None:
    assert _is_clean_rooted(path) == (_clean_path(path) == path)


@given(st.text(alphabet="/.a\x00", max_size=12))
def test_clean_path_agrees_with_posixpath_except_for_a_leading_double_slash(path: str) -> None:
    expected = posixpath.normpath(path)
    if path.startswith("//") and not path.startswith("///"):
        expected = posixpath.normpath(path[1:])
    assert _clean_path(path) == expected


# ---------------------------------------------------------------------------------------------
# Round trips and fuzzing

segments = st.text(st.characters(codec="utf-8", exclude_characters="/"), min_size=1, max_size=6)
clean_segments = segments.filter(lambda s: s not in (".", ".."))
prefixes = st.lists(clean_segments, min_size=1, max_size=3).map(
    lambda parts: "/" + "".join(part + "/" for part in parts)
)
resource_versions = st.integers(-(2**63), 2**63 - 1).filter(lambda rv: rv != 0)


@given(
    prefix=prefixes,
    relative=st.lists(clean_segments, min_size=1, max_size=4).map("/".join),
    resource_version=resource_versions,
    cacher_style=st.booleans(),
)
def test_continue_token_round_trips_every_clean_key(
    prefix: str, relative: str, resource_version: int, cacher_style: bool
) -> None:
    key = prefix + relative
    minted_with = prefix[:-1] if cacher_style else prefix
    token = next_page_token(key, minted_with, resource_version)
    assert decode_continue(token, prefix) == (key + "\x00", resource_version)


@given(
    prefix=prefixes,
    parts=st.lists(clean_segments, min_size=2, max_size=4),
    bad=st.sampled_from(["", ".", ".."]),
    data=st.data(),
)
def test_continue_token_rejects_every_key_with_a_traversal_segment(
    prefix: str, parts: list[str], bad: str, data: st.DataObject
) -> None:
    # The bad segment goes before a good one (so never gets the "\x00"); an empty one never
    # first, since a leading "/" is simply the cacher-style form.
    at = data.draw(st.integers(1 if bad == "" else 0, len(parts) - 1))
    relative = "/".join([*parts[:at], bad, *parts[at:]])
    token = next_page_token(prefix + relative, prefix, 1)
    assert decode_error(token, prefix).detail == relative + "\x00"


def assert_result_or_continue_token_error(token: str) -> None:
    try:
        from_key, resource_version = decode_continue(token, PREFIX)
    except ContinueTokenError as err:
        assert err.code == 400
        assert err.message == MESSAGE_START + err.detail
        return
    assert resource_version != 0
    assert from_key.startswith(PREFIX)
    rest = "/" + from_key[len(PREFIX) :]
    assert _clean_path(rest) == rest


@given(st.text())
def test_any_text_token_gives_a_key_or_continue_token_error(token: str) -> None:
    assert_result_or_continue_token_error(token)


@given(st.binary())
def test_any_base64_token_gives_a_key_or_continue_token_error(payload: bytes) -> None:
    assert_result_or_continue_token_error(b64(payload))


json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)


@given(
    st.dictionaries(
        st.sampled_from(["v", "rv", "start", "V", "RV", "Start", "x"]) | st.text(max_size=6),
        json_values,
    ),
    st.booleans(),
)
def test_any_json_token_gives_a_key_or_continue_token_error(
    members: dict[str, Any], truncate: bool
) -> None:
    text = json.dumps(members)
    assert_result_or_continue_token_error(b64(text[:-1] if truncate else text))


# ---------------------------------------------------------------------------------------------
# The native fast path (watchcache._core) agrees with the general Python codec


def general_encoding(start: str, resource_version: int) -> str:
    text = gojson.dumps({"v": CONTINUE_TOKEN_VERSION, "rv": resource_version, "start": start})
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode("ascii")


# Every code point, lone surrogates included (what a key decoded with surrogateescape holds).
any_start = st.text(st.characters(codec=None, exclude_categories=()))
int64s = st.integers(-(2**63), 2**63 - 1)


@given(start=any_start, resource_version=int64s)
def test_native_encoding_is_the_general_encoding_or_declines(
    start: str, resource_version: int
) -> None:
    native = _core.encode_continue_token(start, resource_version)
    has_lone_surrogate = any(0xD800 <= ord(c) <= 0xDFFF for c in start)
    if has_lone_surrogate:
        assert native is None
    else:
        assert native == general_encoding(start, resource_version)


@pytest.mark.parametrize(
    "start", ["<>&", "\u2028\u2029", '"\\', "\x00\x01\x1f\x7f", "\b\f\n\r\t", "é€😀", "a/b"]
)
def test_native_encoding_escapes_as_go_does(start: str) -> None:
    assert _core.encode_continue_token(start, 7) == general_encoding(start, 7)


@given(start=any_start, resource_version=int64s.filter(bool))
def test_native_decoding_reads_every_token_go_writes(start: str, resource_version: int) -> None:
    token = general_encoding(start, resource_version)
    native = _core.decode_continue_token(token)
    general = _unmarshal(_decode_base64(token))
    # A lone surrogate (an invalid byte) is written as the escape \ufffd, as Go does.
    written = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in start)
    assert native == (resource_version, written) == general[1:]


@pytest.mark.parametrize(
    "json_text",
    [
        '{"v":"meta.k8s.io/v1","rv":5,"start":"a"} ',  # trailing space
        '{"rv":5,"v":"meta.k8s.io/v1","start":"a"}',  # member order
        '{"v":"meta.k8s.io/v1","rv":05,"start":"a"}',  # leading zero
        '{"v":"meta.k8s.io/v1","rv":0,"start":"a"}',
        '{"v":"meta.k8s.io/v1","rv":9223372036854775808,"start":"a"}',  # outside int64
        '{"v":"meta.k8s.io/v1","rv":5,"start":"\\ud800"}',  # lone surrogate escape
        '{"v":"meta.k8s.io/v1","rv":5,"start":"\\x"}',  # unknown escape
        '{"v":"meta.k8s.io/v1","rv":5,"start":"a\tb"}',  # raw control character
        '{"v":"meta.k8s.io/v1","rv":5,"start":"a"',  # truncated
        '{"v":"meta.k8s.io/v2","rv":5,"start":"a"}',
    ],
)
def test_native_decoding_declines_every_other_shape(json_text: str) -> None:
    assert _core.decode_continue_token(b64(json_text)) is None


@pytest.mark.parametrize(
    "token", ["", "e", "ey=J", "eyJ2\nIjoi", "é", TOKEN_RV_12345 + "=", TOKEN_RV_12345[:-1] + "*"]
)
def test_native_decoding_declines_what_is_not_plain_base64url(token: str) -> None:
    assert _core.decode_continue_token(token) is None


@given(st.text())
def test_native_decoding_of_any_text_agrees_with_the_general_path(token: str) -> None:
    native = _core.decode_continue_token(token)
    if native is None:
        return
    assert _unmarshal(_decode_base64(token)) == (CONTINUE_TOKEN_VERSION, *native)


@given(st.binary())
def test_native_decoding_of_any_payload_agrees_with_the_general_path(payload: bytes) -> None:
    token = b64(payload)
    native = _core.decode_continue_token(token)
    if native is not None:
        assert _unmarshal(_decode_base64(token)) == (CONTINUE_TOKEN_VERSION, *native)


def test_native_functions_decline_wrong_types() -> None:
    assert _core.encode_continue_token(b"a", 1) is None
    assert _core.encode_continue_token("a", 1.0) is None
    assert _core.encode_continue_token("a", True) is None
    assert _core.encode_continue_token("a", 2**64) is None
    assert _core.decode_continue_token(b"abcd") is None


def _outcome(fn: Callable[[], str]) -> tuple[str, str]:
    try:
        return ("token", fn())
    except (TypeError, ValueError) as err:
        return (type(err).__name__, str(err))


@given(
    last_key=st.text(max_size=40),
    key_prefix=st.text(max_size=10),
    resource_version=st.one_of(st.integers(-(2**64), 2**64), st.booleans()),
)
def test_next_page_token_is_encode_continue_of_the_next_key(
    last_key: str, key_prefix: str, resource_version: int
) -> None:
    # next_page_token has its own fast path; it must answer (or fail) exactly as the
    # general encoder does for the key right after last_key.
    assert _outcome(lambda: next_page_token(last_key, key_prefix, resource_version)) == _outcome(
        lambda: encode_continue(last_key + "\x00", key_prefix, resource_version)
    )
