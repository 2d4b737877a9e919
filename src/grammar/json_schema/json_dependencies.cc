// SPDX-License-Identifier: Apache-2.0
// dependentRequired, dependentSchemas and draft-7 `dependencies`, rewritten into an exact anyOf.
#include <string>
#include <vector>

#include "grammar/json_schema/converter.h"
#include "grammar/json_schema/not_rewrite.h"

namespace di::grammar {

namespace {

// Keys that may be present each double the combinations: 2^8 at most, of which those that
// contradict a list dependency (k present, a key it demands absent) are skipped unmerged, and at
// most kMaxBranches may survive (each is one alternative of the object).
constexpr size_t kMaxOpenKeys = 8;
constexpr size_t kMaxBranches = 64;

bool has_string(const json& list, const std::string& k) {
  if (!list.is_array()) return false;
  for (const json& x : list)
    if (x == k) return true;
  return false;
}

// The key can never appear in an instance of s.
bool key_forbidden(const json& s, const std::string& k) {
  const bool declared =
      s.contains("properties") && s["properties"].is_object() && s["properties"].contains(k);
  if (declared) return s["properties"][k] == false;
  return s.contains("additionalProperties") && s["additionalProperties"] == false &&
         !s.contains("patternProperties");
}

struct Entry {
  std::string key;
  json demand;  // what an object with `key` must also satisfy
  std::string keyword;
};

}  // namespace

// An entry (k, D) holds iff the value is not an object, or an object without k, or an object
// with k that satisfies D (D = {required: [...]} for a list of names). With n entries whose
// key may or may not be present, the value must match one of the 2^n combinations of
// "k absent" (k declared with the false schema) and "k required and D", each merged with the
// rest of the schema, or be one of the schema's non-object types. That is exact. Entries that
// are vacuous (an empty list, `true`) or decided by the schema (k required: only "present"; k
// never allowed: nothing to check) cost no branch. Past kMaxOpenKeys open keys or kMaxBranches
// surviving combinations, or when a combination cannot be merged, strict mode refuses naming
// the keyword (lenient ignores it).
json SchemaConverter::rewrite_dependencies(const json& s, const std::string& path, int depth) {
  if (!s.is_object()) return s;
  json rest = s;
  std::vector<Entry> entries;
  std::string first, malformed;
  auto bad = [&](const std::string& kw, const std::string& why) {
    if (malformed.empty()) malformed = "'" + kw + "' " + why;
  };
  for (const std::string kw : {"dependentRequired", "dependentSchemas", "dependencies"}) {
    if (!s.contains(kw)) continue;
    if (first.empty()) first = kw;
    rest.erase(kw);
    const json& d = s[kw];
    if (!d.is_object()) bad(kw, "must be an object");
    for (auto& [k, v] : d.items()) {
      if (v.is_array()) {
        if (kw == "dependentSchemas") bad(kw, "values must be schemas");
        for (const json& x : v)
          if (!x.is_string()) bad(kw, "lists must hold property names");
        if (!v.empty()) entries.push_back({k, json{{"required", v}}, kw});
      } else if (v.is_boolean() || v.is_object()) {
        if (kw == "dependentRequired") bad(kw, "values must be arrays of names");
        // `not` in its positive forms first: two demands like {not: {required: [x]}} would
        // otherwise be two `not`s the merge cannot combine.
        // A demand that is just `not X` for an object condition X: its negation (as if/else).
        json demand = rewrite_not(v);
        if (demand.is_object() && demand.size() == 1 && demand.contains("not") &&
            demand["not"].is_object()) {
          json neg = negate_schema(demand["not"]);
          if (!neg.is_null()) demand = std::move(neg);
        }
        if (v != true) entries.push_back({k, demand, kw});
      } else {
        bad(kw, "has a value that is neither a list nor a schema");
      }
    }
  }
  if (first.empty()) return s;
  if (!malformed.empty()) {  // lenient mode ignores it like any keyword it cannot enforce
    if (opts_.lenient) return rest;
    throw SchemaError(StatusCode::kInvalidArgument, "JSON Schema at '" + path + "': " + malformed);
  }
  auto refuse = [&](const std::string& kw, const std::string& why) -> json {
    if (!opts_.lenient) unsupported(path, "keyword '" + kw + "'" + why);
    return rest;
  };
  std::vector<std::string> types = types_of(rest);
  if (entries.empty() || !type_allows(types, "object")) return rest;
  if (rest.contains("const") || rest.contains("enum"))
    return refuse(entries[0].keyword, " together with const/enum");

  // A oneOf whose branches may overlap would stay in every combination and be refused there:
  // as "exactly one branch" (an anyOf) it merges like any alternatives.
  if (rest.contains("oneOf") && !rest.contains("anyOf") && rest["oneOf"].is_array() &&
      rest["oneOf"].size() > 1 && !one_of_disjoint(rest["oneOf"], depth + 1)) {
    json any = exclusive_branches(rest["oneOf"]);
    if (!any.is_null()) {
      rest.erase("oneOf");
      rest["anyOf"] = std::move(any);
    }
  }
  // Decided entries first: "present" folds into the common part, "never present" drops.
  json common = rest;
  common["type"] = "object";
  std::vector<json> fixed{common};
  std::vector<const Entry*> open;
  for (const Entry& e : entries) {
    if (key_forbidden(rest, e.key)) continue;
    if (has_string(rest.contains("required") ? rest["required"] : json(), e.key))
      fixed.push_back(e.demand);
    else
      open.push_back(&e);
  }
  if (open.size() > kMaxOpenKeys)
    return refuse(open.back()->keyword, " with more than 8 keys that may be present");
  // A combination where an open key is present and its list demands an open key that is
  // absent (or a key the schema forbids) matches nothing: skipped without merging.
  auto contradicts = [&](size_t mask) {
    for (size_t i = 0; i < open.size(); ++i) {
      if (!(mask >> i & 1) || open[i]->demand.size() != 1 || !open[i]->demand.contains("required"))
        continue;
      for (const json& r : open[i]->demand["required"]) {
        if (!r.is_string()) continue;
        if (key_forbidden(rest, r.get<std::string>())) return true;
        for (size_t j = 0; j < open.size(); ++j)
          if (!(mask >> j & 1) && open[j]->key == r) return true;
      }
    }
    return false;
  };

  json branches = json::array();
  std::vector<std::string> others;
  for (const std::string& t : types)
    if (t != "object") others.push_back(t);
  if (!others.empty()) {
    json other = rest;
    other["type"] = others;
    branches.push_back(other);
  }
  for (size_t mask = 0; mask < (size_t{1} << open.size()); ++mask) {
    if (contradicts(mask)) continue;
    json parts = json::array();
    for (const json& f : fixed) parts.push_back(f);
    for (size_t i = 0; i < open.size(); ++i) {
      const std::string& k = open[i]->key;
      if (mask >> i & 1) {
        // Demands first: undeclared required keys are written in `required` order, and
        // instances tend to put the key that triggers a dependency after what it demands.
        parts.push_back(open[i]->demand);
        parts.push_back(json{{"required", json::array({k})}});
      } else {
        parts.push_back(json{{"properties", json{{k, false}}}});
      }
    }
    json merged;
    try {
      merged = merge_all_of(json{{"allOf", parts}}, path, depth + 1);
    } catch (const SchemaError& e) {
      return refuse(open.empty() ? first : open[0]->keyword, std::string(" (") + e.what() + ")");
    }
    if (merged != false) branches.push_back(merged);
    if (branches.size() > kMaxBranches)
      return refuse(open[0]->keyword,
                    " with more than 64 combinations of keys that may be present");
  }
  if (branches.empty()) return json(false);
  if (branches.size() == 1) return branches[0];
  return json{{"anyOf", branches}};
}

}  // namespace di::grammar
