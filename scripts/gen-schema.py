#!/usr/bin/env python3
"""Generate ``python/watchcache/wire/k8s_schema.json``: one schema per Kubernetes message.

Usage (from the repository root)::

    .venv/bin/python scripts/gen-schema.py \\
        --api <kubernetes/api checkout> \\
        --apimachinery <kubernetes/apimachinery checkout> \\
        --apiextensions <kubernetes/apiextensions-apiserver checkout> \\
        [--rev HEAD] [--out python/watchcache/wire/k8s_schema.json]

``tests/unit/test_protobuf.py`` reruns it and compares with the committed output when
``K8S_API_REPO``, ``K8S_APIMACHINERY_REPO`` and ``K8S_APIEXTENSIONS_REPO`` name such
checkouts.

``--api``, ``--apimachinery`` and ``--apiextensions`` are git repositories (bare or not) of
kubernetes/api, kubernetes/apimachinery and kubernetes/apiextensions-apiserver; files are
read with ``git show <rev>:<path>``, nothing is copied; each one's commit is recorded in
the output's ``sources``.

Packages covered: meta/v1, runtime, intstr and resource (apimachinery); core/v1,
autoscaling/v1 (``Scale``, the body of ``/scale``), coordination/v1 and events/v1 (api);
apiextensions.k8s.io/v1 (``CustomResourceDefinition``; apiextensions-apiserver).

Design note
-----------
The wire facts of a Kubernetes message live in two places, and neither is complete:

* ``generated.proto`` gives each protobuf field its number and protobuf type (string, bytes,
  int32, int64, bool, a message, ``repeated``, ``map<string, V>``);
* the Go structs (``types.go`` & co.) give what ``encoding/json`` needs: the JSON name, the
  ``omitempty``/``omitzero`` options, ``,inline`` embedding, whether the field is a pointer,
  its Go type (for Go's error texts), and the Go field name (for gogo's error texts).

Both are parsed here and joined by the protobuf field name (the ``name=`` of the Go field's
``protobuf`` tag); a disagreement in field numbers is an error, so a change upstream that
this parser misreads stops the generation instead of producing a wrong schema. Types whose
JSON form is hand-written in Go (``MarshalJSON``: Time, MicroTime, Duration, Quantity,
IntOrString, RawExtension, FieldsV1, GroupVersion, Verbs, and apiextensions' JSON,
JSONSchemaPropsOrBool, JSONSchemaPropsOrArray, JSONSchemaPropsOrStringArray) are marked
``special`` and keep only their protobuf fields; their JSON rules are code, in
``watchcache.wire.protobuf`` and ``watchcache.wire.body``.

Output (compact, loaded once by ``watchcache.wire.schema``)::

    {"format": 1, "sources": {repo: commit},
     "kinds": {"<apiVersion>/<Kind>": "<message>"},          # objects with TypeMeta
     "messages": {"<proto package>.<Name>": {"go": "<pkg>.<Name>", "special": "",
        "fields": [[json, number, goName, type, goType, elemGoType, flags], ...]}}}

``type`` is ``string|bool|int32|int64|double|bytes`` or a message name, prefixed by ``[]`` for a
list and ``{}`` for a map with string keys. ``goType`` is the field's Go type as Go's
``reflect`` prints it, pointer removed (``v1.PodPhase``, ``[]v1.Container``, ``[]uint8``);
``elemGoType`` the element's for lists and maps. Flags: ``p`` pointer, ``e`` omitempty,
``z`` omitzero, ``i`` inline (embedded struct whose fields are promoted), ``j`` JSON only
(no protobuf field), ``h`` hidden from JSON (``json:"-"``). Fields are in Go declaration
order, which is the order ``json.Marshal`` writes them. No comments or descriptions are
carried over.

Markers. After ``messages`` comes ``"markers": {"<message>": {"type": {...}, "fields":
{"<goName>": {...}}}}`` (only messages and fields that have any; fields by Go name, which
is unique in a struct while JSON names are empty for inline members): the merge facts
Kubernetes' OpenAPI generator (kube-openapi's openapi-gen) publishes as ``x-kubernetes-*``
extensions and server-side apply merges by. Per field, from the doc comment right above
it (gengo's comment tags: a ``+name=value`` line; no blank line between comment and
field): ``listType`` (atomic, set, map), ``listMapKey`` (a list, in order), ``mapType``,
``structType``, ``patchStrategy`` and ``patchMergeKey`` (openapi-gen refuses a member
whose comment tags and struct tags differ, so does this), and ``default``: the
``+default=`` value as JSON, found on the member or else on its Go type (through pointers
and named non-struct types, as openapi-gen looks), ``ref(Constant)`` resolved to the
constant's value. Per type, from the doc comment above ``type X struct``: ``structType``
and ``mapType`` (both become the type's ``x-kubernetes-map-type``). The zero-value
defaults openapi-gen adds to every non-pointer field are not recorded: they follow from
the flags above (``registry.apply_types`` derives them).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

META = "k8s.io.apimachinery.pkg.apis.meta.v1"
APIEXTENSIONS = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1"
# (repository key, directory, proto package, Go package name, API group or None)
PACKAGES: tuple[tuple[str, str, str, str, str | None], ...] = (
    (
        "apimachinery",
        "pkg/apis/meta/v1",
        "k8s.io.apimachinery.pkg.apis.meta.v1",
        "v1",
        "meta.k8s.io",
    ),
    ("apimachinery", "pkg/runtime", "k8s.io.apimachinery.pkg.runtime", "runtime", None),
    ("apimachinery", "pkg/util/intstr", "k8s.io.apimachinery.pkg.util.intstr", "intstr", None),
    ("apimachinery", "pkg/api/resource", "k8s.io.apimachinery.pkg.api.resource", "resource", None),
    ("api", "core/v1", "k8s.io.api.core.v1", "v1", ""),
    ("api", "autoscaling/v1", "k8s.io.api.autoscaling.v1", "v1", "autoscaling"),
    ("api", "coordination/v1", "k8s.io.api.coordination.v1", "v1", "coordination.k8s.io"),
    ("api", "events/v1", "k8s.io.api.events.v1", "v1", "events.k8s.io"),
    (
        "apiextensions",
        "pkg/apis/apiextensions/v1",
        APIEXTENSIONS,
        "v1",
        "apiextensions.k8s.io",
    ),
)
# Go packages whose named types are only needed for their underlying type.
EXTRA_GO_PACKAGES: tuple[tuple[str, str], ...] = (("apimachinery", "pkg/types"),)

# Import path → (repository key, directory) for resolving qualified Go identifiers.
IMPORT_DIRS = {
    "k8s.io/apimachinery/pkg/apis/meta/v1": ("apimachinery", "pkg/apis/meta/v1"),
    "k8s.io/apimachinery/pkg/runtime": ("apimachinery", "pkg/runtime"),
    "k8s.io/apimachinery/pkg/util/intstr": ("apimachinery", "pkg/util/intstr"),
    "k8s.io/apimachinery/pkg/api/resource": ("apimachinery", "pkg/api/resource"),
    "k8s.io/apimachinery/pkg/types": ("apimachinery", "pkg/types"),
    "k8s.io/api/core/v1": ("api", "core/v1"),
}

# Messages whose JSON is written by a hand-made MarshalJSON in Go (or, for Verbs, whose Go
# type is a slice while protobuf wraps it in a message).
SPECIAL = {
    f"{META}.Time": "time",
    f"{META}.MicroTime": "microtime",
    f"{META}.Duration": "duration",
    f"{META}.FieldsV1": "fieldsv1",
    f"{META}.GroupVersion": "groupversion",
    f"{META}.Verbs": "verbs",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "quantity",
    "k8s.io.apimachinery.pkg.api.resource.QuantityValue": "quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "intorstring",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "rawextension",
    # apiextensions' marshal.go: any JSON value; a schema or a bool; a schema or a list of
    # schemas; a schema or a list of strings.
    f"{APIEXTENSIONS}.JSON": "json",
    f"{APIEXTENSIONS}.JSONSchemaPropsOrBool": "orbool",
    f"{APIEXTENSIONS}.JSONSchemaPropsOrArray": "orarray",
    f"{APIEXTENSIONS}.JSONSchemaPropsOrStringArray": "orstringarray",
}
# Go field names of the special messages' protobuf fields (for gogo's error texts).
SPECIAL_GO_NAMES = {
    "seconds": "Seconds",
    "nanos": "Nanos",
    "duration": "Duration",
    "Raw": "Raw",
    "raw": "Raw",
    "group": "Group",
    "version": "Version",
    "items": "Items",
    "string": "String_",
    "type": "Type",
    "intVal": "IntVal",
    "strVal": "StrVal",
    "allows": "Allows",
    "schema": "Schema",
    "jSONSchemas": "JSONSchemas",
    "property": "Property",
}
SCALARS = {"string", "bool", "int32", "int64", "double", "bytes"}
# Go type (as reflect prints it) of a special message's scalar field, by protobuf type.
SPECIAL_GO_TYPES = {"int64": "int64", "int32": "int32", "bool": "bool", "double": "float64",
                    "bytes": "[]uint8", "string": "string"}  # fmt: skip
GO_BUILTINS = {
    "string",
    "bool",
    "int",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "byte",
}


class Git:
    def __init__(self, repo: Path, rev: str) -> None:
        self.repo = repo
        self.rev = rev
        self.commit = self._run("rev-parse", f"{rev}^{{commit}}").strip()

    def _run(self, *args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(self.repo), *args], check=True, capture_output=True, text=True
        ).stdout

    def show(self, path: str) -> str:
        return self._run("show", f"{self.commit}:{path}")

    def ls(self, directory: str) -> list[str]:
        out = self._run("ls-tree", "--name-only", self.commit, directory + "/")
        return [line for line in out.splitlines() if line]


# ---------------------------------------------------------------------------------------
# generated.proto


@dataclass
class ProtoField:
    name: str
    number: int
    label: str  # optional | repeated | map
    type: str  # scalar or fully qualified message (value type for maps)


_PROTO_FIELD = re.compile(
    r"^\s*(optional|repeated|required)\s+([\w.]+)\s+(\w+)\s*=\s*(\d+)\s*(?:\[[^\]]*\])?;"
)
_PROTO_MAP = re.compile(r"^\s*map<\s*(\w+)\s*,\s*([\w.]+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")


def parse_proto(text: str, package: str) -> dict[str, list[ProtoField]]:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    messages: dict[str, list[ProtoField]] = {}
    current: list[ProtoField] | None = None
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].rstrip()
        if not line.strip():
            continue
        start = re.match(r"^message (\w+) \{", line)
        if start:
            if current is not None:
                raise SystemExit(f"nested message in {package}: {line}")
            current = messages.setdefault(f"{package}.{start[1]}", [])
            continue
        if line.strip() == "}":
            current = None
            continue
        if current is None:
            continue
        scalar = _PROTO_FIELD.match(line)
        mapped = _PROTO_MAP.match(line)
        if scalar:
            label, ptype, name, number = scalar.groups()
            current.append(ProtoField(name, int(number), label, qualify(ptype, package)))
        elif mapped:
            key, value, name, number = mapped.groups()
            if key != "string":
                raise SystemExit(f"map key {key} in {package}: {line}")
            current.append(ProtoField(name, int(number), "map", qualify(value, package)))
        else:
            raise SystemExit(f"unparsed proto line in {package}: {line!r}")
    return messages


def qualify(ptype: str, package: str) -> str:
    if ptype in SCALARS:
        return ptype
    if ptype.startswith("."):
        return ptype[1:]
    return f"{package}.{ptype}"


# ---------------------------------------------------------------------------------------
# Go sources


@dataclass
class GoField:
    name: str  # Go field name ("" for embedded: then the type's name is used)
    type: str  # Go type expression as written
    embedded: bool
    json_name: str | None  # None: no json tag
    json_options: tuple[str, ...]
    proto_name: str | None
    proto_number: int | None
    unparsed: bool = False
    #: The field's doc comment, ``//`` removed, as gengo hands it to openapi-gen.
    comments: tuple[str, ...] = ()
    #: The ``patchStrategy`` and ``patchMergeKey`` struct tags ("" when absent).
    patch_strategy: str = ""
    patch_merge_key: str = ""


@dataclass
class GoPackage:
    name: str  # Go package name (v1, runtime, ...)
    directory: str
    imports: dict[str, str] = field(default_factory=dict)  # alias → import path
    structs: dict[str, list[GoField]] = field(default_factory=dict)
    named: dict[str, str] = field(default_factory=dict)  # type name → underlying expression
    #: Type name → its doc comment (``//`` removed), for type-level markers and defaults.
    type_comments: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Constant name → its Go literal (for ``+default=ref(Name)``).
    consts: dict[str, str] = field(default_factory=dict)


_TAG = re.compile(r'(\w+):"((?:[^"\\]|\\.)*)"')


def parse_go_package(git: Git, directory: str) -> GoPackage:
    files = [
        path
        for path in git.ls(directory)
        if path.endswith(".go")
        and not path.endswith("_test.go")
        and "/zz_generated" not in path
        and not path.endswith("generated.pb.go")
        and not path.endswith("_fuzz.go")
    ]
    package: GoPackage | None = None
    for path in files:
        text = git.show(path)
        name_match = re.search(r"^package (\w+)", text, flags=re.M)
        if name_match is None:
            continue
        if package is None:
            package = GoPackage(name_match[1], directory)
        parse_go_file(text, package)
    if package is None:
        raise SystemExit(f"no Go package in {directory}")
    return package


def parse_go_file(text: str, package: GoPackage) -> None:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    lines = text.splitlines()
    for match in re.finditer(r"^import \(\n(.*?)^\)", text, flags=re.M | re.S):
        for line in match[1].splitlines():
            parts = line.split("//", 1)[0].split()
            if len(parts) == 1:
                path = parts[0].strip('"')
                package.imports[path.rsplit("/", 1)[-1]] = path
            elif len(parts) == 2:
                package.imports[parts[0]] = parts[1].strip('"')
    for match in re.finditer(r'^import (\w+ )?"([^"]+)"', text, flags=re.M):
        path = match[2]
        alias = (match[1] or "").strip() or path.rsplit("/", 1)[-1]
        package.imports[alias] = path
    parse_consts(text, package)
    index = 0
    # The comment lines right above the current line (a Go doc comment: no blank line).
    doc: list[str] = []
    while index < len(lines):
        line = lines[index]
        if line.startswith("//"):
            doc.append(line[2:])
            index += 1
            continue
        struct = re.match(r"^type (\w+) struct \{\s*$", line)
        if struct:
            body: list[str] = []
            index += 1
            while lines[index] != "}":
                body.append(lines[index])
                index += 1
            package.structs[struct[1]] = parse_struct_body(struct[1], body)
            package.type_comments[struct[1]] = tuple(doc)
        elif re.match(r"^type (\w+) struct\{\}", line) or re.match(r"^type \w+ struct \{\}", line):
            package.structs[line.split()[1]] = []
            package.type_comments[line.split()[1]] = tuple(doc)
        else:
            named = re.match(r"^type (\w+) ([^{=]+?)\s*(//.*)?$", line)
            if named and named[2] != "interface":
                package.named[named[1]] = named[2].strip()
                package.type_comments[named[1]] = tuple(doc)
        doc = []
        index += 1


_CONST_LINE = re.compile(
    r"^\s*(\w+)(?:\s+[\w.]+)?\s*=\s*(\"(?:[^\"\\]|\\.)*\"|-?\d+(?:\.\d+)?|true|false)\s*(?://.*)?$"
)


def parse_consts(text: str, package: GoPackage) -> None:
    """Constants with a literal value (``ProtocolTCP Protocol = "TCP"``), in ``const (...)``
    blocks and single ``const`` lines; others (iota, expressions) are not needed."""
    for match in re.finditer(r"^const \(\n(.*?)^\)", text, flags=re.M | re.S):
        for line in match[1].splitlines():
            const = _CONST_LINE.match(line)
            if const:
                package.consts[const[1]] = const[2]
    for match in re.finditer(r"^const (.*)$", text, flags=re.M):
        const = _CONST_LINE.match(match[1])
        if const:
            package.consts[const[1]] = const[2]


def parse_struct_body(struct_name: str, body: list[str]) -> list[GoField]:
    fields: list[GoField] = []
    doc: list[str] = []
    for raw in body:
        line = raw.strip()
        if line.startswith("//"):
            doc.append(line[2:])
            continue
        comments, doc = tuple(doc), []
        if not line:
            continue
        tags = ""
        tag_match = re.search(r"`([^`]*)`\s*(//.*)?$", line)
        if tag_match:
            tags = tag_match[1]
            line = line[: tag_match.start()].strip()
        else:
            line = line.split("//", 1)[0].strip()
        parts = line.split()
        if len(parts) == 1:
            name, gotype, embedded = "", parts[0], True
        elif len(parts) == 2:
            name, gotype, embedded = parts[0], parts[1], False
        else:
            # Not an API struct's field (runtime has plain Go code too): fail only if used.
            fields.append(GoField(raw.strip(), "", False, None, (), None, None, unparsed=True))
            continue
        tag_values = dict(_TAG.findall(tags))
        json_name: str | None = None
        json_options: tuple[str, ...] = ()
        if "json" in tag_values:
            json_name, *options = tag_values["json"].split(",")
            json_options = tuple(options)
        proto_name: str | None = None
        proto_number: int | None = None
        proto_tag = tag_values.get("protobuf")
        if proto_tag and proto_tag != "-":
            proto_parts = proto_tag.split(",")
            proto_number = int(proto_parts[1])
            for part in proto_parts[2:]:
                if part.startswith("name="):
                    proto_name = part[len("name=") :]
            if proto_name is None:
                # go-to-protobuf names an unnamed field after its Go name, first letter lowered.
                go_name = name or gotype.lstrip("*").rsplit(".", 1)[-1]
                proto_name = go_name[0].lower() + go_name[1:]
        fields.append(
            GoField(
                name,
                gotype,
                embedded,
                json_name,
                json_options,
                proto_name,
                proto_number,
                comments=comments,
                patch_strategy=tag_values.get("patchStrategy", ""),
                patch_merge_key=tag_values.get("patchMergeKey", ""),
            )
        )
    return fields


# ---------------------------------------------------------------------------------------
# Markers (what openapi-gen turns into x-kubernetes-* extensions)

# Comment tags recorded per field, and per type; openapi-gen's tagToExtension.
FIELD_TAGS = ("listType", "listMapKey", "mapType", "structType", "patchStrategy",
              "patchMergeKey")  # fmt: skip
TYPE_TAGS = ("structType", "mapType")


def comment_tags(comments: tuple[str, ...]) -> dict[str, list[str]]:
    """``+name=value`` lines of a doc comment, as gengo's ExtractCommentTags reads them: a
    line (trimmed) starting with ``+``; the name ends at the first ``=``; no ``=``, no
    value. Repeated names collect their values in order."""
    out: dict[str, list[str]] = {}
    for raw in comments:
        line = raw.strip(" ")
        if not line.startswith("+"):
            continue
        name, _, value = line[1:].partition("=")
        out.setdefault(name, []).append(value)
    return out


# ---------------------------------------------------------------------------------------
# Joining


class Generator:
    def __init__(self, repos: dict[str, Git]) -> None:
        self.repos = repos
        self.go: dict[tuple[str, str], GoPackage] = {}
        self.proto: dict[str, list[ProtoField]] = {}
        self.proto_package_of_dir: dict[tuple[str, str], str] = {}
        self.messages: dict[str, dict[str, object]] = {}
        self.kinds: dict[str, str] = {}
        self.markers: dict[str, dict[str, object]] = {}

    def load(self) -> None:
        for repo_key, directory, proto_package, _go_name, _group in PACKAGES:
            git = self.repos[repo_key]
            self.proto.update(parse_proto(git.show(f"{directory}/generated.proto"), proto_package))
            self.go[(repo_key, directory)] = parse_go_package(git, directory)
            self.proto_package_of_dir[(repo_key, directory)] = proto_package
        for repo_key, directory in EXTRA_GO_PACKAGES:
            self.go[(repo_key, directory)] = parse_go_package(self.repos[repo_key], directory)

    # Go types --------------------------------------------------------------------------

    def resolve_ident(self, pkg: GoPackage, ident: str) -> tuple[GoPackage, str]:
        """The package and bare name a (possibly qualified) Go identifier refers to."""
        if "." in ident:
            alias, name = ident.split(".", 1)
            path = pkg.imports.get(alias)
            if path is None or path not in IMPORT_DIRS:
                raise SystemExit(f"unknown import {alias} in {pkg.directory}")
            return self.go[IMPORT_DIRS[path]], name
        return pkg, ident

    def reflect_name(self, pkg: GoPackage, expr: str) -> str:
        """The Go type expression as reflect's Type.String() prints it."""
        if expr.startswith("*"):
            return "*" + self.reflect_name(pkg, expr[1:])
        if expr.startswith("[]"):
            inner = self.reflect_name(pkg, expr[2:])
            return "[]uint8" if inner == "uint8" else "[]" + inner
        if expr.startswith("map["):
            key, value = split_map(expr)
            return f"map[{self.reflect_name(pkg, key)}]{self.reflect_name(pkg, value)}"
        if expr == "byte":
            return "uint8"
        if expr in GO_BUILTINS:
            return expr
        owner, name = self.resolve_ident(pkg, expr)
        return f"{owner.name}.{name}"

    def underlying(self, pkg: GoPackage, expr: str) -> tuple[GoPackage, str]:
        """Follow named non-struct types to their underlying expression."""
        seen = 0
        while True:
            if expr.startswith(("*", "[]", "map[")) or expr in GO_BUILTINS:
                return pkg, expr
            owner, name = self.resolve_ident(pkg, expr)
            if name in owner.structs:
                return owner, name
            if name not in owner.named:
                raise SystemExit(f"unknown Go type {expr} in {pkg.directory}")
            pkg, expr = owner, owner.named[name]
            seen += 1
            if seen > 20:
                raise SystemExit(f"type cycle at {expr}")

    def elem_reflect(self, pkg: GoPackage, expr: str) -> str:
        """reflect name of the element of a (possibly named) slice or map type."""
        owner, under = self.underlying(pkg, expr)
        if under.startswith("[]"):
            return self.reflect_name(owner, under[2:])
        if under.startswith("map["):
            return self.reflect_name(owner, split_map(under)[1])
        return ""

    # Messages ----------------------------------------------------------------------------

    def build(self) -> None:
        for repo_key, directory, proto_package, _go_name, group in PACKAGES:
            pkg = self.go[(repo_key, directory)]
            for message, proto_fields in self.proto.items():
                if message.rsplit(".", 1)[0] != proto_package:
                    continue
                short = message.rsplit(".", 1)[1]
                self.messages[message] = self.build_message(pkg, short, message, proto_fields)
                if group is not None and self.has_type_meta(pkg, short):
                    version = directory.rsplit("/", 1)[1]
                    api_version = f"{group}/{version}" if group else version
                    self.kinds[f"{api_version}/{short}"] = message

    def go_type_of_message(self, message: str) -> str:
        """``pkg.Name`` of a message, as reflect prints its Go type."""
        proto_package, short = message.rsplit(".", 1)
        for _repo, _directory, package, go_name, _group in PACKAGES:
            if package == proto_package:
                return f"{go_name}.{short}"
        raise SystemExit(f"no Go package for {message}")

    def has_type_meta(self, pkg: GoPackage, short: str) -> bool:
        fields = self.struct_fields(pkg, short)
        return any(f.embedded and f.type.endswith("TypeMeta") for f in fields)

    def struct_fields(self, pkg: GoPackage, short: str) -> list[GoField]:
        if short in pkg.structs:
            return pkg.structs[short]
        if short in pkg.named:  # type List metav1.List
            owner, name = self.resolve_ident(pkg, pkg.named[short])
            return self.struct_fields(owner, name)
        return []

    def build_message(
        self, pkg: GoPackage, short: str, message: str, proto_fields: list[ProtoField]
    ) -> dict[str, object]:
        special = SPECIAL.get(message, "")
        out_fields: list[list[object]] = []
        if special:
            for pf in proto_fields:
                if pf.label == "map":
                    raise SystemExit(f"{message}: a map in a special message")
                ftype = pf.type if pf.label != "repeated" else "[]" + pf.type
                flags = ""
                if pf.type in SCALARS:
                    gotype = SPECIAL_GO_TYPES[pf.type]
                else:
                    # apiextensions' wrappers hold their schemas as *JSONSchemaProps.
                    gotype = self.go_type_of_message(pf.type)
                    flags = "p" if pf.label != "repeated" else ""
                elem_gotype = ""
                if pf.label == "repeated":
                    elem_gotype = gotype if pf.type not in SCALARS else ""
                    gotype = "[]" + gotype
                out_fields.append(
                    [pf.name, pf.number, SPECIAL_GO_NAMES[pf.name], ftype, gotype, elem_gotype,
                     flags]
                )  # fmt: skip
            return {"go": f"{pkg.name}.{short}", "special": special, "fields": out_fields}

        go_pkg = pkg
        go_fields = self.struct_fields(pkg, short)
        if short not in pkg.structs and short in pkg.named:
            go_pkg, _ = self.resolve_ident(pkg, pkg.named[short])
        if not go_fields and proto_fields:
            raise SystemExit(f"no Go struct for {message}")
        by_proto_name = {pf.name: pf for pf in proto_fields}
        used: set[str] = set()
        field_markers: dict[str, dict[str, object]] = {}
        for gf in go_fields:
            if gf.unparsed:
                raise SystemExit(f"{message}: unparsed Go field {gf.name!r}")
            entry = self.build_field(go_pkg, message, gf, by_proto_name)
            if entry is None:
                continue
            if gf.proto_name:
                used.add(gf.proto_name)
            out_fields.append(entry)
            found = self.field_markers(go_pkg, f"{message}.{entry[2]}", gf)
            if found and not (gf.embedded and "i" in str(entry[6])):
                field_markers[str(entry[2])] = found
        type_markers = self.type_markers(pkg, short, message)
        if field_markers or type_markers:
            record: dict[str, object] = {}
            if type_markers:
                record["type"] = type_markers
            if field_markers:
                record["fields"] = field_markers
            self.markers[message] = record
        missing = set(by_proto_name) - used
        if missing:
            raise SystemExit(f"{message}: protobuf fields without Go field: {sorted(missing)}")
        return {"go": f"{pkg.name}.{short}", "special": "", "fields": out_fields}

    def build_field(
        self,
        pkg: GoPackage,
        message: str,
        gf: GoField,
        by_proto_name: dict[str, ProtoField],
    ) -> list[object] | None:
        go_name = gf.name or gf.type.lstrip("*").rsplit(".", 1)[-1]
        if gf.name and not gf.name[0].isupper():
            return None  # unexported: neither JSON nor protobuf
        flags = ""
        json_name = gf.json_name
        hidden = json_name == "-" and not gf.json_options
        inline = "inline" in gf.json_options or (gf.embedded and not json_name)
        if json_name is None or (json_name == "" and not gf.embedded):
            json_name = go_name
        if inline:
            json_name = ""
            flags += "i"
        if hidden:
            flags += "h"
            json_name = ""
        if "omitempty" in gf.json_options:
            flags += "e"
        if "omitzero" in gf.json_options:
            flags += "z"
        expr = gf.type
        if expr.startswith("*"):
            flags += "p"
            expr = expr[1:]
        gotype = self.reflect_name(pkg, expr)
        elem_gotype = "" if gotype == "[]uint8" else self.elem_reflect(pkg, expr)

        if gf.proto_name is None:
            # JSON only (TypeMeta, or a field protobuf does not carry).
            if hidden:
                return None
            ftype = self.json_only_type(pkg, expr)
            return [json_name, 0, go_name, ftype, gotype, elem_gotype, flags + "j"]
        pf = by_proto_name.get(gf.proto_name)
        if pf is None:
            raise SystemExit(f"{message}.{go_name}: no protobuf field {gf.proto_name}")
        if pf.number != gf.proto_number:
            raise SystemExit(f"{message}.{go_name}: numbers differ ({pf.number} vs tag)")
        if pf.label == "repeated":
            ftype = "[]" + pf.type
        elif pf.label == "map":
            ftype = "{}" + pf.type
        else:
            ftype = pf.type
        self.check_shape(pkg, message, go_name, expr, pf)
        return [json_name, pf.number, go_name, ftype, gotype, elem_gotype, flags]

    # Markers ------------------------------------------------------------------------------

    def field_markers(self, pkg: GoPackage, where: str, gf: GoField) -> dict[str, object]:
        """The member's openapi-gen tags and its ``+default`` (see the module note)."""
        tags = comment_tags(gf.comments)
        out: dict[str, object] = {}
        for name in FIELD_TAGS:
            values = tags.get(name)
            if values is None:
                continue
            if name == "listMapKey":
                out[name] = values
            elif len(values) != 1 or not values[0]:
                raise SystemExit(f"{where}: +{name} needs exactly one value, got {values}")
            else:
                out[name] = values[0]
        # openapi-gen refuses a member whose patch comment tags and struct tags differ.
        for name, struct_tag in (
            ("patchStrategy", gf.patch_strategy),
            ("patchMergeKey", gf.patch_merge_key),
        ):
            if out.get(name, "") != struct_tag:
                raise SystemExit(
                    f"{where}: +{name}={out.get(name, '')!r} but struct tag {struct_tag!r}"
                )
        default = self.default_of(pkg, where, gf)
        if default is not None:
            out["default"] = default
        return out

    def type_markers(self, pkg: GoPackage, short: str, where: str) -> dict[str, object]:
        tags = comment_tags(pkg.type_comments.get(short, ()))
        out: dict[str, object] = {}
        for name in TYPE_TAGS:
            values = tags.get(name)
            if values is None:
                continue
            if len(values) != 1 or not values[0]:
                raise SystemExit(f"{where}: +{name} needs exactly one value, got {values}")
            out[name] = values[0]
        return out

    def default_of(self, pkg: GoPackage, where: str, gf: GoField) -> object:
        """A member's ``+default`` as openapi-gen finds it: on the member, else on its type,
        following pointers and named non-struct types (``type Protocol string``). The value
        is JSON, or ``ref(Constant)``: that constant's value."""
        values = comment_tags(gf.comments).get("default")
        owner, expr = pkg, gf.type
        while not values:
            expr = expr.lstrip("*")
            if expr.startswith(("[]", "map[")) or expr in GO_BUILTINS:
                return None
            owner, name = self.resolve_ident(owner, expr)
            values = comment_tags(owner.type_comments.get(name, ())).get("default")
            if values or name in owner.structs or name not in owner.named:
                break
            expr = owner.named[name]
            if self.underlying(owner, expr)[1] in self.underlying(owner, expr)[0].structs:
                break  # a struct under another name: gengo sees a struct, not an alias
        if not values:
            return None
        if len(values) != 1:
            raise SystemExit(f"{where}: +default given {len(values)} times")
        text = values[0]
        symbol = re.fullmatch(r"ref\(([^\"]+)\)", text)
        if symbol:
            const_pkg, const_name = self.resolve_ident(owner, symbol[1])
            literal = const_pkg.consts.get(const_name)
            if literal is None:
                raise SystemExit(f"{where}: +default={text}: no such constant")
            text = literal
        try:
            return json.loads(text)
        except ValueError:
            raise SystemExit(f"{where}: +default={text} is not JSON") from None

    def json_only_type(self, pkg: GoPackage, expr: str) -> str:
        owner, under = self.underlying(pkg, expr)
        if under in ("string", "bool", "int32", "int64"):
            return under
        if under in owner.structs:
            for message in self.messages_of_go(owner, under):
                return message
        raise SystemExit(f"JSON-only field of type {expr} in {pkg.directory}")

    def messages_of_go(self, pkg: GoPackage, name: str) -> list[str]:
        for (repo_key, directory), candidate in self.go.items():
            if candidate is pkg:
                proto_package = self.proto_package_of_dir.get((repo_key, directory))
                if proto_package and f"{proto_package}.{name}" in self.proto:
                    return [f"{proto_package}.{name}"]
        return []

    def check_shape(
        self, pkg: GoPackage, message: str, go_name: str, expr: str, pf: ProtoField
    ) -> None:
        """The Go type and the protobuf type must agree on list/map/scalar shape."""
        _owner, under = self.underlying(pkg, expr)
        where = f"{message}.{go_name}"
        if pf.label == "map":
            if not under.startswith("map["):
                raise SystemExit(f"{where}: protobuf map, Go {under}")
        elif pf.label == "repeated":
            if not under.startswith("[]") or under == "[]byte":
                raise SystemExit(f"{where}: protobuf repeated, Go {under}")
        elif pf.type == "bytes":
            if under != "[]byte":
                raise SystemExit(f"{where}: protobuf bytes, Go {under}")
        elif pf.type == "double":
            if under != "float64":
                raise SystemExit(f"{where}: protobuf double, Go {under}")
        elif pf.type in ("string", "bool"):
            if under != pf.type:
                raise SystemExit(f"{where}: protobuf {pf.type}, Go {under}")
        elif pf.type in ("int32", "int64"):
            if under not in ("int32", "int64", "int"):
                raise SystemExit(f"{where}: protobuf {pf.type}, Go {under}")
            if under != pf.type:
                raise SystemExit(f"{where}: protobuf {pf.type} but Go {under}: widths differ")
        elif under.startswith(("[]", "map[")) and pf.type != f"{META}.Verbs":
            raise SystemExit(f"{where}: protobuf message {pf.type}, Go {under}")

    def output(self) -> dict[str, object]:
        return {
            "format": 1,
            "sources": {
                "kubernetes/api": self.repos["api"].commit,
                "kubernetes/apiextensions-apiserver": self.repos["apiextensions"].commit,
                "kubernetes/apimachinery": self.repos["apimachinery"].commit,
            },
            "kinds": dict(sorted(self.kinds.items())),
            "messages": dict(sorted(self.messages.items())),
            "markers": dict(sorted(self.markers.items())),
        }


def split_map(expr: str) -> tuple[str, str]:
    depth = 0
    for index in range(3, len(expr)):
        if expr[index] == "[":
            depth += 1
        elif expr[index] == "]":
            depth -= 1
            if depth == 0:
                return expr[4:index], expr[index + 1 :]
    raise SystemExit(f"bad map type {expr}")


def check_references(messages: dict[str, dict[str, object]]) -> None:
    for name, message in messages.items():
        for entry in message["fields"]:  # type: ignore[attr-defined]
            ftype = str(entry[3]).removeprefix("[]").removeprefix("{}")
            if ftype not in SCALARS and ftype not in messages:
                raise SystemExit(f"{name}.{entry[0]}: unknown message {ftype}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", required=True, type=Path, help="kubernetes/api git repository")
    parser.add_argument(
        "--apimachinery", required=True, type=Path, help="kubernetes/apimachinery git repository"
    )
    parser.add_argument(
        "--apiextensions",
        required=True,
        type=Path,
        help="kubernetes/apiextensions-apiserver git repository",
    )
    parser.add_argument("--rev", default="HEAD", help="revision of all three repositories")
    root = Path(__file__).resolve().parent.parent
    parser.add_argument("--out", type=Path, default=root / "python/watchcache/wire/k8s_schema.json")
    args = parser.parse_args(argv)
    repos = {
        "api": Git(args.api, args.rev),
        "apimachinery": Git(args.apimachinery, args.rev),
        "apiextensions": Git(args.apiextensions, args.rev),
    }
    generator = Generator(repos)
    generator.load()
    generator.build()
    check_references(generator.messages)
    data = generator.output()
    # One message per line: small diffs when Kubernetes adds a field.
    lines = ["{"]
    lines.append(f'"format": {json.dumps(data["format"])},')
    lines.append(f'"sources": {json.dumps(data["sources"], sort_keys=True)},')
    lines.append(f'"kinds": {json.dumps(data["kinds"], indent=0)},')
    lines.append('"messages": {')
    items = list(generator.output()["messages"].items())  # type: ignore[attr-defined]
    for index, (name, message) in enumerate(items):
        comma = "," if index < len(items) - 1 else ""
        lines.append(f"{json.dumps(name)}: {json.dumps(message, separators=(',', ':'))}{comma}")
    lines.append("},")
    lines.append('"markers": {')
    marked = list(data["markers"].items())  # type: ignore[attr-defined]
    for index, (name, record) in enumerate(marked):
        comma = "," if index < len(marked) - 1 else ""
        lines.append(f"{json.dumps(name)}: {json.dumps(record, separators=(',', ':'))}{comma}")
    lines.append("}}")
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(items)} messages, {len(data['kinds'])} kinds", file=sys.stderr)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
