"""Field errors as apimachinery's ``field.Error`` words them, made into StatusCauses.

Design note
-----------
Kubernetes reports every invalid field as a ``field.Error`` (a type, a path, the bad value,
a detail) and turns it into a ``metav1.StatusCause`` whose message is ``ErrorBody()``:
``<Type>: <value>: <detail>``. The value is printed by Go's rules: integers, floats and
booleans with ``%v``, strings with ``%q``, anything else as ``json.Marshal`` writes it
(object keys sorted, Go's float syntax, ``<``, ``>`` and ``&`` escaped); ``Required``,
``Forbidden`` and ``Too long`` print no value. Clients and tests match these texts, so the
CRD code (``registry.structural``, ``crd_validation``) builds causes only through the
constructors here, one per ``field.*`` constructor, and renders values only through
:func:`go_value`.

Values are parsed JSON as the registry holds it: an ``int`` outside int64 stands for the
float64 Go's decoder would have made of it. Paths are the strings ``field.Path`` prints
(``spec.items[0].name``, ``properties[spec]``); :data:`NIL_PATH` is what Go prints for a
nil path, which Kubernetes does send for errors about the whole object.

Pure functions; safe from any thread. Callers: the CRD modules of this package.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any, Final

from watchcache.wire import gojson
from watchcache.wire.errors import StatusCause
from watchcache.wire.gostrconv import go_quote

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "NIL_PATH",
    "child",
    "duplicate",
    "forbidden",
    "go_float_f",
    "go_float_json",
    "go_float_v",
    "go_json",
    "go_value",
    "index",
    "invalid",
    "key",
    "not_supported",
    "required",
    "too_long",
    "too_many",
    "type_invalid",
]

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
#: ``(*field.Path)(nil).String()``.
NIL_PATH: Final = "<nil>"

REQUIRED: Final = "FieldValueRequired"
INVALID: Final = "FieldValueInvalid"
TYPE_INVALID: Final = "FieldValueTypeInvalid"
NOT_SUPPORTED: Final = "FieldValueNotSupported"
DUPLICATE: Final = "FieldValueDuplicate"
FORBIDDEN: Final = "FieldValueForbidden"
TOO_LONG: Final = "FieldValueTooLong"
TOO_MANY: Final = "FieldValueTooMany"


# ---------------------------------------------------------------------------------------
# Paths


def child(path: str | None, name: str) -> str:
    """``path.Child(name)``; ``None`` is the nil (root) path."""
    return name if not path else f"{path}.{name}"


def key(path: str | None, name: str) -> str:
    """``path.Key(name)``: ``path[name]``, the name unquoted."""
    return f"{path or ''}[{name}]"


def index(path: str | None, i: int) -> str:
    return f"{path or ''}[{i}]"


# ---------------------------------------------------------------------------------------
# Go's renderings of values


def _digits(value: float) -> tuple[str, int]:
    """The shortest round-trip digits of ``abs(value)`` and the decimal point's position
    (``dp``: the value is ``0.<digits>`` times ``10**dp``). Python's ``repr`` and Go's
    ``strconv`` both produce the shortest string that reads back exactly."""
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    text = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    dp = len(digit_tuple) + exponent
    return text, dp


def _format_e(negative: bool, digits: str, dp: int) -> str:
    exp = dp - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    sign = "-" if exp < 0 else "+"
    return f"{'-' if negative else ''}{mantissa}e{sign}{abs(exp):02d}"


def _format_f(negative: bool, digits: str, dp: int) -> str:
    if dp <= 0:
        text = "0." + "0" * -dp + digits
    elif dp >= len(digits):
        text = digits + "0" * (dp - len(digits))
    else:
        text = digits[:dp] + "." + digits[dp:]
    return ("-" if negative else "") + text


def _special(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    return None


def go_float_v(value: float) -> str:
    """``fmt.Sprintf("%v", float64)``: the shortest digits, in exponent form when the
    exponent is below -4 or at least 6 (``%g`` decides with precision 6 when it prints
    the shortest form): ``1.5``, ``100000``, ``1e+06``, ``1e-05``."""
    special = _special(value)
    if special is not None:
        return special
    digits, dp = _digits(value)
    exp = dp - 1
    if exp < -4 or exp >= 6:
        return _format_e(value < 0, digits, dp)
    return _format_f(value < 0, digits, dp)


def go_float_f(value: float) -> str:
    """``strconv.FormatFloat(value, 'f', -1, 64)``: the shortest digits, never an
    exponent (``1e+21`` is ``1000000000000000000000``)."""
    special = _special(value)
    if special is not None:
        return special
    digits, dp = _digits(value)
    return _format_f(value < 0, digits, dp)


def go_float_json(value: float) -> str:
    """A float64 as ``encoding/json`` writes it: plain decimals, exponent form below 1e-6
    and from 1e21 (``1e-7``, not ``1e-07``)."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"json: unsupported value: {go_float_v(value)}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    digits, dp = _digits(value)
    magnitude = abs(value)
    if magnitude < 1e-6 or magnitude >= 1e21:
        text = _format_e(value < 0, digits, dp)
        mantissa, _, exp = text.partition("e")
        if exp[0] == "-" and exp[1] == "0":
            exp = "-" + exp[2:]
        return f"{mantissa}e{exp}"
    return _format_f(value < 0, digits, dp)


def _as_go_number(value: int) -> int | float:
    """An int as Go holds it after decoding: int64, or float64 beyond int64's range."""
    if INT64_MIN <= value <= INT64_MAX:
        return value
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def go_json(value: Any) -> str:
    """``json.Marshal`` of a parsed JSON value: keys sorted, Go's escapes and floats."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return gojson.dumps(value)
    if isinstance(value, int):
        number = _as_go_number(value)
        return str(number) if isinstance(number, int) else go_float_json(number)
    if isinstance(value, float):
        return go_float_json(value)
    if isinstance(value, dict):
        members = (f"{gojson.dumps(str(k))}:{go_json(value[k])}" for k in sorted(value))
        return "{" + ",".join(members) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(go_json(item) for item in value) + "]"
    # Not JSON: show what Python has rather than fail while reporting another error.
    return gojson.dumps(json.dumps(value, default=repr))


def go_value(value: Any) -> str:
    """A bad value as ``field.Error.ErrorBody`` prints it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        number = _as_go_number(value)
        return str(number) if isinstance(number, int) else go_float_v(number)
    if isinstance(value, float):
        return go_float_v(value)
    if isinstance(value, str):
        return go_quote(value)
    return go_json(value)


def go_sprint(value: Any) -> str:
    """``fmt.Sprint`` of a value that is a string or a number (enum values, flags)."""
    if isinstance(value, str):
        return value
    return go_value(value)


# ---------------------------------------------------------------------------------------
# The field.Error constructors


def _field(path: str | None) -> str:
    return NIL_PATH if path is None else path


def required(path: str | None, detail: str = "") -> StatusCause:
    message = "Required value" + (f": {detail}" if detail else "")
    return StatusCause(REQUIRED, message, _field(path))


def forbidden(path: str | None, detail: str) -> StatusCause:
    message = "Forbidden" + (f": {detail}" if detail else "")
    return StatusCause(FORBIDDEN, message, _field(path))


def invalid(path: str | None, value: Any, detail: str) -> StatusCause:
    message = f"Invalid value: {go_value(value)}" + (f": {detail}" if detail else "")
    return StatusCause(INVALID, message, _field(path))


def type_invalid(path: str | None, value: Any, detail: str) -> StatusCause:
    message = f"Invalid value: {go_value(value)}" + (f": {detail}" if detail else "")
    return StatusCause(TYPE_INVALID, message, _field(path))


def not_supported(path: str | None, value: Any, valid: list[str]) -> StatusCause:
    message = f"Unsupported value: {go_value(value)}"
    if valid:
        message += ": supported values: " + ", ".join(go_quote(v) for v in valid)
    return StatusCause(NOT_SUPPORTED, message, _field(path))


def duplicate(path: str | None, value: Any) -> StatusCause:
    return StatusCause(DUPLICATE, f"Duplicate value: {go_value(value)}", _field(path))


def too_long(path: str | None, max_length: int) -> StatusCause:
    if max_length >= 0:
        unit = "byte" if max_length == 1 else "bytes"
        detail = f"may not be more than {max_length} {unit}"
    else:
        detail = "value is too long"
    return StatusCause(TOO_LONG, f"Too long: {detail}", _field(path))


def too_many(path: str | None, actual: int, maximum: int) -> StatusCause:
    if maximum >= 0:
        unit = "item" if maximum == 1 else "items"
        detail = f"must have at most {maximum} {unit}"
    else:
        detail = "has too many items"
    shown = f"Too many: {actual}: " if actual >= 0 else "Too many: "
    return StatusCause(TOO_MANY, shown + detail, _field(path))
