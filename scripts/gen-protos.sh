#!/usr/bin/env bash
# Regenerates the committed etcd v3 protobuf modules (kv_pb2.py/.pyi, rpc_pb2.py/.pyi) from
# python/watchcache/etcd/proto/*.proto with grpcio-tools' bundled protoc.
#
# Usage: scripts/gen-protos.sh [OUTDIR]
#   Without OUTDIR the modules are written in place (under python/). With OUTDIR the same
#   tree (OUTDIR/watchcache/etcd/proto/...) is written there instead, so a test can compare
#   a fresh generation with the committed files byte for byte.
# The interpreter is $PYTHON, else the project's .venv/bin/python. The output depends only
# on the .proto files and the grpcio-tools version pinned in the Makefile.
set -euo pipefail
export LC_ALL=C TZ=UTC

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
out="${1:-$root/python}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

cd "$root/python"
# Fixed order, paths relative to the include root: the descriptors embed these names and
# rpc.proto imports "watchcache/etcd/proto/kv.proto", which makes rpc_pb2 import
# `from watchcache.etcd.proto import kv_pb2`.
protos=(watchcache/etcd/proto/kv.proto watchcache/etcd/proto/rpc.proto)
"$python" -m grpc_tools.protoc -I . --python_out="$out" --pyi_out="$out" "${protos[@]}"
