#!/usr/bin/env bash
# A/B of the apiserver's Python code: the tree at BASE (default: bench/ab_apiserver.py's, the
# commit before issue 21's work) against the working tree, alternating on one etcd in one
# run; the options go to the script (bench/README.md, "A/B: the apiserver's LIST and WATCH").
#
# Usage: scripts/ab-apiserver.sh [BASE] [OPTION ...]
#   e.g. scripts/ab-apiserver.sh HEAD~3 --full       scripts/ab-apiserver.sh 580bb7b --callgrind
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  args=(--base "$1")
  shift
fi
exec "${PYTHON:-.venv/bin/python}" bench/ab_apiserver.py "${args[@]}" "$@"
