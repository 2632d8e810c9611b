"""What a write's body must be, and what the server fills in, before it reaches etcd.

The body has been decoded already (``wire.body``: media type, JSON/YAML/protobuf, schema,
nesting). Checks here run in the order a client would want to hear about them, each a
Kubernetes Status: size (413), ``kind``/``apiVersion`` matching the URL (400; missing ones
are filled in, since the Python client omits them), name and namespace matching the URL
(400), then metadata validation aggregated into one 422 (name and namespace must be
DNS-1123, labels must be valid label keys and values). The kind's own rules are its
strategy's (``registry.strategy``).

Server-owned fields: whatever a create's body says about ``uid``, ``creationTimestamp``,
the deletion fields and ``resourceVersion`` is wiped, and uid and creationTimestamp are
set; an update carries them over from the stored object. ``metadata.resourceVersion`` is
never stored (the etcd revision is the version) and is stamped when the object is read.
"""

from __future__ import annotations

import json
import re
import secrets
import uuid
from datetime import UTC, datetime
from typing import Any

from watchcache.registry.resources import ResourceSpec
from watchcache.wire.errors import (
    BadRequestError,
    InvalidError,
    RequestEntityTooLargeError,
    StatusCause,
)

#: etcd's default ``--max-request-bytes`` is 1.5 MiB; Kubernetes caps bodies at 3 MiB.
MAX_BODY_BYTES = 3 * 1024 * 1024

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_GENERATE_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_size(body: bytes, *, limit: int = MAX_BODY_BYTES) -> None:
    """413 for a body over ``limit``."""
    if len(body) > limit:
        raise RequestEntityTooLargeError(f"Request entity too large: limit is {limit}")


def check_object(
    spec: ResourceSpec, obj: dict[str, Any], *, namespace: str, name: str | None
) -> dict[str, Any]:
    """Check and complete ``obj`` for a write at ``namespace``/``name`` (name None: a
    create, which takes the body's name or generates one from ``generateName``). Returns
    the metadata dict (changed in place). Raises 400 or 422."""
    api_version = obj.setdefault("apiVersion", spec.api_version)
    kind = obj.setdefault("kind", spec.kind)
    if api_version != spec.api_version:
        raise BadRequestError(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({spec.api_version})"
        )
    if kind != spec.kind:
        raise BadRequestError(
            f"the kind in the data ({kind}) does not match the expected kind ({spec.kind})"
        )
    metadata = obj.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        raise BadRequestError("metadata must be a JSON object")
    body_name = metadata.get("name") or ""
    if name is not None and body_name and body_name != name:
        raise BadRequestError(
            f"the name of the object ({body_name}) does not match the name on the URL ({name})"
        )
    if name is not None:
        metadata["name"] = name
    elif not body_name and isinstance(metadata.get("generateName"), str):
        metadata["name"] = metadata["generateName"] + "".join(
            secrets.choice(_GENERATE_CHARS) for _ in range(5)
        )
    body_namespace = metadata.get("namespace") or ""
    if spec.namespaced:
        if body_namespace and body_namespace != namespace:
            raise BadRequestError(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        metadata["namespace"] = namespace
    elif body_namespace:
        metadata.pop("namespace")
    _validate(spec, obj, metadata)
    return metadata


def _validate(spec: ResourceSpec, obj: dict[str, Any], metadata: dict[str, Any]) -> None:
    causes: list[StatusCause] = []
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        causes.append(_required("metadata.name", "name or generateName is required"))
    else:
        pattern, what = (
            (_DNS1123_LABEL, "RFC 1123 label")
            if spec.name == "namespaces"
            else (_DNS1123_SUBDOMAIN, "RFC 1123 subdomain")
        )
        if len(name) > (63 if spec.name == "namespaces" else 253) or not pattern.match(name):
            causes.append(
                _invalid(
                    "metadata.name",
                    name,
                    f"a lowercase {what} must consist of lower case alphanumeric characters, "
                    "'-' or '.', and must start and end with an alphanumeric character",
                )
            )
    labels = metadata.get("labels")
    if labels is not None:
        if not isinstance(labels, dict):
            causes.append(_invalid("metadata.labels", str(labels), "must be a map of strings"))
        else:
            for key, value in labels.items():
                if not _label_key_ok(key):
                    causes.append(_invalid("metadata.labels", key, "name part must be valid"))
                if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
                    causes.append(
                        _invalid(f"metadata.labels[{key}]", str(value), "a valid label value")
                    )
    annotations = metadata.get("annotations")
    if annotations is not None and (
        not isinstance(annotations, dict)
        or not all(isinstance(v, str) for v in annotations.values())
    ):
        causes.append(_invalid("metadata.annotations", "", "must be a map of strings"))
    if causes:
        raise InvalidError.for_fields(spec.kind, spec.group, str(name or ""), causes)


def _label_key_ok(key: object) -> bool:
    if not isinstance(key, str) or not key:
        return False
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return False
    return len(name) <= 63 and bool(_LABEL_NAME.match(name))


def _required(field: str, message: str) -> StatusCause:
    return StatusCause(
        reason="FieldValueRequired", message=f"Required value: {message}", field=field
    )


def _invalid(field: str, value: str, message: str) -> StatusCause:
    # Go's field.Invalid quotes a string value with %q: "x", not Python's 'x'.
    quoted = json.dumps(value, ensure_ascii=False)
    return StatusCause(
        reason="FieldValueInvalid", message=f"Invalid value: {quoted}: {message}", field=field
    )


def prepare_create(metadata: dict[str, Any]) -> None:
    """Server-owned fields of a new object: whatever the body says about them is wiped
    (rest.WipeObjectMetaSystemFields), then uid and creationTimestamp are set."""
    for field in _SYSTEM_FIELDS:
        metadata.pop(field, None)
    metadata["uid"] = str(uuid.uuid4())
    metadata["creationTimestamp"] = now_rfc3339()


def prepare_update(metadata: dict[str, Any], stored: dict[str, Any]) -> None:
    """Carry the server-owned fields of the stored object over to its replacement
    (rest.BeforeUpdate): uid, creationTimestamp, the deletion fields once set, and the
    generation (the kind's strategy bumps it). Whether the body tried to change them is
    checked before (the object store's ``_server_owned_field_causes``)."""
    old = stored.get("metadata") or {}
    for field in ("uid", "creationTimestamp", "generation"):
        if field in old:
            metadata[field] = old[field]
        else:
            metadata.pop(field, None)
    if old.get("deletionTimestamp"):
        metadata["deletionTimestamp"] = old["deletionTimestamp"]
    if "deletionGracePeriodSeconds" in old and metadata.get("deletionGracePeriodSeconds") is None:
        metadata["deletionGracePeriodSeconds"] = old["deletionGracePeriodSeconds"]
    metadata.pop("resourceVersion", None)
    metadata.pop("selfLink", None)


#: What a client cannot set on create.
_SYSTEM_FIELDS = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "resourceVersion",
)


def encode(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
