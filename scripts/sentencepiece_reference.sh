#!/usr/bin/env bash
# Re-creates tests/fixtures/sentencepiece/reference_ids.txt: the ids that
# libsentencepiece's own `spm_encode` (Debian package `sentencepiece`, 0.1.97)
# gives each line of tests/fixtures/sentencepiece/reference_text.txt with
# data/tokenizer/speclab.model. framework/tokenizers/sentencepiece_tokenizer_test.cc
# checks that speclab's SentencePieceTokenizer encodes every line to the same
# ids (speclab does not link libsentencepiece; see sentencepiece_tokenizer.h).
#
#   scripts/sentencepiece_reference.sh [--check]
#
# --check compares instead of writing (exit 1 on any difference). spm_encode
# reads one sentence a line: a line's ids never include the newline.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=data/tokenizer/speclab.model
TEXT=tests/fixtures/sentencepiece/reference_text.txt
IDS=tests/fixtures/sentencepiece/reference_ids.txt

command -v spm_encode >/dev/null ||
  { echo "spm_encode not found: apt-get install sentencepiece" >&2; exit 1; }
version=$(spm_encode --version 2>&1 | head -n 1)
[[ $version == "sentencepiece 0.1.97" ]] ||
  echo "warning: reference ids come from '$version', speclab ports 0.1.97" >&2

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
spm_encode --model="$MODEL" --output_format=id <"$TEXT" >"$tmp"
lines=$(wc -l <"$TEXT")
[[ $(wc -l <"$tmp") == "$lines" ]] || { echo "line count differs" >&2; exit 1; }

if [[ ${1:-} == --check ]]; then
  cmp "$tmp" "$IDS" && echo "ok: $IDS matches spm_encode ($lines lines)"
else
  chmod 644 "$tmp"
  mv "$tmp" "$IDS"
  trap - EXIT
  echo "wrote $IDS ($lines lines, model md5 $(md5sum <"$MODEL" | cut -d' ' -f1))"
fi
