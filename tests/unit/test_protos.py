"""The stripped etcd v3 protos and their committed generated modules.

* ``scripts/gen-protos.sh`` into a temporary directory gives byte-identical ``*_pb2.py`` and
  ``*_pb2.pyi`` files to the committed ones (so nobody edits them by hand and nobody forgets
  ``make protos`` after changing a ``.proto``).
* Field names and numbers are etcd 3.5's: checked through the descriptors and, for the watch
  request, on the wire against bytes written out by hand.
* The services carry etcd's gRPC method paths (``/etcdserverpb.KV/Range``, ...).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf.descriptor import Descriptor

from watchcache.etcd.proto import kv_pb2, rpc_pb2

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "python" / "watchcache" / "etcd" / "proto"
GENERATED = ("kv_pb2.py", "kv_pb2.pyi", "rpc_pb2.py", "rpc_pb2.pyi")


def test_regeneration_matches_committed_files(tmp_path: Path) -> None:
    if importlib.util.find_spec("grpc_tools") is None:
        pytest.skip("grpc_tools (grpcio-tools, a dev package: `make venv`) is not importable")
    env = {**os.environ, "PYTHON": sys.executable}
    subprocess.run(
        [str(ROOT / "scripts" / "gen-protos.sh"), str(tmp_path)],
        check=True,
        env=env,
        capture_output=True,
        text=True,
    )
    fresh_dir = tmp_path / "watchcache" / "etcd" / "proto"
    assert sorted(p.name for p in fresh_dir.iterdir()) == sorted(GENERATED)
    for name in GENERATED:
        fresh = (fresh_dir / name).read_bytes()
        committed = (PROTO_DIR / name).read_bytes()
        assert fresh == committed, f"{name} is stale: run `make protos` and commit the result"


def _fields(message: Descriptor) -> dict[str, int]:
    return {f.name: f.number for f in message.fields}


# etcd 3.5's field numbers (api/mvccpb/kv.proto, api/etcdserverpb/rpc.proto), field by field.
EXPECTED_FIELDS: dict[str, dict[str, int]] = {
    "mvccpb.KeyValue": {
        "key": 1,
        "create_revision": 2,
        "mod_revision": 3,
        "version": 4,
        "value": 5,
        "lease": 6,
    },
    "mvccpb.Event": {"type": 1, "kv": 2, "prev_kv": 3},
    "etcdserverpb.ResponseHeader": {"cluster_id": 1, "member_id": 2, "revision": 3, "raft_term": 4},
    "etcdserverpb.RangeRequest": {
        "key": 1,
        "range_end": 2,
        "limit": 3,
        "revision": 4,
        "sort_order": 5,
        "sort_target": 6,
        "serializable": 7,
        "keys_only": 8,
        "count_only": 9,
        "min_mod_revision": 10,
        "max_mod_revision": 11,
        "min_create_revision": 12,
        "max_create_revision": 13,
    },
    "etcdserverpb.RangeResponse": {"header": 1, "kvs": 2, "more": 3, "count": 4},
    "etcdserverpb.PutRequest": {
        "key": 1,
        "value": 2,
        "lease": 3,
        "prev_kv": 4,
        "ignore_value": 5,
        "ignore_lease": 6,
    },
    "etcdserverpb.PutResponse": {"header": 1, "prev_kv": 2},
    "etcdserverpb.DeleteRangeRequest": {"key": 1, "range_end": 2, "prev_kv": 3},
    "etcdserverpb.DeleteRangeResponse": {"header": 1, "deleted": 2, "prev_kvs": 3},
    "etcdserverpb.RequestOp": {
        "request_range": 1,
        "request_put": 2,
        "request_delete_range": 3,
        "request_txn": 4,
    },
    "etcdserverpb.ResponseOp": {
        "response_range": 1,
        "response_put": 2,
        "response_delete_range": 3,
        "response_txn": 4,
    },
    "etcdserverpb.Compare": {
        "result": 1,
        "target": 2,
        "key": 3,
        "version": 4,
        "create_revision": 5,
        "mod_revision": 6,
        "value": 7,
        "lease": 8,
        "range_end": 64,
    },
    "etcdserverpb.TxnRequest": {"compare": 1, "success": 2, "failure": 3},
    "etcdserverpb.TxnResponse": {"header": 1, "succeeded": 2, "responses": 3},
    "etcdserverpb.CompactionRequest": {"revision": 1, "physical": 2},
    "etcdserverpb.CompactionResponse": {"header": 1},
    "etcdserverpb.LeaseGrantRequest": {"TTL": 1, "ID": 2},
    "etcdserverpb.LeaseGrantResponse": {"header": 1, "ID": 2, "TTL": 3, "error": 4},
    "etcdserverpb.WatchRequest": {"create_request": 1, "cancel_request": 2, "progress_request": 3},
    "etcdserverpb.WatchCreateRequest": {
        "key": 1,
        "range_end": 2,
        "start_revision": 3,
        "progress_notify": 4,
        "filters": 5,
        "prev_kv": 6,
        "watch_id": 7,
        "fragment": 8,
    },
    "etcdserverpb.WatchCancelRequest": {"watch_id": 1},
    "etcdserverpb.WatchProgressRequest": {},
    "etcdserverpb.WatchResponse": {
        "header": 1,
        "watch_id": 2,
        "created": 3,
        "canceled": 4,
        "compact_revision": 5,
        "cancel_reason": 6,
        "fragment": 7,
        "events": 11,
    },
    "etcdserverpb.Member": {"ID": 1, "name": 2, "peerURLs": 3, "clientURLs": 4, "isLearner": 5},
    "etcdserverpb.MemberListRequest": {"linearizable": 1},
    "etcdserverpb.MemberListResponse": {"header": 1, "members": 2},
    "etcdserverpb.StatusRequest": {},
    "etcdserverpb.AlarmRequest": {"action": 1, "memberID": 2, "alarm": 3},
    "etcdserverpb.AlarmMember": {"memberID": 1, "alarm": 2},
    "etcdserverpb.AlarmResponse": {"header": 1, "alarms": 2},
    "etcdserverpb.DefragmentRequest": {},
    "etcdserverpb.DefragmentResponse": {"header": 1},
    "etcdserverpb.StatusResponse": {
        "header": 1,
        "version": 2,
        "dbSize": 3,
        "leader": 4,
        "raftIndex": 5,
        "raftTerm": 6,
        "raftAppliedIndex": 7,
        "errors": 8,
        "dbSizeInUse": 9,
        "isLearner": 10,
    },
}


def _message(full_name: str) -> Descriptor:
    package, _, name = full_name.partition(".")
    module = kv_pb2 if package == "mvccpb" else rpc_pb2
    descriptor: Descriptor = module.DESCRIPTOR.message_types_by_name[name]
    assert descriptor.full_name == full_name
    return descriptor


@pytest.mark.parametrize("full_name", sorted(EXPECTED_FIELDS))
def test_field_numbers_match_etcd_35(full_name: str) -> None:
    assert _fields(_message(full_name)) == EXPECTED_FIELDS[full_name]


def test_every_message_is_checked() -> None:
    names = {f"mvccpb.{n}" for n in kv_pb2.DESCRIPTOR.message_types_by_name}
    names |= {f"etcdserverpb.{n}" for n in rpc_pb2.DESCRIPTOR.message_types_by_name}
    assert names == set(EXPECTED_FIELDS)


def test_oneofs_and_enums() -> None:
    watch = _message("etcdserverpb.WatchRequest")
    assert [f.name for f in watch.oneofs_by_name["request_union"].fields] == [
        "create_request",
        "cancel_request",
        "progress_request",
    ]
    compare = _message("etcdserverpb.Compare")
    assert [f.name for f in compare.oneofs_by_name["target_union"].fields] == [
        "version",
        "create_revision",
        "mod_revision",
        "value",
        "lease",
    ]
    assert kv_pb2.Event.PUT == 0
    assert kv_pb2.Event.DELETE == 1
    assert rpc_pb2.WatchCreateRequest.NOPUT == 0
    assert rpc_pb2.WatchCreateRequest.NODELETE == 1
    assert rpc_pb2.RangeRequest.DESCEND == 2
    assert rpc_pb2.RangeRequest.MOD == 3
    assert rpc_pb2.Compare.NOT_EQUAL == 3
    assert rpc_pb2.Compare.LEASE == 4
    assert (rpc_pb2.NONE, rpc_pb2.NOSPACE, rpc_pb2.CORRUPT) == (0, 1, 2)
    assert rpc_pb2.AlarmRequest.GET == 0
    assert rpc_pb2.AlarmRequest.DEACTIVATE == 2


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _decode(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs of one message level: varints and length-delimited only."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire_type == 2:
            length, pos = _varint(data, pos)
            out.append((number, data[pos : pos + length]))
            pos += length
        else:
            raise AssertionError(f"unexpected wire type {wire_type} for field {number}")
    return out


def _number(message: Descriptor, field: str) -> int:
    number: int = message.fields_by_name[field].number
    return number


def test_watch_create_request_wire_format() -> None:
    request = rpc_pb2.WatchRequest(
        create_request=rpc_pb2.WatchCreateRequest(
            key=b"/registry/pods/",
            range_end=b"/registry/pods0",
            start_revision=42,
            progress_notify=True,
            prev_kv=True,
            fragment=True,
        )
    )
    data = request.SerializeToString(deterministic=True)
    # Written out by hand from etcd's numbers: field 1 (create_request), 42 bytes long, holding
    # key (1), range_end (2), start_revision (3), progress_notify (4), prev_kv (6), fragment (8).
    inner = (
        b"\x0a\x0f/registry/pods/"  # key: field 1, length-delimited, 15 bytes
        b"\x12\x0f/registry/pods0"  # range_end: field 2, 15 bytes
        b"\x18\x2a"  # start_revision: field 3, varint 42
        b"\x20\x01"  # progress_notify: field 4, true
        b"\x30\x01"  # prev_kv: field 6, true
        b"\x40\x01"  # fragment: field 8, true
    )
    assert data == b"\x0a" + bytes([len(inner)]) + inner

    create = _message("etcdserverpb.WatchCreateRequest")
    [(outer_number, payload)] = _decode(data)
    assert outer_number == _number(_message("etcdserverpb.WatchRequest"), "create_request") == 1
    assert isinstance(payload, bytes)
    decoded = dict(_decode(payload))
    assert decoded == {
        _number(create, "key"): b"/registry/pods/",
        _number(create, "range_end"): b"/registry/pods0",
        _number(create, "start_revision"): 42,
        _number(create, "progress_notify"): 1,
        _number(create, "prev_kv"): 1,
        _number(create, "fragment"): 1,
    }
    assert sorted(decoded) == [1, 2, 3, 4, 6, 8]

    again = rpc_pb2.WatchRequest.FromString(data)
    assert again == request
    assert again.WhichOneof("request_union") == "create_request"
    assert again.create_request.range_end == b"/registry/pods0"


def test_watch_progress_and_cancel_request_wire_format() -> None:
    progress = rpc_pb2.WatchRequest(progress_request=rpc_pb2.WatchProgressRequest())
    assert progress.SerializeToString() == b"\x1a\x00"  # field 3, empty message
    parsed = rpc_pb2.WatchRequest.FromString(b"\x1a\x00")
    assert parsed.WhichOneof("request_union") == "progress_request"

    cancel = rpc_pb2.WatchRequest(cancel_request=rpc_pb2.WatchCancelRequest(watch_id=7))
    assert cancel.SerializeToString() == b"\x12\x02\x08\x07"  # field 2 { watch_id (1) = 7 }


def test_range_request_flags_wire_format() -> None:
    request = rpc_pb2.RangeRequest(
        key=b"/registry/", serializable=True, keys_only=True, count_only=True, limit=500
    )
    decoded = dict(_decode(request.SerializeToString()))
    assert decoded == {1: b"/registry/", 3: 500, 7: 1, 8: 1, 9: 1}


def test_watch_response_round_trip() -> None:
    response = rpc_pb2.WatchResponse(
        header=rpc_pb2.ResponseHeader(cluster_id=1, member_id=2, revision=100, raft_term=3),
        watch_id=5,
        compact_revision=90,
        fragment=True,
        events=[
            kv_pb2.Event(
                type=kv_pb2.Event.DELETE,
                kv=kv_pb2.KeyValue(key=b"/registry/pods/a", mod_revision=100),
                prev_kv=kv_pb2.KeyValue(key=b"/registry/pods/a", value=b"{}", mod_revision=99),
            )
        ],
    )
    data = response.SerializeToString()
    numbers = [number for number, _ in _decode(data)]
    assert numbers == [1, 2, 5, 7, 11]
    assert rpc_pb2.WatchResponse.FromString(data) == response

    status = rpc_pb2.StatusResponse(version="3.5.16")
    assert status.SerializeToString() == b"\x12\x063.5.16"  # version is field 2


SERVICES = {
    "KV": ["Range", "Put", "DeleteRange", "Txn", "Compact"],
    "Watch": ["Watch"],
    "Lease": ["LeaseGrant"],
    "Cluster": ["MemberList"],
    "Maintenance": ["Alarm", "Status", "Defragment"],
}


def test_services_and_method_paths() -> None:
    file = rpc_pb2.DESCRIPTOR
    assert file.package == "etcdserverpb"
    assert kv_pb2.DESCRIPTOR.package == "mvccpb"
    assert sorted(file.services_by_name) == sorted(SERVICES)
    for service_name, methods in SERVICES.items():
        service = file.services_by_name[service_name]
        assert [m.name for m in service.methods] == methods
        for method in service.methods:
            assert method.full_name == f"etcdserverpb.{service_name}.{method.name}"
    for full_name in (
        "etcdserverpb.KV.Range",
        "etcdserverpb.KV.Txn",
        "etcdserverpb.KV.Compact",
        "etcdserverpb.Watch.Watch",
        "etcdserverpb.Maintenance.Status",
        "etcdserverpb.Cluster.MemberList",
        "etcdserverpb.Lease.LeaseGrant",
    ):
        service_name, _, method_name = full_name.removeprefix("etcdserverpb.").partition(".")
        method = file.services_by_name[service_name].methods_by_name[method_name]
        assert method.full_name == full_name
    watch = file.services_by_name["Watch"].methods_by_name["Watch"]
    assert watch.client_streaming
    assert watch.server_streaming
    assert watch.input_type.full_name == "etcdserverpb.WatchRequest"
    assert watch.output_type.full_name == "etcdserverpb.WatchResponse"
    status = file.services_by_name["Maintenance"].methods_by_name["Status"]
    assert not status.client_streaming
    assert not status.server_streaming
    # The gRPC path the client passes to channel.unary_unary / stream_stream.
    range_method = file.services_by_name["KV"].methods_by_name["Range"]
    assert f"/{range_method.containing_service.full_name}/{range_method.name}" == (
        "/etcdserverpb.KV/Range"
    )


def test_proto_sources_are_stripped() -> None:
    for name in ("kv.proto", "rpc.proto"):
        text = (PROTO_DIR / name).read_text()
        assert 'syntax = "proto3";' in text
        assert "gogoproto" not in text
        assert "google/api" not in text
    assert 'import "watchcache/etcd/proto/kv.proto";' in (PROTO_DIR / "rpc.proto").read_text()
