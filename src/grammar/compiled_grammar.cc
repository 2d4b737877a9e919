// SPDX-License-Identifier: Apache-2.0
#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <unordered_map>

#include "grammar/state_walk.h"

namespace di::grammar {

Expected<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::create(
    const Grammar& g,
    std::shared_ptr<const TokenTrie> trie,
    const CompileLimits& limits,
    std::shared_ptr<MaskStore> store) {
  auto nfa = NfaGrammar::build(g, limits);
  if (!nfa) return nfa.status();
  // Token terminals name ids of this vocabulary (EBNF resolved `<text>` against it).
  for (const TokenEdge& te : (*nfa)->token_edges()) {
    const std::string what = "token terminal <[" + std::to_string(te.token) + "]>: ";
    const auto outside = [&](int32_t id) {
      return id < 0 || static_cast<size_t>(id) >= trie->vocab_size();
    };
    const auto excl = (*nfa)->excluded(te);
    if (te.negated ? std::any_of(excl.begin(), excl.end(), outside) : outside(te.token))
      return invalid_argument(what + "id outside the vocabulary (size " +
                              std::to_string(trie->vocab_size()) + ")");
    if (te.negated) continue;
    if (te.token == trie->eos_id())
      return invalid_argument(what +
                              "the end-of-sequence token ends the text where the grammar "
                              "does and cannot be a terminal");
    if (!trie->is_special(te.token) && trie->token_bytes(te.token).empty())
      return invalid_argument(what + "an unused (padding) id");
  }
  auto cg = std::make_shared<CompiledGrammar>();
  cg->nfa_ = std::move(nfa).value();
  cg->trie_ = std::move(trie);
  cg->cache_.resize(cg->nfa_->states().size());
  cg->rule_key_.resize(cg->nfa_->num_rules());
  cg->store_ = std::move(store);
  return std::shared_ptr<const CompiledGrammar>(std::move(cg));
}

// The most code points any token of the vocabulary starts (bytes outside 80-BF): the trie's
// count saturates at 255, so past that the tokens are counted.
int64_t CompiledGrammar::longest_token_chars() const {
  if (longest_token_chars_ < 0) {
    int64_t most = trie_->subtree_max_chars(0);
    if (most >= 255) {
      for (size_t id = 0; id < trie_->vocab_size(); ++id) {
        const std::string& b = trie_->token_bytes(static_cast<int32_t>(id));
        most = std::max<int64_t>(most, std::count_if(b.begin(), b.end(), [](char c) {
                                   return (static_cast<uint8_t>(c) & 0xC0) != 0x80;
                                 }));
      }
    }
    longest_token_chars_ = most;
  }
  return longest_token_chars_;
}

const StateMask& CompiledGrammar::state_mask(uint32_t q) const {
  std::string key;
  const NfaGrammar::MaskTwin* twin = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cache_[q]) return *cache_[q];
    // A bounded-text state far from its bound takes its twin's mask (nfa.h MaskTwin): any
    // token fits both budgets, so both accept the same tokens.
    if (const NfaGrammar::MaskTwin* t = nfa_->mask_twin(q)) {
      const int64_t need = longest_token_chars();
      if (t->budget >= need && t->twin_budget >= need) twin = t;
    }
    if (store_) {
      RuleId r = nfa_->states()[q].rule;
      if (!rule_key_[r]) {
        std::string canon = canonical(r);
        rule_key_[r] = canon.empty() ? 0 : store_->intern(canon) + 1;
      }
      if (*rule_key_[r] != 0)
        key = std::to_string(*rule_key_[r]) + '#' + std::to_string(q - nfa_->rule_start(r));
    }
  }
  if (twin) return state_mask(twin->twin);
  const bool shared = !key.empty();
  std::shared_ptr<const StateMask> m = shared ? store_->find(key) : nullptr;
  if (!m) {
    m = compute_state_mask(*nfa_, *trie_, q);
    if (shared) store_->insert(key, m);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!cache_[q]) cache_[q] = std::move(m);
  return *cache_[q];
}

// Rules reachable from r, renumbered in discovery order, each written as its states (final
// flag, byte sets, local targets, renumbered callees). States of a rule are contiguous and start
// with the rule's start state (nfa.cc builds them that way). Returns "" (= do not share) past
// kMaxSharedStates: sharing pays off for the small shared rules (strings, numbers, any-value),
// and serializing whole large grammars per rule would cost more than it saves.
std::string CompiledGrammar::canonical(RuleId r) const {
  const NfaGrammar& g = *nfa_;
  std::vector<RuleId> order{r};
  std::unordered_map<RuleId, uint32_t> ids{{r, 0}};
  std::string out;
  uint32_t total = 0;
  constexpr uint32_t kMaxSharedStates = 2048;
  auto put = [&out](uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  for (size_t i = 0; i < order.size(); ++i) {
    RuleId x = order[i];
    uint32_t begin = g.rule_start(x);
    uint32_t end = static_cast<size_t>(x) + 1 < g.num_rules()
                       ? g.rule_start(x + 1)
                       : static_cast<uint32_t>(g.states().size());
    total += end - begin;
    if (total > kMaxSharedStates) return {};
    put(0xFFFFFFFF00000000ull | (end - begin));
    for (uint32_t s = begin; s < end; ++s) {
      const NfaState& st = g.states()[s];
      put(st.final);
      for (uint32_t e = st.byte_begin; e < st.byte_end; ++e) {
        for (uint64_t w : g.byte_edges()[e].set.words) put(w);
        put(g.byte_edges()[e].target - begin);
      }
      put(0xFFFFFFFFFFFFFFFEull);
      for (uint32_t e = st.ref_begin; e < st.ref_end; ++e) {
        RuleId c = g.ref_edges()[e].rule;
        auto [it, fresh] = ids.emplace(c, static_cast<uint32_t>(order.size()));
        if (fresh) order.push_back(c);
        put((uint64_t{it->second} << 32) | (g.ref_edges()[e].target - begin));
      }
      put(0xFFFFFFFFFFFFFFFDull);
      // Byte masks ignore token terminals, but they change which states exist and follow.
      for (uint32_t e = st.token_begin; e < st.token_end; ++e) {
        const TokenEdge& te = g.token_edges()[e];
        put((uint64_t{static_cast<uint32_t>(te.token)} << 32) | (te.target - begin));
        put(te.negated);
        if (te.negated) {
          put(te.excl_end - te.excl_begin);
          for (int32_t x : g.excluded(te)) put(static_cast<uint32_t>(x));
        }
      }
      put(0xFFFFFFFFFFFFFFFCull);
    }
  }
  return out;
}

size_t CompiledGrammar::cached_states() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto& c : cache_) n += c != nullptr;
  return n;
}

}  // namespace di::grammar
