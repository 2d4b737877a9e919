// SPDX-License-Identifier: Apache-2.0
// xgrammar's structural-tag `json_schema` style `cohere_xml`: a tool's arguments as Cohere's
// nested value tags, one per property of the top-level object schema,
//   <cofl:value name="KEY" type="raw|json|dict|list">VALUE</cofl:value>
// where `raw` is a string as written (up to the first </cofl:value>), `json` a JSON value,
// `dict` an object's properties as named value tags and `list` an array's items as unnamed ones
// (`<cofl:value type="...">`), recursively. Names are attribute values: & < > " are written as
// XML entities. Like the other XML styles (xml_parameters.cc): a string enum/const is its raw
// values, a constrained string is raw where it cannot hold '<'; declared properties come in any
// order up to the any-order bound; whitespace separates tags and pads JSON values. Where a schema
// has keywords the nested form cannot enforce (patternProperties, minProperties, ...), the value
// is `type="json"` with JSON text (Cohere's parser decodes json-typed values; narrower than
// xgrammar, which writes every object and array as dict/list); combinators over those forms
// (anyOf, type lists, mixed enums) pair each branch with its own type.
#include <algorithm>

#include "grammar/json_schema/converter.h"
#include "grammar/json_schema/xml_values.h"

namespace di::grammar {

namespace {

constexpr const char* kOpen = "<cofl:value";
constexpr const char* kClose = "</cofl:value>";
constexpr int kMaxDepth = 64;
constexpr size_t kMaxPrefixItems = 16;
constexpr int64_t kMaxItems = 10000;

// An attribute value's text for one code point: the four XML-sensitive ones as entities.
std::string cohere_unit(uint32_t cp) {
  switch (cp) {
    case '&':
      return "&amp;";
    case '<':
      return "&lt;";
    case '>':
      return "&gt;";
    case '"':
      return "&quot;";
    default: {
      std::string out;
      append_utf8(cp, out);
      return out;
    }
  }
}

// One unit of a name: a code point other than NUL and the XML-sensitive ones, or an entity.
ExprId cohere_name_unit(Grammar& g) {
  CharClass plain;
  for (uint32_t c : {0u, uint32_t('&'), uint32_t('<'), uint32_t('>'), uint32_t('"')})
    plain.add(c, c);
  return g.alt({utf8_class(g, plain.negated()), g.literal("&amp;"), g.literal("&lt;"),
                g.literal("&gt;"), g.literal("&quot;")});
}

// A raw value: any text up to (and with) the first closing tag.
ExprId raw_up_to_close(Grammar& g) {
  TagDispatchSpec spec;
  spec.loop = false;
  spec.stops = {kClose};
  spec.stop_eos = false;
  return g.tag_dispatch(std::move(spec));
}

bool only_keys(const json& s, std::initializer_list<const char*> allowed) {
  for (const auto& [k, v] : s.items()) {
    if (schema_note(k)) continue;
    const std::string& key = k;  // clang 14 cannot capture a structured binding
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; }))
      return false;
  }
  return true;
}

// The single type a schema names ("type": "object" or ["object"]); "" otherwise.
std::string single_type(const json& s) {
  json t = s.value("type", json());
  if (t.is_array() && t.size() == 1) t = t[0];
  return t.is_string() ? t.get<std::string>() : "";
}

}  // namespace

// Free dict/list bodies and the any-value suffix: one recursive family of shared rules.
ExprId SchemaConverter::cohere_free_suffix() {
  return shared_rule("cohere_free", [&] {
    const ExprId close = g_.literal(kClose);
    const ExprId free = g_.ref(named_["cohere_free"]);
    const ExprId key = shared_rule("cohere_key", [&] {
      const ExprId unit = cohere_name_unit(g_);
      return g_.seq({unit, g_.star(unit)});
    });
    const ExprId named =
        g_.seq({g_.literal(std::string(kOpen) + " name=\""), key, g_.literal("\""), free});
    const ExprId unnamed = g_.seq({g_.literal(kOpen), free});
    auto tags = [&](ExprId tag) { return g_.opt(g_.seq({tag, g_.star(g_.seq({ws(), tag}))})); };
    const ExprId scalar = g_.alt({number_expr(json::object(), false, "#"), g_.literal("true"),
                                  g_.literal("false"), g_.literal("null")});
    return g_.alt({g_.seq({g_.literal(" type=\"raw\">"),
                           shared_rule("cohere_raw", [&] { return raw_up_to_close(g_); })}),
                   g_.seq({g_.literal(" type=\"json\">"), ws(), scalar, ws(), close}),
                   g_.seq({g_.literal(" type=\"dict\">"), ws(), tags(named), ws(), close}),
                   g_.seq({g_.literal(" type=\"list\">"), ws(), tags(unnamed), ws(), close})});
  });
}

// What follows `<cofl:value` and the name: the type, the value and the closing tag.
ExprId SchemaConverter::cohere_suffix(const json& s, const std::string& path, int depth) {
  if (depth > kMaxDepth) unsupported(path, "nesting depth");
  const ExprId close = g_.literal(kClose);
  auto json_form = [&](const json& schema) {
    return g_.seq(
        {g_.literal(" type=\"json\">"), ws(), as_rule(value(schema, path, depth)), ws(), close});
  };
  if (s.is_boolean()) return s == true ? cohere_free_suffix() : g_.nothing();
  if (!s.is_object()) return json_form(s);  // value() names the error
  if (s.empty() || only_keys(s, {})) return cohere_free_suffix();
  if (s.contains("$ref") && s["$ref"].is_string() && only_keys(s, {"$ref"})) {
    const std::string ref = s["$ref"].get<std::string>();
    return shared_rule("cohere_ref:" + ref, [&] {
      owned_.push_back(resolve_ref(ref, path));
      const json target = owned_.back();
      return cohere_suffix(target, ref, depth + 1);
    });
  }
  // Alternatives that pair each branch with its own type attribute.
  auto branches = [&](const json& list, const std::string& key) {
    std::vector<ExprId> alts;
    for (size_t i = 0; i < list.size(); ++i)
      alts.push_back(cohere_suffix(list[i], path + "/" + key + "/" + std::to_string(i), depth + 1));
    return g_.alt(std::move(alts));
  };
  if (only_keys(s, {"anyOf"}) && s["anyOf"].is_array() && !s["anyOf"].empty())
    return branches(s["anyOf"], "anyOf");
  if (only_keys(s, {"oneOf"}) && s["oneOf"].is_array() && !s["oneOf"].empty() &&
      one_of_disjoint(s["oneOf"], depth))
    return branches(s["oneOf"], "oneOf");
  if (s.contains("type") && s["type"].is_array() && s["type"].size() > 1 &&
      only_keys(s, {"type"})) {
    json list = json::array();
    for (const json& t : s["type"]) list.push_back(json{{"type", t}});
    return branches(list, "type");
  }
  if (plain_string_schema(s))
    return g_.seq({g_.literal(" type=\"raw\">"),
                   shared_rule("cohere_raw", [&] { return raw_up_to_close(g_); })});
  auto raw_form = [&](ExprId text) {
    return g_.seq({g_.literal(" type=\"raw\">"), as_rule(text), close});
  };
  if (auto vals = string_enum_values(s)) {
    std::vector<ExprId> alts;
    for (const std::string& v : *vals)
      if (v.find(kClose) == std::string::npos) alts.push_back(g_.literal(v));
    return alts.empty() ? json_form(s) : raw_form(g_.alt(std::move(alts)));
  }
  // A mixed enum: its strings raw, the other values JSON.
  if (only_keys(s, {"enum"}) && s["enum"].is_array() && !s["enum"].empty()) {
    json strings = json::array(), others = json::array();
    for (const json& v : s["enum"]) (v.is_string() ? strings : others).push_back(v);
    if (!strings.empty() && !others.empty())
      return g_.alt({cohere_suffix(json{{"enum", strings}}, path, depth + 1),
                     json_form(json{{"enum", others}})});
  }
  if (auto b = bounded_raw_text(g_, s, {kClose}))
    return g_.seq({g_.literal(" type=\"raw\">"), as_rule(*b)});
  if (auto r = raw_constrained_string(g_, s)) return raw_form(*r);
  const std::string type =
      s.contains("type") || !s.contains("properties") ? single_type(s) : "object";
  if (type == "object" && only_keys(s, {"type", "properties", "required", "additionalProperties"}))
    return g_.seq(
        {g_.literal(" type=\"dict\">"), ws(), cohere_object_body(s, path, depth + 1), ws(), close});
  if (type == "array" && only_keys(s, {"type", "items", "prefixItems", "minItems", "maxItems"}) &&
      !(s.contains("items") && s["items"].is_array()) &&
      (!s.contains("prefixItems") ||
       (s["prefixItems"].is_array() && s["prefixItems"].size() <= kMaxPrefixItems)))
    return g_.seq(
        {g_.literal(" type=\"list\">"), ws(), cohere_list_body(s, path, depth + 1), ws(), close});
  return json_form(s);
}

// An object's properties as named value tags (the root's and a dict's): declared ones, and
// undeclared ones (names other than the declared) where additionalProperties allows them.
ExprId SchemaConverter::cohere_object_body(const json& s, const std::string& path, int depth) {
  std::vector<std::string> required;
  if (s.contains("required") && s["required"].is_array())
    for (const json& r : s["required"])
      if (r.is_string()) required.push_back(r.get<std::string>());
  const json props = s.value("properties", json::object());
  if (!props.is_object()) unsupported(path, "cohere_xml: 'properties' must be an object");
  for (const std::string& r : required)
    if (!props.contains(r))
      unsupported(path, "cohere_xml: required '" + r + "' without a properties entry");
  std::vector<ExprId> items;
  std::vector<bool> req;
  std::vector<std::vector<uint32_t>> declared;
  for (const auto& [k, v] : props.items()) {
    auto cps = code_points(k);
    if (k.empty() || !cps || std::find(cps->begin(), cps->end(), 0u) != cps->end())
      unsupported(path, "cohere_xml: property name '" + k + "' cannot be written as a name");
    // The undeclared-name trie recurses once per character of a declared name.
    if (k.size() > kMaxNameBytes)
      unsupported(path, "cohere_xml: a property name longer than " + std::to_string(kMaxNameBytes) +
                            " bytes");
    std::string name;
    for (uint32_t cp : *cps) name += cohere_unit(cp);
    declared.push_back(*cps);
    items.push_back(as_rule(g_.seq({g_.literal(std::string(kOpen) + " name=\"" + name + "\""),
                                    cohere_suffix(v, path + "/properties/" + k, depth + 1)})));
    req.push_back(std::find(required.begin(), required.end(), k) != required.end());
  }
  std::optional<ExprId> extra;
  const json ap = s.value("additionalProperties", json(true));
  if (ap != json(false)) {
    NameSpelling sp;
    sp.spell = cohere_unit;
    sp.other = [&](const CharClass& excluded, bool) {
      CharClass plain = excluded;
      for (uint32_t c : {0u, uint32_t('&'), uint32_t('<'), uint32_t('>'), uint32_t('"')})
        plain.add(c, c);
      std::vector<ExprId> alts{utf8_class(g_, plain.negated())};
      for (uint32_t c : {uint32_t('&'), uint32_t('<'), uint32_t('>'), uint32_t('"')})
        if (!excluded.contains(c)) alts.push_back(g_.literal(cohere_unit(c)));
      return g_.alt(std::move(alts));
    };
    sp.tail = g_.star(cohere_name_unit(g_));
    const ExprId name = as_rule(name_not_in(g_, std::move(declared), sp));
    extra = as_rule(g_.seq({g_.literal(std::string(kOpen) + " name=\""), name, g_.literal("\""),
                            cohere_suffix(ap, path + "/additionalProperties", depth + 1)}));
  }
  return xml_members(items, req, extra);
}

// An array's items as unnamed value tags: prefixItems (as many as minItems/maxItems allow),
// then items (absent: any value; false: none).
ExprId SchemaConverter::cohere_list_body(const json& s, const std::string& path, int depth) {
  const json prefix = s.value("prefixItems", json::array());
  const json rest = s.value("items", json(true));
  auto bound = [&](const char* key, int64_t fallback) {
    if (!s.contains(key)) return fallback;
    if (!s[key].is_number_integer() || s[key].get<int64_t>() < 0)
      unsupported(path, std::string("cohere_xml: '") + key + "' must be a non-negative integer");
    return s[key].get<int64_t>();
  };
  const int64_t lo = bound("minItems", 0), hi = bound("maxItems", -1);
  if (lo > kMaxItems || hi > kMaxItems) unsupported(path, "minItems/maxItems above 10000");
  const int64_t k = static_cast<int64_t>(prefix.size());
  std::vector<ExprId> tuple;
  for (int64_t i = 0; i < k; ++i)
    tuple.push_back(as_rule(
        g_.seq({g_.literal(kOpen),
                cohere_suffix(prefix[i], path + "/prefixItems/" + std::to_string(i), depth + 1)})));
  const bool rest_allowed = rest != json(false);
  const ExprId rest_item =
      rest_allowed
          ? as_rule(g_.seq({g_.literal(kOpen), cohere_suffix(rest, path + "/items", depth + 1)}))
          : g_.nothing();
  std::vector<ExprId> alts;
  // n: how many prefix items are written; the rest only after all of them.
  for (int64_t n = 0; n <= k; ++n) {
    if (hi >= 0 && n > hi) break;
    if (n < k && n < lo) continue;
    std::vector<ExprId> seq;
    for (int64_t i = 0; i < n; ++i) {
      if (i > 0) seq.push_back(ws());
      seq.push_back(tuple[i]);
    }
    if (n == k && rest_allowed) {
      const int64_t more_lo = std::max<int64_t>(0, lo - k);
      const int64_t more_hi = hi < 0 ? -1 : hi - k;
      if (more_hi != 0) {
        const ExprId more =
            k == 0 ? g_.seq({rest_item,
                             g_.repeat(g_.seq({ws(), rest_item}),
                                       static_cast<int32_t>(std::max<int64_t>(0, more_lo - 1)),
                                       static_cast<int32_t>(more_hi < 0 ? -1 : more_hi - 1))})
                   : g_.repeat(g_.seq({ws(), rest_item}), static_cast<int32_t>(more_lo),
                               static_cast<int32_t>(more_hi));
        seq.push_back(k == 0 && more_lo == 0 ? g_.opt(more) : more);
      } else if (more_lo > 0) {
        continue;
      }
    } else if (n == k && lo > k) {
      continue;
    }
    alts.push_back(g_.seq(std::move(seq)));
  }
  return alts.empty() ? g_.nothing() : g_.alt(std::move(alts));
}

Grammar SchemaConverter::cohere_parameters_grammar() {
  const std::string path = "#";
  ExprId body;
  if (root_ == json(true) || root_ == json::object()) {
    body = cohere_object_body(json::object(), path, 1);
  } else if (root_.is_object() && single_type(root_) == "object" &&
             only_keys(root_, {"type", "properties", "required", "additionalProperties"})) {
    body = cohere_object_body(root_, path, 1);
  } else if (root_.is_object() && !root_.contains("type") &&
             only_keys(root_, {"properties", "required", "additionalProperties"})) {
    body = cohere_object_body(root_, path, 1);
  } else {
    unsupported(path,
                "cohere_xml: the schema must be an object with only properties/required/"
                "additionalProperties (they are written as value tags)");
  }
  RuleId root = g_.add_rule("root");
  g_.set_root(root);
  g_.set_body(root, g_.seq({ws(), body, ws()}));
  return std::move(g_);
}

}  // namespace di::grammar
