#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a bounded time on
# its seed corpus. Any crash, sanitizer report or harness check failure fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${FUZZ_SECONDS:-15}
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
  -DDEEPINFER_FUZZ=ON -DDEEPINFER_WERROR=OFF >/dev/null
targets=(safetensors_fuzz response_parser_fuzz tokenizer_fuzz tokenizer_json_fuzz ebnf_fuzz regex_fuzz json_schema_fuzz matcher_fuzz openai_request_fuzz)
corpus_root=$(mktemp -d)
trap 'rm -rf "$corpus_root"' EXIT
# The build's output only when it fails (a silent exit here once hid a link error).
cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${targets[@]}" >"$corpus_root/build.log" 2>&1 ||
  { grep -E "error|undefined|FAILED" "$corpus_root/build.log" | head -40; echo "fuzz: build FAILED"; exit 1; }
for t in "${targets[@]}"; do
  mkdir -p "$corpus_root/$t"
  case $t in
    tokenizer_json_fuzz) cp ../shared/golden/v41-mini/checkpoint/tokenizer.json "$corpus_root/$t/" 2>/dev/null || true ;;
    openai_request_fuzz) cp tests/fuzz/openai_request_seeds/* "$corpus_root/$t/" ;;
    tokenizer_fuzz) printf 'Hello, 世界! <｜User｜> 12345 \xff\xfe' >"$corpus_root/$t/seed" ;;
  esac
  dict=()
  [ -f "tests/fuzz/${t%_fuzz}.dict" ] && dict=("-dict=tests/fuzz/${t%_fuzz}.dict")
  echo "fuzz: $t for ${SECONDS_PER_TARGET}s"
  "$BUILD_DIR/tests/fuzz/$t" "${dict[@]}" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=4096 \
    -print_final_stats=0 "$corpus_root/$t" 2>"$corpus_root/$t.log" ||
    { tail -40 "$corpus_root/$t.log"; echo "fuzz: $t FAILED"; exit 1; }
done
echo "fuzz: all targets ran clean"
