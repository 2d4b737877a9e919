#include "api/structured_output.h"

#include <nlohmann/json.hpp>

namespace di::api {

namespace {

using nlohmann::json;
using Kind = StructuredOutput::Kind;

Status bad(const std::string& field, const std::string& what) {
  return invalid_argument("body." + field + ": " + what);
}

// A schema given as an object or as its JSON text.
Expected<std::string> schema_text(const json& v, const std::string& field) {
  if (v.is_object() || v.is_boolean()) return v.dump();
  if (v.is_string()) {
    json parsed = json::parse(v.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return bad(field, "is not valid JSON");
    return parsed.dump();
  }
  return bad(field, "must be a JSON Schema (object) or its JSON text");
}

Expected<std::string> string_field(const json& v, const std::string& field) {
  if (!v.is_string() || v.get<std::string>().empty())
    return bad(field, "must be a non-empty string");
  return v.get<std::string>();
}

Expected<StructuredOutput> from_response_format(const json& rf) {
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    return bad("response_format", "must be an object with a string 'type'");
  const std::string type = rf["type"].get<std::string>();
  StructuredOutput so;
  if (type == "json_object") return so;
  if (type == "structural_tag") {
    so.kind = Kind::kStructuralTag;
    so.text = rf.dump();
    return so;
  }
  if (type == "json_schema") {
    auto js = rf.find("json_schema");
    if (js == rf.end() || !js->is_object())
      return bad("response_format.json_schema", "must be an object holding 'schema'");
    auto sc = js->find("schema");
    if (sc == js->end()) return bad("response_format.json_schema.schema", "is missing");
    so.kind = Kind::kJsonSchema;
    DI_ASSIGN_OR_RETURN(so.text, schema_text(*sc, "response_format.json_schema.schema"));
    return so;
  }
  return bad("response_format.type",
             "'" + type + "' is not supported (json_schema, json_object, structural_tag or text)");
}

Expected<StructuredOutput> from_vllm(const json& v, const std::string& field) {
  StructuredOutput so;
  if (!v.is_object()) return bad(field, "must be an object");
  int n = 0;
  for (const char* k : {"json", "regex", "choice", "grammar", "json_object", "structural_tag"})
    n += v.contains(k) && !v[k].is_null();
  if (n != 1)
    return bad(field,
               "must hold exactly one of json, regex, choice, grammar, json_object, "
               "structural_tag");
  if (auto it = v.find("lenient"); it != v.end()) {
    if (!it->is_boolean()) return bad(field + ".lenient", "must be a boolean");
    so.lenient = it->get<bool>();
  }
  if (auto it = v.find("json"); it != v.end() && !it->is_null()) {
    so.kind = Kind::kJsonSchema;
    DI_ASSIGN_OR_RETURN(so.text, schema_text(*it, field + ".json"));
  } else if (auto it = v.find("regex"); it != v.end() && !it->is_null()) {
    so.kind = Kind::kRegex;
    DI_ASSIGN_OR_RETURN(so.text, string_field(*it, field + ".regex"));
  } else if (auto it = v.find("grammar"); it != v.end() && !it->is_null()) {
    so.kind = Kind::kGrammar;
    DI_ASSIGN_OR_RETURN(so.text, string_field(*it, field + ".grammar"));
  } else if (auto it = v.find("structural_tag"); it != v.end() && !it->is_null()) {
    // vLLM passes the structural tag as its JSON text; an object is accepted too.
    so.kind = Kind::kStructuralTag;
    if (it->is_object()) {
      so.text = it->dump();
    } else if (it->is_string()) {
      json parsed = json::parse(it->get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded() || !parsed.is_object())
        return bad(field + ".structural_tag", "is not a JSON object (or its text)");
      so.text = it->get<std::string>();  // as written: schemas keep their property order
    } else {
      return bad(field + ".structural_tag", "must be a JSON object or its JSON text");
    }
  } else if (auto it = v.find("choice"); it != v.end() && !it->is_null()) {
    so.kind = Kind::kChoice;
    if (!it->is_array() || it->empty()) return bad(field + ".choice", "must be a non-empty array");
    for (const json& c : *it) {
      if (!c.is_string()) return bad(field + ".choice", "must hold strings");
      so.choices.push_back(c.get<std::string>());
    }
  } else {
    if (!v["json_object"].is_boolean() || !v["json_object"].get<bool>())
      return bad(field + ".json_object", "must be true");
    so.kind = Kind::kJsonObject;
  }
  return so;
}

}  // namespace

const char* structured_output_kind_name(StructuredOutput::Kind k) {
  switch (k) {
    case Kind::kJsonSchema:
      return "json_schema";
    case Kind::kJsonObject:
      return "json_object";
    case Kind::kRegex:
      return "regex";
    case Kind::kChoice:
      return "choice";
    case Kind::kGrammar:
      return "grammar";
    case Kind::kStructuralTag:
      return "structural_tag";
    case Kind::kToolCalls:
      return "tool_choice";
  }
  return "?";
}

Expected<std::optional<StructuredOutput>> parse_structured_output(const json& body) {
  std::vector<std::pair<std::string, Expected<StructuredOutput>>> found;
  auto present = [&](const char* k) { return body.contains(k) && !body[k].is_null(); };
  if (present("response_format")) {
    const json& rf = body["response_format"];
    // (Not `value("type", "")`: it throws when "type" is present but not a string.)
    if (!(rf.is_object() && rf.contains("type") && rf["type"] == "text"))
      found.emplace_back("response_format", from_response_format(rf));
  }
  if (present("structured_outputs"))
    found.emplace_back("structured_outputs",
                       from_vllm(body["structured_outputs"], "structured_outputs"));
  if (present("guided_decoding"))  // vLLM's name before structured_outputs
    found.emplace_back("guided_decoding", from_vllm(body["guided_decoding"], "guided_decoding"));
  // Older vLLM and SGLang top-level fields, as the equivalent structured_outputs entry.
  const std::pair<const char*, const char*> aliases[] = {
      {"guided_json", "json"},     {"guided_regex", "regex"},
      {"guided_choice", "choice"}, {"guided_grammar", "grammar"},
      {"json_schema", "json"},     {"regex", "regex"},
      {"ebnf", "grammar"}};
  for (const auto& [name, as] : aliases) {
    if (!present(name)) continue;
    json v = json::object();
    v[as] = body[name];
    found.emplace_back(name, from_vllm(v, name));
  }
  if (found.empty()) return std::optional<StructuredOutput>();
  if (found.size() > 1)
    return invalid_argument("body: at most one structured-output field may be given (got " +
                            found[0].first + " and " + found[1].first + ")");
  if (!found[0].second) return found[0].second.status();
  return std::optional<StructuredOutput>(std::move(found[0].second).value());
}

}  // namespace di::api
