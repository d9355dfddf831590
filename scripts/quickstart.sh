#!/usr/bin/env bash
# README command 1: install, build, and run the quickstart experiment on the
# embedded default model pair (models/speclab-target, models/speclab-drafter).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh --target speclab
# The folder is the script's own: a second run replaces the first.
build/speclab run configs/experiments/quickstart.yaml --out out/quickstart --overwrite "$@"
