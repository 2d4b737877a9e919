// SPDX-License-Identifier: Apache-2.0
// patternProperties whose patterns name a small finite set of keys (`^[a-e]$`, `^(x|y)$`) as
// declared properties, for merges that must forbid one of those keys.
#include <algorithm>
#include <functional>

#include "grammar/earley.h"
#include "grammar/json_schema/converter.h"
#include "grammar/nfa.h"
#include "grammar/regex/regex_parser.h"

namespace di::grammar {

namespace {
// A language above these bounds is treated as infinite (the merge is refused as before).
constexpr size_t kMaxKeys = 64;
constexpr size_t kMaxKeyBytes = 32;
// Parser steps of the enumeration: `^[a-z]{20}x$` accepts nothing for 20 levels of 26-way
// branching, so the walk needs a bound of its own (past it: treated as infinite).
constexpr size_t kMaxSteps = 4096;
}  // namespace

std::shared_ptr<const NfaGrammar> SchemaConverter::key_pattern_nfa(const std::string& pattern,
                                                                   const std::string& path) {
  RegexOptions raw;
  raw.search = true;
  auto pg = regex_to_grammar(pattern, raw);
  if (!pg) unsupported(path, "patternProperties pattern '" + pattern + "'");
  auto nfa = NfaGrammar::build(*pg);
  if (!nfa) unsupported(path, "patternProperties pattern '" + pattern + "'");
  return *nfa;
}

// Every key the (unanchored, as JSON Schema reads it) pattern matches, when there are at most
// kMaxKeys of at most kMaxKeyBytes bytes each; nullopt otherwise. Depth-first over the bytes
// the Earley parser can scan: a live parser at the length bound means an unbounded (or too
// long) language.
std::optional<std::vector<std::string>> SchemaConverter::pattern_language(
    const std::string& pattern, const std::string& path) {
  const std::shared_ptr<const NfaGrammar> nfa = key_pattern_nfa(pattern, path);
  EarleyParser parser(nfa.get());
  parser.reset(nfa->rule_start(nfa->root()));
  std::vector<std::string> keys;
  std::string key;
  bool finite = true;
  size_t steps = 0;
  std::function<void()> walk = [&] {
    if (++steps > kMaxSteps) finite = false;
    if (parser.accepting()) keys.push_back(key);
    if (keys.size() > kMaxKeys) finite = false;
    const ByteSet next = parser.next_bytes();
    if (!finite || next.count() == 0) return;
    if (key.size() == kMaxKeyBytes) {
      finite = false;
      return;
    }
    for (int b = 0; b < 256 && finite; ++b) {
      if (!next.test(static_cast<uint8_t>(b)) || !parser.push_byte(static_cast<uint8_t>(b)))
        continue;
      key.push_back(static_cast<char>(b));
      walk();
      key.pop_back();
      parser.pop();
    }
  };
  walk();
  if (!finite) return std::nullopt;
  return keys;
}

// Rewrites `shape` so that its patternProperties become properties: each key of a pattern's
// language gets the allOf of every schema that applies to it (its properties entry and each
// pattern it matches), exactly the schemas JSON Schema applies to that key, and
// additionalProperties still judges every other key. False (shape unchanged) when some
// pattern's language is not a small finite set. Keys are declared in pattern order, each
// pattern's keys in byte order: instances must list them so (the object grammar's order).
bool SchemaConverter::expand_pattern_keys(json& shape, const std::string& path) {
  const json& pp = shape["patternProperties"];
  if (!pp.is_object()) return false;
  std::vector<std::pair<json, std::vector<std::string>>> langs;
  for (const auto& [pattern, sub] : pp.items()) {
    auto lang = pattern_language(pattern, path);
    if (!lang) return false;
    langs.emplace_back(sub, std::move(*lang));
  }
  json props = shape.contains("properties") ? shape["properties"] : json::object();
  if (!props.is_object()) return false;
  std::vector<std::string> order;
  for (const auto& [k, v] : props.items()) order.push_back(k);
  for (const auto& [sub, lang] : langs)
    for (const std::string& k : lang)
      if (std::find(order.begin(), order.end(), k) == order.end()) order.push_back(k);
  json out = json::object();
  for (const std::string& k : order) {
    json parts = json::array();
    if (props.contains(k)) parts.push_back(props[k]);
    for (const auto& [sub, lang] : langs)
      if (std::find(lang.begin(), lang.end(), k) != lang.end()) parts.push_back(sub);
    out[k] = parts.size() == 1 ? parts[0] : json{{"allOf", parts}};
  }
  shape["properties"] = std::move(out);
  shape.erase("patternProperties");
  return true;
}

}  // namespace di::grammar
