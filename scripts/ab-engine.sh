#!/usr/bin/env bash
# Compares the engine in the working tree (candidate) with the engine at BASE (default HEAD)
# in one process: cpp/bench/ab/ab_engine.cpp says how. On this kind of shared 2-core machine
# two separate runs of a benchmark differ by 10-30 % with the machine's phase; alternating
# batches of both builds in one process leaves a bias of a few percent, which running with
# the same revision on both sides (BASE = the working tree's HEAD, no changes) shows.
#
# Usage: scripts/ab-engine.sh [BASE] [SCENARIO ...]    e.g. scripts/ab-engine.sh HEAD~1 update window
# Scenarios: update snap_put window get scan (default: all), grown_update grown_get. ROUNDS=4 KEYS=1000000 by default.
set -euo pipefail
cd "$(dirname "$0")/.."
base="${1:-HEAD}"
shift || true
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(update snap_put window get scan)
out=build/ab
rm -rf "$out/base" && mkdir -p "$out/base/watchcache_base"
git archive "$base" cpp/include/watchcache cpp/bench/bench_common.hpp | tar -x -C "$out/base"
cp "$out"/base/cpp/include/watchcache/*.hpp "$out/base/watchcache_base/"
sed -i 's#"watchcache/#"watchcache_base/#' "$out"/base/watchcache_base/*.hpp
sed 's#"watchcache/#"watchcache_base/#; /#pragma once/d' "$out/base/cpp/bench/bench_common.hpp" \
  > "$out/base/bench_common_base.hpp"
"${CXX:-c++}" -std=c++20 -O3 -DNDEBUG -pthread -I"$out/base" -Icpp/include -Icpp/bench -Icpp/bench/ab \
  -o "$out/ab_engine" cpp/bench/ab/ab_engine.cpp
echo "baseline: $base ($(git rev-parse --short "$base")); candidate: the working tree"
for s in "${scenarios[@]}"; do
  "$out/ab_engine" "$s" "${ROUNDS:-4}" "${KEYS:-1000000}"
done
