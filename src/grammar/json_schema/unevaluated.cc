// SPDX-License-Identifier: Apache-2.0
#include "grammar/json_schema/unevaluated.h"

#include <algorithm>

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

void rewrite_one(json& s) {
  if (!s.is_object() || has_in_place_applicator(s)) return;
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
bool walk(json& s, int depth) {
  if (!s.is_object() || depth > 256) return false;
  bool found = s.contains("unevaluatedProperties") || s.contains("unevaluatedItems");
  for (const char* k : {"properties", "patternProperties", "$defs", "definitions",
                        "dependentSchemas", "dependencies"})
    if (auto m = s.find(k); m != s.end() && m->is_object())
      for (auto& [name, sub] : m->items()) found |= walk(sub, depth + 1);
  for (const char* k : {"items", "prefixItems", "allOf", "anyOf", "oneOf"})
    if (auto a = s.find(k); a != s.end() && a->is_array())
      for (json& sub : *a) found |= walk(sub, depth + 1);
  for (const char* k :
       {"items", "additionalItems", "additionalProperties", "unevaluatedItems",
        "unevaluatedProperties", "contains", "propertyNames", "not", "if", "then", "else"})
    if (auto sub = s.find(k); sub != s.end() && sub->is_object()) found |= walk(*sub, depth + 1);
  if (found) rewrite_one(s);
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
  return walk(root, 0);
}

}  // namespace di::grammar
