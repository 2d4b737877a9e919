#include "api/openai_batch.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "recipe/chat/chat_request_json.h"
#include "recipe/parse/response_parser.h"

namespace di::api {

namespace {

using nlohmann::json;

uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string hex_id(const char* prefix, std::string_view custom_id) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s%016llx", prefix,
                static_cast<unsigned long long>(fnv1a(custom_id)));
  return buf;
}

Status field_error(const std::string& field, const std::string& what) {
  return invalid_argument("body." + field + ": " + what);
}

// Reads body[field] into `out` if present; a wrong type is an error naming the field.
template <class T>
Status read_number(const json& body, const char* field, T& out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return Status();
  if (!it->is_number()) return field_error(field, "must be a number");
  if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) return field_error(field, "must be an integer");
    if (it->is_number_unsigned() && std::is_signed_v<T> &&
        it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      return field_error(field, "is too large");
    }
    if (!it->is_number_unsigned() && std::is_unsigned_v<T>) {
      return field_error(field, "must be >= 0");
    }
  }
  out = it->get<T>();
  return Status();
}

Status read_token_ids(const json& v, const char* field, std::vector<int32_t>& out) {
  if (!v.is_array()) return field_error(field, "must be an array of token ids");
  for (const json& t : v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) {
      return field_error(field, "must hold non-negative integer token ids");
    }
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return Status();
}

Status read_sampling(const json& body, GenerationParams& p, BatchEndpoint endpoint) {
  engine::SamplingParams& s = p.sampling;
  DI_RETURN_IF_ERROR(read_number(body, "max_tokens", p.max_tokens));
  DI_RETURN_IF_ERROR(read_number(body, "max_completion_tokens", p.max_tokens));
  DI_RETURN_IF_ERROR(read_number(body, "n", p.n));
  DI_RETURN_IF_ERROR(read_number(body, "temperature", s.temperature));
  DI_RETURN_IF_ERROR(read_number(body, "top_p", s.top_p));
  DI_RETURN_IF_ERROR(read_number(body, "top_k", s.top_k));
  DI_RETURN_IF_ERROR(read_number(body, "min_p", s.min_p));
  DI_RETURN_IF_ERROR(read_number(body, "presence_penalty", s.presence_penalty));
  DI_RETURN_IF_ERROR(read_number(body, "frequency_penalty", s.frequency_penalty));
  DI_RETURN_IF_ERROR(read_number(body, "repetition_penalty", s.repetition_penalty));
  DI_RETURN_IF_ERROR(read_number(body, "priority", p.priority));
  if (body.contains("seed") && !body["seed"].is_null()) {
    uint64_t seed = 0;
    DI_RETURN_IF_ERROR(read_number(body, "seed", seed));
    p.seed = seed;
  }
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      p.stop = {it->get<std::string>()};
    } else if (it->is_array()) {
      p.stop.clear();
      for (const json& x : *it) {
        if (!x.is_string()) return field_error("stop", "must be a string or an array of strings");
        p.stop.push_back(x.get<std::string>());
      }
    } else {
      return field_error("stop", "must be a string or an array of strings");
    }
  }
  if (auto it = body.find("stop_token_ids"); it != body.end() && !it->is_null()) {
    p.stop_token_ids.clear();
    DI_RETURN_IF_ERROR(read_token_ids(*it, "stop_token_ids", p.stop_token_ids));
  }
  if (auto it = body.find("ignore_eos"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return field_error("ignore_eos", "must be a boolean");
    p.ignore_eos = it->get<bool>();
  }
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return field_error("logit_bias", "must map token ids to numbers");
    s.logit_bias.clear();
    for (auto& [key, value] : it->items()) {
      char* end = nullptr;
      const long id = std::strtol(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id > INT32_MAX || !value.is_number()) {
        return field_error("logit_bias", "must map token ids to numbers");
      }
      s.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
  }
  // Completions: logprobs is the number of top entries; chat: a boolean plus top_logprobs.
  if (auto it = body.find("logprobs"); it != body.end() && !it->is_null()) {
    if (endpoint == BatchEndpoint::kCompletions) {
      if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 20) {
        return field_error("logprobs", "must be an integer in [0, 20]");
      }
      s.logprobs = true;
      s.top_logprobs = it->get<int>();
    } else {
      if (!it->is_boolean()) return field_error("logprobs", "must be a boolean");
      s.logprobs = it->get<bool>();
      DI_RETURN_IF_ERROR(read_number(body, "top_logprobs", s.top_logprobs));
    }
  }
  DI_ASSIGN_OR_RETURN(p.structured_output, parse_structured_output(body));
  return engine::validate_sampling(s);
}

const char* finish_name(engine::FinishReason r) {
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

json completion_logprobs(const Choice& c, const recipe::Tokenizer* tok) {
  json tokens = json::array(), lps = json::array(), tops = json::array();
  for (size_t i = 0; i < c.logprobs.size() && i < c.token_ids.size(); ++i) {
    tokens.push_back(token_text(tok, c.token_ids[i]));
    lps.push_back(c.logprobs[i].logprob);
    json top = json::object();
    for (const auto& [id, lp] : c.logprobs[i].top) top[token_text(tok, id)] = lp;
    tops.push_back(top);
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}};
}

json chat_logprobs(const Choice& c, const recipe::Tokenizer* tok) {
  json content = json::array();
  for (size_t i = 0; i < c.logprobs.size() && i < c.token_ids.size(); ++i) {
    json top = json::array();
    for (const auto& [id, lp] : c.logprobs[i].top) {
      top.push_back({{"token", token_text(tok, id)}, {"logprob", lp}});
    }
    content.push_back({{"token", token_text(tok, c.token_ids[i])},
                       {"logprob", c.logprobs[i].logprob},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

}  // namespace

ParsedBatchLine parse_batch_line(std::string_view line,
                                 int64_t line_number,
                                 const BatchDefaults& defaults) {
  ParsedBatchLine out;
  out.custom_id = "line-" + std::to_string(line_number);
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    out.request = invalid_argument("line " + std::to_string(line_number) + " is not a JSON object");
    return out;
  }
  out.line_is_json = true;
  auto id = j.find("custom_id");
  if (id == j.end() || !id->is_string() || id->get<std::string>().empty()) {
    out.request = invalid_argument("custom_id: missing or not a non-empty string");
    return out;
  }
  out.custom_id = id->get<std::string>();
  BatchRequest r;
  r.custom_id = out.custom_id;
  r.params = defaults.params;
  r.model = defaults.model_name;
  const std::string url = j.value("url", std::string());
  if (j.contains("method") && j["method"] != "POST") {
    out.request = invalid_argument("method: only POST is supported");
    return out;
  }
  if (url == "/v1/completions") {
    r.endpoint = BatchEndpoint::kCompletions;
  } else if (url == "/v1/chat/completions") {
    r.endpoint = BatchEndpoint::kChatCompletions;
  } else {
    out.request =
        invalid_argument("url: '" + url + "' is not /v1/completions or /v1/chat/completions");
    return out;
  }
  auto body_it = j.find("body");
  if (body_it == j.end() || !body_it->is_object()) {
    out.request = invalid_argument("body: missing or not an object");
    return out;
  }
  const json& body = *body_it;
  if (body.contains("model") && body["model"].is_string())
    r.model = body["model"].get<std::string>();
  if (r.endpoint == BatchEndpoint::kChatCompletions) {
    auto chat = recipe::parse_chat_request_json(body.dump());
    if (!chat) {
      out.request = chat.status();
      return out;
    }
    r.prompt.chat = std::move(chat).value();
  } else {
    auto prompt = body.find("prompt");
    if (prompt == body.end()) {
      out.request = field_error("prompt", "missing");
      return out;
    }
    if (prompt->is_string()) {
      r.prompt.text = prompt->get<std::string>();
    } else if (Status s = read_token_ids(*prompt, "prompt", r.prompt.token_ids); !s.ok()) {
      out.request =
          field_error("prompt", "must be a string or an array of token ids (one prompt per line)");
      return out;
    }
  }
  if (Status s = read_sampling(body, r.params, r.endpoint); !s.ok()) {
    out.request = s;
    return out;
  }
  if (!r.params.seed && defaults.seed) r.params.seed = fnv1a(r.custom_id, *defaults.seed);
  out.request = std::move(r);
  return out;
}

namespace {

json chat_message(const BatchRequest& request,
                  const std::string& text,
                  const std::string& custom_id,
                  int choice) {
  // The reply as the V4.1 format lays it out: reasoning (when the prompt ended in <think>), then
  // content, then DSML tool calls (recipe/parse/response_parser.h).
  const bool thinking = request.prompt.chat && request.prompt.chat->thinking &&
                        request.prompt.chat->add_generation_prompt;
  recipe::ResponseParser parser(recipe::ParserOptions{thinking, {}});
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
    calls.push_back({{"id", "call_" + hex_id("", custom_id + "/" + std::to_string(choice) + "/" +
                                                     std::to_string(t.index))},
                     {"type", "function"},
                     {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
  }
  msg["tool_calls"] = calls;
  return msg;
}

}  // namespace

std::string format_batch_result(const BatchRequest& request,
                                const GenerationOutput& output,
                                const recipe::Tokenizer* tokenizer,
                                int64_t created_unix_s) {
  const bool chat = request.endpoint == BatchEndpoint::kChatCompletions;
  const bool want_logprobs = request.params.sampling.logprobs;
  json choices = json::array();
  for (const Choice& c : output.choices) {
    json ch = {
        {"index", c.index}, {"finish_reason", finish_name(c.finish)}, {"token_ids", c.token_ids}};
    if (chat) {
      ch["message"] = chat_message(request, c.text, request.custom_id, c.index);
      if (!ch["message"]["tool_calls"].empty()) ch["finish_reason"] = "tool_calls";
      ch["logprobs"] = want_logprobs ? chat_logprobs(c, tokenizer) : json(nullptr);
    } else {
      ch["text"] = c.text;
      ch["logprobs"] = want_logprobs ? completion_logprobs(c, tokenizer) : json(nullptr);
    }
    choices.push_back(std::move(ch));
  }
  const int64_t prompt_tokens = static_cast<int64_t>(output.prompt_token_ids.size());
  const int64_t completion_tokens = output.num_generated_tokens();
  json body = {{"id", hex_id(chat ? "chatcmpl-" : "cmpl-", request.custom_id)},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", created_unix_s},
               {"model", request.model},
               {"choices", choices},
               {"usage",
                {{"prompt_tokens", prompt_tokens},
                 {"completion_tokens", completion_tokens},
                 {"total_tokens", prompt_tokens + completion_tokens}}}};
  json line = {
      {"id", hex_id("batch_req_", request.custom_id)},
      {"custom_id", request.custom_id},
      {"response",
       {{"status_code", 200}, {"request_id", hex_id("req_", request.custom_id)}, {"body", body}}},
      {"error", nullptr}};
  return line.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string format_batch_error(const ParsedBatchLine& line, const Status& error, int http_status) {
  json out = {{"id", hex_id("batch_req_", line.custom_id)}, {"custom_id", line.custom_id}};
  if (!line.line_is_json) {
    // OpenAI reports lines it cannot read at all as a top-level error without a response.
    out["response"] = nullptr;
    out["error"] = {{"code", "invalid_json_line"}, {"message", error.message()}};
  } else {
    const char* type = http_status == 400 ? "invalid_request_error" : "server_error";
    out["response"] = {{"status_code", http_status},
                       {"request_id", hex_id("req_", line.custom_id)},
                       {"body",
                        {{"error",
                          {{"message", error.message()},
                           {"type", type},
                           {"code", status_code_name(error.code())}}}}}};
    out["error"] = nullptr;
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<std::string> custom_id_of_result(std::string_view line) {
  const json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto it = j.find("custom_id");
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

}  // namespace di::api
