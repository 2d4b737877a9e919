// SPDX-License-Identifier: Apache-2.0
#include "grammar/json_schema/not_rewrite.h"

#include <set>
#include <string>
#include <vector>

namespace di::grammar {

namespace {

using json = nlohmann::ordered_json;

bool is_annotation(const std::string& k) {
  static const std::set<std::string> kAnnotations = {
      "title",   "description", "$comment",   "examples", "default",  "$id",
      "$schema", "$anchor",     "deprecated", "readOnly", "writeOnly"};
  return kAnnotations.count(k) != 0;
}

// The negated schema's one validation keyword, or "" (several, or none besides annotations).
std::string only_keyword(const json& n) {
  std::string found;
  for (auto& [k, v] : n.items()) {
    if (is_annotation(k)) continue;
    if (!found.empty()) return "";
    found = k;
  }
  return found.empty() ? "<none>" : found;
}

// s without the types in `t`; false when nothing is left; s unchanged (still with `not`) when
// the difference is not a type list.
json without_types(json s, const json& t) {
  std::vector<std::string> excluded;
  if (t.is_string()) excluded.push_back(t.get<std::string>());
  if (t.is_array())
    for (const json& x : t)
      if (x.is_string()) excluded.push_back(x.get<std::string>());
  if (excluded.empty()) return s;
  std::set<std::string> cur;
  if (!s.contains("type")) {
    cur = {"null", "boolean", "object", "array", "number", "string"};
  } else if (s["type"].is_string()) {
    cur.insert(s["type"].get<std::string>());
  } else if (s["type"].is_array()) {
    for (const json& x : s["type"])
      if (x.is_string()) cur.insert(x.get<std::string>());
  } else {
    return s;
  }
  for (const std::string& x : excluded) {
    if (x == "integer" && cur.count("number")) return s;  // "non-integer number": no grammar
    cur.erase(x);
    if (x == "number") cur.erase("integer");
  }
  if (cur.empty()) return json(false);
  s.erase("not");
  s["type"] =
      cur.size() == 1 ? json(*cur.begin()) : json(std::vector<std::string>(cur.begin(), cur.end()));
  return s;
}

// not {required: [k]}: an object without k (required holds vacuously for non-objects, so its
// negation also demands an object). Declaring k with the false schema keeps it out, also as an
// additional or pattern property.
json without_key(json s, const json& req) {
  if (!req.is_array() || req.size() != 1 || !req[0].is_string()) return s;
  const std::string k = req[0].get<std::string>();
  if (s.contains("required") && s["required"].is_array())
    for (const json& r : s["required"])
      if (r == k) return json(false);
  if (s.contains("type")) {
    const json& t = s["type"];
    bool object = t == "object";
    if (t.is_array())
      for (const json& x : t) object = object || x == "object";
    if (!object) return json(false);
  }
  if (s.contains("properties") && !s["properties"].is_object()) return s;
  s["type"] = "object";
  s["properties"][k] = false;
  s.erase("not");
  return s;
}

// not {const: v} / not {enum: [...]}: s's own finite set of values minus those. Numbers
// compare by value (1 == 1.0), as JSON Schema does.
json without_values(json s, const json& excluded) {
  auto same = [](const json& a, const json& b) {
    if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
    return a == b;
  };
  json vals = json::array();
  if (s.contains("const")) {
    vals.push_back(s["const"]);
  } else if (s.contains("enum") && s["enum"].is_array()) {
    vals = s["enum"];
  } else if (s.contains("type") && s["type"] == "boolean") {
    vals = json::array({true, false});
  } else if (s.contains("type") && s["type"] == "null") {
    vals = json::array({nullptr});
  } else {
    return s;
  }
  json kept = json::array();
  for (const json& v : vals) {
    bool drop = false;
    for (const json& x : excluded) drop = drop || same(v, x);
    if (!drop) kept.push_back(v);
  }
  if (kept.empty()) return json(false);
  s.erase("not");
  s.erase("const");
  s["enum"] = kept;
  return s;
}

}  // namespace

json negate_schema(const json& i) {
  if (i.is_boolean()) return json(!i.get<bool>());
  if (!i.is_object()) return json();
  if (i.contains("not")) {  // not {not: X} is X, when nothing else constrains
    for (auto& [k, v] : i.items())
      if (k != "not" && !is_annotation(k)) return json();
    return i["not"];
  }
  bool object = false;
  for (auto& [k, v] : i.items()) {
    if (is_annotation(k)) continue;
    if (k == "type" && (v == "object" || v == json::array({"object"}))) {
      object = true;
    } else if (k == "type" && i.size() == 1) {
      return json{{"not", i}};  // rewrite_not: the remaining types
    } else if (k != "properties" && k != "required") {
      return json();
    }
  }
  json parts = json::array();
  if (object) parts.push_back({{"type", {"null", "boolean", "number", "string", "array"}}});
  if (i.contains("required")) {
    if (!i["required"].is_array()) return json();
    for (const json& r : i["required"]) {
      if (!r.is_string()) return json();
      parts.push_back({{"type", "object"}, {"properties", {{r.get<std::string>(), false}}}});
    }
  }
  if (i.contains("properties")) {
    if (!i["properties"].is_object()) return json();
    for (auto& [k, x] : i["properties"].items()) {
      if (x == json(true)) continue;  // every value satisfies it
      json prop = x == json(false) ? json(true) : json{{"not", x}};
      parts.push_back({{"type", "object"}, {"required", {k}}, {"properties", {{k, prop}}}});
    }
  }
  if (parts.empty()) return json(false);  // i holds for everything
  return parts.size() == 1 ? parts[0] : json{{"anyOf", parts}};
}

json rewrite_if(json s) {
  if (!s.is_object() || !s.contains("if")) return s;
  if (!s.contains("then") && !s.contains("else")) {  // no effect
    s.erase("if");
    return s;
  }
  if (s.contains("anyOf") || s.contains("oneOf")) return s;
  const json cond = s["if"];
  json neg = negate_schema(cond);
  if (neg.is_null()) return s;
  const json then = s.contains("then") ? s["then"] : json(true);
  const json other = s.contains("else") ? s["else"] : json(true);
  s.erase("if");
  s.erase("then");
  s.erase("else");
  s["anyOf"] = json::array(
      {json{{"allOf", json::array({cond, then})}}, json{{"allOf", json::array({neg, other})}}});
  return s;
}

json rewrite_not(json s) {
  // Each round removes one `not` level; bounded so a deep chain cannot loop for long.
  for (int round = 0; round < 64 && s.is_object() && s.contains("not"); ++round) {
    const json n = s["not"];
    if (n.is_boolean()) {
      if (n == true) return json(false);
      s.erase("not");
      break;
    }
    if (!n.is_object()) break;
    const std::string k = only_keyword(n);
    if (k == "<none>") return json(false);  // not {} matches nothing
    if (k == "not") {
      s.erase("not");
      json parts = s.contains("allOf") && s["allOf"].is_array() ? s["allOf"] : json::array();
      if (s.contains("allOf") && !s["allOf"].is_array())
        break;  // malformed: leave to the converter
      parts.push_back(n["not"]);
      s["allOf"] = parts;
      continue;
    }
    if (k == "required") {
      json r = without_key(s, n["required"]);
      if (r.is_object() && r.contains("not")) break;  // several keys: "one of them absent"
      return r;
    }
    if (k == "const" || (k == "enum" && n["enum"].is_array())) {
      json r = without_values(s, k == "const" ? json::array({n["const"]}) : n["enum"]);
      if (r.is_object() && r.contains("not")) break;  // s is no finite set
      return r;
    }
    if (k == "type") {
      json r = without_types(s, n["type"]);
      if (r.is_object() && r.contains("not")) break;  // not expressible
      return r;
    }
    break;
  }
  return s;
}

}  // namespace di::grammar
