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

// excludes: strings the free text of triggered_tags may not contain (tag contents may).
TEST(grammar_structural_tag, TriggeredTagsExcludes) {
  auto cg = compile(R"({"format": {"type": "triggered_tags", "triggers": ["<t"],
      "excludes": ["<|end|>", "bad"],
      "tags": [{"begin": "<t>", "content": {"type": "any_text"}, "end": "</t>"}]}})");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, "fine text <t>bad is fine here</t> and after"));
  EXPECT_FALSE(matches(cg, "this is bad"));
  EXPECT_FALSE(matches(cg, "x <|end|>"));
  EXPECT_FALSE(matches(cg,
                       "<t>x</t> ba"
                       "d"));  // also after a tag
  EXPECT_TRUE(matches(cg, "ba ad <|end|"));
}

// triggered_tags as a tag's content: free text and tags up to the tag's end, which closes it.
TEST(grammar_structural_tag, NestedTriggeredTags) {
  auto cg = compile(R"({"format": {"type": "sequence", "elements": [
      {"type": "tag", "begin": "<r>", "end": "</r>", "content": {"type": "triggered_tags",
       "triggers": ["<t"], "tags": [{"begin": "<t>", "end": "</t>",
                                     "content": {"type": "json_schema",
                                                 "json_schema": {"type": "integer"}}}]}},
      {"type": "const_string", "value": "!"}]}})");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, "<r></r>!"));
  EXPECT_TRUE(matches(cg, "<r>a <t>12</t> b <t>3</t></r>!"));
  EXPECT_FALSE(matches(cg, "<r>a <t>x</t></r>!"));  // the tag's content
  EXPECT_FALSE(matches(cg, "<r>a </r> b</r>!"));    // the first </r> ends the free text
  EXPECT_FALSE(matches(cg, "<r>a"));
  // stop_after_first inside a tag: one tag, then the end directly.
  auto once = compile(R"({"format": {"type": "tag", "begin": "<r>", "end": "</r>",
      "content": {"type": "triggered_tags", "triggers": ["<t"], "stop_after_first": true,
                  "at_least_one": true, "tags": [{"begin": "<t>", "end": "</t>",
                  "content": {"type": "const_string", "value": "1"}}]}}})");
  ASSERT_TRUE(once);
  EXPECT_TRUE(matches(once, "<r>x <t>1</t></r>"));
  EXPECT_FALSE(matches(once, "<r>x</r>"));  // at_least_one
  EXPECT_FALSE(matches(once, "<r><t>1</t> y</r>"));
  EXPECT_FALSE(matches(once, "<r><t>1</t><t>1</t></r>"));
}

TEST(grammar_structural_tag, TagsWithSeparator) {
  const std::string tags = R"("tags": [{"begin": "<a>", "end": "</a>",
      "content": {"type": "json_schema", "json_schema": {"enum": [1, 2]}}},
      {"begin": "<b>", "end": "</b>", "content": {"type": "const_string", "value": "x"}}])";
  auto top =
      compile(R"({"format": {"type": "tags_with_separator", "separator": ",", )" + tags + "}}");
  ASSERT_TRUE(top);
  EXPECT_TRUE(matches(top, ""));
  EXPECT_TRUE(matches(top, "<a>1</a>"));
  EXPECT_TRUE(matches(top, "<a>1</a>,<b>x</b>,<a>2</a>"));
  EXPECT_FALSE(matches(top, "<a>1</a>,"));
  EXPECT_FALSE(matches(top, "<a>1</a> <b>x</b>"));  // no other text
  EXPECT_FALSE(matches(top, "<a>3</a>"));
  auto one = compile(R"({"format": {"type": "tags_with_separator", "separator": ",",
      "at_least_one": true, "stop_after_first": true, )" +
                     tags + "}}");
  ASSERT_TRUE(one);
  EXPECT_FALSE(matches(one, ""));
  EXPECT_TRUE(matches(one, "<b>x</b>"));
  EXPECT_FALSE(matches(one, "<b>x</b>,<b>x</b>"));
  // Inside a tag: the tags, then the tag's end (read by the tags_with_separator).
  auto nested = compile(R"({"format": {"type": "tag", "begin": "[", "end": "]",
      "content": {"type": "tags_with_separator", "separator": ";", )" +
                        tags + "}}}");
  ASSERT_TRUE(nested);
  EXPECT_TRUE(matches(nested, "[]"));
  EXPECT_TRUE(matches(nested, "[<a>2</a>;<b>x</b>]"));
  EXPECT_FALSE(matches(nested, "[<a>2</a>;]"));
  EXPECT_FALSE(matches(nested, "[<a>2</a>]]"));
  // A separator equal to the end: one tag (xgrammar's rule, no ambiguity).
  auto same = compile(R"({"format": {"type": "tag", "begin": "[", "end": ";",
      "content": {"type": "tags_with_separator", "separator": ";", )" +
                      tags + "}}}");
  ASSERT_TRUE(same);
  EXPECT_TRUE(matches(same, "[<a>2</a>;"));
  EXPECT_FALSE(matches(same, "[<a>2</a>;<a>1</a>;"));
}

// any_text outside a tag runs to the end of the text (excludes apply); end arrays.
TEST(grammar_structural_tag, AnyTextAndEndArrays) {
  auto cg = compile(R"({"format": {"type": "sequence", "elements": [
      {"type": "tag", "begin": "<r>", "end": ["</r>", "</R>"],
       "content": {"type": "const_string", "value": "v"}},
      {"type": "any_text", "excludes": ["<r>"]}]}})");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, "<r>v</R> anything"));
  EXPECT_TRUE(matches(cg, "<r>v</r>"));
  EXPECT_FALSE(matches(cg, "<r>v</r> then <r>"));
  auto two = compile(R"({"format": {"type": "tag", "begin": "<r>", "end": ["</r>", "</R>"],
      "content": {"type": "any_text"}}})");
  ASSERT_TRUE(two);
  EXPECT_TRUE(matches(two, "<r>a b</R>"));
  EXPECT_FALSE(matches(two, "<r>a</R> b</r>"));
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
  EXPECT_NE(error_of(R"({"format": {"type": "dispatch", "rules": []}})")
                .find("format.rules: must be a non-empty array"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "sequence", "elements": [{"type": "triggered_tags",
                         "triggers": ["a"], "tags": [{"begin": "a", "content":
                         {"type": "const_string", "value": ""}, "end": ""}]},
                         {"type": "const_string", "value": "x"}]}})")
                .find("format.elements[0]: an unlimited format (any_text, triggered_tags, "
                      "tags_with_separator) must be the last element of a sequence"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "or", "elements": [{"type": "any_text"},
                         {"type": "const_string", "value": "x"}]}})")
                .find("format: mixes unlimited"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "tag", "begin": "<a>", "end": "",
                         "content": {"type": "any_text"}}})")
                .find("format.end: must be non-empty after unlimited content"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "triggered_tags", "triggers": ["<a"],
                         "excludes": ["x", ""], "tags": [{"begin": "<a>", "end": "</a>",
                         "content": {"type": "const_string", "value": "1"}}]}})")
                .find("format.excludes[1]: must be a non-empty string"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "tags_with_separator", "separator": 1, "tags":
                         [{"begin": "<a>", "end": "</a>", "content": {"type": "any_text"}}]}})")
                .find("format.separator: must be a string"),
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
