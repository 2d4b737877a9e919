// SPDX-License-Identifier: Apache-2.0
#include "grammar/state_walk.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/earley.h"
#include "grammar/state_walker.h"
#include "grammar/string_body.h"
#include "util/check.h"

namespace di::grammar {

namespace walk {

// The configuration of the parser's newest set.
int32_t Walker::intern(bool ex) {
  const auto& states = g_.states();
  const uint32_t cur = static_cast<uint32_t>(p_.num_sets() - 1);
  const bool final = p_.root_final(cur);
  key_.clear();
  for (const EarleyItem* it = p_.last_begin(); it != p_.last_end(); ++it) {
    const NfaState& st = states[it->state];
    if (st.byte_begin == st.byte_end && st.ref_begin == st.ref_end) continue;  // spent
    // An origin is named by the configuration of its set (canonical, see the header), so
    // equal keys stay equivalent however the paths to them differ.
    uint64_t enc;
    if (it->origin == kRootOrigin)
      enc = 0xFFFFFFFFu;
    else if (it->origin == cur)
      enc = 0xFFFFFFFEu;
    else
      enc = static_cast<uint32_t>(at_[it->origin]);
    key_.push_back((uint64_t{it->state} << 32) | enc);
  }
  if (trans_.size() / 256 >= kMaxTables) {
    cfg_.push_back(Config{final,
                          ex,
                          -1,
                          {},
                          {},
                          -1,
                          kMidUnknown,
                          kBudgetUnknown,
                          kBudgetUnknown,
                          {},
                          p_.next_bytes()});
    return static_cast<int32_t>(cfg_.size() - 1);
  }
  std::sort(key_.begin(), key_.end());
  key_.push_back(uint64_t{final} << 1 | uint64_t{ex});
  std::string k(reinterpret_cast<const char*>(key_.data()), key_.size() * sizeof(uint64_t));
  auto [pos, fresh] = ids_.emplace(std::move(k), static_cast<int32_t>(cfg_.size()));
  if (!fresh) return pos->second;
  cfg_.push_back(Config{final,
                        ex,
                        static_cast<int32_t>(trans_.size()),
                        {},
                        {},
                        -1,
                        kMidUnknown,
                        kBudgetUnknown,
                        kBudgetUnknown,
                        {},
                        p_.next_bytes()});
  trans_.resize(trans_.size() + 256, kUnknown);
  return pos->second;
}

void Walker::replay_to(uint32_t d) {
  if (pdepth_ > d) {
    p_.truncate(d + 1);
    pdepth_ = d;
  }
  while (pdepth_ < d) {
    ++pdepth_;
    // The path was walked before, so every byte of it is accepted.
    DI_CHECK(p_.push_byte(t_.byte(path_[pdepth_])));
  }
}

// Configuration after `b` at depth d from configuration `parent` (at depth d - 1).
int32_t Walker::step(int32_t parent, uint32_t d, uint8_t b, bool keep) {
  const int32_t table = cfg_[parent].table;
  if (table >= 0 && trans_[table + b] != kUnknown) return trans_[table + b];
  if (!cfg_[parent].live.test(b)) return kDead;
  replay_to(d - 1);
  const int32_t c = probe(parent, d - 1, b);
  if (keep && c != kDead) {
    DI_CHECK(p_.push_byte(b));
    pdepth_ = d;
  }
  return c;
}

// Transition of c on b, the parser standing at c (depth d); leaves the parser there.
int32_t Walker::probe(int32_t c, uint32_t d, uint8_t b) {
  const int32_t table = cfg_[c].table;
  if (table >= 0 && trans_[table + b] != kUnknown) return trans_[table + b];
  const bool ex = d + 1 >= 2 && (cfg_[c].ex || cfg_[c].final);
  if (!cfg_[c].live.test(b)) {
    if (table >= 0) trans_[table + b] = kDead;
    return kDead;
  }
  const ByteSet same = byte_class(b);
  int32_t next = kDead;
  if (p_.push_byte(b)) {
    next = intern(ex);
    p_.pop();
  }
  if (table < 0) return next;
  // Every byte of b's class matches the same edges, so push_byte builds the same set from it.
  for (int w = 0; w < 4; ++w) {
    for (uint64_t m = same.words[w]; m; m &= m - 1)
      trans_[table + w * 64 + __builtin_ctzll(m)] = next;
  }
  return next;
}

// Bytes that every byte edge of the parser's newest set treats like b (in all of them or in
// none): scanning any of them yields the same Earley set. JSON grammars have few such classes
// (a string body: ASCII, a few UTF-8 lead and continuation ranges), so one parser step decides
// dozens of transitions.
ByteSet Walker::byte_class(uint8_t b) const {
  return byte_class_of(p_, b);
}

ByteSet Walker::byte_class_of(const EarleyParser& p, uint8_t b) const {
  ByteSet same;
  for (uint64_t& w : same.words) w = ~uint64_t{0};
  const auto& states = g_.states();
  const auto& edges = g_.byte_edges();
  for (const EarleyItem* it = p.last_begin(); it != p.last_end(); ++it) {
    const NfaState& st = states[it->state];
    for (uint32_t e = st.byte_begin; e < st.byte_end; ++e) {
      const ByteSet& set = edges[e].set;
      const bool in = set.test(b);
      for (int w = 0; w < 4; ++w) same.words[w] &= in ? set.words[w] : ~set.words[w];
    }
  }
  return same;
}

// Whether every byte of `bytes` maps c (at depth d of the current path) back to c.
bool Walker::loops_on(int32_t c, uint32_t d, const ByteSet& bytes) {
  if (cfg_[c].table < 0) return false;
  for (int w = 0; w < 4; ++w) {
    if (bytes.words[w] & cfg_[c].exits.words[w]) return false;
  }
  for (int w = 0; w < 4; ++w) {
    uint64_t todo = bytes.words[w] & ~cfg_[c].loops.words[w];
    while (todo) {
      const uint8_t b = static_cast<uint8_t>(w * 64 + __builtin_ctzll(todo));
      todo &= todo - 1;
      replay_to(d);
      const bool loop = probe(c, d, b) == c;
      (loop ? cfg_[c].loops : cfg_[c].exits).set(b);
      if (!loop) return false;
    }
  }
  return true;
}

bool Walker::take_body_subtree(uint32_t i, int32_t c, uint32_t d, StateMask& out) {
  const TokenTrie& t = t_;
  const ByteSet& below = t.subtree_bytes(i);
  if (below.test('"') || below.test('\\')) return false;
  const bool big = t.skip(i) > i + kMinBodySubtree;
  const int r0 = t.body_state(i);
  if (r0 == StringBodyDfa::kDead) return false;
  if (r0 != StringBodyDfa::kLoop) {  // inside a character: the unbounded body only
    if (cfg_[c].ex || !(big || cfg_[c].body_mid == r0) || !is_body_state(c, r0, d)) return false;
    if (t.subtree_body_ok(i))
      accept(t.subtree_tokens_begin(i), t.subtree_tokens_end(i));
    else
      accept_within(i, t.chars(i), std::numeric_limits<int32_t>::max());
    return true;
  }
  // A proof is cached per configuration, so once proven it pays off for small subtrees too.
  if ((big || cfg_[c].body == 1) && cfg_[c].budget < 0 && is_string_body(c, d)) {
    // The path so far ends between characters, so a token below is accepted iff its whole
    // byte string is a string-body prefix (the DFA is deterministic).
    if (t.subtree_body_ok(i)) {  // every token below is one: take the contiguous run
      accept(t.subtree_tokens_begin(i), t.subtree_tokens_end(i));
      return true;
    }
    const bool ex = cfg_[c].ex;
    for (uint32_t j = i + 1; j < t.skip(i);) {
      if (t.body_state(j) != StringBodyDfa::kDead && t.subtree_body_ok(j)) {  // one run
        accept(t.tokens_begin(j), t.subtree_tokens_end(j));
        j = t.skip(j);
        continue;
      }
      if (t.body_state(j) == StringBodyDfa::kDead && !ex) {  // dead below too
        j = t.skip(j);
        continue;
      }
      if (t.tokens_begin(j) != t.tokens_end(j)) {
        if (t.body_state(j) != StringBodyDfa::kDead)
          accept(t.tokens_begin(j), t.tokens_end(j));
        else
          out.uncertain.push_back(j);
      }
      ++j;
    }
    return true;
  }
  // A bounded body (maxLength): the same, and the token's characters must fit the budget.
  // Without this every character position was a new configuration chain down the trie (~270k
  // nodes, 3-6 ms per first visit).
  if (cfg_[c].ex || (!big && cfg_[c].budget == kNotCounted)) return false;
  const uint32_t base = t.chars(i), top = t.subtree_max_chars(i);
  if (top >= 255) return false;  // saturated counts
  const int32_t r = chain_budget(c, d);
  if (r < 0) return false;
  if (static_cast<uint32_t>(r) >= top - base && t.subtree_body_ok(i)) {
    accept(t.subtree_tokens_begin(i), t.subtree_tokens_end(i));
    return true;
  }
  accept_within(i, t.chars(i), r);
  return true;
}

std::unique_ptr<StateMask> Walker::run() {
  const TokenTrie& t = t_;
  auto out = std::make_unique<StateMask>();
  // Accepted tokens go straight into a bitmap: states inside free text accept nearly the whole
  // vocabulary, and a growing id vector plus a second pass cost more than the walk itself.
  bits_.assign((t.vocab_size() + 31) / 32, 0);
  num_accepted_ = 0;
  // Typical walks build tens of configurations: reserving avoids regrowing (and copying) the
  // transition tables, which showed up as malloc time in profiles.
  cfg_.reserve(64);
  trans_.reserve(64 * 256);
  ids_.reserve(64);
  // The root: never merged with others.
  cfg_.push_back(Config{false,
                        false,
                        0,
                        {},
                        {},
                        -1,
                        kMidUnknown,
                        kBudgetUnknown,
                        kBudgetUnknown,
                        {},
                        p_.next_bytes()});
  trans_.assign(256, kUnknown);
  path_.assign(1, 0);
  at_.assign(1, 0);
  const uint32_t n = static_cast<uint32_t>(t.num_nodes());
  // A walk rooted in a string body (free or bounded: most states of string rules) takes every
  // body-prefix token within its budget from the trie's bitmaps and walks only subtrees with a
  // '"' or '\\' below (or dead bytes on the way): those were ~126k bit sets and ~1 ms.
  const int32_t root_budget = root_body_budget();
  if (root_budget >= 0) {
    const uint32_t* b =
        t.body_bits_upto(static_cast<uint32_t>(std::min<int32_t>(root_budget, 255)));
    for (size_t w = 0; w < bits_.size(); ++w) bits_[w] |= b[w];
    num_accepted_ = t.vocab_size();
  }
  anchors_.clear();
  uint32_t i = 1;
  while (i < n) {
    const bool body_below = t.body_state(i) != StringBodyDfa::kDead &&
                            !t.subtree_bytes(i).test('"') && !t.subtree_bytes(i).test('\\');
    if (root_budget >= 0 && body_below) {
      i = t.skip(i);  // the path and all below are body bytes: the bitmap decided them
      continue;
    }
    while (!anchors_.empty() && anchors_.back().end <= i) anchors_.pop_back();
    if (!anchors_.empty() && body_below) {
      // Below a string-body configuration, on body bytes only: decided by the trie's tables
      // (the children of quote-containing nodes were ~10k parser-free visits per walk).
      const Anchor& a = anchors_.back();
      if (t.chars(i) - a.base <= static_cast<uint32_t>(a.budget)) {
        accept(t.tokens_begin(i), t.tokens_end(i));
        if (t.subtree_body_ok(i) &&
            t.subtree_max_chars(i) - a.base <= static_cast<uint32_t>(a.budget))
          accept(t.subtree_tokens_begin(i), t.subtree_tokens_end(i));
        else
          accept_within(i, a.base, a.budget);
      }
      i = t.skip(i);
      continue;
    }
    const uint32_t d = t.depth(i);
    path_.resize(d + 1);
    at_.resize(d + 1);
    path_[d] = i;
    if (pdepth_ >= d) {  // the parser's newer sets belong to the previous path
      p_.truncate(d);
      pdepth_ = d - 1;
    }
    const int32_t parent = at_[d - 1];
    const bool ex = d >= 2 && (cfg_[parent].ex || cfg_[parent].final);
    const int32_t c = step(parent, d, t.byte(i), /*keep=*/true);
    if (c == kDead) {
      // q's rule could have ended earlier on this path: the context decides these tokens.
      if (ex) {
        for (uint32_t j = i; j < t.skip(i); ++j)
          if (t.tokens_begin(j) != t.tokens_end(j)) out->uncertain.push_back(j);
      }
      i = t.skip(i);
      continue;
    }
    at_[d] = c;
    accept(t.tokens_begin(i), t.tokens_end(i));
    if (t.skip(i) > i + 1 && loops_on(c, d, t.subtree_bytes(i))) {
      accept(t.subtree_tokens_begin(i), t.subtree_tokens_end(i));
      i = t.skip(i);
      continue;
    }
    if (t.skip(i) > i + 1 && (take_body_subtree(i, c, d, *out) || take_class_subtree(i, c, d))) {
      i = t.skip(i);
      continue;
    }
    if (t.skip(i) > i + 1 && t.body_state(i) == StringBodyDfa::kLoop) {
      const int32_t r = anchor_budget(i, c, d);
      if (r >= 0) anchors_.push_back(Anchor{t.skip(i), t.chars(i), r});
    }
    ++i;
  }
  if (num_accepted_ * 32 < t.vocab_size()) {
    for (size_t w = 0; w < bits_.size(); ++w) {
      for (uint32_t m = bits_[w]; m; m &= m - 1)
        out->accepted_ids.push_back(static_cast<int32_t>(w * 32 + __builtin_ctz(m)));
    }
  } else {
    out->accepted_bits = std::move(bits_);
  }
  return out;
}

}  // namespace walk

std::unique_ptr<StateMask> compute_state_mask(const NfaGrammar& g,
                                              const TokenTrie& trie,
                                              uint32_t q) {
  return walk::Walker(g, trie, q).run();
}

}  // namespace di::grammar
