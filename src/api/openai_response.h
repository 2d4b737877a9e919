// OpenAI response bodies shared by `deepinfer batch` and `deepinfer serve`: text_completion and
// chat.completion objects (reasoning_content, content and DSML tool calls parsed from the reply),
// logprobs in both endpoints' shapes, usage, and the error object. Pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "api/llm.h"
#include "api/openai_request.h"

namespace di::api {

// "length" | "stop" | "abort" | "error".
const char* finish_reason_string(engine::FinishReason r);

// The text a token stands for in logprobs ("token_id:N" without a tokenizer).
std::string token_text(const recipe::Tokenizer* tok, int32_t id);

// Completions' {tokens, token_logprobs, top_logprobs} for `count` tokens starting at `from`.
nlohmann::json completion_logprobs(const std::vector<int32_t>& ids,
                                   const std::vector<engine::TokenLogprobs>& lps,
                                   const recipe::Tokenizer* tok);
// Chat's {content: [{token, logprob, top_logprobs}]}.
nlohmann::json chat_logprobs(const std::vector<int32_t>& ids,
                             const std::vector<engine::TokenLogprobs>& lps,
                             const recipe::Tokenizer* tok);

// Whether the reply is parsed with reasoning first (the prompt ended in <think>).
bool reply_starts_in_reasoning(const Prompt& prompt);

// Whether the reply keeps the tool call with this index (parallel_tool_calls false keeps the
// first only: OpenAIRequest::max_tool_calls).
bool keeps_tool_call(const OpenAIRequest& request, int index);

// A tool call id that derives from the response id, the choice and the call's index.
std::string tool_call_id(const std::string& response_id, int choice, int call);

// The assistant message of one chat choice.
nlohmann::json chat_message(const OpenAIRequest& request,
                            const std::string& text,
                            const std::string& response_id,
                            int choice);

// The whole non-streaming body; `id` like "chatcmpl-..." or "cmpl-...".
nlohmann::json response_body(const OpenAIRequest& request,
                             const GenerationOutput& output,
                             const recipe::Tokenizer* tokenizer,
                             const std::string& id,
                             int64_t created_unix_s);

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);

// {"error": {"message", "type", "param", "code"}} as OpenAI sends it.
nlohmann::json error_body(const std::string& message,
                          const std::string& type,
                          const std::string& code,
                          const std::string& param = "");

// Dumps with invalid UTF-8 replaced, never throwing.
std::string dump_json(const nlohmann::json& j);

}  // namespace di::api
