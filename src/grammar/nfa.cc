// SPDX-License-Identifier: Apache-2.0
// Thompson construction per rule, then epsilon elimination so the matcher never follows
// epsilon edges at run time (that is what keeps a byte step cheap).
#include "grammar/nfa.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "grammar/aho_corasick.h"
#include "grammar/nfa_passes.h"
#include "grammar/utf8.h"

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
    NfaPasses::prune_dead_ends(out);
    NfaPasses::compute_nullable(out);
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
    if (td.max_chars >= 0) return build_bounded_text(td, from);
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

  // Free text of at most max_chars code points (no triggers), well-formed UTF-8 (else stray
  // continuation bytes would be free characters): one state per (count, automaton node, UTF-8
  // state), built from (0, root, between characters) outwards. The count runs to max_chars
  // plus the longest stop string's code points, since a stop string's own characters are read
  // before it is known to be one; a stop string completed at count c ends the text when c minus
  // its code points is within the bound. An exclude, or a byte UTF-8 refuses, has no edge.
  int build_bounded_text(const TagDispatchSpec& td, int from) {
    if (!td.triggers.empty())
      throw BuildError(StatusCode::kInvalidArgument, "TagDispatch: max_chars with triggers");
    std::vector<std::string> strings = td.stops;
    strings.insert(strings.end(), td.excludes.begin(), td.excludes.end());
    if (std::any_of(strings.begin(), strings.end(), [](auto& x) { return x.empty(); }))
      throw BuildError(StatusCode::kInvalidArgument, "TagDispatch: an empty string");
    std::vector<int64_t> cps;
    int64_t extra = 0;
    for (const std::string& stop : td.stops) {
      cps.push_back(std::count_if(stop.begin(), stop.end(),
                                  [](char c) { return (static_cast<uint8_t>(c) & 0xC0) != 0x80; }));
      extra = std::max(extra, cps.back());
    }
    const AhoCorasick ac(strings);
    const int64_t limit = td.max_chars + extra, nodes = ac.num_nodes();
    if ((limit + 1) * nodes > static_cast<int64_t>(limits_.max_states))
      throw BuildError(StatusCode::kResourceExhausted, "grammar too large (NFA state limit)");
    const int end = new_state();
    Bounded b{std::vector<int>(static_cast<size_t>((limit + 1) * nodes * kUtf8DfaStates), -1),
              nodes, td.max_chars};
    std::vector<int64_t> todo;  // indices into b.free: (c * nodes + n) * kUtf8DfaStates + u
    auto state_of = [&](int64_t c, int64_t n, int u) {
      const int64_t i = (c * nodes + n) * kUtf8DfaStates + u;
      if (b.free[i] < 0) b.free[i] = new_state(), todo.push_back(i);
      return b.free[i];
    };
    const int first = state_of(0, 0, 0);  // (new_state may move ts_: not inside ts_[from])
    ts_[from].eps.push_back(first);
    const auto n_stop = static_cast<int32_t>(td.stops.size());
    while (!todo.empty()) {
      const int64_t i = todo.back();
      todo.pop_back();
      const int64_t c = i / kUtf8DfaStates / nodes, n = i / kUtf8DfaStates % nodes;
      const int u = static_cast<int>(i % kUtf8DfaStates), s = b.free[i];
      if (td.stop_eos && c <= td.max_chars && u == 0) ts_[s].eps.push_back(end);
      std::map<int, ByteSet> by_target;
      for (int byte = 0; byte < 256; ++byte) {
        const int u2 = utf8_dfa_step(u, static_cast<uint8_t>(byte));
        if (u2 < 0) continue;
        const uint32_t m = ac.next(static_cast<uint32_t>(n), static_cast<uint8_t>(byte));
        const int64_t c2 = c + (u == 0 ? 1 : 0);
        const int32_t t = ac.match(m);
        int target = -1;
        if (t >= 0 && t < n_stop && u2 == 0 && c2 - cps[t] <= td.max_chars)
          target = end;
        else if (t < 0 && c2 <= limit)
          target = state_of(c2, m, u2);
        if (target >= 0) by_target[target].set(static_cast<uint8_t>(byte));
      }
      for (auto& [target, set] : by_target) ts_[s].bytes.emplace_back(set, target);
    }
    bounded_.push_back(std::move(b));
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
    // Bounded texts: each reachable (count, node, UTF-8 state) state's twin is the reachable
    // state of its (node, UTF-8 state) with the smallest count.
    for (const Bounded& b : bounded_) {
      const int64_t keys = b.nodes * kUtf8DfaStates;
      for (int64_t k = 0; k < keys; ++k) {
        int64_t rep = -1;
        for (int64_t c = 0; c * keys + k < static_cast<int64_t>(b.free.size()); ++c) {
          const int s = b.free[c * keys + k];
          if (s < 0 || map[s] < 0) continue;
          if (rep < 0) {
            rep = c;
            continue;
          }
          out.twins_[static_cast<uint32_t>(map[s])] =
              NfaGrammar::MaskTwin{static_cast<uint32_t>(map[b.free[rep * keys + k]]),
                                   b.max_chars - c, b.max_chars - rep};
        }
      }
    }
    bounded_.clear();
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

  const Grammar& g_;
  const CompileLimits& limits_;
  std::vector<TState> ts_;
  // The current rule's bounded texts: free[(count * nodes + node) * kUtf8DfaStates + utf8 state]
  // (ts_ ids, -1 where none was reached).
  struct Bounded {
    std::vector<int> free;
    int64_t nodes, max_chars;
  };
  std::vector<Bounded> bounded_;
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
