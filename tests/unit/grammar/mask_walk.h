// SPDX-License-Identifier: Apache-2.0
// Feeds `text` token by token (longest vocabulary prefix); before each token and at the end the
// mask must equal accept_token's verdict on every token (EOS: the text is complete). Shared by
// the structural-tag tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"

namespace di::grammar::testing {

inline bool walk_checking_masks(const std::shared_ptr<const CompiledGrammar>& cg,
                                const TokenTrie& trie,
                                std::string text) {
  GrammarMatcher m(cg);
  TokenBitmask mask;
  while (true) {
    m.fill_next_token_bitmask(mask);
    for (int32_t t = 1; t < static_cast<int32_t>(trie.vocab_size()); ++t) {
      const bool ok = m.accept_token(t);
      if (ok) m.rollback(1);
      EXPECT_EQ(mask.test(t), ok) << "before '" << text << "' token " << t;
    }
    EXPECT_EQ(mask.test(0), m.can_terminate());
    if (text.empty()) return m.can_terminate();
    size_t len = 0;
    const int32_t id = trie.longest_prefix_token(text, &len);
    if (id < 0 || !m.accept_token(id)) return false;
    text.erase(0, len);
  }
}

}  // namespace di::grammar::testing
