"""The resources a CustomResourceDefinition defines: one ResourceSpec per served version.

Design note
-----------
A CRD is served under its *accepted* names (``status.acceptedNames``, what the naming
check let through; ``spec.names`` until it has run), as apiextensions-apiserver serves
it. Each served version becomes a :class:`~watchcache.registry.resources.ResourceSpec`
carrying that version's schema, subresources, printer columns and selectable fields; the
storage version's spec is the one the controllers follow, the others name it as their
``storage_version`` (None conversion: the same objects with another ``apiVersion``).
Objects live under ``/registry/<group>/<plural>/``, kube-apiserver's layout, so a CRD
created against either server sees the other's objects.

Defaults as kube-apiserver's CRD handler has them: without ``additionalPrinterColumns``
the table has an ``Age`` column; a deprecated version without ``deprecationWarning``
warns ``<group>/<version> <Kind> is deprecated``.

Pure functions of the CRD's JSON; the CRD is assumed valid (its strategy checked it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from watchcache.registry.crd_definition import storage_version
from watchcache.registry.resources import PrinterColumn, ResourceSpec, ScaleSubresource

__all__ = ["served_specs"]

_AGE: Final = PrinterColumn("Age", "date", ".metadata.creationTimestamp")


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str))


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def served_specs(crd: Mapping[str, Any]) -> tuple[ResourceSpec, ...]:
    """One spec per served version, the storage version's first."""
    spec = _dict(crd.get("spec"))
    group = str(spec.get("group") or "")
    accepted = _dict(_dict(crd.get("status")).get("acceptedNames"))
    names = accepted if accepted.get("plural") else _dict(spec.get("names"))
    plural = str(names.get("plural") or "")
    kind = str(names.get("kind") or "")
    stored = storage_version(crd) or ""
    out: list[ResourceSpec] = []
    for version in spec.get("versions") or []:
        if not isinstance(version, dict) or version.get("served") is not True:
            continue
        name = str(version.get("name") or "")
        subresources = _dict(version.get("subresources"))
        scale = _scale(_dict(subresources.get("scale"))) if "scale" in subresources else None
        served = ResourceSpec(
            plural,
            str(names.get("singular") or kind.lower()),
            kind,
            namespaced=spec.get("scope") != "Cluster",
            short_names=_strings(names.get("shortNames")),
            categories=_strings(names.get("categories")),
            fields=tuple(
                str(f.get("jsonPath", "")).lstrip(".")
                for f in version.get("selectableFields") or []
                if isinstance(f, dict)
            ),
            group=group,
            version=name,
            subresources=tuple(sorted(s for s in ("scale", "status") if s in subresources)),
            printer_columns=_columns(version.get("additionalPrinterColumns")),
            openapi_schema=_dict(_dict(version.get("schema")).get("openAPIV3Schema")) or None,
            storage_version="" if name == stored else stored,
            scale=scale,
            deprecation_warning=_deprecation(group, name, kind, version),
        )
        out.append(served)
    out.sort(key=lambda s: not s.stored_as_served)
    return tuple(out)


def _scale(scale: Mapping[str, Any]) -> ScaleSubresource:
    return ScaleSubresource(
        str(scale.get("specReplicasPath") or ""),
        str(scale.get("statusReplicasPath") or ""),
        str(scale.get("labelSelectorPath") or ""),
    )


def _columns(columns: Any) -> tuple[PrinterColumn, ...]:
    if not isinstance(columns, list) or not columns:
        return (_AGE,)
    return tuple(
        PrinterColumn(
            str(c.get("name") or ""),
            str(c.get("type") or ""),
            str(c.get("jsonPath") or ""),
            description=str(c.get("description") or ""),
            format=str(c.get("format") or ""),
            priority=int(c.get("priority") or 0),
        )
        for c in columns
        if isinstance(c, dict)
    )


def _deprecation(group: str, name: str, kind: str, version: Mapping[str, Any]) -> str:
    if version.get("deprecated") is not True:
        return ""
    warning = version.get("deprecationWarning")
    if isinstance(warning, str):
        return warning
    return f"{group}/{name} {kind} is deprecated"
