#!/usr/bin/env bash
# Installs kubectl 1.20.2 from Debian bookworm's `kubernetes-client` package into
# .deps/kubectl/bin/ of the project (scripts/debian-unpack.sh: private apt state, the
# machine's own mirror, dpkg-deb -x); only usr/bin/kubectl is kept.
#
# Why not `apt-get install kubernetes-client`: on some machines /usr/bin/kubectl already belongs
# to another package (a cloud SDK's kubectl dispatcher), so the install would conflict; the
# tests use this binary by path (docs/clients.md §6).
#
# Prints the bin directory. Idempotent: does nothing when the binary is already there.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.deps/kubectl"
if [[ -x "$dest/bin/kubectl" ]]; then
  echo "$dest/bin"
  exit 0
fi
staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT
"$root/scripts/debian-unpack.sh" bookworm "$staging" kubernetes-client
mkdir -p "$dest/bin"
install -m 0755 "$staging/usr/bin/kubectl" "$dest/bin/kubectl"
"$dest/bin/kubectl" version --client --short >&2
echo "$dest/bin"
