// response_format / structured_outputs: what a request asks the output to match, checked by the
// grammar module's front ends (src/grammar) so an unsupported schema is a 400 that says why.
//
// This is the hook for enforcement: GenerationParams::structured_output carries the validated
// spec and its grammar IR to the engine. Sampling does NOT apply it yet (the token-mask wiring is
// issue #7's engine-side work); until then the server accepts and validates, and says so in
// docs/server.md.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "grammar/ir.h"
#include "util/status.h"

namespace di::api {

enum class StructuredKind { kJsonObject, kJsonSchema, kRegex, kEbnf, kChoice };

struct StructuredOutput {
  StructuredKind kind = StructuredKind::kJsonObject;
  std::string text;     // the schema (JSON text), regex, EBNF, or the choices as a JSON array
  grammar::Grammar ir;  // the front end's result (validated; compile against a vocabulary later)
};

// Reads body.response_format ({type: text|json_object|json_schema}) and body.structured_outputs
// (vLLM: {json|regex|grammar|choice}) and the older guided_json/guided_regex/guided_grammar/
// guided_choice fields. Null when none asks for structure; an error naming the field when the
// request is malformed or the grammar front end rejects it.
Expected<std::shared_ptr<const StructuredOutput>> parse_structured_output(
    const nlohmann::json& body);

}  // namespace di::api
