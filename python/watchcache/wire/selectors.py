"""Kubernetes label and field selectors: parse, validate, format, compile to ``_core.Selector``.

Design note
-----------
The accepted language is whatever a real apiserver accepts, quirks included: a client that
works against Kubernetes must work here, and a selector Kubernetes answers with 400 must get
a 400 here too. The reference is apimachinery ``labels.Parse`` and ``fields.ParseSelector``.

Label selectors (``labelSelector=``). Tokens: whitespace is exactly space, tab, CR and LF;
the symbols ``= == != ! ( ) , < >`` (longest match: ``!=`` and ``==`` are one token, ``<=``
is two); every other run of characters is a *word*. A word is an operator (``in``, ``notin``)
only where an operator is expected, so ``in=notin`` is a valid requirement::

    selector    := "" | requirement ("," requirement)*
    requirement := "!" KEY                         -> (KEY, "!")       key absent
                 | KEY                             -> (KEY, "exists")
                 | KEY ("=" | "==" | "!=") [VALUE] -> "=" or "!="; a missing VALUE is ""
                 | KEY (">" | "<") [VALUE]         -> "gt" / "lt"; VALUE a decimal int64
                 | KEY ("in" | "notin") "(" list ")"

    list: values separated by commas, where an empty slot is the value "": "()" and "(,)"
    are {""}, "(a,)" and "(,a)" are {"", a}. One quirk is kept on purpose: a ",," pair is
    read as a single separator plus "", and must be followed by a value or another comma,
    so "(a,,b)" and "(a,,,)" parse while "(a,,)" is rejected, exactly as Kubernetes does.

KEY is a qualified name: an optional lowercase DNS-1123 subdomain prefix (at most 253
characters) and "/", then a name of 1-63 characters of ``[A-Za-z0-9._-]`` that starts and
ends alphanumeric. VALUE is "" or 1-63 characters of the same alphabet and shape. ``in`` and
``notin`` values are de-duplicated and sorted; requirements are sorted by key (stably: equal
keys keep their order in the text, where Go's unstable sort makes no promise).

Field selectors (``fieldSelector=``) are much looser: terms separated by commas that are not
escaped, empty terms ignored; each term is split at the first ``!=``, ``==`` or ``=``; the
key is taken verbatim (no trimming, no unescaping, may be empty); in the value ``\\\\``,
``\\,`` and ``\\=`` are escapes, any other backslash sequence or a bare ``=`` is an error.
Terms are handled in sorted order of their raw text, as Kubernetes does, which decides the
order of the result and which of several errors is reported. Field names are not checked
here: which fields exist is the apiserver's business (it answers 400 for unknown ones).

Why a hand-written lexer (one small regular expression per token) and a recursive-descent
parser rather than a grammar library or one big regular expression: the language is defined
by Kubernetes' own hand-written state machine, and its quirks (keyword-or-word by context,
the ",," rule, empty values) are easiest to keep exact, and to point at with an error
position, by mirroring that structure. No dependencies.

Cost: O(n) time and memory in the length of the text, plus a sort of the requirements
(O(r log r)); key and value checks only run the regular expressions on length-bounded
input, so no pathological backtracking. Everything is pure and thread-safe; the results are
immutable. Callers: the apiserver layer (query parameters) and the cache (scan filters).

Deliberate differences from Kubernetes, all on inputs no real client sends: a NUL character
in a label selector is rejected (Go's lexer reads NUL as end of input, so ``a=b\\x00junk``
would silently become ``a=b``); a lone surrogate in a field selector is rejected because the
native engine stores UTF-8.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum, auto
from typing import TYPE_CHECKING, ClassVar, Final, Literal, NamedTuple

from watchcache.wire.gostrconv import is_int64

if TYPE_CHECKING:
    from watchcache import _core

__all__ = [
    "FieldOp",
    "FieldRequirement",
    "LabelOp",
    "LabelRequirement",
    "SelectorError",
    "compile_selector",
    "format_field_selector",
    "format_label_selector",
    "parse_field_selector",
    "parse_label_selector",
]

LabelOp = Literal["=", "!=", "in", "notin", "exists", "!", "gt", "lt"]
FieldOp = Literal["=", "!="]

# How many values each label operator takes; None means "one or more".
_LABEL_ARITY: Final[dict[str, int | None]] = {
    "=": 1,
    "!=": 1,
    "in": None,
    "notin": None,
    "exists": 0,
    "!": 0,
    "gt": 1,
    "lt": 1,
}

# Longer texts are cut in error messages (the position stays absolute), so a megabyte of
# garbage in a query string does not become a megabyte of error message.
_QUOTE_LIMIT: Final = 200
_CLIP_LIMIT: Final = 40


class SelectorError(ValueError):
    """A label or field selector that Kubernetes would reject (HTTP 400 Bad Request).

    ``position`` is the 0-based character offset in ``text`` where the problem was found
    (``len(text)`` for a premature end), ``detail`` says what is wrong there, ``kind`` is
    ``"label"`` or ``"field"``.
    """

    code: ClassVar[int] = 400

    def __init__(self, kind: Literal["label", "field"], text: str, position: int, detail: str):
        self.kind: Literal["label", "field"] = kind
        self.text = text
        self.position = position
        self.detail = detail
        super().__init__(f"invalid {kind} selector {_quote(text)}: position {position}: {detail}")

    def __reduce__(self) -> tuple[type[SelectorError], tuple[str, str, int, str]]:
        # The default pickling replays args (the message) into __init__, which takes four.
        return (type(self), (self.kind, self.text, self.position, self.detail))


def _quote(text: str) -> str:
    if len(text) > _QUOTE_LIMIT:
        return json.dumps(text[:_QUOTE_LIMIT], ensure_ascii=False) + "..."
    return json.dumps(text, ensure_ascii=False)


def _clip(part: str) -> str:
    """A piece of the input (key, value, term) for a message: repr, cut when long."""
    if len(part) > _CLIP_LIMIT:
        return repr(part[:_CLIP_LIMIT]) + "..."
    return repr(part)


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One label requirement, in the form the native ``_core.Selector`` takes.

    ``values`` holds one value for ``=``, ``!=``, ``gt``, ``lt``; one or more (sorted, unique
    when produced by the parser) for ``in``/``notin``; none for ``exists`` and ``!``.
    Constructing one with an unknown op or the wrong number of values raises ValueError;
    the key and values themselves are only validated by the parser.
    """

    key: str
    op: LabelOp
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.op not in _LABEL_ARITY:
            raise ValueError(f"unknown label selector operator {self.op!r}")
        arity = _LABEL_ARITY[self.op]
        if (arity is None and not self.values) or (arity is not None and len(self.values) != arity):
            want = "at least one value" if arity is None else f"{arity} value(s)"
            raise ValueError(f"label operator {self.op!r} takes {want}, got {self.values!r}")


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """One field requirement: ``fields.get(key, "") == value`` (``=``) or ``!=`` it."""

    key: str
    op: FieldOp
    value: str

    def __post_init__(self) -> None:
        if self.op not in ("=", "!="):
            raise ValueError(f"unknown field selector operator {self.op!r}")


# ---------------------------------------------------------------------------------------------
# Label selectors: lexer


class _Kind(Enum):
    WORD = auto()
    IN = auto()
    NOTIN = auto()
    EQUALS = auto()
    DOUBLE_EQUALS = auto()
    NOT_EQUALS = auto()
    BANG = auto()
    GREATER = auto()
    LESS = auto()
    OPEN = auto()
    CLOSE = auto()
    COMMA = auto()
    END = auto()


class _Token(NamedTuple):
    kind: _Kind
    text: str
    pos: int


_SYMBOLS: Final[dict[str, _Kind]] = {
    "==": _Kind.DOUBLE_EQUALS,
    "!=": _Kind.NOT_EQUALS,
    "=": _Kind.EQUALS,
    "!": _Kind.BANG,
    ">": _Kind.GREATER,
    "<": _Kind.LESS,
    "(": _Kind.OPEN,
    ")": _Kind.CLOSE,
    ",": _Kind.COMMA,
}
_KEYWORDS: Final[dict[str, _Kind]] = {"in": _Kind.IN, "notin": _Kind.NOTIN}
# One token after optional whitespace (space, tab, CR, LF only: not \v, \f or Unicode
# spaces). The alternatives never overlap, so a match is a single forward pass; "sym" tries
# the two-character symbols first (longest match); "word" is everything else.
_TOKEN_RE: Final = re.compile(
    r"[ \t\r\n]*(?:(?P<sym>==|!=|[=!><(),])|(?P<word>[^ \t\r\n=!><(),]+))?"
)


def _lex(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while True:
        m = _TOKEN_RE.match(text, pos)
        assert m is not None  # every group is optional: the pattern always matches
        if (sym := m.group("sym")) is not None:
            tokens.append(_Token(_SYMBOLS[sym], sym, m.start("sym")))
        elif (word := m.group("word")) is not None:
            tokens.append(_Token(_KEYWORDS.get(word, _Kind.WORD), word, m.start("word")))
        else:
            # Only whitespace was left (or nothing): the matcher stopped at the end.
            tokens.append(_Token(_Kind.END, "", len(text)))
            return tokens
        pos = m.end()


def _describe(tok: _Token) -> str:
    return "end of selector" if tok.kind is _Kind.END else _clip(tok.text)


# ---------------------------------------------------------------------------------------------
# Label selectors: key and value checks (apimachinery validation.IsQualifiedName and
# IsValidLabelValue). Each returns None when valid, else the reason.

_NAME_MAX: Final = 63
_PREFIX_MAX: Final = 253
_VALUE_MAX: Final = 63
_NAME_RE: Final = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_LABEL: Final = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_RE: Final = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*")
_CHARSET: Final = (
    "alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric"
)


def _key_problem(key: str) -> str | None:
    prefix, slash, name = key.partition("/")
    if not slash:
        name = prefix
    elif "/" in name:
        return f"key {_clip(key)} has more than one '/'"
    elif not prefix:
        return f"key {_clip(key)} has an empty prefix before '/'"
    elif len(prefix) > _PREFIX_MAX:
        return f"key prefix is longer than {_PREFIX_MAX} characters"
    elif not _DNS_SUBDOMAIN_RE.fullmatch(prefix):
        return (
            f"key prefix {_clip(prefix)} must be a lowercase DNS subdomain "
            "(e.g. 'example.com': a-z, 0-9, '-', '.')"
        )
    if not name:
        return f"key {_clip(key)} has an empty name"
    if len(name) > _NAME_MAX:
        return f"key name is longer than {_NAME_MAX} characters"
    if not _NAME_RE.fullmatch(name):
        return f"key name {_clip(name)} must consist of {_CHARSET}"
    return None


def _value_problem(value: str) -> str | None:
    if len(value) > _VALUE_MAX:
        return f"value is longer than {_VALUE_MAX} characters"
    if value and not _NAME_RE.fullmatch(value):
        return f"value {_clip(value)} must be empty or consist of {_CHARSET}"
    return None


# ---------------------------------------------------------------------------------------------
# Label selectors: parser


# Where a key or value is expected, the keywords are ordinary words: "in=notin" is key "in"
# with value "notin". Only the operator position tells them apart (Kubernetes' "values" vs
# "key and operator" contexts).
_WORDS: Final = (_Kind.WORD, _Kind.IN, _Kind.NOTIN)
_REQUIREMENT_START: Final = (*_WORDS, _Kind.BANG)


class _LabelParser:
    """Recursive descent over the token list, one token of lookahead."""

    __slots__ = ("_at", "_text", "_tokens")

    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens = _lex(text)
        self._at = 0

    def _fail(self, position: int, detail: str) -> SelectorError:
        return SelectorError("label", self._text, position, detail)

    def _peek(self) -> _Token:
        return self._tokens[self._at]

    def _take(self) -> _Token:
        tok = self._tokens[self._at]
        if tok.kind is not _Kind.END:  # END is sticky: never run off the token list
            self._at += 1
        return tok

    def parse(self) -> list[LabelRequirement]:
        requirements: list[LabelRequirement] = []
        tok = self._peek()
        if tok.kind is _Kind.END:
            return requirements
        while True:
            if tok.kind not in _REQUIREMENT_START:
                raise self._fail(tok.pos, f"expected a key or '!', found {_describe(tok)}")
            requirements.append(self._requirement())
            after = self._take()
            if after.kind is _Kind.END:
                return requirements
            if after.kind is not _Kind.COMMA:
                raise self._fail(
                    after.pos, f"expected ',' or end of selector, found {_describe(after)}"
                )
            tok = self._peek()
            if tok.kind not in _REQUIREMENT_START:
                # "a," and "a,,b": a trailing or doubled comma is an error at this level.
                raise self._fail(
                    tok.pos, f"expected a key or '!' after ',', found {_describe(tok)}"
                )

    def _requirement(self) -> LabelRequirement:
        tok = self._take()
        negated = tok.kind is _Kind.BANG
        if negated:
            tok = self._take()
        if tok.kind not in _WORDS:
            raise self._fail(tok.pos, f"expected a key, found {_describe(tok)}")
        key = tok.text
        if (problem := _key_problem(key)) is not None:
            raise self._fail(tok.pos, problem)
        if negated:
            # "!a=b": the '!' form takes no operator; the caller rejects whatever follows.
            return LabelRequirement(key, "!")
        if self._peek().kind in (_Kind.END, _Kind.COMMA):
            return LabelRequirement(key, "exists")

        op_tok = self._take()
        op: LabelOp
        if op_tok.kind is _Kind.IN or op_tok.kind is _Kind.NOTIN:
            op = "in" if op_tok.kind is _Kind.IN else "notin"
            values = self._value_list(op_tok)
        elif op_tok.kind in (_Kind.EQUALS, _Kind.DOUBLE_EQUALS, _Kind.NOT_EQUALS):
            op = "!=" if op_tok.kind is _Kind.NOT_EQUALS else "="
            values = [self._single_value(op_tok)]
        elif op_tok.kind in (_Kind.GREATER, _Kind.LESS):
            op = "gt" if op_tok.kind is _Kind.GREATER else "lt"
            values = [self._single_value(op_tok)]
            number, number_pos = values[0]
            if not is_int64(number):
                raise self._fail(
                    number_pos,
                    f"the value of '{op_tok.text}' must be a decimal integer (int64), "
                    f"found {_clip(number)}",
                )
        else:
            raise self._fail(
                op_tok.pos,
                f"expected an operator after key {_clip(key)} (=, ==, !=, in, notin, >, <), "
                f"found {_describe(op_tok)}",
            )
        # Values are checked only once the whole requirement has parsed, as Kubernetes
        # does, so "a in (b@d c)" reports the missing comma, not the '@'.
        for value, pos in values:
            if (problem := _value_problem(value)) is not None:
                raise self._fail(pos, problem)
        if op in ("in", "notin"):
            return LabelRequirement(key, op, tuple(sorted({value for value, _ in values})))
        return LabelRequirement(key, op, (values[0][0],))

    def _single_value(self, op_tok: _Token) -> tuple[str, int]:
        tok = self._peek()
        if tok.kind in (_Kind.END, _Kind.COMMA):
            return "", tok.pos  # "a=" and "a=,b" mean a is "" (and ">" then fails the int check)
        self._take()
        if tok.kind not in _WORDS:
            raise self._fail(
                tok.pos, f"expected a value after '{op_tok.text}', found {_describe(tok)}"
            )
        return tok.text, tok.pos

    def _value_list(self, op_tok: _Token) -> list[tuple[str, int]]:
        """``( ... )`` after in/notin: values with their positions, duplicates kept."""
        tok = self._take()
        if tok.kind is not _Kind.OPEN:
            raise self._fail(tok.pos, f"expected '(' after '{op_tok.text}', found {_describe(tok)}")
        tok = self._peek()
        if tok.kind is _Kind.CLOSE:
            self._take()
            return [("", tok.pos)]
        if tok.kind not in _WORDS and tok.kind is not _Kind.COMMA:
            raise self._fail(tok.pos, f"expected a value, ',' or ')', found {_describe(tok)}")

        values: list[tuple[str, int]] = []
        while True:
            tok = self._take()
            if tok.kind in _WORDS:
                values.append((tok.text, tok.pos))
                after = self._peek()
                if after.kind is _Kind.CLOSE:
                    break
                if after.kind is not _Kind.COMMA:
                    raise self._fail(
                        after.pos, f"expected ',' or ')' after a value, found {_describe(after)}"
                    )
            elif tok.kind is _Kind.COMMA:
                if not values:
                    values.append(("", tok.pos))  # "(,a)": the slot before the comma
                after = self._peek()
                if after.kind is _Kind.CLOSE:
                    values.append(("", after.pos))  # "(a,)": the slot after the comma
                    break
                if after.kind is _Kind.COMMA:
                    # The ",," quirk: the second comma is swallowed as an empty value, so
                    # "(a,,)" now sees ')' where it needs a value or ',' and fails.
                    self._take()
                    values.append(("", after.pos))
            else:
                raise self._fail(tok.pos, f"expected a value or ',', found {_describe(tok)}")
        self._take()  # the ')' seen above
        return values


def parse_label_selector(text: str) -> tuple[LabelRequirement, ...]:
    """Parse a Kubernetes label selector (``"app=web,tier in (a,b),!canary"``).

    Returns the requirements sorted by key (stable); ``""`` gives ``()``, which matches
    everything. Raises SelectorError (a ValueError) naming the position for anything
    Kubernetes rejects, TypeError if ``text`` is not a str. O(n) in ``len(text)``.
    """
    if not isinstance(text, str):
        raise TypeError(f"label selector must be str, not {type(text).__name__}")
    if (nul := text.find("\x00")) >= 0:
        raise SelectorError("label", text, nul, "NUL character is not allowed")
    requirements = _LabelParser(text).parse()
    requirements.sort(key=lambda r: r.key)
    return tuple(requirements)


_LABEL_OP_TEXT: Final[dict[str, str]] = {
    "=": "=",
    "!=": "!=",
    "gt": ">",
    "lt": "<",
    "in": " in ",
    "notin": " notin ",
}


def format_label_selector(requirements: Iterable[LabelRequirement]) -> str:
    """The canonical Kubernetes string of ``requirements``, in the order given.

    ``==`` is written as ``=``; ``in``/``notin`` values are written sorted and unique (a
    repeated "" would otherwise write ",," which does not parse back). For parser output,
    ``parse_label_selector(format_label_selector(r)) == r``. O(total length).
    """
    parts: list[str] = []
    for r in requirements:
        if r.op == "exists":
            parts.append(r.key)
        elif r.op == "!":
            parts.append("!" + r.key)
        elif r.op in ("in", "notin"):
            parts.append(f"{r.key}{_LABEL_OP_TEXT[r.op]}({','.join(sorted(set(r.values)))})")
        else:
            parts.append(f"{r.key}{_LABEL_OP_TEXT[r.op]}{r.values[0]}")
    return ",".join(parts)


# ---------------------------------------------------------------------------------------------
# Field selectors


def _split_terms(text: str) -> list[tuple[str, int]]:
    """Terms at commas not escaped by a backslash, with their start offsets.

    The backslash stays in the term; it only stops the next character from splitting.
    """
    terms: list[tuple[str, int]] = []
    start = 0
    escaped = False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append((text[start:i], start))
            start = i + 1
    terms.append((text[start:], start))
    return terms


def _split_term(term: str) -> tuple[str, FieldOp, int] | None:
    """(key, op, value offset) at the first '!=', '==' or '=' in ``term``, ignoring escapes.

    The first '=' decides: a '!' just before it makes '!=', a '=' just after makes '=='.
    """
    eq = term.find("=")
    if eq < 0:
        return None
    if eq > 0 and term[eq - 1] == "!":
        return term[: eq - 1], "!=", eq + 1
    if term.startswith("=", eq + 1):
        return term[:eq], "=", eq + 2
    return term[:eq], "=", eq + 1


def _unescape_value(text: str, value: str, offset: int) -> str:
    out: list[str] = []
    escaped = False
    for i, ch in enumerate(value):
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(
                    "field",
                    text,
                    offset + i - 1,
                    f"invalid escape sequence '\\{ch}' in value (only \\\\, \\, and \\= exist)",
                )
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise SelectorError(
                "field", text, offset + i, f"unescaped {ch!r} in value (write it as '\\{ch}')"
            )
        else:
            out.append(ch)
    if escaped:
        raise SelectorError(
            "field", text, offset + len(value) - 1, "value ends in a lone backslash"
        )
    return "".join(out)


def parse_field_selector(text: str) -> tuple[FieldRequirement, ...]:
    """Parse a Kubernetes field selector (``"metadata.name=x,status.phase!=Failed"``).

    ``==`` is normalized to ``=``; values are unescaped. Requirements come in the sorted
    order of their raw terms; duplicates are kept. ``""`` gives ``()`` (everything).
    Raises SelectorError (a ValueError) naming the position, TypeError for a non-str.
    O(n log n) for the term sort, O(n) otherwise.
    """
    if not isinstance(text, str):
        raise TypeError(f"field selector must be str, not {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SelectorError("field", text, exc.start, "lone surrogate is not valid text") from None
    requirements: list[FieldRequirement] = []
    for term, start in sorted(_split_terms(text)):
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise SelectorError(
                "field", text, start, f"term {_clip(term)} has no operator (=, == or !=)"
            )
        key, op, value_at = split
        value = _unescape_value(text, term[value_at:], start + value_at)
        requirements.append(FieldRequirement(key, op, value))
    return tuple(requirements)


def _escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def format_field_selector(requirements: Iterable[FieldRequirement]) -> str:
    """The Kubernetes string of ``requirements``: ``key=value`` / ``key!=value``, joined by ','.

    Values are escaped; keys are written verbatim, as Kubernetes does, so a key the field
    grammar cannot carry (one with '=' or an unescaped ',', or ending in '!' before '=')
    raises ValueError. Parser output always round-trips (as a multiset). O(total length).
    """
    parts: list[str] = []
    for r in requirements:
        part = f"{r.key}{r.op}{_escape_field_value(r.value)}"
        # A key is representable iff the written term reads back as this one key and op.
        terms = _split_terms(part)
        split = _split_term(part) if len(terms) == 1 else None
        if split is None or split[:2] != (r.key, r.op):
            raise ValueError(f"field key {_clip(r.key)} cannot be written in a field selector")
        parts.append(part)
    return ",".join(parts)


# ---------------------------------------------------------------------------------------------
# Compilation


def compile_selector(
    label_selector: str | None = None, field_selector: str | None = None
) -> _core.Selector:
    """Parse both selectors and build the native matcher (``None`` or ``""`` = no constraint).

    Raises SelectorError for a bad selector, TypeError for a non-str. Cost: the two parses
    plus O(total size) to build; the result is immutable and safe to share between threads.
    """
    labels = () if label_selector is None else parse_label_selector(label_selector)
    fields = () if field_selector is None else parse_field_selector(field_selector)
    # Imported here so that parsing works, and is testable, before the extension is built.
    from watchcache import _core  # noqa: PLC0415

    return _core.Selector(
        labels=[(r.key, r.op, r.values) for r in labels],
        fields=[(r.key, r.op, r.value) for r in fields],
    )
