// The chat.completion body of a batch result parses the reply the way the V4.1 format lays it
// out: reasoning before </think> (thinking mode), content, DSML tool calls.
#include "api/openai_batch.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace di::api {
namespace {

nlohmann::json result_message(bool thinking, const std::string& text) {
  BatchRequest r;
  r.custom_id = "req-1";
  r.endpoint = BatchEndpoint::kChatCompletions;
  recipe::ChatRequest chat;
  chat.thinking = thinking;
  r.prompt.chat = chat;
  r.model = "m";
  GenerationOutput out;
  out.prompt_token_ids = {1, 2, 3};
  Choice c;
  c.text = text;
  c.token_ids = {5, 6};
  c.finish = engine::FinishReason::kStop;
  out.choices.push_back(c);
  auto line = nlohmann::json::parse(format_batch_result(r, out, nullptr, 0));
  return line["response"]["body"]["choices"][0];
}

TEST(OpenAIBatch, ChatReplySplitsReasoningAndContent) {
  auto choice = result_message(true, "Let me think.</think>The answer is 4.");
  EXPECT_EQ(choice["message"]["reasoning_content"], "Let me think.");
  EXPECT_EQ(choice["message"]["content"], "The answer is 4.");
  EXPECT_TRUE(choice["message"]["tool_calls"].empty());
  EXPECT_EQ(choice["finish_reason"], "stop");

  auto plain = result_message(false, "Just content.");
  EXPECT_EQ(plain["message"]["content"], "Just content.");
  EXPECT_FALSE(plain["message"].contains("reasoning_content"));
}

TEST(OpenAIBatch, ChatReplyReturnsToolCalls) {
  const std::string text =
      "Checking.\n\n<\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C calls>\n<\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C invoke name=\"get_weather\">\n"
      "<\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C parameter name=\"city\" string=\"true\">Paris</\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C parameter>\n"
      "</\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C invoke>\n</\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C calls>";
  auto choice = result_message(false, text);
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << choice.dump();
  const auto& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(nlohmann::json::parse(call["function"]["arguments"].get<std::string>())["city"],
            "Paris");
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Checking.");
}

}  // namespace
}  // namespace di::api
