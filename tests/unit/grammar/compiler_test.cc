// SPDX-License-Identifier: Apache-2.0
#include "grammar/compiler.h"

#include <gtest/gtest.h>

#include "test_vocab.h"

namespace di::grammar {
namespace {

TEST(grammar_compiler, CachesByKindAndText) {
  GrammarCompiler c(TokenTrie::build(testing::small_vocab()));
  auto a = c.compile_regex("a+b");
  auto b = c.compile_regex("a+b");
  auto e = c.compile_ebnf("root ::= \"a\"+ \"b\"");
  ASSERT_TRUE(a.has_value() && b.has_value() && e.has_value());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_NE(a->get(), e->get());
  EXPECT_EQ(c.cache_size(), 2u);
  EXPECT_FALSE(c.compile_regex("(").has_value());
  EXPECT_EQ(c.cache_size(), 2u);
}

TEST(grammar_compiler, TimeoutIsAnError) {
  CompilerOptions o;
  o.timeout = std::chrono::milliseconds(0);
  GrammarCompiler c(TokenTrie::build(testing::small_vocab()), o);
  auto r = c.compile_regex("[a-z]{5000}");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("timed out"), std::string::npos);
}

TEST(grammar_compiler, JsonObjectAndSharedMaskStore) {
  auto trie = TokenTrie::build(testing::small_vocab());
  CompilerOptions o;
  o.mask_store = std::make_shared<MaskStore>();
  GrammarCompiler c1(trie, o), c2(trie, o);
  auto g1 = c1.compile_json_schema(R"({"type":"object","properties":{"a":{"type":"string"}}})");
  auto g2 = c2.compile_json_schema(R"({"type":"array","items":{"type":"string"}})");
  ASSERT_TRUE(g1.has_value() && g2.has_value());
  GrammarMatcher m1(*g1), m2(*g2);
  ASSERT_TRUE(m1.accept_bytes(R"({"a": "x)"));
  ASSERT_TRUE(m2.accept_bytes(R"(["x)"));
  TokenBitmask k1, k2;
  m1.fill_next_token_bitmask(k1);
  m2.fill_next_token_bitmask(k2);
  // Same string-body state, different contexts after the closing quote.
  int32_t quote_comma = -1, quote_brace = -1;
  auto v = testing::small_vocab();
  for (size_t i = 0; i < v.token_bytes.size(); ++i) {
    if (v.token_bytes[i] == "\",") quote_comma = static_cast<int32_t>(i);
    if (v.token_bytes[i] == "x\"}") quote_brace = static_cast<int32_t>(i);
  }
  EXPECT_TRUE(k1.test(quote_comma));
  EXPECT_TRUE(k2.test(quote_comma));
  EXPECT_TRUE(k1.test(quote_brace));
  EXPECT_FALSE(k2.test(quote_brace));
  auto any = c1.compile_json_object();
  ASSERT_TRUE(any.has_value());
  GrammarMatcher m3(*any);
  EXPECT_TRUE(m3.accept_bytes(R"({"k": [1, 2.5e3, true, null, "s"]})"));
  EXPECT_TRUE(m3.can_terminate());
}

}  // namespace
}  // namespace di::grammar
