// SPDX-License-Identifier: Apache-2.0
// See nfa_passes.h.
#include "grammar/nfa_passes.h"

#include <vector>

namespace di::grammar {

// Drops every edge into a state from which no final state can be reached (a call counts only
// if the callee can complete), so no byte or token leads into a branch that can never finish
// (`"a" []`, an impossible JSON member, a structural-tag trigger with an empty content):
// masks stay exact there. Productive = final, or an edge to a productive target (through a
// productive callee): a least fixed point. Passes visit callees before callers (call-graph
// post-order) and each rule's states backwards (they are numbered from its start), so a
// grammar settles in a pass or two plus one per level of recursion. Grammars without a dead
// state, nearly all, are left untouched.
void NfaPasses::prune_dead_ends(NfaGrammar& out) {
  const size_t n = out.states_.size(), nr = out.rule_start_.size();
  auto rule_end = [&](size_t r) {
    return r + 1 < nr ? out.rule_start_[r + 1] : static_cast<uint32_t>(n);
  };
  std::vector<uint32_t> order;  // rules, callees first
  std::vector<uint8_t> seen(nr, 0);
  struct Frame {
    uint32_t rule, state, edge;  // the next call edge to follow
  };
  std::vector<Frame> stack;
  auto enter = [&](uint32_t r) {
    seen[r] = 1;
    stack.push_back(Frame{r, out.rule_start_[r], out.states_[out.rule_start_[r]].ref_begin});
  };
  for (uint32_t r0 = 0; r0 < nr; ++r0) {
    if (!seen[r0]) enter(r0);
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.state >= rule_end(f.rule)) {
        order.push_back(f.rule);
        stack.pop_back();
      } else if (f.edge >= out.states_[f.state].ref_end) {
        if (++f.state < rule_end(f.rule)) f.edge = out.states_[f.state].ref_begin;
      } else if (const RuleId c = out.ref_edges_[f.edge++].rule; !seen[c]) {
        enter(static_cast<uint32_t>(c));  // f is not used after this
      }
    }
  }
  std::vector<uint8_t> live(n, 0);
  auto rule_live = [&](RuleId r) { return live[out.rule_start_[r]] != 0; };
  size_t num_live = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r : order) {
      for (uint32_t i = rule_end(r); i-- > out.rule_start_[r];) {
        if (live[i]) continue;
        const NfaState& st = out.states_[i];
        bool ok = st.final;
        for (uint32_t e = st.byte_begin; e < st.byte_end && !ok; ++e)
          ok = live[out.byte_edges_[e].target];
        for (uint32_t e = st.token_begin; e < st.token_end && !ok; ++e)
          ok = live[out.token_edges_[e].target];
        for (uint32_t e = st.ref_begin; e < st.ref_end && !ok; ++e)
          ok = live[out.ref_edges_[e].target] && rule_live(out.ref_edges_[e].rule);
        if (ok) live[i] = 1, changed = true, ++num_live;
      }
    }
  }
  if (num_live == n) return;
  std::vector<ByteEdge> bytes;
  std::vector<RefEdge> refs;
  std::vector<TokenEdge> tokens;
  for (NfaState& st : out.states_) {
    const uint32_t b0 = static_cast<uint32_t>(bytes.size()),
                   r0 = static_cast<uint32_t>(refs.size()),
                   t0 = static_cast<uint32_t>(tokens.size());
    for (uint32_t e = st.byte_begin; e < st.byte_end; ++e)
      if (live[out.byte_edges_[e].target]) bytes.push_back(out.byte_edges_[e]);
    for (uint32_t e = st.ref_begin; e < st.ref_end; ++e)
      if (live[out.ref_edges_[e].target] && rule_live(out.ref_edges_[e].rule))
        refs.push_back(out.ref_edges_[e]);
    for (uint32_t e = st.token_begin; e < st.token_end; ++e)
      if (live[out.token_edges_[e].target]) tokens.push_back(out.token_edges_[e]);
    st.byte_begin = b0, st.byte_end = static_cast<uint32_t>(bytes.size());
    st.ref_begin = r0, st.ref_end = static_cast<uint32_t>(refs.size());
    st.token_begin = t0, st.token_end = static_cast<uint32_t>(tokens.size());
  }
  out.byte_edges_.swap(bytes);
  out.ref_edges_.swap(refs);
  out.token_edges_.swap(tokens);
}

// A rule is nullable when its final state is reachable from its start through nullable calls.
void NfaPasses::compute_nullable(NfaGrammar& out) {
  size_t nr = out.rule_start_.size();
  out.nullable_.assign(nr, false);
  std::vector<uint32_t> stack;
  std::vector<uint8_t> seen(out.states_.size(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < nr; ++r) {
      if (out.nullable_[r]) continue;
      stack.assign(1, out.rule_start_[r]);
      std::vector<uint32_t> touched;
      bool found = false;
      while (!stack.empty() && !found) {
        uint32_t s = stack.back();
        stack.pop_back();
        if (seen[s]) continue;
        seen[s] = 1;
        touched.push_back(s);
        const NfaState& st = out.states_[s];
        if (st.final) found = true;
        for (uint32_t k = st.ref_begin; k < st.ref_end; ++k)
          if (out.nullable_[out.ref_edges_[k].rule]) stack.push_back(out.ref_edges_[k].target);
      }
      for (uint32_t s : touched) seen[s] = 0;
      if (found) out.nullable_[r] = true, changed = true;
    }
  }
}

}  // namespace di::grammar
