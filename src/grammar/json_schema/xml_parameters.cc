// SPDX-License-Identifier: Apache-2.0
// xgrammar's structural-tag `json_schema` styles for tool-call arguments written as XML
// parameters, one per property of the top-level object schema:
//   qwen_xml      <parameter=KEY>VALUE</parameter>            (also `qwen_xml_parameter`)
//   minimax_xml   <parameter name="KEY">VALUE</parameter>
//   glm_xml       <arg_key>KEY</arg_key><arg_value>VALUE</arg_value>
//   deepseek_xml  <｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>
// A property whose schema is a plain string is raw text up to the first closing tag (the models'
// parsers cut the value there; xgrammar's TagDispatch with that exclude); a string enum/const is
// its raw values, an anchored pattern / a format / a length range is raw text where it cannot
// hold '<'; every other value is JSON, with whitespace around it (the parsers trim it).
// deepseek_xml agrees with our DSML tool calls (api/tool_call_grammar.cc) and ResponseParser
// (recipe/parse/dsml_block.cc), which read string="true" as a raw string and string="false" as
// JSON: the attribute is tied to the value's form (xgrammar lets either go with either), a raw
// value keeps its whitespace (the parser does not trim it), and both spellings of the tag are
// accepted (`｜DSML｜parameter`, xgrammar's and V3.2/V4's; `｜DSML｜ parameter`, V4.1's).
// Parameters come in any order up to the any-order bound (each at most once, required ones
// present), in schema order past it; whitespace separates them. Undeclared parameters are never
// written (narrower than additionalProperties, never wider).
#include <algorithm>

#include "grammar/json_schema/converter.h"
#include "grammar/json_schema/formats.h"
#include "grammar/nfa.h"
#include "grammar/regex/regex_parser.h"
#include "grammar/utf8.h"

namespace di::grammar {

namespace {

bool note(const std::string& k) {
  static const char* kNotes[] = {"title",       "description", "default",  "examples",
                                 "$comment",    "$schema",     "$id",      "$defs",
                                 "definitions", "deprecated",  "readOnly", "writeOnly"};
  return std::find(std::begin(kNotes), std::end(kNotes), k) != std::end(kNotes);
}

// A constrained string as raw text, where no text it allows can hold '<' (so never a closing
// tag, which starts with one): one pattern (anchored: an unanchored one allows any text around
// it) or format, as a regex over raw characters whose NFA has no '<' edge; or a length range,
// as that many characters other than '<' (narrower than the JSON form, never wider). nullopt
// otherwise: the value stays JSON.
std::optional<ExprId> raw_constrained_string(Grammar& g, const json& s) {
  if (!s.is_object() || s.value("type", json()) != "string") return std::nullopt;
  std::string re;
  bool search = false;
  int64_t lo = -1, hi = -1;
  for (const auto& [k, v] : s.items()) {
    if (note(k) || k == "type") continue;
    if (k == "pattern" && v.is_string() && re.empty() && lo < 0 && hi < 0) {
      re = v.get<std::string>();
      search = true;
    } else if (k == "format" && v.is_string() && re.empty() && lo < 0 && hi < 0) {
      re = format_regex(v.get<std::string>());
      if (re.empty()) return std::nullopt;
    } else if ((k == "minLength" || k == "maxLength") && re.empty() && v.is_number_integer() &&
               v.get<int64_t>() >= 0 && v.get<int64_t>() <= 10000) {
      (k == "minLength" ? lo : hi) = v.get<int64_t>();
    } else {
      return std::nullopt;
    }
  }
  if (lo >= 0 || hi >= 0) {
    if (hi >= 0 && hi < std::max<int64_t>(lo, 0)) return std::nullopt;
    CharClass lt;
    lt.add('<', '<');
    return g.repeat(utf8_class(g, lt.negated()), static_cast<int32_t>(std::max<int64_t>(lo, 0)),
                    static_cast<int32_t>(hi));
  }
  if (re.empty()) return std::nullopt;
  RegexOptions o;
  o.search = search;
  auto sub = regex_to_grammar(re, o);
  if (!sub) return std::nullopt;
  auto nfa = NfaGrammar::build(*sub);
  if (!nfa) return std::nullopt;
  for (const ByteEdge& e : (*nfa)->byte_edges())
    if (e.set.test('<')) return std::nullopt;
  return g.ref(g.import(*sub, "xml_re" + std::to_string(g.rules().size()) + "_"));
}

struct Style {
  const char* name;
  std::vector<std::string> opens;   // per spelling: before the key
  std::vector<std::string> closes;  // per spelling: the value's closing tag
  const char* after_key;            // between the key and the value ("" for deepseek)
  const char* bad_key_chars;        // a key with one of these cannot be written
};

Style style_of(XmlStyle s) {
  switch (s) {
    case XmlStyle::kMiniMax:
      return {"minimax_xml", {"<parameter name=\""}, {"</parameter>"}, "\">", "\"<>\n"};
    case XmlStyle::kGlm:
      return {"glm_xml", {"<arg_key>"}, {"</arg_value>"}, "</arg_key>", "<>"};
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

}  // namespace

bool plain_string_schema(const nlohmann::ordered_json& s) {
  if (!s.is_object() || s.value("type", json()) != "string") return false;
  return std::all_of(s.items().begin(), s.items().end(),
                     [](const auto& kv) { return kv.key() == "type" || note(kv.key()); });
}

std::optional<std::vector<std::string>> string_enum_values(const nlohmann::ordered_json& s) {
  if (!s.is_object() || (!s.contains("enum") && !s.contains("const"))) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& [k, v] : s.items()) {
    if (note(k)) continue;
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
  const Style st = style_of(xml_style);
  const std::string path = "#";
  const std::string me = st.name;
  if (!root_.is_object()) unsupported(path, me + ": the schema must be an object");
  for (const auto& [k, v] : root_.items()) {
    const bool object_type = k == "type" && v == "object";
    if (!object_type && !note(k) && k != "properties" && k != "required" &&
        k != "additionalProperties")
      unsupported(path, me + ": keyword '" + k +
                            "' (only an object's properties/required are written as "
                            "parameters)");
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
  std::vector<ExprId> items;
  std::vector<bool> req;
  for (const auto& [k, v] : props.items()) {
    if (k.empty() || k.find_first_of(st.bad_key_chars) != std::string::npos)
      unsupported(path, me + ": property name '" + k + "' cannot be written as a parameter name");
    // The raw form (a string as written) and the JSON form; -1: none.
    ExprId raw_value = -1, json_value = -1;
    if (plain_string_schema(v)) {
      raw_value = raw;
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
    if (deepseek || raw_value < 0) json_value = as_rule(value(v, "#/properties/" + k, 1));
    std::vector<ExprId> spellings;
    for (size_t i = 0; i < st.opens.size(); ++i) {
      const ExprId close = g_.literal(st.closes[i]);
      // A raw enum value: exactly as written for DSML (string="true" is not trimmed), with
      // whitespace around it elsewhere (Qwen writes values on lines of their own).
      auto raw_form = [&] {
        if (raw_value == raw) return raw;
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
      std::vector<ExprId> parts{g_.literal(st.opens[i] + k + st.after_key)};
      if (xml_style == XmlStyle::kGlm) parts.push_back(g_.seq({ws(), g_.literal("<arg_value>")}));
      parts.push_back(forms.size() == 1 ? forms[0] : g_.alt(std::move(forms)));
      spellings.push_back(g_.seq(std::move(parts)));
    }
    items.push_back(as_rule(spellings.size() == 1 ? spellings[0] : g_.alt(std::move(spellings))));
    req.push_back(std::find(required.begin(), required.end(), k) != required.end());
  }
  ExprId body;
  if (auto e = any_order_members(items, req, std::nullopt, 0, items.size(), ws())) {
    body = *e;
  } else {
    std::vector<ExprId> seq;
    for (size_t i = 0; i < items.size(); ++i)
      seq.push_back(req[i] ? g_.seq({ws(), items[i]}) : g_.opt(g_.seq({ws(), items[i]})));
    body = g_.seq(std::move(seq));
  }
  RuleId root = g_.add_rule("root");
  g_.set_root(root);
  g_.set_body(root, g_.seq({ws(), body, ws()}));
  return std::move(g_);
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
