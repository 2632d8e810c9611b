#!/usr/bin/env bash
# `make asan-python`: the Python test suite over an extension built with AddressSanitizer
# and UBSan, LeakSanitizer checking every Python process at exit.
#
#   scripts/asan-python.sh                 tests/unit, conformance, property, integration
#                                          (about 10 minutes on 2 cores, plus the build)
#   scripts/asan-python.sh tests/unit -k x  any pytest arguments instead
#
# What it builds, apart from the project's .venv (whose editable install stays as it is):
#   build/asan-python/cmake   the CMake build of the wheel (-O1 -g, ASan + UBSan), kept, so
#                             a rerun only recompiles what changed
#   build/asan-python/dist    the wheel
#   build/asan-python/venv    a venv of the same interpreter with only that wheel installed;
#                             every other package comes from .venv's site-packages through a
#                             .pth line, so the dev packages are the same ones, not a copy
#
# How it runs: the interpreter is not instrumented, so libasan must be the first library
# loaded (LD_PRELOAD), with libstdc++ right after it (else ASan's __cxa_throw interceptor
# finds no real __cxa_throw and aborts at the first C++ exception). PYTHONMALLOC=malloc
# sends every Python allocation through malloc: ASan then checks them all, and LeakSanitizer
# can follow pointers held by Python objects (pymalloc's arenas are mmap'ed, which it does
# not scan, so objects reachable only through them would look leaked). Child processes
# inherit all of it: a `python -m watchcache` a test starts is checked the same way (etcd
# and kubectl are Go programs; the preloaded runtime is unused there).
#
# Leaks are reported, with the allocation stack, when a process exits. CPython 3.11 itself
# needs no suppression here (what it keeps at exit stays reachable); the few below are
# other extension modules' by-design allocations. A canary leak made from Python code must
# be reported before the suite runs. Exit status: non-zero when a test failed or anything
# leaked; an ASan or UBSan error aborts the process at once.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
py="$root/.venv/bin/python"
build="$root/build/asan-python"
venv="$build/venv"
flags="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

echo "asan-python: building the extension with ASan + UBSan in $build (incremental)" >&2
rm -rf "$build/dist"
"$py" -m pip wheel . -q --disable-pip-version-check --no-build-isolation --no-deps \
  -w "$build/dist" -Cbuild-dir="$build/cmake" -Ccmake.build-type=Debug \
  "-Ccmake.define.CMAKE_CXX_FLAGS=$flags"

if [[ ! -x "$venv/bin/python" ]]; then
  base="$("$py" -c 'import sys; print(sys._base_executable)')"
  "$base" -m venv --without-pip "$venv"
fi
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
  >"$site/watchcache-dev-packages.pth"
"$py" -m pip --python "$venv/bin/python" install -q --disable-pip-version-check --no-deps \
  --force-reinstall "$build"/dist/watchcache-*.whl
# The tests must see the ASan package, not the editable install of .venv.
"$venv/bin/python" - "$site" <<'EOF'
import importlib.util, sys
origin = importlib.util.find_spec("watchcache").origin
assert origin.startswith(sys.argv[1]), f"watchcache comes from {origin}"
EOF

# LeakSanitizer suppressions. LSan matches a pattern against every frame of an allocation's
# stack (function, file or library name), so no pattern may name anything on the path of a
# call into _core (the eval loop, the call machinery, object constructors): it would hide
# our leaks too. What is left are one-time allocations other extension modules keep until
# the process ends by design, matched by their library's name, which never appears in a
# stack of ours.
cat >"$build/lsan.supp" <<'EOF'
# pydantic-core (imported by a test dependency): static tables built at module init.
leak:_pydantic_core.cpython
# grpcio-tools' protoc (tests/unit/test_protos.py regenerates the etcd modules with it).
leak:_protoc_compiler.cpython
# gRPC's core (the etcd client): global state (channel args, resolvers, executors) that it
# keeps for the life of the process; grpcio never shuts its core down at interpreter exit.
leak:cygrpc.cpython
EOF

asan_lib="$(gcc -print-file-name=libasan.so)"
stdcxx_lib="$(gcc -print-file-name=libstdc++.so)"
if (($# == 0)); then
  # One test bounds each await on a 10,002-object list at 5 s, which decoding them all
  # exceeds ten times slower: it is a timing bound, not a check of memory.
  set -- tests/unit tests/conformance tests/property tests/integration --deselect \
    tests/integration/test_etcd_store.py::test_doubling_stops_at_10000_and_a_larger_limit_is_never_changed
fi
# Full (DWARF) unwinding at every malloc: libstdc++ and most wheels have no frame pointers,
# and a stack cut at their first frame could be matched by no suppression and blamed on no
# one. Ten frames reach the allocating library in every case seen; it costs ~10x in time.
sanitized=(env "LD_PRELOAD=$asan_lib $stdcxx_lib" PYTHONMALLOC=malloc
  "ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:fast_unwind_on_malloc=0:malloc_context_size=10"
  "LSAN_OPTIONS=suppressions=$build/lsan.supp:print_suppressions=0"
  "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")

# A canary: a block malloc'ed from Python code and dropped must be reported, through the
# same interpreter frames a call into _core passes, so no suppression hides those.
if "${sanitized[@]}" "$venv/bin/python" -c 'import ctypes, watchcache; ctypes.CDLL(None).malloc(4242)' \
  2>"$build/canary.log"; then
  echo "asan-python: LeakSanitizer missed the canary leak; see $build/canary.log" >&2
  exit 1
fi
grep -q "4242 byte(s)" "$build/canary.log" || {
  echo "asan-python: the canary failed in an unexpected way; see $build/canary.log" >&2
  exit 1
}

echo "asan-python: pytest $* under ASan + UBSan + LeakSanitizer" >&2
start=$SECONDS
status=0
"${sanitized[@]}" "$venv/bin/python" -m pytest -p no:cacheprovider "$@" || status=$?
echo "asan-python: exit status $status after $((SECONDS - start)) s" >&2
exit "$status"
