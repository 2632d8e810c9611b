"""One step of a field path (a field name, a list-map key, a set value or a list index), its
order, its text in messages and its text in FieldsV1.

Design note
-----------
A field path names one place in an object: ``.spec.containers[name="web"].image``. Each
step is a :class:`PathElement` of one of four kinds, as in structured-merge-diff's
``fieldpath.PathElement``: a map field (``.image``), a list-map element by its key fields
(``[name="web"]``; several keys are sorted by name: ``[containerPort=80,protocol="TCP"]``),
a set element by value (``[="a"]``), or a list element by position (``[0]``, only in atomic
lists' absence of keys and in deduced values).

**Representation.** A PathElement *is* the tuple ``(kind, payload)``: kind 0 field, 1 key,
2 value, 3 index; the payload is the name, the index, or :func:`value.sort_key` of the value
(a key: the name-sorted ``(name, sort key)`` pairs). Tuple order and equality are then exactly
SMD's ``PathElement.Compare``: fields < keys < values < indexes, each kind by its own order,
so sorting, hashing and comparing run in C. The JSON a value or key was made from is rebuilt
from its sort key when asked for (``.value``, ``.key``): the key is lossless (an int stays an
int, a float a float), only dict member order is not kept, which nothing depends on.

**Texts.** :func:`path_string` is ``Path.String()``, the text Kubernetes puts in conflict
messages and causes, byte for byte (``value.ToString`` for keys and values). The FieldsV1
form of one element, ``serialize_path_element`` / ``deserialize_path_element``, is SMD's
``serialize-pe.go``: ``f:<name>`` raw, ``k:`` and ``v:`` followed by compact JSON as
json-iterator writes it, ``i:<n>``. Reading is as strict as SMD's: a key shorter than two
bytes, a missing colon, JSON with trailing data, a ``k:`` that is not an object, or an index
``strconv.Atoi`` refuses is a :class:`FieldsV1Error`; an unknown kind letter is not an error
(the element is dropped, as a newer writer may know kinds this reader does not). Numbers
inside ``k:``/``v:`` are read as floats, as json-iterator reads them into ``interface{}``.

**Tables.** Every write names the same few hundred elements again (``f:spec``,
``k:{"name":"web"}``), so bounded tables keep what is pure in them: field elements by name
(:func:`field_element`), elements by their FieldsV1 text (:func:`deserialize_path_element`),
and the FieldsV1 key and its JSON text by element (:func:`element_key`,
:func:`element_key_text`). Each maps a value to what a pure function gives for it, so a hit
is what a miss computes. The last two key their tables by the element, whose equality is
wider than its texts' (``-0.0`` equals ``0``; an int equals a float, which FieldsV1 reads
back and ``%v`` writes with an exponent from 1e6 on): they hold and consult *faithful*
elements only, which write the same texts as every element equal to them and read back as
such an element. Each table is emptied when it reaches its bound (a few thousand
entries), a bound that costs nothing per hit.

Costs: building an element is one tuple (plus a sort key for keys and values); texts are
linear in the element. Immutable; thread-safe (the tables are plain dicts: a race at worst
computes an entry twice). Callers: :mod:`watchcache.structured.fieldpath` and the typed
walkers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, TypeAlias

from watchcache.structured.value import (
    JSON,
    SortKey,
    json_string,
    sort_key,
    value_json,
    value_string,
)
from watchcache.wire.gostrconv import go_quote, parse_int64

__all__ = [
    "ELEMENT_KEYS",
    "ELEMENT_KEY_TEXTS",
    "FieldsV1Error",
    "Path",
    "PathElement",
    "deserialize_path_element",
    "element_key",
    "element_key_text",
    "field_element",
    "key_element",
    "key_element_of",
    "path_string",
    "serialize_path_element",
]

PathElementKind: TypeAlias = Literal["field", "key", "value", "index"]

_FIELD, _KEY, _VALUE, _INDEX = range(4)
_KINDS: Final[tuple[PathElementKind, ...]] = ("field", "key", "value", "index")
_NUMBER, _STRING, _BOOL, _LIST, _MAP, _NULL = range(6)


class FieldsV1Error(ValueError):
    """Managed fields (FieldsV1 JSON, or one of its path-element keys) that cannot be read."""


def _from_sort_key(key: SortKey) -> JSON:
    kind = key[0]
    if kind == _LIST:
        return [_from_sort_key(item) for item in key[1]]
    if kind == _MAP:
        return {name: _from_sort_key(item) for name, item in key[1]}
    if kind == _NULL:
        return None
    return key[1]


class PathElement(tuple[int, Any]):
    """One step of a path: exactly one of :attr:`field`, :attr:`key`, :attr:`value` and
    :attr:`index` is set (:attr:`kind` says which, as a null set value reads as None).
    Ordered, compared and hashed as SMD orders path elements. Build with the ``of_*``
    constructors."""

    __slots__ = ()

    @classmethod
    def of_field(cls, name: str) -> PathElement:
        """The map field ``name`` (``.name``)."""
        return tuple.__new__(cls, (_FIELD, name))

    @classmethod
    def of_key(cls, mapping: Mapping[str, JSON] | Iterable[tuple[str, JSON]]) -> PathElement:
        """The list-map element whose key fields have these values (``[name="web"]``);
        the fields are sorted by name."""
        pairs = mapping.items() if isinstance(mapping, Mapping) else mapping
        fields = sorted(((name, sort_key(v)) for name, v in pairs), key=_by_name)
        return tuple.__new__(cls, (_KEY, tuple(fields)))

    @classmethod
    def of_value(cls, value: JSON) -> PathElement:
        """The set element ``value`` (``[="a"]``)."""
        return tuple.__new__(cls, (_VALUE, sort_key(value)))

    @classmethod
    def of_index(cls, index: int) -> PathElement:
        """The list element at position ``index`` (``[0]``)."""
        return tuple.__new__(cls, (_INDEX, index))

    @property
    def kind(self) -> PathElementKind:
        """Which of the four kinds this element is."""
        return _KINDS[self[0]]

    @property
    def field(self) -> str | None:
        """The field name, for a field element."""
        return self[1] if self[0] == _FIELD else None

    @property
    def key(self) -> tuple[tuple[str, JSON], ...] | None:
        """The key fields (name, value), sorted by name, for a key element."""
        if self[0] != _KEY:
            return None
        return tuple((name, _from_sort_key(item)) for name, item in self[1])

    @property
    def value(self) -> JSON:
        """The value, for a set element (None otherwise, and for a null value)."""
        return _from_sort_key(self[1]) if self[0] == _VALUE else None

    @property
    def index(self) -> int | None:  # type: ignore[override]
        """The position, for an index element (this shadows ``tuple.index``)."""
        return self[1] if self[0] == _INDEX else None

    def __str__(self) -> str:
        return _element_string(self)

    def __repr__(self) -> str:
        return f"PathElement({_element_string(self)})"


def _by_name(pair: tuple[str, SortKey]) -> str:
    return pair[0]


#: Entries each cache table holds before it is emptied.
_TABLE_BOUND: Final = 8192
_FIELD_ELEMENTS: dict[str, PathElement] = {}


def field_element(name: str) -> PathElement:
    """``PathElement.of_field(name)``, the same object for the same name while it is in the
    table (the walkers name every map entry they pass)."""
    found = _FIELD_ELEMENTS.get(name)
    if found is None:
        if len(_FIELD_ELEMENTS) >= _TABLE_BOUND:
            _FIELD_ELEMENTS.clear()
        found = _FIELD_ELEMENTS[name] = tuple.__new__(PathElement, (_FIELD, name))
    return found


def key_element(name: str, value: JSON) -> PathElement:
    """``PathElement.of_key(((name, value),))``: a list-map element with one key field
    (containers by ``name``, the common case), without the general constructor's sort."""
    kind = type(value)
    if kind is str:
        key: SortKey = (_STRING, value)
    elif kind is int or kind is float:
        key = (_NUMBER, value)
    else:
        key = sort_key(value)
    return tuple.__new__(PathElement, (_KEY, ((name, key),)))


def key_element_of(names: tuple[str, ...], item: Mapping[str, JSON]) -> PathElement:
    """``PathElement.of_key`` of ``item``'s fields ``names``, which are sorted already
    and all present."""
    pairs = []
    for name in names:
        value = item[name]
        kind = type(value)
        if kind is str:
            pairs.append((name, (_STRING, value)))
        elif kind is int or kind is float:
            pairs.append((name, (_NUMBER, value)))
        else:
            pairs.append((name, sort_key(value)))
    return tuple.__new__(PathElement, (_KEY, tuple(pairs)))


#: A field path: the elements from the object's root down to one place.
Path: TypeAlias = tuple[PathElement, ...]


def _element_string(pe: PathElement) -> str:
    kind, payload = pe
    if kind == _FIELD:
        return "." + payload  # type: ignore[no-any-return]
    if kind == _KEY:
        return "[" + ",".join(f"{n}={value_string(_from_sort_key(v))}" for n, v in payload) + "]"
    if kind == _VALUE:
        return "[=" + value_string(_from_sort_key(payload)) + "]"
    return f"[{payload}]"


def path_string(path: Iterable[PathElement]) -> str:
    """SMD's ``Path.String()``: ``.spec.containers[name="web"].image``; ``""`` for the
    root."""
    return "".join(_element_string(pe) for pe in path)


def serialize_path_element(pe: PathElement) -> str:
    """The FieldsV1 key of ``pe`` (before it is itself written as a JSON string):
    ``f:name``, ``k:{"name":"web"}``, ``v:"a"``, ``i:0``."""
    kind, payload = pe
    if kind == _FIELD:
        return "f:" + payload  # type: ignore[no-any-return]
    if kind == _KEY:
        members = ",".join(
            json_string(name, html=False) + ":" + value_json(_from_sort_key(item))
            for name, item in payload
        )
        return "k:{" + members + "}"
    if kind == _VALUE:
        return "v:" + value_json(_from_sort_key(payload))
    return f"i:{payload}"


_SURROGATE: Final = re.compile("[\ud800-\udfff]")
#: Numbers below this magnitude write the same digits whether int or float, in FieldsV1
#: (json-iterator) and in ``Path.String()`` (``%v``, which switches to an exponent from 1e6
#: on); FieldsV1 reads every number back as a float.
_FAITHFUL_MAGNITUDE: Final = 10**6


def _faithful_text(text: str) -> bool:
    # A lone surrogate is written as U+FFFD, so it does not read back as itself.
    return text.isascii() or _SURROGATE.search(text) is None


def _faithful_key(key: SortKey) -> bool:
    kind = key[0]
    if kind == _STRING:
        return _faithful_text(key[1])
    if kind == _NUMBER:
        # Zero too: -0.0 equals it but writes "-0", and equal elements must be alike.
        number = key[1]
        return (
            type(number) in (int, float)
            and number != 0
            and -_FAITHFUL_MAGNITUDE < number < _FAITHFUL_MAGNITUDE
        )
    if kind == _LIST:
        return all(_faithful_key(item) for item in key[1])
    if kind == _MAP:
        return all(_faithful_text(name) and _faithful_key(item) for name, item in key[1])
    return kind in (_BOOL, _NULL)


def _faithful(pe: PathElement) -> bool:
    kind, payload = pe
    if kind == _FIELD:
        return _faithful_text(payload)
    if kind == _KEY:
        return all(_faithful_text(name) and _faithful_key(item) for name, item in payload)
    if kind == _VALUE:
        return _faithful_key(payload)
    return False  # an index: rare (never in a write's sets), left out of the table


#: The FieldsV1 key texts of faithful elements met so far (see :func:`element_key_text`),
#: for writers that look there first; read-only outside this module.
ELEMENT_KEY_TEXTS: Final[dict[PathElement, str]] = {}


#: ``serialize_path_element`` of faithful elements met so far (see
#: :func:`element_key_text`): the keys of a decoded FieldsV1 object; read-only outside.
ELEMENT_KEYS: Final[dict[PathElement, str]] = {}


def element_key(pe: PathElement) -> tuple[str, bool]:
    """(``serialize_path_element(pe)``, whether ``pe`` is faithful): for a faithful
    element, the key a decoded FieldsV1 object has for it (see
    :func:`element_key_text`)."""
    key = ELEMENT_KEYS.get(pe)
    if key is not None:
        return key, True
    faithful = _faithful(pe)
    key = serialize_path_element(pe)
    if faithful:
        if len(ELEMENT_KEYS) >= _TABLE_BOUND:
            ELEMENT_KEYS.clear()
        ELEMENT_KEYS[pe] = key
    return key, faithful


def element_key_text(pe: PathElement) -> tuple[str, bool]:
    """(``pe``'s FieldsV1 key as json-iterator's object-field writer writes it, quotes
    included; whether the element is *faithful*: reading that text back gives an element
    whose every text, in FieldsV1 and in ``Path.String()``, is the same). Unfaithful:
    strings with lone surrogates (written as U+FFFD), and numbers that are zero (-0.0
    writes "-0"), not finite, or from 1e6 on (FieldsV1 reads numbers back as floats,
    which ``%v`` writes with an exponent from 1e6 on); a smaller integer reads back as an
    equal float with the same texts.

    The table holds faithful elements only. Faithfulness goes with equality (an element
    equal to a faithful one is faithful: equal strings are the same text, equal numbers
    in that range write the same digits), so a hit is what computing the text gives."""
    text = ELEMENT_KEY_TEXTS.get(pe)
    if text is not None:
        return text, True
    faithful = _faithful(pe)
    text = json_string(serialize_path_element(pe), html=False)
    if faithful:
        if len(ELEMENT_KEY_TEXTS) >= _TABLE_BOUND:
            ELEMENT_KEY_TEXTS.clear()
        ELEMENT_KEY_TEXTS[pe] = text
    return text, faithful


class _Pairs(list[tuple[str, Any]]):
    """A JSON object read as its members in order, duplicates kept."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON number {name}")


def _plain(value: Any) -> JSON:
    # _Pairs to dicts (a repeated member: the last one wins, as in a Go map), and lone
    # surrogates to U+FFFD as Go decodes them.
    if isinstance(value, _Pairs):
        return {_text(k): _plain(v) for k, v in value}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, str):
        return _text(value)
    return value


_LONE_SURROGATES: Final = dict.fromkeys(range(0xD800, 0xE000), "\ufffd")


def _text(text: str) -> str:
    return text.translate(_LONE_SURROGATES)


def _read_json(text: str, what: str) -> Any:
    try:
        return json.loads(
            text,
            parse_int=float,
            parse_constant=_reject_constant,
            object_pairs_hook=_Pairs,
        )
    except RecursionError:
        raise FieldsV1Error(f"{what}: nested too deeply") from None
    except ValueError as error:
        raise FieldsV1Error(f"{what}: {error}") from None


_READ_ELEMENTS: dict[str, PathElement | None] = {}


def deserialize_path_element(text: str) -> PathElement | None:
    """The element a FieldsV1 key names; None for a kind this reader does not know (SMD
    drops those). Raises :class:`FieldsV1Error` for a malformed key."""
    try:
        return _READ_ELEMENTS[text]
    except KeyError:
        pass
    pe = _read_element(text)
    if len(_READ_ELEMENTS) >= _TABLE_BOUND:
        _READ_ELEMENTS.clear()
    _READ_ELEMENTS[text] = pe
    return pe


def _read_element(text: str) -> PathElement | None:
    if len(text.encode("utf-8", "surrogatepass")) < 2:
        raise FieldsV1Error(f"key must be 2 characters long: {text!r}")
    # Go looks at bytes: a non-ASCII first character leaves a continuation byte second.
    if len(text) < 2 or text[1] != ":" or ord(text[0]) >= 0x80:
        raise FieldsV1Error(f"missing colon: {text}")
    kind, rest = text[0], text[2:]
    if kind == "f":
        return PathElement.of_field(rest)
    if kind == "v":
        return PathElement.of_value(_plain(_read_json(rest, f"path element {text!r}")))
    if kind == "k":
        fields = _read_json(rest, f"path element {text!r}")
        if fields is None:
            return tuple.__new__(PathElement, (_KEY, ()))
        if not isinstance(fields, _Pairs):
            raise FieldsV1Error(f"path element {text!r}: a key must be a JSON object")
        return PathElement.of_key((_text(name), _plain(item)) for name, item in fields)
    if kind == "i":
        index, problem = parse_int64(rest)
        if problem is not None:
            raise FieldsV1Error(f"strconv.Atoi: parsing {go_quote(rest)}: {problem}")
        return PathElement.of_index(index)
    return None
