#!/usr/bin/env bash
# Installs wrk, the HTTP load generator the throughput benchmarks drive the apiserver with,
# from Debian bookworm's `wrk` package into .deps/wrk/ of the project (scripts/debian-unpack.sh:
# private apt state, the machine's own mirror, dpkg-deb -x; the host's apt state is not
# touched).
#
# wrk links against LuaJIT (libluajit-5.1-2), which a machine without it lacks: the library
# is unpacked beside the binary, in .deps/wrk/lib, and .deps/wrk/bin/wrk is a wrapper that
# runs the real binary (.deps/wrk/libexec/wrk) with that folder on LD_LIBRARY_PATH. OpenSSL
# (libssl3) is the machine's own.
#
# Why wrk: a native client with one event loop per thread keeps 32 connections busy on
# this 2-core machine at a fraction of a core, so what it measures is the server; a Python
# client would saturate a core of its own long before the server does.
#
# Prints the bin directory. Idempotent: does nothing when the wrapper already works. Used by
# the bench targets (bench/read_path.py), never by `make test`.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.deps/wrk"
# `wrk --version` prints its banner and exits 1: the banner says the wrapper works.
banner=""
if [[ -x "$dest/bin/wrk" ]]; then
  banner="$("$dest/bin/wrk" --version 2>&1 </dev/null || true)"
fi
if [[ "$banner" == "wrk "* ]]; then
  echo "$dest/bin"
  exit 0
fi
staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT
"$root/scripts/debian-unpack.sh" bookworm "$staging" wrk libluajit-5.1-2
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/libexec" "$dest/lib"
install -m 0755 "$staging/usr/bin/wrk" "$dest/libexec/wrk"
# The versioned file and its soname link (cp -a keeps the link a link).
cp -a "$staging"/usr/lib/*-linux-gnu/libluajit-5.1.so.2* "$dest/lib/"
cat >"$dest/bin/wrk" <<'EOF'
#!/bin/sh
# wrk with the LuaJIT unpacked beside it (scripts/install-wrk.sh).
here="$(cd "$(dirname "$0")/.." && pwd)"
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/libexec/wrk" "$@"
EOF
chmod 0755 "$dest/bin/wrk"
banner="$("$dest/bin/wrk" --version 2>&1 </dev/null || true)"
echo "${banner%%$'\n'*}" >&2
echo "$dest/bin"
