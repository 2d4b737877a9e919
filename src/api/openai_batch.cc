#include "api/openai_batch.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "api/openai_response.h"

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
  auto method = j.find("method");
  if (method != j.end() && *method != "POST") {
    out.request = invalid_argument("method: only POST is supported");
    return out;
  }
  auto url_it = j.find("url");
  const std::string url =
      url_it != j.end() && url_it->is_string() ? url_it->get<std::string>() : "";
  BatchEndpoint endpoint;
  if (url == "/v1/completions") {
    endpoint = BatchEndpoint::kCompletions;
  } else if (url == "/v1/chat/completions") {
    endpoint = BatchEndpoint::kChatCompletions;
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
  auto parsed = parse_openai_body(*body_it, endpoint, defaults.params, defaults.model_name);
  if (!parsed) {
    out.request = parsed.status();
    return out;
  }
  BatchRequest r;
  static_cast<OpenAIRequest&>(r) = std::move(parsed).value();
  r.custom_id = out.custom_id;
  if (!r.params.seed && defaults.seed) r.params.seed = fnv1a(r.custom_id, *defaults.seed);
  out.request = std::move(r);
  return out;
}

std::string format_batch_result(const BatchRequest& request,
                                const GenerationOutput& output,
                                const recipe::Tokenizer* tokenizer,
                                int64_t created_unix_s) {
  const bool chat = request.endpoint == BatchEndpoint::kChatCompletions;
  json body =
      response_body(request, output, tokenizer,
                    hex_id(chat ? "chatcmpl-" : "cmpl-", request.custom_id), created_unix_s);
  json line = {
      {"id", hex_id("batch_req_", request.custom_id)},
      {"custom_id", request.custom_id},
      {"response",
       {{"status_code", 200}, {"request_id", hex_id("req_", request.custom_id)}, {"body", body}}},
      {"error", nullptr}};
  return dump_json(line);
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
                       {"body", error_body(error.message(), type, status_code_name(error.code()))}};
    out["error"] = nullptr;
  }
  return dump_json(out);
}

std::optional<std::string> custom_id_of_result(std::string_view line) {
  const json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto it = j.find("custom_id");
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

}  // namespace di::api
