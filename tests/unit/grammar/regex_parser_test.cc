// SPDX-License-Identifier: Apache-2.0
#include "grammar/regex/regex_parser.h"

#include <gtest/gtest.h>

#include "test_vocab.h"

namespace di::grammar {
namespace {

bool full_match(const std::string& pattern, const std::string& s, RegexOptions o = {}) {
  auto g = regex_to_grammar(pattern, o);
  EXPECT_TRUE(g.has_value()) << pattern << ": " << g.status().message();
  if (!g) return false;
  auto cg = CompiledGrammar::create(*g, TokenTrie::build(testing::small_vocab()));
  EXPECT_TRUE(cg.has_value());
  return testing::matches(*cg, s);
}

TEST(grammar_regex, Basics) {
  EXPECT_TRUE(full_match("a(b|c)*d", "abcbd"));
  EXPECT_FALSE(full_match("a(b|c)*d", "abxd"));
  EXPECT_TRUE(full_match("^\\d{3}-\\d{2,}$", "123-4567"));
  EXPECT_FALSE(full_match("^\\d{3}-\\d{2,}$", "123-4"));
  EXPECT_TRUE(full_match("[^a-z]+", "ABC"));
  EXPECT_FALSE(full_match("[^a-z]+", "AbC"));
  EXPECT_TRUE(full_match("\\w+@\\w+\\.com", "me@x.com"));
  EXPECT_TRUE(full_match(".é?", "x\xC3\xA9"));
  EXPECT_FALSE(full_match(".", "\n"));
  EXPECT_TRUE(full_match("(?:ab)+?(?<n>c)", "ababc"));
  EXPECT_TRUE(full_match("[\\d\\-x]+", "1-x"));
}

TEST(grammar_regex, SearchAndJsonModes) {
  RegexOptions search{.json_string = false, .search = true};
  EXPECT_TRUE(full_match("bc", "abcd", search));
  EXPECT_FALSE(full_match("^bc", "abcd", search));
  EXPECT_TRUE(full_match("^bc", "bcd", search));
  RegexOptions json{.json_string = true, .search = false};
  EXPECT_TRUE(full_match("a\"b", "a\\\"b", json));
  EXPECT_FALSE(full_match("a\"b", "a\"b", json));
  EXPECT_TRUE(full_match("a\\nb", "a\\nb", json));
}

TEST(grammar_regex, Unsupported) {
  for (const char* p : {"(?=a)", "(a)\\1", "\\bword", "\\p{L}", "a^b", "a$b"}) {
    auto g = regex_to_grammar(p);
    ASSERT_FALSE(g.has_value()) << p;
    EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented) << p;
  }
  for (const char* p : {"(a", "a)", "*a", "[a", "a{3,2}", "\\"}) {
    EXPECT_FALSE(regex_to_grammar(p).has_value()) << p;
  }
}

}  // namespace
}  // namespace di::grammar
