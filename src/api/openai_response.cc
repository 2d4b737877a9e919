#include "api/openai_response.h"

#include <cstdio>

#include "recipe/parse/response_parser.h"

namespace di::api {

using nlohmann::json;

const char* finish_reason_string(engine::FinishReason r) {
  switch (r) {
    case engine::FinishReason::kLength:
      return "length";
    case engine::FinishReason::kStop:
      return "stop";
    case engine::FinishReason::kCancelled:
      return "abort";
    default:
      return "error";
  }
}

std::string token_text(const recipe::Tokenizer* tok, int32_t id) {
  return tok ? std::string(tok->token_bytes(id)) : "token_id:" + std::to_string(id);
}

json completion_logprobs(const std::vector<int32_t>& ids,
                         const std::vector<engine::TokenLogprobs>& lps,
                         const recipe::Tokenizer* tok) {
  json tokens = json::array(), values = json::array(), tops = json::array();
  for (size_t i = 0; i < lps.size() && i < ids.size(); ++i) {
    tokens.push_back(token_text(tok, ids[i]));
    values.push_back(lps[i].logprob);
    json top = json::object();
    for (const auto& [id, lp] : lps[i].top) top[token_text(tok, id)] = lp;
    tops.push_back(top);
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}};
}

json chat_logprobs(const std::vector<int32_t>& ids,
                   const std::vector<engine::TokenLogprobs>& lps,
                   const recipe::Tokenizer* tok) {
  json content = json::array();
  for (size_t i = 0; i < lps.size() && i < ids.size(); ++i) {
    json top = json::array();
    for (const auto& [id, lp] : lps[i].top) {
      top.push_back({{"token", token_text(tok, id)}, {"logprob", lp}});
    }
    content.push_back(
        {{"token", token_text(tok, ids[i])}, {"logprob", lps[i].logprob}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

bool reply_starts_in_reasoning(const Prompt& prompt) {
  return prompt.chat && prompt.chat->thinking && prompt.chat->add_generation_prompt;
}

bool keeps_tool_call(const OpenAIRequest& request, int index) {
  return request.max_tool_calls < 0 || index < request.max_tool_calls;
}

std::string tool_call_id(const std::string& response_id, int choice, int call) {
  // FNV-1a of (response id, choice, call): stable for reproducible batch output.
  uint64_t h = 0xcbf29ce484222325ull;
  const std::string key = response_id + "/" + std::to_string(choice) + "/" + std::to_string(call);
  for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ull;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "call_%016llx", static_cast<unsigned long long>(h));
  return buf;
}

json chat_message(const OpenAIRequest& request,
                  const std::string& text,
                  const std::string& response_id,
                  int choice) {
  // The reply as the V4.1 format lays it out: reasoning (when the prompt ended in <think>), then
  // content, then DSML tool calls (recipe/parse/response_parser.h).
  recipe::ResponseParser parser(recipe::ParserOptions{
      reply_starts_in_reasoning(request.prompt), {}, request.parse_tool_calls});
  recipe::ParsedResponse parsed;
  recipe::accumulate(parsed, parser.push(text));
  recipe::accumulate(parsed, parser.finish());
  json msg = {
      {"role", "assistant"},
      {"content", parsed.content.empty() && !parsed.tool_calls.empty() ? json(nullptr)
                                                                       : json(parsed.content)}};
  if (!parsed.reasoning_content.empty()) msg["reasoning_content"] = parsed.reasoning_content;
  json calls = json::array();
  for (const auto& t : parsed.tool_calls) {
    if (!keeps_tool_call(request, t.index)) continue;
    calls.push_back({{"id", tool_call_id(response_id, choice, t.index)},
                     {"type", "function"},
                     {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
  }
  msg["tool_calls"] = calls;
  return msg;
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json response_body(const OpenAIRequest& request,
                   const GenerationOutput& output,
                   const recipe::Tokenizer* tokenizer,
                   const std::string& id,
                   int64_t created_unix_s) {
  const bool chat = request.endpoint == OpenAIEndpoint::kChatCompletions;
  const bool want_logprobs = request.params.sampling.logprobs;
  json choices = json::array();
  int64_t completion_tokens = 0;  // (counted here so this file needs nothing from llm.cc)
  for (const Choice& c : output.choices) {
    completion_tokens += static_cast<int64_t>(c.token_ids.size());
    json ch = {{"index", c.index}, {"finish_reason", finish_reason_string(c.finish)}};
    if (chat) {
      ch["message"] = chat_message(request, c.text, id, c.index);
      if (!ch["message"]["tool_calls"].empty()) ch["finish_reason"] = "tool_calls";
      ch["logprobs"] =
          want_logprobs ? chat_logprobs(c.token_ids, c.logprobs, tokenizer) : json(nullptr);
    } else {
      ch["text"] = c.text;
      ch["logprobs"] =
          want_logprobs ? completion_logprobs(c.token_ids, c.logprobs, tokenizer) : json(nullptr);
    }
    ch["token_ids"] = c.token_ids;
    choices.push_back(std::move(ch));
  }
  return {{"id", id},
          {"object", chat ? "chat.completion" : "text_completion"},
          {"created", created_unix_s},
          {"model", request.model},
          {"choices", choices},
          {"usage",
           usage_json(static_cast<int64_t>(output.prompt_token_ids.size()), completion_tokens)}};
}

json error_body(const std::string& message,
                const std::string& type,
                const std::string& code,
                const std::string& param) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace di::api
