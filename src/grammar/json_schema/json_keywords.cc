// SPDX-License-Identifier: Apache-2.0
// Applicator keywords of the JSON Schema front end that need more than one grammar piece:
// propertyNames (a grammar run on each declared name, keys of additional properties),
// contains/minContains (counting rules); uniqueItems is in unique_items.cc.
#include <algorithm>
#include <cmath>

#include "grammar/earley.h"
#include "grammar/json_schema/converter.h"
#include "grammar/nfa.h"

namespace di::grammar {

// allOf of two object shapes where additionalProperties is involved: each side judges every
// key by its properties entry or, for keys it does not declare, by its additionalProperties, so
// the merge declares the union of the keys, each with both judgements, and keeps both
// additionalProperties for the rest. Exact; patternProperties would need key intersections.
void SchemaConverter::merge_object_shapes(json& base, json& p, const std::string& path) {
  const char* kAp = "additionalProperties";
  if (merge_forbidden_keys(base, p, path)) return;
  if (base.contains("patternProperties") || p.contains("patternProperties") ||
      (base.contains("properties") && !base["properties"].is_object()) ||
      (p.contains("properties") && !p["properties"].is_object()))
    unsupported(path, "allOf parts that both constrain object properties");
  const json pa = base.contains("properties") ? base["properties"] : json::object();
  const json pb = p.contains("properties") ? p["properties"] : json::object();
  const json aa = base.contains(kAp) ? base[kAp] : json(true);
  const json ab = p.contains(kAp) ? p[kAp] : json(true);
  auto both = [](const json& x, const json& y) -> json {
    if (x == json(true) || x == y) return y;
    if (y == json(true)) return x;
    if (x == json(false) || y == json(false)) return json(false);
    return json{{"allOf", json::array({x, y})}};
  };
  json props = json::object();
  for (auto& [k, v] : pa.items()) props[k] = both(v, pb.contains(k) ? pb[k] : ab);
  for (auto& [k, v] : pb.items())
    if (!pa.contains(k)) props[k] = both(aa, v);
  base["properties"] = props;
  const json ap = both(aa, ab);
  if (ap == json(true))
    base.erase(kAp);
  else
    base[kAp] = ap;
  p.erase("properties");
  p.erase(kAp);
}

// Which of `names` the propertyNames schema accepts, by running its grammar on each name.
// The grammar may be narrower than the schema (formats), which only drops more properties.
std::vector<bool> SchemaConverter::names_match(const json& pn,
                                               const std::vector<std::string>& names,
                                               const std::string& path) {
  std::vector<bool> out(names.size(), false);
  if (names.empty()) return out;
  SchemaConverter sub(root_, opts_);
  RuleId root = sub.g_.add_rule("root");
  sub.g_.set_root(root);
  sub.g_.set_body(root,
                  sub.value(json{{"allOf", json::array({pn, {{"type", "string"}}})}}, path, 1));
  auto nfa = NfaGrammar::build(sub.g_);
  if (!nfa) unsupported(path, "propertyNames schema: " + nfa.status().message());
  for (size_t i = 0; i < names.size(); ++i) {
    EarleyParser p(nfa->get());
    p.reset((*nfa)->rule_start((*nfa)->root()));
    bool ok = true;
    for (char c : json(names[i]).dump()) ok = ok && p.push_byte(static_cast<uint8_t>(c));
    out[i] = ok && p.accepting();
  }
  return out;
}

// Keys of additional properties under propertyNames: they must satisfy it and differ from the
// declared names. Exact for a finite set of names (enum/const: the ones not declared) and,
// without declared names, for any string schema. nullopt: lenient mode, where the caller
// falls back to any key (propertyNames ignored).
std::optional<ExprId> SchemaConverter::property_name_key(const json& pn,
                                                         const std::vector<std::string>& declared,
                                                         const std::string& path) {
  json as_string = json{{"allOf", json::array({pn, {{"type", "string"}}})}};
  if (auto vals = finite_values(as_string, path)) {
    std::vector<ExprId> alts;
    for (const json& v : *vals) {
      if (!v.is_string()) continue;
      const std::string k = v.get<std::string>();
      if (std::find(declared.begin(), declared.end(), k) == declared.end())
        alts.push_back(g_.literal(json(k).dump()));
    }
    return g_.alt(std::move(alts));
  }
  if (declared.empty()) return value(as_string, path, 1);
  if (!opts_.lenient)
    unsupported(path, "propertyNames (other than enum/const) together with declared properties");
  return std::nullopt;
}

// The values a schema allows when it is a finite set of scalars, exactly as value() spells them
// (const, enum filtered by type, boolean, null), deduplicated by JSON equality (1 == 1.0).
// nullopt when it is not such a set.
std::optional<std::vector<json>> SchemaConverter::finite_values(const json& s0,
                                                                const std::string& path) {
  json s = s0;
  if (s.is_object() && (s.contains("allOf") || s.contains("$ref"))) s = merge_all_of(s, path, 1);
  if (s.is_boolean())
    return s == false ? std::optional<std::vector<json>>(std::vector<json>{}) : std::nullopt;
  if (!s.is_object() || s.contains("anyOf") || s.contains("oneOf") || s.contains("not"))
    return std::nullopt;
  std::vector<json> vals;
  if (s.contains("const")) {
    vals.push_back(s["const"]);
  } else if (s.contains("enum") && s["enum"].is_array()) {
    for (const json& v : s["enum"]) {
      const bool typed = s.contains("type");
      if (typed && !schema_allows_type(s, v)) continue;
      vals.push_back(v);
    }
  } else if (s.contains("type") && (s["type"] == "boolean" || s["type"] == "null")) {
    if (s["type"] == "boolean")
      vals = {json(true), json(false)};
    else
      vals = {json(nullptr)};
  } else {
    return std::nullopt;
  }
  std::vector<json> out;
  for (const json& v : vals) {
    if (v.is_object() || v.is_array()) return std::nullopt;
    auto same = [&](const json& w) {
      if (v.is_number() && w.is_number()) return v.get<double>() == w.get<double>();
      return v == w;
    };
    if (std::none_of(out.begin(), out.end(), same)) out.push_back(v);
  }
  return out;
}

// contains / minContains / maxContains on an array without a tuple part: the elements are the
// items schema I; at least m of them (minContains, default 1) must also match the contains
// schema C. Rules R(j, n) (j elements written that match I and C; n written in all, capped at
// the length bound that still matters) count both. Without an upper bound j stops at m and
// any element may be written as I (matching C uncounted only adds parses). A maxContains M
// that maxItems does not imply needs the elements that do not match C: I and `not C`, which
// exists when rewrite_not gives `not C` a positive form (a type, a const/enum next to a finite
// I, ...); then every element is exactly one of the two kinds and j runs to M, exact. Otherwise
// strict mode refuses naming maxContains. nullopt: contains is vacuous (the caller builds a
// plain array).
std::optional<ExprId> SchemaConverter::contains_expr(const json& s,
                                                     const json& items,
                                                     bool plain,
                                                     int64_t lo,
                                                     int64_t hi,
                                                     ExprId sep,
                                                     const std::string& path,
                                                     int depth) {
  auto count = [&](const char* k, int64_t dflt) -> int64_t {
    if (!s.contains(k)) return dflt;
    if (!s[k].is_number() || s[k].get<double>() < 0)
      throw SchemaError(StatusCode::kInvalidArgument,
                        "JSON Schema at '" + path + "': '" + k + "' must be a non-negative number");
    // Clamped: past the 4096-rule limit below every count is refused anyway.
    return static_cast<int64_t>(std::ceil(std::min(s[k].get<double>(), 1e9)));
  };
  const int64_t m = count("minContains", 1), max_c = count("maxContains", -1);
  const bool bounded = !(max_c < 0 || (hi >= 0 && max_c >= hi));
  const bool items_ok = !(items.is_boolean() && items == false);
  // Strict mode refuses what it cannot enforce; lenient ignores contains then (a plain array).
  auto refuse = [&](const std::string& why) -> std::optional<ExprId> {
    if (!opts_.lenient) unsupported(path, why);
    return std::nullopt;
  };
  if (!plain) return refuse("keyword 'contains' together with prefixItems/items arrays");
  if (m == 0 && !bounded) return std::nullopt;
  if (!items_ok || (hi >= 0 && hi < m) || (bounded && max_c < m)) return g_.nothing();
  // n >= 1 tells the first element (no separator) from the others, also when m is 0.
  const int64_t cap = hi >= 0 ? hi : std::max<int64_t>({lo, m, 1});
  const int64_t top = bounded ? max_c : m;  // j's range
  if ((top + 1) * (cap + 1) > 4096)
    return refuse("minContains/maxContains/array length this large");
  ExprId any = -1;
  if (bounded) {
    try {
      any = as_rule(value(json{{"allOf", json::array({items, json{{"not", s["contains"]}}})}},
                          path + "/contains", depth + 1));
    } catch (const SchemaError& e) {
      unsupported(path, std::string("keyword 'maxContains' (needs the items that do not match "
                                    "contains: ") +
                            e.what() + ")");
    }
  } else {
    any = as_rule(value(items, path + "/items", depth + 1));
  }
  ExprId both = as_rule(
      value(json{{"allOf", json::array({items, s["contains"]})}}, path + "/contains", depth + 1));
  // R(j, n) as rules, built from the end: rule ids first, bodies after.
  auto idx = [&](int64_t j, int64_t n) { return j * (cap + 1) + n; };
  std::vector<RuleId> rules(static_cast<size_t>((top + 1) * (cap + 1)));
  for (size_t r = 0; r < rules.size(); ++r)
    rules[r] = g_.add_rule("contains" + std::to_string(g_.rules().size()));
  for (int64_t j = 0; j <= top; ++j) {
    for (int64_t n = 0; n <= cap; ++n) {
      std::vector<ExprId> alts;
      if (j >= m && n >= lo) alts.push_back(g_.empty());
      if (hi < 0 || n < hi) {
        const int64_t n2 = std::min(n + 1, cap);
        ExprId lead = n == 0 ? g_.empty() : sep;
        alts.push_back(g_.seq({lead, any, g_.ref(rules[idx(j, n2)])}));
        if (j < top) alts.push_back(g_.seq({lead, both, g_.ref(rules[idx(j + 1, n2)])}));
      }
      g_.set_body(rules[idx(j, n)], g_.alt(std::move(alts)));
    }
  }
  return g_.seq({g_.literal("["), ws(), g_.ref(rules[idx(0, 0)]), ws(), g_.literal("]")});
}

}  // namespace di::grammar
