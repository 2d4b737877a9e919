// SPDX-License-Identifier: Apache-2.0
#include "grammar/matcher.h"

#include <gtest/gtest.h>

#include "test_vocab.h"

namespace di::grammar {
namespace {

int32_t id_of(const Vocabulary& v, const std::string& s) {
  for (size_t i = 0; i < v.token_bytes.size(); ++i)
    if (v.token_bytes[i] == s) return static_cast<int32_t>(i);
  return -1;
}

TEST(grammar_matcher, MaskAcceptRollbackEos) {
  Vocabulary v = testing::small_vocab();
  auto cg = testing::compile_ebnf(R"(root ::= "ab" ("c" | "d")* "!")", v);
  ASSERT_TRUE(cg);
  GrammarMatcher m(cg);
  TokenBitmask mask;
  m.fill_next_token_bitmask(mask);
  EXPECT_TRUE(mask.test(id_of(v, "a")));
  EXPECT_TRUE(mask.test(id_of(v, "ab")));
  EXPECT_TRUE(mask.test(id_of(v, "abc")));
  EXPECT_FALSE(mask.test(id_of(v, "b")));
  EXPECT_FALSE(mask.test(0));
  EXPECT_TRUE(m.accept_token(id_of(v, "abc")));
  EXPECT_FALSE(m.accept_token(id_of(v, "a")));
  EXPECT_TRUE(m.accept_token(id_of(v, "d")));
  EXPECT_TRUE(m.accept_token(id_of(v, "!")));
  m.fill_next_token_bitmask(mask);
  EXPECT_EQ(mask.count(), 1u);
  EXPECT_TRUE(mask.test(0));
  EXPECT_TRUE(m.accept_token(0));
  EXPECT_TRUE(m.is_terminated());
  m.rollback(3);
  EXPECT_EQ(m.num_accepted(), 1u);
  EXPECT_FALSE(m.is_terminated());
  EXPECT_TRUE(m.accept_token(id_of(v, "c")));
}

TEST(grammar_matcher, JumpForward) {
  Vocabulary v = testing::small_vocab();
  auto cg = testing::compile_ebnf(R"(root ::= "{\"name\": " ("1" | "2") "}")", v);
  ASSERT_TRUE(cg);
  GrammarMatcher m(cg);
  EXPECT_EQ(m.find_jump_forward_bytes(), "{\"name\": ");
  EXPECT_TRUE(m.accept_bytes("{\"name\": 1"));
  EXPECT_EQ(m.find_jump_forward_bytes(), "}");
  EXPECT_EQ(m.num_accepted(), 0u);
}

TEST(grammar_matcher, SpecialTokensNeverText) {
  Vocabulary v = testing::small_vocab();
  auto cg = testing::compile_ebnf(R"(root ::= [^]*)", v);
  ASSERT_TRUE(cg);
  GrammarMatcher m(cg);
  TokenBitmask mask;
  m.fill_next_token_bitmask(mask);
  EXPECT_TRUE(mask.test(0));  // EOS: the empty string is complete
  int32_t empty = id_of(v, "");
  EXPECT_FALSE(mask.test(empty));
  EXPECT_FALSE(m.accept_token(empty));
}

}  // namespace
}  // namespace di::grammar
