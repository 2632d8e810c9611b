#!/usr/bin/env bash
# Installs GoogleTest (Debian's libgtest-dev: headers, static libraries, CMake config) when
# it is missing. Idempotent; needs root (CI and the dev machines run as root).
set -euo pipefail
if [[ -f /usr/include/gtest/gtest.h ]] && compgen -G '/usr/lib/*/libgtest.a' >/dev/null; then
  exit 0
fi
echo "installing libgtest-dev (GoogleTest) with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends libgtest-dev >/dev/null
