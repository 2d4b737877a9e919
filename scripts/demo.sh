#!/usr/bin/env bash
# The main job on the embedded default: a random-weight `mini` V4.1 checkpoint (no download),
# checked against DeepSeek's golden outputs when ../shared is present, then greedy generation.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BIN=${BUILD_DIR:-build}/src/cli/deepinfer
OUT=${DEMO_DIR:-build/demo-mini}
"$BIN" init-model --preset mini --out "$OUT" --seed 1
"$BIN" info --model "$OUT"
if [ -d ../shared/golden/v41-mini ]; then
  "$BIN" check-golden ../shared/golden/v41-mini
fi
"$BIN" generate --model "$OUT" --prompt-ids 1000,2000,3000,4000,5000 --max-tokens 16
