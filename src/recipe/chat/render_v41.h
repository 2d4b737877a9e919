// DeepSeek V4.1 chat rendering: ChatRequest -> prompt ids + text, following the reference encoder
// (vLLM deepseek_v41_encoding.py / deepseek-recipe DeepseekV41Encoding; spec
// shared/spec/deepseek-v41-model.md §4). Control tokens are emitted as ids; all text (system
// prompts, user turns, tool results, tool schemas, history) is tokenized as untrusted text.
#pragma once

#include "recipe/chat/chat_types.h"
#include "recipe/tokenizer/tokenizer.h"
#include "util/status.h"

namespace di::recipe {

// The effort number for "low"/"high"/"xhigh"/"max" or "1".."100"; kInvalidArgument otherwise.
Expected<int> parse_reasoning_effort(std::string_view effort);

// Errors: kInvalidArgument naming the field (e.g. "messages[3].role", "reasoning_effort",
// "tools[0].function") for a bad request; kNotFound if the tokenizer lacks a control token.
Expected<RenderedPrompt> render_chat(const ChatRequest& request, const Tokenizer& tokenizer);

}  // namespace di::recipe
