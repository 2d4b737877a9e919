// SPDX-License-Identifier: Apache-2.0
// Proofs that a mask-walk configuration behaves like the body of a JSON string (string_body.h),
// so the walk can take trie subtrees from the trie's per-node body tables (state_walk.cc).
#include <algorithm>
#include <limits>

#include "grammar/state_walker.h"
#include "grammar/string_body.h"
#include "util/check.h"

namespace di::grammar::walk {

// Whether c (at depth d of the current path) accepts exactly StringBodyDfa's language from its
// loop state on every byte but '"' and '\\', without the root rule ending in between: then a
// token without those bytes is accepted iff its bytes are a string-body prefix.
bool Walker::is_string_body(int32_t c, uint32_t d) {
  if (cfg_[c].body < 0) {
    replay_to(d);
    pairs_.clear();
    if (at_.size() < d + kMaxBodyPairs + 2) at_.resize(d + kMaxBodyPairs + 2);
    const bool ok = bisimulate(c, StringBodyDfa::kLoop, d);
    cfg_[c].body = ok ? 1 : 0;
    // A proof covers every configuration it paired with the loop state.
    for (uint64_t pr : pairs_)
      if (ok && (pr & 0xFF) == StringBodyDfa::kLoop) cfg_[static_cast<int32_t>(pr >> 8)].body = 1;
    if (ok) proven_.insert(proven_.end(), pairs_.begin(), pairs_.end());
  }
  return cfg_[c].body == 1;
}

// Explores pairs (configuration, DFA state) reachable together; the parser stands at c.
bool Walker::bisimulate(int32_t c, int r, uint32_t d) {
  const uint64_t pair = (uint64_t{static_cast<uint32_t>(c)} << 8) | static_cast<uint32_t>(r);
  if (std::find(pairs_.begin(), pairs_.end(), pair) != pairs_.end()) return true;
  if (std::find(proven_.begin(), proven_.end(), pair) != proven_.end()) return true;
  if (pairs_.size() >= kMaxBodyPairs || cfg_[c].table < 0 || cfg_[c].final) return false;
  pairs_.push_back(pair);
  at_[d] = c;
  for (int b = 0; b < 256; ++b) {
    if (b == '"' || b == '\\') continue;
    const int r2 = StringBodyDfa::step(r, static_cast<uint8_t>(b));
    const int32_t c2 = probe(c, d, static_cast<uint8_t>(b));
    if ((c2 == kDead) != (r2 == StringBodyDfa::kDead)) return false;
    if (c2 == kDead) continue;
    if (cfg_[c2].ex != cfg_[c].ex) return false;
    const uint64_t p2 = (uint64_t{static_cast<uint32_t>(c2)} << 8) | static_cast<uint32_t>(r2);
    if (std::find(pairs_.begin(), pairs_.end(), p2) != pairs_.end()) continue;
    if (std::find(proven_.begin(), proven_.end(), p2) != proven_.end()) continue;
    DI_CHECK(p_.push_byte(static_cast<uint8_t>(b)));
    const bool ok = bisimulate(c2, r2, d + 1);
    p_.pop();
    at_[d] = c;
    if (!ok) return false;
  }
  return true;
}

// Budget of c (at depth d of the current path) as a bounded string body: c accepts exactly the
// string-body byte strings (on every byte but '"' and '\\') of at most `budget` characters, and
// the root rule does not end inside them; INT32_MAX: no bound. -1: not such a body.
//
// Shown from the NFA, not by exploring configurations (a maxLength string makes one chain of
// ~19 configurations per character; exploring them cost more than the walk they saved): c's
// only live item not predicted in its set is (s, o), so c is the closure of that item. s is a
// "chain" state: its one call is to a rule R that reads exactly one body character (checked once
// per walk, body_char_rule), returning to a state t of the same shape, and its byte edges only
// take '"' or '\\'. So a body character moves c to the closure of (t, o), and the budget is the
// length of the chain (or "more than any token", past 256 states or on a cycle).
int32_t Walker::chain_budget(int32_t c, uint32_t d) {
  if (cfg_[c].budget != kBudgetUnknown) return cfg_[c].budget;
  cfg_[c].budget = kNotCounted;
  if (cfg_[c].final || cfg_[c].ex) return -1;
  replay_to(d);
  const auto& states = g_.states();
  const uint32_t cur = static_cast<uint32_t>(p_.num_sets() - 1);
  int64_t head = -1;
  for (const EarleyItem* it = p_.last_begin(); it != p_.last_end(); ++it) {
    const NfaState& st = states[it->state];
    if (st.byte_begin == st.byte_end && st.ref_begin == st.ref_end) continue;  // spent
    if (it->origin == cur) continue;                                           // predicted
    if (head >= 0) return -1;
    head = it->state;
  }
  if (head < 0) return -1;
  // Follow the chain; memoized per state, a cycle means no bound.
  std::vector<uint32_t> chain;
  uint32_t s = static_cast<uint32_t>(head);
  int32_t tail = 0;  // budget after the chain's last state
  RuleId rule = -1;
  while (true) {
    if (auto m = chain_memo_.find(s); m != chain_memo_.end()) {
      tail = m->second;
      break;
    }
    const NfaState& st = states[s];
    if (st.final) return -1;
    for (uint32_t e = st.byte_begin; e < st.byte_end; ++e) {
      ByteSet other = g_.byte_edges()[e].set;
      other.words['"' >> 6] &= ~(uint64_t{1} << ('"' & 63));
      other.words['\\' >> 6] &= ~(uint64_t{1} << ('\\' & 63));
      if (!other.empty()) return -1;
    }
    if (st.ref_end == st.ref_begin) {  // end of the chain: no character left
      chain_memo_[s] = 0;
      tail = 0;
      break;
    }
    const RefEdge& call = g_.ref_edges()[st.ref_begin];
    if (st.ref_end - st.ref_begin != 1 || (rule >= 0 && call.rule != rule)) return -1;
    rule = call.rule;
    if (!body_char_rule(rule)) return -1;
    // A cycle, or more characters than any token has (counts saturate at 255): no bound that
    // matters. (Chains are as long as maxLength, up to 10000.)
    if (call.target == s) {
      tail = std::numeric_limits<int32_t>::max();
      break;
    }
    if (chain.size() >= 256) {  // only the head is known to have 256 characters left
      cfg_[c].budget = std::numeric_limits<int32_t>::max();
      return cfg_[c].budget;
    }
    chain.push_back(s);
    s = call.target;
  }
  for (size_t k = chain.size(); k-- > 0;) {
    if (tail != std::numeric_limits<int32_t>::max()) ++tail;
    chain_memo_[chain[k]] = tail;
  }
  const int32_t budget = chain.empty() ? tail : chain_memo_[static_cast<uint32_t>(head)];
  cfg_[c].budget = budget;
  return budget;
}

// Whether rule r, started on its own, reads exactly one StringBodyDfa character on bytes other
// than '"' and '\\': it ends exactly when the DFA is back between characters, never before,
// and nothing of it is left to read then. One parser step per (byte class, DFA state).
bool Walker::body_char_rule(RuleId r) {
  if (auto it = char_rule_memo_.find(r); it != char_rule_memo_.end()) return it->second;
  EarleyParser p(&g_);
  p.reset(g_.rule_start(r));
  const bool ok = !p.accepting() && char_dfs(p, StringBodyDfa::kLoop, 0);
  char_rule_memo_[r] = ok;
  return ok;
}

bool Walker::char_dfs(EarleyParser& p, int r, int depth) {
  if (depth > 0 && r == StringBodyDfa::kLoop) return p.accepting() && p.next_bytes().empty();
  if (p.accepting() || depth > 4) return false;
  std::vector<std::pair<ByteSet, int>> done;  // (byte class, DFA state) already checked
  for (int b = 0; b < 256; ++b) {
    if (b == '"' || b == '\\') continue;
    const int r2 = StringBodyDfa::step(r, static_cast<uint8_t>(b));
    const ByteSet cls = byte_class_of(p, static_cast<uint8_t>(b));
    bool seen = false;
    for (const auto& [c, x] : done) seen = seen || (x == r2 && c == cls);
    if (seen) continue;
    done.emplace_back(cls, r2);
    const bool ok = p.push_byte(static_cast<uint8_t>(b));
    if (ok != (r2 != StringBodyDfa::kDead)) {
      if (ok) p.pop();
      return false;
    }
    if (!ok) continue;
    const bool good = char_dfs(p, r2, depth + 1);
    p.pop();
    if (!good) return false;
  }
  return true;
}

}  // namespace di::grammar::walk
