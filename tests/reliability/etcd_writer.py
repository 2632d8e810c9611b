"""Writes ConfigMaps straight into etcd at a steady rate, as the other apiservers of a
cluster that share the etcd would: what the soak's servers must keep their caches, watches
and lists in step with, without their own write path setting the pace.

    .venv/bin/python tests/reliability/etcd_writer.py --endpoints 127.0.0.1:2379 \\
        --rate 900 --seconds 60 --namespaces soak-0,soak-1 --object-bytes 1024

Each change is one etcd Put or DeleteRange of ``/registry/configmaps/<ns>/ext-<n>``: 90 %
puts (a create when the key is absent, else an update), 10 % deletes. The object is what an
apiserver stores: ``apiVersion``, ``kind``, ``metadata`` with a ``uid`` and a
``creationTimestamp`` kept across updates, random ``app``/``tier`` labels (the soak's
selectors pick them), and a ``data.blob`` that brings the stored value to about
``--object-bytes``.

Why a process of its own on the synchronous gRPC client: a ``grpc.aio`` unary call costs
about 0.45 ms of CPU in Python, so 900 a second would take most of a core from the
processes under test; the synchronous stub's ``future()`` keeps up to ``--in-flight`` calls
outstanding on gRPC's own completion queue for a fraction of that, and a process of its own
keeps the soak's event loop free. The pace is a fixed schedule of slots ``batch / rate``
apart. A writer that wakes late sends the slots it missed at once, so oversleeping on busy
cores (about a millisecond a slot there, 5 % of the rate at 46 slots a second) does not
lower the rate; a writer more than ``MAX_BACKLOG_SECONDS`` behind drops the missed slots
rather than burst.

Stops at ``--seconds`` or on SIGTERM/SIGINT, then prints one JSON line: changes made,
failed calls by status code, the first failure messages, and how many of them were etcd
refusing a write for lack of space. Exit status 0 unless an argument is wrong.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import grpc

from watchcache.etcd.client import MAX_TXN_OPS
from watchcache.etcd.proto import rpc_pb2

PREFIX = "/registry/configmaps/"
NAME_PREFIX = "ext-"
APPS = ("a", "b", "c")
TIERS = ("x", "y")
#: Bytes of a stored object besides its blob (metadata, labels, framing), about.
STORED_OVERHEAD = 260
#: The failure messages kept for the report.
KEPT_FAILURES = 20
NO_SPACE = "database space exceeded"
#: How far behind its schedule the writer still catches up; past it, the slots are lost.
MAX_BACKLOG_SECONDS = 0.5


@dataclass
class Report:
    changes: int = 0
    transactions: int = 0
    puts: int = 0
    deletes: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    refused_for_space: int = 0

    def fail(self, error: grpc.RpcError) -> None:
        code = error.code()
        name = code.name if code is not None else "UNKNOWN"
        self.failed[name] += 1
        text = error.details() or ""
        if NO_SPACE in text:
            self.refused_for_space += 1
        if len(self.failures) < KEPT_FAILURES:
            self.failures.append(f"{name}: {text}")


class Objects:
    """The writer's view of its keys: which exist, and each one's uid and creation time
    (kept across updates, as an apiserver keeps them)."""

    def __init__(self, namespaces: list[str], names: int, object_bytes: int, rng: random.Random):
        self.keys = [
            f"{PREFIX}{ns}/{NAME_PREFIX}{i:04d}" for ns in namespaces for i in range(names)
        ]
        self.identity: dict[str, tuple[str, str]] = {}
        self.blob_chars = max(16, object_bytes - STORED_OVERHEAD)
        self.rng = rng

    def value(self, key: str) -> bytes:
        uid, created = self.identity.get(key) or (
            str(uuid.UUID(int=self.rng.getrandbits(128), version=4)),
            datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        self.identity[key] = (uid, created)
        namespace, name = key[len(PREFIX) :].split("/", 1)
        labels = {"app": self.rng.choice(APPS)}
        if self.rng.random() < 0.7:
            labels["tier"] = self.rng.choice(TIERS)
        obj: dict[str, Any] = {
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": uid,
                "creationTimestamp": created,
                "labels": labels,
            },
            "data": {"blob": self.rng.randbytes(self.blob_chars // 2).hex()},
        }
        return json.dumps(obj, separators=(",", ":")).encode()


def run(args: argparse.Namespace) -> Report:
    rng = random.Random(args.seed)
    objects = Objects(args.namespaces.split(","), args.names, args.object_bytes, rng)
    channels = [grpc.insecure_channel(e) for e in args.endpoints.split(",")]
    txns = [
        c.unary_unary(
            "/etcdserverpb.KV/Txn",
            request_serializer=rpc_pb2.TxnRequest.SerializeToString,
            response_deserializer=rpc_pb2.TxnResponse.FromString,
        )
        for c in channels
    ]
    report = Report()
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    interval = args.batch / args.rate
    #: Each call in flight, with the (kind, key) of each of its operations in order.
    outstanding: deque[tuple[grpc.Future[Any], list[tuple[str, str]]]] = deque()

    def settle(wait_for_oldest: bool) -> None:
        """Account for the calls that have answered (and first wait for the oldest)."""
        while outstanding and (wait_for_oldest or outstanding[0][0].done()):
            wait_for_oldest = False
            call, operations = outstanding.popleft()
            try:
                answer = call.result(timeout=args.timeout)
            except grpc.RpcError as error:
                report.fail(error)
                continue
            report.transactions += 1
            for (kind, key), result in zip(operations, answer.responses, strict=True):
                if kind == "put":
                    report.puts += 1
                    report.changes += 1
                elif result.response_delete_range.deleted:
                    report.deletes += 1
                    report.changes += 1
                    objects.identity.pop(key, None)

    end = time.monotonic() + args.seconds
    next_slot = time.monotonic()
    turn = 0
    while not stopping:
        now = time.monotonic()
        if now >= end:
            break
        if next_slot > now:
            settle(wait_for_oldest=False)
            time.sleep(max(0.0, min(next_slot, end) - time.monotonic()))
            continue
        if now - next_slot > MAX_BACKLOG_SECONDS:
            next_slot = now
        next_slot += interval
        if len(outstanding) >= args.in_flight:
            settle(wait_for_oldest=True)
        # etcd refuses a transaction that names one key twice.
        keys = rng.sample(objects.keys, args.batch)
        operations: list[tuple[str, str]] = []
        request = rpc_pb2.TxnRequest()
        for key in keys:
            if rng.random() < 0.1 and key in objects.identity:
                request.success.add().request_delete_range.key = key.encode()
                operations.append(("delete", key))
            else:
                put = request.success.add().request_put
                put.key = key.encode()
                put.value = objects.value(key)
                operations.append(("put", key))
        turn += 1
        call = txns[turn % len(channels)].future(request, timeout=args.timeout)
        outstanding.append((call, operations))
    while outstanding:
        settle(wait_for_oldest=True)
    for channel in channels:
        channel.close()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoints", required=True, help="host:port,...")
    parser.add_argument("--rate", type=float, required=True, help="changes a second")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--namespaces", required=True, help="ns,...")
    parser.add_argument("--names", type=int, default=100, help="keys per namespace (100)")
    parser.add_argument("--object-bytes", type=int, default=1024)
    parser.add_argument("--in-flight", type=int, default=32, help="calls outstanding (32)")
    parser.add_argument(
        "--batch", type=int, default=1, help="changes per etcd transaction, distinct keys (1)"
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="per call, seconds (10)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if min(args.rate, args.names, args.in_flight, args.batch) <= 0 or args.seconds < 0:
        parser.error("--rate, --names, --in-flight and --batch must be positive")
    if args.batch > min(MAX_TXN_OPS, args.names * len(args.namespaces.split(","))):
        parser.error(f"--batch is at most {MAX_TXN_OPS} (etcd's --max-txn-ops) and the keys")
    started = time.monotonic()
    cpu = time.process_time()
    report = run(args)
    elapsed = time.monotonic() - started
    summary = {
        "changes": report.changes,
        "transactions": report.transactions,
        "batch": args.batch,
        "puts": report.puts,
        "deletes": report.deletes,
        "seconds": round(elapsed, 3),
        "rate": round(report.changes / elapsed, 1) if elapsed else 0.0,
        "cpu_seconds": round(time.process_time() - cpu, 3),
        "failed": dict(report.failed),
        "failures": report.failures,
        "refused_for_space": report.refused_for_space,
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
