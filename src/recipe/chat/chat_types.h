// Plain data for chat rendering: an OpenAI-shaped chat request reduced to what the DeepSeek V4.1
// prompt format needs, and the rendered prompt. Spec: shared/spec/deepseek-v41-model.md §4.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace di::recipe {

// One call the assistant made. `arguments_json` is the OpenAI `function.arguments` string (a JSON
// object); anything else is rendered the way the reference does ({"arguments": <the string>}).
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments_json;
};

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant" | "tool"; anything else is rejected
  std::string content;
  std::string reasoning_content;         // assistant only
  std::vector<ChatToolCall> tool_calls;  // assistant only
  std::string tool_call_id;              // tool only: which call this result answers
  std::string name;                      // optional participant / tool name (not rendered)
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  // OpenAI function tools, each {"type":"function","function":{"name",...,"parameters":{...}}}.
  // Key order is kept: the schemas are rendered into the prompt as written.
  std::vector<nlohmann::ordered_json> tools;
  bool thinking = true;  // vLLM's default for V4.1
  // "low" | "high" | "xhigh" | "max" (25/50/75/100) or a decimal integer 1..100.
  std::string reasoning_effort = "high";
  bool add_generation_prompt = true;
  // Drop reasoning of assistant turns before the last user turn (disabled when tools are given).
  bool drop_thinking = true;
};

// The prompt as token ids (control tokens as their ids, every text piece tokenized with
// SpecialTokens::kNone) and the same prompt as text (control tokens spelled out).
struct RenderedPrompt {
  std::vector<int32_t> ids;
  std::string text;
};

}  // namespace di::recipe
