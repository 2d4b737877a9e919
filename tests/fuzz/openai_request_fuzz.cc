// libFuzzer target for the server's request parsing (issue #5): bytes -> JSON -> parse_openai_body
// for both endpoints (messages, sampling fields, tools, response_format / structured_outputs
// through the grammar front ends) -> the response body rendered from a fake output. Nothing may
// crash or throw; a parsed request must satisfy the ranges the parser promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "api/openai_request.h"
#include "api/openai_response.h"
#include "api/tool_call_grammar.h"
#include "grammar/structural_tag/structural_tag.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace di::api;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json body = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return 0;
  for (OpenAIEndpoint ep : {OpenAIEndpoint::kCompletions, OpenAIEndpoint::kChatCompletions}) {
    auto r = parse_openai_body(body, ep, GenerationParams{}, "m");
    if (!r) {
      if (r.status().message().empty()) std::abort();  // every refusal must say why
      continue;
    }
    if (r->params.max_tokens < 1 || r->params.n < 1 || r->params.n > 64) std::abort();
    // Structural tags and tool-call grammars are built when a request is compiled: run those
    // front ends too (a refusal must say why).
    if (const auto& so = r->params.structured_output) {
      auto says_why = [](const auto& g) { return g.has_value() || !g.status().message().empty(); };
      if (so->kind == StructuredOutput::Kind::kStructuralTag &&
          !says_why(di::grammar::structural_tag_to_grammar(so->text)))
        std::abort();
      if (so->kind == StructuredOutput::Kind::kToolCalls &&
          !says_why(tool_call_grammar(nlohmann::ordered_json::parse(so->text))))
        std::abort();
    }
    GenerationOutput out;
    out.prompt_token_ids = {1, 2, 3};
    for (int c = 0; c < r->params.n; ++c) {
      Choice ch;
      ch.index = c;
      ch.text = std::string(text.substr(0, 64));
      ch.token_ids = {5};
      out.choices.push_back(ch);
    }
    (void)dump_json(response_body(*r, out, nullptr, "id", 0));
  }
  return 0;
}
