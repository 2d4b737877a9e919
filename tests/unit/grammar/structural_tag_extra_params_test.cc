// SPDX-License-Identifier: Apache-2.0
// Undeclared parameters in the structural tags' XML json_schema styles
// (json_schema/xml_parameters.cc): where additionalProperties allows them (absent, true, a
// schema), a parameter with an identifier name other than the declared ones and a value per that
// schema, raw or JSON as the style writes it; none where it is false.
#include <gtest/gtest.h>

#include "structural_tag_helper.h"

namespace di::grammar {
namespace {

using testing::matches;
using testing::styled;

std::string q(const std::string& key, const std::string& value) {
  return "<parameter=" + key + ">" + value + "</parameter>";
}

const char* kDeclared = R"("properties": {"city": {"type": "string"}, "days": {"type":
    "integer"}}, "required": ["city"])";

TEST(grammar_structural_tag_extra_params, AbsentOrTrueAllowsAnyRawValue) {
  for (const std::string ap : {"", R"(, "additionalProperties": true)"}) {
    auto cg = styled("qwen_xml", std::string(R"({"type": "object", )") + kDeclared + ap + "}");
    ASSERT_TRUE(cg);
    EXPECT_TRUE(matches(cg, q("city", "a") + q("note", "any <b>text</b")));
    EXPECT_TRUE(matches(cg, q("x_1", "[1, 2]") + "\n" + q("city", "a") + q("days", "2") +
                                q("_y", "") + q("cityx", "z") + q("cit", "z")));
    // A declared name takes its own schema only; names are identifiers.
    EXPECT_FALSE(matches(cg, q("city", "a") + q("days", "x")));
    EXPECT_FALSE(matches(cg, q("city", "a") + q("city", "b")));
    EXPECT_FALSE(matches(cg, q("city", "a") + q("1x", "b")));
    EXPECT_FALSE(matches(cg, q("city", "a") + q("a-b", "b")));
    EXPECT_FALSE(matches(cg, q("note", "x")));  // city is still required
  }
}

TEST(grammar_structural_tag_extra_params, SchemaValuesAndFalse) {
  auto typed = styled("minimax_xml", std::string(R"({"type": "object", )") + kDeclared +
                                         R"(, "additionalProperties": {"type": "integer"}})");
  ASSERT_TRUE(typed);
  const std::string p = "<parameter name=\"";
  EXPECT_TRUE(matches(typed, p + "city\">a</parameter>" + p + "n\"> 7 </parameter>"));
  EXPECT_FALSE(matches(typed, p + "city\">a</parameter>" + p + "n\">seven</parameter>"));
  auto strings = styled("glm_xml", std::string(R"({"type": "object", )") + kDeclared +
                                       R"(, "additionalProperties": {"type": "string"}})");
  ASSERT_TRUE(strings);
  EXPECT_TRUE(matches(strings,
                      "<arg_key>city</arg_key><arg_value>a</arg_value>"
                      "<arg_key>more</arg_key><arg_value>x < y</arg_value>"));
  auto closed = styled("qwen_xml", std::string(R"({"type": "object", )") + kDeclared +
                                       R"(, "additionalProperties": false})");
  ASSERT_TRUE(closed);
  EXPECT_TRUE(matches(closed, q("city", "a")));
  EXPECT_FALSE(matches(closed, q("city", "a") + q("note", "x")));
}

TEST(grammar_structural_tag_extra_params, DeepSeekAndKimiTypes) {
  auto ds = styled("deepseek_xml", std::string(R"({"type": "object", )") + kDeclared + "}");
  ASSERT_TRUE(ds);
  const std::string p =
      "<\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C"
      "parameter name=\"";
  const std::string c =
      "</\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C"
      "parameter>";
  EXPECT_TRUE(matches(ds, p + "city\" string=\"true\">a" + c + p + "n\" string=\"true\">x y" + c +
                              p + "m\" string=\"false\">{\"k\": [1]}" + c));
  EXPECT_FALSE(matches(ds, p + "city\" string=\"true\">a" + c + p + "m\" string=\"false\">{" + c));
  auto kimi = styled("kimi_k3_xml", std::string(R"({"type": "object", )") + kDeclared +
                                        R"(, "additionalProperties": {"type": "boolean"}})");
  ASSERT_TRUE(kimi);
  auto arg = [](const std::string& k, const std::string& t, const std::string& v) {
    return "<|open|>argument key=\"" + k + "\" type=\"" + t + "\"<|sep|>" + v +
           "<|close|>argument<|sep|>";
  };
  EXPECT_TRUE(matches(kimi, arg("city", "string", "a") + arg("ok", "boolean", "true")));
  EXPECT_FALSE(matches(kimi, arg("city", "string", "a") + arg("ok", "string", "true")));
  EXPECT_FALSE(matches(kimi, arg("city", "string", "a") + arg("ok", "boolean", "1")));
}

// Past the any-order bound (8 declared), the declared ones keep the schema's order and undeclared
// ones may come anywhere between them.
TEST(grammar_structural_tag_extra_params, FixedOrderPastTheBound) {
  std::string props;
  for (int i = 0; i < 10; ++i)
    props += std::string(i ? ", " : "") + "\"p" + std::to_string(i) + "\": {\"type\": \"integer\"}";
  auto cg = styled("qwen_xml", R"({"type": "object", "properties": {)" + props + R"(}, "required":
      ["p0", "p9"]})");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, q("x", "a") + q("p0", "1") + q("y", "b") + q("z", "c") + q("p3", "2") +
                              q("p9", "3") + q("w", "d")));
  EXPECT_FALSE(matches(cg, q("p9", "3") + q("p0", "1")));
  EXPECT_FALSE(matches(cg, q("p0", "1") + q("p9", "3") + q("p1", "1")));
  EXPECT_TRUE(matches(cg, q("p0", "1") + q("p10", "x") + q("p9", "3")));
  EXPECT_FALSE(matches(cg, q("p0", "1") + q("p1", "x") + q("p9", "3")));  // p1 is declared
}

}  // namespace
}  // namespace di::grammar
