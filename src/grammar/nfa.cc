// SPDX-License-Identifier: Apache-2.0
// Thompson construction per rule, then epsilon elimination so the matcher never follows
// epsilon edges at run time (that is what keeps a byte step cheap).
#include "grammar/nfa.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "grammar/aho_corasick.h"

namespace di::grammar {

namespace {

struct BuildError : std::runtime_error {
  BuildError(StatusCode c, const std::string& m) : std::runtime_error(m), code(c) {}
  StatusCode code;
};

struct TState {
  std::vector<std::pair<ByteSet, int>> bytes;
  std::vector<std::pair<RuleId, int>> refs;
  std::vector<std::pair<TokenEdge, int>> tokens;
  std::vector<int> eps;
};

}  // namespace

class NfaBuilder {
 public:
  NfaBuilder(const Grammar& g, const CompileLimits& l) : g_(g), limits_(l) {}

  void build(NfaGrammar& out) {
    const auto& rules = g_.rules();
    if (g_.root() < 0 || g_.root() >= static_cast<RuleId>(rules.size()))
      throw BuildError(StatusCode::kInvalidArgument, "grammar has no root rule");
    out.root_ = g_.root();
    for (size_t r = 0; r < rules.size(); ++r) {
      if (rules[r].body < 0)
        throw BuildError(StatusCode::kInvalidArgument,
                         "rule '" + rules[r].name + "' is not defined");
      out.rule_names_.push_back(rules[r].name);
    }
    for (size_t r = 0; r < rules.size(); ++r) build_rule(static_cast<RuleId>(r), out);
    out.excluded_tokens_ = std::move(excluded_);
    prune_dead_ends(out);
    compute_nullable(out);
  }

 private:
  int new_state() {
    if (++total_ > limits_.max_states)
      throw BuildError(StatusCode::kResourceExhausted, "grammar too large (NFA state limit)");
    if ((total_ & 0xFFF) == 0 && limits_.deadline &&
        std::chrono::steady_clock::now() > *limits_.deadline)
      throw BuildError(StatusCode::kResourceExhausted, "grammar compile timed out");
    ts_.emplace_back();
    return static_cast<int>(ts_.size() - 1);
  }

  int build(ExprId id, int from) {
    const Expr& e = g_.expr(id);
    switch (e.kind) {
      case ExprKind::kEmpty:
        return from;
      case ExprKind::kNothing:
        return new_state();
      case ExprKind::kBytes: {
        int s = new_state();
        ts_[from].bytes.emplace_back(e.bytes, s);
        return s;
      }
      case ExprKind::kRuleRef: {
        int s = new_state();
        ts_[from].refs.emplace_back(e.rule, s);
        return s;
      }
      case ExprKind::kToken: {
        int s = new_state();
        const auto b = static_cast<uint32_t>(excluded_.size());  // (positive: no set)
        excluded_.insert(excluded_.end(), e.excluded.begin(), e.excluded.end());
        const auto end = static_cast<uint32_t>(excluded_.size());
        ts_[from].tokens.emplace_back(TokenEdge{e.token, e.negated, 0, b, end}, s);
        return s;
      }
      case ExprKind::kTagDispatch:
        return build_tag_dispatch(g_.tag_dispatches()[e.rule], from);
      case ExprKind::kSeq: {
        int cur = from;
        for (ExprId c : e.children) cur = build(c, cur);
        return cur;
      }
      case ExprKind::kAlt: {
        int end = new_state();
        for (ExprId c : e.children) {
          int s = new_state();
          ts_[from].eps.push_back(s);
          int t = build(c, s);
          ts_[t].eps.push_back(end);
        }
        return end;
      }
      case ExprKind::kRepeat: {
        int cur = from;
        for (int i = 0; i < e.min; ++i) cur = build(e.children[0], cur);
        if (e.max < 0) {
          int loop = new_state();
          ts_[cur].eps.push_back(loop);
          int t = build(e.children[0], loop);
          ts_[t].eps.push_back(loop);
          return loop;
        }
        int end = new_state();
        ts_[cur].eps.push_back(end);
        for (int i = e.min; i < e.max; ++i) {
          int s = new_state();
          ts_[cur].eps.push_back(s);
          cur = build(e.children[0], s);
          ts_[cur].eps.push_back(end);
        }
        return end;
      }
    }
    return from;
  }

  // One state per Aho-Corasick node that completes no string (per phase: with at_least_one and
  // loop, phase 0 is "no dispatch yet" and may not end). The automaton watches the triggers,
  // the stop strings, then the excludes (a node's match is the longest string ending there). A
  // byte completing trigger t goes to a state that calls t's rule, after which free text
  // restarts at the root (or the expression ends, after a stop string if any); a stop string
  // ends it; an exclude has no edge. Free states loop inside this rule: one item per byte.
  int build_tag_dispatch(const TagDispatchSpec& td, int from) {
    std::vector<std::string> strings = td.triggers;
    strings.insert(strings.end(), td.stops.begin(), td.stops.end());
    strings.insert(strings.end(), td.excludes.begin(), td.excludes.end());
    if (td.triggers.size() != td.rules.size() ||
        std::any_of(strings.begin(), strings.end(), [](auto& x) { return x.empty(); }))
      throw BuildError(StatusCode::kInvalidArgument, "TagDispatch: a rule per trigger, no ''");
    const auto n_trig = static_cast<int32_t>(td.triggers.size());
    const auto n_end = n_trig + static_cast<int32_t>(td.stops.size());
    const AhoCorasick ac(strings);
    const int phases = td.at_least_one && td.loop ? 2 : 1;
    const int end = new_state();
    const int after_once = !td.loop && !td.stops.empty() ? new_state() : end;
    for (const std::string& stop : after_once == end ? std::vector<std::string>{} : td.stops) {
      int cur = after_once;
      for (char ch : stop) {
        const int next = new_state();
        ts_[cur].bytes.emplace_back(ByteSet::single(static_cast<uint8_t>(ch)), next);
        cur = next;
      }
      ts_[cur].eps.push_back(end);
    }
    std::vector<std::vector<int>> free(phases, std::vector<int>(ac.num_nodes(), -1));
    for (int ph = 0; ph < phases; ++ph)
      for (uint32_t n = 0; n < ac.num_nodes(); ++n)
        if (ac.match(n) < 0) free[ph][n] = new_state();
    ts_[from].eps.push_back(free[0][0]);
    for (int ph = 0; ph < phases; ++ph) {
      // After a dispatch: the call state per trigger, shared by every byte completing it.
      std::vector<int> call(td.triggers.size(), -1);
      const int after_ph = phases == 2 ? 1 : 0;
      const bool may_end = !td.at_least_one || ph == 1;
      for (uint32_t n = 0; n < ac.num_nodes(); ++n) {
        const int s = free[ph][n];
        if (s < 0) continue;
        if (may_end && td.stop_eos) ts_[s].eps.push_back(end);
        std::map<int, ByteSet> by_target;
        for (int b = 0; b < 256; ++b) {
          const uint32_t m = ac.next(n, static_cast<uint8_t>(b));
          int target = free[ph][m];
          if (const int32_t t = ac.match(m); t >= n_end || (t >= n_trig && !may_end)) {
            continue;  // an excluded string, or a stop string before the first dispatch
          } else if (t >= n_trig) {
            target = end;
          } else if (t >= 0) {
            if (call[t] < 0) {
              call[t] = new_state();
              const int ret = new_state();
              ts_[call[t]].refs.emplace_back(td.rules[t], ret);
              ts_[ret].eps.push_back(td.loop ? free[after_ph][0] : after_once);
            }
            target = call[t];
          }
          by_target[target].set(static_cast<uint8_t>(b));
        }
        for (auto& [target, set] : by_target) ts_[s].bytes.emplace_back(set, target);
      }
    }
    return end;
  }

  void build_rule(RuleId r, NfaGrammar& out) {
    ts_.clear();
    int start = new_state();
    int end = build(g_.rules()[r].body, start);
    // Epsilon closure per state, then keep states reachable by real edges.
    std::vector<int> map(ts_.size(), -1), order, mark(ts_.size(), -1), stack, closure;
    const size_t base = out.states_.size();
    auto visit = [&](int s) {
      if (map[s] < 0) {
        map[s] = static_cast<int>(base + order.size());
        order.push_back(s);
      }
    };
    visit(start);
    for (size_t oi = 0; oi < order.size(); ++oi) {
      int s = order[oi];
      closure.clear();
      stack.assign(1, s);
      mark[s] = s;
      while (!stack.empty()) {
        int x = stack.back();
        stack.pop_back();
        closure.push_back(x);
        for (int y : ts_[x].eps)
          if (mark[y] != s) mark[y] = s, stack.push_back(y);
      }
      NfaState st;
      st.rule = r;
      st.byte_begin = static_cast<uint32_t>(out.byte_edges_.size());
      st.ref_begin = static_cast<uint32_t>(out.ref_edges_.size());
      st.token_begin = static_cast<uint32_t>(out.token_edges_.size());
      for (int x : closure) {
        if (x == end) st.final = true;
        for (auto& [set, t] : ts_[x].bytes) {
          visit(t);
          add_byte_edge(out, st.byte_begin, set, static_cast<uint32_t>(map[t]));
        }
        for (auto& [rule, t] : ts_[x].refs) {
          visit(t);
          RefEdge re{rule, static_cast<uint32_t>(map[t])};
          bool dup = false;
          for (size_t k = st.ref_begin; k < out.ref_edges_.size(); ++k)
            dup |= out.ref_edges_[k].rule == re.rule && out.ref_edges_[k].target == re.target;
          if (!dup) out.ref_edges_.push_back(re);
        }
        for (auto& [edge, t] : ts_[x].tokens) {
          visit(t);
          TokenEdge te = edge;
          te.target = static_cast<uint32_t>(map[t]);
          bool dup = false;
          for (size_t k = st.token_begin; k < out.token_edges_.size(); ++k)
            dup |= out.token_edges_[k] == te;
          if (!dup) out.token_edges_.push_back(te);
        }
      }
      st.byte_end = static_cast<uint32_t>(out.byte_edges_.size());
      st.ref_end = static_cast<uint32_t>(out.ref_edges_.size());
      st.token_end = static_cast<uint32_t>(out.token_edges_.size());
      out.states_.push_back(st);
    }
    out.rule_start_.push_back(static_cast<uint32_t>(map[start]));
  }

  static void add_byte_edge(NfaGrammar& out, uint32_t begin, const ByteSet& set, uint32_t target) {
    for (size_t k = begin; k < out.byte_edges_.size(); ++k) {
      if (out.byte_edges_[k].target == target) {
        out.byte_edges_[k].set |= set;
        return;
      }
    }
    out.byte_edges_.push_back(ByteEdge{set, target});
  }

  // Drops every edge into a state from which no final state can be reached (a call counts only
  // if the callee can complete), so no byte or token leads into a branch that can never finish
  // (`"a" []`, an impossible JSON member, a structural-tag trigger with an empty content):
  // masks stay exact there. Productive = final, or an edge to a productive target (through a
  // productive callee): a least fixed point. Passes visit callees before callers (call-graph
  // post-order) and each rule's states backwards (they are numbered from its start), so a
  // grammar settles in a pass or two plus one per level of recursion. Grammars without a dead
  // state, nearly all, are left untouched.
  static void prune_dead_ends(NfaGrammar& out) {
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
  static void compute_nullable(NfaGrammar& out) {
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

  const Grammar& g_;
  const CompileLimits& limits_;
  std::vector<TState> ts_;
  std::vector<int32_t> excluded_;  // negated token edges' sets, moved into the NfaGrammar
  size_t total_ = 0;
};

Expected<std::shared_ptr<const NfaGrammar>> NfaGrammar::build(const Grammar& g,
                                                              const CompileLimits& limits) {
  auto out = std::make_shared<NfaGrammar>();
  try {
    NfaBuilder(g, limits).build(*out);
  } catch (const BuildError& e) {
    return Status(e.code, e.what());
  } catch (const std::bad_alloc&) {
    return resource_exhausted("grammar too large (out of memory)");
  }
  return std::shared_ptr<const NfaGrammar>(std::move(out));
}

}  // namespace di::grammar
