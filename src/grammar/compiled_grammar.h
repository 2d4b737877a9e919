// SPDX-License-Identifier: Apache-2.0
// A grammar compiled against one vocabulary: the NFA, the token trie, and the adaptive
// token-mask cache (xgrammar's idea, computed lazily here). Immutable from the outside and shared
// by all matchers of the grammar; the cache fills under a mutex.
//
// Per NFA state q the cache splits the vocabulary, judging each token from q inside q's rule:
//  - accepted: the token is consumed while q's rule is still open -> allowed in every context;
//  - uncertain: q's rule can end part-way through the token -> the context decides, so the
//    matcher checks these against its full parser state;
//  - everything else is rejected in every context.
// Ending at the very start is not uncertain: the matcher's parser has already completed the rule
// there, so the continuation is covered by the items of the enclosing rules.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "grammar/mask_store.h"
#include "grammar/nfa.h"
#include "grammar/vocabulary.h"

namespace di::grammar {

struct StateMask {
  std::vector<uint32_t> accepted_bits;  // [ceil(vocab/32)] or empty when none accepted
  std::vector<int32_t> accepted_ids;    // used instead of bits when few are accepted
  std::vector<uint32_t> uncertain;      // trie nodes, ascending (= byte order)
};

class CompiledGrammar {
 public:
  static Expected<std::shared_ptr<const CompiledGrammar>> create(
      const Grammar& g,
      std::shared_ptr<const TokenTrie> trie,
      const CompileLimits& limits = {},
      std::shared_ptr<MaskStore> store = nullptr);

  const NfaGrammar& nfa() const { return *nfa_; }
  const TokenTrie& trie() const { return *trie_; }
  uint32_t start_state() const { return nfa_->rule_start(nfa_->root()); }

  // The cache entry for state q (computed on first use; thread-safe).
  const StateMask& state_mask(uint32_t q) const;
  size_t cached_states() const;

 private:
  // Canonical text of the sub-grammar reachable from rule r.
  std::string canonical(RuleId r) const;
  // Code points of the vocabulary's longest token (computed on first use, under mu_).
  int64_t longest_token_chars() const;

  std::shared_ptr<const NfaGrammar> nfa_;
  std::shared_ptr<const TokenTrie> trie_;
  mutable std::mutex mu_;
  std::shared_ptr<MaskStore> store_;
  mutable std::vector<std::shared_ptr<const StateMask>> cache_;
  mutable std::vector<std::optional<uint64_t>> rule_key_;  // interned canonical(r), lazily
  mutable int64_t longest_token_chars_ = -1;
};

}  // namespace di::grammar
