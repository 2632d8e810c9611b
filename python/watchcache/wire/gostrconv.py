"""Go's ``strconv`` as Kubernetes' messages and parsers depend on it: integer parsing,
boolean query values and ``%q`` quoting.

Why a module of its own: Python's ``int()`` accepts what Go refuses (``" 1"``, ``"1_0"``,
other scripts' digits), and a number Go would refuse must be refused here with Go's words,
or a client sees a different status for the same request. Every parser of numbers a client
sends (query members, resource versions, label selector values, continue tokens, etcd
versions) goes through these functions.

Costs: O(len(text)); the length of a digit string is checked before ``int()`` converts it.
Pure functions; safe from any thread.
"""

from __future__ import annotations

import re
from typing import Final

UINT64_MAX: Final = 2**64 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
#: The last part of Go's ``*strconv.NumError`` for text that is not a number.
SYNTAX: Final = "invalid syntax"
#: The same for a number outside the type's range.
RANGE: Final = "value out of range"

_DIGITS: Final = re.compile(r"[0-9]*")


def parse_uint64(text: str) -> tuple[int, str | None]:
    """Go ``strconv.ParseUint(text, 10, 64)``: (value, None) or (0, :data:`SYNTAX` or
    :data:`RANGE`).

    Go scans left to right and stops at the first problem, so ``"99999999999999999999x"``
    overflows (range) before it reaches the ``x`` (syntax).
    """
    match = _DIGITS.match(text)
    prefix = match.group() if match is not None else ""
    significant = prefix.lstrip("0")
    # The length test comes first: int() of a huge digit string is slow (and capped).
    if len(significant) > 20 or (significant and int(significant) > UINT64_MAX):
        return 0, RANGE
    if not text or len(prefix) != len(text):
        return 0, SYNTAX
    return int(prefix), None


def parse_int64(text: str) -> tuple[int, str | None]:
    """Go ``strconv.ParseInt(text, 10, 64)``: optional sign, ASCII digits, int64 range."""
    negative = text.startswith("-")
    body = text[1:] if text[:1] in ("+", "-") else text
    if not text:
        return 0, SYNTAX
    value, problem = parse_uint64(body)
    if problem == SYNTAX:
        return 0, SYNTAX
    if negative:
        value = -value
    if problem is not None or not INT64_MIN <= value <= INT64_MAX:
        return 0, RANGE
    return value, None


def is_int64(text: str) -> bool:
    """Whether Go's ``strconv.ParseInt(text, 10, 64)`` accepts ``text``."""
    return parse_int64(text)[1] is None


def is_uint64(text: str) -> bool:
    """Whether Go's ``strconv.ParseUint(text, 10, 64)`` accepts ``text``."""
    return parse_uint64(text)[1] is None


def is_go_false(text: str) -> bool:
    """apimachinery's query rule for a bool: ``"0"``, or ``"false"`` under Go's
    ``strings.EqualFold`` (simple case folding); anything else, ``""`` included, is true."""
    return text == "0" or (
        len(text) == 5
        and text[0] in "fF"
        and text[1] in "aA"
        and text[2] in "lL"
        and text[3] in "sS\u017f"  # U+017F LATIN SMALL LETTER LONG S folds to "s"
        and text[4] in "eE"
    )


_GO_SHORT_ESCAPES: Final = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    '"': '\\"',
    "\\": "\\\\",
}


def go_quote(text: str) -> str:
    """Go's ``strconv.Quote`` (and ``%q``): printable characters stay, others are escaped.

    Python's ``str.isprintable`` and Go's ``unicode.IsPrint`` reject the same categories
    (C*, and Z* except the space). A lone surrogate stands for bytes that were not UTF-8:
    U+DC80..U+DCFF (``surrogateescape``) is the byte itself, written ``\\xHH`` as Go does.
    """
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    out = ['"']
    for ch in text:
        escape = _GO_SHORT_ESCAPES.get(ch)
        if escape is not None:
            out.append(escape)
            continue
        if ch.isprintable():
            out.append(ch)
            continue
        code = ord(ch)
        if code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.extend(f"\\x{byte:02x}" for byte in ch.encode("utf-8", "surrogatepass"))
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)
