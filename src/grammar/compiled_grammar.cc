// SPDX-License-Identifier: Apache-2.0
#include "grammar/compiled_grammar.h"

#include "grammar/earley.h"

namespace di::grammar {

Expected<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::create(
    const Grammar& g, std::shared_ptr<const TokenTrie> trie, const CompileLimits& limits) {
  auto nfa = NfaGrammar::build(g, limits);
  if (!nfa) return nfa.status();
  auto cg = std::make_shared<CompiledGrammar>();
  cg->nfa_ = std::move(nfa).value();
  cg->trie_ = std::move(trie);
  cg->cache_.resize(cg->nfa_->states().size());
  return std::shared_ptr<const CompiledGrammar>(std::move(cg));
}

const StateMask& CompiledGrammar::state_mask(uint32_t q) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cache_[q]) return *cache_[q];
  }
  auto m = compute(q);
  std::lock_guard<std::mutex> lock(mu_);
  if (!cache_[q]) cache_[q] = std::move(m);
  return *cache_[q];
}

size_t CompiledGrammar::cached_states() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto& c : cache_) n += c != nullptr;
  return n;
}

// Walks the trie with a parser rooted at q. exited[d] says whether q's rule could end after
// 1..d-1 bytes of the current path; a token that dies after such a point is uncertain.
std::unique_ptr<StateMask> CompiledGrammar::compute(uint32_t q) const {
  const TokenTrie& t = *trie_;
  auto out = std::make_unique<StateMask>();
  EarleyParser p(nfa_.get());
  p.reset(q);
  std::vector<uint8_t> exited(1, 0);
  std::vector<int32_t> accepted;
  const uint32_t n = static_cast<uint32_t>(t.num_nodes());
  uint32_t i = 1;
  while (i < n) {
    uint32_t d = t.depth(i);
    p.truncate(d);  // sets 0..d-1 stay: the path to the parent
    exited.resize(d);
    bool ex = d >= 2 && (exited[d - 1] || p.root_final(d - 1));
    if (d == 1) ex = false;
    if (p.push_byte(t.byte(i))) {
      exited.push_back(ex);
      for (const int32_t* k = t.tokens_begin(i); k != t.tokens_end(i); ++k) accepted.push_back(*k);
      ++i;
      continue;
    }
    if (ex) {
      for (uint32_t j = i; j < t.skip(i); ++j)
        if (t.tokens_begin(j) != t.tokens_end(j)) out->uncertain.push_back(j);
    }
    i = t.skip(i);
  }
  if (accepted.size() * 32 < t.vocab_size()) {
    out->accepted_ids = std::move(accepted);
  } else {
    out->accepted_bits.assign((t.vocab_size() + 31) / 32, 0);
    for (int32_t id : accepted) out->accepted_bits[id >> 5] |= 1u << (id & 31);
  }
  return out;
}

}  // namespace di::grammar
