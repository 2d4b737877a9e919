// An OpenAI chat completions request (JSON) -> ChatRequest. Reads `messages`, `tools`,
// `reasoning_effort`, `chat_template_kwargs.{thinking, enable_thinking, reasoning_effort,
// drop_thinking}` and `add_generation_prompt`; other fields are ignored. reasoning_effort "none"
// turns thinking off (as vLLM does); role "developer" is read as "system". Errors: kInvalidArgument
// naming the field
// ("messages[2].tool_calls[0].function.arguments").
#pragma once

#include <string_view>

#include "recipe/chat/chat_types.h"
#include "util/status.h"

namespace di::recipe {

Expected<ChatRequest> parse_chat_request_json(std::string_view json_text);

}  // namespace di::recipe
