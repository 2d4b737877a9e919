// SPDX-License-Identifier: Apache-2.0
#include "grammar/earley.h"

namespace di::grammar {

EarleyParser::EarleyParser(const NfaGrammar* g) : g_(g), stamp_(g->states().size(), 0) {}

void EarleyParser::reset(uint32_t state) {
  items_.clear();
  set_begin_.assign(1, 0);
  root_final_.assign(1, 0);
  ++gen_;
  add(state, kRootOrigin);
  close_last_set();
}

void EarleyParser::add(uint32_t state, uint32_t origin) {
  if (stamp_[state] == gen_) {
    for (size_t i = set_begin_.back(); i < items_.size(); ++i)
      if (items_[i].state == state && items_[i].origin == origin) return;
  } else {
    stamp_[state] = gen_;
  }
  items_.push_back(EarleyItem{state, origin});
}

// Prediction and completion until fixpoint. Empty completions (origin == this set) are handled
// by advancing over nullable rules at prediction time (Aycock & Horspool), so a completion only
// ever looks at an older, immutable set.
void EarleyParser::close_last_set() {
  const auto& states = g_->states();
  const auto& refs = g_->ref_edges();
  const uint32_t k = static_cast<uint32_t>(set_begin_.size() - 1);
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
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
  ++gen_;
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
