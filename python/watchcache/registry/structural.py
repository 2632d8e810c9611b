"""CRD schemas: the OpenAPI v3 schema of a CustomResourceDefinition, decoded, checked as
kube-apiserver checks it, and compiled into the tree the custom-object code walks.

Design note
-----------
:meth:`StructuralSchema.from_openapi` takes ``spec.versions[*].schema.openAPIV3Schema``
as parsed JSON and either returns the compiled root node or raises
:class:`StructuralSchemaError` listing every violation with the field paths and words of
apiextensions-apiserver's ``validateCustomResourceDefinitionValidation``, in its order:

1. with the status subresource, only some fields at the root (``only "object" is allowed
   as the type at the root...``), and never ``nullable`` at the root;
2. the structural rules (``ValidateStructural``): every specified node has a ``type``
   unless ``x-kubernetes-int-or-string`` or ``x-kubernetes-preserve-unknown-fields``;
   ``allOf``/``anyOf``/``oneOf``/``not`` carry value validations only (no ``type``,
   ``default``, ``description``, ``nullable``, extensions, nested ``metadata``), and
   what they name under the root exists outside them; the root is an object without
   ``additionalProperties``; embedded resources are objects; root ``metadata`` restricts
   only ``name`` and ``generateName``; patterns compile (Go's syntax, ``goregexp``).
   These are sorted by their text, as Kubernetes sorts them;
3. when those hold, every ``default`` is pruned (no unknown fields), valid against its
   node, and, inside embedded resources' ``metadata``/``apiVersion``/``kind``, valid
   metadata;
4. the OpenAPI rules (``ValidateCustomResourceDefinitionOpenAPISchema``): types among
   the six OpenAPI types, no ``id``/``$ref``/``definitions``/``dependencies``/
   ``patternProperties``/``additionalItems``/item arrays, no ``uniqueItems``,
   ``properties`` and ``additionalProperties`` exclusive, no defaults in top-level
   metadata, list and map types with their keys (set items atomic, map keys scalar and
   required or defaulted), and the static parts of ``x-kubernetes-validations``;
5. if nothing else was found, what ``NewStructural`` refuses (``OpenAPIV3Schema '$schema'
   is not supported``).

Field paths start at ``field_path``: ``spec.validation.openAPIV3Schema`` by default,
which is what kube-apiserver names when all versions share one schema (the v1 conversion
hoists it there); pass ``spec.versions[i].schema.openAPIV3Schema`` when they differ.
Properties are visited in sorted order where Kubernetes iterates a Go map (random there,
deterministic here). The checks are those for a create: the relaxations Kubernetes grants
an update of a CRD that already broke a rule are not modelled. CEL rules
(``x-kubernetes-validations``) are decoded, kept on the node (``x_validations``) and
checked statically; they are never compiled or evaluated.

The compiled tree: every schema object becomes one :class:`StructuralSchema` (also the
branches of ``allOf``/``anyOf``/``oneOf``/``not``), with properties in a dict and a
sorted tuple, patterns compiled, formats resolved to their checks, and two small
:class:`TypeView` objects: what ``crd_validation`` checks a custom object against (the
format stripping and int-or-string typing of ``NewSchemaValidator``) and what defaults
are checked against (the structural schema's own ``ToKubeOpenAPI``). Nodes are not
changed after ``from_openapi`` returns; share them between threads freely. Compiling is
linear in the schema (plus a pattern's compilation, cached); JSON in ``default``,
``example`` and ``enum`` is deep-copied so the caller's mapping may change afterwards.

Callers: the CRD registry code, through this module and ``crd_pruning``,
``crd_defaulting``, ``crd_validation``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from watchcache.registry import crd_embedded, crd_formats, crd_validation
from watchcache.registry.crd_pruning import prune_value
from watchcache.registry.field_errors import (
    child,
    forbidden,
    index,
    invalid,
    key,
    not_supported,
    required,
)
from watchcache.registry.goregexp import (
    GoRegexp,
    GoRegexpError,
    UnsupportedRegexpError,
    compile_go,
)
from watchcache.wire.errors import InvalidError, StatusCause

__all__ = [
    "DEFAULT_FIELD_PATH",
    "META_FIELDS",
    "SchemaDecodeError",
    "StructuralSchema",
    "StructuralSchemaError",
    "TypeView",
]

#: Where kube-apiserver reports a schema shared by all versions.
DEFAULT_FIELD_PATH: Final = "spec.validation.openAPIV3Schema"
#: The type and object metadata of a resource, handled apart from its schema.
META_FIELDS: Final = frozenset({"apiVersion", "kind", "metadata"})

_OPENAPI_TYPES: Final = ["array", "boolean", "integer", "number", "object", "string"]
_VALIDATION_REASONS: Final = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
]
# apiextensions' allowedFieldsAtRootSchema, by JSON name.
_ROOT_FIELDS_WITH_STATUS: Final = frozenset(
    {
        "description",
        "type",
        "format",
        "title",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "multipleOf",
        "required",
        "items",
        "properties",
        "externalDocs",
        "example",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-validations",
    }
)
_ROOT_FIELDS_WITH_STATUS_TEXT: Final = (
    "[Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum "
    "MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items "
    "Properties ExternalDocs Example XPreserveUnknownFields XValidations]"
)
# JSONSchemaProps' members in Go declaration order (the status-subresource check stops
# at the first disallowed one in this order).
_GO_FIELD_ORDER: Final = (
    "id",
    "$schema",
    "$ref",
    "description",
    "type",
    "nullable",
    "format",
    "title",
    "default",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "items",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "properties",
    "additionalProperties",
    "patternProperties",
    "dependencies",
    "additionalItems",
    "definitions",
    "externalDocs",
    "example",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
)


class SchemaDecodeError(ValueError):
    """The schema is not a JSONSchemaProps at all (a member of the wrong JSON type): what
    kube-apiserver answers with 400 while decoding the CRD. ``str()`` is Go's text."""


class StructuralSchemaError(Exception):
    """The schema breaks Kubernetes' rules; ``causes`` lists every violation."""

    def __init__(self, causes: tuple[StatusCause, ...]) -> None:
        super().__init__("; ".join(f"{c.field}: {c.message}" for c in causes))
        self.causes = causes

    def status_error(self, crd_name: str) -> InvalidError:
        """The 422 kube-apiserver sends: ``CustomResourceDefinition.apiextensions.k8s.io
        "<name>" is invalid: [...]``."""
        return InvalidError.for_fields(
            "CustomResourceDefinition", "apiextensions.k8s.io", crd_name, self.causes
        )


@dataclass(frozen=True, slots=True)
class TypeView:
    """What kube-openapi's validator sees of a node's type and format."""

    types: tuple[str, ...]  # the schema's type list (int-or-string: integer, string)
    format: str  # the format the type validator compares against
    format_check: Callable[[str], bool] | None  # the string format's test, if known
    number_type: str  # the single type, when integer or number: the numeric range rules
    number_format: str  # int32/int64 or float/double with that type
    accepted: frozenset[str]  # value types that pass the type check whatever the value
    bounds_fit: tuple[bool, bool, bool]  # multipleOf, minimum, maximum fit the type

    @classmethod
    def build(
        cls, types: tuple[str, ...], fmt: str, bounds: tuple[float | None, ...] = ()
    ) -> TypeView:
        single = types[0] if len(types) == 1 else ""
        number_type = single if single in ("integer", "number") else ""
        number_format = ""
        if (single == "integer" and fmt in ("int32", "int64")) or (
            single == "number" and fmt in ("float", "double")
        ):
            number_format = fmt
        accepted = set(types)
        if "number" in accepted:
            accepted.add("integer")  # an integer is a number
        fits = tuple(
            bound is None
            or not number_type
            or crd_validation.number_fits(bound, number_type, number_format)
            for bound in (*bounds, None, None, None)[:3]
        )
        return cls(
            types,
            fmt,
            crd_formats.checker(fmt) if fmt else None,
            number_type,
            number_format,
            frozenset(accepted),
            (fits[0], fits[1], fits[2]),
        )


_EMPTY_VIEW: Final = TypeView.build((), "")


class StructuralSchema:
    """One node of a compiled CRD schema (see the module note). Attributes mirror
    JSONSchemaProps; absent members are None, empty tuples or False."""

    __slots__ = (
        "additional",
        "additional_allows",
        "additional_given",
        "additional_items_given",
        "all_of",
        "any_of",
        "cr_view",
        "default",
        "default_view",
        "defaults_below",
        "definitions",
        "dependencies",
        "description",
        "embedded",
        "embedded_below",
        "enum",
        "example",
        "exclusive_maximum",
        "exclusive_minimum",
        "external_docs",
        "format",
        "has_default",
        "has_junctors",
        "has_number_checks",
        "has_string_checks",
        "id",
        "int_or_string",
        "items",
        "items_array",
        "list_map_keys",
        "list_type",
        "lists_below",
        "map_type",
        "max_items",
        "max_length",
        "max_properties",
        "maximum",
        "min_items",
        "min_length",
        "min_properties",
        "minimum",
        "multiple_of",
        "not_",
        "nullable",
        "one_of",
        "pattern",
        "pattern_error",
        "pattern_properties",
        "pattern_regexp",
        "preserve_false",
        "preserve_unknown",
        "properties",
        "property_items",
        "raw",
        "ref",
        "required",
        "schema_uri",
        "title",
        "type",
        "unique_items",
        "x_validations",
    )

    def __init__(self) -> None:
        self.raw: Mapping[str, Any] = {}
        self.type = ""
        self.format = ""
        self.title = ""
        self.description = ""
        self.default: Any = None
        self.has_default = False
        self.example: Any = None
        self.external_docs: dict[str, str] | None = None
        self.nullable = False
        self.maximum: float | None = None
        self.exclusive_maximum = False
        self.minimum: float | None = None
        self.exclusive_minimum = False
        self.multiple_of: float | None = None
        self.max_length: int | None = None
        self.min_length: int | None = None
        self.pattern = ""
        self.pattern_regexp: GoRegexp | None = None
        self.pattern_error: str | None = None
        self.max_items: int | None = None
        self.min_items: int | None = None
        self.unique_items = False
        self.enum: list[Any] | None = None
        self.max_properties: int | None = None
        self.min_properties: int | None = None
        self.required: tuple[str, ...] | None = None
        self.all_of: tuple[StructuralSchema, ...] = ()
        self.any_of: tuple[StructuralSchema, ...] = ()
        self.one_of: tuple[StructuralSchema, ...] = ()
        self.not_: StructuralSchema | None = None
        self.properties: dict[str, StructuralSchema] = {}
        self.property_items: tuple[tuple[str, StructuralSchema], ...] = ()
        self.items: StructuralSchema | None = None
        self.items_array: tuple[StructuralSchema, ...] | None = None
        self.additional: StructuralSchema | None = None
        self.additional_given = False
        self.additional_allows = False
        self.additional_items_given = False
        self.pattern_properties: dict[str, StructuralSchema] | None = None
        self.definitions: dict[str, StructuralSchema] | None = None
        self.dependencies: dict[str, StructuralSchema | None] | None = None
        self.id = ""
        self.schema_uri = ""
        self.ref: str | None = None
        self.preserve_unknown = False
        self.preserve_false = False
        self.embedded = False
        self.int_or_string = False
        self.list_map_keys: tuple[str, ...] | None = None
        self.list_type: str | None = None
        self.map_type: str | None = None
        self.x_validations: tuple[dict[str, Any], ...] | None = None
        self.cr_view: TypeView = _EMPTY_VIEW
        self.default_view: TypeView = _EMPTY_VIEW
        # Summaries that let the validator skip work (set by _compile).
        self.has_junctors = False
        self.has_string_checks = False
        self.has_number_checks = False
        self.embedded_below = False
        self.lists_below = False
        self.defaults_below = False

    def __repr__(self) -> str:
        return f"StructuralSchema(type={self.type!r}, properties={sorted(self.properties)})"

    @classmethod
    def from_openapi(
        cls,
        schema: Mapping[str, Any],
        *,
        field_path: str = DEFAULT_FIELD_PATH,
        status_subresource: bool = False,
    ) -> StructuralSchema:
        """Decode, check and compile ``openAPIV3Schema`` (see the module note).

        Raises :class:`SchemaDecodeError` when a member has the wrong JSON type, and
        :class:`StructuralSchemaError` with every violation otherwise."""
        decode_prefix = "".join(part.split("[", 1)[0] + "." for part in field_path.split("."))
        root = _decode(schema, decode_prefix.rstrip("."))
        causes = _check(root, field_path, status_subresource)
        if causes:
            raise StructuralSchemaError(tuple(causes))
        return root


# ---------------------------------------------------------------------------------------
# Decoding (Go's json.Unmarshal into JSONSchemaProps)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict | Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return "number"


def _number_text(value: Any) -> str:
    text = getattr(value, "text", None)
    return text if isinstance(text, str) else repr(value)


def _type_error(value: Any, path: str, go_type: str, struct: str = "JSONSchemaProps") -> str:
    return (
        f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
        f"{struct}.{path} of type {go_type}"
    )


class _Decoder:
    """Reads one schema object's members with Go's type rules."""

    def __init__(self, raw: Mapping[str, Any], path: str) -> None:
        self.raw = raw
        self.path = path

    def value(self, name: str) -> Any:
        return self.raw.get(name)

    def where(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def string(self, name: str) -> str | None:
        value = self.raw.get(name)
        if value is None or isinstance(value, str):
            return value
        raise SchemaDecodeError(_type_error(value, self.where(name), "string"))

    def boolean(self, name: str) -> bool | None:
        value = self.raw.get(name)
        if value is None or isinstance(value, bool):
            return value
        raise SchemaDecodeError(_type_error(value, self.where(name), "bool"))

    def number(self, name: str) -> float | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SchemaDecodeError(_type_error(value, self.where(name), "float64"))
        try:
            return float(value)
        except OverflowError:
            raise SchemaDecodeError(
                f"json: cannot unmarshal number {value} into Go struct field "
                f"JSONSchemaProps.{self.where(name)} of type float64"
            ) from None

    def integer(self, name: str) -> int | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            if -(2**63) <= value < 2**63:
                return value
            raise SchemaDecodeError(
                f"json: cannot unmarshal number {value} into Go struct field "
                f"JSONSchemaProps.{self.where(name)} of type int64"
            )
        if isinstance(value, float):
            raise SchemaDecodeError(
                f"json: cannot unmarshal number {_number_text(value)} into Go struct field "
                f"JSONSchemaProps.{self.where(name)} of type int64"
            )
        raise SchemaDecodeError(_type_error(value, self.where(name), "int64"))

    def strings(self, name: str) -> tuple[str, ...] | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if not isinstance(value, list | tuple):
            raise SchemaDecodeError(_type_error(value, self.where(name), "[]string"))
        for item in value:
            if not isinstance(item, str):
                raise SchemaDecodeError(_type_error(item, self.where(name), "string"))
        return tuple(value)

    def schema(self, name: str) -> StructuralSchema | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise SchemaDecodeError(_type_error(value, self.where(name), "v1.JSONSchemaProps"))
        return _decode(value, self.where(name))

    def schemas(self, name: str) -> tuple[StructuralSchema, ...]:
        value = self.raw.get(name)
        if value is None:
            return ()
        if not isinstance(value, list | tuple):
            raise SchemaDecodeError(_type_error(value, self.where(name), "[]v1.JSONSchemaProps"))
        out = []
        for item in value:
            if not isinstance(item, Mapping):
                raise SchemaDecodeError(_type_error(item, self.where(name), "v1.JSONSchemaProps"))
            out.append(_decode(item, self.where(name)))
        return tuple(out)

    def schema_map(self, name: str) -> dict[str, StructuralSchema] | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise SchemaDecodeError(
                _type_error(value, self.where(name), "map[string]v1.JSONSchemaProps")
            )
        out: dict[str, StructuralSchema] = {}
        for prop, item in value.items():
            where = f"{self.where(name)}.{prop}"
            if item is None:
                out[str(prop)] = _decode({}, where)
                continue
            if not isinstance(item, Mapping):
                raise SchemaDecodeError(_type_error(item, where, "v1.JSONSchemaProps"))
            out[str(prop)] = _decode(item, where)
        return out


def _decode(raw: Mapping[str, Any], path: str) -> StructuralSchema:
    if not isinstance(raw, Mapping):
        raise SchemaDecodeError(
            f"json: cannot unmarshal {_json_kind(raw)} into Go value of type v1.JSONSchemaProps"
        )
    d = _Decoder(raw, path)
    s = StructuralSchema()
    s.raw = raw
    s.id = d.string("id") or ""
    s.schema_uri = d.string("$schema") or ""
    s.ref = d.string("$ref")
    s.description = d.string("description") or ""
    s.type = d.string("type") or ""
    s.format = d.string("format") or ""
    s.title = d.string("title") or ""
    if raw.get("default") is not None:
        s.default = copy.deepcopy(raw["default"])
        s.has_default = True
    s.maximum = d.number("maximum")
    s.exclusive_maximum = bool(d.boolean("exclusiveMaximum"))
    s.minimum = d.number("minimum")
    s.exclusive_minimum = bool(d.boolean("exclusiveMinimum"))
    s.max_length = d.integer("maxLength")
    s.min_length = d.integer("minLength")
    s.pattern = d.string("pattern") or ""
    s.max_items = d.integer("maxItems")
    s.min_items = d.integer("minItems")
    s.unique_items = bool(d.boolean("uniqueItems"))
    s.multiple_of = d.number("multipleOf")
    enum = raw.get("enum")
    if enum is not None:
        if not isinstance(enum, list | tuple):
            raise SchemaDecodeError(_type_error(enum, d.where("enum"), "[]v1.JSON"))
        s.enum = copy.deepcopy(list(enum))
    s.max_properties = d.integer("maxProperties")
    s.min_properties = d.integer("minProperties")
    s.required = d.strings("required")
    _decode_items(s, d)
    s.all_of = d.schemas("allOf")
    s.one_of = d.schemas("oneOf")
    s.any_of = d.schemas("anyOf")
    s.not_ = d.schema("not")
    s.properties = d.schema_map("properties") or {}
    s.property_items = tuple(sorted(s.properties.items()))
    _decode_additional(s, d)
    s.pattern_properties = d.schema_map("patternProperties")
    _decode_dependencies(s, d)
    s.definitions = d.schema_map("definitions")
    docs = raw.get("externalDocs")
    if docs is not None:
        if not isinstance(docs, Mapping):
            raise SchemaDecodeError(
                _type_error(docs, d.where("externalDocs"), "v1.ExternalDocumentation")
            )
        sub = _Decoder(docs, d.where("externalDocs"))
        s.external_docs = {
            "description": sub.string("description") or "",
            "url": sub.string("url") or "",
        }
    if raw.get("example") is not None:
        s.example = copy.deepcopy(raw["example"])
    s.nullable = bool(d.boolean("nullable"))
    preserve = d.boolean("x-kubernetes-preserve-unknown-fields")
    s.preserve_unknown = preserve is True
    s.preserve_false = preserve is False
    s.embedded = bool(d.boolean("x-kubernetes-embedded-resource"))
    s.int_or_string = bool(d.boolean("x-kubernetes-int-or-string"))
    s.list_map_keys = d.strings("x-kubernetes-list-map-keys")
    s.list_type = d.string("x-kubernetes-list-type")
    s.map_type = d.string("x-kubernetes-map-type")
    s.x_validations = _decode_rules(d)
    _compile(s)
    return s


def _decode_items(s: StructuralSchema, d: _Decoder) -> None:
    value = d.value("items")
    # JSONSchemaPropsOrArray decodes an object or an array and ignores anything else.
    if isinstance(value, Mapping):
        s.items = _decode(value, d.where("items"))
    elif isinstance(value, list | tuple):
        s.items_array = d.schemas("items")


def _decode_additional(s: StructuralSchema, d: _Decoder) -> None:
    for name in ("additionalProperties", "additionalItems"):
        value = d.value(name)
        if value is None:
            continue
        if isinstance(value, Mapping):
            node: StructuralSchema | None = _decode(value, d.where(name))
            allows = True
        elif isinstance(value, bool):
            node, allows = None, value
        else:
            raise SchemaDecodeError("boolean or JSON schema expected")
        if name == "additionalProperties":
            s.additional, s.additional_allows, s.additional_given = node, allows, True
        else:
            s.additional_items_given = True


def _decode_dependencies(s: StructuralSchema, d: _Decoder) -> None:
    value = d.value("dependencies")
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise SchemaDecodeError(
            _type_error(value, d.where("dependencies"), "v1.JSONSchemaDependencies")
        )
    deps: dict[str, StructuralSchema | None] = {}
    for name, item in value.items():
        where = f"{d.where('dependencies')}.{name}"
        if isinstance(item, Mapping):
            deps[str(name)] = _decode(item, where)
        elif isinstance(item, list | tuple):
            if not all(isinstance(x, str) for x in item):
                raise SchemaDecodeError(_type_error(item, where, "string"))
            deps[str(name)] = None
        else:
            deps[str(name)] = None
    s.dependencies = deps


def _decode_rules(d: _Decoder) -> tuple[dict[str, Any], ...] | None:
    value = d.value("x-kubernetes-validations")
    if value is None:
        return None
    where = d.where("x-kubernetes-validations")
    if not isinstance(value, list | tuple):
        raise SchemaDecodeError(_type_error(value, where, "v1.ValidationRules"))
    rules = []
    for item in value:
        if not isinstance(item, Mapping):
            raise SchemaDecodeError(_type_error(item, where, "v1.ValidationRule"))
        sub = _Decoder(item, where)
        rule: dict[str, Any] = {
            "rule": sub.string("rule") or "",
            "message": sub.string("message") or "",
            "messageExpression": sub.string("messageExpression") or "",
            "reason": sub.string("reason"),
            "fieldPath": sub.string("fieldPath") or "",
            "optionalOldSelf": sub.boolean("optionalOldSelf"),
        }
        rules.append(rule)
    return tuple(rules)


def _compile(s: StructuralSchema) -> None:
    """The node's runtime parts: its compiled pattern, its two type views, and summaries
    of what the validator has to look at (children are compiled before their parent)."""
    if s.pattern:
        try:
            s.pattern_regexp = compile_go(s.pattern)
        except (GoRegexpError, UnsupportedRegexpError) as error:
            s.pattern_error = str(error)
    bounds = (s.multiple_of, s.minimum, s.maximum)
    # NewSchemaValidator: int-or-string is typed [integer, string]; formats are stripped.
    cr_types: tuple[str, ...] = (
        ("integer", "string") if s.int_or_string else ((s.type,) if s.type else ())
    )
    cr_format = crd_formats.effective_format(cr_types[0] if len(cr_types) == 1 else "", s.format)
    s.cr_view = TypeView.build(cr_types, cr_format, bounds)
    # Structural.ToKubeOpenAPI, used for defaults: the type as written, the format as is.
    default_types: tuple[str, ...] = (s.type,) if s.type else ()
    s.default_view = TypeView.build(default_types, s.format, bounds)
    s.has_junctors = bool(s.any_of or s.one_of or s.all_of or s.not_ is not None)
    s.has_string_checks = s.max_length is not None or s.min_length is not None or bool(s.pattern)
    s.has_number_checks = any(bound is not None for bound in bounds)
    children = [prop for _, prop in s.property_items]
    if s.items is not None:
        children.append(s.items)
    if s.additional is not None:
        children.append(s.additional)
    s.embedded_below = any(c.embedded or c.embedded_below for c in children)
    s.defaults_below = any(c.has_default or c.defaults_below for c in children)
    s.lists_below = s.list_type in ("set", "map") or any(c.lists_below for c in children)


# ---------------------------------------------------------------------------------------
# The checks, in Kubernetes' order


def _check(root: StructuralSchema, path: str, status_subresource: bool) -> list[StatusCause]:
    causes: list[StatusCause] = []
    if status_subresource:
        causes.extend(_status_root_errors(root, path))
    if root.nullable:
        causes.append(forbidden(child(path, "nullable"), "nullable cannot be true at the root"))
    init_error = _structural_init_error(root)
    if init_error is None:
        structural = _validate_structural(root, path)
        if structural:
            causes.extend(structural)
        else:
            causes.extend(_validate_defaults(root, path))
    causes.extend(_openapi_errors(root, path, _Rules(), is_root=True))
    if not causes and init_error is not None:
        causes.append(invalid(path, "", init_error))
    return causes


def _status_root_errors(root: StructuralSchema, path: str) -> list[StatusCause]:
    for name in _GO_FIELD_ORDER:
        value = root.raw.get(name)
        if value is None or value is False or value == "":
            continue
        if name == "type":
            if value != "object":
                return [
                    invalid(
                        child(path, "type"),
                        value,
                        'only "object" is allowed as the type at the root of the schema if '
                        "the status subresource is enabled",
                    )
                ]
            continue
        if name not in _ROOT_FIELDS_WITH_STATUS:
            return [
                invalid(
                    path,
                    dict(root.raw),
                    f"only {_ROOT_FIELDS_WITH_STATUS_TEXT} fields are allowed at the root of "
                    "the schema if the status subresource is enabled",
                )
            ]
    return []


def _structural_init_error(s: StructuralSchema | None) -> str | None:
    """The first error of ``NewStructural`` (schema members it cannot represent)."""
    if s is None:
        return None
    for value, name in (
        (s.id, "id"),
        (s.schema_uri, "schema"),
        (s.ref, "$ref"),
        (s.pattern_properties, "patternProperties"),
        (s.dependencies, "dependencies"),
        (s.additional_items_given, "additionalItems"),
        (s.definitions, "definitions"),
    ):
        if value:
            return f"OpenAPIV3Schema '{name}' is not supported"
    for branch in (s.not_, *s.all_of, *s.any_of, *s.one_of):
        error = _structural_init_error(branch)
        if error is not None:
            return error
    if s.preserve_false:
        return "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
    if s.items_array:
        return "OpenAPIV3Schema 'items' must be a schema, but is an array"
    for sub in (s.items, *(prop for _, prop in s.property_items), s.additional):
        error = _structural_init_error(sub)
        if error is not None:
            return error
    return None


# -- ValidateStructural ------------------------------------------------------------------

_ROOT, _ITEM, _FIELD = 0, 1, 2
_EMPTY_TYPE_DETAIL: Final = {
    _ROOT: "must not be empty at the root",
    _ITEM: "must not be empty for specified array items",
    _FIELD: "must not be empty for specified object fields",
}


def _is_exact_type(s: StructuralSchema, schema_type: str) -> bool:
    """A junctor branch that is exactly ``{type: <schema_type>}`` and nothing else (zero
    values and lists NewStructural drops do not count)."""
    dropped = ("enum", "allOf", "anyOf", "oneOf")
    given = {
        k
        for k, v in s.raw.items()
        if v is not None and v is not False and v != "" and not (k in dropped and not v)
    }
    return given == {"type"} and s.type == schema_type


def _is_int_or_string_any_of(branches: tuple[StructuralSchema, ...]) -> bool:
    return (
        len(branches) == 2
        and _is_exact_type(branches[0], "integer")
        and _is_exact_type(branches[1], "string")
    )


def _validate_structural(root: StructuralSchema, path: str) -> list[StatusCause]:
    causes: list[StatusCause] = []
    _invariants(root, _ROOT, path, causes)
    _complete(root, root, path, path, causes)
    causes.sort(key=lambda c: f"{c.field}: {c.message}")
    return causes


def _invariants(s: StructuralSchema | None, level: int, path: str, out: list[StatusCause]) -> None:
    if s is None:
        return
    if s.type == "array" and s.items is None:
        out.append(required(child(path, "items"), "must be specified"))
    _invariants(s.items, _ITEM, child(path, "items"), out)
    for name, prop in s.property_items:
        _invariants(prop, _FIELD, key(child(path, "properties"), name), out)
    if s.additional_given:
        if level == _ROOT:
            out.append(
                forbidden(child(path, "additionalProperties"), "must not be used at the root")
            )
        _invariants(s.additional, _FIELD, child(path, "additionalProperties"), out)
    if s.int_or_string and s.preserve_unknown:
        out.append(
            invalid(
                child(path, "x-kubernetes-preserve-unknown-fields"),
                True,
                "must be false if x-kubernetes-int-or-string is true",
            )
        )
    if s.int_or_string and s.embedded:
        out.append(
            invalid(
                child(path, "x-kubernetes-embedded-resource"),
                True,
                "must be false if x-kubernetes-int-or-string is true",
            )
        )
    skip_any_of = _is_int_or_string_any_of(s.any_of)
    skip_first_all_of = bool(s.all_of) and _is_int_or_string_any_of(s.all_of[0].any_of)
    _value_validation(
        s, path, out, skip_any_of=skip_any_of, skip_first_all_of_any_of=skip_first_all_of
    )
    check_metadata = level == _ROOT or s.embedded
    type_path = child(path, "type")
    if s.embedded and s.type != "object":
        detail = "must be object if x-kubernetes-embedded-resource is true"
        if not s.type:
            out.append(required(type_path, detail))
        else:
            out.append(invalid(type_path, s.type, detail))
    elif not s.type and not s.int_or_string and not s.preserve_unknown:
        out.append(required(type_path, _EMPTY_TYPE_DETAIL[level]))
    if s.embedded and s.additional_given:
        out.append(
            forbidden(
                child(path, "additionalProperties"),
                "must not be used if x-kubernetes-embedded-resource is set",
            )
        )
    if level == _ROOT and s.type and s.type != "object":
        out.append(invalid(type_path, s.type, "must be object at the root"))
    properties_path = child(path, "properties")
    for name in ("kind", "apiVersion"):
        meta_prop = s.properties.get(name)
        if meta_prop is not None and check_metadata and meta_prop.type != "string":
            out.append(
                invalid(child(key(properties_path, name), "type"), meta_prop.type, "must be string")
            )
    metadata = s.properties.get("metadata")
    if metadata is not None:
        _metadata_invariants(metadata, check_metadata, level, key(properties_path, "metadata"), out)
    if s.embedded and not s.preserve_unknown and not s.properties:
        out.append(
            required(
                properties_path,
                "must not be empty if x-kubernetes-embedded-resource is true without "
                "x-kubernetes-preserve-unknown-fields",
            )
        )


def _metadata_invariants(
    s: StructuralSchema, check_metadata: bool, level: int, path: str, out: list[StatusCause]
) -> None:
    if check_metadata and s.type != "object":
        out.append(invalid(child(path, "type"), s.type, "must be object"))
    if level == _ROOT and _restricts_more_than_names(s):
        out.append(
            forbidden(
                path,
                "must not specify anything other than name and generateName, but metadata is "
                "implicitly specified",
            )
        )


def _restricts_more_than_names(s: StructuralSchema) -> bool:
    """Whether root metadata's schema says more than its type, its default and schemas for
    ``name`` and ``generateName`` (Kubernetes compares the rest with the zero value; an
    empty list that NewStructural keeps, such as ``required: []``, counts)."""
    if s.properties and not set(s.properties) <= {"name", "generateName"}:
        return True
    generic = (s.description, s.title, s.nullable, s.external_docs is not None, s.example)
    extensions = (
        s.preserve_unknown,
        s.embedded,
        s.int_or_string,
        s.list_map_keys is not None,
        s.list_type is not None,
        s.map_type is not None,
        s.x_validations is not None,
    )
    structure = (s.items is not None, s.additional_given)
    value_validation = (
        s.format,
        s.maximum is not None,
        s.exclusive_maximum,
        s.minimum is not None,
        s.exclusive_minimum,
        s.max_length is not None,
        s.min_length is not None,
        s.pattern,
        s.max_items is not None,
        s.min_items is not None,
        s.unique_items,
        s.multiple_of is not None,
        s.enum,
        s.max_properties is not None,
        s.min_properties is not None,
        s.required is not None,
        s.all_of,
        s.one_of,
        s.any_of,
        s.not_ is not None,
    )
    return any(generic) or any(extensions) or any(structure) or any(value_validation)


def _value_validation(
    s: StructuralSchema,
    path: str,
    out: list[StatusCause],
    *,
    skip_any_of: bool = False,
    skip_first_all_of_any_of: bool = False,
) -> None:
    if not skip_any_of:
        for i, branch in enumerate(s.any_of):
            _nested(branch, index(child(path, "anyOf"), i), out)
    for i, branch in enumerate(s.all_of):
        skip = skip_first_all_of_any_of and i == 0
        _nested(branch, index(child(path, "allOf"), i), out, skip_any_of=skip)
    for i, branch in enumerate(s.one_of):
        _nested(branch, index(child(path, "oneOf"), i), out)
    _nested(s.not_, child(path, "not"), out)
    if s.pattern and s.pattern_error is not None:
        if s.pattern_regexp is None and s.pattern_error.startswith("error parsing regexp"):
            detail = f"must be a valid regular expression, but isn't: {s.pattern_error}"
        else:
            detail = f"must be a regular expression this server can run: {s.pattern_error}"
        out.append(invalid(child(path, "pattern"), s.pattern, detail))


def _nested(
    v: StructuralSchema | None, path: str, out: list[StatusCause], *, skip_any_of: bool = False
) -> None:
    if v is None:
        return
    _value_validation(v, path, out, skip_any_of=skip_any_of)
    _nested(v.items, child(path, "items"), out)
    for name, prop in v.property_items:
        _nested(prop, key(child(path, "properties"), name), out)
    if v.type:
        out.append(forbidden(child(path, "type"), "must be empty to be structural"))
    # additionalProperties: false is no nested validation at all, true and a schema are.
    if v.additional_given and (v.additional_allows or v.additional is not None):
        out.append(
            forbidden(child(path, "additionalProperties"), "must be undefined to be structural")
        )
    for flag, name, detail in (
        (v.has_default, "default", "must be undefined to be structural"),
        (v.title, "title", "must be empty to be structural"),
        (v.description, "description", "must be empty to be structural"),
        (v.nullable, "nullable", "must be false to be structural"),
        (
            v.preserve_unknown,
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        ),
        (v.embedded, "x-kubernetes-embedded-resource", "must be false to be structural"),
        (v.int_or_string, "x-kubernetes-int-or-string", "must be false to be structural"),
        (v.list_map_keys, "x-kubernetes-list-map-keys", "must be empty to be structural"),
        (v.list_type is not None, "x-kubernetes-list-type", "must be undefined to be structural"),
        (v.map_type is not None, "x-kubernetes-map-type", "must be undefined to be structural"),
        (v.x_validations, "x-kubernetes-validations", "must be empty to be structural"),
    ):
        if flag:
            out.append(forbidden(child(path, name), detail))
    if "metadata" in v.properties:
        out.append(
            forbidden(
                key(child(path, "properties"), "metadata"),
                "must not be specified in a nested context",
            )
        )


def _complete(
    v: StructuralSchema, s: StructuralSchema, s_path: str, v_path: str, out: list[StatusCause]
) -> None:
    """validateStructuralCompleteness: what the root's junctors name must exist in the
    structural part of the schema (only the root's junctors are followed, as in Go)."""
    _complete_nested(v.not_, s, s_path, child(v_path, "not"), out)
    for name, branches in (("allOf", v.all_of), ("anyOf", v.any_of), ("oneOf", v.one_of)):
        for i, branch in enumerate(branches):
            _complete_nested(branch, s, s_path, index(child(v_path, name), i), out)


def _complete_nested(
    v: StructuralSchema | None,
    s: StructuralSchema | None,
    s_path: str,
    v_path: str,
    out: list[StatusCause],
) -> None:
    if v is None:
        return
    if s is None:
        out.append(required(s_path, f"because it is defined in {v_path}"))
        return
    _complete(v, s, s_path, v_path, out)
    _complete_nested(v.items, s.items, child(s_path, "items"), child(v_path, "items"), out)
    for name, prop in v.property_items:
        s_prop_path = key(child(s_path, "properties"), name)
        v_prop_path = key(child(v_path, "properties"), name)
        structural = s.properties.get(name)
        if structural is None:
            out.append(required(s_prop_path, f"because it is defined in {v_prop_path}"))
        else:
            _complete_nested(prop, structural, s_prop_path, v_prop_path, out)


# -- ValidateDefaults --------------------------------------------------------------------


def _surround(value: Any, steps: tuple[str | None, ...]) -> dict[str, Any] | None:
    """The object a default sits in, from the nearest resource root: a property name
    per step, None for an array item; ``kind``/``apiVersion`` filled in as Kubernetes'
    ``WithTypeMeta`` does."""
    for step in reversed(steps):
        value = [value] if step is None else {step: value}
    if not isinstance(value, dict):
        return None
    value.setdefault("kind", "Validation")
    value.setdefault("apiVersion", "validation/v1")
    return value


def _aggregate(causes: list[StatusCause]) -> str:
    texts: list[str] = []
    for cause in causes:
        text = f"{cause.field}: {cause.message}"
        if text not in texts:
            texts.append(text)
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def _validate_defaults(root: StructuralSchema, path: str) -> list[StatusCause]:
    out: list[StatusCause] = []
    _defaults(root, path, out, resource_root=root, steps=(), inside_meta=False, forced=True)
    return out


def _defaults(
    s: StructuralSchema,
    path: str,
    out: list[StatusCause],
    *,
    resource_root: StructuralSchema,
    steps: tuple[str | None, ...],
    inside_meta: bool,
    forced: bool = False,
) -> None:
    """ValidateDefaults' walk over items and properties. ``forced``: the node is the
    resource root, which Kubernetes treats as an embedded resource."""
    embedded = s.embedded or forced
    if embedded:
        inside_meta = False
        steps = ()
        resource_root = s
    default_path = child(path, "default")
    if s.has_default:
        default = s.default
        if inside_meta:
            _meta_default(s, default, default_path, out, resource_root=resource_root, steps=steps)
        else:
            pruned = copy.deepcopy(default)
            prune_value(pruned, s, is_resource_root=embedded)
            if not crd_validation.go_equal(pruned, default):
                out.append(invalid(default_path, default, "must not have unknown fields"))
            coerce = crd_embedded.coerce_error(default_path, default, s, embedded)
            if coerce is not None:
                out.append(coerce)
            else:
                meta = crd_embedded.embedded_errors(default, s, default_path, embedded)
                out.extend(meta or crd_validation.schema_errors(s, default, default_path, True))
    if s.items is not None:
        _defaults(
            s.items,
            child(path, "items"),
            out,
            resource_root=resource_root,
            steps=(*steps, None),
            inside_meta=inside_meta,
        )
    for name, prop in s.property_items:
        _defaults(
            prop,
            key(child(path, "properties"), name),
            out,
            resource_root=resource_root,
            steps=(*steps, name),
            inside_meta=inside_meta or (embedded and name in META_FIELDS),
        )


def _meta_default(
    s: StructuralSchema,
    default: Any,
    path: str,
    out: list[StatusCause],
    *,
    resource_root: StructuralSchema,
    steps: tuple[str | None, ...],
) -> None:
    """A default inside an embedded resource's metadata, apiVersion or kind: the object it
    would make must carry valid metadata, then the default must fit its node."""
    surrounding = _surround(copy.deepcopy(default), steps)
    if surrounding is None:
        return
    coerce = crd_embedded.coerce_error(None, surrounding, resource_root, True)
    if coerce is not None:
        text = f"{coerce.field}: {coerce.message}"
        out.append(invalid(path, default, f"must result in valid metadata: {text}"))
        return
    meta = crd_embedded.embedded_errors(surrounding, resource_root, None, True)
    if meta:
        out.append(invalid(path, default, f"must result in valid metadata: {_aggregate(meta)}"))
        return
    out.extend(crd_validation.schema_errors(s, default, path, True))


# -- ValidateCustomResourceDefinitionOpenAPISchema ---------------------------------------


@dataclass(frozen=True, slots=True)
class _Rules:
    """specStandardValidatorV3's state along the walk."""

    allow_defaults: bool = True
    disallow_reason: str = ""
    inside_meta: bool = False

    def without_defaults(self, reason: str) -> _Rules:
        return _Rules(False, reason, self.inside_meta)

    def in_meta(self) -> _Rules:
        return _Rules(self.allow_defaults, self.disallow_reason, True)


def _openapi_errors(
    s: StructuralSchema | None, path: str, rules: _Rules, *, is_root: bool = False
) -> list[StatusCause]:
    out: list[StatusCause] = []
    if s is None:
        return out
    _standard(s, path, rules, out)
    if s.unique_items:
        out.append(
            forbidden(
                child(path, "uniqueItems"),
                "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            )
        )
    if s.additional_given:
        if s.properties and (not s.additional_allows or s.additional is not None):
            out.append(
                forbidden(
                    child(path, "additionalProperties"),
                    "additionalProperties and properties are mutual exclusive",
                )
            )
        sub = rules
        if rules.inside_meta:
            sub = rules.without_defaults("inside additionalProperties applying to object metadata")
        out.extend(_openapi_errors(s.additional, child(path, "additionalProperties"), sub))
    for name, prop in s.property_items:
        sub = rules
        if (is_root or s.embedded) and name in META_FIELDS:
            sub = sub.in_meta()
            if is_root:
                sub = sub.without_defaults(f"in top-level {name}")
        out.extend(_openapi_errors(prop, key(child(path, "properties"), name), sub))
    out.extend(_openapi_errors(s.not_, child(path, "not"), rules))
    for junctor, branches in (("allOf", s.all_of), ("oneOf", s.one_of), ("anyOf", s.any_of)):
        for i, branch in enumerate(branches):
            out.extend(_openapi_errors(branch, index(child(path, junctor), i), rules))
    for name, definition in sorted((s.definitions or {}).items()):
        out.extend(_openapi_errors(definition, key(child(path, "definitions"), name), rules))
    if s.items is not None:
        out.extend(_openapi_errors(s.items, child(path, "items"), rules))
    for i, item in enumerate(s.items_array or ()):
        out.extend(_openapi_errors(item, index(child(path, "items"), i), rules))
    for name, dependency in sorted((s.dependencies or {}).items()):
        out.extend(_openapi_errors(dependency, key(child(path, "dependencies"), name), rules))
    if s.preserve_false:
        out.append(
            invalid(
                child(path, "x-kubernetes-preserve-unknown-fields"),
                False,
                "must be true or undefined",
            )
        )
    _list_and_map_types(s, path, out)
    _map_list_keys(s, path, out)
    _rules_static(s, path, out)
    return out


def _standard(s: StructuralSchema, path: str, rules: _Rules, out: list[StatusCause]) -> None:
    if s.type and s.type not in _OPENAPI_TYPES:
        out.append(not_supported(child(path, "type"), s.type, _OPENAPI_TYPES))
    if s.has_default and not rules.allow_defaults:
        detail = "must not be set" + (f" {rules.disallow_reason}" if rules.disallow_reason else "")
        out.append(forbidden(child(path, "default"), detail))
    if s.id:
        out.append(forbidden(child(path, "id"), "id is not supported"))
    if s.additional_items_given:
        out.append(forbidden(child(path, "additionalItems"), "additionalItems is not supported"))
    if s.pattern_properties:
        out.append(
            forbidden(child(path, "patternProperties"), "patternProperties is not supported")
        )
    if s.definitions:
        out.append(forbidden(child(path, "definitions"), "definitions is not supported"))
    if s.dependencies is not None:
        out.append(forbidden(child(path, "dependencies"), "dependencies is not supported"))
    if s.ref is not None:
        out.append(forbidden(child(path, "$ref"), "$ref is not supported"))
    if s.type == "null":
        out.append(
            forbidden(
                child(path, "type"), "type cannot be set to null, use nullable as an alternative"
            )
        )
    if s.items_array:
        out.append(
            forbidden(child(path, "items"), "items must be a schema object and not an array")
        )
    if rules.inside_meta and s.embedded:
        out.append(
            forbidden(
                child(path, "x-kubernetes-embedded-resource"),
                "must not be used inside of resource meta",
            )
        )


def _list_and_map_types(s: StructuralSchema, path: str, out: list[StatusCause]) -> None:
    type_path = child(path, "type")
    if s.map_type is not None and s.type != "object":
        detail = "must be object if x-kubernetes-map-type is specified"
        out.append(
            required(type_path, detail) if not s.type else invalid(type_path, s.type, detail)
        )
    if s.map_type is not None and s.map_type not in ("atomic", "granular"):
        out.append(
            not_supported(child(path, "x-kubernetes-map-type"), s.map_type, ["atomic", "granular"])
        )
    items = s.items
    if s.list_type is not None and s.type != "array":
        detail = "must be array if x-kubernetes-list-type is specified"
        out.append(
            required(type_path, detail) if not s.type else invalid(type_path, s.type, detail)
        )
    elif s.list_type == "set" and items is not None:
        detail = "must be atomic as item of a list with x-kubernetes-list-type=set"
        if items.type == "array":
            if items.list_type is not None and items.list_type != "atomic":
                out.append(
                    invalid(
                        child(child(path, "items"), "x-kubernetes-list-type"),
                        items.list_type,
                        detail,
                    )
                )
        elif items.type == "object" and items.map_type != "atomic":
            # Kubernetes shows the items' list type here, not their map type.
            out.append(
                invalid(
                    child(child(path, "items"), "x-kubernetes-map-type"), items.list_type, detail
                )
            )
    if s.list_type is not None and s.list_type not in ("atomic", "set", "map"):
        out.append(
            not_supported(
                child(path, "x-kubernetes-list-type"), s.list_type, ["atomic", "set", "map"]
            )
        )
    if s.list_map_keys:
        detail = "must be map if x-kubernetes-list-map-keys is non-empty"
        list_type_path = child(path, "x-kubernetes-list-type")
        if s.list_type is None:
            out.append(required(list_type_path, detail))
        elif s.list_type != "map":
            out.append(invalid(list_type_path, s.list_type, detail))
    if s.list_type != "map":
        return
    keys_path = child(path, "x-kubernetes-list-map-keys")
    if not s.list_map_keys:
        out.append(required(keys_path, "must not be empty if x-kubernetes-list-type is map"))
    if items is None and s.items_array is None:
        out.append(
            required(child(path, "items"), "must have a schema if x-kubernetes-list-type is map")
        )
    if s.items_array is not None and items is None:
        out.append(
            invalid(
                child(path, "items"),
                s.raw.get("items"),
                "must only have a single schema if x-kubernetes-list-type is map",
            )
        )
    if items is not None and items.type != "object":
        out.append(
            invalid(
                child(child(path, "items"), "type"),
                items.type,
                "must be object if parent array's x-kubernetes-list-type is map",
            )
        )
    if items is not None and items.type == "object":
        seen: set[str] = set()
        map_keys = list(s.list_map_keys or ())
        for name in map_keys:
            prop = items.properties.get(name)
            if prop is not None:
                if prop.type in ("array", "object"):
                    prop_path = key(child(child(path, "items"), "properties"), name)
                    out.append(
                        invalid(
                            child(prop_path, "type"),
                            items.type,
                            "must be a scalar type if parent array's x-kubernetes-list-type is map",
                        )
                    )
            else:
                out.append(
                    invalid(keys_path, map_keys, "entries must all be names of item properties")
                )
            if name in seen:
                out.append(invalid(keys_path, map_keys, "must not contain duplicate entries"))
            seen.add(name)


def _map_list_keys(s: StructuralSchema, path: str, out: list[StatusCause]) -> None:
    items = s.items
    if items is None or s.list_type not in ("set", "map"):
        return
    items_path = child(path, "items")
    if items.nullable:
        out.append(
            forbidden(
                child(items_path, "nullable"),
                f"cannot be nullable when x-kubernetes-list-type is {s.list_type}",
            )
        )
    if s.list_type != "map":
        return
    required_names = set(items.required or ())
    for name in s.list_map_keys or ():
        prop = items.properties.get(name)
        if prop is None:
            continue
        prop_path = key(child(items_path, "properties"), name)
        if name not in required_names and not prop.has_default:
            out.append(
                required(
                    child(prop_path, "default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or "
                    "be a required property",
                )
            )
        if prop.nullable:
            out.append(
                forbidden(
                    child(prop_path, "nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                )
            )


def _has_newlines(text: str) -> bool:
    return "\n" in text or "\r" in text


def _rules_static(s: StructuralSchema, path: str, out: list[StatusCause]) -> None:
    """The checks of x-kubernetes-validations that need no CEL."""
    for i, rule in enumerate(s.x_validations or ()):
        rule_path = index(child(path, "x-kubernetes-validations"), i)
        trimmed_rule = rule["rule"].strip()
        message = rule["message"]
        trimmed_message = message.strip()
        if not trimmed_rule:
            out.append(required(child(rule_path, "rule"), "rule is not specified"))
        elif message and not trimmed_message:
            out.append(
                invalid(child(rule_path, "message"), message, "must be non-empty if specified")
            )
        elif _has_newlines(trimmed_message):
            out.append(
                invalid(child(rule_path, "message"), message, "must not contain line breaks")
            )
        elif _has_newlines(trimmed_rule) and not trimmed_message:
            out.append(
                required(
                    child(rule_path, "message"),
                    "message must be specified if rule contains line breaks",
                )
            )
        expression = rule["messageExpression"]
        if expression and not expression.strip():
            out.append(
                required(
                    child(rule_path, "messageExpression"),
                    "messageExpression must be non-empty if specified",
                )
            )
        reason = rule["reason"]
        if reason is not None and reason not in _VALIDATION_REASONS:
            out.append(not_supported(child(rule_path, "reason"), reason, _VALIDATION_REASONS))
        field_path = rule["fieldPath"]
        if field_path and not field_path.strip():
            out.append(
                invalid(child(rule_path, "fieldPath"), field_path, "must be non-empty if specified")
            )
        if _has_newlines(field_path):
            out.append(
                invalid(child(rule_path, "fieldPath"), field_path, "must not contain line breaks")
            )
        if (
            field_path
            and _structural_init_error(s) is None
            and not _valid_field_path(field_path, s)
        ):
            out.append(invalid(child(rule_path, "fieldPath"), field_path, "must be a valid path"))


def _field_path_tokens(text: str) -> list[str]:
    tokens: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char in ".[]":
            tokens.append(char)
            i += 1
            continue
        if char == "'":
            end = i + 1
            while end < len(text) and not (text[end] == "'" and text[end - 1] != "\\"):
                end += 1
            tokens.append(text[i : end + 1])
            i = end + 1
            continue
        end = i
        while end < len(text) and text[end] not in ".[]":
            end += 1
        tokens.append(text[i:end])
        i = end
    return tokens


def _valid_field_path(text: str, schema: StructuralSchema) -> bool:
    """cel.ValidFieldPath: ``.a.b['c']`` names properties (or map keys) of the schema."""
    node: StructuralSchema | None = schema
    tokens = _field_path_tokens(text)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token not in ".[" or node is None:
            return False
        if i + 1 >= len(tokens):
            return False
        name = tokens[i + 1]
        if token == "[":
            if len(name) < 2 or name[0] != "'" or name[-1] != "'":
                return False
            name = name[1:-1].replace("\\'", "'").replace("\\\\", "\\")
            if i + 2 >= len(tokens) or tokens[i + 2] != "]":
                return False
            i += 3
        else:
            i += 2
        if node.properties:
            node = node.properties.get(name)
            if node is None:
                return False
        elif node.additional_given:
            node = node.additional
        else:
            return False
    return True
