#!/usr/bin/env bash
# Builds speclab's libFuzzer targets (tests/fuzz/, clang with ASan and UBSan)
# and runs each for a bounded time on its seed corpus. Usage:
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET ...]     (default: 20 s, every target)
# Inputs found to be new are kept in build-fuzz/corpus/ (not in the
# repository); a crash stops the script with the input that caused it in
# build-fuzz/crashes/, to be turned into a regression test (and kept in
# tests/fuzz/regressions/, which every run replays first).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-20}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(experiment_yaml safetensors_header config_json bpe_tokenizer sentencepiece prompt_file)
GENERATOR=()
if command -v ninja >/dev/null; then GENERATOR=(-G Ninja); fi
if [ ! -f build-fuzz/CMakeCache.txt ]; then
  cmake -S tests/fuzz -B build-fuzz "${GENERATOR[@]}" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build build-fuzz -j"$(nproc)" >/dev/null
mkdir -p build-fuzz/crashes
for target in "${TARGETS[@]}"; do
  mkdir -p "build-fuzz/corpus/$target"
  # Inputs that once crashed run first (tests/fuzz/regressions/TARGET-*).
  regressions=(tests/fuzz/regressions/"$target"-*)
  if [ -e "${regressions[0]}" ] && ! "build-fuzz/fuzz_$target" "${regressions[@]}" > "build-fuzz/$target.regressions.log" 2>&1; then
    tail -n 40 "build-fuzz/$target.regressions.log"
    echo "speclab fuzz: $target fails on a regression input"
    exit 1
  fi
  echo "speclab fuzz: $target for ${SECONDS_PER_TARGET}s"
  # The first folder receives new inputs; the repository's seeds are only read.
  if ! "build-fuzz/fuzz_$target" "build-fuzz/corpus/$target" "tests/fuzz/corpus/$target" \
      -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -max_len=200000 \
      -artifact_prefix="build-fuzz/crashes/$target-" -print_final_stats=1 > "build-fuzz/$target.log" 2>&1; then
    tail -n 40 "build-fuzz/$target.log"
    echo "speclab fuzz: $target FAILED; the input is in build-fuzz/crashes/"
    exit 1
  fi
  grep -E "^stat::number_of_executed_units|^stat::new_units_added" "build-fuzz/$target.log" | tr '\n' ' '
  echo
done
