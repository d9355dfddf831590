#!/usr/bin/env bash
# Runs speclab_tests, the unit suite, in a few shards (gtest's own sharding),
# one process per core at a time. Usage:
#   scripts/unit_tests.sh [BUILD_DIR]      (default: build)
# Why shards and not ctest's one process per test: every process loads
# LibTorch and its ~300 libraries, 0.7 s on Debian's build; over ~680 tests
# that was a third of the suite's time. `ctest -L unit -R NAME` still runs any
# test alone, in its own process.
# Environment: SPECLAB_TEST_JOBS (default: nproc), SPECLAB_TEST_SHARDS
# (default: 8 per job, so that a slow shard does not leave a core idle at the end), and
# SPECLAB_TEST_DEVICE as for the tests themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
JOBS=${SPECLAB_TEST_JOBS:-$(nproc)}
SHARDS=${SPECLAB_TEST_SHARDS:-$((JOBS * 8))}
LOGS="$BUILD/unit-shards"
rm -rf "$LOGS" && mkdir -p "$LOGS"
export GTEST_TOTAL_SHARDS=$SHARDS
# Tests write their scratch files under ::testing::TempDir(), which is
# TEST_TMPDIR where set: a folder of this run's, removed at the end.
TEST_TMPDIR=$(mktemp -d "${TMPDIR:-/tmp}/speclab-tests.XXXXXX")
export TEST_TMPDIR
trap 'rm -rf "$TEST_TMPDIR"' EXIT
start=$(date +%s)
# Each shard writes its log and, last, its exit status; a shard that crashes
# or hangs (30 min) fails with the tests it had not finished.
seq 0 $((SHARDS - 1)) | xargs -P "$JOBS" -I{} sh -c \
  "GTEST_SHARD_INDEX={} timeout 1800 '$BUILD/speclab_tests' --gtest_brief=1 > '$LOGS/shard_{}.log' 2>&1; echo \$? > '$LOGS/shard_{}.status'"
passed=0 skipped=0 failed_shards=()
for i in $(seq 0 $((SHARDS - 1))); do
  n=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$LOGS/shard_$i.log")
  passed=$((passed + ${n:-0}))
  n=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$LOGS/shard_$i.log")
  skipped=$((skipped + ${n:-0}))
  [ "$(cat "$LOGS/shard_$i.status")" = 0 ] || failed_shards+=("$i")
done
echo "speclab unit tests: $passed passed, $skipped skipped (their reasons: grep SKIPPED $LOGS/*.log) in $SHARDS shards, $((($(date +%s) - start))) s"
if [ ${#failed_shards[@]} -gt 0 ]; then
  for i in "${failed_shards[@]}"; do
    echo "--- shard $i of $SHARDS failed (status $(cat "$LOGS/shard_$i.status")); its log, $LOGS/shard_$i.log, ends:"
    tail -n 60 "$LOGS/shard_$i.log"
  done
  echo "speclab unit tests: FAILED in shards ${failed_shards[*]}; run one alone with ctest -R NAME --output-on-failure"
  exit 1
fi
