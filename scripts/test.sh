#!/usr/bin/env bash
# Builds (via setup.sh) and runs every test. The last line is ctest's "N tests passed/failed" summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Fuzzers (clang, ASan + UBSan) for a bounded time first, so that ctest's summary stays last.
bash scripts/fuzz_smoke.sh
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" "$@"
