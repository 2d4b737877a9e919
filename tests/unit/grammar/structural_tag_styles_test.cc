// SPDX-License-Identifier: Apache-2.0
// Structural tags' XML json_schema styles (json_schema/xml_parameters.cc: minimax_xml, glm_xml,
// deepseek_xml; qwen_xml is in structural_tag_formats_test.cc) and any_text / any_tokens bounds
// (max_chars, max_tokens): what they accept, and a 400 naming the field where they cannot.
#include <gtest/gtest.h>

#include "mask_walk.h"
#include "structural_tag_helper.h"

namespace di::grammar {
namespace {

using testing::compile_tag;
using testing::matches;
using testing::small_trie;
using testing::tag_error;

const char* kSchema = R"({"type": "object", "properties": {"city": {"type": "string"},
    "days": {"type": "integer"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city", "days"]})";

std::shared_ptr<const CompiledGrammar> styled(const std::string& style) {
  return compile_tag(testing::styled_tag(style, kSchema));
}

TEST(grammar_structural_tag_styles, MiniMaxXml) {
  auto cg = styled("minimax_xml");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, R"(<parameter name="city">Bob</parameter><parameter name="days">)"
                          "\t100\n</parameter>"));
  EXPECT_TRUE(matches(cg,
                      "<parameter name=\"days\">3</parameter>\n<parameter name=\"unit\">"
                      "\nf\n</parameter>\n<parameter name=\"city\"><b>x</b></parameter>"));
  EXPECT_FALSE(matches(cg, R"(<parameter name="city">Bob</parameter>)"));  // days required
  EXPECT_FALSE(matches(cg, R"(<parameter name="city">a</parameter><parameter name="days">x)"
                           "</parameter>"));
  EXPECT_FALSE(matches(cg, R"(<parameter name="city">a</parameter><parameter name="days">1)"
                           R"(</parameter><parameter name="unit">"c"</parameter>)"));  // raw
  EXPECT_FALSE(matches(cg, "<parameter=city>a</parameter><parameter=days>1</parameter>"));
  EXPECT_FALSE(matches(cg, R"(<parameter name="city">a</parameter><parameter name="days">1)"
                           R"(</parameter><parameter name="days">2</parameter>)"));
}

TEST(grammar_structural_tag_styles, GlmXml) {
  auto cg = styled("glm_xml");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg,
                      "<arg_key>city</arg_key><arg_value>Bob</arg_value>"
                      "<arg_key>days</arg_key><arg_value>100</arg_value>"));
  EXPECT_TRUE(matches(cg,
                      "<arg_key>days</arg_key>\n<arg_value> 2 </arg_value>\n"
                      "<arg_key>city</arg_key>\n<arg_value>a<b</arg_value>"));
  EXPECT_FALSE(matches(cg, "<arg_key>city</arg_key><arg_value>Bob</arg_value>"));
  EXPECT_FALSE(matches(cg, "<parameter=city>Bob</parameter><parameter=days>100</parameter>"));
  EXPECT_FALSE(matches(cg,
                       "<arg_key>city</arg_key><arg_value>a</arg_value>b</arg_value>"
                       "<arg_key>days</arg_key><arg_value>1</arg_value>"));
}

// deepseek_xml: string="true" is a raw string, string="false" JSON (as ResponseParser reads
// them; the api tests parse these texts back), either tag spelling.
TEST(grammar_structural_tag_styles, DeepSeekXml) {
  auto cg = styled("deepseek_xml");
  ASSERT_TRUE(cg);
  const std::string p =
      "<\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C"
      "parameter name=\"";
  const std::string c =
      "</\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C"
      "parameter>";
  const std::string sp =
      "<\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C"
      " parameter name=\"";
  const std::string sc =
      "</\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C"
      " parameter>";
  EXPECT_TRUE(matches(
      cg, p + "city\" string=\"true\">Bob" + c + p + "days\" string=\"false\">" + "\t100\n" + c));
  EXPECT_TRUE(matches(cg, sp + "days\" string=\"false\">3" + sc + "\n" + sp +
                              "unit\" string=\"true\">c" + sc + "\n" + sp +
                              "city\" string=\"false\">\"New \\\"York\\\"\"" + sc));
  EXPECT_TRUE(matches(cg, p + "city\" string=\"true\"><html lang=\"en\">" + c + p +
                              "days\" string=\"false\">1" + c + p +
                              "unit\" string=\"false\">"
                              "\"f\"" +
                              c));
  // The attribute goes with the value's form.
  EXPECT_FALSE(
      matches(cg, p + "city\" string=\"true\">Bob" + c + p + "days\" string=\"true\">1" + c));
  EXPECT_FALSE(
      matches(cg, p + "city\" string=\"false\">Bob" + c + p + "days\" string=\"false\">1" + c));
  // A raw enum value is written exactly (the parser does not trim string="true").
  EXPECT_FALSE(matches(cg, p + "city\" string=\"true\">B" + c + p + "days\" string=\"false\">1" +
                               c + p + "unit\" string=\"true\"> c" + c));
  EXPECT_FALSE(matches(cg, p + "city\" string=\"true\">B" + c));  // days required
  EXPECT_FALSE(matches(
      cg, p + "city\" string=\"true\">a" + c + "b" + c + p + "days\" string=\"false\">1" + c));
}

// Constrained strings are raw text where no text they allow holds '<' (anchored pattern,
// format, a minLength), or with maxLength alone any text of that length up to the closing tag;
// elsewhere (an unanchored pattern) JSON.
TEST(grammar_structural_tag_styles, ConstrainedStringsAreRawWhereSafe) {
  const std::string schema = R"({"type": "object", "properties": {
      "code": {"type": "string", "pattern": "^[A-Z]{2}$"}, "d": {"type": "string", "format":
      "date"}, "n": {"type": "string", "maxLength": 3}, "free": {"type": "string", "pattern":
      "a"}}, "required": ["code"]})";
  auto mm =
      compile_tag(R"({"format": {"type": "json_schema", "style": "minimax_xml", "json_schema": )" +
                  schema + "}}");
  ASSERT_TRUE(mm);
  const std::string p = "<parameter name=\"";
  EXPECT_TRUE(matches(mm, p + "code\">AB</parameter>" + p + "d\">\n2024-02-29\n</parameter>" + p +
                              "n\">x y</parameter>" + p + "free\">\"zaz\"</parameter>"));
  EXPECT_FALSE(matches(mm, p + "code\">\"AB\"</parameter>"));
  EXPECT_FALSE(matches(mm, p + "code\">ABC</parameter>"));
  EXPECT_FALSE(matches(mm, p + "code\">AB</parameter>" + p + "n\">abcd</parameter>"));
  // maxLength alone: up to 3 code points of any text, closed by the first closing tag (since
  // grammar11 a bounded TagDispatch: '<' may appear, as in xgrammar; "a<" is two).
  EXPECT_TRUE(matches(mm, p + "code\">AB</parameter>" + p + "n\">a<\xC3\xA9</parameter>"));
  EXPECT_FALSE(matches(mm, p + "code\">AB</parameter>" + p + "n\">a</x</parameter>"));
  EXPECT_FALSE(matches(mm, p + "code\">AB</parameter>" + p + "n\">a</parameter>b</parameter>"));
  EXPECT_FALSE(matches(mm, p + "code\">AB</parameter>" + p + "free\">zaz</parameter>"));
  auto ds =
      compile_tag(R"({"format": {"type": "json_schema", "style": "deepseek_xml", "json_schema": )" +
                  schema + "}}");
  ASSERT_TRUE(ds);
  const std::string q =
      "<\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C"
      "parameter name=\"";
  const std::string c =
      "</\xEF\xBD\x9C"
      "DSML\xEF\xBD\x9C"
      "parameter>";
  EXPECT_TRUE(matches(ds, q + "code\" string=\"true\">AB" + c));
  EXPECT_TRUE(matches(ds, q + "code\" string=\"false\">\"AB\"" + c));
  EXPECT_FALSE(matches(ds, q + "code\" string=\"true\"> AB" + c));
}

TEST(grammar_structural_tag_styles, StyleErrorsNameTheField) {
  EXPECT_NE(tag_error(R"({"format": {"type": "json_schema", "style": "kimi_xml",
      "json_schema": {"type": "object"}}})")
                .find("format.style: 'kimi_xml' is not supported"),
            std::string::npos);
  EXPECT_NE(tag_error(R"({"format": {"type": "json_schema", "style": "deepseek_xml",
      "json_schema": {"type": "object", "anyOf": [{}]}}})")
                .find("deepseek_xml: keyword 'anyOf'"),
            std::string::npos);
  EXPECT_NE(tag_error(R"({"format": {"type": "json_schema", "style": "minimax_xml",
      "json_schema": {"type": "object", "properties": {"a\"b": {}}}}})")
                .find("minimax_xml: property name 'a\"b'"),
            std::string::npos);
  EXPECT_NE(tag_error(R"({"format": {"type": "json_schema", "style": "glm_xml",
      "json_schema": {"type": "object", "properties": {"a": {"type": "strin"}}}}})")
                .find("format.json_schema"),
            std::string::npos);
}

bool walk_checking_masks(const std::shared_ptr<const CompiledGrammar>& cg, std::string text) {
  return testing::walk_checking_masks(cg, *small_trie(), std::move(text));
}

TEST(grammar_structural_tag_styles, AnyTextMaxChars) {
  // At the end of the text: at most 3 code points (U+00E9 is one).
  auto top = compile_tag(R"({"format": {"type": "any_text", "max_chars": 3}})");
  ASSERT_TRUE(top);
  EXPECT_TRUE(matches(top, ""));
  EXPECT_TRUE(matches(top, "a\xC3\xA9z"));
  EXPECT_FALSE(matches(top, "abcd"));
  // Well-formed UTF-8 only: stray continuation bytes would be characters the count misses.
  EXPECT_FALSE(matches(top, "a\x80\x80\x80\x80"));
  EXPECT_FALSE(matches(top, "\xC3"));
  // In a tag: the end is not counted, an end string spans the limit, excludes hold.
  auto tag = compile_tag(R"({"format": {"type": "tag", "begin": "<t>", "end": "</t>", "content":
      {"type": "any_text", "excludes": ["xy"], "max_chars": 4}}})");
  ASSERT_TRUE(tag);
  EXPECT_TRUE(matches(tag, "<t></t>"));
  EXPECT_TRUE(matches(tag, "<t>abcd</t>"));
  EXPECT_TRUE(matches(tag, "<t><</t>"));
  EXPECT_FALSE(matches(tag, "<t>abcde</t>"));
  EXPECT_FALSE(matches(tag, "<t>axy</t>"));
  EXPECT_FALSE(matches(tag, "<t>ab</t>c</t>"));
  // Masks far from the bound come from a twin state (nfa.h MaskTwin); near it they count.
  auto longer = compile_tag(R"({"format": {"type": "tag", "begin": "<t>", "end": "</t>", "content":
      {"type": "any_text", "excludes": ["xy"], "max_chars": 12}}})");
  ASSERT_TRUE(longer);
  EXPECT_TRUE(walk_checking_masks(longer,
                                  "<t>abcaaab\xC3\xA9"
                                  "ba x</t>"));
  EXPECT_TRUE(walk_checking_masks(longer, "<t>abcaaabcaaab</t>"));
  EXPECT_FALSE(walk_checking_masks(longer, "<t>abcaaabcaaabc</t>"));
  // xgrammar's example: the end string also excluded (the end wins where both complete).
  auto think = compile_tag(R"({"format": {"type": "tag", "begin": "<think>", "end": "</think>",
      "content": {"type": "any_text", "excludes": ["</think>"], "max_chars": 5}}})");
  ASSERT_TRUE(think);
  EXPECT_TRUE(matches(think, "<think>a</b></think>"));
  EXPECT_FALSE(matches(think, "<think>a</b>c</think>"));
  auto zero = compile_tag(R"({"format": {"type": "tag", "begin": "<t>", "end": "</t>", "content":
      {"type": "any_text", "max_chars": 0}}})");
  ASSERT_TRUE(zero);
  EXPECT_TRUE(matches(zero, "<t></t>"));
  EXPECT_FALSE(matches(zero, "<t>a</t>"));
  EXPECT_NE(tag_error(R"({"format": {"type": "any_text", "max_chars": -1}})")
                .find("format.max_chars: must be null or an integer"),
            std::string::npos);
  EXPECT_NE(tag_error(R"({"format": {"type": "tag", "begin": "<t>", "end": "</think>",
      "content": {"type": "any_text", "max_chars": 100000}}})")
                .find("format.content.max_chars: 100000 cannot be enforced"),
            std::string::npos);
}

TEST(grammar_structural_tag_styles, MaxTokens) {
  const int32_t a = small_trie()->find_token("a");
  ASSERT_GE(a, 0);
  auto any = compile_tag(R"({"format": {"type": "any_tokens", "max_tokens": 2}})");
  ASSERT_TRUE(any);
  GrammarMatcher m(any);
  EXPECT_TRUE(m.accept_token(a));
  EXPECT_TRUE(m.accept_token(a));
  EXPECT_FALSE(m.accept_token(a));
  EXPECT_TRUE(m.can_terminate());
  auto text = compile_tag(R"({"format": {"type": "any_text", "max_tokens": 1}})");
  ASSERT_TRUE(text);
  GrammarMatcher t(text);
  EXPECT_TRUE(t.accept_token(a));
  EXPECT_FALSE(t.accept_token(a));
  EXPECT_NE(tag_error(R"({"format": {"type": "tag", "begin": "<t>", "end": "</t>", "content":
      {"type": "any_text", "max_tokens": 5}}})")
                .find("format.content.max_tokens: cannot be enforced next to an enclosing end"),
            std::string::npos);
  EXPECT_NE(tag_error(R"({"format": {"type": "any_tokens", "max_tokens": 20000}})")
                .find("format.max_tokens: above 10000"),
            std::string::npos);
  EXPECT_NE(tag_error(R"({"format": {"type": "any_tokens", "max_tokens": "3"}})")
                .find("format.max_tokens: must be null or an integer"),
            std::string::npos);
}

}  // namespace
}  // namespace di::grammar
