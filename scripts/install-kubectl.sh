#!/usr/bin/env bash
# Installs kubectl 1.20.2 from Debian bookworm's `kubernetes-client` package into
# .deps/kubectl/bin/ of the project, the same way scripts/install-etcd.sh installs etcd: a
# private sources list, lists, cache and an empty dpkg status (the host's apt state is not
# touched), `apt-get download` of the one .deb, then `dpkg-deb -x` and only usr/bin/kubectl is
# kept. No maintainer scripts run and the package's dependencies are not needed.
#
# Why not `apt-get install kubernetes-client`: on some machines /usr/bin/kubectl already belongs
# to another package (a cloud SDK's kubectl dispatcher), so the install would conflict; the
# tests use this binary by path (KUBECTL.md §6).
#
# Prints the bin directory. Idempotent: does nothing when the binary is already there.
set -euo pipefail

suite=bookworm
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.deps/kubectl"
if [[ -x "$dest/bin/kubectl" ]]; then
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
  echo "install-kubectl: no Debian mirror found in this machine's apt sources" >&2
  exit 1
fi
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
if [[ ! -f "$keyring" ]]; then
  echo "install-kubectl: $keyring is missing (package debian-archive-keyring)" >&2
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
echo "install-kubectl: downloading $suite's kubernetes-client" >&2
apt-get "${apt_opts[@]}" update -qq >/dev/null
(cd "$state/cache/archives" && apt-get "${apt_opts[@]}" download -qq kubernetes-client >/dev/null)

staging="$state/root"
mkdir -p "$staging"
for deb in "$state"/cache/archives/*.deb; do
  dpkg-deb -x "$deb" "$staging"
done
mkdir -p "$dest/bin"
install -m 0755 "$staging/usr/bin/kubectl" "$dest/bin/kubectl"
"$dest/bin/kubectl" version --client --short >&2
echo "$dest/bin"
