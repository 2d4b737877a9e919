# Shared by the structured-output CLI tests (sourced): v41_mini_model BIN V3_TOKENIZER WORK writes
# WORK/v41.json (DeepSeek V3's BPE vocabulary plus the V4.1 chat and tool markers as added
# tokens) and WORK/m, a mini checkpoint with that tokenizer (seed 3). Exits the test on failure.
v41_mini_model() {
  local bin=$1 v3=$2 work=$3
  python3 - "$v3" "$work/v41.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1], encoding="utf-8"))
for content, i in [("<think>", 128821), ("</think>", 128822), ("｜DSML｜", 128825),
                   ("<｜latest_reminder｜>", 128828), ("<｜System｜>", 128830)]:
    t["added_tokens"].append({"id": i, "content": content, "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": False})
json.dump(t, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PY
  "$bin" init-model --preset mini --out "$work/m" --seed 3 --tokenizer "$work/v41.json" \
    >/dev/null 2>&1 || { echo "FAIL init-model"; exit 1; }
}
