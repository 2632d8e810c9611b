"""LIST/WATCH option decoding and validation against Kubernetes' rules.

Expected texts are Kubernetes' (docs/semantics.md §2.2, §5.1, §7.2 and behaviours 5-7, 28):
apimachinery ``internalversion/validation``, ``internalversion/defaults.go``, the runtime's
query conversions (``Convert_Slice_string_To_bool`` / ``_Pointer_bool`` / ``_int64``) and
``storage.ValidateListOptions``. Each table row is one rule; ids name the rule.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from watchcache.wire.errors import BadRequestError, InvalidError, StatusError
from watchcache.wire.options import (
    ListOptions,
    ResourceVersionMatch,
    WatchOptions,
    parse_query,
    parse_resource_version,
)

RVM = ResourceVersionMatch

# Cause = (reason, field, message) as in the Status details.
Cause = tuple[str, str, str]

FORBIDDEN = "FieldValueForbidden"
NOT_SUPPORTED = "FieldValueNotSupported"

MATCH_NEEDS_RV: Cause = (
    FORBIDDEN,
    "resourceVersionMatch",
    "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
)
MATCH_WITH_CONTINUE: Cause = (
    FORBIDDEN,
    "resourceVersionMatch",
    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
)
EXACT_AT_ZERO: Cause = (
    FORBIDDEN,
    "resourceVersionMatch",
    'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
)
SIE_ON_LIST: Cause = (
    FORBIDDEN,
    "sendInitialEvents",
    "Forbidden: sendInitialEvents is forbidden for list",
)
SIE_NEEDS_NOT_OLDER_THAN: Cause = (
    FORBIDDEN,
    "resourceVersionMatch",
    "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
)
SIE_NEEDS_GATE: Cause = (
    FORBIDDEN,
    "sendInitialEvents",
    "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate "
    "is enabled",
)
WATCH_MATCH_NEEDS_SIE: Cause = (
    FORBIDDEN,
    "resourceVersionMatch",
    "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
)


def list_not_supported(value: str) -> Cause:
    return (
        NOT_SUPPORTED,
        "resourceVersionMatch",
        f'Unsupported value: "{value}": supported values: "Exact", "NotOlderThan", ""',
    )


def watch_not_supported(value: str) -> Cause:
    return (
        NOT_SUPPORTED,
        "resourceVersionMatch",
        f'Unsupported value: "{value}": supported values: "NotOlderThan"',
    )


def assert_invalid(err: InvalidError, causes: list[Cause]) -> None:
    """The 422 as ``NewInvalid(meta.k8s.io ListOptions, "", errs)`` builds it."""
    assert err.code == 422
    assert err.reason == "Invalid"
    assert err.details.kind == "ListOptions"
    assert err.details.group == "meta.k8s.io"
    assert err.details.name == ""
    got = [(c.reason, c.field, c.message) for c in err.details.causes]
    assert got == causes
    texts = [f"{field}: {message}" for _, field, message in causes]
    aggregated = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    assert err.message == f'ListOptions.meta.k8s.io "" is invalid: {aggregated}'


# ---------------------------------------------------------------------------------------------
# LIST: the 422 table (docs/semantics.md §2.2), behaviour 6


LIST_INVALID: list[tuple[str, dict[str, str], list[Cause]]] = [
    ("match_without_resource_version", {"resourceVersionMatch": "Exact"}, [MATCH_NEEDS_RV]),
    (
        "not_older_than_without_resource_version",
        {"resourceVersionMatch": "NotOlderThan"},
        [MATCH_NEEDS_RV],
    ),
    (
        "match_with_continue",
        {"resourceVersion": "5", "resourceVersionMatch": "NotOlderThan", "continue": "tok"},
        [MATCH_WITH_CONTINUE],
    ),
    (
        "match_not_supported",
        {"resourceVersion": "1", "resourceVersionMatch": "Foo"},
        [list_not_supported("Foo")],
    ),
    (
        "match_is_case_sensitive",
        {"resourceVersion": "1", "resourceVersionMatch": "exact"},
        [list_not_supported("exact")],
    ),
    (
        "exact_at_resource_version_zero",
        {"resourceVersion": "0", "resourceVersionMatch": "Exact"},
        [EXACT_AT_ZERO],
    ),
    ("send_initial_events_on_list", {"sendInitialEvents": "true"}, [SIE_ON_LIST]),
    ("send_initial_events_false_on_list", {"sendInitialEvents": "false"}, [SIE_ON_LIST]),
    ("send_initial_events_empty_on_list", {"sendInitialEvents": ""}, [SIE_ON_LIST]),
    (
        "all_match_violations_aggregated_in_order",
        {"resourceVersionMatch": "Foo", "continue": "tok", "sendInitialEvents": "1"},
        [MATCH_NEEDS_RV, MATCH_WITH_CONTINUE, list_not_supported("Foo"), SIE_ON_LIST],
    ),
    (
        "exact_at_zero_with_continue",
        {"resourceVersion": "0", "resourceVersionMatch": "Exact", "continue": "tok"},
        [MATCH_WITH_CONTINUE, EXACT_AT_ZERO],
    ),
    (
        "unsupported_value_is_go_quoted",
        {"resourceVersion": "1", "resourceVersionMatch": 'a"b\n'},
        [
            (
                NOT_SUPPORTED,
                "resourceVersionMatch",
                'Unsupported value: "a\\"b\\n": supported values: "Exact", "NotOlderThan", ""',
            )
        ],
    ),
]


@pytest.mark.parametrize(
    ("query", "causes"), [(q, c) for _, q, c in LIST_INVALID], ids=[i for i, _, _ in LIST_INVALID]
)
def test_list_validation_rejects_with_422(query: dict[str, str], causes: list[Cause]) -> None:
    with pytest.raises(InvalidError) as info:
        ListOptions.from_query(query)
    assert_invalid(info.value, causes)
    with pytest.raises(InvalidError) as again:
        parse_query(query)
    assert again.value.to_json() == info.value.to_json()


def test_list_constructor_applies_the_same_422_table() -> None:
    with pytest.raises(InvalidError) as info:
        ListOptions(resource_version_match=RVM.EXACT, continue_token="tok")
    assert_invalid(info.value, [MATCH_NEEDS_RV, MATCH_WITH_CONTINUE])


def test_list_constructor_accepts_plain_string_match_and_normalizes_it() -> None:
    opts = ListOptions(resource_version="5", resource_version_match="Exact")  # type: ignore[arg-type]
    assert opts.resource_version_match is RVM.EXACT
    assert opts == ListOptions(resource_version="5", resource_version_match=RVM.EXACT)


def test_list_constructor_rejects_unknown_match_as_not_supported() -> None:
    with pytest.raises(InvalidError) as info:
        ListOptions(resource_version="5", resource_version_match="Foo")  # type: ignore[arg-type]
    assert_invalid(info.value, [list_not_supported("Foo")])


# The 422 example of docs/semantics.md §7.2 (``?resourceVersionMatch=Exact`` without RV),
# byte for byte.
STATUS_422_EXAMPLE = (
    b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
    b'"message":"ListOptions.meta.k8s.io \\"\\" is invalid: resourceVersionMatch: Forbidden: '
    b'resourceVersionMatch is forbidden unless resourceVersion is provided",'
    b'"reason":"Invalid",'
    b'"details":{"group":"meta.k8s.io","kind":"ListOptions",'
    b'"causes":[{"reason":"FieldValueForbidden","message":"Forbidden: resourceVersionMatch is '
    b'forbidden unless resourceVersion is provided","field":"resourceVersionMatch"}]},'
    b'"code":422}'
)


def test_match_without_resource_version_gives_the_exact_status_json() -> None:
    with pytest.raises(InvalidError) as info:
        parse_query({"resourceVersionMatch": "Exact"})
    assert info.value.to_json() == STATUS_422_EXAMPLE


# ---------------------------------------------------------------------------------------------
# LIST: the 400s (selectors, storage validation), behaviours 5 and 7


RV_ABC_MESSAGE = (
    'invalid resource version: resourceVersion: Invalid value: "abc": '
    'strconv.ParseUint: parsing "abc": invalid syntax'
)


def rv_message(quoted: str, problem: str) -> str:
    return (
        f"invalid resource version: resourceVersion: Invalid value: {quoted}: "
        f"strconv.ParseUint: parsing {quoted}: {problem}"
    )


LIST_BAD_REQUEST: list[tuple[str, dict[str, str], str]] = [
    (
        "resource_version_with_continue",
        {"continue": "tok", "resourceVersion": "5"},
        "specifying resource version is not allowed when using continue",
    ),
    (
        "unparsable_resource_version_with_continue_reports_continue",
        {"continue": "tok", "resourceVersion": "abc"},
        "specifying resource version is not allowed when using continue",
    ),
    ("unparsable_resource_version", {"resourceVersion": "abc"}, RV_ABC_MESSAGE),
    ("negative_resource_version", {"resourceVersion": "-1"}, rv_message('"-1"', "invalid syntax")),
    ("signed_resource_version", {"resourceVersion": "+1"}, rv_message('"+1"', "invalid syntax")),
    ("spaced_resource_version", {"resourceVersion": " 1"}, rv_message('" 1"', "invalid syntax")),
    ("hex_resource_version", {"resourceVersion": "0x1"}, rv_message('"0x1"', "invalid syntax")),
    (
        "resource_version_above_uint64",
        {"resourceVersion": "18446744073709551616"},
        rv_message('"18446744073709551616"', "value out of range"),
    ),
    (
        "resource_version_overflow_before_bad_character",
        {"resourceVersion": "99999999999999999999x"},
        rv_message('"99999999999999999999x"', "value out of range"),
    ),
    (
        "resource_version_control_character_is_go_quoted",
        {"resourceVersion": "1\x00"},
        rv_message('"1\\x00"', "invalid syntax"),
    ),
    (
        "resource_version_nbsp_is_go_quoted",
        {"resourceVersion": "1\u00a0"},
        rv_message('"1\\u00a0"', "invalid syntax"),
    ),
    (
        "resource_version_printable_unicode_stays",
        {"resourceVersion": "é"},
        rv_message('"é"', "invalid syntax"),
    ),
    (
        "bad_limit",
        {"limit": "abc"},
        'invalid query parameter "limit": strconv.ParseInt: parsing "abc": invalid syntax',
    ),
    (
        "bad_timeout_on_list",
        {"timeoutSeconds": "1s"},
        'invalid query parameter "timeoutSeconds": strconv.ParseInt: parsing "1s": invalid syntax',
    ),
]


@pytest.mark.parametrize(
    ("query", "message"),
    [(q, m) for _, q, m in LIST_BAD_REQUEST],
    ids=[i for i, _, _ in LIST_BAD_REQUEST],
)
def test_list_rejects_with_400(query: dict[str, str], message: str) -> None:
    with pytest.raises(BadRequestError) as info:
        ListOptions.from_query(query)
    assert info.value.code == 400
    assert info.value.message == message


@pytest.mark.parametrize(
    "query",
    [{"labelSelector": "a b"}, {"labelSelector": "a=(b"}, {"fieldSelector": "a"}],
    ids=["label_missing_operator", "label_bad_value", "field_without_operator"],
)
def test_bad_selector_is_400_with_the_selector_message(query: dict[str, str]) -> None:
    with pytest.raises(BadRequestError) as info:
        ListOptions.from_query(query)
    assert info.value.message.startswith(("invalid label selector", "invalid field selector"))


def test_continue_with_resource_version_zero_is_accepted() -> None:
    opts = ListOptions.from_query({"continue": "tok", "resourceVersion": "0", "limit": "2"})
    assert opts.continue_token == "tok"
    assert opts.parsed_resource_version == 0


def test_continue_with_resource_version_is_400() -> None:
    with pytest.raises(BadRequestError, match=r"^specifying resource version is not allowed"):
        ListOptions(continue_token="tok", resource_version="5")


def test_unparsable_resource_version_is_400_with_kubernetes_message() -> None:
    with pytest.raises(BadRequestError) as info:
        parse_query({"resourceVersion": "abc"})
    assert info.value.message == RV_ABC_MESSAGE


VALIDATION_ORDER: list[tuple[str, dict[str, str], type[StatusError]]] = [
    (
        "decoding_before_selectors",
        {"limit": "x", "labelSelector": "a b"},
        BadRequestError,
    ),
    (
        "selector_before_422",
        {"labelSelector": "a b", "resourceVersionMatch": "Exact"},
        BadRequestError,
    ),
    (
        "selector_before_send_initial_events_422",
        {"fieldSelector": "a", "sendInitialEvents": "true"},
        BadRequestError,
    ),
    (
        "422_before_storage_400",
        {"resourceVersion": "abc", "resourceVersionMatch": "Foo"},
        InvalidError,
    ),
]


@pytest.mark.parametrize(
    ("query", "error"),
    [(q, e) for _, q, e in VALIDATION_ORDER],
    ids=[i for i, _, _ in VALIDATION_ORDER],
)
def test_list_validation_runs_in_kubernetes_order(
    query: dict[str, str], error: type[StatusError]
) -> None:
    with pytest.raises(StatusError) as info:
        ListOptions.from_query(query)
    assert type(info.value) is error


LIST_ACCEPTED: list[tuple[str, dict[str, str], ListOptions]] = [
    ("empty", {}, ListOptions()),
    (
        "exact_at_resource_version",
        {"resourceVersion": "7", "resourceVersionMatch": "Exact"},
        ListOptions(resource_version="7", resource_version_match=RVM.EXACT),
    ),
    (
        "not_older_than_at_zero",
        {"resourceVersion": "0", "resourceVersionMatch": "NotOlderThan"},
        ListOptions(resource_version="0", resource_version_match=RVM.NOT_OLDER_THAN),
    ),
    ("empty_match_is_unset", {"resourceVersionMatch": ""}, ListOptions()),
    (
        "kubectl_paging",
        {"limit": "500", "continue": "tok"},
        ListOptions(limit=500, continue_token="tok"),
    ),
    ("negative_limit_kept", {"limit": "-3"}, ListOptions(limit=-3)),
    (
        "selectors",
        {"labelSelector": "app=b", "fieldSelector": "metadata.name=cm-001"},
        ListOptions(label_selector="app=b", field_selector="metadata.name=cm-001"),
    ),
    (
        "uint64_max_resource_version",
        {"resourceVersion": str(2**64 - 1)},
        ListOptions(resource_version=str(2**64 - 1)),
    ),
    (
        "leading_zeros_resource_version",
        {"resourceVersion": "007"},
        ListOptions(resource_version="007"),
    ),
]


@pytest.mark.parametrize(
    ("query", "expected"),
    [(q, o) for _, q, o in LIST_ACCEPTED],
    ids=[i for i, _, _ in LIST_ACCEPTED],
)
def test_list_accepts(query: dict[str, str], expected: ListOptions) -> None:
    assert ListOptions.from_query(query) == expected
    assert parse_query(query) == expected


# ---------------------------------------------------------------------------------------------
# WATCH: the §5.1 table, behaviour 28, defaulting (behaviour 24 of §10)


WATCH_INVALID: list[tuple[str, dict[str, str], bool, list[Cause]]] = [
    (
        "send_initial_events_without_match",
        {"resourceVersion": "5", "sendInitialEvents": "true"},
        True,
        [SIE_NEEDS_NOT_OLDER_THAN],
    ),
    (
        "send_initial_events_without_match_at_unset_rv",
        {"sendInitialEvents": "true"},
        True,
        [SIE_NEEDS_NOT_OLDER_THAN],
    ),
    (
        "explicit_send_initial_events_false_is_not_defaulted",
        {"sendInitialEvents": "false"},
        True,
        [SIE_NEEDS_NOT_OLDER_THAN],
    ),
    (
        "match_without_send_initial_events",
        {"resourceVersion": "5", "resourceVersionMatch": "NotOlderThan"},
        True,
        [WATCH_MATCH_NEEDS_SIE],
    ),
    (
        "match_other_than_not_older_than",
        {"resourceVersion": "5", "resourceVersionMatch": "Exact", "sendInitialEvents": "true"},
        True,
        [SIE_NEEDS_NOT_OLDER_THAN, watch_not_supported("Exact")],
    ),
    (
        "match_with_continue",
        {
            "resourceVersionMatch": "NotOlderThan",
            "sendInitialEvents": "true",
            "continue": "tok",
        },
        True,
        [MATCH_WITH_CONTINUE],
    ),
    (
        "unknown_match_without_send_initial_events",
        {"resourceVersion": "5", "resourceVersionMatch": "Foo"},
        True,
        [WATCH_MATCH_NEEDS_SIE, watch_not_supported("Foo")],
    ),
    (
        "send_initial_events_with_gate_off",
        {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"},
        False,
        [SIE_NEEDS_GATE],
    ),
    (
        "send_initial_events_without_match_with_gate_off",
        {"sendInitialEvents": "true"},
        False,
        [SIE_NEEDS_NOT_OLDER_THAN, SIE_NEEDS_GATE],
    ),
    (
        "match_without_send_initial_events_with_gate_off",
        {"resourceVersionMatch": "NotOlderThan"},
        False,
        [WATCH_MATCH_NEEDS_SIE],
    ),
]


@pytest.mark.parametrize(
    ("query", "watch_list", "causes"),
    [(q, w, c) for _, q, w, c in WATCH_INVALID],
    ids=[i for i, _, _, _ in WATCH_INVALID],
)
def test_watch_validation_rejects_with_422(
    query: dict[str, str], watch_list: bool, causes: list[Cause]
) -> None:
    with pytest.raises(InvalidError) as info:
        WatchOptions.from_query(query, watch_list=watch_list)
    assert_invalid(info.value, causes)
    with pytest.raises(InvalidError) as again:
        parse_query({**query, "watch": "true"}, watch_list=watch_list)
    assert again.value.to_json() == info.value.to_json()


def test_watch_constructor_applies_the_422_table_without_defaulting() -> None:
    with pytest.raises(InvalidError) as info:
        WatchOptions(send_initial_events=True)
    assert_invalid(info.value, [SIE_NEEDS_NOT_OLDER_THAN])
    assert WatchOptions().send_initial_events is None


def initial_events(resource_version: str = "") -> WatchOptions:
    """A watch-list request: initial state, then changes (what defaulting produces)."""
    return WatchOptions(
        resource_version=resource_version,
        send_initial_events=True,
        resource_version_match=RVM.NOT_OLDER_THAN,
    )


WATCH_DEFAULTING: list[tuple[str, dict[str, str], bool, WatchOptions]] = [
    ("unset_rv_defaulted", {}, True, initial_events()),
    (
        "rv_zero_defaulted",
        {"resourceVersion": "0"},
        True,
        initial_events("0"),
    ),
    (
        "empty_match_still_defaulted",
        {"resourceVersionMatch": ""},
        True,
        initial_events(),
    ),
    ("rv_n_not_defaulted", {"resourceVersion": "12"}, True, WatchOptions(resource_version="12")),
    (
        "explicit_send_initial_events_false_kept",
        {"sendInitialEvents": "false", "resourceVersionMatch": "NotOlderThan"},
        True,
        WatchOptions(send_initial_events=False, resource_version_match=RVM.NOT_OLDER_THAN),
    ),
    (
        "explicit_send_initial_events_true_at_rv_n",
        {
            "resourceVersion": "9",
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
        },
        True,
        initial_events("9"),
    ),
    ("gate_off_unset_rv_not_defaulted", {}, False, WatchOptions()),
    (
        "gate_off_rv_zero_not_defaulted",
        {"resourceVersion": "0"},
        False,
        WatchOptions(resource_version="0"),
    ),
    (
        "python_client_watch",
        {"allowWatchBookmarks": "True", "resourceVersion": "25", "timeoutSeconds": "4"},
        True,
        WatchOptions(resource_version="25", allow_watch_bookmarks=True, timeout_seconds=4),
    ),
    (
        "timeout_zero_is_server_default",
        {"resourceVersion": "3", "timeoutSeconds": "0"},
        True,
        WatchOptions(resource_version="3"),
    ),
    (
        "continue_without_match_is_ignored",
        {"resourceVersion": "3", "continue": "tok"},
        True,
        WatchOptions(resource_version="3"),
    ),
]


@pytest.mark.parametrize(
    ("query", "watch_list", "expected"),
    [(q, w, o) for _, q, w, o in WATCH_DEFAULTING],
    ids=[i for i, _, _, _ in WATCH_DEFAULTING],
)
def test_watch_query_decoding_and_defaulting(
    query: dict[str, str], watch_list: bool, expected: WatchOptions
) -> None:
    assert WatchOptions.from_query(query, watch_list=watch_list) == expected
    assert parse_query({**query, "watch": "true"}, watch_list=watch_list) == expected


def test_watch_with_unparsable_resource_version_is_400() -> None:
    # Kubernetes answers 500 with an empty reason here (docs/semantics.md §10 item 23); we say 400.
    with pytest.raises(BadRequestError) as info:
        parse_query({"watch": "1", "resourceVersion": "abc"})
    assert info.value.message == RV_ABC_MESSAGE


@pytest.mark.parametrize("timeout", ["-1", "-9223372036854775808"], ids=["minus_one", "int64_min"])
def test_watch_negative_timeout_is_400(timeout: str) -> None:
    with pytest.raises(BadRequestError, match=r"^timeoutSeconds must not be negative"):
        parse_query({"watch": "true", "timeoutSeconds": timeout, "resourceVersion": "1"})
    with pytest.raises(BadRequestError):
        WatchOptions(timeout_seconds=int(timeout))


def test_legacy_watch_path_is_validated_as_a_list() -> None:
    # /watch/ paths do not set watch=true: LIST rules, no defaulting
    # (docs/semantics.md §10 item 22).
    with pytest.raises(InvalidError) as info:
        parse_query({"sendInitialEvents": "true"})
    assert_invalid(info.value, [SIE_ON_LIST])


# ---------------------------------------------------------------------------------------------
# Query conversion: bool, int64, first value, unknown names


BOOL_VALUES: list[tuple[str, bool]] = [
    ("true", True),
    ("True", True),
    ("TRUE", True),
    ("1", True),
    ("t", True),
    ("yes", True),
    ("", True),
    ("00", True),
    (" false", True),
    ("false", False),
    ("False", False),
    ("FALSE", False),
    ("fAlSe", False),
    ("fal\u017fe", False),  # Go's EqualFold folds the long s to "s"
    ("0", False),
]


@pytest.mark.parametrize(("text", "expected"), BOOL_VALUES, ids=[repr(t) for t, _ in BOOL_VALUES])
def test_bool_parameters_follow_kubernetes_conversion(text: str, expected: bool) -> None:
    opts = WatchOptions.from_query({"resourceVersion": "1", "allowWatchBookmarks": text})
    assert opts.allow_watch_bookmarks is expected
    chosen = parse_query({"watch": text, "resourceVersion": "1"})
    assert isinstance(chosen, WatchOptions) is expected
    initial = WatchOptions.from_query(
        {"sendInitialEvents": text, "resourceVersionMatch": "NotOlderThan"}
    )
    assert initial.send_initial_events is expected


def test_absent_bool_parameters_are_false_and_absent_send_initial_events_is_none() -> None:
    opts = WatchOptions.from_query({"resourceVersion": "1"})
    assert opts.allow_watch_bookmarks is False
    assert opts.send_initial_events is None
    assert isinstance(parse_query({}), ListOptions)


INT_VALUES: list[tuple[str, int | str]] = [
    ("5", 5),
    ("+5", 5),
    ("-3", -3),
    ("007", 7),
    ("-0", 0),
    ("9223372036854775807", 2**63 - 1),
    ("-9223372036854775808", -(2**63)),
    ("", "invalid syntax"),
    ("+", "invalid syntax"),
    ("-", "invalid syntax"),
    ("abc", "invalid syntax"),
    ("1.5", "invalid syntax"),
    ("1e3", "invalid syntax"),
    (" 5", "invalid syntax"),
    ("5 ", "invalid syntax"),
    ("0x10", "invalid syntax"),
    ("1_000", "invalid syntax"),
    ("--1", "invalid syntax"),
    ("\u0661", "invalid syntax"),  # ARABIC-INDIC DIGIT ONE: Go reads ASCII digits only
    ("9223372036854775808", "value out of range"),
    ("-9223372036854775809", "value out of range"),
    ("99999999999999999999x", "value out of range"),
    ("1" * 5000, "value out of range"),
]


@pytest.mark.parametrize(
    ("text", "expected"), INT_VALUES, ids=[repr(t[:24]) for t, _ in INT_VALUES]
)
def test_limit_is_parsed_as_go_int64(text: str, expected: int | str) -> None:
    if isinstance(expected, int):
        assert ListOptions.from_query({"limit": text}).limit == expected
        return
    with pytest.raises(BadRequestError) as info:
        ListOptions.from_query({"limit": text})
    assert info.value.message.startswith('invalid query parameter "limit": strconv.ParseInt: ')
    assert info.value.message.endswith(f": {expected}")


def test_timeout_seconds_is_parsed_as_go_int64_on_a_watch() -> None:
    with pytest.raises(BadRequestError, match='"timeoutSeconds"'):
        parse_query({"watch": "true", "timeoutSeconds": "9223372036854775808"})
    with pytest.raises(BadRequestError, match='"limit"'):
        parse_query({"watch": "true", "limit": "x"})


def test_resource_version_parsing() -> None:
    assert parse_resource_version("") == 0
    assert parse_resource_version("0") == 0
    assert parse_resource_version("00") == 0
    assert parse_resource_version("42") == 42
    assert parse_resource_version(str(2**64 - 1)) == 2**64 - 1
    with pytest.raises(BadRequestError) as info:
        parse_resource_version("abc")
    assert info.value.message == RV_ABC_MESSAGE


FIRST_VALUE_WINS: list[tuple[str, list[tuple[str, str]], ListOptions | WatchOptions]] = [
    ("limit", [("limit", "5"), ("limit", "abc")], ListOptions(limit=5)),
    ("watch_false_first", [("watch", "false"), ("watch", "true")], ListOptions()),
    (
        "watch_true_first",
        [("watch", "true"), ("resourceVersion", "3"), ("watch", "false")],
        WatchOptions(resource_version="3"),
    ),
    (
        "resource_version",
        [("resourceVersion", "4"), ("resourceVersion", "abc")],
        ListOptions(resource_version="4"),
    ),
]


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [(p, o) for _, p, o in FIRST_VALUE_WINS],
    ids=[i for i, _, _ in FIRST_VALUE_WINS],
)
def test_repeated_parameter_uses_the_first_value(
    pairs: list[tuple[str, str]], expected: ListOptions | WatchOptions
) -> None:
    assert parse_query(pairs) == expected


def test_unknown_parameters_are_ignored() -> None:
    query = {
        "pretty": "true",
        "fieldManager": "kubectl-client-side-apply",
        "fieldValidation": "Strict",
        "dryRun": "All",
        "timeout": "32s",
        "Limit": "abc",  # names are case-sensitive
        "includeObject": "Metadata",
        "limit": "50",
    }
    assert parse_query(query) == ListOptions(limit=50)


def test_text_instead_of_parameters_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_query("limit=5")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Selector, properties, identity


def test_no_requirement_means_no_selector() -> None:
    for opts in (ListOptions(), ListOptions(field_selector=",,"), WatchOptions(label_selector=" ")):
        assert not opts.has_selector
        assert opts.selector() is None


def test_selector_is_compiled_once_and_matches() -> None:
    opts = ListOptions(label_selector="app=web", field_selector="metadata.name!=x")
    assert opts.has_selector
    compiled = opts.selector()
    assert compiled is not None
    assert opts.selector() is compiled
    assert compiled.matches({"app": "web"}, {"metadata.name": "y"})
    assert not compiled.matches({"app": "web"}, {"metadata.name": "x"})
    assert not compiled.matches({"app": "db"}, {"metadata.name": "y"})


def test_page_size_and_parsed_resource_version() -> None:
    assert ListOptions(limit=-5).page_size == 0
    assert ListOptions(limit=7).page_size == 7
    assert ListOptions(resource_version="19").parsed_resource_version == 19
    assert WatchOptions(resource_version="").parsed_resource_version == 0


def test_options_are_immutable_hashable_and_picklable() -> None:
    opts = ListOptions(label_selector="a=b", limit=3)
    opts.selector()
    assert opts == ListOptions(label_selector="a=b", limit=3)
    assert hash(opts) == hash(ListOptions(label_selector="a=b", limit=3))
    assert pickle.loads(pickle.dumps(opts)) == opts
    watch = WatchOptions(resource_version="4", allow_watch_bookmarks=True, timeout_seconds=9)
    watch.selector()
    assert pickle.loads(pickle.dumps(watch)) == watch
    with pytest.raises(AttributeError):
        opts.limit = 5  # type: ignore[misc]


def test_wrong_member_types_are_type_errors() -> None:
    with pytest.raises(TypeError):
        ListOptions(limit=True)
    with pytest.raises(TypeError):
        ListOptions(resource_version=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        WatchOptions(send_initial_events=1)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# to_query


def test_to_query_writes_only_non_default_members_sorted() -> None:
    assert ListOptions().to_query() == {}
    query = ListOptions(
        resource_version="5", resource_version_match=RVM.EXACT, limit=10, label_selector="a"
    ).to_query()
    assert query == {
        "labelSelector": "a",
        "limit": "10",
        "resourceVersion": "5",
        "resourceVersionMatch": "Exact",
    }
    assert list(query) == sorted(query)
    watch = WatchOptions(resource_version="5", send_initial_events=None).to_query()
    assert watch == {"resourceVersion": "5", "watch": "true"}


TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
SELECTOR_TEXT = st.sampled_from(
    ["", "a=b", "x in (a,b),!y", "k>3", "metadata.name=n", ",,", "a!=\\,"]
)
RV_TEXT = st.sampled_from(["", "0", "1", "42", str(2**64 - 1), "007"])
MATCHES = st.sampled_from(list(RVM))


@st.composite
def list_options(draw: st.DrawFn) -> ListOptions:
    """Valid ListOptions: random members, invalid combinations rejected."""
    try:
        return ListOptions(
            resource_version=draw(RV_TEXT),
            resource_version_match=draw(MATCHES),
            limit=draw(st.integers(-(2**63), 2**63 - 1)),
            continue_token=draw(st.one_of(st.just(""), TEXT)),
            label_selector=draw(SELECTOR_TEXT),
            field_selector=draw(SELECTOR_TEXT),
        )
    except StatusError:
        assume(False)
        raise


@st.composite
def watch_options(draw: st.DrawFn) -> WatchOptions:
    """Valid WatchOptions: random members, invalid combinations rejected. A watch takes
    resourceVersionMatch exactly when it sets sendInitialEvents (and then only NotOlderThan),
    so the match follows from that draw: drawn apart, five in six draws were rejected and
    hypothesis' filter health check failed now and then."""
    send_initial_events = draw(st.none() | st.booleans())
    match = RVM.UNSET if send_initial_events is None else RVM.NOT_OLDER_THAN
    try:
        return WatchOptions(
            resource_version=draw(RV_TEXT),
            resource_version_match=match,
            label_selector=draw(SELECTOR_TEXT),
            field_selector=draw(SELECTOR_TEXT),
            allow_watch_bookmarks=draw(st.booleans()),
            send_initial_events=send_initial_events,
            timeout_seconds=draw(st.none() | st.integers(0, 2**63 - 1)),
        )
    except StatusError:
        assume(False)
        raise


@given(list_options())
def test_list_to_query_round_trips(opts: ListOptions) -> None:
    assert ListOptions.from_query(opts.to_query()) == opts
    assert parse_query(opts.to_query()) == opts


@given(watch_options())
def test_watch_to_query_round_trips(opts: WatchOptions) -> None:
    # No query can say "do not default": those options come back with the gate off.
    defaulted = (
        opts.resource_version in ("", "0")
        and opts.send_initial_events is None
        and opts.resource_version_match is RVM.UNSET
    )
    assert WatchOptions.from_query(opts.to_query(), watch_list=not defaulted) == opts
    assert parse_query(opts.to_query(), watch_list=not defaulted) == opts


# ---------------------------------------------------------------------------------------------
# Fuzz: any query gives options or a 400/422 Status, never another exception


PARAMETER_NAMES = [
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
]
FUZZ_VALUE = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", "0", "1", "true", "false", "Exact", "NotOlderThan", "-1", "a=b"]),
    st.integers(-(2**70), 2**70).map(str),
)


@given(
    query=st.dictionaries(st.sampled_from(PARAMETER_NAMES), FUZZ_VALUE, max_size=10),
    watch_list=st.booleans(),
)
def test_any_query_gives_options_or_a_400_or_422(
    query: Mapping[str, str], watch_list: bool
) -> None:
    try:
        opts = parse_query(query, watch_list=watch_list)
    except StatusError as err:
        assert err.code in (400, 422)
        assert err.to_json().startswith(b'{"kind":"Status"')
        return
    assert isinstance(opts, ListOptions | WatchOptions)
    assert opts.parsed_resource_version >= 0
    if opts.has_selector:
        assert opts.selector() is not None
