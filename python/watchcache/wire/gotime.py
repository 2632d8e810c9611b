"""Go's ``time`` as Kubernetes' ``metav1.Time``, ``MicroTime`` and ``Duration`` use it.

Design note
-----------
A timestamp crosses the wire as RFC 3339 text in JSON and as ``{seconds, nanos}`` in
protobuf; converting between them must give what Go gives, or a protobuf client and a JSON
client writing the same object would store different text:

* :func:`format_time` is ``metav1.Time.MarshalJSON``: UTC, whole seconds
  (``2006-01-02T15:04:05Z``); :func:`format_micro_time` is ``MicroTime``'s
  (``2006-01-02T15:04:05.000000Z``). Go writes years past 9999 with more digits and
  negative years with a minus sign; so do these.
* :func:`parse_time` is ``time.Parse`` with the RFC 3339 layout (or the MicroTime layout):
  it accepts what Go's general parser accepts (a one-digit hour, a fraction after the
  seconds, ``,`` as the decimal mark, offsets up to 24:60) and refuses the rest with Go's
  ``*time.ParseError`` text, so a 400 reads as Kubernetes' does.
* :func:`duration_string` and :func:`parse_duration` are ``time.Duration.String`` and
  ``time.ParseDuration``.

Civil dates are computed with integer arithmetic (days from 1970-01-01), not ``datetime``,
so every year Go can represent is handled. Deliberate limit: seconds beyond ±2**62 (about
146 billion years) raise ValueError, where Go would silently wrap. Pure functions, O(length
of the text); safe from any thread. Callers: ``wire.protobuf`` and ``wire.body``.
"""

from __future__ import annotations

import functools
from typing import Final

__all__ = [
    "MICRO_LAYOUT",
    "RFC3339_LAYOUT",
    "ZERO_TIME_SECONDS",
    "TimeParseError",
    "duration_string",
    "format_micro_time",
    "format_time",
    "parse_duration",
    "parse_time",
]

RFC3339_LAYOUT: Final = "2006-01-02T15:04:05Z07:00"
MICRO_LAYOUT: Final = "2006-01-02T15:04:05.000000Z07:00"
#: Unix seconds of Go's zero ``time.Time`` (January 1, year 1, UTC): ``IsZero`` is true there.
ZERO_TIME_SECONDS: Final = -62135596800
_SECONDS_LIMIT: Final = 2**62
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


class TimeParseError(ValueError):
    """Go's ``*time.ParseError`` (or ``time.ParseDuration``'s error): ``str()`` is Go's text."""


def _days_from_civil(year: int, month: int, day: int) -> int:
    # Howard Hinnant's algorithm: proleptic Gregorian, any year.
    year -= month <= 2
    era = (year if year >= 0 else year - 399) // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    days += 719468
    era = (days if days >= 0 else days - 146096) // 146097
    day_of_era = days - era * 146097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + 3 if month_index < 10 else month_index - 9
    return year_of_era + era * 400 + (month <= 2), month, day


def _go_year(year: int) -> str:
    # appendInt(b, year, 4): a sign, then at least four digits.
    return f"-{-year:04d}" if year < 0 else f"{year:04d}"


def _clock(seconds: int) -> str:
    if not -_SECONDS_LIMIT <= seconds <= _SECONDS_LIMIT:
        raise ValueError(f"time out of range: {seconds} seconds")
    days, second_of_day = divmod(seconds, 86400)
    year, month, day = _civil_from_days(days)
    hour, rest = divmod(second_of_day, 3600)
    minute, second = divmod(rest, 60)
    return f"{_go_year(year)}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"


def format_time(seconds: int) -> str:
    """``metav1.Time`` JSON text of Unix ``seconds`` (the caller handles the zero time)."""
    return _clock(seconds) + "Z"


def format_micro_time(seconds: int, nanos: int) -> str:
    """``metav1.MicroTime`` JSON text; ``nanos`` in [0, 1e9) (microseconds kept)."""
    return f"{_clock(seconds)}.{nanos // 1000:06d}Z"


# ---------------------------------------------------------------------------------------
# time.Parse


def _quote(text: bytes) -> str:
    # The time package's quote: bytes outside printable ASCII as \xHH, " and \ escaped.
    out = ['"']
    for byte in text:
        if byte >= 0x80 or byte < 0x20:
            out.append(f"\\x{byte:02x}")
        elif byte in (0x22, 0x5C):
            out.append("\\" + chr(byte))
        else:
            out.append(chr(byte))
    out.append('"')
    return "".join(out)


def _cannot_parse(layout: str, value: bytes, value_elem: bytes, layout_elem: str) -> TimeParseError:
    return TimeParseError(
        f"parsing time {_quote(value)} as {_quote(layout.encode())}: cannot parse "
        f"{_quote(value_elem)} as {_quote(layout_elem.encode())}"
    )


def _out_of_range(value: bytes, what: str) -> TimeParseError:
    return TimeParseError(f"parsing time {_quote(value)}: {what} out of range")


def _is_digit(text: bytes, index: int) -> bool:
    return index < len(text) and 0x30 <= text[index] <= 0x39


def _getnum(text: bytes, fixed: bool) -> tuple[int, bytes] | None:
    if not _is_digit(text, 0):
        return None
    if not _is_digit(text, 1):
        if fixed:
            return None
        return text[0] - 0x30, text[1:]
    return (text[0] - 0x30) * 10 + text[1] - 0x30, text[2:]


def _nanoseconds(text: bytes, length: int) -> int | None:
    """Go's parseNanoseconds: ``text[0]`` is ``.`` or ``,``, then Go's ``atoi`` of the
    digits up to ``length`` (a sign is allowed there: ``-`` makes a range error, -1)."""
    if text[0] not in b".,":
        return None
    length = min(length, 10)
    digits = text[1:length]
    negative = digits[:1] == b"-"
    if digits[:1] in (b"-", b"+"):
        digits = digits[1:]
    if digits and not digits.isdigit():
        return None
    value: int = int(digits) if digits else 0
    if negative and value:
        return -1
    scaled: int = value * 10 ** (10 - length)
    return scaled


def _days_in(month: int, year: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


# The two layouts as Go's parser sees them: (literal prefix, std element) chunks.
_CHUNKS: Final = (("", "2006"), ("-", "01"), ("-", "02"), ("T", "15"), (":", "04"), (":", "05"))


# Remembered: a write's body carries the same few stamps again and again (its
# creationTimestamp, each managedFields entry's time), and parsing one here costs ~15 us.
@functools.lru_cache(maxsize=4096)
def parse_time(text: str, *, micro: bool = False) -> tuple[int, int]:
    """Go's ``time.Parse(time.RFC3339, text)`` (``micro``: the MicroTime layout) as Unix
    ``(seconds, nanos)``. Raises :class:`TimeParseError` with Go's message."""
    layout = MICRO_LAYOUT if micro else RFC3339_LAYOUT
    original = text.encode("utf-8", "surrogateescape")
    value = original
    numbers: list[int] = []
    nanos = 0
    for index, (prefix, element) in enumerate(_CHUNKS):
        if not value.startswith(prefix.encode()):
            raise _cannot_parse(layout, original, value, prefix)
        value = value[len(prefix) :]
        hold = value
        if element == "2006":
            if len(value) < 4 or not value[:4].isdigit():
                raise _cannot_parse(layout, original, hold, element)
            numbers.append(int(value[:4]))
            value = value[4:]
            continue
        got = _getnum(value, fixed=element != "15")
        if got is None:
            raise _cannot_parse(layout, original, hold, element)
        number, value = got
        numbers.append(number)
        if element == "01" and not 1 <= number <= 12:
            raise _out_of_range(original, "month")
        if element == "15" and number >= 24:
            raise _out_of_range(original, "hour")
        if element == "04" and number >= 60:
            raise _out_of_range(original, "minute")
        if element == "05":
            if number >= 60:
                raise _out_of_range(original, "second")
            if not micro and len(value) >= 2 and value[0] in b".," and _is_digit(value, 1):
                # A fraction the layout does not mention: Go takes it anyway.
                end = 2
                while _is_digit(value, end):
                    end += 1
                fraction = _nanoseconds(value, end)
                assert fraction is not None and fraction >= 0
                nanos, value = fraction, value[end:]
        assert index == len(numbers) - 1
    if micro:
        hold = value
        if len(value) < 7:
            raise _cannot_parse(layout, original, hold, ".000000")
        fraction = _nanoseconds(value, 7)
        if fraction is not None and fraction < 0:
            raise _out_of_range(original, "fractional second")
        if fraction is None:
            raise _cannot_parse(layout, original, hold, ".000000")
        nanos, value = fraction, value[7:]
    offset, value = _zone(layout, original, value)
    if value:
        raise TimeParseError(f"parsing time {_quote(original)}: extra text: {_quote(value)}")
    year, month, day, hour, minute, second = numbers
    if day < 1 or day > _days_in(month, year):
        raise _out_of_range(original, "day")
    days = _days_from_civil(year, month, day)
    return days * 86400 + hour * 3600 + minute * 60 + second - offset, nanos


def _zone(layout: str, original: bytes, value: bytes) -> tuple[int, bytes]:
    element = "Z07:00"
    if value[:1] == b"Z":
        return 0, value[1:]
    if len(value) < 6 or value[3:4] != b":":
        raise _cannot_parse(layout, original, value, element)
    sign, hours_text, minutes_text = value[:1], value[1:3], value[4:6]
    hours = _getnum(hours_text, fixed=True)
    minutes = _getnum(minutes_text, fixed=True) if hours is not None else None
    hour_value = hours[0] if hours is not None else 0
    minute_value = minutes[0] if minutes is not None else 0
    # Go checks the ranges before the sign and the digits' errors.
    if minute_value > 60:
        raise _out_of_range(original, "time zone offset minute")
    if hour_value > 24:
        raise _out_of_range(original, "time zone offset hour")
    if hours is None or minutes is None or sign not in (b"+", b"-"):
        raise _cannot_parse(layout, original, value, element)
    offset = (hour_value * 60 + minute_value) * 60
    return (offset if sign == b"+" else -offset), value[6:]


# ---------------------------------------------------------------------------------------
# time.Duration

_UNITS: Final = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5
    "μs": 1_000,  # U+03BC
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}


def duration_string(nanoseconds: int) -> str:
    """Go's ``time.Duration.String``: ``1h2m3.5s``, ``1.5ms``, ``0s``."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    magnitude = abs(nanoseconds)
    if magnitude < 1_000_000_000:
        for unit, size, digits in (("ns", 1, 0), ("µs", 1_000, 3), ("ms", 1_000_000, 6)):
            if magnitude < size * 1000:
                return sign + _fraction(magnitude, digits) + unit
    seconds_text = _fraction(magnitude % 60_000_000_000, 9) + "s"
    minutes_total = magnitude // 60_000_000_000
    if minutes_total == 0:
        return sign + seconds_text
    hours, minutes = divmod(minutes_total, 60)
    if hours == 0:
        return f"{sign}{minutes}m{seconds_text}"
    return f"{sign}{hours}h{minutes}m{seconds_text}"


def _fraction(value: int, digits: int) -> str:
    # value / 10**digits without trailing zeros in the fraction (fmtFrac + fmtInt).
    if digits == 0:
        return str(value)
    whole, fraction = divmod(value, 10**digits)
    text = f"{fraction:0{digits}d}".rstrip("0")
    return f"{whole}.{text}" if text else str(whole)


def parse_duration(text: str) -> int:
    """Go's ``time.ParseDuration`` in nanoseconds. Raises :class:`TimeParseError`."""
    quoted = _quote(text.encode("utf-8", "surrogateescape"))
    invalid = TimeParseError(f"time: invalid duration {quoted}")
    rest = text
    negative = False
    if rest[:1] in ("-", "+"):
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise invalid
    total = 0
    while rest:
        if not (rest[0].isascii() and (rest[0].isdigit() or rest[0] == ".")):
            raise invalid
        end = 0
        while end < len(rest) and rest[end].isascii() and rest[end].isdigit():
            end += 1
        whole_text, rest = rest[:end], rest[end:]
        fraction_text = ""
        if rest[:1] == ".":
            end = 1
            while end < len(rest) and rest[end].isascii() and rest[end].isdigit():
                end += 1
            fraction_text, rest = rest[1:end], rest[end:]
        if not whole_text and not fraction_text:
            raise invalid
        end = 0
        while (
            end < len(rest)
            and rest[end] != "."
            and not (rest[end].isascii() and rest[end].isdigit())
        ):
            end += 1
        if end == 0:
            raise TimeParseError(f"time: missing unit in duration {quoted}")
        unit_text, rest = rest[:end], rest[end:]
        unit = _UNITS.get(unit_text)
        if unit is None:
            raise TimeParseError(
                f"time: unknown unit {_quote(unit_text.encode('utf-8', 'surrogateescape'))} "
                f"in duration {quoted}"
            )
        whole = int(whole_text) if whole_text else 0
        if whole > (2**63) // unit:
            raise invalid
        value = whole * unit
        if fraction_text:
            # Go scales the fraction in floating point; integer arithmetic agrees for the
            # digits that matter (at most 19 are kept, like Go's overflow-safe loop).
            kept = fraction_text[:19]
            value += int(int(kept) * unit / 10 ** len(kept))
        total += value
        if total > 2**63:
            raise invalid
    if negative:
        total = -total
    if not _INT64_MIN <= total <= _INT64_MAX:
        raise invalid
    return total
