#!/usr/bin/env bash
# Builds the reference implementation harness of the differential tests of server-side apply
# (tests/differential/README.md) into .deps/smd-reference/bin/smd-reference.
#
# The reference is structured-merge-diff v4.1.2 as Debian bookworm ships its source
# (golang-k8s-sigs-structured-merge-diff-dev), built with bookworm's Go 1.19 (golang-go).
# Both, and the Go packages the library's non-test code imports (json-iterator and its two
# modern-go packages, yaml.v2), are unpacked by scripts/debian-unpack.sh without touching the
# host's apt state. The build runs in GOPATH mode over a GOPATH of symlinks into the unpacked
# /usr/share/gocode/src; GOROOT, GOPATH, GOCACHE and the Go settings are all explicit and
# under .deps/smd-reference/, so neither the host's Go (if any) nor its environment is used.
#
#   scripts/install-smd-reference.sh
#
# Prints the binary's path. Idempotent: unpacks only when the unpacked tree is missing or was
# made for another package list, and rebuilds only when the Go source changed since the last
# build (or the packages were unpacked anew).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.deps/smd-reference"
source_dir="$root/tests/differential/smd_reference"
binary="$dest/bin/smd-reference"

# gofuzz, which the Debian package also depends on, is imported by the library's tests only.
packages=(
  golang-go golang-src golang-1.19-go golang-1.19-src
  golang-k8s-sigs-structured-merge-diff-dev
  golang-github-json-iterator-go-dev
  golang-github-modern-go-concurrent-dev
  golang-github-modern-go-reflect2-dev
  golang-gopkg-yaml.v2-dev
)
unpacked="$dest/debian"
unpacked_stamp="$dest/debian.packages"

if [[ ! -f "$unpacked_stamp" || "$(cat "$unpacked_stamp")" != "${packages[*]}" ]]; then
  mkdir -p "$root/.deps"
  staging="$(mktemp -d "$root/.deps/smd-reference-staging.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  "$root/scripts/debian-unpack.sh" bookworm "$staging" "${packages[@]}"
  # Another toolchain or library: what was built before is stale.
  rm -rf "$unpacked" "$unpacked_stamp" "$dest/bin"
  mkdir -p "$dest"
  mv "$staging" "$unpacked"
  trap - EXIT
  echo "${packages[*]}" >"$unpacked_stamp"
fi

goroot="$unpacked/usr/lib/go-1.19"
gocode="$unpacked/usr/share/gocode/src"
gopath="$dest/gopath"
# The library's own import paths carry the module's major version; the Debian package keeps
# its source under the path without it.
mkdir -p "$gopath/src/sigs.k8s.io/structured-merge-diff"
ln -sfn ../../../../debian/usr/share/gocode/src/sigs.k8s.io/structured-merge-diff \
  "$gopath/src/sigs.k8s.io/structured-merge-diff/v4"
ln -sfn ../../debian/usr/share/gocode/src/github.com "$gopath/src/github.com"
ln -sfn ../../debian/usr/share/gocode/src/gopkg.in "$gopath/src/gopkg.in"
for required in "$gopath/src/sigs.k8s.io/structured-merge-diff/v4/merge" \
  "$gopath/src/github.com/json-iterator/go" "$gopath/src/gopkg.in/yaml.v2" "$goroot/bin/go"; do
  if [[ ! -e "$required" ]]; then
    echo "install-smd-reference: $required is missing from the unpacked packages" >&2
    exit 1
  fi
done

go_env=(
  env -u GOFLAGS -u GOENV -u GOOS -u GOARCH -u GOBIN
  GOROOT="$goroot"
  GOPATH="$gopath"
  GOCACHE="$dest/gocache"
  GOENV=off
  GO111MODULE=off
  GOFLAGS=-trimpath
  GOPROXY=off
  GOTOOLCHAIN=local
  CGO_ENABLED=0
  PATH="$goroot/bin:$PATH"
)

# What the binary is built from: the SHA-256 of our Go files' contents, in C-locale name
# order (tests/support/smd_reference.py computes the same to refuse a stale binary).
source_hash="$(cd "$source_dir" && LC_ALL=C && cat ./*.go | sha256sum)"
source_hash="${source_hash%% *}"
build_stamp="$dest/bin/smd-reference.source"
if [[ -x "$binary" && -f "$build_stamp" && "$(cat "$build_stamp")" == "$source_hash" ]]; then
  echo "$binary"
  exit 0
fi
mkdir -p "$dest/bin"
rm -f "$build_stamp"
# Build outside GOPATH from the source folder itself: GOPATH mode resolves its imports from
# $GOPATH/src and GOROOT, and nothing of the project is copied or linked into the GOPATH.
(cd "$source_dir" && "${go_env[@]}" go vet . && "${go_env[@]}" go build -o "$binary.new" .)
mv "$binary.new" "$binary"
echo "$source_hash" >"$build_stamp"
echo "install-smd-reference: built $("${go_env[@]}" go version | cut -d' ' -f3) smd-reference" >&2
echo "$binary"
