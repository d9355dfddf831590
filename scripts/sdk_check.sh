#!/usr/bin/env bash
# Installs speclab into build/install, builds examples/out_of_tree against it
# (find_package(speclab)), runs the example's tests, an experiment that loads
# it through `plugins:`, and `speclab audit` on its verifier.
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=$PWD/build/install
EXAMPLE=examples/out_of_tree
GENERATOR=()
if command -v ninja >/dev/null; then GENERATOR=(-G Ninja); fi
cmake --install build --prefix "$PREFIX" > /dev/null
cmake -S "$EXAMPLE" -B "$EXAMPLE/build" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" > /dev/null
cmake --build "$EXAMPLE/build" -j"$(nproc)"
ctest --test-dir "$EXAMPLE/build" --output-on-failure
"$PREFIX/bin/speclab" audit --plugin "$EXAMPLE/build/libspeclab_example.so" | grep -E "^(VERIFIER|textbook_rejection) "
# Both plugin methods run and, at temperature 0, reproduce greedy decoding.
matched=$("$PREFIX/bin/speclab" run "$EXAMPLE/experiment.yaml" --set prompts.per_task=1 \
  --set decoding.max_new_tokens=16 --set 'decoding.temperatures=[0]' 2>/dev/null |
  grep -cE '^\| (last_follower|textbook_rejection) \|.* 100% \|$' || true)
if [ "$matched" != 6 ]; then
  echo "speclab: the out-of-tree methods did not reproduce greedy decoding ($matched of 6 rows)" >&2
  exit 1
fi
echo "speclab: SDK check passed (installed package, out-of-tree plugin, plugins: in an experiment, audit)"
