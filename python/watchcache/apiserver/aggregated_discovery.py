"""Aggregated discovery (``apidiscovery.k8s.io/v2``, and ``v2beta1``): every resource of
every group-version in one answer from ``/api`` (the core group) and one from ``/apis``
(the named groups), chosen by the Accept header as kube-apiserver chooses it.

Why it exists
-------------
client-go (kubectl 1.26 and newer) asks ``/api`` and ``/apis`` for an
``APIGroupDiscoveryList`` first and falls back to the legacy documents of
:mod:`watchcache.apiserver.discovery` only when the answer's Content-Type says it got one.
With the aggregated form a command needs two discovery requests instead of one per
group-version, and the answer carries an ETag a client can revalidate. Kubernetes' code is
the specification followed here; docs/clients.md §8 lists the files.

Negotiation, and why it copies kube-apiserver's quirks
-------------------------------------------------------
The same URL serves three answers (aggregated, legacy, 406), so a client that works
against kube-apiserver must get the same one here. :func:`negotiate` therefore runs the
steps kube-apiserver runs, in its order:

1. The Accept header is split into clauses and sorted as ``goautoneg`` sorts them: by
   ``q``, then a concrete type or subtype before ``*``, with Go's comparison function and,
   for up to 12 clauses, Go's insertion sort (``sort.Sort`` uses it for short slices; the
   comparison is not a strict order, so a different algorithm would reorder some headers).
   Names are case-sensitive, values keep their quotes, ``q`` is read as Go's
   ``ParseFloat(s, 32)`` reads it (an unreadable weight counts as 0). ``q`` only orders:
   a ``q=0`` clause is still a candidate, as in kube-apiserver.
2. The discovery wrapper: the first clause that covers ``application/json`` and converts
   to ``as=APIGroupDiscoveryList;g=apidiscovery.k8s.io`` with a served ``v`` selects the
   aggregated document. A clause without ``as``/``g``/``v`` does not (so plain
   ``application/json`` stays legacy), and a clause with ``sv``, or with a ``stream`` other
   than ``watch``, is skipped, as kube-apiserver's endpoint restrictions skip it.
3. Otherwise the legacy handler negotiates with the default restrictions: the first clause
   covering JSON, YAML or protobuf *without* a conversion gets the legacy document; if no
   clause qualifies the answer is kube-apiserver's 406 (its text lists those three types).
   So ``Accept: text/html`` and a request for a version not served (``v=v3``) get 406,
   exactly as from kube-apiserver, and an empty header gets the legacy document.

Where this differs from kube-apiserver, and why:

* **No protobuf or YAML bodies.** kube-apiserver answers an aggregated clause for
  ``application/vnd.kubernetes.protobuf`` or ``application/yaml`` in that encoding. Here
  only JSON is written, so step 2 considers JSON clauses only, as a kube-apiserver whose
  discovery codec knew only JSON would: ``protobuf;…v=v2…,application/json;…v=v2…``
  still gets aggregated JSON (the next clause), ``protobuf;…v=v2…,application/json`` gets
  the legacy document, and a header that accepts aggregated discovery *only* in protobuf
  or YAML gets 406 (step 3 refuses clauses that ask for a conversion) instead of a body in
  an encoding the client did not ask for. The legacy document stays JSON whatever step 3
  matched, as it always was here.
* **v2beta1 is served.** kube-apiserver 1.33 and 1.34 stop serving it by default
  (feature gate ``AggregatedDiscoveryRemoveBetaType``), from 1.35 for good. Serving it, as
  kube-apiserver 1.30 to 1.32 did, lets client-go 1.26 to 1.29 (which ask for v2beta1 only)
  use aggregated discovery; pass ``served_versions=("v2",)`` for the 1.34 default.
* **Group order.** kube-apiserver orders ``/apis`` by the APIService priorities of its
  built-in groups; every group here has the default priority, so groups come by name, as
  the legacy ``/apis`` here lists them.
* ``pretty`` (and a curl User-Agent) do not indent the body. A header of more than 12
  clauses is sorted by (q, wildcards), keeping header order among equals, where Go's
  pdqsort leaves that order unspecified (and an insertion sort would cost n²).

The document
------------
``APIGroupDiscoveryList{kind, apiVersion, metadata: {}, items}``; each item an
``APIGroupDiscovery{metadata: {name}, versions}`` (the core group's name is ``""`` and so
omitted; ``creationTimestamp`` is ``omitzero`` in the apimachinery the schema follows);
each version ``{version, resources, freshness: "Current"}``; each resource
``{resource, responseKind, scope, singularResource, verbs, shortNames?, categories?,
subresources?}`` and each subresource ``{subresource, responseKind, verbs}``. Members are
in Go's declaration order with its ``omitempty`` rules. A group's versions are sorted as
Kubernetes sorts versions of equal priority (``version.CompareKubeAwareVersionStrings``:
GA, then beta, then alpha, higher numbers first, anything else last by name), the first
being the preferred one; resources by name, subresources by name, as kube-apiserver's
installer sorts its paths. ``responseKind`` has an empty group and version, as
kube-apiserver's does for every resource whose storage does not name another kind: it
copies them from the legacy ``APIResource``, whose installer leaves them empty, meaning
"this group-version" (client-go reads both forms into the same ``APIResource``). Of the
subresources served here only ``/scale`` names another kind (``autoscaling/v1``
``Scale``), as kube-apiserver's scale storages do.

The ETag is kube-apiserver's: upper-case hex SHA-512 of the Go JSON of
``{"metadata":{},"items":[…]}`` (the list before its type is set), quoted. It is the same
for v2 and v2beta1 (``Vary: Accept`` tells caches apart); ``If-None-Match`` equal to it
gets 304, compared as kube-apiserver compares it (the whole header value).

Cost: the documents are built once per distinct set of listings (what discovery shows of
each served resource: :class:`Listing`) and kept in a small LRU, so resources added or
removed while serving are in the next answer without any invalidation; a request then
costs the negotiation and one listing per resource to look the document up. Pure
functions, thread-safe.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import math
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from watchcache.registry.resources import ResourceSpec
from watchcache.wire import gojson
from watchcache.wire.errors import NotAcceptableError

GROUP: Final = "apidiscovery.k8s.io"
KIND: Final = "APIGroupDiscoveryList"
#: The versions served, in the order kube-apiserver 1.30 to 1.32 served them.
SERVED_VERSIONS: Final = ("v2", "v2beta1")
#: Every served version's resources are current: they are this server's own.
FRESHNESS_CURRENT: Final = "Current"
#: How many distinct sets of resources keep their documents.
CACHE_SIZE: Final = 16


class Endpoint(enum.Enum):
    """Which discovery root a document is for: ``/api`` lists the core group only,
    ``/apis`` every named group."""

    CORE = "/api"
    NAMED_GROUPS = "/apis"

    def lists(self, spec: ResourceSpec) -> bool:
        return (spec.group == "") == (self is Endpoint.CORE)


# -- the Accept header, as goautoneg reads it ------------------------------------------------


@dataclass(frozen=True, slots=True)
class AcceptClause:
    """One clause of an Accept header: ``type/subtype;name=value;q=weight``."""

    type: str
    subtype: str
    q: float
    params: Mapping[str, str]


#: Go's ``strconv.ParseFloat`` decimal syntax and its special values; anything else is a
#: syntax error, which goautoneg turns into a weight of 0.
_GO_FLOAT: Final = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
    re.IGNORECASE,
)
_FLOAT32_MAX: Final = 3.4028234663852886e38
#: Go's sort.Sort sorts slices up to this long by insertion (pdqsort's maxInsertion).
_GO_INSERTION_SORT_MAX: Final = 12


def _go_weight(text: str) -> float:
    """``q`` as goautoneg reads it: ``ParseFloat(text, 32)``, 0 when unreadable (the text
    is not trimmed: ``q= 1`` is unreadable), ±Inf beyond float32's range."""
    if _GO_FLOAT.fullmatch(text) is None:
        return 0.0
    value = float(text)
    if math.isnan(value) or math.isinf(value):
        return value
    if abs(value) > _FLOAT32_MAX:
        return float("inf") if value > 0 else float("-inf")
    rounded: float = struct.unpack("<f", struct.pack("<f", value))[0]
    return rounded


def _go_less(a: AcceptClause, b: AcceptClause) -> bool:
    # goautoneg's ordering: a higher q, or a concrete type or subtype against a wildcard.
    # It is not a strict weak order (a concrete type with a lower q can still go before a
    # wildcard), so only the algorithm Go runs reproduces Go's result: see parse_accept.
    return a.q > b.q or (a.type != "*" and b.type == "*") or (a.subtype != "*" and b.subtype == "*")


def parse_accept(header: str) -> list[AcceptClause]:
    """The clauses of ``header`` in the order kube-apiserver tries them (module note, step
    1). A clause without ``/`` (other than a lone ``*``) and a parameter without ``=`` are
    dropped; nothing raises."""
    clauses: list[AcceptClause] = []
    for part in header.split(","):
        media_range, *param_texts = part.strip(" ").split(";")
        pieces = media_range.split("/")
        kind = pieces[0].strip(" ")
        if len(pieces) == 1 and kind == "*":
            subtype = "*"
        elif len(pieces) == 2:
            subtype = pieces[1].strip(" ")
        else:
            continue
        q = 1.0
        params: dict[str, str] = {}
        for text in param_texts:
            name, eq, value = text.partition("=")
            if not eq:
                continue
            name = name.strip(" ")
            if name == "q":
                q = _go_weight(value)
            else:
                params[name] = value.strip(" ")
        clauses.append(AcceptClause(kind, subtype, q, params))
    if len(clauses) <= _GO_INSERTION_SORT_MAX:
        for i in range(1, len(clauses)):
            j = i
            while j > 0 and _go_less(clauses[j], clauses[j - 1]):
                clauses[j], clauses[j - 1] = clauses[j - 1], clauses[j]
                j -= 1
    else:
        # Bounded cost for huge headers; Go's order among such clauses is unspecified.
        clauses.sort(key=lambda c: (-c.q, c.type == "*", c.subtype == "*"))
    return clauses


# -- negotiation ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _MediaType:
    type: str
    subtype: str
    #: Whether kube-apiserver has a stream serializer for it (``stream=watch`` allowed).
    streams: bool

    @property
    def name(self) -> str:
        return f"{self.type}/{self.subtype}"

    def covered_by(self, clause: AcceptClause) -> bool:
        if clause.type == "*":
            return clause.subtype == "*"
        return clause.type == self.type and clause.subtype in (self.subtype, "*")


_JSON: Final = _MediaType("application", "json", streams=True)
_YAML: Final = _MediaType("application", "yaml", streams=False)
_PROTOBUF: Final = _MediaType("application", "vnd.kubernetes.protobuf", streams=True)
#: What the aggregated document is written in here (kube-apiserver: also YAML, protobuf).
_AGGREGATED_MEDIA_TYPES: Final = (_JSON,)
#: What kube-apiserver writes the legacy documents in, in its codec's order; its 406 names
#: them. The legacy documents are JSON here whichever one a clause matched.
_LEGACY_MEDIA_TYPES: Final = (_JSON, _YAML, _PROTOBUF)
_CONVERSION_PARAMS: Final = frozenset({"as", "g", "v"})


def _passes_endpoint_checks(clause: AcceptClause, media: _MediaType) -> bool:
    """The parameter checks both of kube-apiserver's discovery restrictions share: a
    ``stream`` must be ``watch`` on a streaming type, and no server version (``sv``) is
    ever allowed."""
    stream = clause.params.get("stream", "")
    if stream and (not media.streams or stream != "watch"):
        return False
    return not clause.params.get("sv", "")


def _conversion(clause: AcceptClause) -> tuple[str, str, str] | None:
    """The (group, version, kind) a clause asks the answer to be converted to, or None
    when it names none (any one of ``g``/``v``/``as`` makes it a conversion)."""
    params = clause.params
    if _CONVERSION_PARAMS.isdisjoint(params):
        return None
    return params.get("g", ""), params.get("v", ""), params.get("as", "")


def negotiate(accept: str | None, served_versions: Sequence[str] = SERVED_VERSIONS) -> str | None:
    """The ``apidiscovery.k8s.io`` version to answer in, or None for the legacy document.
    Raises :class:`NotAcceptableError` (406) when the header accepts neither (module note),
    ValueError when ``served_versions`` is not a subset of :data:`SERVED_VERSIONS`."""
    if not set(served_versions) <= set(SERVED_VERSIONS):
        raise ValueError(f"served_versions must be among {SERVED_VERSIONS}: {served_versions}")
    header = (accept or "").strip()
    if not header:
        return None
    clauses = parse_accept(header)
    for clause in clauses:
        for media in _AGGREGATED_MEDIA_TYPES:
            if not (media.covered_by(clause) and _passes_endpoint_checks(clause, media)):
                continue
            conversion = _conversion(clause)
            if conversion is not None:
                group, version, kind = conversion
                if group == GROUP and kind == KIND and version in served_versions:
                    return version
    for clause in clauses:
        for media in _LEGACY_MEDIA_TYPES:
            if (
                media.covered_by(clause)
                and _passes_endpoint_checks(clause, media)
                and _conversion(clause) is None
            ):
                return None
    raise NotAcceptableError.accepting(media.name for media in _LEGACY_MEDIA_TYPES)


def content_type(version: str) -> str:
    """The Content-Type of an aggregated answer: the media type with the kind it holds, as
    kube-apiserver writes it and as client-go checks it."""
    return f"{_JSON.name};g={GROUP};v={version};as={KIND}"


# -- the documents -----------------------------------------------------------------------------

#: ``v<major>[alpha|beta<minor>]``, ASCII digits only (Go's ``\\d`` is ASCII).
_KUBE_VERSION: Final = re.compile(r"v([0-9]+)(?:(alpha|beta)([0-9]+))?")
_GO_INT_MAX: Final = (1 << 63) - 1
_STABILITY: Final = {"alpha": 0, "beta": 1, "": 2}


def _go_atoi(digits: str) -> int | None:
    """``strconv.Atoi`` of ASCII digits: None when the value overflows Go's int (checked
    on the length first, so a very long number costs nothing to refuse)."""
    significant = digits.lstrip("0")
    if len(significant) > len(str(_GO_INT_MAX)):
        return None
    value = int(significant or "0")
    return value if value <= _GO_INT_MAX else None


def _kube_version(text: str) -> tuple[int, int, int] | None:
    """(stability, major, minor) of a Kubernetes-like version, or None (a number that
    overflows Go's int makes it unparsable, as in Go)."""
    match = _KUBE_VERSION.fullmatch(text)
    if match is None:
        return None
    major, stability, minor = _go_atoi(match[1]), match[2] or "", _go_atoi(match[3] or "0")
    if major is None or minor is None:
        return None
    return _STABILITY[stability], major, minor


def compare_kube_aware_versions(a: str, b: str) -> int:
    """apimachinery's ``version.CompareKubeAwareVersionStrings``: > 0 when ``a`` is
    preferred to ``b`` (v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > anything not
    Kubernetes-like; among those, the one first by name is preferred)."""
    if a == b:
        return 0
    parsed_a, parsed_b = _kube_version(a), _kube_version(b)
    if parsed_a is None and parsed_b is None:
        return (b > a) - (b < a)
    if parsed_a is None:
        return -1
    if parsed_b is None:
        return 1
    for left, right in zip(parsed_a, parsed_b, strict=True):
        if left != right:
            return left - right
    return 0


#: Subresources whose answers are another kind than the resource's, as kube-apiserver's
#: storages for them declare it (every ``/scale`` answers ``autoscaling/v1`` ``Scale``).
SUBRESOURCE_KINDS: Final = {"scale": ("autoscaling", "v1", "Scale")}


def _response_kind(kind: str, group: str = "", version: str = "") -> dict[str, str]:
    # An empty group and version mean "the group-version listing it" (module note).
    return {"group": group, "version": version, "kind": kind}


class Listing(NamedTuple):
    """What aggregated discovery says about one resource, and nothing more: the documents
    are written from these, and cached by them. Only strings, booleans and tuples, so a
    listing hashes whatever else :class:`ResourceSpec` holds (schemas are mappings), and a
    change to anything discovery does not show (printer columns, fields) rebuilds
    nothing."""

    group: str
    version: str
    name: str
    singular: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...]
    short_names: tuple[str, ...]
    categories: tuple[str, ...]
    #: (name, verbs), by name.
    subresources: tuple[tuple[str, tuple[str, ...]], ...]

    @classmethod
    def of(cls, spec: ResourceSpec) -> Listing:
        return cls(
            spec.group,
            spec.version,
            spec.name,
            spec.singular,
            spec.kind,
            spec.namespaced,
            tuple(spec.verbs),
            tuple(spec.short_names),
            tuple(spec.categories),
            tuple((sub, tuple(spec.subresource_verbs(sub))) for sub in sorted(spec.subresources)),
        )


def _subresource_response_kind(listing: Listing, subresource: str) -> dict[str, str]:
    other = SUBRESOURCE_KINDS.get(subresource)
    if other is None:
        return _response_kind(listing.kind)
    group, version, kind = other
    return _response_kind(kind, group, version)


def _resource_entry(listing: Listing) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": listing.name,
        "responseKind": _response_kind(listing.kind),
        "scope": "Namespaced" if listing.namespaced else "Cluster",
        "singularResource": listing.singular,
        "verbs": list(listing.verbs),
    }
    if listing.short_names:
        entry["shortNames"] = list(listing.short_names)
    if listing.categories:
        entry["categories"] = list(listing.categories)
    if listing.subresources:
        entry["subresources"] = [
            {
                "subresource": name,
                "responseKind": _subresource_response_kind(listing, name),
                "verbs": list(verbs),
            }
            for name, verbs in listing.subresources
        ]
    return entry


def resource_discovery(spec: ResourceSpec) -> dict[str, Any]:
    """One ``APIResourceDiscovery``: the resource with its subresources folded in."""
    return _resource_entry(Listing.of(spec))


def _items(listings: Iterable[Listing]) -> list[dict[str, Any]]:
    by_group: dict[str, dict[str, list[Listing]]] = {}
    for listing in listings:
        by_group.setdefault(listing.group, {}).setdefault(listing.version, []).append(listing)
    items = []
    for group in sorted(by_group):
        versions = by_group[group]
        preferred_first = sorted(
            versions, key=functools.cmp_to_key(compare_kube_aware_versions), reverse=True
        )
        items.append(
            {
                "metadata": {"name": group} if group else {},
                "versions": [
                    {
                        "version": version,
                        "resources": [
                            _resource_entry(listing)
                            for listing in sorted(versions[version], key=lambda r: r.name)
                        ],
                        "freshness": FRESHNESS_CURRENT,
                    }
                    for version in preferred_first
                ],
            }
        )
    return items


def _listings(resources: Iterable[ResourceSpec], endpoint: Endpoint) -> tuple[Listing, ...]:
    # Sorted, so the order resources were configured in does not make another cache key.
    return tuple(sorted(Listing.of(spec) for spec in resources if endpoint.lists(spec)))


def discovery_items(resources: Iterable[ResourceSpec], endpoint: Endpoint) -> list[dict[str, Any]]:
    """The ``APIGroupDiscovery`` items of ``endpoint``: groups by name, each group's
    versions most preferred first, each version's resources by name."""
    return _items(_listings(resources, endpoint))


@dataclass(frozen=True, slots=True)
class AggregatedDocument:
    """One endpoint's aggregated document, ready to send."""

    #: The ``ETag`` header value (quoted), the same for every version.
    etag: str
    #: The body in each served version (``apiVersion`` differs, nothing else).
    bodies: Mapping[str, bytes]


@functools.lru_cache(maxsize=CACHE_SIZE)
def _document(listings: tuple[Listing, ...]) -> AggregatedDocument:
    items = _items(listings)
    digest = hashlib.sha512(gojson.dumpb({"metadata": {}, "items": items})).hexdigest()
    bodies = {
        version: gojson.dumpb(
            {"kind": KIND, "apiVersion": f"{GROUP}/{version}", "metadata": {}, "items": items}
        )
        for version in SERVED_VERSIONS
    }
    return AggregatedDocument(etag=f'"{digest.upper()}"', bodies=bodies)


def aggregated_document(
    resources: Iterable[ResourceSpec], endpoint: Endpoint
) -> AggregatedDocument:
    """``endpoint``'s document for ``resources``, built once per distinct set of
    :class:`Listing` values and then reused: a resource added, removed or changed while
    serving is in the next answer without anything to invalidate, and a change that
    discovery does not show (or one to the other endpoint's groups) costs no rebuild."""
    return _document(_listings(resources, endpoint))


# -- answers --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer for the handler to send as it is."""

    status: int
    body: bytes
    headers: Mapping[str, str]


def answer(
    accept: str | None,
    if_none_match: str | None,
    resources: Iterable[ResourceSpec],
    endpoint: Endpoint,
    *,
    served_versions: Sequence[str] = SERVED_VERSIONS,
) -> Answer | None:
    """What ``GET /api`` or ``GET /apis`` answers when the Accept header does not select
    the legacy document: the aggregated document (200), 304 when ``If-None-Match`` holds
    its ETag, or kube-apiserver's 406. None means: answer the legacy document."""
    try:
        version = negotiate(accept, served_versions)
    except NotAcceptableError as error:
        return Answer(error.code, error.to_json(), {"Content-Type": _JSON.name, **error.headers()})
    if version is None:
        return None
    document = aggregated_document(resources, endpoint)
    headers = {"ETag": document.etag, "Vary": "Accept", "Cache-Control": "public"}
    if if_none_match == document.etag:
        return Answer(304, b"", headers)
    return Answer(200, document.bodies[version], {**headers, "Content-Type": content_type(version)})
