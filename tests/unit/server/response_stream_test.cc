// ResponseStream turns engine events into OpenAI chunks: reasoning then content, DSML tool calls
// as tool_calls deltas with finish_reason "tool_calls", the usage chunk, and (non-streaming) the
// same body `deepinfer batch` renders.
#include "server/response_stream.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace di::server {
namespace {

using nlohmann::json;

api::OpenAIRequest chat_request(bool thinking) {
  api::OpenAIRequest r;
  r.endpoint = api::OpenAIEndpoint::kChatCompletions;
  recipe::ChatRequest chat;
  chat.thinking = thinking;
  r.prompt.chat = chat;
  r.model = "m";
  r.stream = true;
  r.include_usage = true;
  return r;
}

// One event per piece of text, one token each; the last one finishes with `finish`.
std::vector<api::StreamEvent> events(const std::vector<std::string>& pieces,
                                     engine::FinishReason finish) {
  std::vector<api::StreamEvent> out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    api::StreamEvent ev;
    ev.num_prompt_tokens = 5;
    api::ChoiceDelta d;
    d.text = pieces[i];
    d.token_ids = {static_cast<int32_t>(i + 10)};
    if (i + 1 == pieces.size()) d.finish = finish;
    ev.choices.push_back(d);
    ev.done = i + 1 == pieces.size();
    out.push_back(ev);
  }
  return out;
}

struct Collected {
  std::string reasoning, content, finish;
  std::vector<json> tool_calls;
  int chunks = 0;
};

Collected stream_all(ResponseStream& rs, const std::vector<api::StreamEvent>& evs) {
  Collected c;
  for (const auto& ev : evs) {
    for (const std::string& text : rs.chunks(ev)) {
      const json j = json::parse(text);
      EXPECT_EQ(j["object"], "chat.completion.chunk");
      EXPECT_TRUE(j.contains("usage") && j["usage"].is_null());
      ++c.chunks;
      for (const json& ch : j["choices"]) {
        const json& d = ch["delta"];
        if (d.contains("reasoning_content")) c.reasoning += d["reasoning_content"];
        if (d.contains("content")) c.content += d["content"];
        if (d.contains("tool_calls")) c.tool_calls.push_back(d["tool_calls"][0]);
        if (!ch["finish_reason"].is_null()) c.finish = ch["finish_reason"];
      }
    }
  }
  return c;
}

TEST(ResponseStream, ReasoningThenContentAcrossChunkBoundaries) {
  const auto req = chat_request(true);
  ResponseStream rs(req, "chatcmpl-1", 0, nullptr);
  Collected c = stream_all(rs, events({"Let me ", "think.</th", "ink>The ans", "wer is 4."},
                                      engine::FinishReason::kStop));
  EXPECT_EQ(c.reasoning, "Let me think.");
  EXPECT_EQ(c.content, "The answer is 4.");
  EXPECT_EQ(c.finish, "stop");
  EXPECT_TRUE(c.tool_calls.empty());
  const json usage = json::parse(rs.usage_chunk());
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 5);
}

TEST(ResponseStream, DsmlToolCallBecomesToolCallsDelta) {
  const std::string d =
      "\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C";  // ｜DSML｜
  const std::vector<std::string> pieces = {
      "Checking.\n\n<" + d + " calls>\n<" + d + " invoke name=\"get_weather\">\n",
      "<" + d + " parameter name=\"city\" string=\"true\">Par",
      "is</" + d + " parameter>\n</" + d + " invoke>\n</" + d + " calls>"};
  const auto req = chat_request(false);
  ResponseStream rs(req, "chatcmpl-2", 0, nullptr);
  Collected c = stream_all(rs, events(pieces, engine::FinishReason::kStop));
  EXPECT_EQ(c.content, "Checking.");
  ASSERT_EQ(c.tool_calls.size(), 1u);
  EXPECT_EQ(c.tool_calls[0]["index"], 0);
  EXPECT_EQ(c.tool_calls[0]["type"], "function");
  EXPECT_EQ(c.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(c.tool_calls[0]["function"]["arguments"].get<std::string>())["city"],
            "Paris");
  EXPECT_EQ(c.finish, "tool_calls");
}

// parallel_tool_calls false next to another structured output: the text may hold two calls,
// the reply (streamed or not) keeps the first, as vLLM does.
TEST(ResponseStream, MaxToolCallsKeepsTheFirstCall) {
  const std::string d =
      "\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C";  // ｜DSML｜
  auto invoke = [&](const std::string& city) {
    return "<" + d + " invoke name=\"get_weather\">\n<" + d +
           " parameter name=\"city\" string=\"true\">" + city + "</" + d + " parameter>\n</" + d +
           " invoke>";
  };
  const std::vector<std::string> pieces = {"<" + d + " calls>\n" + invoke("Paris") + "\n",
                                           invoke("Rome") + "\n</" + d + " calls>"};
  for (int limit : {-1, 1}) {
    auto req = chat_request(false);
    req.max_tool_calls = limit;
    ResponseStream rs(req, "chatcmpl-4", 0, nullptr);
    Collected c = stream_all(rs, events(pieces, engine::FinishReason::kStop));
    ASSERT_EQ(c.tool_calls.size(), limit < 0 ? 2u : 1u);
    EXPECT_EQ(json::parse(c.tool_calls[0]["function"]["arguments"].get<std::string>())["city"],
              "Paris");
    EXPECT_EQ(c.finish, "tool_calls");
    req.stream = false;
    ResponseStream whole(req, "chatcmpl-4", 0, nullptr);
    for (const auto& ev : events(pieces, engine::FinishReason::kStop)) whole.accumulate(ev);
    const json body = json::parse(whole.body());
    EXPECT_EQ(body["choices"][0]["message"]["tool_calls"].size(), limit < 0 ? 2u : 1u);
    EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  }
}

TEST(ResponseStream, NonStreamingBodyMatchesTheStreamedText) {
  auto req = chat_request(true);
  req.stream = false;
  ResponseStream rs(req, "chatcmpl-3", 7, nullptr);
  for (const auto& ev : events({"a</think>", "b", "c"}, engine::FinishReason::kLength)) {
    rs.accumulate(ev);
  }
  const json body = json::parse(rs.body());
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["created"], 7);
  EXPECT_EQ(body["choices"][0]["message"]["reasoning_content"], "a");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "bc");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(body["choices"][0].contains("token_ids"));
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
  EXPECT_EQ(body["usage"]["total_tokens"], 8);
}

TEST(ResponseStream, CompletionChunksCarryTokenIdsEvenWhenTextIsHeldBack) {
  api::OpenAIRequest req;
  req.params.n = 1;
  req.stream = true;
  req.echo_token_ids = true;
  ResponseStream rs(req, "cmpl-1", 0, nullptr);
  int64_t ids = 0;
  for (const auto& ev : events({"", "x", ""}, engine::FinishReason::kLength)) {
    for (const std::string& text : rs.chunks(ev)) {
      const json j = json::parse(text);
      EXPECT_EQ(j["object"], "text_completion");
      ids += static_cast<int64_t>(j["choices"][0]["token_ids"].size());
    }
  }
  EXPECT_EQ(ids, 3);
}

}  // namespace
}  // namespace di::server
