"""Server-side Tables: content negotiation, Kubernetes' printers (printPod, printConfigMap,
printSecret, printNamespace), apimachinery's HumanDuration, and the Table wire shape."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from watchcache.apiserver import tables
from watchcache.registry.resources import CONFIGMAPS, NAMESPACES, PODS, SECRETS, ResourceSpec
from watchcache.wire.errors import BadRequestError

NOW = datetime(2026, 11, 21, 19, 30, 0, tzinfo=UTC)
KUBECTL_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)


def ago(**kwargs: float) -> str:
    """The RFC 3339 timestamp that long before NOW."""
    return (NOW - timedelta(**kwargs)).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- HumanDuration ----------------------------------------------------------------------------

D = timedelta


@pytest.mark.parametrize(
    ("elapsed", "expected"),
    [
        (D(seconds=-3), "<invalid>"),
        (D(seconds=-2), "<invalid>"),
        (D(seconds=-1.9), "0s"),  # within Kubernetes' tolerated clock skew
        (D(seconds=-1), "0s"),
        (D(seconds=-0.5), "0s"),
        (D(0), "0s"),
        (D(seconds=0.999), "0s"),
        (D(seconds=59), "59s"),
        (D(seconds=60), "60s"),
        (D(seconds=119.9), "119s"),
        (D(seconds=120), "2m"),
        (D(seconds=123), "2m3s"),
        (D(minutes=9, seconds=59), "9m59s"),
        (D(minutes=10), "10m"),
        (D(minutes=10, seconds=59), "10m"),
        (D(minutes=179, seconds=59), "179m"),
        (D(hours=3), "3h"),
        (D(hours=3, minutes=5), "3h5m"),
        (D(hours=7, minutes=59, seconds=59), "7h59m"),
        (D(hours=8), "8h"),
        (D(hours=47, minutes=59), "47h"),
        (D(hours=48), "2d"),
        (D(hours=50), "2d2h"),
        (D(days=7, hours=23, minutes=59), "7d23h"),
        (D(days=8), "8d"),
        (D(days=729, hours=23), "729d"),
        (D(days=730), "2y"),
        (D(days=731), "2y1d"),
        (D(days=365 * 8 - 1), "7y364d"),
        (D(days=365 * 8), "8y"),
        (D(days=365 * 8 + 200), "8y"),
        (D(days=365 * 100), "100y"),
    ],
)
def test_human_duration_matches_apimachinery(elapsed: timedelta, expected: str) -> None:
    assert tables.human_duration(elapsed) == expected


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [
        (None, "<unknown>"),
        ("", "<unknown>"),
        ("not a time", "<unknown>"),
        ("0001-01-01T00:00:00Z", "<unknown>"),  # Go's zero time
        (ago(minutes=7), "7m"),
        ("2026-11-21T20:29:00+01:00", "60s"),  # offsets, as the Python client writes them
        ((NOW + timedelta(seconds=30)).isoformat(), "<invalid>"),
    ],
)
def test_age_of_a_timestamp(timestamp: object, expected: str) -> None:
    assert tables.since(timestamp, NOW) == expected


# -- content negotiation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "version"),
    [
        (KUBECTL_ACCEPT, "v1"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", "v1beta1"),
        ("application/json", None),
        ("application/json, */*", None),  # kubectl's discovery and -o json requests
        ("*/*", None),
        ("", None),
        ("application/json ; as=Table ; v=v1 ; g=meta.k8s.io", "v1"),
        ("application/json;as=Table;v=v1;g=meta.k8s.io;stream=watch", "v1"),
        ("application/json;as=Table;v=v1;g=meta.k8s.io;stream=other, application/json", None),
        ("APPLICATION/JSON;AS=Table;V=v1;G=meta.k8s.io", "v1"),
        ('application/json;as="Table";v="v1";g="meta.k8s.io"', "v1"),
        ("*/*;as=Table;v=v1;g=meta.k8s.io", "v1"),
        ("application/*;as=Table;v=v1;g=meta.k8s.io", "v1"),
        # Weights decide before order.
        ("application/json;q=0.5,application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),
        ("application/json;as=Table;v=v1;g=meta.k8s.io;q=0.5,application/json", None),
        ("application/json;as=Table;v=v1;g=meta.k8s.io;q=0, application/json", None),
        ("application/json;as=Table;v=v1;g=meta.k8s.io;q=bad, application/json", None),
        # Same weight: exact types before wildcards.
        ("*/*;as=Table;v=v1;g=meta.k8s.io, application/json", None),
        # Conversions we do not serve skip to the next clause.
        ("application/json;as=Table;g=meta.k8s.io, application/json", None),
        ("application/json;as=Table;v=v2;g=meta.k8s.io", None),
        ("application/json;as=Table;v=v1;g=example.com", None),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json", None),
        # Encodings we do not serve are skipped.
        ("text/html, application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),
        ("application/yaml;as=Table;v=v1;g=meta.k8s.io, application/json", None),
        (
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,"
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
            "v1beta1",
        ),
        # Malformed clauses are dropped.
        ("garbage, application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),
        ("application/json;pretty=1;as=Table;v=v1;g=meta.k8s.io", "v1"),
    ],
)
def test_table_version_from_accept(accept: str, version: str | None) -> None:
    assert tables.table_version(accept) == version
    assert tables.wants_table(accept) is (version is not None)


def test_parse_accept_orders_by_weight_then_specificity_then_position() -> None:
    ranges = tables.parse_accept("text/*;q=0.8, */*;q=0.8, text/plain;q=0.8, a/b, *")
    assert [(r.type, r.subtype, r.q) for r in ranges] == [
        ("a", "b", 1.0),
        ("*", "*", 1.0),
        ("text", "plain", 0.8),
        ("text", "*", 0.8),
        ("*", "*", 0.8),
    ]


# -- the Table wire shape ---------------------------------------------------------------------

CM_JSON = (
    b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-000","namespace":"default",'
    b'"uid":"6f3c0c1e-2f43-4a5e-9a55-0d0d5d0c3f11","resourceVersion":"5",'
    b'"creationTimestamp":"2026-11-21T19:23:00Z","labels":{"app":"a<b>"}},'
    b'"data":{"k1":"v1","k2":"v2"},"binaryData":{"b":"AAE="}}'
)

CM_TABLE = (
    '{"kind":"Table","apiVersion":"meta.k8s.io/v1",'
    '"metadata":{"resourceVersion":"126","continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ",'
    '"remainingItemCount":70},'
    '"columnDefinitions":['
    '{"name":"Name","type":"string","format":"name","description":"Name of the object: unique '
    'within its namespace, or within the cluster for a cluster-scoped resource.","priority":0},'
    '{"name":"Data","type":"string","format":"","description":"Number of keys in data and '
    'binaryData.","priority":0},'
    '{"name":"Age","type":"string","format":"","description":"Time since the object was '
    'created (metadata.creationTimestamp).","priority":0}],'
    '"rows":[{"cells":["cm-000",3,"7m"],'
    '"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",'
    '"metadata":{"name":"cm-000","namespace":"default",'
    '"uid":"6f3c0c1e-2f43-4a5e-9a55-0d0d5d0c3f11","resourceVersion":"5",'
    '"creationTimestamp":"2026-11-21T19:23:00Z","labels":{"app":"a\\u003cb\\u003e"}}}}]}'
)

LIST_META = {
    "resourceVersion": "126",
    "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ",
    "remainingItemCount": 70,
}


def test_configmap_table_is_byte_exact() -> None:
    body = tables.render_table(CONFIGMAPS, [CM_JSON], list_meta=LIST_META, now=NOW)
    assert body.decode() == CM_TABLE


def test_dicts_and_json_bytes_render_the_same() -> None:
    as_dict = tables.render_table(CONFIGMAPS, [json.loads(CM_JSON)], list_meta=LIST_META, now=NOW)
    as_text = tables.render_table(CONFIGMAPS, [CM_JSON.decode()], list_meta=LIST_META, now=NOW)
    assert as_dict == as_text == CM_TABLE.encode()


@pytest.mark.parametrize(
    ("list_meta", "expected"),
    [
        ({"resourceVersion": "9"}, {"resourceVersion": "9"}),
        (
            {"remainingItemCount": 0, "continue": "t", "resourceVersion": "9"},
            {"resourceVersion": "9", "continue": "t", "remainingItemCount": 0},
        ),
        (
            {"resourceVersion": "9", "continue": "", "remainingItemCount": None},
            {"resourceVersion": "9"},
        ),
        ({}, {}),
    ],
)
def test_list_meta_in_go_order_without_empty_members(
    list_meta: dict[str, object], expected: dict[str, object]
) -> None:
    table = tables.build_table(CONFIGMAPS, [], list_meta=list_meta, now=NOW)
    assert list(table["metadata"].items()) == list(expected.items())


def test_an_empty_list_has_rows_as_an_empty_array() -> None:
    body = tables.render_table(NAMESPACES, [], list_meta={"resourceVersion": "3"}, now=NOW)
    assert body.endswith(b',"rows":[]}')


def test_v1beta1_tables_and_their_row_objects_carry_v1beta1() -> None:
    table = tables.build_table(CONFIGMAPS, [CM_JSON], list_meta={}, now=NOW, version="v1beta1")
    assert table["apiVersion"] == "meta.k8s.io/v1beta1"
    assert table["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"


def test_unknown_table_version_is_refused() -> None:
    with pytest.raises(ValueError, match="no Table exists"):
        tables.build_table(CONFIGMAPS, [], list_meta={}, now=NOW, version="v2")


@pytest.mark.parametrize("policy", ["Metadata", ""])
def test_include_object_metadata_keeps_the_metadata_verbatim(policy: str) -> None:
    table = tables.build_table(CONFIGMAPS, [CM_JSON], list_meta={}, now=NOW, include_object=policy)
    assert table["rows"][0]["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": json.loads(CM_JSON)["metadata"],
    }


def test_include_object_object_embeds_the_whole_object_with_its_kind() -> None:
    without_kind = {"metadata": {"name": "x"}, "data": {"a": "b"}}
    table = tables.build_table(
        CONFIGMAPS, [without_kind], list_meta={}, now=NOW, include_object="Object"
    )
    embedded = table["rows"][0]["object"]
    assert list(embedded.items()) == [
        ("kind", "ConfigMap"),
        ("apiVersion", "v1"),
        ("metadata", {"name": "x"}),
        ("data", {"a": "b"}),
    ]


def test_include_object_none_writes_null() -> None:
    body = tables.render_table(CONFIGMAPS, [CM_JSON], list_meta={}, now=NOW, include_object="None")
    assert b'"object":null}' in body


def test_an_unknown_include_object_is_a_bad_request() -> None:
    with pytest.raises(BadRequestError, match='unrecognized includeObject value: "Everything"'):
        tables.render_table(CONFIGMAPS, [], list_meta={}, now=NOW, include_object="Everything")


def test_a_row_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ValueError, match="not a JSON object"):
        tables.render_table(CONFIGMAPS, [b"[1,2]"], list_meta={}, now=NOW)


def test_watch_event_has_columns_only_when_asked() -> None:
    ns = b'{"metadata":{"name":"ns1","resourceVersion":"19","creationTimestamp":"%s"}}' % (
        ago(seconds=1).encode()
    )
    first = tables.render_table_event(NAMESPACES, "ADDED", ns, now=NOW, with_columns=True)
    later = tables.render_table_event(NAMESPACES, "MODIFIED", ns, now=NOW, with_columns=False)
    assert first.endswith(b"}\n") and first.count(b"\n") == 1
    assert later == (
        b'{"type":"MODIFIED","object":{"kind":"Table","apiVersion":"meta.k8s.io/v1",'
        b'"metadata":{"resourceVersion":"19"},"columnDefinitions":null,'
        b'"rows":[{"cells":["ns1","Active","1s"],"object":{"kind":"PartialObjectMetadata",'
        b'"apiVersion":"meta.k8s.io/v1","metadata":{"name":"ns1","resourceVersion":"19",'
        b'"creationTimestamp":"2026-11-21T19:29:59Z"}}}]}}\n'
    )
    event = json.loads(first)
    assert event["type"] == "ADDED"
    assert [c["name"] for c in event["object"]["columnDefinitions"]] == ["Name", "Status", "Age"]


# -- columns ----------------------------------------------------------------------------------

WIDGETS = ResourceSpec("widgets", "widget", "Widget")


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        (CONFIGMAPS, ["Name", "Data", "Age"]),
        (SECRETS, ["Name", "Type", "Data", "Age"]),
        (NAMESPACES, ["Name", "Status", "Age"]),
        (
            PODS,
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates",
            ],
        ),
        (WIDGETS, ["Name", "Created At"]),
    ],
)
def test_columns_follow_kubernetes_printers(spec: ResourceSpec, names: list[str]) -> None:
    columns = tables.columns(spec)
    assert [c.name for c in columns] == names
    assert columns[0].format == "name"
    # Only the -o wide pod columns have a priority.
    wide = [c.name for c in columns if c.priority]
    assert wide == (["IP", "Node", "Nominated Node", "Readiness Gates"] if spec is PODS else [])
    # Every row has one cell per column.
    assert len(tables.row_cells(spec, {"metadata": {"name": "x"}}, NOW)) == len(columns)


def test_a_resource_without_a_printer_gets_name_and_created_at() -> None:
    obj = {"metadata": {"name": "w", "creationTimestamp": "2026-11-21T20:29:00+01:00"}}
    assert tables.row_cells(WIDGETS, obj, NOW) == ["w", "2026-11-21T19:29:00Z"]
    assert tables.row_cells(WIDGETS, {"metadata": {"name": "w"}}, NOW) == [
        "w",
        "0001-01-01T00:00:00Z",
    ]


# -- configmaps, secrets, namespaces ----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "count"),
    [
        ({}, 0),
        ({"data": {}}, 0),
        ({"data": {"a": "1", "b": "2"}}, 2),
        ({"binaryData": {"x": "AA=="}}, 1),
        ({"data": {"a": "1"}, "binaryData": {"x": "AA=="}}, 2),
        ({"data": None}, 0),
    ],
)
def test_configmap_data_counts_data_and_binary_data(body: dict[str, Any], count: int) -> None:
    obj = {"metadata": {"name": "c", "creationTimestamp": ago(hours=3)}, **body}
    assert tables.row_cells(CONFIGMAPS, obj, NOW) == ["c", count, "3h"]


@pytest.mark.parametrize(
    ("body", "kind", "count"),
    [
        ({}, "Opaque", 0),  # v1 defaulting: an empty type is Opaque
        ({"type": ""}, "Opaque", 0),
        (
            {"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}},
            "kubernetes.io/tls",
            2,
        ),
        ({"data": {"a": "", "b": ""}}, "Opaque", 2),
        # stringData is merged into data when decoded: shared keys count once.
        ({"data": {"a": ""}, "stringData": {"a": "x", "b": "y"}}, "Opaque", 2),
    ],
)
def test_secret_type_and_data(body: dict[str, Any], kind: str, count: int) -> None:
    obj = {"metadata": {"name": "s", "creationTimestamp": ago(days=3)}, **body}
    assert tables.row_cells(SECRETS, obj, NOW) == ["s", kind, count, "3d"]


@pytest.mark.parametrize(
    ("status", "phase"),
    [
        ({"phase": "Active"}, "Active"),
        ({"phase": "Terminating"}, "Terminating"),
        ({}, "Active"),  # v1 defaulting of NamespaceStatus.phase
        (None, "Active"),
    ],
)
def test_namespace_status_is_the_phase(status: dict[str, Any] | None, phase: str) -> None:
    obj: dict[str, Any] = {"metadata": {"name": "n", "creationTimestamp": ago(seconds=59)}}
    if status is not None:
        obj["status"] = status
    assert tables.row_cells(NAMESPACES, obj, NOW) == ["n", phase, "59s"]


def test_missing_creation_timestamp_is_unknown_age() -> None:
    assert tables.row_cells(CONFIGMAPS, {"metadata": {"name": "c"}}, NOW) == ["c", 0, "<unknown>"]


# -- pods -------------------------------------------------------------------------------------


def running(name: str, *, ready: bool = True, restarts: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "state": {"running": {"startedAt": ago(hours=1)}},
        "ready": ready,
        "restartCount": restarts,
        "started": True,
    }


def waiting(
    name: str, reason: str, *, restarts: int = 0, finished: str | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "name": name,
        "state": {"waiting": {"reason": reason}},
        "ready": False,
        "restartCount": restarts,
    }
    if finished is not None:
        status["lastState"] = {
            "terminated": {"exitCode": 1, "reason": "Error", "finishedAt": finished}
        }
    return status


def terminated(
    name: str, *, exit_code: int = 0, reason: str = "", signal: int = 0
) -> dict[str, Any]:
    state: dict[str, Any] = {"exitCode": exit_code}
    if reason:
        state["reason"] = reason
    if signal:
        state["signal"] = signal
    return {"name": name, "state": {"terminated": state}, "ready": False, "restartCount": 0}


def pod(
    containers: int = 1,
    *,
    phase: str | None = "Running",
    statuses: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    init_statuses: list[dict[str, Any]] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    deleting: bool = False,
    **status_extra: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "p",
        "namespace": "default",
        "creationTimestamp": ago(minutes=5),
    }
    if deleting:
        meta["deletionTimestamp"] = ago(seconds=1)
    spec: dict[str, Any] = {
        "containers": [{"name": f"c{i}", "image": "i"} for i in range(containers)]
    }
    if init is not None:
        spec["initContainers"] = init
    status: dict[str, Any] = dict(status_extra)
    if phase is not None:
        status["phase"] = phase
    if statuses is not None:
        status["containerStatuses"] = statuses
    if init_statuses is not None:
        status["initContainerStatuses"] = init_statuses
    if conditions is not None:
        status["conditions"] = conditions
    return {"metadata": meta, "spec": spec, "status": status}


def cond(kind: str, status: str = "True", reason: str = "") -> dict[str, Any]:
    condition = {"type": kind, "status": status}
    if reason:
        condition["reason"] = reason
    return condition


SIDECAR = {"name": "side", "image": "i", "restartPolicy": "Always"}
INIT = {"name": "setup", "image": "i"}


@pytest.mark.parametrize(
    ("obj", "ready", "status", "restarts"),
    [
        pytest.param(pod(phase="Pending"), "0/1", "Pending", "0", id="pending-unscheduled"),
        pytest.param(pod(phase=None), "0/1", "", "0", id="no-phase"),
        pytest.param(
            pod(phase="Pending", statuses=[waiting("c0", "ContainerCreating")]),
            "0/1",
            "ContainerCreating",
            "0",
            id="creating",
        ),
        pytest.param(pod(statuses=[running("c0")]), "1/1", "Running", "0", id="running"),
        pytest.param(
            pod(2, statuses=[running("c0"), running("c1", ready=False)]),
            "1/2",
            "Running",
            "0",
            id="running-1-of-2",
        ),
        pytest.param(
            pod(statuses=[waiting("c0", "CrashLoopBackOff", restarts=5, finished=ago(minutes=2))]),
            "0/1",
            "CrashLoopBackOff",
            "5 (2m ago)",
            id="crashloop",
        ),
        pytest.param(
            pod(2, statuses=[running("c0", restarts=1), running("c1", restarts=2)]),
            "2/2",
            "Running",
            "3",  # no lastState: no "ago"
            id="restarts-summed",
        ),
        pytest.param(
            pod(2, statuses=[waiting("c0", "ImagePullBackOff"), waiting("c1", "ErrImagePull")]),
            "0/2",
            "ImagePullBackOff",  # the first container in the list wins
            "0",
            id="first-container-reason-wins",
        ),
        pytest.param(
            pod(statuses=[running("c0")], deleting=True),
            "1/1",
            "Terminating",
            "0",
            id="terminating",
        ),
        pytest.param(
            pod(phase="Succeeded", statuses=[terminated("c0", reason="Completed")], deleting=True),
            "0/1",
            "Completed",
            "0",
            id="deleting-a-finished-pod",
        ),
        pytest.param(
            pod(statuses=[running("c0")], deleting=True, reason="NodeLost"),
            "1/1",
            "Unknown",
            "0",
            id="node-lost",
        ),
        pytest.param(
            pod(phase="Failed", reason="Evicted"), "0/1", "Evicted", "0", id="status-reason"
        ),
        pytest.param(
            pod(phase="Failed", statuses=[terminated("c0", exit_code=1, reason="Error")]),
            "0/1",
            "Error",
            "0",
            id="terminated-error",
        ),
        pytest.param(
            pod(phase="Failed", statuses=[terminated("c0", exit_code=2)]),
            "0/1",
            "ExitCode:2",
            "0",
            id="exit-code",
        ),
        pytest.param(
            pod(phase="Failed", statuses=[terminated("c0", exit_code=137, signal=9)]),
            "0/1",
            "Signal:9",
            "0",
            id="signal",
        ),
        pytest.param(
            pod(
                2,
                statuses=[terminated("c0", reason="Completed"), running("c1")],
                conditions=[cond("Ready")],
            ),
            "1/2",
            "Running",
            "0",
            id="completed-but-one-running-ready",
        ),
        pytest.param(
            pod(2, statuses=[terminated("c0", reason="Completed"), running("c1")]),
            "1/2",
            "NotReady",
            "0",
            id="completed-but-one-running-not-ready",
        ),
        pytest.param(
            pod(phase="Pending", conditions=[cond("PodScheduled", "False", "SchedulingGated")]),
            "0/1",
            "SchedulingGated",
            "0",
            id="scheduling-gated",
        ),
        pytest.param(
            pod(phase="Pending", init=[INIT], init_statuses=[waiting("setup", "PodInitializing")]),
            "0/1",
            "Init:0/1",
            "0",
            id="init-pending",
        ),
        pytest.param(
            pod(
                phase="Pending",
                init=[INIT, {"name": "two", "image": "i"}],
                init_statuses=[terminated("setup"), running("two", ready=False)],
            ),
            "0/1",
            "Init:1/2",
            "0",
            id="init-second-running",
        ),
        pytest.param(
            pod(
                phase="Pending",
                init=[INIT],
                init_statuses=[
                    waiting("setup", "CrashLoopBackOff", restarts=3, finished=ago(seconds=30))
                ],
            ),
            "0/1",
            "Init:CrashLoopBackOff",
            "3 (30s ago)",
            id="init-crashloop",
        ),
        pytest.param(
            pod(
                phase="Pending",
                init=[INIT],
                init_statuses=[terminated("setup", exit_code=1, reason="Error")],
            ),
            "0/1",
            "Init:Error",
            "0",
            id="init-error",
        ),
        pytest.param(
            pod(phase="Pending", init=[INIT], init_statuses=[terminated("setup", exit_code=3)]),
            "0/1",
            "Init:ExitCode:3",
            "0",
            id="init-exit-code",
        ),
        pytest.param(
            pod(
                phase="Pending",
                init=[INIT],
                init_statuses=[terminated("setup", exit_code=1, signal=15)],
            ),
            "0/1",
            "Init:Signal:15",
            "0",
            id="init-signal",
        ),
        pytest.param(
            pod(
                init=[SIDECAR],
                init_statuses=[running("side", restarts=2)],
                statuses=[running("c0", restarts=1)],
            ),
            "2/2",
            "Running",
            "3",
            id="sidecar-counts",
        ),
        pytest.param(
            pod(
                init=[INIT],
                init_statuses=[waiting("setup", "CrashLoopBackOff", restarts=4)],
                statuses=[running("c0", restarts=1)],
                conditions=[cond("Initialized")],
            ),
            "1/1",
            "Init:CrashLoopBackOff",  # as in Go: a running container does not reset it
            "1",  # once initialized, only the app (and sidecar) restarts count
            id="initialized-ignores-init-restarts",
        ),
    ],
)
def test_pod_ready_status_restarts(
    obj: dict[str, Any], ready: str, status: str, restarts: str
) -> None:
    cells = tables.row_cells(PODS, obj, NOW)
    assert cells[:5] == ["p", ready, status, restarts, "5m"]


def test_pod_restarts_ago_uses_the_latest_termination() -> None:
    obj = pod(
        2,
        statuses=[
            waiting("c0", "CrashLoopBackOff", restarts=2, finished=ago(hours=2)),
            waiting("c1", "CrashLoopBackOff", restarts=1, finished=ago(seconds=40)),
        ],
    )
    assert tables.row_cells(PODS, obj, NOW)[3] == "3 (40s ago)"


@pytest.mark.parametrize(
    ("extra", "wide"),
    [
        ({}, ["<none>", "<none>", "<none>", "<none>"]),
        (
            {
                "status": {"podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}]},
                "spec": {"nodeName": "node-1"},
            },
            ["10.0.0.5", "node-1", "<none>", "<none>"],
        ),
        ({"status": {"podIPs": [{"ip": "fd00::7"}]}}, ["fd00::7", "<none>", "<none>", "<none>"]),
        ({"status": {"nominatedNodeName": "node-2"}}, ["<none>", "<none>", "node-2", "<none>"]),
        (
            {
                "spec": {"readinessGates": [{"conditionType": "a"}, {"conditionType": "b"}]},
                "status": {"conditions": [cond("a"), cond("b", "False"), cond("a", "False")]},
            },
            ["<none>", "<none>", "<none>", "1/2"],
        ),
    ],
)
def test_pod_wide_columns(extra: dict[str, Any], wide: list[str]) -> None:
    obj = pod()
    for part, values in extra.items():
        obj[part] = {**obj[part], **values}
    assert tables.row_cells(PODS, obj, NOW)[5:] == wide


@pytest.mark.parametrize(
    ("phase", "conditions"),
    [
        (
            "Succeeded",
            [
                {
                    "type": "Completed",
                    "status": "True",
                    "reason": "Succeeded",
                    "message": "The pod has completed successfully.",
                }
            ],
        ),
        (
            "Failed",
            [
                {
                    "type": "Completed",
                    "status": "True",
                    "reason": "Failed",
                    "message": "The pod failed.",
                }
            ],
        ),
        ("Running", None),
    ],
)
def test_finished_pods_rows_carry_a_completed_condition(
    phase: str, conditions: list[dict[str, str]] | None
) -> None:
    table = tables.build_table(PODS, [pod(phase=phase)], list_meta={}, now=NOW)
    row = table["rows"][0]
    assert row.get("conditions") == conditions
    assert list(row) == (["cells", "conditions", "object"] if conditions else ["cells", "object"])


def test_malformed_pod_fields_do_not_break_the_row() -> None:
    obj = {
        "metadata": {"name": "p"},
        "spec": {"containers": "nope", "initContainers": [None]},
        "status": {"containerStatuses": [None, {"restartCount": "x", "state": None}]},
    }
    assert tables.row_cells(PODS, obj, NOW)[:5] == ["p", "0/0", "", "0", "<unknown>"]


def test_a_500_row_page_renders_every_row() -> None:
    items = [
        json.dumps(
            {
                "metadata": {
                    "name": f"cm-{i:03d}",
                    "namespace": "ns",
                    "creationTimestamp": ago(days=1),
                }
            }
        ).encode()
        for i in range(500)
    ]
    table = json.loads(
        tables.render_table(CONFIGMAPS, items, list_meta={"resourceVersion": "1"}, now=NOW)
    )
    assert [row["cells"][0] for row in table["rows"]] == [f"cm-{i:03d}" for i in range(500)]
    assert {row["object"]["metadata"]["namespace"] for row in table["rows"]} == {"ns"}
