// SPDX-License-Identifier: Apache-2.0
// Keyword dispatch, $ref resolution and combinators (anyOf/oneOf/allOf) of the JSON Schema front
// end. Builders for each JSON type live in json_builders.cc.
#include "grammar/json_schema/schema_converter.h"

#include <algorithm>

#include "grammar/json_schema/converter.h"
#include "grammar/json_schema/not_rewrite.h"
#include "grammar/json_schema/unevaluated.h"

namespace di::grammar {

namespace {
constexpr int kMaxDepth = 64;
}  // namespace

// Validation keywords (anything else only annotates; validators ignore it, so do we).
const std::set<std::string>& known_keywords() {
  static const std::set<std::string> k = {"type",
                                          "enum",
                                          "const",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "items",
                                          "prefixItems",
                                          "additionalItems",
                                          "minItems",
                                          "maxItems",
                                          "minLength",
                                          "maxLength",
                                          "pattern",
                                          "format",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "multipleOf",
                                          "anyOf",
                                          "oneOf",
                                          "allOf",
                                          "$ref",
                                          "minProperties",
                                          "maxProperties",
                                          "not",
                                          "if",
                                          "then",
                                          "else",
                                          "dependentRequired",
                                          "dependentSchemas",
                                          "dependencies",
                                          "uniqueItems",
                                          "contains",
                                          "minContains",
                                          "maxContains",
                                          "patternProperties",
                                          "propertyNames",
                                          "unevaluatedProperties",
                                          "unevaluatedItems",
                                          "$dynamicRef",
                                          "$recursiveRef"};
  return k;
}

std::vector<std::string> types_of(const json& s) {
  if (!s.contains("type")) return {"object", "array", "string", "number", "boolean", "null"};
  const json& t = s["type"];
  std::vector<std::string> out;
  if (t.is_string()) out.push_back(t.get<std::string>());
  if (t.is_array())
    for (const json& x : t)
      if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

std::string json_type_of(const json& v) {
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  if (v.is_string()) return "string";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_boolean()) return "boolean";
  return "null";
}

bool type_allows(const std::vector<std::string>& types, const std::string& t) {
  for (auto& x : types)
    if (x == t || (x == "number" && t == "integer")) return true;
  return false;
}

bool SchemaConverter::schema_allows_type(const json& s, const json& v) {
  return type_allows(types_of(s), json_type_of(v));
}

void SchemaConverter::unsupported(const std::string& path, const std::string& what) {
  throw SchemaError(StatusCode::kUnimplemented,
                    "JSON Schema at '" + path + "': unsupported " + what);
}

// Rejects validation keywords we cannot enforce (strict mode).
void SchemaConverter::check_keywords(const json& s, const std::string& path) {
  if (opts_.lenient) return;
  for (auto& [k, v] : s.items()) {
    // rewrite_unevaluated has turned the exact cases into additionalProperties/items.
    if (k == "unevaluatedProperties" || k == "unevaluatedItems")
      unsupported(path, "keyword '" + k +
                            "' next to in-place applicators (allOf/anyOf/oneOf/not/if/$ref/"
                            "dependentSchemas" +
                            (k == "unevaluatedItems" ? std::string("/contains)") : ")"));
    // rewrite_dependencies has removed (or refused) dependent*/dependencies already.
    if (k == "not" || k == "dependentRequired" || k == "dependentSchemas" || k == "dependencies" ||
        k == "$dynamicRef" || k == "$recursiveRef")
      unsupported(path, "keyword '" + k + "'");
    // Enforced by the array/object builders, which const/enum values never reach.
    if ((k == "contains" || k == "propertyNames") && (s.contains("const") || s.contains("enum")))
      unsupported(path, "keyword '" + k + "' together with const/enum");
    if (k == "if" && (s.contains("then") || s.contains("else"))) unsupported(path, "keyword 'if'");
    // uniqueItems is enforced by the array builder for finite scalar items (or refused there);
    // const/enum arrays never reach it.
    if (k == "uniqueItems" && v == true && (s.contains("const") || s.contains("enum")) &&
        !(s.contains("maxItems") && s["maxItems"].is_number() && s["maxItems"] <= 1))
      unsupported(path, "keyword 'uniqueItems' together with const/enum");
  }
}

json SchemaConverter::resolve_ref(const std::string& ref, const std::string& path) {
  if (ref.empty() || ref[0] != '#') unsupported(path, "remote $ref '" + ref + "'");
  std::string ptr = ref.substr(1);
  // Percent-decoding of the fragment.
  std::string dec;
  for (size_t i = 0; i < ptr.size(); ++i) {
    if (ptr[i] == '%' && i + 2 < ptr.size()) {
      dec += static_cast<char>(std::stoi(ptr.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      dec += ptr[i];
    }
  }
  if (!dec.empty() && dec[0] != '/') unsupported(path, "$ref to an anchor '" + ref + "'");
  try {
    const json& target = root_.at(json::json_pointer(dec));
    return target;
  } catch (const std::exception&) {
    throw SchemaError(StatusCode::kInvalidArgument,
                      "JSON Schema at '" + path + "': unresolvable $ref '" + ref + "'");
  }
}

ExprId SchemaConverter::value(const json& s_in, const std::string& path, int depth) {
  if (depth > kMaxDepth) unsupported(path, "nesting depth");
  if (s_in.is_boolean()) return s_in == true ? any_value() : g_.nothing();
  if (!s_in.is_object())
    throw SchemaError(StatusCode::kInvalidArgument,
                      "JSON Schema at '" + path + "': schema must be an object or boolean");
  bool pure_ref = s_in.contains("$ref") && s_in["$ref"].is_string();
  for (auto& [k, v] : s_in.items())
    if (k != "$ref" && known_keywords().count(k)) pure_ref = false;
  if (pure_ref) {
    std::string ref = s_in["$ref"].get<std::string>();
    auto it = named_.find("$ref:" + ref);
    if (it != named_.end()) return g_.ref(it->second);
    RuleId r = g_.add_rule("ref" + std::to_string(named_.size()));
    named_["$ref:" + ref] = r;
    owned_.push_back(resolve_ref(ref, path));
    json target = owned_.back();
    g_.set_body(r, value(target, ref, depth + 1));
    return g_.ref(r);
  }
  // A rewritten `not {not: X}` adds an allOf part, so merging and rewriting alternate.
  json s = rewrite_not(s_in);
  if (s.is_object() && (s.contains("allOf") || s.contains("$ref")))
    s = rewrite_not(merge_all_of(s, path, depth));
  for (int round = 0; s.is_object() && s.contains("allOf"); ++round) {
    if (round == 8) unsupported(path, "allOf/not nesting this deep");
    s = rewrite_not(merge_all_of(s, path, depth));
  }
  if (s.is_boolean()) return value(s, path, depth + 1);
  s = rewrite_if(s);  // anyOf [if and then, not-if and else], when not-if has a positive form
  s = rewrite_dependencies(s, path, depth);  // anyOf over "key absent" / "key and its demands"
  if (s.is_boolean()) return value(s, path, depth + 1);
  check_keywords(s, path);

  std::vector<ExprId> conj;  // anyOf/oneOf restrict the same value: handled as alternatives
  if (s.contains("anyOf") || s.contains("oneOf")) {
    bool one = s.contains("oneOf");
    json exclusive;
    const json* list = one ? &s["oneOf"] : &s["anyOf"];
    if (s.contains("anyOf") && s.contains("oneOf")) unsupported(path, "anyOf together with oneOf");
    if (!list->is_array())
      throw SchemaError(StatusCode::kInvalidArgument, "anyOf/oneOf must be an array at " + path);
    if (one && list->size() > 1 && !opts_.lenient && !one_of_disjoint(*list, depth)) {
      // "Exactly one branch" where every branch has a positive negation (Bi and not Bj).
      exclusive = list->size() <= 4 ? exclusive_branches(*list) : json();
      if (exclusive.is_null()) unsupported(path, "oneOf whose branches may overlap");
      list = &exclusive;
    }
    const json& branches = *list;
    json rest = s;
    rest.erase("anyOf");
    rest.erase("oneOf");
    std::vector<ExprId> alts;
    int i = 0;
    for (const json& b : branches) {
      json merged = b;
      // Sibling keywords apply to every branch.
      bool has_siblings = false;
      for (auto& [k, v] : rest.items()) has_siblings |= known_keywords().count(k) > 0;
      if (has_siblings)
        merged = merge_all_of(json{{"allOf", json::array({rest, b})}}, path, depth + 1);
      alts.push_back(
          value(merged, path + "/" + (one ? "oneOf/" : "anyOf/") + std::to_string(i++), depth + 1));
    }
    return g_.alt(std::move(alts));
  }

  auto types = types_of(s);
  if (s.contains("const")) {
    // Merged allOf parts (if/then branches) can put const next to enum or type: all hold.
    const json& c = s["const"];
    if (s.contains("type") && !type_allows(types, json_type_of(c))) return g_.nothing();
    if (s.contains("enum") && s["enum"].is_array() &&
        std::find(s["enum"].begin(), s["enum"].end(), c) == s["enum"].end())
      return g_.nothing();
    return literal_value(c);
  }
  if (s.contains("enum")) {
    if (!s["enum"].is_array())
      throw SchemaError(StatusCode::kInvalidArgument, "enum must be an array at " + path);
    std::vector<ExprId> alts;
    for (const json& v : s["enum"]) {
      std::string t = json_type_of(v);
      if (s.contains("type") && !type_allows(types, t)) continue;
      alts.push_back(literal_value(v));
    }
    return g_.alt(std::move(alts));
  }
  std::vector<ExprId> alts;
  for (const std::string& t : types) {
    if (t == "object")
      alts.push_back(object_expr(s, path, depth));
    else if (t == "array")
      alts.push_back(array_expr(s, path, depth));
    else if (t == "string")
      alts.push_back(string_rule(s, path));
    else if (t == "number")
      alts.push_back(number_expr(s, false, path));
    else if (t == "integer")
      alts.push_back(number_expr(s, true, path));
    else if (t == "boolean")
      alts.push_back(g_.alt({g_.literal("true"), g_.literal("false")}));
    else if (t == "null")
      alts.push_back(g_.literal("null"));
    else
      throw SchemaError(StatusCode::kInvalidArgument,
                        "JSON Schema at '" + path + "': unknown type '" + t + "'");
  }
  return g_.alt(std::move(alts));
}

Grammar SchemaConverter::convert() {
  RuleId root = g_.add_rule("root");
  g_.set_root(root);
  ExprId v = value(root_, "#", 0);
  g_.set_body(root, g_.seq({ws(), v, ws()}));
  return std::move(g_);
}

Grammar SchemaConverter::any_value_grammar() {
  RuleId root = g_.add_rule("root");
  g_.set_root(root);
  g_.set_body(root, g_.seq({ws(), any_value(), ws()}));
  return std::move(g_);
}

Expected<Grammar> json_schema_to_grammar(const nlohmann::ordered_json& schema,
                                         const JsonSchemaOptions& opts) {
  try {
    // unevaluated* where it is exactly additionalProperties/items (on a copy, only if used).
    if (mentions_unevaluated(schema)) {
      json rewritten = schema;
      rewrite_unevaluated(rewritten);
      return SchemaConverter(rewritten, opts).convert();
    }
    return SchemaConverter(schema, opts).convert();
  } catch (const SchemaError& e) {
    return Status(e.code, e.what());
  } catch (const std::exception& e) {  // nlohmann type errors on malformed schemas
    return invalid_argument(std::string("JSON Schema: ") + e.what());
  }
}

Expected<Grammar> json_schema_to_grammar(std::string_view text, const JsonSchemaOptions& opts) {
  json schema = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return invalid_argument("JSON Schema: not valid JSON");
  return json_schema_to_grammar(schema, opts);
}

Grammar any_json_grammar(const JsonSchemaOptions& opts) {
  json empty = json::object();
  return SchemaConverter(empty, opts).any_value_grammar();
}

}  // namespace di::grammar
