#include "api/structured_output.h"

#include "grammar/ebnf/ebnf_parser.h"
#include "grammar/json_schema/schema_converter.h"
#include "grammar/regex/regex_parser.h"

namespace di::api {

namespace {

using nlohmann::json;

Status field_error(const std::string& field, const std::string& what) {
  return invalid_argument("body." + field + ": " + what);
}

Expected<std::shared_ptr<const StructuredOutput>> build(StructuredKind kind,
                                                        std::string text,
                                                        const std::string& field) {
  auto out = std::make_shared<StructuredOutput>();
  out->kind = kind;
  out->text = std::move(text);
  Expected<grammar::Grammar> g = invalid_argument("unset");
  switch (kind) {
    case StructuredKind::kJsonObject:
      g = grammar::any_json_grammar();
      break;
    case StructuredKind::kJsonSchema:
      g = grammar::json_schema_to_grammar(std::string_view(out->text));
      break;
    case StructuredKind::kRegex:
      g = grammar::regex_to_grammar(out->text);
      break;
    case StructuredKind::kEbnf:
      g = grammar::parse_ebnf(out->text);
      break;
    case StructuredKind::kChoice: {
      // A choice list is the regex alternation of its literal strings.
      const json choices = json::parse(out->text);
      std::string re;
      for (const json& c : choices) {
        if (!re.empty()) re += '|';
        for (char ch : c.get<std::string>()) {
          if (std::string_view("\\^$.|?*+()[]{}").find(ch) != std::string_view::npos) re += '\\';
          re += ch;
        }
      }
      g = grammar::regex_to_grammar(re);
      break;
    }
  }
  if (!g) return field_error(field, "unsupported: " + g.status().message());
  out->ir = std::move(g).value();
  return std::shared_ptr<const StructuredOutput>(std::move(out));
}

Expected<std::shared_ptr<const StructuredOutput>> from_response_format(const json& rf) {
  if (!rf.is_object()) return field_error("response_format", "must be an object");
  for (const auto& [key, value] : rf.items()) {
    if (key != "type" && key != "json_schema") {
      return field_error("response_format", "unknown field '" + key + "'");
    }
  }
  auto type = rf.find("type");
  if (type == rf.end() || !type->is_string()) {
    return field_error("response_format.type", "must be 'text', 'json_object' or 'json_schema'");
  }
  const std::string t = type->get<std::string>();
  if (t == "text") return std::shared_ptr<const StructuredOutput>();
  if (t == "json_object") return build(StructuredKind::kJsonObject, "", "response_format");
  if (t != "json_schema") {
    return field_error("response_format.type", "must be 'text', 'json_object' or 'json_schema'");
  }
  auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object()) {
    return field_error("response_format.json_schema", "must be an object with a 'schema'");
  }
  auto schema = js->find("schema");
  if (schema == js->end() || !(schema->is_object() || schema->is_boolean())) {
    return field_error("response_format.json_schema.schema", "must be a JSON Schema object");
  }
  return build(StructuredKind::kJsonSchema, schema->dump(), "response_format.json_schema.schema");
}

// vLLM's structured_outputs object and its older guided_* spelling share one reader.
Expected<std::shared_ptr<const StructuredOutput>> from_fields(const json& obj,
                                                              const std::string& prefix,
                                                              const char* json_key,
                                                              const char* regex_key,
                                                              const char* grammar_key,
                                                              const char* choice_key) {
  int found = 0;
  std::shared_ptr<const StructuredOutput> out;
  auto take = [&](const char* key, StructuredKind kind) -> Status {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return Status();
    const std::string field = prefix + key;
    if (++found > 1) return field_error(field, "only one structured output kind per request");
    std::string text;
    if (kind == StructuredKind::kJsonSchema) {
      if (it->is_string()) {
        text = it->get<std::string>();
      } else if (it->is_object() || it->is_boolean()) {
        text = it->dump();
      } else {
        return field_error(field, "must be a JSON Schema (object or string)");
      }
    } else if (kind == StructuredKind::kChoice) {
      if (!it->is_array() || it->empty()) return field_error(field, "must be a non-empty array");
      for (const json& c : *it) {
        if (!c.is_string()) return field_error(field, "must hold strings");
      }
      text = it->dump();
    } else {
      if (!it->is_string()) return field_error(field, "must be a string");
      text = it->get<std::string>();
    }
    DI_ASSIGN_OR_RETURN(out, build(kind, std::move(text), field));
    return Status();
  };
  DI_RETURN_IF_ERROR(take(json_key, StructuredKind::kJsonSchema));
  DI_RETURN_IF_ERROR(take(regex_key, StructuredKind::kRegex));
  DI_RETURN_IF_ERROR(take(grammar_key, StructuredKind::kEbnf));
  DI_RETURN_IF_ERROR(take(choice_key, StructuredKind::kChoice));
  return out;
}

}  // namespace

Expected<std::shared_ptr<const StructuredOutput>> parse_structured_output(const json& body) {
  std::shared_ptr<const StructuredOutput> out;
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    DI_ASSIGN_OR_RETURN(out, from_response_format(*it));
  }
  std::shared_ptr<const StructuredOutput> other;
  if (auto it = body.find("structured_outputs"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return field_error("structured_outputs", "must be an object");
    for (const auto& [key, value] : it->items()) {
      if (key != "json" && key != "regex" && key != "grammar" && key != "choice" &&
          key != "json_object") {
        return field_error("structured_outputs", "unknown or unsupported field '" + key + "'");
      }
    }
    if (auto jo = it->find("json_object"); jo != it->end() && *jo == true) {
      DI_ASSIGN_OR_RETURN(other, build(StructuredKind::kJsonObject, "", "structured_outputs"));
    } else {
      DI_ASSIGN_OR_RETURN(
          other, from_fields(*it, "structured_outputs.", "json", "regex", "grammar", "choice"));
    }
  } else {
    DI_ASSIGN_OR_RETURN(other, from_fields(body, "", "guided_json", "guided_regex",
                                           "guided_grammar", "guided_choice"));
  }
  if (out && other) {
    return field_error("structured_outputs", "conflicts with response_format; send one of them");
  }
  return out ? out : other;
}

}  // namespace di::api
