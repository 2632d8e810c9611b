"""Errors as Kubernetes reports them: each exception *is* a ``metav1.Status``.

Design note
-----------
Every failure a client can see is raised as a :class:`StatusError` subclass that knows its
HTTP code, its ``reason`` and how to render the exact ``metav1.Status`` JSON the Go
apiserver would send (apimachinery ``pkg/api/errors``: one constructor per reason). The
apiserver layer only has to write ``err.to_json()`` with ``err.code`` and ``err.headers()``;
a watch stream wraps the same object in an ``ERROR`` event (:meth:`StatusError.watch_event`).
Python callers catch the typed classes (``except ExpiredError``) instead of parsing messages.

Wire shape (``metav1.Status``, members in Go's declaration order, empty ones omitted except
``metadata``, which is always written, as ``{}`` when empty)::

    {"kind":"Status","apiVersion":"v1","metadata":{"continue":...},"status":"Failure",
     "message":...,"reason":...,"details":{"name","group","kind","uid","causes":[{"reason",
     "message","field"}],"retryAfterSeconds"},"code":...}

``Retry-After`` is sent as an HTTP header whenever ``details.retryAfterSeconds > 0``, as
Kubernetes' response writer does. Messages for the conditions the watch cache raises are
built by the named constructors below, with Kubernetes' exact wording (docs/semantics.md §7), so
clients that match on text (and our conformance tests) see the same strings.

Who raises what: options parsing → 400/422; continue tokens → 400; the cache → 410 (too old),
504 (too large RV), 429 (not ready); the planner → 410 with an inconsistent continue token;
the apiserver → 404/409/413/422. All values, no I/O; safe to share between threads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from watchcache.wire import gojson

#: Kubernetes' message for a LIST continuation whose snapshot and etcd revision are gone.
INCONSISTENT_CONTINUE_MESSAGE: Final = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token in "
    "this response to retrieve the remainder of the results. Continuing with the provided "
    "token results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)
#: The same condition when no replacement token could be made.
EXPIRED_CONTINUE_MESSAGE: Final = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter."
)
#: What ``NewGenericServerResponse(422, ...)`` says whatever the cause (a patch that cannot
#: be applied).
UNPROCESSABLE_PATCH_MESSAGE: Final = (
    "the server rejected our request due to an error in our request"
)
#: An exact LIST at a compacted revision (etcd path).
EXPIRED_LIST_MESSAGE: Final = "The resourceVersion for the provided list is too old."
#: A watch at a compacted revision (etcd path).
EXPIRED_WATCH_MESSAGE: Final = "The resourceVersion for the provided watch is too old."


@dataclass(frozen=True, slots=True)
class StatusCause:
    """``metav1.StatusCause``: one reason an operation failed (often one invalid field)."""

    reason: str = ""
    message: str = ""
    field: str = ""

    def to_dict(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        if self.field:
            out["field"] = self.field
        return out


@dataclass(frozen=True, slots=True)
class StatusDetails:
    """``metav1.StatusDetails``; all members optional."""

    name: str = ""
    group: str = ""
    kind: str = ""
    uid: str = ""
    causes: tuple[StatusCause, ...] = ()
    retry_after_seconds: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in (
            ("name", self.name),
            ("group", self.group),
            ("kind", self.kind),
            ("uid", self.uid),
        ):
            if value:
                out[key] = value
        if self.causes:
            out["causes"] = [c.to_dict() for c in self.causes]
        if self.retry_after_seconds:
            out["retryAfterSeconds"] = self.retry_after_seconds
        return out

    def __bool__(self) -> bool:
        return bool(
            self.name
            or self.group
            or self.kind
            or self.uid
            or self.causes
            or self.retry_after_seconds
        )


class StatusError(Exception):
    """A failure with a ``metav1.Status`` body. Subclasses fix ``code`` and ``reason``.

    ``message`` is the Status message; ``details`` its details; ``continue_token`` goes to
    ``metadata.continue`` (only 410 for an expired continuation sets it).
    """

    code: ClassVar[int] = 500
    reason: ClassVar[str] = ""

    def __init__(
        self,
        message: str,
        *,
        details: StatusDetails | None = None,
        continue_token: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details if details is not None else StatusDetails()
        self.continue_token = continue_token

    @property
    def retry_after_seconds(self) -> int:
        return self.details.retry_after_seconds

    def status(self) -> dict[str, Any]:
        """The ``metav1.Status`` as a dict in Go's member order."""
        metadata: dict[str, Any] = {}
        if self.continue_token:
            metadata["continue"] = self.continue_token
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": metadata,
            "status": "Failure",
        }
        if self.message:
            out["message"] = self.message
        if self.reason:
            out["reason"] = self.reason
        if self.details:
            out["details"] = self.details.to_dict()
        out["code"] = self.code
        return out

    def to_json(self) -> bytes:
        """The Status body, byte-identical to the Go apiserver's for the same error."""
        return gojson.dumpb(self.status())

    def watch_event(self) -> bytes:
        """The ``{"type":"ERROR","object":<Status>}`` line a watch stream ends with."""
        return b'{"type":"ERROR","object":' + self.to_json() + b"}"

    def headers(self) -> dict[str, str]:
        """HTTP headers that go with the body: ``Retry-After`` when retrying makes sense."""
        if self.details.retry_after_seconds > 0:
            return {"Retry-After": str(self.details.retry_after_seconds)}
        return {}

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (type(self), self.message, self.details, self.continue_token, self.__dict__),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code})"


def _rebuild(
    cls: type[StatusError],
    message: str,
    details: StatusDetails,
    continue_token: str,
    state: dict[str, Any],
) -> StatusError:
    err = StatusError.__new__(cls)
    StatusError.__init__(err, message, details=details, continue_token=continue_token)
    err.__dict__.update(state)
    return err


def _about_object(resource: str, name: str, group: str, what: str) -> tuple[str, StatusDetails]:
    """``<resource>[.<group>] "<name>" <what>`` and the details naming the object, as
    Kubernetes' NewNotFound / NewAlreadyExists write them."""
    qualified = f"{resource}.{group}" if group else resource
    return f'{qualified} "{name}" {what}', StatusDetails(name=name, group=group, kind=resource)


class BadRequestError(StatusError):
    """400: the request itself is malformed (bad continue token, unparsable RV, ...)."""

    code = 400
    reason = "BadRequest"


class ForbiddenError(StatusError):
    """403: the request is understood and refused (``NewForbidden``)."""

    code = 403
    reason = "Forbidden"

    @classmethod
    def for_object(
        cls,
        resource: str,
        name: str,
        group: str,
        why: str,
        *,
        causes: Sequence[StatusCause] = (),
    ) -> ForbiddenError:
        """``<resource>[.<group>] "<name>" is forbidden: <why>``."""
        qualified = f"{resource}.{group}" if group else resource
        return cls(
            f'{qualified} "{name}" is forbidden: {why}',
            details=StatusDetails(name=name, group=group, kind=resource, causes=tuple(causes)),
        )


class NotFoundError(StatusError):
    """404."""

    code = 404
    reason = "NotFound"

    @classmethod
    def for_object(cls, resource: str, name: str, group: str = "") -> NotFoundError:
        message, details = _about_object(resource, name, group, "not found")
        return cls(message, details=details)


class ConflictError(StatusError):
    """409: a write lost a compare-and-swap (stale ``resourceVersion``)."""

    code = 409
    reason = "Conflict"


class AlreadyExistsError(StatusError):
    """409 AlreadyExists: create of a name that exists."""

    code = 409
    reason = "AlreadyExists"

    @classmethod
    def for_object(cls, resource: str, name: str, group: str = "") -> AlreadyExistsError:
        message, details = _about_object(resource, name, group, "already exists")
        return cls(message, details=details)


class GoneError(StatusError):
    """410 Gone (Kubernetes' older reason for "too old"; clients key on code 410)."""

    code = 410
    reason = "Gone"


class ExpiredError(StatusError):
    """410 Expired: the requested resourceVersion is older than what can be served.

    For a LIST continuation whose data is gone, ``continue_token`` carries a token with
    ``rv=-1`` that continues at the same position on the latest state (inconsistently).
    """

    code = 410
    reason = "Expired"

    @classmethod
    def too_old_resource_version(cls, requested: int, oldest: int | None = None) -> ExpiredError:
        """The cache's message: ``too old resource version: N (M)``, M = oldest servable."""
        if oldest is None:
            return cls(f"too old resource version: {requested}")
        return cls(f"too old resource version: {requested} ({oldest})")

    @classmethod
    def inconsistent_continue(cls, continue_token: str) -> ExpiredError:
        if not continue_token:
            return cls(EXPIRED_CONTINUE_MESSAGE)
        return cls(INCONSISTENT_CONTINUE_MESSAGE, continue_token=continue_token)


class InvalidError(StatusError):
    """422 Invalid: field validation failed; one cause per invalid field."""

    code = 422
    reason = "Invalid"

    @classmethod
    def for_fields(
        cls, kind: str, group: str, name: str, causes: Sequence[StatusCause]
    ) -> InvalidError:
        """``NewInvalid``: ``<Kind>.<group> "<name>" is invalid: <cause>`` (or ``[c1, c2]``).

        Each cause's message is ``"<Type>: <detail>"``; the aggregated text prefixes it
        with the field, as Go's ``field.Error.Error()`` does.
        """
        qualified = f"{kind}.{group}" if group else kind
        texts = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
        aggregated = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
        return cls(
            f'{qualified} "{name}" is invalid: {aggregated}',
            details=StatusDetails(name=name, group=group, kind=kind, causes=tuple(causes)),
        )


class RequestEntityTooLargeError(StatusError):
    """413: the request body is larger than the server accepts."""

    code = 413
    reason = "RequestEntityTooLarge"


class TooManyRequestsError(StatusError):
    """429: try again after ``retry_after_seconds`` (cache not ready, read not served)."""

    code = 429
    reason = "TooManyRequests"

    @classmethod
    def retry_after(cls, message: str, seconds: int) -> TooManyRequestsError:
        return cls(message, details=StatusDetails(retry_after_seconds=seconds))

    @classmethod
    def not_ready(cls, downtime_seconds: float, last_error: str = "") -> TooManyRequestsError:
        """``storage is (re)initializing``, Retry-After growing with the downtime:
        clamp(int(e^(0.06·downtime)), 1, 30) — 14 s → 2, 30 s → 6, ≥ 57 s → 30."""
        message = "storage is (re)initializing"
        if last_error:
            message = f"{message}: {last_error}"
        return cls.retry_after(message, retry_after_for_unready(downtime_seconds))


def retry_after_for_unready(downtime_seconds: float) -> int:
    """Kubernetes' ``calculateRetryAfterForUnreadyCache``."""
    exponent = 0.06 * max(downtime_seconds, 0.0)
    if exponent > math.log(30):
        return 30
    return min(max(int(math.exp(exponent)), 1), 30)


class InternalError(StatusError):
    """500 InternalError: ``Internal error occurred: <err>`` with the error as a cause."""

    code = 500
    reason = "InternalError"

    @classmethod
    def wrap(cls, error: object) -> InternalError:
        text = str(error)
        return cls(
            f"Internal error occurred: {text}",
            details=StatusDetails(causes=(StatusCause(message=text),)),
        )


class ServiceUnavailableError(StatusError):
    """503."""

    code = 503
    reason = "ServiceUnavailable"


class ServerTimeoutError(StatusError):
    """504 Timeout (``NewTimeoutError``): the message is prefixed with ``Timeout: ``."""

    code = 504
    reason = "Timeout"

    @classmethod
    def timeout(cls, message: str, retry_after_seconds: int = 0) -> ServerTimeoutError:
        return cls(
            f"Timeout: {message}", details=StatusDetails(retry_after_seconds=retry_after_seconds)
        )


class TooLargeResourceVersionError(ServerTimeoutError):
    """504: the requested resourceVersion is newer than the cache (or etcd) reached in time.

    ``minimum`` is the requested RV, ``current`` where the store was. The cause of type
    ``ResourceVersionTooLarge`` is what ``IsTooLargeResourceVersion`` keys on.
    """

    def __init__(
        self,
        message: str = "",
        *,
        details: StatusDetails | None = None,
        continue_token: str = "",
        minimum: int = 0,
        current: int = 0,
        retry_after_seconds: int = 1,
    ) -> None:
        if not message:
            message = f"Timeout: Too large resource version: {minimum}, current: {current}"
        if details is None:
            details = StatusDetails(
                causes=(
                    StatusCause(
                        reason="ResourceVersionTooLarge", message="Too large resource version"
                    ),
                ),
                retry_after_seconds=retry_after_seconds,
            )
        super().__init__(message, details=details, continue_token=continue_token)
        self.minimum = minimum
        self.current = current


class CompactedError(ExpiredError):
    """etcd: the revision asked for is compacted away. ``compact_revision`` is the oldest one
    still readable when etcd says (watches do; ranges do not: 0)."""

    def __init__(self, message: str = "", *, compact_revision: int = 0) -> None:
        super().__init__(message or "The resourceVersion for the provided list is too old.")
        self.compact_revision = compact_revision


class ContinueTokenError(BadRequestError):
    """400: a ``continue`` value that Kubernetes' ``DecodeContinue`` would refuse.

    The message is Kubernetes' ``invalid continue token: continue key is not valid: <why>``;
    ``detail`` is the ``<why>`` alone (e.g. ``illegal base64 data at input byte 3`` or, for a
    start key that fails the traversal check, the start key itself).
    """

    def __init__(self, detail: str) -> None:
        super().__init__(f"invalid continue token: continue key is not valid: {detail}")
        self.detail = detail


class MethodNotAllowedError(StatusError):
    """405: the route exists but does not take this method."""

    code = 405
    reason = "MethodNotAllowed"

    def __init__(
        self,
        message: str = "the server does not allow this method on the requested resource",
        *,
        details: StatusDetails | None = None,
    ) -> None:
        super().__init__(message, details=details)


class UnsupportedMediaTypeError(StatusError):
    """415: the request body's Content-Type is not one this endpoint accepts."""

    code = 415
    reason = "UnsupportedMediaType"

    @classmethod
    def accepting(cls, media_types: Iterable[str]) -> UnsupportedMediaTypeError:
        """``NewUnsupportedMediaTypeError``: names what would have been accepted."""
        return cls(
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(media_types)
        )


class NotAcceptableError(StatusError):
    """406: no media type the client accepts can be served (``NewNotAcceptableError``)."""

    code = 406
    reason = "NotAcceptable"

    @classmethod
    def accepting(cls, media_types: Iterable[str]) -> NotAcceptableError:
        return cls(f"only the following media types are accepted: {', '.join(media_types)}")


class UnprocessablePatchError(InvalidError):
    """422: the patch is well-formed but cannot be applied to this object (a json-patch
    ``test`` that fails, a path that is missing...).

    The message is Kubernetes' generic :data:`UNPROCESSABLE_PATCH_MESSAGE`, which clients
    may match on; Kubernetes' handler discards the reason, which is kept here as the one
    cause (field ``patch``), so a client can say what failed. ``detail`` is that reason.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(
            UNPROCESSABLE_PATCH_MESSAGE,
            details=StatusDetails(causes=(StatusCause("FieldValueInvalid", detail, "patch"),)),
        )
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.message} ({self.detail})"


class WatchTerminatedError(Exception):
    """A watcher was closed by the cache, not by its consumer: it fell behind (its buffer
    filled) or the cache relisted. Not a Status: Kubernetes just ends such a stream and the
    client re-watches from ``resource_version``, the last one it received (0 if none)."""

    def __init__(self, reason: str, resource_version: int) -> None:
        super().__init__(
            f"watch terminated: {reason} (resume from resourceVersion {resource_version})"
        )
        self.reason = reason
        self.resource_version = resource_version


def status_error_from_dict(status: Mapping[str, Any]) -> StatusError:
    """Rebuild a typed error from a ``metav1.Status`` dict (e.g. a watch ERROR event)."""
    code = int(status.get("code") or 500)
    reason = str(status.get("reason") or "")
    cls: type[StatusError] = StatusError
    for candidate in _BY_REASON.get(reason, ()):
        if candidate.code == code:
            cls = candidate
            break
    raw = status.get("details") or {}
    details = StatusDetails(
        name=str(raw.get("name", "")),
        group=str(raw.get("group", "")),
        kind=str(raw.get("kind", "")),
        uid=str(raw.get("uid", "")),
        causes=tuple(
            StatusCause(
                str(c.get("reason", "")), str(c.get("message", "")), str(c.get("field", ""))
            )
            for c in raw.get("causes") or ()
        ),
        retry_after_seconds=int(raw.get("retryAfterSeconds") or 0),
    )
    token = str((status.get("metadata") or {}).get("continue") or "")
    message = str(status.get("message") or "")
    if cls is StatusError:
        err = StatusError(message, details=details, continue_token=token)
        err.code = code  # type: ignore[misc]
        err.reason = reason  # type: ignore[misc]
        return err
    if cls is ServerTimeoutError and any(
        c.reason == "ResourceVersionTooLarge" for c in details.causes
    ):
        return TooLargeResourceVersionError(message, details=details, continue_token=token)
    return cls(message, details=details, continue_token=token)


_BY_REASON: Final[dict[str, tuple[type[StatusError], ...]]] = {
    cls.reason: (cls,)
    for cls in (
        BadRequestError,
        ForbiddenError,
        NotFoundError,
        ConflictError,
        AlreadyExistsError,
        GoneError,
        ExpiredError,
        InvalidError,
        RequestEntityTooLargeError,
        NotAcceptableError,
        TooManyRequestsError,
        InternalError,
        ServiceUnavailableError,
        ServerTimeoutError,
    )
}
