// The OpenAI Batch file format (https://platform.openai.com/docs/api-reference/batch): parsing
// one input line ({custom_id, method, url, body}) into a prompt and generation parameters, and
// writing one output line ({id, custom_id, response: {status_code, request_id, body}, error})
// with a text_completion or chat.completion body and usage. Pure functions, no I/O, so every
// malformed line becomes an error result rather than an abort, and results are reproducible
// (ids derive from the custom_id, not from a clock or a counter).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/llm.h"
#include "api/openai_request.h"
#include "util/status.h"

namespace di::api {

// What the `deepinfer batch` flags fill in when a body leaves a field out.
struct BatchDefaults {
  GenerationParams params;
  std::optional<uint64_t> seed;  // base seed: an unseeded body gets hash(seed, custom_id)
  std::string model_name = "deepinfer";
};

using BatchEndpoint = OpenAIEndpoint;

// A body parsed by parse_openai_body (api/openai_request.h), plus the line's custom_id.
struct BatchRequest : OpenAIRequest {
  std::string custom_id;
};

// One parsed line: the custom_id (a synthesized "line-<n>" when the line has none, so every
// line has exactly one result) and the request, or why it cannot be served. `http_status` is
// 400 for request errors.
struct ParsedBatchLine {
  std::string custom_id;
  Expected<BatchRequest> request = invalid_argument("unparsed");
  bool line_is_json = false;  // false: the result carries a top-level error, no response
};

ParsedBatchLine parse_batch_line(std::string_view line,
                                 int64_t line_number,
                                 const BatchDefaults& defaults);

// The result line (no trailing newline) for a finished request. `tokenizer` may be null.
std::string format_batch_result(const BatchRequest& request,
                                const GenerationOutput& output,
                                const recipe::Tokenizer* tokenizer,
                                int64_t created_unix_s);

// The result line for a line that could not be served (bad JSON, bad body, rejected request).
std::string format_batch_error(const ParsedBatchLine& line, const Status& error, int http_status);

// The custom_id of an output line, if the line is a complete JSON object with one.
std::optional<std::string> custom_id_of_result(std::string_view line);

}  // namespace di::api
