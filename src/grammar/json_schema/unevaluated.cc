// SPDX-License-Identifier: Apache-2.0
#include "grammar/json_schema/unevaluated.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "grammar/json_schema/not_rewrite.h"

namespace di::grammar {

using json = nlohmann::ordered_json;

namespace {

// Keywords that apply subschemas to the same instance: their evaluations would count too.
bool has_in_place_applicator(const json& s) {
  for (const char* k : {"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref",
                        "$dynamicRef", "$recursiveRef", "dependentSchemas", "dependencies"})
    if (s.contains(k)) return true;
  return false;
}

// What a passing subschema evaluates, when that is known statically: property names and
// patterns (or every member), the length of the item prefix (or every item).
struct Evaluated {
  std::vector<std::string> names, patterns;
  size_t prefix = 0;
  bool all_props = false, all_items = false;
  void add(const Evaluated& o) {
    for (const auto& n : o.names)
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    for (const auto& p : o.patterns)
      if (std::find(patterns.begin(), patterns.end(), p) == patterns.end()) patterns.push_back(p);
    prefix = std::max(prefix, o.prefix);
    all_props |= o.all_props;
    all_items |= o.all_items;
  }
};

const json* resolve_local(const json& root, const json& ref) {
  if (!ref.is_string()) return nullptr;
  const std::string r = ref.get<std::string>();
  if (r.empty() || r[0] != '#') return nullptr;
  try {
    const json& t = root.at(json::json_pointer(r.substr(1)));
    return &t;
  } catch (const std::exception&) {
    return nullptr;
  }
}

// Static only through allOf, local $ref and `not` (which never evaluates); anyOf/oneOf/if and
// the dependency keywords evaluate what their passing branches do (nullopt here), as does
// `contains` for items.
std::optional<Evaluated> evaluated(const json& x, const json& root, int depth) {
  Evaluated e;
  if (x.is_boolean()) {  // true evaluates nothing; false never passes
    e.all_props = e.all_items = x == false;
    return e;
  }
  if (!x.is_object() || depth > 32) return std::nullopt;
  for (const char* k : {"anyOf", "oneOf", "if", "then", "else", "dependentSchemas", "dependencies",
                        "$dynamicRef", "$recursiveRef", "contains"})
    if (x.contains(k)) return std::nullopt;
  if (auto p = x.find("properties"); p != x.end() && p->is_object())
    for (const auto& [k, v] : p->items()) e.names.push_back(k);
  if (auto p = x.find("patternProperties"); p != x.end() && p->is_object())
    for (const auto& [k, v] : p->items()) e.patterns.push_back(k);
  e.all_props = x.contains("additionalProperties") || x.contains("unevaluatedProperties");
  if (auto p = x.find("prefixItems"); p != x.end() && p->is_array()) e.prefix = p->size();
  if (auto it = x.find("items"); it != x.end()) {
    if (it->is_array())
      e.prefix = std::max(e.prefix, it->size());
    else
      e.all_items = true;
  }
  e.all_items |= x.contains("additionalItems") || x.contains("unevaluatedItems");
  if (auto a = x.find("allOf"); a != x.end()) {
    if (!a->is_array()) return std::nullopt;
    for (const json& part : *a) {
      auto pe = evaluated(part, root, depth + 1);
      if (!pe) return std::nullopt;
      e.add(*pe);
    }
  }
  if (auto r = x.find("$ref"); r != x.end()) {
    const json* t = resolve_local(root, *r);
    if (!t) return std::nullopt;
    auto te = evaluated(*t, root, depth + 1);
    if (!te) return std::nullopt;
    e.add(*te);
  }
  return e;
}

// The schema "every member that e does not evaluate satisfies u".
json unevaluated_members(const Evaluated& e, const json& u) {
  json c = json::object();
  if (e.all_props) return c;
  json props = json::object(), pats = json::object();
  for (const auto& n : e.names) props[n] = true;
  for (const auto& p : e.patterns) pats[p] = true;
  if (!props.empty()) c["properties"] = props;
  if (!pats.empty()) c["patternProperties"] = pats;
  c["additionalProperties"] = u;
  return c;
}

// unevaluatedProperties next to applicators. allOf / $ref / not: every part passes, so the
// evaluated members are the union of the parts' (statically known) ones: the keyword becomes
// this schema's additionalProperties with those names and patterns declared (as `true`).
// if/then/else: anyOf [if and then, not-if and else], each branch with its own evaluated set
// (a failed `if` evaluates nothing), exact where not-if has a positive form. oneOf/anyOf: each
// branch gets "members evaluated by neither this schema nor the branch satisfy u": for an anyOf
// narrower only where two branches pass together (never wider: sound); a oneOf keeps its
// branches and gains allOf [anyOf of those], exact (merged pairwise when its branches are
// disjoint, refused otherwise). Anything else
// (dependentSchemas, branches whose own evaluations are dynamic) stays for the converter to
// refuse.
void rewrite_props_with_applicators(json& s, const json& root) {
  const json u = s["unevaluatedProperties"];
  json rest = s;
  rest.erase("unevaluatedProperties");
  json statics = rest;
  for (const char* k : {"anyOf", "oneOf", "if", "then", "else"}) statics.erase(k);
  auto es = evaluated(statics, root, 0);
  if (!es) return;
  const int kinds = rest.contains("anyOf") + rest.contains("oneOf") + rest.contains("if");
  if (kinds > 1) return;
  if (es->all_props) {
    s = rest;
    return;
  }
  if (kinds == 0) {
    json c = unevaluated_members(*es, u);
    for (const auto& [k, v] : c.items()) {
      if (k == "additionalProperties") {
        rest[k] = v;
        continue;
      }
      if (!rest.contains(k)) rest[k] = json::object();
      for (const auto& [n, t] : v.items())
        if (!rest[k].contains(n)) rest[k][n] = t;
    }
    s = rest;
    return;
  }
  if (rest.contains("if")) {
    const json cond = rest["if"];
    const json then = rest.value("then", json(true)), els = rest.value("else", json(true));
    const json not_if = negate_schema(cond);
    auto ei = evaluated(cond, root, 0), et = evaluated(then, root, 0), ee = evaluated(els, root, 0);
    if (not_if.is_null() || !ei || !et || !ee) return;
    Evaluated yes = *es, no = *es;
    yes.add(*ei);
    yes.add(*et);
    no.add(*ee);
    for (const char* k : {"if", "then", "else"}) rest.erase(k);
    rest["anyOf"] = json::array({json{{"allOf", {cond, then, unevaluated_members(yes, u)}}},
                                 json{{"allOf", {not_if, els, unevaluated_members(no, u)}}}});
    s = rest;
    return;
  }
  const bool one = rest.contains("oneOf");
  const char* key = one ? "oneOf" : "anyOf";
  if (!rest[key].is_array()) return;
  json branches = json::array();
  for (const json& b : rest[key]) {
    auto eb = evaluated(b, root, 0);
    if (!eb) return;
    Evaluated both = *es;
    both.add(*eb);
    branches.push_back(both.all_props ? b : json{{"allOf", {b, unevaluated_members(both, u)}}});
  }
  if (one) {
    // The original oneOf stays: the extra constraints could make overlapping branches look
    // disjoint (an unevaluated key forbidden in one) and so accept an instance that two
    // original branches match. Exactly one Bi passes, so the anyOf picks its constraint.
    json parts = rest.contains("allOf") && rest["allOf"].is_array() ? rest["allOf"] : json::array();
    parts.push_back(json{{"anyOf", branches}});
    rest["allOf"] = parts;
  } else {
    rest[key] = branches;
  }
  s = rest;
}

// unevaluatedItems next to allOf / $ref / not: the evaluated prefix is the longest of the
// parts' (every item when one has items/additionalItems), so the keyword becomes this schema's
// items after a prefix padded with `true` to that length.
void rewrite_items_with_applicators(json& s, const json& root) {
  const json u = s["unevaluatedItems"];
  json rest = s;
  rest.erase("unevaluatedItems");
  auto e = evaluated(rest, root, 0);
  if (!e) return;
  if (!e->all_items) {
    const bool draft2019 = rest.contains("items") && rest["items"].is_array();
    json& prefix = rest[draft2019 ? "items" : "prefixItems"];
    if (!prefix.is_array()) prefix = json::array();
    while (prefix.size() < e->prefix) prefix.push_back(true);
    rest[draft2019 ? "additionalItems" : "items"] = u;
  }
  s = rest;
}

void rewrite_one(json& s, const json& root) {
  if (!s.is_object()) return;
  if (has_in_place_applicator(s)) {
    if (s.contains("unevaluatedProperties")) rewrite_props_with_applicators(s, root);
    if (s.contains("unevaluatedItems")) rewrite_items_with_applicators(s, root);
    return;
  }
  if (auto u = s.find("unevaluatedProperties"); u != s.end()) {
    // additionalProperties evaluates every member that properties/patternProperties do not.
    if (!s.contains("additionalProperties")) s["additionalProperties"] = *u;
    s.erase("unevaluatedProperties");
  }
  if (auto u = s.find("unevaluatedItems"); u != s.end() && !s.contains("contains")) {
    const auto items = s.find("items");
    if (items == s.end()) {
      s["items"] = *u;  // 2020-12: items covers the elements after prefixItems
    } else if (items->is_array() && !s.contains("additionalItems")) {
      s["additionalItems"] = *u;  // draft 2019-09 tuple form
    }
    // Otherwise items (a schema) or additionalItems already evaluates every element.
    s.erase("unevaluatedItems");
  }
}

// Subschema positions only (never const/enum/default/examples data). Children first, so a
// rewritten child never changes what its parent sees.
bool walk(json& s, const json& root, int depth) {
  if (!s.is_object() || depth > 256) return false;
  bool found = s.contains("unevaluatedProperties") || s.contains("unevaluatedItems");
  for (const char* k : {"properties", "patternProperties", "$defs", "definitions",
                        "dependentSchemas", "dependencies"})
    if (auto m = s.find(k); m != s.end() && m->is_object())
      for (auto& [name, sub] : m->items()) found |= walk(sub, root, depth + 1);
  for (const char* k : {"items", "prefixItems", "allOf", "anyOf", "oneOf"})
    if (auto a = s.find(k); a != s.end() && a->is_array())
      for (json& sub : *a) found |= walk(sub, root, depth + 1);
  for (const char* k :
       {"items", "additionalItems", "additionalProperties", "unevaluatedItems",
        "unevaluatedProperties", "contains", "propertyNames", "not", "if", "then", "else"})
    if (auto sub = s.find(k); sub != s.end() && sub->is_object())
      found |= walk(*sub, root, depth + 1);
  if (found) rewrite_one(s, root);
  return found;
}

}  // namespace

bool mentions_unevaluated(const json& j) {
  if (j.is_array()) return std::any_of(j.begin(), j.end(), mentions_unevaluated);
  if (!j.is_object()) return false;
  for (const auto& [k, v] : j.items())
    if (k == "unevaluatedProperties" || k == "unevaluatedItems" || mentions_unevaluated(v))
      return true;
  return false;
}

bool rewrite_unevaluated(json& root) {
  return walk(root, root, 0);
}

}  // namespace di::grammar
