// OpenAI request bodies (/v1/completions and /v1/chat/completions) -> Prompt + GenerationParams.
// One parser shared by `deepinfer batch` (api/openai_batch) and `deepinfer serve` (src/server), so
// both accept exactly the same fields with the same errors. Pure functions; every malformed body
// becomes a kInvalidArgument naming the field ("body.top_p: must be a number"), never an abort.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "api/llm.h"
#include "api/structured_output.h"
#include "util/status.h"

namespace di::api {

enum class OpenAIEndpoint { kCompletions, kChatCompletions };

struct OpenAIRequest {
  OpenAIEndpoint endpoint = OpenAIEndpoint::kCompletions;
  Prompt prompt;
  GenerationParams params;
  std::string model;  // echoed in responses
  bool stream = false;
  bool include_usage = false;   // stream_options.include_usage
  bool echo_token_ids = false;  // return_token_ids (vLLM): token_ids on every choice
  std::string user;             // accepted for logging; not used for routing
  // False for tool_choice "none": DSML tool markup in the reply stays content (api/tool_choice.h).
  bool parse_tool_calls = true;
  // parallel_tool_calls false: at most this many tool calls reach the reply (-1: no limit). The
  // tool-call grammar already allows one; when another structured output decides the reply
  // (tool_choice auto next to response_format, ...) later calls are dropped, as vLLM does.
  int max_tool_calls = -1;
  // params.structured_output: response_format / structured_outputs (see structured_output.h).
};

// `defaults` fills what the body leaves out (the batch command's flags, the server's defaults).
// `model` is the name echoed when the body has none.
Expected<OpenAIRequest> parse_openai_body(const nlohmann::json& body,
                                          OpenAIEndpoint endpoint,
                                          const GenerationParams& defaults,
                                          const std::string& model);

}  // namespace di::api
