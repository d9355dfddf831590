#!/usr/bin/env bash
# speclab bench-overhead over every (verifier, tree builder) pair with a
# device path, on one pair of model shapes: each pair's pipelined rows and
# its split (device work beyond the forwards, host time not hidden), one
# markdown table. Usage (after a build; SPECLAB defaults to build-gpu/speclab):
#   scripts/bench_overhead_matrix.sh shipped [SET]   # the shipped pair's shapes, 4 prompts
#   scripts/bench_overhead_matrix.sh 8b [SET]        # random Llama-3.1-8B / 3.2-1B shapes, 2 prompts
# A pair is "verifier|tree builder[|more flags]".
# SET: chains, trees, all (default) or key (one chain and the main trees, for
# the slow 8B shapes). Prints the table; each run's own
# report lands in $OUT_DIR/NAME (default /tmp/overhead_matrix).
set -euo pipefail
cd "$(dirname "$0")/.."
SPECLAB=${SPECLAB:-build-gpu/speclab}
OUT_DIR=${OUT_DIR:-/tmp/overhead_matrix}
SHAPES=${1:?shipped or 8b}
SET=${2:-all}
case "$SHAPES" in
  shipped) ARGS=(--target-shape models/speclab-target/config.json --drafter-shape models/speclab-drafter/config.json
                 --prompts 4) ;;
  8b) ARGS=(--prompts 2) ;;
  *) echo "unknown shapes '$SHAPES' (shipped or 8b)" >&2; exit 2 ;;
esac
STATIC15='[[0], [1], [2], [0, 0], [0, 1], [1, 0], [2, 0], [0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]]'
SEQUOIA='{type: sequoia, budget: 16, max_depth: 8, acceptance: [0.65, 0.10, 0.05, 0.03, 0.02, 0.015, 0.01, 0.008]}'
CHAINS=("rejection|" "block|" "point_mass|" "greedy|" "typical|" "specinfer|" "rrs|" "traversal|")
TREES=("point_mass|{type: static, choices: $STATIC15}" "greedy|{type: static, choices: $STATIC15}"
       "typical|{type: static, choices: $STATIC15}" "rrs_wor|{type: static, sampling: true, choices: $STATIC15}"
       "traversal|{type: static, sampling: true, choices: $STATIC15}" "rrs_wor|$SEQUOIA"
       "specinfer|{type: multi_sample, k: 4}" "rrs|{type: multi_sample, k: 4}"
       "rrs_wor|{type: multi_sample, k: 4, replacement: false}" "traversal|{type: multi_sample, k: 4, replacement: false}"
       "spectr|{type: multi_sample, k: 4}|--top-k 20" "khisti|{type: multi_sample, k: 4}|--top-k 20"
       "point_mass|{type: dynamic_topk, top_k: 4, depth: 5, total_tokens: 16}"
       "point_mass|{type: best_first, budget: 15, max_beam_len: 8}")
KEY=("rejection|" "point_mass|{type: static, choices: $STATIC15}" "rrs_wor|{type: static, sampling: true, choices: $STATIC15}"
     "traversal|{type: static, sampling: true, choices: $STATIC15}" "rrs_wor|$SEQUOIA" "specinfer|{type: multi_sample, k: 4}"
     "rrs_wor|{type: multi_sample, k: 4, replacement: false}" "spectr|{type: multi_sample, k: 4}|--top-k 20"
     "khisti|{type: multi_sample, k: 4}|--top-k 20"
     "point_mass|{type: dynamic_topk, top_k: 4, depth: 5, total_tokens: 16}"
     "point_mass|{type: best_first, budget: 15, max_beam_len: 8}")
PAIRS=()
case "$SET" in
  chains) PAIRS=("${CHAINS[@]}") ;;
  trees) PAIRS=("${TREES[@]}") ;;
  all) PAIRS=("${CHAINS[@]}" "${TREES[@]}") ;;
  key) PAIRS=("${KEY[@]}") ;;
  *) echo "unknown set '$SET' (chains, trees, all or key)" >&2; exit 2 ;;
esac
mkdir -p "$OUT_DIR"
echo "| verifier | tree builder | T | tokens/s (pipelined) | tau | device work beyond the forwards us/step | host ms/step (queueing) | device ms/step | host time not hidden us/step | target n=1 ms |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
for pair in "${PAIRS[@]}"; do
  verifier=${pair%%|*}
  builder=${pair#*|}
  extra=""  # a third field: more bench-overhead flags (khisti needs a top_k)
  if [[ "$builder" == *"|"* ]]; then
    extra=${builder#*|}
    builder=${builder%%|*}
  fi
  name="${verifier}_$(echo "${builder:-chain}" | tr -c 'a-z0-9' '_' | cut -c1-40)"
  flags=(--verifier "$verifier")
  [ -n "$builder" ] && flags+=(--tree-builder "$builder")
  # shellcheck disable=SC2206  # the extra flags split on spaces
  [ -n "$extra" ] && flags+=($extra)
  if ! timeout 120 "$SPECLAB" bench-overhead "${ARGS[@]}" "${flags[@]}" --out "$OUT_DIR/$name" > /dev/null 2> "$OUT_DIR.$name.err"; then
    echo "| $verifier | ${builder:-chain} | - | FAILED: $(tail -n 1 "$OUT_DIR.$name.err" | cut -c1-120) | | | | | | |"
    continue
  fi
  # The pipelined rows of the first table (tokens/s, tau) beside the split's row of the same temperature.
  awk -F'|' -v v="$verifier" -v b="${builder:-chain}" '
    /^Forward costs/ { split($0, w, " "); for (i = 1; i < length(w); ++i) if (w[i] == "n=1") { ar = w[i + 1]; sub(/,/, "", ar); break } }
    /, pipelined \|/ { gsub(/ /, "", $3); tps[$3] = $4; tau[$3] = $6 }
    /^\| [01] \| [0-9]+ \|/ { t = $2; gsub(/ /, "", t);
      printf "| %s | %s | %s |%s|%s|%s|%s|%s|%s| %s |\n", v, b, t, tps[t], tau[t], $7, $5, $4, $9, ar }' \
    "$OUT_DIR/$name/overhead_bench.md"
done
