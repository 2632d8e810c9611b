"""The ``watchcache`` command line: one argparse parser, one subcommand per task.

``main(argv)`` parses, dispatches to the subcommand's handler and returns its exit code
(argparse's own exits, such as ``--help`` or a usage error, are returned too, not raised),
so tests call it like a function. Each subcommand registers itself in ``build_parser``
with a handler ``(args) -> int`` that maps the parsed options onto its module's entry
point; the modules themselves know nothing of argparse. Today: ``demo``; later
issues add ``serve``, ``load``, ``bench`` and ``status`` the same way.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence

from watchcache import demo

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed by argparse
        return exc.code if isinstance(exc.code, int) else 1
    handler: Handler = args.handler
    return handler(args)
