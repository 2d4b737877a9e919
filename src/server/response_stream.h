// ResponseStream: one generation request's events (api::StreamEvent) turned into OpenAI responses,
// either as SSE chunks (chat.completion.chunk / text_completion, with reasoning_content and
// tool_calls deltas from the streaming V4.1 parser) or accumulated into one body rendered by
// api/openai_response (the same code as `deepinfer batch`). No I/O, so it is unit-tested alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/async_llm.h"
#include "api/openai_request.h"
#include "recipe/parse/response_parser.h"

namespace di::server {

class ResponseStream {
 public:
  // `tokenizer` may be null (token ids only).
  ResponseStream(const api::OpenAIRequest& request,
                 std::string id,
                 int64_t created_unix_s,
                 const recipe::Tokenizer* tokenizer);

  // Streaming: the JSON payloads of the SSE chunks for one event, in order.
  std::vector<std::string> chunks(const api::StreamEvent& event);
  // Streaming, after the done event: the usage chunk (stream_options.include_usage).
  std::string usage_chunk() const;

  // Non-streaming: adds the event; body() renders everything added.
  void accumulate(const api::StreamEvent& event);
  std::string body() const;

  int64_t prompt_tokens() const { return output_.prompt_token_ids.size(); }
  int64_t completion_tokens() const { return completion_tokens_; }

 private:
  struct ChoiceState {
    recipe::ResponseParser parser;
    bool sent_role = false;
    int tool_calls = 0;
  };
  nlohmann::json chunk_base() const;
  void chat_chunks(const api::ChoiceDelta& d, std::vector<std::string>& out);
  void completion_chunk(const api::ChoiceDelta& d, std::vector<std::string>& out);

  const api::OpenAIRequest& request_;
  std::string id_;
  int64_t created_;
  const recipe::Tokenizer* tokenizer_;
  std::vector<ChoiceState> choices_;
  api::GenerationOutput output_;  // prompt size and, non-streaming, the choices
  int64_t completion_tokens_ = 0;
};

}  // namespace di::server
