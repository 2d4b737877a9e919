// SPDX-License-Identifier: Apache-2.0
// Structural tags (structural_tag/structural_tag.h): both spellings, JSON content, errors.
#include "grammar/structural_tag/structural_tag.h"

#include <gtest/gtest.h>

#include "test_vocab.h"

namespace di::grammar {
namespace {

using testing::matches;
using testing::small_vocab;

std::shared_ptr<const CompiledGrammar> compile(const std::string& json) {
  auto g = structural_tag_to_grammar(json);
  EXPECT_TRUE(g.has_value()) << g.status().message();
  if (!g) return nullptr;
  auto cg = CompiledGrammar::create(*g, TokenTrie::build(small_vocab()));
  EXPECT_TRUE(cg.has_value());
  return cg ? *cg : nullptr;
}

std::string error_of(const std::string& json) {
  auto g = structural_tag_to_grammar(json);
  return g ? "" : g.status().message();
}

constexpr const char* kLegacy = R"({"type": "structural_tag",
  "structures": [{"begin": "<f=a>", "schema": {"type": "object", "properties":
      {"x": {"type": "integer"}}, "required": ["x"]}, "end": "</f>"},
                 {"begin": "<f=b>", "schema": {"type": "string"}, "end": "</f>"}],
  "triggers": ["<f="]})";

TEST(grammar_structural_tag, LegacyStructuresAndTriggers) {
  auto cg = compile(kLegacy);
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, ""));
  EXPECT_TRUE(matches(cg, "plain text < f = not a trigger"));
  EXPECT_TRUE(matches(cg, "call <f=a>{\"x\": 12}</f> and <f=b>\"s\"</f> done"));
  EXPECT_TRUE(matches(cg, "<f=a>{\"x\":1}</f><f=a>{\"x\":2}</f>"));
  EXPECT_FALSE(matches(cg, "<f=c>"));                // the trigger starts no structure
  EXPECT_FALSE(matches(cg, "<f=a>{\"y\": 1}</f>"));  // schema violated
  EXPECT_FALSE(matches(cg, "<f=a>{\"x\": 1}"));      // unfinished: no end
  EXPECT_FALSE(matches(cg, "<f=b>\"s\"</g>"));       // wrong end
  GrammarMatcher m(cg);
  ASSERT_TRUE(m.accept_bytes("text <f"));
  EXPECT_EQ(m.find_jump_forward_bytes(), "");  // "<f" may still be free text
  ASSERT_TRUE(m.accept_bytes("="));
  EXPECT_FALSE(m.can_terminate());  // a trigger must continue as a begin
}

TEST(grammar_structural_tag, FormatTree) {
  auto cg = compile(R"({"type": "structural_tag", "format": {"type": "triggered_tags",
      "triggers": ["<t"], "at_least_one": true, "stop_after_first": true,
      "tags": [{"type": "tag", "begin": "<t1>", "end": "</t>",
                "content": {"type": "sequence", "elements": [
                    {"type": "const_string", "value": "v="},
                    {"type": "json_schema", "json_schema": {"enum": [1, 2]}}]}},
               {"begin": "<t2>", "end": "</t>", "content": {"type": "or", "elements": [
                    {"type": "const_string", "value": "yes"},
                    {"type": "const_string", "value": "no"}]}}]}})");
  ASSERT_TRUE(cg);
  EXPECT_FALSE(matches(cg, "text only"));  // at_least_one
  EXPECT_TRUE(matches(cg, "x <t1>v=2</t>"));
  EXPECT_TRUE(matches(cg, "<t2>no</t>"));
  EXPECT_FALSE(matches(cg, "<t2>no</t> more"));  // stop_after_first
  EXPECT_FALSE(matches(cg, "<t1>v=3</t>"));
}

TEST(grammar_structural_tag, AnyTextContentEndsAtTheEndString) {
  auto cg = compile(R"({"type": "structural_tag", "format": {"type": "sequence", "elements": [
      {"type": "tag", "begin": "<r>", "content": {"type": "any_text"}, "end": "</r>"},
      {"type": "const_string", "value": "!"}]}})");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, "<r>any < text</r>!"));
  EXPECT_FALSE(matches(cg, "<r>a</r>b</r>!"));  // the first </r> closes the tag
}

TEST(grammar_structural_tag, ErrorsNameTheField) {
  EXPECT_NE(error_of("[1]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "structural_tag"})").find("needs 'format'"), std::string::npos);
  EXPECT_NE(error_of(R"({"structures": [{"begin": "<a>", "schema": {}, "end": "x"}],
                         "triggers": ["<b"]})")
                .find("structures[0].begin: '<a>' must start with one of the triggers"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"structures": [{"begin": "<a>", "schema": {}, "end": "x"}],
                         "triggers": ["<a", "<z"]})")
                .find("triggers[1]: '<z' starts no tag"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "regex", "pattern": "a"}})")
                .find("format.type: 'regex' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "sequence", "elements": [{"type": "triggered_tags",
                         "triggers": ["a"], "tags": [{"begin": "a", "content":
                         {"type": "const_string", "value": ""}, "end": ""}]}]}})")
                .find("format.elements[0]: triggered_tags is supported only as the root"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "json_schema", "json_schema": {"type": "nope"}}})")
                .find("format.json_schema:"),
            std::string::npos);
  std::string deep = R"({"type": "const_string", "value": "x"})";
  for (int i = 0; i < 100; ++i) deep = R"({"type": "sequence", "elements": [)" + deep + "]}";
  EXPECT_NE(error_of(R"({"format": )" + deep + "}").find("nested deeper than 64"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "tag", "begin": 1, "content": {}, "end": ""}})")
                .find("format.begin: must be a string"),
            std::string::npos);
}

}  // namespace
}  // namespace di::grammar
