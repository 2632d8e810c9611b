"""Decoded JSON values as structured-merge-diff's ``value`` package sees them: their order,
their equality, and the texts Go writes for them.

Design note
-----------
Server-side apply compares values in three places where the bytes a client sees depend on
Go's rules, not Python's: set elements and list-map keys are ordered (a managed-fields entry
lists them in that order), equal values are one element (``1`` and ``1.0`` are the same key,
``true`` and ``1`` are not, although Python says ``True == 1``), and a value is written into
conflict messages (``[name="web"]``, ``[=1.5]``) and into FieldsV1 keys (``k:{"port":80}``).
This module is that one definition, over what ``json.loads`` returns: dict, list, str, int,
float, bool and None.

* **Order** (:func:`sort_key`, SMD ``value.Compare``): numbers < strings < booleans < lists
  < maps < null. Numbers compare by value, an int against a float as a float; strings by
  bytes (code points, the same order for valid text); lists element by element, a prefix
  first; maps as their key-sorted (key, value) pairs, a prefix first.
* **Equality** (:func:`values_equal`, SMD ``value.Equals``): the order's equality, without
  building keys; values Python's equality (in C) finds different are different here too,
  so only values it finds equal are walked (it takes ``true`` for ``1``).
* **Text**: :func:`value_string` is ``value.ToString`` (``%v`` floats, ``%q`` strings, map
  entries ``k=v`` run together); :func:`value_json` is the compact JSON json-iterator's
  standard-library configuration writes (sorted keys, ``<>&`` and U+2028/9 escaped in
  strings, other control characters as ``\\u00XX``, floats in ``encoding/json``'s form
  but for a two-digit exponent: ``1e-07``);
  :func:`go_v`, :func:`go_sharp_v` and :func:`go_type` are ``fmt``'s ``%v``, ``%#v`` and
  ``%T`` of a value boxed as SMD boxes it, for its validation messages
  (``expected string, got &value.valueUnstructured{Value:1}``).

Floats: Go and Python both find the shortest digits that read back as the same double, so
the digits come from ``repr`` and only the layout (where the exponent starts, how it is
written) is Go's. An int beyond the int64 range compares exactly here; Go would have decoded
it as a float — JSON Kubernetes accepts never has one.

Costs: each function is one walk of its value; :func:`sort_key` builds tuples and is meant for
set elements and keys (small scalars), not whole objects. Pure functions; thread-safe.
Callers: :mod:`watchcache.structured.pathelement` and the typed walkers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from watchcache.wire.gostrconv import go_quote

__all__ = [
    "JSON",
    "SortKey",
    "go_sharp_v",
    "go_type",
    "go_v",
    "is_scalar",
    "json_string",
    "sort_key",
    "value_json",
    "value_string",
    "values_equal",
]

#: A decoded JSON value (dict, list, str, int, float, bool or None).
JSON: TypeAlias = Any
#: A tuple ordered as SMD orders the value it was made from.
SortKey: TypeAlias = tuple[Any, ...]

_NUMBER, _STRING, _BOOL, _LIST, _MAP, _NULL = range(6)


def is_scalar(value: JSON) -> bool:
    """A string, number or boolean (not null, not a container)."""
    return isinstance(value, str | int | float)


def sort_key(value: JSON) -> SortKey:
    """A tuple whose order and equality are SMD's ``value.Compare`` of ``value``."""
    if isinstance(value, bool):
        return (_BOOL, value)
    if isinstance(value, int | float):
        return (_NUMBER, value)
    if isinstance(value, str):
        return (_STRING, value)
    if isinstance(value, list):
        return (_LIST, tuple(sort_key(item) for item in value))
    if isinstance(value, dict):
        return (_MAP, tuple((k, sort_key(value[k])) for k in sorted(value)))
    if value is None:
        return (_NULL,)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def values_equal(lhs: JSON, rhs: JSON) -> bool:
    """SMD's ``value.Equals``: JSON equality where ``1 == 1.0`` but ``true != 1``."""
    if lhs is rhs:
        return True
    # Python's equality (in C) differs from this one only in taking true for 1 (and false
    # for 0): values it finds different are different here too.
    try:
        if lhs != rhs:
            return False
    except RecursionError:
        pass
    return _values_equal(lhs, rhs)


def _values_equal(lhs: JSON, rhs: JSON) -> bool:
    if lhs is rhs:
        return True
    if isinstance(lhs, bool) or isinstance(rhs, bool):
        return isinstance(lhs, bool) and isinstance(rhs, bool) and lhs == rhs
    if isinstance(lhs, str) or isinstance(rhs, str):
        return isinstance(lhs, str) and isinstance(rhs, str) and lhs == rhs
    if isinstance(lhs, int | float) or isinstance(rhs, int | float):
        return isinstance(lhs, int | float) and isinstance(rhs, int | float) and lhs == rhs
    if isinstance(lhs, list):
        if not isinstance(rhs, list) or len(lhs) != len(rhs):
            return False
        return all(_values_equal(a, b) for a, b in zip(lhs, rhs, strict=True))
    if isinstance(lhs, dict):
        if not isinstance(rhs, dict) or len(lhs) != len(rhs):
            return False
        for key, item in lhs.items():
            if key not in rhs or not _values_equal(item, rhs[key]):
                return False
        return True
    return lhs is None and rhs is None


# --- floats ---------------------------------------------------------------------------


def _shortest_digits(number: float) -> tuple[str, int]:
    """(digits, point) with ``abs(number) == 0.<digits> * 10**point``, digits the shortest
    that round-trip (no leading or trailing zeros); ``("", 0)`` for zero."""
    text = repr(abs(number))
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    if not digits:
        return "", 0
    return digits, point


def _format_e(negative: bool, digits: str, point: int) -> str:
    # strconv's %e with the shortest precision: d[.ddd]e±dd (at least two exponent digits).
    if not digits:
        digits, point = "0", 1
    exponent = point - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    sign = "-" if exponent < 0 else "+"
    return f"{'-' if negative else ''}{mantissa}e{sign}{abs(exponent):02d}"


def _format_f(negative: bool, digits: str, point: int) -> str:
    # strconv's %f with the shortest precision: every digit, no exponent.
    if not digits:
        return "-0" if negative else "0"
    if point <= 0:
        text = "0." + "0" * -point + digits
    elif point >= len(digits):
        text = digits + "0" * (point - len(digits))
    else:
        text = digits[:point] + "." + digits[point:]
    return ("-" if negative else "") + text


def _go_float_v(number: float) -> str:
    """``fmt.Sprint(float64)``: strconv's 'g' with the shortest digits, where %e takes over
    below 1e-4 and from 1e6 up (Go fixes the cut at precision 6 for shortest digits)."""
    negative = number < 0 or (number == 0 and str(number).startswith("-"))
    digits, point = _shortest_digits(number)
    exponent = point - 1 if digits else 0
    if digits and (exponent < -4 or exponent >= 6):
        return _format_e(negative, digits, point)
    return _format_f(negative, digits, point)


def _json_float(number: float) -> str:
    """A float as json-iterator v1.1.12 (the release Kubernetes pins) writes it: fixed
    notation, except below 1e-6 and from 1e21 on (``1e-07``, ``1e+21``; unlike
    ``encoding/json``, the exponent keeps its leading zero)."""
    negative = number < 0 or (number == 0 and str(number).startswith("-"))
    digits, point = _shortest_digits(number)
    magnitude = abs(number)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        return _format_e(negative, digits, point)
    return _format_f(negative, digits, point)


# --- strings --------------------------------------------------------------------------

_HEX: Final = "0123456789abcdef"


def _control_escape(code: int) -> str:
    return "\\u00" + _HEX[code >> 4] + _HEX[code & 0xF]


def _escape_table(html: bool) -> dict[int, str]:
    table = {code: _control_escape(code) for code in range(0x20)}
    table.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})
    table.update({ord('"'): '\\"', ord("\\"): "\\\\"})
    if html:
        table.update({ord(c): _control_escape(ord(c)) for c in "<>&"})
        table.update({0x2028: "\\u2028", 0x2029: "\\u2029"})
        # A lone surrogate stands for bytes that were not UTF-8: Go writes U+FFFD's escape.
        table.update(dict.fromkeys(range(0xD800, 0xE000), "\\ufffd"))
    else:
        # Go copies such bytes through; Python cannot encode them, so U+FFFD it is.
        table.update(dict.fromkeys(range(0xD800, 0xE000), "\ufffd"))
    return table


_HTML_ESCAPES: Final = _escape_table(html=True)
_PLAIN_ESCAPES: Final = _escape_table(html=False)


def json_string(text: str, *, html: bool = True) -> str:
    """``text`` as a JSON string the way json-iterator writes it: with HTML escaping (how
    it writes string values and map keys) or without (``WriteObjectField``, its raw
    object-field writer)."""
    return '"' + text.translate(_HTML_ESCAPES if html else _PLAIN_ESCAPES) + '"'


def value_json(value: JSON) -> str:
    """Compact JSON of ``value`` as SMD writes it into a FieldsV1 key (json-iterator's
    ``ConfigCompatibleWithStandardLibrary``: map keys sorted, HTML-safe strings)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, list):
        return "[" + ",".join(value_json(item) for item in value) + "]"
    if isinstance(value, dict):
        members = (json_string(k) + ":" + value_json(value[k]) for k in sorted(value))
        return "{" + ",".join(members) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


# --- Go's fmt -------------------------------------------------------------------------


_SURROGATES_TO_FFFD: Final = dict.fromkeys(range(0xD800, 0xE000), "\ufffd")


def _go_quote(text: str) -> str:
    # Go decoded a lone surrogate escape as U+FFFD; quoting must not see it as bytes.
    return go_quote(text.translate(_SURROGATES_TO_FFFD))


@dataclass(frozen=True)
class _Format:
    """How one of Go's renderings writes a decoded JSON value: its null, its strings, and
    the brackets and separators of its lists and maps (members in key order). Booleans,
    integers and floats are written alike by all of them. ``other``: what a value that is
    not JSON becomes (None: it is refused)."""

    null: str
    string: Callable[[str], str]
    list_open: str
    list_sep: str
    list_close: str
    member: Callable[[str, str], str]
    map_open: str
    map_sep: str
    map_close: str
    other: Callable[[object], str] | None = str


def _format(value: JSON, f: _Format) -> str:
    if value is None:
        return f.null
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float_v(value)
    if isinstance(value, str):
        return f.string(value)
    if isinstance(value, list):
        return f.list_open + f.list_sep.join(_format(item, f) for item in value) + f.list_close
    if isinstance(value, dict):
        members = f.map_sep.join(f.member(k, _format(value[k], f)) for k in sorted(value))
        return f.map_open + members + f.map_close
    if f.other is None:
        raise TypeError(f"not a JSON value: {type(value).__name__}")
    return f.other(value)


#: SMD's ``value.ToString``.
_PATH_TEXT = _Format(
    "null", _go_quote, "[", ",", "]", lambda k, v: f"{k}={v}", "", "", "", other=None
)
#: fmt's %v of an interface{} holding a decoded JSON value.
_GO_PLAIN = _Format("<nil>", str, "[", " ", "]", lambda k, v: f"{k}:{v}", "map[", " ", "]")
#: fmt's %#v of an interface{} holding a decoded JSON value.
_GO_SHARP = _Format(
    "interface {}(nil)",
    _go_quote,
    "[]interface {}{",
    ", ",
    "}",
    lambda k, v: f"{_go_quote(k)}:{v}",
    "map[string]interface {}{",
    ", ",
    "}",
)


def value_string(value: JSON) -> str:
    """SMD's ``value.ToString``: the text of a key or set element in a path
    (``"web"``, ``80``, ``1.5``, ``true``, ``null``, ``[1,2]``, map entries ``k=v`` run
    together in key order)."""
    return _format(value, _PATH_TEXT)


def _go_plain(value: JSON) -> str:
    return _format(value, _GO_PLAIN)


def _go_sharp(value: JSON) -> str:
    return _format(value, _GO_SHARP)


def go_v(value: JSON) -> str:
    """``fmt``'s ``%v`` of ``value`` boxed as SMD boxes it (``&{1}``)."""
    return "&{" + _go_plain(value) + "}"


def go_sharp_v(value: JSON) -> str:
    """``fmt``'s ``%#v`` of ``value`` boxed as SMD boxes it
    (``&value.valueUnstructured{Value:1}``)."""
    return "&value.valueUnstructured{Value:" + _go_sharp(value) + "}"


def go_type(value: JSON) -> str:
    """``fmt``'s ``%T`` of ``value`` as Kubernetes decodes JSON (integers are int64)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, dict):
        return "map[string]interface {}"
    return type(value).__name__
