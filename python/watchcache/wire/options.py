"""LIST and WATCH request options: decoded from the query, validated as Kubernetes does.

Design note
-----------
Invariant: every :class:`ListOptions` and :class:`WatchOptions` that exists has passed all
of Kubernetes' request validation except the decoding of the continue token (that needs the
resource's key prefix, so ``tokens`` does it later). Construction validates, in Kubernetes'
order, and the first stage that fails decides the error a client sees:

1. query decoding (apimachinery's parameter codec; only in ``from_query``): a repeated
   parameter uses its first value; bool parameters are ``False`` when absent, ``"0"`` or
   ``"false"`` in any case (Go ``strings.EqualFold``: the long s U+017F counts as ``s``),
   and ``True`` for anything else, ``""`` included; ``sendInitialEvents`` is ``None`` when
   absent; ``limit`` and ``timeoutSeconds`` are Go ``strconv.ParseInt`` int64s, and bad text
   is **400**. Unknown parameters (``pretty``, ``fieldManager``, ...) are ignored;
2. selectors: label, then field selector parse → **400** with the SelectorError text;
3. WatchList defaulting (watch only, ``from_query`` only, see :meth:`WatchOptions.from_query`);
4. API validation (``internalversion/validation``) → **422** Invalid, kind ``ListOptions``,
   group ``meta.k8s.io``, name ``""``, every violation one cause, aggregated in one error;
5. storage validation (``storage.ValidateListOptions``, LIST only) → **400**: a resource
   version with a continue token (``"0"`` is allowed), then an unparsable resource version.

Why validate in the constructor: the planner and the cache then never re-check, and no code
path can forget a rule. Why one module for both verbs: LIST and WATCH share the query and
most rules; they differ only in the table of step 4, and keeping both tables side by side
below is how they stay exact.

Deliberate differences from Kubernetes, on inputs its own clients do not send:

* a WATCH with an unparsable ``resourceVersion`` is **400** (message as for a LIST), where
  Kubernetes answers 500 with an empty reason (docs/semantics.md §10 item 23);
* a negative ``timeoutSeconds`` is **400** (Kubernetes does not check the sign);
  ``timeoutSeconds=0`` means the server default, as in Kubernetes, and is stored as ``None``;
* the texts of our decoding errors (stage 1) are ours; Kubernetes' depend on its codec.

Costs: construction is O(length of the selectors) (both are parsed; see ``selectors``);
``from_query`` adds O(number of parameters). :meth:`selector` compiles the native matcher
once, on first use, and keeps it. Everything is immutable; the one lazily filled member (the
compiled selector) may be built twice by racing threads, which is harmless: both results are
equal and either is kept. Safe to share between threads.

Callers: the apiserver layer (``parse_query`` on the request's query), the planner and the
cache (read the members), clients and tests (``to_query`` to build a request).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, cast

from watchcache.wire.errors import BadRequestError, InvalidError, StatusCause
from watchcache.wire.gostrconv import (
    INT64_MAX,
    INT64_MIN,
    go_quote,
    is_go_false,
    parse_int64,
    parse_uint64,
)
from watchcache.wire.selectors import (
    FieldRequirement,
    LabelRequirement,
    SelectorError,
    compile_selector,
    parse_field_selector,
    parse_label_selector,
)

if TYPE_CHECKING:
    from watchcache import _core

__all__ = [
    "ListOptions",
    "ResourceVersionMatch",
    "WatchOptions",
    "parse_query",
    "parse_resource_version",
]


class ResourceVersionMatch(enum.StrEnum):
    """``metav1.ResourceVersionMatch``: how ``resourceVersion`` applies to a LIST."""

    UNSET = ""
    EXACT = "Exact"
    NOT_OLDER_THAN = "NotOlderThan"


Params = Mapping[str, str] | Iterable[tuple[str, str]]

_KNOWN_PARAMETERS: Final = frozenset(
    {
        "resourceVersion",
        "resourceVersionMatch",
        "limit",
        "continue",
        "labelSelector",
        "fieldSelector",
        "watch",
        "allowWatchBookmarks",
        "sendInitialEvents",
        "timeoutSeconds",
    }
)

_KIND: Final = "ListOptions"
_GROUP: Final = "meta.k8s.io"
_FORBIDDEN: Final = "FieldValueForbidden"
_NOT_SUPPORTED: Final = "FieldValueNotSupported"
_MATCH_FIELD: Final = "resourceVersionMatch"
_SIE_FIELD: Final = "sendInitialEvents"


def parse_resource_version(text: str) -> int:
    """The etcd revision named by a ``resourceVersion`` string.

    ``""`` and ``"0"`` give 0; otherwise ``text`` must be a uint64 in decimal ASCII digits
    (no sign, no spaces), as Go's ``strconv.ParseUint(text, 10, 64)`` accepts. Raises
    BadRequestError (400) with Kubernetes' exact message, e.g. ``invalid resource version:
    resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid
    syntax`` (or ``value out of range``), TypeError for a non-str. O(len(text)).
    """
    if not isinstance(text, str):
        raise TypeError(f"resource version must be str, not {type(text).__name__}")
    if text in ("", "0"):
        return 0
    value, problem = parse_uint64(text)
    if problem is not None:
        quoted = go_quote(text)
        raise BadRequestError(
            f"invalid resource version: resourceVersion: Invalid value: {quoted}: "
            f"strconv.ParseUint: parsing {quoted}: {problem}"
        )
    return value


# ---------------------------------------------------------------------------------------------
# Validation stages shared by the two option types


_Requirements = tuple[tuple[LabelRequirement, ...], tuple[FieldRequirement, ...]]
_NO_REQUIREMENTS: Final[_Requirements] = ((), ())


def _parse_selectors(label_selector: str, field_selector: str) -> _Requirements:
    """Stage 2: both selectors, label first; a SelectorError becomes a 400."""
    try:
        return parse_label_selector(label_selector), parse_field_selector(field_selector)
    except SelectorError as exc:
        raise BadRequestError(str(exc)) from exc


def _forbidden(field_path: str, detail: str) -> StatusCause:
    """``field.Forbidden``: the cause of one forbidden combination."""
    return StatusCause(reason=_FORBIDDEN, message=f"Forbidden: {detail}", field=field_path)


def _not_supported(field_path: str, value: str, supported: Sequence[str]) -> StatusCause:
    """``field.NotSupported``: the value and the quoted list of supported ones."""
    values = ", ".join(go_quote(v) for v in supported)
    return StatusCause(
        reason=_NOT_SUPPORTED,
        message=f"Unsupported value: {go_quote(value)}: supported values: {values}",
        field=field_path,
    )


def _list_causes(
    resource_version: str, match: str, continue_token: str, send_initial_events_given: bool
) -> list[StatusCause]:
    """Stage 4 for a LIST (``ValidateListOptions``, ``watch`` false), in Kubernetes' order."""
    causes: list[StatusCause] = []
    if match:
        if not resource_version:
            causes.append(
                _forbidden(
                    _MATCH_FIELD,
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )
            )
        if continue_token:
            causes.append(
                _forbidden(
                    _MATCH_FIELD, "resourceVersionMatch is forbidden when continue is provided"
                )
            )
        if match not in (ResourceVersionMatch.EXACT, ResourceVersionMatch.NOT_OLDER_THAN):
            causes.append(
                _not_supported(
                    _MATCH_FIELD,
                    match,
                    (ResourceVersionMatch.EXACT, ResourceVersionMatch.NOT_OLDER_THAN, ""),
                )
            )
        if match == ResourceVersionMatch.EXACT and resource_version == "0":
            causes.append(
                _forbidden(
                    _MATCH_FIELD,
                    'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            )
    if send_initial_events_given:
        causes.append(_forbidden(_SIE_FIELD, "sendInitialEvents is forbidden for list"))
    return causes


def _watch_causes(
    match: str, send_initial_events: bool | None, continue_token: str, watch_list: bool
) -> list[StatusCause]:
    """Stage 4 for a WATCH (``validateWatchOptions``), in Kubernetes' order."""
    causes: list[StatusCause] = []
    if send_initial_events is not None:
        if match != ResourceVersionMatch.NOT_OLDER_THAN:
            causes.append(
                _forbidden(
                    _MATCH_FIELD,
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                )
            )
        if not watch_list:
            causes.append(
                _forbidden(
                    _SIE_FIELD,
                    "sendInitialEvents is forbidden for watch unless the WatchList feature "
                    "gate is enabled",
                )
            )
    if match:
        if send_initial_events is None:
            causes.append(
                _forbidden(
                    _MATCH_FIELD,
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                    "provided",
                )
            )
        if match != ResourceVersionMatch.NOT_OLDER_THAN:
            causes.append(
                _not_supported(_MATCH_FIELD, match, (ResourceVersionMatch.NOT_OLDER_THAN,))
            )
        if continue_token:
            causes.append(
                _forbidden(
                    _MATCH_FIELD, "resourceVersionMatch is forbidden when continue is provided"
                )
            )
    return causes


def _raise_invalid(causes: Sequence[StatusCause]) -> None:
    if causes:
        raise InvalidError.for_fields(_KIND, _GROUP, "", causes)


def _match_text(value: object) -> tuple[str, ResourceVersionMatch | None]:
    """The raw match text and its enum member (None for a value Kubernetes does not know)."""
    if isinstance(value, ResourceVersionMatch):
        return value.value, value
    if not isinstance(value, str):
        raise TypeError(f"resource_version_match must be str, not {type(value).__name__}")
    try:
        return value, ResourceVersionMatch(value)
    except ValueError:
        return value, None


def _check_str(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be str, not {type(value).__name__}")


def _check_int64(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be int, not {type(value).__name__}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise BadRequestError(f"{name} {value} is out of the int64 range")


def _check_timeout(value: int | None) -> None:
    if value is None:
        return
    _check_int64("timeoutSeconds", value)
    if value < 0:
        raise BadRequestError(f"timeoutSeconds must not be negative, got {value}")


# ---------------------------------------------------------------------------------------------
# Stage 1: query decoding


def _first_values(params: Params) -> dict[str, str]:
    """The first value of every known parameter, as Go's ``url.Values`` conversion takes."""
    given: object = params
    if isinstance(given, str | bytes):
        raise TypeError("query parameters must be a mapping or (name, value) pairs, not text")
    pairs: Iterable[tuple[str, str]] = params.items() if isinstance(params, Mapping) else params
    out: dict[str, str] = {}
    for name, value in pairs:
        if name in _KNOWN_PARAMETERS and name not in out:
            _check_str(f"query parameter {name!r}", value)
            out[name] = value
    return out


def _decode_bool(query: Mapping[str, str], name: str) -> bool:
    text = query.get(name)
    return text is not None and not is_go_false(text)


def _decode_optional_bool(query: Mapping[str, str], name: str) -> bool | None:
    text = query.get(name)
    return None if text is None else not is_go_false(text)


def _decode_int64(query: Mapping[str, str], name: str) -> int | None:
    text = query.get(name)
    if text is None:
        return None
    value, problem = parse_int64(text)
    if problem is not None:
        raise BadRequestError(
            f'invalid query parameter "{name}": strconv.ParseInt: parsing '
            f"{go_quote(text)}: {problem}"
        )
    return value


def _query_string_members(query: Mapping[str, str]) -> tuple[str, str, str, str, str]:
    return (
        query.get("resourceVersion", ""),
        query.get("resourceVersionMatch", ""),
        query.get("continue", ""),
        query.get("labelSelector", ""),
        query.get("fieldSelector", ""),
    )


# ---------------------------------------------------------------------------------------------
# The option types


class _CommonOptions:
    """What both option types share: the parsed resource version and the selector.

    Relies on the dataclass members ``resource_version``, ``label_selector``,
    ``field_selector``, ``_requirements`` and ``_compiled``.
    """

    __slots__ = ()

    resource_version: str
    label_selector: str
    field_selector: str
    #: ``resource_version`` as an integer (0 for ``""`` and ``"0"``), parsed on construction.
    parsed_resource_version: int
    _requirements: _Requirements
    _compiled: _core.Selector | None

    @property
    def label_requirements(self) -> tuple[LabelRequirement, ...]:
        """The parsed label selector (sorted by key; ``()`` = no constraint). O(1)."""
        return self._requirements[0]

    @property
    def field_requirements(self) -> tuple[FieldRequirement, ...]:
        """The parsed field selector (``()`` = no constraint, also for ``",,"``). O(1)."""
        return self._requirements[1]

    @property
    def has_selector(self) -> bool:
        """Whether any label or field requirement constrains the result. O(1)."""
        labels, fields = self._requirements
        return bool(labels or fields)

    def selector(self) -> _core.Selector | None:
        """The compiled native matcher, or None when there is no requirement.

        Compiled on the first call (O(selector length)) and kept: later calls return the
        same immutable object. Never raises for a constructed object.
        """
        labels, fields = self._requirements
        if not (labels or fields):
            return None
        compiled = self._compiled
        if compiled is None:
            compiled = compile_selector(self.label_selector, self.field_selector)
            object.__setattr__(self, "_compiled", compiled)
        return compiled


@dataclass(frozen=True, slots=True)
class ListOptions(_CommonOptions):
    """The options of one LIST request, valid by construction (see the module note).

    ``resource_version`` is kept as sent (``""`` = unset; ``"0"`` = any); ``limit`` as sent
    (``<= 0`` = no limit, see :attr:`page_size`). ``resource_version_match`` also accepts
    its plain string value and is normalized to the enum. The continue token is kept as
    sent; its content is checked later, against the resource's key prefix.

    Raises, in this order: TypeError for a member of the wrong type; BadRequestError (400)
    for a ``limit`` outside int64 or an unparsable selector; InvalidError (422) with one
    cause per violated rule of the API table; BadRequestError (400) for a resource
    version other than ``"0"`` with a continue token, then for an unparsable resource
    version. Cost: O(length of the selectors).
    """

    resource_version: str = ""
    resource_version_match: ResourceVersionMatch = ResourceVersionMatch.UNSET
    limit: int = 0
    continue_token: str = ""
    label_selector: str = ""
    field_selector: str = ""
    parsed_resource_version: int = field(default=0, init=False, repr=False, compare=False)
    #: The limit as a page size: ``max(limit, 0)``, 0 meaning no limit.
    page_size: int = field(default=0, init=False, repr=False, compare=False)
    _requirements: _Requirements = field(
        default=_NO_REQUIREMENTS, init=False, repr=False, compare=False
    )
    _compiled: _core.Selector | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_str("resource_version", self.resource_version)
        _check_str("continue_token", self.continue_token)
        _check_str("label_selector", self.label_selector)
        _check_str("field_selector", self.field_selector)
        _check_int64("limit", self.limit)
        match_text, match = _match_text(self.resource_version_match)
        requirements = _parse_selectors(self.label_selector, self.field_selector)
        _raise_invalid(_list_causes(self.resource_version, match_text, self.continue_token, False))
        if self.continue_token and self.resource_version not in ("", "0"):
            raise BadRequestError("specifying resource version is not allowed when using continue")
        rv = parse_resource_version(self.resource_version)
        assert match is not None  # an unknown value was reported as NotSupported above
        object.__setattr__(self, "resource_version_match", match)
        object.__setattr__(self, "parsed_resource_version", rv)
        object.__setattr__(self, "page_size", max(self.limit, 0))
        object.__setattr__(self, "_requirements", requirements)

    def __reduce__(self) -> tuple[Any, ...]:
        # The compiled selector cannot be pickled; rebuilding re-validates and re-parses.
        return (
            type(self),
            (
                self.resource_version,
                self.resource_version_match,
                self.limit,
                self.continue_token,
                self.label_selector,
                self.field_selector,
            ),
        )

    def to_query(self) -> dict[str, str]:
        """The query parameters of this request: only members that differ from the
        default, Kubernetes' names, keys sorted as Go's ``url.Values.Encode`` writes them.
        ``ListOptions.from_query(o.to_query()) == o`` for every ``o``. O(size)."""
        query: dict[str, str] = {}
        if self.continue_token:
            query["continue"] = self.continue_token
        if self.field_selector:
            query["fieldSelector"] = self.field_selector
        if self.label_selector:
            query["labelSelector"] = self.label_selector
        if self.limit:
            query["limit"] = str(self.limit)
        if self.resource_version:
            query["resourceVersion"] = self.resource_version
        if self.resource_version_match:
            query["resourceVersionMatch"] = self.resource_version_match.value
        return query

    @classmethod
    def from_query(cls, params: Params) -> ListOptions:
        """The LIST options of a request's query (a mapping, or (name, value) pairs in
        order: the first value of a repeated name wins; unknown names are ignored).

        ``timeoutSeconds`` and ``watch``-only parameters are decoded (a malformed
        ``timeoutSeconds`` is a 400, as in Kubernetes) and then unused. A present
        ``sendInitialEvents`` (any value) is a 422 ``sendInitialEvents is forbidden for
        list``, aggregated with the other 422 causes. Otherwise raises as the constructor
        does; TypeError for a non-str value or text instead of parameters. O(size).
        """
        query = _first_values(params)
        _decode_int64(query, "timeoutSeconds")
        limit = _decode_int64(query, "limit") or 0
        send_initial_events = _decode_optional_bool(query, "sendInitialEvents")
        rv, match, continue_token, label_selector, field_selector = _query_string_members(query)
        if send_initial_events is not None:
            # Not a member, so the constructor cannot see it: run stages 2 and 4 here.
            _parse_selectors(label_selector, field_selector)
            _raise_invalid(_list_causes(rv, match, continue_token, True))
        return cls(
            resource_version=rv,
            resource_version_match=cast(ResourceVersionMatch, match),
            limit=limit,
            continue_token=continue_token,
            label_selector=label_selector,
            field_selector=field_selector,
        )


@dataclass(frozen=True, slots=True)
class WatchOptions(_CommonOptions):
    """The options of one WATCH request, valid by construction (see the module note).

    ``send_initial_events`` is None when not requested; ``timeout_seconds`` None means the
    server default (0 is normalized to None, as Kubernetes treats it the same). The
    constructor validates but never applies the WatchList defaulting: that is a property
    of the query and lives in :meth:`from_query`.

    Raises, in this order: TypeError for a member of the wrong type; BadRequestError (400)
    for a negative or out-of-range ``timeout_seconds`` or an unparsable selector;
    InvalidError (422) with one cause per violated rule of the watch table (docs/semantics.md
    §5.1); BadRequestError (400) for an unparsable resource version (Kubernetes: 500).
    Cost: O(length of the selectors).
    """

    resource_version: str = ""
    resource_version_match: ResourceVersionMatch = ResourceVersionMatch.UNSET
    label_selector: str = ""
    field_selector: str = ""
    allow_watch_bookmarks: bool = False
    send_initial_events: bool | None = None
    timeout_seconds: int | None = None
    parsed_resource_version: int = field(default=0, init=False, repr=False, compare=False)
    _requirements: _Requirements = field(
        default=_NO_REQUIREMENTS, init=False, repr=False, compare=False
    )
    _compiled: _core.Selector | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_str("resource_version", self.resource_version)
        _check_str("label_selector", self.label_selector)
        _check_str("field_selector", self.field_selector)
        if not isinstance(self.allow_watch_bookmarks, bool):
            raise TypeError("allow_watch_bookmarks must be bool")
        if self.send_initial_events is not None and not isinstance(self.send_initial_events, bool):
            raise TypeError("send_initial_events must be bool or None")
        _check_timeout(self.timeout_seconds)
        match_text, match = _match_text(self.resource_version_match)
        requirements = _parse_selectors(self.label_selector, self.field_selector)
        _raise_invalid(_watch_causes(match_text, self.send_initial_events, "", True))
        rv = parse_resource_version(self.resource_version)
        assert match is not None  # an unknown value was reported as NotSupported above
        object.__setattr__(self, "resource_version_match", match)
        object.__setattr__(self, "parsed_resource_version", rv)
        object.__setattr__(self, "_requirements", requirements)
        if self.timeout_seconds == 0:
            object.__setattr__(self, "timeout_seconds", None)

    def __reduce__(self) -> tuple[Any, ...]:
        # The compiled selector cannot be pickled; rebuilding re-validates and re-parses.
        return (
            type(self),
            (
                self.resource_version,
                self.resource_version_match,
                self.label_selector,
                self.field_selector,
                self.allow_watch_bookmarks,
                self.send_initial_events,
                self.timeout_seconds,
            ),
        )

    def to_query(self) -> dict[str, str]:
        """The query parameters of this watch: ``watch=true`` plus the members that differ
        from the default, Kubernetes' names, keys sorted (as Go's ``url.Values.Encode``).

        ``WatchOptions.from_query(o.to_query()) == o`` unless the WatchList defaulting
        applies to ``o`` (resource version ``""``/``"0"`` with neither ``send_initial_events``
        nor ``resource_version_match``: no query can say "not defaulted"); for those,
        ``from_query(..., watch_list=False)`` gives ``o`` back. O(size).
        """
        query: dict[str, str] = {}
        if self.allow_watch_bookmarks:
            query["allowWatchBookmarks"] = "true"
        if self.field_selector:
            query["fieldSelector"] = self.field_selector
        if self.label_selector:
            query["labelSelector"] = self.label_selector
        if self.resource_version:
            query["resourceVersion"] = self.resource_version
        if self.resource_version_match:
            query["resourceVersionMatch"] = self.resource_version_match.value
        if self.send_initial_events is not None:
            query["sendInitialEvents"] = "true" if self.send_initial_events else "false"
        if self.timeout_seconds is not None:
            query["timeoutSeconds"] = str(self.timeout_seconds)
        query["watch"] = "true"
        return query

    @classmethod
    def from_query(cls, params: Params, *, watch_list: bool = True) -> WatchOptions:
        """The WATCH options of a request's query (first value wins, unknown names ignored;
        the ``watch`` parameter itself is not looked at).

        With ``watch_list`` (the WatchList feature gate, on by default since Kubernetes
        1.34): when the resource version is ``""`` or ``"0"`` and neither
        ``sendInitialEvents`` nor a non-empty ``resourceVersionMatch`` was given, the watch
        becomes ``send_initial_events=True, resource_version_match=NotOlderThan`` (a
        consistent "state, then changes"). Without it, nothing is defaulted and any
        ``sendInitialEvents`` is a 422 ``sendInitialEvents is forbidden for watch unless
        the WatchList feature gate is enabled``. ``limit`` is decoded (a malformed one is
        a 400) and unused; a ``continue`` with ``resourceVersionMatch`` is a 422.
        Otherwise raises as the constructor does. O(size).
        """
        query = _first_values(params)
        timeout_seconds = _decode_int64(query, "timeoutSeconds")
        _decode_int64(query, "limit")
        allow_watch_bookmarks = _decode_bool(query, "allowWatchBookmarks")
        send_initial_events = _decode_optional_bool(query, "sendInitialEvents")
        rv, match, continue_token, label_selector, field_selector = _query_string_members(query)
        _check_timeout(timeout_seconds)
        if watch_list and send_initial_events is None and not match and rv in ("", "0"):
            send_initial_events = True
            match = ResourceVersionMatch.NOT_OLDER_THAN
        if continue_token or not watch_list:
            # Context the constructor cannot see: run stages 2 and 4 here with it.
            _parse_selectors(label_selector, field_selector)
            _raise_invalid(_watch_causes(match, send_initial_events, continue_token, watch_list))
        return cls(
            resource_version=rv,
            resource_version_match=cast(ResourceVersionMatch, match),
            label_selector=label_selector,
            field_selector=field_selector,
            allow_watch_bookmarks=allow_watch_bookmarks,
            send_initial_events=send_initial_events,
            timeout_seconds=timeout_seconds,
        )


def parse_query(params: Params, *, watch_list: bool = True) -> ListOptions | WatchOptions:
    """The options of a collection GET: a WATCH when the ``watch`` parameter is true
    (Kubernetes' bool conversion: present and not ``0``/``false`` in any case, so ``True``
    from the Python client and even ``watch=`` count), else a LIST.

    See :meth:`WatchOptions.from_query` and :meth:`ListOptions.from_query` for the rules and
    errors (400 BadRequestError, 422 InvalidError; TypeError for a non-str value). O(size).
    """
    query = _first_values(params)
    if _decode_bool(query, "watch"):
        return WatchOptions.from_query(query, watch_list=watch_list)
    return ListOptions.from_query(query)
