"""Continue tokens: the opaque ``continue`` value of a paginated LIST, exactly as Kubernetes.

Design note
-----------
A token is base64url without padding of the JSON ``{"v":"meta.k8s.io/v1","rv":<int64>,
"start":"<key relative to the key prefix>"}`` (docs/semantics.md §1). Clients treat it as
opaque, but it is public API all the same: a token minted here must be accepted by a Go
apiserver and the other way round, and tests compare our tokens with recorded Kubernetes
ones byte for byte. So the module keeps one invariant in each direction:

* encoding writes the bytes Go writes: :func:`watchcache.wire.gojson.dumps` for the JSON (Go's
  escapes, member order of the Go struct), then the URL-safe alphabet with no ``=``;
* decoding accepts exactly what Kubernetes' ``DecodeContinue`` accepts and fails, in the same
  order of checks, with the same message for everything but malformed JSON; the key it
  returns always starts with the caller's prefix and cannot climb out of it.

Why the decoding is hand-written rather than ``base64.urlsafe_b64decode`` + ``json.loads``:
Python's decoders are lenient where Go is strict and strict where Go is lenient. Go's
``RawURLEncoding`` rejects ``=`` and any character outside the alphabet (naming its byte
offset) but skips CR and LF; Python's discards unknown characters. Go's ``json.Unmarshal``
into the token struct matches member names case-insensitively (with Unicode simple folding,
so ``START`` and even U+017F LONG S + ``tart`` are ``start``), lets the last duplicate win
except that ``null`` changes nothing, ignores unknown members, replaces each invalid UTF-8
byte and each unpaired surrogate escape with U+FFFD, and nests up to 10 000 levels;
``json.loads`` is case-sensitive, accepts ``NaN``, and stops at Python's recursion limit.
Hence: a regular expression finds the first bad base64 character, and a small iterative JSON
scanner (one regular expression per JSON token, an explicit stack, no recursion) validates
the whole text before the members are interpreted, as Go's ``checkValid`` does.

Which prefix (docs/semantics.md §1.4): the etcd store encodes relative to ``/registry/pods/ns/``
(``start`` has no leading slash), the cacher relative to the registry key ``/pods/ns``
(``start`` begins with ``/``). Decoding prepends ``/`` when missing, so both decode to the
same key under any prefix that ends with ``/``. Never compare tokens textually.

The fast path is native: tokens in the canonical shape (the one Go and this module write,
so every real one) are encoded and decoded by ``watchcache._core`` in one pass
(``cpp/include/watchcache/continue_token.hpp``), which answers None for anything else, good
or bad; the Python code below then handles it and alone decides what is an error. Why: a
paged LIST decodes one token and mints one per page, and the Python codec (json, base64,
re) costs several microseconds each, more right after a large page body has gone through
the core's caches: most of the Python left in a page (``make bench``, the pagination
scenario, shows the per-page time).

Costs: all functions are O(n) in the length of the key or token. A canonical token (about
100 bytes) takes well under a microsecond; any other a few microseconds, and a hostile one
about a microsecond per JSON token it contains, with no more memory than a few copies of
its text. Pure functions on immutable values: thread-safe.

Callers: the cache and the etcd store mint tokens with :func:`next_page_token`, the planner
mints the ``rv=-1`` token of an expired continuation with :func:`encode_continue`; list
option validation and the cache decode them with :func:`parse_continue` /
:func:`decode_continue` and answer 400 with the :class:`ContinueTokenError`.
"""

from __future__ import annotations

import base64
import codecs
import json
import re
from dataclasses import dataclass
from typing import Final, NamedTuple

from watchcache import _core
from watchcache.wire import gojson
from watchcache.wire.errors import ContinueTokenError
from watchcache.wire.gostrconv import INT64_MAX, INT64_MIN, parse_int64

__all__ = [
    "CONTINUE_TOKEN_VERSION",
    "ContinueToken",
    "decode_continue",
    "encode_continue",
    "next_page_token",
    "parse_continue",
]

#: The only token version Kubernetes has ever written or accepts.
CONTINUE_TOKEN_VERSION: Final = "meta.k8s.io/v1"


@dataclass(frozen=True, slots=True)
class ContinueToken:
    """The members of a token that passed every check but the traversal check.

    ``resource_version`` is never 0; negative (``-1``) means "continue at the latest
    revision". ``start`` is never empty and is relative to the key prefix it was minted with.
    """

    resource_version: int
    start: str


def encode_continue(key: str, key_prefix: str, resource_version: int) -> str:
    """Kubernetes' ``EncodeContinue``: the token that resumes a LIST at ``key``.

    ``key_prefix`` is removed once from the front of ``key``; the remainder is the token's
    ``start``. Raises ValueError ``unable to encode next field: the key and key prefix do not
    match`` when ``key`` does not start with ``key_prefix`` or the prefix is empty (Go detects
    the mismatch as "stripping changed nothing", which an empty prefix never does), ValueError
    for a ``resource_version`` outside int64, TypeError for a non-int one. O(len(key)).

    Byte-exact with Go for every key that is valid Unicode. A lone surrogate (what a key
    decoded with ``surrogateescape`` holds for an invalid byte) decodes back as U+FFFD, as in
    Go, but ``gojson`` writes it as that character where Go writes the escape ``\\ufffd``.
    """
    if isinstance(resource_version, bool) or not isinstance(resource_version, int):
        raise TypeError(f"resource_version must be int, not {type(resource_version).__name__}")
    if not INT64_MIN <= resource_version <= INT64_MAX:
        raise ValueError(f"resource_version {resource_version} is outside int64")
    if not key_prefix or not key.startswith(key_prefix):
        raise ValueError("unable to encode next field: the key and key prefix do not match")
    start = key[len(key_prefix) :]
    token = _core.encode_continue_token(start, resource_version)
    if token is not None:
        return token
    text = gojson.dumps({"v": CONTINUE_TOKEN_VERSION, "rv": resource_version, "start": start})
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode("ascii")


def next_page_token(last_key: str, key_prefix: str, resource_version: int) -> str:
    """The token for the page after ``last_key``: it starts at ``last_key + "\\x00"``, the
    smallest key greater than ``last_key``. Same errors and cost as :func:`encode_continue`.
    """
    # Every page with a next one comes through here: the usual case goes straight to the
    # native encoder; encode_continue is the general path and owns the errors.
    if (
        type(resource_version) is int
        and key_prefix
        and last_key.startswith(key_prefix)
        and INT64_MIN <= resource_version <= INT64_MAX
    ):
        token = _core.encode_continue_token(last_key[len(key_prefix) :] + "\x00", resource_version)
        if token is not None:
            return token
    return encode_continue(last_key + "\x00", key_prefix, resource_version)


def parse_continue(token: str) -> ContinueToken:
    """Checks 1-5 of ``DecodeContinue`` (docs/semantics.md §1.3), in Kubernetes' order.

    base64, JSON, version, ``rv != 0``, non-empty ``start``; the first that fails raises
    ContinueTokenError. The traversal check needs the request's key prefix and is left to
    :func:`decode_continue`. TypeError if ``token`` is not a str; any str gives a token or
    ContinueTokenError. O(len(token)).
    """
    if not isinstance(token, str):
        raise _not_a_str(token)
    canonical = _core.decode_continue_token(token)
    if canonical is not None and canonical[1]:
        return ContinueToken(*canonical)
    return _parse_general(token)


def _parse_general(token: str) -> ContinueToken:
    """:func:`parse_continue` for a token the native decoder does not take: every shape Go
    accepts, and the judge of every error."""
    version, resource_version, start = _unmarshal(_decode_base64(token))
    if version != CONTINUE_TOKEN_VERSION:
        # Go formats this one with "%w %v": a space, and nothing after it when v is empty.
        raise ContinueTokenError(f"server does not recognize this encoded version {version}")
    if resource_version == 0:
        raise ContinueTokenError(
            f"incorrect encoded start resourceVersion (version {CONTINUE_TOKEN_VERSION})"
        )
    if not start:
        raise ContinueTokenError(f"encoded start key empty (version {CONTINUE_TOKEN_VERSION})")
    return ContinueToken(resource_version, start)


def _not_a_str(token: object) -> TypeError:
    return TypeError(f"continue token must be str, not {type(token).__name__}")


def decode_continue(token: str, key_prefix: str) -> tuple[str, int]:
    """Kubernetes' ``DecodeContinue``: ``(from_key, resource_version)`` for a LIST under
    ``key_prefix`` (which should end with ``/``, e.g. ``/registry/pods/ns/``).

    After :func:`parse_continue`, the start key gets a leading ``/`` if it has none and must
    be a clean path (Go's ``path.Clean`` leaves it unchanged): no ``.`` or ``..`` segment,
    no ``//``, no trailing ``/`` except the root. Otherwise ContinueTokenError whose detail
    is the start key. ``from_key`` is ``key_prefix`` plus that path without its leading
    ``/``: a token can only point inside the prefix of the request presenting it, whatever
    prefix it was minted with. ``start: "/"`` lists from ``key_prefix`` itself. TypeError
    for a non-str token. O(len(token)).
    """
    # Every continued page comes through here: the canonical shape goes without a
    # ContinueToken or a call per check, as parse_continue's first step.
    if not isinstance(token, str):
        raise _not_a_str(token)
    canonical = _core.decode_continue_token(token)
    if canonical is not None and canonical[1]:
        resource_version, start = canonical
    else:
        parsed = _parse_general(token)
        resource_version, start = parsed.resource_version, parsed.start
    path = start if start.startswith("/") else "/" + start
    if not _is_clean_rooted(path):
        raise ContinueTokenError(start)
    return key_prefix + path[1:], resource_version


# ---------------------------------------------------------------------------------------------
# Path cleaning (Go's path.Clean)


def _is_clean_rooted(path: str) -> bool:
    """``_clean_path(path) == path`` for a path starting with ``/``, without building the
    cleaned path: nothing to collapse, drop or resolve, and no trailing ``/``."""
    if path == "/":
        return True
    if path.endswith(("/", "/.", "/..")):
        return False
    return "//" not in path and "/./" not in path and "/../" not in path


def _clean_path(path: str) -> str:
    """Go's ``path.Clean``: collapse ``//``, drop ``.``, resolve ``..`` lexically (at the
    root it stays at the root), no trailing ``/`` but for ``"/"``, ``""`` becomes ``"."``.

    Not ``posixpath.normpath``, which keeps a leading ``//`` (POSIX leaves its meaning to
    the implementation), so it would accept the start key ``//a`` that Kubernetes rejects.
    """
    rooted = path.startswith("/")
    kept: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment != "..":
            kept.append(segment)
        elif kept and kept[-1] != "..":
            kept.pop()
        elif not rooted:
            kept.append("..")
    if rooted:
        return "/" + "/".join(kept)
    return "/".join(kept) or "."


# ---------------------------------------------------------------------------------------------
# base64 (Go's base64.RawURLEncoding, not strict)

# Go's decoder walks the text once and stops at the first byte that is neither in the
# alphabet nor CR/LF (so "=" too: this encoding has no padding). Every character before that
# one is ASCII, so its index in the str is its byte offset in Go's string.
_NOT_BASE64: Final = re.compile(r"[^A-Za-z0-9_\-\r\n]")


def _decode_base64(token: str) -> bytes:
    bad = _NOT_BASE64.search(token)
    if bad is not None:
        raise ContinueTokenError(f"illegal base64 data at input byte {bad.start()}")
    digits = token.replace("\r", "").replace("\n", "")
    if len(digits) % 4 == 1:
        # One digit carries 6 bits, less than a byte. Go notices it when the input ends in
        # the middle of the last quantum and reports the offset of the input's last byte.
        raise ContinueTokenError(f"illegal base64 data at input byte {len(token) - 1}")
    # Validated, so Python's decoder sees only alphabet characters; like Go (non-strict) it
    # ignores the unused low bits of the last digit.
    return base64.urlsafe_b64decode(digits + "=" * (-len(digits) % 4))


# ---------------------------------------------------------------------------------------------
# JSON (Go's json.Unmarshal into struct {V string "v"; RV int64 "rv"; Start string "start"})

_GO_UTF8: Final = "watchcache.wire.tokens.go-utf8"


def _replace_one_byte(error: UnicodeError) -> tuple[str, int]:
    # Go turns each byte that does not start a valid UTF-8 sequence into one U+FFFD and goes
    # on with the next byte: b"\xe2\x82A" is two U+FFFD and "A". Python's "replace" would
    # give one U+FFFD for the whole truncated sequence.
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return "\ufffd", error.start + 1


codecs.register_error(_GO_UTF8, _replace_one_byte)

_MAX_DEPTH: Final = 10_000  # Go's encoding/json maxNestingDepth
_WHITESPACE: Final = re.compile(r"[ \t\r\n]*")
# The longest valid prefix of a string's contents: characters other than '"', '\' and
# controls, and the escapes Go knows. Unrolled so the engine never backtracks.
_STRING_BODY: Final = re.compile(
    r'[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9A-Fa-f]{4})[^"\\\x00-\x1f]*)*'
)
# ASCII digits only: "\d" would also match other scripts' digits, which Go rejects.
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_LITERALS: Final = {"t": ("true", "bool"), "f": ("false", "bool"), "n": ("null", "null")}
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")

# Go matches member names with Unicode simple case folding. The only characters outside
# ASCII that fold to an ASCII letter are U+017F (long s, folds with "s") and U+212A (Kelvin
# sign, with "k"); anything else non-ASCII can never match the ASCII names "v", "rv",
# "start". (str.upper/casefold would be wrong: dotless i, U+0131, uppercases to "I" and the
# ligature U+FB05 casefolds to "st", yet Go matches neither with "i" or "s".)
_FOLD: Final = str.maketrans(
    {**{chr(c): chr(c + 32) for c in range(ord("A"), ord("Z") + 1)}, "\u017f": "s", "\u212a": "k"}
)
_FIELDS: Final = frozenset({"v", "rv", "start"})
_LONGEST_FIELD: Final = len("start")


class _Value(NamedTuple):
    """A JSON value as Go's error messages name its type; ``text`` only for scalars."""

    kind: str  # "object", "array", "string", "number", "bool" or "null"
    text: str


def _unmarshal(data: bytes) -> tuple[str, int, str]:
    """``(v, rv, start)`` as Go's ``json.Unmarshal`` leaves them in a zeroed struct."""
    top, members = _scan(data.decode("utf-8", _GO_UTF8))
    version, resource_version, start = "", 0, ""
    if top.kind == "null":
        return version, resource_version, start
    if top.kind != "object":
        raise ContinueTokenError(
            f"json: cannot unmarshal {top.kind} into Go value of type storage.continueToken"
        )
    # Go keeps going after a type error (later members still assign) but reports the first.
    problem = ""
    for raw_key, value in members:
        if len(raw_key) - 2 > _LONGEST_FIELD and "\\" not in raw_key:
            continue  # cannot be a field name: skip decoding it
        field = _string(raw_key).translate(_FOLD)
        if field not in _FIELDS or value.kind == "null":
            continue  # unknown members are ignored; null leaves the field as it was
        if field == "rv":
            number = _int64(value)
            if number is None:
                shown = f"number {value.text}" if value.kind == "number" else value.kind
                problem = problem or _type_problem(shown, "rv", "int64")
            else:
                resource_version = number
        elif value.kind != "string":
            problem = problem or _type_problem(value.kind, field, "string")
        elif field == "v":
            version = _string(value.text)
        else:
            start = _string(value.text)
    if problem:
        raise ContinueTokenError(problem)
    return version, resource_version, start


def _type_problem(shown: str, field: str, go_type: str) -> str:
    target = f"Go struct field continueToken.{field} of type {go_type}"
    return f"json: cannot unmarshal {shown} into {target}"


def _int64(value: _Value) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)`` on a JSON number: no fraction, no exponent,
    within int64 (``-0`` is 0)."""
    if value.kind != "number":
        return None
    number, problem = parse_int64(value.text)
    return None if problem else number


def _string(raw: str) -> str:
    """The value of a string literal that :func:`_scan` validated, with Go's replacement of
    unpaired surrogate escapes (``"\\ud800"``) by U+FFFD; pairs are joined as in Go."""
    if "\\" not in raw:
        return raw[1:-1]
    text: str = json.loads(raw)
    return _LONE_SURROGATE.sub("\ufffd", text)


def _scan(text: str) -> tuple[_Value, list[tuple[str, _Value]]]:
    """Validate ``text`` as exactly one JSON value, as Go's scanner does before decoding.

    Returns the top-level value and, when it is an object, its members in order as
    ``(raw key literal, value)``; deeper levels are only checked. Raises ContinueTokenError
    at the first syntax error. Iterative, so depth is limited by Go's 10 000, not by the
    Python stack.
    """
    end = len(text)
    stack: list[str] = []  # the open containers, "{" or "["
    members: list[tuple[str, _Value]] = []
    top = _Value("null", "")
    key = ""  # raw literal of the top-level member whose value comes next
    pos = _skip(text, 0)
    while True:
        # A value starts at pos.
        if pos >= end:
            raise _unexpected_end()
        char = text[pos]
        if char in "{[":
            if len(stack) >= _MAX_DEPTH:
                raise _invalid(char, "exceeded max depth")
            value = _Value("object" if char == "{" else "array", "")
            pos = _skip(text, pos + 1)
            closer = "}" if char == "{" else "]"
            opened = pos >= end or text[pos] != closer
            if opened and char == "{":
                pos, literal = _member_key(text, pos)
                if not stack:
                    key = literal
        else:
            pos, value = _scalar(text, pos)
            opened = False
        if not stack:
            top = value
        elif len(stack) == 1 and stack[0] == "{":
            members.append((key, value))
        if opened:
            stack.append(char)
            continue
        if char in "{[":
            pos += 1  # the closer of an empty container
        # After a value: close containers until a ',' announces the next value.
        while True:
            pos = _skip(text, pos)
            if not stack:
                if pos < end:
                    raise _invalid(text[pos], "after top-level value")
                return top, members
            if pos >= end:
                raise _unexpected_end()
            char = text[pos]
            if stack[-1] == "{":
                if char == ",":
                    pos, literal = _member_key(text, _skip(text, pos + 1))
                    if len(stack) == 1:
                        key = literal
                    break
                if char != "}":
                    raise _invalid(char, "after object key:value pair")
            else:
                if char == ",":
                    pos = _skip(text, pos + 1)
                    break
                if char != "]":
                    raise _invalid(char, "after array element")
            stack.pop()
            pos += 1


def _skip(text: str, pos: int) -> int:
    if pos < len(text) and text[pos] in " \t\r\n":
        match = _WHITESPACE.match(text, pos)
        assert match is not None  # the pattern matches the empty string
        return match.end()
    return pos


def _member_key(text: str, pos: int) -> tuple[int, str]:
    """Read ``"key" :`` at ``pos``; return the position of the value and the key literal."""
    if pos >= len(text):
        raise _unexpected_end()
    if text[pos] != '"':
        raise _invalid(text[pos], "looking for beginning of object key string")
    after = _string_end(text, pos)
    colon = _skip(text, after)
    if colon >= len(text):
        raise _unexpected_end()
    if text[colon] != ":":
        raise _invalid(text[colon], "after object key")
    return _skip(text, colon + 1), text[pos:after]


def _scalar(text: str, pos: int) -> tuple[int, _Value]:
    char = text[pos]
    if char == '"':
        after = _string_end(text, pos)
        return after, _Value("string", text[pos:after])
    if char == "-" or "0" <= char <= "9":
        return _number(text, pos)
    if char in _LITERALS:
        word, kind = _LITERALS[char]
        for offset in range(1, len(word)):
            at = pos + offset
            if at >= len(text):
                raise _unexpected_end()
            if text[at] != word[offset]:
                raise _invalid(text[at], f"in literal {word} (expecting {_quote(word[offset])})")
        return pos + len(word), _Value(kind, word)
    raise _invalid(char, "looking for beginning of value")


def _number(text: str, pos: int) -> tuple[int, _Value]:
    match = _NUMBER.match(text, pos)
    if match is None:  # a '-' with no digit after it
        raise _expected_digit(text, pos + 1, "in numeric literal")
    after = match.end()
    # The pattern stops before a '.' or an exponent it cannot complete ("1.", "1e+");
    # Go fails inside the number there, not after it.
    if after < len(text):
        if text[after] == "." and match.group(1) is None and match.group(2) is None:
            raise _expected_digit(text, after + 1, "after decimal point in numeric literal")
        if text[after] in "eE" and match.group(2) is None:
            sign = after + 1 < len(text) and text[after + 1] in "+-"
            raise _expected_digit(text, after + 1 + sign, "in exponent of numeric literal")
    return after, _Value("number", match.group())


def _expected_digit(text: str, pos: int, context: str) -> ContinueTokenError:
    if pos >= len(text):
        return _unexpected_end()
    return _invalid(text[pos], context)


def _string_end(text: str, pos: int) -> int:
    """The position after the string literal that opens at ``pos``."""
    body = _STRING_BODY.match(text, pos + 1)
    assert body is not None  # the pattern matches the empty string
    at = body.end()
    if at < len(text) and text[at] == '"':
        return at + 1
    # The body stopped early: say why, as Go's scanner would at that character.
    if at >= len(text):
        raise _unexpected_end()
    if text[at] != "\\":
        raise _invalid(text[at], "in string literal")
    if at + 1 >= len(text):
        raise _unexpected_end()
    if text[at + 1] != "u":
        raise _invalid(text[at + 1], "in string escape code")
    for digit in range(at + 2, at + 6):
        if digit >= len(text):
            raise _unexpected_end()
        if text[digit] not in "0123456789abcdefABCDEF":
            raise _invalid(text[digit], "in \\u hexadecimal character escape")
    raise AssertionError("unreachable: the escape was valid")


def _invalid(char: str, context: str) -> ContinueTokenError:
    return ContinueTokenError(f"invalid character {_quote(char)} {context}")


def _unexpected_end() -> ContinueTokenError:
    return ContinueTokenError("unexpected end of JSON input")


def _quote(char: str) -> str:
    """A character quoted as Go's JSON errors do: ``'x'``, ``'\\n'``, ``'\\''``."""
    if char == "'":
        return "'\\''"
    if char == '"':
        return "'\"'"
    return "'" + json.dumps(char)[1:-1] + "'" if char < " " else f"'{char}'"
