// SPDX-License-Identifier: Apache-2.0
// The NFA form of a Grammar: one epsilon-free NFA per rule over bytes, with "call" edges to
// other rules. The Earley matcher (earley.h) walks these NFAs; states are numbered globally so a
// parser item is just (state, origin). Immutable after compile, shared between matchers.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/byte_set.h"
#include "grammar/ir.h"
#include "util/status.h"

namespace di::grammar {

struct ByteEdge {
  ByteSet set;
  uint32_t target;
};

struct RefEdge {
  RuleId rule;
  uint32_t target;
};

// A token terminal: consumes one whole token, never bytes (ir.h kToken). A negated one takes
// any text token outside NfaGrammar::excluded_tokens()[excl_begin, excl_end).
struct TokenEdge {
  int32_t token;
  bool negated;
  uint32_t target;
  uint32_t excl_begin = 0, excl_end = 0;
  bool operator==(const TokenEdge&) const = default;
};

struct NfaState {
  RuleId rule = -1;
  bool final = false;
  uint32_t byte_begin = 0, byte_end = 0;    // into byte_edges
  uint32_t ref_begin = 0, ref_end = 0;      // into ref_edges
  uint32_t token_begin = 0, token_end = 0;  // into token_edges
};

struct CompileLimits {
  size_t max_states = 2'000'000;
  // Absolute deadline; front ends and the NFA builder check it and fail with kResourceExhausted.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

// Throws nothing; the deadline/size checks become Status.
class NfaGrammar {
 public:
  static Expected<std::shared_ptr<const NfaGrammar>> build(const Grammar& g,
                                                           const CompileLimits& limits = {});

  const std::vector<NfaState>& states() const { return states_; }
  const std::vector<ByteEdge>& byte_edges() const { return byte_edges_; }
  const std::vector<RefEdge>& ref_edges() const { return ref_edges_; }
  const std::vector<TokenEdge>& token_edges() const { return token_edges_; }
  // Lets byte-only grammars (all of JSON Schema and regex) skip every token-terminal check.
  bool has_token_edges() const { return !token_edges_.empty(); }
  // A negated edge's excluded ids, sorted.
  std::span<const int32_t> excluded(const TokenEdge& e) const {
    return {excluded_tokens_.data() + e.excl_begin, e.excl_end - e.excl_begin};
  }
  bool excludes(const TokenEdge& e, int32_t id) const {
    auto x = excluded(e);
    return std::binary_search(x.begin(), x.end(), id);
  }
  uint32_t rule_start(RuleId r) const { return rule_start_[r]; }
  bool nullable(RuleId r) const { return nullable_[r]; }
  RuleId root() const { return root_; }
  const std::string& rule_name(RuleId r) const { return rule_names_[r]; }
  size_t num_rules() const { return rule_start_.size(); }

  // Bounded free text (TagDispatch max_chars, nfa.cc build_bounded_text) has one state per
  // (automaton node, count); a state far from the bound accepts the same tokens as its node's
  // state of the smallest count (its twin): both may read any token whole. `budget`: code
  // points the state may still read before the bound (the twin's: twin_budget). The compiled
  // grammar shares their masks when both budgets cover the vocabulary's longest token.
  struct MaskTwin {
    uint32_t twin;
    int64_t budget, twin_budget;
  };
  const MaskTwin* mask_twin(uint32_t q) const {
    auto it = twins_.find(q);
    return it == twins_.end() ? nullptr : &it->second;
  }
  bool has_mask_twins() const { return !twins_.empty(); }

 private:
  friend class NfaBuilder;
  friend struct NfaPasses;
  std::vector<NfaState> states_;
  std::vector<ByteEdge> byte_edges_;
  std::vector<RefEdge> ref_edges_;
  std::vector<TokenEdge> token_edges_;
  std::vector<int32_t> excluded_tokens_;  // TokenEdge::excl_begin/excl_end
  std::vector<uint32_t> rule_start_;
  std::vector<bool> nullable_;
  std::vector<std::string> rule_names_;
  RuleId root_ = -1;
  std::unordered_map<uint32_t, MaskTwin> twins_;
};

}  // namespace di::grammar
