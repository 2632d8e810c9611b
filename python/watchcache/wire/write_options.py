"""Options of a write (create, update, patch, delete): decoded and validated as Kubernetes
does before anything is read or written.

Design note
-----------
Every write request carries ``metav1.CreateOptions``, ``UpdateOptions``, ``PatchOptions``
or ``DeleteOptions``: in the query string, and for a delete also (or instead) in the body.
Each is validated by apimachinery's ``ValidateCreateOptions`` & co. before the handler
does anything else; a violation is **422** Invalid naming the options kind
(``CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["x"]: supported
values: "All"``), every violation one cause. A value that does not decode at all (a
``gracePeriodSeconds`` that is not an integer, a DeleteOptions body that is not an object
of the right member types) is **400**.

Query decoding follows apimachinery's parameter codec: a list member (``dryRun``) takes
every value of a repeated parameter; any other member takes the first one; unknown
parameters are ignored.

``dryRun``: the only value is ``All`` ("every stage but persisting"); ``dryRun=`` is the
value ``""`` and is refused, as in Kubernetes. A dry-run write runs every check and
defaulting step, writes nothing, and answers what the write would have answered.

Deliberate difference, on the safe side: Kubernetes reads a delete's options from the body
when there is one and ignores the query altogether, so ``DELETE ...?dryRun=All`` with a
body ``{}`` really deletes. Here the query is read first and the body's members override
it, except ``dryRun``, whose values from both places count: a dry run asked for anywhere
is never dropped.

All values, no I/O; safe to share between threads. Callers: the apiserver's handlers.
"""

from __future__ import annotations

import enum
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from watchcache.wire import gojson
from watchcache.wire.errors import BadRequestError, InvalidError, StatusCause
from watchcache.wire.gostrconv import INT64_MAX, INT64_MIN, go_quote, is_go_false, parse_int64

__all__ = [
    "DRY_RUN_ALL",
    "CreateOptions",
    "DeleteOptions",
    "FieldValidation",
    "PatchOptions",
    "PropagationPolicy",
    "UpdateOptions",
]

#: ``metav1.DryRunAll``: the one dryRun value Kubernetes accepts.
DRY_RUN_ALL: Final = "All"
#: apimachinery's ``FieldManagerMaxLength``.
FIELD_MANAGER_MAX_LENGTH: Final = 128
#: The group every options kind belongs to.
META_GROUP: Final = "meta.k8s.io"

#: A query as (name, value) pairs in order, repeats included.
Query = Sequence[tuple[str, str]]


class FieldValidation(enum.StrEnum):
    """``fieldValidation``: what a write does with unknown or duplicate fields."""

    IGNORE = "Ignore"
    WARN = "Warn"
    STRICT = "Strict"


class PropagationPolicy(enum.StrEnum):
    """``metav1.DeletionPropagation``: what happens to an object's dependents."""

    ORPHAN = "Orphan"
    BACKGROUND = "Background"
    FOREGROUND = "Foreground"


def _not_supported(field: str, value: Any, supported: Sequence[str]) -> StatusCause:
    # field.NotSupported: a string as Go's %q writes it, anything else JSON-encoded.
    shown = go_quote(value) if isinstance(value, str) else gojson.dumps(value)
    allowed = ", ".join(go_quote(v) for v in supported)
    return StatusCause(
        reason="FieldValueNotSupported",
        message=f"Unsupported value: {shown}: supported values: {allowed}",
        field=field,
    )


def _dry_run_causes(values: Sequence[str]) -> list[StatusCause]:
    if all(v == DRY_RUN_ALL for v in values):
        return []
    return [_not_supported("dryRun", list(values), [DRY_RUN_ALL])]


def _field_manager_causes(manager: str) -> list[StatusCause]:
    causes: list[StatusCause] = []
    if len(manager) > FIELD_MANAGER_MAX_LENGTH:
        causes.append(
            StatusCause(
                reason="FieldValueTooLong",
                message=f"Too long: may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes",
                field="fieldManager",
            )
        )
    for position, char in enumerate(manager):
        if not _printable(char):
            causes.append(
                StatusCause(
                    reason="FieldValueInvalid",
                    message=f"Invalid value: {go_quote(manager)}: invalid character "
                    f"U+{ord(char):04X} (at position {position})",
                    field="fieldManager",
                )
            )
    return causes


def _printable(char: str) -> bool:
    # Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and U+0020.
    return char == " " or unicodedata.category(char)[0] in "LMNPS"


def _field_validation(text: str) -> tuple[FieldValidation, list[StatusCause]]:
    if not text:
        return FieldValidation.WARN, []
    try:
        return FieldValidation(text), []
    except ValueError:
        supported = ["", *sorted(v.value for v in FieldValidation)]
        return FieldValidation.WARN, [_not_supported("fieldValidation", text, supported)]


def _raise_invalid(kind: str, causes: Sequence[StatusCause]) -> None:
    if causes:
        raise InvalidError.for_fields(kind, META_GROUP, "", causes)


def _all_values(query: Query, name: str) -> list[str]:
    return [value for key, value in query if key == name]


def _first_value(query: Query, name: str) -> str:
    for key, value in query:
        if key == name:
            return value
    return ""


@dataclass(frozen=True, slots=True)
class _WriteOptions:
    """What create, update and patch share: dry run, field manager, field validation."""

    dry_run: bool = False
    field_manager: str = ""
    field_validation: FieldValidation = FieldValidation.WARN

    @classmethod
    def _decode(cls, query: Query, kind: str) -> tuple[bool, str, FieldValidation]:
        dry_run = _all_values(query, "dryRun")
        manager = _first_value(query, "fieldManager")
        validation, causes = _field_validation(_first_value(query, "fieldValidation"))
        _raise_invalid(kind, [*_field_manager_causes(manager), *_dry_run_causes(dry_run), *causes])
        return bool(dry_run), manager, validation


@dataclass(frozen=True, slots=True)
class CreateOptions(_WriteOptions):
    """``metav1.CreateOptions`` of a POST."""

    @classmethod
    def from_query(cls, query: Query) -> CreateOptions:
        """Raises 422 InvalidError."""
        return cls(*cls._decode(query, "CreateOptions"))


@dataclass(frozen=True, slots=True)
class UpdateOptions(_WriteOptions):
    """``metav1.UpdateOptions`` of a PUT."""

    @classmethod
    def from_query(cls, query: Query) -> UpdateOptions:
        """Raises 422 InvalidError."""
        return cls(*cls._decode(query, "UpdateOptions"))


@dataclass(frozen=True, slots=True)
class PatchOptions(_WriteOptions):
    """``metav1.PatchOptions`` of a PATCH. ``force`` belongs to server-side apply (an
    ``apply`` patch): any other patch with it is refused, and an apply must name its
    ``fieldManager``, as Kubernetes' ValidatePatchOptions has it."""

    force: bool = False

    @classmethod
    def from_query(cls, query: Query, *, apply: bool = False) -> PatchOptions:
        """Raises 400 (a ``force`` that is not a boolean) or 422 InvalidError."""
        causes: list[StatusCause] = []
        forced = [value for key, value in query if key == "force"]
        force = False
        if forced:
            force = _parse_bool("force", forced[0])
        if not apply and forced:
            causes.append(
                StatusCause(
                    reason="FieldValueForbidden",
                    message="Forbidden: may not be specified for non-apply patch",
                    field="force",
                )
            )
        if apply and not _first_value(query, "fieldManager"):
            causes.append(
                StatusCause(
                    reason="FieldValueRequired",
                    message="Required value: is required for apply patch",
                    field="fieldManager",
                )
            )
        try:
            decoded = cls._decode(query, "PatchOptions")
        except InvalidError as error:
            causes.extend(error.details.causes)
            decoded = (False, "", FieldValidation.WARN)
        _raise_invalid("PatchOptions", causes)
        return cls(*decoded, force=force)


def _parse_bool(name: str, text: str) -> bool:
    """Go's strconv.ParseBool, as the query parameter codec uses it."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise BadRequestError(f"strconv.ParseBool: parsing {go_quote(text)}: invalid syntax")


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    """``metav1.DeleteOptions`` of a DELETE (one object or a collection).

    ``preconditions``: the object must still have this uid and/or resourceVersion (409
    otherwise); ``grace_period_seconds``: None is the resource's default.
    """

    dry_run: bool = False
    grace_period_seconds: int | None = None
    propagation_policy: PropagationPolicy | None = None
    orphan_dependents: bool | None = None
    precondition_uid: str | None = None
    precondition_resource_version: str | None = None

    @classmethod
    def decode(cls, query: Query, body: Mapping[str, Any] | None = None) -> DeleteOptions:
        """The options of a DELETE from its query, overridden member by member by its
        decoded body (a JSON object, or None). Raises 400 BadRequestError for a member of
        the wrong type, 422 InvalidError for values Kubernetes refuses."""
        members: dict[str, Any] = {}
        dry_run = _all_values(query, "dryRun")
        if dry_run:
            members["dryRun"] = dry_run
        for name in ("gracePeriodSeconds", "propagationPolicy", "orphanDependents"):
            value = _first_value(query, name)
            if any(key == name for key, _ in query):
                members[name] = _query_member(name, value)
        if body is not None:
            _check_body_kind(body)
            members.update(
                (k, v)
                for k, v in body.items()
                if k not in ("kind", "apiVersion", "dryRun") and v is not None
            )
            body_dry_run = body.get("dryRun")
            if body_dry_run is not None:
                if not isinstance(body_dry_run, list):
                    raise BadRequestError("DeleteOptions.dryRun must be a list of strings")
                members["dryRun"] = [*dry_run, *body_dry_run]
        return cls._from_members(members)

    @classmethod
    def _from_members(cls, members: Mapping[str, Any]) -> DeleteOptions:
        dry_run = members.get("dryRun", [])
        if not isinstance(dry_run, list) or not all(isinstance(v, str) for v in dry_run):
            raise BadRequestError("DeleteOptions.dryRun must be a list of strings")
        grace = members.get("gracePeriodSeconds")
        if grace is not None and (
            isinstance(grace, bool)
            or not isinstance(grace, int)
            or not INT64_MIN <= grace <= INT64_MAX
        ):
            raise BadRequestError("DeleteOptions.gracePeriodSeconds must be a 64-bit integer")
        policy = members.get("propagationPolicy")
        if policy is not None and not isinstance(policy, str):
            raise BadRequestError("DeleteOptions.propagationPolicy must be a string")
        orphan = members.get("orphanDependents")
        if orphan is not None and not isinstance(orphan, bool):
            raise BadRequestError("DeleteOptions.orphanDependents must be a boolean")
        uid, resource_version = _preconditions(members.get("preconditions"))

        causes: list[StatusCause] = []
        if orphan is not None and policy is not None:
            causes.append(
                StatusCause(
                    reason="FieldValueInvalid",
                    message=f"Invalid value: {go_quote(policy)}: orphanDependents and "
                    "deletionPropagation cannot be both set",
                    field="propagationPolicy",
                )
            )
        parsed_policy: PropagationPolicy | None = None
        if policy is not None:
            try:
                parsed_policy = PropagationPolicy(policy)
            except ValueError:
                causes.append(
                    _not_supported(
                        "propagationPolicy", policy, ["Foreground", "Background", "Orphan", "nil"]
                    )
                )
        causes.extend(_dry_run_causes(dry_run))
        _raise_invalid("DeleteOptions", causes)
        return cls(
            dry_run=bool(dry_run),
            grace_period_seconds=grace,
            propagation_policy=parsed_policy,
            orphan_dependents=orphan,
            precondition_uid=uid,
            precondition_resource_version=resource_version,
        )


_DELETE_OPTIONS_KINDS: Final = frozenset({"", "DeleteOptions"})


def _check_body_kind(body: Mapping[str, Any]) -> None:
    kind = body.get("kind", "")
    if kind not in _DELETE_OPTIONS_KINDS:
        # apimachinery decodes the body into DeleteOptions and refuses anything else.
        raise BadRequestError("decoded object cannot be converted to DeleteOptions")
    if not isinstance(body.get("apiVersion", ""), str):
        raise BadRequestError("DeleteOptions.apiVersion must be a string")


def _query_member(name: str, text: str) -> Any:
    if name == "gracePeriodSeconds":
        value, problem = parse_int64(text)
        if problem is not None:
            raise BadRequestError(
                f"gracePeriodSeconds: strconv.ParseInt: parsing {go_quote(text)}: {problem}"
            )
        return value
    if name == "orphanDependents":
        return not is_go_false(text)
    return text


def _preconditions(value: Any) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    if not isinstance(value, dict):
        raise BadRequestError("DeleteOptions.preconditions must be an object")
    uid = value.get("uid")
    resource_version = value.get("resourceVersion")
    for name, member in (("uid", uid), ("resourceVersion", resource_version)):
        if member is not None and not isinstance(member, str):
            raise BadRequestError(f"DeleteOptions.preconditions.{name} must be a string")
    return uid, resource_version
