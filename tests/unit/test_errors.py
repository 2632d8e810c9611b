"""metav1.Status bodies: byte-exact with the Kubernetes samples of docs/semantics.md §7.2."""

from __future__ import annotations

import pickle

import pytest

from watchcache.wire.errors import (
    AlreadyExistsError,
    BadRequestError,
    ExpiredError,
    InternalError,
    NotFoundError,
    StatusError,
    TooLargeResourceVersionError,
    TooManyRequestsError,
    retry_after_for_unready,
    status_error_from_dict,
)

HEAD = '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'

BODIES: dict[str, tuple[StatusError, str]] = {
    "watch-too-old": (
        ExpiredError.too_old_resource_version(657887, 680402),
        HEAD + '"message":"too old resource version: 657887 (680402)","reason":"Expired",'
        '"code":410}',
    ),
    "too-large-rv": (
        TooLargeResourceVersionError(minimum=105, current=100),
        HEAD + '"message":"Timeout: Too large resource version: 105, current: 100",'
        '"reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge",'
        '"message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}',
    ),
    "not-ready": (
        TooManyRequestsError.not_ready(14.0),
        HEAD + '"message":"storage is (re)initializing","reason":"TooManyRequests",'
        '"details":{"retryAfterSeconds":2},"code":429}',
    ),
    "bad-request": (
        BadRequestError("specifying resource version is not allowed when using continue"),
        HEAD + '"message":"specifying resource version is not allowed when using continue",'
        '"reason":"BadRequest","code":400}',
    ),
    "not-found": (
        NotFoundError.for_object("pods", "x"),
        HEAD + '"message":"pods \\"x\\" not found","reason":"NotFound",'
        '"details":{"name":"x","kind":"pods"},"code":404}',
    ),
    "already-exists": (
        AlreadyExistsError.for_object("deployments", "y", "apps"),
        HEAD + '"message":"deployments.apps \\"y\\" already exists","reason":"AlreadyExists",'
        '"details":{"name":"y","group":"apps","kind":"deployments"},"code":409}',
    ),
    "internal": (
        InternalError.wrap("boom <x>"),
        HEAD + '"message":"Internal error occurred: boom \\u003cx\\u003e",'
        '"reason":"InternalError","details":{"causes":[{"message":"boom \\u003cx\\u003e"}]},'
        '"code":500}',
    ),
}


@pytest.mark.parametrize(("error", "body"), BODIES.values(), ids=BODIES.keys())
def test_status_body_is_byte_exact(error: StatusError, body: str) -> None:
    assert error.to_json() == body.encode()
    assert error.watch_event() == b'{"type":"ERROR","object":' + body.encode() + b"}"


@pytest.mark.parametrize(("error", "body"), BODIES.values(), ids=BODIES.keys())
def test_status_round_trips_through_dict_and_pickle(error: StatusError, body: str) -> None:
    rebuilt = status_error_from_dict(error.status())
    assert type(rebuilt) is type(error)
    assert rebuilt.to_json() == error.to_json()
    unpickled = pickle.loads(pickle.dumps(error))
    assert type(unpickled) is type(error)
    assert unpickled.to_json() == error.to_json()


def test_inconsistent_continue_carries_its_token_in_metadata() -> None:
    err = ExpiredError.inconsistent_continue("tok")
    assert err.status()["metadata"] == {"continue": "tok"}
    assert err.message.startswith("The provided continue parameter is too old")
    assert ExpiredError.inconsistent_continue("").status()["metadata"] == {}


def test_retry_after_header_only_when_positive() -> None:
    assert TooLargeResourceVersionError(minimum=1, current=0).headers() == {"Retry-After": "1"}
    assert TooLargeResourceVersionError(minimum=1, current=0, retry_after_seconds=0).headers() == {}


@pytest.mark.parametrize(
    ("downtime", "seconds"), [(0, 1), (14, 2), (30, 6), (45, 14), (57, 30), (1e9, 30)]
)
def test_retry_after_for_unready_cache_follows_kubernetes(downtime: float, seconds: int) -> None:
    assert retry_after_for_unready(downtime) == seconds


def test_unknown_reason_keeps_code_and_reason() -> None:
    err = status_error_from_dict({"code": 418, "reason": "Teapot", "message": "short"})
    assert (err.code, err.reason, err.message) == (418, "Teapot", "short")
