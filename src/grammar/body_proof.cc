// SPDX-License-Identifier: Apache-2.0
// Proofs that a mask-walk configuration behaves like the body of a JSON string (string_body.h)
// or a run of one ASCII class, and the shortcuts they allow: the walk (state_walk.cc) takes such
// trie subtrees from the trie's per-node tables and bitmaps instead of walking them.
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
    if (ok) mark_proven();
  }
  return cfg_[c].body == 1;
}

// The same inside a character: c (reached by a path that leaves StringBodyDfa in state r)
// behaves like the DFA from r. Such nodes are where multi-byte characters complete: thousands
// of CJK tokens were each one parser-free but separate visit.
bool Walker::is_body_state(int32_t c, int r, uint32_t d) {
  if (r == StringBodyDfa::kLoop) return is_string_body(c, d);
  if (cfg_[c].body_mid == kMidUnknown) {
    replay_to(d);
    pairs_.clear();
    if (at_.size() < d + kMaxBodyPairs + 2) at_.resize(d + kMaxBodyPairs + 2);
    const bool ok = bisimulate(c, r, d);
    cfg_[c].body_mid = static_cast<int8_t>(ok ? r : kMidNo);
    if (ok) mark_proven();
  }
  return cfg_[c].body_mid == r;
}

// A proof covers every configuration it paired with a DFA state.
void Walker::mark_proven() {
  for (uint64_t pr : pairs_) {
    Config& x = cfg_[static_cast<int32_t>(pr >> 8)];
    const int r = static_cast<int>(pr & 0xFF);
    if (r == StringBodyDfa::kLoop)
      x.body = 1;
    else if (x.body_mid == kMidUnknown)
      x.body_mid = static_cast<int8_t>(r);
  }
  proven_.insert(proven_.end(), pairs_.begin(), pairs_.end());
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

// Class run of c (at depth d): c's only live item (s, o), s calls nothing, and the printable
// ASCII bytes (but '"', '\\') of its edges, C, all lead along one edge to one state t of the
// same kind, and so on: a chain (or a cycle: no bound) of such states, ending in one that takes
// no byte of C. No state on it is final (the rule cannot end, no caller item appears). So c
// reads exactly the strings over C of at most the chain's length. -1: not such a run.
int32_t Walker::class_budget(int32_t c, uint32_t d) {
  if (cfg_[c].run_budget != kBudgetUnknown) return cfg_[c].run_budget;
  cfg_[c].run_budget = kNotCounted;
  if (cfg_[c].final || cfg_[c].ex) return -1;
  replay_to(d);
  const auto& states = g_.states();
  const auto& edges = g_.byte_edges();
  int64_t head = -1;
  for (const EarleyItem* it = p_.last_begin(); it != p_.last_end(); ++it) {
    const NfaState& st = states[it->state];
    if (st.byte_begin == st.byte_end && st.ref_begin == st.ref_end) continue;  // spent
    if (head >= 0) return -1;
    head = it->state;
  }
  if (head < 0) return -1;
  ByteSet cls;
  for (uint32_t e = states[head].byte_begin; e < states[head].byte_end; ++e) cls |= edges[e].set;
  ByteSet printable = ByteSet::range(0x20, 0x7F);
  printable.words['"' >> 6] &= ~(uint64_t{1} << ('"' & 63));
  printable.words['\\' >> 6] &= ~(uint64_t{1} << ('\\' & 63));
  for (int w = 0; w < 4; ++w) cls.words[w] &= printable.words[w];
  if (cls.empty()) return -1;
  uint32_t s = static_cast<uint32_t>(head);
  int32_t budget = 0;
  while (true) {
    const NfaState& st = states[s];
    if (st.final || st.ref_begin != st.ref_end) return -1;
    int64_t next = -1;
    bool some = false;
    for (uint32_t e = st.byte_begin; e < st.byte_end; ++e) {
      bool all = true, any = false;
      for (int w = 0; w < 4; ++w) {
        const uint64_t in = edges[e].set.words[w] & cls.words[w];
        any = any || in != 0;
        all = all && in == cls.words[w];
      }
      if (!any) continue;
      if (some || !all) return -1;  // C split over edges: not one run
      some = true;
      next = edges[e].target;
    }
    if (!some) break;  // the run ends here
    if (next == s || budget >= 256) {
      budget = std::numeric_limits<int32_t>::max();
      break;
    }
    ++budget;
    s = static_cast<uint32_t>(next);
  }
  cfg_[c].run_class = cls;
  cfg_[c].run_budget = budget;
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

void Walker::accept_within(uint32_t i, uint32_t base, int32_t r) {
  const TokenTrie& t = t_;
  // Characters only grow down the trie and a dead body prefix stays dead: skip such subtrees.
  for (uint32_t j = i + 1; j < t.skip(i);) {
    if (t.body_state(j) == StringBodyDfa::kDead || t.chars(j) - base > static_cast<uint32_t>(r)) {
      j = t.skip(j);
      continue;
    }
    if (t.subtree_body_ok(j) && t.subtree_max_chars(j) - base <= static_cast<uint32_t>(r)) {
      accept(t.tokens_begin(j), t.subtree_tokens_end(j));  // j and everything below it
      j = t.skip(j);
      continue;
    }
    accept(t.tokens_begin(j), t.tokens_end(j));
    ++j;
  }
}

// A class run (class_budget) over a subtree whose bytes all belong to its class: a token below
// is accepted iff it has at most the budget's bytes (ASCII: bytes are characters and body
// prefixes). Saves the walk of counted regex classes, which have no self-loop to shortcut.
bool Walker::take_class_subtree(uint32_t i, int32_t c, uint32_t d) {
  const TokenTrie& t = t_;
  if (cfg_[c].run_budget == kNotCounted) return false;
  if (cfg_[c].run_budget == kBudgetUnknown && t.skip(i) <= i + kMinBodySubtree) return false;
  const int32_t r = class_budget(c, d);
  if (r < 0) return false;
  const ByteSet& below = t.subtree_bytes(i);
  const ByteSet& cls = cfg_[c].run_class;
  for (int w = 0; w < 4; ++w)
    if (below.words[w] & ~cls.words[w]) return false;
  if (t.subtree_max_chars(i) - t.chars(i) <= static_cast<uint32_t>(r))
    accept(t.subtree_tokens_begin(i), t.subtree_tokens_end(i));
  else
    accept_within(i, t.chars(i), r);
  return true;
}

// Budget of c (at trie node i, depth d, between characters) as a string body whose subtree
// has '"' or '\\' somewhere below (so take_body_subtree declined it); -1: not a body.
int32_t Walker::anchor_budget(uint32_t i, int32_t c, uint32_t d) {
  if (cfg_[c].ex) return -1;
  if (cfg_[c].body == 1) return std::numeric_limits<int32_t>::max();
  if (cfg_[c].budget >= 0) return cfg_[c].budget;
  if (t_.skip(i) <= i + kMinBodySubtree) return -1;
  // Only configurations that can read every character a body can start with are worth a proof.
  for (int b = 0x20; b < 0xF5; ++b) {
    if (b == '"' || b == '\\' || (b >= 0x80 && b < 0xC2)) continue;
    if (!cfg_[c].live.test(static_cast<uint8_t>(b))) return -1;
  }
  if (cfg_[c].budget == kBudgetUnknown) {
    const int32_t r = chain_budget(c, d);
    if (r >= 0) return r;
  }
  return cfg_[c].body < 0 && is_string_body(c, d) ? std::numeric_limits<int32_t>::max() : -1;
}

// Budget of the walk's root configuration as a string body (INT32_MAX: unbounded), -1: not one.
int32_t Walker::root_body_budget() {
  const TokenTrie& t = t_;
  if (t.subtree_max_chars(0) >= 255) return -1;  // saturated counts
  const int32_t r = chain_budget(0, 0);
  if (r >= 0) return r;
  // Only roots that can read every character a body can start with are worth a proof.
  for (int b = 0x20; b < 0xF5; ++b) {
    if (b == '"' || b == '\\' || (b >= 0x80 && b < 0xC2)) continue;
    if (!cfg_[0].live.test(static_cast<uint8_t>(b))) return -1;
  }
  return is_string_body(0, 0) ? std::numeric_limits<int32_t>::max() : -1;
}

}  // namespace di::grammar::walk
