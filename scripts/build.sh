#!/usr/bin/env bash
# Configures and builds speclab into build/ (Release). Extra arguments go to cmake --build.
set -euo pipefail
cd "$(dirname "$0")/.."
GENERATOR=()
if command -v ninja >/dev/null; then GENERATOR=(-G Ninja); fi
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build -j"$(nproc)" "$@"
