#!/usr/bin/env bash
# Installs etcd and etcdctl from Debian's packages into .deps/etcd-<suite>/ of the project
# (scripts/debian-unpack.sh: private apt state, the machine's own mirror, dpkg-deb -x; no
# etcd user, no service — the project starts etcd itself).
#
#   scripts/install-etcd.sh            trixie's etcd 3.5.x (the one the project runs on)
#   scripts/install-etcd.sh bookworm   bookworm's etcd 3.4.23 (has the progress-notify bug;
#                                      used by the version-safeguard test)
#
# Prints the bin directory. Idempotent: does nothing when the binaries are already there.
set -euo pipefail

suite="${1:-trixie}"
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.deps/etcd-$suite"
if [[ -x "$dest/bin/etcd" && -x "$dest/bin/etcdctl" ]]; then
  echo "$dest/bin"
  exit 0
fi
staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT
"$root/scripts/debian-unpack.sh" "$suite" "$staging" etcd-server etcd-client
mkdir -p "$dest/bin"
install -m 0755 "$staging/usr/bin/etcd" "$dest/bin/etcd"
install -m 0755 "$staging/usr/bin/etcdctl" "$dest/bin/etcdctl"
# Read the whole output before printing its first line: `| head -1` under pipefail fails the
# script with SIGPIPE (141) whenever etcd writes its second line after head has exited.
version="$("$dest/bin/etcd" --version)"
echo "${version%%$'\n'*}" >&2
echo "$dest/bin"
