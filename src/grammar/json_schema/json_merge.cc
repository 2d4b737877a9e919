// SPDX-License-Identifier: Apache-2.0
// allOf (and $ref with siblings) merged into one schema, and the disjointness test oneOf needs.
#include <algorithm>

#include "grammar/earley.h"
#include "grammar/json_schema/converter.h"
#include "grammar/json_schema/not_rewrite.h"
#include "grammar/nfa.h"
#include "grammar/regex/regex_parser.h"

namespace di::grammar {

namespace {
constexpr int kMaxDepth = 64;
}  // namespace

// Folds allOf (and $ref with sibling keywords) into one schema. Conflicts we cannot intersect
// are errors rather than silent widening.
json SchemaConverter::merge_all_of(const json& s, const std::string& path, int depth) {
  if (depth > kMaxDepth) unsupported(path, "nesting depth");
  json base = s;
  std::vector<json> parts;
  if (base.contains("allOf")) {
    if (!base["allOf"].is_array())
      throw SchemaError(StatusCode::kInvalidArgument, "allOf must be an array at " + path);
    for (const json& p : base["allOf"]) parts.push_back(p);
    base.erase("allOf");
  }
  if (base.contains("$ref")) {
    // Siblings of $ref: (2019+) apply both.
    std::string ref = base["$ref"].is_string() ? base["$ref"].get<std::string>() : "";
    base.erase("$ref");
    parts.push_back(resolve_ref(ref, path));
  }
  for (json p : parts) {
    if (p.is_boolean()) {
      if (p == false) return json(false);
      continue;
    }
    if (!p.is_object()) continue;
    p = merge_all_of(p, path, depth + 1);
    if (p.is_boolean()) {
      if (p == false) return json(false);
      continue;
    }
    // additionalProperties / items only see the properties / prefixItems of their own schema
    // object, so merging those across allOf parts would change their meaning.
    auto object_shape = [](const json& x) {
      return x.contains("properties") || x.contains("patternProperties") ||
             x.contains("additionalProperties");
    };
    auto array_shape = [](const json& x) {
      return x.contains("items") || x.contains("prefixItems") || x.contains("additionalItems");
    };
    if (object_shape(p) && object_shape(base) &&
        (p.contains("additionalProperties") || base.contains("additionalProperties")))
      merge_object_shapes(base, p, path);
    if (array_shape(p) && array_shape(base))
      unsupported(path, "allOf parts that both constrain array items");
    merge_alternatives(base, p, depth);
    for (auto& [k, v] : p.items()) {
      if (!base.contains(k)) {
        base[k] = v;
      } else if (base[k] == v) {
      } else if (k == "properties" && v.is_object() && base[k].is_object()) {
        for (auto& [pk, pv] : v.items()) {
          if (!base[k].contains(pk) || base[k][pk] == json(true))
            base[k][pk] = pv;
          else if (base[k][pk] != pv && pv != json(true))  // `true` adds nothing
            base[k][pk] = json{{"allOf", json::array({base[k][pk], pv})}};
        }
      } else if (k == "required" && v.is_array() && base[k].is_array()) {
        for (auto& r : v)
          if (std::find(base[k].begin(), base[k].end(), r) == base[k].end()) base[k].push_back(r);
      } else if (k == "type") {
        auto a = types_of(base), b = types_of(p);
        json inter = json::array();
        for (auto& t : a) {
          if (type_allows(b, t))
            inter.push_back(t);
          else if (t == "number" && type_allows(b, "integer"))
            inter.push_back("integer");
        }
        base["type"] = inter;
      } else if ((k == "minimum" || k == "minLength" || k == "minItems" || k == "minProperties") &&
                 v.is_number()) {
        base[k] = std::max(base[k].get<double>(), v.get<double>());
      } else if ((k == "maximum" || k == "maxLength" || k == "maxItems" || k == "maxProperties") &&
                 v.is_number()) {
        base[k] = std::min(base[k].get<double>(), v.get<double>());
      } else if (k == "const") {
        return json(false);  // two different constants: no value is both
      } else if (known_keywords().count(k)) {
        unsupported(path, "allOf with conflicting '" + k + "'");
      }
    }
  }
  return base;
}

// Both parts list alternatives: (A1 | ... | An) and (B1 | ... | Bm) is the anyOf of every
// (Ai and Bj), exact. A oneOf counts when its branches are disjoint (then it is an anyOf; strict
// mode refuses other oneOfs anyway), or in lenient mode, which reads oneOf as anyOf. At most 16
// pairs; otherwise both stay, and the merge below refuses the conflict.
// Another oneOf is "exactly one branch": the anyOf of (Bi and not Bj for every j != i), exact,
// when every branch's negation has a positive form (negate_schema: `{required: [k]}`, object
// conditions, type lists), e.g. oneOf [{required: [a]}, {required: [b]}] next to a dependency.
void SchemaConverter::merge_alternatives(json& base, json& p, int depth) {
  constexpr size_t kMaxPairs = 16;
  json exclusive[2];
  auto alternatives = [&](const json& x, json& storage) -> const json* {
    if (x.contains("anyOf") == x.contains("oneOf")) return nullptr;  // none, or both
    const json& a = x.contains("anyOf") ? x["anyOf"] : x["oneOf"];
    if (!a.is_array() || a.empty()) return nullptr;
    if (x.contains("oneOf") && !opts_.lenient && !one_of_disjoint(a, depth + 1)) {
      storage = exclusive_branches(a);
      return storage.is_null() ? nullptr : &storage;
    }
    return &a;
  };
  const json* a = alternatives(base, exclusive[0]);
  const json* b = alternatives(p, exclusive[1]);
  if (!a || !b || a->size() * b->size() > kMaxPairs) return;
  json pairs = json::array();
  for (const json& x : *a)
    for (const json& y : *b) pairs.push_back(json{{"allOf", json::array({x, y})}});
  for (json* side : {&base, &p}) {
    side->erase("anyOf");
    side->erase("oneOf");
  }
  base["anyOf"] = std::move(pairs);
}

// oneOf [B1..Bn] as anyOf branches (Bi and not Bj for j != i); null when some Bj has no
// positive negation.
json SchemaConverter::exclusive_branches(const json& branches) {
  std::vector<json> negated;
  for (const json& branch : branches) {
    negated.push_back(negate_schema(branch));
    if (negated.back().is_null()) return json();
  }
  json out = json::array();
  for (size_t i = 0; i < branches.size(); ++i) {
    json parts = json::array({branches[i]});
    for (size_t j = 0; j < branches.size(); ++j)
      if (j != i) parts.push_back(negated[j]);
    out.push_back(json{{"allOf", parts}});
  }
  return out;
}

bool SchemaConverter::one_of_disjoint(const json& branches, int depth) {
  // Disjoint when every pair of branches allows disjoint JSON types (integer counts as number).
  std::vector<std::vector<std::string>> types;
  std::vector<json> merged;
  for (const json& b0 : branches) {
    json b = b0;
    if (b.is_object() && (b.contains("allOf") || b.contains("$ref")))
      b = merge_all_of(b.contains("$ref") && b.size() == 1
                           ? resolve_ref(b["$ref"].get<std::string>(), "oneOf")
                           : b,
                       "oneOf", depth + 1);
    if (!b.is_object()) return false;
    std::vector<std::string> t;
    if (b.contains("const"))
      t.push_back(json_type_of(b["const"]));
    else if (b.contains("enum") && b["enum"].is_array())
      for (auto& v : b["enum"]) t.push_back(json_type_of(v));
    else
      t = types_of(b);
    if (b.contains("anyOf") || b.contains("oneOf")) return false;
    for (auto& x : t)
      if (x == "integer") x = "number";
    types.push_back(t);
    merged.push_back(std::move(b));
  }
  for (size_t i = 0; i < types.size(); ++i) {
    for (size_t j = i + 1; j < types.size(); ++j) {
      bool overlap = false;
      for (auto& a : types[i])
        for (auto& b : types[j]) overlap |= a == b;
      if (!overlap) continue;
      bool objects = types[i] == std::vector<std::string>{"object"} &&
                     types[j] == std::vector<std::string>{"object"};
      if (!objects || !objects_disjoint(merged[i], merged[j])) return false;
    }
  }
  return true;
}

namespace {

std::vector<std::string> required_of(const json& s) {
  std::vector<std::string> out;
  if (s.contains("required") && s["required"].is_array())
    for (auto& r : s["required"])
      if (r.is_string()) out.push_back(r.get<std::string>());
  return out;
}

// Values a property schema allows when it is a const/enum; nullopt otherwise.
std::optional<std::vector<json>> fixed_values(const json& s) {
  if (!s.is_object()) return std::nullopt;
  if (s.contains("const")) return std::vector<json>{s["const"]};
  if (s.contains("enum") && s["enum"].is_array())
    return std::vector<json>(s["enum"].begin(), s["enum"].end());
  return std::nullopt;
}

// a has a required key that b can never contain.
bool has_key_forbidden_in(const json& a, const json& b) {
  if (!(b.contains("additionalProperties") && b["additionalProperties"] == false)) return false;
  if (b.contains("patternProperties")) return false;
  for (const std::string& k : required_of(a))
    if (!(b.contains("properties") && b["properties"].is_object() && b["properties"].contains(k)))
      return true;
  return false;
}

}  // namespace

// Two object schemas no instance satisfies together: a shared required discriminator property
// with disjoint const/enum values, or a required key one of them forbids.
bool SchemaConverter::objects_disjoint(const json& a, const json& b) {
  if (has_key_forbidden_in(a, b) || has_key_forbidden_in(b, a)) return true;
  auto rb = required_of(b);
  for (const std::string& k : required_of(a)) {
    if (std::find(rb.begin(), rb.end(), k) == rb.end()) continue;
    if (!a.contains("properties") || !b.contains("properties")) continue;
    const json& pa = a["properties"];
    const json& pb = b["properties"];
    if (!pa.is_object() || !pb.is_object() || !pa.contains(k) || !pb.contains(k)) continue;
    auto va = fixed_values(pa[k]), vb = fixed_values(pb[k]);
    if (!va || !vb) continue;
    bool common = false;
    for (auto& x : *va)
      for (auto& y : *vb) common |= x == y;
    if (!common) return true;
  }
  return false;
}

namespace {

// Shapes objects only by forbidding keys: properties whose schemas are all false.
bool forbids_keys_only(const json& x) {
  if (x.contains("patternProperties") || x.contains("additionalProperties") ||
      !x.contains("properties") || !x["properties"].is_object())
    return false;
  for (const auto& [k, v] : x["properties"].items())
    if (v != json(false)) return false;
  return true;
}

}  // namespace

// One side only forbids keys (dependencies' "k absent" parts: {properties: {k: false}}): the
// other side's shape (patternProperties included) stays, with those keys forbidden in it. A
// key it declares gets the false schema; a key it does not declare is added as false when no
// pattern matches it (additionalProperties would have judged it); a key a pattern matches
// would need the pattern's keys to exclude it: done when every pattern's language is a small
// finite set (`^[a-e]$`), by declaring those keys instead (expand_pattern_keys), else refused
// like other shape merges.
bool SchemaConverter::merge_forbidden_keys(json& base, json& p, const std::string& path) {
  const bool p_forbids = forbids_keys_only(p);
  if (!p_forbids && !forbids_keys_only(base)) return false;
  json& shape = p_forbids ? base : p;
  const json forbidden = (p_forbids ? p : base)["properties"];
  if (shape.contains("properties") && !shape["properties"].is_object()) return false;
  json props = shape.contains("properties") ? shape["properties"] : json::object();
  for (const auto& [k, v] : forbidden.items()) {
    if (!props.contains(k) && shape.contains("patternProperties")) {
      if (!shape["patternProperties"].is_object()) return false;
      bool matched = false;
      for (const auto& [pattern, sub] : shape["patternProperties"].items())
        matched = matched || first_pattern_match(pattern, {k}, path).has_value();
      // Finite patterns become declared properties, so k can be forbidden among them.
      if (matched && !expand_pattern_keys(shape, path))
        unsupported(path, "allOf parts that both constrain object properties ('" + k +
                              "' matches patternProperties)");
      if (matched) props = shape["properties"];
    }
    props[k] = false;
  }
  json merged = shape;
  merged["properties"] = props;
  // The shape keywords now live in base; the forbidding side has none left to merge.
  for (const char* k : {"properties", "patternProperties", "additionalProperties"}) {
    if (merged.contains(k)) base[k] = merged[k];
    p.erase(k);
  }
  return true;
}

// The first of `names` the (unanchored) pattern matches; unsupported patterns are refused.
std::optional<std::string> SchemaConverter::first_pattern_match(
    const std::string& pattern, const std::vector<std::string>& names, const std::string& path) {
  const std::shared_ptr<const NfaGrammar> nfa = key_pattern_nfa(pattern, path);
  for (const std::string& name : names) {
    EarleyParser parser(nfa.get());
    parser.reset(nfa->rule_start(nfa->root()));
    bool ok = true;
    for (char c : name) ok = ok && parser.push_byte(static_cast<uint8_t>(c));
    if (ok && parser.accepting()) return name;
  }
  return std::nullopt;
}

}  // namespace di::grammar
