#!/usr/bin/env bash
# Installs etcd and etcdctl from Debian's packages into .deps/etcd-<suite>/ of the project,
# without touching the host's apt state: a private sources list, lists, cache and an empty
# dpkg status, then `dpkg-deb -x` of the downloaded .deb files (no maintainer scripts run,
# no etcd user, no service — the project starts etcd itself).
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

# The mirror is the one this machine already uses for Debian (deb822 or one-line sources).
mirror=""
for f in /etc/apt/sources.list.d/*.sources; do
  [[ -f "$f" ]] || continue
  mirror="$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$f")"
  [[ -n "$mirror" ]] && break
done
if [[ -z "$mirror" ]]; then
  mirror="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }')"
fi
if [[ -z "$mirror" ]]; then
  echo "install-etcd: no Debian mirror found in this machine's apt sources" >&2
  exit 1
fi
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
if [[ ! -f "$keyring" ]]; then
  echo "install-etcd: $keyring is missing (package debian-archive-keyring)" >&2
  exit 1
fi

state="$(mktemp -d)"
trap 'rm -rf "$state"' EXIT
mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/parts"
echo "deb [signed-by=$keyring] $mirror $suite main" >"$state/sources.list"
touch "$state/status"
apt_opts=(
  -o "Dir::Etc::sourcelist=$state/sources.list"
  -o "Dir::Etc::sourceparts=$state/parts"
  -o "Dir::State::Lists=$state/lists"
  -o "Dir::Cache=$state/cache"
  -o "Dir::State::status=$state/status"
  -o "APT::Sandbox::User=root"
  -o "Acquire::Languages=none"
  -o "Debug::NoLocking=1"
)
echo "install-etcd: downloading $suite's etcd-server and etcd-client" >&2
apt-get "${apt_opts[@]}" update -qq >/dev/null
(cd "$state/cache/archives" && apt-get "${apt_opts[@]}" download -qq etcd-server etcd-client >/dev/null)

staging="$state/root"
mkdir -p "$staging"
for deb in "$state"/cache/archives/*.deb; do
  dpkg-deb -x "$deb" "$staging"
done
mkdir -p "$dest/bin"
install -m 0755 "$staging/usr/bin/etcd" "$dest/bin/etcd"
install -m 0755 "$staging/usr/bin/etcdctl" "$dest/bin/etcdctl"
"$dest/bin/etcd" --version | head -1 >&2
echo "$dest/bin"
