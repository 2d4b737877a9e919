// SPDX-License-Identifier: Apache-2.0
// Structural-tag leaf formats added in grammar8 (structural_tag/leaf_formats.h): regex, grammar
// (EBNF), token / exclude_token / any_tokens, token begin/end of a tag, optional / plus / star /
// repeat; masks against one-by-one token acceptance; errors naming the field.
#include <gtest/gtest.h>

#include "grammar/structural_tag/structural_tag.h"
#include "test_vocab.h"

namespace di::grammar {
namespace {

using testing::matches;
using testing::small_vocab;

std::shared_ptr<const TokenTrie> trie() {
  static const auto t = TokenTrie::build(small_vocab());
  return t;
}

std::shared_ptr<const CompiledGrammar> compile(const std::string& json) {
  auto g = structural_tag_to_grammar(json, {}, trie().get());
  EXPECT_TRUE(g.has_value()) << g.status().message();
  if (!g) return nullptr;
  auto cg = CompiledGrammar::create(*g, trie());
  EXPECT_TRUE(cg.has_value());
  return cg ? *cg : nullptr;
}

std::string error_of(const std::string& json, bool with_vocab = true) {
  auto g = structural_tag_to_grammar(json, {}, with_vocab ? trie().get() : nullptr);
  return g ? "" : g.status().message();
}

int32_t id_of(const std::string& text) {
  return trie()->find_token(text);
}

// Feeds `tokens`; before each one (and at the end) the mask must equal accept_token's verdict
// on every token of the vocabulary (EOS: the text is complete). False if a token is refused.
bool walk_checking_masks(const std::shared_ptr<const CompiledGrammar>& cg,
                         const std::vector<int32_t>& tokens) {
  GrammarMatcher m(cg);
  TokenBitmask mask;
  for (size_t step = 0; step <= tokens.size(); ++step) {
    m.fill_next_token_bitmask(mask);
    for (int32_t t = 1; t < static_cast<int32_t>(trie()->vocab_size()); ++t) {
      const bool ok = m.accept_token(t);
      if (ok) m.rollback(1);
      EXPECT_EQ(mask.test(t), ok) << "step " << step << " token " << t;
    }
    EXPECT_EQ(mask.test(0), m.can_terminate()) << "step " << step;
    if (step < tokens.size() && !m.accept_token(tokens[step])) return false;
  }
  return m.can_terminate();
}

TEST(grammar_structural_tag_formats, RegexAndGrammar) {
  auto cg = compile(R"({"format": {"type": "sequence", "elements": [
      {"type": "tag", "begin": "<r>", "content": {"type": "regex", "pattern": "[0-9]{2,3}"},
       "end": "</r>"},
      {"type": "grammar", "grammar": "root ::= \"a\" root | \"b\""}]}})");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, "<r>12</r>b"));
  EXPECT_TRUE(matches(cg, "<r>123</r>aab"));
  EXPECT_FALSE(matches(cg, "<r>1</r>b"));
  EXPECT_FALSE(matches(cg, "<r>12</r>a"));
  EXPECT_FALSE(matches(cg, "<r>1a</r>b"));
  // The regex is a whole match (no search): ^/$ are allowed but add nothing.
  auto anchored = compile(R"({"format": {"type": "regex", "pattern": "^ab+$"}})");
  ASSERT_TRUE(anchored);
  EXPECT_TRUE(matches(anchored, "abb"));
  EXPECT_FALSE(matches(anchored, "xabb"));
}

TEST(grammar_structural_tag_formats, TokenFormats) {
  const int32_t ab = id_of("ab"), abc = id_of("abc"), x = 'x', y = 'y', a = 'a', b = 'b';
  ASSERT_GT(ab, 255);
  // A tag opened by the token "ab", closed by the token "abc", free tokens but "ab" between.
  auto cg = compile(R"({"format": {"type": "tag", "begin": {"type": "token", "token": "ab"},
      "content": {"type": "any_tokens", "exclude_tokens": ["ab"]},
      "end": {"type": "token", "token": )" +
                    std::to_string(abc) + "}}}");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(walk_checking_masks(cg, {ab, x, y, abc}));
  EXPECT_TRUE(walk_checking_masks(cg, {ab, abc}));
  EXPECT_FALSE(walk_checking_masks(cg, {a, b}));  // the bytes of "ab" are not the token
  EXPECT_FALSE(walk_checking_masks(cg, {ab, ab}));
  EXPECT_FALSE(walk_checking_masks(cg, {ab, x}));  // not closed
  auto one = compile(R"({"format": {"type": "sequence", "elements": [
      {"type": "exclude_token", "exclude_tokens": [120]}, {"type": "const_string", "value": "!"},
      {"type": "optional", "content": {"type": "token", "token": 121}},
      {"type": "repeat", "min": 1, "max": 2, "content": {"type": "const_string", "value": "z"}}]}})");
  ASSERT_TRUE(one);
  EXPECT_TRUE(walk_checking_masks(one, {y, '!', 'z'}));
  EXPECT_TRUE(walk_checking_masks(one, {ab, '!', y, 'z', 'z'}));
  EXPECT_FALSE(walk_checking_masks(one, {x, '!', 'z'}));
  EXPECT_FALSE(walk_checking_masks(one, {y, '!', 'z', 'z', 'z'}));
  auto plus =
      compile(R"({"format": {"type": "plus", "content": {"type": "token", "token": "ab"}}})");
  ASSERT_TRUE(plus);
  EXPECT_TRUE(walk_checking_masks(plus, {ab, ab}));
  EXPECT_FALSE(walk_checking_masks(plus, {}));
}

TEST(grammar_structural_tag_formats, ErrorsNameTheField) {
  EXPECT_NE(error_of(R"({"format": {"type": "regex", "pattern": "(a"}})").find("format.pattern:"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "grammar", "grammar": "root ::= x"}})")
                .find("format.grammar:"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "token", "token": "nope"}})")
                .find("format.token: no token has the text 'nope'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "token", "token": 100000}})")
                .find("format.token: token id 100000 is outside the vocabulary"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"({"format": {"type": "token", "token": 120}})", false).find("need a vocabulary"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "exclude_token", "exclude_tokens": [120, 121]}})")
                .find("format.exclude_tokens: must list exactly one token"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "any_tokens", "exclude_tokens": []}})")
                .find("format.exclude_tokens: must list exactly one token"),
            std::string::npos);
  for (const char* type :
       {"dispatch", "token_dispatch", "token_triggered_tags", "qwen_xml_parameter"})
    EXPECT_NE(error_of(std::string(R"({"format": {"type": ")") + type + "\"}}")
                  .find(std::string("format.type: '") + type + "' is not supported"),
              std::string::npos)
        << type;
  EXPECT_NE(error_of(R"({"format": {"type": "triggered_tags", "triggers": ["<a"], "tags": [
      {"begin": {"type": "token", "token": "ab"}, "end": "</a>",
       "content": {"type": "const_string", "value": "1"}}]}})")
                .find("format.tags[0].begin: must be a string"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "tag", "begin": "<a>", "content": {"type": "any_text"},
      "end": {"type": "token", "token": "ab"}}})")
                .find("format.end: a token end after unlimited content is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "star", "content": {"type": "any_text"}}})")
                .find("format.content: must not be unlimited in 'star'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "repeat", "min": 3, "max": 2,
      "content": {"type": "const_string", "value": "a"}}})")
                .find("format.max:"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "regex", "pattern": "a", "excludes": ["b"]}})")
                .find("format.excludes: is not supported on a regex format"),
            std::string::npos);
}

}  // namespace
}  // namespace di::grammar
