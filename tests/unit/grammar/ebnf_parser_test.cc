// SPDX-License-Identifier: Apache-2.0
#include "grammar/ebnf/ebnf_parser.h"

#include <gtest/gtest.h>

#include "test_vocab.h"

namespace di::grammar {
namespace {

using testing::compile_ebnf;
using testing::matches;
using testing::small_vocab;

TEST(grammar_ebnf, LiteralsClassesRepetition) {
  auto cg = compile_ebnf(R"G(root ::= "a" [0-9]+ ("x" | "y"){2,3} [^] # comment
)G",
                         small_vocab());
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, "a1xyz"));
  EXPECT_TRUE(matches(cg, "a12yyx\n"));
  EXPECT_FALSE(matches(cg, "a1x\n"));
  EXPECT_FALSE(matches(cg, "a1xyxyz"));
}

TEST(grammar_ebnf, RecursionLeftAndRight) {
  auto cg = compile_ebnf(R"G(
root ::= expr
expr ::= expr "+" term | term
term ::= "(" expr ")" | [0-9]
)G",
                         small_vocab());
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, "1+(2+3)+4"));
  EXPECT_FALSE(matches(cg, "1+(2+3"));
  EXPECT_FALSE(matches(cg, "+1"));
}

TEST(grammar_ebnf, EscapesAndUnicode) {
  auto cg = compile_ebnf("root ::= \"\\x41\\u00e9\\n\" [\\u0100-\\U0001F600] \"é\"", small_vocab());
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, "A\xC3\xA9\n\xF0\x9F\x98\x80\xC3\xA9"));
  EXPECT_FALSE(matches(cg, "A\xC3\xA9\nz\xC3\xA9"));
}

TEST(grammar_ebnf, RulesNeedNoNewlines) {
  auto cg = compile_ebnf("root ::= a b a ::= \"x\" b ::= \"y\"?", small_vocab());
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, "x"));
  EXPECT_TRUE(matches(cg, "xy"));
}

TEST(grammar_ebnf, RuleFollowedByAGroupIsNoMacroCall) {
  auto cg = compile_ebnf("root ::= num (\",\" num)*\nnum ::= [0-9]+", small_vocab());
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, "1,22,3"));
  EXPECT_FALSE(matches(cg, "1,"));
}

TEST(grammar_ebnf, RegexMacroAndOptions) {
  auto cg =
      compile_ebnf(R"G(root[max_tokens=3] ::= Regex("[a-c]{2}\\d") "!" (= "!"))G", small_vocab());
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, "ab1!"));
  EXPECT_FALSE(matches(cg, "ad1!"));
}

TEST(grammar_ebnf, Errors) {
  EXPECT_EQ(parse_ebnf("root ::= foo").status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parse_ebnf("root ::= \"a\"++").status().message().find("stacked"), std::string::npos);
  EXPECT_FALSE(parse_ebnf("root ::= \"a").has_value());
  EXPECT_FALSE(parse_ebnf("root ::= [b-a]").has_value());
  EXPECT_FALSE(parse_ebnf("x ::= \"a\"").has_value());  // no root
  EXPECT_FALSE(parse_ebnf("root ::= \"a\" root ::= \"b\"").has_value());
  EXPECT_EQ(parse_ebnf("root ::= <[12]>").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(parse_ebnf(std::string(5000, '(')).has_value());
}

}  // namespace
}  // namespace di::grammar
