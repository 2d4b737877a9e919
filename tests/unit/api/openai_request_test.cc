// parse_openai_body: the fields vLLM/SGLang users send, refusals of what we cannot honour, and
// structured outputs validated by the grammar front end (accepted or a 400 that says why).
#include "api/openai_request.h"

#include <gtest/gtest.h>

#include "api/structured_output.h"

namespace di::api {
namespace {

using nlohmann::json;

Expected<OpenAIRequest> chat(json extra) {
  json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  body.update(extra);
  return parse_openai_body(body, OpenAIEndpoint::kChatCompletions, {}, "m");
}

TEST(OpenAIRequest, ReadsSamplingAndStreamFields) {
  auto r = chat({{"max_completion_tokens", 9},
                 {"temperature", 0.5},
                 {"top_k", 4},
                 {"n", 2},
                 {"stop", "END"},
                 {"seed", 3},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}},
                 {"logprobs", true},
                 {"top_logprobs", 2},
                 {"user", "u1"},
                 {"model", "x"}});
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->params.max_tokens, 9);
  EXPECT_FLOAT_EQ(r->params.sampling.temperature, 0.5f);
  EXPECT_EQ(r->params.sampling.top_k, 4);
  EXPECT_EQ(r->params.n, 2);
  EXPECT_EQ(r->params.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r->params.seed, 3u);
  EXPECT_TRUE(r->stream && r->include_usage);
  EXPECT_TRUE(r->params.sampling.logprobs);
  EXPECT_EQ(r->params.sampling.top_logprobs, 2);
  EXPECT_EQ(r->user, "u1");
  EXPECT_EQ(r->model, "x");
  EXPECT_FALSE(r->params.structured_output);
}

TEST(OpenAIRequest, RefusesWhatItCannotHonour) {
  const std::pair<json, std::string> cases[] = {
      {{{"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {{{"stream", true}, {"stream_options", {{"nope", 1}}}}, "nope"},
      {{{"best_of", 3}}, "best_of"},
      {{{"echo", true}}, "echo"},
      {{{"max_tokens", 0}}, "max_tokens"},
      {{{"n", 0}}, "n"},
      {{{"temperature", "hot"}}, "temperature"},
      {{{"messages", json::array()}}, "messages"},
      {{{"model", 5}}, "model"},
      // Fields of the wrong JSON type where a string is looked up (fuzzer finds: these threw
      // nlohmann's type_error through the parser instead of returning a 400).
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", {{"name", "f"}}}}}}}}}}, "content"},
      {{{"response_format", {{"type", {{"a", 1}}}}}}, "response_format"},
  };
  for (const auto& [extra, field] : cases) {
    auto r = chat(extra);
    ASSERT_FALSE(r.has_value()) << extra.dump();
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().message();
  }
}

// Parsing checks the fields; the grammar itself compiles when the request starts (a compile
// error is then the request's 400: tests/unit/api/structured_output_test.cc, tests/server).
TEST(OpenAIRequest, StructuredOutputsAreValidatedAndCarried) {
  auto js = chat({{"response_format",
                   {{"type", "json_schema"},
                    {"json_schema", {{"name", "a"}, {"schema", {{"type", "integer"}}}}}}}});
  ASSERT_TRUE(js.has_value()) << js.status().to_string();
  ASSERT_TRUE(js->params.structured_output);
  EXPECT_EQ(js->params.structured_output->kind, StructuredOutput::Kind::kJsonSchema);

  auto obj = chat({{"response_format", {{"type", "json_object"}}}});
  ASSERT_TRUE(obj.has_value());
  EXPECT_EQ(obj->params.structured_output->kind, StructuredOutput::Kind::kJsonObject);
  auto text = chat({{"response_format", {{"type", "text"}}}});
  ASSERT_TRUE(text.has_value());
  EXPECT_FALSE(text->params.structured_output);

  auto re = chat({{"structured_outputs", {{"regex", "[a-z]+"}}}});
  ASSERT_TRUE(re.has_value()) << re.status().to_string();
  EXPECT_EQ(re->params.structured_output->kind, StructuredOutput::Kind::kRegex);
  auto choice = chat({{"structured_outputs", {{"choice", {"yes", "no (maybe)"}}}}});
  ASSERT_TRUE(choice.has_value()) << choice.status().to_string();
  EXPECT_EQ(choice->params.structured_output->kind, StructuredOutput::Kind::kChoice);
  auto ebnf = chat({{"structured_outputs", {{"grammar", "root ::= \"a\" | \"b\""}}}});
  ASSERT_TRUE(ebnf.has_value()) << ebnf.status().to_string();

  const std::pair<json, std::string> bad[] = {
      {{{"response_format", {{"type", "xml"}}}}, "response_format.type"},
      {{{"structured_outputs", {{"regex", "a"}, {"choice", {"b"}}}}}, "exactly one"},
      {{{"structured_outputs", {{"whatever", 1}}}}, "structured_outputs"},
      {{{"guided_grammar", 7}}, "guided_grammar"},
  };
  for (const auto& [extra, field] : bad) {
    auto r = chat(extra);
    ASSERT_FALSE(r.has_value()) << extra.dump();
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().message();
  }
}

TEST(OpenAIRequest, CompletionPrompts) {
  auto text = parse_openai_body({{"prompt", "hello"}}, OpenAIEndpoint::kCompletions, {}, "m");
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(*text->prompt.text, "hello");
  auto ids = parse_openai_body({{"prompt", {1, 2}}}, OpenAIEndpoint::kCompletions, {}, "m");
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(ids->prompt.token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_FALSE(parse_openai_body({{"prompt", json::array()}}, OpenAIEndpoint::kCompletions, {}, "m")
                   .has_value());
  EXPECT_FALSE(
      parse_openai_body({{"prompt", 5}}, OpenAIEndpoint::kCompletions, {}, "m").has_value());
  EXPECT_FALSE(parse_openai_body(json::array(), OpenAIEndpoint::kCompletions, {}, "m").has_value());
}

}  // namespace
}  // namespace di::api
