// tool_choice (api/tool_choice.h) and the DSML tool-call grammar (api/tool_call_grammar.h):
// request parsing, its 400s, and the grammar's language against the response parser.
#include "api/tool_choice.h"

#include <gtest/gtest.h>

#include "api/openai_request.h"
#include "api/tool_call_grammar.h"
#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "recipe/parse/response_parser.h"

namespace di::api {
namespace {

using nlohmann::json;
using OJson = nlohmann::ordered_json;

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string", "description": "a city"},
                   "days": {"type": "integer", "minimum": 1, "maximum": 9},
                   "unit": {"enum": ["c", "f"]}},
    "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "ping"}}])";

Expected<OpenAIRequest> chat(json extra, bool with_tools = true) {
  json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  if (with_tools) body["tools"] = json::parse(kTools);
  body.update(extra);
  return parse_openai_body(body, OpenAIEndpoint::kChatCompletions, {}, "m");
}

TEST(ToolChoice, ModesBecomeStructuredOutputsOrParserFlags) {
  auto none = chat({{"tool_choice", "none"}});
  ASSERT_TRUE(none.has_value()) << none.status().message();
  EXPECT_FALSE(none->parse_tool_calls);
  EXPECT_FALSE(none->params.structured_output);
  EXPECT_EQ(none->prompt.chat->tools.size(), 2u);  // still rendered (vLLM >= 0.10)
  auto aut = chat({{"tool_choice", "auto"}});
  ASSERT_TRUE(aut.has_value());
  EXPECT_TRUE(aut->parse_tool_calls);
  EXPECT_FALSE(aut->params.structured_output);
  auto req = chat({{"tool_choice", "required"}});
  ASSERT_TRUE(req.has_value()) << req.status().message();
  ASSERT_TRUE(req->params.structured_output);
  EXPECT_EQ(req->params.structured_output->kind, StructuredOutput::Kind::kToolCalls);
  auto named =
      chat({{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  ASSERT_TRUE(named.has_value()) << named.status().message();
  EXPECT_EQ(OJson::parse(named->params.structured_output->text)["name"], "get_weather");
}

TEST(ToolChoice, BadValuesAre400sNamingTheField) {
  const std::pair<json, std::string> bad[] = {
      {{{"tool_choice", "sometimes"}}, "'sometimes' is not one of none, auto, required"},
      {{{"tool_choice", 3}}, "must be a string or an object"},
      {{{"tool_choice", {{"type", "function"}}}}, "body.tool_choice: must be none, auto"},
      {{{"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
       "function 'nope' is not among the tools"},
      {{{"tool_choice", "required"}, {"structured_outputs", {{"regex", "a"}}}},
       "cannot be combined"},
  };
  for (const auto& [extra, want] : bad) {
    auto r = chat(extra);
    ASSERT_FALSE(r.has_value()) << extra.dump();
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  for (const json& v : {json("no"), json(0), json::array()}) {
    auto r = chat({{"parallel_tool_calls", v}});
    ASSERT_FALSE(r.has_value()) << v.dump();
    EXPECT_EQ(r.status().message(), "body.parallel_tool_calls: must be a boolean");
  }
  auto no_tools = chat({{"tool_choice", "required"}}, /*with_tools=*/false);
  ASSERT_FALSE(no_tools.has_value());
  EXPECT_NE(no_tools.status().message().find("only allowed when tools are given"),
            std::string::npos);
}

// A byte vocabulary: every byte is a token, so strings are checked byte by byte.
std::shared_ptr<const grammar::CompiledGrammar> compile(const OJson& spec) {
  auto g = tool_call_grammar(spec);
  EXPECT_TRUE(g.has_value()) << g.status().message();
  if (!g) return nullptr;
  grammar::Vocabulary v;
  v.token_bytes.push_back("</s>");
  v.special_ids = {0};
  v.eos_id = 0;
  for (int b = 1; b < 256; ++b) v.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  auto cg = grammar::CompiledGrammar::create(*g, grammar::TokenTrie::build(v));
  EXPECT_TRUE(cg.has_value());
  return cg ? *cg : nullptr;
}

bool matches(const std::shared_ptr<const grammar::CompiledGrammar>& cg, const std::string& s) {
  grammar::GrammarMatcher m(cg);
  return m.accept_bytes(s) && m.can_terminate();
}

OJson spec_of(const std::optional<std::string>& name) {
  OJson spec = {{"tools", OJson::array()}};
  for (const auto& t : OJson::parse(kTools)) {
    OJson e = {{"name", t["function"]["name"]}};
    if (t["function"].contains("parameters")) e["parameters"] = t["function"]["parameters"];
    spec["tools"].push_back(e);
  }
  spec["name"] = name ? OJson(*name) : OJson();
  return spec;
}

std::string call(const std::string& name, const std::string& params) {
  return "<｜DSML｜ invoke name=\"" + name + "\">\n" + params + "</｜DSML｜ invoke>";
}
std::string param(const std::string& key, bool str, const std::string& value) {
  return "<｜DSML｜ parameter name=\"" + key + "\" string=\"" + (str ? "true" : "false") + "\">" +
         value + "</｜DSML｜ parameter>\n";
}
std::string block(const std::string& calls) {
  return "<｜DSML｜ calls>\n" + calls + "\n</｜DSML｜ calls>";
}

TEST(ToolCallGrammar, ForcesParsableCallsWithValidArguments) {
  auto required = compile(spec_of(std::nullopt));
  ASSERT_TRUE(required);
  const std::string weather =
      call("get_weather", param("city", true, "Paris <b>") + param("days", false, "3"));
  const std::string text = block(weather + "\n" + call("ping", ""));
  EXPECT_TRUE(matches(required, text));
  // The response parser reads it back as two calls with the right arguments.
  recipe::ResponseParser parser({false, {}});
  recipe::ParsedResponse parsed;
  recipe::accumulate(parsed, parser.push(text));
  recipe::accumulate(parsed, parser.finish());
  ASSERT_EQ(parsed.tool_calls.size(), 2u);
  EXPECT_EQ(json::parse(parsed.tool_calls[0].arguments),
            json::parse(R"({"city": "Paris <b>", "days": 3})"));
  EXPECT_EQ(parsed.tool_calls[1].name, "ping");

  EXPECT_TRUE(matches(required, block(call("get_weather", param("city", false, "\"x\"") +
                                                              param("days", false, "9") +
                                                              param("unit", false, "\"f\"")))));
  // Parameters in any order, each at most once, the required ones present.
  const std::string reordered =
      call("get_weather",
           param("unit", false, "\"c\"") + param("days", false, "2") + param("city", true, "Oslo"));
  EXPECT_TRUE(matches(required, block(reordered)));
  {
    recipe::ResponseParser p2({false, {}});
    recipe::ParsedResponse r2;
    recipe::accumulate(r2, p2.push(block(reordered)));
    recipe::accumulate(r2, p2.finish());
    ASSERT_EQ(r2.tool_calls.size(), 1u);
    EXPECT_EQ(json::parse(r2.tool_calls[0].arguments),
              json::parse(R"({"unit": "c", "days": 2, "city": "Oslo"})"));
  }
  EXPECT_FALSE(matches(
      required, block(call("get_weather", param("days", false, "2") + param("city", true, "a") +
                                              param("city", true, "b")))));
  EXPECT_FALSE(matches(required, block(call("get_weather", param("unit", false, "\"c\"") +
                                                               param("days", false, "2")))));
  EXPECT_FALSE(matches(required, ""));  // a call is required
  EXPECT_FALSE(matches(required, block(call("get_weather", param("city", true, "x")))));  // days
  EXPECT_FALSE(matches(
      required, block(call("get_weather", param("city", true, "x") + param("days", false, "10")))));
  EXPECT_FALSE(matches(
      required, block(call("get_weather", param("city", true, "x") + param("days", true, "3")))));
  EXPECT_FALSE(matches(required, block(call("get_weather", param("city", true, "a｜b") +
                                                               param("days", false, "3")))));
  EXPECT_FALSE(matches(required, block(call("other", ""))));

  auto named = compile(spec_of("ping"));
  ASSERT_TRUE(named);
  EXPECT_TRUE(matches(named, block(call("ping", ""))));
  EXPECT_FALSE(matches(named, block(call("ping", "") + "\n" + call("ping", ""))));  // one call
  EXPECT_FALSE(matches(named, block(weather)));
}

// parallel_tool_calls (OpenAI): false = at most one call; true/absent = as before.
TEST(ToolChoice, ParallelToolCallsFalseAllowsOneCall) {
  auto spec_of_request = [](const Expected<OpenAIRequest>& r) {
    EXPECT_TRUE(r.has_value()) << r.status().message();
    return r && r->params.structured_output ? OJson::parse(r->params.structured_output->text)
                                            : OJson();
  };
  // required + false: a single call.
  OJson req = spec_of_request(chat({{"tool_choice", "required"}, {"parallel_tool_calls", false}}));
  EXPECT_EQ(req["single"], true);
  EXPECT_FALSE(req.contains("optional"));
  EXPECT_FALSE(spec_of_request(chat({{"tool_choice", "required"}, {"parallel_tool_calls", true}}))
                   .contains("single"));
  // auto (or absent) + false: an optional single-call block.
  for (const json& extra : {json{{"tool_choice", "auto"}, {"parallel_tool_calls", false}},
                            json{{"parallel_tool_calls", false}}}) {
    OJson aut = spec_of_request(chat(extra));
    EXPECT_EQ(aut["single"], true) << extra.dump();
    EXPECT_EQ(aut["optional"], true);
  }
  // Nothing changes for true, none, no tools, or next to another structured output.
  EXPECT_TRUE(spec_of_request(chat({{"parallel_tool_calls", true}})).is_null());
  EXPECT_TRUE(
      spec_of_request(chat({{"tool_choice", "none"}, {"parallel_tool_calls", false}})).is_null());
  EXPECT_TRUE(spec_of_request(chat({{"parallel_tool_calls", false}}, false)).is_null());
  auto with_regex =
      chat({{"parallel_tool_calls", false}, {"structured_outputs", {{"regex", "a+"}}}});
  ASSERT_TRUE(with_regex.has_value()) << with_regex.status().message();
  EXPECT_EQ(with_regex->params.structured_output->kind, StructuredOutput::Kind::kRegex);
  EXPECT_EQ(with_regex->max_tool_calls, 1);  // the reply keeps its first call only
  for (const json& rf :
       {json{{"type", "json_object"}},
        json{{"type", "json_schema"},
             {"json_schema", {{"name", "x"}, {"schema", {{"type", "object"}}}}}}}) {
    auto with_format =
        chat({{"tool_choice", "auto"}, {"parallel_tool_calls", false}, {"response_format", rf}});
    ASSERT_TRUE(with_format.has_value()) << with_format.status().message();
    EXPECT_NE(with_format->params.structured_output->kind, StructuredOutput::Kind::kToolCalls);
    EXPECT_EQ(with_format->max_tool_calls, 1);
  }
  EXPECT_EQ(chat({{"parallel_tool_calls", true}})->max_tool_calls, -1);
  EXPECT_EQ(chat(json::object())->max_tool_calls, -1);
  auto named = chat({{"tool_choice", {{"type", "function"}, {"function", {{"name", "ping"}}}}},
                     {"parallel_tool_calls", false}});
  EXPECT_EQ(spec_of_request(named)["name"], "ping");

  // The grammars: required + single = exactly one call; auto + single = free text with at most
  // one block of one call, which ends the reply.
  OJson one = spec_of(std::nullopt);
  one["single"] = true;
  auto single = compile(one);
  ASSERT_TRUE(single);
  const std::string ping = call("ping", "");
  EXPECT_TRUE(matches(single, block(ping)));
  EXPECT_FALSE(matches(single, block(ping + "\n" + ping)));
  one["optional"] = true;
  auto optional = compile(one);
  ASSERT_TRUE(optional);
  EXPECT_TRUE(matches(optional, ""));
  EXPECT_TRUE(matches(optional, "Plain answer, no tools."));
  EXPECT_TRUE(matches(optional, "Let me check. " + block(ping)));
  EXPECT_FALSE(matches(optional, "x " + block(ping + "\n" + ping)));
  EXPECT_FALSE(matches(optional, block(ping) + " more"));
  EXPECT_FALSE(matches(optional, block(ping) + block(ping)));
  EXPECT_FALSE(matches(optional, "<｜DSML｜ invoke name=\"ping\">"));  // a block, not free text
  // With auto, a tool whose schema DSML cannot carry takes any parameters (auto never checked
  // arguments): no 400 for parallel_tool_calls false.
  OJson odd = {{"tools", {{{"name", "f"}, {"parameters", {{"anyOf", OJson::array()}}}}}},
               {"name", nullptr},
               {"single", true},
               {"optional", true}};
  auto loose = compile(odd);
  ASSERT_TRUE(loose);
  const std::string any = call("f", param("x y", false, "[1, 2") + param("z", true, "free <b>"));
  EXPECT_TRUE(matches(loose, "ok " + block(any)));
  EXPECT_FALSE(matches(loose, "ok " + block(any + "\n" + any)));
  EXPECT_FALSE(matches(loose, block(call("f", param("x", true, "a｜b")))));
  odd.erase("optional");
  EXPECT_FALSE(tool_call_grammar(odd).has_value());  // required: still a 400
  // The parser reads the allowed reply as content plus one call.
  recipe::ResponseParser parser({false, {}});
  recipe::ParsedResponse parsed;
  recipe::accumulate(parsed, parser.push("Let me check. " + block(ping)));
  recipe::accumulate(parsed, parser.finish());
  ASSERT_EQ(parsed.tool_calls.size(), 1u);
  EXPECT_EQ(parsed.tool_calls[0].name, "ping");
}

// tool_choice "none": the same DSML block stays content (vLLM does not parse calls then).
TEST(ToolChoice, NoneLeavesDsmlMarkupAsContent) {
  const std::string text = "ok " + block(call("ping", ""));
  for (const bool parse : {true, false}) {
    recipe::ResponseParser parser({false, {}, parse});
    recipe::ParsedResponse parsed;
    recipe::accumulate(parsed, parser.push(text));
    recipe::accumulate(parsed, parser.finish());
    EXPECT_EQ(parsed.tool_calls.size(), parse ? 1u : 0u);
    EXPECT_EQ(parsed.content, parse ? "ok " : text);
  }
}

TEST(ToolCallGrammar, SchemasThatCannotBeDsmlAreErrors) {
  OJson spec = {{"tools", {{{"name", "f"}, {"parameters", {{"anyOf", OJson::array()}}}}}}};
  auto g = tool_call_grammar(spec);
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.status().message().find("function 'f': parameters keyword 'anyOf'"),
            std::string::npos);
  spec = {
      {"tools", {{{"name", "f"}, {"parameters", {{"properties", {{"a<b", OJson::object()}}}}}}}}};
  g = tool_call_grammar(spec);
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.status().message().find("parameter name 'a<b'"), std::string::npos);
  spec = {{"tools", {{{"name", "f"}, {"parameters", {{"required", {"x"}}}}}}}};
  g = tool_call_grammar(spec);
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.status().message().find("required parameter 'x'"), std::string::npos);
}

}  // namespace
}  // namespace di::api
