// Structured-output requests (issue #7): what a request asks the output to match, read from the
// request body in any of the dialects clients send, before it is compiled against a vocabulary
// (api/grammar_constraint.h). Accepted spellings:
//   OpenAI  response_format: {"type": "json_schema", "json_schema": {"schema": {...}}} |
//           {"type": "json_object"} | {"type": "text"} (= none) | {"type": "structural_tag",
//           ...} (xgrammar's structural tag, grammar/structural_tag/structural_tag.h)
//   vLLM    structured_outputs: {"json": schema-or-string | "regex": ... | "choice": [...] |
//           "grammar": EBNF | "json_object": true | "structural_tag": JSON text or object};
//           also the older guided_json / guided_regex / guided_choice / guided_grammar
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
  // kToolCalls: tool_choice "required" or named (api/tool_choice.h), never read from a body.
  enum class Kind {
    kJsonSchema,
    kJsonObject,
    kRegex,
    kChoice,
    kGrammar,
    kStructuralTag,
    kToolCalls
  };
  Kind kind = Kind::kJsonObject;
  // The schema (JSON text), the regex, the EBNF grammar, the structural tag (JSON text) or the
  // tool-call spec (api/tool_call_grammar.h).
  std::string text;
  std::vector<std::string> choices;  // kChoice
  bool lenient = false;
  // Filled by StructuredOutputCompiler::prepare (or by LLM when a request arrives without it).
  std::shared_ptr<const grammar::CompiledGrammar> compiled;
};

const char* structured_output_kind_name(StructuredOutput::Kind k);

// nullopt when the body asks for none. Errors (400): malformed fields, more than one request,
// and unsupported kinds, each naming the field. (A structural tag's content is checked when it
// is compiled, also a 400 naming the field.)
Expected<std::optional<StructuredOutput>> parse_structured_output(const nlohmann::json& body);

}  // namespace di::api
