"""The OpenAPI documents of the served resources: ``/openapi/v2`` and ``/openapi/v3``.

Design note
-----------
What it produces. For a set of :class:`~watchcache.registry.resources.ResourceSpec`, one
immutable :class:`OpenAPIDocuments`: the Swagger 2.0 document as JSON and as gnostic's
protobuf ``openapi_v2.Document`` (what kubectl asks for), the v3 index (``/openapi/v3``:
one ``serverRelativeURL`` per group-version, carrying the document's hash) and one v3
document per group-version (``api/v1``, ``apis/<group>/<version>``). Each is a
:class:`Document`: the bytes, the Content-Type to answer, and a strong hash (upper-case hex
SHA-512 of the bytes, as kube-openapi computes it) for ``ETag`` and ``?hash=``.

Why. kubectl reads these for ``explain``, for client-side validation (1.20 validates
``create``/``apply`` bodies against the v2 definitions; newer releases send
``fieldValidation=Strict`` when the v3 PATCH operation lists it), for client-side apply's
strategic-merge metadata, and for 1.20's ``--dry-run=server`` check (docs/clients.md §1.8,
§2). The schemas come from ``openapi_schemas`` (one concept: the kinds' schemas), the
operations from ``openapi_paths`` (the HTTP surface), the protobuf from
``wire.openapi_v2_pb``; this module assembles, serializes, hashes and caches them.

How the HTTP layer serves them (Kubernetes' kube-openapi handlers do the same):

* ``GET /openapi/v2``: ``docs.v2(accept)`` picks JSON or protobuf from the Accept header
  (None: answer 406). Send ``Content-Type: document.content_type`` — for protobuf the form
  with a dot, ``application/com.github.proto-openapi.spec.v2.v1.0+protobuf``: kubectl asks
  with ``@v1.0`` but Go's MIME parser rejects an ``@`` in an answer — plus
  ``ETag: document.etag``, ``Vary: Accept``, ``Cache-Control: no-cache, private``, and 304
  when ``If-None-Match`` names the ETag.
* ``GET /openapi/v3``: ``docs.v3_index``, same headers.
* ``GET /openapi/v3/<gv>``: ``docs.v3(gv)`` (None: 404); JSON only (``docs.accepts_v3``,
  else 406). With ``?hash=`` equal to ``document.hash``: ``Cache-Control: public,
  immutable`` and an ``Expires`` a year ahead; with another hash, 301 to
  ``docs.v3_url(gv)``; without, ``no-cache, private``.

Costs. Building for the four core kinds takes about 20 ms, most of it the protobuf
encoding (the message schemas are computed once per process; the documents are
serialized, encoded and hashed per set of resources). :func:`openapi_documents` caches by
the resources' content, so calling it again with the same set (or after a CRD comes and
goes back) returns the same object (a lookup of some microseconds); holding the returned
value and serving its bytes costs nothing per request. A group-version's v3 document names
only its own GVKs, so its hash does not change when another group comes or goes.
Thread-safe: the cache is locked, the documents are immutable.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from watchcache.apiserver.openapi_paths import PathItem, render_v2, render_v3, resource_paths
from watchcache.apiserver.openapi_schemas import Catalog, openapi_schema_of, to_v2
from watchcache.registry.resources import ResourceSpec
from watchcache.wire.openapi_v2_pb import encode_document

__all__ = [
    "JSON_CONTENT_TYPE",
    "V2_PROTOBUF_CONTENT_TYPE",
    "V2_PROTOBUF_REQUESTED",
    "Document",
    "OpenAPIDocuments",
    "build_documents",
    "openapi_documents",
]

JSON_CONTENT_TYPE: Final = "application/json"
#: What the protobuf v2 document is answered as (kube-openapi's form, with a dot).
V2_PROTOBUF_CONTENT_TYPE: Final = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
#: What kubectl puts in Accept for it; never sent back (docs/clients.md §1.8).
V2_PROTOBUF_REQUESTED: Final = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
#: ``info.title`` of every document.
TITLE: Final = "watchcache"

_V2_MEDIA: Final = (
    ("application", "json", False),
    ("application", "com.github.proto-openapi.spec.v2@v1.0+protobuf", True),
    ("application", "com.github.proto-openapi.spec.v2.v1.0+protobuf", True),
)


@dataclass(frozen=True, slots=True)
class Document:
    """One document as served: ``body``, its ``content_type``, and ``hash`` (upper-case
    hex SHA-512 of the body: the ``?hash=`` of a v3 URL, and the ETag's value)."""

    body: bytes
    content_type: str
    hash: str

    @classmethod
    def of(cls, body: bytes, content_type: str) -> Document:
        return cls(body, content_type, hashlib.sha512(body).hexdigest().upper())

    @property
    def etag(self) -> str:
        """The ``ETag`` header value (the hash, quoted: a strong validator)."""
        return f'"{self.hash}"'


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _group_version_path(spec: ResourceSpec) -> str:
    """The v3 index's key of a resource's group-version (``api/v1``, ``apis/apps/v1``)."""
    return f"apis/{spec.group}/{spec.version}" if spec.group else f"api/{spec.version}"


@dataclass(frozen=True, slots=True)
class OpenAPIDocuments:
    """Every OpenAPI document of one set of resources (see the module note for how to
    serve each)."""

    v2_json: Document
    v2_protobuf: Document
    v3_index: Document
    #: ``"api/v1"`` / ``"apis/<group>/<version>"`` → that group-version's v3 document.
    v3_documents: Mapping[str, Document] = field(default_factory=dict)

    def v2(self, accept: str | None) -> Document | None:
        """The v2 document the Accept header asks for (protobuf for kubectl), or None when
        it accepts neither form (406). No or an empty Accept means JSON."""
        for type_, subtype in _accept_clauses(accept or "*/*"):
            for want_type, want_subtype, protobuf in _V2_MEDIA:
                if type_ in (want_type, "*") and subtype in (want_subtype, "*"):
                    return self.v2_protobuf if protobuf else self.v2_json
        return None

    def v3(self, group_version: str) -> Document | None:
        """The v3 document of ``api/v1`` or ``apis/<group>/<version>`` (a leading ``/`` and
        a ``/openapi/v3/`` prefix are ignored), or None (404)."""
        key = group_version.removeprefix("/").removeprefix("openapi/v3/").strip("/")
        return self.v3_documents.get(key)

    def v3_url(self, group_version: str) -> str:
        """The server-relative URL of a v3 document with its current hash (the index's
        ``serverRelativeURL``; where a stale ``?hash=`` is redirected)."""
        document = self.v3(group_version)
        if document is None:
            raise KeyError(group_version)
        key = group_version.removeprefix("/").removeprefix("openapi/v3/").strip("/")
        return f"/openapi/v3/{key}?hash={document.hash}"

    @staticmethod
    def accepts_v3(accept: str | None) -> bool:
        """Whether the Accept header allows the v3 documents' JSON (else 406)."""
        return any(
            type_ in ("application", "*") and subtype in ("json", "*")
            for type_, subtype in _accept_clauses(accept or "*/*")
        )


def _accept_clauses(accept: str) -> list[tuple[str, str]]:
    """Media ranges of an Accept header, best first: by ``q`` (0 excluded), then the more
    specific, then in header order — goautoneg's order, which kube-openapi uses."""
    ranked: list[tuple[float, int, int, str, str]] = []
    for index, part in enumerate(accept.split(",")):
        media, *params = part.split(";")
        type_, _, subtype = media.strip().lower().partition("/")
        if not type_ or not subtype:
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = 0.0
        if q <= 0:
            continue
        wildcards = (type_ == "*") + (subtype == "*")
        ranked.append((-q, wildcards, index, type_, subtype))
    ranked.sort()
    return [(type_, subtype) for _, _, _, type_, subtype in ranked]


def build_documents(
    resources: Iterable[ResourceSpec], *, version: str = "unversioned"
) -> OpenAPIDocuments:
    """Build every document for ``resources`` (uncached; see :func:`openapi_documents`).
    ``version`` goes into each document's ``info.version``."""
    specs = list(resources)
    catalog = Catalog(specs)
    by_group_version: dict[str, list[PathItem]] = {}
    group_versions: dict[str, tuple[str, str]] = {}
    for spec in specs:
        key = _group_version_path(spec)
        group_versions[key] = (spec.group, spec.version)
        kind_names = catalog.names[spec.served_key]
        by_group_version.setdefault(key, []).extend(resource_paths(spec, kind_names))
    info = {"title": TITLE, "version": version}

    v3_documents: dict[str, Document] = {}
    all_items: list[PathItem] = []
    for key in sorted(by_group_version):
        items = by_group_version[key]
        all_items.extend(items)
        names = catalog.closure(_roots(items))
        document = {
            "openapi": "3.0.0",
            "info": info,
            "paths": render_v3(items),
            "components": {
                "schemas": {name: catalog.component(name, group_versions[key]) for name in names}
            },
        }
        v3_documents[key] = Document.of(_dumps(document), JSON_CONTENT_TYPE)

    names = catalog.closure(_roots(all_items))
    swagger = {
        "swagger": "2.0",
        "info": info,
        "paths": render_v2(all_items),
        "definitions": {name: to_v2(catalog.component(name)) for name in names},
    }
    index = {
        "paths": {
            key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={document.hash}"}
            for key, document in v3_documents.items()
        }
    }
    return OpenAPIDocuments(
        v2_json=Document.of(_dumps(swagger), JSON_CONTENT_TYPE),
        v2_protobuf=Document.of(encode_document(swagger), V2_PROTOBUF_CONTENT_TYPE),
        v3_index=Document.of(_dumps(index), JSON_CONTENT_TYPE),
        v3_documents=MappingProxyType(v3_documents),
    )


def _roots(items: Iterable[PathItem]) -> set[str]:
    roots: set[str] = set()
    for item in items:
        roots.update(item.components())
    return roots


# -- the cache ------------------------------------------------------------------------------

#: How many sets of resources stay cached (CRDs coming and going make a few).
CACHE_SIZE: Final = 8

_cache: OrderedDict[tuple[Any, ...], OpenAPIDocuments] = OrderedDict()
_lock = threading.Lock()


def _key(spec: ResourceSpec) -> tuple[Any, ...]:
    """What the documents depend on, hashable (a CRD's schema by its JSON text)."""
    own = openapi_schema_of(spec)
    return (
        spec.name,
        spec.singular,
        spec.kind,
        spec.namespaced,
        spec.group,
        spec.version,
        spec.verbs,
        tuple((sub, spec.subresource_verbs(sub)) for sub in spec.subresources),
        None if own is None else json.dumps(own, sort_keys=True),
    )


def openapi_documents(
    resources: Iterable[ResourceSpec], *, version: str = "unversioned"
) -> OpenAPIDocuments:
    """The documents of ``resources``, built once per distinct set and reused: call it
    again whenever the set changes (a CRD established or removed); unchanged sets cost a
    dictionary lookup. Order of ``resources`` does not matter."""
    specs = sorted(resources, key=lambda s: (s.group, s.version, s.name))
    key = (version, *(_key(spec) for spec in specs))
    with _lock:
        cached = _cache.get(key)
        if cached is not None:
            _cache.move_to_end(key)
            return cached
    # Built outside the lock: two threads may both build a new set; either result is
    # equal, and the first stored wins.
    documents = build_documents(specs, version=version)
    with _lock:
        documents = _cache.setdefault(key, documents)
        _cache.move_to_end(key)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return documents
