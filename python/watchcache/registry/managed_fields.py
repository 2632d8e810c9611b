"""Field ownership on every write: ``metadata.managedFields``, kept as kube-apiserver's field
manager keeps it, and server-side apply's merge of an applied configuration.

Design note
-----------
Kubernetes records, on each object, which client ("manager") set which fields, as a list of
``ManagedFieldsEntry`` (manager, operation ``Apply`` or ``Update``, apiVersion, time,
``fieldsType: FieldsV1``, the field set, subresource). The field sets and the merge itself
are :mod:`watchcache.structured`; this module is what kube-apiserver wraps around them
(``k8s.io/apimachinery/pkg/util/managedfields/internal``), in the same order:

* **decoding** the entries (a bad entry list in a create or update is ignored in favour of
  the stored one, as Kubernetes does; a bad stored list makes an apply fail), an empty list
  (or one empty entry) in an update resets ownership;
* **manager identity**: a JSON object of manager, operation, apiVersion (updates only: an
  applier keeps one entry across versions) and subresource, the key the merge engine sees;
* **update** (create, update, patch, the server's own writes): the fields the write added or
  changed become the writer's, removed ones leave every owner; objects stored before any
  field was tracked stay untracked until their first apply (``skipNonApplied``); at most
  ten update entries, the oldest merged into ``ancient-changes``;
* **apply**: version and kind must be the resource's, ``metadata.managedFields`` must be
  absent from the configuration; the first apply to an untracked object records the
  existing fields under ``before-first-apply``; a conflict with another manager's field is
  a 409 listing each field (``force`` takes them over); an apply by ``kubectl`` whose
  conflicts are all fields of the object's ``last-applied-configuration`` annotation takes
  them over (the migration from client-side apply), and keeps that annotation current;
* the identity fields (apiVersion, kind, name, namespace, uid, resourceVersion, generation,
  creationTimestamp, managedFields) are never owned;
* each subresource owns its part: a write through ``/status`` ignores everything but the
  status, a write of the main resource ignores the status (when the kind has one);
* **encoding** the entries back, sorted as Kubernetes sorts them (operation, time, manager,
  apiVersion, subresource), time in whole seconds.

Costs: every tracked write compares the old and new object (linear in their size) —
Kubernetes pays the same, in Go. What makes that cheap here is in ``structured``: the
quick walks (one walk validates and compares), entries decoded once and found again by
their decoded object's marshal form, sets shared between writes, and entries of managers
the write did not touch rebuilt from their cached form instead of encoded again (see
``structured.fieldpath``). This module adds per write a few memoized lookups (manager
identities, entry times) and, for an apply, shallow copies of the entries where it used to
copy the sets; copies of objects go through marshal (C) where deepcopy walked in Python.
``bench/field_manager.py`` measures a write against a JSON round trip of the object.
Callers: ``registry.object_store``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from watchcache.structured.fieldpath import (
    FieldsV1Error,
    ManagedFields,
    Path,
    PathElement,
    Set,
    VersionedSet,
    fields_v1_object,
    path_string,
    shared_set_from_fields_v1,
)
from watchcache.structured.schema import Atom
from watchcache.structured.typed import TypedValueError, compare, to_field_set
from watchcache.structured.updater import UNCHANGED, Conflict, ConflictsError
from watchcache.structured.updater import apply as smd_apply
from watchcache.structured.updater import update as smd_update
from watchcache.wire import gojson
from watchcache.wire.errors import (
    BadRequestError,
    ConflictError,
    InternalError,
    StatusCause,
    StatusDetails,
)
from watchcache.wire.gostrconv import go_quote

__all__ = [
    "ANCIENT_CHANGES",
    "BEFORE_FIRST_APPLY",
    "LAST_APPLIED_ANNOTATION",
    "FieldManager",
    "manager_from_user_agent",
    "reset_fields",
]

#: Kubernetes' DefaultMaxUpdateManagers.
MAX_UPDATE_MANAGERS: Final = 10
ANCIENT_CHANGES: Final = "ancient-changes"
BEFORE_FIRST_APPLY: Final = "before-first-apply"
LAST_APPLIED_ANNOTATION: Final = "kubectl.kubernetes.io/last-applied-configuration"
#: The manager whose applies migrate client-side apply's annotation (kubectl's default).
KUBECTL: Final = "kubectl"
#: Kubernetes' validation.FieldManagerMaxLength.
FIELD_MANAGER_MAX_LENGTH: Final = 128
#: Total annotation size Kubernetes allows (ValidateAnnotationsSize).
MAX_ANNOTATIONS_BYTES: Final = 256 * 1024
_CURRENT_OPERATION: Final = "current-operation"
APPLY: Final = "Apply"
UPDATE: Final = "Update"


def _path(*names: str) -> Path:
    return tuple(PathElement.of_field(n) for n in names)


def _set_of(paths: Iterable[Path]) -> Set:
    out = Set()
    for p in paths:
        out.insert(p)
    return out


#: Never owned by anyone (stripMetaManager's set).
_IDENTITY_FIELDS: Final = _set_of(
    [
        _path("apiVersion"),
        _path("kind"),
        _path("metadata"),
        *(
            _path("metadata", name)
            for name in (
                "name",
                "namespace",
                "creationTimestamp",
                "selfLink",
                "uid",
                "clusterName",
                "generation",
                "managedFields",
                "resourceVersion",
            )
        ),
    ]
)


def reset_fields(kind: str, has_status: bool) -> dict[str, Set]:
    """The fields a write through each subresource does not own (the strategies'
    GetResetFields): the main resource leaves the status to ``/status``, which leaves
    the rest (and, for pods, the deletion and owner metadata the kubelet cannot set)."""
    if not has_status:
        return {}
    status_ignores = [_path("spec")]
    if kind == "Pod":
        status_ignores += [
            _path("metadata", "deletionTimestamp"),
            _path("metadata", "ownerReferences"),
        ]
    return {"": _set_of([_path("status")]), "status": _set_of(status_ignores)}


def manager_from_user_agent(user_agent: str) -> str:
    """The manager of a write without ``fieldManager``: the User-Agent up to its first ``/``,
    printable characters only, at most 128 bytes (Kubernetes' prefixFromUserAgent)."""
    out: list[str] = []
    size = 0
    for char in user_agent.split("/", 1)[0]:
        if not char.isprintable() and char != " ":
            continue
        width = len(char.encode("utf-8", "surrogatepass"))
        if size + width > FIELD_MANAGER_MAX_LENGTH:
            break
        out.append(char)
        size += width
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def _manager_id(manager: str, operation: str, api_version: str, subresource: str) -> str:
    """BuildManagerIdentifier: Go's JSON of the entry without time and fields (and without
    apiVersion for an applier), members in ManagedFieldsEntry's order."""
    entry: dict[str, str] = {"manager": manager, "operation": operation}
    if operation == UPDATE and api_version:
        entry["apiVersion"] = api_version
    if subresource:
        entry["subresource"] = subresource
    return gojson.dumps({k: v for k, v in entry.items() if v})


@dataclass(slots=True)
class _Managed:
    """The decoded entries: field sets by manager identity, and each one's time."""

    fields: ManagedFields = field(default_factory=dict)
    times: dict[str, str | None] = field(default_factory=dict)


class _DecodeError(ValueError):
    pass


def _decode(entries: Any) -> _Managed:
    """DecodeManagedFields. Raises _DecodeError with Kubernetes' reason."""
    managed = _Managed()
    if entries is None:
        return managed
    if not isinstance(entries, list):
        raise _DecodeError("managedFields must be a list")
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise _DecodeError(f"managed fields entry {index} is not an object")
        operation = entry.get("operation")
        if operation not in (APPLY, UPDATE):
            raise _DecodeError("operation must be `Apply` or `Update`")
        api_version = entry.get("apiVersion")
        if not isinstance(api_version, str) or not api_version:
            raise _DecodeError("apiVersion must not be empty")
        fields_type = entry.get("fieldsType", "")
        if fields_type == "":
            raise _DecodeError(f"missing fieldsType in managed fields entry {index}")
        if fields_type != "FieldsV1":
            raise _DecodeError(
                f"invalid fieldsType {fields_type!r} in managed fields entry {index}"
            )
        manager = entry.get("manager", "")
        subresource = entry.get("subresource", "")
        if not isinstance(manager, str) or not isinstance(subresource, str):
            raise _DecodeError(f"managed fields entry {index} has a non-string member")
        raw = entry.get("fieldsV1")
        try:
            fields = Set() if raw is None else shared_set_from_fields_v1(raw)
        except FieldsV1Error as error:
            raise _DecodeError(f"error decoding set: {error}") from None
        identity = _manager_id(manager, operation, api_version, subresource)
        managed.fields[identity] = VersionedSet(fields, api_version, operation == APPLY)
        when = entry.get("time")
        managed.times[identity] = when if isinstance(when, str) else None
    return managed


def _is_reset(entries: Any) -> bool:
    """An update asks to drop all ownership with an empty list or one empty entry."""
    if not isinstance(entries, list):
        return False
    return len(entries) == 0 or (len(entries) == 1 and entries[0] == {})


@functools.lru_cache(maxsize=1024)
def _seconds(when: str | None) -> int:
    if not when:
        return 0
    try:
        return int(datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0


def _encode(managed: _Managed) -> list[dict[str, Any]] | None:
    """encodeManagedFields: entries in Kubernetes' order, or None when nobody owns anything."""
    if not managed.fields:
        return None
    entries: list[dict[str, Any]] = []
    for identity, versioned in managed.fields.items():
        about = _identity_members(identity)
        operation = APPLY if versioned.applied else about.get("operation", UPDATE)
        entry: dict[str, Any] = {}
        if about.get("manager"):
            entry["manager"] = about["manager"]
        entry["operation"] = operation
        entry["apiVersion"] = versioned.api_version
        when = managed.times.get(identity)
        if when:
            entry["time"] = when
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = fields_v1_object(versioned.set)
        if about.get("subresource"):
            entry["subresource"] = about["subresource"]
        entries.append(entry)
    entries.sort(
        key=lambda e: (
            e["operation"],
            _seconds(e.get("time")),
            e.get("manager", ""),
            e["apiVersion"],
            e.get("subresource", ""),
        )
    )
    return entries


@functools.lru_cache(maxsize=1024)
def _identity_members(identity: str) -> dict[str, Any]:
    """A manager identity's members (read-only: shared between calls)."""
    about = json.loads(identity)
    return about if isinstance(about, dict) else {}


def _conflict_error(conflicts: list[Conflict]) -> ConflictError:
    """NewConflictError: one cause per field, the message grouped by manager."""
    causes = tuple(
        StatusCause(
            "FieldManagerConflict",
            f"conflict with {_print_manager(c.manager)}",
            path_string(c.path),
        )
        for c in conflicts
    )
    if len(conflicts) == 1:
        only = conflicts[0]
        message = (
            f"Apply failed with 1 conflict: conflict with {_print_manager(only.manager)}: "
            f"{path_string(only.path)}"
        )
    else:
        by_manager: dict[str, list[str]] = {}
        for c in conflicts:
            by_manager.setdefault(c.manager, []).append(path_string(c.path))
        lines: list[str] = []
        for manager in sorted(by_manager):
            lines.append(f"conflicts with {_print_manager(manager)}:")
            lines.extend(f"- {p}" for p in by_manager[manager])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ConflictError(message, details=StatusDetails(causes=causes))


def _print_manager(identity: str) -> str:
    try:
        about = json.loads(identity)
    except ValueError:
        return go_quote(identity)
    if not isinstance(about, dict):
        return go_quote(identity)
    text = go_quote(str(about.get("manager", "")))
    if about.get("subresource"):
        text += f" with subresource {go_quote(str(about['subresource']))}"
    if about.get("operation") == UPDATE:
        text += f" using {about.get('apiVersion', '')}"
    return text


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FieldManager:
    """The field manager of one served resource version (``api_version``, ``kind``).

    ``atom`` gives the kind's type (asked lazily: a CRD's schema can change);
    ``ignored`` maps a subresource ("" for the main resource) to the fields a write through
    it does not own (the strategy's reset fields). ``clock`` gives RFC 3339 times.
    """

    def __init__(
        self,
        api_version: str,
        kind: str,
        atom: Callable[[], Atom],
        *,
        ignored: Mapping[str, Set] | None = None,
        clock: Callable[[], str] = _now,
    ) -> None:
        self.api_version = api_version
        self.kind = kind
        self._atom = atom
        self._ignored = dict(ignored or {})
        self._clock = clock

    # -- update -----------------------------------------------------------------------------

    def update(
        self, live: dict[str, Any] | None, new: dict[str, Any], manager: str, subresource: str = ""
    ) -> None:
        """Set ``new``'s managedFields for a non-apply write of ``new`` over ``live`` (None:
        a create). Never fails: when ownership cannot be computed, ``new`` keeps ``live``'s
        entries, as Kubernetes' UpdateNoErrors does."""
        base = {} if live is None else live
        live_entries = (base.get("metadata") or {}).get("managedFields")
        try:
            managed = self._decode_live_or_new(base, new, subresource != "")
            new["metadata"].pop("managedFields", None)
            if not managed.fields and (base.get("metadata") or {}).get("uid"):
                return  # an untracked object stays untracked until its first apply
            self._update(base, new, managed, manager or "unknown", subresource)
        except (TypedValueError, _DecodeError):
            if live_entries is not None:
                new["metadata"]["managedFields"] = gojson.deep_copy(live_entries)
            else:
                new["metadata"].pop("managedFields", None)
            return
        entries = _encode(managed)
        if entries is not None:
            new["metadata"]["managedFields"] = entries

    def _decode_live_or_new(
        self, live: dict[str, Any], new: dict[str, Any], from_live_only: bool
    ) -> _Managed:
        live_entries = (live.get("metadata") or {}).get("managedFields")
        if not from_live_only:
            given = new["metadata"].get("managedFields")
            if _is_reset(given):
                return _Managed()
            try:
                managed = _decode(given)
            except _DecodeError:
                managed = _Managed()
            if managed.fields:
                return managed
        try:
            return _decode(live_entries)
        except _DecodeError:
            return _Managed()

    def _update(
        self,
        live: dict[str, Any],
        new: dict[str, Any],
        managed: _Managed,
        manager: str,
        subresource: str,
    ) -> None:
        """buildManagerInfo → managedFieldsUpdater → stripMeta → the merge engine, then the
        cap on update entries."""
        identity = _manager_id(manager, UPDATE, self.api_version, subresource)
        atom = self._atom()
        _, fields = smd_update(
            _without_managed_fields(live),
            _without_managed_fields(new),
            self.api_version,
            managed.fields,
            _CURRENT_OPERATION,
            atom,
            ignored=self._ignored.get(subresource),
        )
        _strip_identity_fields(fields, _CURRENT_OPERATION)
        current = fields.pop(_CURRENT_OPERATION, None)
        if current is not None:
            previous = fields.get(identity)
            merged = current.set if previous is None else current.set.union(previous.set)
            fields[identity] = VersionedSet(merged, current.api_version, current.applied)
            managed.times[identity] = self._clock()
        managed.fields = fields
        self._cap_update_managers(managed)

    def _cap_update_managers(self, managed: _Managed) -> None:
        """capManagersManager: beyond ten update entries, the oldest are merged, per
        apiVersion, into one ``ancient-changes`` entry."""
        updaters = [m for m, vs in managed.fields.items() if not vs.applied]
        if len(updaters) <= MAX_UPDATE_MANAGERS:
            return
        updaters.sort(key=lambda m: (_seconds(managed.times.get(m)), m))
        first_of_version: dict[str, str] = {}
        length = len(updaters)
        for manager in updaters:
            if length <= MAX_UPDATE_MANAGERS:
                break
            versioned = managed.fields[manager]
            when = managed.times.get(manager)
            version = versioned.api_version
            bucket = _manager_id(ANCIENT_CHANGES, UPDATE, version, "")
            first = first_of_version.get(version)
            if first is None:
                first_of_version[version] = manager
                continue
            if bucket not in managed.fields:
                managed.fields[bucket] = managed.fields.pop(first)
            managed.fields[bucket] = VersionedSet(
                versioned.set.union(managed.fields[bucket].set),
                versioned.api_version,
                versioned.applied,
            )
            del managed.fields[manager]
            length -= 1
            managed.times[bucket] = when
        for gone in set(managed.times) - set(managed.fields):
            del managed.times[gone]

    # -- apply ------------------------------------------------------------------------------

    def apply(
        self,
        live: dict[str, Any],
        config: dict[str, Any],
        manager: str,
        *,
        force: bool,
        subresource: str = "",
    ) -> dict[str, Any]:
        """The object after applying ``config`` (an applied configuration, as decoded from
        the request) to ``live`` (``{}`` when the object does not exist yet), with its
        managedFields. Raises 400 (wrong kind or version, managedFields given, a
        configuration the schema cannot hold), 409 (conflicts), 500 (stored managedFields
        that do not decode)."""
        try:
            managed = _decode((live.get("metadata") or {}).get("managedFields"))
        except _DecodeError as error:
            raise InternalError(f"failed to decode managed fields: {error}") from None
        self._check_kind(config)
        metadata = config.get("metadata")
        if isinstance(metadata, dict) and isinstance(metadata.get("managedFields"), list):
            raise BadRequestError("metadata.managedFields must be nil")
        try:
            result, managed = self._apply_migrating(
                live, config, managed, manager, force=force, subresource=subresource
            )
        except ConflictsError as error:
            raise _conflict_error(list(error.conflicts)) from None
        if manager == KUBECTL and _has_last_applied(result):
            _set_last_applied(result, config)
        entries = _encode(managed)
        result.setdefault("metadata", {})
        if entries is None:
            result["metadata"].pop("managedFields", None)
        else:
            result["metadata"]["managedFields"] = entries
        return result

    def _check_kind(self, config: dict[str, Any]) -> None:
        api_version = config.get("apiVersion")
        kind = config.get("kind")
        if api_version != self.api_version or kind != self.kind:
            group, _, version = (api_version if isinstance(api_version, str) else "").rpartition(
                "/"
            )
            shown_kind = kind if isinstance(kind, str) else ""
            raise BadRequestError(f"invalid object type: {group}/{version}, Kind={shown_kind}")

    def _apply_migrating(
        self,
        live: dict[str, Any],
        config: dict[str, Any],
        managed: _Managed,
        manager: str,
        *,
        force: bool,
        subresource: str,
    ) -> tuple[dict[str, Any], _Managed]:
        """lastAppliedManager: kubectl's conflicts over fields its client-side apply set
        (and that still hold those values) are not conflicts."""
        try:
            # A copy of the entries for the first try (the sets themselves never change).
            first = _Managed(dict(managed.fields), dict(managed.times))
            return self._apply_tracked(
                live, config, first, manager, force=force, subresource=subresource
            )
        except ConflictsError as error:
            if manager != KUBECTL:
                raise
            allowed = self._fields_of_last_applied(live)
            if allowed is None:
                raise
            remaining = [c for c in error.conflicts if not allowed.has(c.path)]
            if remaining:
                raise ConflictsError(remaining) from None
            return self._apply_tracked(
                live, config, managed, manager, force=True, subresource=subresource
            )

    def _fields_of_last_applied(self, live: dict[str, Any]) -> Set | None:
        annotations = (live.get("metadata") or {}).get("annotations") or {}
        text = annotations.get(LAST_APPLIED_ANNOTATION) if isinstance(annotations, dict) else None
        if not isinstance(text, str) or not text:
            return None
        try:
            last = json.loads(text)
        except ValueError:
            return None
        if not isinstance(last, dict) or last.get("apiVersion") != self.api_version:
            return None
        atom = self._atom()
        try:
            fields = to_field_set(last, atom)
            diff = compare(last, _without_managed_fields(live), atom)
        except TypedValueError:
            return None
        return fields.difference(diff.modified).difference(diff.added).difference(diff.removed)

    def _apply_tracked(
        self,
        live: dict[str, Any],
        config: dict[str, Any],
        managed: _Managed,
        manager: str,
        *,
        force: bool,
        subresource: str,
    ) -> tuple[dict[str, Any], _Managed]:
        """skipNonApplied: the first apply to an untracked object records what is there as
        ``before-first-apply``; then buildManagerInfo → managedFieldsUpdater → stripMeta →
        the merge engine."""
        live = _without_managed_fields(live)
        if not managed.fields:
            empty = {"apiVersion": self.api_version, "kind": self.kind}
            if live:
                self._update(empty, live, managed, BEFORE_FIRST_APPLY, subresource)
        identity = _manager_id(manager, APPLY, self.api_version, subresource)
        atom = self._atom()
        try:
            result, fields = smd_apply(
                live,
                config,
                self.api_version,
                managed.fields,
                identity,
                atom,
                force=force,
                ignored=self._ignored.get(subresource),
            )
        except TypedValueError as error:
            name = (config.get("metadata") or {}).get("name", "")
            namespace = (config.get("metadata") or {}).get("namespace", "")
            raise BadRequestError(
                f"failed to create typed patch object ({namespace or '<unknown>'}/{name}; "
                f"{self._gvk()}): {error}"
            ) from None
        _strip_identity_fields(fields, identity)
        managed.fields = fields
        if result is UNCHANGED:
            # Nothing changed: the time of the apply stays as it was.
            return gojson.deep_copy(live), managed
        managed.times[identity] = self._clock()
        return result, managed

    def _gvk(self) -> str:
        group, _, version = self.api_version.rpartition("/")
        return f"{group}/{version}, Kind={self.kind}"


def _without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """A shallow copy of ``obj`` without metadata.managedFields (RemoveObjectManagedFields)."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or "managedFields" not in metadata:
        return obj
    out = dict(obj)
    out["metadata"] = {k: v for k, v in metadata.items() if k != "managedFields"}
    return out


def _strip_identity_fields(fields: ManagedFields, manager: str) -> None:
    versioned = fields.get(manager)
    if versioned is None:
        return
    kept = versioned.set.difference(_IDENTITY_FIELDS)
    if kept.is_empty():
        del fields[manager]
    else:
        fields[manager] = VersionedSet(kept, versioned.api_version, versioned.applied)


def _has_last_applied(obj: dict[str, Any]) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations")
    return isinstance(annotations, dict) and bool(annotations.get(LAST_APPLIED_ANNOTATION))


def _set_last_applied(obj: dict[str, Any], config: dict[str, Any]) -> None:
    """lastAppliedUpdater: the annotation becomes the applied configuration (without the
    annotation itself), as Go encodes an unstructured object: sorted keys and a newline;
    dropped when it would make the annotations too large."""
    applied = gojson.deep_copy(config)
    annotations_of_config = (applied.get("metadata") or {}).get("annotations")
    if isinstance(annotations_of_config, dict):
        annotations_of_config.pop(LAST_APPLIED_ANNOTATION, None)
    value = _sorted_json(applied) + "\n"
    annotations = obj["metadata"].setdefault("annotations", {})
    annotations[LAST_APPLIED_ANNOTATION] = value
    size = sum(len(k.encode()) + len(str(v).encode()) for k, v in annotations.items())
    if size > MAX_ANNOTATIONS_BYTES:
        del annotations[LAST_APPLIED_ANNOTATION]


def _sorted_json(value: Any) -> str:
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(gojson.dumps(k) + ":" + _sorted_json(value[k]) for k in sorted(value))
            + "}"
        )
    if isinstance(value, list):
        return "[" + ",".join(_sorted_json(v) for v in value) + "]"
    return gojson.dumps(value)
