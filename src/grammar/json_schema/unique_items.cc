// SPDX-License-Identifier: Apache-2.0
// uniqueItems where the items come from a finite, enumerable domain: subset rules.
#include <algorithm>
#include <cmath>
#include <map>

#include "grammar/json_schema/converter.h"

namespace di::grammar {

namespace {

// The values of an items schema that is a small integer range (type integer, both bounds,
// annotations only) or a boolean/null type list; nullopt for anything else. Enumerated values
// are spelled canonically, which the integer grammar also requires.
std::optional<std::vector<json>> small_domain(const json& s) {
  if (!s.is_object() || !s.contains("type")) return std::nullopt;
  static const char* kAllowed[] = {
      "type",       "minimum",     "maximum",  "exclusiveMinimum", "exclusiveMaximum",
      "title",      "description", "default",  "examples",         "$comment",
      "deprecated", "readOnly",    "writeOnly"};
  for (const auto& [k, v] : s.items())
    if (std::find(std::begin(kAllowed), std::end(kAllowed), k) == std::end(kAllowed))
      return std::nullopt;
  const json& t = s["type"];
  if (t.is_array()) {  // e.g. ["boolean", "null"]
    std::vector<json> out;
    for (const json& x : t) {
      if (x == "boolean") {
        out.push_back(true);
        out.push_back(false);
      } else if (x == "null") {
        out.push_back(nullptr);
      } else {
        return std::nullopt;
      }
    }
    return out;
  }
  if (t != "integer") return std::nullopt;
  double lo = -1e300, hi = 1e300;
  auto bound = [&](const char* key, const char* excl, bool lower) {
    auto b = s.find(key);
    auto e = s.find(excl);
    if (b != s.end() && b->is_number()) {
      const double x = b->get<double>();
      const bool strict = e != s.end() && e->is_boolean() && *e == true;  // draft 4
      if (lower)
        lo = std::max(lo, strict ? std::floor(x) + 1 : std::ceil(x));
      else
        hi = std::min(hi, strict ? std::ceil(x) - 1 : std::floor(x));
    }
    if (e != s.end() && e->is_number()) {
      const double x = e->get<double>();
      if (lower)
        lo = std::max(lo, std::floor(x) + 1);
      else
        hi = std::min(hi, std::ceil(x) - 1);
    }
  };
  bound("minimum", "exclusiveMinimum", true);
  bound("maximum", "exclusiveMaximum", false);
  if (hi - lo >= 8 || std::abs(lo) > 1e15 || std::abs(hi) > 1e15) return std::nullopt;
  std::vector<json> out;
  for (double v = lo; v <= hi; ++v) out.push_back(static_cast<int64_t>(v));
  return out;
}

// JSON equality as a string: object keys sorted, numbers by value (1 == 1.0).
std::string canonical(const json& v) {
  if (v.is_number()) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.17g", v.get<double>());
    return buf;
  }
  if (v.is_array()) {
    std::string out = "[";
    for (const json& x : v) out += canonical(x) + ",";
    return out + "]";
  }
  if (v.is_object()) {
    std::map<std::string, std::string> sorted;
    for (const auto& [k, x] : v.items()) sorted[k] = canonical(x);
    std::string out = "{";
    for (const auto& [k, x] : sorted) out += json(k).dump() + ":" + x + ",";
    return out + "}";
  }
  return v.dump();
}

bool annotation_only(const std::string& k) {
  static const char* kNotes[] = {"title",      "description", "default",   "examples", "$comment",
                                 "deprecated", "readOnly",    "writeOnly", "$id",      "$schema"};
  return std::find(std::begin(kNotes), std::end(kNotes), k) != std::end(kNotes);
}

constexpr size_t kMaxDomain = 64;

}  // namespace

// Every value an items schema allows, when that is a small finite set and every spelling value()
// allows for one of them reads back as that value only (literal_value: its keys in any order
// (any_order.cc), or the canonical integers): finite scalars (finite_values, small_domain),
// enum/const with object or array values, an anyOf of such sets next to a type filter, and
// objects with additionalProperties false whose properties all have such domains (the product;
// optional properties present or absent). Values are deduplicated by JSON equality, so no
// spelling matches two of them. nullopt otherwise or past kMaxDomain.
std::optional<std::vector<json>> SchemaConverter::item_domain(const json& s0,
                                                              const std::string& path,
                                                              int depth) {
  if (depth > 8) return std::nullopt;
  json s = s0;
  if (s.is_object() && (s.contains("allOf") || s.contains("$ref")))
    s = merge_all_of(s, path, depth + 1);
  if (auto v = finite_values(s, path)) return v;
  if (auto v = small_domain(s)) return v;
  if (!s.is_object()) return std::nullopt;
  std::vector<json> out;
  std::vector<std::string> seen;
  auto add = [&](const json& v) {
    std::string c = canonical(v);
    if (std::find(seen.begin(), seen.end(), c) != seen.end()) return;
    seen.push_back(std::move(c));
    out.push_back(v);
  };
  if (s.contains("const") || s.contains("enum")) {  // values finite_values leaves out: objects
    for (const auto& [k, v] : s.items())
      if (k != "const" && k != "enum" && k != "type" && !annotation_only(k)) return std::nullopt;
    const json vals = s.contains("const") ? json::array({s["const"]}) : s["enum"];
    if (!vals.is_array() || (s.contains("const") && s.contains("enum"))) return std::nullopt;
    for (const json& v : vals)
      if (!s.contains("type") || schema_allows_type(s, v)) add(v);
    if (out.size() > kMaxDomain) return std::nullopt;
    return out;
  }
  if (s.contains("anyOf")) {
    if (!s["anyOf"].is_array()) return std::nullopt;
    for (const auto& [k, v] : s.items())
      if (k != "anyOf" && k != "type" && !annotation_only(k)) return std::nullopt;
    for (const json& b : s["anyOf"]) {
      auto d = item_domain(b, path + "/anyOf", depth + 1);
      if (!d) return std::nullopt;
      for (const json& v : *d)
        if (!s.contains("type") || schema_allows_type(s, v)) add(v);
      if (out.size() > kMaxDomain) return std::nullopt;
    }
    return out;
  }
  const bool object = s.contains("type") ? s["type"] == "object" : s.contains("properties");
  if (!object || !s.contains("properties") || !s["properties"].is_object() ||
      s.value("additionalProperties", json(true)) != json(false))
    return std::nullopt;
  for (const auto& [k, v] : s.items())
    if (k != "type" && k != "properties" && k != "required" && k != "additionalProperties" &&
        !annotation_only(k))
      return std::nullopt;
  const json req = s.contains("required") ? s["required"] : json::array();
  if (!req.is_array()) return std::nullopt;
  for (const json& r : req)
    if (!r.is_string() || !s["properties"].contains(r.get<std::string>())) return std::nullopt;
  std::vector<json> partial{json::object()};
  for (const auto& [k, sub] : s["properties"].items()) {
    auto d = item_domain(sub, path + "/properties/" + k, depth + 1);
    if (!d) return std::nullopt;
    const bool required = std::find(req.begin(), req.end(), json(k)) != req.end();
    std::vector<json> next;
    for (const json& base : partial) {
      if (!required) next.push_back(base);
      for (const json& v : *d) {
        json with = base;
        with[k] = v;
        next.push_back(std::move(with));
      }
      if (next.size() > kMaxDomain) return std::nullopt;
    }
    partial = std::move(next);
  }
  for (const json& v : partial) add(v);
  return out;
}

// uniqueItems over items from a finite domain of k values (item_domain): each value has one
// spelling in the grammar and distinct values have distinct spellings, so a rule U(S) per set S
// of values already written is exact. Unbounded arrays need every subset (k <= 10); with
// maxItems m only the subsets of at most m values (sum of C(k, i), i <= m, at most 4,096 rules),
// so larger domains work for short arrays. Anything else cannot be enforced by a grammar of
// this size: a strict error, ignored in lenient mode (nullopt: the caller builds a plain array).
std::optional<ExprId> SchemaConverter::unique_items_expr(const json& s,
                                                         const json& items,
                                                         bool plain,
                                                         int64_t lo,
                                                         int64_t hi,
                                                         ExprId sep,
                                                         const std::string& path) {
  constexpr size_t kMaxUnbounded = 10;
  constexpr double kMaxRules = 4096;
  auto refuse = [&](const std::string& why) -> std::optional<ExprId> {
    if (!opts_.lenient) unsupported(path, why);
    return std::nullopt;
  };
  if (!plain || s.contains("contains"))
    return refuse("keyword 'uniqueItems' together with tuple items or contains");
  auto vals = item_domain(items, path + "/items", 0);
  const char* why =
      "keyword 'uniqueItems' (enforced only for items from a small finite domain: "
      "enum/const/boolean/null, an integer range, anyOf of those, objects of those; at most 10 "
      "values, or 64 with a maxItems that keeps the subsets below 4096)";
  if (!vals) return refuse(why);
  const size_t k = vals->size();
  const size_t cap = hi < 0 ? k : std::min(k, static_cast<size_t>(hi));
  double subsets = 0, c = 1;  // sum of C(k, i) for i <= cap
  for (size_t i = 0; i <= cap; ++i) {
    subsets += c;
    c = c * static_cast<double>(k - i) / static_cast<double>(i + 1);
  }
  if ((hi < 0 && k > kMaxUnbounded) || k > 64 || subsets > kMaxRules) return refuse(why);
  std::vector<ExprId> lits;
  for (const json& v : *vals) lits.push_back(as_rule(literal_value(v)));
  std::map<uint64_t, RuleId> rules;
  std::vector<uint64_t> todo{0};
  rules[0] = g_.add_rule("unique" + std::to_string(g_.rules().size()));
  while (!todo.empty()) {
    const uint64_t m = todo.back();
    todo.pop_back();
    const int64_t n = __builtin_popcountll(m);
    std::vector<ExprId> alts;
    if (n >= lo) alts.push_back(g_.empty());
    if (hi < 0 || n < hi) {
      for (size_t v = 0; v < k; ++v) {
        if (m >> v & 1) continue;
        const uint64_t next = m | uint64_t{1} << v;
        auto it = rules.find(next);
        if (it == rules.end()) {
          it = rules.emplace(next, g_.add_rule("unique" + std::to_string(g_.rules().size()))).first;
          todo.push_back(next);
        }
        alts.push_back(g_.seq({n == 0 ? g_.empty() : sep, lits[v], g_.ref(it->second)}));
      }
    }
    g_.set_body(rules[m], g_.alt(std::move(alts)));
  }
  return g_.seq({g_.literal("["), ws(), g_.ref(rules[0]), ws(), g_.literal("]")});
}

}  // namespace di::grammar
