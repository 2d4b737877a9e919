// Structured-output requests (issue #7): what a request asks the output to match, read from the
// request body in any of the dialects clients send, before it is compiled against a vocabulary
// (api/grammar_constraint.h). Accepted spellings:
//   OpenAI  response_format: {"type": "json_schema", "json_schema": {"schema": {...}}} |
//           {"type": "json_object"} | {"type": "text"} (= none)
//   vLLM    structured_outputs: {"json": schema-or-string | "regex": ... | "choice": [...] |
//           "grammar": EBNF | "json_object": true}; also the older guided_json / guided_regex /
//           guided_choice / guided_grammar
//   SGLang  json_schema (string), regex, ebnf
// DeepInfer extension: structured_outputs.lenient = true ignores JSON Schema keywords the grammar
// cannot enforce (strict by default: they are errors naming the keyword).
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace di::grammar {
class CompiledGrammar;
}

namespace di::api {

struct StructuredOutput {
  enum class Kind { kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar };
  Kind kind = Kind::kJsonObject;
  std::string text;                  // the schema (JSON text), the regex or the EBNF grammar
  std::vector<std::string> choices;  // kChoice
  bool lenient = false;
  // Filled by StructuredOutputCompiler::prepare (or by LLM when a request arrives without it).
  std::shared_ptr<const grammar::CompiledGrammar> compiled;
};

const char* structured_output_kind_name(StructuredOutput::Kind k);

// nullopt when the body asks for none. Errors (400): malformed fields, more than one request,
// and unsupported kinds (structural tags), each naming the field.
Expected<std::optional<StructuredOutput>> parse_structured_output(const nlohmann::json& body);

}  // namespace di::api
