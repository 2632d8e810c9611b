#!/usr/bin/env bash
# Downloads Debian packages of a suite and unpacks them into a folder, without touching the
# host's apt state: a private sources list, lists, cache and an empty dpkg status, then
# `apt-get download` and `dpkg-deb -x`. No maintainer scripts run; dependencies are not
# fetched (the callers take single binaries that link only against libc).
#
#   scripts/debian-unpack.sh SUITE DEST PACKAGE...
#
# The mirror is the one this machine already uses for Debian (deb822 or one-line sources);
# none is hard-coded. Used by install-etcd.sh and install-kubectl.sh.
set -euo pipefail

if [[ $# -lt 3 ]]; then
  echo "usage: $0 SUITE DEST PACKAGE..." >&2
  exit 2
fi
suite="$1" dest="$2"
shift 2

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
  echo "debian-unpack: no Debian mirror found in this machine's apt sources" >&2
  exit 1
fi
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
if [[ ! -f "$keyring" ]]; then
  echo "debian-unpack: $keyring is missing (package debian-archive-keyring)" >&2
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
echo "debian-unpack: downloading $suite's $*" >&2
apt-get "${apt_opts[@]}" update -qq >/dev/null
(cd "$state/cache/archives" && apt-get "${apt_opts[@]}" download -qq "$@" >/dev/null)
mkdir -p "$dest"
for deb in "$state"/cache/archives/*.deb; do
  dpkg-deb -x "$deb" "$dest"
done
