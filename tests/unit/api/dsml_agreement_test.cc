// The structural tags' deepseek_xml style (grammar/json_schema/xml_parameters.cc) and the DSML
// tool-call grammar (api/tool_call_grammar.cc) agree on a call's parameters where they should:
// the same texts pass both, and ResponseParser reads them back as arguments valid against the
// schema (string="true" a raw string, string="false" JSON).
#include <gtest/gtest.h>

#include "api/tool_call_grammar.h"
#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/structural_tag/structural_tag.h"
#include "recipe/parse/response_parser.h"

namespace di::api {
namespace {

using nlohmann::json;
using OJson = nlohmann::ordered_json;

const char* kParams = R"({"type": "object", "properties": {
    "city": {"type": "string", "description": "a city"},
    "days": {"type": "integer", "minimum": 1, "maximum": 9},
    "unit": {"enum": ["c", "f"]}}, "required": ["city", "days"]})";

// Every byte is a token, so texts are checked byte by byte.
std::shared_ptr<const grammar::CompiledGrammar> compile(const Expected<grammar::Grammar>& g) {
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

std::string param(const std::string& key, bool str, const std::string& value) {
  return "<｜DSML｜ parameter name=\"" + key + "\" string=\"" + (str ? "true" : "false") + "\">" +
         value + "</｜DSML｜ parameter>\n";
}
std::string block(const std::string& params) {
  return "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n" + params +
         "</｜DSML｜ invoke>\n</｜DSML｜ calls>";
}

TEST(DsmlAgreement, DeepSeekXmlAndToolCallsAcceptAndParseTheSameParameters) {
  OJson tools = {{"tools", {{{"name", "get_weather"}, {"parameters", OJson::parse(kParams)}}}},
                 {"name", "get_weather"}};
  auto calls = compile(tool_call_grammar(tools));
  const std::string tag = std::string(R"({"format": {"type": "sequence", "elements": [
      {"type": "const_string", "value": "<｜DSML｜ calls>\n"},
      {"type": "tag", "begin": "<｜DSML｜ invoke name=\"get_weather\">\n", "end": "</｜DSML｜ invoke>",
       "content": {"type": "json_schema", "style": "deepseek_xml", "json_schema": )") +
                          kParams + R"(}},
      {"type": "const_string", "value": "\n</｜DSML｜ calls>"}]}})";
  auto styled = compile(grammar::structural_tag_to_grammar(tag));
  ASSERT_TRUE(calls && styled);
  const std::pair<std::string, const char*> good[] = {
      {param("city", true, "Paris <b>") + param("days", false, "3") + param("unit", true, "c"),
       R"({"city": "Paris <b>", "days": 3, "unit": "c"})"},
      {param("unit", false, "\"f\"") + param("days", false, " 9\n") +
           param("city", false, "\"Oslo\""),
       R"({"unit": "f", "days": 9, "city": "Oslo"})"},
  };
  for (const auto& [params, want] : good) {
    const std::string text = block(params);
    EXPECT_TRUE(matches(calls, text)) << text;
    EXPECT_TRUE(matches(styled, text)) << text;
    recipe::ResponseParser parser({false, {}});
    recipe::ParsedResponse parsed;
    recipe::accumulate(parsed, parser.push(text));
    recipe::accumulate(parsed, parser.finish());
    ASSERT_EQ(parsed.tool_calls.size(), 1u) << text;
    EXPECT_EQ(json::parse(parsed.tool_calls[0].arguments), json::parse(want));
  }
  // Both refuse: a number as a raw string, a padded raw enum value, a JSON value that is not a
  // string for a string, a missing required parameter, one written twice.
  for (const std::string& params :
       {param("city", true, "a") + param("days", true, "3"),
        param("city", true, "a") + param("days", false, "3") + param("unit", true, " c"),
        param("city", false, "12") + param("days", false, "3"), param("city", true, "a"),
        param("city", true, "a") + param("days", false, "3") + param("days", false, "4")}) {
    EXPECT_FALSE(matches(calls, block(params))) << params;
    EXPECT_FALSE(matches(styled, block(params))) << params;
  }
}

// Undeclared parameters (additionalProperties absent, true or a schema): deepseek_xml writes them
// with the same string="true|false" forms and ResponseParser reads them back the same way; the
// tool-call grammar never writes them (tool_choice keeps to declared parameters), and with
// additionalProperties false neither does deepseek_xml.
TEST(DsmlAgreement, UndeclaredParametersParseBackAsTheirForm) {
  auto styled_for = [](const std::string& schema) {
    return compile(grammar::structural_tag_to_grammar(
        std::string(R"({"format": {"type": "sequence", "elements": [
      {"type": "const_string", "value": "<｜DSML｜ calls>\n"},
      {"type": "tag", "begin": "<｜DSML｜ invoke name=\"get_weather\">\n", "end": "</｜DSML｜ invoke>",
       "content": {"type": "json_schema", "style": "deepseek_xml", "json_schema": )") +
        schema + R"(}},
      {"type": "const_string", "value": "\n</｜DSML｜ calls>"}]}})"));
  };
  OJson tools = {{"tools", {{{"name", "get_weather"}, {"parameters", OJson::parse(kParams)}}}},
                 {"name", "get_weather"}};
  auto calls = compile(tool_call_grammar(tools));
  auto open = styled_for(kParams);
  OJson closed_schema = OJson::parse(kParams);
  closed_schema["additionalProperties"] = false;
  auto closed = styled_for(closed_schema.dump());
  OJson typed_schema = OJson::parse(kParams);
  typed_schema["additionalProperties"] = {{"type", "integer"}};
  auto typed = styled_for(typed_schema.dump());
  ASSERT_TRUE(calls && open && closed && typed);
  const std::string text =
      block(param("city", true, "Rome") + param("note", true, "by <b>train</b>") +
            param("days", false, "2") + param("extra", false, "{\"k\": [1, null]}"));
  EXPECT_TRUE(matches(open, text));
  EXPECT_FALSE(matches(calls, text));
  EXPECT_FALSE(matches(closed, text));
  EXPECT_FALSE(matches(typed, text));  // note and extra are not integers
  recipe::ResponseParser parser({false, {}});
  recipe::ParsedResponse parsed;
  recipe::accumulate(parsed, parser.push(text));
  recipe::accumulate(parsed, parser.finish());
  ASSERT_EQ(parsed.tool_calls.size(), 1u);
  EXPECT_EQ(json::parse(parsed.tool_calls[0].arguments),
            json::parse(R"({"city": "Rome", "note": "by <b>train</b>", "days": 2,
                "extra": {"k": [1, null]}})"));
  const std::string numbers =
      block(param("city", true, "Rome") + param("n", false, "7") + param("days", false, "2"));
  EXPECT_TRUE(matches(typed, numbers));
  EXPECT_FALSE(matches(typed, block(param("city", true, "Rome") + param("n", true, "7"))));
  // An undeclared name is never a declared one: days keeps its own schema.
  EXPECT_FALSE(matches(open, block(param("city", true, "Rome") + param("days", true, "x"))));
}

}  // namespace
}  // namespace di::api
