// SPDX-License-Identifier: Apache-2.0
// xgrammar's structural-tag `json_schema` styles for tool-call arguments written as XML
// parameters, one per property of the top-level object schema:
//   qwen_xml      <parameter=KEY>VALUE</parameter>            (also `qwen_xml_parameter`)
//   minimax_xml   <parameter name="KEY">VALUE</parameter>
//   glm_xml       <arg_key>KEY</arg_key><arg_value>VALUE</arg_value>
//   deepseek_xml  <｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>
//   kimi_k3_xml   <|open|>argument key="KEY" type="TYPE"<|sep|>VALUE<|close|>argument<|sep|>
// (cohere_xml nests objects and arrays: xml_cohere.cc.) kimi_k3_xml's TYPE is the schema's one
// JSON type ("number" for integers too, as Kimi-K3 renders them), any type name where the schema
// allows several; its keys escape & and " as the renderer does.
// A property whose schema is a plain string is raw text up to the first closing tag (the models'
// parsers cut the value there; xgrammar's TagDispatch with that exclude); a string enum/const is
// its raw values, a maxLength alone is any text of that length up to the close, an anchored
// pattern / a format / a length range with a minimum is raw text where it cannot hold '<'; every
// other value is JSON, with whitespace around it (the parsers trim it). deepseek_xml agrees with
// our DSML tool calls (api/tool_call_grammar.cc) and ResponseParser (recipe/parse/dsml_block.cc),
// which read string="true" as a raw string and string="false" as JSON: the attribute is tied to the
// value's form (xgrammar lets either go with either), a raw value keeps its whitespace (the parser
// does not trim it), and both spellings of the tag are accepted (`｜DSML｜parameter`, xgrammar's
// and V3.2/V4's; `｜DSML｜ parameter`, V4.1's). Parameters come in any order up to the any-order
// bound (each at most once, required ones present), in schema order past it; whitespace separates
// them. Where additionalProperties allows them (absent, true, a schema), undeclared parameters may
// come between any two: an identifier name ([A-Za-z_][A-Za-z0-9_]*, xgrammar's) other than a
// declared one, and a value per that schema (a free one, true or {}, is any raw text, as in
// xgrammar).
#include <algorithm>

#include "grammar/json_schema/converter.h"
#include "grammar/json_schema/xml_values.h"

namespace di::grammar {

namespace {

struct Style {
  const char* name;
  std::vector<std::string> opens;   // per spelling: before the key
  std::vector<std::string> closes;  // per spelling: the value's closing tag
  const char* after_key;            // between the key and the value (deepseek, kimi: by value)
  const char* bad_key_chars;        // a key with one of these cannot be written
};

const char* kKimiOpen = "<|open|>argument key=\"";
const char* kKimiClose = "<|close|>argument<|sep|>";

Style style_of(XmlStyle s) {
  switch (s) {
    case XmlStyle::kMiniMax:
      return {"minimax_xml", {"<parameter name=\""}, {"</parameter>"}, "\">", "\"<>\n"};
    case XmlStyle::kGlm:
      return {"glm_xml", {"<arg_key>"}, {"</arg_value>"}, "</arg_key>", "<>"};
    case XmlStyle::kKimiK3:
      // The key is an attribute value, escaped as Kimi-K3's renderer does (& and ").
      return {"kimi_k3_xml", {kKimiOpen}, {kKimiClose}, "", ""};
    case XmlStyle::kDeepSeek:
      return {"deepseek_xml",
              {"<\xEF\xBD\x9C"
               "DSML\xEF\xBD\x9C"
               "parameter name=\"",
               "<\xEF\xBD\x9C"
               "DSML\xEF\xBD\x9C"
               " parameter name=\""},
              {"</\xEF\xBD\x9C"
               "DSML\xEF\xBD\x9C"
               "parameter>",
               "</\xEF\xBD\x9C"
               "DSML\xEF\xBD\x9C"
               " parameter>"},
              "",
              "\"<>\n"};
    case XmlStyle::kQwen:
    default:
      return {"qwen_xml_parameter", {"<parameter="}, {"</parameter>"}, ">", "<>"};
  }
}

std::string kimi_escape(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '&' ? "&amp;" : c == '"' ? "&quot;" : std::string(1, c);
  return out;
}

// The JSON type name of a value as Kimi-K3 writes it (every number is "number").
std::string kimi_type_of_value(const json& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number()) return "number";
  if (v.is_null()) return "null";
  return v.is_object() ? "object" : "array";
}

// kimi_k3_xml's `type` attribute: the one type every value of the schema has (its parser decodes
// the value by it); nullopt where the schema allows several (then any type name may be written,
// as xgrammar does for combinators, $ref and free values).
std::optional<std::string> kimi_type(const json& s) {
  if (!s.is_object()) return std::nullopt;
  if (s.contains("const")) return kimi_type_of_value(s["const"]);
  if (s.contains("enum") && s["enum"].is_array() && !s["enum"].empty()) {
    const std::string first = kimi_type_of_value(s["enum"][0]);
    for (const json& v : s["enum"])
      if (kimi_type_of_value(v) != first) return std::nullopt;
    return first;
  }
  json t = s.value("type", json());
  if (t.is_array() && t.size() == 1) t = t[0];
  if (!t.is_string()) return std::nullopt;
  const std::string name = t.get<std::string>();
  return name == "integer" ? "number" : name;
}

// Undeclared parameter names for the root-only styles: identifiers ([A-Za-z_][A-Za-z0-9_]*, as
// xgrammar writes them; none needs escaping in any style) other than the declared names.
ExprId identifier_not_in(Grammar& g, const std::vector<std::string>& declared) {
  auto ident_class = [](bool first) {
    CharClass c;
    c.add('A', 'Z');
    c.add('a', 'z');
    c.add('_', '_');
    if (!first) c.add('0', '9');
    return c;
  };
  std::vector<std::vector<uint32_t>> names;
  for (const std::string& k : declared)
    if (auto cps = code_points(k)) names.push_back(*cps);
  NameSpelling sp;
  sp.spell = [](uint32_t cp) { return std::string(1, static_cast<char>(cp)); };
  sp.other = [&](const CharClass& excluded, bool first) {
    CharClass c = ident_class(first);
    CharClass out;
    for (const auto& [lo, hi] : c.ranges())
      for (uint32_t x = lo; x <= hi; ++x)
        if (!excluded.contains(x)) out.add(x, x);
    return utf8_class(g, out);
  };
  sp.tail = g.star(utf8_class(g, ident_class(false)));
  return name_not_in(g, std::move(names), sp);
}

}  // namespace

bool plain_string_schema(const nlohmann::ordered_json& s) {
  if (!s.is_object() || s.value("type", json()) != "string") return false;
  return std::all_of(s.items().begin(), s.items().end(),
                     [](const auto& kv) { return kv.key() == "type" || schema_note(kv.key()); });
}

std::optional<std::vector<std::string>> string_enum_values(const nlohmann::ordered_json& s) {
  if (!s.is_object() || (!s.contains("enum") && !s.contains("const"))) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& [k, v] : s.items()) {
    if (schema_note(k)) continue;
    if (k == "type" && v == "string") continue;
    if (k == "const" && v.is_string() && !s.contains("enum")) {
      out.push_back(v.get<std::string>());
    } else if (k == "enum" && v.is_array() && !v.empty() && !s.contains("const")) {
      for (const json& e : v) {
        if (!e.is_string()) return std::nullopt;
        out.push_back(e.get<std::string>());
      }
    } else {
      return std::nullopt;
    }
  }
  return out;
}

Grammar SchemaConverter::xml_parameters_grammar(XmlStyle xml_style) {
  if (xml_style == XmlStyle::kCohere) return cohere_parameters_grammar();
  const Style st = style_of(xml_style);
  const std::string path = "#";
  const std::string me = st.name;
  if (!root_.is_object()) unsupported(path, me + ": the schema must be an object");
  for (const auto& [k, v] : root_.items()) {
    const bool object_type = k == "type" && v == "object";
    if (!object_type && !schema_note(k) && k != "properties" && k != "required" &&
        k != "additionalProperties")
      unsupported(path, me + ": keyword '" + k +
                            "' (only an object's properties/required/additionalProperties are "
                            "written as parameters)");
  }
  std::vector<std::string> required;
  if (root_.contains("required") && root_["required"].is_array())
    for (const json& r : root_["required"])
      if (r.is_string()) required.push_back(r.get<std::string>());
  const json props = root_.value("properties", json::object());
  if (!props.is_object()) unsupported(path, me + ": 'properties' must be an object");
  for (const std::string& r : required)
    if (!props.contains(r))
      unsupported(path, me + ": required '" + r + "' without a properties entry");
  const bool deepseek = xml_style == XmlStyle::kDeepSeek;
  const bool kimi = xml_style == XmlStyle::kKimiK3;
  auto has_close = [&](const std::string& s) {
    return std::any_of(st.closes.begin(), st.closes.end(),
                       [&](const std::string& c) { return s.find(c) != std::string::npos; });
  };
  // Raw text, closed by the first closing tag (of either spelling: the parser stops at both).
  const ExprId raw = shared_rule("xml_raw", [&] {
    TagDispatchSpec spec;
    spec.loop = false;
    spec.stops = st.closes;
    spec.stop_eos = false;
    return g_.tag_dispatch(std::move(spec));
  });
  // One parameter: `key` (the key's text after the open tag) with a value of `v`.
  auto parameter = [&](ExprId key, const json& v, const std::string& vpath) {
    // The raw form (a string as written) and the JSON form; -1: none. A free value (true, {}) is
    // any raw text, as xgrammar writes it (the text of every JSON value is among them).
    ExprId raw_value = -1, json_value = -1;
    bool raw_closes = false;  // raw_value reads its closing tag itself
    const bool free = v == json(true) || v == json::object();
    if (plain_string_schema(v) || free) {
      raw_value = raw;
      raw_closes = true;
    } else if (auto b = bounded_raw_text(g_, v, st.closes)) {
      raw_value = as_rule(*b);
      raw_closes = true;
    } else if (auto vals = string_enum_values(v)) {
      std::vector<ExprId> alts;
      for (const std::string& s : *vals)
        if (!has_close(s)) alts.push_back(g_.literal(s));
      if (!alts.empty()) raw_value = as_rule(g_.alt(std::move(alts)));
    } else if (auto r = raw_constrained_string(g_, v)) {
      raw_value = as_rule(*r);
    }
    // deepseek_xml may always write JSON (string="false"); the other styles' parsers read a
    // string-typed value raw, so a value with a raw form has only that one.
    if (deepseek || raw_value < 0) json_value = as_rule(value(v, vpath, 1));
    std::vector<ExprId> spellings;
    for (size_t i = 0; i < st.opens.size(); ++i) {
      const ExprId close = g_.literal(st.closes[i]);
      // A raw enum value: exactly as written for DSML (string="true" is not trimmed), with
      // whitespace around it elsewhere (Qwen writes values on lines of their own).
      auto raw_form = [&] {
        if (raw_closes) return raw_value;
        return deepseek ? g_.seq({raw_value, close}) : g_.seq({ws(), raw_value, ws(), close});
      };
      std::vector<ExprId> forms;
      if (deepseek) {
        if (raw_value >= 0)
          forms.push_back(g_.seq({g_.literal("\" string=\"true\">"), raw_form()}));
        forms.push_back(
            g_.seq({g_.literal("\" string=\"false\">"), ws(), json_value, ws(), close}));
      } else {
        forms.push_back(raw_value >= 0 ? raw_form() : g_.seq({ws(), json_value, ws(), close}));
      }
      std::vector<ExprId> parts{g_.literal(st.opens[i]), key};
      if (kimi) {
        const std::optional<std::string> type = kimi_type(v);
        std::vector<ExprId> names;
        for (const char* t : {"string", "number", "integer", "boolean", "object", "array", "null"})
          if (!type || *type == t) names.push_back(g_.literal(t));
        parts.push_back(
            g_.seq({g_.literal("\" type=\""), g_.alt(std::move(names)), g_.literal("\"<|sep|>")}));
      } else {
        parts.push_back(g_.literal(st.after_key));
      }
      if (xml_style == XmlStyle::kGlm) parts.push_back(g_.seq({ws(), g_.literal("<arg_value>")}));
      parts.push_back(forms.size() == 1 ? forms[0] : g_.alt(std::move(forms)));
      spellings.push_back(g_.seq(std::move(parts)));
    }
    return as_rule(spellings.size() == 1 ? spellings[0] : g_.alt(std::move(spellings)));
  };
  std::vector<ExprId> items;
  std::vector<bool> req;
  std::vector<std::string> declared;
  for (const auto& [k, v] : props.items()) {
    if (k.empty() || k.find_first_of(st.bad_key_chars) != std::string::npos)
      unsupported(path, me + ": property name '" + k + "' cannot be written as a parameter name");
    // The undeclared-name trie recurses once per character of a declared name.
    if (k.size() > kMaxNameBytes)
      unsupported(path,
                  me + ": a property name longer than " + std::to_string(kMaxNameBytes) + " bytes");
    declared.push_back(k);
    items.push_back(parameter(g_.literal(kimi ? kimi_escape(k) : k), v, "#/properties/" + k));
    req.push_back(std::find(required.begin(), required.end(), k) != required.end());
  }
  // Undeclared parameters where additionalProperties allows them (absent: any value).
  std::optional<ExprId> extra;
  const json ap = root_.value("additionalProperties", json(true));
  if (ap != json(false))
    extra = parameter(as_rule(identifier_not_in(g_, declared)), ap, "#/additionalProperties");
  RuleId root = g_.add_rule("root");
  g_.set_root(root);
  g_.set_body(root, g_.seq({ws(), xml_members(items, req, extra), ws()}));
  return std::move(g_);
}

ExprId SchemaConverter::xml_members(const std::vector<ExprId>& items,
                                    const std::vector<bool>& req,
                                    std::optional<ExprId> extra) {
  if (auto e = any_order_members(items, req, extra, 0, items.size(), ws())) return *e;
  // Past the any-order bound: schema order, undeclared parameters anywhere between.
  const ExprId extras = extra ? g_.star(g_.seq({ws(), *extra})) : g_.empty();
  std::vector<ExprId> seq;
  for (size_t i = 0; i < items.size(); ++i) {
    const ExprId item = g_.seq({ws(), items[i]});
    seq.push_back(req[i] ? item : g_.opt(item));
    seq.push_back(extras);
  }
  if (extra && !items.empty()) {
    // The first parameter may be an undeclared one: no whitespace is owed before it.
    return g_.seq({g_.opt(g_.seq({*extra, extras})), g_.seq(std::move(seq))});
  }
  return extra ? g_.opt(g_.seq({*extra, extras})) : g_.seq(std::move(seq));
}

Expected<Grammar> json_schema_to_xml_parameters_grammar(const nlohmann::ordered_json& schema,
                                                        XmlStyle style,
                                                        const JsonSchemaOptions& opts) {
  try {
    return SchemaConverter(schema, opts).xml_parameters_grammar(style);
  } catch (const SchemaError& e) {
    return Status(e.code, e.what());
  } catch (const std::exception& e) {
    return invalid_argument(std::string("JSON Schema: ") + e.what());
  }
}

}  // namespace di::grammar
