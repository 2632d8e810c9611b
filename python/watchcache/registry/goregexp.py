"""Go's regular expressions (RE2 syntax, ``regexp.Compile``) run by Python's ``re``.

Design note
-----------
A CRD's ``pattern`` is a Go regular expression: kube-apiserver compiles it with
``regexp.Compile`` when the CRD is written (an invalid one is refused with Go's parse
error) and matches values with ``MatchString`` (unanchored). Python's syntax differs in
ways that change answers, not just errors: ``$`` also matches before a final newline,
``\\d``, ``\\w``, ``\\s`` and ``\\b`` are Unicode-aware, ``{,3}`` is a repetition rather
than text, ``a*+`` is possessive rather than an error, lookarounds and backreferences
exist, inline flags must come first. So the pattern is not handed to ``re`` as it is:
:func:`compile` parses it with Go's grammar and Go's error codes and writes an equivalent
Python pattern in which every atom is self-contained:

* literals are escaped code points, wrapped in ``(?i:...)`` under Go's ``i`` flag;
* character classes are lists of code point ranges (Go's POSIX ``[:alpha:]``, Perl
  ``\\d\\s\\w`` and ``\\pL`` groups resolved to ASCII or Unicode ranges), negated by
  ``[^...]`` so that case folding happens before negation, as in Go;
* ``^``/``$`` become ``\\A``/``\\Z`` (or ``(?m:^)``/``(?m:$)`` under ``m``), ``.``
  becomes ``(?s:.)`` under ``s``, ``\\b`` becomes the ASCII ``(?a:\\b)``; Go's ``U``
  flag is applied by swapping greedy and lazy repetitions;
* flag groups ``(?i)`` emit nothing and only change how later atoms are written, so a
  repetition after one applies to the atom before it, as in Go.

Parse errors are Go's: ``error parsing regexp: <code>: `<fragment>```, with the same
fragment Go names (``missing closing ): `(a```, ``invalid nested repetition operator:
`**```, ``invalid or unsupported Perl syntax: `(?=```...), including the 1000 limit on
repeat counts and their products. Not supported here: Unicode scripts (``\\p{Greek}``),
which Go accepts; :class:`UnsupportedRegexpError` says so rather than guessing.

Costs and limits: compiling is linear in the pattern, once per schema node (results are
cached by pattern); a ``\\p`` group costs one scan of Unicode (about a second, once per
process). Matching uses Python's backtracking engine, which is exponential on some
patterns where Go's is linear (``(a+)+$`` on a long run of ``a``); schema authors control
patterns, clients only the values. Pure functions; safe from any thread. Callers:
``registry.structural`` (patterns), ``registry.crd_formats``.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "GoRegexp",
    "GoRegexpError",
    "UnsupportedRegexpError",
    "compile_go",
]

MAX_RUNE: Final = 0x10FFFF
MAX_REPEAT: Final = 1000

ERR_INVALID_CHAR_RANGE: Final = "invalid character class range"
ERR_INVALID_ESCAPE: Final = "invalid escape sequence"
ERR_INVALID_NAMED_CAPTURE: Final = "invalid named capture"
ERR_INVALID_PERL_OP: Final = "invalid or unsupported Perl syntax"
ERR_INVALID_REPEAT_OP: Final = "invalid nested repetition operator"
ERR_INVALID_REPEAT_SIZE: Final = "invalid repeat count"
ERR_MISSING_BRACKET: Final = "missing closing ]"
ERR_MISSING_PAREN: Final = "missing closing )"
ERR_MISSING_REPEAT_ARGUMENT: Final = "missing argument to repetition operator"
ERR_TRAILING_BACKSLASH: Final = "trailing backslash at end of expression"
ERR_UNEXPECTED_PAREN: Final = "unexpected )"


class GoRegexpError(ValueError):
    """What Go's ``regexp.Compile`` returns for an invalid pattern (``str()`` is Go's)."""

    def __init__(self, code: str, expr: str) -> None:
        super().__init__(f"error parsing regexp: {code}: `{expr}`")
        self.code = code
        self.expr = expr


class UnsupportedRegexpError(ValueError):
    """A pattern Go accepts that this server cannot run faithfully."""


Ranges = list[tuple[int, int]]

_PERL_GROUPS: Final[dict[str, Ranges]] = {
    "d": [(0x30, 0x39)],
    "s": [(0x09, 0x0A), (0x0C, 0x0D), (0x20, 0x20)],
    "w": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
}

_POSIX_GROUPS: Final[dict[str, Ranges]] = {
    "alnum": [(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)],
    "alpha": [(0x41, 0x5A), (0x61, 0x7A)],
    "ascii": [(0x00, 0x7F)],
    "blank": [(0x09, 0x09), (0x20, 0x20)],
    "cntrl": [(0x00, 0x1F), (0x7F, 0x7F)],
    "digit": [(0x30, 0x39)],
    "graph": [(0x21, 0x7E)],
    "lower": [(0x61, 0x7A)],
    "print": [(0x20, 0x7E)],
    "punct": [(0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)],
    "space": [(0x09, 0x0D), (0x20, 0x20)],
    "upper": [(0x41, 0x5A)],
    "word": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    "xdigit": [(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)],
}

# Go's unicode.Categories: the two-letter categories and the one-letter unions (where "C"
# is Cc|Cf|Co|Cs, without the unassigned Cn).
_CATEGORY_TEXT: Final = (
    "C Cc Cf Co Cs L Ll Lm Lo Lt Lu M Mc Me Mn N Nd Nl No P Pc Pd Pe Pf Pi Po Ps "
    "S Sc Sk Sm So Z Zl Zp Zs"
)
_CATEGORY_NAMES: Final = frozenset(_CATEGORY_TEXT.split())


@functools.cache
def _category_table() -> dict[str, Ranges]:
    """Code point ranges per Unicode general category, from one scan of unicodedata."""
    table: dict[str, Ranges] = {}
    category = unicodedata.category
    previous = ""
    start = 0
    for code in range(MAX_RUNE + 2):
        current = category(chr(code)) if code <= MAX_RUNE else ""
        if current != previous:
            if previous:
                table.setdefault(previous, []).append((start, code - 1))
            previous, start = current, code
    return table


# Go's unicode.Scripts: valid in Go patterns, but Python's unicodedata has no script
# property to run them with.
_SCRIPT_TEXT: Final = """
    Adlam Ahom Anatolian_Hieroglyphs Arabic Armenian Avestan Balinese Bamum Bassa_Vah
    Batak Bengali Bhaiksuki Bopomofo Brahmi Braille Buginese Buhid Canadian_Aboriginal Carian
    Caucasian_Albanian Chakma Cham Cherokee Chorasmian Common Coptic Cuneiform Cypriot
    Cypro_Minoan Cyrillic Deseret Devanagari Dives_Akuru Dogra Duployan Egyptian_Hieroglyphs
    Elbasan Elymaic Ethiopic Garay Georgian Glagolitic Gothic Grantha Greek Gujarati
    Gunjala_Gondi Gurmukhi Gurung_Khema Han Hangul Hanifi_Rohingya Hanunoo Hatran Hebrew
    Hiragana Imperial_Aramaic Inherited Inscriptional_Pahlavi Inscriptional_Parthian Javanese
    Kaithi Kannada Katakana Kawi Kayah_Li Kharoshthi Khitan_Small_Script Khmer Khojki
    Khudawadi Kirat_Rai Lao Latin Lepcha Limbu Linear_A Linear_B Lisu Lycian Lydian Mahajani
    Makasar Malayalam Mandaic Manichaean Marchen Masaram_Gondi Medefaidrin Meetei_Mayek
    Mende_Kikakui Meroitic_Cursive Meroitic_Hieroglyphs Miao Modi Mongolian Mro Multani
    Myanmar Nabataean Nag_Mundari Nandinagari New_Tai_Lue Newa Nko Nushu
    Nyiakeng_Puachue_Hmong Ogham Ol_Chiki Ol_Onal Old_Hungarian Old_Italic Old_North_Arabian
    Old_Permic Old_Persian Old_Sogdian Old_South_Arabian Old_Turkic Old_Uyghur Oriya Osage
    Osmanya Pahawh_Hmong Palmyrene Pau_Cin_Hau Phags_Pa Phoenician Psalter_Pahlavi Rejang
    Runic Samaritan Saurashtra Sharada Shavian Siddham SignWriting Sinhala Sogdian
    Sora_Sompeng Soyombo Sundanese Sunuwar Syloti_Nagri Syriac Tagalog Tagbanwa Tai_Le
    Tai_Tham Tai_Viet Takri Tamil Tangsa Tangut Telugu Thaana Thai Tibetan Tifinagh Tirhuta
    Todhri Toto Tulu_Tigalari Ugaritic Vai Vithkuqi Wancho Warang_Citi Yezidi Yi
    Zanabazar_Square"""
_SCRIPT_NAMES: Final = frozenset(_SCRIPT_TEXT.split())


def _unicode_group(name: str) -> Ranges | None:
    """Go's ``unicodeTable``: the ranges of a general category (or ``Any``, ``Assigned``,
    ``Ascii``, ``LC``/``Lc``); None for a name Go does not know either."""
    if name == "Any":
        return [(0, MAX_RUNE)]
    if name == "Ascii":
        return [(0, 0x7F)]
    table = _category_table()
    if name == "Assigned":
        return _negate(table.get("Cn", []))
    if name in ("LC", "Lc"):
        return _clean([r for c in ("Lu", "Ll", "Lt") for r in table.get(c, [])])
    if name not in _CATEGORY_NAMES:
        return None
    if len(name) == 2:
        return list(table.get(name, []))
    members = [c for c in table if c[0] == name and (name != "C" or c != "Cn")]
    return _clean([r for c in members for r in table[c]])


def _clean(ranges: Ranges) -> Ranges:
    """Sorted, merged ranges (Go's cleanClass)."""
    out: Ranges = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def _negate(ranges: Ranges) -> Ranges:
    out: Ranges = []
    next_lo = 0
    for lo, hi in _clean(ranges):
        if next_lo <= lo - 1:
            out.append((next_lo, lo - 1))
        next_lo = hi + 1
    if next_lo <= MAX_RUNE:
        out.append((next_lo, MAX_RUNE))
    return out


def _escape(code: int) -> str:
    if code < 0x80 and (chr(code).isalnum() or code == 0x5F):
        return chr(code)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _class_text(ranges: Ranges, negate: bool, fold: bool) -> str:
    body = "".join(
        _escape(lo) if lo == hi else f"{_escape(lo)}-{_escape(hi)}" for lo, hi in _clean(ranges)
    )
    if not body:
        # An empty positive class matches nothing; Python has no "[]".
        text = "[^\\x00-\\U0010ffff]" if not negate else "[\\x00-\\U0010ffff]"
    else:
        text = f"[{'^' if negate else ''}{body}]"
    return f"(?i:{text})" if fold else text


def _has_case(char: str) -> bool:
    return char.lower() != char or char.upper() != char


@dataclass(slots=True)
class _Flags:
    fold: bool = False
    multiline: bool = False
    dotall: bool = False
    ungreedy: bool = False

    def copy(self) -> _Flags:
        return _Flags(self.fold, self.multiline, self.dotall, self.ungreedy)


@dataclass(slots=True)
class _Atom:
    text: str
    weight: int = 1  # the largest product of counted repeats inside (Go's repeatIsValid)


@dataclass(slots=True)
class _Frame:
    opener: str  # "" for the whole expression, "(" or "(?:" for a group
    saved: _Flags
    alternatives: list[list[_Atom]] = field(default_factory=list)
    current: list[_Atom] = field(default_factory=list)

    def text_and_weight(self) -> tuple[str, int]:
        branches = [*self.alternatives, self.current]
        text = "|".join("".join(a.text for a in branch) for branch in branches)
        weight = max((a.weight for branch in branches for a in branch), default=1)
        return text, weight


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.pos = 0
        self.flags = _Flags()
        self.frames: list[_Frame] = [_Frame("", self.flags.copy())]
        self.last_repeat = -1  # where the previous token, if a repetition, started

    # -- helpers -----------------------------------------------------------------------

    def rest(self) -> str:
        return self.pattern[self.pos :]

    def push(self, text: str, weight: int = 1) -> None:
        self.frames[-1].current.append(_Atom(text, weight))

    def literal(self, code: int) -> None:
        char = chr(code)
        text = _escape(code)
        self.push(f"(?i:{text})" if self.flags.fold and _has_case(char) else text)

    def zero_width(self, text: str) -> None:
        # Python refuses to repeat a bare assertion; Go repeats it like anything else.
        self.push(f"(?:{text})")

    # -- the main loop -----------------------------------------------------------------

    def parse(self) -> str:
        pattern = self.pattern
        while self.pos < len(pattern):
            start = self.pos
            repeat_start = -1
            char = pattern[self.pos]
            if char == "(":
                self.open_group()
            elif char == "|":
                frame = self.frames[-1]
                frame.alternatives.append(frame.current)
                frame.current = []
                self.pos += 1
            elif char == ")":
                self.close_group()
            elif char == "^":
                self.zero_width("(?m:^)" if self.flags.multiline else "\\A")
                self.pos += 1
            elif char == "$":
                self.zero_width("(?m:$)" if self.flags.multiline else "\\Z")
                self.pos += 1
            elif char == ".":
                self.push("(?s:.)" if self.flags.dotall else ".")
                self.pos += 1
            elif char == "[":
                self.parse_class()
            elif char in "*+?":
                self.repeat(char, 0, 0, start, start + 1)
                repeat_start = start
            elif char == "{":
                parsed = self.parse_repeat_braces()
                if parsed is None:
                    self.literal(ord("{"))
                    self.pos += 1
                else:
                    low, high, end = parsed
                    if low < 0 or low > MAX_REPEAT or high > MAX_REPEAT or 0 <= high < low:
                        raise GoRegexpError(ERR_INVALID_REPEAT_SIZE, pattern[start:end])
                    self.repeat("{", low, high, start, end)
                    repeat_start = start
            elif char == "\\":
                self.parse_backslash()
            else:
                self.literal(ord(char))
                self.pos += 1
            self.last_repeat = repeat_start
        if len(self.frames) != 1:
            raise GoRegexpError(ERR_MISSING_PAREN, pattern)
        return self.frames[0].text_and_weight()[0]

    # -- groups ------------------------------------------------------------------------

    def open_group(self) -> None:
        pattern = self.pattern
        if pattern.startswith("(?", self.pos):
            self.parse_perl_flags()
            return
        self.frames.append(_Frame("(", self.flags.copy()))
        self.pos += 1

    def parse_perl_flags(self) -> None:
        pattern = self.pattern
        start = self.pos
        rest = pattern[start:]
        starts_with_p = len(rest) > 4 and rest[2] == "P" and rest[3] == "<"
        starts_with_name = len(rest) > 3 and rest[2] == "<"
        if starts_with_p or starts_with_name:
            end = rest.find(">")
            if end < 0:
                raise GoRegexpError(ERR_INVALID_NAMED_CAPTURE, rest)
            name = rest[(4 if starts_with_p else 3) : end]
            if not name or not all(c == "_" or (c.isascii() and c.isalnum()) for c in name):
                raise GoRegexpError(ERR_INVALID_NAMED_CAPTURE, rest[: end + 1])
            # Names do not change what matches; a plain group keeps Python's naming rules
            # (no leading digit, no duplicates) out of the way.
            self.frames.append(_Frame("(", self.flags.copy()))
            self.pos = start + end + 1
            return
        flags = self.flags.copy()
        negative = False
        saw_flag = False
        i = start + 2
        while i < len(pattern):
            char = pattern[i]
            i += 1
            if char in "imsU":
                value = not negative
                if char == "i":
                    flags.fold = value
                elif char == "m":
                    flags.multiline = value
                elif char == "s":
                    flags.dotall = value
                else:
                    flags.ungreedy = value
                saw_flag = True
            elif char == "-":
                if negative:
                    break
                negative = True
                saw_flag = False
            elif char in ":)":
                if negative and not saw_flag:
                    break
                if char == ":":
                    self.frames.append(_Frame("(?:", self.flags.copy()))
                self.flags = flags
                self.pos = i
                return
            else:
                break
        else:
            raise GoRegexpError(ERR_INVALID_PERL_OP, pattern[start:])
        raise GoRegexpError(ERR_INVALID_PERL_OP, pattern[start:i])

    def close_group(self) -> None:
        if len(self.frames) < 2:
            raise GoRegexpError(ERR_UNEXPECTED_PAREN, self.pattern)
        frame = self.frames.pop()
        text, weight = frame.text_and_weight()
        self.flags = frame.saved
        self.push(f"{frame.opener}{text})", weight)
        self.pos += 1

    # -- repetition --------------------------------------------------------------------

    def parse_repeat_braces(self) -> tuple[int, int, int] | None:
        """``{n}``, ``{n,}`` or ``{n,m}`` at pos: (min, max (-1: none), end), or None
        when the text is not a repetition (then ``{`` is a literal). A number too large
        to read gives min -1."""
        pattern = self.pattern
        i = self.pos + 1

        def number(at: int) -> tuple[int, int] | None:
            end = at
            while end < len(pattern) and "0" <= pattern[end] <= "9":
                end += 1
            if end == at or (end - at >= 2 and pattern[at] == "0"):
                return None
            digits = pattern[at:end]
            value = int(digits) if len(digits) <= 9 else -1
            return (value if value < 10**8 or value < 0 else -1), end

        first = number(i)
        if first is None:
            return None
        low, i = first
        if i >= len(pattern):
            return None
        if pattern[i] != ",":
            high = low
        else:
            i += 1
            if i >= len(pattern):
                return None
            if pattern[i] == "}":
                high = -1
            else:
                second = number(i)
                if second is None:
                    return None
                high, i = second
                if high < 0:
                    low = -1
        if i >= len(pattern) or pattern[i] != "}":
            return None
        return low, high, i + 1

    def repeat(self, op: str, low: int, high: int, start: int, end: int) -> None:
        pattern = self.pattern
        lazy = self.flags.ungreedy
        if end < len(pattern) and pattern[end] == "?":
            end += 1
            lazy = not lazy
        if self.last_repeat >= 0:
            raise GoRegexpError(ERR_INVALID_REPEAT_OP, pattern[self.last_repeat : end])
        current = self.frames[-1].current
        if not current:
            raise GoRegexpError(ERR_MISSING_REPEAT_ARGUMENT, pattern[start:end])
        atom = current[-1]
        if op == "{":
            count = high if high >= 0 else low
            weight = 1 if count == 0 else count * atom.weight
            if (low >= 2 or high >= 2) and weight > MAX_REPEAT:
                raise GoRegexpError(ERR_INVALID_REPEAT_SIZE, pattern[start:end])
            suffix = f"{{{low}}}" if low == high else f"{{{low},{'' if high < 0 else high}}}"
        else:
            weight = atom.weight
            suffix = op
        # Wrap so that the repetition applies to the whole atom, whatever Python makes of
        # its text.
        current[-1] = _Atom(f"(?:{atom.text}){suffix}{'?' if lazy else ''}", weight)
        self.pos = end

    # -- escapes -----------------------------------------------------------------------

    def parse_backslash(self) -> None:
        pattern = self.pattern
        start = self.pos
        if start + 1 < len(pattern):
            char = pattern[start + 1]
            if char == "A":
                self.zero_width("\\A")
                self.pos += 2
                return
            if char in "bB":
                self.zero_width(f"(?a:\\{char})")
                self.pos += 2
                return
            if char == "C":
                raise GoRegexpError(ERR_INVALID_ESCAPE, pattern[start : start + 2])
            if char == "Q":
                end = pattern.find("\\E", start + 2)
                text = pattern[start + 2 :] if end < 0 else pattern[start + 2 : end]
                for literal in text:
                    self.literal(ord(literal))
                self.pos = len(pattern) if end < 0 else end + 2
                return
            if char == "z":
                self.zero_width("\\Z")
                self.pos += 2
                return
            if char in "pP":
                ranges, negate, end = self.parse_unicode_class(start)
                self.push(_class_text(ranges, negate, self.flags.fold))
                self.pos = end
                return
            group = _PERL_GROUPS.get(char.lower()) if char.isascii() else None
            if group is not None:
                self.push(_class_text(group, char.isupper(), self.flags.fold))
                self.pos += 2
                return
        code, end = self.parse_escape(start)
        self.literal(code)
        self.pos = end

    def parse_escape(self, start: int) -> tuple[int, int]:
        """A single-character escape at ``start`` (a backslash): (code point, end)."""
        pattern = self.pattern
        i = start + 1
        if i >= len(pattern):
            raise GoRegexpError(ERR_TRAILING_BACKSLASH, "")
        char = pattern[i]
        i += 1
        code = ord(char)
        if code < 0x80 and not (char.isascii() and char.isalnum()):
            return code, i
        octal = "01234567"
        if char in "1234567" and (i >= len(pattern) or pattern[i] not in octal):
            raise GoRegexpError(ERR_INVALID_ESCAPE, pattern[start:i])
        if char in octal:
            value = code - 0x30
            for _ in range(2):
                if i >= len(pattern) or pattern[i] not in octal:
                    break
                value = value * 8 + ord(pattern[i]) - 0x30
                i += 1
            return value, i
        if char == "x":
            return self.parse_hex(start, i)
        simple = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
        if char in simple:
            return simple[char], i
        raise GoRegexpError(ERR_INVALID_ESCAPE, pattern[start:i])

    def parse_hex(self, start: int, i: int) -> tuple[int, int]:
        pattern = self.pattern
        hexdigits = "0123456789abcdefABCDEF"
        if i >= len(pattern):
            raise GoRegexpError(ERR_INVALID_ESCAPE, pattern[start:i])
        char = pattern[i]
        i += 1
        if char == "{":
            value = 0
            count = 0
            while True:
                if i >= len(pattern):
                    raise GoRegexpError(ERR_INVALID_ESCAPE, pattern[start:i])
                char = pattern[i]
                i += 1
                if char == "}":
                    break
                if char not in hexdigits:
                    raise GoRegexpError(ERR_INVALID_ESCAPE, pattern[start:i])
                value = value * 16 + int(char, 16)
                if value > MAX_RUNE:
                    raise GoRegexpError(ERR_INVALID_ESCAPE, pattern[start:i])
                count += 1
            if count == 0:
                raise GoRegexpError(ERR_INVALID_ESCAPE, pattern[start:i])
            return value, i
        if i >= len(pattern):
            raise GoRegexpError(ERR_INVALID_ESCAPE, pattern[start:i])
        second = pattern[i]
        i += 1
        if char not in hexdigits or second not in hexdigits:
            raise GoRegexpError(ERR_INVALID_ESCAPE, pattern[start:i])
        return int(char + second, 16), i

    def parse_unicode_class(self, start: int) -> tuple[Ranges, bool, int]:
        """``\\pN``, ``\\p{Name}``, ``\\PN``, ``\\p{^Name}`` at ``start``."""
        pattern = self.pattern
        negate = pattern[start + 1] == "P"
        i = start + 2
        if i < len(pattern) and pattern[i] == "{":
            end = pattern.find("}", start)
            if end < 0:
                raise GoRegexpError(ERR_INVALID_CHAR_RANGE, pattern[start:])
            seq = pattern[start : end + 1]
            name = pattern[start + 3 : end]
            i = end + 1
        else:
            i = min(i + 1, len(pattern))
            seq = pattern[start:i]
            name = seq[2:]
        if name.startswith("^"):
            negate = not negate
            name = name[1:]
        ranges = _unicode_group(name)
        if ranges is None:
            if name in _SCRIPT_NAMES:
                raise UnsupportedRegexpError(f"unicode class {seq} is not supported by this server")
            raise GoRegexpError(ERR_INVALID_CHAR_RANGE, seq)
        return ranges, negate, i

    # -- character classes -------------------------------------------------------------

    def parse_class(self) -> None:
        pattern = self.pattern
        start = self.pos
        i = start + 1
        negate = False
        if i < len(pattern) and pattern[i] == "^":
            negate = True
            i += 1
        ranges: Ranges = []
        first = True
        while i >= len(pattern) or pattern[i] != "]" or first:
            first = False
            if pattern.startswith("[:", i) and len(pattern) - i > 2:
                close = pattern.find(":]", i + 2)
                if close >= 0:
                    name = pattern[i : close + 2]
                    inner = name[2:-2]
                    group_negated = inner.startswith("^")
                    group = _POSIX_GROUPS.get(inner[1:] if group_negated else inner)
                    if group is None:
                        raise GoRegexpError(ERR_INVALID_CHAR_RANGE, name)
                    ranges.extend(_negate(group) if group_negated else group)
                    i = close + 2
                    continue
            if pattern.startswith(("\\p", "\\P"), i):
                group, group_negated, i = self.parse_unicode_class(i)
                ranges.extend(_negate(group) if group_negated else group)
                continue
            if i + 1 < len(pattern) and pattern[i] == "\\" and pattern[i + 1].isascii():
                perl = _PERL_GROUPS.get(pattern[i + 1].lower())
                if perl is not None:
                    ranges.extend(_negate(perl) if pattern[i + 1].isupper() else perl)
                    i += 2
                    continue
            range_start = i
            low, i = self.class_char(i, start)
            high = low
            if i + 1 < len(pattern) and pattern[i] == "-" and pattern[i + 1] != "]":
                high, i = self.class_char(i + 1, start)
                if high < low:
                    raise GoRegexpError(ERR_INVALID_CHAR_RANGE, pattern[range_start:i])
            ranges.append((low, high))
        self.pos = i + 1
        self.push(_class_text(ranges, negate, self.flags.fold))

    def class_char(self, i: int, class_start: int) -> tuple[int, int]:
        pattern = self.pattern
        if i >= len(pattern):
            raise GoRegexpError(ERR_MISSING_BRACKET, pattern[class_start:])
        if pattern[i] == "\\":
            return self.parse_escape(i)
        return ord(pattern[i]), i + 1


@dataclass(frozen=True, slots=True)
class GoRegexp:
    """A compiled Go pattern: ``search`` is Go's ``MatchString``."""

    pattern: str
    python_pattern: str
    compiled: re.Pattern[str]

    def search(self, text: str) -> bool:
        return self.compiled.search(text) is not None


@functools.lru_cache(maxsize=4096)
def compile_go(pattern: str) -> GoRegexp:
    """Compile a Go regular expression. Raises :class:`GoRegexpError` with Go's message
    for a pattern Go refuses, :class:`UnsupportedRegexpError` for one it cannot run."""
    translated = _Parser(pattern).parse()
    try:
        compiled = re.compile(translated)
    except (re.error, RecursionError, OverflowError) as error:  # pragma: no cover - a bug
        raise UnsupportedRegexpError(f"cannot run {pattern!r}: {error}") from None
    return GoRegexp(pattern, translated, compiled)
