#include "api/openai_request.h"

#include <climits>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "api/tool_choice.h"
#include "recipe/chat/chat_request_json.h"

namespace di::api {

namespace {

using nlohmann::json;

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
    if (!it->is_number_unsigned() && std::is_unsigned_v<T> && it->get<int64_t>() < 0) {
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

Status read_sampling(const json& body, GenerationParams& p, OpenAIEndpoint endpoint) {
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
    if (endpoint == OpenAIEndpoint::kCompletions) {
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
  return engine::validate_sampling(s);
}

Status read_bool(const json& body, const char* field, bool& out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return Status();
  if (!it->is_boolean()) return field_error(field, "must be a boolean");
  out = it->get<bool>();
  return Status();
}

// Fields whose values we cannot honour are refused rather than silently ignored (an API user
// must not get different behaviour without an error).
Status refuse_unsupported(const json& body) {
  if (auto it = body.find("best_of"); it != body.end() && !it->is_null()) {
    auto n = body.find("n");
    const int64_t want = n != body.end() && n->is_number_integer() ? n->get<int64_t>() : 1;
    if (!it->is_number_integer() || it->get<int64_t>() != want) {
      return field_error("best_of", "is not supported (only best_of == n)");
    }
  }
  if (auto it = body.find("echo"); it != body.end() && *it == true) {
    return field_error("echo", "is not supported");
  }
  if (auto it = body.find("suffix"); it != body.end() && !it->is_null()) {
    return field_error("suffix", "is not supported");
  }
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return field_error("stream_options", "must be an object");
    for (const auto& [key, value] : it->items()) {
      if (key != "include_usage" && key != "continuous_usage_stats") {
        return field_error("stream_options", "unknown field '" + key + "'");
      }
    }
    if (auto s = body.find("stream"); s == body.end() || *s != true) {
      return field_error("stream_options", "is only allowed when stream is true");
    }
  }
  return Status();
}

}  // namespace

Expected<OpenAIRequest> parse_openai_body(const json& body,
                                          OpenAIEndpoint endpoint,
                                          const GenerationParams& defaults,
                                          const std::string& model) {
  if (!body.is_object()) return invalid_argument("body: must be a JSON object");
  OpenAIRequest r;
  r.endpoint = endpoint;
  r.params = defaults;
  r.model = model;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return field_error("model", "must be a string");
    r.model = it->get<std::string>();
  }
  DI_RETURN_IF_ERROR(refuse_unsupported(body));
  DI_RETURN_IF_ERROR(read_bool(body, "stream", r.stream));
  if (auto it = body.find("stream_options"); it != body.end() && it->is_object()) {
    DI_RETURN_IF_ERROR(read_bool(*it, "include_usage", r.include_usage));
  }
  DI_RETURN_IF_ERROR(read_bool(body, "return_token_ids", r.echo_token_ids));
  if (auto it = body.find("user"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return field_error("user", "must be a string");
    r.user = it->get<std::string>();
  }
  if (endpoint == OpenAIEndpoint::kChatCompletions) {
    if (auto it = body.find("messages"); it == body.end() || !it->is_array() || it->empty()) {
      return field_error("messages", "must be a non-empty array");
    }
    DI_ASSIGN_OR_RETURN(recipe::ChatRequest chat, recipe::parse_chat_request_json(body.dump()));
    r.prompt.chat = std::move(chat);
  } else {
    auto prompt = body.find("prompt");
    if (prompt == body.end()) return field_error("prompt", "missing");
    if (prompt->is_string()) {
      r.prompt.text = prompt->get<std::string>();
    } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
      r.prompt.text = (*prompt)[0].get<std::string>();  // the openai client's list form
    } else if (Status s = read_token_ids(*prompt, "prompt", r.prompt.token_ids); !s.ok()) {
      return field_error("prompt", "must be a string or an array of token ids (one prompt)");
    }
    if (!r.prompt.text && r.prompt.token_ids.empty()) return field_error("prompt", "is empty");
  }
  DI_RETURN_IF_ERROR(read_sampling(body, r.params, endpoint));
  if (r.params.max_tokens < 1) return field_error("max_tokens", "must be at least 1");
  if (r.params.n < 1 || r.params.n > 64) return field_error("n", "must be in [1, 64]");
  DI_ASSIGN_OR_RETURN(r.params.structured_output, parse_structured_output(body));
  if (r.prompt.chat) {
    const auto& tools = r.prompt.chat->tools;
    DI_ASSIGN_OR_RETURN(ToolChoice tc, parse_tool_choice(body, tools));
    r.parse_tool_calls = tc.mode != ToolChoice::Mode::kNone;
    if (!tc.parallel) r.max_tool_calls = 1;
    if (auto so = tool_choice_output(tc, tools)) {
      // auto with parallel_tool_calls false next to another structured output: that one
      // decides the text and the reply keeps its first tool call only (max_tool_calls; the
      // user asked for both, which is consistent: OpenAI and vLLM accept it).
      if (!r.params.structured_output) {
        r.params.structured_output = std::move(so);
      } else if (tc.mode != ToolChoice::Mode::kAuto) {
        return field_error("tool_choice",
                           "'required' or a named function cannot be combined with another "
                           "structured output (response_format, structured_outputs, ...)");
      }
    }
  }
  return r;
}

}  // namespace di::api
