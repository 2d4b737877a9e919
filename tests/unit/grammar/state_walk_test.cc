// SPDX-License-Identifier: Apache-2.0
// The memoized mask walk (state_walk.cc) on a vocabulary dense enough to reach its shortcuts:
// shared configurations, whole-subtree accepts on self-loops and the string-body proof (trie
// subtrees over 64 nodes without '"' or '\\'). Every mask along random walks must equal
// one-by-one acceptance.
#include <gtest/gtest.h>

#include <random>

#include "grammar/compiler.h"
#include "grammar/matcher.h"

namespace di::grammar {
namespace {

Vocabulary dense_vocab() {
  Vocabulary v;
  v.token_bytes.push_back("</s>");
  v.special_ids = {0};
  v.eos_id = 0;
  // All strings up to 3 bytes over letters, space, DEL, a control byte and UTF-8 lead and
  // continuation bytes (valid and invalid sequences alike), then tokens with quotes/escapes.
  const std::string alpha = "aqu \x7F\x01\xC3\xA9\xE4\xB8\x80\xF0\x9F\xED";
  for (char x : alpha) {
    v.token_bytes.push_back(std::string(1, x));
    for (char y : alpha) {
      v.token_bytes.push_back(std::string{x, y});
      for (char z : alpha) v.token_bytes.push_back(std::string{x, y, z});
    }
  }
  for (const char* s : {"\"", "a\"", "\",", "\\\"", "\\\\", "\\n", "\\u00e9", "\":", "{\"", "qu\"",
                        "q\"", "1", "12", ",", "}", "{", " \"", "\xC3\xA9\""})
    v.token_bytes.push_back(s);
  // Long tokens: a bounded body's proof looks 16-32 characters ahead, deeper ones are walked
  // (and proven again further down).
  for (int n = 4; n <= 40; n += 3) {
    v.token_bytes.push_back(std::string(n, 'a'));
    v.token_bytes.push_back(std::string(n, 'a') + "\xC3\xA9");
    v.token_bytes.push_back(std::string(n, 'q') + "\"");
  }
  return v;
}

void check_walks(GrammarCompiler& c, const char* schema, std::mt19937& rng) {
  auto g = c.compile_json_schema(schema);
  ASSERT_TRUE(g) << schema << ": " << g.status().message();
  for (int walk = 0; walk < 8; ++walk) {
    GrammarMatcher m(*g);
    TokenBitmask mask;
    for (int step = 0; step < 12; ++step) {
      m.fill_next_token_bitmask(mask);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(mask.vocab_size()); ++id) {
        const bool ok = m.accept_token(id);
        if (ok) m.rollback(1);
        ASSERT_EQ(ok, mask.test(id)) << schema << " step " << step << " token " << id;
        if (ok && id != 0) allowed.push_back(id);
      }
      if (allowed.empty()) break;
      ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
    }
  }
}

TEST(StateWalk, MasksEqualOneByOneAcceptanceOnADenseVocabulary) {
  GrammarCompiler c(TokenTrie::build(dense_vocab()));
  std::mt19937 rng(5);
  for (const char* schema : {
           R"({"type":"string"})",
           R"({"type":"string","maxLength":4})",
           // Bounded bodies (budget proofs): around the look-ahead and the long tokens.
           R"({"type":"string","maxLength":1})",
           R"({"type":"string","maxLength":3})",
           R"({"type":"string","minLength":5,"maxLength":17})",
           R"({"type":"string","maxLength":31})",
           R"({"type":"string","maxLength":45})",
           R"({"type":"array","items":{"type":"string","maxLength":9}})",
           // Counted regex classes (class runs).
           R"({"type":"string","pattern":"^[aqu ]{0,7}$"})",
           R"({"type":"string","pattern":"^[a-z]{2,30}q?$"})",
           R"({"type":"string","pattern":"^a[aq]{3}u*$"})",
           R"({"type":"string","pattern":"^[a-z ]*$"})",
           R"({"type":"object","properties":{"qu":{"type":"integer"}},"required":["qu"],
               "additionalProperties":{"type":"string"}})",
           R"({"type":"array","items":{"type":"string"}})",
           R"({"enum":["aq","a\u00e9", "qqq"]})",
           // minLength: items that only call the one-char rule are walked (matcher.cc).
           R"({"type":"string","minLength":2,"maxLength":5})",
           R"({"type":"array","items":{"type":"string","minLength":3}})",
           R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2},
               {"type":"array","items":{"type":"string"}}]})",
       })
    check_walks(c, schema, rng);
}

// Long bounded strings: a chain state with 256 or more characters left is taken as unbounded, so
// check masks near the far end of long chains too (where the budget is below the longest token).
TEST(StateWalk, LongBoundedStringsNearTheirEnd) {
  GrammarCompiler c(TokenTrie::build(dense_vocab()));
  for (int max_len : {40, 255, 300, 600}) {
    std::string schema = R"({"type":"string","maxLength":)";
    schema += std::to_string(max_len);
    schema += "}";
    auto g = c.compile_json_schema(schema);
    ASSERT_TRUE(g) << g.status().message();
    for (int prefix : {0, max_len / 2, max_len - 41, max_len - 17, max_len - 3, max_len}) {
      if (prefix < 0) continue;
      GrammarMatcher m(*g);
      std::string text(static_cast<size_t>(prefix) + 1, 'q');
      text[0] = '"';
      ASSERT_TRUE(m.accept_bytes(text));
      TokenBitmask mask;
      m.fill_next_token_bitmask(mask);
      for (int32_t id = 0; id < static_cast<int32_t>(mask.vocab_size()); ++id) {
        const bool ok = m.accept_token(id);
        if (ok) m.rollback(1);
        ASSERT_EQ(ok, mask.test(id)) << schema << " after " << prefix << " token " << id;
      }
    }
  }
}

}  // namespace
}  // namespace di::grammar
