"""The ``format`` values a CRD schema may use, checked as kube-openapi's ``strfmt`` does.

Design note
-----------
A string with a known ``format`` is checked by kube-openapi's format registry
(``strfmt.Default``): ``date-time`` by its RFC 3339 test, ``uri`` by Go's
``url.ParseRequestURI``, ``ipv4`` by k8s.io/utils' sloppy ``ParseIP``, and so on. Before a
schema is used for custom objects, the apiextensions server removes formats it does not
support (``StripUnsupportedFormatsPostProcessor``): on strings (or untyped nodes) only
the names below are kept (compared without dashes, so ``date-time`` and ``datetime`` are
the same format), on integers only ``int32``/``int64``, on numbers ``float``/``double``,
and nothing on other types. :func:`effective_format` is that rule; :func:`checker` gives
the test for a kept string format.

Each test is a port of the Go function it replaces, on the same definitions (Go's
``\\d`` and ``\\s`` are ASCII, lengths are in bytes), so a value that Kubernetes accepts
is accepted here and the reverse. Two are approximations, said where they are: ``email``
(Go's ``net/mail`` parser; comments in addresses are not supported here) and
``hostname`` (Unicode letters and symbols by Python's Unicode tables).

All patterns are compiled at import; every test is linear in the value. Pure functions;
safe from any thread. Callers: ``registry.structural`` (compiling a schema) and
``registry.crd_validation``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Final

from watchcache.wire.gotime import TimeParseError, parse_duration

__all__ = ["SUPPORTED_STRING_FORMATS", "checker", "effective_format", "normalize"]

#: Every string format the server validates (apiextensions' supported formats at
#: Kubernetes 1.34 and later), without dashes.
SUPPORTED_STRING_FORMATS: Final = frozenset(
    {
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "duration",
        "datetime",
        "k8sshortname",
        "k8slongname",
    }
)


def normalize(name: str) -> str:
    """strfmt's name normalization: dashes removed."""
    return name.replace("-", "")


def effective_format(schema_type: str, fmt: str) -> str:
    """The format left on a node of ``schema_type`` (``""`` when the node's type is not
    exactly one) after apiextensions strips what it does not support."""
    if not fmt:
        return ""
    if schema_type in ("", "string"):
        return fmt if normalize(fmt) in SUPPORTED_STRING_FORMATS else ""
    if schema_type == "integer":
        return fmt if fmt in ("int32", "int64") else ""
    if schema_type == "number":
        return fmt if fmt in ("float", "double") else ""
    return ""


# ---------------------------------------------------------------------------------------
# Patterns (Go's, with Go's ASCII \d and \s spelled out, and Go's end-of-text "$" as \Z)

_DIGIT: Final = "[0-9]"
_SPACE: Final = "[\\t\\n\\f\\r ]"
_UUID: Final = re.compile(
    "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\\Z", re.ASCII
)
_UUID3: Final = re.compile(
    "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}\\Z", re.ASCII
)
_UUID4: Final = re.compile(
    "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}\\Z", re.ASCII
)
_UUID5: Final = re.compile(
    "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}\\Z", re.ASCII
)
_CREDIT_CARD: Final = re.compile(
    "^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}"
    f"|3(?:0[0-5]|[68][0-9])[0-9]{{11}}|(?:2131|1800|35{_DIGIT}{{3}}){_DIGIT}{{11}})\\Z"
)
_ISBN10: Final = re.compile("^(?:[0-9]{9}X|[0-9]{10})\\Z")
_ISBN13: Final = re.compile("^(?:[0-9]{13})\\Z")
_HEX_COLOR: Final = re.compile("^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})\\Z")
_OCTET: Final = f"(0|[1-9]{_DIGIT}?|1{_DIGIT}{_DIGIT}?|2[0-4]{_DIGIT}|25[0-5])"
_RGB_COLOR: Final = re.compile(
    f"^rgb\\({_SPACE}*{_OCTET}{_SPACE}*,{_SPACE}*{_OCTET}{_SPACE}*,{_SPACE}*{_OCTET}{_SPACE}*\\)\\Z"
)
_BASE64: Final = re.compile(
    "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})\\Z"
)
_SSN: Final = re.compile(f"^{_DIGIT}{{3}}[- ]?{_DIGIT}{{2}}[- ]?{_DIGIT}{{4}}\\Z")
_NOT_NUMBER: Final = re.compile("[^0-9]+")
_SPACES_AND_MINUS: Final = re.compile(f"(?:{_SPACE}|-)+")
_DATE: Final = re.compile("([0-9]{4})-([0-9]{2})-([0-9]{2})")
# "." is Go's any-character-but-newline, as in strfmt's DateTimePattern.
_TIME: Final = re.compile(
    "^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))\\Z"
)
_DURATION_PART: Final = re.compile("(([0-9]+)[\\t\\n\\f\\r ]*([A-Za-z\u00b5]+))")
_SHORT_NAME: Final = re.compile("^[a-z0-9]([-a-z0-9]*[a-z0-9])?\\Z")
_LONG_NAME: Final = re.compile(
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\\Z"
)
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_DECIMAL: Final = frozenset("0123456789")


# ---------------------------------------------------------------------------------------
# Dates and durations


def _days_in(month: int, year: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def is_date(text: str) -> bool:
    """``time.Parse("2006-01-02", text)`` succeeds."""
    match = _DATE.fullmatch(text)
    if match is None:
        return False
    year, month, day = (int(g) for g in match.groups())
    return 1 <= month <= 12 and 1 <= day <= _days_in(month, year)


def is_date_time(text: str) -> bool:
    """strfmt's ``IsDateTime``: a date, a ``t`` (any case), and a time matched as text."""
    if len(text.encode()) < 4:
        return False
    parts = text.lower().split("t")
    if len(parts) < 2 or not is_date(parts[0]):
        return False
    match = _TIME.search(parts[1])
    if match is None:
        return False
    hour, minute, second = match.group(1, 2, 3)
    return hour <= "23" and minute <= "59" and second <= "59"


_DURATION_UNITS: Final = (
    ("ns", "nano"),
    ("us", "\u00b5s", "micro"),
    ("ms", "milli"),
    ("s", "sec"),
    ("m", "min"),
    ("h", "hr", "hour"),
    ("d", "day"),
    ("w", "wk", "week"),
)


def is_duration(text: str) -> bool:
    """strfmt's ``ParseDuration``: Go's durations, or Scala-like ``3 days 4 hours``."""
    try:
        parse_duration(text)
    except (TimeParseError, ValueError, OverflowError):
        pass
    else:
        return True
    known = False
    for match in _DURATION_PART.finditer(text):
        if len(match.group(2)) > 18 and int(match.group(2)) > 2**63 - 1:
            return False  # strconv.Atoi fails, and so does the whole parse
        unit = match.group(3).lower().strip()
        for variants in _DURATION_UNITS:
            last = len(variants) - 1
            for i, variant in enumerate(variants):
                if (
                    i == last and unit.startswith(variant)
                ) or variant.casefold() == unit.casefold():
                    known = True
    return known


# ---------------------------------------------------------------------------------------
# Numbers with checksums


def is_credit_card(text: str) -> bool:
    sanitized = _NOT_NUMBER.sub("", text)
    if _CREDIT_CARD.search(sanitized) is None:
        return False
    total = 0
    double = False
    for digit in reversed(sanitized):
        value = int(digit)
        if double:
            value *= 2
            total += value % 10 + 1 if value >= 10 else value
        else:
            total += value
        double = not double
    return total % 10 == 0


def _is_isbn(text: str, version: int) -> bool:
    sanitized = _SPACES_AND_MINUS.sub("", text)
    if version == 10:
        if _ISBN10.search(sanitized) is None:
            return False
        checksum = sum((i + 1) * int(sanitized[i]) for i in range(9))
        checksum += 100 if sanitized[9] == "X" else 10 * int(sanitized[9])
        return checksum % 11 == 0
    if _ISBN13.search(sanitized) is None:
        return False
    checksum = sum((1, 3)[i % 2] * int(sanitized[i]) for i in range(12))
    return int(sanitized[12]) - (10 - checksum % 10) % 10 == 0


def is_ssn(text: str) -> bool:
    return len(text.encode()) == 11 and _SSN.search(text) is not None


def is_bson_object_id(text: str) -> bool:
    return len(text) == 24 and all(c in _HEX for c in text)


# ---------------------------------------------------------------------------------------
# Network addresses


def _dtoi(text: str) -> tuple[int, int] | None:
    """Go 1.16's ``dtoi``: a decimal prefix (value, length), None if none or too big."""
    value = 0
    i = 0
    while i < len(text) and text[i] in _DECIMAL:
        value = value * 10 + ord(text[i]) - 48
        if value >= 0xFFFFFF:
            return None
        i += 1
    return (value, i) if i else None


def _xtoi(text: str) -> tuple[int, int] | None:
    value = 0
    i = 0
    while i < len(text) and text[i] in _HEX:
        value = value * 16 + int(text[i], 16)
        if value >= 0xFFFFFF:
            return None
        i += 1
    return (value, i) if i else None


def _parse_ipv4(text: str, sloppy: bool) -> bool:
    parts = text.split(".")
    if len(parts) != 4:
        return False
    for part in parts:
        parsed = _dtoi(part)
        if parsed is None or parsed[1] != len(part) or parsed[0] > 0xFF:
            return False
        if not sloppy and len(part) > 1 and part[0] == "0":
            return False
    return True


def _parse_ipv6(text: str, sloppy: bool) -> bool:
    """Go's IPv6 parsing: ``sloppy`` is Go 1.16's (any number of hex digits, IPv4 parts
    with leading zeros), otherwise netip's (at most four hex digits, strict IPv4)."""
    size = 0
    ellipsis = -1
    rest = text
    if rest.startswith("::"):
        ellipsis = 0
        rest = rest[2:]
        if not rest:
            return True
    while size < 16:
        parsed = _xtoi(rest)
        if parsed is None or parsed[0] > 0xFFFF or (not sloppy and parsed[1] > 4):
            return False
        digits = parsed[1]
        if digits < len(rest) and rest[digits] == ".":
            if (ellipsis < 0 and size != 12) or size + 4 > 16:
                return False
            if not _parse_ipv4(rest, sloppy):
                return False
            rest = ""
            size += 4
            break
        size += 2
        rest = rest[digits:]
        if not rest:
            break
        if rest[0] != ":" or len(rest) == 1:
            return False
        rest = rest[1:]
        if rest[0] == ":":
            if ellipsis >= 0:
                return False
            ellipsis = size
            rest = rest[1:]
            if not rest:
                break
    if rest:
        return False
    if size < 16:
        return ellipsis >= 0
    return ellipsis < 0


def _parse_ip(text: str, sloppy: bool) -> bool:
    for char in text:
        if char == ".":
            return _parse_ipv4(text, sloppy)
        if char == ":":
            return _parse_ipv6(text, sloppy)
    return False


def is_ipv4(text: str) -> bool:
    """k8s.io/utils' ``ParseIPSloppy`` (leading zeros allowed) and a dot in the text."""
    return "." in text and _parse_ip(text, sloppy=True)


def is_ipv6(text: str) -> bool:
    """Go's ``net.ParseIP`` (no zone) and a colon in the text."""
    return ":" in text and _parse_ip(text, sloppy=False)


def is_cidr(text: str) -> bool:
    """k8s.io/utils' ``ParseCIDRSloppy``."""
    address, slash, mask = text.partition("/")
    if not slash:
        return False
    if _parse_ipv4(address, sloppy=True):
        bits = 32
    elif _parse_ipv6(address, sloppy=True):
        bits = 128
    else:
        return False
    parsed = _dtoi(mask)
    return parsed is not None and parsed[1] == len(mask) and parsed[0] <= bits


def _xtoi2(data: bytes, separator: int) -> bool:
    if len(data) > 2 and data[2] != separator:
        return False
    pair = data[:2]
    return len(pair) == 2 and all(chr(b) in _HEX for b in pair)


def is_mac(text: str) -> bool:
    """Go's ``net.ParseMAC``: 6, 8 or 20 octets as ``xx:xx``, ``xx-xx`` or ``xxxx.xxxx``."""
    data = text.encode()
    size = len(data)
    if size < 14:
        return False
    if data[2] in b":-":
        if (size + 1) % 3 != 0 or (size + 1) // 3 not in (6, 8, 20):
            return False
        return all(_xtoi2(data[x:], data[2]) for x in range(0, size, 3))
    if data[4] == ord("."):
        if (size + 1) % 5 != 0 or 2 * (size + 1) // 5 not in (6, 8, 20):
            return False
        for x in range(0, size, 5):
            if not (_xtoi2(data[x : x + 2], 0) and _xtoi2(data[x + 2 :], data[4])):
                return False
        return True
    return False


def _is_host_label_char(char: str) -> bool:
    if char.isascii():
        return char.isalnum()
    return unicodedata.category(char)[0] in "LS"


def is_hostname(text: str) -> bool:
    """strfmt's ``IsHostname``: RFC 1034 labels that may also hold Unicode letters and
    symbols, a top-level domain of 2 to 63 letters, 255 bytes at most, 63 per label."""
    if not text or len(text.encode()) > 255:
        return False
    labels = text.split(".")
    if any(len(label.encode()) > 63 for label in labels):
        return False
    if len(labels) == 1:
        # One label: a character, then an optional dash and up to 62 more characters.
        rest = text[1:]
        if not _is_host_label_char(text[0]):
            return False
        if rest.startswith("-"):
            rest = rest[1:]
        return len(rest) <= 62 and all(_is_host_label_char(c) for c in rest)
    top = labels[-1]
    if not 2 <= len(top) <= 63:
        return False
    if not all((c.isascii() and c.isalpha()) or unicodedata.category(c)[0] == "L" for c in top):
        return False
    for label in labels[:-1]:
        if not label or len(label) > 63 or not _is_host_label_char(label[0]):
            return False
        if len(label) > 1:
            inner, last = label[1:-1], label[-1]
            if not _is_host_label_char(last):
                return False
            if not all(c == "-" or _is_host_label_char(c) for c in inner):
                return False
    return True


# ---------------------------------------------------------------------------------------
# URIs (Go's url.ParseRequestURI)

_USERINFO_EXTRA: Final = frozenset("-._:~!$&'()*+,;=%@")
_HOST_EXTRA: Final = frozenset("-_.~!$&'()*+,;=:[]<>\"")


def _unescape(text: str, host: bool) -> bool:
    i = 0
    while i < len(text):
        char = text[i]
        if char == "%":
            if i + 2 >= len(text):
                return False
            pair = text[i + 1 : i + 3]
            if pair[0] not in _HEX or pair[1] not in _HEX:
                return False
            if host and int(pair[0], 16) < 8 and text[i : i + 3] != "%25":
                return False
            i += 3
            continue
        if host and char < "\x80" and not (char.isalnum() or char in _HOST_EXTRA):
            return False
        i += 1
    return True


def _valid_optional_port(port: str) -> bool:
    if not port:
        return True
    return port[0] == ":" and all(c in _DECIMAL for c in port[1:])


def _parse_host(host: str) -> bool:
    if host.startswith("["):
        end = host.rfind("]")
        if end < 0 or not _valid_optional_port(host[end + 1 :]):
            return False
        zone = host.find("%25", 0, end)
        if zone >= 0:
            return _unescape(host[:zone], True) and _unescape(host[zone:end], False)
        return _unescape(host, True)
    colon = host.rfind(":")
    if colon >= 0 and not _valid_optional_port(host[colon:]):
        return False
    return _unescape(host, True)


def _scheme(text: str) -> tuple[str, str] | None:
    for i, char in enumerate(text):
        if char.isascii() and char.isalpha():
            continue
        if (char.isascii() and char.isdigit()) or char in "+-.":
            if i == 0:
                return "", text
            continue
        if char == ":":
            if i == 0:
                return None
            return text[:i], text[i + 1 :]
        return "", text
    return "", text


def is_request_uri(text: str) -> bool:
    """Go's ``url.ParseRequestURI`` succeeds: an absolute URI or an absolute path."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text) or not text:
        return False
    if text == "*":
        return True
    scheme_rest = _scheme(text)
    if scheme_rest is None:
        return False
    scheme, rest = scheme_rest
    # A lone trailing "?" is an empty query (ForceQuery); otherwise the query is cut off.
    rest = rest[:-1] if rest.endswith("?") and rest.count("?") == 1 else rest.partition("?")[0]
    if not rest.startswith("/"):
        return bool(scheme)
    if scheme and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        at = authority.rfind("@")
        if not _parse_host(authority[at + 1 :]):
            return False
        if at >= 0:
            userinfo = authority[:at]
            if not all(c.isascii() and (c.isalnum() or c in _USERINFO_EXTRA) for c in userinfo):
                return False
            if not all(_unescape(part, False) for part in userinfo.split(":", 1)):
                return False
    return _unescape(rest, False)


# ---------------------------------------------------------------------------------------
# E-mail addresses (Go's net/mail.ParseAddress, without comments)

_ATEXT_SPECIALS: Final = frozenset('()<>[]:;@\\,".')


def _is_atext(char: str, dot: bool) -> bool:
    if char == ".":
        return dot
    if char in _ATEXT_SPECIALS:
        return False
    return "!" <= char <= "~" or ord(char) >= 0x80


def _dot_atom(text: str) -> bool:
    return bool(text) and all(
        part and all(_is_atext(c, False) for c in part) for part in text.split(".")
    )


def _quoted_string_end(text: str, start: int) -> int:
    """The index after the closing quote of the quoted string at ``start``, or -1."""
    i = start + 1
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == '"':
            return i + 1
        if char in "\r\n" or (ord(char) < 0x20 and char != "\t") or ord(char) == 0x7F:
            return -1
        i += 1
    return -1


def _addr_spec(text: str) -> bool:
    if text.startswith('"'):
        end = _quoted_string_end(text, 0)
        if end <= 1:
            return False
        local, rest = text[:end], text[end:]
        if local == '""':
            return False
    else:
        at = text.rfind("@")
        if at < 0:
            return False
        local, rest = text[:at], text[at:]
        if not _dot_atom(local):
            return False
    if not rest.startswith("@"):
        return False
    domain = rest[1:]
    if domain.startswith("["):
        return domain.endswith("]") and all(
            "!" <= c <= "~" and c not in "[]\\" for c in domain[1:-1]
        )
    return _dot_atom(domain)


def is_email(text: str) -> bool:
    """A single address as ``net/mail.ParseAddress`` reads it: ``local@domain`` or
    ``Display Name <local@domain>``."""
    stripped = text.strip(" \t")
    if _addr_spec(stripped):
        return True
    if not stripped.endswith(">"):
        return False
    open_at = stripped.rfind("<")
    if open_at < 0:
        return False
    name = stripped[:open_at].strip(" \t")
    if name and not (
        (name.startswith('"') and _quoted_string_end(name, 0) == len(name))
        or all(part and all(_is_atext(c, True) for c in part) for part in name.split())
    ):
        return False
    return _addr_spec(stripped[open_at + 1 : -1])


# ---------------------------------------------------------------------------------------
# The registry


def _always(_: str) -> bool:
    return True


_CHECKERS: Final[dict[str, Callable[[str], bool]]] = {
    "bsonobjectid": is_bson_object_id,
    "uri": is_request_uri,
    "email": is_email,
    "hostname": is_hostname,
    "ipv4": is_ipv4,
    "ipv6": is_ipv6,
    "cidr": is_cidr,
    "mac": is_mac,
    "uuid": lambda text: _UUID.search(text) is not None,
    "uuid3": lambda text: _UUID3.search(text) is not None,
    "uuid4": lambda text: _UUID4.search(text) is not None,
    "uuid5": lambda text: _UUID5.search(text) is not None,
    "isbn": lambda text: _is_isbn(text, 10) or _is_isbn(text, 13),
    "isbn10": lambda text: _is_isbn(text, 10),
    "isbn13": lambda text: _is_isbn(text, 13),
    "creditcard": is_credit_card,
    "ssn": is_ssn,
    "hexcolor": lambda text: _HEX_COLOR.search(text) is not None,
    "rgbcolor": lambda text: _RGB_COLOR.search(text) is not None,
    "byte": lambda text: _BASE64.search(text) is not None,
    "password": _always,
    "date": is_date,
    "duration": is_duration,
    "datetime": is_date_time,
    "k8sshortname": lambda text: len(text) <= 63 and _SHORT_NAME.search(text) is not None,
    "k8slongname": lambda text: len(text) <= 253 and _LONG_NAME.search(text) is not None,
}


def checker(fmt: str) -> Callable[[str], bool] | None:
    """The registry's test for a format name (any spelling with dashes), or None for a
    name the registry does not know (such values are not checked)."""
    return _CHECKERS.get(normalize(fmt))
