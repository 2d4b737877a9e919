// SPDX-License-Identifier: Apache-2.0
// xgrammar's structural-tag format `qwen_xml_parameter` (and `json_schema` with style
// `qwen_xml`): a tool's arguments as Qwen writes them, one `<parameter=KEY>VALUE</parameter>`
// per property of the top-level object schema. A property whose schema is a plain string is
// raw text without '<' (xgrammar escapes it as &lt;); every other value is JSON following its
// schema. Whitespace may surround each value and separate parameters (Qwen3-Coder puts values
// on lines of their own). Parameters come in any order up to the any-order bound (each at
// most once, required ones present), in schema order past it. Undeclared parameters are never
// written (narrower than additionalProperties, never wider).
#include <algorithm>

#include "grammar/json_schema/converter.h"
#include "grammar/utf8.h"

namespace di::grammar {

namespace {

bool note(const std::string& k) {
  static const char* kNotes[] = {"title",   "description", "default", "examples",   "$comment",
                                 "$schema", "$id",         "$defs",   "definitions"};
  return std::find(std::begin(kNotes), std::end(kNotes), k) != std::end(kNotes);
}

// {"type": "string"} and annotations only: the value is raw text.
bool plain_string(const json& s) {
  if (!s.is_object() || s.value("type", json()) != "string") return false;
  return std::all_of(s.items().begin(), s.items().end(),
                     [](const auto& kv) { return kv.key() == "type" || note(kv.key()); });
}

}  // namespace

Grammar SchemaConverter::qwen_xml_grammar() {
  const std::string path = "#";
  if (!root_.is_object()) unsupported(path, "qwen_xml_parameter: the schema must be an object");
  for (const auto& [k, v] : root_.items()) {
    const bool object_type = k == "type" && v == "object";
    if (!object_type && !note(k) && k != "properties" && k != "required" &&
        k != "additionalProperties")
      unsupported(path, "qwen_xml_parameter: keyword '" + k +
                            "' (only an object's properties/required are written as "
                            "parameters)");
  }
  std::vector<std::string> required;
  if (root_.contains("required") && root_["required"].is_array())
    for (const json& r : root_["required"])
      if (r.is_string()) required.push_back(r.get<std::string>());
  const json props = root_.value("properties", json::object());
  if (!props.is_object()) unsupported(path, "qwen_xml_parameter: 'properties' must be an object");
  for (const std::string& r : required)
    if (!props.contains(r))
      unsupported(path, "qwen_xml_parameter: required '" + r + "' without a properties entry");
  CharClass lt;
  lt.add('<', '<');
  const ExprId raw = g_.star(utf8_class(g_, lt.negated()));
  std::vector<ExprId> items;
  std::vector<bool> req;
  for (const auto& [k, v] : props.items()) {
    if (k.find('>') != std::string::npos || k.find('<') != std::string::npos)
      unsupported(path, "qwen_xml_parameter: property name '" + k + "' with '<' or '>'");
    ExprId val = plain_string(v) ? raw : as_rule(value(v, "#/properties/" + k, 1));
    items.push_back(as_rule(g_.seq(
        {g_.literal("<parameter=" + k + ">"), ws(), val, ws(), g_.literal("</parameter>")})));
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

Expected<Grammar> json_schema_to_qwen_xml_grammar(const nlohmann::ordered_json& schema,
                                                  const JsonSchemaOptions& opts) {
  try {
    return SchemaConverter(schema, opts).qwen_xml_grammar();
  } catch (const SchemaError& e) {
    return Status(e.code, e.what());
  } catch (const std::exception& e) {
    return invalid_argument(std::string("JSON Schema: ") + e.what());
  }
}

}  // namespace di::grammar
