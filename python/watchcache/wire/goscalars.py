"""Two value parsers Kubernetes' JSON decoding runs on scalars: Go's base64 and
``resource.ParseQuantity``.

Design note
-----------
* :func:`decode_base64` is Go's ``base64.StdEncoding.DecodeString``, which
  ``encoding/json`` applies to every ``[]byte`` field (Secret ``data``, ConfigMap
  ``binaryData``): padding required, ``\\r`` and ``\\n`` ignored anywhere, trailing bits
  not checked, and a failure reported as ``illegal base64 data at input byte N`` with Go's
  N. The common case (canonical base64) is one call into ``binascii`` in strict mode,
  which accepts a subset of what Go accepts; only text it refuses goes through the port of
  Go's quantum-by-quantum decoder, which finds Go's answer and Go's offset.
* :func:`check_quantity` is ``resource.ParseQuantity``'s acceptance test with its three
  error texts (``quantities must match the regular expression ...``, ``unable to parse
  quantity's suffix``, ``unable to parse numeric part of quantity``). It does not build the
  canonical form: a quantity is stored as the client wrote it (see ``wire.body``).

Pure functions, O(length); safe from any thread. Callers: ``wire.body``, ``wire.protobuf``.
"""

from __future__ import annotations

import binascii
from typing import Final

__all__ = [
    "QUANTITY_FORMAT_ERROR",
    "QUANTITY_NUMERIC_ERROR",
    "QUANTITY_SUFFIX_ERROR",
    "Base64Error",
    "QuantityError",
    "check_quantity",
    "decode_base64",
]

QUANTITY_FORMAT_ERROR: Final = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
QUANTITY_SUFFIX_ERROR: Final = "unable to parse quantity's suffix"
QUANTITY_NUMERIC_ERROR: Final = "unable to parse numeric part of quantity"


class Base64Error(ValueError):
    """Go's ``base64.CorruptInputError``; ``offset`` is the byte Go names."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"illegal base64 data at input byte {offset}")
        self.offset = offset


class QuantityError(ValueError):
    """One of ``ParseQuantity``'s errors; ``str()`` is Go's text."""


_ALPHABET: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_DECODE: Final = {byte: value for value, byte in enumerate(_ALPHABET)}
_NEWLINES: Final = (0x0A, 0x0D)


def decode_base64(text: bytes) -> bytes:
    """Go's ``base64.StdEncoding.DecodeString(text)``; raises :class:`Base64Error`."""
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except binascii.Error:
        return _decode_like_go(text)


def _decode_like_go(src: bytes) -> bytes:
    """A port of Go's ``Encoding.decodeQuantum`` loop (its fast paths give the same
    answers): 4 symbols at a time, newlines skipped, ``=`` ends the input."""
    out = bytearray()
    position = 0
    length = len(src)
    while True:
        symbols: list[int] = []
        expected = 4
        while len(symbols) < 4:
            if position == length:
                if not symbols:
                    return bytes(out)
                # Padding is required, so a short final quantum is an error.
                raise Base64Error(position - len(symbols))
            byte = src[position]
            position += 1
            value = _DECODE.get(byte)
            if value is not None:
                symbols.append(value)
                continue
            if byte in _NEWLINES:
                continue
            if byte != 0x3D:  # '='
                raise Base64Error(position - 1)
            # Padding: only after two or three symbols.
            if len(symbols) < 2:
                raise Base64Error(position - 1)
            if len(symbols) == 2:
                while position < length and src[position] in _NEWLINES:
                    position += 1
                if position == length:
                    raise Base64Error(length)
                if src[position] != 0x3D:
                    raise Base64Error(position - 1)
                position += 1
            while position < length and src[position] in _NEWLINES:
                position += 1
            if position < length:
                raise Base64Error(position)
            expected = len(symbols)
            break
        while len(symbols) < 4:
            symbols.append(0)
        value = symbols[0] << 18 | symbols[1] << 12 | symbols[2] << 6 | symbols[3]
        out.extend(value.to_bytes(3, "big")[: expected - 1])
        if expected < 4:
            return bytes(out)


_SUFFIX_LETTERS: Final = frozenset("eEinumkKMGTP")
_DIGIT_CHARS: Final = frozenset("0123456789")
_DECIMAL_SUFFIXES: Final = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12,
                            "P": 15, "E": 18}  # fmt: skip
_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_MAX_INT64_FACTORS: Final = 18


def _split(text: str) -> tuple[str, str, str, str]:
    """``parseQuantityString``: (value, num, denom, suffix); raises the format error."""
    end = len(text)
    position = 1 if text[:1] in ("+", "-") else 0
    while position < end and text[position] == "0":
        position += 1
    if position >= end:
        return "0", "0", "", ""
    start = position
    while position < end and text[position] in _DIGIT_CHARS:
        position += 1
    if position >= end:
        return text, text[start:], "", ""
    num = text[start:position] or "0"
    denom = ""
    if text[position] == ".":
        position += 1
        start = position
        while position < end and text[position] in _DIGIT_CHARS:
            position += 1
        denom = text[start:position]
        if position >= end:
            return text, num, denom, ""
    value = text[:position]
    suffix_start = position
    while position < end and text[position] in _SUFFIX_LETTERS:
        position += 1
    if position < end and text[position] in ("+", "-"):
        position += 1
    while position < end and text[position] in _DIGIT_CHARS:
        position += 1
    if position < end:
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    return value, num, denom, text[suffix_start:]


def check_quantity(text: str) -> None:
    """Raise :class:`QuantityError` unless ``resource.ParseQuantity(text)`` succeeds."""
    if not text:
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    if text == "0":
        return
    value, num, denom, suffix = _split(text)
    if suffix in _DECIMAL_SUFFIXES:
        scale = _DECIMAL_SUFFIXES[suffix]
        precision = _MAX_INT64_FACTORS - len(num) - len(denom)
    elif suffix in _BINARY_SUFFIXES:
        scale = 0
        exponent = _BINARY_SUFFIXES[suffix]
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1 if not denom else -1
    elif len(suffix) > 1 and suffix[0] in "eE" and _is_go_int64(suffix[1:]):
        scale = _int32(int(suffix[1:]))
        precision = _MAX_INT64_FACTORS - len(num) - len(denom)
    else:
        raise QuantityError(QUANTITY_SUFFIX_ERROR)
    if precision >= 0 and scale - len(denom) >= -9:
        return  # the int64 fast path: num and denom are digits, it cannot fail
    # inf.Dec.SetString(value): some digit is needed.
    if not any(char in _DIGIT_CHARS for char in value):
        raise QuantityError(QUANTITY_NUMERIC_ERROR)


def _is_go_int64(text: str) -> bool:
    digits = text[1:] if text[:1] in ("+", "-") else text
    return (
        bool(digits) and all(c in _DIGIT_CHARS for c in digits) and (-(2**63) <= int(text) < 2**63)
    )


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value
