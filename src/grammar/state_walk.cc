// SPDX-License-Identifier: Apache-2.0
#include "grammar/state_walk.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/earley.h"
#include "grammar/string_body.h"
#include "util/check.h"

namespace di::grammar {

namespace {

constexpr int32_t kUnknown = -1;
constexpr int32_t kDead = -2;
// Bounds the transition tables (1 KiB each); configurations past it are walked with the parser.
constexpr size_t kMaxTables = 4096;

struct Config {
  bool final = false;    // the walk's root rule can end here
  bool ex = false;       // ...or could end earlier on this path (after the first byte)
  int32_t table = -1;    // offset of its 256 transitions in trans_, -1: not shared
  ByteSet loops, exits;  // bytes known to map it back to itself / elsewhere
  int8_t body = -1;      // behaves like StringBodyDfa's loop: -1 unknown, 0 no, 1 yes
  // Bytes some item of the configuration can scan (EarleyParser::next_bytes): any other byte is
  // dead without running the parser. Large sets (a root predicting hundreds of alternatives)
  // made each dead probe cost microseconds.
  ByteSet live;
};

// Below this many trie nodes a subtree is cheaper to walk than to prove a string body.
constexpr uint32_t kMinBodySubtree = 64;
// Pairs a string-body proof may visit (the DFA has 8 states; a body needs few more).
constexpr size_t kMaxBodyPairs = 32;

class Walker {
 public:
  Walker(const NfaGrammar& g, const TokenTrie& t, uint32_t q) : g_(g), t_(t), p_(&g) {
    p_.reset(q);
  }
  std::unique_ptr<StateMask> run();

 private:
  int32_t intern(bool ex);
  void replay_to(uint32_t d);
  int32_t step(int32_t parent, uint32_t d, uint8_t b, bool keep);
  bool loops_on(int32_t c, uint32_t d, const ByteSet& bytes);
  int32_t probe(int32_t c, uint32_t d, uint8_t b);
  ByteSet byte_class(uint8_t b) const;
  bool is_string_body(int32_t c, uint32_t d);
  bool bisimulate(int32_t c, int r, uint32_t d);
  std::vector<uint64_t> pairs_;   // pairs of the proof in progress
  std::vector<uint64_t> proven_;  // pairs of finished proofs: bisimilar, no need to explore

  const NfaGrammar& g_;
  const TokenTrie& t_;
  EarleyParser p_;
  std::vector<Config> cfg_;
  std::vector<int32_t> trans_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<uint64_t> key_;
  std::vector<uint32_t> path_;  // path_[d]: trie node at depth d of the current path
  std::vector<int32_t> at_;     // at_[d]: configuration after path_[1..d]
  uint32_t pdepth_ = 0;         // the parser has consumed path_[1..pdepth_]
};

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
    cfg_.push_back(Config{final, ex, -1, {}, {}, -1, p_.next_bytes()});
    return static_cast<int32_t>(cfg_.size() - 1);
  }
  std::sort(key_.begin(), key_.end());
  key_.push_back(uint64_t{final} << 1 | uint64_t{ex});
  std::string k(reinterpret_cast<const char*>(key_.data()), key_.size() * sizeof(uint64_t));
  auto [pos, fresh] = ids_.emplace(std::move(k), static_cast<int32_t>(cfg_.size()));
  if (!fresh) return pos->second;
  cfg_.push_back(
      Config{final, ex, static_cast<int32_t>(trans_.size()), {}, {}, -1, p_.next_bytes()});
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
  ByteSet same;
  for (uint64_t& w : same.words) w = ~uint64_t{0};
  const auto& states = g_.states();
  const auto& edges = g_.byte_edges();
  for (const EarleyItem* it = p_.last_begin(); it != p_.last_end(); ++it) {
    const NfaState& st = states[it->state];
    for (uint32_t e = st.byte_begin; e < st.byte_end; ++e) {
      const ByteSet& set = edges[e].set;
      const bool in = set.test(b);
      for (int w = 0; w < 4; ++w) same.words[w] &= in ? set.words[w] : ~set.words[w];
    }
  }
  return same;
}

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

std::unique_ptr<StateMask> Walker::run() {
  const TokenTrie& t = t_;
  auto out = std::make_unique<StateMask>();
  // Accepted tokens go straight into a bitmap: states inside free text accept nearly the whole
  // vocabulary, and a growing id vector plus a second pass cost more than the walk itself.
  std::vector<uint32_t> bits((t.vocab_size() + 31) / 32, 0);
  size_t num_accepted = 0;
  auto accept = [&](const int32_t* b, const int32_t* e) {
    num_accepted += static_cast<size_t>(e - b);
    for (; b != e; ++b) bits[*b >> 5] |= 1u << (*b & 31);
  };
  // Typical walks build tens of configurations: reserving avoids regrowing (and copying) the
  // transition tables, which showed up as malloc time in profiles.
  cfg_.reserve(64);
  trans_.reserve(64 * 256);
  ids_.reserve(64);
  // The root: never merged with others.
  cfg_.push_back(Config{false, false, 0, {}, {}, -1, p_.next_bytes()});
  trans_.assign(256, kUnknown);
  path_.assign(1, 0);
  at_.assign(1, 0);
  const uint32_t n = static_cast<uint32_t>(t.num_nodes());
  uint32_t i = 1;
  while (i < n) {
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
    const ByteSet& below = t.subtree_bytes(i);
    // A proof is cached per configuration, so once proven it pays off for small subtrees too.
    if ((t.skip(i) > i + kMinBodySubtree || cfg_[c].body == 1) &&
        t.body_state(i) == StringBodyDfa::kLoop && !below.test('"') && !below.test('\\') &&
        is_string_body(c, d)) {
      // The path so far ends between characters, so a token below is accepted iff its whole
      // byte string is a string-body prefix (the DFA is deterministic).
      if (t.subtree_body_ok(i)) {  // every token below is one: take the contiguous run
        accept(t.subtree_tokens_begin(i), t.subtree_tokens_end(i));
        i = t.skip(i);
        continue;
      }
      for (uint32_t j = i + 1; j < t.skip(i); ++j) {
        if (t.tokens_begin(j) == t.tokens_end(j)) continue;
        if (t.body_state(j) != StringBodyDfa::kDead)
          accept(t.tokens_begin(j), t.tokens_end(j));
        else if (cfg_[c].ex)
          out->uncertain.push_back(j);
      }
      i = t.skip(i);
      continue;
    }
    ++i;
  }
  if (num_accepted * 32 < t.vocab_size()) {
    for (size_t w = 0; w < bits.size(); ++w) {
      for (uint32_t m = bits[w]; m; m &= m - 1)
        out->accepted_ids.push_back(static_cast<int32_t>(w * 32 + __builtin_ctz(m)));
    }
  } else {
    out->accepted_bits = std::move(bits);
  }
  return out;
}

}  // namespace

std::unique_ptr<StateMask> compute_state_mask(const NfaGrammar& g,
                                              const TokenTrie& trie,
                                              uint32_t q) {
  return Walker(g, trie, q).run();
}

}  // namespace di::grammar
