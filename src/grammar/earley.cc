// SPDX-License-Identifier: Apache-2.0
#include "grammar/earley.h"

namespace di::grammar {

namespace {
constexpr size_t kLinearLimit = 24;
constexpr uint64_t kEmptySlot = ~uint64_t{0};
inline uint64_t key_of(uint32_t state, uint32_t origin) {
  return (uint64_t{state} << 32) | origin;
}
inline size_t slot_of(uint64_t key, size_t mask) {
  return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask;
}
}  // namespace

EarleyParser::EarleyParser(const NfaGrammar* g) : g_(g) {}

void EarleyParser::reset(uint32_t state) {
  items_.clear();
  set_begin_.assign(1, 0);
  root_final_.assign(1, 0);
  start_set();
  add(state, kRootOrigin);
  close_last_set();
}

void EarleyParser::add(uint32_t state, uint32_t origin) {
  const size_t begin = set_begin_.back();
  const size_t n = items_.size() - begin;
  const uint64_t key = key_of(state, origin);
  if (!table_active_) {
    for (size_t i = begin; i < items_.size(); ++i)
      if (items_[i].state == state && items_[i].origin == origin) return;
    items_.push_back(EarleyItem{state, origin});
    if (n + 1 < kLinearLimit) return;
    // Switch this set to the hash table.
    size_t cap = 64;
    while (cap < 4 * (n + 1)) cap <<= 1;
    table_.assign(cap, kEmptySlot);
    table_used_ = 0;
    table_active_ = true;
    for (size_t i = begin; i < items_.size(); ++i) {
      uint64_t k = key_of(items_[i].state, items_[i].origin);
      size_t j = slot_of(k, cap - 1);
      while (table_[j] != kEmptySlot) j = (j + 1) & (cap - 1);
      table_[j] = k;
      ++table_used_;
    }
    return;
  }
  size_t cap = table_.size();
  size_t j = slot_of(key, cap - 1);
  while (table_[j] != kEmptySlot) {
    if (table_[j] == key) return;
    j = (j + 1) & (cap - 1);
  }
  table_[j] = key;
  items_.push_back(EarleyItem{state, origin});
  if (++table_used_ * 2 > cap) {  // grow and rehash
    std::vector<uint64_t> old;
    old.swap(table_);
    table_.assign(cap * 2, kEmptySlot);
    for (uint64_t k : old) {
      if (k == kEmptySlot) continue;
      size_t t = slot_of(k, cap * 2 - 1);
      while (table_[t] != kEmptySlot) t = (t + 1) & (cap * 2 - 1);
      table_[t] = k;
    }
  }
}

// Prediction and completion until fixpoint. Empty completions (origin == this set) are handled
// by advancing over nullable rules at prediction time (Aycock & Horspool), so a completion only
// ever looks at an older, immutable set.
// Each item's closure depends only on the item and older sets, so items added to a closed set
// need closing from `from` on only.
void EarleyParser::close_last_set(size_t from) {
  const auto& states = g_->states();
  const auto& refs = g_->ref_edges();
  const uint32_t k = static_cast<uint32_t>(set_begin_.size() - 1);
  for (size_t i = from; i < items_.size(); ++i) {
    const EarleyItem it = items_[i];
    const NfaState& st = states[it.state];
    for (uint32_t e = st.ref_begin; e < st.ref_end; ++e) {
      add(g_->rule_start(refs[e].rule), k);
      if (g_->nullable(refs[e].rule)) add(refs[e].target, it.origin);
    }
    if (!st.final) continue;
    if (it.origin == kRootOrigin) {
      root_final_.back() = 1;
      continue;
    }
    if (it.origin == k) continue;
    const uint32_t ob = set_begin_[it.origin], oe = set_begin_[it.origin + 1];
    for (uint32_t j = ob; j < oe; ++j) {
      const EarleyItem parent = items_[j];
      const NfaState& ps = states[parent.state];
      for (uint32_t e = ps.ref_begin; e < ps.ref_end; ++e)
        if (refs[e].rule == st.rule) add(refs[e].target, parent.origin);
    }
  }
}

bool EarleyParser::push_byte(uint8_t b) {
  const auto& states = g_->states();
  const auto& edges = g_->byte_edges();
  const size_t prev_begin = set_begin_.back(), prev_end = items_.size();
  set_begin_.push_back(static_cast<uint32_t>(prev_end));
  root_final_.push_back(0);
  start_set();
  for (size_t i = prev_begin; i < prev_end; ++i) {
    const EarleyItem it = items_[i];
    const NfaState& st = states[it.state];
    for (uint32_t e = st.byte_begin; e < st.byte_end; ++e)
      if (edges[e].set.test(b)) add(edges[e].target, it.origin);
  }
  if (items_.size() == prev_end) {
    set_begin_.pop_back();
    root_final_.pop_back();
    return false;
  }
  close_last_set();
  return true;
}

void EarleyParser::token_step(int32_t id, bool text, std::vector<EarleyItem>& out) const {
  const auto& states = g_->states();
  const auto& edges = g_->token_edges();
  for (const EarleyItem* it = last_begin(); it != last_end(); ++it) {
    const NfaState& st = states[it->state];
    for (uint32_t e = st.token_begin; e < st.token_end; ++e) {
      const TokenEdge& te = edges[e];
      if (te.negated ? (text && !g_->excludes(te, id)) : te.token == id)
        out.push_back(EarleyItem{te.target, it->origin});
    }
  }
}

void EarleyParser::push_items(const std::vector<EarleyItem>& items) {
  set_begin_.push_back(static_cast<uint32_t>(items_.size()));
  root_final_.push_back(0);
  start_set();
  for (const EarleyItem& it : items) add(it.state, it.origin);
  close_last_set();
}

void EarleyParser::add_to_last(const std::vector<EarleyItem>& items) {
  const size_t from = items_.size();
  start_set();  // add() rebuilds its dedup table from the set's items
  for (const EarleyItem& it : items) add(it.state, it.origin);
  close_last_set(from);
}

bool EarleyParser::last_has_token_edges() const {
  if (!g_->has_token_edges()) return false;
  const auto& states = g_->states();
  for (const EarleyItem* it = last_begin(); it != last_end(); ++it)
    if (states[it->state].token_begin != states[it->state].token_end) return true;
  return false;
}

void EarleyParser::pop(size_t n) {
  for (size_t i = 0; i < n && set_begin_.size() > 1; ++i) {
    items_.resize(set_begin_.back());
    set_begin_.pop_back();
    root_final_.pop_back();
  }
}

ByteSet EarleyParser::next_bytes() const {
  ByteSet out;
  const auto& states = g_->states();
  const auto& edges = g_->byte_edges();
  for (const EarleyItem* it = last_begin(); it != last_end(); ++it) {
    const NfaState& st = states[it->state];
    for (uint32_t e = st.byte_begin; e < st.byte_end; ++e) out |= edges[e].set;
  }
  return out;
}

}  // namespace di::grammar
