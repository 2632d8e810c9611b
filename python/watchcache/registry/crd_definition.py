"""CustomResourceDefinitions (``apiextensions.k8s.io/v1``): defaults, the registry
strategy, validation, and the naming controller's arithmetic, as kube-apiserver has them.

Design note
-----------
A CRD write goes through the same steps as in kube-apiserver, each a pure function over
the parsed JSON object, so the caller (the generic write path, the CRD controllers) keeps
the I/O and this module keeps Kubernetes' rules:

1. :func:`default_crd` is v1's ``SetObjectDefaults_CustomResourceDefinition``: the
   singular name is the kind in lower case, ``listKind`` is ``<kind>List``,
   ``conversion`` is ``{strategy: None}``, a webhook service's port is 443, and an empty
   ``status.storedVersions`` gets the storage version. Nothing else is defaulted
   (``scope`` has no default: a CRD without one is refused).
2. :func:`prepare_for_create`, :func:`prepare_for_update` and
   :func:`prepare_for_status_update` are the registry strategy's (``strategy.go``): a new
   CRD gets an empty status (Go's zero status: ``conditions: null``, ``acceptedNames``
   with empty ``plural`` and ``kind``) holding only its storage version in
   ``storedVersions``, and ``generation`` 1; an update keeps the stored status, bumps
   ``generation`` when the spec changed (Go's semantic equality: absent and empty lists
   are equal) and adds the new storage version to ``storedVersions``; a ``/status`` write
   keeps the stored spec (and, as Kubernetes does since issue 137681, the body's
   metadata). The feature-gated fields Kubernetes drops when a gate is off are kept: every
   gate involved is on by default.
3. :func:`validate_crd`, :func:`validate_crd_update` and
   :func:`validate_crd_status_update` are ``ValidateCustomResourceDefinition``,
   ``...Update`` and ``ValidateUpdateCustomResourceDefinitionStatus``: they return the
   causes of the 422 (``InvalidError.for_fields`` via :func:`invalid_error`), with
   Kubernetes' field paths, words and order.

Kubernetes validates the *internal* type, which the v1 object is converted to first; the
conversion moves what every version has alike (``schema``, ``subresources``,
``additionalPrinterColumns``, ``selectableFields``) to the top level of the spec. That is
why a one-version CRD's schema errors are reported at ``spec.validation.openAPIV3Schema``,
its columns at ``spec.additionalPrinterColumns[0].JSONPath`` (sic, upper case), and why a
bad first version name is reported twice (``spec.versions[0].name`` and ``spec.version``).
This module reads the object into that internal view (:class:`_Spec`, with the same
"alike" test) and validates the view, so paths come out as Kubernetes prints them. Values
in messages are printed as ``field.Error`` prints them: strings quoted with ``%q``,
pointers and named types as JSON, and whole internal structs (``spec.versions`` in "must
have exactly one version marked as storage version") as Go marshals the internal type,
with Go field names (``{"Name":"v1","Served":true,...}``); :func:`_render` does that.

The schema of each version is checked by :meth:`StructuralSchema.from_openapi` (with
``spec.versions[i].schema.openAPIV3Schema`` or, when shared, the top-level path, and the
status-subresource flag the version has); its causes are taken as they are.

Shapes: the object comes from a body no typed decoder has seen, so any member may have
the wrong JSON type. Where Kubernetes' decoder would refuse the body (a 400), these
functions report a ``FieldValueTypeInvalid`` cause at the member's v1 path (``Invalid
value: "yes": must be of type boolean``; a schema the decoder refuses gives Go's own text
at its ``openAPIV3Schema`` path) and go on with the member's zero value, as the other
checks then see it. Nothing here raises on any JSON value; the defaulting and strategy
functions leave alone what has the wrong shape.

The controllers: :func:`names_status` is the naming controller's
``calculateNamesAndConditions`` with its "nothing to do" shortcuts: given the names that
the CRDs of the group have accepted (:class:`NamesInUse`), it returns the status to write
(``acceptedNames``, conditions ``NamesAccepted`` and ``Established``) or None.
:func:`established_status` is the establishing controller's step (``Established: True``,
``InitialNamesAccepted``), and :func:`mark_for_deletion` what the CRD registry's DELETE
does first (finalizer ``customresourcecleanup.apiextensions.k8s.io``, ``Terminating``
condition). Conditions are set as ``SetCRDCondition`` sets them: the transition time
(``now``, passed in) changes only with the status.

Deliberate differences from kube-apiserver:

* ``conversion.strategy: Webhook`` is refused (``spec.conversion.strategy: Invalid value:
  "Webhook": ...not supported by this server``): this server never calls webhooks, and
  accepting a CRD whose versions it cannot convert would break every read of a non-storage
  version later. The webhook's client configuration is therefore not validated.
* Bad JSON shapes are causes of a 422, not a 400 (see above).
* Where Kubernetes relaxes a rule on update because the stored CRD already broke it
  (structural schemas, pruned defaults, set and map list types, CEL cost, webhook CA
  bundles), the rule is kept: ``registry.structural`` checks schemas as for a create. The
  relaxations that need no schema are modelled (a schema may stay missing in an update if
  one was missing before; more than 8 selectable fields may stay if they are unchanged;
  names may change until the CRD is established).
* Selectable fields are resolved against a version's schema only when that schema is
  valid; with an invalid schema only their presence is checked (Kubernetes resolves them
  against whatever ``NewStructural`` builds, and may repeat its error).
* ObjectMeta: only the name rules of a CRD are checked here (``metadata.name`` must be a
  DNS subdomain and ``<plural>.<group>``; ``generateName`` likewise); labels, annotations
  and the rest are the generic write path's. The API-approval annotation of the
  ``*.k8s.io`` and ``*.kubernetes.io`` groups is checked.
* CEL (``x-kubernetes-validations``) is checked statically only, and the
  ``error building validator`` check is not made (see ``registry.structural``); nor are
  the warnings (unknown formats, set lists of objects) Kubernetes sends with a write.
* The naming controller considers other CRDs only, like Kubernetes; a caller that also
  wants built-in resources of the group counted adds them to :class:`NamesInUse`.

Costs: reading the object and building its internal view is linear in its size; a
schema is compiled once per distinct schema. Pure functions; safe from any thread.
Callers: the CRD registry (write path) and the CRD controllers.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from watchcache.registry.crd_formats import is_request_uri
from watchcache.registry.field_errors import (
    INVALID,
    child,
    duplicate,
    forbidden,
    go_float_json,
    go_json,
    index,
    invalid,
    key,
    not_supported,
    required,
    too_many,
    type_invalid,
)
from watchcache.registry.structural import (
    SchemaDecodeError,
    StructuralSchema,
    StructuralSchemaError,
)
from watchcache.wire import gojson
from watchcache.wire.errors import InvalidError, StatusCause
from watchcache.wire.gostrconv import go_quote
from watchcache.wire.gotime import TimeParseError, parse_time

__all__ = [
    "API_APPROVED_ANNOTATION",
    "CLEANUP_FINALIZER",
    "GROUP",
    "KIND",
    "MAX_SELECTABLE_FIELDS",
    "NamesInUse",
    "default_crd",
    "established_status",
    "invalid_error",
    "is_condition_true",
    "mark_for_deletion",
    "names_status",
    "prepare_for_create",
    "prepare_for_status_update",
    "prepare_for_update",
    "set_condition",
    "storage_version",
    "validate_crd",
    "validate_crd_status_update",
    "validate_crd_update",
]

GROUP: Final = "apiextensions.k8s.io"
KIND: Final = "CustomResourceDefinition"
#: The annotation a CRD of a protected group (``*.k8s.io``, ``*.kubernetes.io``) needs.
API_APPROVED_ANNOTATION: Final = "api-approved.kubernetes.io"
#: The finalizer the CRD registry adds on DELETE; the cleanup controller removes it.
CLEANUP_FINALIZER: Final = "customresourcecleanup.apiextensions.k8s.io"
#: ``MaxSelectableFields``.
MAX_SELECTABLE_FIELDS: Final = 8

_NONE: Final = "None"
_WEBHOOK: Final = "Webhook"
_SCOPES: Final = ["Cluster", "Namespaced"]
_PRINTER_TYPES: Final = ("boolean", "date", "integer", "number", "string")
_PRINTER_FORMATS: Final = (
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
)
_WEBHOOK_UNSUPPORTED: Final = (
    'webhook conversion is not supported by this server; the strategy must be "None"'
)
_ROOT_STATUS: Final = "status"
_FLOAT64_MAX: Final = 1.7976931348623157e308
# Where a version's schema is in the v1 object (Go's decoding errors drop indices).
_V1_SCHEMA_PATH: Final = "spec.versions[0].schema.openAPIV3Schema"

# ---------------------------------------------------------------------------------------
# apimachinery's name validation (k8s.io/apimachinery/pkg/util/validation)

_DNS1035_LABEL_FMT: Final = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT: Final = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_DNS1035_LABEL_RE: Final = re.compile(_DNS1035_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE: Final = re.compile(_DNS1123_SUBDOMAIN_FMT)


def _byte_length(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def _dns1035_label(value: str) -> list[str]:
    errors = []
    if _byte_length(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _DNS1035_LABEL_RE.fullmatch(value):
        errors.append(
            _regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character",
                _DNS1035_LABEL_FMT,
                "my-name",
                "abc-123",
            )
        )
    return errors


def _dns1123_subdomain(value: str) -> list[str]:
    errors = []
    if _byte_length(value) > 253:
        errors.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errors.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric "
                "character",
                _DNS1123_SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return errors


def _go_lower(text: str) -> str:
    """``strings.ToLower`` (Python's ``lower`` differs only in a few special cases, such
    as U+0130, which make the name invalid either way)."""
    return text.lower()


# ---------------------------------------------------------------------------------------
# Causes that print their value as JSON (pointers, named string types, structs)


def _invalid_rendered(path: str, rendered: str, detail: str) -> StatusCause:
    return StatusCause(INVALID, f"Invalid value: {rendered}: {detail}", path)


def _invalid_json(path: str, value: Any, detail: str) -> StatusCause:
    return _invalid_rendered(path, go_json(value), detail)


# ---------------------------------------------------------------------------------------
# Reading the v1 object: shapes


class _Reader:
    """Reads members with Go's decoding rules, collecting a cause per wrong JSON type
    (the member then reads as Go's zero value). ``null`` is the zero value, as in Go."""

    def __init__(self) -> None:
        self.causes: list[StatusCause] = []

    def _wrong(self, value: Any, path: str, what: str) -> None:
        self.causes.append(type_invalid(path, _finite(value), f"must be of type {what}"))

    def obj(self, value: Any, path: str) -> Mapping[str, Any] | None:
        if value is None or isinstance(value, Mapping):
            return value
        self._wrong(value, path, "object")
        return None

    def string(self, value: Any, path: str) -> str:
        text = self.opt_string(value, path)
        return "" if text is None else text

    def opt_string(self, value: Any, path: str) -> str | None:
        if value is None or isinstance(value, str):
            return value
        self._wrong(value, path, "string")
        return None

    def boolean(self, value: Any, path: str) -> bool:
        flag = self.opt_boolean(value, path)
        return bool(flag)

    def opt_boolean(self, value: Any, path: str) -> bool | None:
        if value is None or isinstance(value, bool):
            return value
        self._wrong(value, path, "boolean")
        return None

    def integer(self, value: Any, path: str, bits: int) -> int:
        number = self.opt_integer(value, path, bits)
        return 0 if number is None else number

    def opt_integer(self, value: Any, path: str, bits: int) -> int | None:
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
                return value
            self.causes.append(type_invalid(path, value, f"must be a {bits}-bit integer"))
            return None
        self._wrong(value, path, "integer")
        return None

    def seq(self, value: Any, path: str) -> list[Any] | None:
        if value is None or isinstance(value, list):
            return value
        self._wrong(value, path, "array")
        return None

    def strings(self, value: Any, path: str) -> list[str] | None:
        items = self.seq(value, path)
        if items is None:
            return None
        return [self.string(item, index(path, i)) for i, item in enumerate(items)]

    def objects(self, value: Any, path: str) -> list[Mapping[str, Any]] | None:
        items = self.seq(value, path)
        if items is None:
            return None
        out: list[Mapping[str, Any]] = []
        for i, item in enumerate(items):
            member = self.obj(item, index(path, i))
            out.append({} if member is None else member)
        return out


def _finite(value: Any) -> Any:
    """``value`` with the numbers JSON cannot carry (a parsed ``1e400``) as null, so that
    it can be printed."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _FLOAT64_MAX:
        return None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _get(container: Mapping[str, Any] | None, name: str) -> Any:
    return None if container is None else container.get(name)


# ---------------------------------------------------------------------------------------
# The internal view (k8s.io/apiextensions-apiserver/pkg/apis/apiextensions)


@dataclass(slots=True)
class _Names:
    plural: str = ""
    singular: str = ""
    short_names: list[str] | None = None
    kind: str = ""
    list_kind: str = ""
    categories: list[str] | None = None

    def semantic(self) -> tuple[Any, ...]:
        return (
            self.plural,
            self.singular,
            tuple(self.short_names or ()),
            self.kind,
            self.list_kind,
            tuple(self.categories or ()),
        )


@dataclass(slots=True)
class _Scale:
    spec_replicas_path: str = ""
    status_replicas_path: str = ""
    label_selector_path: str | None = None


@dataclass(slots=True)
class _Subresources:
    status: bool = False
    scale: _Scale | None = None


@dataclass(slots=True)
class _Column:
    name: str = ""
    type: str = ""
    format: str = ""
    description: str = ""
    priority: int = 0
    json_path: str = ""


@dataclass(slots=True)
class _Validation:
    """``CustomResourceValidation``: the raw ``openAPIV3Schema`` (None when absent) and its
    Go model (for equality and printing)."""

    schema: Mapping[str, Any] | None
    go: Any
    compiled: StructuralSchema | None = None
    compile_causes: list[StatusCause] | None = None

    def semantic(self) -> Any:
        return _semantic(self.go)


@dataclass(slots=True)
class _Version:
    name: str = ""
    served: bool = False
    storage: bool = False
    deprecated: bool = False
    deprecation_warning: str | None = None
    schema: _Validation | None = None
    subresources: _Subresources | None = None
    columns: list[_Column] | None = None
    selectable: list[str] | None = None


@dataclass(slots=True)
class _Conversion:
    strategy: str = ""
    client_config: Any = None  # the Go model of webhook.clientConfig, None when absent
    review_versions: list[str] | None = None


@dataclass(slots=True)
class _Spec:
    group: str = ""
    version: str = ""
    names: _Names = field(default_factory=_Names)
    scope: str = ""
    validation: _Validation | None = None
    subresources: _Subresources | None = None
    versions: list[_Version] | None = None
    columns: list[_Column] | None = None
    selectable: list[str] | None = None
    conversion: _Conversion | None = None
    preserve_unknown_fields: bool = False


@dataclass(slots=True)
class _Condition:
    type: str = ""
    status: str = ""


@dataclass(slots=True)
class _Status:
    conditions: list[_Condition] | None = None
    accepted: _Names = field(default_factory=_Names)
    stored_versions: list[str] | None = None


@dataclass(slots=True)
class _CRD:
    name: str = ""
    generate_name: str = ""
    annotations: Mapping[str, Any] = field(default_factory=dict)
    spec: _Spec = field(default_factory=_Spec)
    status: _Status = field(default_factory=_Status)


def _read_names(r: _Reader, value: Any, path: str) -> _Names:
    raw = r.obj(value, path)
    return _Names(
        plural=r.string(_get(raw, "plural"), child(path, "plural")),
        singular=r.string(_get(raw, "singular"), child(path, "singular")),
        short_names=r.strings(_get(raw, "shortNames"), child(path, "shortNames")),
        kind=r.string(_get(raw, "kind"), child(path, "kind")),
        list_kind=r.string(_get(raw, "listKind"), child(path, "listKind")),
        categories=r.strings(_get(raw, "categories"), child(path, "categories")),
    )


def _read_subresources(r: _Reader, value: Any, path: str) -> _Subresources | None:
    raw = r.obj(value, path)
    if raw is None:
        return None
    status = r.obj(raw.get(_ROOT_STATUS), child(path, _ROOT_STATUS)) is not None
    scale_path = child(path, "scale")
    scale_raw = r.obj(raw.get("scale"), scale_path)
    scale = None
    if scale_raw is not None:
        scale = _Scale(
            spec_replicas_path=r.string(
                scale_raw.get("specReplicasPath"), child(scale_path, "specReplicasPath")
            ),
            status_replicas_path=r.string(
                scale_raw.get("statusReplicasPath"), child(scale_path, "statusReplicasPath")
            ),
            label_selector_path=r.opt_string(
                scale_raw.get("labelSelectorPath"), child(scale_path, "labelSelectorPath")
            ),
        )
    return _Subresources(status=status, scale=scale)


def _read_columns(r: _Reader, value: Any, path: str) -> list[_Column] | None:
    items = r.objects(value, path)
    if items is None:
        return None
    out = []
    for i, raw in enumerate(items):
        where = index(path, i)
        out.append(
            _Column(
                name=r.string(raw.get("name"), child(where, "name")),
                type=r.string(raw.get("type"), child(where, "type")),
                format=r.string(raw.get("format"), child(where, "format")),
                description=r.string(raw.get("description"), child(where, "description")),
                priority=r.integer(raw.get("priority"), child(where, "priority"), 32),
                json_path=r.string(raw.get("jsonPath"), child(where, "jsonPath")),
            )
        )
    return out


def _read_selectable(r: _Reader, value: Any, path: str) -> list[str] | None:
    items = r.objects(value, path)
    if items is None:
        return None
    return [
        r.string(raw.get("jsonPath"), child(index(path, i), "jsonPath"))
        for i, raw in enumerate(items)
    ]


def _read_validation(r: _Reader, value: Any, path: str) -> _Validation | None:
    raw = r.obj(value, path)
    if raw is None:
        return None
    schema = r.obj(raw.get("openAPIV3Schema"), child(path, "openAPIV3Schema"))
    return _Validation(schema, None if schema is None else _go_schema(schema))


def _read_version(r: _Reader, raw: Mapping[str, Any], path: str) -> _Version:
    return _Version(
        name=r.string(raw.get("name"), child(path, "name")),
        served=r.boolean(raw.get("served"), child(path, "served")),
        storage=r.boolean(raw.get("storage"), child(path, "storage")),
        deprecated=r.boolean(raw.get("deprecated"), child(path, "deprecated")),
        deprecation_warning=r.opt_string(
            raw.get("deprecationWarning"), child(path, "deprecationWarning")
        ),
        schema=_read_validation(r, raw.get("schema"), child(path, "schema")),
        subresources=_read_subresources(r, raw.get("subresources"), child(path, "subresources")),
        columns=_read_columns(
            r, raw.get("additionalPrinterColumns"), child(path, "additionalPrinterColumns")
        ),
        selectable=_read_selectable(
            r, raw.get("selectableFields"), child(path, "selectableFields")
        ),
    )


def _read_conversion(r: _Reader, value: Any, path: str) -> _Conversion | None:
    raw = r.obj(value, path)
    if raw is None:
        return None
    webhook_path = child(path, "webhook")
    webhook = r.obj(raw.get("webhook"), webhook_path)
    config_path = child(webhook_path, "clientConfig")
    config = r.obj(_get(webhook, "clientConfig"), config_path)
    return _Conversion(
        strategy=r.string(raw.get("strategy"), child(path, "strategy")),
        client_config=None if config is None else _go_client_config(r, config, config_path),
        review_versions=r.strings(
            _get(webhook, "conversionReviewVersions"),
            child(webhook_path, "conversionReviewVersions"),
        ),
    )


def _read_spec(r: _Reader, value: Any) -> _Spec:
    """The v1 spec, converted to the internal spec as Kubernetes converts it."""
    raw = r.obj(value, "spec")
    items = r.objects(_get(raw, "versions"), "spec.versions")
    versions = None
    if items is not None:
        versions = [
            _read_version(r, item, index("spec.versions", i)) for i, item in enumerate(items)
        ]
    spec = _Spec(
        group=r.string(_get(raw, "group"), "spec.group"),
        names=_read_names(r, _get(raw, "names"), "spec.names"),
        scope=r.string(_get(raw, "scope"), "spec.scope"),
        versions=versions,
        conversion=_read_conversion(r, _get(raw, "conversion"), "spec.conversion"),
        preserve_unknown_fields=r.boolean(
            _get(raw, "preserveUnknownFields"), "spec.preserveUnknownFields"
        ),
    )
    _hoist(spec)
    return spec


def _hoist(spec: _Spec) -> None:
    """``Convert_v1_CustomResourceDefinitionSpec_To_apiextensions_...``: what every version
    has alike moves to the top level, and ``version`` is the first version's name."""
    versions = spec.versions
    if not versions:
        return
    spec.version = versions[0].name
    first = versions[0]
    if all(_same_validation(v.schema, first.schema) for v in versions):
        spec.validation = first.schema
        for v in versions:
            v.schema = None
    if all(v.subresources == first.subresources for v in versions):
        spec.subresources = first.subresources
        for v in versions:
            v.subresources = None
    if all((v.columns or []) == (first.columns or []) for v in versions):
        spec.columns = first.columns
        for v in versions:
            v.columns = None
    if all((v.selectable or []) == (first.selectable or []) for v in versions):
        spec.selectable = first.selectable
        for v in versions:
            v.selectable = None


def _same_validation(a: _Validation | None, b: _Validation | None) -> bool:
    if a is None or b is None:
        return a is b
    return bool(a.semantic() == b.semantic())


def _read_status(r: _Reader, value: Any) -> _Status:
    raw = r.obj(value, "status")
    conditions = None
    items = r.objects(_get(raw, "conditions"), "status.conditions")
    if items is not None:
        conditions = []
        for i, item in enumerate(items):
            where = index("status.conditions", i)
            time_path = child(where, "lastTransitionTime")
            stamp = r.opt_string(item.get("lastTransitionTime"), time_path)
            if stamp is not None:
                try:
                    parse_time(stamp)
                except TimeParseError as error:
                    r.causes.append(type_invalid(time_path, stamp, str(error)))
            r.string(item.get("reason"), child(where, "reason"))
            r.string(item.get("message"), child(where, "message"))
            r.opt_integer(item.get("observedGeneration"), child(where, "observedGeneration"), 64)
            conditions.append(
                _Condition(
                    type=r.string(item.get("type"), child(where, "type")),
                    status=r.string(item.get("status"), child(where, "status")),
                )
            )
    r.opt_integer(_get(raw, "observedGeneration"), "status.observedGeneration", 64)
    return _Status(
        conditions=conditions,
        accepted=_read_names(r, _get(raw, "acceptedNames"), "status.acceptedNames"),
        stored_versions=r.strings(_get(raw, "storedVersions"), "status.storedVersions"),
    )


def _read_crd(obj: Any, r: _Reader) -> _CRD:
    whole = r.obj(obj, "<nil>")
    metadata = r.obj(_get(whole, "metadata"), "metadata")
    annotations = r.obj(_get(metadata, "annotations"), "metadata.annotations")
    return _CRD(
        name=r.string(_get(metadata, "name"), "metadata.name"),
        generate_name=r.string(_get(metadata, "generateName"), "metadata.generateName"),
        annotations=annotations or {},
        spec=_read_spec(r, _get(whole, "spec")),
        status=_read_status(r, _get(whole, "status")),
    )


def _view(obj: Any) -> _CRD:
    """The internal view without the shape causes (for the strategy and controllers)."""
    return _read_crd(obj, _Reader())


# ---------------------------------------------------------------------------------------
# Go values of the internal types: semantic equality and json.Marshal
#
# A struct is a _GoStruct of (Go field name, value) pairs in declaration order; a map is a
# _GoMap; a slice is a list (None when nil); a pointer is its target or None; an
# ``apiextensions.JSON`` (interface{}) is a _GoJSON holding the decoded JSON value.


class _GoStruct(tuple[tuple[str, Any], ...]):
    __slots__ = ()


class _GoMap(dict[str, Any]):
    __slots__ = ()


class _GoJSON:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _json_float(value: Any) -> Any:
    """A decoded JSON value as ``json.Unmarshal`` into ``interface{}`` holds it: every
    number a float64."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if isinstance(value, float):
        return value
    if isinstance(value, Mapping):
        return {str(k): _json_float(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_float(v) for v in value]
    return value


def _render_json(value: Any) -> str:
    if isinstance(value, float):
        return go_float_json(value) if math.isfinite(value) else "null"
    if isinstance(value, dict):
        members = (f"{gojson.dumps(k)}:{_render_json(value[k])}" for k in sorted(value))
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_render_json(v) for v in value) + "]"
    return go_json(value)


def _render(value: Any) -> str:
    """``json.Marshal`` of a Go value of the model above."""
    if isinstance(value, _GoStruct):
        return "{" + ",".join(f'"{name}":{_render(v)}' for name, v in value) + "}"
    if isinstance(value, _GoMap):
        return "{" + ",".join(f"{gojson.dumps(k)}:{_render(value[k])}" for k in sorted(value)) + "}"
    if isinstance(value, _GoJSON):
        return _render_json(_json_float(value.value))
    if isinstance(value, list):
        return "[" + ",".join(_render(v) for v in value) + "]"
    if isinstance(value, float):
        return go_float_json(value) if math.isfinite(value) else "null"
    return go_json(value)


def _json_key(value: Any) -> Any:
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, dict):
        return ("o", tuple(sorted((k, _json_key(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("a", tuple(_json_key(v) for v in value))
    return ("z",)


def _semantic(value: Any) -> Any:
    """A key equal for two values exactly when ``apiequality.Semantic.DeepEqual`` says
    they are equal (nil and empty slices and maps are equal)."""
    if isinstance(value, _GoStruct):
        return tuple((name, _semantic(v)) for name, v in value)
    if isinstance(value, _GoMap):
        return tuple(sorted((k, _semantic(v)) for k, v in value.items())) or None
    if isinstance(value, _GoJSON):
        return ("json", _json_key(_json_float(value.value)))
    if isinstance(value, list):
        return tuple(_semantic(v) for v in value) or None
    if isinstance(value, bool):
        return ("b", value)
    return value


# JSONSchemaProps (internal) fields in declaration order: Go name, JSON name, decoder.
_S_STR, _S_PSTR, _S_BOOL, _S_PBOOL, _S_PINT, _S_PFLOAT = range(6)
_S_PJSON, _S_JSONS, _S_STRS, _S_ITEMS, _S_SCHEMAS, _S_PSCHEMA = range(6, 12)
_S_MAP, _S_ORBOOL, _S_DEPS, _S_DOCS, _S_RULES = range(12, 17)
_SCHEMA_FIELDS: Final = (
    ("ID", "id", _S_STR),
    ("Schema", "$schema", _S_STR),
    ("Ref", "$ref", _S_PSTR),
    ("Description", "description", _S_STR),
    ("Type", "type", _S_STR),
    ("Nullable", "nullable", _S_BOOL),
    ("Format", "format", _S_STR),
    ("Title", "title", _S_STR),
    ("Default", "default", _S_PJSON),
    ("Maximum", "maximum", _S_PFLOAT),
    ("ExclusiveMaximum", "exclusiveMaximum", _S_BOOL),
    ("Minimum", "minimum", _S_PFLOAT),
    ("ExclusiveMinimum", "exclusiveMinimum", _S_BOOL),
    ("MaxLength", "maxLength", _S_PINT),
    ("MinLength", "minLength", _S_PINT),
    ("Pattern", "pattern", _S_STR),
    ("MaxItems", "maxItems", _S_PINT),
    ("MinItems", "minItems", _S_PINT),
    ("UniqueItems", "uniqueItems", _S_BOOL),
    ("MultipleOf", "multipleOf", _S_PFLOAT),
    ("Enum", "enum", _S_JSONS),
    ("MaxProperties", "maxProperties", _S_PINT),
    ("MinProperties", "minProperties", _S_PINT),
    ("Required", "required", _S_STRS),
    ("Items", "items", _S_ITEMS),
    ("AllOf", "allOf", _S_SCHEMAS),
    ("OneOf", "oneOf", _S_SCHEMAS),
    ("AnyOf", "anyOf", _S_SCHEMAS),
    ("Not", "not", _S_PSCHEMA),
    ("Properties", "properties", _S_MAP),
    ("AdditionalProperties", "additionalProperties", _S_ORBOOL),
    ("PatternProperties", "patternProperties", _S_MAP),
    ("Dependencies", "dependencies", _S_DEPS),
    ("AdditionalItems", "additionalItems", _S_ORBOOL),
    ("Definitions", "definitions", _S_MAP),
    ("ExternalDocs", "externalDocs", _S_DOCS),
    ("Example", "example", _S_PJSON),
    ("XPreserveUnknownFields", "x-kubernetes-preserve-unknown-fields", _S_PBOOL),
    ("XEmbeddedResource", "x-kubernetes-embedded-resource", _S_BOOL),
    ("XIntOrString", "x-kubernetes-int-or-string", _S_BOOL),
    ("XListMapKeys", "x-kubernetes-list-map-keys", _S_STRS),
    ("XListType", "x-kubernetes-list-type", _S_PSTR),
    ("XMapType", "x-kubernetes-map-type", _S_PSTR),
    ("XValidations", "x-kubernetes-validations", _S_RULES),
)
_RULE_FIELDS: Final = (
    ("Rule", "rule", _S_STR),
    ("Message", "message", _S_STR),
    ("MessageExpression", "messageExpression", _S_STR),
    ("Reason", "reason", _S_PSTR),
    ("FieldPath", "fieldPath", _S_STR),
    ("OptionalOldSelf", "optionalOldSelf", _S_PBOOL),
)
_MAX_SCHEMA_DEPTH: Final = 200


def _go_member(value: Any, kind: int, depth: int) -> Any:
    """One member of a schema as the internal Go value; a wrong JSON type reads as the
    zero value (``registry.structural`` reports it)."""
    if kind == _S_STR:
        return value if isinstance(value, str) else ""
    if kind == _S_PSTR:
        return value if isinstance(value, str) else None
    if kind == _S_BOOL:
        return value is True
    if kind == _S_PBOOL:
        return value if isinstance(value, bool) else None
    if kind == _S_PINT:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind == _S_PFLOAT:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return _json_float(value)
    if kind == _S_PJSON:
        return None if value is None else _GoJSON(value)
    if kind == _S_JSONS:
        return [_GoJSON(v) for v in value] if isinstance(value, list) else None
    if kind == _S_STRS:
        if not isinstance(value, list):
            return None
        return [v if isinstance(v, str) else "" for v in value]
    if kind == _S_ITEMS:
        if isinstance(value, Mapping):
            return _GoStruct((("Schema", _go_schema(value, depth)), ("JSONSchemas", None)))
        if isinstance(value, list):
            schemas = [_go_schema(v if isinstance(v, Mapping) else {}, depth) for v in value]
            return _GoStruct((("Schema", None), ("JSONSchemas", schemas)))
        return None
    if kind == _S_SCHEMAS:
        if not isinstance(value, list):
            return None
        return [_go_schema(v if isinstance(v, Mapping) else {}, depth) for v in value]
    if kind == _S_PSCHEMA:
        return _go_schema(value, depth) if isinstance(value, Mapping) else None
    if kind == _S_MAP:
        if not isinstance(value, Mapping):
            return None
        return _GoMap(
            {
                str(k): _go_schema(v if isinstance(v, Mapping) else {}, depth)
                for k, v in value.items()
            }
        )
    if kind == _S_ORBOOL:
        if isinstance(value, bool):
            return _GoStruct((("Allows", value), ("Schema", None)))
        if isinstance(value, Mapping):
            return _GoStruct((("Allows", True), ("Schema", _go_schema(value, depth))))
        return None
    if kind == _S_DEPS:
        if not isinstance(value, Mapping):
            return None
        deps = _GoMap()
        for k, v in value.items():
            if isinstance(v, list):
                names = [p if isinstance(p, str) else "" for p in v]
                deps[str(k)] = _GoStruct((("Schema", None), ("Property", names)))
            else:
                target = _go_schema(v, depth) if isinstance(v, Mapping) else None
                deps[str(k)] = _GoStruct((("Schema", target), ("Property", None)))
        return deps
    if kind == _S_DOCS:
        if not isinstance(value, Mapping):
            return None
        return _GoStruct(
            (
                ("Description", _go_member(value.get("description"), _S_STR, depth)),
                ("URL", _go_member(value.get("url"), _S_STR, depth)),
            )
        )
    # _S_RULES
    if not isinstance(value, list):
        return None
    return [
        _GoStruct(
            tuple(
                (go_name, _go_member(_get(rule, json_name), member, depth))
                for go_name, json_name, member in _RULE_FIELDS
            )
        )
        for rule in (v if isinstance(v, Mapping) else {} for v in value)
    ]


def _go_schema(raw: Mapping[str, Any], depth: int = 0) -> _GoStruct:
    """The internal ``JSONSchemaProps`` of a v1 schema."""
    if depth > _MAX_SCHEMA_DEPTH:
        return _GoStruct()
    return _GoStruct(
        (go_name, _go_member(raw.get(json_name), member, depth + 1))
        for go_name, json_name, member in _SCHEMA_FIELDS
    )


def _go_client_config(r: _Reader, raw: Mapping[str, Any], path: str) -> _GoStruct:
    service_path = child(path, "service")
    service = r.obj(raw.get("service"), service_path)
    service_value = None
    if service is not None:
        service_value = _GoStruct(
            (
                ("Namespace", r.string(service.get("namespace"), child(service_path, "namespace"))),
                ("Name", r.string(service.get("name"), child(service_path, "name"))),
                ("Path", r.opt_string(service.get("path"), child(service_path, "path"))),
                ("Port", r.integer(service.get("port"), child(service_path, "port"), 32)),
            )
        )
    return _GoStruct(
        (
            ("URL", r.opt_string(raw.get("url"), child(path, "url"))),
            ("Service", service_value),
            ("CABundle", r.opt_string(raw.get("caBundle"), child(path, "caBundle"))),
        )
    )


def _go_subresources(s: _Subresources | None) -> Any:
    if s is None:
        return None
    scale = None
    if s.scale is not None:
        scale = _GoStruct(
            (
                ("SpecReplicasPath", s.scale.spec_replicas_path),
                ("StatusReplicasPath", s.scale.status_replicas_path),
                ("LabelSelectorPath", s.scale.label_selector_path),
            )
        )
    return _GoStruct((("Status", _GoStruct() if s.status else None), ("Scale", scale)))


def _go_columns(columns: list[_Column] | None) -> Any:
    if columns is None:
        return None
    return [
        _GoStruct(
            (
                ("Name", c.name),
                ("Type", c.type),
                ("Format", c.format),
                ("Description", c.description),
                ("Priority", c.priority),
                ("JSONPath", c.json_path),
            )
        )
        for c in columns
    ]


def _go_selectable(paths: list[str] | None) -> Any:
    if paths is None:
        return None
    return [_GoStruct((("JSONPath", p),)) for p in paths]


def _go_validation(v: _Validation | None) -> Any:
    return None if v is None else _GoStruct((("OpenAPIV3Schema", v.go),))


def _go_version(v: _Version) -> _GoStruct:
    return _GoStruct(
        (
            ("Name", v.name),
            ("Served", v.served),
            ("Storage", v.storage),
            ("Deprecated", v.deprecated),
            ("DeprecationWarning", v.deprecation_warning),
            ("Schema", _go_validation(v.schema)),
            ("Subresources", _go_subresources(v.subresources)),
            ("AdditionalPrinterColumns", _go_columns(v.columns)),
            ("SelectableFields", _go_selectable(v.selectable)),
        )
    )


def _go_versions(versions: list[_Version] | None) -> Any:
    return None if versions is None else [_go_version(v) for v in versions]


def _go_names(n: _Names) -> _GoStruct:
    return _GoStruct(
        (
            ("Plural", n.plural),
            ("Singular", n.singular),
            ("ShortNames", n.short_names),
            ("Kind", n.kind),
            ("ListKind", n.list_kind),
            ("Categories", n.categories),
        )
    )


def _go_spec(s: _Spec) -> _GoStruct:
    conversion = None
    if s.conversion is not None:
        conversion = _GoStruct(
            (
                ("Strategy", s.conversion.strategy),
                ("WebhookClientConfig", s.conversion.client_config),
                ("ConversionReviewVersions", s.conversion.review_versions),
            )
        )
    return _GoStruct(
        (
            ("Group", s.group),
            ("Version", s.version),
            ("Names", _go_names(s.names)),
            ("Scope", s.scope),
            ("Validation", _go_validation(s.validation)),
            ("Subresources", _go_subresources(s.subresources)),
            ("Versions", _go_versions(s.versions)),
            ("AdditionalPrinterColumns", _go_columns(s.columns)),
            ("SelectableFields", _go_selectable(s.selectable)),
            ("Conversion", conversion),
            ("PreserveUnknownFields", s.preserve_unknown_fields),
        )
    )


# ---------------------------------------------------------------------------------------
# Defaults and the registry strategy


def _dict_at(container: Any, name: str) -> dict[str, Any] | None:
    if not isinstance(container, dict):
        return None
    value = container.get(name)
    return value if isinstance(value, dict) else None


def storage_version(crd: Mapping[str, Any]) -> str | None:
    """The name of the first version marked ``storage: true``, or None."""
    for version in _view(crd).spec.versions or ():
        if version.storage:
            return version.name
    return None


def default_crd(obj: dict[str, Any]) -> None:
    """v1 defaulting, in place (see the module note). Call it on every decoded body
    (create, update, patch result) before the strategy."""
    spec = _dict_at(obj, "spec")
    if spec is not None:
        names = _dict_at(spec, "names")
        if names is not None:
            kind = names.get("kind")
            kind = kind if isinstance(kind, str) else ""
            singular = names.get("singular")
            if (singular is None or singular == "") and kind:
                names["singular"] = _go_lower(kind)
            list_kind = names.get("listKind")
            if (list_kind is None or list_kind == "") and kind:
                names["listKind"] = kind + "List"
        if spec.get("conversion") is None:
            spec["conversion"] = {"strategy": _NONE}
        service = _dict_at(_dict_at(_dict_at(spec, "conversion"), "webhook"), "clientConfig")
        service = _dict_at(service, "service")
        if service is not None and service.get("port") is None:
            service["port"] = 443
    status = _dict_at(obj, "status")
    if not (status or {}).get("storedVersions"):
        name = storage_version(obj)
        if name is not None:
            if status is None:
                status = obj["status"] = {}
            status["storedVersions"] = [name]


def _zero_status() -> dict[str, Any]:
    """Go's marshalling of an empty ``CustomResourceDefinitionStatus``."""
    return {"conditions": None, "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": None}


def _add_storage_version(obj: dict[str, Any]) -> None:
    name = storage_version(obj)
    status = obj.get("status")
    if name is None or not isinstance(status, dict):
        return
    stored = status.get("storedVersions")
    if not isinstance(stored, list):
        stored = []
    if name not in stored:
        status["storedVersions"] = [*stored, name]


def prepare_for_create(obj: dict[str, Any]) -> None:
    """``PrepareForCreate``, in place: the status is emptied and holds the storage version
    only, ``metadata.generation`` is 1."""
    obj["status"] = _zero_status()
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata["generation"] = 1
    _add_storage_version(obj)


def prepare_for_update(obj: dict[str, Any], old: Mapping[str, Any]) -> None:
    """``PrepareForUpdate``, in place: the stored status is kept (plus a new storage
    version), ``metadata.generation`` is the stored one, plus one if the spec changed."""
    old_status = old.get("status")
    obj["status"] = copy.deepcopy(old_status) if isinstance(old_status, dict) else _zero_status()
    metadata = obj.get("metadata")
    old_metadata = old.get("metadata")
    if isinstance(metadata, dict):
        generation = old_metadata.get("generation") if isinstance(old_metadata, Mapping) else 0
        generation = generation if isinstance(generation, int) else 0
        if _semantic(_go_spec(_view(obj).spec)) != _semantic(_go_spec(_view(old).spec)):
            generation += 1
        metadata["generation"] = generation
    _add_storage_version(obj)


def prepare_for_status_update(obj: dict[str, Any], old: Mapping[str, Any]) -> None:
    """The status strategy's ``PrepareForUpdate``, in place: the stored spec is kept; the
    body's status and metadata are taken (Kubernetes does not reset the metadata)."""
    if "spec" in old:
        obj["spec"] = copy.deepcopy(old["spec"])
    else:
        obj.pop("spec", None)


# ---------------------------------------------------------------------------------------
# Validation


@dataclass(frozen=True, slots=True)
class _Options:
    """``validationOptions``: what an update relaxes because the stored CRD relied on it."""

    require_open_api_schema: bool = True
    require_immutable_names: bool = False
    # Versions (by name; "" for the top level) whose unchanged selectable fields may stay
    # more than MAX_SELECTABLE_FIELDS.
    too_many_selectable_allowed: frozenset[str] = frozenset()


def invalid_error(obj: Mapping[str, Any], causes: Iterable[StatusCause]) -> InvalidError:
    """The 422 for ``causes``: ``CustomResourceDefinition.apiextensions.k8s.io "<name>" is
    invalid: ...``."""
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return InvalidError.for_fields(KIND, GROUP, name if isinstance(name, str) else "", list(causes))


def validate_crd(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateCustomResourceDefinition`` of a new CRD, after :func:`default_crd` and
    :func:`prepare_for_create`. Empty when the CRD may be stored."""
    r = _Reader()
    crd = _read_crd(obj, r)
    causes = list(r.causes)
    causes += _validate_name(crd)
    causes += _validate_spec(crd.spec, _Options())
    causes += _validate_names(crd.status.accepted, "status.acceptedNames")
    causes += _validate_stored_versions(crd.status.stored_versions, crd.spec.versions)
    causes += _validate_api_approval(crd, None)
    causes += _validate_preserve_unknown_fields(crd, None)
    return causes


def validate_crd_update(obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateCustomResourceDefinitionUpdate``: ``obj`` after :func:`default_crd` and
    :func:`prepare_for_update` over the stored ``old``. Metadata rules of an update are the
    generic write path's."""
    r = _Reader()
    crd = _read_crd(obj, r)
    before = _view(old)
    causes = list(r.causes)
    options = _Options(
        require_open_api_schema=_all_versions_have_schema(before.spec),
        require_immutable_names=_condition_true(before.status, "Established"),
        too_many_selectable_allowed=_too_many_selectable_allowed(crd.spec, before.spec),
    )
    causes += _validate_spec(crd.spec, options)
    if options.require_immutable_names:
        causes += _immutable_json("spec.scope", crd.spec.scope, before.spec.scope)
        causes += _immutable("spec.names.kind", crd.spec.names.kind, before.spec.names.kind)
    causes += _immutable("spec.group", crd.spec.group, before.spec.group)
    causes += _immutable("spec.names.plural", crd.spec.names.plural, before.spec.names.plural)
    causes += _validate_names(crd.status.accepted, "status.acceptedNames")
    causes += _validate_stored_versions(crd.status.stored_versions, crd.spec.versions)
    causes += _validate_api_approval(crd, before)
    causes += _validate_preserve_unknown_fields(crd, before)
    return causes


def validate_crd_status_update(obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateUpdateCustomResourceDefinitionStatus``: only ``status.acceptedNames`` is
    checked (``storedVersions`` is free here: storage migration removes versions from it
    through ``/status``)."""
    del old  # the metadata rules of an update are the generic write path's
    r = _Reader()
    crd = _read_crd(obj, r)
    return [*r.causes, *_validate_names(crd.status.accepted, "status.acceptedNames")]


def _immutable(path: str, new: str, old: str) -> list[StatusCause]:
    return [] if new == old else [invalid(path, new, "field is immutable")]


def _immutable_json(path: str, new: str, old: str) -> list[StatusCause]:
    # A named string type (ResourceScope) is printed by json.Marshal, not %q.
    return [] if new == old else [_invalid_json(path, new, "field is immutable")]


def _validate_name(crd: _CRD) -> list[StatusCause]:
    """ObjectMeta's name rules with the CRD's name function."""
    required_name = f"{crd.spec.names.plural}.{crd.spec.group}"

    def messages(name: str, prefix: bool) -> list[str]:
        checked = name
        if prefix and len(name) > 1 and name.endswith("-"):
            checked = name[:-2] + "a"  # maskTrailingDash
        out = _dns1123_subdomain(checked)
        if name != required_name:
            out.append('must be spec.names.plural+"."+spec.group')
        return out

    causes = []
    if crd.generate_name:
        causes += [
            invalid("metadata.generateName", crd.generate_name, m)
            for m in messages(crd.generate_name, True)
        ]
    if not crd.name:
        causes.append(required("metadata.name", "name or generateName is required"))
    else:
        causes += [invalid("metadata.name", crd.name, m) for m in messages(crd.name, False)]
    return causes


def _validate_names(names: _Names, path: str) -> list[StatusCause]:
    """``ValidateCustomResourceDefinitionNames``."""
    causes = []
    if names.plural and (errors := _dns1035_label(names.plural)):
        causes.append(invalid(child(path, "plural"), names.plural, ",".join(errors)))
    if names.singular and (errors := _dns1035_label(names.singular)):
        causes.append(invalid(child(path, "singular"), names.singular, ",".join(errors)))
    mixed = "may have mixed case, but should otherwise match: "
    if names.kind and (errors := _dns1035_label(_go_lower(names.kind))):
        causes.append(invalid(child(path, "kind"), names.kind, mixed + ",".join(errors)))
    if names.list_kind and (errors := _dns1035_label(_go_lower(names.list_kind))):
        causes.append(invalid(child(path, "listKind"), names.list_kind, mixed + ",".join(errors)))
    for i, short in enumerate(names.short_names or ()):
        if errors := _dns1035_label(short):
            causes.append(invalid(index(child(path, "shortNames"), i), short, ",".join(errors)))
    if names.kind and names.kind == names.list_kind:
        causes.append(
            invalid(
                child(path, "listKind"), names.list_kind, "kind and listKind may not be the same"
            )
        )
    for i, category in enumerate(names.categories or ()):
        if errors := _dns1035_label(category):
            causes.append(invalid(index(child(path, "categories"), i), category, ",".join(errors)))
    return causes


def _validate_spec(spec: _Spec, opts: _Options) -> list[StatusCause]:
    """``validateCustomResourceDefinitionSpec`` of the internal view."""
    causes: list[StatusCause] = []
    if not spec.group:
        causes.append(required("spec.group"))
    elif errors := _dns1123_subdomain(spec.group):
        causes.append(invalid("spec.group", spec.group, ",".join(errors)))
    elif "." not in spec.group:
        causes.append(invalid("spec.group", spec.group, "should be a domain with at least one dot"))
    causes += _validate_enum("spec.scope", spec.scope, _SCOPES)

    versions = spec.versions or []
    top_schema = spec.validation is not None and spec.validation.schema is not None
    if opts.require_open_api_schema:
        if not top_schema:
            for i, v in enumerate(versions):
                if v.schema is None or v.schema.schema is None:
                    causes.append(required(f"spec.versions[{i}].schema.openAPIV3Schema"))
    elif not spec.preserve_unknown_fields and not top_schema:
        for i, v in enumerate(versions):
            if v.served and (v.schema is None or v.schema.schema is None):
                causes.append(
                    required(
                        f"spec.versions[{i}].schema.openAPIV3Schema",
                        "because otherwise all fields are pruned",
                    )
                )
    if spec.preserve_unknown_fields and _spec_has_defaults(spec):
        causes.append(
            invalid(
                "spec.preserveUnknownFields",
                True,
                "must be false in order to use defaults in the schema",
            )
        )

    storage_count = 0
    seen: set[str] = set()
    unique = True
    for i, v in enumerate(versions):
        path = index("spec.versions", i)
        storage_count += v.storage
        if v.name in seen:
            unique = False
        seen.add(v.name)
        if errors := _dns1035_label(v.name):
            causes.append(invalid(child(path, "name"), v.name, ",".join(errors)))
        status_enabled = _has_status(_subresources_for_version(spec, v.name))
        causes += _validate_version(v, path, status_enabled, opts)
    if not unique:
        causes.append(
            _invalid_rendered(
                "spec.versions",
                _render(_go_versions(spec.versions)),
                "must contain unique version names",
            )
        )
    if storage_count != 1:
        causes.append(
            _invalid_rendered(
                "spec.versions",
                _render(_go_versions(spec.versions)),
                "must have exactly one version marked as storage version",
            )
        )
    if spec.version:
        if errors := _dns1035_label(spec.version):
            causes.append(invalid("spec.version", spec.version, ",".join(errors)))
        if versions and versions[0].name != spec.version:
            causes.append(
                invalid(
                    "spec.version", spec.version, "must match the first version in spec.versions"
                )
            )

    for name, value in (
        ("plural", spec.names.plural),
        ("singular", spec.names.singular),
        ("kind", spec.names.kind),
        ("listKind", spec.names.list_kind),
    ):
        if not value:
            causes.append(required(f"spec.names.{name}"))
    causes += _validate_names(spec.names, "spec.names")
    causes += _validate_schema(spec.validation, _has_any_status(spec), "spec.validation")
    causes += _validate_subresources(spec.subresources, "spec.subresources")
    for i, column in enumerate(spec.columns or ()):
        causes += _validate_column(column, index("spec.additionalPrinterColumns", i))
    if spec.selectable:
        if spec.validation is None:
            causes.append(
                invalid(
                    "spec.selectableFields",
                    "",
                    "may only be set when validations.schema is included",
                )
            )
        else:
            causes += _validate_selectable(
                spec.selectable,
                spec.validation,
                "spec.selectableFields",
                "" in opts.too_many_selectable_allowed,
            )
    conversion = spec.conversion
    if conversion is not None and conversion.strategy != _NONE and spec.preserve_unknown_fields:
        causes.append(
            _invalid_json(
                "spec.conversion.strategy",
                conversion.strategy,
                "must be None if spec.preserveUnknownFields is true",
            )
        )
    causes += _validate_conversion(conversion)
    return causes


def _validate_enum(path: str, value: str, accepted: list[str]) -> list[StatusCause]:
    if not value:
        return [required(path)]
    return [] if value in accepted else [not_supported(path, value, accepted)]


def _validate_version(
    v: _Version, path: str, status_enabled: bool, opts: _Options
) -> list[StatusCause]:
    """``validateCustomResourceDefinitionVersion``."""
    causes = [
        _invalid_json(child(path, "deprecationWarning"), v.deprecation_warning, message)
        for message in _deprecation_warning_errors(v.deprecated, v.deprecation_warning)
    ]
    causes += _validate_schema(v.schema, status_enabled, child(path, "schema"))
    causes += _validate_subresources(v.subresources, child(path, "subresources"))
    for i, column in enumerate(v.columns or ()):
        causes += _validate_column(column, index(child(path, "additionalPrinterColumns"), i))
    if v.selectable:
        if v.schema is None or v.schema.schema is None:
            causes.append(
                invalid(
                    child(path, "selectableFields"),
                    "",
                    "may only be set when `version.schema.openAPIV3Schema` is not included",
                )
            )
        else:
            causes += _validate_selectable(
                v.selectable,
                v.schema,
                child(path, "selectableFields"),
                v.name in opts.too_many_selectable_allowed,
            )
    return causes


def _deprecation_warning_errors(deprecated: bool, warning: str | None) -> list[str]:
    if not deprecated and warning is not None:
        return ["can only be set for deprecated versions"]
    if warning is None:
        return []
    errors = []
    if _byte_length(warning) > 256:
        errors.append("must be <= 256 characters long")
    if not warning:
        errors.append("must not be an empty string")
    offset = 0
    for char in warning:
        if not char.isprintable():
            errors.append(
                "must only contain printable UTF-8 characters; non-printable character found "
                f"at index {offset}"
            )
            break
        offset += _byte_length(char)
    return errors


def _validate_schema(
    validation: _Validation | None, status_enabled: bool, path: str
) -> list[StatusCause]:
    """``validateCustomResourceDefinitionValidation``: the schema's own rules, through
    ``registry.structural``; the compiled schema is kept for the selectable fields."""
    if validation is None or validation.schema is None:
        return []
    schema_path = child(path, "openAPIV3Schema")
    causes: list[StatusCause] = []
    try:
        validation.compiled = StructuralSchema.from_openapi(
            validation.schema, field_path=schema_path, status_subresource=status_enabled
        )
    except SchemaDecodeError as error:
        causes.append(type_invalid(schema_path, "", _decode_error_text(validation, error)))
    except StructuralSchemaError as error:
        causes.extend(error.causes)
    return causes


def _decode_error_text(validation: _Validation, error: SchemaDecodeError) -> str:
    """Go's decoding error names the member in the v1 object (``spec.versions.schema...``),
    also for a schema the internal view moved to the top level."""
    try:
        StructuralSchema.from_openapi(validation.schema or {}, field_path=_V1_SCHEMA_PATH)
    except SchemaDecodeError as again:
        return str(again)
    except StructuralSchemaError:
        pass
    return str(error)


def _validate_subresources(s: _Subresources | None, path: str) -> list[StatusCause]:
    """``ValidateCustomResourceDefinitionSubresources``: the scale paths."""
    if s is None or s.scale is None:
        return []
    scale = s.scale
    causes = []
    for name, value, under in (
        ("specReplicasPath", scale.spec_replicas_path, ".spec"),
        ("statusReplicasPath", scale.status_replicas_path, ".status"),
    ):
        where = child(path, f"scale.{name}")
        if not value:
            causes.append(required(where))
        elif errors := _simple_json_path_errors(value, where):
            causes += errors
        elif not value.startswith(under + "."):
            causes.append(invalid(where, value, f"should be a json path under {under}"))
    selector = scale.label_selector_path
    if selector:
        where = child(path, "scale.labelSelectorPath")
        if errors := _simple_json_path_errors(selector, where):
            causes += errors
        elif not selector.startswith((".spec.", ".status.")):
            causes.append(
                _invalid_json(
                    where, selector, "should be a json path under either .spec or .status"
                )
            )
    return causes


def _simple_json_path_errors(text: str, path: str) -> list[StatusCause]:
    """``validateSimpleJSONPath``."""
    if not text:
        return [invalid(path, text, "must not be empty")]
    if not text.startswith("."):
        return [invalid(path, text, "must be a simple json path starting with .")]
    return []


def _validate_column(column: _Column, path: str) -> list[StatusCause]:
    """``ValidateCustomResourceColumnDefinition``."""
    causes = []
    if not column.name:
        causes.append(required(child(path, "name")))
    types = "must be one of " + ",".join(_PRINTER_TYPES)
    if not column.type:
        causes.append(required(child(path, "type"), types))
    elif column.type not in _PRINTER_TYPES:
        causes.append(invalid(child(path, "type"), column.type, types))
    if column.format and column.format not in _PRINTER_FORMATS:
        causes.append(
            invalid(
                child(path, "format"), column.format, "must be one of " + ",".join(_PRINTER_FORMATS)
            )
        )
    json_path = child(path, "JSONPath")
    if not column.json_path:
        causes.append(required(json_path))
    else:
        causes += _simple_json_path_errors(column.json_path, json_path)
    return causes


def _validate_selectable(
    paths: list[str], validation: _Validation, path: str, too_many_allowed: bool
) -> list[StatusCause]:
    """``ValidateCustomResourceSelectableFields``, against the compiled schema (only the
    presence of each path is checked when the schema did not compile)."""
    causes = []
    root = validation.compiled
    unique: set[str] = set()
    for i, json_path in enumerate(paths):
        where = child(index(path, i), "jsonPath")
        if not json_path:
            causes.append(required(where))
            continue
        if root is None:
            continue
        resolved = _resolve_field_path(json_path, root)
        if isinstance(resolved, str):
            causes.append(invalid(where, json_path, f"is an invalid path: {resolved}"))
            continue
        text, first, node = resolved
        if first == "metadata":
            causes.append(invalid(where, json_path, "must not point to fields in metadata"))
        if node is None or node.type not in ("string", "boolean", "integer"):
            causes.append(
                invalid(
                    where,
                    json_path,
                    "must point to a field of type string, boolean or integer. Enum string "
                    "fields and strings with formats are allowed.",
                )
            )
        if text in unique:
            causes.append(duplicate(where, json_path))
        else:
            unique.add(text)
    if len(unique) > MAX_SELECTABLE_FIELDS and not too_many_allowed:
        causes.append(too_many(path, len(unique), MAX_SELECTABLE_FIELDS))
    return causes


def _scan_field_path(text: str) -> list[str]:
    """The tokens of ``cel.ValidFieldPath``'s scanner: ``.``, ``[``, ``]``, a single-quoted
    string (delimiters inside it kept), or the text up to the next delimiter."""
    tokens = []
    i = 0
    while i < len(text):
        if text[i] == "'":
            end = i + 1
            while end < len(text) and not (text[end] == "'" and text[end - 1] != "\\"):
                end += 1
            tokens.append(text[i : end + 1])
            i = end + 1
        elif text[i] in ".[]":
            tokens.append(text[i])
            i += 1
        else:
            end = i
            while end < len(text) and text[end] not in ".[]":
                end += 1
            tokens.append(text[i:end])
            i = end
    return tokens


def _resolve_field_path(
    text: str, root: StructuralSchema
) -> str | tuple[str, str, StructuralSchema | None]:
    """``cel.ValidFieldPath`` without array notation: the error's text, or the path as
    ``field.Path`` prints it, its first element and the schema it reaches."""
    node: StructuralSchema | None = root
    printed = ""
    first = ""
    tokens = iter(_scan_field_path(text))
    for token in tokens:
        if token == "[":
            return "array notation is not allowed"
        if token != ".":
            return f"expected [ or . but got: {token}"
        name = next(tokens, None)
        if name is None:
            return "unexpected end of JSON path"
        if node is None:
            return "does not refer to a valid field"
        if node.properties:
            target = node.properties.get(name)
            if target is None:
                return "does not refer to a valid field"
            node = target
            printed = f"{printed}.{name}" if printed else name
        elif node.additional_given:
            node = node.additional
            printed = f"{printed}[{name}]"
        else:
            return "does not refer to a valid field"
        first = first or name
    return printed, first, node


def _validate_conversion(conversion: _Conversion | None) -> list[StatusCause]:
    """``validateCustomResourceConversion``, refusing webhooks (see the module note)."""
    if conversion is None:
        return []
    causes = _validate_enum("spec.conversion.strategy", conversion.strategy, [_NONE, _WEBHOOK])
    if conversion.strategy == _WEBHOOK:
        causes.append(invalid("spec.conversion.strategy", _WEBHOOK, _WEBHOOK_UNSUPPORTED))
        return causes
    detail = "should not be set when strategy is not set to Webhook"
    if conversion.client_config is not None:
        causes.append(forbidden("spec.conversion.webhookClientConfig", detail))
    if conversion.review_versions:
        causes.append(forbidden("spec.conversion.conversionReviewVersions", detail))
    return causes


def _validate_stored_versions(
    stored: list[str] | None, versions: list[_Version] | None
) -> list[StatusCause]:
    """``ValidateCustomResourceDefinitionStoredVersions``."""
    path = "status.storedVersions"
    if not stored:
        return [invalid(path, stored, "must have at least one stored version")]
    positions = {name: i for i, name in enumerate(stored)}
    causes = []
    for v in versions or ():
        present = v.name in positions
        if v.storage and not present:
            causes.append(invalid(path, stored, "must have the storage version " + v.name))
        if present:
            del positions[v.name]
    for name, i in sorted(positions.items(), key=lambda item: item[1]):
        causes.append(
            invalid(
                index(path, i),
                name,
                f"missing from spec.versions; {name} was previously a storage version, and "
                f"must remain in spec.versions until a storage migration ensures no data "
                f"remains persisted in {name} and removes {name} from status.storedVersions",
            )
        )
    return causes


# APIApprovalState
_APPROVAL_INVALID, _APPROVED, _APPROVAL_BYPASSED, _APPROVAL_MISSING = range(4)


def _is_protected_group(group: str) -> bool:
    return any(
        group == domain or group.endswith("." + domain) for domain in ("k8s.io", "kubernetes.io")
    )


def _has_scheme_and_host(text: str) -> bool:
    """Go's ``url.ParseRequestURI`` gives a URL with a scheme and a host."""
    if not is_request_uri(text):
        return False
    scheme, colon, rest = text.partition(":")
    if not colon or not scheme or not scheme[0].isascii() or not scheme[0].isalpha():
        return False
    if not all(c.isascii() and (c.isalnum() or c in "+-.") for c in scheme):
        return False
    if not rest.startswith("//"):
        return False
    authority = rest[2:].split("/", 1)[0].split("?", 1)[0]
    return bool(authority.rpartition("@")[2])


def _approval_state(annotations: Mapping[str, Any]) -> tuple[int, str]:
    """``GetAPIApprovalState``."""
    value = annotations.get(API_APPROVED_ANNOTATION)
    value = value if isinstance(value, str) else ""
    name = go_quote(API_APPROVED_ANNOTATION)
    if not value:
        return (
            _APPROVAL_MISSING,
            f"protected groups must have approval annotation {name}, see "
            "https://github.com/kubernetes/enhancements/pull/1111",
        )
    if value.startswith("unapproved"):
        return _APPROVAL_BYPASSED, f"not approved: {go_quote(value)}"
    if _has_scheme_and_host(value):
        return _APPROVED, f"approved in {value}"
    return (
        _APPROVAL_INVALID,
        f"protected groups must have approval annotation {name} with either a URL or a "
        'reason starting with "unapproved", see https://github.com/kubernetes/enhancements/pull/1111',
    )


def _validate_api_approval(crd: _CRD, old: _CRD | None) -> list[StatusCause]:
    """``validateAPIApproval``."""
    if not _is_protected_group(crd.spec.group):
        return []
    state, reason = _approval_state(crd.annotations)
    if old is not None and _approval_state(old.annotations)[0] == state:
        return []
    path = key("metadata.annotations", API_APPROVED_ANNOTATION)
    if state == _APPROVAL_MISSING:
        return [required(path, reason)]
    if state in (_APPROVED, _APPROVAL_BYPASSED):
        return []
    value = crd.annotations.get(API_APPROVED_ANNOTATION)
    return [invalid(path, value if isinstance(value, str) else "", reason)]


def _validate_preserve_unknown_fields(crd: _CRD, old: _CRD | None) -> list[StatusCause]:
    if old is not None and old.spec.preserve_unknown_fields:
        return []
    if not crd.spec.preserve_unknown_fields:
        return []
    return [
        invalid(
            "spec.preserveUnknownFields",
            True,
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in "
            "spec.versions[*].schema instead",
        )
    ]


# -- helpers of the spec rules ------------------------------------------------------------


def _has_status(s: _Subresources | None) -> bool:
    return s is not None and s.status


def _has_any_status(spec: _Spec) -> bool:
    return _has_status(spec.subresources) or any(
        _has_status(v.subresources) for v in spec.versions or ()
    )


def _subresources_for_version(spec: _Spec, name: str) -> _Subresources | None:
    versions = spec.versions or []
    if not any(v.subresources is not None for v in versions):
        return spec.subresources
    for v in versions:
        if v.name == name:
            return v.subresources
    return None


def _schemas(spec: _Spec) -> list[Mapping[str, Any]]:
    out = []
    if spec.validation is not None and spec.validation.schema is not None:
        out.append(spec.validation.schema)
    for v in spec.versions or ():
        if v.schema is not None and v.schema.schema is not None:
            out.append(v.schema.schema)
    return out


def _schema_has(raw: Any, test: Callable[[Mapping[str, Any]], bool], depth: int = 0) -> bool:
    """``SchemaHas`` over a v1 schema as sent."""
    if not isinstance(raw, Mapping) or depth > _MAX_SCHEMA_DEPTH:
        return False
    if test(raw):
        return True
    nested: list[Any] = []
    for name in ("items", "not", "additionalProperties", "additionalItems"):
        value = raw.get(name)
        nested.extend(value if isinstance(value, list) else [value])
    for name in ("allOf", "anyOf", "oneOf"):
        value = raw.get(name)
        if isinstance(value, list):
            nested.extend(value)
    for name in ("properties", "patternProperties", "definitions", "dependencies"):
        value = raw.get(name)
        if isinstance(value, Mapping):
            nested.extend(value.values())
    return any(_schema_has(sub, test, depth + 1) for sub in nested)


def _spec_has_defaults(spec: _Spec) -> bool:
    return any(_schema_has(s, lambda node: node.get("default") is not None) for s in _schemas(spec))


def _all_versions_have_schema(spec: _Spec) -> bool:
    """``allVersionsSpecifyOpenAPISchema`` of the stored spec."""
    if spec.validation is not None and spec.validation.schema is not None:
        return True
    return all(v.schema is not None and v.schema.schema is not None for v in spec.versions or ())


def _too_many_selectable_allowed(new: _Spec, old: _Spec) -> frozenset[str]:
    """``findTooManySelectableFieldsAllowed``."""

    def same(a: list[str] | None, b: list[str] | None) -> bool:
        return (a or []) == (b or [])

    allowed = set()
    if len(old.selectable or ()) > MAX_SELECTABLE_FIELDS and same(new.selectable, old.selectable):
        allowed.add("")
    old_versions = {v.name: v for v in old.versions or ()}
    for v in new.versions or ():
        before = old_versions.get(v.name)
        if (
            before is not None
            and len(before.selectable or ()) > MAX_SELECTABLE_FIELDS
            and same(v.selectable, before.selectable)
        ):
            allowed.add(v.name)
    return frozenset(allowed)


def _condition_true(status: _Status, condition_type: str) -> bool:
    for condition in status.conditions or ():
        if condition.type == condition_type:
            return condition.status == "True"
    return False


def is_condition_true(crd: Mapping[str, Any], condition_type: str) -> bool:
    """``IsCRDConditionTrue``: the first condition of that type has status ``True``."""
    return _condition_true(_view(crd).status, condition_type)


# ---------------------------------------------------------------------------------------
# The naming and establishing controllers


@dataclass(frozen=True, slots=True)
class NamesInUse:
    """The names claimed in one API group: ``resources`` (plurals, singulars and short
    names) and ``kinds`` (kinds and list kinds)."""

    resources: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()

    @classmethod
    def of_group(cls, crds: Iterable[Mapping[str, Any]], group: str) -> NamesInUse:
        """The names accepted (``status.acceptedNames``) by the CRDs of ``group``: pass every
        CRD, the one being named included, as the naming controller counts them."""
        resources: set[str] = set()
        kinds: set[str] = set()
        for crd in crds:
            view = _view(crd)
            if view.spec.group != group:
                continue
            accepted = view.status.accepted
            resources.update((accepted.plural, accepted.singular, *(accepted.short_names or ())))
            kinds.update((accepted.kind, accepted.list_kind))
        return cls(frozenset(resources), frozenset(kinds))

    def __or__(self, other: NamesInUse) -> NamesInUse:
        return NamesInUse(self.resources | other.resources, self.kinds | other.kinds)


def _names_json(names: _Names) -> dict[str, Any]:
    """``CustomResourceDefinitionNames`` as Go marshals it (omitempty members dropped)."""
    out: dict[str, Any] = {"plural": names.plural}
    if names.singular:
        out["singular"] = names.singular
    if names.short_names:
        out["shortNames"] = list(names.short_names)
    out["kind"] = names.kind
    if names.list_kind:
        out["listKind"] = names.list_kind
    if names.categories:
        out["categories"] = list(names.categories)
    return out


def _conflict(requested: str, accepted: str, used: frozenset[str]) -> str | None:
    """``equalToAcceptedOrFresh``: the error text, or None."""
    if requested == accepted or requested not in used:
        return None
    return f"{go_quote(requested)} is already in use"


def _aggregate(messages: list[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()``."""
    if len(messages) == 1:
        return messages[0]
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _find_condition(status: dict[str, Any], condition_type: str) -> dict[str, Any] | None:
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, dict) and condition.get("type") == condition_type:
            return condition
    return None


def set_condition(status: dict[str, Any], new: dict[str, str], now: str) -> None:
    """``SetCRDCondition``: replace or append; the transition time moves with the status."""
    existing = _find_condition(status, new["type"])
    if existing is None:
        condition: dict[str, Any] = {
            "type": new["type"],
            "status": new["status"],
            "lastTransitionTime": now,
        }
        for name in ("reason", "message"):
            if new.get(name):
                condition[name] = new[name]
        conditions = status.get("conditions")
        conditions = (
            [c for c in conditions if c is not None] if isinstance(conditions, list) else []
        )
        status["conditions"] = [*conditions, condition]
        return
    if existing.get("status") != new["status"] or not existing.get("lastTransitionTime"):
        existing["lastTransitionTime"] = now
    existing["status"] = new["status"]
    for name in ("reason", "message"):
        if new.get(name):
            existing[name] = new[name]
        else:
            existing.pop(name, None)


def names_status(crd: Mapping[str, Any], taken: NamesInUse, *, now: str) -> dict[str, Any] | None:
    """The naming controller's sync of one CRD: the status to write through ``/status``
    (a copy of the CRD's with ``acceptedNames`` and the ``NamesAccepted`` and
    ``Established`` conditions set), or None when there is nothing to write. ``taken``:
    :meth:`NamesInUse.of_group` of the CRD's group; ``now``: RFC 3339 text for
    ``lastTransitionTime``. After a write, requeue the other CRDs of the group (a name may
    have been freed)."""
    view = _view(crd)
    requested = view.spec.names
    accepted = view.status.accepted
    if requested.semantic() == accepted.semantic():
        return None
    names = copy.deepcopy(accepted)
    condition = {"type": "NamesAccepted", "status": "Unknown"}

    def conflict(reason: str, message: str) -> None:
        condition.update(status="False", reason=reason, message=message)

    if error := _conflict(requested.plural, accepted.plural, taken.resources):
        conflict("PluralConflict", error)
    else:
        names.plural = requested.plural
    if error := _conflict(requested.singular, accepted.singular, taken.resources):
        conflict("SingularConflict", error)
    else:
        names.singular = requested.singular
    if requested.short_names != accepted.short_names:
        mine = set(accepted.short_names or ())
        errors = [
            error
            for short in requested.short_names or ()
            if short not in mine and (error := _conflict(short, "", taken.resources))
        ]
        if errors:
            conflict("ShortNamesConflict", _aggregate(errors))
        else:
            names.short_names = requested.short_names
    if error := _conflict(requested.kind, accepted.kind, taken.kinds):
        conflict("KindConflict", error)
    else:
        names.kind = requested.kind
    if error := _conflict(requested.list_kind, accepted.list_kind, taken.kinds):
        conflict("ListKindConflict", error)
    else:
        names.list_kind = requested.list_kind
    names.categories = requested.categories
    if condition["status"] == "Unknown":
        condition.update(status="True", reason="NoConflicts", message="no conflicts found")

    existing = _find_condition(_status_dict(crd), "NamesAccepted")
    equivalent = existing is not None and all(
        existing.get(name, "") == condition.get(name, "")
        for name in ("type", "status", "reason", "message")
    )
    if names == accepted and equivalent:
        return None

    established = {
        "type": "Established",
        "status": "False",
        "reason": "NotAccepted",
        "message": "not all names are accepted",
    }
    current = _find_condition(_status_dict(crd), "Established")
    if current is not None:
        established = {
            name: str(current.get(name) or "") for name in ("type", "status", "reason", "message")
        }
    if established["status"] != "True" and condition["status"] == "True":
        established = {
            "type": "Established",
            "status": "False",
            "reason": "Installing",
            "message": "the initial names have been accepted",
        }
    status = copy.deepcopy(_status_dict(crd))
    status["acceptedNames"] = _names_json(names)
    set_condition(status, condition, now)
    set_condition(status, established, now)
    return status


def _status_dict(crd: Mapping[str, Any]) -> dict[str, Any]:
    status = crd.get("status")
    return status if isinstance(status, dict) else _zero_status()


def established_status(crd: Mapping[str, Any], *, now: str) -> dict[str, Any] | None:
    """The establishing controller's sync: once ``NamesAccepted`` is True, the status to
    write with ``Established: True`` (``InitialNamesAccepted``); None otherwise. Kubernetes
    runs it once the resource's handler serves, so call it then."""
    view = _view(crd)
    if not _condition_true(view.status, "NamesAccepted") or _condition_true(
        view.status, "Established"
    ):
        return None
    status = copy.deepcopy(_status_dict(crd))
    set_condition(
        status,
        {
            "type": "Established",
            "status": "True",
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
        },
        now,
    )
    return status


def mark_for_deletion(crd: dict[str, Any], *, now: str) -> None:
    """What the CRD registry's DELETE does to a CRD not yet being deleted, in place:
    ``deletionTimestamp`` (``now``), the cleanup finalizer, and the ``Terminating``
    condition. The CRD is then stored, not deleted; the cleanup controller deletes its
    objects and removes the finalizer."""
    metadata = crd.get("metadata")
    if not isinstance(metadata, dict):
        metadata = crd["metadata"] = {}
    if not metadata.get("deletionTimestamp"):
        metadata["deletionTimestamp"] = now
    finalizers = metadata.get("finalizers")
    finalizers = list(finalizers) if isinstance(finalizers, list) else []
    if CLEANUP_FINALIZER not in finalizers:
        finalizers.append(CLEANUP_FINALIZER)
    metadata["finalizers"] = finalizers
    status = crd.get("status")
    if not isinstance(status, dict):
        status = crd["status"] = _zero_status()
    set_condition(
        status,
        {
            "type": "Terminating",
            "status": "True",
            "reason": "InstanceDeletionPending",
            "message": (
                "CustomResourceDefinition marked for deletion; CustomResource deletion will "
                "begin soon"
            ),
        },
        now,
    )
