// SPDX-License-Identifier: Apache-2.0
#include "grammar/matcher.h"

#include <algorithm>

namespace di::grammar {

namespace {
constexpr size_t kEosMark = static_cast<size_t>(-1);
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : g_(std::move(grammar)), parser_(&g_->nfa()) {
  reset();
}

void GrammarMatcher::reset() {
  parser_.reset(g_->start_state());
  history_.clear();
  terminated_ = false;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (terminated_) return false;
  size_t before = parser_.num_sets();
  for (char c : bytes) {
    if (!parser_.push_byte(static_cast<uint8_t>(c))) {
      parser_.truncate(before);
      return false;
    }
  }
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  const TokenTrie& t = g_->trie();
  if (terminated_ || id < 0 || static_cast<size_t>(id) >= t.vocab_size()) return false;
  if (id == t.eos_id()) {
    if (!parser_.accepting()) return false;
    history_.push_back(kEosMark);
    terminated_ = true;
    return true;
  }
  const bool text = !t.is_special(id) && !t.token_bytes(id).empty();
  const size_t before = parser_.num_sets();
  // A token is read either as its bytes or as one token terminal; both readings may survive
  // (`<[id]> | "its text"`), and they end in the same (newest) set.
  step_.clear();
  if (g_->nfa().has_token_edges()) parser_.token_step(id, text, step_);
  const bool as_bytes = text && accept_bytes(t.token_bytes(id));
  if (!as_bytes && step_.empty()) return false;
  if (!step_.empty()) {
    if (as_bytes)
      parser_.add_to_last(step_);
    else
      parser_.push_items(step_);
  }
  history_.push_back(before);
  return true;
}

void GrammarMatcher::rollback(size_t n) {
  n = std::min(n, history_.size());
  for (size_t i = 0; i < n; ++i) {
    size_t h = history_.back();
    history_.pop_back();
    if (h == kEosMark)
      terminated_ = false;
    else
      parser_.truncate(h);
  }
}

std::string GrammarMatcher::find_jump_forward_bytes() {
  std::string out;
  if (terminated_) return out;
  size_t before = parser_.num_sets();
  while (!parser_.accepting() && !parser_.last_has_token_edges()) {
    ByteSet next = parser_.next_bytes();
    if (next.count() != 1) break;
    uint8_t b = static_cast<uint8_t>(next.first());
    if (!parser_.push_byte(b)) break;
    out += static_cast<char>(b);
  }
  parser_.truncate(before);
  return out;
}

std::optional<int32_t> GrammarMatcher::find_forced_token() const {
  if (terminated_ || parser_.accepting() || !parser_.last_has_token_edges()) return std::nullopt;
  if (!parser_.next_bytes().empty()) return std::nullopt;
  std::optional<int32_t> forced;
  const auto& states = g_->nfa().states();
  const auto& edges = g_->nfa().token_edges();
  for (const EarleyItem* it = parser_.last_begin(); it != parser_.last_end(); ++it) {
    const NfaState& st = states[it->state];
    for (uint32_t e = st.token_begin; e < st.token_end; ++e) {
      if (edges[e].negated || (forced && *forced != edges[e].token)) return std::nullopt;
      forced = edges[e].token;
    }
  }
  return forced;
}

// Token terminals at the newest set (docs/grammar.md "Token terminals"): `<[id]>` allows id;
// `!<[x, y]>` allows every text token but x and y (those only if another reading allows them);
// several negations allow every text token outside the intersection of their sets. Special
// tokens other than EOS come only through positive terminals.
bool GrammarMatcher::fill_token_terminals(TokenBitmask& mask) {
  const TokenTrie& t = g_->trie();
  const NfaGrammar& nfa = g_->nfa();
  const auto& states = nfa.states();
  const auto& edges = nfa.token_edges();
  positive_.clear();
  bool negation = false;
  std::vector<int32_t> excluded;  // the tokens every negation excludes
  for (const EarleyItem* it = parser_.last_begin(); it != parser_.last_end(); ++it) {
    const NfaState& st = states[it->state];
    for (uint32_t e = st.token_begin; e < st.token_end; ++e) {
      const TokenEdge& te = edges[e];
      if (!te.negated) {
        positive_.push_back(te.token);
      } else if (!negation) {
        const auto x = nfa.excluded(te);
        excluded.assign(x.begin(), x.end());
        negation = true;
      } else {
        std::erase_if(excluded, [&](int32_t id) { return !nfa.excludes(te, id); });
      }
    }
  }
  for (int32_t id : positive_) mask.set(id);
  if (!negation) return false;
  std::vector<int32_t> drop;
  for (int32_t x : excluded) {
    bool keep = mask.test(x);
    if (!keep && !t.is_special(x) && !t.token_bytes(x).empty()) {
      // x may still be read as bytes.
      const size_t base = parser_.num_sets();
      keep = true;
      for (char c : t.token_bytes(x))
        if (!parser_.push_byte(static_cast<uint8_t>(c))) {
          keep = false;
          break;
        }
      parser_.truncate(base);
    }
    if (!keep) drop.push_back(x);
  }
  mask.or_with(t.text_bits());
  for (int32_t x : drop) mask.reset(x);
  return true;
}

void GrammarMatcher::fill_next_token_bitmask(TokenBitmask& mask) {
  const TokenTrie& t = g_->trie();
  if (mask.vocab_size() != t.vocab_size()) mask = TokenBitmask(t.vocab_size());
  mask.clear();
  if (terminated_) return;
  if (parser_.accepting() && t.eos_id() >= 0) mask.set(t.eos_id());
  // A negated token terminal allows every text token but one: no byte walk needed.
  if (g_->nfa().has_token_edges() && fill_token_terminals(mask)) return;

  // Distinct states of the newest set's items that were not predicted in it and still have
  // edges. A predicted item (origin == this set) starts a rule called by some other item of the
  // set, and that caller's cache entry (its walk predicts the same rule and continues after it)
  // already covers every token through the callee. Walking the callers instead of the callees
  // keeps a callee's "rule ends inside the token" tokens out of the uncertain list: a one-char
  // rule called from a counted repetition (minLength) made ~120k tokens uncertain on every mask.
  scan_states_.clear();
  const auto& states = g_->nfa().states();
  const uint32_t cur = static_cast<uint32_t>(parser_.num_sets() - 1);
  for (const EarleyItem* it = parser_.last_begin(); it != parser_.last_end(); ++it) {
    const NfaState& st = states[it->state];
    if (it->origin == cur) continue;
    if (st.byte_begin != st.byte_end || st.ref_begin != st.ref_end)
      scan_states_.push_back(it->state);
  }
  std::sort(scan_states_.begin(), scan_states_.end());
  scan_states_.erase(std::unique(scan_states_.begin(), scan_states_.end()), scan_states_.end());

  uncertain_.clear();
  for (uint32_t q : scan_states_) {
    const StateMask& sm = g_->state_mask(q);
    if (!sm.accepted_bits.empty()) mask.or_with(sm.accepted_bits);
    for (int32_t id : sm.accepted_ids) mask.set(id);
    if (sm.uncertain.empty()) continue;
    merged_.clear();
    std::set_union(uncertain_.begin(), uncertain_.end(), sm.uncertain.begin(), sm.uncertain.end(),
                   std::back_inserter(merged_));
    uncertain_.swap(merged_);
  }

  // Context-dependent tokens: run them through the real parser, in byte order so consecutive
  // tokens share their common prefix's parser sets.
  const size_t base = parser_.num_sets();
  std::string_view prev;
  size_t depth = 0;
  for (size_t i = 0; i < uncertain_.size();) {
    const uint32_t node = uncertain_[i];
    const int32_t* tb = t.tokens_begin(node);
    const int32_t* te = t.tokens_end(node);
    bool any_unset = false;
    for (const int32_t* k = tb; k != te; ++k) any_unset |= !mask.test(*k);
    if (!any_unset) {
      ++i;
      continue;
    }
    std::string_view s = t.token_bytes(*tb);
    size_t l = 0;
    while (l < depth && l < s.size() && s[l] == prev[l]) ++l;
    parser_.truncate(base + l);
    depth = l;
    while (depth < s.size() && parser_.push_byte(static_cast<uint8_t>(s[depth]))) ++depth;
    prev = s;
    if (depth == s.size()) {
      for (const int32_t* k = tb; k != te; ++k) mask.set(*k);
      ++i;
      continue;
    }
    // Byte `depth` failed: every uncertain token below that trie prefix fails too.
    const uint32_t end = t.skip(t.ancestor(node, static_cast<uint32_t>(depth + 1)));
    i = static_cast<size_t>(std::lower_bound(uncertain_.begin() + i, uncertain_.end(), end) -
                            uncertain_.begin());
  }
  parser_.truncate(base);
}

}  // namespace di::grammar
