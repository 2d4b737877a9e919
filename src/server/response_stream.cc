#include "server/response_stream.h"

#include "api/openai_response.h"

namespace di::server {

using nlohmann::json;

ResponseStream::ResponseStream(const api::OpenAIRequest& request,
                               std::string id,
                               int64_t created_unix_s,
                               const recipe::Tokenizer* tokenizer)
    : request_(request), id_(std::move(id)), created_(created_unix_s), tokenizer_(tokenizer) {
  const bool thinking = api::reply_starts_in_reasoning(request.prompt);
  for (int c = 0; c < request.params.n; ++c) {
    choices_.push_back(
        ChoiceState{recipe::ResponseParser({thinking, {}, request.parse_tool_calls}), false, 0});
    output_.choices.push_back(api::Choice{c, {}, "", engine::FinishReason::kNone, {}});
  }
}

json ResponseStream::chunk_base() const {
  const bool chat = request_.endpoint == api::OpenAIEndpoint::kChatCompletions;
  json j = {{"id", id_},
            {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", request_.model}};
  if (request_.include_usage) j["usage"] = nullptr;
  return j;
}

void ResponseStream::chat_chunks(const api::ChoiceDelta& d, std::vector<std::string>& out) {
  ChoiceState& cs = choices_.at(static_cast<size_t>(d.index));
  std::vector<json> deltas;
  if (!cs.sent_role) {
    deltas.push_back({{"role", "assistant"}, {"content", ""}});
    cs.sent_role = true;
  }
  std::vector<recipe::Delta> parsed = cs.parser.push(d.text);
  if (d.finish != engine::FinishReason::kNone) {
    for (recipe::Delta& x : cs.parser.finish()) parsed.push_back(std::move(x));
  }
  for (const recipe::Delta& x : parsed) {
    if (!x.reasoning_content.empty())
      deltas.push_back({{"reasoning_content", x.reasoning_content}});
    if (!x.content.empty()) deltas.push_back({{"content", x.content}});
    for (const recipe::ToolCallDelta& t : x.tool_calls) {
      if (!api::keeps_tool_call(request_, t.index)) continue;
      ++cs.tool_calls;
      deltas.push_back(
          {{"tool_calls",
            json::array({{{"index", t.index},
                          {"id", api::tool_call_id(id_, d.index, t.index)},
                          {"type", "function"},
                          {"function", {{"name", t.name}, {"arguments", t.arguments}}}}})}});
    }
  }
  const bool want_logprobs = request_.params.sampling.logprobs && !d.logprobs.empty();
  // Tokens whose text is held back still report their logprobs / ids in this step.
  const bool want_ids = request_.echo_token_ids && !d.token_ids.empty();
  if (deltas.empty() && (want_logprobs || want_ids)) deltas.push_back({{"content", ""}});
  for (size_t i = 0; i < deltas.size(); ++i) {
    json c = chunk_base();
    json choice = {{"index", d.index}, {"delta", deltas[i]}, {"finish_reason", nullptr}};
    // The step's logprobs ride on its first chunk (the text they belong to may be held back).
    choice["logprobs"] =
        i == 0 && want_logprobs ? api::chat_logprobs(d.token_ids, d.logprobs, tokenizer_) : json();
    if (i == 0 && request_.echo_token_ids) choice["token_ids"] = d.token_ids;
    c["choices"] = json::array({choice});
    out.push_back(api::dump_json(c));
  }
  if (d.finish != engine::FinishReason::kNone) {
    json c = chunk_base();
    const std::string reason =
        cs.tool_calls > 0 ? "tool_calls" : api::finish_reason_string(d.finish);
    c["choices"] = json::array({{{"index", d.index},
                                 {"delta", json::object()},
                                 {"logprobs", nullptr},
                                 {"finish_reason", reason}}});
    out.push_back(api::dump_json(c));
  }
}

void ResponseStream::completion_chunk(const api::ChoiceDelta& d, std::vector<std::string>& out) {
  const bool want_logprobs = request_.params.sampling.logprobs && !d.logprobs.empty();
  const bool want_ids = request_.echo_token_ids && !d.token_ids.empty();
  if (d.text.empty() && !want_logprobs && !want_ids && d.finish == engine::FinishReason::kNone) {
    return;
  }
  json c = chunk_base();
  json choice = {
      {"index", d.index},
      {"text", d.text},
      {"logprobs",
       want_logprobs ? api::completion_logprobs(d.token_ids, d.logprobs, tokenizer_) : json()},
      {"finish_reason", d.finish == engine::FinishReason::kNone
                            ? json()
                            : json(api::finish_reason_string(d.finish))}};
  if (request_.echo_token_ids) choice["token_ids"] = d.token_ids;
  c["choices"] = json::array({choice});
  out.push_back(api::dump_json(c));
}

std::vector<std::string> ResponseStream::chunks(const api::StreamEvent& event) {
  output_.prompt_token_ids.resize(static_cast<size_t>(event.num_prompt_tokens));
  std::vector<std::string> out;
  for (const api::ChoiceDelta& d : event.choices) {
    if (d.index < 0 || d.index >= request_.params.n) continue;
    completion_tokens_ += static_cast<int64_t>(d.token_ids.size());
    if (request_.endpoint == api::OpenAIEndpoint::kChatCompletions) {
      chat_chunks(d, out);
    } else {
      completion_chunk(d, out);
    }
  }
  return out;
}

std::string ResponseStream::usage_chunk() const {
  json c = chunk_base();
  c["choices"] = json::array();
  c["usage"] = api::usage_json(prompt_tokens(), completion_tokens_);
  return api::dump_json(c);
}

void ResponseStream::accumulate(const api::StreamEvent& event) {
  output_.prompt_token_ids.resize(static_cast<size_t>(event.num_prompt_tokens));
  for (const api::ChoiceDelta& d : event.choices) {
    if (d.index < 0 || d.index >= request_.params.n) continue;
    api::Choice& c = output_.choices[static_cast<size_t>(d.index)];
    c.token_ids.insert(c.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
    c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    c.text += d.text;
    if (d.finish != engine::FinishReason::kNone) c.finish = d.finish;
    completion_tokens_ += static_cast<int64_t>(d.token_ids.size());
  }
}

std::string ResponseStream::body() const {
  json b = api::response_body(request_, output_, tokenizer_, id_, created_);
  if (!request_.echo_token_ids) {
    for (json& c : b["choices"]) c.erase("token_ids");
  }
  return api::dump_json(b);
}

}  // namespace di::server
