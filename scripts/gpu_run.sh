#!/usr/bin/env bash
# Builds, tests and benchmarks speclab on a CUDA machine against PyTorch's
# LibTorch 2.x, in one call. Usage:
#   scripts/gpu_run.sh [STAGE ...]     stages: build test sdk compare train parity bench trace pack
#                                      (default: build test bench)
# Environment:
#   OUT           folder for results (default out/gpu); logs and tables land there
#   ABSL_DEBS     folder with Debian's libabsl-dev and libabsl20220623 .debs
#                 (the CUDA image has no Abseil; default .carry/debs)
#   CORPUS_TAR    tar.xz of data/corpus for the train stage (default .carry/corpus.tar.xz)
#   SKIP_HF       if set, the bench stage skips the transformers comparison
#   BENCH_SHAPES  shapes for bench-decode (default shipped,1b,8b)
#   RESULTS_TAR   if set, OUT is packed into this .tgz after every stage, so
#                 that a run cut short still returns what it measured
#   BASE_TAR      for the compare stage: a `git archive` tarball of the commit
#                 to compare against (default .carry/base.tar)
#   COMPARE_ROUNDS  rounds of base-then-head runs in the compare stage (default 1)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu}
ABSL_DEBS=${ABSL_DEBS:-.carry/debs}
CORPUS_TAR=${CORPUS_TAR:-.carry/corpus.tar.xz}
BUILD=build-gpu
mkdir -p "$OUT"
STAGES=("$@")
[ ${#STAGES[@]} -gt 0 ] || STAGES=(build test bench)
has() { local s; for s in "${STAGES[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
log() { echo "== $(date +%T) $*" | tee -a "$OUT/gpu_run.log"; }
snapshot() { if [ -n "${RESULTS_TAR:-}" ]; then tar -czf "$RESULTS_TAR" -C "$OUT" . || true; fi; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/card.txt"

if has build; then
  log "build"
  ABSL_PREFIX=/tmp/speclab-absl
  if [ ! -d "$ABSL_PREFIX/usr" ]; then
    mkdir -p "$ABSL_PREFIX"
    for deb in "$ABSL_DEBS"/*.deb; do dpkg -x "$deb" "$ABSL_PREFIX"; done
  fi
  export LD_LIBRARY_PATH="$ABSL_PREFIX/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$ABSL_PREFIX/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DTORCH_CUDA_ARCH_LIST=9.0 > "$OUT/cmake.log" 2>&1 || { tail -40 "$OUT/cmake.log"; exit 1; }
  ninja -C "$BUILD" > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -80; exit 1; }
  log "build ok"
  snapshot
fi
export LD_LIBRARY_PATH="/tmp/speclab-absl/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"

if has test; then
  log "test (CUDA visible)"
  { SPECLAB_TEST_DEVICE=cuda SPECLAB_TEST_JOBS=8 scripts/unit_tests.sh "$BUILD" &&
    ctest --test-dir "$BUILD" -j8 -LE unit --output-on-failure; } > "$OUT/ctest.log" 2>&1 \
    && log "tests passed" || { log "TESTS FAILED"; grep -E "Failed|FAILED|Error" "$OUT/ctest.log" | head -40 || true; }
  tail -5 "$OUT/ctest.log"
  "$BUILD/speclab" audit > "$OUT/audit.txt" 2>&1 || log "AUDIT FAILED"
  snapshot
fi

if has sdk; then
  # The installed package against PyTorch's LibTorch: the out-of-tree example
  # builds, its tests pass, and an experiment on CUDA loads it.
  log "sdk: install, out-of-tree example"
  TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  cmake --install "$BUILD" --prefix /tmp/speclab-install > "$OUT/sdk.log" 2>&1
  cmake -S examples/out_of_tree -B /tmp/speclab-example -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="/tmp/speclab-install;$TORCH_PREFIX;/tmp/speclab-absl/usr" >> "$OUT/sdk.log" 2>&1 &&
    ninja -C /tmp/speclab-example >> "$OUT/sdk.log" 2>&1 &&
    ctest --test-dir /tmp/speclab-example --output-on-failure >> "$OUT/sdk.log" 2>&1 &&
    /tmp/speclab-install/bin/speclab run examples/out_of_tree/experiment.yaml --set models.device=cuda \
      --set 'plugins=[/tmp/speclab-example/libspeclab_example.so]' --set prompts.per_task=2 >> "$OUT/sdk.log" 2>&1 \
    && log "sdk ok" || { log "SDK FAILED"; tail -n 30 "$OUT/sdk.log"; }
  grep -A6 'task `all`' "$OUT/sdk.log" || true
fi

if has compare; then
  # No speed lost: gpu_quickstart.yaml at BASE_TAR's commit and at this tree,
  # alternating, on one card in one call.
  BASE_TAR=${BASE_TAR:-.carry/base.tar}
  log "compare: build the base ($BASE_TAR)"
  # The tarball may leave out the models and data (the device's upload is
  # limited): the base then reads this tree's.
  rm -rf /tmp/speclab-base && mkdir -p /tmp/speclab-base && tar -xf "$BASE_TAR" -C /tmp/speclab-base
  for shared in models data; do [ -e /tmp/speclab-base/$shared ] || ln -s "$PWD/$shared" /tmp/speclab-base/$shared; done
  TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  (cd /tmp/speclab-base && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;/tmp/speclab-absl/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DTORCH_CUDA_ARCH_LIST=9.0 > /tmp/base_cmake.log 2>&1 && ninja -C build-gpu speclab > /tmp/base_build.log 2>&1) \
    || { log "BASE BUILD FAILED"; tail -n 30 /tmp/base_build.log; }
  for round in $(seq 1 "${COMPARE_ROUNDS:-1}"); do
    for side in base head; do
      dir=$PWD; [ $side = base ] && dir=/tmp/speclab-base
      log "compare: $side, round $round"
      (cd "$dir" && build-gpu/speclab run configs/experiments/gpu_quickstart.yaml) > "$OUT/compare_${side}_$round.md" \
        2> "/tmp/compare_${side}_$round.log" || { log "COMPARE $side FAILED"; tail -n 20 "/tmp/compare_${side}_$round.log"; }
      grep -A9 'task `all`' "$OUT/compare_${side}_$round.md" || true
    done
  done
  snapshot
fi

if has train; then
  log "train"
  [ -f data/corpus/train.txt ] || tar -xJf "$CORPUS_TAR"
  "$BUILD/speclab" train configs/train/target.yaml ${TRAIN_TARGET_SET:-} 2>&1 | tr '\r' '\n' | grep -v '^$' | tail -n 40 > "$OUT/train_target.log"
  "$BUILD/speclab" train configs/train/drafter.yaml ${TRAIN_DRAFTER_SET:-} 2>&1 | tr '\r' '\n' | grep -v '^$' | tail -n 40 > "$OUT/train_drafter.log"
  tail -3 "$OUT/train_target.log" "$OUT/train_drafter.log"
fi

if has parity; then
  log "parity fixtures (transformers)"
  python3 scripts/hf_reference.py --out tests/fixtures/hf_parity > "$OUT/parity.log" 2>&1 || tail -20 "$OUT/parity.log"
  python3 scripts/shipped_reference.py > "$OUT/shipped_reference.log" 2>&1 || tail -20 "$OUT/shipped_reference.log"
  if [ -f scripts/tokenizer_reference.py ]; then
    python3 scripts/tokenizer_reference.py > "$OUT/tokenizer_reference.log" 2>&1 || tail -20 "$OUT/tokenizer_reference.log"
  fi
fi

if has bench; then
  # Everything a results table needs, on one card in one run: decoding
  # against the bandwidth floor, the shipped pair end to end (speclab), and
  # the same weights and prompt ids in transformers.
  log "bench: decode vs bandwidth floor"
  timeout 240 "$BUILD/speclab" bench-decode --out "$OUT/decode" --shapes ${BENCH_SHAPES:-shipped,1b,8b} 2>&1 | tee "$OUT/decode.log" | tail -n 20 || log "BENCH-DECODE FAILED"
  snapshot
  log "bench: framework overhead per step (random 8B target, 1B drafter)"
  timeout 300 "$BUILD/speclab" bench-overhead --out "$OUT/overhead" 2>&1 | tee "$OUT/overhead.log" | tail -n 12 || log "BENCH-OVERHEAD FAILED"
  # The shipped shapes: forwards of a few hundred microseconds, so that the
  # overhead's split (device work beyond the forwards, host time not hidden)
  # stands well above the run-to-run drift of the forward costs.
  log "bench: framework overhead per step (shipped shapes, random weights)"
  timeout 120 "$BUILD/speclab" bench-overhead --target-shape models/speclab-target/config.json \
    --drafter-shape models/speclab-drafter/config.json --prompts 8 --out "$OUT/overhead_shipped" 2>&1 \
    | tee "$OUT/overhead_shipped.log" | tail -n 20 || log "BENCH-OVERHEAD (SHIPPED) FAILED"
  log "bench: framework overhead per step (shipped shapes, block verifier)"
  timeout 120 "$BUILD/speclab" bench-overhead --target-shape models/speclab-target/config.json \
    --drafter-shape models/speclab-drafter/config.json --prompts 8 --verifier block --out "$OUT/overhead_shipped_block" 2>&1 \
    | tee "$OUT/overhead_shipped_block.log" | tail -n 12 || log "BENCH-OVERHEAD (SHIPPED, BLOCK) FAILED"
  # The dynamic tree of gpu_quickstart.yaml, pipelined (framework/device/pipelined_tree.h).
  TREE="{type: dynamic_topk, top_k: 4, depth: 5, total_tokens: 16}"
  log "bench: framework overhead per step (shipped shapes, dynamic tree)"
  timeout 150 "$BUILD/speclab" bench-overhead --target-shape models/speclab-target/config.json \
    --drafter-shape models/speclab-drafter/config.json --prompts 8 --verifier point_mass --tree-builder "$TREE" \
    --out "$OUT/overhead_shipped_tree" 2>&1 | tee "$OUT/overhead_shipped_tree.log" | tail -n 12 \
    || log "BENCH-OVERHEAD (SHIPPED, TREE) FAILED"
  log "bench: framework overhead per step (shipped target shape, prompt lookup)"
  timeout 150 "$BUILD/speclab" bench-overhead --target-shape models/speclab-target/config.json --prompts 8 \
    --drafter "{type: prompt_lookup, max_ngram_size: 3, num_pred_tokens: 10}" --gamma 10 --verifier point_mass \
    --out "$OUT/overhead_shipped_pld" 2>&1 | tee "$OUT/overhead_shipped_pld.log" | tail -n 12 \
    || log "BENCH-OVERHEAD (SHIPPED, PLD) FAILED"
  log "bench: framework overhead per step (random 8B target, 1B drafter, dynamic tree)"
  timeout 300 "$BUILD/speclab" bench-overhead --verifier point_mass --tree-builder "$TREE" --out "$OUT/overhead_tree" 2>&1 \
    | tee "$OUT/overhead_tree.log" | tail -n 12 || log "BENCH-OVERHEAD (TREE) FAILED"
  snapshot
  log "bench: end to end (speclab)"
  "$BUILD/speclab" run configs/experiments/gpu_quickstart.yaml --out "$OUT/e2e" > "$OUT/e2e.md" 2> "$OUT/e2e.log" || { log "E2E FAILED"; tail -n 20 "$OUT/e2e.log"; }
  grep -A12 "task \`all\`" "$OUT/e2e.md" || true
  grep -i "warning" "$OUT/e2e.log" || true
  snapshot
  # bf16 logits of a 16-node tree forward and of a 1-token forward round
  # differently, so near-ties can flip the argmax: greedy match below 100% at
  # T=0 in bf16. In float32 every lossless method must match.
  log "bench: greedy match in float32"
  "$BUILD/speclab" run configs/experiments/gpu_quickstart.yaml --set models.dtype=float32 --set 'decoding.temperatures=[0]' \
    --set prompts.per_task=4 --set decoding.repeats=1 > "$OUT/e2e_fp32.md" 2> "$OUT/e2e_fp32.log" || { log "E2E FP32 FAILED"; tail -n 20 "$OUT/e2e_fp32.log"; }
  grep -A10 "task \`all\`" "$OUT/e2e_fp32.md" || true
  # bf16 with the target's batch-invariant kernels (models.batch_invariant):
  # chains must match greedy decoding there too.
  log "bench: greedy match in bf16, batch-invariant target"
  "$BUILD/speclab" run configs/experiments/gpu_quickstart.yaml --set models.batch_invariant=true \
    --set 'decoding.temperatures=[0]' --set prompts.per_task=4 --set decoding.repeats=1 > "$OUT/e2e_invariant.md" \
    2> "$OUT/e2e_invariant.log" || { log "E2E INVARIANT FAILED"; tail -n 20 "$OUT/e2e_invariant.log"; }
  grep -A10 "task \`all\`" "$OUT/e2e_invariant.md" || true
  snapshot
  if [ -f "$OUT/e2e/prompts.jsonl" ] && [ -z "${SKIP_HF:-}" ]; then
    log "bench: transformers (autoregressive and assisted generation)"
    PYTHONUNBUFFERED=1 timeout 420 python3 scripts/hf_bench.py --target models/speclab-target --drafter models/speclab-drafter \
      --prompts "$OUT/e2e/prompts.jsonl" --max-new-tokens 128 --temperatures 0,1 --assistant-tokens 5 \
      --out "$OUT/hf_bench.json" > "$OUT/hf_bench.md" 2> "$OUT/hf_bench.log" || { log "HF BENCH FAILED"; tail -n 20 "$OUT/hf_bench.log"; }
    grep -E "all" "$OUT/hf_bench.md" || true
    snapshot
  fi
  "$BUILD/speclab_bench" --benchmark_filter=ModelForward --benchmark_min_time=0.2 > "$OUT/micro_bench.txt" 2>&1 || true
  SPECLAB_BENCH_DEVICE=cuda "$BUILD/speclab_bench" --benchmark_filter=ModelForward --benchmark_min_time=0.2 >> "$OUT/micro_bench.txt" 2>&1 || true
fi
if has trace; then
  # Kineto traces of one generation per method, summarised: device idle gaps,
  # the host work inside them, and the device's non-forward kernels.
  log "trace: bench-overhead (random 8B target, 1B drafter)"
  TRACES=/tmp/speclab-traces
  rm -rf "$TRACES"
  timeout 240 "$BUILD/speclab" bench-overhead --trace "$TRACES/overhead" --out "$OUT/overhead" > "$OUT/trace_overhead.log" 2>&1 \
    || { log "TRACE OVERHEAD FAILED"; tail -n 20 "$OUT/trace_overhead.log"; }
  cat "$OUT/overhead/overhead_bench.md" 2>/dev/null || true
  log "trace: shipped pair end to end, structured prompts"
  timeout 300 "$BUILD/speclab" run configs/experiments/gpu_quickstart.yaml \
    --set 'prompts.files=[data/prompts/structured.jsonl]' --set prompts.per_task=8 \
    --trace "$TRACES/e2e" > "$OUT/trace_e2e.md" 2> "$OUT/trace_e2e.log" || { log "TRACE E2E FAILED"; tail -n 20 "$OUT/trace_e2e.log"; }
  grep -A12 "task \`all\`" "$OUT/trace_e2e.md" || true
  for dir in overhead e2e; do
    log=$OUT/trace_$dir.log
    for trace in "$TRACES/$dir"/*.json; do
      [ -f "$trace" ] || continue
      steps=$(grep -F "traced $trace:" "$log" | sed -E 's/.*: ([0-9]+) steps.*/\1/' | head -1)
      python3 scripts/trace_summary.py "$trace" --steps "${steps:-0}" --top 10
    done > "$OUT/trace_summary_$dir.md" 2>&1 || true
  done
  grep -E "^## |per step" "$OUT/trace_summary_overhead.md" "$OUT/trace_summary_e2e.md" | head -80 || true
  snapshot
fi
if has pack; then
  # The device returns at most 8 files of 16 MiB: one tar in 15 MiB parts.
  log "pack"
  tar -czf /tmp/speclab-pack.tgz --exclude=checkpoint --exclude=checkpoint.old --exclude=cache \
    models tests/fixtures/shipped_reference 2>/dev/null || true
  split -b 15M /tmp/speclab-pack.tgz "$OUT/pack.tgz.part-"
  ls -la "$OUT"
fi
log "done"
snapshot
