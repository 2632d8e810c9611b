"""The ``watchcache`` command line: one argparse parser, one subcommand per task.

``main(argv)`` parses, dispatches to the subcommand's handler and returns its exit code
(argparse's own exits, such as ``--help`` or a usage error, are returned too, not raised),
so tests call it like a function. Each subcommand registers itself in ``build_parser``
with a handler ``(args) -> int`` that maps the parsed options onto its module's entry
point; the modules themselves know nothing of argparse: ``demo``, ``serve`` (the
apiserver, on its own etcd by default), ``load`` (objects straight into etcd) and
``status`` (a running server's caches).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from watchcache.apiserver.app import DEFAULT_MAX_LIMIT
from watchcache.cli import demo, load, serve, status
from watchcache.cli.placement import (
    EtcdServersOverride,
    PlacementError,
    merge_overrides,
    parse_etcd_servers_overrides,
    parse_resource_names,
)
from watchcache.etcd.client import EtcdError
from watchcache.etcd.compactor import DEFAULT_COMPACTION_INTERVAL
from watchcache.etcd.process import EtcdProcessError, default_data_dir
from watchcache.etcd.storage_monitor import DEFAULT_POLL_INTERVAL as DEFAULT_DB_POLL_INTERVAL
from watchcache.etcd.version import ConsistentReadsMode, UnsafeEtcdVersionError
from watchcache.registry.resources import DEFAULT_RESOURCES, ResourceSpec, select_resources
from watchcache.sync.consistency import DEFAULT_CHECK_INTERVAL
from watchcache.wire.gotime import TimeParseError, parse_duration

Handler = Callable[[argparse.Namespace], int]


def positive_int(text: str) -> int:
    """argparse type: a decimal integer >= 1 (underscores allowed: 1_000_000)."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """argparse type: a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def duration_seconds(text: str) -> float:
    """argparse type: a Go duration (``5m``, ``1m30s``, ``0``) or a plain number of seconds
    (``90``, ``0.5``: what these flags took before they took durations), not negative."""
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parse_duration(text) / 1e9
        except TimeParseError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    if not seconds >= 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite duration, not negative: {text!r}")
    return seconds


def positive_duration_seconds(text: str) -> float:
    """argparse type: a Go duration above zero, as seconds."""
    seconds = duration_seconds(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return seconds


def run_demo(args: argparse.Namespace) -> int:
    return demo.run(
        demo.DemoOptions(
            keys=args.keys,
            seed=args.seed,
            value_bytes=args.value_bytes,
            writes=args.writes,
            snapshot_every=args.snapshot_every,
        )
    )


def endpoints(text: str) -> list[str]:
    """argparse type: comma-separated etcd endpoints (``host:port`` or ``http://host:port``)."""
    found = [e.strip() for e in text.split(",") if e.strip()]
    if not found:
        raise argparse.ArgumentTypeError("no etcd endpoint given")
    return found


def resource_list(text: str) -> tuple[ResourceSpec, ...]:
    """argparse type: comma-separated resource names (``configmaps,pods``)."""
    try:
        return select_resources(text.split(","))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def etcd_servers_overrides(text: str) -> tuple[EtcdServersOverride, ...]:
    """argparse type: one ``--etcd-servers-overrides`` value, kube-apiserver's syntax."""
    try:
        return parse_etcd_servers_overrides(text)
    except PlacementError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def resource_names(text: str) -> frozenset[str]:
    """argparse type: comma-separated ``resource[.group]`` names."""
    try:
        return parse_resource_names(text)
    except PlacementError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def port_number(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}")
    return value


def run_serve(args: argparse.Namespace) -> int:
    options = serve.ServeOptions(
        etcd=args.etcd or (),
        host=args.host,
        port=args.port,
        resources=args.resources,
        demo_configmaps=args.demo_configmaps,
        max_limit=args.max_limit,
        consistent_reads=ConsistentReadsMode(args.consistent_reads),
        log_level=args.log_level,
        check_consistency_every=args.check_consistency_every or None,
        garbage_collection=args.enable_garbage_collector,
        # Repeated flags add up, as kube's string-slice flags do.
        etcd_overrides=merge_overrides(
            override for value in args.etcd_servers_overrides or () for override in value
        ),
        uncached_resources=frozenset().union(*(args.uncached_resources or ())),
        list_indexes=args.list_indexes,
        compaction_interval=args.etcd_compaction_interval,
        db_metric_poll_interval=args.etcd_db_metric_poll_interval,
        quota_backend_bytes=args.etcd_quota_backend_bytes,
        exact_remaining_counts=args.exact_remaining_item_count,
        response_compression=args.response_compression,
        event_loop=args.loop,
    )
    if args.data_dir:
        options.data_dir = args.data_dir
    return serve.run(options)


def run_load(args: argparse.Namespace) -> int:
    (spec,) = select_resources([args.resource])
    return load.run_load(
        load.LoadOptions(
            etcd=args.etcd or (),
            resource=spec,
            count=args.count,
            size=args.size,
            namespaces=args.namespaces,
            data_dir=args.data_dir or default_data_dir(),
        )
    )


def run_status(args: argparse.Namespace) -> int:
    try:
        print(status.summarize(status.fetch_metrics(args.server)))
    except status.StatusUnavailableError as error:
        print(f"watchcache status: error: {error}", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="watchcache", description="A Kubernetes-style watch cache over etcd."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo_cmd = commands.add_parser(
        "demo",
        help="load keys, snapshot while writing, page through a snapshot, print timings",
        description="Load N pod keys, write while taking snapshots into a registry, page "
        "through an old snapshot 500 at a time and check it saw exactly what it held.",
    )
    demo_cmd.add_argument("--keys", type=positive_int, default=1_000_000, help="default 1000000")
    demo_cmd.add_argument(
        "--seed",
        type=int,
        default=int(os.environ.get("WATCHCACHE_SEED", "42")),
        help="random seed (default: $WATCHCACHE_SEED or 42)",
    )
    demo_cmd.add_argument("--value-bytes", type=positive_int, default=256, help="default 256")
    demo_cmd.add_argument("--writes", type=positive_int, default=100_000, help="default 100000")
    demo_cmd.add_argument(
        "--snapshot-every", type=positive_int, default=10, help="writes per snapshot (10)"
    )
    demo_cmd.set_defaults(handler=run_demo)

    serve_cmd = commands.add_parser(
        "serve",
        help="run the Kubernetes-style apiserver (on its own etcd unless --etcd is given)",
        description="Serve core/v1 resources from watch caches synced with etcd. Without "
        "--etcd, starts an etcd of its own (data in the user data folder) and stops it on exit.",
    )
    serve_cmd.add_argument("--etcd", type=endpoints, help="etcd endpoints, comma-separated")
    serve_cmd.add_argument(
        "--etcd-servers-overrides",
        type=etcd_servers_overrides,
        action="append",
        metavar="GROUP/RESOURCE#SERVERS",
        help="put resources on etcd clusters of their own, as kube-apiserver does: "
        "comma-separated group/resource#servers, the servers separated by ';', the core "
        "group empty (/events#http://127.0.0.1:2381); may be repeated",
    )
    serve_cmd.add_argument(
        "--uncached-resources",
        type=resource_names,
        action="append",
        metavar="RESOURCES",
        help="serve clients' LIST, GET and WATCH of these resources (resource[.group], "
        "comma-separated) from etcd, not a watch cache, as kube-apiserver's "
        "--watch-cache-sizes <resource>#0; may be repeated",
    )
    serve_cmd.add_argument("--host", default="127.0.0.1", help="listen address (127.0.0.1)")
    serve_cmd.add_argument("--port", type=port_number, default=8080, help="listen port (8080)")
    serve_cmd.add_argument(
        "--resources",
        type=resource_list,
        default=DEFAULT_RESOURCES,
        help="comma-separated: configmaps,secrets,pods,namespaces (all)",
    )
    serve_cmd.add_argument("--data-dir", type=Path, help="embedded etcd data folder")
    serve_cmd.add_argument(
        "--demo-configmaps", type=int, default=0, help="load this many configmaps on first run"
    )
    serve_cmd.add_argument(
        "--max-limit", type=positive_int, default=DEFAULT_MAX_LIMIT, help="largest page"
    )
    serve_cmd.add_argument(
        "--enable-garbage-collector",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="delete or orphan the dependents of deleted owners, as kube-controller-manager "
        "does (default: on)",
    )
    serve_cmd.add_argument(
        "--consistent-reads",
        choices=[m.value for m in ConsistentReadsMode],
        default=ConsistentReadsMode.AUTO.value,
        help="serve consistent LISTs from the cache: auto (if etcd allows), force, off",
    )
    serve_cmd.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    serve_cmd.add_argument(
        "--check-consistency-every",
        type=duration_seconds,
        default=DEFAULT_CHECK_INTERVAL,
        metavar="DURATION",
        help="compare each cache with etcd this often, times 1-1.5 jitter; a cache found "
        "different is rebuilt and its reads go to etcd meanwhile (Go duration; default 5m, "
        "as Kubernetes; 0: never)",
    )
    serve_cmd.add_argument(
        "--etcd-compaction-interval",
        type=duration_seconds,
        default=DEFAULT_COMPACTION_INTERVAL,
        metavar="DURATION",
        help="compact etcd's history this often, once between all servers of a cluster, "
        "to the revision seen one interval earlier, as kube-apiserver does (Go duration, "
        "e.g. 5m, 90s; 0 disables; default 5m)",
    )
    serve_cmd.add_argument(
        "--etcd-db-metric-poll-interval",
        type=positive_duration_seconds,
        default=DEFAULT_DB_POLL_INTERVAL,
        metavar="DURATION",
        help="read etcd's database size this often (apiserver_storage_size_bytes); the "
        "embedded etcd is then also defragmented once half its file is free (default 30s)",
    )
    serve_cmd.add_argument(
        "--etcd-quota-backend-bytes",
        type=positive_int,
        default=0,
        metavar="BYTES",
        help="the embedded etcd's backend quota (default: etcd's, 2 GiB); NOSPACE is "
        "lifted by the server once compaction and defragmentation made room",
    )
    serve_cmd.add_argument(
        "--list-indexes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="read LISTs whose selector fixes an indexed field through the cache's index "
        "(pods: spec.nodeName=X, the kubelets' LIST); --no-list-indexes scans (default: on)",
    )
    serve_cmd.add_argument(
        "--response-compression",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="gzip LIST and GET answers over 128 KiB for clients that accept gzip, as "
        "kube-apiserver's APIResponseCompression does (default: on)",
    )
    serve_cmd.add_argument(
        "--loop",
        choices=serve.EVENT_LOOPS,
        default="uvloop",
        help="the event loop to run on (default: uvloop, as uvicorn chooses; asyncio: the "
        "standard library's)",
    )
    serve_cmd.add_argument(
        "--exact-remaining-item-count",
        action="store_true",
        help="send remainingItemCount on filtered pages too (Kubernetes omits it): "
        "O(log n) for one indexed requirement, else one more pass over the candidates",
    )
    serve_cmd.set_defaults(handler=run_serve)

    load_cmd = commands.add_parser(
        "load",
        help="write many objects straight into etcd, as the apiserver stores them",
        description="Create N configmaps or secrets of about SIZE bytes over K namespaces "
        "(demo-0..K-1) with transactions of 128 puts; existing objects are left alone.",
    )
    load_cmd.add_argument("--etcd", type=endpoints, help="etcd endpoints (default: embedded)")
    load_cmd.add_argument("--resource", default="configmaps", choices=["configmaps", "secrets"])
    load_cmd.add_argument("--count", type=positive_int, required=True)
    load_cmd.add_argument("--size", type=positive_int, default=1024, help="bytes per object")
    load_cmd.add_argument("--namespaces", type=positive_int, default=1)
    load_cmd.add_argument("--data-dir", type=Path, help="embedded etcd data folder")
    load_cmd.set_defaults(handler=run_load)

    status_cmd = commands.add_parser(
        "status",
        help="a running apiserver's caches: rvs, sizes, snapshot memory, etcd versions",
    )
    status_cmd.add_argument(
        "--server", default="http://127.0.0.1:8080", help="apiserver URL (http://127.0.0.1:8080)"
    )
    status_cmd.set_defaults(handler=run_status)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed by argparse
        return exc.code if isinstance(exc.code, int) else 1
    handler: Handler = args.handler
    try:
        return handler(args)
    except (EtcdProcessError, EtcdError, UnsafeEtcdVersionError, OSError) as error:
        # Expected operational failures: a clear line, not a traceback.
        print(f"watchcache {args.command}: error: {error}", file=sys.stderr)
        return 1
