"""JSON as Go's ``encoding/json`` reads and writes it.

:func:`loads` reads text as Go does where Python's decoder differs (strict UTF-8, unpaired
surrogate escapes as U+FFFD); :func:`dumps` writes text byte-identical to Go's.

Why this exists: a continue token is base64 of JSON, so two servers agree on a token's text
only if they agree on every escape; and a ``metav1.Status`` body that matches the Go
apiserver byte for byte lets tests compare with recorded Kubernetes responses. Python's
``json.dumps(ensure_ascii=False, separators=(",", ":"))`` already matches Go (Go ≥ 1.22) in
everything but four things, which :func:`dumps` corrects:

* Go escapes ``<``, ``>`` and ``&`` as ``\\u003c``, ``\\u003e``, ``\\u0026`` (HTML safety);
* Go escapes U+2028 and U+2029 (JavaScript line terminators);
* Go writes each invalid UTF-8 byte as the escape ``\ufffd``; the Python equivalent, a
  lone surrogate in a ``str`` (which could not be encoded to UTF-8 at all), is written the
  same way;
* Go's floats differ, but nothing here writes floats.

Those characters only ever occur inside JSON strings, so replacing them in the finished text
is exact. Member order is the caller's (Go writes struct fields in declaration order), so
callers build dicts in the Go struct's order. Cost: one ``json.dumps`` plus one translate.
Pure functions, thread-safe.
"""

from __future__ import annotations

import copy
import json
import marshal
import re
from typing import Any, Final, TypeVar, cast

_GO_ESCAPES: Final = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
# One pass in C finds whether anything needs changing (usually nothing does).
_NEEDS_ESCAPE: Final = re.compile("[<>&\u2028\u2029\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    # A lone surrogate stands for an invalid byte, which Go writes as an escaped U+FFFD.
    return _GO_ESCAPES.get(match[0], "\\ufffd")


def dumps(value: Any) -> str:
    """Compact JSON text as Go's ``json.Marshal`` writes it (see the module note)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if _NEEDS_ESCAPE.search(text) is None:
        return text
    return _NEEDS_ESCAPE.sub(_escape, text)


def dumpb(value: Any) -> bytes:
    """:func:`dumps` encoded as UTF-8."""
    return dumps(value).encode()


# The JSON escape of a UTF-16 surrogate (\uD800-\uDFFF): in UTF-8 text, the only way
# json.loads can make a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def loads(data: bytes, **options: Any) -> Any:
    """``json.loads`` of UTF-8 ``data`` (``options`` are its keyword arguments), reading
    text as Go's decoder does where Python's differs, so every string is valid Unicode.

    * ``data`` must be strict UTF-8: ``json.loads`` on bytes would also take UTF-16/32 and
      encoded surrogates (it decodes with ``surrogatepass``); Go refuses those as invalid;
    * an unpaired surrogate escape (``"\\ud800"``) is U+FFFD, as in Go; ``json.loads``
      would keep a lone surrogate that UTF-8 cannot carry, so the object could be neither
      stored, nor answered, nor made into an Item.

    Raises ValueError (UnicodeDecodeError, JSONDecodeError) and RecursionError as
    ``json.loads`` does. Costs one more scan of the text; only text with a surrogate escape
    is also walked (iteratively, so any depth json.loads accepts is fine).
    """
    text = data.decode("utf-8")
    value = json.loads(text, **options)
    # Every etcd value passes here during a sync: a plain substring test rules out almost
    # all of them before the regular expression runs.
    if "\\u" not in text or _SURROGATE_ESCAPE.search(text) is None:
        return value
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    pending: list[Any] = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            for index, item in enumerate(node):
                if isinstance(item, str):
                    node[index] = _LONE_SURROGATE.sub("\ufffd", item)
                elif isinstance(item, dict | list):
                    pending.append(item)
        elif isinstance(node, dict):
            members = list(node.items())
            node.clear()
            for key, item in members:
                if isinstance(item, dict | list):
                    pending.append(item)
                fixed = _LONE_SURROGATE.sub("\ufffd", item) if isinstance(item, str) else item
                node[_LONE_SURROGATE.sub("\ufffd", key)] = fixed
    return value


_Value = TypeVar("_Value")


def deep_copy(value: _Value) -> _Value:
    """``copy.deepcopy`` of a decoded value, by marshal where it can: in C, ~3x faster for an
    object of a few KB (a write copies the stored object it starts from). A decoded value
    holds only what marshal writes exactly (dicts, lists, str, int, float, bool, None), and
    shared parts come back shared as deepcopy shares them; anything else (a float subclass
    a decoder made) goes through deepcopy."""
    try:
        return cast("_Value", marshal.loads(marshal.dumps(cast(Any, value))))
    except ValueError:
        return copy.deepcopy(value)
