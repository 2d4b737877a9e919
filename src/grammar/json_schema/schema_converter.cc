// SPDX-License-Identifier: Apache-2.0
// Keyword dispatch, $ref resolution and combinators (anyOf/oneOf/allOf) of the JSON Schema front
// end. Builders for each JSON type live in json_builders.cc.
#include "grammar/json_schema/schema_converter.h"

#include <algorithm>

#include "grammar/json_schema/converter.h"
#include "grammar/json_schema/not_rewrite.h"

namespace di::grammar {

namespace {

constexpr int kMaxDepth = 64;

// Keywords that only annotate; validators ignore them, so do we.
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

}  // namespace

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
    if (k == "not" || k == "dependentRequired" || k == "dependentSchemas" || k == "dependencies" ||
        k == "unevaluatedProperties" || k == "unevaluatedItems" || k == "$dynamicRef" ||
        k == "$recursiveRef")
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
    for (auto& [k, v] : p.items()) {
      if (!base.contains(k)) {
        base[k] = v;
      } else if (base[k] == v) {
      } else if (k == "properties" && v.is_object() && base[k].is_object()) {
        for (auto& [pk, pv] : v.items()) {
          if (!base[k].contains(pk))
            base[k][pk] = pv;
          else if (base[k][pk] != pv)
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
      } else if (known_keywords().count(k)) {
        unsupported(path, "allOf with conflicting '" + k + "'");
      }
    }
  }
  return base;
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
  check_keywords(s, path);

  std::vector<ExprId> conj;  // anyOf/oneOf restrict the same value: handled as alternatives
  if (s.contains("anyOf") || s.contains("oneOf")) {
    bool one = s.contains("oneOf");
    const json& branches = one ? s["oneOf"] : s["anyOf"];
    if (s.contains("anyOf") && s.contains("oneOf")) unsupported(path, "anyOf together with oneOf");
    if (!branches.is_array())
      throw SchemaError(StatusCode::kInvalidArgument, "anyOf/oneOf must be an array at " + path);
    if (one && branches.size() > 1 && !opts_.lenient && !one_of_disjoint(branches, depth))
      unsupported(path, "oneOf whose branches may overlap");
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
