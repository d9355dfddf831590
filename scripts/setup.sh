#!/usr/bin/env bash
# Installs speclab's build and run dependencies from Debian 12's packages.
# Idempotent: packages already present are skipped by apt.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PACKAGES=(
  build-essential cmake ninja-build git pkg-config ccache
  libtorch-dev libopenblas0-pthread
  libabsl-dev libprotobuf-dev protobuf-compiler libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev   # libFuzzer and the sanitizers (scripts/fuzz.sh)
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "speclab setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
