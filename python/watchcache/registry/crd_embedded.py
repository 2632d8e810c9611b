"""Embedded resources in custom objects: their TypeMeta and ObjectMeta, checked and
decoded as apiextensions' ``objectmeta`` package does.

Design note
-----------
A node marked ``x-kubernetes-embedded-resource`` holds a whole Kubernetes object. Its
``apiVersion``, ``kind`` and ``metadata`` are not data of the CRD schema: the schema may
narrow them, but Kubernetes also checks them as TypeMeta and ObjectMeta wherever they
appear (and at the resource root when the caller says so):

* :func:`embedded_errors` is ``objectmeta.Validate``: apiVersion and kind are required
  strings (a group/version, a DNS-1035 label in any case); metadata must decode as
  ObjectMeta (else Go's ``json: cannot unmarshal ...``) and then pass ObjectMeta's create
  rules with names as path segments: generateName, name, namespace (a DNS-1123 label),
  generation, labels, annotations (keys and total size), owner references and finalizers;
* :func:`coerce_error` is the first error of ``objectmeta.Coerce`` (a non-string kind or
  apiVersion, metadata that does not decode), which the CRD checks apply to defaults;
* :func:`object_meta_error` is the decoding step alone, shared with ``crd_pruning``, which
  drops what ObjectMeta does not have from embedded metadata.

Messages are apimachinery's (``may have mixed case, but should otherwise match: a DNS-1035
label must consist of ...``). Not modelled: managedFields entries and the fields of owner
references beyond their required members. Where Kubernetes iterates a Go map (labels,
annotations, members) the order here is sorted.

Walks follow only the schema's properties, items and additionalProperties, and skip
subtrees the compiled schema marks as holding no embedded resource; a custom object
without embedded resources costs one check at its root. Pure functions; safe from any
thread. Callers: ``crd_validation``, ``crd_pruning``, ``structural`` (defaults).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from watchcache.registry.field_errors import (
    INT64_MAX,
    INT64_MIN,
    child,
    go_float_v,
    index,
    invalid,
    key,
    required,
    too_long,
)
from watchcache.wire.errors import StatusCause
from watchcache.wire.gotime import TimeParseError, parse_time

if TYPE_CHECKING:
    from watchcache.registry.structural import StructuralSchema

__all__ = [
    "coerce_error",
    "embedded_errors",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "object_meta_error",
]

_STRING_FIELDS: Final = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion")
_OWNER_FIELDS: Final = {
    "apiVersion": "string",
    "kind": "string",
    "name": "string",
    "uid": "types.UID",
    "controller": "bool",
    "blockOwnerDeletion": "bool",
}
_DNS1035: Final = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN: Final = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
_LABEL_KEY: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MESSAGE: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_ANNOTATIONS_LIMIT: Final = 256 * 1024
_DNS1035_RE: Final = re.compile(_DNS1035)
_DNS1123_LABEL_RE: Final = re.compile(_DNS1123_LABEL)
_DNS1123_SUBDOMAIN_RE: Final = re.compile(_DNS1123_SUBDOMAIN)
_LABEL_KEY_RE: Final = re.compile(_LABEL_KEY)
_LABEL_VALUE_RE: Final = re.compile(f"({_LABEL_KEY})?")


def _json_kind(value: Any) -> str:
    """How encoding/json names a JSON value in its type errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "number"


def _meta_type_error(value: Any, struct_name: str, field: str, go_type: str) -> str:
    kind = _json_kind(value)
    if kind == "number" and go_type == "int64" and isinstance(value, float):
        kind = f"number {getattr(value, 'text', go_float_v(value))}"
    where = f"{struct_name}.{field}"
    return f"json: cannot unmarshal {kind} into Go struct field {where} of type {go_type}"


def object_meta_error(metadata: Any) -> str | None:
    """The error ``json.Unmarshal`` gives for ``metadata`` into an ObjectMeta, or None.
    A time that does not parse ends decoding; a type error is remembered and the first one
    reported (Go's order of precedence)."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        return f"json: cannot unmarshal {_json_kind(metadata)} into Go value of type v1.ObjectMeta"
    first: str | None = None
    for name, value in metadata.items():
        error, fatal = _meta_member_error(name, value)
        if fatal:
            return error
        if first is None:
            first = error
    return first


def _meta_member_error(name: str, value: Any) -> tuple[str | None, bool]:
    if value is None:
        return None, False
    struct_name = "ObjectMeta"
    if name in _STRING_FIELDS:
        if not isinstance(value, str):
            go_type = "types.UID" if name == "uid" else "string"
            return _meta_type_error(value, struct_name, name, go_type), False
    elif name in ("generation", "deletionGracePeriodSeconds"):
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not INT64_MIN <= value <= INT64_MAX
        ):
            return _meta_type_error(value, struct_name, name, "int64"), False
    elif name in ("creationTimestamp", "deletionTimestamp"):
        if not isinstance(value, str):
            kind = _json_kind(value)
            return f"json: cannot unmarshal {kind} into Go value of type string", True
        try:
            parse_time(value)
        except TimeParseError as error:
            return str(error), True
    elif name in ("labels", "annotations"):
        if not isinstance(value, dict):
            return _meta_type_error(value, struct_name, name, "map[string]string"), False
        for item in value.values():
            if item is not None and not isinstance(item, str):
                return _meta_type_error(item, struct_name, name, "string"), False
    elif name == "finalizers":
        if not isinstance(value, list):
            return _meta_type_error(value, struct_name, name, "[]string"), False
        for item in value:
            if item is not None and not isinstance(item, str):
                return _meta_type_error(item, struct_name, name, "string"), False
    elif name in ("ownerReferences", "managedFields"):
        element = "v1.OwnerReference" if name == "ownerReferences" else "v1.ManagedFieldsEntry"
        if not isinstance(value, list):
            return _meta_type_error(value, struct_name, name, f"[]{element}"), False
        for item in value:
            if item is not None and not isinstance(item, dict):
                return _meta_type_error(item, struct_name, name, element), False
            if name == "ownerReferences" and item:
                for member, go_type in _OWNER_FIELDS.items():
                    got = item.get(member)
                    want = bool if go_type == "bool" else str
                    if got is not None and (not isinstance(got, want)):
                        field = f"{name}.{member}"
                        return _meta_type_error(got, "OwnerReference", field, go_type), False
    return None, False


def coerce_error(
    prefix: str | None, value: Any, node: StructuralSchema | None, is_resource_root: bool
) -> StatusCause | None:
    """objectmeta.Coerce's first error: an embedded resource's apiVersion or kind that is
    not a string, or metadata that does not decode as ObjectMeta."""
    if node is None:
        return None
    return _coerce(prefix, value, node, is_resource_root or node.embedded)


def _coerce(
    path: str | None, value: Any, s: StructuralSchema | None, embedded: bool
) -> StatusCause | None:
    if s is None:
        return None
    if isinstance(value, dict):
        for name in sorted(value):
            member = value[name]
            if embedded:
                if name in ("apiVersion", "kind") and not isinstance(member, str):
                    return invalid(child(path, name), member, "must be a string")
                if name == "metadata":
                    error = object_meta_error(member)
                    if error is not None:
                        return invalid(child(path, "metadata"), member, error)
            prop = s.properties.get(name)
            if prop is not None:
                found = _coerce(child(path, name), member, prop, prop.embedded)
            elif s.additional_given:
                additional = s.additional
                found = _coerce(
                    key(path, name),
                    member,
                    additional,
                    additional is not None and additional.embedded,
                )
            else:
                found = None
            if found is not None:
                return found
    elif isinstance(value, list):
        items = s.items
        for i, item in enumerate(value):
            found = _coerce(index(path, i), item, items, items is not None and items.embedded)
            if found is not None:
                return found
    return None


def embedded_errors(
    value: Any,
    node: StructuralSchema | None,
    prefix: str | None = None,
    is_resource_root: bool = False,
) -> list[StatusCause]:
    """objectmeta.Validate: the TypeMeta and ObjectMeta of every embedded resource (and of
    the value itself when ``is_resource_root``)."""
    out: list[StatusCause] = []
    if node is not None:
        _embedded_walk(prefix, value, node, is_resource_root or node.embedded, out)
    return out


def _embedded_walk(
    path: str | None, value: Any, s: StructuralSchema, embedded: bool, out: list[StatusCause]
) -> None:
    if not (embedded or s.embedded_below):
        return
    if isinstance(value, dict):
        if embedded:
            _embedded_resource(path, value, out)
        for name in sorted(value):
            prop = s.properties.get(name)
            if prop is not None:
                _embedded_walk(child(path, name), value[name], prop, prop.embedded, out)
            elif s.additional_given and s.additional is not None:
                additional = s.additional
                _embedded_walk(key(path, name), value[name], additional, additional.embedded, out)
    elif isinstance(value, list) and s.items is not None:
        items = s.items
        for i, item in enumerate(value):
            _embedded_walk(index(path, i), item, items, items.embedded, out)


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    if not examples:
        return f"{message} (regex used for validation is '{pattern}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def _dns1035_label(value: str) -> list[str]:
    errors = []
    if len(value.encode()) > 63:
        errors.append("must be no more than 63 characters")
    if not _DNS1035_RE.fullmatch(value):
        errors.append(
            _regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character",
                _DNS1035,
                "my-name",
                "abc-123",
            )
        )
    return errors


def _dns1123_label(value: str) -> list[str]:
    errors = []
    if len(value.encode()) > 63:
        errors.append("must be no more than 63 characters")
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            errors.append("must not contain dots")
        else:
            errors.append(
                _regex_error(
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                    "characters or '-', and must start and end with an alphanumeric character",
                    _DNS1123_LABEL,
                    "my-name",
                    "123-abc",
                )
            )
    return errors


def _dns1123_subdomain(value: str) -> list[str]:
    errors = []
    if len(value.encode()) > 253:
        errors.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errors.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
                _DNS1123_SUBDOMAIN,
                "example.com",
            )
        )
    return errors


def _label_key(value: str) -> list[str]:
    """IsQualifiedName (IsLabelKey)."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend("prefix part " + m for m in _dns1123_subdomain(prefix))
    else:
        return [
            "a valid label key "
            + _regex_error(_LABEL_KEY_MESSAGE, _LABEL_KEY, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _LABEL_KEY_RE.fullmatch(name):
        errors.append(
            "name part "
            + _regex_error(_LABEL_KEY_MESSAGE, _LABEL_KEY, "MyName", "my.name", "123-abc")
        )
    return errors


#: apimachinery's ``IsQualifiedName`` and ``IsDNS1123Subdomain`` (the messages, empty when
#: valid), for other kinds' checks (an Event's reporting controller and namespace).
is_qualified_name = _label_key
is_dns1123_subdomain = _dns1123_subdomain


def _label_value(value: str) -> list[str]:
    errors = []
    if len(value.encode()) > 63:
        errors.append("must be no more than 63 characters")
    if not _LABEL_VALUE_RE.fullmatch(value):
        errors.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                f"({_LABEL_KEY})?",
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errors


def _path_segment(name: str, prefix: bool) -> list[str]:
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def _embedded_resource(path: str | None, obj: dict[str, Any], out: list[StatusCause]) -> None:
    if "apiVersion" not in obj:
        out.append(required(child(path, "apiVersion")))
    if "kind" not in obj:
        out.append(required(child(path, "kind")))
    if "apiVersion" in obj:
        api_version = obj["apiVersion"]
        field = child(path, "apiVersion")
        if not isinstance(api_version, str):
            out.append(invalid(field, api_version, "must be a string"))
        elif not api_version:
            out.append(invalid(field, api_version, "must not be empty"))
        elif api_version != "/" and api_version.count("/") > 1:
            out.append(
                invalid(field, api_version, f"unexpected GroupVersion string: {api_version}")
            )
    if "kind" in obj:
        kind = obj["kind"]
        field = child(path, "kind")
        if not isinstance(kind, str):
            out.append(invalid(field, kind, "must be a string"))
        elif not kind:
            out.append(invalid(field, kind, "must not be empty"))
        else:
            errors = _dns1035_label(kind.lower())
            if errors:
                detail = "may have mixed case, but should otherwise match: " + ",".join(errors)
                out.append(invalid(field, kind, detail))
    if "metadata" in obj:
        metadata = obj["metadata"]
        error = object_meta_error(metadata)
        if error is not None:
            out.append(invalid(child(path, "metadata"), metadata, error))
        elif isinstance(metadata, dict):
            _object_meta(child(path, "metadata"), metadata, out)


def _object_meta(path: str, meta: dict[str, Any], out: list[StatusCause]) -> None:
    """ValidateObjectMeta for a create, with names as path segments (what apiextensions
    asks of embedded objects)."""
    generate_name = meta.get("generateName") or ""
    if generate_name:
        for message in _path_segment(generate_name, prefix=True):
            out.append(invalid(child(path, "generateName"), generate_name, message))
    name = meta.get("name") or "fakename"
    for message in _path_segment(name, prefix=False):
        out.append(invalid(child(path, "name"), name, message))
    namespace = meta.get("namespace") or ""
    if namespace:
        for message in _dns1123_label(namespace):
            out.append(invalid(child(path, "namespace"), namespace, message))
    generation = meta.get("generation") or 0
    if generation < 0:
        out.append(
            invalid(child(path, "generation"), generation, "must be greater than or equal to 0")
        )
    labels = meta.get("labels") or {}
    for label in sorted(labels):
        for message in _label_key(label):
            out.append(invalid(child(path, "labels"), label, message))
        for message in _label_value(labels[label] or ""):
            out.append(invalid(child(path, "labels"), labels[label] or "", message))
    annotations = meta.get("annotations") or {}
    for annotation in sorted(annotations):
        for message in _label_key(annotation.lower()):
            out.append(invalid(child(path, "annotations"), annotation, message))
    size = sum(len(k.encode()) + len((v or "").encode()) for k, v in annotations.items())
    if size > _ANNOTATIONS_LIMIT:
        out.append(too_long(child(path, "annotations"), _ANNOTATIONS_LIMIT))
    _owner_references(child(path, "ownerReferences"), meta.get("ownerReferences") or [], out)
    _finalizers(child(path, "finalizers"), meta.get("finalizers") or [], out)


def _owner_references(path: str, references: list[Any], out: list[StatusCause]) -> None:
    controller = ""
    for i, reference in enumerate(references):
        ref = reference or {}
        ref_path = index(path, i)
        api_version = ref.get("apiVersion") or ""
        if not api_version:
            out.append(required(child(ref_path, "apiVersion"), "must not be empty"))
        elif api_version.count("/") > 1 or api_version.endswith("/"):
            out.append(
                invalid(
                    child(ref_path, "apiVersion"),
                    api_version,
                    "must be <group>/<version> or <version>",
                )
            )
        for member in ("kind", "name", "uid"):
            if not ref.get(member):
                out.append(required(child(ref_path, member), "must not be empty"))
        if api_version == "v1" and ref.get("kind") == "Event":
            out.append(invalid(ref_path, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller"):
            current = f"{ref.get('kind') or ''}/{ref.get('name') or ''}"
            if controller:
                detail = (
                    'Only one reference can have Controller set to true. Found "true" in '
                    f"references for {controller} and {current}"
                )
                out.append(invalid(path, references, detail))
            else:
                controller = current


def _finalizers(path: str, finalizers: Iterable[Any], out: list[StatusCause]) -> None:
    names = [f or "" for f in finalizers]
    for name in names:
        for message in _label_key(name):
            out.append(invalid(path, name, message))
    if "orphan" in names and "foregroundDeletion" in names:
        out.append(
            invalid(path, names, "finalizer orphan and foregroundDeletion cannot be both set")
        )
