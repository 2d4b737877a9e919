// SPDX-License-Identifier: Apache-2.0
// Internal to the mask walk (state_walk.h): the walker over the token trie, split over
// state_walk.cc (configurations, transitions, the trie walk) and body_proof.cc (proofs that a
// configuration behaves like a JSON string body, unbounded or with a character budget, which
// let the walk take whole trie subtrees from per-node tables).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/byte_set.h"
#include "grammar/earley.h"
#include "grammar/nfa.h"
#include "grammar/vocabulary.h"

namespace di::grammar {

struct StateMask;

namespace walk {

inline constexpr int32_t kUnknown = -1;
inline constexpr int32_t kDead = -2;
// Bounds the transition tables (1 KiB each); configurations past it are walked with the parser.
inline constexpr size_t kMaxTables = 4096;
// Below this many trie nodes a subtree is cheaper to walk than to prove a string body.
inline constexpr uint32_t kMinBodySubtree = 64;
// Pairs a string-body proof may visit (the DFA has 8 states; a body needs few more).
inline constexpr size_t kMaxBodyPairs = 32;
inline constexpr int32_t kBudgetUnknown = -2;
inline constexpr int32_t kNotCounted = -1;
inline constexpr int8_t kMidUnknown = -2;
inline constexpr int8_t kMidNo = -1;

struct Config {
  bool final = false;    // the walk's root rule can end here
  bool ex = false;       // ...or could end earlier on this path (after the first byte)
  int32_t table = -1;    // offset of its 256 transitions in trans_, -1: not shared
  ByteSet loops, exits;  // bytes known to map it back to itself / elsewhere
  int8_t body = -1;      // behaves like StringBodyDfa's loop: -1 unknown, 0 no, 1 yes
  int8_t body_mid = -2;  // StringBodyDfa state (inside a character) it behaves like, or below
  // Bounded body (a maxLength string): from here the configuration accepts exactly the
  // string-body byte strings of at most `budget` characters (on every byte but '"' and '\\');
  // kNotCounted: it does not, kBudgetUnknown: not tried yet.
  int32_t budget = kBudgetUnknown;
  // Class run (a regex class repeated, e.g. [a-z0-9]{1,50}): every byte of run_class (ASCII)
  // moves it along a chain of run_budget more such steps (INT32_MAX: no bound), any other
  // byte sequence is decided by the walk. Same encoding as budget.
  int32_t run_budget = kBudgetUnknown;
  ByteSet run_class;
  // Bytes some item of the configuration can scan (EarleyParser::next_bytes): any other byte is
  // dead without running the parser. Large sets (a root predicting hundreds of alternatives)
  // made each dead probe cost microseconds.
  ByteSet live;
};

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
  // Takes the subtree below trie node i (configuration c at depth d) from the trie's string-body
  // tables when c is proven to be a (bounded) string body; false: walk it.
  bool take_body_subtree(uint32_t i, int32_t c, uint32_t d, StateMask& out);
  int32_t root_body_budget();
  bool take_class_subtree(uint32_t i, int32_t c, uint32_t d);
  int32_t class_budget(int32_t c, uint32_t d);
  // Accepts the body-prefix tokens strictly below trie node i with at most `base` + r
  // characters (bytes, for ASCII).
  void accept_within(uint32_t i, uint32_t base, int32_t r);
  int32_t anchor_budget(uint32_t i, int32_t c, uint32_t d);
  // Trie nodes below which the configuration is a string body (anchor_budget): their
  // quote-free subtrees are decided from the trie's tables without the parser.
  struct Anchor {
    uint32_t end;   // first node after the subtree
    uint32_t base;  // characters on the path to the anchor
    int32_t budget;
  };
  std::vector<Anchor> anchors_;
  // body_proof.cc
  bool is_string_body(int32_t c, uint32_t d);
  bool is_body_state(int32_t c, int r, uint32_t d);
  void mark_proven();
  bool bisimulate(int32_t c, int r, uint32_t d);
  int32_t chain_budget(int32_t c, uint32_t d);
  bool body_char_rule(RuleId r);
  bool char_dfs(EarleyParser& p, int r, int depth);
  ByteSet byte_class_of(const EarleyParser& p, uint8_t b) const;

  void accept(const int32_t* b, const int32_t* e) {
    num_accepted_ += static_cast<size_t>(e - b);
    for (; b != e; ++b) bits_[*b >> 5] |= 1u << (*b & 31);
  }

  std::vector<uint64_t> pairs_;   // pairs of the proof in progress
  std::vector<uint64_t> proven_;  // pairs of finished proofs: bisimilar, no need to explore
  std::unordered_map<uint32_t, int32_t> chain_memo_;  // chain state -> budget
  std::unordered_map<RuleId, bool> char_rule_memo_;   // reads one body character

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
  std::vector<uint32_t> bits_;  // accepted tokens
  size_t num_accepted_ = 0;
};

}  // namespace walk
}  // namespace di::grammar
