"""Server-side ``meta.k8s.io/v1`` Tables: what ``kubectl get`` prints.

kubectl asks every ``get`` (and ``get -w``) for a Table with
``Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;
g=meta.k8s.io,application/json`` and prints the server's columns verbatim; a plain list
still works but loses every column except NAME and AGE (docs/clients.md §1.2, §1.6). This module
decides whether a request wants a Table (:func:`table_version`) and renders one
(:func:`render_table`) the way kube-apiserver does:

* Columns and cells are those of Kubernetes' printers (``pkg/printers/internalversion``:
  ``printConfigMap``, ``printSecret``, ``printNamespace``, ``printPod``, ``printEvent``),
  computed from the stored JSON (``events.k8s.io`` Events in their core form, as
  Kubernetes prints its internal Event for both APIs). The server always renders the wide
  form (``GenerateOptions{Wide: true}``); kubectl hides ``priority > 0`` columns unless
  ``-o wide``. A resource without a printer gets Kubernetes' default columns, Name and
  Created At.
* Cells read the object as the apiserver's internal version sees it after decoding and
  defaulting: a Secret without ``type`` is ``Opaque``, a Namespace without ``status.phase``
  is ``Active``, and a pod's first IP is ``status.podIP`` before ``status.podIPs``.
* Ages are :func:`human_duration` of ``now - creationTimestamp`` (apimachinery's
  ``duration.HumanDuration``), ``<unknown>`` without a timestamp. ``now`` is a parameter,
  so output is deterministic under test.
* Each row carries ``object``: by default (``includeObject=Metadata``) a
  ``PartialObjectMetadata`` holding the object's ``metadata`` verbatim (kubectl takes the
  ``-A`` NAMESPACE column from it); ``Object`` embeds the whole object, ``None`` writes null.
* ``metadata`` is the list's ``ListMeta`` (``resourceVersion``, ``continue``,
  ``remainingItemCount``); a single object's Table carries the object's resourceVersion.
* In a watch stream only the first event's Table has ``columnDefinitions``; later ones
  write ``"columnDefinitions":null`` (``with_columns=False``), as the Go watch encoder does.

Wire shape (Go member order; ``conditions`` only for finished pods)::

    {"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{...},
     "columnDefinitions":[{"name","type","format","description","priority"}...],
     "rows":[{"cells":[...],"conditions":[...],"object":{"kind":"PartialObjectMetadata",
              "apiVersion":"meta.k8s.io/v1","metadata":{...}}}]}

Cost: one ``json.loads`` per object (the cache's values are JSON bytes), the cells, and one
``json.dumps`` of the whole Table; 500 configmaps take a few milliseconds. Pure functions,
thread-safe; nothing is cached between calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from watchcache.registry.event_conversion import EVENT_CONVERSION
from watchcache.registry.resources import ResourceSpec
from watchcache.wire import gojson
from watchcache.wire.errors import BadRequestError

TABLE_GROUP: Final = "meta.k8s.io"
#: The Table versions kube-apiserver converts to (``v=`` in the Accept header).
TABLE_VERSIONS: Final = ("v1", "v1beta1")
#: ``includeObject`` values (``metav1.IncludeObjectPolicy``).
INCLUDE_OBJECT_POLICIES: Final = ("None", "Metadata", "Object")

# -- content negotiation ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MediaRange:
    """One clause of an Accept header: ``type/subtype;param=value;q=weight``."""

    type: str
    subtype: str
    params: Mapping[str, str]
    q: float


def parse_accept(header: str) -> list[MediaRange]:
    """The clauses of ``header``, most preferred first: by weight, then exact types before
    wildcards, otherwise in header order. Lenient like Kubernetes' ``goautoneg``: spaces
    around ``,``/``;``/``=`` are ignored, a malformed clause is dropped, a lone ``*`` means
    ``*/*``, an unreadable ``q`` counts as 0. Types and parameter names are lowercased,
    values kept (minus surrounding quotes)."""
    ranges: list[MediaRange] = []
    for clause in header.split(","):
        media, *param_texts = clause.split(";")
        kind, _, subtype = media.strip().lower().partition("/")
        kind, subtype = kind.strip(), subtype.strip()
        if kind == "*" and not subtype:
            subtype = "*"
        if not kind or not subtype or "/" in subtype:
            continue
        params: dict[str, str] = {}
        q = 1.0
        for text in param_texts:
            key, eq, value = text.partition("=")
            key, value = key.strip().lower(), value.strip()
            if not eq or not key:
                continue
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
            else:
                params[key] = value
        ranges.append(MediaRange(kind, subtype, params, q))
    # Stable: equal preferences keep the header's order.
    ranges.sort(key=lambda r: (-r.q, r.type == "*", r.subtype == "*"))
    return ranges


def table_version(accept_header: str) -> str | None:
    """The Table version (``"v1"`` or ``"v1beta1"``) the first acceptable clause of
    ``accept_header`` asks for, or None when it accepts plain JSON first (or nothing we
    serve; the caller then answers JSON, as for a missing header).

    As kube-apiserver's negotiation: clauses are tried in preference order and a clause
    applies if its type covers ``application/json`` (``application/json``, ``application/*``,
    ``*/*``). Without ``as``/``g``/``v`` it means plain JSON. With them, only ``as=Table``,
    ``g=meta.k8s.io`` and a Table version are served here; any other conversion
    (``as=PartialObjectMetadataList``, a missing ``v``...) skips to the next clause, as does
    a ``stream`` other than ``watch``. ``q=0`` clauses are never acceptable. Only JSON is
    served, so a YAML or protobuf clause is skipped too, where Kubernetes would answer in
    that encoding."""
    for clause in parse_accept(accept_header):
        if clause.q <= 0:
            continue
        if not (
            (clause.type == "application" and clause.subtype in ("json", "*"))
            or (clause.type == "*" and clause.subtype == "*")
        ):
            continue
        params = clause.params
        if params.get("stream", "watch") != "watch":
            continue
        if not ({"as", "g", "v"} & params.keys()):
            return None
        if (
            params.get("as") == "Table"
            and params.get("g") == TABLE_GROUP
            and params.get("v", "") in TABLE_VERSIONS
        ):
            return params["v"]
    return None


def wants_table(accept_header: str) -> bool:
    """Whether the response should be a Table (:func:`table_version` is not None)."""
    return table_version(accept_header) is not None


# -- durations and timestamps -----------------------------------------------------------------

_SECOND_US: Final = 1_000_000
_ZERO_TIME: Final = datetime(1, 1, 1, tzinfo=UTC)


def human_duration(elapsed: timedelta) -> str:
    """apimachinery's ``duration.HumanDuration``: 2-3 significant figures, exactly as Go
    rounds them (all truncation). Up to 1s in the future counts as now (``0s``, for clock
    skew), more is ``<invalid>``; then ``Ns`` below 2 minutes, ``NmSs`` below 10 minutes,
    ``Nm`` below 3 hours, ``NhMm`` below 8 hours, ``Nh`` below 2 days, ``NdHh`` below 8
    days, ``Nd`` below 2 years, ``NyDd`` below 8 years, then ``Ny``. A zero part is left out
    (``2m``, not ``2m0s``)."""
    micros = (elapsed.days * 86_400 + elapsed.seconds) * _SECOND_US + elapsed.microseconds
    # Go's int(d.Seconds()) truncates toward zero.
    seconds = micros // _SECOND_US if micros >= 0 else -(-micros // _SECOND_US)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return _two_units(minutes, "m", seconds % 60, "s")
    if minutes < 180:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        return _two_units(hours, "h", minutes % 60, "m")
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return _two_units(days, "d", hours % 24, "h")
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        return _two_units(years, "y", days % 365, "d")
    return f"{years}y"


def _two_units(big: int, big_unit: str, rest: int, rest_unit: str) -> str:
    """``2m5s``; a zero rest is left out (``2m``)."""
    return f"{big}{big_unit}" if rest == 0 else f"{big}{big_unit}{rest}{rest_unit}"


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 ``metav1.Time`` (``Z`` or an offset), None when missing, unreadable or
    Go's zero time. Naive values are taken as UTC."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return None if parsed == _ZERO_TIME else parsed


def since(timestamp: object, now: datetime) -> str:
    """Kubernetes' ``translateTimestampSince``: the age of ``timestamp`` at ``now``."""
    when = parse_time(timestamp)
    if when is None:
        return "<unknown>"
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return human_duration(now - when)


# -- columns and cells ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Column:
    """``metav1.TableColumnDefinition``. ``priority > 0`` columns show only with ``-o wide``."""

    name: str
    type: str
    description: str
    format: str = ""
    priority: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


_NAME = Column(
    "Name",
    "string",
    "Name of the object: unique within its namespace, or within the cluster for a "
    "cluster-scoped resource.",
    format="name",
)
_AGE = Column("Age", "string", "Time since the object was created (metadata.creationTimestamp).")

_EVENT_COLUMNS: Final = (
    Column("Last Seen", "string", "Time since the event was last seen."),
    Column("Type", "string", "Type of the event (Normal, Warning)."),
    Column("Reason", "string", "Why the event happened, in one word."),
    Column("Object", "string", "The object the event is about, as kind/name."),
    Column("Subobject", "string", "The part of the object the event is about.", priority=1),
    Column("Source", "string", "The component that reported the event.", priority=1),
    Column("Message", "string", "What happened, for people."),
    Column("First Seen", "string", "Time since the event was first seen.", priority=1),
    Column("Count", "string", "How many times the event happened.", priority=1),
    Column(
        "Name",
        "string",
        "Name of the Event object.",
        format="name",
        priority=1,
    ),
)
#: Column sets by resource, in Kubernetes' order and with its types.
COLUMNS: Final[Mapping[str, tuple[Column, ...]]] = {
    "configmaps": (
        _NAME,
        Column("Data", "string", "Number of keys in data and binaryData."),
        _AGE,
    ),
    "secrets": (
        _NAME,
        Column("Type", "string", "Type of the secret, which tells how to use its data."),
        Column("Data", "string", "Number of keys in data."),
        _AGE,
    ),
    "namespaces": (
        _NAME,
        Column("Status", "string", "Lifecycle phase of the namespace."),
        _AGE,
    ),
    "pods": (
        _NAME,
        Column("Ready", "string", "Containers ready to serve, out of the pod's containers."),
        Column(
            "Status",
            "string",
            "The pod's phase, or why its containers are not running normally.",
        ),
        Column(
            "Restarts",
            "string",
            "Restarts of the pod's containers, and how long ago the last one was.",
        ),
        _AGE,
        Column("IP", "string", "The pod's first IP address.", priority=1),
        Column("Node", "string", "The node the pod is bound to.", priority=1),
        Column(
            "Nominated Node",
            "string",
            "The node preemption nominated for the pod before it is bound.",
            priority=1,
        ),
        Column(
            "Readiness Gates",
            "string",
            "Readiness gates whose condition is True, out of the pod's readiness gates.",
            priority=1,
        ),
    ),
    "events": _EVENT_COLUMNS,
    # events.k8s.io Events print as the core ones: both are the internal Event.
    "events.events.k8s.io": _EVENT_COLUMNS,
    "leases.coordination.k8s.io": (
        _NAME,
        Column("Holder", "string", "The identity of the lease's current holder."),
        _AGE,
    ),
}
#: Kubernetes' default TableConvertor, for a resource without a printer.
DEFAULT_COLUMNS: Final = (
    _NAME,
    Column("Created At", "date", "Creation time of the object (metadata.creationTimestamp)."),
)

_Object = Mapping[str, Any]
#: A row's object: JSON text as the cache stores it, or already decoded.
Source = Mapping[str, Any] | bytes | bytearray | str
_Row = tuple[list[Any], list[dict[str, str]] | None]


def _dict(value: object) -> _Object:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> Sequence[Any]:
    return value if isinstance(value, list) else []


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _configmap_cells(obj: _Object, now: datetime) -> _Row:
    meta = _dict(obj.get("metadata"))
    count = len(_dict(obj.get("data"))) + len(_dict(obj.get("binaryData")))
    return [meta.get("name", ""), count, since(meta.get("creationTimestamp"), now)], None


def _secret_cells(obj: _Object, now: datetime) -> _Row:
    meta = _dict(obj.get("metadata"))
    # Decoding merges stringData into data (it is never stored, but a write-through object
    # may still carry it) and defaulting makes an empty type Opaque.
    keys = _dict(obj.get("data")).keys() | _dict(obj.get("stringData")).keys()
    kind = obj.get("type") or "Opaque"
    return [meta.get("name", ""), kind, len(keys), since(meta.get("creationTimestamp"), now)], None


def _namespace_cells(obj: _Object, now: datetime) -> _Row:
    meta = _dict(obj.get("metadata"))
    phase = _dict(obj.get("status")).get("phase") or "Active"  # v1 defaulting
    return [meta.get("name", ""), phase, since(meta.get("creationTimestamp"), now)], None


def _default_cells(obj: _Object, _now: datetime) -> _Row:
    meta = _dict(obj.get("metadata"))
    created = parse_time(meta.get("creationTimestamp"))
    # Go formats the zero time too: RFC 3339 in UTC.
    stamp = "0001-01-01T00:00:00Z"
    if created is not None:
        stamp = created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [meta.get("name", ""), stamp], None


_POD_SUCCEEDED: Final = {
    "type": "Completed",
    "status": "True",
    "reason": "Succeeded",
    "message": "The pod has completed successfully.",
}
_POD_FAILED: Final = {
    "type": "Completed",
    "status": "True",
    "reason": "Failed",
    "message": "The pod failed.",
}


def _later(current: datetime | None, state: _Object) -> datetime | None:
    """The later of ``current`` and the ``finishedAt`` of ``lastState.terminated``."""
    terminated = _dict(state.get("lastState")).get("terminated")
    if terminated is None:
        return current
    finished = parse_time(_dict(terminated).get("finishedAt"))
    if finished is None or (current is not None and finished <= current):
        return current
    return finished


def _condition_true(conditions: Sequence[Any], kind: str) -> bool:
    return any(
        _dict(c).get("type") == kind and _dict(c).get("status") == "True" for c in conditions
    )


def _pod_cells(pod: _Object, now: datetime) -> _Row:
    """Kubernetes' ``printPod``, step for step: READY counts running-and-ready containers
    (plus started sidecars), STATUS starts as the phase (or ``status.reason``) and is
    overridden by the first failing init container, else by the first container (in
    ``containerStatuses`` order) that is waiting or terminated with a reason, then by
    ``Terminating`` for a pod being deleted; RESTARTS adds ``(AGE ago)`` of the last
    termination."""
    meta = _dict(pod.get("metadata"))
    spec = _dict(pod.get("spec"))
    status = _dict(pod.get("status"))
    conditions = _list(status.get("conditions"))
    init_specs = [_dict(c) for c in _list(spec.get("initContainers"))]
    sidecars = {c.get("name") for c in init_specs if c.get("restartPolicy") == "Always"}

    total = len(_list(spec.get("containers"))) + sum(
        1 for c in init_specs if c.get("restartPolicy") == "Always"
    )
    ready = 0
    restarts = sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for condition in conditions:
        if _dict(condition).get("type") == "PodScheduled" and (
            _dict(condition).get("reason") == "SchedulingGated"
        ):
            reason = "SchedulingGated"

    initializing = False
    for index, raw in enumerate(_list(status.get("initContainerStatuses"))):
        container = _dict(raw)
        count = _int(container.get("restartCount"))
        restarts += count
        last_restart = _later(last_restart, container)
        is_sidecar = container.get("name") in sidecars
        if is_sidecar:
            sidecar_restarts += count
            last_sidecar_restart = _later(last_sidecar_restart, container)
        state = _dict(container.get("state"))
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and _int(_dict(terminated).get("exitCode")) == 0:
            continue
        if is_sidecar and container.get("started") is True:
            if container.get("ready") is True:
                ready += 1
            continue
        if terminated is not None:
            ended = _dict(terminated)
            if ended.get("reason"):
                reason = f"Init:{ended['reason']}"
            elif _int(ended.get("signal")):
                reason = f"Init:Signal:{_int(ended.get('signal'))}"
            else:
                reason = f"Init:ExitCode:{_int(ended.get('exitCode'))}"
        elif (why := _dict(waiting).get("reason")) and why != "PodInitializing":
            reason = f"Init:{why}"
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _condition_true(conditions, "Initialized"):
        restarts, last_restart = sidecar_restarts, last_sidecar_restart
        has_running = False
        # Backwards, so the first container in the list has the last word on STATUS.
        for raw in reversed(_list(status.get("containerStatuses"))):
            container = _dict(raw)
            restarts += _int(container.get("restartCount"))
            last_restart = _later(last_restart, container)
            state = _dict(container.get("state"))
            waiting, terminated = _dict(state.get("waiting")), state.get("terminated")
            ended = _dict(terminated)
            if waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None and ended.get("reason"):
                reason = ended["reason"]
            elif terminated is not None:
                signal = _int(ended.get("signal"))
                exit_code = _int(ended.get("exitCode"))
                reason = f"Signal:{signal}" if signal else f"ExitCode:{exit_code}"
            elif container.get("ready") is True and state.get("running") is not None:
                has_running = True
                ready += 1
        # Some containers completed but one still runs: the pod is not "Completed".
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(conditions, "Ready") else "NotReady"

    if meta.get("deletionTimestamp") is not None:
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration(_aware(now) - last_restart)} ago)"

    ip = status.get("podIP") or _dict(next(iter(_list(status.get("podIPs"))), None)).get("ip")
    gates = _list(spec.get("readinessGates"))
    gates_text = "<none>"
    if gates:
        by_type: dict[Any, Any] = {}
        for condition in conditions:
            by_type.setdefault(_dict(condition).get("type"), _dict(condition).get("status"))
        passed = sum(1 for g in gates if by_type.get(_dict(g).get("conditionType")) == "True")
        gates_text = f"{passed}/{len(gates)}"

    cells = [
        meta.get("name", ""),
        f"{ready}/{total}",
        reason,
        restarts_text,
        since(meta.get("creationTimestamp"), now),
        ip or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_text,
    ]
    row_conditions = None
    if phase == "Succeeded":
        row_conditions = [dict(_POD_SUCCEEDED)]
    elif phase == "Failed":
        row_conditions = [dict(_POD_FAILED)]
    return cells, row_conditions


def _aware(now: datetime) -> datetime:
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def _event_cells(event: _Object, now: datetime) -> _Row:
    # printEvent: a new-API event has eventTime instead of the timestamps, and a series
    # instead of the count.
    first = since(event.get("firstTimestamp"), now)
    if parse_time(event.get("firstTimestamp")) is None:
        first = since(event.get("eventTime"), now)
    last = since(event.get("lastTimestamp"), now)
    if parse_time(event.get("lastTimestamp")) is None:
        last = first
    count = _int(event.get("count"))
    series = event.get("series")
    if isinstance(series, Mapping):
        last = since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1
    involved = _dict(event.get("involvedObject"))
    kind = str(involved.get("kind") or "").lower()
    name = str(involved.get("name") or "")
    target = f"{kind}/{name}" if name else kind
    source = _dict(event.get("source"))
    component = str(source.get("component") or event.get("reportingComponent") or "")
    instance = str(source.get("host") or event.get("reportingInstance") or "")
    return [
        last,
        event.get("type", ""),
        event.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        f"{component}, {instance}" if instance else component,
        str(event.get("message") or "").strip(),
        first,
        count,
        _dict(event.get("metadata")).get("name", ""),
    ], None


def _events_v1_cells(event: _Object, now: datetime) -> _Row:
    # kube-apiserver prints the internal Event whichever API is read: the core form's row.
    core = dict(event)
    EVENT_CONVERSION.to_storage(core)
    return _event_cells(core, now)


def _lease_cells(lease: _Object, now: datetime) -> _Row:
    meta = _dict(lease.get("metadata"))
    holder = _dict(lease.get("spec")).get("holderIdentity") or ""
    return [meta.get("name", ""), holder, since(meta.get("creationTimestamp"), now)], None


_CELLS: Final[Mapping[str, Callable[[_Object, datetime], _Row]]] = {
    "configmaps": _configmap_cells,
    "secrets": _secret_cells,
    "namespaces": _namespace_cells,
    "pods": _pod_cells,
    "events": _event_cells,
    "events.events.k8s.io": _events_v1_cells,
    "leases.coordination.k8s.io": _lease_cells,
}


def columns(spec: ResourceSpec) -> tuple[Column, ...]:
    """The Table columns of ``spec``'s resource: its declared printer columns after Name,
    else Kubernetes' printer for a built-in kind, else Kubernetes' defaults."""
    if spec.printer_columns:
        return (
            _NAME,
            *(
                Column(c.name, c.type, c.description, c.format, c.priority)
                for c in spec.printer_columns
            ),
        )
    return COLUMNS.get(spec.group_resource, DEFAULT_COLUMNS)


def row_cells(spec: ResourceSpec, obj: Mapping[str, Any], now: datetime) -> list[Any]:
    """The cells of one object's row, one per column of :func:`columns`."""
    return _cells_of(spec)(obj, now)[0]


def _cells_of(spec: ResourceSpec) -> Callable[[_Object, datetime], _Row]:
    if spec.printer_columns:
        declared = spec.printer_columns

        def cells(obj: _Object, now: datetime) -> _Row:
            name = _dict(obj.get("metadata")).get("name", "")
            return [name, *(_column_cell(obj, c.json_path, c.type, now) for c in declared)], None

        return cells
    return _CELLS.get(spec.group_resource, _default_cells)


def _column_cell(obj: _Object, json_path: str, kind: str, now: datetime) -> Any:
    """A declared column's cell: the value at ``json_path``; a ``date`` is shown as its
    age, as the CRD table convertor shows it; a path that finds nothing gives None."""
    value = json_path_value(obj, json_path)
    if kind == "date" and value is not None:
        return since(value, now)
    if isinstance(value, Mapping | list):
        return gojson.dumps(value)
    return value


_PATH_STEP: Final = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-]+)
      | \[(?P<index>-?[0-9]+)\]
      | \[\?\(@\.(?P<key>[A-Za-z0-9_\-.]+)\s*==\s*(?P<quote>['"])(?P<value>.*?)(?P=quote)\)\]""",
    re.VERBOSE,
)


def json_path_value(obj: Any, json_path: str) -> Any:
    """The value a printer column's JSONPath (``.spec.replicas``, ``.items[0].x``,
    ``.status.conditions[?(@.type=="Ready")].status``) selects; the first match of a filter;
    None when the path selects nothing or uses JSONPath beyond these steps."""
    path = json_path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    path = path.removeprefix("$")
    current: Any = obj
    position = 0
    while position < len(path):
        step = _PATH_STEP.match(path, position)
        if step is None:
            return None
        position = step.end()
        if step["field"] is not None:
            if not isinstance(current, Mapping) or step["field"] not in current:
                return None
            current = current[step["field"]]
        elif step["index"] is not None:
            index = int(step["index"])
            if not isinstance(current, list) or not -len(current) <= index < len(current):
                return None
            current = current[index]
        else:
            if not isinstance(current, list):
                return None
            matches = [
                item
                for item in current
                if str(json_path_value(item, "." + step["key"])) == step["value"]
            ]
            if not matches:
                return None
            current = matches[0]
    return current


# -- the Table --------------------------------------------------------------------------------

_LIST_META_KEYS: Final = ("resourceVersion", "continue", "remainingItemCount")


def _load(value: Source) -> Mapping[str, Any]:
    obj = value if isinstance(value, Mapping) else json.loads(value)
    if not isinstance(obj, Mapping):
        raise ValueError("a Table row's object is not a JSON object")
    return obj


def build_table(
    spec: ResourceSpec,
    objects: Iterable[Source],
    *,
    list_meta: Mapping[str, object],
    now: datetime,
    include_object: str = "Metadata",
    with_columns: bool = True,
    version: str = "v1",
) -> dict[str, Any]:
    """The Table as a dict in Go's member order (see :func:`render_table`)."""
    if version not in TABLE_VERSIONS:
        raise ValueError(f"no Table exists in group version {TABLE_GROUP}/{version}")
    policy = include_object or "Metadata"
    if policy not in INCLUDE_OBJECT_POLICIES:
        raise BadRequestError(f"unrecognized includeObject value: {gojson.dumps(policy)}")
    api_version = f"{TABLE_GROUP}/{version}"
    cells_of = _cells_of(spec)
    rows: list[dict[str, Any]] = []
    for value in objects:
        obj = _load(value)
        cells, conditions = cells_of(obj, now)
        row: dict[str, Any] = {"cells": cells}
        if conditions:
            row["conditions"] = conditions
        if policy == "Metadata":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": api_version,
                "metadata": _dict(obj.get("metadata")),
            }
        elif policy == "Object":
            row["object"] = {
                "kind": spec.kind,
                "apiVersion": spec.api_version,
                **{k: v for k, v in obj.items() if k not in ("kind", "apiVersion")},
            }
        else:
            row["object"] = None
        rows.append(row)
    metadata = {k: list_meta[k] for k in _LIST_META_KEYS if list_meta.get(k) not in (None, "")}
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": metadata,
        "columnDefinitions": [c.to_dict() for c in columns(spec)] if with_columns else None,
        "rows": rows,
    }


def render_table(
    spec: ResourceSpec,
    objects: Iterable[Source],
    *,
    list_meta: Mapping[str, object],
    now: datetime,
    include_object: str = "Metadata",
    with_columns: bool = True,
    version: str = "v1",
) -> bytes:
    """A ``meta.k8s.io`` Table of ``objects`` (JSON bytes as the cache stores them, or
    dicts), one row each, in order.

    ``list_meta``: the list's ``resourceVersion``/``continue``/``remainingItemCount`` (empty
    ones are left out); for a single object or a watch event, its resourceVersion.
    ``include_object``: the ``includeObject`` query parameter (``Metadata`` when empty);
    anything else is a :class:`BadRequestError` (400), as in Kubernetes. ``with_columns``:
    False for every watch event after the first. ``version``: from :func:`table_version`.
    Raises ValueError for an object that is not JSON."""
    return gojson.dumpb(
        build_table(
            spec,
            objects,
            list_meta=list_meta,
            now=now,
            include_object=include_object,
            with_columns=with_columns,
            version=version,
        )
    )


def render_table_event(
    spec: ResourceSpec,
    event_type: str,
    obj: Source,
    *,
    now: datetime,
    with_columns: bool,
    include_object: str = "Metadata",
    version: str = "v1",
) -> bytes:
    """One watch-stream line ``{"type":...,"object":<Table of one row>}\\n`` for a Table
    watch. The Table's resourceVersion is the object's; pass ``with_columns=True`` for the
    stream's first event only."""
    loaded = _load(obj)
    table = build_table(
        spec,
        [loaded],
        list_meta={"resourceVersion": _dict(loaded.get("metadata")).get("resourceVersion")},
        now=now,
        include_object=include_object,
        with_columns=with_columns,
        version=version,
    )
    return gojson.dumpb({"type": event_type, "object": table}) + b"\n"
