// SPDX-License-Identifier: Apache-2.0
// Earley recognizer over bytes for an NfaGrammar. Sets are kept as a stack: push_byte() adds one
// set, pop() removes sets, which gives token rollback (speculative decoding) and the push/pop
// walk the mask computation does over the token trie, for free.
//
// Items are (NFA state, origin set). The root item has origin kRootOrigin; when it reaches a
// final state the input so far is a complete sentence of the root (or, for the per-state mask
// cache, the rule the walk started in has ended and the rest depends on context).
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/nfa.h"

namespace di::grammar {

inline constexpr uint32_t kRootOrigin = 0xFFFFFFFFu;

struct EarleyItem {
  uint32_t state;
  uint32_t origin;
};

class EarleyParser {
 public:
  explicit EarleyParser(const NfaGrammar* g);

  // Starts over with one root item at `state` (normally the root rule's start state).
  void reset(uint32_t state);
  // Scans one byte. Returns false and leaves the parser unchanged when no item accepts it.
  bool push_byte(uint8_t b);
  // Removes the newest `n` sets (never the initial set).
  void pop(size_t n = 1);
  void truncate(size_t num_sets) { pop(this->num_sets() - num_sets); }
  size_t num_sets() const { return set_begin_.size(); }
  // True when the root item is final in set `i`.
  bool root_final(size_t i) const { return root_final_[i]; }
  bool accepting() const { return root_final_.back() != 0; }
  // Items of the newest set.
  const EarleyItem* last_begin() const { return items_.data() + set_begin_.back(); }
  const EarleyItem* last_end() const { return items_.data() + items_.size(); }
  // Union of the bytes some item of the newest set can scan.
  ByteSet next_bytes() const;

  // Token terminals (nfa.h TokenEdge). The items that one whole token `id` advances from the
  // newest set: `<[id]>` edges, and `!<[x]>` edges with x != id when `text` (id is a text
  // token, the only kind a negation admits). Appended to `out`.
  void token_step(int32_t id, bool text, std::vector<EarleyItem>& out) const;
  // Adds `items` (from token_step) as a new set, or to the newest set (a token both read as
  // bytes and matched as a terminal ends in one set), then closes it.
  void push_items(const std::vector<EarleyItem>& items);
  void add_to_last(const std::vector<EarleyItem>& items);
  // Whether some item of the newest set sits on a token terminal.
  bool last_has_token_edges() const;

 private:
  void add(uint32_t state, uint32_t origin);
  void close_last_set(size_t from);
  void close_last_set() { close_last_set(set_begin_.back()); }

  const NfaGrammar* g_;
  std::vector<EarleyItem> items_;
  std::vector<uint32_t> set_begin_;
  std::vector<uint8_t> root_final_;
  // Dedup of the set being built: a linear scan while it is small (the common case), then an
  // open-addressing table of (state, origin) keys. O(set size) memory, never O(grammar size),
  // so parsers stay cheap to create for large grammars.
  std::vector<uint64_t> table_;
  size_t table_used_ = 0;
  bool table_active_ = false;
  void start_set() { table_active_ = false; }
};

}  // namespace di::grammar
